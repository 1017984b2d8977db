"""One rank file of a PyTorch profiler trace read and assembled into its
rank's frames (:mod:`.trace`'s rules): the events the graph needs kept,
uids, nesting, launches, synchronization and memory pairing; times stay
absolute integer nanoseconds until the job's ranks are joined."""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from tracegraph.errors import InputError
from tracegraph.ingest.formats import kit
from tracegraph.ingest.formats.kineto import read as kineto_read
from tracegraph.ingest.formats.kineto.nesting import RUNTIME_CATEGORIES, collective_calls, launchers, nesting
from tracegraph.ingest.formats.kineto.phase import assign_phases
from tracegraph.ingest.formats.kineto.read import FORMAT
from tracegraph.ingest.formats.kineto.run import info_rank
from tracegraph.ingest.formats.kit import FramesBuilder, Kind, Role
from tracegraph.ingest.frames import TraceFrames

_HOST_CATS = {
    "cpu_op": "cpu_op",
    "operator": "cpu_op",
    "user_annotation": "user_annotation",
    "python_function": "python_function",
    "cuda_runtime": "cuda_runtime",
    "runtime": "cuda_runtime",
    "cuda_driver": "cuda_driver",
}
_DEVICE_CATS = {
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "memcpy": "memcpy",
    "gpu_memset": "memset",
    "memset": "memset",
}
# Runtime calls that block until device work ends (their ops' role is ``sync``).
BLOCKING_CALLS = frozenset(
    {
        "cudaDeviceSynchronize",
        "cudaStreamSynchronize",
        "cudaEventSynchronize",
        "cudaEventQuery",
        "cudaMemcpy",
        "cudaMemcpyAsync",
        "hipDeviceSynchronize",
        "hipStreamSynchronize",
        "hipEventSynchronize",
        "hipEventQuery",
        "hipMemcpy",
        "hipMemcpyAsync",
    }
)
# ncclKernel_AllReduce_RING_LL_Sum_float(...), ncclDevKernel_AllGather_RING_LL(...)
_NCCL_COLLECTIVE = re.compile(r"nccl(?:Dev)?Kernel_([A-Za-z]+)")


def _collective_fields(name: str, args: dict[str, Any]) -> dict[str, Any]:
    """An NCCL kernel's collective, process group and its ranks: the
    metadata newer PyTorch records on the kernel, else the collective from
    the kernel's name (``Generic`` kernels of ROCm name none; a
    ``SendRecv`` kernel is ``SendRecv`` whatever its metadata says)."""
    found = _NCCL_COLLECTIVE.search(name)
    word = found[1] if found and found[1] != "Generic" else None  # ROCm's Generic kernels name nothing
    # A SendRecv kernel is point-to-point traffic whatever collective it serves (all_to_all runs as these).
    collective = word if word == "SendRecv" else (args.get("Collective name") or word)
    group = args.get("Process Group Name")
    ranks = args.get("Process Group Ranks")
    return {
        "collective": str(collective) if collective is not None else None,
        "process_group": str(group) if group is not None else None,
        "group_ranks": str(ranks) if ranks is not None else None,
    }


_COPY_DIRECTION = re.compile(r"Memcpy\s+(\w+)")
# Args kept in an op's attrs (the rest, e.g. strides and concrete inputs, is bulk).
_KEPT_ARGS = (
    "External id",
    "Sequence number",
    "Fwd thread id",
    "Input Dims",
    "Input type",
    "correlation",
    "Record function id",
    "stream",
    "device",
    "kernel_backend",
)
# Args a kernel's row reads (copies' and memsets' bytes, NCCL's collective metadata).
_KERNEL_ARGS = ("bytes", "Collective name", "Process Group Name", "Process Group Ranks")
# Args of cuda_sync records and [memory] records that the graph reads.
_SYNC_ARGS = (
    "cuda_sync_kind",
    "correlation",
    "device",
    "stream",
    "wait_on_stream",
    "wait_on_cuda_event_record_corr_id",
)
_MEMORY_ARGS = ("Bytes", "Addr", "Total Allocated", "Device Type", "Device Id")
# Reads every event keeping only these args: the rest (shapes, strides,
# grid sizes) is most of a trace's bytes and is never built.
_READER = kineto_read.EventReader(list(dict.fromkeys(_KEPT_ARGS + _KERNEL_ARGS + _SYNC_ARGS + _MEMORY_ARGS)))

