"""Small hand-built traces for the analysis tests, as canonical frames.

Every number the tests expect is worked out by hand from the tables below
(see the comments in :func:`small_gpu`); nothing here calls the code under
test except :func:`store`, which runs the real enrichment and loader.

``small_gpu`` (all times in us, one step; span = 77, the last kernel end):

    op  name                                                 type                  seq  kernels (stream: [start, end))       weight
    A   net/conv1/Conv2D                                     Conv2D                 0   s1 [0,10)                              10
    B   net/conv2/Conv2D                                     Conv2D                 1   s1 [10,30), s2 [15,25)                 30
    C   net/relu/Relu                                        Relu                   2   none: own record 12..17                 5
    D   gradients/net/conv1/Conv2D_grad/Conv2DBackpropInput  Conv2DBackpropInput    3   s1 [40,55), s1 [45,50) (overlap)       20
    E   _SOURCE                                              NoOp                   4   none: own record 0..4                   4
    F   net/copy                                             MEMCPYHtoD (no phase)  5   s3 [20,40) HtoD 2000 B                 20
    F2  net/copy2                                            MEMCPYDtoH (no phase)  6   s3 [60,70) 4000 B, s3 [72,77) 1000 B   15
    H   net/p2p                                              MEMCPYDtoD  (GPU:1)    7   s4 [0,10) DtoD 800 B                   10
    I   net/late/Add                                         Add                    8   s1 [60,62)                              2
    J   net/mystery                                          MEMCPY      (GPU:1)    9   s4 [20,24) copy, no size/direction      4
    K   net/unused                                           Conv2D      not executed                                            0
    L   SGD/update                                           ApplyGradientDescent  10   none: own record 56..59                 3

Dependencies: A->B, A->C, B->D, C->D (data), E->I (control), K->C (data,
from an op that did not execute, so the DAG ignores it).
"""

from __future__ import annotations

import copy

from tracegraph.ingest.enrich import enrich
from tracegraph.ingest.formats.kit import scope_of
from tracegraph.ingest.frames import (
    ALLOCATION_COLUMNS,
    ALLOCATOR_COLUMNS,
    CONSUME_COLUMNS,
    DEP_COLUMNS,
    DEVICE_COLUMNS,
    KERNEL_COLUMNS,
    OP_COLUMNS,
    STREAM_COLUMNS,
    TENSOR_COLUMNS,
    TraceFrames,
    frame,
)
from tracegraph.ingest.graph_tables import trace_tables

GPU0, GPU1 = "dev:/device:GPU:0", "dev:/device:GPU:1"


def _op(uid, name, type_, seq, start, dur, phase="forward", device=GPU0, executed=True):
    return {
        "uid": f"op:{uid}",
        "name": name,
        "type": type_,
        "device": device,
        "seq": seq,
        "start_us": None if start is None else float(start),
        "end_us": None if start is None else float(start + dur),
        "dur_us": None if dur is None else float(dur),
        "phase": phase,
        "executed": executed,
        "attrs": "{}",
        "scope": scope_of(name),  # the format's (here: this builder's) name scope
    }


def _k(uid, op, stream, start, end, kind="compute", nbytes=None, direction=None):
    return {
        "uid": f"k:{uid}",
        "op": f"op:{op}",
        "stream": stream,
        "name": f"{op}-kernel-{uid}",
        "start_us": float(start),
        "end_us": float(end),
        "dur_us": float(end - start),
        "kind": kind,
        "bytes": nbytes,
        "direction": direction,
    }


