"""Several API processes on one database, as a team deploys the service:
real ``tracegraph serve`` processes, a real database (the embedded one
shared through its data directory, and the Neo4j server when
TRACEGRAPH_TEST_NEO4J names one).

- an upload accepted by one process is polled, listed and queried
  through another;
- two uploads of one name through two processes at once: one 201, one 409;
- a process killed in the middle of an ingest: the other processes report
  its job failed, and nothing of its trace is left;
- ``serve --workers 2``: one port, two processes, jobs seen from both.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
import uuid
from pathlib import Path

import httpx
import pytest
from conftest import NEO4J_URI, NO_NEO4J, SEED_STEPSTATS, api_process, process_state

# A stale time short enough for a test to wait out, long enough for any
# heartbeat (every stale/6 s) of a live process on a loaded machine.
STALE = {"TRACEGRAPH_JOB_STALE_S": "6"}
# Where the only job of the test is one whose process is killed: no live
# job can miss a heartbeat, and B says "failed" sooner.
STALE_KILLED = {"TRACEGRAPH_JOB_STALE_S": "3"}
ASYNC = {"TRACEGRAPH_SYNC_WAIT_S": "0"}  # every upload answers 202 with a job at once


def upload(http: httpx.Client, trace: str) -> httpx.Response:
    with open(SEED_STEPSTATS, "rb") as f:
        return http.post(
            "/traces", data={"trace": trace}, files=[("files", (SEED_STEPSTATS.name, f, "application/octet-stream"))]
        )


def wait_for(what: str, check, timeout: float = 180.0):
    """Poll ``check()`` until it returns something true; that value."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def stopped(pid: int) -> bool:
    """Is process ``pid`` stopped (SIGSTOP)?"""
    return process_state(pid) == "T"


