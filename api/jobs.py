"""Background ingest jobs, shared by every API process of one database.

A process runs the uploads it accepted itself, one at a time (one worker
thread): their files are on its disk. Each job's record is kept in the
database (:mod:`tracegraph.db.jobs`), written when the job is queued, when it
starts and ends, and on every heartbeat in between (its progress), so
that any process serving the same database answers ``GET /jobs/{id}``
and ``GET /jobs`` for it: a team can run several API processes, or
replicas behind a load balancer, and poll wherever the next request lands.

A process that dies (killed, out of memory, machine lost) cannot say so,
and its jobs' records would say ``queued`` or ``running`` forever. So a
process re-saves its unfinished jobs every heartbeat (a sixth of the stale
time), and a record whose heartbeat is older than the stale time
(``TRACEGRAPH_JOB_STALE_S``, 30 s) is reported ``failed``. The process
that reports it also sweeps the database, which removes what the dead
process's load left behind: a load is owned by a lease that died with its
process (``db/neo4j_publish.py``, ``db/falkor.py``), so a sweep never
touches a live load. Every process of a deployment should have the same
stale time, and their clocks should agree to well within it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import socket
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from tracegraph.api.models import JobOut
from tracegraph.db.jobs import JobRecords
from tracegraph.errors import NotFound, UserError

log = logging.getLogger("tracegraph.api")

QUEUED, RUNNING, DONE, FAILED = "queued", "running", "done", "failed"
UNFINISHED = (QUEUED, RUNNING)


@dataclass
class Job:
    id: str
    trace: str
    files: list[str]
    worker: str = ""  # the API process running it: host:pid
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
    heartbeat_at: float | None = None  # when its process last said it was alive

    def progress(self, phase: str, done: int, total: int | None) -> None:
        """ingest()'s progress callback: the phase (parse, enrich, write) and its counts."""
        self.phase = phase
        self.done, self.total = int(done), None if total is None else int(total)

    def record(self) -> dict[str, Any]:
        """What the database keeps (times as epoch seconds)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Job:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in record.items() if k in known})

    def public(self) -> JobOut:
        """The job as ``GET /jobs/{id}`` shows it."""
        fraction = None
        if self.status == DONE:
            fraction = 1.0
        elif self.total:
            fraction = round(min(self.done / self.total, 1.0), 4)
        return JobOut.model_validate(
            {
                "id": self.id,
                "url": f"/jobs/{self.id}",
                "trace": self.trace,
                "files": list(self.files),
                "worker": self.worker,
                "status": self.status,
                "phase": self.phase,
                "progress": {"done": self.done, "total": self.total, "fraction": fraction},
                "error": self.error,
                "error_status": self.error_status,
                "result": self.result,
                "created_at": _iso(self.created_at),
                "started_at": _iso(self.started_at),
                "finished_at": _iso(self.finished_at),
                "heartbeat_at": _iso(self.heartbeat_at),
            }
        )


def _iso(t: float | None) -> str | None:
    if t is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def this_worker() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class JobManager:
    """This process's jobs, run one at a time, and everyone's, read from the store."""

    def __init__(
        self,
        kept: int = 1000,
        store: JobRecords | None = None,
        stale_s: float = 30.0,
        clean_up: Callable[[], object] | None = None,
    ) -> None:
        """``store``: where every process's job records are (None: this
        process's jobs only); ``clean_up``: removes what a dead process's
        load left behind (the service's sweep)."""
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tracegraph-ingest")
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._futures: dict[str, Future[None]] = {}
        self._lock = threading.Lock()
        self._kept = max(kept, 1)
        self._store = store
        self._clean_up = clean_up
        self.stale_s = max(float(stale_s), 1.0)
        self.worker = this_worker()
        # One writer at a time, each writing the job as it is then: the
        # database always ends up with the newest state.
        self._save_lock = threading.Lock()
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None
        self._swept: set[str] = set()

    # -- this process's jobs ----------------------------------------------

    def submit(
        self, trace: str, files: list[str], work: Callable[[Job], None], on_cancel: Callable[[], None] | None = None
    ) -> tuple[Job, Future[None]]:
        """Queue ``work(job)``; it sets the job's outcome itself."""
        job = Job(id=uuid.uuid4().hex, trace=trace, files=files, worker=self.worker)
        job.heartbeat_at = job.created_at

        def run() -> None:
            job.status, job.phase, job.started_at = RUNNING, "parse", time.time()
            self._save(job)
            try:
                work(job)
            finally:
                job.finished_at = time.time()
                job.phase = "finished"
                if job.status == RUNNING:  # work() must set done/failed; never leave it running
                    job.status = FAILED
                    job.error = job.error or "the job ended without a result"
                    job.error_status = job.error_status or 500
                self._save(job)
                self._forget_old()

        with self._lock:
            self._jobs[job.id] = job
            self._trim()
        self._save(job)
        self._start_heartbeat()
        with self._lock:
            future = self._pool.submit(run)
            self._futures[job.id] = future
        if on_cancel:
            future.add_done_callback(lambda f: on_cancel() if f.cancelled() else None)
        future.add_done_callback(lambda f: self._futures.pop(job.id, None))
        return job, future

    def _save(self, job: Job) -> None:
        """Share the job's state; a database that is down costs the sharing, not the job."""
        if self._store is None:
            return
        with self._save_lock:
            try:
                self._store.save(job.record())
            except UserError as e:
                log.warning("could not save ingest job %s: %s", job.id, e)

    def _forget_old(self) -> None:
        if self._store is not None:
            with contextlib.suppress(UserError):
                self._store.forget(self._kept)

    def _start_heartbeat(self) -> None:
        with self._lock:
            if self._beat is not None or self._store is None:
                return
            self._beat = threading.Thread(target=self._heartbeat, name="tracegraph-jobs-heartbeat", daemon=True)
            self._beat.start()

    def _heartbeat(self) -> None:
        """Re-save this process's unfinished jobs (their progress, and that it lives)."""
        while not self._stop.wait(self.stale_s / 6):
            with self._lock:
                unfinished = [j for j in self._jobs.values() if j.status in UNFINISHED]
            for job in unfinished:
                job.heartbeat_at = time.time()
                self._save(job)

    def _trim(self) -> None:
        while len(self._jobs) > self._kept:
            oldest = next((k for k, j in self._jobs.items() if j.status in (DONE, FAILED)), None)
            if oldest is None:
                break
            del self._jobs[oldest]

    # -- every process's jobs ---------------------------------------------

    def get(self, job_id: str) -> Job:
        """The job ``job_id``, wherever it runs (NotFound when no process has it)."""
        with self._lock:
            job = self._jobs.get(job_id)
        if job is not None:
            return job
        stored = self._store.load(job_id) if self._store is not None else []
        if not stored:
            raise NotFound(f"no job {job_id!r} (finished jobs are kept until {self._kept} newer ones have finished)")
        return self._judge(Job.from_record(stored[0]))

    def recent(self, limit: int = 100) -> list[Job]:
        """The newest ``limit`` jobs of every process, newest first."""
        with self._lock:
            mine = dict(self._jobs)
        jobs = {r["id"]: Job.from_record(r) for r in (self._store.load(limit=limit) if self._store else [])}
        jobs = {k: mine.get(k) or self._judge(j) for k, j in jobs.items()}
        for k, j in mine.items():  # ours that the store missed (it was down)
            jobs.setdefault(k, j)
        return sorted(jobs.values(), key=lambda j: (-j.created_at, j.id))[:limit]

    def _judge(self, job: Job) -> Job:
        """Another process's job as it stands: failed when that process has gone silent."""
        if job.status not in UNFINISHED:
            return job
        last = job.heartbeat_at or job.created_at
        if time.time() - last <= self.stale_s:
            return job
        job.status, job.phase = FAILED, "finished"
        job.error = (
            f"the API process running this job ({job.worker or 'unknown'}) stopped: no word from it since "
            f"{_iso(last)}, over {self.stale_s:g} s ago (an ingest it had not finished leaves nothing behind)"
        )
        job.error_status = 500
        if self._store is not None and job.id not in self._swept:
            self._swept.add(job.id)
            # Kept as failed, so that it ages out with the finished jobs; a
            # process that was only slow overwrites this on its next heartbeat.
            self._save(job)
            try:
                if self._clean_up is not None:
                    self._clean_up()  # what its load left behind: its lease died with it
            except UserError as e:
                log.warning("could not clean up after job %s: %s", job.id, e)
        return job

    def shutdown(self) -> None:
        """Cancel queued jobs, let a running one finish (its write is atomic either way)."""
        for job in list(self._jobs.values()):
            if job.status == QUEUED:
                job.status, job.error, job.error_status = FAILED, "cancelled: the server is shutting down", 503
                job.phase, job.finished_at = "finished", time.time()
                self._save(job)
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._stop.set()
        if self._beat is not None:
            self._beat.join(timeout=5)
