"""The web UI's timeline, computed: every op and kernel of a trace as bars
in lanes, and windows of them sized for the screen (what it reads, and the
cache, are :mod:`tracegraph.queries.timeline`'s).

Why server-side: a 100k-op trace has ~200k bars, too many to send to a
browser and draw on every pan. The first request for a trace reads its
ops and kernels once into numpy arrays (kept in a small cache keyed by the
trace's stored version, so a replaced trace is read again); every window
request then answers from memory in milliseconds with at most about two
bars per pixel per lane:

* a bar at least one pixel wide is sent as itself (name, type, times);
* runs of consecutive sub-pixel bars less than a pixel apart are merged
  into one bar that says how many it stands for (``n``), and whether any
  of them is highlighted;
* gaps of a pixel or more always stay visible.

Lanes: one per device stream (kernels and copies, TF's ``stream:all`` is
not stored), and op lanes per device: per thread when the trace says which
thread ran each op (``Op.thread``: XPlane's and Kineto's host threads; the
lane is named after it), else for the whole device; each as many lanes as
it takes so that no two ops of a lane overlap (first fit in start order:
nested ops, or for a device without threads TF's inter-op threads, in
effect). A device's threads come in the order they started. Times are the
trace's (us since its first event; steps for traces timed in steps).

Every lane says what it carries (``kind``, see :func:`lane_kind`): ``ops``,
or for a stream ``compute``, ``memcpy`` or ``communication``, from its
kernels' kinds and the stored ``Stream.kind``; the UI colors by it and
never guesses from names.
"""

from __future__ import annotations

import heapq
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from tracegraph.output import readable
from tracegraph.queries.types import CollectiveCallInfo, CollectiveInfo, LaneInfo, LaneKind, Window, WindowLane

MAX_BARS = 40_000  # per window answer, over all lanes
MAX_PX = 8192


# One bar: (start, end, name, type, the op it belongs to).
Bar = tuple[float, float, str, str, str]

# What a lane carries: a device's ops, or the kernels of one of its streams.
LANE_KINDS = ("ops", "compute", "memcpy", "communication")
# A kernel's kind (Kernel.kind) -> the lane kind it speaks for: memsets are memory traffic like copies.
_KERNEL_TO_LANE = {"compute": "compute", "memcpy": "memcpy", "memset": "memcpy", "communication": "communication"}


def lane_kind(kernel_kinds: dict[str, int], stream_kind: str | None) -> str:
    """The kind of a stream's lane: what all of its kernels are, when they
    agree (a Kineto stream that only ran copies is a copy lane, though
    Kineto stores every stream as ``compute``); else the stored
    ``Stream.kind`` when it is one the UI knows; else ``compute`` (a
    stream mixing compute kernels with copies or NCCL kernels; each of
    its bars still carries its own kind)."""
    kinds = {_KERNEL_TO_LANE.get(k, "compute") for k in kernel_kinds}
    if len(kinds) == 1:
        return kinds.pop()
    if stream_kind in LANE_KINDS and stream_kind != "ops":
        return stream_kind
    return "compute"


@dataclass
class Lane:
    """One row of the timeline: bars sorted by start, none inside another's run of merging."""

    id: int
    name: str
    device: str
    kind: str  # one of LANE_KINDS
    start: np.ndarray  # float64, sorted
    end: np.ndarray  # float64
    reach: np.ndarray  # running max of end: bars overlapping t0 start at searchsorted(reach, t0)
    names: list[str]
    types: list[str]  # op lanes: the op's type; stream lanes: the kernel's kind
    ops: list[str]  # the op a bar belongs to (the op itself for op lanes)
    stream: str | None = None  # the stream's name (None for op lanes)
    kernel_kinds: dict[str, int] = field(default_factory=dict)  # stream lanes: kernels per Kernel.kind

    def info(self) -> LaneInfo:
        kind = cast(LaneKind, self.kind)
        return LaneInfo(self.id, self.name, self.device, kind, int(self.start.size), self.stream, self.kernel_kinds)


