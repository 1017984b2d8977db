"""A job's ranks worked by a Dask cluster writing into Neo4j (``--cluster``, ingest/cluster.py).

On a LocalCluster of 2 worker processes (``local:2``, the CLI's own way to
start one), a job ingested through the cluster stores what the ingest in
one process stores, and every catalog analysis answers the same rows on
it; a worker killed mid-job (``TRACEGRAPH_KILL_AT=rank-written`` set in
the workers: the worker dies right after writing its rank's part) fails
the ingest in one line, leaves the name showing the old version and no
node of the new one, and the next ingest on the same cluster works. The
embedded database is refused in one line before a cluster starts.

With the files sent (``--cluster-files send``: the workers share no path
with the client), each rank file lands whole on one worker, the workers
given about equal bytes, and the job stores the same graph; a worker
killed mid-job fails it the same way, and nothing sent is left on the
workers' disks.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import pytest
from conftest import NEO4J_URI, NO_NEO4J, everything, run_cli
from test_streamed_job import JOBS, stored

from tracegraph.db.connect import open_graph
from tracegraph.errors import UserError
from tracegraph.ingest import cluster as dask_cluster
from tracegraph.ingest.pipeline import ingest
from tracegraph.queries.catalog import catalog
from tracegraph.queries.run import run_analysis

pytest.importorskip("distributed")
needs_neo4j = pytest.mark.skipif(not NEO4J_URI, reason=NO_NEO4J)


@pytest.fixture(scope="module")
def neo():
    """The test Neo4j; the traces these tests made are dropped after them."""
    graph = open_graph(NEO4J_URI)
    before = {t["trace"] for t in graph.list_traces()}
    yield graph
    for t in graph.list_traces():
        if t["trace"] not in before:
            graph.drop_trace(t["trace"])
    graph.sweep()
    graph.close()


@pytest.fixture(scope="module")
def local2():
    """A LocalCluster of 2 worker processes, as ``--cluster local:2`` starts it.
    A worker killed by a test comes back under its nanny; on a busy machine
    that can take longer than the 15 s after which the LocalCluster would
    otherwise give the worker up for good (``lost-worker-timeout``)."""
    import dask

    with dask.config.set({"distributed.deploy.lost-worker-timeout": "600s"}), dask_cluster.connect("local:2") as ranks:
        assert len(ranks.client.scheduler_info()["workers"]) == 2
        yield ranks


def _rows(graph, trace: str) -> dict:
    """Every catalog analysis's rows on ``trace`` (required parameters from
    the trace itself), as text without the trace's name (in notes, nodes)
    and the server's element ids (in graph values)."""
    op = graph.run("MATCH (o:Op {trace: $trace}) RETURN o.name ORDER BY o.seq LIMIT 1", trace=trace).rows[0][0]
    out = {}
    for a in catalog().values():
        fill = {"op": op, "base": trace, "at_us": 0.0}
        params = {p.name: fill[p.name] for p in a.params if p.name in fill}
        res = run_analysis(graph, a.name, trace, params)
        text = repr((res.columns, res.note, res.rows)).replace(trace, "TRACE")
        out[a.name] = re.sub(r"'\d+:[0-9a-f-]+:\d+'", "ID", text)  # the server's element ids
    return out


@needs_neo4j
@pytest.mark.parametrize("job", ["straggler", "nccl_dlrm"])
def test_cluster_ingest_stores_what_one_process_stores(neo, local2, job):
    here = ingest(neo, JOBS[job], f"cl-here-{job}")
    there = ingest(neo, JOBS[job], f"cl-there-{job}", ranks=local2)
    assert there.counts == here.counts
    assert stored(neo, f"cl-there-{job}") == stored(neo, f"cl-here-{job}")
    a, b = _rows(neo, f"cl-here-{job}"), _rows(neo, f"cl-there-{job}")
    assert a == b
    # the job's cross-rank answers are there (not two empty answers alike)
    for name in ("straggler-ranks", "job-critical-path", "observed-critical-path"):
        assert not a[name].endswith(", [])"), name


def _sent(local2) -> dask_cluster.Cluster:
    """The same cluster, with the rank files sent to its workers."""
    return dask_cluster.Cluster(local2.client, None, None, "send")


def _sent_dirs() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("tracegraph-sent-*")}


def test_rank_files_sent_land_whole_each_on_one_worker(local2, tmp_path: Path, monkeypatch):
    monkeypatch.setattr(dask_cluster, "CHUNK_BYTES", 1000)  # several chunks a file, sent out of order
    sizes = [4500, 0, 1000, 2999, 1]
    files = []
    for k, n in enumerate(sizes):
        f = tmp_path / f"r{k}.json.gz"
        f.write_bytes(os.urandom(n))
        files.append(f)
    before = _sent_dirs()
    spill = tmp_path / "spill"
    spill.mkdir()
    placed = _sent(local2).place(files, spill)
    workers = sorted(local2.client.scheduler_info()["workers"])
    # largest first, each to the worker given the fewest bytes so far (ties: the first by address)
    assert placed.homes == [workers[0], workers[1], workers[1], workers[1], workers[1]]
    assert placed.spill_dir != spill and all(p.name.endswith(f.name) for p, f in zip(placed.paths, files))
    for p, f, home in zip(placed.paths, files, placed.homes):
        got = local2.client.submit(dask_cluster._read, str(p), workers=[home], pure=False).result()
        assert got == f.read_bytes()
    assert _sent_dirs() - before == {placed.spill_dir.name}
    _sent(local2).discard(placed)
    assert _sent_dirs() == before


