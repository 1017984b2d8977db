"""Storing traces: all or nothing, on each engine.

In-process failures are injected into the engine's own write path (the
real database underneath); crashes are real: a ``tracegraph`` process
killed with SIGKILL at a named point of a load, replace or drop
(``TRACEGRAPH_KILL_AT``, see :func:`tracegraph.db.base.checkpoint`).
Both engines also store exactly the same graph for the same trace.
"""

from __future__ import annotations

import signal
import struct
import sys
import time
from pathlib import Path

import pytest
from conftest import (
    NEO4J_URI,
    NO_NEO4J,
    SEED_STEPSTATS,
    cli_env,
    everything,
    process_state,
    ready_traces,
    run_cli,
    trace_nodes,
)
from stepstats_builder import Op, write

from tracegraph.errors import Conflict, NotFound
from tracegraph.ingest.pipeline import ingest, parse_files
from tracegraph.queries.run import run_analysis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import generate  # noqa: E402


def fail_after(graph, monkeypatch, writes: int) -> list[int]:
    """Make the engine's write statements that create something fail after
    ``writes`` of them; returns a counter of the creating writes seen."""
    name = "_query" if graph.backend != "neo4j" else "run"
    real = getattr(graph, name)
    seen = [0]

    def count() -> None:
        seen[0] += 1
        if seen[0] > writes:
            raise RuntimeError("injected failure")

    def failing(*args, **kwargs):
        query = args[1] if name == "_query" else args[0]
        if kwargs.get("write") and "CREATE" in query and "DELETE" not in query:
            count()
        return real(*args, **kwargs)

    monkeypatch.setattr(graph, name, failing)
    if graph.backend != "neo4j":  # FalkorDB writes a trace by bulk insert: each call creates
        real_bulk = graph._bulk_send

        def failing_bulk(command):
            count()
            return real_bulk(command)

        monkeypatch.setattr(graph, "_bulk_send", failing_bulk)
    return seen


def two_ops(tmp_path: Path) -> Path:
    return write(
        tmp_path, [Op("a", "A", 0, 1), Op("b", "B", 2, 1, ["a"], kernels=[(1, 2, 1)], allocs=[(2, 8), (3, -8)])]
    )


def test_the_trace_node_links_to_its_few_devices_and_allocators_not_to_each_op(graph, gpu):
    """No dense nodes: the Trace node's relationships are one per device,
    allocator and its OpTotals (small_gpu: 2, 2 and 1), none to an op; an
    op names its device instead of linking to it; its ops are found by
    the ``trace`` property, as every query finds them."""
    from analysis_traces import small_gpu

    tf = small_gpu()
    rows = graph.run(
        "MATCH (t:Trace {trace: $trace})-[r]->(n) RETURN type(r) AS rel, labels(n)[0] AS label, count(*) AS n "
        "ORDER BY rel",
        trace=gpu,
    ).rows
    assert rows == [["HAS_ALLOCATOR", "Allocator", 2], ["HAS_DEVICE", "Device", 2], ["HAS_OP_TOTALS", "OpTotals", 1]]
    assert graph.run("MATCH (o:Op {trace: $trace})-[:ON_DEVICE]->() RETURN count(*)", trace=gpu).rows == [[0]]
    placed = graph.run(
        "MATCH (o:Op {trace: $trace}) WHERE o.name IN ['net/p2p', 'net/conv1/Conv2D'] "
        "RETURN o.name, o.device_name ORDER BY o.name",
        trace=gpu,
    ).rows
    assert placed == [["net/conv1/Conv2D", "/device:GPU:0"], ["net/p2p", "/device:GPU:1"]]
    ops = graph.run("MATCH (o:Op {trace: $trace}) RETURN count(o)", trace=gpu).rows
    assert ops == [[len(tf.ops)]]
    # the few keep their placement
    streams = graph.run(
        "MATCH (s:Stream {trace: $trace})-[:ON_DEVICE]->(d:Device) RETURN d.name, count(s) ORDER BY d.name", trace=gpu
    ).rows
    assert streams == [["/device:GPU:0", 3], ["/device:GPU:1", 1]]


