"""tracegraph against Holistic Trace Analysis on the same PyTorch traces.

Two halves, because HTA is a bench-only dependency that must not share
tracegraph's environment (it pins its own pandas and networkx):

* ``python -m bench.hta_compare hta TRACE...`` runs in a virtualenv with
  ``HolisticTraceAnalysis`` (``pip install HolisticTraceAnalysis ijson
  'pandas<3'``; HTA 0.5.0 breaks on pandas 3) and prints JSON: per trace
  the seconds for HTA's load (``TraceAnalysis``), kernel breakdown and
  critical path, the kernel totals per name, per-stream busy time and the
  critical path length. HTA runs with ``HTA_DISABLE_NS_ROUNDING=1`` (else it
  rounds fractional timestamps to whole us: starts up, ends down) and
  ``include_last_profiler_step=True`` (else it drops the last profiler
  step), and its critical path over the whole trace (``annotation=""``);
* ``python -m bench.hta_compare tracegraph TRACE...`` (tracegraph's venv)
  does the same with tracegraph: ingest into a private embedded database,
  then the same three answers from the catalog (``observed-critical-path``'s
  length from the Trace node, ``stream-utilization``, kernel totals by a
  Cypher sum);
* ``python -m bench.hta_compare report HTA.json TG.json`` prints the
  side-by-side tables that bench/RESULTS.md holds.

``hta-job FILES --out`` / ``tracegraph-job FILES --out`` do the same for
a job's rank files at once (HTA's load of the directory, kernel breakdown
and comm/comp overlap; tracegraph's ingest as one trace,
``comm-compute-overlap`` and its job analyses), with peak memory.

``python -m bench.hta_compare big OUT.json.gz --mb 100`` writes a large
trace by replicating the events of a real one (HTA's alexnet test trace by
default) shifted in time, one copy after the other, with fresh correlation
ids, so that both tools read a realistic trace of the asked size.

``python -m bench.hta_compare job OUTDIR --ranks 64 --mb 16 [SRC...]``
writes a job of ``--ranks`` rank files the same way: each source rank file
(PARAM's 8-rank DLRM job by default) replicated to ``--mb`` MB as ``big``
does, then copied until there are ``--ranks`` files, copy ``k`` of source
``r`` being rank ``k * len(SRC) + r`` of ``world_size`` ``--ranks`` (its
``distributedInfo`` rewritten; the events unchanged: the DLRM kernels name
no process group, so every rank is one group, the default one). Copies of
one source are the same ranks' work on other hosts: same timestamps, same
device ids. ``report-job HTA.json TG.json...`` prints the jobs side by side.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SYNC_RECORDS = {"Stream Wait Event", "Stream Sync", "Context Sync", "Event Sync"}


# --- HTA side --------------------------------------------------------------------------------------


def run_hta(paths: list[str]) -> dict:
    os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
    os.environ["CRITICAL_PATH_ADD_ZERO_WEIGHT_LAUNCH_EDGE"] = "1"
    import logging

    logging.disable(logging.WARNING)
    import warnings

    warnings.filterwarnings("ignore")
    from hta.trace_analysis import TraceAnalysis
    from hta.utils.utils import merge_kernel_intervals

    out = {}
    for p in paths:
        d = tempfile.mkdtemp()
        os.symlink(os.path.abspath(p), os.path.join(d, os.path.basename(p)))
        t0 = time.perf_counter()
        ta = TraceAnalysis(trace_dir=d, include_last_profiler_step=True)
        t1 = time.perf_counter()
        _, kernels = ta.get_gpu_kernel_breakdown(
            visualize=False, num_kernels=10**9, duration_ratio=1.0, include_memory_kernels=True
        )
        t2 = time.perf_counter()
        rank = ta.t.get_ranks()[0]
        g, ok = ta.critical_path_analysis(rank=rank, annotation="", instance_id=None)
        length = float(sum(g.edges[u, v]["weight"] for u, v in zip(g.critical_path_nodes, g.critical_path_nodes[1:])))
        t3 = time.perf_counter()
        df = ta.t.get_trace(rank)
        sym = ta.t.symbol_table.get_sym_table()
        gpu = df[
            df["stream"].ne(-1) & df["cat"].map(lambda c, sym=sym: sym[c] in ("kernel", "gpu_memcpy", "gpu_memset"))
        ]
        busy = {}
        for s, part in gpu.groupby("stream"):
            m = merge_kernel_intervals(part[["ts", "dur"]].copy())
            busy[f"stream:{s}"] = float((m["end"] - m["ts"]).sum())
        out[p] = {
            "load_s": t1 - t0,
            "kernel_breakdown_s": t2 - t1,
            "critical_path_s": t3 - t2,
            "kernels": {r["name"]: float(r["sum (us)"]) for _, r in kernels.iterrows()},
            "stream_busy_us": busy,
            "critical_path_us": length,
            "critical_path_ok": bool(ok),
            "peak_mb": _peak_mb(),  # so far in this process: the traces run in the order given
        }
        print(f"hta {p}: load {t1 - t0:.2f} s, kernels {t2 - t1:.2f} s, critical path {t3 - t2:.2f} s", file=sys.stderr)
    return out


# --- tracegraph side ------------------------------------------------------------------------------


@contextlib.contextmanager
def scratch_home(prefix: str) -> Iterator[str]:
    """A private embedded database for one run, gone afterwards: its server
    stops when the run closes its graph (no idle time), and its directory
    (a gigabyte or more for a 64-rank job) is removed."""
    home = tempfile.mkdtemp(prefix=prefix)
    os.environ.update(TRACEGRAPH_HOME=home, TRACEGRAPH_IDLE_S="0")
    os.environ.pop("TRACEGRAPH_DB", None)
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


def run_tracegraph(paths: list[str]) -> dict:
    with scratch_home("tg-hta-") as home:
        return _run_tracegraph(paths, home)


def _run_tracegraph(paths: list[str], home: str) -> dict:
    from tracegraph.db.connect import open_graph
    from tracegraph.ingest.pipeline import ingest
    from tracegraph.queries.run import run_analysis

    out = {}
    graph = open_graph()
    try:
        for i, p in enumerate(paths):
            name = f"t{i}"
            t0 = time.perf_counter()
            report = ingest(graph, [Path(p)], name)
            t1 = time.perf_counter()
            kernels = dict(
                graph.run("MATCH (k:Kernel {trace: $t}) RETURN k.name, sum(k.dur_us)", {"t": name}, trace=name).rows
            )
            util = run_analysis(graph, "stream-utilization", name, {})
            t2 = time.perf_counter()
            # HTA's answer is the path's graph and length; tracegraph's is the
            # length and where the path's time went (the summary) ...
            run_analysis(graph, "observed-critical-path-summary", name, {})
            length = graph.run(
                "MATCH (t:Trace {trace: $t, uid: 'trace'}) RETURN t.observed_path_us", {"t": name}, trace=name
            ).rows[0][0]
            t3 = time.perf_counter()
            # The peaks of the same answers as HTA's (taken before the rows below: so far in
            # this process, the traces run in the order given) ...
            peak, server_peak = _peak_mb(), _server_peak_mb(home)
            # ... and, timed apart, every segment of the path as a row (HTA has no such answer).
            segments = len(run_analysis(graph, "observed-critical-path", name, {}).rows)
            t4 = time.perf_counter()
            cols = util.columns
            busy = {r[cols.index("stream")]: r[cols.index("busy_us")] for r in util.rows}
            out[p] = {
                "ingest_s": t1 - t0,
                "timings": report.timings,
                "kernel_breakdown_s": t2 - t1,
                "critical_path_s": t3 - t2,
                "path_rows_s": t4 - t3,
                "path_segments": segments,
                "kernels": kernels,
                "stream_busy_us": busy,
                "critical_path_us": length,
                "peak_mb": peak,
                "worker_peak_mb": _peak_mb(children=True),
                "server_peak_mb": server_peak,
                "path_rows_peak_mb": _peak_mb(),
                "path_rows_server_peak_mb": _server_peak_mb(home),
            }
            print(
                f"tracegraph {p}: ingest {t1 - t0:.2f} s ({', '.join(f'{k} {v:.2f}' for k, v in report.timings.items())}),"
                f" kernels+streams {t2 - t1:.2f} s, path summary {t3 - t2:.2f} s, path rows {t4 - t3:.2f} s",
                file=sys.stderr,
            )
    finally:
        graph.close()
    return out


# --- a job of several rank files --------------------------------------------------------------------


def _peak_mb(children: bool = False) -> float:
    """This process's peak memory, or with ``children`` the largest of its
    ended child processes' (tracegraph's parse workers)."""
    import resource

    return resource.getrusage(resource.RUSAGE_CHILDREN if children else resource.RUSAGE_SELF).ru_maxrss / 1024


def _server_peak_mb(home: str) -> float:
    """The peak memory of tracegraph's embedded database server under ``home``."""
    pid = int((Path(home) / "falkordb" / "server.pid").read_text())
    return next(
        int(line.split()[1]) / 1024
        for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        if line.startswith("VmHWM")
    )


