"""A job's ranks worked by a Dask cluster writing into Neo4j (``--cluster``, ingest/cluster.py).

On a LocalCluster of 2 worker processes (``local:2``, the CLI's own way to
start one), a job ingested through the cluster stores what the ingest in
one process stores, and every catalog analysis answers the same rows on
it; a worker killed mid-job (``TRACEGRAPH_KILL_AT=rank-written`` set in
the workers: the worker dies right after writing its rank's part) fails
the ingest in one line, leaves the name showing the old version and no
node of the new one, and the next ingest on the same cluster works. The
embedded database is refused in one line before a cluster starts.
"""

from __future__ import annotations

import os
import re
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
    """A LocalCluster of 2 worker processes, as ``--cluster local:2`` starts it."""
    with dask_cluster.connect("local:2") as ranks:
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


def _ranks(graph, name: str) -> list:
    return graph.run("MATCH (r:Rank {trace: $trace}) RETURN r.rank, properties(r) ORDER BY r.rank", trace=name).rows


@needs_neo4j
def test_a_worker_killed_mid_job_fails_the_ingest_and_leaves_the_old_version(neo, local2):
    name = "cl-kill"
    ingest(neo, JOBS["balanced"], name)
    old = _ranks(neo, name)
    before = everything(neo)
    # (lambdas travel by value: run in each worker process, on its own environment)
    local2.client.run(lambda: os.environ.__setitem__("TRACEGRAPH_KILL_AT", "rank-written"))
    try:
        with pytest.raises(UserError) as failed:
            ingest(neo, JOBS["straggler"], name, replace=True, ranks=local2)
    finally:  # the workers that did not die (the dead ones come back without it)
        local2.client.run(lambda: os.environ.pop("TRACEGRAPH_KILL_AT", None))
    message = str(failed.value)
    assert "\n" not in message and "nothing was published" in message, message
    assert "rank file #" in message and "KilledWorker" in message, message
    assert _ranks(neo, name) == old
    neo.sweep()
    assert everything(neo) == before  # no node of the new version anywhere, the old one whole
    # the next ingest works at once, on the same cluster
    local2.client.wait_for_workers(2, timeout=120)
    ingest(neo, JOBS["straggler"], name, replace=True, ranks=local2)
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
