"""The figures of ``import tracegraph``: plotly, as Holistic Trace Analysis
draws its answers (``pip install 'tracegraph[notebook]'``).

Each figure is drawn from what the service answers, never recomputed:

* :meth:`Plots.timeline`: the trace's lanes as the web UI lays them out
  (:mod:`tracegraph.queries.lanes`: op lanes per host thread, one lane per
  device stream; sub-pixel bars merged), with the dependency critical path's
  ops (and the kernels they launched) and the observed critical path's
  segments drawn over them;
* :meth:`Plots.memory`: ``memory-timeline`` per allocator as a step curve,
  each allocator's peak (``peak-memory``) marked, and below it the live set
  at the highest peak: the allocations ``peak-memory`` lists, from their
  allocation to their free;
* :meth:`Plots.streams`: ``stream-utilization``, busy share per stream;
* :meth:`Plots.collectives`: a multi-rank job's collectives, rank by rank:
  each call's wait for the last arrival, and the straggler (who alone held
  the others up by ``min_caused_us`` or more, as ``stragglers`` says) marked.

Figures keep their numbers in their traces (``fig.data``): bars as ``base``
(start) and ``x`` (length), in microseconds of the trace.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tracegraph.errors import UserError
from tracegraph.queries import lanes as tlmod
from tracegraph.queries.highlights import highlight_source
from tracegraph.queries.run import run_analysis, trace_facts
from tracegraph.queries.timeline import read_collectives, read_marked, read_observed, read_rows

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from tracegraph.notebook import Connection

# Colors of the lane kinds (the web UI's, cypher/tracegraph.grass) and the highlights.
COLORS = {
    "ops": "#4c78a8",
    "compute": "#59a14f",
    "memcpy": "#edc948",
    "communication": "#b07aa1",
    "dependency": "#e15759",
    "observed": "#f28e2b",
    "straggler": "#f28e2b",
    "wait": "#bab0ac",
}
# The figures' default width in pixels: the timeline merges bars narrower than one.
WIDTH_PX = 1400


def _plotly() -> Any:
    try:
        import plotly.graph_objects as go
    except ImportError:  # pragma: no cover - the extra is installed with the tests
        raise UserError("the figures need plotly: pip install 'tracegraph[notebook]'") from None
    return go


class Plots:
    """``g.plot``: the figures of one connection's traces."""

    def __init__(self, connection: Connection) -> None:
        self._graph = connection._graph

    # --- timeline ---------------------------------------------------------------------------

    def timeline(
        self,
        trace: str,
        *,
        start_us: float | None = None,
        end_us: float | None = None,
        width_px: int = WIDTH_PX,
    ) -> go.Figure:
        """The trace's lanes over [start_us, end_us) (default: all of it),
        bars colored by what the lane carries; on top, the dependency
        critical path (its ops, and the kernels they launched) and the
        observed critical path (its segments, counted ones solid)."""
        go = _plotly()
        facts = trace_facts(self._graph, trace)
        tl = tlmod.build(trace, None, *read_rows(self._graph, trace))
        t0 = tl.t_min if start_us is None else start_us
        t1 = tl.t_max if end_us is None else end_us
        win = tlmod.window(tl, t0, t1 if t1 > t0 else t0 + 1.0, width_px, max_bars=10 * tlmod.MAX_BARS)
        names = [lane.name for lane in tl.lanes]
        fig = go.Figure()
        for kind in tlmod.LANE_KINDS:
            base: list[float] = []
            length: list[float] = []
            y: list[str] = []
            text: list[str] = []
            count: list[int] = []
            for out in win.lanes:
                lane = tl.lanes[out.id]
                if lane.kind != kind:
                    continue
                for s, e, n, i in zip(out.s, out.e, out.n, out.i):
                    base.append(s)
                    length.append(e - s)
                    y.append(lane.name)
                    count.append(n)
                    text.append(lane.names[i] if i >= 0 else f"{n} bars")
            if base:
                fig.add_trace(_bars(go, kind, base, length, y, text, COLORS[kind], count=count))
        # The paths the web UI's timeline highlights, when the trace has them (their analyses' @requires).
        dependency = highlight_source("critical-path")
        if dependency.unavailable(trace, facts) is None and dependency.marked is not None:
            ops, kernels = read_marked(self._graph, trace, dependency.marked, launches=dependency.marks_launches)
            base, length, y, text = _placed(tl, [(r, False) for r in ops] + [(r, True) for r in kernels])
            fig.add_trace(
                _bars(go, "critical path (dependency)", base, length, y, text, COLORS["dependency"], outline=True)
            )
        if highlight_source("observed-critical-path").unavailable(trace, facts) is None:
            base, length, y, text, counted = self._observed(tl, trace)
            fig.add_trace(
                _bars(
                    go,
                    "critical path (observed)",
                    base,
                    length,
                    y,
                    text,
                    COLORS["observed"],
                    opacity=[0.9 if c else 0.35 for c in counted],
                    count=[int(c) for c in counted],
                )
            )
        fig.update_layout(
            title=f"{trace}: timeline",
            barmode="overlay",
            xaxis_title=f"time ({_unit(facts)} since the trace's first event)",
            yaxis={"categoryorder": "array", "categoryarray": names[::-1], "title": None},
            height=max(300, 28 * len(names) + 140),
            legend={"orientation": "h"},
        )
        return fig

    def _observed(self, tl: tlmod.TraceTimeline, trace: str) -> tuple[list[Any], ...]:
        """The observed critical path's segments, each on the lane of the op
        or kernel it is attributed to (read from the nodes' ``ocp_*`` lists)."""
        out: list[list[Any]] = [[], [], [], [], []]
        for name, start, starts, durs, kinds, counted, is_kernel in read_observed(self._graph, trace):
            lane = tlmod.lane_of(tl, name, float(start), stream=is_kernel)
            if lane is None:
                continue
            for s, d, k, c in zip(starts, durs, kinds, counted):
                for column, value in zip(out, (s, d, tl.lanes[lane].name, f"{name} ({k})", bool(c))):
                    column.append(value)
        return out[0], out[1], out[2], out[3], out[4]

    # --- memory -----------------------------------------------------------------------------

    def memory(self, trace: str, *, live: int = 40) -> go.Figure:
        """Live bytes over time per allocator (``memory-timeline``), each
        peak marked (``peak-memory``); below, the ``live`` largest
        allocations live at the highest peak, from allocation to free (to
        the end of the trace when not freed)."""
        go = _plotly()
        from plotly.subplots import make_subplots

        facts = trace_facts(self._graph, trace)
        curve = _answer(self._graph, "memory-timeline", trace, {"max_points": None})
        peak = _answer(self._graph, "peak-memory", trace)
        fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.6, 0.4], vertical_spacing=0.06)
        for allocator in dict.fromkeys(r["allocator"] for r in curve):
            points = [r for r in curve if r["allocator"] == allocator]
            fig.add_trace(
                go.Scatter(
                    name=str(allocator),
                    x=[r["t_us"] for r in points],
                    y=[r["live_bytes"] for r in points],
                    mode="lines",
                    line={"shape": "hv"},
                ),
                row=1,
                col=1,
            )
        peaks = {r["allocator"]: (r["peak_at_us"], r["peak_bytes"]) for r in peak}
        fig.add_trace(
            go.Scatter(
                name="peak",
                x=[t for t, _ in peaks.values()],
                y=[b for _, b in peaks.values()],
                text=[str(a) for a in peaks],
                mode="markers",
                marker={"symbol": "x", "size": 12, "color": COLORS["dependency"]},
            ),
            row=1,
            col=1,
        )
        if peaks:
            top = max(peaks, key=lambda a: (peaks[a][1], str(a)))
            rows = sorted((r for r in peak if r["allocator"] == top), key=lambda r: -r["bytes"])[:live]
            end = float(facts.get("span_us") or 0.0)
            labels = [f"{r['bytes']:,} B {r['tensor'] or r['op'] or ''}"[:60] + f" #{i}" for i, r in enumerate(rows)]
            fig.add_trace(
                go.Bar(
                    name=f"live at the peak of {top}",
                    base=[r["alloc_us"] for r in rows],
                    x=[(r["free_us"] if r["free_us"] is not None else end) - r["alloc_us"] for r in rows],
                    y=labels,
                    customdata=[r["bytes"] for r in rows],
                    orientation="h",
                    marker={"color": COLORS["memcpy"]},
                    hovertemplate="%{y}<br>%{base:.3f} to %{x:.3f} long<extra></extra>",
                ),
                row=2,
                col=1,
            )
            fig.add_vline(x=peaks[top][0], line={"color": COLORS["dependency"], "dash": "dot"})
        fig.update_yaxes(title_text="live bytes", row=1, col=1)
        fig.update_yaxes(autorange="reversed", showticklabels=False, row=2, col=1)
        fig.update_xaxes(title_text=f"time ({_unit(facts)})", row=2, col=1)
        fig.update_layout(title=f"{trace}: memory", height=700, barmode="overlay")
        return fig

    # --- streams ----------------------------------------------------------------------------

    def streams(self, trace: str, *, min_gap_us: float = 10.0) -> go.Figure:
        """Each stream's busy share of the trace's span (``stream-utilization``)."""
        go = _plotly()
        rows = _answer(self._graph, "stream-utilization", trace, {"min_gap_us": min_gap_us})
        labels = [f"{r['device']} {r['stream']}" for r in rows]
        fig = go.Figure(
            go.Bar(
                name="busy share",
                x=[100 * r["utilization"] for r in rows],
                y=labels,
                orientation="h",
                customdata=[[r["busy_us"], r["kernels"], r["gaps"], r["gap_us"]] for r in rows],
                hovertemplate="%{y}: %{x:.1f}% busy<br>%{customdata[0]:,.3f} us in %{customdata[1]} kernels"
                "<br>%{customdata[2]} gaps, %{customdata[3]:,.3f} us<extra></extra>",
                marker={"color": COLORS["compute"]},
            )
        )
        fig.update_layout(
            title=f"{trace}: stream utilization",
            xaxis={"title": "busy (% of the trace's span)", "range": [0, 100]},
            yaxis={"autorange": "reversed"},
            height=max(250, 30 * len(rows) + 140),
        )
        return fig

    # --- collectives ------------------------------------------------------------------------

    def collectives(self, trace: str, *, min_caused_us: float = 10_000.0) -> go.Figure:
        """A multi-rank job's collectives rank by rank: each call as a bar
        from the rank's arrival (its call's start) to the last arrival (its
        wait); a collective's last rank, when it alone held the others up by
        ``min_caused_us`` or more, marked as its straggler."""
        go = _plotly()
        facts = trace_facts(self._graph, trace)
        if not facts.get("has_collectives"):
            raise UserError(
                f"trace {trace!r} has no collectives joined across ranks (it needs two or more ranks' files)"
            )
        calls = read_collectives(self._graph, trace)
        waits: dict[str, list[Any]] = {"base": [], "x": [], "y": [], "text": []}
        marks: dict[str, list[Any]] = {"x": [], "y": [], "text": []}
        for seq, name, group, last_rank, caused, _last_at, rank, wait, _call, start, _end, _kernel in sorted(
            calls, key=lambda c: (c[2] or "", c[0], c[6])
        ):
            label = f"{name} #{seq}" + (f" ({group})" if group else "")
            waits["base"].append(start)
            waits["x"].append(wait)
            waits["y"].append(f"rank {rank}")
            waits["text"].append(label)
            if rank == last_rank and caused >= min_caused_us:
                marks["x"].append(start)
                marks["y"].append(f"rank {rank}")
                marks["text"].append(f"{label}: straggler, {caused:,.3f} us late")
        ranks = sorted({int(y.split()[1]) for y in waits["y"]})
        fig = go.Figure()
        fig.add_trace(
            go.Bar(
                name="wait for the last rank",
                orientation="h",
                marker={"color": COLORS["wait"], "line": {"color": COLORS["communication"], "width": 1}},
                hovertemplate="%{text}<br>arrived %{base:,.3f}, waited %{x:,.3f} us<extra></extra>",
                **waits,
            )
        )
        fig.add_trace(
            go.Scatter(
                name=f"straggler (held the others up by {min_caused_us:,.0f} us or more)",
                mode="markers",
                marker={"symbol": "square-open", "size": 16, "color": COLORS["straggler"], "line": {"width": 3}},
                hovertemplate="%{text}<extra></extra>",
                **marks,
            )
        )
        fig.update_layout(
            title=f"{trace}: collectives",
            barmode="overlay",
            xaxis_title=f"time ({_unit(facts)} since the trace's first event)",
            yaxis={"categoryorder": "array", "categoryarray": [f"rank {r}" for r in ranks][::-1]},
            height=max(250, 60 * len(ranks) + 140),
        )
        return fig