# One encoder for every op's attrs (msgspec: 5x json's; numbers the reader
# kept as Decimal are written as strings, anything else unusual as its str).
_ATTRS_ENCODER = msgspec.json.Encoder(enc_hook=str)


def _attrs_json(attrs: dict[str, Any]) -> str:
    try:
        return _ATTRS_ENCODER.encode(attrs).decode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate escape (\ud800) in a name: json writes it escaped
        return json.dumps(attrs, default=str)


# The op that stands for launches outside the trace (see the docstring).
OUTSIDE_OP_NAME = "[launched outside the trace]"


# --- one file ---------------------------------------------------------------------------------


# Where a flow event is: (pid, tid, ts in ns).
_FlowPoint = tuple[Any, Any, int]
# A kernel of the rank being assembled: (uid, device, stream, start, end,
# start of the runtime call that launched it, that call's pid, tid; None
# when the call is not in the trace).
_KernelRun = tuple[str, Any, Any, int, int, int | None, Any, Any]


@dataclass
class _Rank:
    """What one rank file contributes, times in absolute integer ns."""

    path: Path
    rank: int | None  # None until parse_many numbers the files that give none
    header: dict[str, Any]
    # Events as mutable lists (the times are shifted in place); pid, tid,
    # device, stream, corr and ids are JSON values as the file has them.
    ops: list[list[Any]] = field(default_factory=list)  # [index, name, cat, pid, tid, start, end, kept args]
    kernels: list[list[Any]] = field(
        default_factory=list
    )  # [index, name, kind, device, stream, start, end, corr, kept args]
    syncs: list[list[Any]] = field(default_factory=list)  # [index, kind, device, stream, start, end, args]
    memory: list[list[Any]] = field(default_factory=list)  # [index, pid, tid, t, args]
    flows_start: dict[Any, _FlowPoint] = field(default_factory=dict)  # ac2g id -> (pid, tid, ts)
    flows_end: dict[_FlowPoint, Any] = field(default_factory=dict)  # (pid, tid, ts) -> ac2g id
    skipped: dict[str, int] = field(default_factory=dict)  # span category tracegraph does not read -> count


def _read_rank(path: Path) -> _Rank:
    header, events = _READER.read(path)
    r = _Rank(path, None, header)
    for i, ev in enumerate(events):
        _take(r, i, ev)
    del events
    base = header.get("baseTimeNanoseconds")  # complete now (a streamed file's trailer is read at its end)
    if base is not None:
        if not isinstance(base, int) or isinstance(base, bool):
            raise InputError(path, "baseTimeNanoseconds is not an integer", "baseTimeNanoseconds")
        _shift(r, base)
    r.rank = info_rank(header)
    return r


def _shift(r: _Rank, base: int) -> None:
    for o in r.ops:
        o[5] += base
        o[6] += base
    for k in r.kernels:
        k[5] += base
        k[6] += base
    for s in r.syncs:
        s[4] += base
        s[5] += base
    for m in r.memory:
        m[3] += base
    r.flows_start = {k: (p, t, ts + base) for k, (p, t, ts) in r.flows_start.items()}
    r.flows_end = {(p, t, ts + base): v for (p, t, ts), v in r.flows_end.items()}


