"""Steps: the iterations of a training or inference loop, found at ingest.

Every profiler marks its loop's iterations its own way, and every peer
reports per iteration (HTA, TraceLens, XProf's step-time graph). A step is
an executed op that marks one (a *marker*):

* by name, :data:`DEFAULT_MARKER`: PyTorch's ``ProfilerStep#N``,
  PaddlePaddle's ``ProfileStep#N``, or a user's pattern
  (``--step-marker REGEX``, kept on the Trace as ``meta_step_marker``): an
  op whose name the pattern finds is a marker, its number the first group
  of digits the match captured (else the markers are numbered 0, 1, ...
  in start order); :mod:`.step_marker` checks and runs a user's pattern;
* by its own arg ``step_num`` (JAX's and TensorFlow's
  ``StepTraceAnnotation``, in Chrome traces and XPlane captures): an
  annotation op whose attrs hold it (unless the user gave a pattern: then it alone names the
  markers).

Per rank (a trace of one rank is rank 0), a step is its marker's host
range ``[start, end)``. An op belongs to the step whose range holds its
start (the latest-starting one), on any thread of the rank; a kernel to
the step of the runtime call that issued it, else of the op that launched
it, else the step whose range holds its own start. Ops and kernels carry
the step's number (``step``) rather than a relationship to a Step node: a
property costs nothing per op, a relationship per op would double a large
trace's edges, and ``WHERE o.step = $step`` is what the per-step analyses
ask.

Each step's device time is broken down (:mod:`.device_time`: busy,
computation, communication, memcpy, exposed communication and memcpy,
idle) over its *device window*: the earliest start to the latest end of
the kernels that belong to it (no kernels: no window), counting every
kernel of the rank in it (one of the step before still running counts, as
it did on the device).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import cast

import numpy as np
import numpy.typing as npt

from tracegraph.columns import Lists, Strings, Table, Texts, values
from tracegraph.ingest import device_time
from tracegraph.ingest.collectives import rank_of_kernels, rank_of_ops
from tracegraph.ingest.columnar import ColumnarTrace, codes_of, executed, num, refs
from tracegraph.ingest.intervals import union_intervals
from tracegraph.ingest.step_marker import DEFAULT_MARKER, search

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


@dataclass
class Marker:
    row: int  # the marker op's row
    rank: int
    number: int | None
    start: float
    end: float


def markers(ct: ColumnarTrace, pattern: str = DEFAULT_MARKER) -> list[Marker]:
    """The executed, timed ops that mark steps (see the module docstring)."""
    ops = ct["ops"]
    if ops.n == 0 or ct.time_unit != "us":
        return []
    names = ops["name"]
    start, end = num(ops["start_us"]), num(ops["end_us"])
    timed = executed(ct) & ~np.isnan(start) & ~np.isnan(end)
    number: dict[int, int | None] = {}
    if isinstance(names, Strings):
        distinct_names, codes = list(names.values), np.asarray(names.codes)
    else:
        distinct_names = sorted({v for v in values(names) if isinstance(v, str)})
        position = {v: i for i, v in enumerate(distinct_names)}
        codes = np.asarray([position.get(v, -1) if isinstance(v, str) else -1 for v in values(names)], dtype=np.int64)
    found = search(pattern, [v if isinstance(v, str) else "" for v in distinct_names])
    hit = np.zeros(len(distinct_names) + 1, dtype=bool)
    hit[list(found)] = True
    for row in np.flatnonzero(hit[np.where(codes < 0, len(distinct_names), codes)] & timed).tolist():
        number[row] = found[int(codes[row])]
    if pattern == DEFAULT_MARKER:  # a user's pattern alone names the markers
        for row, n in _step_num_args(ct, timed).items():
            number.setdefault(row, n)
    rank = rank_of_ops(ct)
    found_markers = [Marker(r, int(rank[r]), n, float(start[r]), float(end[r])) for r, n in number.items()]
    found_markers.sort(key=lambda m: (m.rank, m.start, -m.end, m.row))
    if any(m.number is None for m in found_markers):  # a pattern without a number: numbered in start order
        per_rank: dict[int, int] = {}
        for m in found_markers:
            m.number = per_rank.setdefault(m.rank, 0)
            per_rank[m.rank] += 1
    return found_markers


def _step_num_args(ct: ColumnarTrace, timed: npt.NDArray[np.bool_]) -> dict[int, int]:
    """Annotation ops whose attrs hold ``step_num`` (TF/JAX StepTraceAnnotation)."""
    ops = ct["ops"]
    annotation = codes_of(ops["role"], "annotation") & timed
    rows = np.flatnonzero(annotation)
    if not len(rows):
        return {}
    attrs = ops["attrs"]
    texts = attrs.tolist() if isinstance(attrs, Texts | Strings) else values(attrs)
    out: dict[int, int] = {}
    for row in rows.tolist():
        text = texts[row]
        if not isinstance(text, str) or '"step_num"' not in text:
            continue
        try:
            n = json.loads(text).get("step_num")
            out[row] = int(n)
        except (ValueError, TypeError, AttributeError):
            continue
    return out


def assign(ct: ColumnarTrace, found: list[Marker]) -> tuple[F64, F64]:
    """Each op's and each kernel's step number (NaN: none)."""
    ops, k = ct["ops"], ct["kernels"]
    op_step = np.full(ops.n, np.nan)
    k_step = np.full(k.n, np.nan)
    if not found:
        return op_step, k_step
    op_rank = rank_of_ops(ct)
    o_start = num(ops["start_us"])
    for rank in sorted({m.rank for m in found}):
        mine = [m for m in found if m.rank == rank]
        rows = np.flatnonzero(op_rank == rank)
        op_step[rows] = _within(mine, o_start[rows])
    if k.n:
        launch, op = refs(k["launch"]), refs(k["op"])
        by_launch = np.where(launch >= 0, op_step[np.maximum(launch, 0)], np.nan)
        by_op = np.where(op >= 0, op_step[np.maximum(op, 0)], np.nan)
        k_step = np.where(np.isnan(by_launch), by_op, by_launch)
        k_rank = rank_of_kernels(ct)
        k_start = num(k["start_us"])
        for rank in sorted({m.rank for m in found}):
            rows = np.flatnonzero((k_rank == rank) & np.isnan(k_step))
            k_step[rows] = _within([m for m in found if m.rank == rank], k_start[rows])
    return op_step, k_step


def _within(mine: list[Marker], t: F64) -> F64:
    """The number of the latest-starting marker whose range holds each time (NaN: none)."""
    starts = np.asarray([m.start for m in mine])
    ends = np.asarray([m.end for m in mine])
    numbers = np.asarray([m.number for m in mine], dtype=np.float64)
    order = np.argsort(starts, kind="stable")
    starts, ends, numbers = starts[order], ends[order], numbers[order]
    out = np.full(len(t), np.nan)
    i = np.searchsorted(starts, t, side="right") - 1
    ok = (i >= 0) & ~np.isnan(t)
    # steps rarely overlap: the latest-starting one holds the time, else the one before it may
    for back in range(len(starts)):
        j = i - back
        hit = ok & np.isnan(out) & (j >= 0)
        if not hit.any():
            break
        jj = np.maximum(j, 0)
        holds = hit & (t < ends[jj])
        out[holds] = numbers[jj[holds]]
        if back >= 8:  # a time no step among the 8 before holds is in none
            break
    return out


def step_table(ct: ColumnarTrace, found: list[Marker], op_step: F64, k_step: F64) -> Table:
    """The Step rows: each marker's host range, device window and breakdown."""
    ops, k = ct["ops"], ct["kernels"]
    names = values(ops["name"])
    op_rank = rank_of_ops(ct)
    k_rank = rank_of_kernels(ct) if k.n else np.zeros(0, dtype=np.int64)
    k_start, k_end = num(k["start_us"]), num(k["end_us"])
    rows: list[dict[str, object]] = []
    ordinal: dict[int, int] = {}
    sets: dict[int, dict[str, device_time.Segments]] = {}
    for m in found:
        n = ordinal.setdefault(m.rank, 0)
        ordinal[m.rank] += 1
        row: dict[str, object] = {
            "uid": f"step:{m.rank}:{n}",
            "number": m.number,
            "name": names[m.row],
            "rank": m.rank,
            "start_us": m.start,
            "end_us": m.end,
            "host_us": m.end - m.start,
            "ops": int(((op_rank == m.rank) & (op_step == m.number)).sum()),
        }
        mine = (k_rank == m.rank) & (k_step == m.number) if k.n else np.zeros(0, bool)
        row["kernels"] = int(mine.sum())
        if mine.any():
            if m.rank not in sets:
                sets[m.rank] = device_time.kernel_sets(ct, k_rank == m.rank)
            w0, w1 = float(np.nanmin(k_start[mine])), float(np.nanmax(k_end[mine]))
            row.update({"device_start_us": w0, "device_end_us": w1})
            row.update(device_time.breakdown(sets[m.rank], w0, w1))
            row.update(_stream_busy(ct, k_rank == m.rank, w0, w1))
        rows.append(row)
    return _table(rows)


