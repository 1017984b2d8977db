"""What the Neo4j Browser guide needs to know about the database: its
traces, the analyses a trace can answer (and why not the others), and
parameter values that fit the trace. :mod:`tracegraph.api.guide` renders it.

Read here, in the service, so that the route only renders (every front end
reads through ``queries/``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tracegraph.db.base import Graph
from tracegraph.queries.catalog import Analysis, catalog
from tracegraph.queries.run import unavailable

# Values for required parameters that no default can give, picked from the
# trace so that the slide shows something: the heaviest op on the critical
# path (fewest namesakes first: a neighborhood of one op reads best), and
# the moment of the largest allocator's peak.
_OP = """MATCH (o:Op {trace: $trace})
WHERE o.cp_step IS NOT NULL
WITH o ORDER BY o.path_weight_us DESC, o.cp_step LIMIT 25
MATCH (same:Op {trace: $trace, name: o.name})
WITH o, count(same) AS namesakes
RETURN o.name ORDER BY namesakes, o.path_weight_us DESC, o.cp_step LIMIT 1"""
_PEAK_AT = """MATCH (m:Allocator {trace: $trace})
WHERE m.peak_bytes IS NOT NULL
RETURN m.peak_us ORDER BY m.peak_bytes DESC, m.name LIMIT 1"""
_SAMPLES = {"op": _OP, "at_us": _PEAK_AT}


@dataclass(frozen=True)
class GuideInputs:
    """The database as the guide shows it. ``facts`` is the asked trace's
    summary, None when no trace was asked or there is none by that name
    (the guide then lists the traces)."""

    traces: list[dict[str, Any]]
    facts: dict[str, Any] | None = None
    analyses: list[Analysis] = field(default_factory=list)
    unavailable: list[tuple[Analysis, str]] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)


def guide_inputs(graph: Graph, trace: str | None) -> GuideInputs:
    """The traces, and for ``trace`` (when it is stored) the analyses it can
    answer, those it cannot with the reason, and its parameter values."""
    traces = graph.list_traces()
    facts = next((t for t in traces if t["trace"] == trace), None)
    if trace is None or facts is None:
        return GuideInputs(traces)
    values = trace_values(graph, facts, traces)
    analyses: list[Analysis] = []
    missing: list[tuple[Analysis, str]] = []
    for a in catalog().values():
        # The traces it reads: ``trace`` and the baseline of a diff.
        read = {p.name: trace if p.name == "trace" else values["base"] for p in a.params if p.is_trace}
        why = unavailable(graph, a, read)
        if why is None:
            analyses.append(a)
        else:
            missing.append((a, why.reason))
    return GuideInputs(traces, facts, analyses, missing, values)


def trace_values(graph: Graph, facts: dict[str, Any], traces: list[dict[str, Any]]) -> dict[str, Any]:
    """Values for the required parameters of ``facts``'s trace: ``op``,
    ``at_us`` (None when the trace has none) and ``base``, the baseline of
    the diffs: another trace of the same framework, else any other, else
    the trace itself (a diff of nothing)."""
    trace = facts["trace"]
    out: dict[str, Any] = {}
    for name, query in _SAMPLES.items():
        rows = graph.run(query, {"trace": trace}, trace=trace).rows
        out[name] = rows[0][0] if rows else None
    others = [t for t in traces if t["trace"] != trace and t.get("has_times")]
    same = [t for t in others if t.get("framework") == facts.get("framework")]
    out["base"] = (same or others or [facts])[0]["trace"]
    return out