@dataclass
class TraceTimeline:
    trace: str
    key: object  # the stored version of the trace it was read from (queries/timeline.py: _version)
    lanes: list[Lane]
    t_min: float
    t_max: float
    critical: set[str] = field(default_factory=set)  # names of the ops with cp_step set
    # highlight source name -> (per-lane masks, the analysis's note, how many ops it named)
    highlights: dict[str, tuple[list[np.ndarray], str | None, int]] = field(default_factory=dict)


def _device_order(rank: dict[str, int]) -> Callable[[str], tuple[int, str]]:
    """Devices by rank first (rank 2's before rank 10's; devices of no rank
    first), then by name. (The one place the timeline orders by rank.)"""
    return lambda device: (rank.get(device, -1), device)


def _short_device(device: str | None) -> str:
    d = device or "(no device)"
    return d.split("/", 4)[-1] if d.startswith("/job:") else d


def _lane(lane_id: int, name: str, device: str, kind: str, rows: list[Bar], stream: str | None = None) -> Lane:
    start = np.array([r[0] for r in rows], dtype=np.float64)
    end = np.maximum(np.array([r[1] for r in rows], dtype=np.float64), start)
    reach = np.maximum.accumulate(end) if end.size else end
    types = [r[3] for r in rows]
    kernel_kinds: dict[str, int] = {}
    if stream is not None:
        for t in types:
            kernel_kinds[t] = kernel_kinds.get(t, 0) + 1
    return Lane(
        lane_id,
        name,
        device,
        kind,
        start,
        end,
        reach,
        [r[2] for r in rows],
        types,
        [r[4] for r in rows],
        stream,
        dict(sorted(kernel_kinds.items())),
    )


def pack_ops(rows: list[Bar]) -> list[list[Bar]]:
    """Split one device's ops (sorted by start) into rows without overlap,
    each op into the lowest-numbered row free at its start."""
    free: list[int] = []  # row numbers free now, as a heap
    busy: list[tuple[float, int]] = []  # (end, row) of the op last put in each busy row
    out: list[list[Bar]] = []
    for r in rows:
        start, end = r[0], max(r[1], r[0])
        while busy and busy[0][0] <= start:
            heapq.heappush(free, heapq.heappop(busy)[1])
        if free:
            row = heapq.heappop(free)
        else:
            row = len(out)
            out.append([])
        out[row].append(r)
        heapq.heappush(busy, (end, row))
    return out


def build(
    trace: str,
    key: object,
    op_rows: Sequence[Sequence[Any]],
    kernel_rows: Sequence[Sequence[Any]],
    stream_rows: Sequence[Sequence[Any]] = (),
) -> TraceTimeline:
    """Lanes from the rows :func:`read_rows` reads (columns OP_COLUMNS,
    KERNEL_COLUMNS and STREAM_COLUMNS; an op row without its last columns,
    ``thread`` and ``rank``, is an op of no known thread and rank, a stream
    row without ``rank`` one of no known rank)."""
    stream_kinds = {(row[1] or "", row[0]): row[2] for row in stream_rows}
    rank = {row[1] or "": row[3] for row in stream_rows if len(row) > 3 and row[3] is not None}
    lanes: list[Lane] = []
    ops_by_device: dict[str, dict[str, list[Bar]]] = {}  # device -> thread ("": not known) -> ops
    by_device: dict[str, dict[str, list[Bar]]] = {}  # device -> stream -> kernels
    critical: set[str] = set()
    for name, typ, device, s, e, cp_step, *rest in op_rows:
        thread = (rest[0] if rest else None) or ""
        if len(rest) > 1 and rest[1] is not None:
            rank[device or ""] = rest[1]
        ops_by_device.setdefault(device or "", {}).setdefault(thread, []).append((float(s), float(e), name, typ, name))
        if cp_step is not None:
            critical.add(name)
    for name, kind, op, device, stream, s, e in kernel_rows:
        by_device.setdefault(device or "", {}).setdefault(stream or "(no stream)", []).append(
            (float(s), float(e), name, kind or "kernel", op or "")
        )
    t_min, t_max = np.inf, -np.inf
    for device in sorted(set(ops_by_device) | set(by_device), key=_device_order(rank)):
        short = _short_device(device)
        threads = {
            t: sorted(rows, key=lambda r: (r[0], r[1], r[2])) for t, rows in ops_by_device.get(device, {}).items()
        }
        # Ops of no known thread first (the only ones for most formats), then each thread from its first op.
        for thread in sorted(threads, key=lambda t: (t != "", threads[t][0][0] if t else 0.0, t)):
            packed = pack_ops(threads[thread])
            for i, part in enumerate(packed):
                label = f"{short} {thread or 'ops'}" + (f" #{i + 1}" if len(packed) > 1 else "")
                lanes.append(_lane(len(lanes), label, device, "ops", part))
        groups = by_device.get(device, {})
        for stream in sorted(groups):
            rows = sorted(groups[stream], key=lambda r: (r[0], r[1], r[2], r[4]))
            lane = _lane(len(lanes), f"{short} {stream}", device, "compute", rows, stream)
            lane.kind = lane_kind(lane.kernel_kinds, stream_kinds.get((device, stream)))
            lanes.append(lane)
    for lane in lanes:
        if lane.start.size:
            t_min = min(t_min, float(lane.start[0]))
            t_max = max(t_max, float(lane.reach[-1]))
    if not np.isfinite(t_min):
        t_min, t_max = 0.0, 0.0
    return TraceTimeline(trace, key, lanes, t_min, t_max, critical=critical)