def test_existing_name_is_refused_unless_replace(graph, tmp_path):
    p = write(tmp_path, [Op("a", "A", 0, 1)])
    ingest(graph, [p], "dup")
    with pytest.raises(Conflict, match="exists"):
        ingest(graph, [p], "dup")
    p2 = write(tmp_path, [Op("a", "A", 0, 1), Op("b", "B", 2, 1, ["a"])], "two.pbtxt")
    ingest(graph, [p2], "dup", replace=True)
    assert graph.run("MATCH (o:Op {trace: 'dup'}) RETURN count(o)", trace="dup").rows[0][0] == 2
    assert graph.sweep() == []


@pytest.mark.parametrize("fraction", [0.0, 0.5, 0.99])
def test_failed_ingest_leaves_database_as_it_was(graph, tmp_path, monkeypatch, fraction):
    p = two_ops(tmp_path)
    with monkeypatch.context() as m:
        seen = fail_after(graph, m, 10**9)
        ingest(graph, [p], "counted")
    writes = seen[0]
    assert writes >= 2  # the nodes, then the relationships (more on Neo4j)
    graph.drop_trace("counted")
    before = everything(graph)
    with monkeypatch.context() as m:
        fail_after(graph, m, int(writes * fraction))
        with pytest.raises(RuntimeError, match="injected"):
            ingest(graph, [p], "half")
    assert everything(graph) == before


def test_failed_replace_keeps_the_old_trace(graph, tmp_path, monkeypatch):
    p = two_ops(tmp_path)
    ingest(graph, [p], "keep")
    answer = run_analysis(graph, "critical-path", "keep").rows
    before = everything(graph)
    with monkeypatch.context() as m:
        fail_after(graph, m, 1)  # the second creating write fails: the new version is half written
        with pytest.raises(RuntimeError):
            ingest(graph, [p], "keep", replace=True)
    assert everything(graph) == before
    assert run_analysis(graph, "critical-path", "keep").rows == answer


def test_drop(graph, tmp_path):
    p = two_ops(tmp_path)
    report = ingest(graph, [p], "to-drop")
    nodes = sum(report.counts["nodes"].values()) + 1
    assert trace_nodes(graph, "to-drop") == nodes
    assert graph.drop_trace("to-drop") == nodes
    assert "to-drop" not in ready_traces(graph) and trace_nodes(graph, "to-drop") == 0
    with pytest.raises(NotFound):
        graph.drop_trace("to-drop")
    with pytest.raises(NotFound):
        run_analysis(graph, "top-ops", "to-drop")
    ingest(graph, [p], "to-drop")  # the name is free again
    assert trace_nodes(graph, "to-drop") == nodes


def test_engines_store_the_same_graph(tmp_path):
    """Same nodes with the same properties, same relationships with theirs."""
    if not NEO4J_URI:
        pytest.skip(NO_NEO4J)
    from tracegraph.db.connect import open_graph

    files = generate.write(generate.generate(300, seed=4), tmp_path)
    dumps = []
    for uri in ("embedded", NEO4J_URI):
        g = open_graph(uri)
        try:
            for path in (SEED_STEPSTATS, files["binary"]):
                ingest(g, [path], f"same-{path.stem}", replace=True)
            dumps.append([_dump(g, f"same-{path.stem}") for path in (SEED_STEPSTATS, files["binary"])])
            for path in (SEED_STEPSTATS, files["binary"]):
                g.drop_trace(f"same-{path.stem}")
        finally:
            g.close()
    assert dumps[0] == dumps[1]


VOLATILE = {"ingested_at", "trace"}


def _dump(graph, trace: str):
    nodes = graph.run("MATCH (n {trace: $trace}) RETURN labels(n)[0], properties(n)", trace=trace).rows
    rels = graph.run("MATCH (a {trace: $trace})-[e]->(b) RETURN type(e), a.uid, b.uid, properties(e)", trace=trace).rows
    nodes = sorted(
        (label, sorted((k, repr(v)) for k, v in props.items() if k not in VOLATILE)) for label, props in nodes
    )
    rels = sorted((t, a, b, sorted(p.items())) for t, a, b, p in rels)
    return nodes, rels


