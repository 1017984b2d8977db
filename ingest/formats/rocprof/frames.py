"""rocprofv3 captures as frames: the rules for the records of
:mod:`.capture`, whichever file they were read from (:mod:`.trace`: the
JSON; :mod:`.rocpd`: the rocpd SQLite database).

What becomes what:

* Processes. Each process of the file is a rank, numbered in pid order;
  a file of one process is a trace of one rank (no ``rank``). Several make
  a job, as Kineto rank files do (devices and threads named
  ``rank<r>/...``).
* Host calls (``hip_api``, ``hsa_api``, ``rccl_api``) are Ops
  ``op:<rank>:call:<i>`` named by their operation (``hipLaunchKernel``,
  ``ncclAllReduce``), category ``hip_runtime`` / ``hip_compiler`` /
  ``hsa_api`` / ``rccl_api``, role ``runtime`` (``sync`` for the
  ``*Synchronize`` calls), on their thread (``pid:tid``) of the process's
  CPU; ``attrs`` keep the record kind (``domain``) and the correlation ids.
* ROCTx markers (``marker_api``: ranges pushed and popped, started and
  stopped, and marks as zero-length ones) are annotation Ops named by their
  message (``strings.marker_api``), category ``roctx``; ``--step-marker``
  names them as steps.
* Nesting: an op's ``parent`` is the innermost op of its thread whose
  interval holds it (Kineto's rule, :mod:`..kineto.nesting`).
* Kernel dispatches are Kernels ``k:<rank>:<i>`` named by their symbol's
  demangled name (``kernel_symbols``), on Stream ``stream:<id>`` (the HIP
  stream; ``queue:<id>``, the hardware queue, in files from before streams
  were recorded) of Device ``gpu:<n>`` (the GPU agent's HIP device number);
  grid and workgroup sizes are not kept. Communication kernels by the
  kit's rule (RCCL keeps NCCL's names), with the collective from the name.
  Memory copies are Kernels ``Memcpy HtoD`` / ``DtoH`` / ``DtoD`` / ``HtoH``
  (kind ``memcpy``, with ``bytes``) on their GPU end's device.
* Launches: a dispatch's or copy's internal correlation id names the host
  call that issued it (a HIP call before an HSA one): that call is its
  ``launch`` and the op that launched it. Device work whose call is not in
  the file (only ``--kernel-trace`` was asked for) belongs to its device's
  op ``[launched outside the trace]``, counted in
  ``meta_kernels_without_launch``.
* Memory (``memory_allocation``): each allocation, freed by the next free
  of its address, is an Allocation of the GPU's allocator ``gpu:<n>`` (the
  host's, ``host``, for host memory), made by the call of its correlation
  id (``hipMalloc``) when that is in the file.
* Times: the profiler's integer nanoseconds, as microseconds since the
  earliest record read.

Not read: scratch memory, PC samples, rocDecode and rocJPEG records
(counted in ``meta_not_read``), and counter collection. Synchronizing calls
are not joined to the work they waited for: rocprofv3 records no
synchronization events to say which.

Errors (one line naming the file): a capture with no record read at all
(the readers refuse what is not their file).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tracegraph.errors import InputError
from tracegraph.ingest.formats.kineto.nesting import host_ops
from tracegraph.ingest.formats.kit import (
    OUTSIDE_OP_NAME,
    FramesBuilder,
    Kind,
    Role,
    collective_in_name,
    is_communication_kernel,
    uid,
)
from tracegraph.ingest.formats.rocprof.capture import CALL_CATEGORIES, MARKER_KINDS, Call, Process
from tracegraph.ingest.frames import TraceFrames

# When several calls share a correlation id, the one that issued the work.
_LAUNCHER_ORDER = {"HIP_RUNTIME_API": 0, "HIP_RUNTIME_API_EXT": 0, "RCCL_API": 1}


def build(path: Path, processes: list[Process]) -> TraceFrames:
    """The processes' records as frames (rules in the module docstring)."""
    if not any(p.calls or p.work or p.memory for p in processes):
        raise InputError(path, "a rocprofv3 capture without records (no kernels, copies, API calls or markers)")
    return _Builder(path, sorted(processes, key=lambda p: p.pid)).frames()


