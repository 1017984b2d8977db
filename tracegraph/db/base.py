"""The one interface both engines implement, and the value shapes it returns.

Everything above this layer (loader, catalog, CLI, HTTP) talks to a
:class:`Graph` and never imports a driver, so the same Cypher text and the
same code path serve FalkorDB and Neo4j.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

# Labels whose nodes carry (trace, uid); schema setup indexes each of them.
# The layout of a stored trace (labels, properties, relationships), stored
# on its Trace node: analyses refuse a trace written with another layout
# instead of answering from properties it does not have.
SCHEMA_VERSION = 2

LABELS = ("Trace", "Op", "Kernel", "Tensor", "Allocation", "Device", "Stream", "Allocator", "MemoryTimeline")


@dataclass
class Result:
    """Rows of plain Python values; graph values become dicts (see below)."""

    columns: list[str]
    rows: list[list[Any]] = field(default_factory=list)
    stats: dict = field(default_factory=dict)

    def records(self) -> list[dict]:
        return [dict(zip(self.columns, r)) for r in self.rows]


def node_value(element_id: Any, labels: list[str], properties: dict) -> dict:
    """A node as JSON: ``{"kind": "node", "id", "labels", "properties"}``."""
    return {"kind": "node", "id": str(element_id), "labels": list(labels), "properties": dict(properties)}


def relationship_value(element_id: Any, rel_type: str, start: Any, end: Any, properties: dict) -> dict:
    """A relationship as JSON: type, start and end node ids, properties."""
    return {"kind": "relationship", "id": str(element_id), "type": rel_type,
            "start": str(start), "end": str(end), "properties": dict(properties)}


def path_value(nodes: list[dict], relationships: list[dict]) -> dict:
    """A path as JSON: its nodes and relationships in order."""
    return {"kind": "path", "nodes": nodes, "relationships": relationships}


class Graph(Protocol):
    """A connection to one tracegraph database.

    ``run`` executes one Cypher statement. ``write=False`` asks the engine
    itself to refuse writes (a read transaction on Neo4j, ``GRAPH.RO_QUERY``
    on FalkorDB): that, not keyword filtering, is what makes ad-hoc queries
    safe. ``timeout_ms`` bounds the statement on the server.
    """

    kind: str

    def run(self, query: str, params: dict | None = None, *, write: bool = False,
            timeout_ms: int | None = None) -> Result: ...

    def ensure_schema(self) -> None: ...

    def version(self) -> str: ...

    def close(self) -> None: ...