def test_batch_boundaries_change_nothing(graph, monkeypatch):
    from tracegraph.db import falkor_load, neo4j_publish

    ingest(graph, [SEED_STEPSTATS], "batches-default")
    monkeypatch.setattr(falkor_load, "BATCH_ROWS", 7)
    monkeypatch.setattr(falkor_load, "IN_FLIGHT", 1)
    monkeypatch.setattr(neo4j_publish, "BATCH_ROWS", 7)
    ingest(graph, [SEED_STEPSTATS], "batches-small")
    a, b = _dump(graph, "batches-default"), _dump(graph, "batches-small")
    assert a == b


DATA = Path(__file__).parent / "data"


def _bulk_and_statements(graph, monkeypatch, paths, name):
    """The dumps of ``paths`` stored by FalkorDB's bulk insert and by Cypher statements."""
    monkeypatch.setenv("TRACEGRAPH_FALKORDB_LOADER", "cypher")
    ingest(graph, paths, f"{name}-cypher")
    monkeypatch.delenv("TRACEGRAPH_FALKORDB_LOADER")
    ingest(graph, paths, f"{name}-bulk")
    return _dump(graph, f"{name}-bulk"), _dump(graph, f"{name}-cypher")


@pytest.mark.parametrize(
    "paths",
    [
        [SEED_STEPSTATS],  # tensors, allocations, memory timelines, dependencies
        sorted((DATA / "nccl_dlrm").glob("*.gz")),  # 8 ranks: collectives, list properties, kernels
        [DATA / "kineto" / "lstm-cpu.pt.trace.json.gz"],
    ],
    ids=["stepstats", "nccl-job", "kineto-cpu"],
)
def test_bulk_insert_stores_what_statements_store(graph, monkeypatch, paths):
    if graph.backend == "neo4j":
        pytest.skip("FalkorDB's two loaders")
    bulk, statements = _bulk_and_statements(graph, monkeypatch, paths, "loaders")
    assert bulk == statements
    nodes, rels = bulk
    assert len(nodes) > 100 and len(rels) > 100


def test_bulk_insert_blob_and_call_boundaries_change_nothing(graph, monkeypatch):
    if graph.backend == "neo4j":
        pytest.skip("FalkorDB's bulk loader")
    from tracegraph.db import falkor_bulk

    monkeypatch.setattr(falkor_bulk, "BLOB_ROWS", 7)
    monkeypatch.setattr(falkor_bulk, "CALL_BYTES", 3000)
    monkeypatch.setattr(falkor_bulk, "BLOB_BYTES", 700)  # 7 rows of ops are more: blobs of 3 and 4, ..., 1
    bulk, statements = _bulk_and_statements(graph, monkeypatch, [SEED_STEPSTATS], "blobs")
    assert bulk == statements


def _resp_array(data: bytes) -> list[bytes]:
    """The arguments of one packed Redis command."""
    head, _, rest = data.partition(b"\r\n")
    args = []
    for _ in range(int(head[1:])):
        size, _, rest = rest.partition(b"\r\n")
        args.append(rest[: int(size[1:])])
        rest = rest[int(size[1:]) + 2 :]
    assert rest == b""
    return args


def test_a_bulk_call_joins_the_relationship_blobs_of_one_header():
    """A call's node blobs go one argument each, in the order written (the
    loader counts on the order of arrival for node ids); its relationship
    blobs with the same header go as one argument, the header once, rows
    in the order written (FalkorDB pays for each argument of a type in
    proportion to what that type holds pending: this kept a 64-rank job's
    write from growing faster than the job)."""
    from tracegraph.db import falkor_bulk as fb

    def blob(name, props, *rows):
        return fb.header(name, props) + b"".join(rows)

    def edge(src, dst, *props):
        return struct.pack("<qq", src, dst) + b"".join(fb._value(p) for p in props)

    written = [
        (True, 1, blob("Op", ["uid"], fb._value("a"))),
        (False, 1, blob("NEXT", [], edge(0, 1))),
        (True, 2, blob("Kernel", ["uid"], fb._value("k"), fb._value("l"))),
        (False, 1, blob("CALLS", ["n"], edge(0, 2, 5))),
        (False, 2, blob("NEXT", [], edge(1, 2), edge(2, 0))),
        (False, 1, blob("NEXT", ["w"], edge(0, 0, 1.5))),  # another header: an argument of its own
        (True, 1, blob("Op", ["uid"], fb._value("b"))),
    ]
    sent = []

    def send(pieces):
        sent.append(_resp_array(b"".join(pieces)))
        return b"4 nodes created, 5 edges created"

    writer = fb.Writer(send, "tracegraph:load:x")
    writer.begun = True
    for node, count, data in written:
        (writer.add_nodes if node else writer.add_edges)(data, count)
    writer.flush()
    writer.close()
    (args,) = sent
    assert args[:6] == [b"GRAPH.BULK", b"tracegraph:load:x", b"4", b"5", b"3", b"3"]
    assert args[6:] == [
        written[0][2],
        written[2][2],
        written[6][2],
        blob("NEXT", [], edge(0, 1), edge(1, 2), edge(2, 0)),
        written[3][2],
        written[5][2],
    ]


