"""Background ingest jobs: one worker thread, so ingests run one at a time.

Jobs live in memory (a restart forgets them; the store's atomicity means a
job killed by the restart leaves no trace behind, see ingest/store.py).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from tracegraph.errors import NotFound

QUEUED, RUNNING, DONE, FAILED = "queued", "running", "done", "failed"


@dataclass
class Job:
    id: str
    trace: str
    files: list[str]
    status: str = QUEUED
    phase: str = "queued"  # queued / parse / enrich / write / finished
    done: int = 0
    total: int | None = None
    error: str | None = None
    error_status: int | None = None  # the HTTP status the error maps to
    result: dict[str, Any] | None = None
    created_at: float = field(default_factory=time.time)
    started_at: float | None = None
    finished_at: float | None = None

    def progress(self, phase: str, done: int, total: int | None) -> None:
        """ingest()'s progress callback: the phase (parse, enrich, write) and its counts."""
        self.phase = phase
        self.done, self.total = int(done), None if total is None else int(total)

    def public(self) -> dict[str, Any]:
        fraction = None
        if self.status == DONE:
            fraction = 1.0
        elif self.total:
            fraction = round(min(self.done / self.total, 1.0), 4)
        return {
            "id": self.id,
            "url": f"/jobs/{self.id}",
            "trace": self.trace,
            "files": list(self.files),
            "status": self.status,
            "phase": self.phase,
            "progress": {"done": self.done, "total": self.total, "fraction": fraction},
            "error": self.error,
            "error_status": self.error_status,
            "result": self.result,
            "created_at": _iso(self.created_at),
            "started_at": _iso(self.started_at),
            "finished_at": _iso(self.finished_at),
        }


def _iso(t: float | None) -> str | None:
    if t is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


class JobManager:
    def __init__(self, kept: int = 1000) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tracegraph-ingest")
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._futures: dict[str, Future[None]] = {}
        self._lock = threading.Lock()
        self._kept = max(kept, 1)

    def submit(
        self, trace: str, files: list[str], work: Callable[[Job], None], on_cancel: Callable[[], None] | None = None
    ) -> tuple[Job, Future[None]]:
        """Queue ``work(job)``; it sets the job's outcome itself."""
        job = Job(id=uuid.uuid4().hex, trace=trace, files=files)

        def run() -> None:
            job.status, job.phase, job.started_at = RUNNING, "parse", time.time()
            try:
                work(job)
            finally:
                job.finished_at = time.time()
                job.phase = "finished"
                if job.status == RUNNING:  # work() must set done/failed; never leave it running
                    job.status = FAILED
                    job.error = job.error or "the job ended without a result"
                    job.error_status = job.error_status or 500

        with self._lock:
            self._jobs[job.id] = job
            self._trim()
            future = self._pool.submit(run)
            self._futures[job.id] = future
        if on_cancel:
            future.add_done_callback(lambda f: on_cancel() if f.cancelled() else None)
        future.add_done_callback(lambda f: self._futures.pop(job.id, None))
        return job, future

    def get(self, job_id: str) -> Job:
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None:
            raise NotFound(f"no job {job_id!r} (jobs are kept in memory until the server restarts)")
        return job

    def _trim(self) -> None:
        while len(self._jobs) > self._kept:
            oldest = next((k for k, j in self._jobs.items() if j.status in (DONE, FAILED)), None)
            if oldest is None:
                break
            del self._jobs[oldest]

    def shutdown(self) -> None:
        """Cancel queued jobs, let a running one finish (its write is atomic either way)."""
        for job in list(self._jobs.values()):
            if job.status == QUEUED:
                job.status, job.error, job.error_status = FAILED, "cancelled: the server is shutting down", 503
        self._pool.shutdown(wait=True, cancel_futures=True)
