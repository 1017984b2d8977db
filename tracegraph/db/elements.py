"""Nodes, relationships and paths as the plain values :meth:`Graph.run
<tracegraph.db.base.Graph.run>` answers, the same from every engine:
``{"kind": "node", "id", "labels", "properties"}``, ``{"kind":
"relationship", "id", "type", "start", "end", "properties"}`` and ``{"kind":
"path", "nodes", "relationships"}``. An engine tells its driver's elements
apart (:func:`plain`'s ``element``); the shapes are made here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def node_value(element_id: Any, labels: list[str], properties: dict[str, Any]) -> dict[str, Any]:
    """A node as JSON: ``{"kind": "node", "id", "labels", "properties"}``."""
    return {"kind": "node", "id": str(element_id), "labels": list(labels), "properties": dict(properties)}


def relationship_value(
    element_id: Any, rel_type: str, start: Any, end: Any, properties: dict[str, Any]
) -> dict[str, Any]:
    """A relationship as JSON: type, start and end node ids, properties."""
    return {
        "kind": "relationship",
        "id": str(element_id),
        "type": rel_type,
        "start": str(start),
        "end": str(end),
        "properties": dict(properties),
    }


def path_value(nodes: list[dict[str, Any]], relationships: list[dict[str, Any]]) -> dict[str, Any]:
    """A path as JSON: its nodes and relationships in order."""
    return {"kind": "path", "nodes": nodes, "relationships": relationships}


_SCALARS = frozenset({str, int, float, bool, type(None)})


def plain(v: Any, element: Callable[[Any], dict[str, Any] | None]) -> Any:
    """A value of a driver's answer as plain data: ``element(v)`` for a
    node, relationship or path of the driver (None for anything else),
    lists and maps item by item, anything else as it is."""
    if type(v) in _SCALARS:  # (most cells: no driver type is one of these)
        return v
    found = element(v)
    if found is not None:
        return found
    if isinstance(v, list):
        return [plain(x, element) for x in v]
    if isinstance(v, dict):
        return {k: plain(x, element) for k, x in v.items()}
    return v
