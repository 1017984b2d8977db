"""Realistic synthetic TensorFlow ``StepStats`` traces, scalable by op count.

One training step of a deep residual CNN on one GPU, as TF 1.x's
``RunMetadata.step_stats`` records it:

* a layered forward pass (variable, read, Conv2D, FusedBatchNormV3, Relu,
  a residual AddV2 every third layer, MaxPool between stages), a loss, the
  mirrored backward pass (ReluGrad, FusedBatchNormGradV3 with ``bn:1`` and
  ``bn:2`` inputs, Conv2DBackpropFilter/Input, AddN where a residual
  gradient joins) and one ResourceApplyGradientDescent per layer, grouped by
  NoOps with ``^control`` inputs;
* op-level records on ``/job:localhost/replica:0/task:0/device:GPU:0`` (and
  a few on ``.../CPU:0``) with ``timeline_label`` ``name = Type(in, in:1,
  ^ctrl)``, outputs with ``allocation_description``, ``memory`` entries
  with ``allocation_records`` (an output is allocated at op start and freed
  when its last consumer ends; temp buffers are freed at the op's end; the
  loss is never freed) and ``memory_stats``;
* 1-3 kernels per op named ``op:Type`` on two pairs of compute streams
  (``/device:GPU:0/stream:13..16``, one pair per executor lane), copies
  (``MEMCPYHtoD``/``DtoH``/``DtoD``) on ``stream:17`` repeated on
  ``/device:GPU:0/memcpy``, and every kernel repeated on ``stream:all``.

Deterministic for a given (ops, seed). The text is written by a dedicated
writer that produces exactly ``text_format.MessageToString`` of the
message (tests/test_bench_generator.py checks it) but about 20x faster.

    python -m bench.generate --ops 100000 [--seed 0] [--out bench/out]
"""

from __future__ import annotations

import argparse
import bisect
import json
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

GPU_DEV = "/job:localhost/replica:0/task:0/device:GPU:0"
CPU_DEV = "/job:localhost/replica:0/task:0/device:CPU:0"
STREAM_DEV = "/device:GPU:0/stream:{}"
MEMCPY_DEV = "/device:GPU:0/memcpy"
GPU_ALLOC, CPU_ALLOC = "GPU_0_bfc", "cpu"
LANE_STREAMS = ((13, 14), (15, 16))
COPY_STREAM = 17
BASE_US = 1_700_000_000_000_000
DT_FLOAT, DT_INT32, DT_INT64, DT_RESOURCE = 1, 3, 9, 20
DTYPE_NAMES = {DT_FLOAT: "DT_FLOAT", DT_INT32: "DT_INT32", DT_INT64: "DT_INT64", DT_RESOURCE: "DT_RESOURCE"}
DTYPE_SIZES = {DT_FLOAT: 4, DT_INT32: 4, DT_INT64: 8, DT_RESOURCE: 0}
OUT_DIR = Path(__file__).resolve().parent / "out"


# ---------------------------------------------------------------- records


@dataclass
class AllocDesc:
    """``AllocationDescription``."""

    requested: int
    allocated: int
    allocator: str
    alloc_id: int
    single_ref: bool
    ptr: int


@dataclass
class Output:
    """``NodeOutput``: slot, dtype, dims, allocation description."""

    slot: int
    dtype: int
    dims: list
    desc: AllocDesc | None


@dataclass
class Memory:
    """``AllocatorMemoryUsed`` with its ``allocation_records`` (time, bytes)."""

    allocator: str
    total: int = 0
    peak: int = 0
    live: int = 0
    in_use: int = 0
    records: list = field(default_factory=list)


@dataclass
class Record:
    """``NodeExecStats``. ``stats`` (temp, persistent) sets ``memory_stats``."""

    name: str
    start: int
    end_rel: int
    op_start_rel: int = 0
    op_end_rel: int = 0
    memory: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    label: str = ""
    scheduled: int = 0
    stats: tuple | None = None


