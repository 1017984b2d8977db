"""TensorFlow 2 and JAX profiler captures (``xplane``): the XPlane protobuf
(an ``XSpace``) that ``tf.profiler.experimental.start/stop``, the Keras
TensorBoard callback's ``profile_batch`` and ``jax.profiler.trace`` write
as ``<logdir>/plugins/profile/<run>/<host>.xplane.pb`` (plain, or gzipped).

The protobuf is decoded by :mod:`.wire`, :mod:`.xspace` and :mod:`.hlo`
(no TensorFlow, JAX or xprof needed; :mod:`.wire` says why). Detected by
content: the head decodes as an XSpace whose first plane is named like a
profiler plane (``/host:CPU``, ``/device:GPU:0``, ``Task Environment``...),
gzipped or not. A binary StepStats or RunMetadata also starts with byte
0x0a but its first field's first field is a string (a device name), where
an XPlane's is its id (a varint) or its name: so neither is taken for the
other.

What becomes what:

* Devices: the host plane ``/host:CPU`` is one CPU device (``dev:/host:CPU``);
  every ``/device:*`` plane (GPU, TPU) is a device of the kind its name says.
* Framework: ``jax`` when the ``/host:metadata`` plane has a
  ``jax_version`` stat, or when the capture has HLO ops but no TF ops; else
  ``tensorflow`` (also for a TF program compiled with XLA).
* Threads: each line of ``/host:CPU`` is a thread (line id = thread id);
  ``Op.thread`` is the line's name (``tf_Compute/2875647937950081134``,
  ``python``), with `` (<id>)`` added when two lines share a name.
* TF ops: an event on any line of ``/host:CPU`` whose event metadata has a
  non-empty ``display_name`` D and a ``name`` ``<node>:D`` (the executor's
  ``node:type`` TraceMe): op name ``<node>``, type D, phase from
  :func:`tracegraph.ingest.formats.tf.names.phase_of` (name and type). The
  profiler's own events (``ThreadpoolListener::*``, ``ExecutorState::Process``,
  ``EagerLocalExecute: X``, ``FunctionRun``...) have no display name and are
  not ops. ``attrs.iter_num`` is the ``iter_num`` of the
  ``ExecutorState::Process`` event around the op on its line (the loop
  iteration in a ``tf.while_loop`` frame, 0 outside loops).
* HLO ops (JAX, TF with XLA): an event on ``/host:CPU`` carrying an
  ``hlo_op`` stat (the ``end: X`` events beside them carry none): op name =
  ``hlo_op``; type = the ``opcode`` of that instruction in the module's HLO
  (``fusion``, ``dot``, ``copy``, ``while``...) when the module named by
  ``hlo_module`` (with its ``program_id``) has an ``Hlo Proto`` on
  ``/host:metadata``, else the name without a ``.N`` suffix. ``attrs``:
  ``hlo_module``, ``program_id``, ``run_id``, and from the HLO
  ``computation``, ``fusion_kind``, ``op_name`` (the framework op it came
  from, e.g. ``jit(train_step)/jvp()/dot_general``) and ``op_type``.
  Phase is None (HLO names say nothing about forward or backward).
* Steps: an event on a host line with an integer ``step_num`` stat (TF's
  ``tf.profiler.experimental.Trace("train", step_num=i)`` and Keras's
  ``train`` steps, JAX's ``StepTraceAnnotation``) marks a step; it is not
  an op (it only frames the work, which runs on other threads, so as an op
  it would outweigh everything). Every op (and kernel op)
  that *starts* inside a step's interval ``[start, end)`` has
  ``attrs.step`` = its step_num (the innermost, latest-starting step when
  several hold it); ops starting outside every step have none (work JAX
  dispatches asynchronously may run after its step's marker ends).
  ``meta_steps`` lists the steps (JSON: step, name, duration, ops).
* Nesting: on each line, an op whose interval holds another's
  start is that op's ``parent`` (innermost; sorted by start, longer first,
  then line order), so an op's weight is its self time: a JAX ``while``
  holding the ops of its body (``lax.scan``) weighs only its own overhead.
* Device planes (GPU): events on lines named ``Stream ...`` are Kernels on
  Stream ``s:<plane>/<line id>`` (kind ``memcpy`` / ``memset`` from the name
  or a ``memcpy_details`` stat, with the ``size:N`` bytes given there;
  ``communication`` for the kit's communication kernels,
  :func:`~tracegraph.ingest.formats.kit.is_communication_kernel`; else ``compute``). A kernel's op is
  the op that launched it where the file says: the event with the same
  ``correlation_id`` on a host plane (``/host:CUPTI``'s runtime calls) gives
  the thread and time of the launch, and the innermost op of that thread
  (line id) around that time launched it; else the latest op started by
  then named by the kernel's ``tf_op`` (``node:type``) or ``hlo_op``
  (same ``hlo_module``) stat. A kernel linked to neither is an op of its
  own on the device (named by those stats, else by the kernel; attrs
  ``from_kernel``), so its time is counted. Other lines of device planes
  (``XLA Ops``, ``Steps``... which the profiler derives from the streams;
  a TPU's lines) are not read: ``meta_skipped_device_lines`` names them.
  The CPU captures in tests/data/xplane have no device planes; this part
  is checked against hand-built captures only.
* Not read: memory (allocator) events, the ``/host:python-tracer`` and
  other host planes' events (``/host:CUPTI`` only for the launch join),
  aggregated events (``num_occurrences`` instead of a time; counted),
  event metadata's ``metadata`` bytes and children.

Dependencies. TF captures record no inputs: no dependencies
(``meta_dependencies`` says so). For HLO ops the module's HLO gives them,
by this rule:

    Within one module execution (the HLO op events of one ``run_id`` of one
    ``hlo_module`` and ``program_id``), each op event E of instruction I
    gets DATA edges for the operands of I. Each operand is walked back to
    the values it is made of and, for each value (a *slot*: an operand
    that is a tuple holds one per element), to the instructions with
    events that may have produced it (:func:`.hlo.producers`): parameter,
    constant, tuple, get-tuple-element, bitcast and any other instruction
    without events in the capture are walked through to what feeds them,
    get-tuple-element picking its tuple element; a parameter of a called
    computation maps to the caller's operand, and for a while body or
    condition either to the while's operand (the first iteration) or to
    the body root's (the previous iteration's result). For each slot, of
    the events of its producers in the same execution that ended at or
    before E started and come before E in execution order (seq), the one
    that ended last is the source of one DATA edge to E. Control
    predecessors of I give CONTROL edges the same way. So a while op
    depends on what feeds each element of its operand; the first
    iteration of its body on what fed the loop, later iterations on the
    previous iteration's results. A slot with no such earlier event (an
    input of the program, a producer outside the capture) gives no edge.

Sources end before their targets start, so the dependencies have no cycle.
HLO ops (their ``carries_deps`` is set) make the dependency DAG.

Times: integer picoseconds while parsing (event start =
``line.timestamp_ns * 1000 + offset_ps``, end = start + ``duration_ps``),
then float microseconds since the earliest op, kernel or step start:
``(t - origin) / 1e6`` and durations ``(end -
start) / 1e6``, each the double nearest to the exact number of
microseconds (the picosecond integer converts to a double exactly below
2**53 ps, about 2.5 hours). So ``round(us * 1e6)`` gives the picoseconds
back, and a whole-nanosecond time (all the profiler writes on CPU) prints
exactly with 3 decimals. ``meta_time_origin_ps`` is the origin, on the
file's clock: the saved line timestamps are relative to the capture's
start, ``meta_profile_start_time`` (epoch ns, ``Task Environment``).

Meta (``meta_*`` on the Trace node): ``planes`` (names, JSON),
``event_counts`` (JSON: events read, TF / HLO ops, steps, kernels, ops made
for kernels, host events and aggregated events skipped), ``hostnames``,
``profile_start_time`` / ``profile_stop_time``, the ``*_version`` stats of
``/host:metadata`` (``jax_version``, ``jaxlib_version``), ``hlo_modules``,
``steps``, ``dependencies`` (where they came from, or why there are none),
``skipped_device_lines``, ``profiler_errors`` / ``profiler_warnings`` (the
XSpace's own), ``time_origin_ps``.

Errors (one line naming the file and the field, e.g. ``XSpace.planes[1].
lines[0].events[17]``): a truncated or foreign protobuf (a field past its
message's end, a known field of another wire type, text that is not UTF-8,
an event naming event or stat metadata its plane lacks), a negative
duration, a capture with no profiler plane, or with nothing to read (no
op, step or kernel); gzip errors; the size limit (on the decompressed
protobuf for .gz).
"""

