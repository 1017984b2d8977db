"""TensorFlow ``StepStats`` (and ``RunMetadata.step_stats``), text or binary.

What is read, and how it maps onto the canonical frames:

* Records on op-level devices (``.../device:GPU:0``, ``.../device:CPU:0``)
  become Ops: times from ``all_start_micros`` + ``all_end_rel_micros``, type
  and data inputs from ``timeline_label`` (``out = Type(in, in:1, ^ctrl)``,
  optionally prefixed by an allocator summary in brackets).
* Records on ``.../stream:N`` devices become Kernels, joined to their Op by
  node name (``conv1/Conv2D:Conv2D`` -> op ``conv1/Conv2D``). ``stream:all``
  repeats every kernel of the other streams and is skipped. Records on
  ``.../memcpy`` that repeat a copy already seen on a stream (same name,
  start and duration) are skipped too; the rest become kernels on a
  ``memcpy`` stream. Copies (``...:MEMCPYDtoH``) carry bytes and direction
  from their label; a copy whose op has no op-level record gets an Op of
  its own, typed by the copy kind.
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
from dataclasses import dataclass, field
from pathlib import Path

from google.protobuf import text_format
from google.protobuf.message import DecodeError
from tensorboard.compat.proto import config_pb2, step_stats_pb2

from tracegraph.errors import InputError
from tracegraph.ingest import stepstats_text
from tracegraph.ingest.frames import (
    ALLOCATION_COLUMNS, ALLOCATOR_COLUMNS, CONSUME_COLUMNS, DEP_COLUMNS,
    DEVICE_COLUMNS, KERNEL_COLUMNS, OP_COLUMNS, STREAM_COLUMNS, TENSOR_COLUMNS,
    TraceFrames, frame,
)
from tracegraph.ingest.tf_names import dtype_name, dtype_size, phase_of

NAME = "tf-stepstats"

_TEXT_HEAD = re.compile(rb"^\s*(#[^\n]*\n\s*)*(dev_stats|step_stats)\s*\{")
_LABEL = re.compile(r"^(?:\[[^\]]*\]\s*)?(?P<out>\S.*?) = (?P<type>[\w.>-]+)\((?P<args>.*)\)\s*$")
_COPY = re.compile(r"^MEMCPY(?P<dir>\w+)\s+(?P<bytes>\d+)\s+bytes")
_STREAM = re.compile(r"^(?P<dev>.*?)/stream:(?P<id>\w+)$")


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

    Text goes through the fast reader of :mod:`tracegraph.ingest.stepstats_text`
    when ``fast`` (its look-alike objects read the same as the message),
    through ``text_format.Parse`` otherwise or when the fast reader declines.
    """
    data = path.read_bytes()
    if not data.strip():
        raise InputError(path, "empty file")
    if _TEXT_HEAD.match(data[:65536]):
        return _read_text(path, data, fast=fast)
    return _read_binary(path, data)


def _read_text(path: Path, data: bytes, *, fast: bool = True) -> step_stats_pb2.StepStats:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(path, "not UTF-8 text", f"byte {e.start}") from None
    del data
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
    raise InputError(path, "not a StepStats or RunMetadata protobuf (truncated or another format)")


def _looks_like_device(name: str) -> bool:
    return name.startswith("/") and ("device:" in name or "/job:" in name)


def short_device(name: str) -> str:
    """``/job:localhost/replica:0/task:0/device:GPU:0`` -> ``/device:GPU:0``."""
    i = name.find("/device:")
    return name[i:] if i >= 0 else name