def _take(r: _Rank, i: int, ev: kineto_read.Event) -> None:
    """Keep what the graph needs of event ``i``."""
    ph = ev.ph
    if ph is None:
        raise InputError(r.path, "event has no ph (phase)", _where(i))
    if ph == "X":
        cat = "" if ev.cat is None else str(ev.cat).lower()
        host = _HOST_CATS.get(cat)
        dev = _DEVICE_CATS.get(cat)
        if host is None and dev is None and cat != "cuda_sync":
            r.skipped[cat] = r.skipped.get(cat, 0) + 1
            return
        start = _time(r.path, ev, "ts", i)
        dur = _time(r.path, ev, "dur", i)
        if dur < 0:
            raise InputError(r.path, f"negative duration {ev.dur} for {ev.name!r}", _where(i))
        name = "" if ev.name is None else str(ev.name)
        if host is not None:
            # The reader names _KEPT_ARGS first: an op keeps exactly those.
            r.ops.append([i, name, host, ev.pid, ev.tid, start, start + dur, _args(r, i, ev, len(_KEPT_ARGS))])
            return
        args = _args(r, i, ev)
        if dev is not None:
            kind = dev if dev != "kernel" else ("communication" if kit.is_communication_kernel(name) else "compute")
            device = args.get("device", ev.pid)
            stream = args.get("stream", ev.tid)
            kept = {k: args[k] for k in _KERNEL_ARGS if k in args}
            r.kernels.append([i, name, kind, device, stream, start, start + dur, args.get("correlation"), kept])
        else:
            r.syncs.append(
                [
                    i,
                    str(args.get("cuda_sync_kind", name)),
                    args.get("device", ev.pid),
                    args.get("stream"),
                    start,
                    start + dur,
                    args,
                ]
            )
    elif ph == "i" or ph == "I":
        if ev.name != "[memory]":
            return
        t = _time(r.path, ev, "ts", i)
        args = _args(r, i, ev)
        if "Bytes" not in args:
            raise InputError(r.path, "[memory] record without Bytes", _where(i))
        r.memory.append([i, ev.pid, ev.tid, t, args])
    elif ph in ("s", "f") and ev.cat == "ac2g":
        t = _time(r.path, ev, "ts", i)
        key = (ev.pid, ev.tid, t)
        if ph == "s":
            r.flows_start[ev.id] = key
        else:
            r.flows_end[key] = ev.id


def _args(r: _Rank, i: int, ev: kineto_read.Event, first: int | None = None) -> dict[str, Any]:
    """The kept args of event ``i`` (see EventReader.args)."""
    try:
        return _READER.args(ev, first)
    except kineto_read.ArgsNotAnObject:
        raise InputError(r.path, "args is not an object", _where(i)) from None


def _time(path: Path, ev: kineto_read.Event, key: str, i: int) -> int:
    value = getattr(ev, key)
    if value is None:
        raise InputError(path, f"{ev.name if ev.name is not None else 'event'!r} has no {key}", _where(i))
    try:
        return kineto_read.ns(value)
    except TypeError:
        raise InputError(path, f"{key} is not a number: {value!r}", _where(i)) from None


def _where(i: int) -> str:
    return f"traceEvents[{i}]"


# --- all ranks -> frames ---------------------------------------------------------------------


# An allocation's free time while it has none (times are int64 ns).
NEVER_FREED = int(np.iinfo(np.int64).min)


@dataclass
class RankPart:
    """One rank assembled, as a worker process sends it back: its frames
    with the rank's own phases (uids, nesting, joins, pairing done; times
    not yet set, they need the job's origin), its times in absolute integer
    ns, and what the trace's meta counts."""

    path: Path
    rank: int
    named: bool  # the rank comes from the file's distributedInfo (else from its place among the files)
    header: dict[str, Any]
    frames: TraceFrames
    op_times: np.ndarray  # (ops, 2) start, end
    kernel_times: np.ndarray  # (kernels, 2)
    alloc_times: np.ndarray  # (allocations, 2) alloc, free (NEVER_FREED when not freed)
    events: int  # ops and kernels the file holds (the outside-trace ops not counted)
    skipped: dict[str, int]
    unpaired_frees: int
    kernels_without_launch: int
    memory_without_address: int
    reported_peak: dict[str, int]


def read_part(path: Path, rank: int, multi: bool) -> RankPart:
    """Read and assemble one rank file (``rank`` when the file names none)."""
    r = _read_rank(path)
    named = r.rank is not None  # from the file's distributedInfo
    if r.rank is None:
        r.rank = rank
    return _Assemble(r, multi).part(named)


