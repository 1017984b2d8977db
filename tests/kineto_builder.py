"""A small hand-built Kineto GPU trace whose answers are worked out by hand
in tests/test_format_pytorch_kineto.py.

One host thread (pid 100, tid 100) runs, inside ``ProfilerStep#1``
[0, 200) us: ``aten::mm`` [10, 40) launching ``gemm`` on stream 7
[25, 65); ``aten::add`` [45, 60) launching ``add_kernel`` on stream 7
[70, 80) (queued behind gemm); ``aten::copy_`` [62, 90) whose
``cudaMemcpyAsync`` [64, 88) issues a 4,000-byte DtoH copy on stream 8
[66, 86); ``nccl:all_reduce`` [92, 100) launching an NCCL kernel on stream 9
[100, 140); ``aten::zero_`` [102, 110) whose ``cudaMemsetAsync`` [103, 106)
issues a 1,024-byte memset on stream 7 [108, 111); and
``cudaDeviceSynchronize`` [115, 145) with its Context Sync record. CUDA
memory on device 0: A = 1,000 bytes at 11 freed at 61, B = 4,000 at 46 freed
at 150, C = 500 at 63 never freed; a free at 5 of an address never
allocated; CPU memory: 64 bytes at 30. Times are written as ``T0 + t`` with
a fractional T0, relative to ``baseTimeNanoseconds``.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

T0 = 5_000_000_123.456  # us after baseTimeNanoseconds
BASE_NS = 1_700_000_000_000_000_000


def _x(cat, name, t, dur, pid=100, tid=100, **args):
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": pid,
        "tid": tid,
        "ts": round(T0 + t, 3),
        "dur": dur,
        "args": args,
    }


def _mem(t, addr, nbytes, total, dev_type=1, dev_id=0):
    return {
        "ph": "i",
        "cat": "cpu_instant_event",
        "s": "t",
        "name": "[memory]",
        "pid": 100,
        "tid": 100,
        "ts": round(T0 + t, 3),
        "args": {
            "Total Reserved": 0,
            "Total Allocated": total,
            "Bytes": nbytes,
            "Device Type": dev_type,
            "Device Id": dev_id,
            "Addr": addr,
        },
    }


def events() -> list[dict]:
    k = dict(pid=0)
    return [
        {"ph": "M", "name": "process_name", "pid": 100, "tid": 0, "args": {"name": "python"}},
        _x("user_annotation", "ProfilerStep#1", 0, 200),
        _x("cpu_op", "aten::mm", 10, 30, **{"Input Dims": [[8, 16], [16, 4]], "Input type": ["float", "float"]}),
        _x("cuda_runtime", "cudaLaunchKernel", 12, 8, correlation=1),
        _x("kernel", "gemm", 25, 40, tid=7, device=0, stream=7, correlation=1, **k),
        _x("cpu_op", "aten::add", 45, 15),
        _x("cuda_runtime", "cudaLaunchKernel", 47, 5, correlation=2),
        _x("kernel", "add_kernel", 70, 10, tid=7, device=0, stream=7, correlation=2, **k),
        _x("cpu_op", "aten::copy_", 62, 28),
        _x("cuda_runtime", "cudaMemcpyAsync", 64, 24, correlation=3),
        _x(
            "gpu_memcpy",
            "Memcpy DtoH (Device -> Pageable)",
            66,
            20,
            tid=8,
            device=0,
            stream=8,
            correlation=3,
            bytes=4000,
            **k,
        ),
        _x("cpu_op", "nccl:all_reduce", 92, 8),
        _x("cuda_runtime", "cudaLaunchKernel", 93, 4, correlation=4),
        _x("kernel", "ncclKernel_AllReduce_RING_LL_Sum_float", 100, 40, tid=9, device=0, stream=9, correlation=4, **k),
        _x("cpu_op", "aten::zero_", 102, 8),
        _x("cuda_runtime", "cudaMemsetAsync", 103, 3, correlation=5),
        _x("gpu_memset", "Memset (Device)", 108, 3, tid=7, device=0, stream=7, correlation=5, bytes=1024, **k),
        _x("cuda_runtime", "cudaDeviceSynchronize", 115, 30, correlation=6),
        _x(
            "cuda_sync",
            "Context Sync",
            116,
            29,
            tid=-1,
            device=0,
            stream=-1,
            correlation=6,
            cuda_sync_kind="Context Sync",
            **k,
        ),
        {"ph": "s", "id": 1, "pid": 100, "tid": 100, "ts": round(T0 + 12, 3), "cat": "ac2g", "name": "ac2g"},
        {"ph": "f", "id": 1, "pid": 0, "tid": 7, "ts": round(T0 + 25, 3), "cat": "ac2g", "name": "ac2g", "bp": "e"},
        _mem(5, 999, -77, 0),
        _mem(11, 1, 1000, 1000),
        _mem(30, 7, 64, 64, dev_type=0, dev_id=-1),
        _mem(46, 2, 4000, 5000),
        _mem(61, 1, -1000, 4000),
        _mem(63, 3, 500, 4500),
        _mem(150, 2, -4000, 500),
        {
            "ph": "X",
            "cat": "Trace",
            "name": "PyTorch Profiler (0)",
            "pid": "Spans",
            "tid": "PyTorch Profiler",
            "ts": round(T0 - 50, 3),
            "dur": 400,
            "args": {},
        },
    ]


def document(rank: int | None = None, base_ns: int = BASE_NS) -> dict:
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "Test GPU"}]}
    if rank is not None:
        doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 2}
    doc["baseTimeNanoseconds"] = base_ns
    doc["traceEvents"] = events()
    doc["traceName"] = "hand-built"
    return doc


def write(path: Path, doc: dict | None = None, *, gz: bool = True) -> Path:
    text = json.dumps(doc if doc is not None else document())
    if gz:
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        path.write_text(text)
    return path