from __future__ import annotations

import bisect
import json
import math
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracegraph.errors import InputError, TooLarge, first_line
from tracegraph.ingest import source
from tracegraph.ingest.formats import kit
from tracegraph.ingest.formats.kit import FormatInfo, FramesBuilder, Joins, Kind, Role
from tracegraph.ingest.formats.tf.names import phase_of
from tracegraph.ingest.formats.xplane.hlo import Instruction, Module, Slots, producers, read_hlo_proto
from tracegraph.ingest.formats.xplane.wire import Malformed, fields, varint
from tracegraph.ingest.formats.xplane.xspace import Value, XEvent, XLine, XPlane, XSpace, read_space
from tracegraph.ingest.frames import TraceFrames
from tracegraph.ingest.limits import MAX_FILE_BYTES, human

FORMAT = FormatInfo(
    "xplane", "tensorflow", Joins.ALONE, "TensorFlow 2 / JAX profiler capture (XPlane protobuf, .xplane.pb)"
)
NAME = FORMAT.name


MAX_BYTES = MAX_FILE_BYTES[NAME]
HOST_PLANE = "/host:CPU"
METADATA_PLANE = "/host:metadata"
TASK_PLANE = "Task Environment"
# An XSpace's first byte: one of its fields 1-4 (planes, errors, warnings,
# hostnames), all length-delimited.
_XSPACE_TAGS = (0x0A, 0x12, 0x1A, 0x22)
_CHUNK = 64 << 20  # decompressed bytes per zlib call
_SUFFIX = re.compile(r"\.\d+\Z")
_SIZE = re.compile(r"\bsize:(\d+)")
_DIRECTION = re.compile(r"(HtoD|DtoH|DtoD|HtoH|PtoP|H2D|D2H|D2D|H2H|P2P)")
_attrs_json = json.JSONEncoder(default=str, sort_keys=True).encode
# The stats that make a host event an op or a step, or give an op's iteration.
_HOST_STATS = frozenset({"hlo_op", "step_num", "iter_num"})


