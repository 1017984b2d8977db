"""Nsight Systems SQLite exports (``nsys-sqlite``): the file NVIDIA users
have, ``nsys export --type sqlite report.nsys-rep`` (or the ``.sqlite``
``nsys stats`` leaves beside the report), plain or gzipped.

Detected by content: an SQLite database whose first pages name Nsight
Systems' tables. Read by :mod:`.tables` (read-only, tables by the columns
they have, the export schema's major version checked).

What becomes what:

* Processes. Each process with CUDA activity (kernels, copies, memsets,
  runtime or driver calls; ``globalPid``, a thread's process is its
  ``globalTid`` without the low 24 bits) is a rank, numbered in pid order;
  one such process is a trace of one rank (no ``rank``). Several make a
  job, as Kineto rank files do: devices and threads are named
  ``rank<r>/...``, and collectives, stragglers and the job's critical path
  answer.
* CUDA runtime and driver calls (``CUPTI_ACTIVITY_KIND_RUNTIME`` /
  ``_DRIVER``) are Ops ``op:<rank>:rt:<row>`` / ``op:<rank>:drv:<row>``
  named by ``StringIds`` without the API version suffix
  (``cudaLaunchKernel_v7000``: ``cudaLaunchKernel``), category
  ``cuda_runtime`` / ``cuda_driver``, role ``runtime`` (``sync`` for the
  ``*Synchronize`` calls), on their thread (``pid:tid``) of the process's
  CPU.
* NVTX ranges (``NVTX_EVENTS``: push/pop and start/end ranges, and NVTX
  marks as zero-length ones) are annotation Ops ``op:<rank>:nvtx:<row>``
  named by their text, category ``nvtx``, with their domain in ``attrs``
  (``domain``); NCCL's own NVTX ranges are among them. A range's thread is
  the one it began on. ``--step-marker`` names NVTX ranges as steps.
* Nesting: an op's ``parent`` is the innermost op of its thread whose
  interval holds it (Kineto's rule, :mod:`..kineto.nesting`).
* Kernels (``CUPTI_ACTIVITY_KIND_KERNEL``: named by the demangled name,
  else the short one), copies (``_MEMCPY``: ``Memcpy <HtoD|DtoH|DtoD|...>``
  by ``copyKind``, with ``bytes``) and memsets (``_MEMSET``: ``Memset``,
  with ``bytes``) are Kernels ``k:<rank>:<table>:<row>`` on Stream
  ``stream:<streamId>`` of Device ``cuda:<deviceId>``; communication
  kernels by the kit's rule, with the collective from the name
  (``ncclDevKernel_AllReduce_...``: ``AllReduce``).
* Launches: a kernel's ``correlationId`` names the runtime (or driver)
  call of its process that issued it: the call is its ``launch`` and the
  op that launched it. A kernel whose call is not in the export belongs to
  its device's op ``[launched outside the trace]`` (type ``OutsideTrace``),
  counted in ``meta_kernels_without_launch``.
* Synchronization (``CUPTI_ACTIVITY_KIND_SYNCHRONIZATION``): the blocking
  call of the same correlation id waited for the kernel that started last
  before the record's end on the record's stream, or on every stream of its
  device when the record names none (a context or device synchronize).
* Times: the export's integer nanoseconds, as microseconds since the
  earliest record read.

Read but not kept as ops: OS runtime calls (``OSRT_API``), CPU samples,
scheduling; their row counts are ``meta_not_read`` (JSON). The export's
facts (``EXPORT_PRODUCT_VERSION``, ``EXPORT_SCHEMA_VERSION``) and the GPUs
(``TARGET_INFO_GPU``) are kept in meta.

Errors (one line naming the file): not an SQLite database, one without
Nsight Systems' tables, an export schema of an unknown major version, a
damaged database, a record whose end is before its start.
"""

from __future__ import annotations

import bisect
import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tracegraph.errors import InputError
from tracegraph.ingest.formats.kineto.nesting import host_ops
from tracegraph.ingest.formats.kit import (
    OUTSIDE_OP_NAME,
    FormatInfo,
    FramesBuilder,
    Joins,
    Kind,
    Role,
    collective_in_name,
    is_communication_kernel,
    uid,
)
from tracegraph.ingest.formats.nsys.tables import FORMAT_NAME, SQLITE_MAGIC, Export, open_export
from tracegraph.ingest.frames import TraceFrames

FORMAT = FormatInfo(FORMAT_NAME, "cuda", Joins.ALONE, "Nsight Systems SQLite export")

