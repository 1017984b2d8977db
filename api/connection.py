"""The one database connection an API process shares between requests."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from typing import Any

from tracegraph.db.base import Graph
from tracegraph.db.connect import open_graph, parse
from tracegraph.db.jobs import job_records
from tracegraph.errors import DatabaseError

log = logging.getLogger("tracegraph.api")


class GraphHolder:
    """One :class:`Graph` for the app, opened lazily and opened again after
    the database was lost.

    Both engines' Graphs are thread-safe (a connection pool each), so
    requests run concurrently, an ingest's statements between the others'.
    """

    def __init__(self, uri: str | None) -> None:
        self.target = parse(uri)
        self.backend = self.target.backend
        self._graph: Graph | None = None
        self._open_lock = threading.Lock()

    def open(self) -> None:
        """Connect now; a database that is down is logged, not fatal (``/health`` says 503)."""
        try:
            with self.use():
                pass
        except DatabaseError as e:
            log.warning("database not reachable at startup: %s", e)

    @contextlib.contextmanager
    def use(self) -> Iterator[Graph]:
        """The connection, for one piece of work. When the work loses the
        database (DatabaseError), the connection is dropped, so that the
        next use connects again (and starts the embedded server again)."""
        g = self._get()
        try:
            yield g
        except DatabaseError:
            self._reset(g)
            raise

    def _get(self) -> Graph:
        g = self._graph
        if g is not None:
            return g
        with self._open_lock:
            if self._graph is None:
                self._graph = open_graph(self.target.uri)
            return self._graph

    def _reset(self, g: Graph) -> None:
        with self._open_lock:
            if self._graph is g:
                self._graph = None
                with contextlib.suppress(Exception):
                    g.close()

    def close(self) -> None:
        with self._open_lock:
            g, self._graph = self._graph, None
        if g is not None:
            g.close()


class SharedJobs:
    """The job records of the held connection's database
    (:mod:`tracegraph.db.jobs`), through :meth:`GraphHolder.use`."""

    def __init__(self, holder: GraphHolder) -> None:
        self._holder = holder

    def save(self, job: dict[str, Any]) -> None:
        with self._holder.use() as g:
            job_records(g).save(job)

    def load(self, job_id: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        with self._holder.use() as g:
            return job_records(g).load(job_id, limit)

    def forget(self, keep: int) -> None:
        with self._holder.use() as g:
            job_records(g).forget(keep)