# --- detection and reading -------------------------------------------------------------------


def sniff(head: bytes) -> bool:
    """An XSpace (gzipped or not) whose first plane has the fields of an
    XPlane (an id varint, then its name) and a profiler's plane name:
    ``/host:CPU``, ``/device:GPU:0``... (a ``/``) or ``Task Environment``."""
    data = source.unzipped_head(head)
    if data[:1] != b"\x0a":
        return False
    try:
        size, pos = varint(data, 1, len(data))
        for number, wire, a, b in fields(data, pos, min(pos + size, len(data))):
            if number == 1 and wire == 0:
                continue
            if number == 2 and wire == 2:
                name = data[a:b].decode("utf-8")
                return name.startswith("/") or name == TASK_PLANE
            return False
    except (Malformed, UnicodeDecodeError):
        return False
    return False


def read_bytes(path: Path) -> bytes:
    """The file's protobuf bytes, gunzipped when it starts with the gzip
    magic; refused unread when its first byte cannot start an XSpace, and
    past the size limit (decompressed, for gzip)."""
    source.check_size(path, NAME)
    head = source.head(path)
    if not head:
        raise InputError(path, "empty file")
    data = _gunzip(path, source.read_bytes(path, NAME)) if head.startswith(source.GZIP_MAGIC) else None
    first = (data if data is not None else head)[:1]
    if not first:
        raise InputError(path, "empty protobuf (gzip of nothing)")
    if first[0] not in _XSPACE_TAGS:
        raise InputError(
            path, f"not an XPlane capture: an XSpace protobuf starts with byte 0x0a (its planes), not 0x{first[0]:02x}"
        )
    return data if data is not None else source.read_bytes(path, NAME)


def _gunzip(path: Path, raw: bytes) -> bytes:
    """Every gzip member of ``raw``, decompressed, within the size limit."""
    out = bytearray()
    rest = memoryview(raw)
    try:
        while True:
            d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
            pending: bytes | memoryview = rest
            while True:
                piece = d.decompress(pending, _CHUNK)
                out += piece
                if len(out) > MAX_BYTES:
                    raise TooLarge(path, f"more than the {NAME} size limit of {human(MAX_BYTES)} (decompressed)")
                pending = d.unconsumed_tail
                if d.eof or (not pending and len(piece) < _CHUNK):
                    break
            if not d.eof:
                raise InputError(path, "gzip stream ends early (truncated file)")
            rest = memoryview(d.unused_data)
            if not bytes(rest).strip(b"\0"):
                return bytes(out)
    except zlib.error as e:
        raise InputError(path, f"not a valid gzip file: {first_line(e)}") from None


def parse(path: Path) -> TraceFrames:
    """One capture as frames (rules in the module docstring)."""
    path = Path(path)
    data = read_bytes(path)
    try:
        space = read_space(data)
    except Malformed as e:
        raise _malformed(path, e, "XSpace") from None
    return _Assemble(path, space).frames()


def _malformed(path: Path, e: Malformed, root: str) -> InputError:
    where = ".".join([root, *e.path])
    if e.offset is not None:
        where += f", byte {e.offset:,}"
    return InputError(path, f"not a readable XPlane capture: {e.what}", where)


# --- assembling the frames -------------------------------------------------------------------


@dataclass(slots=True)
class _Op:
    """An op as found, times in integer picoseconds."""

    uid: str
    name: str
    type: str
    device: str
    start: int
    end: int
    order: tuple[int, int, int]  # (plane, line, event) index: the tie-break after times
    role: Role = Role.OP
    thread: str | None = None
    line: tuple[int, int] | None = None  # (plane, line) of a host op, for nesting
    phase: str | None = None
    attrs: dict[str, Any] = field(default_factory=dict)
    module: tuple[str, int | None] | None = None  # an HLO op's (hlo_module, program_id)
    run: object = None  # an HLO op's run_id
    parent: int | None = None
    seq: int = 0


