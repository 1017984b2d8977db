"""``--db`` URIs to :class:`Graph` objects: the one place that reads them.

* nothing (and no ``TRACEGRAPH_DB``): the embedded FalkorDB in
  ``$TRACEGRAPH_HOME``;
* ``neo4j://``, ``neo4j+s://``, ``bolt://``, ``bolt+s://`` (and ``+ssc``):
  Neo4j 5; credentials from the URI's userinfo or
  ``NEO4J_USER``/``NEO4J_PASSWORD``, no auth when neither is given; a path
  (``/mydb``) selects the database;
* ``falkordb://host:port[/graph]``: a FalkorDB server the user runs;
  ``graph`` (default ``tracegraph``) names the catalog graph, and prefixes
  the per-trace graphs' keys.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from tracegraph.db.base import Graph
from tracegraph.errors import BadRequest

_NEO4J = ("neo4j", "neo4j+s", "neo4j+ssc", "bolt", "bolt+s", "bolt+ssc")


@dataclass(frozen=True)
class Target:
    """A parsed ``--db``: which engine, and how to reach it."""

    backend: str  # embedded / falkordb / neo4j
    uri: str | None
    address: str | None = None  # neo4j: scheme://host[:port]; falkordb: host
    port: int | None = None
    auth: tuple[str, str] | None = None
    database: str | None = None  # neo4j database, or the FalkorDB graph name


def db_uri(explicit: str | None) -> str | None:
    """The URI in force: ``--db``, else ``$TRACEGRAPH_DB``, else None (embedded)."""
    return explicit or os.environ.get("TRACEGRAPH_DB") or None


def parse(uri: str | None) -> Target:
    """Where ``uri`` (or the environment's default) points; BadRequest for anything else."""
    uri = db_uri(uri)
    if not uri or uri in ("embedded", "embedded:"):
        return Target("embedded", None)
    parts = urlsplit(uri)
    if parts.scheme in _NEO4J:
        user = unquote(parts.username) if parts.username else os.environ.get("NEO4J_USER")
        password = unquote(parts.password) if parts.password else os.environ.get("NEO4J_PASSWORD")
        netloc = (parts.hostname or "localhost") + (f":{parts.port}" if parts.port else "")
        return Target(
            "neo4j",
            uri,
            f"{parts.scheme}://{netloc}",
            None,
            (user, password or "") if user else None,
            parts.path.strip("/") or None,
        )
    if parts.scheme == "falkordb":
        return Target(
            "falkordb",
            uri,
            parts.hostname or "localhost",
            parts.port or 6379,
            None,
            parts.path.strip("/") or "tracegraph",
        )
    raise BadRequest(
        f"unsupported --db {uri!r}: use neo4j://, bolt:// or falkordb://host:port "
        "(or nothing for the embedded database)"
    )


def open_graph(uri: str | None = None) -> Graph:
    """Connect (starting the embedded server if that is the target)."""
    target = parse(uri)
    if target.backend == "neo4j":
        from tracegraph.db.neo4j_db import Neo4jGraph

        assert target.address is not None
        return Neo4jGraph(target.address, target.auth, target.database)
    if target.backend == "falkordb":
        from tracegraph.db.falkor import FalkorGraph

        return FalkorGraph(host=target.address, port=target.port, prefix=target.database or "tracegraph")
    return _embedded()


def _embedded() -> Graph:
    from tracegraph.db.embedded import EmbeddedServer
    from tracegraph.db.falkor import FalkorGraph

    server = EmbeddedServer()
    socket = server.acquire()
    try:
        return FalkorGraph(
            unix_socket=socket,
            backend="embedded",
            on_close=server.release,
            where=f"the embedded database in {server.data_dir}",
            server_log=server.log_file,
            on_wedged=server.replace_wedged,
        )
    except BaseException:
        server.release()
        raise
