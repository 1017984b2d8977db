"""``--db`` URIs to :class:`Graph` objects.

* nothing (and no ``TRACEGRAPH_DB``): the embedded FalkorDB in
  ``$TRACEGRAPH_HOME``;
* ``neo4j://``, ``neo4j+s://``, ``bolt://``, ``bolt+s://``: Neo4j 5;
  credentials from the URI's userinfo or ``NEO4J_USER``/``NEO4J_PASSWORD``,
  no auth when neither is given; a path (``/mydb``) selects the database;
* ``falkordb://host:port[/graph]``: a FalkorDB server the user runs.
"""

from __future__ import annotations

import os
from urllib.parse import unquote, urlsplit

from tracegraph.db.base import Graph
from tracegraph.errors import UserError

_NEO4J = ("neo4j", "neo4j+s", "neo4j+ssc", "bolt", "bolt+s", "bolt+ssc")


def db_uri(explicit: str | None) -> str | None:
    """The URI in force: ``--db``, else ``$TRACEGRAPH_DB``, else None (embedded)."""
    return explicit or os.environ.get("TRACEGRAPH_DB") or None


def open_graph(uri: str | None = None) -> Graph:
    """Connect (starting the embedded server if that is the target)."""
    uri = db_uri(uri)
    if not uri or uri in ("embedded", "embedded:"):
        return _embedded()
    parts = urlsplit(uri)
    if parts.scheme in _NEO4J:
        from tracegraph.db.neo4j_db import Neo4jGraph

        user = unquote(parts.username) if parts.username else os.environ.get("NEO4J_USER")
        password = unquote(parts.password) if parts.password else os.environ.get("NEO4J_PASSWORD")
        auth = (user, password or "") if user else None
        netloc = parts.hostname + (f":{parts.port}" if parts.port else "")
        database = parts.path.strip("/") or None
        return Neo4jGraph(f"{parts.scheme}://{netloc}", auth, database)
    if parts.scheme == "falkordb":
        from tracegraph.db.falkor import FalkorGraph

        graph = parts.path.strip("/") or "tracegraph"
        return FalkorGraph(host=parts.hostname, port=parts.port or 6379, graph=graph)
    raise UserError(f"unsupported --db {uri!r}: use neo4j://, bolt:// or falkordb://host:port (or nothing for the embedded database)")


def _embedded() -> Graph:
    from tracegraph.db.embedded import EmbeddedServer
    from tracegraph.db.falkor import FalkorGraph

    server = EmbeddedServer()
    socket = server.acquire()
    try:
        return FalkorGraph(unix_socket=socket, kind="embedded", on_close=server.release)
    except BaseException:
        server.release()
        raise
