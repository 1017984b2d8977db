"""A job's rank files written rank by rank (``ingest/job.py``).

The streamed write must store exactly the graph the whole job held at once
stores (``TRACEGRAPH_STREAM_JOBS=0``: every rank's tables joined, enriched
and written as one trace, the previous way and an independent computation
of the cross-rank passes), node for node, property for property, on each
engine; and it keeps the store's guarantees: a failure anywhere in it
(a rank's part, the path's updates, the job's part) or a kill between
two ranks leaves the name showing the old version or nothing.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import everything, run_cli
from test_store import fail_after, leftovers

from tracegraph.ingest import pipeline
from tracegraph.ingest.job import sweep_dead_spills
from tracegraph.ingest.pipeline import STREAM_ENV, ingest

DATA = Path(__file__).resolve().parent / "data"
JOBS = {
    name: sorted((DATA / "pytorch_dist").glob(f"{name}.rank*.json.gz")) for name in ("straggler", "balanced", "ddp")
}
JOBS["nccl_dlrm"] = sorted((DATA / "nccl_dlrm").glob("*.json.gz"))

# Set when the trace was written, not by what it holds.
VOLATILE = {"ingested_at"}


def stored(graph, name: str) -> tuple[list, list]:
    """Every node (label, properties) and relationship (type, ends' uids,
    properties) of trace ``name``, sorted, the trace's name left out."""
    nodes = graph.run("MATCH (n {trace: $trace}) RETURN labels(n)[0], properties(n)", trace=name).rows
    rels = graph.run("MATCH (a {trace: $trace})-[r]->(b) RETURN type(r), a.uid, b.uid, properties(r)", trace=name).rows
    out_nodes = sorted(
        (label, sorted((k, repr(v)) for k, v in props.items() if k not in VOLATILE and k != "trace"))
        for label, props in nodes
    )
    out_rels = sorted((t, a, b, sorted(p.items())) for t, a, b, p in rels)
    return out_nodes, out_rels


def test_a_job_of_rank_files_is_streamed_and_one_file_is_not():
    assert pipeline.prepare(JOBS["straggler"], "j").job is not None
    assert pipeline.prepare(JOBS["straggler"][:1], "j").job is None


@pytest.mark.parametrize("job", sorted(JOBS))
def test_streamed_job_stores_what_the_whole_job_stores(graph, monkeypatch, job):
    paths = JOBS[job]
    streamed = ingest(graph, paths, f"streamed-{job}")
    monkeypatch.setenv(STREAM_ENV, "0")
    whole = ingest(graph, paths, f"whole-{job}")
    assert "write_s" in streamed.timings and "write_s" not in whole.timings  # the two ways were taken
    assert streamed.counts == whole.counts
    nodes, rels = stored(graph, f"streamed-{job}")
    assert (nodes, rels) == stored(graph, f"whole-{job}")
    # the job's cross-rank answers are there (not two empty graphs alike)
    labels = {label for label, _ in nodes}
    assert {"Collective", "Rank", "Op", "Trace"} <= labels
    assert {t for t, *_ in rels} >= {"JOINS", "OBSERVED_NEXT"}


def test_a_job_writes_as_many_ranks_at_once_as_its_engine_takes(graph, monkeypatch):
    """FalkorDB takes a load's parts one at a time (a second rank beside
    the first would mostly wait, holding its tables): one rank written at
    a time. Neo4j takes them at once: two threads, two ranks in flight (a
    barrier the first two must meet at, or it breaks)."""
    import threading

    from tracegraph.ingest import job

    monkeypatch.setenv("TRACEGRAPH_PARSE_WORKERS", "2")
    lock, running, most, calls = threading.Lock(), [0], [0], [0]
    meet = threading.Barrier(2, timeout=30)
    write_rank = job.write_rank

    def watched(*args):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
            calls[0] += 1
            first_two = calls[0] <= 2
        try:
            if graph.backend == "neo4j" and first_two:
                meet.wait()
            return write_rank(*args)
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr(job, "write_rank", watched)
    ingest(graph, JOBS["nccl_dlrm"], "at-once")
    assert calls[0] == len(JOBS["nccl_dlrm"])
    assert most[0] == (2 if graph.backend == "neo4j" else 1)


def _ranks_and_path(graph, name: str):
    if graph.trace_facts(name) is None:
        return None
    facts = graph.run("MATCH (t:Trace {trace: $trace}) RETURN t.observed_path_us", trace=name).rows
    ranks = graph.run("MATCH (r:Rank {trace: $trace}) RETURN r.rank ORDER BY r.rank", trace=name).rows
    return facts, ranks