def test_unusual_strings_travel_in_bulk_and_a_nul_is_stored_as_its_symbol(graph, monkeypatch, tmp_path):
    """Non-ASCII text, control characters, quotes and backslashes travel in
    bulk as they are; a NUL character (which ends a string in FalkorDB) is
    stored as U+2400 by both loaders (before, such a trace failed to load)."""
    if graph.backend == "neo4j":
        pytest.skip("FalkorDB's loaders")
    import kineto_builder as kb

    from tracegraph.db import falkor_bulk

    names = {"odd": 'aten::mm \u00e9\u4e2d\t"q"\\ \x01', "nul": "aten::mm\x00tail"}
    sent = []
    real = falkor_bulk.load_part
    monkeypatch.setattr(falkor_bulk, "load_part", lambda *a: sent.append(a[5]) or real(*a))
    for name, text in names.items():
        doc = kb.document()
        doc["traceEvents"][1]["name"] = text
        bulk, statements = _bulk_and_statements(graph, monkeypatch, [kb.write(tmp_path / f"{name}.json.gz", doc)], name)
        assert bulk == statements
    assert sent == ["odd-bulk", "nul-bulk"]  # neither fell back to statements
    stored = {
        name: graph.run("MATCH (o:Op {uid: 'op:0:1'}) RETURN o.name", trace=f"{name}-bulk").rows[0][0] for name in names
    }
    assert stored == {"odd": names["odd"], "nul": "aten::mm\u2400tail"}


def test_a_value_bulk_cannot_carry_sends_the_trace_by_statements(graph, monkeypatch):
    """NotBulkable met after the first bulk call (the load's graph begun):
    that graph is removed and the trace written by statements instead."""
    if graph.backend == "neo4j":
        pytest.skip("FalkorDB's loaders")
    from tracegraph.db import falkor_bulk

    monkeypatch.setattr(falkor_bulk, "CALL_BYTES", 3000)
    real = falkor_bulk.Writer.flush
    calls = []

    def flush(self):
        calls.append(self.key)
        if len(calls) == 2:
            raise falkor_bulk.NotBulkable("a value with no bulk type")
        real(self)

    monkeypatch.setattr(falkor_bulk.Writer, "flush", flush)
    ingest(graph, [SEED_STEPSTATS], "fallback-bulk")
    monkeypatch.setenv("TRACEGRAPH_FALKORDB_LOADER", "cypher")
    ingest(graph, [SEED_STEPSTATS], "fallback-cypher")
    assert _dump(graph, "fallback-bulk") == _dump(graph, "fallback-cypher")
    assert len(calls) == 2 and not graph._redis.exists(calls[0])  # the begun bulk graph is gone
    assert graph._redis.keys("tracegraph:load:*") == []


def test_a_server_refusing_bulk_insert_gets_statements(graph, monkeypatch):
    """A FalkorDB that does not let this user run GRAPH.BULK (an ACL, a
    managed service): the trace is written by statements instead. The
    refusal is the server's own: an ACL takes GRAPH.BULK from this user
    for the ingest."""
    if graph.backend == "neo4j":
        pytest.skip("FalkorDB's loaders")
    import redis

    who = graph._redis.execute_command("ACL", "WHOAMI")
    graph._redis.execute_command("ACL", "SETUSER", who, "-graph.bulk")
    try:
        with pytest.raises(redis.exceptions.NoPermissionError):  # (the ACL holds)
            graph._redis.execute_command("GRAPH.BULK", "tracegraph:acl-probe", "BEGIN", "0", "0", "0", "0")
        ingest(graph, [SEED_STEPSTATS], "refused-bulk")
    finally:
        graph._redis.execute_command("ACL", "SETUSER", who, "+graph.bulk")
    monkeypatch.setenv("TRACEGRAPH_FALKORDB_LOADER", "cypher")
    ingest(graph, [SEED_STEPSTATS], "refused-cypher")
    assert _dump(graph, "refused-bulk") == _dump(graph, "refused-cypher")