def run_hta_job(paths: list[str]) -> dict:
    """HTA on a job's rank files at once: its load of the trace directory,
    kernel breakdown and comm/comp overlap per rank; seconds and the
    process's peak memory."""
    os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
    import logging
    import warnings

    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")
    from hta.trace_analysis import TraceAnalysis

    d = tempfile.mkdtemp()
    for p in paths:
        os.symlink(os.path.abspath(p), os.path.join(d, os.path.basename(p)))
    t0 = time.perf_counter()
    ta = TraceAnalysis(trace_dir=d, include_last_profiler_step=True)
    t1 = time.perf_counter()
    ta.get_gpu_kernel_breakdown(visualize=False, num_kernels=10**9, duration_ratio=1.0, include_memory_kernels=True)
    t2 = time.perf_counter()
    overlap = ta.get_comm_comp_overlap(visualize=False)
    t3 = time.perf_counter()
    shares = {int(r["rank"]): float(r["comp_comm_overlap_pctg"]) / 100 for _, r in overlap.iterrows()}
    out = {
        "load_s": t1 - t0,
        "kernel_breakdown_s": t2 - t1,
        "overlap_s": t3 - t2,
        "overlap_share": shares,
        "peak_mb": _peak_mb(),
        "worker_peak_mb": _peak_mb(children=True),  # HTA's parse workers, the largest
    }
    print(f"hta job: load {t1 - t0:.2f} s, kernels {t2 - t1:.2f} s, overlap {t3 - t2:.2f} s", file=sys.stderr)
    return out