class _Assemble:
    """One rank's frames from its kept events (uids, nesting, joins, pairing)."""

    def __init__(self, r: _Rank, multi: bool) -> None:
        self.r = r
        self.multi = multi
        self.b = FramesBuilder(FORMAT.framework, [str(r.path)], rank=r.rank if multi else None)
        self.ops = self.b.ops
        self.op_times: list[tuple[int, int]] = []
        self.kernels = self.b.kernels
        self.kernel_times: list[tuple[int, int]] = []
        self.allocations = self.b.allocations
        self.alloc_times: list[tuple[int, int]] = []  # free NEVER_FREED while not freed
        self.syncs = self.b.syncs
        self.unpaired_frees = 0
        self.reported_peak: dict[str, int] = {}
        self.outside_ops: dict[str, int] = {}  # op uid -> position in ops
        self.kernels_without_launch = 0
        self.memory_without_address = 0

    def prefix(self, r: _Rank) -> str:
        return f"rank{r.rank}/" if self.multi else ""

    def part(self, named: bool) -> RankPart:
        r = self.r
        assert r.rank is not None
        self._rank(r)
        tf = self.b.frames()
        op_times = _times(self.op_times)
        tf.ops["seq"] = seq_order(op_times)  # the rank's own order (parents first), for its phases
        assign_phases(tf)
        return RankPart(
            path=r.path,
            rank=r.rank,
            named=named,
            header=r.header,
            frames=tf,
            op_times=op_times,
            kernel_times=_times(self.kernel_times),
            alloc_times=_times(self.alloc_times),
            events=len(r.ops) + len(r.kernels),
            skipped=r.skipped,
            unpaired_frees=self.unpaired_frees,
            kernels_without_launch=self.kernels_without_launch,
            memory_without_address=self.memory_without_address,
            reported_peak=self.reported_peak,
        )

    # --- one rank ---

    def _device(self, r: _Rank, kind: str, index: object = None) -> str:
        if kind == "CPU":
            return self.b.device(f"{self.prefix(r)}cpu", "CPU", key=f"{r.rank}:cpu")
        return self.b.device(f"{self.prefix(r)}cuda:{index}", "GPU", key=f"{r.rank}:cuda:{index}")

    def _rank(self, r: _Rank) -> None:
        cpu = self._device(r, "CPU")
        pre = self.prefix(r)
        uid_prefix = kit.uid(Kind.OP, r.rank) + ":"  # + the event's index: kit.uid(Kind.OP, rank, index)
        # An op's type and role follow from its name and category, which repeat: worked out once each.
        kinds: dict[tuple[str, str], tuple[str, str]] = {}
        threads: dict[tuple[Any, Any], str] = {}
        for o in r.ops:
            index, name, cat, pid, tid, start, end, args = o
            kind = kinds.get((name, cat))
            if kind is None:
                kind = kinds[(name, cat)] = (_op_type(name, cat), _role(name, cat).value)
            thread = threads.get((pid, tid))
            if thread is None:
                thread = threads[(pid, tid)] = f"{pre}{pid}:{tid}"
            attrs = {"category": cat, "pid": pid, "tid": tid}
            attrs.update(args)  # the reader kept only _KEPT_ARGS, in that order
            self.ops.append(
                {
                    "uid": f"{uid_prefix}{index}",
                    "name": name,
                    "type": kind[0],
                    "device": cpu,
                    "executed": True,
                    "attrs": _attrs_json(attrs),
                    "thread": thread,
                    "category": cat,
                    "role": kind[1],
                    "phase": None,
                }
            )
            self.op_times.append((start, end))
        first = len(self.ops) - len(r.ops)
        parents, memory_op = nesting(r.ops, r.memory)
        for j, p in enumerate(parents):
            if p is not None:
                self.ops[first + j]["parent"] = self.ops[first + p]["uid"]
        for j in collective_calls(r.ops, parents):
            self.ops[first + j]["collective"] = r.ops[j][1]
        runtime_by_corr: dict[Any, int] = {}  # correlation id -> op position
        runtime_at: dict[_FlowPoint, int] = {}
        for j, o in enumerate(r.ops):
            if o[2] in RUNTIME_CATEGORIES:
                corr = o[7].get("correlation")
                if corr is not None:
                    runtime_by_corr[corr] = j
                runtime_at[(o[3], o[4], o[5])] = j
        launcher = launchers(r.ops, parents)
        self._kernels(r, runtime_by_corr, runtime_at, launcher, first)
        self._syncs(r, runtime_by_corr, first)
        self._memory(r, memory_op, first)

    def _kernels(
        self,
        r: _Rank,
        runtime_by_corr: dict[Any, int],
        runtime_at: dict[_FlowPoint, int],
        launcher: list[int],
        first: int,
    ) -> None:
        self.rank_kernels: list[_KernelRun] = []
        for k in r.kernels:
            index, name, kind, device, stream, start, end, corr, args = k
            j = runtime_by_corr.get(corr) if corr is not None else None
            if j is None:
                flow = r.flows_end.get((device, stream, start))
                src = r.flows_start.get(flow) if flow is not None else None
                j = runtime_at.get(src) if src is not None else None
            dev = self._device(r, "GPU", device)
            suid = self.b.stream(dev, f"stream:{stream}", key=f"{r.rank}:{device}:{stream}")
            uid = kit.uid(Kind.KERNEL, r.rank, index)
            direction = None
            if kind == "memcpy":
                m = _COPY_DIRECTION.search(name)
                direction = m[1] if m else None
            nbytes = args.get("bytes") if kind in ("memcpy", "memset") else None
            if j is None:
                op, launch = self._outside_op(r, dev, start), None
                self.rank_kernels.append((uid, device, stream, start, end, None, None, None))
            else:
                op, launch = self.ops[first + launcher[j]]["uid"], self.ops[first + j]["uid"]
                self.rank_kernels.append((uid, device, stream, start, end, r.ops[j][5], r.ops[j][3], r.ops[j][4]))
            self.kernels.append(
                {
                    "uid": uid,
                    "op": op,
                    "stream": suid,
                    "name": name,
                    "kind": kind,
                    "bytes": _int_or_none(nbytes),
                    "direction": direction,
                    **(_collective_fields(name, args) if kind == "communication" else {}),
                    "launch": launch,
                }
            )
            self.kernel_times.append((start, end))

    def _outside_op(self, r: _Rank, device_uid: str, start: int) -> str:
        """The op that stands for the calls outside the trace that launched
        device work on ``device_uid``: one per rank and device, at the
        earliest such kernel's start, zero long."""
        uid = kit.uid(Kind.OP, r.rank, "outside", device_uid.rsplit(":", 1)[-1])
        at = self.outside_ops.get(uid)
        if at is None:
            self.outside_ops[uid] = len(self.ops)
            self.ops.append(
                {
                    "uid": uid,
                    "name": OUTSIDE_OP_NAME,
                    "type": "OutsideTrace",
                    "device": device_uid,
                    "executed": True,
                    "attrs": _attrs_json({"synthesized_from": "kernels without a launch in the trace"}),
                    "thread": None,
                    "category": None,
                    "role": Role.OP.value,
                    "phase": "other",
                }
            )
            self.op_times.append((start, start))
        elif start < self.op_times[at][0]:
            self.op_times[at] = (start, start)
        self.kernels_without_launch += 1
        return uid

    def _syncs(self, r: _Rank, runtime_by_corr: dict[Any, int], first: int) -> None:
        """Synchronization edges from the rank's cuda_sync records."""
        if not r.syncs:
            return
        by_stream: dict[tuple[Any, Any], list[tuple[int, int, str]]] = {}  # (start, end, uid)
        for uid, device, stream, start, end, _launch_start, _pid, _tid in self.rank_kernels:
            by_stream.setdefault((device, stream), []).append((start, end, uid))
        launches: dict[tuple[Any, Any], list[tuple[int, str, Any, Any]]] = {}  # (launch start, uid, pid, tid)
        for uid, device, stream, _start, _end, launch_start, pid, tid in self.rank_kernels:
            if launch_start is not None:
                launches.setdefault((device, stream), []).append((launch_start, uid, pid, tid))
        for v in by_stream.values():
            v.sort()
        for w in launches.values():
            w.sort()
        starts = {k: [x[0] for x in v] for k, v in by_stream.items()}
        launch_starts = {k: [x[0] for x in v] for k, v in launches.items()}
        ops = r.ops

        def started_last(device: Any, stream: Any, t: int) -> str | None:
            """The stream's kernel that started last at or before t."""
            i = bisect.bisect_right(starts.get((device, stream), []), t)
            return by_stream[(device, stream)][i - 1][2] if i else None

        def issued_last(device: Any, stream: Any, t: int) -> str | None:
            """The stream's kernel whose runtime call started last before t."""
            i = bisect.bisect_left(launch_starts.get((device, stream), []), t)
            return launches[(device, stream)][i - 1][1] if i else None

        seen: set[tuple[str, str]] = set()
        for _index, kind, device, stream, _start, end, args in r.syncs:
            corr = args.get("correlation")
            j = runtime_by_corr.get(corr)
            if j is None:
                continue
            call = self.ops[first + j]["uid"]
            edges: list[tuple[str | None, str | None, str]] = []
            if kind == "Stream Sync":
                edges = [(started_last(device, stream, end), call, "host_wait")]
            elif kind == "Context Sync":
                edges = [(started_last(d, s, end), call, "host_wait") for (d, s) in by_stream if d == device]
            elif kind in ("Event Sync", "Stream Wait Event"):
                rec = runtime_by_corr.get(args.get("wait_on_cuda_event_record_corr_id"))
                if rec is None:
                    continue
                src = issued_last(device, args.get("wait_on_stream"), ops[rec][5])
                if kind == "Event Sync":
                    edges = [(src, call, "host_wait")]
                else:
                    pid, tid, t = ops[j][3], ops[j][4], ops[j][5]
                    after = launches.get((device, stream), [])
                    i = bisect.bisect_right(launch_starts.get((device, stream), []), t)
                    nxt = next((uid for _, uid, p, q in after[i:] if p == pid and q == tid), None)
                    edges = [(src, nxt, "stream_wait")]
            for src, dst, k in edges:
                if src is not None and dst is not None and src != dst and (src, dst) not in seen:
                    seen.add((src, dst))
                    self.syncs.append({"src": src, "dst": dst, "kind": k})

    def _memory(self, r: _Rank, memory_op: list[int | None], first: int) -> None:
        live: dict[tuple[str, Any], int] = {}  # (allocator, address) -> allocation position
        pre = self.prefix(r)
        # In time order: Kineto writes the records grouped by thread, so a
        # free on another thread can come before its allocation in the file.
        for i in sorted(range(len(r.memory)), key=lambda i: r.memory[i][3]):
            (index, _, _, t, args), op = r.memory[i], memory_op[i]
            dtype, did = args.get("Device Type"), args.get("Device Id")
            if dtype == 1 or (isinstance(did, int) and did >= 0 and dtype not in (0, None)):
                aname = f"{pre}cuda:{did}"
                auid = self.b.allocator(aname, self._device(r, "GPU", did), key=f"{r.rank}:cuda:{did}")
            else:
                aname = f"{pre}cpu"
                auid = self.b.allocator(aname, self._device(r, "CPU"), key=f"{r.rank}:cpu")
            total = args.get("Total Allocated")
            if isinstance(total, int):
                self.reported_peak[aname] = max(self.reported_peak.get(aname, 0), total)
            nbytes = _int_or_none(args.get("Bytes"))
            addr = args.get("Addr")
            if nbytes is None:
                raise InputError(
                    r.path, f"[memory] Bytes is not an integer: {args.get('Bytes')!r}", f"traceEvents[{index}]"
                )
            if addr is None:  # PyTorch 1.8/1.9 recorded no address: nothing to pair it with
                self.memory_without_address += 1
                continue
            key = (auid, addr)
            if nbytes > 0:
                if key in live:
                    self._close(live, key, t)
                self.allocations.append(
                    {
                        "uid": kit.uid(Kind.ALLOCATION, r.rank, index),
                        "allocator": auid,
                        "bytes": nbytes,
                        "address": str(addr),
                        "op": None if op is None else self.ops[first + op]["uid"],
                    }
                )
                self.alloc_times.append((t, NEVER_FREED))
                live[key] = len(self.allocations) - 1
            elif nbytes < 0:
                if key in live:
                    self._close(live, key, t)
                else:
                    self.unpaired_frees += 1

    def _close(self, live: dict[tuple[str, Any], int], key: tuple[str, Any], t: int) -> None:
        i = live.pop(key)
        self.alloc_times[i] = (self.alloc_times[i][0], t)


def _times(pairs: list[tuple[int, int]]) -> np.ndarray:
    """(start, end) pairs as an (n, 2) int64 array (n may be 0)."""
    return np.array(pairs, dtype=np.int64).reshape(len(pairs), 2)


def seq_order(times: np.ndarray) -> np.ndarray:
    """Each op's place in the order by (start, longer first, file order):
    an op comes after the ops that enclose it."""
    order = np.lexsort((np.arange(len(times)), -times[:, 1], times[:, 0]))
    seq = np.empty(len(order), dtype=np.int64)
    seq[order] = np.arange(len(order))
    return seq


def _int_or_none(v: Any) -> int | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int):
        return v
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return int(f) if f.is_integer() else None


def _role(name: str, cat: str) -> Role:
    if cat in RUNTIME_CATEGORIES:
        return Role.SYNC if name in BLOCKING_CALLS else Role.RUNTIME
    if cat in ("user_annotation", "python_function"):
        return Role.ANNOTATION
    return Role.OP


def _op_type(name: str, cat: str) -> str:
    if cat == "python_function":
        return "python_function"
    if cat == "user_annotation":
        if name.startswith("ProfilerStep#"):
            return "ProfilerStep"
        return name.split("#", 1)[0] or name
    return name