@dataclass(slots=True)
class _Kernel:
    uid: str
    name: str
    stream: str
    start: int
    end: int
    kind: str
    nbytes: int | None
    direction: str | None
    stats: dict[str, Value]
    device: str
    op: int | None = None


@dataclass(slots=True)
class _Step:
    name: str
    step: int
    start: int
    end: int
    ops: int = 0


class _Assemble:
    """Frames from a decoded XSpace (see the module docstring)."""

    def __init__(self, path: Path, space: XSpace) -> None:
        self.path = path
        self.space = space
        self.ops: list[_Op] = []
        self.kernels: list[_Kernel] = []
        self.steps: list[_Step] = []
        self.counts: dict[str, int] = {
            "events": 0,
            "tf_ops": 0,
            "hlo_ops": 0,
            "steps": 0,
            "kernels": 0,
            "kernel_ops": 0,
            "host_events_skipped": 0,
            "aggregated_events_skipped": 0,
        }
        self.skipped_device_lines: list[str] = []
        self.modules: dict[tuple[str, int | None], Module] = {}
        self.b: FramesBuilder = FramesBuilder(FORMAT.framework, [str(path)])

    # --- helpers ---

    def error(self, what: str, pi: int, li: int | None = None, ei: int | None = None) -> InputError:
        where = f"XSpace.planes[{pi}]"
        if li is not None:
            where += f".lines[{li}]"
        if ei is not None:
            where += f".events[{ei}]"
        return InputError(self.path, what, where)

    def event_stats(
        self, plane: XPlane, ev: XEvent, pi: int, li: int, ei: int, wanted: frozenset[int] | None = None
    ) -> tuple[str, str, dict[str, Value]]:
        """An event's metadata name, display name, and stats (the
        metadata's, then the event's own, by name). With ``wanted`` (stat
        metadata ids), the stats are resolved only when the event has one of
        those (else ``{}``: most host events are read for their name alone);
        every stat's metadata is checked either way."""
        md = plane.event_metadata.get(ev.metadata_id)
        if md is None:
            raise self.error(
                f"an event refers to event metadata {ev.metadata_id}, which its plane does not define", pi, li, ei
            )
        known = plane.stat_metadata
        for st in ev.stats:
            if st.metadata_id not in known or (st.ref and st.value not in known):
                bad = st.metadata_id if st.metadata_id not in known else st.value
                assert isinstance(bad, int)  # a ref is a stat metadata id
                raise self.error(f"a stat refers to stat metadata {bad}, which its plane does not define", pi, li, ei)
        if wanted is not None and not md.stats and not any(st.metadata_id in wanted for st in ev.stats):
            return md.name, md.display_name, {}
        try:
            stats = plane.values(md.stats) if md.stats else {}
            if ev.stats:
                stats.update(plane.values(ev.stats))
        except Malformed as e:
            raise self.error(e.what, pi, li, ei) from None
        return md.name, md.display_name, stats

    # --- the whole capture ---

    def frames(self) -> TraceFrames:
        space = self.space
        planes = space.planes
        if not any(p.name.startswith(("/host:", "/device:")) or p.name == TASK_PLANE for p in planes):
            names = ", ".join(repr(p.name) for p in planes[:5]) or "none"
            raise InputError(self.path, f"not an XPlane capture: no /host: or /device: plane (planes: {names})")
        self._hlo_modules()
        for pi, plane in enumerate(planes):
            if plane.name == HOST_PLANE:
                self._host_plane(pi, plane, self.b.device(plane.name, "CPU"))
        for pi, plane in enumerate(planes):
            if plane.name.startswith("/device:"):
                self._device_plane(pi, plane)
        if not self.ops and not self.kernels:
            raise InputError(
                self.path,
                "nothing to read: no TF op, HLO op, step or device stream events in the capture "
                "(was the program running while the profiler was on?)",
            )
        self._link_kernels()
        framework = self._framework()
        self.b.framework = framework
        self._order()
        self._steps()
        has_deps = self._dependencies()
        return self._build(framework, has_deps)

    def _hlo_modules(self) -> None:
        """The HLO of every module on /host:metadata, by (name, program_id)."""
        for pi, plane in enumerate(self.space.planes):
            if plane.name != METADATA_PLANE:
                continue
            for key, md in plane.event_metadata.items():
                try:
                    stats = plane.values(md.stats)
                except Malformed as e:
                    raise self.error(e.what, pi) from None
                proto = stats.get("Hlo Proto")
                if not isinstance(proto, bytes):
                    continue
                try:
                    module = read_hlo_proto(proto)
                except Malformed as e:
                    root = f"XSpace.planes[{pi}].event_metadata[{key}] Hlo Proto -> HloProto"
                    raise _malformed(self.path, e, root) from None
                program = stats.get("program_id")
                program_id = program if isinstance(program, int) else None
                self.modules.setdefault((module.name, program_id), module)

    def module(self, name: str, program_id: int | None) -> Module | None:
        found = self.modules.get((name, program_id))
        if found is None:
            same = [m for (n, _), m in self.modules.items() if n == name]
            found = same[0] if len(same) == 1 else None
        return found

    def _host_plane(self, pi: int, plane: XPlane, device: str) -> None:
        names: dict[str, int] = {}
        for line in plane.lines:
            names[line.name] = names.get(line.name, 0) + 1
        for li, line in enumerate(plane.lines):
            thread = line.name if names[line.name] == 1 else f"{line.name} ({line.id})"
            self._host_line(pi, li, plane, line, device, thread)

    def _host_line(self, pi: int, li: int, plane: XPlane, line: XLine, device: str, thread: str) -> None:
        base = line.timestamp_ns * 1000
        process: tuple[int, int, Value] | None = None  # the latest ExecutorState::Process: start, end, iter_num
        wanted = frozenset(i for i, m in plane.stat_metadata.items() if m.name in _HOST_STATS)
        for ei, ev in enumerate(line.events):
            self.counts["events"] += 1
            if ev.num_occurrences is not None:
                self.counts["aggregated_events_skipped"] += 1
                continue
            name, display, stats = self.event_stats(plane, ev, pi, li, ei, wanted)
            start = base + ev.offset_ps
            end = start + ev.duration_ps
            at = (pi, li, ei)
            hlo_op = stats.get("hlo_op")
            step = stats.get("step_num")
            if name == "ExecutorState::Process":
                process = (start, end, stats.get("iter_num"))
                self.counts["host_events_skipped"] += 1
            elif isinstance(hlo_op, str) and hlo_op:
                self._negative(ev, at)
                op = self._hlo_op(hlo_op, stats, device, start, end, at)
                op.thread, op.line = thread, (pi, li)
                self.ops.append(op)
                self.counts["hlo_ops"] += 1
            elif isinstance(step, int) and not isinstance(step, bool):
                self._negative(ev, at)
                self.steps.append(_Step(name, step, start, end))
                self.counts["steps"] += 1
            elif display and name.endswith(":" + display) and _node_name(name[: -len(display) - 1]):
                self._negative(ev, at)
                node = name[: -len(display) - 1]
                op = _Op(kit.uid(Kind.OP, *at), node, display, device, start, end, at, phase=phase_of(node, display))
                op.thread, op.line = thread, (pi, li)
                if process is not None and process[0] <= start and end <= process[1] and process[2] is not None:
                    op.attrs["iter_num"] = process[2]
                self.ops.append(op)
                self.counts["tf_ops"] += 1
            else:
                self.counts["host_events_skipped"] += 1

    def _negative(self, ev: XEvent, at: tuple[int, int, int]) -> None:
        if ev.duration_ps < 0:
            raise self.error(f"negative duration ({ev.duration_ps} ps)", *at)

    def _hlo_op(
        self, hlo_op: str, stats: dict[str, Value], device: str, start: int, end: int, at: tuple[int, int, int]
    ) -> _Op:
        """An HLO op (host event, or a device event no host op launched)."""
        module_name = stats.get("hlo_module")
        program = stats.get("program_id")
        program_id = program if isinstance(program, int) else None
        attrs: dict[str, Any] = {"hlo_module": module_name, "program_id": program_id, "run_id": stats.get("run_id")}
        ins = None
        if isinstance(module_name, str):
            module = self.module(module_name, program_id)
            ins = module.by_name.get(hlo_op) if module is not None else None
            if ins is not None and module is not None:
                attrs["computation"] = module.computation_name(ins)
                attrs["fusion_kind"] = ins.fusion_kind or None
                attrs["op_name"] = ins.op_name or None
                attrs["op_type"] = ins.op_type or None
        op_type = ins.opcode if ins is not None and ins.opcode else _SUFFIX.sub("", hlo_op)
        op = _Op(kit.uid(Kind.OP, *at), hlo_op, op_type, device, start, end, at)
        op.attrs = {k: v for k, v in attrs.items() if v is not None and not isinstance(v, bytes)}
        if isinstance(module_name, str):
            op.module = (module_name, program_id)
            op.run = stats.get("run_id")
        return op

    def _device_plane(self, pi: int, plane: XPlane) -> None:
        device = self.b.device(plane.name)
        for li, line in enumerate(plane.lines):
            if not line.name.startswith("Stream"):
                self.skipped_device_lines.append(f"{plane.name} | {line.name}")
                self.counts["events"] += len(line.events)
                continue
            kind = "memcpy" if "memcpy" in line.name.lower() else "compute"
            stream = self.b.stream(device, line.name, kind, key=f"{plane.name}/{line.id}")
            base = line.timestamp_ns * 1000
            for ei, ev in enumerate(line.events):
                self.counts["events"] += 1
                if ev.num_occurrences is not None:
                    self.counts["aggregated_events_skipped"] += 1
                    continue
                self._negative(ev, (pi, li, ei))
                name, _display, stats = self.event_stats(plane, ev, pi, li, ei)
                start = base + ev.offset_ps
                kkind, nbytes, direction = _kernel_kind(name, stats)
                self.kernels.append(
                    _Kernel(
                        kit.uid(Kind.KERNEL, pi, li, ei),
                        name,
                        stream,
                        start,
                        start + ev.duration_ps,
                        kkind,
                        nbytes,
                        direction,
                        stats,
                        device,
                    )
                )
                self.counts["kernels"] += 1

    # --- kernels to ops ---

    def _nesting(self) -> None:
        """Each host op's parent: the innermost op of its line holding its start."""
        by_line: dict[tuple[int, int], list[int]] = {}
        for j, op in enumerate(self.ops):
            if op.line is not None:
                by_line.setdefault(op.line, []).append(j)
        for members in by_line.values():
            members.sort(key=lambda j: (self.ops[j].start, -self.ops[j].end, self.ops[j].order))
            stack: list[int] = []
            for j in members:
                op = self.ops[j]
                while stack and self.ops[stack[-1]].end <= op.start:
                    stack.pop()
                if stack:
                    op.parent = stack[-1]
                if op.end > op.start:
                    stack.append(j)

    def _link_kernels(self) -> None:
        """Each kernel's op (see the module docstring)."""
        self._nesting()
        if not self.kernels:
            return
        launches: dict[object, tuple[int, int]] = {}  # correlation id -> (thread id, launch time)
        for plane in self.space.planes:
            if plane.name.startswith("/device:") or plane.name == METADATA_PLANE:
                continue
            corr_ids = {i for i, m in plane.stat_metadata.items() if m.name == "correlation_id"}
            if not corr_ids:
                continue
            for line in plane.lines:
                base = line.timestamp_ns * 1000
                for ev in line.events:
                    for s in ev.stats:
                        if s.metadata_id in corr_ids and not s.ref:
                            launches[s.value] = (line.id, base + ev.offset_ps)
        # host ops by thread id, in start order, for the innermost op around a time
        threads: dict[int, list[int]] = {}
        for j, op in enumerate(self.ops):
            if op.line is not None:
                tid = self.space.planes[op.line[0]].lines[op.line[1]].id
                threads.setdefault(tid, []).append(j)
        for members in threads.values():
            members.sort(key=lambda j: (self.ops[j].start, -self.ops[j].end, self.ops[j].order))
        starts = {tid: [self.ops[j].start for j in m] for tid, m in threads.items()}
        by_name: dict[str, list[int]] = {}
        for j, op in enumerate(self.ops):
            if op.role is Role.OP:
                by_name.setdefault(op.name, []).append(j)
        for members in by_name.values():
            members.sort(key=lambda j: self.ops[j].start)
        name_starts = {n: [self.ops[j].start for j in m] for n, m in by_name.items()}
        for k in self.kernels:
            k.op = self._launcher(k, launches, threads, starts, by_name, name_starts)
        for k in self.kernels:
            if k.op is None:
                k.op = self._kernel_op(k)

    def _launcher(
        self,
        k: _Kernel,
        launches: dict[object, tuple[int, int]],
        threads: dict[int, list[int]],
        starts: dict[int, list[int]],
        by_name: dict[str, list[int]],
        name_starts: dict[str, list[int]],
    ) -> int | None:
        corr = k.stats.get("correlation_id")
        if corr is not None and corr in launches:
            tid, t = launches[corr]
            members = threads.get(tid, [])
            i = bisect.bisect_right(starts.get(tid, []), t) - 1
            j: int | None = members[i] if i >= 0 else None
            while j is not None and not (self.ops[j].start <= t <= self.ops[j].end and self.ops[j].role is Role.OP):
                j = self.ops[j].parent
            if j is not None:
                return j
        name, module = _kernel_op_name(k.stats)
        if name is None:
            return None
        named = by_name.get(name, [])
        i = bisect.bisect_right(name_starts.get(name, []), k.start) - 1
        while i >= 0:  # the latest op of that name (and module) started by then
            op = self.ops[named[i]]
            if module is None or op.module is None or op.module[0] == module:
                return named[i]
            i -= 1
        return None

    def _kernel_op(self, k: _Kernel) -> int:
        """An op of its own for a kernel no host op launched (see above)."""
        name, module_name = _kernel_op_name(k.stats)
        at = _order_of(k.uid)
        if isinstance(module_name, str) and name is not None:
            op = self._hlo_op(name, k.stats, k.device, k.start, k.end, at)
        else:
            tf_op = k.stats.get("tf_op")
            if isinstance(tf_op, str) and ":" in tf_op:
                op_name, op_type = tf_op.rsplit(":", 1)
                phase: str | None = phase_of(op_name, op_type)
            else:
                op_name, op_type, phase = (name or k.name), "kernel", None
            op = _Op(kit.uid(Kind.OP, *at), op_name, op_type, k.device, k.start, k.end, at, phase=phase)
        op.attrs["from_kernel"] = True
        self.ops.append(op)
        self.counts["kernel_ops"] += 1
        return len(self.ops) - 1

    # --- order, steps, dependencies ---

    def _framework(self) -> str:
        for plane in self.space.planes:
            if plane.name == METADATA_PLANE and any(
                m.name == "jax_version" for m in (plane.stat_metadata.get(s.metadata_id) for s in plane.stats) if m
            ):
                return "jax"
        return "jax" if self.counts["hlo_ops"] and not self.counts["tf_ops"] else "tensorflow"

    def _order(self) -> None:
        """seq: by start, longer first, then plane, line and event order."""
        order = sorted(range(len(self.ops)), key=lambda j: (self.ops[j].start, -self.ops[j].end, self.ops[j].order))
        for seq, j in enumerate(order):
            self.ops[j].seq = seq

    def _steps(self) -> None:
        """attrs.step of every op starting inside a step's interval (the
        latest-starting such step)."""
        if not self.steps:
            return
        steps = sorted(self.steps, key=lambda s: (s.start, -s.end, s.step))
        starts = [s.start for s in steps]
        for op in self.ops:
            i = bisect.bisect_right(starts, op.start) - 1
            while i >= 0 and not (steps[i].start <= op.start < steps[i].end):
                i -= 1  # steps are few and rarely overlap: a short scan back
            if i >= 0:
                op.attrs["step"] = steps[i].step
                steps[i].ops += 1

    def _dependencies(self) -> bool:
        """DATA and CONTROL edges between HLO op events (the rule in the
        module docstring); True when the capture has HLO to derive them from."""
        runs: dict[tuple[tuple[str, int | None], object], list[int]] = {}
        for j, op in enumerate(self.ops):
            if op.module is not None:
                runs.setdefault((op.module, op.run), []).append(j)
        derived = False
        cache: dict[tuple[int, int, int], tuple[list[Slots], list[Slots]]] = {}
        with_events: dict[int, set[str]] = {}
        for (mkey, _run), members in runs.items():
            module = self.module(*mkey)
            if module is None:
                continue
            derived = True
            names = with_events.setdefault(id(module), set())
            for (m2, _r2), others in runs.items():
                if m2 == mkey:
                    names.update(self.ops[j].name for j in others)

            def has_events(ins: Instruction, names: set[str] = names) -> bool:
                return ins.name in names

            # per instruction name: its events in this run by end, then start, then seq
            events: dict[str, list[tuple[int, int, int, int]]] = {}
            for j in members:
                op = self.ops[j]
                events.setdefault(op.name, []).append((op.end, op.start, op.seq, j))
            for lst in events.values():
                lst.sort()
            ends = {n: [e[0] for e in lst] for n, lst in events.items()}
            for j in members:
                op = self.ops[j]
                ins = module.by_name.get(op.name)
                if ins is None:
                    continue
                key = (id(module), ins.computation, ins.id)
                if key not in cache:
                    cache[key] = (
                        producers(module, ins.computation, ins.operands, has_events),
                        producers(module, ins.computation, ins.control_predecessors, has_events),
                    )
                data, control = cache[key]
                for kind, operands in (("data", data), ("control", control)):
                    for slot in (slot for slots in operands for slot in slots):
                        best: tuple[int, int, int, int] | None = None
                        for n in slot:
                            found = events.get(n)
                            if not found:
                                continue
                            i = bisect.bisect_right(ends[n], op.start) - 1
                            while i >= 0 and found[i][2] >= op.seq:
                                i -= 1
                            if i >= 0 and (best is None or found[i][:3] > best[:3]):
                                best = found[i]
                        if best is not None:
                            self.b.dep(self.ops[best[3]].uid, op.uid, kind)
        return derived

    # --- frames ---

    def _build(self, framework: str, has_deps: bool) -> TraceFrames:
        ops, kernels = self.ops, self.kernels
        origin = min([o.start for o in ops] + [k.start for k in kernels] + [s.start for s in self.steps])
        # With dependencies, the HLO ops make the DAG.
        carries = has_deps and bool(self.b.deps)
        for op in ops:
            row: dict[str, Any] = {
                "uid": op.uid,
                "name": op.name,
                "type": op.type,
                "device": op.device,
                "seq": op.seq,
                "phase": "other" if framework == "tensorflow" and op.role is Role.ANNOTATION else op.phase,
                "executed": True,
                "attrs": _attrs_json(op.attrs),
                "thread": op.thread,
                "role": op.role.value,
                "parent": ops[op.parent].uid if op.parent is not None else None,
            }
            if carries:
                row["carries_deps"] = op.role is Role.OP
            self.b.op(row)
        for k in kernels:
            assert k.op is not None
            self.b.kernel(
                {
                    "uid": k.uid,
                    "op": ops[k.op].uid,
                    "stream": k.stream,
                    "name": k.name,
                    "kind": k.kind,
                    "bytes": k.nbytes,
                    "direction": k.direction,
                }
            )
        self.b.meta = self._meta(framework, has_deps, origin)
        tf = self.b.frames()
        for df, items in ((tf.ops, ops), (tf.kernels, kernels)):
            if not items:
                continue
            start = [(x.start - origin) / 1e6 for x in items]
            end = [(x.end - origin) / 1e6 for x in items]
            dur = [(x.end - x.start) / 1e6 for x in items]
            df["start_us"], df["end_us"], df["dur_us"] = start, end, dur  # lists of floats: float64 columns
        tf.check()
        return tf

    def _meta(self, framework: str, has_deps: bool, origin: int) -> dict[str, Any]:
        space = self.space
        meta: dict[str, Any] = {
            "planes": json.dumps([p.name for p in space.planes]),
            "event_counts": json.dumps(self.counts, sort_keys=True),
        }
        if space.hostnames:
            meta["hostnames"] = json.dumps(space.hostnames)
        if space.errors:
            meta["profiler_errors"] = json.dumps(space.errors)
        if space.warnings:
            meta["profiler_warnings"] = json.dumps(space.warnings)
        for plane in space.planes:
            if plane.name in (TASK_PLANE, METADATA_PLANE):
                try:
                    values = plane.values(plane.stats)
                except Malformed:
                    continue
                for key in ("profile_start_time", "profile_stop_time"):
                    if isinstance(values.get(key), int):
                        meta[key] = values[key]
                for key, value in values.items():
                    if key.endswith("_version") and isinstance(value, str):
                        meta[key] = value
        if self.skipped_device_lines:
            meta["skipped_device_lines"] = json.dumps(self.skipped_device_lines)
        if self.modules:
            meta["hlo_modules"] = json.dumps(sorted({name for name, _ in self.modules}))
        if self.steps:
            meta["steps"] = json.dumps(
                [
                    {"step": s.step, "name": s.name, "dur_us": (s.end - s.start) / 1e6, "ops": s.ops}
                    for s in sorted(self.steps, key=lambda s: s.start)
                ]
            )
        if framework == "tensorflow" and not self.counts["hlo_ops"]:
            meta["dependencies"] = "none in the file (TensorFlow captures record no op inputs)"
        elif has_deps:
            meta["dependencies"] = "from the HLO on /host:metadata: operands and control predecessors, per run"
        else:
            meta["dependencies"] = "none: the capture holds no HLO for its modules"
        meta["time_origin_ps"] = origin
        return meta