def small_gpu() -> TraceFrames:
    tf = TraceFrames(framework="tensorflow", sources=["hand-built"], time_unit="us")
    tf.ops = frame(
        [
            _op("A", "net/conv1/Conv2D", "Conv2D", 0, 0, 2),
            _op("B", "net/conv2/Conv2D", "Conv2D", 1, 10, 2),
            _op("C", "net/relu/Relu", "Relu", 2, 12, 5),
            _op(
                "D",
                "gradients/net/conv1/Conv2D_grad/Conv2DBackpropInput",
                "Conv2DBackpropInput",
                3,
                40,
                1,
                phase="backward",
            ),
            _op("E", "_SOURCE", "NoOp", 4, 0, 4, phase="other"),
            _op("F", "net/copy", "MEMCPYHtoD", 5, 20, 20, phase=None),
            _op("F2", "net/copy2", "MEMCPYDtoH", 6, 60, 17, phase=None),
            _op("H", "net/p2p", "MEMCPYDtoD", 7, 0, 12, device=GPU1),
            _op("I", "net/late/Add", "Add", 8, 60, 1),
            _op("J", "net/mystery", "MEMCPY", 9, 20, 4, device=GPU1),
            _op("K", "net/unused", "Conv2D", None, None, None, executed=False),
            _op("L", "SGD/update", "ApplyGradientDescent", 10, 56, 3, phase="optimizer"),
        ],
        OP_COLUMNS,
    )
    s1, s2, s3, s4 = (
        "s:/device:GPU:0/stream:1",
        "s:/device:GPU:0/stream:2",
        "s:/device:GPU:0/memcpy",
        "s:/device:GPU:1/memcpy",
    )
    tf.devices = frame(
        [{"uid": GPU0, "name": "/device:GPU:0", "kind": "GPU"}, {"uid": GPU1, "name": "/device:GPU:1", "kind": "GPU"}],
        DEVICE_COLUMNS,
    )
    tf.streams = frame(
        [
            {"uid": s1, "device": GPU0, "name": "stream:1", "kind": "compute"},
            {"uid": s2, "device": GPU0, "name": "stream:2", "kind": "compute"},
            {"uid": s3, "device": GPU0, "name": "memcpy", "kind": "memcpy"},
            {"uid": s4, "device": GPU1, "name": "memcpy", "kind": "memcpy"},
        ],
        STREAM_COLUMNS,
    )
    tf.kernels = frame(
        [
            _k("a1", "A", s1, 0, 10),
            _k("b1", "B", s1, 10, 30),
            _k("b2", "B", s2, 15, 25),
            _k("d1", "D", s1, 40, 55),
            _k("d2", "D", s1, 45, 50),
            _k("i1", "I", s1, 60, 62),
            _k("f1", "F", s3, 20, 40, "memcpy", 2000, "HtoD"),
            _k("g1", "F2", s3, 60, 70, "memcpy", 4000, "DtoH"),
            _k("g2", "F2", s3, 72, 77, "memcpy", 1000, "DtoH"),
            _k("h1", "H", s4, 0, 10, "memcpy", 800, "DtoD"),
            _k("j1", "J", s4, 20, 24, "memcpy"),
        ],
        KERNEL_COLUMNS,
    )
    tf.deps = frame(
        [
            {"src": "op:A", "dst": "op:B", "kind": "data"},
            {"src": "op:A", "dst": "op:C", "kind": "data"},
            {"src": "op:B", "dst": "op:D", "kind": "data"},
            {"src": "op:C", "dst": "op:D", "kind": "data"},
            {"src": "op:E", "dst": "op:I", "kind": "control"},
            {"src": "op:K", "dst": "op:C", "kind": "data"},
        ],
        DEP_COLUMNS,
    )
    tf.tensors = frame(
        [
            {
                "uid": "t:A:0",
                "name": "net/conv1/Conv2D:0",
                "dtype": "float",
                "shape": "25",
                "bytes": 100,
                "producer": "op:A",
                "output_index": 0,
            },
            {
                "uid": "t:B:0",
                "name": "net/conv2/Conv2D:0",
                "dtype": "float",
                "shape": "50",
                "bytes": 200,
                "producer": "op:B",
                "output_index": 0,
            },
            {
                "uid": "t:C:0",
                "name": "net/relu/Relu:0",
                "dtype": "float",
                "shape": "17",
                "bytes": 70,
                "producer": "op:C",
                "output_index": 0,
            },
        ],
        TENSOR_COLUMNS,
    )
    tf.consumes = frame(
        [
            {"op": "op:B", "tensor": "t:A:0", "input_index": 0},
            {"op": "op:C", "tensor": "t:A:0", "input_index": 0},
            {"op": "op:D", "tensor": "t:B:0", "input_index": 0},
            {"op": "op:D", "tensor": "t:C:0", "input_index": 1},
            {"op": "op:D", "tensor": "t:B:0", "input_index": 2},
        ],
        CONSUME_COLUMNS,
    )
    g0, g1 = "mem:GPU_0_bfc", "mem:GPU_1_bfc"
    tf.allocators = frame(
        [{"uid": g0, "name": "GPU_0_bfc", "device": GPU0}, {"uid": g1, "name": "GPU_1_bfc", "device": GPU1}],
        ALLOCATOR_COLUMNS,
    )
    # GPU_0_bfc timeline: t0 +100 ->100, t5 +50 ->150, t8 -50 ->100, t10 +200 ->300, t12 +70 ->370 (peak),
    # t30 -100 ->270, t40 +100 ->370 (tie, later), t45 -100 ->270, t60 -200 ->70.
    tf.allocations = frame(
        [
            {
                "uid": "a:1",
                "allocator": g0,
                "bytes": 100,
                "alloc_us": 0.0,
                "free_us": 30.0,
                "kind": "output",
                "op": "op:A",
                "tensor": "t:A:0",
            },
            {"uid": "a:2", "allocator": g0, "bytes": 50, "alloc_us": 5.0, "free_us": 8.0, "kind": "temp", "op": "op:A"},
            {
                "uid": "a:3",
                "allocator": g0,
                "bytes": 200,
                "alloc_us": 10.0,
                "free_us": 60.0,
                "kind": "output",
                "op": "op:B",
                "tensor": "t:B:0",
            },
            {
                "uid": "a:4",
                "allocator": g0,
                "bytes": 70,
                "alloc_us": 12.0,
                "free_us": None,
                "kind": "output",
                "op": "op:C",
                "tensor": "t:C:0",
            },
            {
                "uid": "a:5",
                "allocator": g0,
                "bytes": 100,
                "alloc_us": 40.0,
                "free_us": 45.0,
                "kind": "temp",
                "op": "op:D",
            },
            {
                "uid": "a:6",
                "allocator": g0,
                "bytes": 999,
                "alloc_us": None,
                "free_us": None,
                "kind": "persistent",
                "op": "op:A",
            },
            {
                "uid": "a:7",
                "allocator": g1,
                "bytes": 40,
                "alloc_us": 0.0,
                "free_us": 10.0,
                "kind": "temp",
                "op": "op:H",
            },
        ],
        ALLOCATION_COLUMNS,
    )
    tf.check()
    return tf