def test_bulk_insert_of_pandas_nullable_columns_matches_statements(graph, monkeypatch):
    """Columns of pandas' nullable dtypes (Int64, boolean, Float64 with NA)
    and object columns mixing types, written by both loaders: the same
    properties, nulls left out, integers stay integers."""
    if graph.backend == "neo4j":
        pytest.skip("FalkorDB's loaders")
    import json

    import numpy as np
    import pandas as pd

    from tracegraph.db.base import NodeTable, RelTable, TraceTables

    ops = pd.DataFrame(
        {
            "uid": ["op:1", "op:2", "op:3"],
            "count": pd.array([1, None, 3], dtype="Int64"),
            "flag": pd.array([True, None, False], dtype="boolean"),
            "share": pd.array([0.5, None, 2.0], dtype="Float64"),
            "bytes": [1.0, np.nan, 3.0],  # an integer column widened to float by its null
            "mixed": ["a", 2, None],
            "shape": [[1, 2], None, [3.5, 4]],
            "nothing": [None, None, None],
            "next": ["op:2", None, "op:1"],
        }
    )
    tables = TraceTables(
        trace_props={"counts": json.dumps({"Op": 3}), "framework": "test"},
        nodes=[NodeTable("Op", "ops", ops, ("count", "flag", "share", "bytes", "mixed", "shape", "nothing"))],
        rels=[RelTable("NEXT", "Op", "Op", "ops", ops[ops["next"].notna()], "uid", "next", ())],
        membership=[("HAS_OP", "Op")],
        int_columns=frozenset({"bytes"}),
    )
    graph.store_trace("nullable-bulk", tables)
    monkeypatch.setenv("TRACEGRAPH_FALKORDB_LOADER", "cypher")
    graph.store_trace("nullable-cypher", tables)
    bulk, statements = _dump(graph, "nullable-bulk"), _dump(graph, "nullable-cypher")
    assert bulk == statements
    props = dict(graph.run("MATCH (o:Op) RETURN o.uid, properties(o)", trace="nullable-bulk").rows)
    assert props["op:1"]["count"] == 1 and props["op:1"]["flag"] is True and props["op:1"]["bytes"] == 1
    assert isinstance(props["op:1"]["bytes"], int) and props["op:3"]["shape"] == [3.5, 4]
    assert set(props["op:2"]) == {"uid", "trace", "mixed"} and props["op:2"]["mixed"] == 2


LIST_COLUMNS = {
    "floats": [[1.5, -2.0], None, [], [3.25]],
    "ints": [[1, 2**62], [0], None, [-(2**63)]],
    "bools": [[True, False], None, [False], []],
    "strings": [["a", "\u00e9\u4e2d", "x\x00y", ""], None, [], ["\U0001f600"]],
    "nonfinite": [[1.0, float("nan")], [float("inf")], None, [2.0]],  # a null element each
    "mixed": [[1, 2.5], ["a", 1], None, [True, 1]],
    "nested": [[[1, 2], [3]], None, [[]], [[4.0]]],
}


@pytest.mark.parametrize("column", sorted(LIST_COLUMNS))
def test_list_columns_encode_as_cell_by_cell(column):
    """List columns are encoded in one go (compiled, column by column); the
    cells must be exactly what the cell-by-cell encoder makes of each value."""
    import numpy as np

    from tracegraph.columns import Lists
    from tracegraph.db import falkor_bulk

    values = LIST_COLUMNS[column]
    kinds = {type(x) for v in values if v is not None for x in v}
    if len(kinds) == 1 and kinds <= {float, int, bool, str}:
        col = Lists.of(values, kinds.pop())  # one element type: the compiled encoder
    else:
        col = np.empty(len(values), dtype=object)  # Python objects: cell by cell
        col[:] = values
    data, offsets = falkor_bulk.cells(col, False)
    got = [bytes(data[offsets[i] : offsets[i + 1]]) for i in range(len(values))]
    assert got == [falkor_bulk._value(v) for v in values]