def spawned(pid: int) -> list[int]:
    """The processes ``pid`` has started as multiprocessing workers."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [int(c) for c in children if b"spawn_main" in Path(f"/proc/{c}/cmdline").read_bytes()]


def stored_nodes(db: str, trace: str) -> int:
    """Nodes of ``trace`` in any state (loading, a replacement's, ...) in the
    database (the embedded one of ``$TRACEGRAPH_HOME``)."""
    from tracegraph.db.connect import open_graph

    g = open_graph(db)
    try:
        if g.backend == "neo4j":
            q = "MATCH (n) WHERE n.trace = $t OR n.trace STARTS WITH $t + '~' RETURN count(n)"
            return int(g.run(q, {"t": trace}).rows[0][0])
        keys = [k for k in g._redis.scan_iter(match=f"{g.prefix}:*") if g._redis.type(k) != "string"]
        return sum(
            int(g._query(k, "MATCH (n) WHERE n.trace = $t RETURN count(n)", {"t": trace}, write=False).rows[0][0])
            for k in keys
            if k != f"{g.prefix}:jobs"
        )
    finally:
        g.close()


@pytest.fixture
def db(db_uri, tmp_path) -> tuple[str, Path]:
    """The database the processes share (the engine under test: only its
    ``neo4j`` runs go to the Neo4j worker), and their data directory."""
    return db_uri, tmp_path / "home"


def test_upload_through_one_process_poll_list_and_query_through_another(db, tmp_path):
    uri, home = db
    trace = f"shared-{uuid.uuid4().hex[:8]}"
    with (
        api_process(tmp_path / "a.log", home=home, db=uri, env={**STALE, **ASYNC}) as (a_proc, a_base),
        api_process(tmp_path / "b.log", home=home, db=uri, env=STALE) as (_b_proc, b_base),
        httpx.Client(base_url=a_base, timeout=120) as a,
        httpx.Client(base_url=b_base, timeout=120) as b,
    ):
        r = upload(a, trace)
        assert r.status_code == 202, r.text
        job_id = r.json()["id"]
        assert r.json()["worker"].endswith(f":{a_proc.pid}")

        job = wait_for(
            "the job, seen from B, to finish", lambda: (j := b.get(f"/jobs/{job_id}").json())["status"] == "done" and j
        )
        assert job["trace"] == trace and job["worker"].endswith(f":{a_proc.pid}")
        assert job["result"]["trace"] == trace and job["result"]["ops"] == a.get(f"/traces/{trace}").json()["ops"]
        listed = b.get("/jobs").json()
        assert job_id in [j["id"] for j in listed]
        assert [j["created_at"] for j in listed] == sorted((j["created_at"] for j in listed), reverse=True)

        # The trace itself, through B: the same answer as through A.
        rows_a = a.get(f"/traces/{trace}/queries/top-ops", params={"n": 5}).json()["rows"]
        rows_b = b.get(f"/traces/{trace}/queries/top-ops", params={"n": 5}).json()["rows"]
        assert rows_a and rows_a == rows_b
        assert b.delete(f"/traces/{trace}").status_code == 200
        assert a.get(f"/traces/{trace}").status_code == 404
        assert b.get("/jobs/" + "0" * 32).status_code == 404


def test_same_name_at_once_through_two_processes_one_201_one_409(db, tmp_path):
    """P pauses itself (SIGSTOP) in its load, right after it has claimed the
    name; Q's upload of the same name meets that state, not a race."""
    uri, home = db
    trace = f"race-{uuid.uuid4().hex[:8]}"
    with (
        api_process(tmp_path / "p.log", home=home, db=uri, env={"TRACEGRAPH_PAUSE_AT": "load-started"}) as (
            p_proc,
            p_base,
        ),
        api_process(tmp_path / "q.log", home=home, db=uri) as (_q_proc, q_base),
        httpx.Client(base_url=p_base, timeout=300) as p,
        httpx.Client(base_url=q_base, timeout=300) as q,
    ):
        answers: list[httpx.Response] = []
        first = threading.Thread(target=lambda: answers.append(upload(p, trace)))
        first.start()
        wait_for("P to pause in its load", lambda: stopped(p_proc.pid))

        # Q meets P's load in progress: on Neo4j Q is refused at once (P
        # holds the name); on FalkorDB Q's load wins and P is refused when
        # it comes to publish. Either way: one 201, one 409.
        second = upload(q, trace)
        os.kill(p_proc.pid, signal.SIGCONT)
        first.join(300)
        assert len(answers) == 1
        by_status = {r.status_code: r for r in (answers[0], second)}
        assert sorted(by_status) == [201, 409], [r.text for r in (answers[0], second)]
        assert trace in by_status[409].json()["detail"]
        assert q.get(f"/traces/{trace}").json()["ops"] == by_status[201].json()["ops"] > 0
        # A different name through Q meanwhile is no conflict.
        other = upload(q, trace + "-b")
        assert other.status_code == 201, other.text
        for name in (trace, trace + "-b"):
            assert q.delete(f"/traces/{name}").status_code == 200


def test_killed_process_job_reported_failed_and_nothing_left(db, tmp_path, monkeypatch):
    """K dies (SIGKILL, by itself) after writing its whole trace but before
    publishing it: B reports K's job failed once K has been silent for the
    stale time, and B's sweep leaves nothing of the trace."""
    uri, home = db
    trace = f"killed-{uuid.uuid4().hex[:8]}"
    with (
        api_process(
            tmp_path / "k.log", home=home, db=uri, env={**STALE_KILLED, **ASYNC, "TRACEGRAPH_KILL_AT": "load-written"}
        ) as (k_proc, k_base),
        api_process(tmp_path / "b.log", home=home, db=uri, env=STALE_KILLED) as (_b_proc, b_base),
        httpx.Client(base_url=k_base, timeout=120) as k,
        httpx.Client(base_url=b_base, timeout=120) as b,
    ):
        with contextlib.suppress(httpx.HTTPError):  # 202 at once; K may be dead before it answers
            upload(k, trace)
        assert k_proc.wait(180) == -signal.SIGKILL

        def failed_job():
            jobs = [j for j in b.get("/jobs").json() if j["trace"] == trace]
            return jobs and jobs[0]["status"] == "failed" and jobs[0]

        job = wait_for("B to report K's job failed", failed_job)
        assert job["worker"].endswith(f":{k_proc.pid}") and job["error_status"] == 500
        assert f":{k_proc.pid}) stopped" in job["error"]
        assert b.get(f"/jobs/{job['id']}").json()["status"] == "failed"
        assert b.get(f"/traces/{trace}").status_code == 404
        assert trace not in [t["trace"] for t in b.get("/traces").json()]
        monkeypatch.setenv("TRACEGRAPH_HOME", str(home))
        assert stored_nodes(uri, trace) == 0


@pytest.mark.neo4j
def test_serve_workers_share_jobs(tmp_path):
    if not NEO4J_URI:
        pytest.skip(NO_NEO4J)
    trace = f"workers-{uuid.uuid4().hex[:8]}"
    with (
        api_process(tmp_path / "w.log", home=tmp_path / "home", db=NEO4J_URI, env=ASYNC, args=("--workers", "2")) as (
            proc,
            base,
        ),
        httpx.Client(base_url=base, timeout=120) as http,
    ):
        workers = wait_for("two worker processes", lambda: len(spawned(proc.pid)) >= 2 and spawned(proc.pid))
        assert len(workers) == 2
        r = upload(http, trace)
        assert r.status_code == 202, r.text
        # Each request goes to whichever worker accepts it: every one finds the job.
        for _ in range(20):
            assert http.get(r.headers["location"]).status_code == 200
        wait_for("the job to finish", lambda: http.get(r.headers["location"]).json()["status"] == "done")
        assert http.get(f"/traces/{trace}").json()["trace"] == trace
        assert http.delete(f"/traces/{trace}").status_code == 200
