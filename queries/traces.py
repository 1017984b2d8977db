"""Listing and describing stored traces."""

from __future__ import annotations

import json
from dataclasses import fields
from typing import Any

from tracegraph.db.base import Graph
from tracegraph.output import is_time, readable
from tracegraph.queries.run import trace_facts
from tracegraph.queries.types import TraceSummary

_SCALARS = [f.name for f in fields(TraceSummary) if f.name not in ("trace", "sources", "counts", "meta")]
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


def summary(props: dict[str, Any]) -> TraceSummary:
    """A Trace node's properties as a TraceSummary."""
    return TraceSummary(
        trace=props["trace"],
        **{k: _number(k, props.get(k)) for k in _SCALARS},
        sources=json.loads(props.get("sources") or "[]"),
        counts=json.loads(props.get("counts") or "{}"),
        meta=_meta(props),
    )


def list_traces(graph: Graph) -> list[TraceSummary]:
    """Every ready trace, by name."""
    return [summary(p) for p in graph.list_traces()]


def describe_trace(graph: Graph, trace: str) -> TraceSummary:
    """One trace's summary (NotFound when there is none)."""
    return summary(trace_facts(graph, trace))