@dataclass
class Trace:
    """A generated step: devices in ``dev_stats`` order with their records."""

    n_ops: int
    seed: int
    devices: list  # [(device name, [Record])]
    origin: int

    def allocation_events(self) -> dict:
        """Per allocator, every ``(alloc_micros, alloc_bytes)`` record."""
        out: dict = {}
        for _, records in self.devices:
            for r in records:
                for m in r.memory:
                    out.setdefault(m.allocator, []).extend(m.records)
        return out

    def peak_memory(self) -> dict:
        """Reference peak per allocator, straight from the allocation records:
        ``{allocator: (peak_bytes, peak_us since the origin)}``. The running
        sum after all events at one time (frees before allocations); the
        first time the maximum is reached."""
        return reference_peaks(self.allocation_events(), self.origin)

    def counts(self) -> dict:
        ops = sum(len(r) for d, r in self.devices if "/stream:" not in d and not d.endswith("/memcpy"))
        kernels = sum(len(r) for d, r in self.devices if "/stream:" in d and not d.endswith("stream:all"))
        return {"op_records": ops, "kernel_records": kernels}


def reference_peaks(events: dict, origin: int) -> dict:
    out = {}
    for allocator, evs in events.items():
        if not evs:
            continue
        live, best, best_t = 0, None, None
        ordered = sorted(evs, key=lambda e: (e[0], e[1] >= 0))
        i = 0
        while i < len(ordered):
            t = ordered[i][0]
            while i < len(ordered) and ordered[i][0] == t:
                live += ordered[i][1]
                i += 1
            if best is None or live > best:
                best, best_t = live, t
        out[allocator] = (best, float(best_t - origin))
    return out


# ---------------------------------------------------------------- the model


@dataclass
class _Op:
    name: str
    type: str
    inputs: list  # label arguments: "x", "x:1", "^y"
    shapes: list = field(default_factory=list)  # one per output
    dtypes: list | None = None
    kernels: int = 0
    temp: int = 0
    cpu: bool = False
    persistent: int = 0
    forwards: str | None = None  # output aliases this op's input (Identity of a variable)
    host: bool = False  # outputs in host memory: no allocation records
    copies: list = field(default_factory=list)  # owned copy kernels: [(suffix, direction, bytes)]
    keep: bool = False  # outputs never freed in the step
    # filled by the schedule
    start: int = 0
    end: int = 0
    lane: int = 0


def _nbytes(shape, dtype=DT_FLOAT) -> int:
    n = DTYPE_SIZES[dtype] or 8
    for d in shape:
        n *= d
    return n