def highlight_masks(tl: TraceTimeline, ops: set[str]) -> list[np.ndarray]:
    """Per lane, which bars belong to one of ``ops`` (kernels by their op)."""
    return [np.fromiter((o in ops for o in lane.ops), dtype=bool, count=len(lane.ops)) for lane in tl.lanes]


def marked_masks(
    tl: TraceTimeline, op_rows: Sequence[Sequence[Any]], kernel_rows: Sequence[Sequence[Any]]
) -> list[np.ndarray]:
    """Per lane, which bars are the given ops (op lanes) and kernels (stream
    lanes), matched by name, start and end: exact for names that repeat
    (PyTorch's ``aten::empty`` runs thousands of times; only the runs given
    are marked), where :func:`highlight_masks` would mark every op of the name."""

    def keys(rows: Sequence[Sequence[Any]]) -> set[tuple[str, float, float]]:
        return {(name, float(s), max(float(e), float(s))) for name, s, e in rows}

    ops, kernels = keys(op_rows), keys(kernel_rows)
    out = []
    for lane in tl.lanes:
        want = ops if lane.kind == "ops" else kernels
        bars = zip(lane.names, lane.start.tolist(), lane.end.tolist())
        out.append(np.fromiter((b in want for b in bars), dtype=bool, count=len(lane.names)))
    return out


