"""The web UI's timeline, served: a trace's lanes and the collectives
between them, and windows of bars at screen resolution with highlights.

The first request for a trace reads its ops, kernels and streams once
(each engine's fastest bulk read) into the lanes
:mod:`tracegraph.queries.lanes` computes; they are kept in a small cache
keyed by the trace's stored version, so a replaced trace is read again,
and every window after that answers from memory.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from tracegraph.db.base import Graph
from tracegraph.errors import BadRequest
from tracegraph.queries import lanes
from tracegraph.queries.highlights import HighlightSource, highlight_source, highlighted_ops, trace_highlights
from tracegraph.queries.run import trace_facts
from tracegraph.queries.types import TimelineInfo, Window

# What the timeline reads of a trace (Graph.read_columns: each engine's fastest bulk read).
OP_COLUMNS: dict[str, type] = {
    "name": str,
    "type": str,
    "device_name": str,
    "start_us": float,
    "end_us": float,
    "cp_step": int,
    "thread": str,
    "rank": int,
}
KERNEL_COLUMNS: dict[str, type] = {
    "name": str,
    "kind": str,
    "op_name": str,
    "device_name": str,
    "stream_name": str,
    "start_us": float,
    "end_us": float,
}
STREAM_COLUMNS: dict[str, type] = {
    "name": str,
    "device_name": str,
    "kind": str,
    "rank": int,
}
TIMED = "n.start_us IS NOT NULL AND n.end_us IS NOT NULL"
# What identifies a bar among the nodes a predicate marks (read_marked).
MARK_COLUMNS: dict[str, type] = {"name": str, "start_us": float, "end_us": float}


class TimelineRows(NamedTuple):
    """What :func:`~tracegraph.queries.lanes.build` reads: the columns above, timed ops and kernels only."""

    ops: list[tuple[Any, ...]]
    kernels: list[tuple[Any, ...]]
    streams: list[tuple[Any, ...]]


def read_rows(graph: Graph, trace: str, timeout_ms: int | None = None) -> TimelineRows:
    """The op, kernel and stream rows of a trace."""
    return TimelineRows(
        graph.read_columns(trace, "Op", OP_COLUMNS, TIMED, timeout_ms=timeout_ms),
        graph.read_columns(trace, "Kernel", KERNEL_COLUMNS, TIMED, timeout_ms=timeout_ms),
        graph.read_columns(trace, "Stream", STREAM_COLUMNS, timeout_ms=timeout_ms),
    )


def read_marked(
    graph: Graph, trace: str, where: str, timeout_ms: int | None = None, *, launches: bool = False
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """(op rows, kernel rows) of the timed Op and Kernel nodes that match
    ``where`` (a Cypher predicate on ``n``): name, start, end. With
    ``launches`` the kernels are those the matching ops launched."""
    pred = f"({where}) AND {TIMED}"
    ops = graph.read_columns(trace, "Op", MARK_COLUMNS, pred, timeout_ms=timeout_ms)
    if not launches:
        return ops, graph.read_columns(trace, "Kernel", MARK_COLUMNS, pred, timeout_ms=timeout_ms)
    kernels = graph.run(
        f"MATCH (n:Op {{trace: $trace}})-[:LAUNCHED]->(k:Kernel) WHERE ({where}) "
        "AND k.start_us IS NOT NULL AND k.end_us IS NOT NULL RETURN k.name, k.start_us, k.end_us",
        trace=trace,
        timeout_ms=timeout_ms,
    ).rows
    return ops, [tuple(r) for r in kernels]


def read_collectives(graph: Graph, trace: str, timeout_ms: int | None = None) -> list[lanes.CollectiveCall]:
    """Every call that JOINS a collective of the trace (none for a trace of one rank)."""
    return _ops_then_kernels(
        graph,
        trace,
        "MATCH (n:{label})-[j:JOINS]->(c:Collective {{trace: $trace}}) "
        "RETURN c.seq, c.name, c.process_group, c.last_rank, c.caused_us, c.last_arrival_us, "
        "j.rank, j.wait_us, n.name, n.start_us, n.end_us",
        timeout_ms,
    )


def read_observed(graph: Graph, trace: str, timeout_ms: int | None = None) -> list[tuple[Any, ...]]:
    """The observed critical path's segments by the op or kernel they are
    attributed to: (name, start, segment starts, durations, kinds, counted,
    is a kernel), from the nodes' ``ocp_*`` lists."""
    return _ops_then_kernels(
        graph,
        trace,
        "MATCH (n:{label} {{trace: $trace}}) WHERE n.ocp_steps IS NOT NULL "
        "RETURN n.name, n.start_us, n.ocp_starts_us, n.ocp_durs_us, n.ocp_kinds, n.ocp_counted",
        timeout_ms,
    )


def _ops_then_kernels(graph: Graph, trace: str, query: str, timeout_ms: int | None) -> list[Any]:
    """``query`` (``{label}`` in it) run for ops, then for kernels; each row
    with whether it is a kernel's appended."""
    out: list[tuple[Any, ...]] = []
    for label, is_kernel in (("Op", False), ("Kernel", True)):
        rows = graph.run(query.format(label=label), trace=trace, timeout_ms=timeout_ms).rows
        out += [(*row, is_kernel) for row in rows]
    return out


