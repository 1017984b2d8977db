"""Running a catalog analysis against one trace."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tracegraph.db.base import SCHEMA_VERSION, Graph
from tracegraph.errors import BadRequest, DatabaseError, NotFound
from tracegraph.queries.catalog import Analysis, get


@dataclass
class AnalysisResult:
    analysis: str
    trace: str
    columns: list[str]
    rows: list[list[Any]] = field(default_factory=list)
    note: str | None = None

    @property
    def available(self) -> bool:
        """False when the trace lacks what the analysis needs (``note`` says what)."""
        return not (self.note or "").startswith("not available")

    def records(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, r)) for r in self.rows]


def trace_facts(graph: Graph, trace: str) -> dict[str, Any]:
    """The ready Trace node's properties; NotFound when there is none."""
    props = graph.trace_facts(trace)
    if props is None:
        raise NotFound(f"no trace named {trace!r}", cli_hint="see `tracegraph traces`")
    return props


def check_layout(trace: str, facts: dict[str, Any]) -> None:
    """Refuse a trace stored with another graph layout than this tracegraph reads."""
    version = facts.get("schema_version", 1)
    if version != SCHEMA_VERSION:
        raise DatabaseError(
            f"trace {trace!r} was stored by another tracegraph version (graph schema {version}, "
            f"this one reads {SCHEMA_VERSION}): ingest it again with --replace"
        )


def bind(analysis: Analysis, trace: str, raw: dict[str, Any]) -> dict[str, Any]:
    """Typed parameters: defaults filled, unknown names and bad values refused."""
    params: dict[str, Any] = {}
    for name in raw:
        analysis.param(name)  # raises for unknown names
    for p in analysis.params:
        if p.name == "trace":
            params["trace"] = trace
        elif p.name in raw and raw[p.name] is not None:
            params[p.name] = p.coerce(raw[p.name])
        elif p.required:
            raise BadRequest(f"analysis {analysis.name} needs parameter {p.name!r}")
        else:
            params[p.name] = p.default
    return params


def run_analysis(
    graph: Graph, name: str, trace: str, raw_params: dict[str, Any] | None = None, *, timeout_ms: int | None = None
) -> AnalysisResult:
    analysis = get(name)
    params = bind(analysis, trace, raw_params or {})
    columns = [c.name for c in analysis.columns]
    # Every trace the analysis reads must be a ready trace of this layout
    # that has what the analysis requires.
    for p in analysis.params:
        if not p.is_trace or params.get(p.name) is None:
            continue
        facts = trace_facts(graph, params[p.name])
        check_layout(params[p.name], facts)
        for need in analysis.requires:
            if not facts.get(need.flag):
                which = "" if p.name == "trace" else f"{p.name} trace {params[p.name]!r}: "
                note: str | None = (
                    f"not available: {which}{need.missing} ({facts.get('framework')}, {facts.get('sources')})"
                )
                return AnalysisResult(name, trace, columns, [], note)
    if analysis.compares_traces:
        res = graph.run(analysis.text, params, timeout_ms=timeout_ms)
    else:
        res = graph.run(analysis.text, params, trace=trace, timeout_ms=timeout_ms)
    note = None if res.rows else "no rows: the trace has nothing that matches"
    return AnalysisResult(name, trace, res.columns or columns, res.rows, note)