def _stream_busy(ct: ColumnarTrace, on_rank: npt.NDArray[np.bool_], w0: float, w1: float) -> dict[str, object]:
    """Per stream of the rank: the time it ran anything in ``[w0, w1)``."""
    k = ct["kernels"]
    stream = refs(k["stream"])
    start, end = num(k["start_us"]), num(k["end_us"])
    uids = values(ct["streams"]["uid"])
    streams, busy = [], []
    for s in sorted(set(stream[on_rank].tolist()), key=lambda s: str(uids[s])):
        mine = on_rank & (stream == s)
        seg = union_intervals(np.clip(start[mine], w0, w1), np.clip(end[mine], w0, w1))
        streams.append(str(uids[s]))
        busy.append(float((seg[1] - seg[0]).sum()))
    return {"stream_uids": streams, "stream_busy_us": busy}


_INT_COLUMNS = ("number", "rank", "ops", "kernels")
_FLOAT_COLUMNS = (
    "start_us",
    "end_us",
    "host_us",
    "device_start_us",
    "device_end_us",
    "window_us",
    *(f"{figure}_us" for figure in device_time.FIGURES),
)


def _table(rows: list[dict[str, object]]) -> Table:
    t = Table(len(rows))
    t["uid"] = Texts.of([str(r["uid"]) for r in rows])
    t["name"] = Strings.of([str(r["name"]) for r in rows])
    for c in _INT_COLUMNS:
        t[c] = np.asarray([r[c] for r in rows], dtype=np.int64)
    for c in _FLOAT_COLUMNS:
        t[c] = np.asarray([r.get(c, np.nan) for r in rows], dtype=np.float64)
    t["stream_uids"] = Lists.of([cast("list[str] | None", r.get("stream_uids")) for r in rows], str)
    t["stream_busy_us"] = Lists.of([cast("list[float] | None", r.get("stream_busy_us")) for r in rows], float)
    return t


def steps(ct: ColumnarTrace, pattern: str | None = None) -> Table:
    """Find the steps of ``ct`` (``pattern``: the marker, default
    :data:`DEFAULT_MARKER`), set ``step`` on its ops and kernels, and
    return the Step rows."""
    found = markers(ct, pattern or DEFAULT_MARKER)
    op_step, k_step = assign(ct, found)
    ct["ops"]["step"] = op_step
    ct["kernels"]["step"] = k_step
    return step_table(ct, found, op_step, k_step)
