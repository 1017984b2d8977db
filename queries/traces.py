"""Stored traces: listing, describing and dropping them."""

from __future__ import annotations

import json
from dataclasses import fields
from typing import Any

from tracegraph.db.base import Graph
from tracegraph.errors import NotFound
from tracegraph.output import is_time, readable
from tracegraph.queries.run import stored_name, trace_facts
from tracegraph.queries.types import DroppedTrace, TraceSummary

_SCALARS = [f.name for f in fields(TraceSummary) if f.name not in ("trace", "sources", "counts", "meta", "warnings")]
_INTS = {f.name for f in fields(TraceSummary) if f.type == "int | None"}
_FLOATS = {f.name for f in fields(TraceSummary) if f.type == "float | None"}


def _number(name: str, v: Any) -> Any:
    if v is None:
        return None
    if name in _INTS:
        return int(v)
    if name in _FLOATS:
        return readable(float(v), is_time(name))
    return v


def _meta(props: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in sorted(props.items()):
        if k.startswith("meta_"):
            try:
                out[k[5:]] = json.loads(v) if isinstance(v, str) and v[:1] in "[{" else v
            except ValueError:
                out[k[5:]] = v
    return out


def warnings(meta: dict[str, Any]) -> list[str]:
    """What the answers of a trace's analyses are short of, from the
    format's facts: the ranks of a job that no file gave (its collectives
    are joined, and its stragglers named, among the ranks given)."""
    out = []
    missing = meta.get("ranks_missing")
    if isinstance(missing, list) and missing:
        which = f"rank {missing[0]} is" if len(missing) == 1 else f"ranks {', '.join(map(str, missing))} are"
        out.append(
            f"the job's {which} not among the files: its collectives are joined, "
            "and its stragglers named, among the ranks given"
        )
    return out


def summary(props: dict[str, Any]) -> TraceSummary:
    """A Trace node's properties as a TraceSummary."""
    meta = _meta(props)
    return TraceSummary(
        trace=props["trace"],
        **{k: _number(k, props.get(k)) for k in _SCALARS},
        sources=json.loads(props.get("sources") or "[]"),
        counts=json.loads(props.get("counts") or "{}"),
        meta=meta,
        warnings=warnings(meta),
    )


def list_traces(graph: Graph) -> list[TraceSummary]:
    """Every ready trace, by name."""
    return [summary(p) for p in graph.list_traces()]


def describe_trace(graph: Graph, trace: str) -> TraceSummary:
    """One trace's summary (NotFound when there is none)."""
    return summary(trace_facts(graph, trace))


def trace_exists(graph: Graph, trace: str) -> bool:
    """Whether a ready trace has that name."""
    try:
        trace_facts(graph, trace)
    except NotFound:
        return False
    return True


def drop_trace(graph: Graph, trace: str) -> DroppedTrace:
    """Remove a trace, atomically (NotFound when there is none)."""
    return DroppedTrace(trace, graph.drop_trace(stored_name(trace)))


def sweep(graph: Graph) -> list[str]:
    """Remove what loads whose process died left behind (their lease died
    with them, so a live load is never touched); what was removed."""
    return graph.sweep()
