"""Ad-hoc Cypher may only read, on each engine, from the CLI and over HTTP:
the database itself refuses the write (a read transaction on Neo4j,
GRAPH.RO_QUERY on FalkorDB), the answer is one line, and nothing changes.
Plus the one-line errors for a database that cannot be used."""

from __future__ import annotations

import pytest
from conftest import NEO4J_URI, NO_NEO4J, everything, run_cli
from fastapi.testclient import TestClient

from tracegraph.api.app import create_app
from tracegraph.api.settings import Settings

ATTEMPTS = [
    "CREATE (:Op {trace: $trace, uid: 'op:evil'})",
    "MERGE (x:Op {trace: $trace, uid: 'op:evil'}) RETURN x",
    "MATCH (o:Op {trace: $trace}) SET o.name = 'evil'",
    "MATCH (o:Op {trace: $trace}) DETACH DELETE o",
    "CALL db.createLabel('Evil')",
    "LOAD CSV FROM 'file:///etc/passwd' AS row CREATE (:Op {trace: $trace, uid: row[0]})",
    "LOAD CSV FROM 'file:///etc/passwd' AS row RETURN row",
    "CREATE INDEX FOR (n:Evil) ON (n.x)",
]


@pytest.mark.parametrize("query", ATTEMPTS)
def test_cli_refuses_writes(graph, alexnet, db_uri, tg_home, query):
    before = everything(graph)
    for where in ([], ["--trace", alexnet]):
        proc = run_cli("cypher", query, *where, home=tg_home, db=db_uri)
        assert proc.returncode == 1, (query, proc.stdout, proc.stderr)
        assert proc.stderr.startswith("tracegraph: error: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert everything(graph) == before


def test_http_refuses_writes(graph, alexnet, db_uri):
    before = everything(graph)
    with TestClient(create_app(db_uri, Settings())) as client:
        for query in ATTEMPTS:
            for trace in (None, alexnet):
                r = client.post("/cypher", json={"query": query, "trace": trace})
                assert 400 <= r.status_code < 500, (query, r.text)
                assert "\n" not in r.json()["detail"]
    assert everything(graph) == before


def test_write_needs_write(graph, tmp_path, db_uri, tg_home):
    from stepstats_builder import Op, write

    from tracegraph.ingest.pipeline import ingest

    ingest(graph, [write(tmp_path, [Op("a", "A", 0, 1)])], "writable")
    args = ("cypher", "MATCH (o:Op {trace: $trace}) SET o.note = 'x' RETURN count(o) AS n", "--trace", "writable")
    assert run_cli(*args, home=tg_home, db=db_uri).returncode == 1
    proc = run_cli(*args, "--write", home=tg_home, db=db_uri, check=True)
    assert "properties_set 1" in proc.stderr
    assert graph.run("MATCH (o:Op {trace: $trace}) RETURN o.note", trace="writable").rows == [["x"]]


@pytest.mark.parametrize(
    "uri, words",
    [
        ("bolt://127.0.0.1:1", "cannot reach Neo4j at bolt://127.0.0.1:1"),
        ("neo4j://no-such-host.invalid:7687", "cannot reach Neo4j"),
        ("falkordb://127.0.0.1:1", "cannot reach FalkorDB at 127.0.0.1:1"),
        ("mysql://x", "unsupported --db"),
    ],
)
def test_unusable_database_is_one_line(tmp_path, uri, words):
    proc = run_cli("traces", "--db", uri, home=tmp_path)
    assert proc.returncode == 1 and words in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr


@pytest.mark.parametrize("where", ["before", "after"])
def test_db_option_counts_before_or_after_the_command(tmp_path, where):
    """``tracegraph --db URI traces`` once used the default database: the
    subcommand's default for --db overwrote what came before it."""
    args = ["--db", "falkordb://127.0.0.1:1", "traces"]
    proc = run_cli(*(args if where == "before" else args[2:] + args[:2]), home=tmp_path)
    assert proc.returncode == 1 and "cannot reach FalkorDB at 127.0.0.1:1" in proc.stderr, proc.stderr
    debug = run_cli("--debug", "traces", "--db", "falkordb://127.0.0.1:1", home=tmp_path)
    assert "Traceback" in debug.stderr  # --debug before the command still counts


def test_missing_neo4j_database_is_one_line(tmp_path):
    if not NEO4J_URI:
        pytest.skip(NO_NEO4J)
    proc = run_cli("traces", "--db", NEO4J_URI.rstrip("/") + "/nosuchdb", home=tmp_path)
    assert proc.returncode == 1 and "has no database 'nosuchdb'" in proc.stderr and proc.stderr.count("\n") == 1


def test_neo4j_logs_stay_quiet(tmp_path):
    """No driver warnings or notifications on stderr, with or without --debug."""
    if not NEO4J_URI:
        pytest.skip(NO_NEO4J)
    # A property that exists nowhere makes Neo4j send a notification.
    query = "MATCH (t:Trace) WHERE t.no_such_property_anywhere = 1 RETURN count(t)"
    plain = run_cli("cypher", query, "--db", NEO4J_URI, home=tmp_path, check=True)
    assert plain.stderr == ""
    debug = run_cli("cypher", query, "--db", NEO4J_URI, "--debug", home=tmp_path, check=True)
    assert "no_such_property_anywhere" not in debug.stderr and "notification" not in debug.stderr.lower()