_TABLE_WORDS = (b"StringIds", b"CUPTI_ACTIVITY_KIND_", b"NVTX_EVENTS", b"TARGET_INFO_", b"META_DATA_EXPORT")
_API_VERSION = re.compile(r"_v\d+$")
_SYNC_CALL = re.compile(r"Synchronize")
# CUPTI's copy kinds (ENUM_CUDA_MEMCPY_OPER), as the direction words Kineto uses.
_COPY_KINDS = {
    1: "HtoD",
    2: "DtoH",
    3: "HtoA",
    4: "AtoH",
    5: "AtoA",
    6: "AtoD",
    7: "DtoA",
    8: "DtoD",
    9: "HtoH",
    10: "PtoP",
}
# NVTX event types: ranges (push/pop, start/end; and the NVTXT variants) and marks.
_NVTX_RANGES = frozenset({59, 60, 70, 71})
_NVTX_MARKS = frozenset({34, 65})
_NVTX_DOMAIN_CREATE = 75
_NOT_READ = ("OSRT_API", "COMPOSITE_EVENTS", "SCHED_EVENTS", "SAMPLING_CALLCHAINS", "CUDA_GPU_MEMORY_USAGE_EVENTS")
_NO_STREAM = 0xFFFFFFFF


def sniff(head: bytes) -> bool:
    """An SQLite database whose first pages name Nsight Systems' tables."""
    return head.startswith(SQLITE_MAGIC) and sum(w in head for w in _TABLE_WORDS) >= 2


def parse(path: Path) -> TraceFrames:
    """The export as frames (rules in the module docstring)."""
    ex = open_export(path)
    try:
        return _Reader(ex).frames()
    finally:
        ex.close()


def _process(global_tid: int) -> int:
    return global_tid - (global_tid & 0xFFFFFF)


@dataclass
class _Call:
    uid: str
    start: int
    end: int
    name: str


