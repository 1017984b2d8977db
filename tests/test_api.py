"""The HTTP API through FastAPI's TestClient, against a real database (each engine).

One app per module and engine (its own connection to the session's
database); tests that upload use the ``graph`` fixture, which drops the
traces they add.
"""

from __future__ import annotations

import csv
import html
import importlib.util
import io
import re
import time
from pathlib import Path

import pytest
from conftest import SEED_MEGENGINE, SEED_OPLIST, SEED_STEPSTATS, trace_nodes
from fastapi.testclient import TestClient

from tracegraph.api.app import create_app
from tracegraph.api.settings import Settings
from tracegraph.queries.catalog import catalog, get, parse_header
from tracegraph.queries.run import run_analysis

ROOT = Path(__file__).resolve().parent.parent
GRAPH_ANALYSES = ("critical-path-graph", "op-neighborhood-graph", "peak-tensors-graph")


ENGINE = {"uri": "embedded"}


@pytest.fixture(autouse=True)
def _engine(db_uri):
    """Every test here runs once per engine; make_client connects to it."""
    ENGINE["uri"] = db_uri


def make_client(**settings) -> TestClient:
    base = dict(
        api_key=None,
        max_upload_bytes=64 * 1024 * 1024,
        sync_upload_bytes=16 * 1024 * 1024,
        sync_wait_s=60.0,
        cypher_timeout_ms=10_000,
        cypher_max_rows=10_000,
    )
    base.update(settings)
    return TestClient(create_app(ENGINE["uri"], Settings(**base)))


@pytest.fixture(scope="module")
def client(session_graph, db_uri):
    ENGINE["uri"] = db_uri
    with make_client() as c:
        yield c


def upload(client, trace, *paths_or_parts, **fields):
    files = []
    for p in paths_or_parts:
        if isinstance(p, Path):
            files.append(("files", (p.name, p.read_bytes())))
        else:
            files.append(("files", p))
    data = {"trace": trace, **{k: str(v).lower() if isinstance(v, bool) else v for k, v in fields.items()}}
    return client.post("/traces", data=data, files=files)


def trace_names(client) -> list[str]:
    r = client.get("/traces")
    assert r.status_code == 200
    return [t["trace"] for t in r.json()]


def one_line_detail(r) -> str:
    body = r.json()
    assert set(body) >= {"detail"}
    assert isinstance(body["detail"], str) and body["detail"] and "\n" not in body["detail"], body
    return body["detail"]


def nodes_of(graph, trace) -> int:
    return trace_nodes(graph, trace)


# ---------------------------------------------------------------- health, traces


def test_health(client, db_uri):
    r = client.get("/health")
    assert r.status_code == 200
    body = r.json()
    backend = "embedded" if db_uri == "embedded" else "neo4j"
    assert body["status"] == "ok" and body["backend"] == backend and body["database"] == "reachable"
    assert re.match(r"^\d+\.\d+", body["version"])
    assert ("FalkorDB" if backend == "embedded" else "Neo4j/5") in body["database_version"]


def test_health_503_when_the_database_is_unreachable(session_graph):
    # Nothing listens on port 1: the app still starts, /health says why it is unusable.
    with TestClient(create_app("falkordb://127.0.0.1:1", Settings())) as c:
        r = c.get("/health")
        assert r.status_code == 503
        body = r.json()
        assert body["database"] == "unreachable" and body["backend"] == "falkordb" and body["detail"]
        r = c.get("/traces")
        assert r.status_code == 503
        one_line_detail(r)


def test_list_and_describe_traces(client, alexnet):
    assert alexnet in trace_names(client)
    r = client.get(f"/traces/{alexnet}")
    assert r.status_code == 200
    t = r.json()
    assert t["trace"] == alexnet and t["framework"] == "tensorflow"
    assert t["ops"] > 0 and t["span_us"] > 0 and t["memory_peak_bytes"] > 0
    assert t["sources"] and t["sources"][0].endswith("tf1-alexnet-stepstats.pbtxt")
    assert t["counts"]["nodes"]["Op"] == t["ops"]


def test_unknown_trace_is_404(client):
    for r in (
        client.get("/traces/no-such-trace"),
        client.delete("/traces/no-such-trace"),
        client.get("/traces/no-such-trace/queries/top-ops"),
        client.get("/traces/no-such-trace/queries/peak-memory?format=csv"),
    ):
        assert r.status_code == 404, r.text
        assert "no-such-trace" in one_line_detail(r)


def test_unknown_route_and_job_are_json_404(client):
    r = client.get("/no/such/route")
    assert r.status_code == 404 and r.json() == {"detail": "Not Found"}
    r = client.get("/jobs/0123456789abcdef")
    assert r.status_code == 404
    one_line_detail(r)


# ---------------------------------------------------------------- catalog and analyses


