"""The protobuf messages of an XPlane capture, as dataclasses whose fields
declare their numbers and types: the one field table the decoders are
written from (:mod:`.decoders`), read by :func:`read_space` and
:func:`read_hlo_proto`.

The numbers are those of the published ``.proto`` files: an ``XSpace``
(tsl/profiler/protobuf/xplane.proto, package tensorflow.profiler) and the
``HloProto`` of a compiled module (xla/service/hlo.proto, package xla).
Only the fields the trace reads are declared, and ``XPlane.id``, whose
wire type tells a StepStats from an XSpace (:mod:`.trace`); the others are
skipped, as are fields newer profilers add.

The profiler of TensorFlow 2 and JAX saves one XSpace per host: planes
(``/host:CPU``, ``/device:GPU:0``, ``/host:metadata``, ``Task
Environment``...), each with lines (a thread, a GPU stream), each with
events; an event's name and its constant stats live once in the plane's
``event_metadata`` (by id), and every stat names its kind by an id into the
plane's ``stat_metadata``. A stat's ``ref_value`` is the id of a stat
metadata whose *name* is the value: how the profiler stores repeated
strings such as ``hlo_op`` once. JAX (and TF with XLA) put the optimized
HLO of every compiled module on the ``/host:metadata`` plane, one event
metadata per module with a stat ``Hlo Proto`` (bytes).

Nothing is interpreted here; :mod:`.trace` decides what becomes what.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tracegraph.ingest.formats.xplane.decoders import compile_messages, number, oneof
from tracegraph.ingest.formats.xplane.wire import Malformed

# A stat's value as the file gives it (ref values resolved by the plane).
Value = int | float | str | bytes | None
# XStat's ``value`` member that holds a stat metadata id; XEvent's ``data``
# member that makes an event aggregated (a count instead of a time).
REF_VALUE = 7
NUM_OCCURRENCES = 5

# --- xplane.proto -------------------------------------------------------------------------------


@dataclass(slots=True)
class XStat:
    """A named value of an event or a plane: its kind is a stat metadata id."""

    metadata_id: int = number(1, "int64")
    value: Value = oneof(
        None,
        double_value=(2, "double"),
        uint64_value=(3, "uint64"),
        int64_value=(4, "int64"),
        str_value=(5, "string"),
        bytes_value=(6, "bytes"),
        ref_value=(REF_VALUE, "uint64"),
    )
    value_field: int = 0

    @property
    def ref(self) -> bool:
        """Whether ``value`` is a stat metadata id whose name is the stat's value."""
        return self.value_field == REF_VALUE


@dataclass(slots=True)
class XEvent:
    """Something that happened on a line, named by its event metadata:
    a start and duration, or (aggregated) a number of occurrences."""

    stats: list[XStat] = number(4, XStat, repeated=True)
    metadata_id: int = number(1, "int64")
    data: int = oneof(0, offset_ps=(2, "int64"), num_occurrences=(NUM_OCCURRENCES, "int64"))
    data_field: int = 0
    duration_ps: int = number(3, "int64")

    @property
    def offset_ps(self) -> int:
        """From its line's ``timestamp_ns`` (0 for an aggregated event)."""
        return 0 if self.data_field == NUM_OCCURRENCES else self.data

    @property
    def aggregated(self) -> bool:
        """An aggregated event: a number of occurrences instead of a time of its own."""
        return self.data_field == NUM_OCCURRENCES


@dataclass(slots=True)
class XLine:
    """A thread of a host plane or a stream of a device plane, with its events."""

    id: int = number(1, "int64")
    name: str = number(2, "string")
    timestamp_ns: int = number(3, "int64")
    events: list[XEvent] = number(4, XEvent, repeated=True)


@dataclass(slots=True)
class XEventMetadata:
    """What the events of one id share: the name (``node:type`` for a TF
    op, whose ``display_name`` is the type) and constant stats."""

    name: str = number(2, "string")
    display_name: str = number(4, "string")
    stats: list[XStat] = number(5, XStat, repeated=True)


@dataclass(slots=True)
class XStatMetadata:
    """A stat kind: its name (``hlo_op``, ``step_num``...)."""

    name: str = number(2, "string")