@dataclass
class _Builder:
    """Accumulates frame rows while walking the message once."""

    path: str
    origin: float
    ops: list = field(default_factory=list)
    op_by_name: dict = field(default_factory=dict)
    op_uids: set = field(default_factory=set)
    kernels: list = field(default_factory=list)
    tensors: dict = field(default_factory=dict)
    consumes: list = field(default_factory=list)
    deps: dict = field(default_factory=dict)
    allocations: list = field(default_factory=list)
    devices: dict = field(default_factory=dict)
    streams: dict = field(default_factory=dict)
    allocators: dict = field(default_factory=dict)

    def device(self, name: str) -> str:
        name = short_device(name)
        uid = f"dev:{name}"
        if uid not in self.devices:
            kind = "GPU" if ":GPU:" in name else "CPU" if ":CPU:" in name else name.rsplit("/", 1)[-1].split(":")[0] or "device"
            self.devices[uid] = {"uid": uid, "name": name, "kind": kind}
        return uid

    def stream(self, device_uid: str, name: str, kind: str) -> str:
        uid = f"s:{self.devices[device_uid]['name']}/{name}"
        if uid not in self.streams:
            self.streams[uid] = {"uid": uid, "device": device_uid, "name": name, "kind": kind}
        return uid

    def allocator(self, name: str, device_uid: str | None) -> str:
        uid = f"mem:{name}"
        if uid not in self.allocators:
            self.allocators[uid] = {"uid": uid, "name": name, "device": device_uid}
        return uid

    def tensor(self, op_name: str, slot: int) -> dict:
        uid = f"t:{op_name}:{slot}"
        if uid not in self.tensors:
            producer = self.op_by_name.get(op_name)
            self.tensors[uid] = {
                "uid": uid, "name": f"{op_name}:{slot}", "producer": producer,
                "output_index": slot if producer else None,
            }
        return self.tensors[uid]


def frames_from_step_stats(stats: step_stats_pb2.StepStats, path: str) -> TraceFrames:
    """Canonical frames for one step. ``path`` is only used in messages.

    ``stats`` is a protobuf ``StepStats`` or the look-alike that
    :mod:`tracegraph.ingest.stepstats_text` builds; only attributes are read.
    """
    devs = [(dev.device, list(dev.node_stats)) for dev in stats.dev_stats]
    starts = [t for _, nodes in devs for t in [n.all_start_micros for n in nodes] if t]
    if not starts:
        raise InputError(path, "no node_stats with times (empty or not a StepStats)")
    b = _Builder(path=path, origin=float(min(starts)))
    op_level, stream_level, copy_level = [], [], []
    for name, nodes in devs:
        if name.endswith("/stream:all"):
            continue
        if _STREAM.match(name):
            stream_level.append((name, nodes))
        elif name.endswith("/memcpy"):
            copy_level.append((name, nodes))
        else:
            op_level.append((name, nodes))
    labels: list = []  # (node name, label match) of every op record, in order
    for name, nodes in op_level:
        device_uid = b.device(name)
        for node in nodes:
            labels.append(_add_op(b, node, device_uid))
    for name, label in labels:
        _add_inputs(b, name, label)
    seen_copies: set = set()
    for name, nodes in stream_level:
        m = _STREAM.match(name)
        device_uid = b.device(m["dev"])
        stream_uid = b.stream(device_uid, f"stream:{m['id']}", "compute")
        for node in nodes:
            key = _add_kernel(b, node, stream_uid, device_uid)
            if key:
                seen_copies.add(key)
    for name, nodes in copy_level:
        device_uid = b.device(name[: -len("/memcpy")])
        for node in nodes:
            key = (node.node_name, node.all_start_micros, node.all_end_rel_micros)
            if key not in seen_copies:
                _add_kernel(b, node, b.stream(device_uid, "memcpy", "memcpy"), device_uid)
    _mark_copy_streams(b)
    tf = TraceFrames(framework="tensorflow", sources=[path], time_unit="us")
    tf.ops = frame(b.ops, OP_COLUMNS)
    tf.kernels = frame(b.kernels, KERNEL_COLUMNS)
    tf.tensors = frame(list(b.tensors.values()), TENSOR_COLUMNS)
    tf.consumes = frame(b.consumes, CONSUME_COLUMNS)
    tf.deps = frame(list(b.deps.values()), DEP_COLUMNS)
    tf.allocations = frame(b.allocations, ALLOCATION_COLUMNS)
    tf.devices = frame(list(b.devices.values()), DEVICE_COLUMNS)
    tf.streams = frame(list(b.streams.values()), STREAM_COLUMNS)
    tf.allocators = frame(list(b.allocators.values()), ALLOCATOR_COLUMNS)
    tf.meta = {"origin_us": b.origin}
    try:
        tf.check()
    except ValueError as e:
        raise InputError(path, f"inconsistent trace: {e}") from None
    return tf