@dataclass
class _Builder:
    path: Path
    processes: list[Process]
    b: FramesBuilder = field(init=False)
    origin: int = 0
    multi: bool = False

    def __post_init__(self) -> None:
        self.b = FramesBuilder("rocm", [str(self.path)], rank=None)
        self.multi = len(self.processes) > 1
        starts = [
            t
            for p in self.processes
            for t in (
                *(c.start for c in p.calls),
                *(w.start for w in p.work),
                *(m.time for m in p.memory),
            )
        ]
        self.origin = min(starts)

    def frames(self) -> TraceFrames:
        without_launch = 0
        for rank, p in enumerate(self.processes):
            launchers = self._host(rank, p)
            without_launch += self._work(rank, p, launchers)
            self._memory(rank, p, launchers)
        b = self.b
        b.meta["kernels_without_launch"] = without_launch
        b.meta["pids"] = json.dumps([p.pid for p in self.processes])
        for key in ("hostname", "command"):
            values = sorted({p.meta[key] for p in self.processes if key in p.meta})
            if values:
                b.meta[key] = values[0] if len(values) == 1 else json.dumps(values)
        not_read: dict[str, int] = {}
        for p in self.processes:
            for table, n in p.meta.get("not_read", {}).items():
                not_read[table] = not_read.get(table, 0) + n
        if not_read:
            b.meta["not_read"] = json.dumps(not_read)
        gpus = sorted({f"{a.index}: {a.name}" for p in self.processes for a in p.agents.values() if a.kind == "GPU"})
        if gpus:
            b.meta["gpus"] = json.dumps(gpus)
        return b.build()

    # --- host -----------------------------------------------------------------------------

    def _host(self, rank: int, p: Process) -> dict[int, str]:
        """The process's calls and markers as ops; returns correlation id ->
        the uid of the call that issued work under it."""
        b = self.b
        cpu = b.device(self._label(rank, "cpu"), "CPU")
        if self.multi:
            b.devices[cpu]["rank"] = rank
        calls = p.calls
        op_start = np.asarray([c.start for c in calls], dtype=np.int64)
        op_end = np.asarray([c.end for c in calls], dtype=np.int64)
        parents, seq = host_ops([c.thread for c in calls], op_start, op_end)
        uids = [uid(Kind.OP, rank, "call", i) for i in range(len(calls))]
        launchers: dict[int, tuple[int, str]] = {}
        for i, c in enumerate(calls):
            marker = c.domain in MARKER_KINDS
            role = Role.ANNOTATION if marker else Role.SYNC if "Synchronize" in c.name else Role.RUNTIME
            category = "roctx" if marker else CALL_CATEGORIES.get(c.domain, c.domain.lower())
            tid = f"{p.pid}:{c.thread}"
            b.op(
                {
                    "uid": uids[i],
                    "name": c.name,
                    "type": "roctx" if marker else c.name,
                    "device": cpu,
                    "seq": int(seq[i]),
                    "start_us": self._us(c.start),
                    "end_us": self._us(c.end),
                    "dur_us": (c.end - c.start) / 1000.0,
                    "executed": True,
                    "attrs": json.dumps(_attrs(c)),
                    "parent": uids[int(parents[i])] if parents[i] >= 0 else None,
                    "thread": f"rank{rank}/{tid}" if self.multi else tid,
                    "category": category,
                    "role": role.value,
                    "rank": rank if self.multi else None,
                }
            )
            if not marker and c.correlation:
                priority = _LAUNCHER_ORDER.get(c.domain, 2)
                kept = launchers.get(c.correlation)
                if kept is None or priority < kept[0]:
                    launchers[c.correlation] = (priority, uids[i])
        return {corr: u for corr, (_, u) in launchers.items()}

    # --- device ---------------------------------------------------------------------------

    def _work(self, rank: int, p: Process, launchers: dict[int, str]) -> int:
        """Dispatches and copies as kernels; returns how many had no launch."""
        b = self.b
        outside: dict[str, str] = {}
        without_launch = 0
        for i, w in enumerate(p.work):
            dev = self._gpu(rank, p, w.agent)
            call = launchers.get(w.correlation)
            op = call
            if op is None:
                without_launch += 1
                op = outside.get(dev)
                if op is None:
                    op = outside[dev] = b.outside_op(
                        f"{rank}:outside:{len(outside)}",
                        OUTSIDE_OP_NAME,
                        dev,
                        self._us(w.start),
                        rank if self.multi else None,
                    )
            kind = w.kind
            if kind == "kernel":
                kind = "communication" if is_communication_kernel(w.name) else "compute"
            b.kernel(
                {
                    "uid": uid(Kind.KERNEL, rank, i),
                    "op": op,
                    "stream": b.stream(dev, w.lane),
                    "name": w.name,
                    "start_us": self._us(w.start),
                    "end_us": self._us(w.end),
                    "dur_us": (w.end - w.start) / 1000.0,
                    "kind": kind,
                    "bytes": w.bytes,
                    "direction": w.direction,
                    "collective": collective_in_name(w.name) if kind == "communication" else None,
                    "launch": call,
                }
            )
        return without_launch

    def _memory(self, rank: int, p: Process, launchers: dict[int, str]) -> None:
        b = self.b
        live: dict[int, list[tuple[int, Any]]] = {}  # address -> (record index, allocator) not yet freed
        rows: list[dict[str, Any]] = []
        for m in sorted(p.memory, key=lambda m: m.time):
            if m.allocate:
                agent = p.agents.get(m.agent) if m.agent is not None else None
                if agent is not None and agent.kind == "GPU":
                    device = self._gpu(rank, p, agent.handle)
                    name = b.devices[device]["name"]
                else:
                    device, name = b.device(self._label(rank, "cpu"), "CPU"), self._label(rank, "host")
                allocator = b.allocator(name, device)
                row = {
                    "uid": uid(Kind.ALLOCATION, rank, len(rows)),
                    "allocator": allocator,
                    "bytes": m.bytes,
                    "alloc_us": self._us(m.time),
                    "free_us": None,
                    "address": m.address,
                    "op": launchers.get(m.correlation),
                }
                rows.append(row)
                live.setdefault(m.address, []).append((len(rows) - 1, allocator))
            elif live.get(m.address):
                at, _ = live[m.address].pop(0)
                rows[at]["free_us"] = self._us(m.time)
        for row in rows:
            b.allocation(row)

    # --- helpers --------------------------------------------------------------------------

    def _us(self, t: int) -> float:
        return (t - self.origin) / 1000.0

    def _label(self, rank: int, name: str) -> str:
        return f"rank{rank}/{name}" if self.multi else name

    def _gpu(self, rank: int, p: Process, handle: int) -> str:
        agent = p.agents.get(handle)
        index = agent.index if agent is not None else handle
        u = self.b.device(self._label(rank, f"gpu:{index}"), "GPU")
        if self.multi:
            self.b.devices[u]["rank"] = rank
        return u


def _attrs(c: Call) -> dict[str, Any]:
    attrs: dict[str, Any] = {"domain": c.domain, "correlation": c.correlation}
    if c.external:
        attrs["external_correlation"] = c.external
    return attrs