@dataclass(slots=True)
class XPlane:
    """A host or a device (``/host:CPU``, ``/device:GPU:0``) or a table of
    facts (``/host:metadata``, ``Task Environment``)."""

    id: int = number(1, "int64")
    name: str = number(2, "string")
    lines: list[XLine] = number(3, XLine, repeated=True)
    event_metadata: dict[int, XEventMetadata] = number(4, XEventMetadata, key="int64")
    stat_metadata: dict[int, XStatMetadata] = number(5, XStatMetadata, key="int64")
    stats: list[XStat] = number(6, XStat, repeated=True)

    def stat_name(self, metadata_id: int) -> str:
        """The name of a stat kind (Malformed when the plane lacks it)."""
        md = self.stat_metadata.get(metadata_id)
        if md is None:
            raise Malformed(f"a stat refers to stat metadata {metadata_id}, which its plane does not define")
        return md.name

    def values(self, stats: list[XStat]) -> dict[str, Value]:
        """Stats by name, ref values resolved to their names (a name given
        twice keeps the last value)."""
        out: dict[str, Value] = {}
        for s in stats:
            value = s.value
            if s.value_field == REF_VALUE:
                assert isinstance(value, int)
                value = self.stat_name(value)
            out[self.stat_name(s.metadata_id)] = value
        return out


@dataclass(slots=True)
class XSpace:
    """A capture: one host's planes."""

    planes: list[XPlane] = number(1, XPlane, repeated=True)
    errors: list[str] = number(2, "string", repeated=True)
    warnings: list[str] = number(3, "string", repeated=True)
    hostnames: list[str] = number(4, "string", repeated=True)


# --- hlo.proto ----------------------------------------------------------------------------------


@dataclass(slots=True)
class OpMetadata:
    """Where an instruction came from in the framework."""

    op_type: str = number(1, "string")
    op_name: str = number(2, "string")  # the framework op it came from (``jit(f)/jvp()/dot_general``)


@dataclass(slots=True)
class HloInstructionProto:
    """One instruction of a computation; its operands and control
    predecessors are instructions of the same computation."""

    name: str = number(1, "string")
    opcode: str = number(2, "string")
    metadata: OpMetadata | None = number(7, OpMetadata)
    parameter_number: int = number(9, "int64")
    fusion_kind: str = number(11, "string")
    tuple_index: int = number(13, "int64")
    id: int = number(35, "int64")
    operand_ids: list[int] = number(36, "int64", repeated=True)
    control_predecessor_ids: list[int] = number(37, "int64", repeated=True)
    called_computation_ids: list[int] = number(38, "int64", repeated=True)  # a while's: body, then condition
    # not in the file: the id of the computation holding it (set by hlo.Module)
    computation: int = field(default=0, init=False)

    @property
    def op_name(self) -> str:
        return self.metadata.op_name if self.metadata is not None else ""

    @property
    def op_type(self) -> str:
        return self.metadata.op_type if self.metadata is not None else ""


@dataclass(slots=True)
class HloComputationProto:
    """A computation: the entry one, a loop's body, a fusion's..."""

    name: str = number(1, "string")
    instructions: list[HloInstructionProto] = number(2, HloInstructionProto, repeated=True)
    id: int = number(5, "int64")
    root_id: int = number(6, "int64")


@dataclass(slots=True)
class HloModuleProto:
    """A compiled module."""

    name: str = number(1, "string")
    computations: list[HloComputationProto] = number(3, HloComputationProto, repeated=True)


@dataclass(slots=True)
class HloProto:
    """What a ``Hlo Proto`` stat holds."""

    hlo_module: HloModuleProto | None = number(1, HloModuleProto)


_DECODERS = compile_messages(XSpace, HloProto)


def read_space(buf: bytes) -> XSpace:
    """The XSpace encoded in ``buf`` (Malformed saying where it is not one)."""
    space: XSpace = _DECODERS[XSpace](buf, 0, len(buf))
    return space


def read_hlo_proto(buf: bytes) -> HloModuleProto:
    """The module of a serialized ``HloProto`` (Malformed when it is not one)."""
    proto: HloProto = _DECODERS[HloProto](buf, 0, len(buf))
    return proto.hlo_module or HloModuleProto()