def test_catalog(client):
    r = client.get("/queries")
    assert r.status_code == 200
    items = {a["name"]: a for a in r.json()}
    assert set(items) == set(catalog())
    top = items["top-ops"]
    assert top["summary"] and top["columns"][0] == {"name": "op", "doc": "op name"}
    assert top["params"] == [
        {
            "name": "n",
            "type": "INTEGER",
            "required": False,
            "default": 10,
            "doc": "how many ops to return",
            "choices": [],
            "minimum": 0,
            "maximum": None,
        },
        {
            "name": "step",
            "type": "INTEGER",
            "required": False,
            "default": None,
            "doc": "only the ops of this step (its number, as step-breakdown lists it; null: every op)",
            "choices": [],
            "minimum": None,
            "maximum": None,
        },
    ]
    for name in GRAPH_ANALYSES:
        assert items[name]["graph"] is True
    assert items["top-ops"]["graph"] is False
    one = client.get("/queries/op-neighborhood-graph").json()
    assert one["query"].startswith("MATCH") and "$hops" in one["query"]
    assert client.get("/queries/nope").status_code == 404


def test_analysis_matches_the_library(client, session_graph, alexnet):
    want = run_analysis(session_graph, "peak-memory", alexnet)
    r = client.get(f"/traces/{alexnet}/queries/peak-memory")
    assert r.status_code == 200
    body = r.json()
    assert set(body) == {"analysis", "trace", "columns", "rows", "unavailable", "note"}
    assert body["analysis"] == "peak-memory" and body["trace"] == alexnet
    assert body["columns"] == want.columns and body["rows"] == want.rows
    assert body["note"] is None and body["unavailable"] is None


def test_analysis_parameters_are_typed(client, alexnet):
    r = client.get(f"/traces/{alexnet}/queries/top-ops", params={"n": "3"})
    assert r.status_code == 200 and len(r.json()["rows"]) == 3
    # The generic route does the same.
    r2 = client.get(f"/traces/{alexnet}/queries/{'top-ops'}?n=3")
    assert r2.json() == r.json()


@pytest.mark.parametrize(
    "query, name",
    [
        ("n=abc", "n"),
        ("n=1.5", "n"),
        ("n=99999999999999999999999", "n"),
        ("n=-1", "n"),
        ("bogus=1", "bogus"),
        ("n=1&n=2", "n"),
        ("format=xml", "format"),
    ],
)
def test_bad_parameter_is_422_naming_it(client, alexnet, query, name):
    r = client.get(f"/traces/{alexnet}/queries/top-ops?{query}")
    assert r.status_code == 422, r.text
    assert name in one_line_detail(r)


def test_missing_required_and_choices(client, alexnet):
    r = client.get(f"/traces/{alexnet}/queries/op-neighborhood-graph")
    assert r.status_code == 422 and "op" in one_line_detail(r)
    r = client.get(f"/traces/{alexnet}/queries/tensor-lifetimes", params={"order": "nope"})
    assert r.status_code == 422 and "order" in one_line_detail(r)
    r = client.get(f"/traces/{alexnet}/queries/trace-diff", params={"base": "no-such-base"})
    assert r.status_code == 404


def test_unknown_analysis_is_404(client, alexnet):
    r = client.get(f"/traces/{alexnet}/queries/no-such-analysis")
    assert r.status_code == 404
    assert "no-such-analysis" in one_line_detail(r)


def test_csv(client, alexnet):
    r = client.get(f"/traces/{alexnet}/queries/top-ops?n=4&format=csv")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(r.text)))
    js = client.get(f"/traces/{alexnet}/queries/top-ops?n=4").json()
    assert rows[0] == js["columns"] and len(rows) == 5
    assert [row[0] for row in rows[1:]] == [row[0] for row in js["rows"]]


def test_not_available_note(client, graph):
    # tf-opnames: a graph without times, so top-ops (requires times) is not available.
    from conftest import SEED_OPNAMES

    assert upload(client, "api-opnames", SEED_OPNAMES).status_code == 201
    body = client.get("/traces/api-opnames/queries/top-ops").json()
    assert body["rows"] == [] and body["note"].startswith("not available: ")
    assert body["unavailable"]["fact"] == "times" and body["unavailable"]["trace"] == "api-opnames"
    assert body["note"] == "not available: " + body["unavailable"]["reason"]
    r = client.get("/traces/api-opnames/queries/top-ops?format=csv")
    assert r.status_code == 200 and r.headers["x-tracegraph-note"].startswith("not available")


# ---------------------------------------------------------------- graph-returning analyses


def test_graph_analysis_headers():
    for name in GRAPH_ANALYSES:
        a = get(name)
        text = (ROOT / "cypher" / f"{name}.cypher").read_text()
        assert parse_header(text, f"{name}.cypher") == a and a.graph
        _header, browser = text.split("\n// Neo4j Browser:\n", 1)
        lines = [ln for ln in browser.splitlines() if ln.startswith("//")]
        assert {ln.split()[2] for ln in lines} == {p.name for p in a.params}
        body = "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("//"))
        assert not re.search(r"(?i)\b(EXISTS|COUNT|CALL)\s*\{", body)
    assert not any(
        a.graph for a in catalog().values() if a.name not in GRAPH_ANALYSES and not a.name.endswith("-graph")
    )


