"""Neo4j's ingest job records: IngestJob nodes, outside every trace (no
``trace`` property), unique by ``id`` (a constraint of
:meth:`~tracegraph.db.neo4j_db.Neo4jGraph.ensure_schema`)."""

from __future__ import annotations

import json
from typing import Any

from tracegraph.db.jobs import FINISHED
from tracegraph.db.neo4j_db import Neo4jGraph


class Neo4jJobs:
    """The job records of the database ``graph`` is connected to."""

    def __init__(self, graph: Neo4jGraph) -> None:
        self._graph = graph

    def save(self, job: dict[str, Any]) -> None:
        self._graph.ensure_schema()
        self._graph.run(
            "MERGE (j:IngestJob {id: $id}) SET j.record = $record, j.created_at = $created, j.finished = $finished",
            {
                "id": job["id"],
                "record": json.dumps(job),
                "created": float(job["created_at"]),
                "finished": job.get("status") in FINISHED,
            },
            write=True,
        )

    def load(self, job_id: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        if job_id is not None:
            res = self._graph.run("MATCH (j:IngestJob {id: $id}) RETURN j.record", {"id": job_id})
        else:
            res = self._graph.run(
                "MATCH (j:IngestJob) RETURN j.record ORDER BY j.created_at DESC, j.id LIMIT $limit", {"limit": limit}
            )
        return [json.loads(r[0]) for r in res.rows]

    def forget(self, keep: int) -> None:
        self._graph.run(
            "MATCH (j:IngestJob) WHERE j.finished WITH j ORDER BY j.created_at DESC, j.id SKIP $keep DETACH DELETE j",
            {"keep": keep},
            write=True,
        )