def run_tracegraph_job(paths: list[str]) -> dict:
    """tracegraph on a job's rank files as one trace (embedded FalkorDB):
    the ingest, kernel totals, comm-compute-overlap and the job analyses
    HTA has no counterpart of; seconds, this process's peak memory and the
    database server's."""
    with scratch_home("tg-hta-job-") as home:
        return _run_tracegraph_job(paths, home)


def _run_tracegraph_job(paths: list[str], home: str) -> dict:
    from tracegraph.db.connect import open_graph
    from tracegraph.ingest.pipeline import ingest
    from tracegraph.queries.run import run_analysis

    graph = open_graph()
    try:
        t0 = time.perf_counter()
        report = ingest(graph, [Path(p) for p in paths], "job")
        t1 = time.perf_counter()
        graph.run("MATCH (k:Kernel {trace: 'job'}) RETURN k.name, sum(k.dur_us)", trace="job")
        t2 = time.perf_counter()
        overlap = run_analysis(graph, "comm-compute-overlap", "job", {})
        t3 = time.perf_counter()
        for name in ("stragglers", "straggler-ranks", "idle-breakdown", "job-critical-path"):
            run_analysis(graph, name, "job", {})
        t4 = time.perf_counter()
        cols = overlap.columns
        shares = {
            r[cols.index("rank")]: (
                r[cols.index("overlap_us")] / r[cols.index("comm_us")] if r[cols.index("comm_us")] else None
            )
            for r in overlap.rows
        }
        server_mb = _server_peak_mb(home)
    finally:
        graph.close()
    out = {
        "ingest_s": t1 - t0,
        "timings": report.timings,
        "kernel_breakdown_s": t2 - t1,
        "overlap_s": t3 - t2,
        "job_analyses_s": t4 - t3,
        "overlap_share": shares,
        "peak_mb": _peak_mb(),
        "worker_peak_mb": _peak_mb(children=True),
        "server_peak_mb": server_mb,
    }
    print(
        f"tracegraph job: ingest {t1 - t0:.2f} s, kernels {t2 - t1:.2f} s, overlap {t3 - t2:.2f} s, "
        f"stragglers+idle+path {t4 - t3:.2f} s",
        file=sys.stderr,
    )
    return out