def slowed(tf: TraceFrames, op_uid: str, factor: float) -> TraceFrames:
    """A deep copy of ``tf`` (not yet enriched) whose op ``op_uid`` runs
    ``factor`` times longer: its own record and every kernel it launched
    keep their start and stretch their duration."""
    out = copy.deepcopy(tf)
    o = out.ops["uid"] == op_uid
    out.ops.loc[o, "dur_us"] = out.ops.loc[o, "dur_us"] * factor
    out.ops.loc[o, "end_us"] = out.ops.loc[o, "start_us"] + out.ops.loc[o, "dur_us"]
    k = out.kernels["op"] == op_uid
    out.kernels.loc[k, "dur_us"] = out.kernels.loc[k, "dur_us"] * factor
    out.kernels.loc[k, "end_us"] = out.kernels.loc[k, "start_us"] + out.kernels.loc[k, "dur_us"]
    return out


def chain(n: int, type_: str = "Mul", weights=None) -> TraceFrames:
    """Ops c0 -> c1 -> ... -> c{n-1} (data edges), no kernels, no memory;
    op ci weighs ``weights[i]`` (default 1) through its own record."""
    weights = weights or [1.0] * n
    tf = TraceFrames(framework="tensorflow", sources=["hand-built"], time_unit="us")
    tf.devices = frame([{"uid": GPU0, "name": "/device:GPU:0", "kind": "GPU"}], DEVICE_COLUMNS)
    start, rows = 0.0, []
    for i in range(n):
        rows.append(_op(f"c{i}", f"c{i}", type_, i, start, weights[i]))
        start += weights[i]
    tf.ops = frame(rows, OP_COLUMNS)
    tf.deps = frame([{"src": f"op:c{i}", "dst": f"op:c{i + 1}", "kind": "data"} for i in range(n - 1)], DEP_COLUMNS)
    tf.check()
    return tf


def store(graph, tf: TraceFrames, name: str) -> str:
    """Enrich and write ``tf`` as trace ``name`` (dropped by the ``graph``
    fixture after the test)."""
    summary = enrich(tf)
    graph.store_trace(name, trace_tables(tf, summary))
    return name