def test_an_unknown_way_of_getting_files_is_refused_in_one_line():
    with (
        pytest.raises(UserError, match="--cluster-files 'copy': use one of auto, shared, send"),
        dask_cluster.connect("local:1", files="copy"),
    ):
        pass


@needs_neo4j
def test_a_job_sent_to_the_workers_stores_what_one_process_stores(neo, local2):
    before = _sent_dirs()
    here = ingest(neo, JOBS["straggler"], "cl-here-sent")
    there = ingest(neo, JOBS["straggler"], "cl-there-sent", ranks=_sent(local2))
    assert there.counts == here.counts
    assert stored(neo, "cl-there-sent") == stored(neo, "cl-here-sent")
    assert _rows(neo, "cl-here-sent") == _rows(neo, "cl-there-sent")
    assert _sent_dirs() == before  # nothing sent is left on the workers' disks


def _ranks(graph, name: str) -> list:
    return graph.run("MATCH (r:Rank {trace: $trace}) RETURN r.rank, properties(r) ORDER BY r.rank", trace=name).rows


@needs_neo4j
@pytest.mark.parametrize("files", ["shared", "send"])
def test_a_worker_killed_mid_job_fails_the_ingest_and_leaves_the_old_version(neo, local2, files):
    name = f"cl-kill-{files}"
    ranks = local2 if files == "shared" else _sent(local2)
    ingest(neo, JOBS["balanced"], name)
    old = _ranks(neo, name)
    before = everything(neo)
    # (lambdas travel by value: run in each worker process, on its own environment)
    local2.client.run(lambda: os.environ.__setitem__("TRACEGRAPH_KILL_AT", "rank-written"))
    try:
        with pytest.raises(UserError) as failed:
            ingest(neo, JOBS["straggler"], name, replace=True, ranks=ranks)
    finally:  # the workers that did not die (the dead ones come back without it)
        local2.client.run(lambda: os.environ.pop("TRACEGRAPH_KILL_AT", None))
    message = str(failed.value)
    assert "\n" not in message and "nothing was published" in message, message
    assert "rank file #" in message and ("KilledWorker" in message or "left the cluster" in message), message
    assert _ranks(neo, name) == old
    neo.sweep()
    assert everything(neo) == before  # no node of the new version anywhere, the old one whole
    # the next ingest works at once, on the same cluster
    local2.client.wait_for_workers(2, timeout=120)
    ingest(neo, JOBS["straggler"], name, replace=True, ranks=ranks)
    assert [r for r, _ in _ranks(neo, name)] == [0, 1, 2, 3]
    assert _ranks(neo, name) != old


def test_a_cluster_with_the_embedded_database_is_refused_in_one_line(tmp_path: Path):
    proc = run_cli("ingest", *map(str, JOBS["straggler"]), "--cluster", "local:1", home=tmp_path)
    assert proc.returncode != 0
    assert proc.stderr.count("\n") == 1 and "a cluster writes into Neo4j only" in proc.stderr, proc.stderr
    assert not (tmp_path / "falkordb").exists()  # refused before the database (or a cluster) started


def test_a_cluster_is_offered_a_job_of_rank_files_only(local2):
    from conftest import SEED_STEPSTATS

    from tracegraph.ingest.pipeline import prepare

    with pytest.raises(UserError, match="rank files of a PyTorch profiler"):
        prepare([SEED_STEPSTATS], "x", ranks=local2)


@needs_neo4j
def test_the_cli_and_the_python_api_take_a_cluster(neo, local2, tmp_path: Path):
    """``--cluster tcp://...`` (the running cluster's scheduler): the trace
    stored, the dashboard's link printed; ``g.ingest(..., cluster=client)``."""
    import tracegraph

    address = local2.client.scheduler.address
    args = ["ingest", *map(str, JOBS["ddp"]), "--trace", "cl-cli", "--cluster", address]
    proc = run_cli(*args, home=tmp_path, db=NEO4J_URI, check=True)
    assert "Dask dashboard: http" in proc.stderr, proc.stderr
    assert proc.stdout.startswith("trace cl-cli: "), proc.stdout
    with tracegraph.connect(NEO4J_URI) as g:
        g.ingest(JOBS["ddp"], "cl-python", cluster=local2.client)
    assert stored(neo, "cl-python") == stored(neo, "cl-cli")
    assert [r for r, _ in _ranks(neo, "cl-python")] == [0, 1, 2, 3]