def test_critical_path_graph(client, alexnet):
    facts = client.get(f"/traces/{alexnet}").json()
    body = client.get(f"/traces/{alexnet}/queries/critical-path-graph", params={"max_ops": 1000}).json()
    assert body["columns"] == ["ops", "window_us", "critical_path_us", "path"]
    ((ops, window, length, path),) = body["rows"]
    assert path["kind"] == "path"
    assert ops == len(path["nodes"]) == facts["critical_path_ops"]
    assert window == length == facts["critical_path_us"]
    assert all(n["labels"] == ["Op"] for n in path["nodes"])
    assert all(r["type"] == "CRITICAL_PRED" for r in path["relationships"])
    steps = [n["properties"]["cp_step"] for n in path["nodes"]]
    assert steps == list(range(ops - 1, -1, -1))
    assert sum(n["properties"]["weight_us"] for n in path["nodes"]) == pytest.approx(length)
    # The same ops, in reverse order, as the tabular critical-path.
    table = client.get(f"/traces/{alexnet}/queries/critical-path").json()
    names = [r[1] for r in table["rows"]]
    assert [n["properties"]["name"] for n in reversed(path["nodes"])] == names
    # A window: steps 10..14 of the path, i.e. rows 10..14 of the table.
    ((ops, window, _, path),) = client.get(
        f"/traces/{alexnet}/queries/critical-path-graph", params={"first_step": 10, "max_ops": 5}
    ).json()["rows"]
    assert ops == 5 and [n["properties"]["name"] for n in reversed(path["nodes"])] == names[10:15]
    weights = [r[table["columns"].index("dur_us")] for r in table["rows"]]
    assert window == pytest.approx(sum(weights[10:15]))
    # The default window, the one a drawing shows: the path's first 8 ops.
    ((ops, window, _, path),) = client.get(f"/traces/{alexnet}/queries/critical-path-graph").json()["rows"]
    assert ops == 8 and [n["properties"]["name"] for n in reversed(path["nodes"])] == names[:8]
    assert window == pytest.approx(sum(weights[:8]))
    # Cut at the path's end; nothing past it.
    ((ops, *_),) = client.get(
        f"/traces/{alexnet}/queries/critical-path-graph", params={"first_step": facts["critical_path_ops"] - 2}
    ).json()["rows"]
    assert ops == 2
    past = client.get(
        f"/traces/{alexnet}/queries/critical-path-graph", params={"first_step": facts["critical_path_ops"]}
    ).json()
    assert past["rows"] == []
    # A one-op window (the UNION's second branch): a path of one node.
    ((ops, window, _, path),) = client.get(
        f"/traces/{alexnet}/queries/critical-path-graph", params={"first_step": 7, "max_ops": 1}
    ).json()["rows"]
    assert ops == 1 and path["relationships"] == [] and window == weights[7]
    assert [n["properties"]["name"] for n in path["nodes"]] == [names[7]]


def test_op_neighborhood_graph(client, session_graph, alexnet):
    op = "conv3/Conv2D"
    direct = {
        r[0]
        for r in session_graph.run(
            "MATCH (o:Op {trace: $t, name: $op})-[:DATA|CONTROL]-(n:Op) RETURN DISTINCT n.name",
            {"t": alexnet, "op": op},
            trace=alexnet,
        ).rows
    }
    one = client.get(f"/traces/{alexnet}/queries/op-neighborhood-graph", params={"op": op, "hops": 1}).json()
    assert {r[1] for r in one["rows"]} == direct
    assert client.get(f"/traces/{alexnet}/queries/op-neighborhood-graph", params={"op": op}).json() == one  # hops 1
    two = client.get(f"/traces/{alexnet}/queries/op-neighborhood-graph", params={"op": op, "hops": 2}).json()
    lengths = [r[0] for r in two["rows"]]
    assert set(lengths) == {1, 2} and lengths == sorted(lengths)
    for hops, neighbor, path in two["rows"]:
        assert len(path["relationships"]) == hops and path["nodes"][0]["properties"]["name"] == op
        assert path["nodes"][-1]["properties"]["name"] == neighbor
        assert {r["type"] for r in path["relationships"]} <= {"DATA", "CONTROL"}
    capped = client.get(f"/traces/{alexnet}/queries/op-neighborhood-graph", params={"op": op, "hops": 4}).json()
    assert max(r[0] for r in capped["rows"]) == 4
    too_far = client.get(f"/traces/{alexnet}/queries/op-neighborhood-graph", params={"op": op, "hops": 9})
    assert too_far.status_code == 422 and "hops" in one_line_detail(too_far)
    none = client.get(f"/traces/{alexnet}/queries/op-neighborhood-graph", params={"op": "no such op"}).json()
    assert none["rows"] == [] and none["note"].startswith("no rows")


