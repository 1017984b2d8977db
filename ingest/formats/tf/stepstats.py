"""TensorFlow ``StepStats`` (and ``RunMetadata.step_stats``), text or binary.

What is read, and how it maps onto the canonical frames:

* Times: the ``*_nanos`` fields where set (TF 2.x writes them beside the
  micros), else the ``*_micros`` ones; kept as integer nanoseconds until a
  row is written as microseconds since the trace's first event (so an op
  under a microsecond keeps its fractional duration, and a micros-only
  trace gives exactly the integers it always did). Allocation records have
  microseconds only. The origin is the earliest ``all_start`` of any record
  (a start of 0 is time 0: protobuf cannot tell it from unset), so no time
  is negative; a negative duration or offset (``all_end_rel``,
  ``op_start_rel``, ``op_end_rel``) is an InputError naming the record.
* Records on op-level devices (``.../device:GPU:0``, ``.../device:CPU:0``)
  become Ops: times from ``all_start`` + ``all_end_rel``, type and data
  inputs from ``timeline_label`` (``out = Type(in, in:1, ^ctrl)``,
  optionally prefixed by an allocator summary in brackets).
* A node recorded several times (a ``tf.while_loop`` body runs once per
  iteration under one name) gives one Op per record: uid ``op:<name>`` for
  its first run by start, ``op:<name>#2``, ``#3``... after; ``run`` is the
  0-based place among them and ``iteration`` the loop iteration when it can
  be told. Each input of each run is linked to the producer run that fed it
  (:mod:`tracegraph.ingest.formats.tf.runs` has the rule); its outputs are tensors
  of their own (``t:<name>:<slot>#<run + 1>`` after the first run), and its
  allocations and kernels belong to it.
* Records on ``.../stream:N`` devices become Kernels, joined to their Op by
  node name (``conv1/Conv2D:Conv2D`` -> op ``conv1/Conv2D``; for a node run
  several times, see ``_kernel_runs``). ``stream:all``
  repeats every kernel of the other streams and is skipped. Records on
  ``.../memcpy`` that repeat a copy already seen on a stream (same name,
  start and duration) are skipped too; the rest become kernels on a
  ``memcpy`` stream. Copies (``...:MEMCPYDtoH``) carry bytes and direction
  from their label; a copy whose op has no op-level record gets an Op of
  its own, typed by the copy kind (one Op for every record of that name).
* Outputs become Tensors (dtype, shape, bytes, allocation id, pointer).
* ``allocation_records`` are paired per op and allocator: each free takes
  the earliest still-open allocation of the same size. A free with no
  earlier allocation is treated as allocated at the trace start; an
  allocation never freed stays open. The allocation that backs an output
  tensor (same allocator and size, the one freed last) is ``output``; the
  others are ``temp``. ``persistent_memory_size`` becomes a ``persistent``
  allocation with no alloc/free time: it predates the step and outlives it,
  so it is outside the step's memory timeline.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from google.protobuf import text_format
from google.protobuf.message import DecodeError
from tensorboard.compat.proto import config_pb2, step_stats_pb2

from tracegraph.errors import InputError
from tracegraph.ingest import source
from tracegraph.ingest.formats.kit import FormatInfo, FramesBuilder, Joins, short_device
from tracegraph.ingest.formats.tf import runs as tf_runs
from tracegraph.ingest.formats.tf import stepstats_text
from tracegraph.ingest.formats.tf.names import dtype_name, dtype_size, phase_of
from tracegraph.ingest.frames import (
    Row,
    TraceFrames,
)

# --- what is read of a StepStats message -----------------------------------------
# The fields read here, as both the protobuf messages (untyped) and the
# look-alikes of :mod:`tracegraph.ingest.formats.tf.stepstats_text` have them.


class _AllocationRecord(Protocol):
    alloc_micros: int
    alloc_bytes: int


class _AllocatorMemoryUsed(Protocol):
    allocator_name: str
    allocator_bytes_in_use: int

    @property
    def allocation_records(self) -> Sequence[_AllocationRecord]: ...


class _MemoryStats(Protocol):
    temp_memory_size: int
    persistent_memory_size: int


class _Dim(Protocol):
    size: int


class _TensorShape(Protocol):
    @property
    def dim(self) -> Sequence[_Dim]: ...


class _AllocationDescription(Protocol):
    requested_bytes: int
    allocated_bytes: int
    allocator_name: str
    allocation_id: int
    ptr: int


class _TensorDescription(Protocol):
    dtype: int

    @property
    def shape(self) -> _TensorShape: ...

    @property
    def allocation_description(self) -> _AllocationDescription: ...


class _NodeOutput(Protocol):
    slot: int

    @property
    def tensor_description(self) -> _TensorDescription: ...


class NodeStats(Protocol):
    """One record (``NodeExecStats``)."""

    node_name: str
    all_start_micros: int
    all_start_nanos: int
    op_start_rel_micros: int
    op_start_rel_nanos: int
    op_end_rel_micros: int
    op_end_rel_nanos: int
    all_end_rel_micros: int
    all_end_rel_nanos: int
    scheduled_micros: int
    scheduled_nanos: int
    timeline_label: str
    thread_id: int

    @property
    def memory(self) -> Sequence[_AllocatorMemoryUsed]: ...

    @property
    def output(self) -> Sequence[_NodeOutput]: ...

    @property
    def memory_stats(self) -> _MemoryStats: ...


class _DeviceStepStats(Protocol):
    device: str

    @property
    def node_stats(self) -> Sequence[NodeStats]: ...


class StepStatsLike(Protocol):
    """A ``StepStats`` message or its look-alike."""

    @property
    def dev_stats(self) -> Sequence[_DeviceStepStats]: ...


if TYPE_CHECKING:  # mypy checks that the look-alikes have these fields
    _st = stepstats_text
    _LOOK_ALIKES: tuple[
        StepStatsLike,
        _DeviceStepStats,
        NodeStats,
        _AllocatorMemoryUsed,
        _AllocationRecord,
        _MemoryStats,
        _NodeOutput,
        _TensorDescription,
        _TensorShape,
        _Dim,
        _AllocationDescription,
    ] = (
        _st.StepStats(),
        _st.DeviceStepStats(),
        _st.NodeExecStats(),
        _st.AllocatorMemoryUsed(),
        _st.AllocationRecord(),
        _st.MemoryStats(),
        _st.NodeOutput(),
        _st.TensorDescription(),
        _st.TensorShapeProto(),
        _st.Dim(),
        _st.AllocationDescription(),
    )

# A device's records: (device name, its node_stats).
_DeviceRecords = tuple[str, list[NodeStats]]
# A label's inputs: (input position, producer name, slot; None: a control input).
_Inputs = list[tuple[int, str, int | None]]

FORMAT = FormatInfo("tf-stepstats", "tensorflow", Joins.ALONE, "TensorFlow 1.x RunMetadata / StepStats")

_TEXT_HEAD = re.compile(rb"^\s*(#[^\n]*\n\s*)*(dev_stats|step_stats)\s*\{")
_LABEL = re.compile(r"^(?:\[[^\]]*\]\s*)?(?P<out>\S.*?) = (?P<type>[\w.>-]+)\((?P<args>.*)\)\s*$")
_COPY = re.compile(r"^MEMCPY(?P<dir>\w+)\s+(?P<bytes>\d+)\s+bytes")
_STREAM = re.compile(r"^(?P<dev>.*?)/stream:(?P<id>\w+)$")
_NOT_STEPSTATS = "not a StepStats or RunMetadata protobuf (truncated or another format)"


def sniff(head: bytes) -> bool:
    """Text StepStats/RunMetadata, or binary whose first field is a message
    and which names TF devices early on."""
    if _TEXT_HEAD.match(head):
        return True
    return head[:1] == b"\x0a" and (b"/device:" in head or b"/job:" in head)


def parse(path: Path, *, fast: bool = True) -> TraceFrames:
    """Read one StepStats file (text or binary, bare or inside RunMetadata).

    ``fast=False`` reads text with ``text_format.Parse`` only (the reference
    the fast reader is tested against)."""
    stats = read_step_stats(Path(path), fast=fast)
    return frames_from_step_stats(stats, str(path))


def read_step_stats(path: Path, *, fast: bool = True) -> step_stats_pb2.StepStats:
    """The StepStats message in ``path``, whichever of the four forms it is.

    The file's head decides text or binary before the rest is read, so a
    file that is neither (a binary message starts with field 1, byte 0x0a)
    is refused unread, as is one over the size limit. Text goes through the
    fast reader of :mod:`tracegraph.ingest.formats.tf.stepstats_text` when ``fast``
    (its look-alike objects read the same as the message), through
    ``text_format.Parse`` otherwise or when the fast reader declines.
    """
    size = source.check_size(path, FORMAT.name)
    head = source.unzipped_head(source.head(path))  # (gzipped: its content's head)
    if not head.strip() and size <= len(head):
        raise InputError(path, "empty file")
    if _TEXT_HEAD.match(head):
        return _read_text(path, source.read_text(path, FORMAT.name), fast=fast)
    if head[:1] != b"\x0a":
        raise InputError(path, _NOT_STEPSTATS)
    return _read_binary(path, source.read_content(path, FORMAT.name))


def _read_text(path: Path, text: str, *, fast: bool = True) -> step_stats_pb2.StepStats:
    wrapped = re.match(r"^\s*(#[^\n]*\n\s*)*step_stats\s*\{", text) is not None
    if fast:
        try:
            return stepstats_text.parse(text, wrapped)
        except stepstats_text.Unsupported:
            pass  # something only text_format reads (or an error it reports)
    message = config_pb2.RunMetadata() if wrapped else step_stats_pb2.StepStats()
    try:
        text_format.Parse(text, message, allow_unknown_field=True)
    except text_format.ParseError as e:
        # ParseError messages start with "line:col : ..."; keep them one line.
        where, _, what = str(e).partition(" : ")
        line = where.split(":")[0]
        raise InputError(path, what.strip() or str(e), f"line {line}") from None
    return message.step_stats if wrapped else message


def _read_binary(path: Path, data: bytes) -> step_stats_pb2.StepStats:
    for kind in (step_stats_pb2.StepStats, config_pb2.RunMetadata):
        message = kind()
        try:
            message.ParseFromString(data)
        except (DecodeError, RuntimeError, ValueError):
            continue
        stats = message if kind is step_stats_pb2.StepStats else message.step_stats
        if stats.dev_stats and all(_looks_like_device(d.device) for d in stats.dev_stats):
            return stats
    raise InputError(path, _NOT_STEPSTATS)


def _looks_like_device(name: str) -> bool:
    return name.startswith("/") and ("device:" in name or "/job:" in name)


@dataclass(kw_only=True)
class _Builder(FramesBuilder):
    """The kit's builder, plus what walking a StepStats message needs.

    Times are integer nanoseconds until a row is written (``_us`` turns
    them into microseconds since ``origin_ns``), so that sub-microsecond
    records keep their durations and nothing drifts in float sums. Tensor
    rows carry ``_alloc`` until allocations are added.
    """

    path: str
    origin_ns: int
    # node name -> op uids, in run order (None only while the op records are
    # read: a run's place is known before the runs before it are added)
    runs_by_name: dict[str, list[str | None]] = field(default_factory=dict)
    run_times: dict[str, tuple[int, int]] = field(default_factory=dict)  # op uid -> (start_ns, ready_ns)
    op_uids: set[str] = field(default_factory=set)

    def us(self, t_ns: int) -> float:
        """Microseconds since the trace origin."""
        return (t_ns - self.origin_ns) / 1000

    def device(self, name: str, kind: str | None = None, *, key: object = None) -> str:
        """Devices by their short name (``/device:GPU:0``)."""
        return super().device(short_device(name), kind, key=key)

    def output(self, op_name: str, slot: int, run: int | None) -> Row:
        """The tensor ``op_name:slot`` of the given run of its producer (None:
        the producer has no record)."""
        uid = f"t:{op_name}:{slot}" if not run else f"t:{op_name}:{slot}#{run + 1}"
        if uid not in self.tensors:
            producer = None if run is None else self.runs_by_name[op_name][run]
            self.tensors[uid] = {
                "uid": uid,
                "name": f"{op_name}:{slot}",
                "producer": producer,
                "output_index": slot if producer else None,
            }
        return self.tensors[uid]

    def run_at(self, name: str, t_ns: int) -> str | None:
        """The run of ``name`` that was ready most recently by ``t_ns`` (else
        the last one started by then, else the first): see tf_runs."""
        # Called once every op record is read: no None left among the uids.
        uids = cast("list[str] | None", self.runs_by_name.get(name))
        if not uids:
            return None
        times = self.run_times
        ready = [u for u in uids if times[u][1] <= t_ns]
        started = [u for u in uids if times[u][0] <= t_ns]
        return (ready or started or uids[:1])[-1]


def _ns(nanos: int, micros: int) -> int:
    """A time field in nanoseconds: the ``*_nanos`` field when set, else the
    ``*_micros`` one (TF writes both since 2.x; older traces only micros)."""
    return nanos if nanos else micros * 1000


def _start_ns(node: NodeStats) -> int:
    return _ns(node.all_start_nanos, node.all_start_micros)


def _dur_ns(node: NodeStats) -> int:
    return _ns(node.all_end_rel_nanos, node.all_end_rel_micros)


def frames_from_step_stats(stats: StepStatsLike, path: str) -> TraceFrames:
    """Canonical frames for one step. ``path`` is only used in messages.

    ``stats`` is a protobuf ``StepStats`` or the look-alike that
    :mod:`tracegraph.ingest.formats.tf.stepstats_text` builds; only attributes are read.
    """
    devs = [(dev.device, list(dev.node_stats)) for dev in stats.dev_stats]
    _check_times(path, devs)
    starts = [n.all_start_nanos or n.all_start_micros * 1000 for _, nodes in devs for n in nodes]
    if not any(starts):
        raise InputError(path, "no node_stats with times (empty or not a StepStats)")
    b = _Builder(framework=FORMAT.framework, sources=[path], path=path, origin_ns=min(starts))
    op_level: list[_DeviceRecords] = []
    stream_level: list[_DeviceRecords] = []
    copy_level: list[_DeviceRecords] = []
    for name, nodes in devs:
        if name.endswith("/stream:all"):
            continue
        if _STREAM.match(name):
            stream_level.append((name, nodes))
        elif name.endswith("/memcpy"):
            copy_level.append((name, nodes))
        else:
            op_level.append((name, nodes))
    records = [(node, device_uid) for name, nodes in op_level for device_uid in [b.device(name)] for node in nodes]
    runs = [_run_of(b, node, device_uid) for node, device_uid in records]
    picks = tf_runs.link([r for r, _ in runs])
    for (node, device_uid), (run, _) in zip(records, runs):
        _add_op(b, node, device_uid, run)
    uids = [op["uid"] for op in b.ops]
    for (run, args), uid, fed in zip(runs, uids, picks):
        _add_inputs(b, uid, run, args, [None if q is None else (uids[q], runs[q][0].run) for q in fed])
    _add_kernels(b, stream_level, copy_level)
    _mark_copy_streams(b)
    b.meta = {"origin_us": b.origin_ns / 1000}
    try:
        return b.build()
    except ValueError as e:
        raise InputError(path, f"inconsistent trace: {e}") from None


_RELATIVE = ("all_end_rel", "op_start_rel", "op_end_rel")


def _check_times(path: str, devs: list[_DeviceRecords]) -> None:
    """Refuse a record whose relative times (its duration ``all_end_rel``
    and the op's offsets ``op_start_rel``/``op_end_rel``, all measured from
    the record's own start) are negative: an end before its start is no
    duration a critical path or a stream can use. Absolute starts need no
    check: every time is taken relative to the earliest one."""
    for i, (_, nodes) in enumerate(devs):
        for j, node in enumerate(nodes):
            if (
                node.all_end_rel_micros >= 0
                and node.all_end_rel_nanos >= 0
                and node.op_start_rel_micros >= 0
                and node.op_start_rel_nanos >= 0
                and node.op_end_rel_micros >= 0
                and node.op_end_rel_nanos >= 0
            ):
                continue
            for rel in _RELATIVE:
                for unit in ("nanos", "micros"):
                    value = getattr(node, f"{rel}_{unit}")
                    if value < 0:
                        raise InputError(
                            path,
                            f"node {node.node_name!r} has a negative {rel}_{unit} ({value}): an end before its start",
                            f"dev_stats[{i}].node_stats[{j}]",
                        )


# DataType enum -> (name, bytes per element); both are pure functions.
_DTYPES: dict[int, tuple[str, int | None]] = {}


def _dtype(dtype: int) -> tuple[str, int | None]:
    info = _DTYPES.get(dtype)
    if info is None:
        info = _DTYPES[dtype] = (dtype_name(dtype), dtype_size(dtype))
    return info


def _args(label: re.Match[str] | None) -> _Inputs:
    """``(input position, producer name, slot)`` from a matched label; slot
    None for a control input (``^name``)."""
    if not label:
        return []
    args = label["args"]
    if not args.strip():
        return []
    out: _Inputs = []
    for index, arg in enumerate(a.strip() for a in args.split(",")):
        if not arg:
            continue
        if arg[0] == "^":
            out.append((index, arg[1:], None))
            continue
        op_name, _, slot = arg.rpartition(":")
        if not op_name or not slot.isdigit():
            op_name, slot = arg, "0"
        out.append((index, op_name, int(slot)))
    return out


def _run_of(b: _Builder, node: NodeStats, device_uid: str) -> tuple[tf_runs.Run, _Inputs]:
    """(tf_runs.Run, its label's inputs as _args gives them) of one op-level
    record."""
    name = node.node_name
    if not name:
        raise InputError(b.path, "node_stats without node_name", f"device {b.devices[device_uid]['name']}")
    text = node.timeline_label
    label = _LABEL.match(text) if text else None
    start = node.all_start_nanos or node.all_start_micros * 1000
    dur = node.all_end_rel_nanos or node.all_end_rel_micros * 1000
    op_end = node.op_end_rel_nanos or node.op_end_rel_micros * 1000
    ready = start + (min(op_end, dur) if op_end > 0 else dur)
    args = _args(label) if label else []
    return tf_runs.Run(name, label["type"] if label else None, start, ready, start + dur, args), args


def _add_op(b: _Builder, node: NodeStats, device_uid: str, run: tf_runs.Run) -> None:
    """One op record (one run of its node)."""
    name = run.name
    uid = f"op:{name}" if run.run == 0 else f"op:{name}#{run.run + 1}"
    op_uids = b.op_uids
    n = run.run + 2
    while uid in op_uids:  # only for names that break TF's rules (no '#' in node names)
        uid, n = f"op:{name}#{n}", n + 1
    op_uids.add(uid)
    text = node.timeline_label
    op_type = run.type
    start_ns = run.start
    origin = b.origin_ns
    memory = node.memory
    mstats = node.memory_stats
    # attrs: these keys in this order, each only when set (as json.dumps of
    # the dict without its None values).
    # op_*_rel: nanos / 1000 when set, else the micros as they were (ints).
    rel = node.op_start_rel_nanos
    attrs: dict[str, Any] = {"op_start_rel_us": rel / 1000 if rel else node.op_start_rel_micros}
    rel = node.op_end_rel_nanos
    attrs["op_end_rel_us"] = rel / 1000 if rel else node.op_end_rel_micros
    scheduled = node.scheduled_nanos or node.scheduled_micros * 1000
    if scheduled:
        attrs["scheduled_us"] = (scheduled - origin) / 1000
    thread = node.thread_id
    if thread:
        attrs["thread_id"] = thread
    if text:
        attrs["timeline_label"] = text
    temp = mstats.temp_memory_size
    if temp:
        attrs["temp_memory_bytes"] = temp
    persistent = mstats.persistent_memory_size
    if persistent:
        attrs["persistent_memory_bytes"] = persistent
    if memory:
        in_use = {m.allocator_name: m.allocator_bytes_in_use for m in memory if m.allocator_bytes_in_use}
        if in_use:
            attrs["allocator_bytes_in_use"] = in_use
    if run.tag and len(run.tag) > 1 and None not in run.tag:
        attrs["loop_iterations"] = list(run.tag)
    uids = b.runs_by_name.get(name)
    if uids is None:
        uids = b.runs_by_name[name] = [None] * (run.run + 1)
    elif len(uids) <= run.run:
        uids.extend([None] * (run.run + 1 - len(uids)))
    uids[run.run] = uid
    b.run_times[uid] = (start_ns, run.ready)
    ops = b.ops
    ops.append(
        {
            "uid": uid,
            "name": name,
            "type": op_type or "Unknown",
            "device": device_uid,
            "seq": len(ops),
            "start_us": (start_ns - origin) / 1000,
            "end_us": (run.end - origin) / 1000,
            "dur_us": (run.end - start_ns) / 1000,
            "phase": phase_of(name, op_type),
            "executed": True,
            "attrs": json.dumps(attrs),
            "run": run.run,
            "iteration": run.tag[-1] if run.tag and run.tag[-1] is not None else None,
        }
    )
    outputs = _add_outputs(b, node, uid, name, run.run) if node.output else []
    if memory or outputs or persistent:
        _add_allocations(b, node, uid, device_uid, outputs)


def _add_outputs(b: _Builder, node: NodeStats, op_uid: str, name: str, run: int) -> list[Row]:
    outputs = []
    tensor = b.output
    for out in node.output:
        td = out.tensor_description
        slot = out.slot
        t = tensor(name, slot, run)
        t["producer"], t["output_index"] = op_uid, slot
        dims = [d.size for d in td.shape.dim]
        ad = td.allocation_description
        dname, size = _dtype(td.dtype)
        count = 1
        for d in dims:
            count *= d
        allocated = ad.allocated_bytes
        t["dtype"] = dname
        t["shape"] = "x".join(map(str, dims)) if dims else "scalar"
        t["bytes"] = allocated or (count * size if size and all(d >= 0 for d in dims) else None)
        allocator_name = ad.allocator_name
        if allocator_name:
            t["_alloc"] = (allocator_name, allocated, ad.requested_bytes, ad.ptr, ad.allocation_id)
        outputs.append(t)
    return outputs


def _add_inputs(b: _Builder, dst: str, run: tf_runs.Run, args: _Inputs, fed: list[tuple[str, int] | None]) -> None:
    """Data and control inputs from the timeline label (as _args parsed it);
    ``fed`` holds the producer run (op uid, run index) of each input, as
    tf_runs chose it (None: no record of the producer, or a Merge input
    that did not fire)."""
    deps = b.deps
    consumes = b.consumes
    # A Merge reads the one input that fired: the linked one, else (none
    # linked) the inputs whose producer has no record.
    merge = run.type in tf_runs.MERGE
    fired = merge and any(fed)
    for (index, name, slot), fed_by in zip(args, fed):
        if merge and fed_by is None and (fired or name in b.runs_by_name):
            continue
        src, src_run = fed_by if fed_by else (None, None)
        if slot is None:
            if src and src != dst:
                deps.setdefault((src, dst), {"src": src, "dst": dst, "kind": "control"})
            continue
        t = b.output(name, slot, src_run)
        consumes.append({"op": dst, "tensor": t["uid"], "input_index": index})
        if src and src != dst:
            # A data edge wins over a control edge between the same pair.
            deps[(src, dst)] = {"src": src, "dst": dst, "kind": "data"}


def _add_kernels(b: _Builder, stream_level: list[_DeviceRecords], copy_level: list[_DeviceRecords]) -> None:
    """Kernel and copy records, each joined to the run of its op that
    launched it (see _kernel_runs)."""
    # (node, stream uid (None: the device's memcpy stream), device uid, _COPY match)
    records: list[tuple[NodeStats, str | None, str, re.Match[str] | None]] = []
    seen_copies: set[tuple[str, int, int]] = set()
    for name, nodes in stream_level:
        m = _STREAM.match(name)
        assert m is not None  # stream_level holds the devices _STREAM matches
        device_uid = b.device(m["dev"])
        stream_uid: str | None = b.stream(device_uid, f"stream:{m['id']}", "compute")
        for node in nodes:
            copy = _copy_of(node)
            records.append((node, stream_uid, device_uid, copy))
            if copy:
                seen_copies.add((node.node_name, _start_ns(node), _dur_ns(node)))
    for name, nodes in copy_level:
        device_uid = b.device(name[: -len("/memcpy")])
        for node in nodes:
            if (node.node_name, _start_ns(node), _dur_ns(node)) not in seen_copies:
                records.append((node, None, device_uid, _copy_of(node)))
    owners = _kernel_runs(b, [r[0] for r in records])
    for (node, stream_uid, device_uid, copy), owner in zip(records, owners):
        if stream_uid is None:
            stream_uid = b.stream(device_uid, "memcpy", "memcpy")
        _add_kernel(b, node, stream_uid, device_uid, owner, copy)


def _kernel_runs(b: _Builder, nodes: list[NodeStats]) -> list[str | None]:
    """The op run (uid) of every kernel record, None when no op has its name.

    A kernel of a node run several times goes to the run whose place among
    the node's runs (by start) is the kernel's place among the records of
    the same kernel name, when there are as many of those as runs (GPU
    kernels can start after the next run was launched); else to the last
    run started by the kernel's start."""
    owners = [_kernel_owner(b, node.node_name) for node in nodes]
    runs_by_name = b.runs_by_name
    out = [runs_by_name[o][0] if o else None for o in owners]
    if all(len(uids) == 1 for uids in runs_by_name.values()):
        return out
    groups: dict[tuple[str, str], list[int]] = {}  # (owner, kernel name) -> record positions
    for i, (node, owner) in enumerate(zip(nodes, owners)):
        if owner and len(b.runs_by_name[owner]) > 1:
            groups.setdefault((owner, node.node_name), []).append(i)
    for (owner, _), idx in groups.items():
        # Called once every op record is read: no None left among the uids.
        uids = cast("list[str]", b.runs_by_name[owner])
        idx.sort(key=lambda i: (_start_ns(nodes[i]), i))
        if len(idx) == len(uids):
            for i, uid in zip(idx, uids):
                out[i] = uid
        else:
            for i in idx:
                t = _start_ns(nodes[i])
                started = [u for u in uids if b.run_times[u][0] <= t]
                out[i] = (started or uids[:1])[-1]
    return out


def _copy_of(node: NodeStats) -> re.Match[str] | None:
    name = node.node_name
    return _COPY.match(node.timeline_label or "") or (
        None if ":MEMCPY" not in name else _COPY.match(name.rsplit(":", 1)[1] + " 0 bytes")
    )


def _add_kernel(
    b: _Builder, node: NodeStats, stream_uid: str, device_uid: str, op_uid: str | None, copy: re.Match[str] | None
) -> None:
    """One kernel or copy record of op run ``op_uid`` (None: no op record has
    its name, so it gets an op of its own); ``copy`` is its _COPY match."""
    name = node.node_name
    start_ns = _start_ns(node)
    dur_ns = _dur_ns(node)
    start, end, dur = b.us(start_ns), b.us(start_ns + dur_ns), dur_ns / 1000
    if op_uid is None:  # an op synthesized for an earlier record of the same name?
        owner = _kernel_owner(b, name)
        op_uid = b.runs_by_name[owner][0] if owner else None
    if op_uid is None:
        base = name.rsplit(":", 1)[0] if ":" in name else name
        op_type = name.rsplit(":", 1)[1] if ":" in name else "Kernel"
        op_uid = f"op:{base}"
        b.runs_by_name[base] = [op_uid]
        b.run_times[op_uid] = (start_ns, start_ns + dur_ns)
        b.op_uids.add(op_uid)
        b.ops.append(
            {
                "uid": op_uid,
                "name": base,
                "type": op_type,
                "device": device_uid,
                "seq": len(b.ops),
                "start_us": start,
                "end_us": end,
                "dur_us": dur,
                "phase": phase_of(base, op_type),
                "executed": True,
                "attrs": json.dumps({"synthesized_from": "kernel"}),
                "run": 0,
                "iteration": None,
            }
        )
        # ``edge_N_<op>`` copies move <op>'s output: that op (its run ready
        # last before the copy) precedes the copy.
        edge = re.match(r"^edge_\d+_(.+)$", base)
        src = b.run_at(edge[1], start_ns) if edge else None
        if src:
            b.deps.setdefault((src, op_uid), {"src": src, "dst": op_uid, "kind": "data"})
    kernels = b.kernels
    kernels.append(
        {
            "uid": f"k:{len(kernels)}",
            "op": op_uid,
            "stream": stream_uid,
            "name": name,
            "start_us": start,
            "end_us": end,
            "dur_us": dur,
            "kind": "memcpy" if copy else "compute",
            "bytes": int(copy["bytes"]) if copy and int(copy["bytes"]) else None,
            "direction": copy["dir"] if copy else None,
        }
    )


def _kernel_owner(b: _Builder, name: str) -> str | None:
    """The node name a kernel belongs to: ``op:Kernel`` -> ``op``;
    ``op:Snapshot:MEMCPYDtoD`` -> ``op`` too."""
    parts = name.split(":")
    for cut in range(len(parts) - 1, 0, -1):
        owner = ":".join(parts[:cut])
        if owner in b.runs_by_name:
            return owner
    return name if name in b.runs_by_name else None


def _mark_copy_streams(b: _Builder) -> None:
    """A stream that only ever ran copies is a copy stream."""
    kinds: dict[str, set[str]] = {}  # stream uid -> kinds of its kernels
    for k in b.kernels:
        kinds.setdefault(k["stream"], set()).add(k["kind"])
    for uid, ks in kinds.items():
        if ks == {"memcpy"}:
            b.streams[uid]["kind"] = "memcpy"


def _alloc_time(record: tuple[int, int]) -> int:
    return record[0]


def _add_allocations(b: _Builder, node: NodeStats, op_uid: str, device_uid: str, outputs: list[Row]) -> None:
    paired: list[Row] = []
    us = b.us
    memory = node.memory
    for mem in memory:
        allocator = b.allocator(mem.allocator_name, device_uid)
        records = mem.allocation_records
        if not records:
            continue
        open_: list[Row] = []
        for micros, nbytes in sorted([(r.alloc_micros, r.alloc_bytes) for r in records], key=_alloc_time):
            t = us(micros * 1000)  # AllocationRecord has microseconds only
            if nbytes > 0:
                a = {"allocator": allocator, "bytes": nbytes, "alloc_us": t, "free_us": None}
                open_.append(a)
                paired.append(a)
            elif nbytes < 0:
                match = next((a for a in open_ if a["bytes"] == -nbytes), None)
                if match is None:
                    match = {"allocator": allocator, "bytes": -nbytes, "alloc_us": 0.0, "free_us": None}
                    paired.append(match)
                else:
                    open_.remove(match)
                match["free_us"] = t
    for tensor in outputs:
        info = tensor.pop("_alloc", None)
        if not info:
            continue
        allocator_name, allocated, requested, ptr, _alloc_id = info
        allocator = b.allocator(allocator_name, device_uid)
        candidates = [
            a for a in paired if a["allocator"] == allocator and a["bytes"] == allocated and "tensor" not in a
        ]
        if not candidates:
            continue
        best = max(candidates, key=lambda a: float("inf") if a["free_us"] is None else a["free_us"])
        best.update(
            {
                "tensor": tensor["uid"],
                "kind": "output",
                "requested_bytes": requested or None,
                "address": str(ptr) if ptr else None,
            }
        )
    allocations = b.allocations
    for a in paired:
        a.setdefault("kind", "temp")
        a.setdefault("tensor", None)
        a["op"] = op_uid
        a["uid"] = f"a:{len(allocations)}"
        allocations.append(a)
    persistent = node.memory_stats.persistent_memory_size
    if persistent:
        allocator = (
            b.allocator(memory[0].allocator_name, device_uid)
            if memory
            else b.allocator(f"{b.devices[device_uid]['name']}/persistent", device_uid)
        )
        allocations.append(
            {
                "uid": f"a:{len(allocations)}",
                "allocator": allocator,
                "bytes": persistent,
                "alloc_us": None,
                "free_us": None,
                "kind": "persistent",
                "op": op_uid,
                "tensor": None,
            }
        )