def test_list_columns_store_the_same_by_both_loaders(graph, monkeypatch):
    if graph.backend == "neo4j":
        pytest.skip("FalkorDB's loaders")
    import json

    import pandas as pd

    from tracegraph.db.base import NodeTable, TraceTables

    ops = pd.DataFrame({"uid": ["op:1", "op:2", "op:3", "op:4"], **LIST_COLUMNS})
    columns = tuple(c for c in LIST_COLUMNS if c != "nonfinite")  # (FalkorDB's Cypher refuses a null in a list)
    tables = TraceTables(
        trace_props={"counts": json.dumps({"Op": 4}), "framework": "test"},
        nodes=[NodeTable("Op", "ops", ops, columns)],
        rels=[],
        membership=[("HAS_OP", "Op")],
        int_columns=frozenset(),
    )
    graph.store_trace("lists-bulk", tables)
    monkeypatch.setenv("TRACEGRAPH_FALKORDB_LOADER", "cypher")
    graph.store_trace("lists-cypher", tables)
    assert _dump(graph, "lists-bulk") == _dump(graph, "lists-cypher")
    props = dict(graph.run("MATCH (o:Op) RETURN o.uid, properties(o)", trace="lists-bulk").rows)
    assert props["op:1"]["ints"] == [1, 2**62] and props["op:4"]["ints"] == [-(2**63)]
    assert props["op:1"]["strings"] == ["a", "\u00e9\u4e2d", "x\u2400y", ""] and props["op:4"]["strings"] == [
        "\U0001f600"
    ]
    assert props["op:1"]["bools"] == [True, False] and props["op:3"]["floats"] == []
    assert "floats" not in props["op:2"]


# ---------------------------------------------------------------- crashes


KILL_POINTS = {
    "ingest": ["load-started", "load-written", "load-published"],
    "replace": ["load-started", "load-written", "swap-started", "swap-batch", "swap-renamed", "load-published"],
    "drop": ["drop-started", "drop-marked", "drop-done"],
}
# What a reader finds after the kill: the new version once it is complete and
# the swap to it has begun (a reader finishes a dead process's swap).
NEW_AFTER = {"load-published", "swap-started", "swap-batch", "swap-renamed"}
# Points of the Neo4j protocol only: FalkorDB's RENAME and MULTI/EXEC do those steps at once.
NEO4J_ONLY = {"swap-started", "swap-batch", "swap-renamed", "drop-marked"}


