"""Running a catalog analysis against one trace: the one place where an
analysis's parameters are bound and checked, and where a trace that lacks
what an analysis needs becomes :class:`~tracegraph.queries.types.Unavailable`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, cast

from tracegraph.db.base import SCHEMA_VERSION, Graph
from tracegraph.errors import BadRequest, DatabaseError, NotFound, QueryError, QueryTimeout
from tracegraph.facts import Fact
from tracegraph.output import jsonable, readable_rows
from tracegraph.queries.catalog import Analysis, get
from tracegraph.queries.types import AnalysisResult, Unavailable


def no_such_trace(trace: str) -> NotFound:
    return NotFound(f"no trace named {trace!r}", cli_hint="see `tracegraph traces`")


def stored_name(trace: str) -> str:
    """``trace``, a name a stored trace may have: NotFound for one with a
    NUL character, which is no trace's (and which no statement can carry:
    FalkorDB's statements end at a NUL). Checked before the database sees it."""
    if "\0" in trace:
        raise no_such_trace(trace)
    return trace


def trace_facts(graph: Graph, trace: str) -> dict[str, Any]:
    """The ready Trace node's properties; NotFound when there is none."""
    props = graph.trace_facts(stored_name(trace))
    if props is None:
        raise no_such_trace(trace)
    return props


def lacks(requires: Iterable[Fact], trace: str, facts: dict[str, Any], which: str = "") -> Unavailable | None:
    """The first of the facts ``requires`` that the trace (its Trace node's
    ``facts``) lacks, as why what needs it is not available; None when it
    has them all. The one rule for what an analysis's ``@requires`` means
    (the catalog's analyses, the timeline's highlights, what-if's DAG)."""
    for need in requires:
        if not facts.get(need.flag):
            reason = f"{which}{need.missing} ({facts.get('framework')}, {facts.get('sources')})"
            return Unavailable(need.value, trace, reason)
    return None


def check_layout(trace: str, facts: dict[str, Any]) -> None:
    """Refuse a trace stored with another graph layout than this tracegraph reads."""
    version = facts.get("schema_version", 1)
    if version != SCHEMA_VERSION:
        raise DatabaseError(
            f"trace {trace!r} was stored by another tracegraph version (graph schema {version}, "
            f"this one reads {SCHEMA_VERSION}): ingest it again with --replace"
        )


def bind(analysis: Analysis, trace: str, raw: Mapping[str, Any]) -> dict[str, Any]:
    """Typed parameters: defaults filled; unknown names, values given more
    than once (a list), bad or out-of-range values and missing required
    ones refused with BadRequest naming the parameter. ``raw`` values are
    what a front end got (text from the CLI or a query string, or typed)."""
    names = [p.name for p in analysis.params if p.name != "trace"]
    for name, value in raw.items():
        if name not in names:
            has = ", ".join(names) or "none"
            raise BadRequest(f"parameter {name}: analysis {analysis.name} has no parameter {name!r} (has: {has})")
        if isinstance(value, list):
            raise BadRequest(f"parameter {name}: given {len(value)} times")
    params: dict[str, Any] = {}
    for p in analysis.params:
        if p.name == "trace":
            params["trace"] = trace
        elif raw.get(p.name) is not None:
            params[p.name] = p.coerce(raw[p.name])
        elif p.required:
            raise BadRequest(f"parameter {p.name}: analysis {analysis.name} needs parameter {p.name!r} ({p.doc})")
        else:
            params[p.name] = p.default
    return params


def unavailable(graph: Graph, analysis: Analysis, params: dict[str, Any]) -> Unavailable | None:
    """Why a trace the analysis reads lacks what it requires, or None.

    Every trace the analysis reads must be a ready trace of this layout
    (NotFound, DatabaseError otherwise)."""
    for p in analysis.params:
        if not p.is_trace or params.get(p.name) is None:
            continue
        trace = params[p.name]
        facts = trace_facts(graph, trace)
        check_layout(trace, facts)
        missing = lacks(analysis.requires, trace, facts, "" if p.name == "trace" else f"{p.name} trace {trace!r}: ")
        if missing is not None:
            return missing
    return None


def run_analysis(
    graph: Graph, name: str, trace: str, raw_params: Mapping[str, Any] | None = None, *, timeout_ms: int | None = None
) -> AnalysisResult:
    """Run catalog analysis ``name`` on ``trace``: its rows with numbers
    as people read them (:func:`~tracegraph.output.readable_rows`), and
    when there are none, the analysis's ``@empty`` line why.

    An analysis never answers with the engine's own words: the catalog's
    texts are tested on both engines, so a statement the database refuses
    was given a value it cannot take, and that is reported naming the
    parameters (BadRequest); a timeout stays a QueryTimeout."""
    analysis = get(name)
    params = bind(analysis, trace, raw_params or {})
    columns = [c.name for c in analysis.columns]
    missing = unavailable(graph, analysis, params)
    if missing is not None:
        return AnalysisResult(name, trace, columns, [], missing, missing.note)
    try:
        res = graph.run(analysis.text, params, trace=None if analysis.compares_traces else trace, timeout_ms=timeout_ms)
    except QueryTimeout:
        raise
    except QueryError:
        given = ", ".join(f"{k}={v!r}" for k, v in params.items() if k != "trace") or "none"
        raise BadRequest(f"analysis {name} could not run on trace {trace!r} with these parameters ({given})") from None
    note = None if res.rows else analysis.no_rows(params)
    out_columns = res.columns or columns
    # Plain values, numbers readable (tracegraph/output.py), the same for every front end.
    rows = cast(list[list[Any]], jsonable(readable_rows(out_columns, res.rows)))
    return AnalysisResult(name, trace, out_columns, rows, None, note)
