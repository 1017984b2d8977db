"""What the web UI's timeline can highlight: catalog analyses whose answer
names ops (or kernels), and whether a trace can answer each.

A source is available for a trace exactly when its analysis is: the
trace has every fact the analysis's ``@requires`` names
(:func:`~tracegraph.queries.run.lacks`, the catalog's one rule).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tracegraph.db.base import Graph
from tracegraph.errors import BadRequest, UserError
from tracegraph.queries.catalog import catalog, get
from tracegraph.queries.lanes import TraceTimeline
from tracegraph.queries.run import lacks, run_analysis
from tracegraph.queries.types import HighlightInfo, TraceHighlight, Unavailable


@dataclass(frozen=True)
class HighlightSource:
    """A catalog analysis whose ``column`` names the ops the timeline highlights.

    ``from_timeline``, when given, reads the same set of ops from what the
    timeline loaded anyway, without running the analysis (critical-path
    returns exactly the ops whose ``cp_step`` is set, and the timeline reads
    ``cp_step`` with the ops).

    ``marked``, when given, is a Cypher predicate on ``n`` that selects
    exactly the Op and Kernel nodes the analysis returns (the observed
    critical path's nodes carry ``ocp_steps``; the dependency critical
    path's ops ``cp_step``): the timeline reads them and marks those very
    bars, not every op of the same name (PyTorch's names repeat), without
    running the analysis. With ``marks_launches`` the kernels marked are
    those the marked ops launched.

    The order of :data:`HIGHLIGHT_SOURCES` is the order of preference: a
    trace's timeline opens with the first source available.
    """

    name: str
    label: str
    analysis: str
    column: str = "op"
    from_timeline: Callable[[TraceTimeline], set[str]] | None = None
    marked: str | None = None
    marks_launches: bool = False

    def info(self) -> HighlightInfo:
        return HighlightInfo(self.name, self.label, self.analysis, self.column)

    def unavailable(self, trace: str, facts: dict[str, Any]) -> Unavailable | None:
        """Why the trace (its Trace node's ``facts``) cannot answer it: what its analysis requires and the trace lacks."""
        return lacks(get(self.analysis).requires, trace, facts)


HIGHLIGHT_SOURCES: list[HighlightSource] = [
    HighlightSource(
        "critical-path",
        "critical path (dependency DAG)",
        "critical-path",
        marked="n.cp_step IS NOT NULL",
        marks_launches=True,
    ),
    HighlightSource(
        "observed-critical-path",
        "observed critical path",
        "observed-critical-path",
        column="event",
        marked="n.ocp_steps IS NOT NULL",
    ),
]


def register_highlight(source: HighlightSource) -> None:
    """Add (or replace, by name) a highlight source."""
    HIGHLIGHT_SOURCES[:] = [s for s in HIGHLIGHT_SOURCES if s.name != source.name] + [source]


def available_highlights() -> list[HighlightSource]:
    """The sources whose analysis this version's catalog has."""
    names = catalog()
    return [s for s in HIGHLIGHT_SOURCES if s.analysis in names]


def highlight_source(name: str) -> HighlightSource:
    """The source named ``name`` (BadRequest naming those there are)."""
    found = next((s for s in available_highlights() if s.name == name), None)
    if found is None:
        have = ", ".join(s.name for s in available_highlights())
        raise BadRequest(f"highlight: unknown source {name!r} (have: {have})")
    return found


def trace_highlights(trace: str, facts: dict[str, Any]) -> list[TraceHighlight]:
    """The sources as they apply to one trace (its facts), in order of preference."""
    out = []
    for s in available_highlights():
        missing = s.unavailable(trace, facts)
        reason = None if missing is None else missing.reason
        out.append(TraceHighlight(s.name, s.label, s.analysis, s.column, missing is None, reason))
    return out


def highlighted_ops(
    graph: Graph, trace: str, source: HighlightSource, timeout_ms: int | None
) -> tuple[set[str], str | None]:
    """The op names the source's analysis returns for the trace, and its note."""
    res = run_analysis(graph, source.analysis, trace, {}, timeout_ms=timeout_ms)
    if source.column not in res.columns:
        raise UserError(f"analysis {source.analysis} has no column {source.column!r}")
    col = res.columns.index(source.column)
    return {r[col] for r in res.rows if r[col] is not None}, res.note