def test_peak_tensors_graph(client, alexnet):
    body = client.get(f"/traces/{alexnet}/queries/peak-tensors-graph", params={"n": 1000}).json()
    peak = client.get(f"/traces/{alexnet}/queries/peak-memory").json()
    cols = peak["columns"]
    live = sorted(
        (r[cols.index("allocator")], r[cols.index("bytes")], r[cols.index("tensor")])
        for r in peak["rows"]
        if r[cols.index("tensor")] is not None
    )
    got = []
    assert body["columns"] == ["allocator", "bytes", "path"]
    for allocator, nbytes, path in body["rows"]:
        labels = [n["labels"][0] for n in path["nodes"]]
        assert labels == ["Op", "Tensor", "Allocation", "Allocator"]
        assert [r["type"] for r in path["relationships"]] == ["PRODUCES", "BACKED_BY", "IN_ALLOCATOR"]
        assert path["nodes"][3]["properties"]["name"] == allocator
        assert path["nodes"][2]["properties"]["bytes"] == nbytes
        got.append((allocator, nbytes, path["nodes"][1]["properties"]["name"]))
    assert live and sorted(got) == live
    # n keeps each allocator's largest, larger bytes first, ties by tensor name.
    assert len(live) > 5
    ranked = sorted(live, key=lambda r: (r[0], -r[1], r[2]))
    for params in ({"n": 3}, {}):  # the default keeps 5
        top = client.get(f"/traces/{alexnet}/queries/peak-tensors-graph", params=params).json()["rows"]
        n = params.get("n", 5)
        expected = [r for r in ranked if sum(1 for q in ranked[: ranked.index(r)] if q[0] == r[0]) < n]
        assert [(a, b, p["nodes"][1]["properties"]["name"]) for a, b, p in top] == expected


# ---------------------------------------------------------------- ad-hoc Cypher


def test_cypher_read(client, alexnet):
    r = client.post(
        "/cypher",
        json={
            "query": "MATCH (o:Op {trace: $t}) RETURN o.name AS name, o LIMIT 2",
            "params": {"t": alexnet},
            "trace": alexnet,
        },
    )
    assert r.status_code == 200
    body = r.json()
    assert body["columns"] == ["name", "o"] and len(body["rows"]) == 2 and body["truncated"] is False
    node = body["rows"][0][1]
    assert node["kind"] == "node" and node["labels"] == ["Op"] and node["properties"]["name"] == body["rows"][0][0]
    r = client.post(
        "/cypher",
        json={"query": "MATCH p = (:Op {trace: $trace})-[:LAUNCHED]->(:Kernel) RETURN p LIMIT 1", "trace": alexnet},
    )
    path = r.json()["rows"][0][0]
    assert path["kind"] == "path" and path["relationships"][0]["type"] == "LAUNCHED"
    # Values JSON has no literal for: NaN and infinity come back as null.
    r = client.post("/cypher", json={"query": "RETURN 0.0/0.0 AS nan, 1.0/0.0 AS inf, date('2024-01-02') AS d"})
    assert r.status_code == 200 and r.json()["rows"] == [[None, None, "2024-01-02"]]


def test_cypher_write_is_refused_and_changes_nothing(client, session_graph, alexnet):
    count = "MATCH (o:Op {trace: $trace}) RETURN count(o)"
    before = session_graph.run(count, trace=alexnet).rows[0][0]
    assert before > 0
    for query in (
        "MATCH (o:Op) DETACH DELETE o",
        "CREATE (:Op {trace: 'x'})",
        "MATCH (o:Op) SET o.name = 'x'",
        "CREATE INDEX FOR (n:Foo) ON (n.bar)",
    ):
        for trace in (None, alexnet):
            r = client.post("/cypher", json={"query": query, "trace": trace})
            assert 400 <= r.status_code < 500, (query, r.status_code, r.text)
            one_line_detail(r)
    assert session_graph.run(count, trace=alexnet).rows[0][0] == before
    assert (
        session_graph.run(
            "MATCH (o:Op {trace: $t}) WHERE o.name = 'x' RETURN count(o)", {"t": alexnet}, trace=alexnet
        ).rows[0][0]
        == 0
    )


def test_cypher_beyond_the_graph_is_403_in_one_line(client, alexnet):
    """LOAD CSV, a dbms procedure (Neo4j; FalkorDB has none of them: its
    own 400), a command: refused before they run (issue 46)."""
    r = client.post("/cypher", json={"query": "LOAD CSV FROM 'http://127.0.0.1:9/x' AS l RETURN l", "trace": alexnet})
    assert r.status_code == 403, r.text
    assert one_line_detail(r) == "LOAD CSV is not allowed in ad-hoc queries"
    r = client.post("/cypher", json={"query": "CALL dbms.listConfig()"})
    assert r.status_code == (403 if ENGINE["uri"] != "embedded" else 400), r.text
    one_line_detail(r)
    r = client.post("/cypher", json={"query": "CALL db.labels() YIELD label RETURN label", "trace": alexnet})
    assert r.status_code == 200 and ["Op"] in r.json()["rows"]