def window(
    tl: TraceTimeline,
    t0: float,
    t1: float,
    px: int,
    lane_ids: list[int] | None = None,
    mask: list[np.ndarray] | None = None,
    max_bars: int = MAX_BARS,
) -> Window:
    """The bars of [t0, t1) drawn ``px`` pixels wide, merged below a pixel.

    Columnar per lane: ``s``/``e`` start and end, ``n`` how many bars it
    stands for, ``h`` 1 when any of them is highlighted, ``i`` the bar's
    index for a single bar (its ``name``, ``type``, ``op`` are in the
    parallel lists) else -1. ``truncated`` when the lanes went over
    ``max_bars`` (the rest of the lanes are then empty). A window with
    ``t1 <= t0`` is empty (``res`` 0); lane ids that are no lane are left
    out; ``res`` is at most the largest float (a window wider than that).
    """
    px = max(1, min(int(px), MAX_PX))
    empty = not t1 > t0
    res = 0.0 if empty else min((t1 - t0) / px, sys.float_info.max)
    wanted = range(len(tl.lanes)) if lane_ids is None else [i for i in lane_ids if 0 <= i < len(tl.lanes)]
    out_lanes: list[WindowLane] = []
    total = 0
    truncated = False
    for li in wanted:
        lane = tl.lanes[li]
        if truncated or empty:
            out_lanes.append(_empty(li))
            continue
        lo = int(np.searchsorted(lane.reach, t0, side="right"))
        hi = int(np.searchsorted(lane.start, t1, side="left"))
        if hi <= lo:
            out_lanes.append(_empty(li))
            continue
        s = lane.start[lo:hi]
        e = lane.end[lo:hi]
        keep = e > t0  # inside [lo, hi) some bars may still end before t0
        idx = np.nonzero(keep)[0] + lo
        s, e = s[keep], e[keep]
        if s.size == 0:
            out_lanes.append(_empty(li))
            continue
        h = mask[li][idx] if mask is not None else np.zeros(idx.size, dtype=bool)
        narrow = (e - s) < res
        prev_e = np.concatenate(([-np.inf], np.maximum.accumulate(e)[:-1]))
        prev_narrow = np.concatenate(([False], narrow[:-1]))
        starts_group = ~narrow | ~prev_narrow | ((s - prev_e) >= res)
        first = np.nonzero(starts_group)[0]
        gs = s[first]
        ge = np.maximum.reduceat(e, first)
        gn = np.diff(np.append(first, s.size))
        gh = np.logical_or.reduceat(h, first) if h.size else np.zeros(0, dtype=bool)
        gi = np.where(gn == 1, idx[first], -1)
        if total + gs.size > max_bars:
            truncated = True
            out_lanes.append(_empty(li))
            continue
        total += gs.size
        singles = gi[gi >= 0]
        names: dict[str, list[str | None]] = {str(int(k)): [lane.names[k], lane.types[k], lane.ops[k]] for k in singles}
        out_lanes.append(
            WindowLane(li, gs.tolist(), ge.tolist(), gn.tolist(), gh.astype(int).tolist(), gi.tolist(), names)
        )
    return Window(tl.trace, t0, t1, px, res, total, truncated, out_lanes)


def _empty(li: int) -> WindowLane:
    return WindowLane(li, [], [], [], [], [], {})


# A joined call as the timeline reads it (queries/timeline.py: read_collectives):
# collective seq, its name, process group, last rank, caused_us, last
# arrival; the call's rank, wait, name, start, end and whether it is a kernel.
CollectiveCall = tuple[int, str, str | None, int, float, float, int, float, str, float, float, bool]


def collective_links(tl: TraceTimeline, calls: Sequence[CollectiveCall]) -> list[CollectiveInfo]:
    """Per collective, its calls placed on the timeline's lanes (the lane
    holding the call's bar: an op lane for a host call, a stream lane for an
    NCCL kernel), in seq order within each process group, the calls by rank."""
    heads: dict[tuple[str | None, int], tuple[str, int, float, float]] = {}
    placed: dict[tuple[str | None, int], list[CollectiveCallInfo]] = {}
    for seq, name, group, last_rank, caused, last_at, rank, wait, call, start, end, is_kernel in calls:
        heads.setdefault((group, seq), (name, last_rank, readable(caused, time=True), readable(last_at, time=True)))
        lane = lane_of(tl, call, float(start), stream=is_kernel)
        times = (readable(start, time=True), readable(end, time=True), readable(wait, time=True))
        placed.setdefault((group, seq), []).append(CollectiveCallInfo(rank, lane, *times))
    out = []
    for group, seq in sorted(heads, key=lambda k: (k[0] or "", k[1])):
        name, last_rank, caused, last_at = heads[group, seq]
        ranked = sorted(placed[group, seq], key=lambda c: c.rank)
        out.append(CollectiveInfo(seq, name, group, last_rank, caused, last_at, ranked))
    return out


def lane_of(tl: TraceTimeline, name: str, start: float, *, stream: bool) -> int | None:
    """The id of the lane whose bar named ``name`` starts at ``start``."""
    for lane in tl.lanes:
        if (lane.stream is not None) != stream:
            continue
        lo = int(np.searchsorted(lane.start, start, side="left"))
        hi = int(np.searchsorted(lane.start, start, side="right"))
        if any(lane.names[j] == name for j in range(lo, hi)):
            return lane.id
    return None
