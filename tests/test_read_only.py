"""Ad-hoc Cypher may only read, on each engine, from the CLI and over HTTP:
the database itself refuses the write (a read transaction on Neo4j,
GRAPH.RO_QUERY on FalkorDB), the answer is one line, and nothing changes.
Plus the one-line errors for a database that cannot be used."""

from __future__ import annotations

import pytest
from conftest import NEO4J_URI, NO_NEO4J, cli_here, everything, run_cli
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
def test_cli_refuses_writes(graph, alexnet, db_uri, query):
    """What the CLI answers (called in this process: a real process's
    stderr is test_neo4j_logs_stay_quiet's and test_write_needs_write's)."""
    before = everything(graph)
    for where in ([], ["--trace", alexnet]):
        proc = cli_here("cypher", query, *where, db=db_uri)
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


@pytest.fixture(scope="module")
def neo4j_with_auth(tmp_path_factory):
    """A second Neo4j with authentication on, made from the server that
    ../shared/neo4j-local assembled (its jars and scripts, a fresh data
    directory, a free port), started for this module and killed after it
    (its data directory is thrown away: nothing to shut down cleanly; a
    clean stop takes Neo4j ten seconds). Skipped without an assembled
    server."""
    import os
    import re
    import shutil
    import socket
    import subprocess
    from pathlib import Path

    source = Path(os.environ.get("TRACEGRAPH_NEO4J_HOME", Path.home() / ".cache" / "tracegraph-neo4j"))
    if not all((source / f).is_file() for f in ("start.sh", "stop.sh", "conf/neo4j.conf")) or not shutil.which("java"):
        pytest.skip(f"no Neo4j assembled by ../shared/neo4j-local at {source} (or no java)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    home = tmp_path_factory.mktemp("neo4j-auth")
    for d in ("conf", "data", "logs", "run", "import"):
        (home / d).mkdir()
    for d in ("lib", "plugins", "licenses"):
        (home / d).symlink_to(source / d)
    for xml in (source / "conf").glob("*.xml"):
        shutil.copy(xml, home / "conf")

    def rewrite(name: str, settings: dict[str, str], more: dict[str, str] | None = None) -> None:
        text = (source / name).read_text().replace(str(source), str(home))
        for old, new in (more or {}).items():
            text = text.replace(old, new)
        for key, value in settings.items():
            text = re.sub(rf"^{re.escape(key)}=.*$", f"{key}={value}", text, flags=re.M)
        (home / name).write_text(text)

    address = f"127.0.0.1:{port}"
    rewrite(
        "conf/neo4j.conf",
        {
            "dbms.security.auth_enabled": "true",
            "server.bolt.listen_address": address,
            "server.bolt.advertised_address": address,
            "server.memory.heap.initial_size": "512m",
            "server.memory.heap.max_size": "512m",
            "server.memory.pagecache.size": "64m",
        },
    )
    # The JIT's first tier only: half the CPU to start (a few queries run here).
    rewrite(
        "start.sh", {"BOLT_PORT": str(port), "HEAP": "512m"}, {"-XX:+UseG1GC": "-XX:+UseG1GC -XX:TieredStopAtLevel=1"}
    )
    rewrite("stop.sh", {})
    try:
        started = subprocess.run(["bash", str(home / "start.sh")], capture_output=True, text=True, timeout=300)
        if started.returncode:
            pytest.fail(f"the authenticated Neo4j did not start: {started.stderr[-500:]}")
        yield f"bolt://{address}"
    finally:
        _kill_neo4j(home)


def _kill_neo4j(home) -> None:
    """SIGKILL the server that start.sh recorded in ``home``, and wait for it to go."""
    import os
    import signal
    import time
    from pathlib import Path

    try:
        pid = int((home / "run" / "neo4j.pid").read_text())
        os.kill(pid, signal.SIGKILL)
    except (OSError, ValueError):
        return  # it never started, or is gone
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
            if "State:\tZ" in Path(f"/proc/{pid}/status").read_text():
                return  # dead, not yet reaped
        except (ProcessLookupError, FileNotFoundError):
            return
        time.sleep(0.1)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["uri", "environment"])
def test_wrong_neo4j_credentials_are_one_line(tmp_path, neo4j_with_auth, how):
    """A live server with authentication on refuses wrong credentials."""
    if how == "uri":
        uri = neo4j_with_auth.replace("bolt://", "bolt://someone:wrong@")
        proc = run_cli("traces", "--db", uri, home=tmp_path)
    else:
        proc = run_cli(
            "traces",
            "--db",
            neo4j_with_auth,
            home=tmp_path,
            env={"NEO4J_USER": "neo4j", "NEO4J_PASSWORD": "not-the-password"},
        )
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    assert "refused the credentials" in proc.stderr and "NEO4J_PASSWORD" in proc.stderr