# --- report ----------------------------------------------------------------------------------------


def trace_figures(h: dict, t: dict) -> dict:
    """One trace's figures from HTA's and tracegraph's answers: each side's
    seconds for the same answers, the path lengths' difference (% of
    HTA's), whether the kernel names agree, and the largest differences of
    the kernel totals and stream busy times (us)."""
    # HTA 0.5.0 counts the "Stream Wait Event" sync record as a compute
    # kernel; it is not one (tracegraph keeps it as a sync edge).
    hk = {k: v for k, v in h["kernels"].items() if k not in SYNC_RECORDS}
    return {
        "hta_s": h["load_s"] + h["kernel_breakdown_s"] + h["critical_path_s"],
        "tg_s": t["ingest_s"] + t["kernel_breakdown_s"] + t["critical_path_s"],
        "path_diff_pct": (t["critical_path_us"] - h["critical_path_us"]) / h["critical_path_us"] * 100,
        "names_equal": set(hk) == set(t["kernels"]),
        "kernel_diff_us": max((abs(v - t["kernels"].get(k, 0.0)) for k, v in hk.items()), default=0.0),
        "stream_diff_us": max(
            (abs(v - t["stream_busy_us"].get(s, 0.0)) for s, v in h["stream_busy_us"].items()), default=0.0
        ),
    }


def job_figures(h: dict, t: dict) -> dict:
    """One job's figures: each side's seconds for the same answers (with
    tracegraph's job analyses HTA has none of) and the largest difference
    of the ranks' communication overlap shares."""
    return {
        "hta_s": h["load_s"] + h["kernel_breakdown_s"] + h["overlap_s"],
        "tg_s": t["ingest_s"] + t["kernel_breakdown_s"] + t["overlap_s"] + t["job_analyses_s"],
        "overlap_diff": max(
            (abs(v - (t["overlap_share"].get(k) or 0.0)) for k, v in h["overlap_share"].items()), default=float("nan")
        ),
    }