@dataclass
class _Reader:
    ex: Export
    ranks: dict[int, int] = field(default_factory=dict)  # process (globalPid) -> rank
    calls: dict[tuple[int, int], _Call] = field(default_factory=dict)  # (process, correlationId) -> call
    ops: list[dict[str, Any]] = field(default_factory=list)
    devices: dict[tuple[int, int], str] = field(default_factory=dict)
    origin: int = 0

    def frames(self) -> TraceFrames:
        ex = self.ex
        processes = self._processes()
        if not processes:
            raise InputError(
                ex.path, "an Nsight Systems export without CUDA activity (kernels, copies or CUDA API calls)"
            )
        self.ranks = {p: r for r, p in enumerate(sorted(processes, key=lambda p: (p >> 24) & 0xFFFFFF))}
        multi = len(self.ranks) > 1
        b = FramesBuilder("cuda", [str(ex.path)], rank=None)
        device_rows = self._device_records()
        call_rows = self._call_records()
        nvtx_rows = self._nvtx_records()
        starts = [r[1] for r in device_rows] + [r[1] for r in call_rows] + [r[1] for r in nvtx_rows]
        self.origin = min(starts)
        thread_names = self._thread_names()
        cpus = {p: b.device(self._label(p, "cpu", multi), "CPU") for p in self.ranks}
        for p, r in self.ranks.items():
            if multi:
                b.devices[cpus[p]]["rank"] = r
        # host ops: calls and NVTX ranges, nested per thread
        host = call_rows + nvtx_rows
        op_start = np.asarray([h[1] for h in host], dtype=np.int64)
        op_end = np.asarray([h[2] for h in host], dtype=np.int64)
        parents, seq = host_ops([h[3] for h in host], op_start, op_end)
        uids = [h[0] for h in host]
        for i, (u, start, end, gtid, name, category, role, attrs) in enumerate(host):
            process = _process(gtid)
            rank = self.ranks[process]
            tid_label = f"{(process >> 24) & 0xFFFFFF}:{gtid & 0xFFFFFF}"
            b.op(
                {
                    "uid": u,
                    "name": name,
                    "type": name if role is not Role.ANNOTATION else "nvtx",
                    "device": cpus[process],
                    "seq": int(seq[i]),
                    "start_us": self._us(start),
                    "end_us": self._us(end),
                    "dur_us": (end - start) / 1000.0,
                    "executed": True,
                    "attrs": json.dumps({**attrs, "thread_name": thread_names.get(gtid)}),
                    "parent": uids[int(parents[i])] if parents[i] >= 0 else None,
                    "thread": f"rank{rank}/{tid_label}" if multi else tid_label,
                    "category": category,
                    "role": role.value,
                    "rank": rank if multi else None,
                }
            )
        # device work
        kernels: dict[tuple[int, int, int], list[tuple[int, str]]] = defaultdict(list)  # stream -> (start, uid)
        outside: dict[str, str] = {}
        without_launch = 0
        for u, start, end, process, device, stream, correlation, name, kind, nbytes, direction in device_rows:
            dev = self._device(b, process, device, multi)
            st = b.stream(dev, f"stream:{stream}")
            call = self.calls.get((process, correlation)) if correlation is not None else None
            if call is None:
                without_launch += 1
                op = outside.get(dev)
                if op is None:
                    rank = self.ranks[process]
                    op = outside[dev] = b.outside_op(
                        f"{rank}:outside:{len(outside)}", OUTSIDE_OP_NAME, dev, self._us(start), rank if multi else None
                    )
            b.kernel(
                {
                    "uid": u,
                    "op": call.uid if call is not None else op,
                    "stream": st,
                    "name": name,
                    "start_us": self._us(start),
                    "end_us": self._us(end),
                    "dur_us": (end - start) / 1000.0,
                    "kind": kind,
                    "bytes": nbytes,
                    "direction": direction,
                    "collective": collective_in_name(name) if kind == "communication" else None,
                    "launch": call.uid if call is not None else None,
                }
            )
            kernels[(process, device, stream)].append((start, u))
        self._syncs(b, kernels)
        b.meta.update(self._meta(without_launch))
        return b.build()

    # --- records ------------------------------------------------------------------------

    def _processes(self) -> set[int]:
        found: set[int] = set()
        for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
            found.update(p for (p,) in self.ex.rows(table, ("globalPid",), "GROUP BY globalPid") if isinstance(p, int))
        for table in ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER"):
            found.update(
                _process(t) for (t,) in self.ex.rows(table, ("globalTid",), "GROUP BY globalTid") if isinstance(t, int)
            )
        return found

    def _call_records(self) -> list[tuple[Any, ...]]:
        out = []
        for table, tag, category in (
            ("CUPTI_ACTIVITY_KIND_RUNTIME", "rt", "cuda_runtime"),
            ("CUPTI_ACTIVITY_KIND_DRIVER", "drv", "cuda_driver"),
        ):
            cols = ("rowid", "start", "end", "globalTid", "correlationId", "nameId")
            for row, start, end, gtid, correlation, name_id in self.ex.rows(table, cols):
                start, end = self.ex.times(table, start, end)
                if not isinstance(gtid, int) or _process(gtid) not in self.ranks:
                    continue
                raw = self.ex.string(name_id) or "[unnamed call]"
                name = _API_VERSION.sub("", raw)
                process = _process(gtid)
                u = uid(Kind.OP, self.ranks[process], tag, row)
                role = Role.SYNC if _SYNC_CALL.search(name) else Role.RUNTIME
                if isinstance(correlation, int):
                    self.calls.setdefault((process, correlation), _Call(u, start, end, name))
                attrs = {"api": raw, "correlation": correlation}
                out.append((u, start, end, gtid, name, category, role, attrs))
        return out

    def _nvtx_records(self) -> list[tuple[Any, ...]]:
        ex = self.ex
        cols = ("rowid", "start", "end", "eventType", "text", "textId", "globalTid", "domainId", "category")
        rows = list(ex.rows("NVTX_EVENTS", cols))
        domains = {d: t for _, _, _, kind, t, _, _, d, _ in rows if kind == _NVTX_DOMAIN_CREATE and isinstance(t, str)}
        out = []
        for row, start, end, kind, text, text_id, gtid, domain, category in rows:
            if kind not in _NVTX_RANGES and kind not in _NVTX_MARKS:
                continue
            if not isinstance(gtid, int) or _process(gtid) not in self.ranks:
                continue
            if kind in _NVTX_MARKS or end is None:
                end = start
            start, end = self.ex.times("NVTX_EVENTS", start, end)
            name = text if isinstance(text, str) else (ex.string(text_id) or "[unnamed range]")
            u = uid(Kind.OP, self.ranks[_process(gtid)], "nvtx", row)
            attrs = {
                "domain": domains.get(domain, "default" if domain in (None, 0) else str(domain)),
                "nvtx_category": category,
            }
            out.append((u, start, end, gtid, name, "nvtx", Role.ANNOTATION, attrs))
        return out

    def _device_records(self) -> list[tuple[Any, ...]]:
        ex = self.ex
        out: list[tuple[Any, ...]] = []
        names = {"CUPTI_ACTIVITY_KIND_KERNEL": ("demangledName", "shortName", "mangledName")}
        base = ("rowid", "start", "end", "globalPid", "deviceId", "streamId", "correlationId")
        for row, start, end, pid, device, stream, corr, demangled, short, mangled in ex.rows(
            "CUPTI_ACTIVITY_KIND_KERNEL", base + names["CUPTI_ACTIVITY_KIND_KERNEL"]
        ):
            start, end = self.ex.times("CUPTI_ACTIVITY_KIND_KERNEL", start, end)
            name = ex.string(demangled) or ex.string(short) or ex.string(mangled) or "[unnamed kernel]"
            kind = "communication" if is_communication_kernel(name) else "compute"
            u = uid(Kind.KERNEL, self.ranks.get(pid, 0), "k", row)
            out.append((u, start, end, pid, device, stream, corr, name, kind, None, None))
        for row, start, end, pid, device, stream, corr, nbytes, copy_kind in ex.rows(
            "CUPTI_ACTIVITY_KIND_MEMCPY", (*base, "bytes", "copyKind")
        ):
            start, end = self.ex.times("CUPTI_ACTIVITY_KIND_MEMCPY", start, end)
            direction = _COPY_KINDS.get(copy_kind) if isinstance(copy_kind, int) else None
            u = uid(Kind.KERNEL, self.ranks.get(pid, 0), "cp", row)
            name = f"Memcpy {direction or 'Unknown'}"
            out.append((u, start, end, pid, device, stream, corr, name, "memcpy", _int(nbytes), direction))
        for row, start, end, pid, device, stream, corr, nbytes in ex.rows(
            "CUPTI_ACTIVITY_KIND_MEMSET", (*base, "bytes")
        ):
            start, end = self.ex.times("CUPTI_ACTIVITY_KIND_MEMSET", start, end)
            u = uid(Kind.KERNEL, self.ranks.get(pid, 0), "ms", row)
            out.append((u, start, end, pid, device, stream, corr, "Memset", "memset", _int(nbytes), None))
        return [r for r in out if r[3] in self.ranks]

    def _thread_names(self) -> dict[int, str]:
        return {
            gtid: name
            for name_id, gtid in self.ex.rows("ThreadNames", ("nameId", "globalTid"))
            if isinstance(gtid, int) and (name := self.ex.string(name_id)) is not None
        }

    # --- helpers ------------------------------------------------------------------------

    def _us(self, t: int) -> float:
        return (t - self.origin) / 1000.0

    def _label(self, process: int, name: str, multi: bool) -> str:
        return f"rank{self.ranks[process]}/{name}" if multi else name

    def _device(self, b: FramesBuilder, process: int, device: Any, multi: bool) -> str:
        key = (process, device if isinstance(device, int) else -1)
        if key not in self.devices:
            u = b.device(self._label(process, f"cuda:{key[1]}", multi), "GPU")
            if multi:
                b.devices[u]["rank"] = self.ranks[process]
            self.devices[key] = u
        return self.devices[key]

    def _syncs(self, b: FramesBuilder, kernels: dict[tuple[int, int, int], list[tuple[int, str]]]) -> None:
        """Host waits from the synchronization records (module docstring)."""
        by_device: dict[tuple[int, int], list[tuple[int, int, int]]] = defaultdict(list)
        for key, ks in kernels.items():
            ks.sort()
            by_device[(key[0], key[1])].append(key)
        cols = ("end", "globalPid", "deviceId", "streamId", "correlationId")
        for end, pid, device, stream, corr in self.ex.rows("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", cols):
            call = self.calls.get((pid, corr))
            if call is None or not isinstance(end, int):
                continue
            if isinstance(stream, int) and stream != _NO_STREAM:
                keys = [(pid, device, stream)]
            else:
                keys = by_device.get((pid, device), [])
            for key in keys:
                on_stream = kernels.get(key) or []
                i = bisect.bisect_left(on_stream, (end, "")) - 1
                if i >= 0:
                    b.sync(on_stream[i][1], call.uid, "host_wait")

    def _meta(self, without_launch: int) -> dict[str, Any]:
        ex = self.ex
        meta: dict[str, Any] = {"kernels_without_launch": without_launch}
        for key in ("EXPORT_PRODUCT_VERSION", "EXPORT_SCHEMA_VERSION"):
            if key in ex.meta:
                meta[key.lower()] = ex.meta[key]
        gpus = [
            {"id": i, "name": name} for i, name in ex.rows("TARGET_INFO_GPU", ("id", "name")) if isinstance(name, str)
        ]
        if gpus:
            meta["gpus"] = json.dumps(gpus)
        not_read = {}
        for table in _NOT_READ:
            if ex.has(table):
                n = ex.count(table)
                if n:
                    not_read[table] = n
        if not_read:
            meta["not_read"] = json.dumps(not_read)
        if len(self.ranks) > 1:
            meta["processes"] = json.dumps(
                {str(r): (p >> 24) & 0xFFFFFF for p, r in sorted(self.ranks.items(), key=lambda x: x[1])}
            )
        return meta


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None
