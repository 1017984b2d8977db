"""Neo4j 5 through the official ``neo4j`` driver."""

from __future__ import annotations

from typing import Any

import neo4j
from neo4j import GraphDatabase
from neo4j.exceptions import AuthError, ClientError, Neo4jError, ServiceUnavailable
from neo4j.graph import Node, Path, Relationship

from tracegraph.db.base import LABELS, Result, node_value, path_value, relationship_value
from tracegraph.errors import DatabaseError, UserError


class Neo4jGraph:
    """One Neo4j database (default: the server's default database)."""

    kind = "neo4j"

    def __init__(self, uri: str, auth: tuple[str, str] | None, database: str | None = None) -> None:
        self._driver = GraphDatabase.driver(uri, auth=auth)
        self._database = database
        try:
            self._driver.verify_connectivity()
        except (ServiceUnavailable, AuthError, OSError, ValueError) as e:
            self._driver.close()
            raise DatabaseError(f"cannot reach Neo4j at {uri}: {e}") from None

    def run(self, query: str, params: dict | None = None, *, write: bool = False,
            timeout_ms: int | None = None) -> Result:
        tx_query = neo4j.Query(query, timeout=timeout_ms / 1000 if timeout_ms else None)

        def work(tx):
            res = tx.run(tx_query, params or {})
            keys = list(res.keys())
            rows = [[_value(v) for v in rec.values()] for rec in res]
            counters = res.consume().counters
            return keys, rows, counters

        try:
            with self._driver.session(database=self._database) as session:
                fn = session.execute_write if write else session.execute_read
                keys, rows, c = fn(work)
        except ServiceUnavailable as e:
            raise DatabaseError(f"lost connection to Neo4j: {e}") from None
        except (ClientError, Neo4jError) as e:
            raise UserError(f"Neo4j refused the query: {e.message or e}") from None
        stats = {"nodes_created": c.nodes_created, "relationships_created": c.relationships_created,
                 "nodes_deleted": c.nodes_deleted, "relationships_deleted": c.relationships_deleted,
                 "properties_set": c.properties_set}
        return Result(columns=keys, rows=rows, stats=stats)

    def ensure_schema(self) -> None:
        """(trace, uid) unique per label, plus an index on ``trace`` alone."""
        for label in LABELS:
            low = label.lower()
            self.run(f"CREATE CONSTRAINT {low}_key IF NOT EXISTS FOR (n:{label}) REQUIRE (n.trace, n.uid) IS UNIQUE", write=True)
            self.run(f"CREATE INDEX {low}_trace IF NOT EXISTS FOR (n:{label}) ON (n.trace)", write=True)
        self.run("CALL db.awaitIndexes(300)", write=False)

    def version(self) -> str:
        info = self._driver.get_server_info()
        return f"Neo4j {info.agent}"

    def close(self) -> None:
        self._driver.close()


def _value(v: Any) -> Any:
    if isinstance(v, Node):
        return node_value(v.element_id, sorted(v.labels), dict(v))
    if isinstance(v, Relationship):
        return relationship_value(v.element_id, v.type, v.start_node.element_id, v.end_node.element_id, dict(v))
    if isinstance(v, Path):
        return path_value([_value(n) for n in v.nodes], [_value(r) for r in v.relationships])
    if isinstance(v, list):
        return [_value(x) for x in v]
    if isinstance(v, dict):
        return {k: _value(x) for k, x in v.items()}
    return v
