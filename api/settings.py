"""HTTP API settings, from ``TRACEGRAPH_*`` environment variables.

| variable | default | meaning |
|---|---|---|
| ``TRACEGRAPH_API_KEY`` | unset | when set, every route but ``/health``, ``/docs`` and ``/openapi.json`` needs ``Authorization: Bearer <key>``; required to serve beyond loopback (``TRACEGRAPH_ALLOW_NO_KEY=1``: behind an authenticating proxy) |
| ``TRACEGRAPH_MAX_UPLOAD_BYTES`` | 2 GiB | an upload whose files add up to more is refused with 413 |
| ``TRACEGRAPH_SYNC_UPLOAD_BYTES`` | 16 MiB | uploads up to this size are ingested before the answer (201) ... |
| ``TRACEGRAPH_SYNC_WAIT_S`` | 60 | ... when that takes less than this; otherwise the answer is a job (202) |
| ``TRACEGRAPH_UPLOAD_DIR`` | system temp | where uploads are streamed to while they are ingested |
| ``TRACEGRAPH_CYPHER_TIMEOUT_MS`` | 10000 | time limit of one ``POST /cypher``, from request to last row (the database cancels the statement) |
| ``TRACEGRAPH_CYPHER_MAX_ROWS`` | 10000 | rows ``POST /cypher`` returns at most (``truncated`` says when it cut) |
| ``TRACEGRAPH_QUERY_TIMEOUT_MS`` | 300000 | time limit of one catalog analysis, from request to last row |
| ``TRACEGRAPH_JOBS_KEPT`` | 1000 | finished ingest jobs remembered for ``GET /jobs/{id}`` (in the database, for every API process) |
| ``TRACEGRAPH_BROWSER_LINK_S`` | 43200 | how long a Neo4j Browser link from ``POST /browser/link`` opens the guide (seconds, at most a week) |
| ``TRACEGRAPH_DB_READ`` | unset | a second database URI, the same database as a user that may only read it: every route that only reads (traces, analyses, ``/cypher``, what-if, the guide, the web UI's reads) uses it; ingest and delete use ``--db`` / ``TRACEGRAPH_DB`` |
| ``TRACEGRAPH_JOB_STALE_S`` | 30 | an unfinished job whose API process has not been heard from for this long is reported failed (api/jobs.py); the same for every process of a deployment |
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from typing import Any

from tracegraph.errors import BadRequest

MiB = 1024 * 1024


def _int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest(f"{name} must be an integer, got {raw!r}") from None
    if value < 0:
        raise BadRequest(f"{name} must be >= 0, got {raw!r}")
    return value


@dataclass
class Settings:
    api_key: str | None = None
    max_upload_bytes: int = 2048 * MiB
    sync_upload_bytes: int = 16 * MiB
    sync_wait_s: float = 60.0
    upload_dir: str | None = None
    cypher_timeout_ms: int = 10_000
    cypher_max_rows: int = 10_000
    query_timeout_ms: int = 300_000
    jobs_kept: int = 1000
    job_stale_s: float = 30.0
    max_upload_files: int = 16
    browser_link_s: int = 12 * 3600
    read_db: str | None = None

    @classmethod
    def from_env(cls, **overrides: Any) -> Settings:
        s = cls(
            api_key=os.environ.get("TRACEGRAPH_API_KEY") or None,
            max_upload_bytes=_int("TRACEGRAPH_MAX_UPLOAD_BYTES", cls.max_upload_bytes),
            sync_upload_bytes=_int("TRACEGRAPH_SYNC_UPLOAD_BYTES", cls.sync_upload_bytes),
            sync_wait_s=float(_int("TRACEGRAPH_SYNC_WAIT_S", int(cls.sync_wait_s))),
            upload_dir=os.environ.get("TRACEGRAPH_UPLOAD_DIR") or None,
            cypher_timeout_ms=_int("TRACEGRAPH_CYPHER_TIMEOUT_MS", cls.cypher_timeout_ms),
            cypher_max_rows=_int("TRACEGRAPH_CYPHER_MAX_ROWS", cls.cypher_max_rows),
            query_timeout_ms=_int("TRACEGRAPH_QUERY_TIMEOUT_MS", cls.query_timeout_ms),
            jobs_kept=_int("TRACEGRAPH_JOBS_KEPT", cls.jobs_kept),
            job_stale_s=float(_int("TRACEGRAPH_JOB_STALE_S", int(cls.job_stale_s))),
            browser_link_s=_int("TRACEGRAPH_BROWSER_LINK_S", cls.browser_link_s),
            read_db=os.environ.get("TRACEGRAPH_DB_READ") or None,
        )
        known = {f.name for f in fields(cls)}
        for k, v in overrides.items():
            if k not in known:
                raise TypeError(f"unknown setting {k!r}")
            setattr(s, k, v)
        return s
