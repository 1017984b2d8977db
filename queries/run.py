"""Running a catalog analysis against one trace."""

from __future__ import annotations

from dataclasses import dataclass, field

from tracegraph.db.base import SCHEMA_VERSION, Graph
from tracegraph.errors import NotFound, UserError
from tracegraph.queries.catalog import Analysis, get

# Trace facts an analysis may require, and how to say that one is missing.
REQUIREMENTS = {
    "times": ("has_times", "the trace has no op times"),
    "deps": ("has_deps", "the trace has no dependencies between ops"),
    "memory": ("has_memory", "the trace has no memory allocation records"),
    "kernels": ("has_kernels", "the trace has no device stream (kernel) records"),
    "copies": ("has_copies", "the trace has no memory copies"),
}


@dataclass
class AnalysisResult:
    analysis: str
    trace: str
    columns: list[str]
    rows: list[list] = field(default_factory=list)
    note: str | None = None

    def records(self) -> list[dict]:
        return [dict(zip(self.columns, r)) for r in self.rows]


def trace_facts(graph: Graph, trace: str) -> dict:
    """The ready Trace node's properties; NotFound when there is none."""
    res = graph.run("MATCH (t:Trace {trace: $trace, uid: 'trace'}) WHERE t.status = 'ready' RETURN t", {"trace": trace})
    if not res.rows:
        raise NotFound(f"no trace named {trace!r} (see `tracegraph traces`)")
    return res.rows[0][0]["properties"]


def _check_layout(trace: str, facts: dict) -> None:
    version = facts.get("schema_version", 1)
    if version != SCHEMA_VERSION:
        raise UserError(f"trace {trace!r} was stored by another tracegraph version (graph schema {version}, "
                        f"this one reads {SCHEMA_VERSION}): ingest it again with --replace")


def bind(analysis: Analysis, trace: str, raw: dict) -> dict:
    """Typed parameters: defaults filled, unknown names and bad values refused."""
    params = {}
    for name in raw:
        analysis.param(name)  # raises for unknown names
    for p in analysis.params:
        if p.name == "trace":
            params["trace"] = trace
        elif p.name in raw and raw[p.name] is not None:
            params[p.name] = p.coerce(raw[p.name])
        elif p.required:
            raise UserError(f"analysis {analysis.name} needs parameter {p.name!r}")
        else:
            params[p.name] = p.default
    return params


def run_analysis(graph: Graph, name: str, trace: str, raw_params: dict | None = None, *,
                 timeout_ms: int | None = None) -> AnalysisResult:
    analysis = get(name)
    params = bind(analysis, trace, raw_params or {})
    facts = trace_facts(graph, trace)
    _check_layout(trace, facts)
    columns = [c.name for c in analysis.columns]
    # Other traces an analysis reads (trace-diff's `base`): STRING params
    # documented as "trace id ..." must name a ready trace too.
    others = {p.name: trace_facts(graph, params[p.name]) for p in analysis.params
              if p.name != "trace" and p.type == "STRING" and p.doc.startswith("trace id")
              and params.get(p.name) is not None}
    for pname, other in others.items():
        _check_layout(params[pname], other)
    for need in analysis.requires:
        flag, reason = REQUIREMENTS[need]
        if not facts.get(flag):
            return AnalysisResult(name, trace, columns, [], f"not available: {reason} ({facts.get('framework')}, {facts.get('sources')})")
        for pname, other in others.items():
            if not other.get(flag):
                return AnalysisResult(name, trace, columns, [], f"not available: {pname} trace {params[pname]!r}: {reason} "
                                                                f"({other.get('framework')}, {other.get('sources')})")
    res = graph.run(analysis.text, params, timeout_ms=timeout_ms)
    note = None if res.rows else "no rows: the trace has nothing that matches"
    return AnalysisResult(name, trace, res.columns or columns, res.rows, note)
