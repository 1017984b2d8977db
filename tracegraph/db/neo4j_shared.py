"""A Neo4j load's parts written from other processes (a cluster's workers).

The load stays the client's (:class:`~tracegraph.db.neo4j_publish.Neo4jLoad`):
it holds the lease, finishes (publishes) or aborts. A :class:`SharedPart`
is a plain, picklable reference to one of its parts: the server's address,
the load's name and the part's index. The process it is sent to opens a
connection of its own (one per process, kept for the next part) and
writes the part under the load's name exactly as the client would
(:func:`~tracegraph.db.neo4j_publish.write_part`), so the client's
guarantees hold: nothing is visible before ``finish``; ``abort`` deletes
every part, wherever it was written from.

A part is written only while its load is: the Trace node under the load's
name must still say ``loading`` when the part starts and after each of its
batches (a part of a load given up stops). The client aborts only once
every task it sent has ended (:mod:`tracegraph.ingest.cluster`), so
nothing is still being written while the abort deletes; if the client
itself dies, the next sweep deletes its load, and a worker still writing
stops at its next batch (the batches already in flight, at most
``IN_FLIGHT``, may then be left behind under the load's name).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tracegraph.db.base import Progress, TraceTables
from tracegraph.db.values import as_tables
from tracegraph.errors import DatabaseError

if TYPE_CHECKING:
    from tracegraph.db.neo4j_db import Neo4jGraph

# This process's connections, by (uri, auth, database): a worker writes
# many parts, each through the same driver.
_graphs: dict[tuple[str, tuple[str, str] | None, str | None], Neo4jGraph] = {}
_graphs_lock = threading.Lock()


@dataclass(frozen=True)
class SharedPart:
    """Part ``index`` of the load written as trace ``target`` on the Neo4j
    server at ``uri`` (``auth``, ``database`` as the client connected)."""

    uri: str
    auth: tuple[str, str] | None
    database: str | None
    target: str
    index: int

    def part(self, tables: TraceTables, progress: Progress | None = None) -> int:
        """Write the part from this process; returns its index."""
        from tracegraph.db.neo4j_publish import Publisher, write_part

        graph = _graph(self.uri, self.auth, self.database)

        def alive(done: int, total: int) -> None:
            res = graph.run(
                "MATCH (t:Trace {trace: $target, uid: 'trace'}) RETURN t.status", {"target": self.target}, write=True
            )
            if not res.rows or res.rows[0][0] != "loading":
                raise DatabaseError(f"the load {self.target!r} was given up; its part {self.index} stops")
            if progress is not None:
                progress(done, total)

        alive(0, 0)
        write_part(Publisher(graph), self.target, as_tables(tables), alive)
        return self.index


def _graph(uri: str, auth: tuple[str, str] | None, database: str | None) -> Neo4jGraph:
    from tracegraph.db.neo4j_db import Neo4jGraph

    key = (uri, auth, database)
    with _graphs_lock:
        graph = _graphs.get(key)
        if graph is None:
            graph = _graphs[key] = Neo4jGraph(uri, auth, database)
        return graph
