"""The one database connection an API process shares between requests."""

from __future__ import annotations

import atexit
import contextlib
import logging
import threading
from importlib import metadata
from typing import Any
from urllib.parse import urlsplit

from tracegraph.db.base import Result
from tracegraph.errors import DatabaseError

log = logging.getLogger("tracegraph.api")


def version() -> str:
    """The installed tracegraph's version (``/health``, OpenAPI)."""
    try:
        return metadata.version("tracegraph")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "0+unknown"


def one_line(s: str) -> str:
    """The first line of a message: every error the API sends is one line."""
    s = s.strip()
    return s.splitlines()[0] if s else s


class GraphHolder:
    """One :class:`Graph` for the app, opened lazily and reopened after a crash.

    It implements the Graph interface itself, so the loader and the
    catalog use it as they would any Graph. The FalkorDB client is not
    guaranteed thread-safe, so on FalkorDB every statement runs under one
    lock (statements of an ingest interleave with queries, they do not
    wait for the whole ingest); the Neo4j driver is thread-safe and runs
    statements concurrently.
    """

    def __init__(self, uri: str | None) -> None:
        from tracegraph.db.connect import db_uri

        self.uri = db_uri(uri)
        self._graph = None
        self._open_lock = threading.Lock()
        scheme = urlsplit(self.uri).scheme if self.uri else ""
        self._guessed_kind = ("neo4j" if scheme.startswith(("neo4j", "bolt")) else
                              "falkordb" if scheme == "falkordb" else "embedded")
        self._lock = threading.Lock() if self._guessed_kind != "neo4j" else None
        self._version: str | None = None
        self._atexit = False

    @property
    def kind(self) -> str:
        g = self._graph
        return g.kind if g is not None else self._guessed_kind

    def open(self) -> None:
        """Connect now; a database that is down is logged, not fatal (``/health`` says 503)."""
        try:
            self._get()
        except DatabaseError as e:
            log.warning("database not reachable at startup: %s", e)

    def _get(self):
        g = self._graph
        if g is not None:
            return g
        with self._open_lock:
            if self._graph is None:
                from tracegraph.db.connect import open_graph

                self._graph = open_graph(self.uri)
                self._version = None
                if not self._atexit:  # an app whose lifespan never ran still lets go of the embedded server
                    atexit.register(self.close)
                    self._atexit = True
            return self._graph

    def _locked(self, timeout: float = -1):
        if self._lock is None:
            return contextlib.nullcontext(True)
        return _Acquired(self._lock, timeout)

    def _reset(self, g) -> None:
        """After a lost connection to the embedded server: drop it, so the
        next request starts the server again."""
        if self.kind != "embedded":
            return
        with self._open_lock:
            if self._graph is g:
                self._graph = None
                with contextlib.suppress(Exception):
                    g.close()

    def run(self, query: str, params: dict | None = None, *, write: bool = False,
            timeout_ms: int | None = None) -> Result:
        g = self._get()
        try:
            with self._locked():
                return g.run(query, params, write=write, timeout_ms=timeout_ms)
        except DatabaseError:
            self._reset(g)
            raise

    def ensure_schema(self) -> None:
        g = self._get()
        with self._locked():
            g.ensure_schema()

    def version(self) -> str:
        g = self._get()
        if self._version is None:
            with self._locked():
                self._version = g.version()
        return self._version

    def health(self) -> tuple[bool, dict]:
        info: dict[str, Any] = {"status": "ok", "backend": self.kind, "database": "reachable",
                                "version": version(), "database_version": None, "detail": None}
        try:
            g = self._get()
            info["backend"] = g.kind
            with self._locked(timeout=5) as got:
                if not got:  # a long statement holds the connection: the database is there
                    info["database"] = "busy"
                    return True, info
                g.run("RETURN 1 AS ok", timeout_ms=5000)
                if self._version is None:
                    self._version = g.version()
            info["database_version"] = self._version
            return True, info
        except Exception as e:  # anything at all means: not usable now
            if self._graph is not None and isinstance(e, DatabaseError):
                self._reset(self._graph)
            info.update(status="unavailable", database="unreachable", detail=one_line(str(e) or type(e).__name__))
            return False, info

    def close(self) -> None:
        with self._open_lock:
            g, self._graph = self._graph, None
        if g is not None:
            g.close()


class _Acquired:
    def __init__(self, lock: threading.Lock, timeout: float) -> None:
        self.lock, self.timeout, self.got = lock, timeout, False

    def __enter__(self) -> bool:
        self.got = self.lock.acquire(timeout=self.timeout)
        return self.got

    def __exit__(self, *exc) -> None:
        if self.got:
            self.lock.release()
