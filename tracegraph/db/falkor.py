"""FalkorDB through its own client (``falkordb``), embedded or remote.

All traces live in one graph (default ``tracegraph``) and are told apart by
the ``trace`` property, exactly as on Neo4j, so one Cypher text fits both.
"""

from __future__ import annotations

import math
from typing import Any

import redis
from falkordb import FalkorDB
from falkordb.edge import Edge
from falkordb.node import Node
from falkordb.path import Path as FPath

from tracegraph.db.base import LABELS, Result, node_value, path_value, relationship_value
from tracegraph.errors import DatabaseError, UserError


class FalkorGraph:
    """One FalkorDB graph. ``kind`` is ``falkordb`` (or ``embedded``)."""

    def __init__(self, *, host: str | None = None, port: int | None = None,
                 unix_socket: str | None = None, graph: str = "tracegraph",
                 kind: str = "falkordb", on_close=None) -> None:
        self.kind = kind
        self._on_close = on_close
        try:
            if unix_socket:
                self._db = FalkorDB(unix_socket_path=unix_socket)
            else:
                self._db = FalkorDB(host=host or "localhost", port=port or 6379)
            self._db.connection.ping()
        except redis.RedisError as e:
            where = unix_socket or f"{host}:{port}"
            raise DatabaseError(f"cannot reach FalkorDB at {where}: {e}") from None
        self._graph = self._db.select_graph(graph)
        if not self._db.connection.exists(graph):
            # Read-only queries on a graph that does not exist yet fail with
            # "empty key"; creating the schema creates the graph.
            self.ensure_schema()

    def run(self, query: str, params: dict | None = None, *, write: bool = False,
            timeout_ms: int | None = None) -> Result:
        params = _clean(params) if params else None
        try:
            if write:
                res = self._graph.query(query, params, timeout=timeout_ms)
            else:
                res = self._graph.ro_query(query, params, timeout=timeout_ms)
        except redis.ConnectionError as e:
            raise DatabaseError(f"lost connection to FalkorDB: {e}") from None
        except redis.ResponseError as e:
            raise UserError(f"FalkorDB refused the query: {str(e).splitlines()[0]}") from None
        columns = [h[1] if isinstance(h, (list, tuple)) else str(h) for h in (res.header or [])]
        rows = [[_value(v) for v in row] for row in (res.result_set or [])]
        stats = {"nodes_created": res.nodes_created, "relationships_created": res.relationships_created,
                 "nodes_deleted": res.nodes_deleted, "relationships_deleted": res.relationships_deleted,
                 "properties_set": res.properties_set}
        return Result(columns=columns, rows=rows, stats=stats)

    def ensure_schema(self) -> None:
        """A range index on ``trace`` and ``uid`` for every label.

        FalkorDB has no composite uniqueness constraint, so uniqueness of
        (trace, uid) is kept by the loader: a trace is written once, by one
        loader, under a name no other trace holds.
        """
        existing = {(r[0], tuple(r[1])) for r in self._graph.query("CALL db.indexes() YIELD label, properties RETURN label, properties").result_set}
        for label in LABELS:
            for prop in ("trace", "uid"):
                if not any(lbl == label and prop in props for lbl, props in existing):
                    self._graph.query(f"CREATE INDEX FOR (n:{label}) ON (n.{prop})")

    def version(self) -> str:
        info = self._db.connection.info("server")
        mods = self._db.connection.execute_command("MODULE", "LIST")
        graph_ver = next((m[3] for m in mods if m[1] in (b"graph", "graph")), None)
        return f"redis {info.get('redis_version')}, FalkorDB module {graph_ver}"

    def close(self) -> None:
        try:
            self._db.connection.close()
        finally:
            if self._on_close:
                self._on_close()
                self._on_close = None


def _clean(value: Any) -> Any:
    """NaN/inf are not Cypher literals: send them as null."""
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):  # numpy scalars
        return _clean(value.item())
    return value


def _value(v: Any) -> Any:
    if isinstance(v, Node):
        return node_value(v.id, v.labels or [], v.properties)
    if isinstance(v, Edge):
        src = v.src_node.id if isinstance(v.src_node, Node) else v.src_node
        dst = v.dest_node.id if isinstance(v.dest_node, Node) else v.dest_node
        return relationship_value(v.id, v.relation, src, dst, v.properties)
    if isinstance(v, FPath):
        return path_value([_value(n) for n in v.nodes()], [_value(e) for e in v.edges()])
    if isinstance(v, list):
        return [_value(x) for x in v]
    if isinstance(v, dict):
        return {k: _value(x) for k, x in v.items()}
    return v
