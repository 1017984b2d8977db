"""The service every front end calls (queries/), on a real database (each
engine): the job store apart from Graph, the one rule for Cypher
parameters, ingest's typed report with its warnings as the CLI and the
HTTP API show it, and a name with a NUL character, which is no trace's.
"""

from __future__ import annotations

import json

import kineto_builder as kb
import pytest
from conftest import run_cli
from fastapi.testclient import TestClient

from tracegraph.api.app import create_app
from tracegraph.api.settings import Settings
from tracegraph.db.jobs import job_records
from tracegraph.errors import BadRequest, NotFound
from tracegraph.queries.cypher import check_params, param_from_text, run_cypher
from tracegraph.queries.ingest import prepare, store
from tracegraph.queries.traces import describe_trace, drop_trace


def test_job_records_newest_first_and_forgotten_oldest_first(graph):
    """The job store (tracegraph/db/jobs.py) on each engine: a save replaces
    the job of its id; newest first, ties by id; forget keeps the newest
    finished jobs and every unfinished one. The jobs here are dated long
    ago, so the store's other jobs (newer) are kept and listed first."""
    store = job_records(graph)

    def finished_count() -> int:
        return sum(j["status"] in ("done", "failed") for j in store.load(limit=10**6))

    before = finished_count()
    jobs = [
        {"id": "svc-a", "created_at": 100.0, "status": "done"},
        {"id": "svc-b", "created_at": 200.0, "status": "failed"},
        {"id": "svc-c", "created_at": 200.0, "status": "done"},  # same instant as b: after it, by id
        {"id": "svc-d", "created_at": 300.0, "status": "running"},
    ]
    for job in jobs:
        store.save(job)
    store.save({"id": "svc-a", "created_at": 100.0, "status": "done", "result": {"x": 1}})  # replaces
    assert store.load("svc-a") == [{"id": "svc-a", "created_at": 100.0, "status": "done", "result": {"x": 1}}]
    assert store.load("svc-none") == []
    mine = [j["id"] for j in store.load(limit=10**6) if j["id"].startswith("svc-")]
    assert mine == ["svc-d", "svc-b", "svc-c", "svc-a"]
    store.forget(before + 2)  # the two newest finished of mine stay (b and c), a goes; d is unfinished
    assert sorted(j["id"] for j in store.load(limit=10**6) if j["id"].startswith("svc-")) == ["svc-b", "svc-c", "svc-d"]
    store.save({"id": "svc-d", "created_at": 300.0, "status": "done"})
    store.forget(before)  # back to the store as it was
    assert [j["id"] for j in store.load(limit=10**6) if j["id"].startswith("svc-")] == []
    assert finished_count() == before


def test_one_rule_for_cypher_parameters(graph, alexnet):
    """The CLI's text values are JSON when they read as JSON, else text; the
    values are then checked by the rule the HTTP API's document declares."""
    assert [param_from_text(t) for t in ("5", "[1, 2]", '"5"', "a=b", "null")] == [5, [1, 2], "5", "a=b", None]
    assert check_params({"x": [1, {"k": "v"}]}) == {"x": [1, {"k": "v"}]}
    for bad, why in (
        ({"x": 2**63}, "params.x: expected a number within the 64-bit integer range"),
        ({"x": ["a\0b"]}, "params.x[0]: text may not hold a NUL character"),
        ({"x": {"a`b": 1}}, "params.x: bad key 'a`b' (keys are non-empty, without backtick or NUL)"),
    ):
        with pytest.raises(BadRequest) as e:
            run_cypher(graph, "RETURN $x AS x", bad, trace=alexnet)
        assert str(e.value) == why
    res = run_cypher(graph, "MATCH (o:Op {trace: $trace}) RETURN count(o) AS n", {}, trace=alexnet, max_rows=5)
    assert (res.columns, res.rows, res.truncated, res.changes) == (["n"], [[118]], False, {})
    res = run_cypher(graph, "MATCH (o:Op {trace: $trace}) RETURN o.name", trace=alexnet, max_rows=5)
    assert len(res.rows) == 5 and res.truncated


def test_cli_cypher_parameters_follow_the_rule(tmp_path):
    home = tmp_path / "home"
    out = run_cli(
        "cypher",
        "RETURN $x AS x, $y AS y",
        "--param",
        "x=[1, 2]",
        "--param",
        "y=text",
        "--format",
        "json",
        home=home,
        check=True,
    )
    assert json.loads(out.stdout) == [{"x": [1, 2], "y": "text"}]
    proc = run_cli("cypher", "RETURN $x AS x", "--param", f"x={2**63}", home=home)
    assert proc.returncode == 1
    assert proc.stderr == "tracegraph: error: params.x: expected a number within the 64-bit integer range\n"


def _partial_job(tmp_path):
    """Ranks 0 and 2 of a job of 4 (distributedInfo.world_size)."""
    paths = []
    for r in (0, 2):
        doc = kb.document(rank=r)
        doc["distributedInfo"]["world_size"] = 4
        paths.append(kb.write(tmp_path / f"rank{r}.json.gz", doc))
    return paths


WARNING = "the job's ranks 1, 3 are not among the files: its collectives are joined, and its stragglers named, among the ranks given"


def test_ingest_reports_its_warnings_to_every_front_end(graph, db_uri, tmp_path):
    """A job given without some of its ranks: the service's report, the
    trace's summary (GET /traces/{trace}, the upload's answer) and the
    CLI's ingest all carry the same warning."""
    paths = _partial_job(tmp_path)
    result = store(graph, prepare(paths, "svc-partial"))
    assert result.summary.warnings == [WARNING]
    assert result.summary.meta["ranks_missing"] == [1, 3]
    assert sum(result.nodes.values()) + 1 == result.summary.node_count
    assert describe_trace(graph, "svc-partial").warnings == [WARNING]
    with TestClient(create_app(db_uri, Settings())) as client:
        assert client.get("/traces/svc-partial").json()["warnings"] == [WARNING]
        files = [("files", (p.name, p.read_bytes())) for p in paths]
        r = client.post("/traces", data={"trace": "svc-partial-upload"}, files=files)
        assert r.status_code == 201, r.text
        assert r.json()["warnings"] == [WARNING]
    whole_paths = [kb.write(tmp_path / f"whole{r}.json.gz", kb.document(rank=r)) for r in (0, 1)]
    whole = store(graph, prepare(whole_paths, "svc-whole"))
    assert whole.summary.warnings == []
    out = run_cli("ingest", *map(str, paths), "--trace", "partial", home=tmp_path / "home", check=True).stdout
    assert out.splitlines()[-1] == f"  warning: {WARNING}"


def test_a_name_with_nul_is_no_trace(graph):
    """Checked once, before the database sees the name (FalkorDB's statements end at a NUL)."""
    for call in (lambda: describe_trace(graph, "a\0b"), lambda: drop_trace(graph, "a\0b")):
        with pytest.raises(NotFound) as e:
            call()
        assert str(e.value) == "no trace named 'a\\x00b'"