def test_a_failed_streamed_job_leaves_the_old_version(graph, monkeypatch):
    """A failure at the first write, in the middle and at the last one:
    the name shows the old version (another job), nothing else changed."""
    name = "stream-fail"

    def small_calls() -> None:  # FalkorDB: a bulk call per blob, so that failures land between ranks
        from tracegraph.db import falkor_bulk

        monkeypatch.setattr(falkor_bulk, "CALL_BYTES", 1)
        monkeypatch.setattr(falkor_bulk, "GROWTH", 0.0)

    small_calls()
    seen = fail_after(graph, monkeypatch, 10**9)  # count the creating writes of the job
    ingest(graph, JOBS["straggler"], "stream-count")
    total = seen[0]
    monkeypatch.undo()
    graph.drop_trace("stream-count")
    assert total > 4  # the ranks' parts, the path's links, the job's part
    ingest(graph, JOBS["balanced"], name)
    old = _ranks_and_path(graph, name)
    before = everything(graph)
    for writes in (0, total // 2, total - 1):
        small_calls()
        fail_after(graph, monkeypatch, writes)
        with pytest.raises(RuntimeError, match="injected failure"):
            ingest(graph, JOBS["straggler"], name, replace=True)
        monkeypatch.undo()
        assert _ranks_and_path(graph, name) == old
        assert everything(graph) == before, writes
    ingest(graph, JOBS["straggler"], name, replace=True)
    assert _ranks_and_path(graph, name) != old


@pytest.mark.parametrize("replace", [False, True])
def test_killed_between_two_ranks_leaves_the_old_version_or_nothing(graph, db_uri, tg_home, replace):
    """SIGKILL after the first rank's part is written (``rank-written``):
    the name shows what it showed before, the dead load is swept."""
    name = f"stream-kill-{replace}"
    if replace:
        ingest(graph, JOBS["balanced"], name)
    old = _ranks_and_path(graph, name)
    args = ["ingest", *map(str, JOBS["straggler"]), "--trace", name] + (["--replace"] if replace else [])
    proc = run_cli(*args, home=tg_home, db=db_uri, env={"TRACEGRAPH_KILL_AT": "rank-written"})
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert _ranks_and_path(graph, name) == old
    assert (graph.trace_facts(name) is not None) == replace
    ingest(graph, JOBS["straggler"], name, replace=True)
    # the killed process's spills (its ranks' tables) went with that next job
    assert _dead_spills(Path(tempfile.gettempdir())) == []
    deadline = time.monotonic() + 60  # the server notices the dead connection; loose for a busy machine
    while leftovers(graph, name) and time.monotonic() < deadline:
        graph.sweep()
        time.sleep(0.1)
    assert leftovers(graph, name) == []


def _dead_spills(scratch: Path) -> list[str]:
    host = f"tracegraph-job-{socket.gethostname()}-"
    out = []
    for d in scratch.glob(host + "*"):
        pid = d.name[len(host) :].split("-")[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            out.append(d.name)
    return out


def test_a_job_sweeps_the_spills_of_dead_processes_of_this_host_only(tmp_path):
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = int(done.stdout)  # a process that has exited
    host = socket.gethostname()
    names = {
        "dead": f"tracegraph-job-{host}-{dead}-ab12cd34",
        "alive": f"tracegraph-job-{host}-{os.getpid()}-ef56gh78",
        "other host": f"tracegraph-job-elsewhere-{dead}-ab12cd34",
        "a longer host name": f"tracegraph-job-{host}-2-{dead}-ab12cd34",
        "the old name": "tracegraph-job-ab12cd34",
    }
    for n in names.values():
        (tmp_path / n).mkdir()
        (tmp_path / n / "rank-0.pickle").write_bytes(b"spilled")
    (tmp_path / f"tracegraph-job-{host}-{dead}-notadir").write_text("a file")
    removed = sweep_dead_spills(tmp_path)
    assert [p.name for p in removed] == [names["dead"]]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [*(n for k, n in names.items() if k != "dead"), f"tracegraph-job-{host}-{dead}-notadir"]
    )


def test_the_job_order_merges_the_ranks_keys_as_one_sort_would(tmp_path):
    """Every op's place in the job: by start, the longer first, then rank
    file, then row; checked against a plain sort of all the ranks' ops,
    with ties across and within ranks and a rank of no ops."""
    import numpy as np

    from tracegraph.ingest.job import _job_order

    rng = np.random.default_rng(7)
    files, ops = [], []
    for rank, n in enumerate([40, 0, 25, 60]):
        start = rng.integers(0, 12, n)
        end = start + rng.integers(0, 4, n)
        order = np.lexsort((np.arange(n), -end, start))  # as survey_rank saves them
        keys = np.stack([start[order], -end[order], order], axis=1) if n else np.zeros((0, 3), dtype=np.int64)
        f = tmp_path / f"keys-{rank}.npy"
        np.save(f, keys.astype(np.int64))
        files.append(f)
        ops += [(int(start[r]), -int(end[r]), rank, r) for r in range(n)]
    place = {op[2:]: k for k, op in enumerate(sorted(ops))}
    seqs = _job_order(files)
    assert [len(s) for s in seqs] == [40, 0, 25, 60]
    for rank, seq in enumerate(seqs):
        assert seq.tolist() == [place[(rank, r)] for r in range(len(seq))]
