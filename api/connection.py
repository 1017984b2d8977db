"""The one database connection an API process shares between requests."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import tracegraph
from tracegraph.db.base import Graph, Load, Progress, Result, TraceTables
from tracegraph.db.connect import open_graph, parse
from tracegraph.errors import DatabaseError

log = logging.getLogger("tracegraph.api")
T = TypeVar("T")


def version() -> str:
    """The installed tracegraph's version (``/health``, OpenAPI)."""
    return tracegraph.__version__


def one_line(s: str) -> str:
    """The first line of a message: every error the API sends is one line."""
    s = s.strip()
    return s.splitlines()[0] if s else s


class GraphHolder:
    """One :class:`Graph` for the app, opened lazily and reopened after a crash.

    It implements the Graph interface itself, so ingest and the catalog use
    it as they would any Graph. Both engines' Graphs are thread-safe (a
    connection pool each), so requests run concurrently, an ingest's
    statements between the others'.
    """

    def __init__(self, uri: str | None) -> None:
        self.target = parse(uri)
        self.backend = self.target.backend
        self._graph: Graph | None = None
        self._open_lock = threading.Lock()
        self._version: str | None = None

    def open(self) -> None:
        """Connect now; a database that is down is logged, not fatal (``/health`` says 503)."""
        try:
            self._get()
        except DatabaseError as e:
            log.warning("database not reachable at startup: %s", e)

    def _get(self) -> Graph:
        g = self._graph
        if g is not None:
            return g
        with self._open_lock:
            if self._graph is None:
                self._graph = open_graph(self.target.uri)
                self._version = None
            return self._graph

    def _call(self, fn: Callable[[Graph], T]) -> T:
        g = self._get()
        try:
            return fn(g)
        except DatabaseError:
            self._reset(g)
            raise

    def _reset(self, g: Graph) -> None:
        """After the database was lost: drop the connection, so that the next
        request connects again (and starts the embedded server again)."""
        with self._open_lock:
            if self._graph is g:
                self._graph = None
                with contextlib.suppress(Exception):
                    g.close()

    def run(
        self,
        query: str,
        params: dict[str, Any] | None = None,
        *,
        trace: str | None = None,
        write: bool = False,
        timeout_ms: int | None = None,
    ) -> Result:
        return self._call(lambda g: g.run(query, params, trace=trace, write=write, timeout_ms=timeout_ms))

    def trace_facts(self, name: str) -> dict[str, Any] | None:
        return self._call(lambda g: g.trace_facts(name))

    def list_traces(self) -> list[dict[str, Any]]:
        return self._call(lambda g: g.list_traces())

    def read_columns(
        self, trace: str, label: str, columns: dict[str, type], where: str = "", timeout_ms: int | None = None
    ) -> list[tuple[Any, ...]]:
        return self._call(lambda g: g.read_columns(trace, label, columns, where, timeout_ms=timeout_ms))

    def store_trace(
        self, name: str, tables: TraceTables, *, replace: bool = False, progress: Progress | None = None
    ) -> dict[str, dict[str, int]]:
        return self._call(lambda g: g.store_trace(name, tables, replace=replace, progress=progress))

    def begin_trace(self, name: str, *, replace: bool = False) -> Load:
        return self._call(lambda g: g.begin_trace(name, replace=replace))

    def drop_trace(self, name: str) -> int:
        return self._call(lambda g: g.drop_trace(name))

    def sweep(self) -> list[str]:
        return self._call(lambda g: g.sweep())

    def save_job(self, job: dict[str, Any]) -> None:
        self._call(lambda g: g.save_job(job))

    def load_jobs(self, job_id: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        return self._call(lambda g: g.load_jobs(job_id, limit))

    def forget_jobs(self, keep: int) -> None:
        self._call(lambda g: g.forget_jobs(keep))

    def version(self) -> str:
        if self._version is None:
            self._version = self._call(lambda g: g.version())
        return self._version

    def health(self) -> tuple[bool, dict[str, Any]]:
        info: dict[str, Any] = {
            "status": "ok",
            "backend": self.backend,
            "database": "reachable",
            "version": version(),
            "database_version": None,
            "detail": None,
        }
        try:
            g = self._get()
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
