"""Ingest job records, kept in the database so that every API process
serving it sees every job (api/jobs.py runs the jobs; this keeps their
records).

A record is a JSON-able dict with at least ``id`` (text), ``created_at``
(epoch seconds) and ``status``. Each engine keeps records its own way,
outside every trace (FalkorDB: one hash, :mod:`tracegraph.db.falkor_jobs`;
Neo4j: IngestJob nodes, :mod:`tracegraph.db.neo4j_jobs`), behind the small
:class:`JobRecords` interface; :func:`job_records` gives a database's own.
"""

from __future__ import annotations

from typing import Any, Protocol

from tracegraph.db.base import Graph

# A job in one of these states is over: its record may be forgotten.
FINISHED = ("done", "failed")


class JobRecords(Protocol):
    """The job records of one database."""

    def save(self, job: dict[str, Any]) -> None:
        """Store ``job``, replacing the stored job of its id."""
        ...

    def load(self, job_id: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        """The job ``job_id`` (a list of one, or empty), or the newest ``limit`` jobs, newest first."""
        ...

    def forget(self, keep: int) -> None:
        """Delete finished jobs but the newest ``keep`` of them."""
        ...


def newest_first(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Newest first; jobs created in the same instant by their ids (the engines' one order)."""
    return sorted(jobs, key=lambda j: (-float(j.get("created_at") or 0), str(j.get("id"))))


def job_records(graph: Graph) -> JobRecords:
    """The job records kept in ``graph``'s database."""
    from tracegraph.db.falkor import FalkorGraph

    if isinstance(graph, FalkorGraph):
        from tracegraph.db.falkor_jobs import FalkorJobs

        return FalkorJobs(graph)
    from tracegraph.db.neo4j_db import Neo4jGraph

    if isinstance(graph, Neo4jGraph):
        from tracegraph.db.neo4j_jobs import Neo4jJobs

        return Neo4jJobs(graph)
    raise TypeError(f"no job records for {type(graph).__name__}")