def report(hta: dict, tg: dict) -> str:
    lines = [
        "| trace | size | HTA load + breakdown + path (s) | tracegraph ingest + analyses (s) | "
        "tracegraph every path segment as a row (s) | peak MB HTA | peak MB tracegraph (+ server) | "
        "peak MB tracegraph with the rows (+ server) | "
        "critical path HTA (us) | observed path tracegraph (us) | diff | kernel names equal / max diff (us) | "
        "streams busy max diff (us) |",
        "|---|---|---|---|---|---:|---:|---:|---|---|---|---|---|",
    ]
    for p in hta:
        h, t = hta[p], tg[p]
        size = os.path.getsize(p) / 1e6
        f = trace_figures(h, t)
        hs, ts, diff, kd, sd = f["hta_s"], f["tg_s"], f["path_diff_pct"], f["kernel_diff_us"], f["stream_diff_us"]
        names = f["names_equal"]
        lines.append(
            f"| {Path(p).name} | {size:.1f} MB | {h['load_s']:.2f} + {h['kernel_breakdown_s']:.2f} + "
            f"{h['critical_path_s']:.2f} = {hs:.2f} | {t['ingest_s']:.2f} + {t['kernel_breakdown_s']:.2f} + "
            f"{t['critical_path_s']:.2f} = {ts:.2f} | {t.get('path_rows_s', float('nan')):.2f} | "
            f"{h.get('peak_mb', float('nan')):,.0f} | {t.get('peak_mb', float('nan')):,.0f} "
            f"(+{t.get('server_peak_mb', float('nan')):,.0f}) | {t.get('path_rows_peak_mb', float('nan')):,.0f} "
            f"(+{t.get('path_rows_server_peak_mb', float('nan')):,.0f}) | {h['critical_path_us']:,.1f} | "
            f"{t['critical_path_us']:,.1f} | {diff:+.3f}% | {'yes' if names else 'NO'} / {kd:.3g} | {sd:.3g} |"
        )
    return "\n".join(lines)


# --- a big trace -----------------------------------------------------------------------------------


def big(src: Path, out: Path, mb: float, info: dict | None = None) -> None:
    """Replicate ``src``'s events until the JSON text reaches ``mb`` MB
    (``info`` updates its header's ``distributedInfo``)."""
    with gzip.open(src, "rt") as f:
        doc = json.load(f)
    if info is not None:
        doc["distributedInfo"] = dict(doc.get("distributedInfo") or {}, **info)
    events = [e for e in doc["traceEvents"] if e.get("ph") != "M" and e.get("cat") != "Trace"]
    meta = [e for e in doc["traceEvents"] if e.get("ph") == "M"]
    start = min(e["ts"] for e in events if "ts" in e)
    end = max(e["ts"] + e.get("dur", 0) for e in events if "ts" in e)
    span = end - start + 10
    corr_max = (
        max(
            [e.get("args", {}).get("correlation", 0) for e in events]
            + [e.get("id", 0) for e in events if isinstance(e.get("id"), int)]
        )
        + 1
    )
    one = len(json.dumps(events))
    copies = max(1, int(mb * 1e6 / one) + 1)
    header = {k: v for k, v in doc.items() if k != "traceEvents"}
    with gzip.open(out, "wt", compresslevel=1) as f:
        f.write(json.dumps(header)[:-1] + ', "traceEvents": [')
        f.write(",\n".join(json.dumps(e) for e in meta))
        for c in range(copies):
            shift, cshift = c * span, c * corr_max
            chunk = []
            for e in events:
                e = dict(e)
                if "ts" in e:
                    e["ts"] = e["ts"] + shift
                if "args" in e and "correlation" in e["args"]:
                    e["args"] = dict(e["args"], correlation=e["args"]["correlation"] + cshift)
                    if "External id" in e["args"]:
                        e["args"]["External id"] = e["args"]["External id"] + cshift
                if e.get("cat") == "ac2g" and isinstance(e.get("id"), int):
                    e["id"] = e["id"] + cshift
                chunk.append(json.dumps(e))
            f.write(",\n" + ",\n".join(chunk))
        f.write("]}")
    print(
        f"{out}: {copies} copies of {src.name}, {copies * one / 1e6:.0f} MB of events "
        f"({os.path.getsize(out) / 1e6:.1f} MB gzipped)",
        file=sys.stderr,
    )


EVENTS_KEY = ', "traceEvents": ['  # how ``big`` ends its header, before the events


