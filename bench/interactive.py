"""What a person at a terminal or a notebook feels: CLI calls in a row, and
how exactly ``POST /cypher`` keeps its time limit.

    python -m bench.interactive [--db bolt://127.0.0.1:7687] [--calls 5]

1. ``tracegraph query top-ops --trace alexnet`` on a database holding the
   bundled traces (what ``tracegraph demo`` ingests), ``--calls`` times in a row, each a new process, process start included:
   with ``TRACEGRAPH_IDLE_S=0`` (each call starts the embedded server and
   stops it: tracegraph 0.1's behaviour) and with the default idle time
   (the first call starts it, the next ones find it up). Embedded only.
2. ``POST /cypher`` with a 1,000 ms limit on statements that would run for
   many seconds (rows streaming out, or a long computation): the wall time
   of the answer, on the embedded FalkorDB and (with ``--db``) Neo4j.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SLOW = {
    "rows streaming out": "UNWIND range(1, 100000000) AS i RETURN i",
    "a long computation": "UNWIND range(1, 100000000) AS i WITH i WHERE i % 7 = 123 RETURN count(*)",
}


def cli_calls(home: Path, calls: int, idle: str | None) -> list[float]:
    env = dict(os.environ, TRACEGRAPH_HOME=str(home))
    env.pop("TRACEGRAPH_DB", None)
    if idle is not None:
        env["TRACEGRAPH_IDLE_S"] = idle
    else:
        env.pop("TRACEGRAPH_IDLE_S", None)
    walls = []
    for _ in range(calls):
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "tracegraph.cli", "query", "top-ops", "--trace", "alexnet"],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        walls.append(time.perf_counter() - t0)
    return walls


def stop_server(home: Path) -> None:
    env = dict(os.environ, TRACEGRAPH_HOME=str(home), TRACEGRAPH_IDLE_S="0")
    env.pop("TRACEGRAPH_DB", None)
    subprocess.run(
        [sys.executable, "-c", "from tracegraph.db.connect import open_graph; open_graph().close()"],
        env=env,
        check=True,
    )


def cypher_timeouts(db: str) -> dict[str, float]:
    from fastapi.testclient import TestClient

    from tracegraph.api.app import create_app
    from tracegraph.api.settings import Settings

    out = {}
    with TestClient(create_app(db, Settings(cypher_timeout_ms=1000))) as client:
        for what, query in SLOW.items():
            t0 = time.perf_counter()
            r = client.post("/cypher", json={"query": query})
            out[what] = time.perf_counter() - t0
            assert r.status_code == 400 and "timed out" in r.json()["detail"], r.text
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--db", help="a Neo4j URI to measure /cypher on as well")
    p.add_argument("--calls", type=int, default=5)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        env = dict(os.environ, TRACEGRAPH_HOME=str(home), TRACEGRAPH_IDLE_S="0")
        env.pop("TRACEGRAPH_DB", None)
        subprocess.run(  # the bundled traces, as after the README's first command
            [sys.executable, "-m", "tracegraph.cli", "demo"],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        before = cli_calls(home, args.calls, "0")
        after = cli_calls(home, args.calls, None)
        stop_server(home)
        print(f"tracegraph query top-ops --trace alexnet, {args.calls} calls in a row (process start included):")
        print(
            "  TRACEGRAPH_IDLE_S=0 (each call starts the server): "
            + ", ".join(f"{w:.2f}" for w in before)
            + f" s; median {statistics.median(before):.2f} s"
        )
        print(
            f"  default idle time:  first {after[0]:.2f} s, then "
            + ", ".join(f"{w:.2f}" for w in after[1:])
            + f" s; median of the later ones "
            f"{statistics.median(after[1:]):.2f} s"
        )
        os.environ["TRACEGRAPH_HOME"] = str(home)
        os.environ["TRACEGRAPH_IDLE_S"] = "0"
        for db in ["embedded", *([args.db] if args.db else [])]:
            for what, wall in cypher_timeouts(db).items():
                print(
                    f"POST /cypher, limit 1,000 ms, {what} ({db}): answered 400 timed out after {wall * 1000:,.0f} ms"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