# DataType enum -> (name, bytes per element); both are pure functions.
_DTYPES: dict = {}


def _dtype(dtype: int) -> tuple:
    info = _DTYPES.get(dtype)
    if info is None:
        info = _DTYPES[dtype] = (dtype_name(dtype), dtype_size(dtype))
    return info


def _add_op(b: _Builder, node, device_uid: str) -> tuple:
    """One op record; returns (node name, label match) for _add_inputs."""
    name = node.node_name
    if not name:
        raise InputError(b.path, "node_stats without node_name", f"device {b.devices[device_uid]['name']}")
    uid, n = f"op:{name}", 2
    op_uids = b.op_uids
    while uid in op_uids:  # a node recorded twice (e.g. in a loop) keeps both
        uid, n = f"op:{name}#{n}", n + 1
    op_uids.add(uid)
    text = node.timeline_label
    label = _LABEL.match(text) if text else None
    op_type = label["type"] if label else None
    origin = b.origin
    start = node.all_start_micros - origin
    dur = float(node.all_end_rel_micros)
    memory = node.memory
    mstats = node.memory_stats
    # attrs: these keys in this order, each only when set (as json.dumps of
    # the dict without its None values).
    attrs = {"op_start_rel_us": node.op_start_rel_micros, "op_end_rel_us": node.op_end_rel_micros}
    scheduled = node.scheduled_micros
    if scheduled:
        attrs["scheduled_us"] = scheduled - origin
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
    b.op_by_name.setdefault(name, uid)
    ops = b.ops
    ops.append({
        "uid": uid, "name": name, "type": op_type or "Unknown", "device": device_uid,
        "seq": len(ops), "start_us": start, "end_us": start + dur, "dur_us": dur,
        "phase": phase_of(name, op_type), "executed": True,
        "attrs": json.dumps(attrs),
    })
    outputs = _add_outputs(b, node, uid, name) if node.output else []
    if memory or outputs or persistent:
        _add_allocations(b, node, uid, device_uid, outputs, start)
    return name, label


def _add_outputs(b: _Builder, node, op_uid: str, name: str) -> list[dict]:
    outputs = []
    tensor = b.tensor
    for out in node.output:
        td = out.tensor_description
        slot = out.slot
        t = tensor(name, slot)
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


def _add_inputs(b: _Builder, node_name: str, label) -> None:
    """Data and control inputs from the timeline label (already matched)."""
    if not label:
        return
    args = label["args"]
    if not args.strip():
        return
    op_by_name = b.op_by_name
    dst = op_by_name[node_name]
    deps = b.deps
    consumes = b.consumes
    for index, arg in enumerate(a.strip() for a in args.split(",")):
        if not arg:
            continue
        if arg[0] == "^":
            src = op_by_name.get(arg[1:])
            if src and src != dst:
                deps.setdefault((src, dst), {"src": src, "dst": dst, "kind": "control"})
            continue
        op_name, _, slot = arg.rpartition(":")
        if not op_name or not slot.isdigit():
            op_name, slot = arg, "0"
        t = b.tensor(op_name, int(slot))
        consumes.append({"op": dst, "tensor": t["uid"], "input_index": index})
        src = t["producer"]
        if src and src != dst:
            # A data edge wins over a control edge between the same pair.
            deps[(src, dst)] = {"src": src, "dst": dst, "kind": "data"}