def _model(layers: int, batch: int = 8) -> list:
    """The op list of the step, in a topological order."""
    ops: list = []
    add = ops.append
    stages = [(56, 64), (28, 128), (14, 256), (7, 512)]
    add(_Op("_SOURCE", "NoOp", [], cpu=True))
    add(
        _Op(
            "IteratorGetNext",
            "IteratorGetNext",
            ["IteratorV2"],
            [[batch, 224, 224, 3], [batch]],
            [DT_FLOAT, DT_INT64],
            cpu=True,
        )
    )
    x, x_shape = "IteratorGetNext", [batch, 224, 224, 3]
    info = []
    for i in range(layers):
        stage = min(3, 4 * i // max(layers, 1))
        hw, c = stages[stage]
        s = f"stage{stage}/unit{i}"
        cin = x_shape[-1]
        kshape = [3, 3, cin, c]
        act = [batch, hw, hw, c]
        add(_Op(f"{s}/conv/kernel", "VarHandleOp", [], [[]], [DT_RESOURCE], persistent=_nbytes(kshape)))
        add(
            _Op(
                f"{s}/conv/Conv2D/ReadVariableOp",
                "ReadVariableOp",
                [f"{s}/conv/kernel"],
                [kshape],
                forwards=f"{s}/conv/kernel",
            )
        )
        add(
            _Op(
                f"{s}/conv/Conv2D",
                "Conv2D",
                [x, f"{s}/conv/Conv2D/ReadVariableOp"],
                [act],
                kernels=2,
                temp=_nbytes(act) // 4,
            )
        )
        for v, read in (("gamma", "ReadVariableOp"), ("beta", "ReadVariableOp_1")):
            add(_Op(f"{s}/bn/{v}", "VarHandleOp", [], [[]], [DT_RESOURCE], persistent=_nbytes([c])))
            add(_Op(f"{s}/bn/{read}", "ReadVariableOp", [f"{s}/bn/{v}"], [[c]], forwards=f"{s}/bn/{v}"))
        add(
            _Op(
                f"{s}/bn/FusedBatchNormV3",
                "FusedBatchNormV3",
                [f"{s}/conv/Conv2D", f"{s}/bn/ReadVariableOp", f"{s}/bn/ReadVariableOp_1"],
                [act, [c], [c]],
                kernels=2,
            )
        )
        out = f"{s}/Relu"
        add(_Op(out, "Relu", [f"{s}/bn/FusedBatchNormV3"], [act], kernels=1))
        residual = None
        if i % 3 == 2 and info and info[-2]["act"] == act and info[-2]["act"] == info[-1]["act"]:
            residual = info[-2]["out"]
            add(_Op(f"{s}/add", "AddV2", [out, residual], [act], kernels=1))
            out = f"{s}/add"
        pool = None
        next_stage = min(3, 4 * (i + 1) // max(layers, 1))
        if i + 1 < layers and next_stage != stage:
            pool_shape = [batch, hw // 2, hw // 2, c]
            add(_Op(f"{s}/MaxPool", "MaxPool", [out], [pool_shape], kernels=1))
            pool, out = out, f"{s}/MaxPool"
            act = pool_shape
        info.append(
            {
                "s": s,
                "x": x,
                "x_shape": x_shape,
                "out": out,
                "act": act,
                "residual": residual,
                "pool": pool,
                "kshape": kshape,
                "relu_shape": [batch, hw, hw, c],
            }
        )
        x, x_shape = out, act
    add(_Op("loss/Mean", "Mean", [x, "loss/Const"], [[]], kernels=1, keep=True))
    add(
        _Op(
            "gradients/Fill",
            "Fill",
            ["gradients/Shape", "gradients/grad_ys_0"],
            [x_shape],
            kernels=1,
            copies=[("Snapshot:MEMCPYDtoD", "DtoD", _nbytes(x_shape))],
        )
    )
    g = "gradients/Fill"
    pending: dict = {}
    updates = []
    for i in reversed(range(layers)):
        d = info[i]
        s = d["s"]
        if i in pending:
            add(_Op(f"gradients/{s}/AddN", "AddN", [g, pending.pop(i)], [d["act"]], kernels=1))
            g = f"gradients/{s}/AddN"
        if d["pool"]:
            add(
                _Op(
                    f"gradients/{s}/MaxPool_grad/MaxPoolGrad",
                    "MaxPoolGrad",
                    [d["pool"], d["out"], g],
                    [d["relu_shape"]],
                    kernels=1,
                )
            )
            g = f"gradients/{s}/MaxPool_grad/MaxPoolGrad"
        if d["residual"]:
            pending[i - 2] = g  # the residual input gets the same gradient
        relu = f"gradients/{s}/Relu_grad/ReluGrad"
        add(
            _Op(
                relu,
                "ReluGrad",
                [g, f"{s}/Relu"],
                [d["relu_shape"]],
                kernels=1,
                copies=[("Snapshot:MEMCPYDtoD", "DtoD", _nbytes(d["relu_shape"]))] if i % 10 == 0 else [],
            )
        )
        c = d["kshape"][-1]
        shapes = f"gradients/{s}/conv/Conv2D_grad/ShapeN"
        add(
            _Op(
                shapes,
                "ShapeN",
                [d["x"], f"{s}/conv/Conv2D/ReadVariableOp"],
                [[4], [4]],
                [DT_INT32, DT_INT32],
                host=True,
            )
        )
        bng = f"gradients/{s}/bn/FusedBatchNormV3_grad/FusedBatchNormGradV3"
        add(
            _Op(
                bng,
                "FusedBatchNormGradV3",
                [
                    relu,
                    f"{s}/conv/Conv2D",
                    f"{s}/bn/ReadVariableOp",
                    f"{s}/bn/FusedBatchNormV3:1",
                    f"{s}/bn/FusedBatchNormV3:2",
                ],
                [d["relu_shape"], [c], [c]],
                kernels=2,
                temp=_nbytes([c]) * 4,
            )
        )
        fg = f"gradients/{s}/conv/Conv2D_grad/Conv2DBackpropFilter"
        add(
            _Op(
                fg,
                "Conv2DBackpropFilter",
                [d["x"], f"{shapes}:1", bng],
                [d["kshape"]],
                kernels=3,
                temp=_nbytes(d["relu_shape"]) // 4,
            )
        )
        upd = f"GradientDescent/update_{s}/conv/kernel/ResourceApplyGradientDescent"
        add(
            _Op(
                upd,
                "ResourceApplyGradientDescent",
                [f"{s}/conv/kernel", "GradientDescent/learning_rate", fg],
                kernels=1,
            )
        )
        updates.append(upd)
        if len(updates) % 8 == 0:
            add(_Op(f"GradientDescent/group_deps_{len(updates) // 8}", "NoOp", [f"^{u}" for u in updates[-8:]]))
        if i > 0:
            gi = f"gradients/{s}/conv/Conv2D_grad/Conv2DBackpropInput"
            add(
                _Op(
                    gi,
                    "Conv2DBackpropInput",
                    [shapes, f"{s}/conv/Conv2D/ReadVariableOp", bng],
                    [d["x_shape"]],
                    kernels=2,
                    temp=_nbytes(d["x_shape"]) // 4,
                )
            )
            g = gi
    groups = [f"^GradientDescent/group_deps_{k}" for k in range(1, len(updates) // 8 + 1)]
    rest = [f"^{u}" for u in updates[len(updates) // 8 * 8 :]]
    add(_Op("GradientDescent", "NoOp", groups + rest))
    add(_Op("_retval_loss/Mean_0_0", "_Retval", ["loss/Mean/_21"], cpu=True))
    return ops


def _ops(n_ops: int) -> list:
    """The model with as many layers as fit in ``n_ops``, padded with small
    summary ops to exactly ``n_ops`` (at least one layer)."""
    lo, hi = 1, max(1, n_ops // 8)
    while lo < hi:  # the largest layer count whose model fits
        mid = (lo + hi + 1) // 2
        if len(_model(mid)) <= n_ops:
            lo = mid
        else:
            hi = mid - 1
    ops = _model(lo)
    tail = ops.pop()  # _retval stays last
    k = 0
    while len(ops) + 1 < n_ops:
        ops.append(_Op(f"summaries/stat_{k}/Identity", "Identity", ["loss/Mean"], [[]], kernels=1))
        k += 1
    ops.append(tail)
    return ops


# ---------------------------------------------------------------- schedule


def generate(n_ops: int, seed: int = 0) -> Trace:
    """One step of about ``n_ops`` executed ops (exactly, from ~30 ops up)."""
    rng = random.Random(seed)
    ops = _ops(n_ops)
    by_name = {o.name: o for o in ops}
    lanes = [BASE_US, BASE_US]
    cpu_free = BASE_US
    copy_free = BASE_US
    streams: dict = {s: [] for pair in LANE_STREAMS for s in pair}
    streams[COPY_STREAM] = []
    memcpy_dev: list = []
    copy_edges: list = []
    edge = 100
    consumers: dict = {}
    for o in ops:
        ready = BASE_US
        for a in o.inputs:
            src = a[1:] if a.startswith("^") else a.rsplit(":", 1)[0] if a.rsplit(":", 1)[-1].isdigit() else a
            p = by_name.get(src)
            if p is not None:
                ready = max(ready, p.end)
                if not a.startswith("^"):
                    slot = int(a.rsplit(":", 1)[1]) if ":" in a and a.rsplit(":", 1)[1].isdigit() else 0
                    consumers.setdefault((src, slot), []).append(o)
        if o.name == "_SOURCE":
            o.start = BASE_US
        elif o.cpu:
            o.start = max(ready, cpu_free) + rng.randint(1, 4)
        else:
            o.lane = 0 if lanes[0] <= lanes[1] else 1
            o.start = max(ready, lanes[o.lane]) + rng.randint(1, 4)
        t = o.start + 2
        out_bytes = sum(_nbytes(s, dt) for s, dt in zip(o.shapes, o.dtypes or [DT_FLOAT] * len(o.shapes)))
        for k in range(o.kernels):
            dur = (
                max(2, int(out_bytes / 40_000 * rng.uniform(0.4, 1.6) / o.kernels)) if out_bytes else rng.randint(2, 9)
            )
            stream = LANE_STREAMS[o.lane][k % 2]
            streams[stream].append((f"{o.name}:{o.type}", t, dur, ""))
            t += dur + rng.randint(0, 2)
        for suffix, direction, nbytes in o.copies:
            start = max(t, copy_free)
            dur = max(1, nbytes // 400_000)
            rec = (f"{o.name}:{suffix}", start, dur, f"MEMCPY{direction} {nbytes} bytes (Device to Device)")
            streams[COPY_STREAM].append(rec)
            memcpy_dev.append(rec)
            copy_free = t = start + dur + 1
        o.end = t + rng.randint(1, 3) if o.kernels or o.copies else o.start + rng.randint(2, 6)
        if o.cpu:
            cpu_free = o.end
        elif o.name != "_SOURCE":
            lanes[o.lane] = o.end
        # Host <-> device copies around the step: the input batch, the loss,
        # and every 16th weight gradient (edge_N_<op>: an op of its own).
        direction = (
            "HtoD"
            if o.name == "IteratorGetNext"
            else "DtoH"
            if o.name == "loss/Mean" or (o.type == "Conv2DBackpropFilter" and edge % 16 == 0)
            else None
        )
        if o.type == "Conv2DBackpropFilter":
            edge += 1
        if direction:
            nbytes = _nbytes(o.shapes[0])
            start = max(o.end + 1, copy_free)
            dur = max(1, nbytes // 100_000)
            rec = (
                f"edge_{edge}_{o.name}:MEMCPY{direction}",
                start,
                dur,
                f"MEMCPY{direction} {nbytes} bytes ({'Pinned to Device' if direction == 'HtoD' else 'Device to Pinned'})",
            )
            streams[COPY_STREAM].append(rec)
            memcpy_dev.append(rec)
            copy_edges.append(rec)
            copy_free = start + dur + 1
            edge += 1

    # Memory: outputs allocated at op start and freed when the last consumer
    # ends; temp buffers freed at op end; forwarded buffers not allocated.
    alloc_id = [1000]
    ptr = [0x7F00_0000_0000]

    def desc(allocator: str, nbytes: int, single: bool) -> AllocDesc:
        allocated = (nbytes + 255) // 256 * 256
        alloc_id[0] += 1
        ptr[0] += allocated + 256
        return AllocDesc(nbytes, allocated, allocator, alloc_id[0], single, ptr[0])

    records_of: dict = {}
    var_desc: dict = {}
    for o in ops:
        allocator = CPU_ALLOC if o.cpu else GPU_ALLOC
        mem = Memory(allocator)
        outputs = []
        dtypes = o.dtypes or [DT_FLOAT] * len(o.shapes)
        for slot, (shape, dt) in enumerate(zip(o.shapes, dtypes)):
            if o.type == "VarHandleOp":
                d = desc(allocator, 16, False)
                var_desc[o.name] = d
                outputs.append(Output(slot, dt, shape, d))
                continue
            if o.forwards:
                outputs.append(Output(slot, dt, shape, var_desc.get(o.forwards)))
                continue
            if o.host:
                outputs.append(Output(slot, dt, shape, None))
                continue
            nbytes = _nbytes(shape, dt)
            d = desc(allocator, nbytes, rng.random() < 0.7)
            outputs.append(Output(slot, dt, shape, d))
            mem.records.append((o.start + 1, d.allocated))
            users = consumers.get((o.name, slot))
            if o.keep:
                continue
            free_at = max(u.end for u in users) if users else o.end
            mem.records.append((max(free_at, o.start + 2), -d.allocated))
        if o.temp:
            tb = (o.temp + 255) // 256 * 256
            mem.records.append((o.start + 1, tb))
            mem.records.append((o.end, -tb))
        mem.records.sort(key=lambda r: r[0])
        records_of[o.name] = (mem, outputs)

    # allocator_bytes_in_use at each op's start, from the global timeline
    timeline: dict = {}
    for mem, _ in records_of.values():
        timeline.setdefault(mem.allocator, []).extend(mem.records)
    prefix = {}
    for allocator, evs in timeline.items():
        evs.sort(key=lambda e: (e[0], e[1] >= 0))
        times, sums, live = [], [], 0
        for t, b in evs:
            live += b
            times.append(t)
            sums.append(live)
        prefix[allocator] = (times, sums)

    op_records = {GPU_DEV: [], CPU_DEV: []}
    for o in ops:
        mem, outputs = records_of[o.name]
        rec = Record(
            o.name,
            o.start,
            o.end - o.start,
            op_start_rel=1,
            op_end_rel=max(1, o.end - o.start - 1),
            outputs=outputs,
            scheduled=o.start - rng.randint(2, 9),
            stats=(o.temp and (o.temp + 255) // 256 * 256, o.persistent),
        )
        if mem.records:
            allocs = [b for _, b in mem.records if b > 0]
            mem.total = sum(allocs)
            mem.peak = mem.total
            mem.live = sum(b for _, b in mem.records if b > 0) + sum(b for t, b in mem.records if b < 0 and t <= o.end)
            times, sums = prefix[mem.allocator]
            i = bisect.bisect_left(times, o.start)
            mem.in_use = max(0, sums[i - 1]) if i else 0
            label_prefix = f"[{mem.allocator} {mem.total / 2**20:.1f}MB {mem.peak / 2**20:.1f}MB] "
        else:
            label_prefix = ""
        # Ops that allocate nothing have no memory entry (except on the CPU).
        rec.memory = [mem] if mem.records or o.cpu else []
        rec.label = f"{label_prefix}{o.name} = {o.type}({', '.join(o.inputs)})"
        op_records[CPU_DEV if o.cpu else GPU_DEV].append(rec)

    def kernel_records(items):
        return [
            Record(name, start, dur, op_end_rel=dur, label=label)
            for name, start, dur, label in sorted(items, key=lambda k: (k[1], k[0]))
        ]

    devices = [
        (GPU_DEV, sorted(op_records[GPU_DEV], key=lambda r: r.start)),
        (CPU_DEV, sorted(op_records[CPU_DEV], key=lambda r: r.start)),
    ]
    for s in sorted(streams):
        devices.append((STREAM_DEV.format(s), kernel_records(streams[s])))
    devices.append((MEMCPY_DEV, kernel_records(memcpy_dev)))
    devices.append((STREAM_DEV.format("all"), kernel_records([k for s in sorted(streams) for k in streams[s]])))
    return Trace(n_ops=len(ops), seed=seed, devices=devices, origin=BASE_US)


# ---------------------------------------------------------------- writers


def text_chunks(trace: Trace):
    """The text format of the step, piece by piece (== MessageToString)."""
    for device, records in trace.devices:
        out = [f'dev_stats {{\n  device: "{device}"\n']
        a = out.append
        for r in records:
            a(f'  node_stats {{\n    node_name: "{r.name}"\n')
            if r.start:
                a(f"    all_start_micros: {r.start}\n")
            if r.op_start_rel:
                a(f"    op_start_rel_micros: {r.op_start_rel}\n")
            if r.op_end_rel:
                a(f"    op_end_rel_micros: {r.op_end_rel}\n")
            if r.end_rel:
                a(f"    all_end_rel_micros: {r.end_rel}\n")
            for m in r.memory:
                a(f'    memory {{\n      allocator_name: "{m.allocator}"\n')
                if m.total:
                    a(f"      total_bytes: {m.total}\n")
                if m.peak:
                    a(f"      peak_bytes: {m.peak}\n")
                if m.live:
                    a(f"      live_bytes: {m.live}\n")
                if m.in_use:
                    a(f"      allocator_bytes_in_use: {m.in_use}\n")
                for t, b in m.records:
                    a(f"      allocation_records {{\n        alloc_micros: {t}\n        alloc_bytes: {b}\n      }}\n")
                a("    }\n")
            for o in r.outputs:
                a("    output {\n")
                if o.slot:
                    a(f"      slot: {o.slot}\n")
                a(f"      tensor_description {{\n        dtype: {DTYPE_NAMES[o.dtype]}\n        shape {{\n")
                for d in o.dims:
                    a(f"          dim {{\n            size: {d}\n          }}\n")
                a("        }\n")
                d = o.desc
                if d is not None:
                    a("        allocation_description {\n")
                    if d.requested:
                        a(f"          requested_bytes: {d.requested}\n")
                    if d.allocated:
                        a(f"          allocated_bytes: {d.allocated}\n")
                    a(f'          allocator_name: "{d.allocator}"\n          allocation_id: {d.alloc_id}\n')
                    if d.single_ref:
                        a("          has_single_reference: true\n")
                    a(f"          ptr: {d.ptr}\n        }}\n")
                a("      }\n    }\n")
            if r.label:
                a(f'    timeline_label: "{r.label}"\n')
            if r.scheduled:
                a(f"    scheduled_micros: {r.scheduled}\n")
            if r.stats is not None:
                a("    memory_stats {\n")
                if r.stats[0]:
                    a(f"      temp_memory_size: {r.stats[0]}\n")
                if r.stats[1]:
                    a(f"      persistent_memory_size: {r.stats[1]}\n")
                a("    }\n")
            a("  }\n")
            if len(out) > 4096:
                yield "".join(out)
                out.clear()
        a("}\n")
        yield "".join(out)


def to_text(trace: Trace) -> str:
    return "".join(text_chunks(trace))


def to_message(trace: Trace):
    """The ``StepStats`` message (tensorboard.compat.proto.step_stats_pb2)."""
    from tensorboard.compat.proto import step_stats_pb2

    stats = step_stats_pb2.StepStats()
    for device, records in trace.devices:
        dev = stats.dev_stats.add()
        dev.device = device
        for r in records:
            n = dev.node_stats.add()
            n.node_name = r.name
            n.all_start_micros = r.start
            n.op_start_rel_micros = r.op_start_rel
            n.op_end_rel_micros = r.op_end_rel
            n.all_end_rel_micros = r.end_rel
            for m in r.memory:
                mm = n.memory.add()
                mm.allocator_name = m.allocator
                mm.total_bytes, mm.peak_bytes, mm.live_bytes = m.total, m.peak, m.live
                mm.allocator_bytes_in_use = m.in_use
                for t, b in m.records:
                    rec = mm.allocation_records.add()
                    rec.alloc_micros, rec.alloc_bytes = t, b
            for o in r.outputs:
                no = n.output.add()
                no.slot = o.slot
                td = no.tensor_description
                td.dtype = o.dtype
                td.shape.SetInParent()
                for d in o.dims:
                    td.shape.dim.add().size = d
                if o.desc is not None:
                    ad = td.allocation_description
                    ad.requested_bytes, ad.allocated_bytes = o.desc.requested, o.desc.allocated
                    ad.allocator_name, ad.allocation_id = o.desc.allocator, o.desc.alloc_id
                    ad.has_single_reference, ad.ptr = o.desc.single_ref, o.desc.ptr
            n.timeline_label = r.label
            n.scheduled_micros = r.scheduled
            if r.stats is not None:
                n.memory_stats.SetInParent()
                n.memory_stats.temp_memory_size = r.stats[0]
                n.memory_stats.persistent_memory_size = r.stats[1]
    return stats


def write(trace: Trace, out_dir: Path, stem: str | None = None) -> dict:
    """``<stem>.pbtxt``, ``<stem>.pb`` and ``<stem>.json`` (the reference:
    op/kernel record counts and peak memory per allocator) in ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = stem or f"stepstats-{trace.n_ops}-s{trace.seed}"
    text, binary, meta = (out_dir / f"{stem}{ext}" for ext in (".pbtxt", ".pb", ".json"))
    with open(str(text) + ".tmp", "w", encoding="utf-8") as f:
        for chunk in text_chunks(trace):
            f.write(chunk)
    Path(str(text) + ".tmp").replace(text)
    Path(str(binary) + ".tmp").write_bytes(to_message(trace).SerializeToString())
    Path(str(binary) + ".tmp").replace(binary)
    info = {
        "ops": trace.n_ops,
        "seed": trace.seed,
        "origin": trace.origin,
        **trace.counts(),
        "peak_memory": {k: {"peak_bytes": v[0], "peak_us": v[1]} for k, v in trace.peak_memory().items()},
        "text_bytes": text.stat().st_size,
        "binary_bytes": binary.stat().st_size,
    }
    meta.write_text(json.dumps(info, indent=2))
    return {"text": text, "binary": binary, "meta": meta, "info": info}


def ensure(n_ops: int, seed: int = 0, out_dir: Path = OUT_DIR) -> dict:
    """The generated files for (n_ops, seed), generating them when missing."""
    stem = f"stepstats-{n_ops}-s{seed}"
    paths = {k: out_dir / f"{stem}{ext}" for k, ext in (("text", ".pbtxt"), ("binary", ".pb"), ("meta", ".json"))}
    if all(p.exists() for p in paths.values()):
        return {**paths, "info": json.loads(paths["meta"].read_text())}
    return write(generate(n_ops, seed), out_dir, stem)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.generate", description=__doc__.split("\n\n")[0])
    p.add_argument("--ops", type=int, default=1000, help="op count (default 1000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=OUT_DIR)
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    res = write(generate(args.ops, args.seed), args.out, f"stepstats-{args.ops}-s{args.seed}")
    info = res["info"]
    print(
        f"{res['text']} ({info['text_bytes'] / 1e6:.1f} MB), {res['binary']} ({info['binary_bytes'] / 1e6:.1f} MB): "
        f"{info['op_records']} op records, {info['kernel_records']} kernel records "
        f"in {time.perf_counter() - t0:.1f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
