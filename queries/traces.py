"""Listing and describing stored traces."""

from __future__ import annotations

import json
from typing import Any

from tracegraph.db.base import Graph
from tracegraph.queries.run import trace_facts

_PUBLIC = (
    "framework",
    "time_unit",
    "ops",
    "executed_ops",
    "span_us",
    "critical_path_us",
    "critical_path_ops",
    "longest_chain_ops",
    "memory_peak_bytes",
    "node_count",
    "relationship_count",
    "ingested_at",
    "has_times",
    "has_deps",
    "has_kernels",
    "has_memory",
    "has_copies",
)


def _public(props: dict[str, Any]) -> dict[str, Any]:
    out = {"trace": props["trace"]}
    out.update({k: props.get(k) for k in _PUBLIC})
    out["sources"] = json.loads(props.get("sources") or "[]")
    out["counts"] = json.loads(props.get("counts") or "{}")
    return out


def list_traces(graph: Graph) -> list[dict[str, Any]]:
    """Every ready trace, by name."""
    # A trace being replaced (Neo4j: `swapping`) is listed with its old facts.
    res = graph.run("MATCH (t:Trace) WHERE t.status IN ['ready', 'swapping'] RETURN t ORDER BY t.trace")
    return [_public(r[0]["properties"]) for r in res.rows]


def describe_trace(graph: Graph, trace: str) -> dict[str, Any]:
    """One trace's summary (NotFound when there is none)."""
    return _public(trace_facts(graph, trace))