def _answer(graph: Any, name: str, trace: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """An analysis's rows as records; UserError when the trace cannot answer it."""
    res = run_analysis(graph, name, trace, params or {})
    if res.unavailable is not None:
        raise UserError(f"{name} on trace {trace}: {res.unavailable.note}")
    return res.records()


def _placed(
    tl: tlmod.TraceTimeline, rows: Sequence[tuple[Sequence[Any], bool]]
) -> tuple[list[float], list[float], list[str], list[str]]:
    """Marked ops and kernels ((name, start, end), is a kernel) as bars on their lanes."""
    base, length, y, text = [], [], [], []
    for (name, start, end), is_kernel in rows:
        lane = tlmod.lane_of(tl, name, float(start), stream=is_kernel)
        if lane is not None:
            base.append(float(start))
            length.append(max(float(end) - float(start), 0.0))
            y.append(tl.lanes[lane].name)
            text.append(str(name))
    return base, length, y, text


def _bars(
    go: Any,
    name: str,
    base: list[float],
    length: list[float],
    y: list[str],
    text: list[str],
    color: str,
    *,
    outline: bool = False,
    opacity: list[float] | None = None,
    count: list[int] | None = None,
) -> Any:
    marker: dict[str, Any] = {"color": color}
    if outline:
        marker = {"color": "rgba(0,0,0,0)", "line": {"color": color, "width": 2}}
    if opacity is not None:
        marker["opacity"] = opacity
    return go.Bar(
        name=name,
        base=base,
        x=length,
        y=y,
        text=text,
        customdata=count,
        orientation="h",
        marker=marker,
        textposition="none",
        hovertemplate="%{text}<br>%{base:,.3f} + %{x:,.3f}<extra>" + name + "</extra>",
    )


def _unit(facts: dict[str, Any]) -> str:
    return "steps" if facts.get("time_unit") == "step" else "us"