def test_cypher_errors(client):
    r = client.post("/cypher", json={"query": "THIS IS NOT CYPHER"})
    assert r.status_code == 400
    one_line_detail(r)
    for body in (
        {},
        {"query": ""},
        {"query": 1},
        {"query": "RETURN 1", "params": []},
        {"query": "RETURN $x", "params": {"x": 2**70}},
        {"query": "RETURN 1", "extra": 1},
    ):
        r = client.post("/cypher", json=body)
        assert r.status_code == 422, (body, r.text)
        one_line_detail(r)
    r = client.post("/cypher", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 422
    r = client.post("/cypher", json={"query": "RETURN $x", "params": {"x": "a" * (17 * 1024 * 1024)}})
    assert r.status_code == 413
    one_line_detail(r)


# A statement that no machine runs in a second (10^10 rows, made lazily:
# no engine holds them all; a filter on both, so that no planner can skip
# the inner loop), so a timeout answer never depends on how fast or how
# busy the machine is.
ENDLESS = "UNWIND range(1, 100000) AS a UNWIND range(1, 100000) AS b WITH a, b WHERE a + b < 0 RETURN count(*)"


def test_cypher_row_cap_and_timeout(session_graph, alexnet):
    # The cap, under a limit that the 118-op listing never comes near.
    with make_client(cypher_max_rows=5, cypher_timeout_ms=60_000) as c:
        r = c.post("/cypher", json={"query": "MATCH (o:Op {trace: $trace}) RETURN o.name", "trace": alexnet})
        assert r.status_code == 200, r.text
        assert len(r.json()["rows"]) == 5 and r.json()["truncated"] is True
    # The limit, with a statement that cannot end within it.
    with make_client(cypher_timeout_ms=1000) as c:
        r = c.post("/cypher", json={"query": ENDLESS, "trace": alexnet})
        assert r.status_code == 400 and "timed out" in one_line_detail(r)


def test_cypher_timeout_bounds_the_whole_request(session_graph, alexnet):
    """Rows streaming out count too: the answer comes when the limit passes,
    not when the database gets round to stopping (its own checks are
    coarse) or the rows run out (never, here). bench/run.py measures how
    close to the limit; here the bound is loose (tens of seconds) so that
    a busy machine cannot fail it, and tests/test_deadline.py shows the
    answer coming while the statement still runs."""
    with make_client(cypher_timeout_ms=1000) as c:
        for query in ("UNWIND range(1, 100000) AS a UNWIND range(1, 100000) AS b RETURN a, b", ENDLESS):
            t0 = time.monotonic()
            r = c.post("/cypher", json={"query": query, "trace": alexnet})
            elapsed = time.monotonic() - t0
            assert r.status_code == 400 and "timed out" in one_line_detail(r)
            assert elapsed < 30, (query, elapsed)


# ---------------------------------------------------------------- uploads


def test_upload_small_answers_201_with_the_summary(client, graph):
    r = upload(client, "api-alex", SEED_STEPSTATS, SEED_OPLIST)
    assert r.status_code == 201, r.text
    assert r.headers["location"] == "/traces/api-alex"
    t = r.json()
    assert t["trace"] == "api-alex" and t["framework"] == "tensorflow"
    assert t["sources"] == [SEED_STEPSTATS.name, SEED_OPLIST.name]  # the uploaded names, not temp paths
    assert client.get("/traces/api-alex").json() == t
    # Taken name: 409 unless replace=true.
    r = upload(client, "api-alex", SEED_STEPSTATS)
    assert r.status_code == 409 and "replace=true" in one_line_detail(r)
    r = upload(client, "api-alex", SEED_STEPSTATS, replace=True)
    assert r.status_code == 201 and r.json()["sources"] == [SEED_STEPSTATS.name]
    # And it is queryable like any trace.
    assert client.get("/traces/api-alex/queries/top-ops?n=1").json()["rows"]


def test_upload_equals_cli_ingest(client, graph, alexnet):
    assert upload(client, "api-alex2", SEED_STEPSTATS).status_code == 201
    a = client.get("/traces/api-alex2/queries/critical-path").json()["rows"]
    b = client.get(f"/traces/{alexnet}/queries/critical-path").json()["rows"]
    assert a == b


@pytest.mark.parametrize(
    "name, content, status",
    [
        ("garbage.bin", b"\x00\x01\x02 definitely not a trace \xff" * 50, 415),
        ("empty.txt", b"", 400),
        ("broken.json", b'{"profiler": {"opr_footprint": ', None),
    ],
)
def test_upload_garbage_is_refused_and_leaves_nothing(client, graph, name, content, status):
    before = trace_names(client)
    r = upload(client, "api-garbage", (name, content))
    assert r.status_code in ((status,) if status else (400, 415)), r.text
    detail = one_line_detail(r)
    assert name in detail and "tracegraph-upload" not in detail  # names the file, not the temp path
    assert trace_names(client) == before
    assert nodes_of(graph, "api-garbage") == 0


def test_failed_ingest_is_atomic(client, graph):
    # Two primary profiles cannot make one trace: refused after parsing, nothing stored.
    before = trace_names(client)
    r = upload(client, "api-two", SEED_STEPSTATS, SEED_MEGENGINE)
    assert r.status_code == 400, r.text
    assert "one timed profile" in one_line_detail(r)
    assert trace_names(client) == before and nodes_of(graph, "api-two") == 0
    left = graph.run("MATCH (t:Trace) WHERE t.name = 'api-two' RETURN count(t)").rows[0][0]
    assert left == 0


def test_upload_oversize_is_413(graph, tmp_path):
    with make_client(max_upload_bytes=100_000, upload_dir=str(tmp_path)) as c:
        before = trace_names(c)
        r = upload(c, "api-big", SEED_STEPSTATS)  # 170 kB
        assert r.status_code == 413
        one_line_detail(r)
        assert trace_names(c) == before
    assert list(tmp_path.iterdir()) == []  # the partial upload is gone


def test_upload_form_errors(client, graph):
    cases = [
        (dict(trace="bad~name"), [SEED_STEPSTATS], 422, "trace"),
        (dict(trace="a/b"), [SEED_STEPSTATS], 422, "trace"),
        (dict(), [SEED_STEPSTATS], 422, "trace"),
        (dict(trace="api-x", format="nope"), [SEED_STEPSTATS], 422, "format"),
        (dict(trace="api-x", replace="maybe"), [SEED_STEPSTATS], 422, "replace"),
    ]
    for fields, paths, status, word in cases:
        r = client.post("/traces", data=fields, files=[("files", (p.name, p.read_bytes())) for p in paths])
        assert r.status_code == status, (fields, r.text)
        assert word in one_line_detail(r)
    # Multipart without files.
    body = b'--XyZ\r\nContent-Disposition: form-data; name="trace"\r\n\r\napi-x\r\n--XyZ--\r\n'
    r = client.post("/traces", content=body, headers={"content-type": "multipart/form-data; boundary=XyZ"})
    assert r.status_code == 422 and "files" in one_line_detail(r)
    # Not multipart at all, or cut short.
    r = client.post("/traces", json={"trace": "api-x"})
    assert r.status_code == 415
    r = client.post("/traces", content=body[:60], headers={"content-type": "multipart/form-data; boundary=XyZ"})
    assert r.status_code in (400, 422)
    one_line_detail(r)
    assert "api-x" not in trace_names(client)


def poll(client, url, timeout=120.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        job = client.get(url).json()
        if job["status"] in ("done", "failed") or time.monotonic() > deadline:
            return job
        time.sleep(0.05)


def test_large_upload_is_a_job(graph):
    with make_client(sync_upload_bytes=0) as c:
        r = upload(c, "api-job", SEED_STEPSTATS)
        assert r.status_code == 202, r.text
        job = r.json()
        assert r.headers["location"] == job["url"] == f"/jobs/{job['id']}"
        assert job["status"] in ("queued", "running", "done") and job["trace"] == "api-job"
        job = poll(c, job["url"])
        assert job["status"] == "done", job
        assert job["progress"]["fraction"] == 1.0 and job["progress"]["done"] == job["progress"]["total"] > 0
        assert job["result"]["trace"] == "api-job" and job["error"] is None
        assert "api-job" in trace_names(c)
        # A failing job reports the error and leaves nothing.
        r = upload(c, "api-job-bad", ("junk.bin", b"\x00junk" * 10))
        assert r.status_code == 202
        job = poll(c, r.json()["url"])
        assert job["status"] == "failed" and job["error_status"] == 415 and "junk.bin" in job["error"]
        assert "api-job-bad" not in trace_names(c)


def test_delete(client, graph):
    assert upload(client, "api-del", SEED_STEPSTATS).status_code == 201
    r = client.delete("/traces/api-del")
    assert r.status_code == 200 and r.json()["trace"] == "api-del" and r.json()["deleted_nodes"] > 0
    assert nodes_of(graph, "api-del") == 0
    assert client.delete("/traces/api-del").status_code == 404


# ---------------------------------------------------------------- what-if


def test_whatif(client, alexnet):
    have = importlib.util.find_spec("tracegraph.queries.whatif") is not None
    r = client.post(f"/traces/{alexnet}/whatif", json={"match": "type=Conv2D.*", "factor": 0.5})
    if not have:
        assert r.status_code == 501
        return
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["trace"] == alexnet and body["matched_ops"] > 0 and body["critical_path_us"] < body["baseline_us"]
    same = client.post(f"/traces/{alexnet}/whatif", json={"match": ["type=Conv2D.*"], "factor": 1}).json()
    assert same["critical_path_us"] == same["baseline_us"]
    none = client.post(f"/traces/{alexnet}/whatif", json={"match": "type=NoSuchType", "factor": 0.5}).json()
    assert none["matched_ops"] == 0 and none["critical_path_us"] == none["baseline_us"]
    for bad in (
        {"match": "nonsense", "factor": 0.5},
        {"match": "type=(", "factor": 0.5},
        {"match": "type=Conv2D", "factor": -1},
        {"match": [], "factor": 1},
        {"factor": 1},
    ):
        r = client.post(f"/traces/{alexnet}/whatif", json=bad)
        assert r.status_code == 422, (bad, r.text)
        one_line_detail(r)
    r = client.post("/traces/no-such-trace/whatif", json={"match": "type=Conv2D", "factor": 0.5})
    assert r.status_code == 404


# ---------------------------------------------------------------- auth


def test_api_key(session_graph, alexnet):
    with make_client(api_key="s3cret") as c:
        assert c.get("/health").status_code == 200
        for path in (
            "/traces",
            f"/traces/{alexnet}/queries/top-ops",
            "/queries",
            "/browser/guide.html",
            "/browser/tracegraph.grass",
            "/jobs/x",
        ):
            r = c.get(path)
            assert r.status_code == 401, path
            assert r.headers["www-authenticate"] == "Bearer"
            one_line_detail(r)
        assert c.get("/traces", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert c.post("/cypher", json={"query": "RETURN 1"}).status_code == 401
        ok = {"Authorization": "Bearer s3cret"}
        assert c.get("/traces", headers=ok).status_code == 200
        assert c.post("/cypher", json={"query": "RETURN 1 AS one"}, headers=ok).json()["rows"] == [[1]]
        # The key is never taken from a URL (access logs, history, Referer) ...
        for path in ("/traces?key=s3cret", "/browser/guide.html?key=s3cret", "/browser/tracegraph.grass?key=s3cret"):
            assert c.get(path).status_code == 401, path
        # ... the description of the API holds no data: open.
        assert c.get("/docs").status_code == 200
        spec = c.get("/openapi.json").json()
        assert spec["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"


def test_a_browser_link_opens_the_guide_and_the_style_sheet_only(session_graph, alexnet):
    """Neo4j Browser fetches the guide and the style sheet itself, with no
    header: POST /browser/link (with the key) gives :play and :style lines
    whose token opens those two pages, and nothing else, until it expires;
    the guide passes its token on to its own links."""
    from urllib.parse import parse_qs, urlsplit

    from tracegraph.api import browser_token

    with make_client(api_key="s3cret", browser_link_s=3600) as c:
        assert c.post("/browser/link").status_code == 401
        started = time.time()
        link = c.post("/browser/link", headers={"Authorization": "Bearer s3cret"}).json()
        play = urlsplit(link["play"].removeprefix(":play "))
        token = parse_qs(play.query)["token"][0]
        assert "s3cret" not in link["play"] + link["style"]
        assert started + 3590 <= browser_token.expires_at(token) <= time.time() + 3600
        assert link["expires_at"].endswith("+00:00")
        page = c.get(f"{play.path}?{play.query}")
        assert page.status_code == 200
        assert f":style http://testserver/browser/tracegraph.grass?token={token}" in html.unescape(page.text)
        assert c.get(f"/browser/guide.html?trace={alexnet}&token={token}").status_code == 200
        style = urlsplit(link["style"].removeprefix(":style "))
        assert c.get(f"{style.path}?{style.query}").status_code == 200
        # Nothing else: not the API, not another link.
        for path in ("/traces", f"/traces/{alexnet}/queries/top-ops", "/queries"):
            assert c.get(f"{path}?token={token}").status_code == 401, path
        assert c.post(f"/browser/link?token={token}").status_code == 401
        # Forged, tampered, expired, made with another key, from too far ahead: refused.
        later = browser_token.make("s3cret", 60, now=time.time() - 120)
        for bad in (
            "garbage",
            "",
            token[:-1] + ("0" if token[-1] != "0" else "1"),
            later,
            browser_token.make("other-key", 3600),
            f"{int(time.time()) + 30 * 24 * 3600}.{token.partition('.')[2]}",
        ):
            assert c.get(f"/browser/guide.html?token={bad}").status_code == 401, bad
    with make_client() as c:  # no key: the links need no token
        link = c.post("/browser/link").json()
        assert link == {
            "play": ":play http://testserver/browser/guide.html",
            "style": ":style http://testserver/browser/tracegraph.grass",
            "expires_at": None,
        }


def test_browser_tokens_are_bound_to_key_and_time():
    from tracegraph.api import browser_token

    now = 1_800_000_000.0
    token = browser_token.make("k", 600, now=now)
    assert browser_token.valid("k", token, now=now) and browser_token.valid("k", token, now=now + 599)
    assert not browser_token.valid("k", token, now=now + 600)
    assert not browser_token.valid("other", token, now=now)
    assert browser_token.expires_at(browser_token.make("k", 10**9, now=now)) == now + browser_token.MAX_LIFE_S
    assert not browser_token.valid("k", "1." + token.partition(".")[2], now=now)
    assert not browser_token.valid("k", "9" * 13 + ".x", now=now)


# ---------------------------------------------------------------- docs
# (the Neo4j Browser kit: tests/test_neo4j_browser.py)


def test_openapi_and_docs(client):
    spec = client.get("/openapi.json").json()
    paths = spec["paths"]
    for p in (
        "/health",
        "/traces",
        "/traces/{trace}",
        "/jobs/{job_id}",
        "/queries",
        "/cypher",
        "/traces/{trace}/queries/{name}",
        "/traces/{trace}/whatif",
    ):
        assert p in paths, p
    for a in catalog().values():  # each analysis documents its typed parameters
        op = paths[f"/traces/{{trace}}/queries/{a.name}"]["get"]
        declared = {p["name"]: p["schema"]["type"] for p in op["parameters"] if p["in"] == "query"}
        for p in a.params:
            if p.name != "trace":
                assert (
                    declared[p.name]
                    == {
                        "STRING": "string",
                        "INTEGER": "integer",
                        "FLOAT": "number",
                        "BOOLEAN": "boolean",
                        "TRACE": "string",
                        "ENUM": "string",
                    }[p.type]
                )
    upload_body = paths["/traces"]["post"]["requestBody"]["content"]["multipart/form-data"]["schema"]
    assert upload_body["required"] == ["trace", "files"]
    r = client.get("/docs")
    assert r.status_code == 200 and "swagger" in r.text.lower() and "/openapi.json" in r.text


def test_the_documented_trace_name_pattern_is_the_servers_rule(client):
    """The upload form's ``trace`` pattern, read by a JSON Schema validator,
    takes exactly the names check_trace_name takes: every code point at the
    edge of a run of allowed ones (and its neighbours), alone, inside a
    name, and at its ends."""
    import sys

    import jsonschema_rs

    from tracegraph.db.base import check_trace_name
    from tracegraph.errors import BadRequest

    upload = client.get("/openapi.json").json()["paths"]["/traces"]["post"]["requestBody"]
    field = upload["content"]["multipart/form-data"]["schema"]["properties"]["trace"]
    validator = jsonschema_rs.validator_for(field)

    def server_takes(name: str) -> bool:
        try:
            check_trace_name(name)
        except BadRequest:
            return False
        return True

    allowed = [chr(c).isprintable() and chr(c) not in "/~" for c in range(sys.maxunicode + 1)]
    edges = {c + d for c in range(1, len(allowed)) if allowed[c] != allowed[c - 1] for d in (-2, -1, 0, 1)}
    edges -= set(range(0xD800, 0xE000))  # lone surrogates: no UTF-8 text (a form, a URL) carries one
    assert len(edges) > 2000
    for c in sorted(edges | {0, 0x20, 0x2F, 0x7E, sys.maxunicode}):
        for name in (chr(c), f"a{chr(c)}b", f"{chr(c)}ab", f"ab{chr(c)}"):
            assert validator.is_valid(name) == server_takes(name), (hex(c), name)
    assert not validator.is_valid("") and not validator.is_valid(" ")


@pytest.mark.neo4j
def test_reads_go_through_the_reading_identity_and_writes_through_the_writer(tg_home):
    """TRACEGRAPH_DB_READ: the routes that only read use it, ingest and
    delete use the writer's. Shown with two databases that tell them apart
    (the writer the embedded one, the reader Neo4j): a trace uploaded is in
    the writer only, so every read route answers as the reader, and the
    delete finds it."""
    from conftest import NEO4J_URI, NO_NEO4J

    if not NEO4J_URI:
        pytest.skip(NO_NEO4J)
    name = f"two-identities-{time.monotonic_ns()}"
    with TestClient(create_app("embedded", Settings(read_db=NEO4J_URI))) as c:
        r = upload(c, name, SEED_STEPSTATS)
        assert r.status_code == 201, r.text
        assert name not in trace_names(c)
        assert c.get(f"/traces/{name}").status_code == 404
        assert c.get(f"/traces/{name}/queries/top-ops").status_code == 404
        r = c.post(
            "/cypher", json={"query": "MATCH (t:Trace) WHERE t.trace = $n RETURN count(t)", "params": {"n": name}}
        )
        assert r.status_code == 200 and r.json()["rows"] == [[0]]
        assert c.get("/health").json()["backend"] == "embedded"  # the writer's
        r = c.delete(f"/traces/{name}")
        assert r.status_code == 200 and r.json()["deleted_nodes"] > 0
