"""Whether the database answers, and the versions: what ``/health`` reports."""

from __future__ import annotations

import tracegraph
from tracegraph.db.base import Graph
from tracegraph.errors import first_line
from tracegraph.queries.types import Health

# How long the database has to answer a ping.
PING_MS = 5000


def health(graph: Graph) -> Health:
    """The database reachable: its version (DatabaseError when it does not answer)."""
    graph.run("RETURN 1 AS ok", timeout_ms=PING_MS)
    return Health("ok", graph.backend, "reachable", tracegraph.__version__, graph.version())


def unreachable(backend: str, error: BaseException) -> Health:
    """The database of ``backend`` not reachable, and why."""
    return Health("unavailable", backend, "unreachable", tracegraph.__version__, None, first_line(error))