class TimelineCache:
    """The last few traces' timelines; loads each trace once even when asked concurrently."""

    def __init__(self, size: int = 4) -> None:
        self.size = size
        self._items: OrderedDict[str, lanes.TraceTimeline] = OrderedDict()
        self._lock = threading.Lock()
        self._loading: dict[str, threading.Lock] = {}

    def get(self, trace: str, key: object, load: Callable[[], lanes.TraceTimeline]) -> lanes.TraceTimeline:
        with self._lock:
            tl = self._items.get(trace)
            if tl is not None and tl.key == key:
                self._items.move_to_end(trace)
                return tl
            lock = self._loading.setdefault(trace, threading.Lock())
        with lock:
            with self._lock:
                tl = self._items.get(trace)
                if tl is not None and tl.key == key:
                    return tl
            tl = load()
            with self._lock:
                self._items[trace] = tl
                self._items.move_to_end(trace)
                while len(self._items) > self.size:
                    self._items.popitem(last=False)
            return tl


CACHE = TimelineCache(size=4)


def _version(facts: dict[str, Any]) -> tuple[Any, ...]:
    """What tells one stored version of a trace from another (ingested_at has
    whole seconds: a replace within the same second still changes the counts)."""
    return tuple(facts.get(k) for k in ("ingested_at", "node_count", "relationship_count", "sources", "span_us"))


def load_timeline(
    graph: Graph, trace: str, timeout_ms: int | None = None
) -> tuple[lanes.TraceTimeline, dict[str, Any]]:
    """The trace's timeline (from the cache when its stored version is
    there) and its facts; NotFound for no such trace."""
    facts = trace_facts(graph, trace)
    key = _version(facts)
    tl = CACHE.get(trace, key, lambda: lanes.build(trace, key, *read_rows(graph, trace, timeout_ms)))
    return tl, facts


def timeline_info(graph: Graph, trace: str, *, timeout_ms: int | None = None) -> TimelineInfo:
    """The timeline's lanes, time span, highlight sources (the first
    available the default) and collectives."""
    tl, facts = load_timeline(graph, trace, timeout_ms)
    highlights = trace_highlights(trace, facts)
    collectives = (
        lanes.collective_links(tl, read_collectives(graph, trace, timeout_ms)) if facts.get("has_collectives") else []
    )
    return TimelineInfo(
        trace=tl.trace,
        t_min=tl.t_min,
        t_max=tl.t_max,
        lanes=[lane.info() for lane in tl.lanes],
        time_unit=facts.get("time_unit"),
        note=None if tl.lanes else "not available: the trace has no op or kernel times",
        highlights=highlights,
        highlight_default=next((h.name for h in highlights if h.available), None),
        collectives=collectives,
    )


def _highlight_masks(
    graph: Graph,
    tl: lanes.TraceTimeline,
    facts: dict[str, Any],
    source: HighlightSource,
    timeout_ms: int | None,
) -> tuple[list[np.ndarray], str | None, int]:
    """Per-lane masks of the bars ``source`` highlights, its note, and how many ops (or kernels) it named."""
    missing = source.unavailable(tl.trace, facts)
    if missing is not None:
        return lanes.highlight_masks(tl, set()), missing.note, 0
    if source.marked is not None:
        op_rows, kernel_rows = read_marked(graph, tl.trace, source.marked, timeout_ms, launches=source.marks_launches)
        named = len(op_rows) if source.marks_launches else len(op_rows) + len(kernel_rows)
        return lanes.marked_masks(tl, op_rows, kernel_rows), None, named
    note: str | None = None
    if source.from_timeline is not None:
        ops = source.from_timeline(tl)
    else:
        ops, note = highlighted_ops(graph, tl.trace, source, timeout_ms)
    return lanes.highlight_masks(tl, ops), note, len(ops)


def timeline_window(
    graph: Graph,
    trace: str,
    t0: float,
    t1: float,
    px: int = 1000,
    lane_ids: Sequence[int] | None = None,
    highlight: str | None = None,
    *,
    timeout_ms: int | None = None,
) -> Window:
    """The bars of [t0, t1) ``px`` pixels wide (see
    :func:`~tracegraph.queries.lanes.window`), of the lanes ``lane_ids``
    (None: all; ids that are no lane are left out), those ``highlight``
    names marked. BadRequest for a bound that is not a finite number, a
    width outside 1 to MAX_PX, or a highlight source there is not."""
    if not (math.isfinite(t0) and math.isfinite(t1)):
        raise BadRequest(f"t0, t1: expected finite numbers, got {t0!r}, {t1!r}")
    if not 1 <= px <= lanes.MAX_PX:
        raise BadRequest(f"px: expected 1 to {lanes.MAX_PX:,} pixels, got {px!r}")
    tl, facts = load_timeline(graph, trace, timeout_ms)
    source = highlight_source(highlight) if highlight is not None else None
    if source is None:
        return lanes.window(tl, t0, t1, px, None if lane_ids is None else list(lane_ids))
    if source.name not in tl.highlights:
        tl.highlights[source.name] = _highlight_masks(graph, tl, facts, source, timeout_ms)
    mask, note, count = tl.highlights[source.name]
    win = lanes.window(tl, t0, t1, px, None if lane_ids is None else list(lane_ids), mask)
    return dataclasses.replace(win, highlight=source.name, highlight_ops=count, highlight_note=note)
