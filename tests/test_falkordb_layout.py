"""The embedded FalkorDB's layout keeps data safe where FalkorDB 4.16 does not.

FalkorDB 4.16.3 corrupts a graph that had nodes deleted once it has grown
past 16,384 node ids (tests/falkordb_slot_repro.py shows it without
tracegraph). tracegraph never deletes a node: every trace is a graph of
its own, replaced by RENAME and dropped whole. These tests run replace and
drop cycles on traces past that size, with AOF rewrites and server
restarts between them, and demand the same answers every time; they kill
the server in the middle of a load; and they check that a database in the
old one-graph layout is refused with a message saying what to do.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from conftest import SEED_STEPSTATS, run_cli

from tracegraph.queries.catalog import catalog
from tracegraph.queries.run import run_analysis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import generate  # noqa: E402

NOW = {"TRACEGRAPH_IDLE_S": "0"}  # every CLI call stops the server it started: a restart each time


def answers(trace: str) -> dict:
    """Every analysis on ``trace``, with parameters taken from the trace."""
    from tracegraph.db.connect import open_graph

    g = open_graph()
    try:
        cp = run_analysis(g, "critical-path", trace).rows
        peak = run_analysis(g, "peak-memory", trace).rows
        out = {}
        for name, a in catalog().items():
            params = {}
            for p in a.params:
                if p.name == "op":
                    params["op"] = cp[len(cp) // 2][1]
                elif p.name == "base":
                    params["base"] = trace
                elif p.name == "at_us":
                    params["at_us"] = peak[0][2]
            res = run_analysis(g, name, trace, params)
            out[name] = (res.columns, _plain(res.rows), res.note)
        return out
    finally:
        g.close()


def _plain(rows: list) -> list:
    """Graph values without their engine ids (which a reload may change)."""

    def strip(v):
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items() if k not in ("id", "start", "end")}
        if isinstance(v, list):
            return [strip(x) for x in v]
        return v

    return strip(rows)


def settled(r: redis.Redis) -> dict:
    """The server's persistence facts once no log rewrite is under way."""
    from tracegraph.db.embedded import rewriting

    while rewriting(r):
        time.sleep(0.05)
    return r.info("persistence")


def rewrite_and_restart(home: Path) -> None:
    """Rewrite the append-only file as an RDB snapshot, then stop the server
    (the next use starts it from that snapshot)."""
    from tracegraph.db.embedded import EmbeddedServer

    server = EmbeddedServer(home)
    sock = server.acquire()
    try:
        r = redis.Redis(unix_socket_path=sock)
        r.bgrewriteaof()
        settled(r)
    finally:
        server.release()  # TRACEGRAPH_IDLE_S=0: the server stops now


@pytest.mark.slow
def test_replace_and_drop_cycles_past_16384_nodes_keep_every_answer(tmp_path, monkeypatch):
    """Every write through the service as the CLI makes it (store, drop),
    each followed by an AOF rewrite and a server restart: the big trace is
    read once and stored five times (a process per store would only read it
    again)."""
    from tracegraph.db.connect import open_graph
    from tracegraph.queries.ingest import prepare, store
    from tracegraph.queries.traces import drop_trace, list_traces

    home = tmp_path / "home"
    monkeypatch.setenv("TRACEGRAPH_HOME", str(home))
    monkeypatch.setenv("TRACEGRAPH_IDLE_S", "0")  # the server stops with its last user: a restart each time
    files = generate.write(generate.generate(4000, seed=3), tmp_path)  # ~17.5k nodes
    big = prepare([files["binary"]], "big")

    def write(fn):
        g = open_graph()
        try:
            return fn(g)
        finally:
            g.close()

    write(lambda g: store(g, big))
    assert big.tables.trace_props["node_count"] > 16_384
    write(lambda g: store(g, prepare([SEED_STEPSTATS], "untouched")))
    want = {t: answers(t) for t in ("big", "untouched")}
    for cycle in range(2):  # the second one on a database that went through the first
        write(lambda g: store(g, big, replace=True))
        rewrite_and_restart(home)
        assert {t: answers(t) for t in ("big", "untouched")} == want, f"cycle {cycle}: after replace"
        write(lambda g: drop_trace(g, "big"))
        rewrite_and_restart(home)
        assert answers("untouched") == want["untouched"], f"cycle {cycle}: after drop"
        assert [t.trace for t in write(list_traces)] == ["untouched"]
        write(lambda g: store(g, big))
        rewrite_and_restart(home)
        assert {t: answers(t) for t in ("big", "untouched")} == want, f"cycle {cycle}: after re-ingest"
    log = (home / "falkordb" / "server.log").read_text(errors="replace")
    assert "crashed by the signal" not in log and "BUG REPORT" not in log