def test_two_drops_at_once_one_drops_the_other_says_there_is_no_such_trace(graph, db_uri, tg_home, tmp_path):
    """A drop that found the trace, then paused (SIGSTOP at drop-started)
    while another process dropped it, ends with the one-line "no trace
    named" (exit 1), and the database is as the other drop left it."""
    import subprocess
    import sys

    path = write(tmp_path, [Op("a", "A", 0, 1), Op("b", "B", 2, 1, ["a"])], "t.pbtxt")
    name = "dropped-twice"
    ingest(graph, [path], name)
    nodes = trace_nodes(graph, name)
    env = cli_env(tg_home, db_uri, {"TRACEGRAPH_PAUSE_AT": "drop-started"})
    slow = subprocess.Popen(
        [sys.executable, "-m", "tracegraph.cli", "drop", name], env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 120
        while process_state(slow.pid) != "T":
            assert time.monotonic() < deadline and slow.poll() is None, "the drop did not reach drop-started"
            time.sleep(0.05)
        assert graph.drop_trace(name) == nodes
        slow.send_signal(signal.SIGCONT)
        _, err = slow.communicate(timeout=120)
    finally:
        slow.kill()
    assert slow.returncode == 1 and err.count("\n") == 1 and f"no trace named {name!r}" in err, err
    assert _ops(graph, name) is None and trace_nodes(graph, name) == 0


@pytest.mark.parametrize("op, point", [(op, p) for op, points in KILL_POINTS.items() for p in points])
def test_kill_9_leaves_old_or_new_and_nothing_behind(graph, db_uri, tg_home, tmp_path, op, point):
    """SIGKILL at every phase: the name shows the old version or the new one
    (never neither, never both), the next command removes what the dead
    process left, and a re-ingest under the name works at once."""
    if point in NEO4J_ONLY and graph.backend != "neo4j":
        pytest.skip(f"{point}: FalkorDB does that step in one RENAME or MULTI/EXEC")
    old = write(tmp_path, [Op("a", "A", 0, 1), Op("b", "B", 2, 1, ["a"])], "old.pbtxt")
    new = write(tmp_path, [Op("a", "A", 0, 1), Op("b", "B", 2, 1, ["a"]), Op("c", "C", 4, 1, ["b"])], "new.pbtxt")
    name = f"kill-{op}-{point}"
    if op != "ingest":
        ingest(graph, [old], name)
    # swap-batch: killed after the first node of the swap moved (one node a batch).
    env = {
        "TRACEGRAPH_KILL_AT": point,
        "TRACEGRAPH_DB": "" if db_uri == "embedded" else db_uri,
        "TRACEGRAPH_NEO4J_RENAME_BATCH": "1",
    }
    args = {
        "ingest": ["ingest", str(new), "--trace", name],
        "replace": ["ingest", str(new), "--trace", name, "--replace"],
        "drop": ["drop", name],
    }[op]
    proc = run_cli(*args, home=tg_home, env=env)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    ops = _ops(graph, name)
    if op == "ingest":
        assert ops == (["a", "b", "c"] if point in NEW_AFTER else None)
    elif op == "replace":
        assert ops == (["a", "b", "c"] if point in NEW_AFTER else ["a", "b"])
    else:
        assert ops == (None if point != "drop-started" else ["a", "b"])
    # A re-ingest under the name works at once (nothing blocks a name) ...
    ingest(graph, [new], name, replace=True)
    assert _ops(graph, name) == ["a", "b", "c"]
    assert trace_nodes(graph, name) == sum(ingest_counts(new)) + 1  # no node twice
    # ... and the dead process's leftovers are gone as soon as the server
    # has noticed that its connection closed (the next command's sweep).
    deadline = time.monotonic() + 60  # loose, so that a busy machine cannot fail it
    while leftovers(graph, name) and time.monotonic() < deadline:
        graph.sweep()
        time.sleep(0.1)
    assert leftovers(graph, name) == []
    assert graph.sweep() == []


def leftovers(graph, name: str) -> list:
    if graph.backend == "neo4j":
        return graph.run("MATCH (n) WHERE n.trace STARTS WITH $p RETURN DISTINCT n.trace", {"p": name + "~"}).rows
    return list(graph._redis.scan_iter(match=f"{graph.prefix}:load:*"))


def _ops(graph, name: str):
    if graph.trace_facts(name) is None:
        return None
    return [r[0] for r in graph.run("MATCH (o:Op {trace: $trace}) RETURN o.name ORDER BY o.name", trace=name).rows]


def ingest_counts(path: Path) -> list[int]:
    from tracegraph.ingest.pipeline import tables_of

    return [t.frame.n for t in tables_of(parse_files([path])).nodes]


def test_every_stored_property_is_declared(graph):
    """Nothing reaches the database that tracegraph/schema.py does not declare."""
    from conftest import EXAMPLES

    from tracegraph import schema

    declared = {t.label: set(t.properties()) | {"trace", "uid"} for t in schema.NODE_TABLES}
    declared["Trace"] = {c.name for c in schema.TRACE_PROPERTIES} | {"trace", "uid"}
    for path in (SEED_STEPSTATS, EXAMPLES / "pytorch-cnn-cpu.pt.trace.json.gz"):
        name = f"declared-{path.name.split('.')[0]}"
        ingest(graph, [path], name)
        rows = graph.run("MATCH (n {trace: $trace}) RETURN DISTINCT labels(n)[0], keys(n)", trace=name).rows
        for label, keys in rows:
            extra = {k for k in keys if not (label == "Trace" and k.startswith("meta_"))} - declared[label]
            assert not extra, (label, extra)