def _add_kernel(b: _Builder, node, stream_uid: str, device_uid: str) -> tuple | None:
    """One kernel or copy record; returns its dedup key when it is a copy."""
    name = node.node_name
    all_start = node.all_start_micros
    all_rel = node.all_end_rel_micros
    start = all_start - b.origin
    dur = float(all_rel)
    copy = _COPY.match(node.timeline_label or "") or (None if ":MEMCPY" not in name else _COPY.match(name.rsplit(":", 1)[1] + " 0 bytes"))
    op_uid = _kernel_owner(b, name)
    if op_uid is None:
        base = name.rsplit(":", 1)[0] if ":" in name else name
        op_type = name.rsplit(":", 1)[1] if ":" in name else "Kernel"
        op_uid = f"op:{base}"
        b.op_by_name[base] = op_uid
        b.op_uids.add(op_uid)
        b.ops.append({
            "uid": op_uid, "name": base, "type": op_type, "device": device_uid,
            "seq": len(b.ops), "start_us": start, "end_us": start + dur, "dur_us": dur,
            "phase": phase_of(base, op_type), "executed": True, "attrs": json.dumps({"synthesized_from": "kernel"}),
        })
        # ``edge_N_<op>`` copies move <op>'s output: that op precedes the copy.
        edge = re.match(r"^edge_\d+_(.+)$", base)
        src = b.op_by_name.get(edge[1]) if edge else None
        if src:
            b.deps.setdefault((src, op_uid), {"src": src, "dst": op_uid, "kind": "data"})
    kernels = b.kernels
    kernels.append({
        "uid": f"k:{len(kernels)}", "op": op_uid, "stream": stream_uid, "name": name,
        "start_us": start, "end_us": start + dur, "dur_us": dur,
        "kind": "memcpy" if copy else "compute",
        "bytes": int(copy["bytes"]) if copy and int(copy["bytes"]) else None,
        "direction": copy["dir"] if copy else None,
    })
    return (name, all_start, all_rel) if copy else None


def _kernel_owner(b: _Builder, name: str) -> str | None:
    """``op:Kernel`` -> the op; ``op:Snapshot:MEMCPYDtoD`` -> the op too."""
    parts = name.split(":")
    for cut in range(len(parts) - 1, 0, -1):
        uid = b.op_by_name.get(":".join(parts[:cut]))
        if uid:
            return uid
    return b.op_by_name.get(name)


def _mark_copy_streams(b: _Builder) -> None:
    """A stream that only ever ran copies is a copy stream."""
    kinds: dict = {}
    for k in b.kernels:
        kinds.setdefault(k["stream"], set()).add(k["kind"])
    for uid, ks in kinds.items():
        if ks == {"memcpy"}:
            b.streams[uid]["kind"] = "memcpy"


def _alloc_time(record: tuple) -> int:
    return record[0]


def _add_allocations(b: _Builder, node, op_uid: str, device_uid: str, outputs: list[dict], op_start: float) -> None:
    paired: list[dict] = []
    origin = b.origin
    memory = node.memory
    for mem in memory:
        allocator = b.allocator(mem.allocator_name, device_uid)
        records = mem.allocation_records
        if not records:
            continue
        open_: list[dict] = []
        for micros, nbytes in sorted([(r.alloc_micros, r.alloc_bytes) for r in records], key=_alloc_time):
            t = micros - origin
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
    for t in outputs:
        info = t.pop("_alloc", None)
        if not info:
            continue
        allocator_name, allocated, requested, ptr, alloc_id = info
        allocator = b.allocator(allocator_name, device_uid)
        candidates = [a for a in paired if a["allocator"] == allocator and a["bytes"] == allocated and "tensor" not in a]
        if not candidates:
            continue
        best = max(candidates, key=lambda a: float("inf") if a["free_us"] is None else a["free_us"])
        best.update({"tensor": t["uid"], "kind": "output", "requested_bytes": requested or None,
                     "address": str(ptr) if ptr else None})
    allocations = b.allocations
    for a in paired:
        a.setdefault("kind", "temp")
        a.setdefault("tensor", None)
        a["op"] = op_uid
        a["uid"] = f"a:{len(allocations)}"
        allocations.append(a)
    persistent = node.memory_stats.persistent_memory_size
    if persistent:
        allocator = b.allocator(memory[0].allocator_name, device_uid) if memory else b.allocator(
            f"{b.devices[device_uid]['name']}/persistent", device_uid)
        allocations.append({
            "uid": f"a:{len(allocations)}", "allocator": allocator, "bytes": persistent,
            "alloc_us": None, "free_us": None, "kind": "persistent", "op": op_uid, "tensor": None,
        })