@pytest.mark.slow
@pytest.mark.parametrize(
    "loader",
    [
        {"TRACEGRAPH_FALKORDB_LOADER": "cypher", "TRACEGRAPH_BATCH_ROWS": "10"},
        {"TRACEGRAPH_BULK_BLOB_ROWS": "10", "TRACEGRAPH_BULK_CALL_BYTES": "1"},
    ],
    ids=["statements", "bulk"],
)
def test_server_killed_in_the_middle_of_a_load(tmp_path, monkeypatch, loader):
    """kill -9 of the database server while a load writes: the ingest fails
    with one line, the next command finds the database as it was (the
    partial load found and removed), and the trace can be ingested.

    The load writes in batches of 10 rows (thousands of them), by either
    loader (Cypher statements, or bulk insert calls); once it has
    begun, the CLI is paused (SIGSTOP) so that the kill lands in the middle
    of it however fast or busy the machine is, then resumed."""
    home = tmp_path / "home"
    monkeypatch.setenv("TRACEGRAPH_HOME", str(home))
    run_cli("ingest", str(SEED_STEPSTATS), "--trace", "kept", home=home, check=True)
    files = generate.write(generate.generate(2000, seed=5), tmp_path)
    env = dict(os.environ, TRACEGRAPH_HOME=str(home), TRACEGRAPH_IDLE_S="60", **loader)
    env.pop("TRACEGRAPH_DB", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracegraph.cli", "ingest", str(files["binary"]), "--trace", "big"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    sock = str(home / "falkordb" / "server.sock")

    def loading() -> bool:
        try:
            return bool(list(redis.Redis(unix_socket_path=sock).scan_iter(match="tracegraph:load:*")))
        except redis.RedisError:
            return False

    try:
        deadline = time.monotonic() + 300
        while not loading():
            if proc.poll() is not None or time.monotonic() > deadline:
                out, err = proc.communicate()
                pytest.fail(f"the load never started (exit {proc.returncode}): {err or out}")
            time.sleep(0.005)
        proc.send_signal(signal.SIGSTOP)
        assert loading(), "the load ended before the CLI was paused"
        os.kill(int((home / "falkordb" / "server.pid").read_text()), signal.SIGKILL)
    finally:
        proc.send_signal(signal.SIGCONT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 1 and err.startswith("tracegraph: error: ") and err.count("\n") == 1, err
    listed = run_cli("traces", "--format", "csv", home=home, check=True).stdout
    assert [line.split(",")[0] for line in listed.splitlines()[1:]] == ["kept"]
    from tracegraph.db.connect import open_graph

    g = open_graph()
    try:
        g.sweep()
        assert list(g._redis.scan_iter(match="tracegraph:load:*")) == []
    finally:
        g.close()
    run_cli("ingest", str(files["binary"]), "--trace", "big", home=home, check=True)


def test_old_one_graph_layout_is_refused_with_what_to_do(tmp_path):
    """A data directory written by tracegraph 0.1 (every trace in the graph
    ``tracegraph``, no layout key) is refused by every command, in one line."""
    from tracegraph.db.embedded import EmbeddedServer

    home = tmp_path / "home"
    server = EmbeddedServer(home)
    sock = server.acquire()
    try:
        redis.Redis(unix_socket_path=sock).execute_command(
            "GRAPH.QUERY",
            "tracegraph",
            "CREATE (:Trace {trace: 'old', uid: 'trace', status: 'ready'}), (:Op {trace: 'old', uid: 'op:a'})",
        )
    finally:
        server.release()
    for args in (["traces"], ["query", "top-ops", "--trace", "old"], ["ingest", str(SEED_STEPSTATS)]):
        proc = run_cli(*args, home=home)
        assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
        assert "layout of tracegraph 0.1" in proc.stderr and "move the data directory away" in proc.stderr


def test_processes_opening_a_new_database_at_once_all_succeed(tmp_path):
    """Claiming an empty database (catalog indexes + layout key) is one
    step: a process that opens it meanwhile never sees a catalog without a
    layout key and takes it for tracegraph 0.1's (CI saw that once)."""
    import threading

    from tracegraph.db.embedded import EmbeddedServer
    from tracegraph.db.falkor import FalkorGraph
    from tracegraph.db.falkor_layout import LAYOUT

    server = EmbeddedServer(tmp_path / "home")
    sock = server.acquire()
    try:
        for round_ in range(10):
            prefix = f"race{round_}"
            start = threading.Barrier(8)
            errors: list[BaseException] = []

            def open_it(prefix=prefix, start=start, errors=errors) -> None:
                start.wait()
                try:
                    FalkorGraph(unix_socket=sock, prefix=prefix, backend="embedded").close()
                except Exception as e:  # collected and asserted below
                    errors.append(e)

            threads = [threading.Thread(target=open_it) for _ in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert errors == []
            r = redis.Redis(unix_socket_path=sock)
            assert r.get(f"{prefix}:layout") == LAYOUT.encode()
            indexed = r.execute_command(
                "GRAPH.QUERY", prefix, "CALL db.indexes() YIELD label RETURN label ORDER BY label"
            )
            assert [row[0] for row in indexed[1]] == [b"OpTotals", b"Trace"]
    finally:
        server.release()


def test_falkordb_keeps_track_of_every_graph_through_drops_replaces_and_sweeps(tmp_path, monkeypatch):
    """FalkorDB 4.16 lists the graphs it holds (GRAPH.LIST; its AOF rewrite
    walks the same list). Removing a graph with UNLINK takes a second, live
    graph off that list, and in CI the list's length wrapped and crashed the
    server. After every way tracegraph removes a graph (drop, replace, a
    failed load, a sweep of an abandoned load), the list must still name
    exactly the graphs in the keyspace."""
    from tracegraph.db.connect import open_graph
    from tracegraph.errors import Conflict
    from tracegraph.ingest.pipeline import ingest

    monkeypatch.setenv("TRACEGRAPH_HOME", str(tmp_path / "home"))
    g = open_graph("embedded")
    r = g._redis

    def listed() -> tuple[list, list]:
        graphs = sorted(k for k in r.scan_iter(match="*") if r.type(k) == "graphdata")
        return sorted(r.execute_command("GRAPH.LIST")), graphs

    def graphs_of(*traces: str) -> list[str]:
        return sorted(["tracegraph", *(f"tracegraph:trace:{t}" for t in traces)])

    try:
        for name in ("a", "b", "c", "d", "e"):
            ingest(g, [SEED_STEPSTATS], name)

        def abandon_a_load_and_sweep() -> None:
            r.execute_command("GRAPH.QUERY", g._load_key("abandoned"), "CREATE (:Trace)")
            assert g.sweep() == [g._load_key("abandoned")]

        def load_refused_at_publishing() -> None:
            with pytest.raises(Conflict):
                ingest(g, [SEED_STEPSTATS], "a")

        steps = [
            ("drop", lambda: g.drop_trace("b"), "acde"),
            ("replace", lambda: ingest(g, [SEED_STEPSTATS], "c", replace=True), "acde"),
            ("refused load", load_refused_at_publishing, "acde"),
            ("sweep", abandon_a_load_and_sweep, "acde"),
            ("second drop", lambda: g.drop_trace("e"), "acd"),
        ]
        for what, do, left in steps:
            do()
            time.sleep(0.1)  # (a lazily freed graph would leave the list a moment later)
            assert listed() == (graphs_of(*left), graphs_of(*left)), f"after the {what}"
    finally:
        g.close()


def test_a_crashed_server_is_named_with_its_report(tmp_path, monkeypatch):
    """When the embedded server dies of a signal (Redis then writes a crash
    report to its log), the error says so and where the report is; a
    connection lost without a crash does not claim one."""
    from tracegraph.db.connect import open_graph
    from tracegraph.errors import DatabaseError

    monkeypatch.setenv("TRACEGRAPH_HOME", str(tmp_path / "home"))
    log = tmp_path / "home" / "falkordb" / "server.log"
    for sig, crashed in ((signal.SIGKILL, False), (signal.SIGSEGV, True)):
        g = open_graph("embedded")
        try:
            pid = int((tmp_path / "home" / "falkordb" / "server.pid").read_text())
            os.kill(pid, sig)
            probe = redis.Redis(unix_socket_path=str(log.parent / "server.sock"), retry=None)
            for _ in range(600):  # until it no longer answers (the report is written before it exits)
                try:
                    probe.ping()
                except redis.ConnectionError:
                    break
                time.sleep(0.05)
            with pytest.raises(DatabaseError) as err:
                g.list_traces()
            message = str(err.value)
            assert message.startswith("lost connection to FalkorDB at the embedded database in ")
            assert ("the server crashed" in message) is crashed and (str(log) in message) is crashed
        finally:
            g.close()


def test_bulk_loads_rewrite_the_log_once_they_have_appended_what_it_holds(tmp_path, monkeypatch):
    """The append-only file is rewritten after a bulk load only once the
    loads since the last rewrite appended at least what that rewrite wrote
    (and AOF_COMPACT_BULK_BYTES, set to 1 byte here): a rewrite writes out
    every stored trace, so rewriting after every load would cost, over a
    database's life, the square of what it stores. Six loads of one trace:
    the rule, worked out from the sizes the server reports, decides each
    time, and it rewrites some and not others (every load would rewrite
    before the rule, with the same 1-byte threshold)."""
    from tracegraph.db import embedded, falkor
    from tracegraph.db.connect import open_graph
    from tracegraph.ingest.pipeline import ingest

    monkeypatch.setenv("TRACEGRAPH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TRACEGRAPH_IDLE_S", "0")
    monkeypatch.setattr(falkor, "AOF_COMPACT_BULK_BYTES", 1)
    monkeypatch.setattr(falkor, "AOF_COMPACT_BYTES", 1)
    seen: list[dict] = []  # the log's sizes when each load decides
    decide = embedded.rewrite_log

    def seeing(conn, least, *, relative):
        seen.append(conn.info("persistence"))
        return decide(conn, least, relative=relative)

    monkeypatch.setattr(embedded, "rewrite_log", seeing)
    g = open_graph("embedded")
    r = g._redis

    try:
        expected, rewrote = [], []
        for name in "abcdef":
            base = settled(r)["aof_base_size"]
            ingest(g, [ROOT / "tests" / "data" / "hta" / "alexnet.json.gz"], name)
            assert seen[-1]["aof_base_size"] == base
            expected.append(seen[-1]["aof_current_size"] - base >= max(1, base))
            after = settled(r)
            rewrote.append(after["aof_base_size"] != base)
        assert rewrote == expected
        assert 2 <= sum(rewrote) < len(rewrote)
        assert rewrote[0]  # the first load into an empty log: everything appended is new
    finally:
        g.close()


def test_an_unused_servers_reaper_rewrites_the_log(tmp_path, monkeypatch):
    """A bulk load leaves the rewrite of the append-only file (whose fork
    stalls the server: 2.4 s at 2.6 GB on these machines) to the reaper:
    a moment after the last user has left, with the server still up for
    its idle time, the log is a snapshot, and the trace is read back."""
    from tracegraph.db.connect import open_graph
    from tracegraph.db.embedded import EmbeddedServer
    from tracegraph.ingest.pipeline import ingest

    home = tmp_path / "home"
    monkeypatch.setenv("TRACEGRAPH_HOME", str(home))
    monkeypatch.setenv("TRACEGRAPH_IDLE_S", "120")
    monkeypatch.setenv("TRACEGRAPH_IDLE_REWRITE_BYTES", "1")  # (read by the reaper, a process of its own)
    g = open_graph("embedded")
    server = EmbeddedServer(home)
    try:
        ingest(g, [ROOT / "tests" / "data" / "hta" / "alexnet.json.gz"], "a")
        info = g._redis.info("persistence")
        assert info["aof_base_size"] == 0 and info["aof_current_size"] > 0  # the load rewrote nothing itself
        g.close()
        r = redis.Redis(unix_socket_path=str(server.socket))  # (a connection, not a user of the server)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and r.info("persistence")["aof_base_size"] == 0:
            time.sleep(0.1)
        info = r.info("persistence")
        assert info["aof_base_size"] > 0 and info["aof_current_size"] == info["aof_base_size"]
        r.close()
        g = open_graph("embedded")
        assert g.run("MATCH (t:Trace {trace: 'a', uid: 'trace'}) RETURN t.status", trace="a").rows == [["ready"]]
    finally:
        g.close()
        server.stop()