def _finite(v: Value) -> bool:
    """A float JSON can hold (attrs are JSON text)."""
    return isinstance(v, float) and math.isfinite(v)


def _node_name(node: str) -> bool:
    """A TF node name as the executor's TraceMe gives it (no spaces)."""
    return bool(node) and not any(c.isspace() for c in node)


def _order_of(uid: str) -> tuple[int, int, int]:
    parts = uid.split(":")[1:]
    return int(parts[0]), int(parts[1]), int(parts[2])


def _kernel_kind(name: str, stats: dict[str, Value]) -> tuple[str, int | None, str | None]:
    """kind, bytes and copy direction of a device event."""
    low = name.lower()
    details = stats.get("memcpy_details")
    if isinstance(details, str) or "memcpy" in low:
        text = details if isinstance(details, str) else ""
        size = _SIZE.search(text)
        direction = _DIRECTION.search(name) or _DIRECTION.search(text)
        d = direction.group(1) if direction else None
        if d is not None and "2" in d:
            d = d.replace("2", "to")
        return "memcpy", int(size.group(1)) if size else None, d
    if "memset" in low:
        size = _SIZE.search(str(stats.get("memset_details", "")))
        return "memset", int(size.group(1)) if size else None, None
    if kit.is_communication_kernel(name):
        return "communication", None, None
    return "compute", None, None


def _kernel_op_name(stats: dict[str, Value]) -> tuple[str | None, str | None]:
    """The op a device event names in its stats (``tf_op`` ``node:type`` ->
    ``node``; ``hlo_op``), and its ``hlo_module``."""
    tf_op = stats.get("tf_op")
    if isinstance(tf_op, str) and tf_op:
        return tf_op.rsplit(":", 1)[0] if ":" in tf_op else tf_op, None
    hlo_op = stats.get("hlo_op")
    module = stats.get("hlo_module")
    if isinstance(hlo_op, str) and hlo_op:
        return hlo_op, module if isinstance(module, str) else None
    return None, None
