"""FalkorDB's ingest job records: one hash, ``P:jobs``, of JSON records by id.

A hash and not nodes: the catalog graph ``P`` never deletes a node (see
:mod:`tracegraph.db.falkor`), and job records come and go."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import redis

from tracegraph.db.falkor import FalkorGraph
from tracegraph.db.jobs import FINISHED, newest_first
from tracegraph.errors import DatabaseError, first_line

T = TypeVar("T")


class FalkorJobs:
    """The job records of the database ``graph`` is connected to."""

    def __init__(self, graph: FalkorGraph) -> None:
        self._redis = graph.connection
        self._key = f"{graph.prefix}:jobs"
        self._where = graph.where

    def save(self, job: dict[str, Any]) -> None:
        self._call(lambda: self._redis.hset(self._key, job["id"], json.dumps(job)))

    def load(self, job_id: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        if job_id is not None:
            raw = self._call(lambda: self._redis.hget(self._key, job_id))
            return [] if raw is None else [json.loads(raw)]
        return newest_first(self._all())[:limit]

    def forget(self, keep: int) -> None:
        finished = [j for j in newest_first(self._all()) if j.get("status") in FINISHED]
        old = [j["id"] for j in finished[keep:]]
        if old:
            self._call(lambda: self._redis.hdel(self._key, *old))

    def _all(self) -> list[dict[str, Any]]:
        raw: dict[Any, Any] = self._call(lambda: self._redis.hgetall(self._key))
        return [json.loads(v) for v in raw.values()]

    def _call(self, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except redis.RedisError as e:
            raise DatabaseError(f"FalkorDB at {self._where}: {first_line(e)}") from None