def job(srcs: list[Path], outdir: Path, ranks: int, mb: float) -> None:
    """A job of ``ranks`` rank files made from ``srcs`` (see the module's
    docstring): each source replicated by :func:`big` once, its copies
    written with only the header's rank changed."""
    if ranks % len(srcs):
        raise SystemExit(f"--ranks {ranks} is not a multiple of the {len(srcs)} source files")
    outdir.mkdir(parents=True, exist_ok=True)
    width = len(str(ranks - 1))
    for r, src in enumerate(srcs):
        first = outdir / f"rank{r:0{width}d}_{src.name}"
        big(src, first, mb, {"rank": r, "world_size": ranks})
        with gzip.open(first, "rt") as f:
            text = f.read()
        head, sep, events = text.partition(EVENTS_KEY)
        header = json.loads(head + "}")
        for k in range(1, ranks // len(srcs)):
            rank = k * len(srcs) + r
            header["distributedInfo"] = dict(header["distributedInfo"], rank=rank)
            with gzip.open(outdir / f"rank{rank:0{width}d}_{src.name}", "wt", compresslevel=1) as f:
                f.write(json.dumps(header)[:-1] + sep)
                f.write(events)
    print(f"{outdir}: {ranks} rank files from {len(srcs)} sources, ~{mb:g} MB each", file=sys.stderr)


def report_job(pairs: list[tuple[dict, dict]], names: list[str]) -> str:
    """The jobs side by side: seconds, HTA's time over tracegraph's, the
    peaks (client, largest worker, server) and the overlap shares' largest
    difference; then each job's time and client peak over the first's."""
    lines = [
        "| job | HTA load + kernels + overlap (s) | tracegraph ingest + kernels + overlap + job analyses (s) | "
        "HTA / tracegraph | HTA peak MB (+ worker) | tracegraph peak MB (+ worker, + server) | overlap share max diff |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    totals = []
    for name, (h, t) in zip(names, pairs, strict=True):
        f = job_figures(h, t)
        hs, ts, diff = f["hta_s"], f["tg_s"], f["overlap_diff"]
        totals.append((hs, ts, t["ingest_s"], h["peak_mb"], t["peak_mb"]))
        lines.append(
            f"| {name} | {h['load_s']:.2f} + {h['kernel_breakdown_s']:.2f} + {h['overlap_s']:.2f} = {hs:.2f} | "
            f"{t['ingest_s']:.2f} + {t['kernel_breakdown_s']:.2f} + {t['overlap_s']:.2f} + "
            f"{t['job_analyses_s']:.2f} = {ts:.2f} | {hs / ts:.2f}x | {h['peak_mb']:,.0f} (+{h['worker_peak_mb']:,.0f}) | "
            f"{t['peak_mb']:,.0f} (+{t['worker_peak_mb']:,.0f}, +{t['server_peak_mb']:,.0f}) | {diff:.5f} |"
        )
    base = totals[0]
    for name, (hs, ts, ti, hp, tp) in zip(names[1:], totals[1:], strict=True):
        lines.append(
            f"\n{name} / {names[0]}: time HTA {hs / base[0]:.2f}x, tracegraph {ts / base[1]:.2f}x "
            f"(ingest alone {ti / base[2]:.2f}x); client peak HTA {hp / base[3]:.2f}x, tracegraph {tp / base[4]:.2f}x"
        )
    return "\n".join(lines)


# --- everything side by side, in one run -------------------------------------------------------

DLRM_RANKS = ROOT / "tests" / "data" / "nccl_dlrm"
ALEXNET = ROOT / "tests" / "data" / "hta" / "alexnet.json.gz"


def side_by_side(
    hta_python: str, work: Path, ranks: list[int], trace_mb: float, neo4j: str | None, job_mb: float = 16
) -> str:
    """The issue's table in one run: the inputs made under ``work`` when
    missing (the big trace from HTA's alexnet trace, a job of each of
    ``ranks`` rank files of ``job_mb`` MB from PARAM's DLRM ranks), then on each
    input HTA (``hta_python``: a virtualenv with HolisticTraceAnalysis) and
    right after it tracegraph, each half a process of its own (its peak is
    its own), and the table: seconds, ratios, peaks, whether the answers
    agree; with ``neo4j`` (a scratch server's bolt URI), the smallest job
    into it by the plain reference loader and by tracegraph."""
    work.mkdir(parents=True, exist_ok=True)
    trace = work / f"big-{trace_mb:g}mb.json.gz"  # (the sizes in the names: an input made before is the same)
    if not trace.exists():
        big(ALEXNET, trace, trace_mb)
    jobs: dict[int, list[str]] = {}
    for r in ranks:
        d = work / f"job{r}x{job_mb:g}mb"
        if len(list(d.glob("*.gz"))) != r:
            shutil.rmtree(d, ignore_errors=True)
            job(sorted(DLRM_RANKS.glob("*.json.gz")), d, r, job_mb)
        jobs[r] = sorted(map(str, d.glob("*.gz")))

    answers: dict[str, dict] = {}

    def half(python: str, cmd: str, inputs: list[str], name: str) -> dict:
        out = work / f"{name}.json"
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        subprocess.run(
            [python, "-m", "bench.hta_compare", cmd, *inputs, "--out", str(out)], cwd=ROOT, env=env, check=True
        )
        answers[name] = json.loads(out.read_text())
        return answers[name]

    rows = []
    h = half(hta_python, "hta", [str(trace)], "hta_trace")[str(trace)]
    t = half(sys.executable, "tracegraph", [str(trace)], "tg_trace")[str(trace)]
    rows.append(_trace_row(f"{trace.stat().st_size / 1e6:.0f} MB gz trace (alexnet, {trace_mb:g} MB of JSON)", h, t))
    for r, files in jobs.items():
        h = half(hta_python, "hta-job", files, f"hta_job{r}")
        t = half(sys.executable, "tracegraph-job", files, f"tg_job{r}")
        rows.append(_job_row(f"{r} rank files x {job_mb:g} MB (DLRM)", h, t))
    lines = [
        "| input | HTA (s) | tracegraph (s) | HTA / tracegraph | HTA peak MB (+ worker) | tracegraph client MB "
        "(+ worker) | embedded server MB | client / HTA | client + server / HTA | answers |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        *rows,
    ]
    if len(jobs) > 1:
        first, last = min(jobs), max(jobs)
        (ha, a), (hb, b) = ((answers[f"hta_job{r}"], answers[f"tg_job{r}"]) for r in (first, last))
        ta, tb = job_figures(ha, a)["tg_s"], job_figures(hb, b)["tg_s"]
        lines.append(
            f"\n{last} / {first} ranks, tracegraph: time {tb / ta:.2f}x, client peak {b['peak_mb'] / a['peak_mb']:.2f}x"
        )
    if neo4j is not None and jobs:
        small = min(jobs)
        done = subprocess.run(
            [sys.executable, "-m", "bench.neo4j_reference", "--db", neo4j, "--trace", *jobs[small], "--repeat", "1"],
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        )
        lines.append(f"\nNeo4j ({neo4j}), the {small}-rank job:\n" + done.stdout.split("graph elements", 1)[-1].strip())
    return "\n".join(lines)


def _peaks(h: dict, t: dict) -> str:
    hp = h["peak_mb"] + h.get("worker_peak_mb", 0.0)
    tc = t["peak_mb"] + t.get("worker_peak_mb", 0.0)
    return (
        f"{h['peak_mb']:,.0f} (+{h.get('worker_peak_mb', 0.0):,.0f}) | {t['peak_mb']:,.0f} "
        f"(+{t.get('worker_peak_mb', 0.0):,.0f}) | {t['server_peak_mb']:,.0f} | {tc / hp:.2f} | "
        f"{(tc + t['server_peak_mb']) / hp:.2f}"
    )


def _trace_row(name: str, h: dict, t: dict) -> str:
    """A trace's row: HTA's load, kernel breakdown and critical path against
    tracegraph's ingest, kernel totals, stream busy times and path summary."""
    f = trace_figures(h, t)
    hs, ts = f["hta_s"], f["tg_s"]
    answers = (
        f"kernel names {'equal' if f['names_equal'] else 'DIFFER'}, totals max diff {f['kernel_diff_us']:.3g} us, "
        f"stream busy {f['stream_diff_us']:.3g} us, path {t['critical_path_us']:,.1f} us "
        f"({f['path_diff_pct']:+.3f}% of HTA's)"
    )
    return f"| {name} | {hs:.2f} | {ts:.2f} | {hs / ts:.2f}x | {_peaks(h, t)} | {answers} |"


def _job_row(name: str, h: dict, t: dict) -> str:
    """A job's row: HTA's load, kernel breakdown and comm/comp overlap
    against tracegraph's ingest, kernel totals, overlap and job analyses."""
    f = job_figures(h, t)
    hs, ts = f["hta_s"], f["tg_s"]
    return (
        f"| {name} | {hs:.2f} | {ts:.2f} | {hs / ts:.2f}x | {_peaks(h, t)} | "
        f"overlap shares max diff {f['overlap_diff']:.5f} |"
    )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.hta_compare")
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("hta", "tracegraph", "hta-job", "tracegraph-job"):
        s = sub.add_parser(name)
        s.add_argument("traces", nargs="+")
        s.add_argument("--out", required=True)
    s = sub.add_parser("report")
    s.add_argument("hta")
    s.add_argument("tg")
    s = sub.add_parser("big")
    s.add_argument("out")
    s.add_argument("--mb", type=float, default=100)
    s.add_argument("--src", default=str(ROOT / "tests" / "data" / "hta" / "alexnet.json.gz"))
    s = sub.add_parser("job")
    s.add_argument("outdir")
    s.add_argument(
        "srcs", nargs="*", default=sorted(map(str, (ROOT / "tests" / "data" / "nccl_dlrm").glob("*.json.gz")))
    )
    s.add_argument("--ranks", type=int, default=64)
    s.add_argument("--mb", type=float, default=16)
    s = sub.add_parser("side-by-side", help="make the inputs, run both tools on each, print the table")
    s.add_argument("--hta-python", required=True, help="a python with HolisticTraceAnalysis installed")
    s.add_argument("--work", default="bench-hta", help="where the inputs and raw answers go")
    s.add_argument("--ranks", type=int, nargs="*", default=[8, 64], help="the jobs' rank counts")
    s.add_argument("--trace-mb", type=float, default=110, help="the big trace's JSON size")
    s.add_argument("--job-mb", type=float, default=16, help="each rank file's JSON size")
    s.add_argument("--neo4j", help="a scratch Neo4j's bolt URI: the smallest job into it, both loaders")
    s = sub.add_parser("report-job", help="HTA.json TG.json pairs, one per job, the first the baseline")
    s.add_argument("files", nargs="+")
    s.add_argument("--names", nargs="+")
    a = p.parse_args(argv)
    if a.cmd == "hta":
        Path(a.out).write_text(json.dumps(run_hta(a.traces), indent=1))
    elif a.cmd == "tracegraph":
        Path(a.out).write_text(json.dumps(run_tracegraph(a.traces), indent=1))
    elif a.cmd == "hta-job":
        Path(a.out).write_text(json.dumps(run_hta_job(a.traces), indent=1))
    elif a.cmd == "tracegraph-job":
        Path(a.out).write_text(json.dumps(run_tracegraph_job(a.traces), indent=1))
    elif a.cmd == "report":
        print(report(json.loads(Path(a.hta).read_text()), json.loads(Path(a.tg).read_text())))
    elif a.cmd == "job":
        job([Path(x) for x in a.srcs], Path(a.outdir), a.ranks, a.mb)
    elif a.cmd == "side-by-side":
        print(side_by_side(a.hta_python, Path(a.work).resolve(), a.ranks, a.trace_mb, a.neo4j, a.job_mb))
    elif a.cmd == "report-job":
        docs = [json.loads(Path(f).read_text()) for f in a.files]
        pairs = list(zip(docs[::2], docs[1::2]))
        print(report_job(pairs, a.names or [f"job {i + 1}" for i in range(len(pairs))]))
    else:
        big(Path(a.src), Path(a.out), a.mb)
    return 0


if __name__ == "__main__":
    sys.exit(main())
