"""The benchmark scripts still run against today's code.

bench/ is not installed and nothing imports it, so an interface a script
calls can go away unnoticed until someone reruns the numbers (it happened:
``graph.ensure_schema()``). Each script runs once here on a small input and
its answers are checked against a computation made in the test.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import NEO4J_URI

from tracegraph.ingest import parallel

ROOT = Path(__file__).resolve().parent.parent
SIMPLE_ADD = ROOT / "tests" / "data" / "hta" / "simple_add.json.gz"
HTA_SIMPLE_ADD_PATH_US = 41_435_234.0  # HTA 0.5.0's critical path length on this trace (bench/hta-results/)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def _bench(*args: str, tmp_path: Path, tmp: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, TRACEGRAPH_HOME=str(tmp_path / "home"))
    if tmp is not None:
        env["TMPDIR"] = str(tmp)
    env.pop("TRACEGRAPH_DB", None)
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False
    )


def test_hta_compare_tracegraph_half(tmp_path):
    out = tmp_path / "tg.json"
    # A short TMPDIR of its own, so that the server's socket lies inside it
    # (and the server's command line names it).
    scratch = Path(tempfile.mkdtemp(prefix="tg-bench-", dir="/tmp"))
    try:
        proc = _bench(
            "bench.hta_compare", "tracegraph", str(SIMPLE_ADD), "--out", str(out), tmp_path=tmp_path, tmp=scratch
        )
        assert proc.returncode == 0, proc.stderr
        # Its private database is gone: the directory, and the server with it.
        assert list(scratch.iterdir()) == []
        assert not [p for p in Path("/proc").glob("[0-9]*/cmdline") if str(scratch).encode() in _read(p)]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    got = json.loads(out.read_text())[str(SIMPLE_ADD)]
    want: dict[str, float] = {}
    with gzip.open(SIMPLE_ADD, "rt") as f:
        for e in json.load(f)["traceEvents"]:
            if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
                want[e["name"]] = want.get(e["name"], 0.0) + float(e["dur"])
    assert want and got["kernels"].keys() == want.keys()
    for name, total in want.items():
        assert got["kernels"][name] == pytest.approx(total, abs=1e-6)
    assert got["critical_path_us"] == pytest.approx(HTA_SIMPLE_ADD_PATH_US, rel=0.02)


@pytest.mark.slow
def test_bench_run_small(tmp_path):
    """bench.run end to end on a 300-op trace: generation, both ingest forms,
    every analysis, the CLI timings, and its own peak-memory check."""
    proc = _bench(
        "bench.run",
        "--sizes",
        "300",
        "--repeat",
        "1",
        "--no-reference",
        "--out",
        str(tmp_path / "bench-out"),
        tmp_path=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count("peak-memory check") == 2 and "peak-memory check (text): OK" in proc.stdout
    assert "failed" not in proc.stdout, proc.stdout
    assert len(list((tmp_path / "bench-out").glob("results-*.json"))) == 1


@pytest.mark.slow
def test_rank_parse_small(tmp_path):
    """bench.rank_parse on the 8 DLRM rank files as they are (--mb 0: one
    copy each): three timed preparations, in order, and the job's files made."""
    proc = _bench("bench.rank_parse", str(tmp_path / "ranks"), "--mb", "0", tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("8 rank files")
    timed = [line for line in lines if " process" in line]
    assert [line.split()[0:3] for line in timed] == [
        ["largest", "file", "1"],
        ["whole", "job", "1"],
        ["whole", "job", str(min(8, parallel.cores()))],
    ]
    assert lines[-1].startswith("whole job's parse / (largest file's x ceil(8 files / ") and lines[-1].endswith("x")
    copies = sorted((tmp_path / "ranks").glob("worker*.pt.trace.json.gz"))
    assert len(copies) == 8


def test_hta_compare_job_agrees_with_htas_overlap(tmp_path):
    """bench.hta_compare tracegraph-job on PARAM's 8-rank DLRM job: every
    rank's overlapped share of communication equals what HTA 0.5.0's
    get_comm_comp_overlap said for the same files (bench/hta-results/
    hta_job_dlrm.json, rounded by HTA to 4 digits)."""
    out = tmp_path / "tg_job.json"
    files = sorted((ROOT / "tests" / "data" / "nccl_dlrm").glob("worker*.pt.trace.json.gz"))
    proc = _bench("bench.hta_compare", "tracegraph-job", *map(str, files), "--out", str(out), tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(out.read_text())["overlap_share"]
    hta = json.loads((ROOT / "bench" / "hta-results" / "hta_job_dlrm.json").read_text())["overlap_share"]
    assert got.keys() == hta.keys() and len(hta) == 8
    for rank, share in hta.items():
        assert got[rank] == pytest.approx(share, abs=1e-4), rank


DLRM = sorted((ROOT / "tests" / "data" / "nccl_dlrm").glob("worker*.pt.trace.json.gz"))
GLOO_JOB = sorted((ROOT / "examples" / "traces").glob("pytorch-gloo-straggler.rank*.json.gz"))


def _events(path: Path) -> tuple[dict, list[str]]:
    with gzip.open(path, "rt") as f:
        doc = json.load(f)
    return doc, sorted(json.dumps(e, sort_keys=True) for e in doc.pop("traceEvents"))


def test_hta_compare_job_is_one_job_of_renumbered_ranks(tmp_path):
    """bench.hta_compare job --ranks 16 on the 8 DLRM rank files (--mb 0:
    one copy of each file's events): 16 files naming ranks 0..15 of a world
    of 16, copy k of source r being rank 8k + r with r's events unchanged
    (the profiler's own "Trace" span left out, as ``big`` does)."""
    out = tmp_path / "job"
    proc = _bench("bench.hta_compare", "job", str(out), "--ranks", "16", "--mb", "0", tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stderr
    files = sorted(out.glob("*.json.gz"))
    assert len(files) == 16
    seen = {}
    for f in files:
        doc, events = _events(f)
        seen[doc["distributedInfo"]["rank"]] = (doc["distributedInfo"], events, f.name)
    assert sorted(seen) == list(range(16))
    for rank, (info, events, name) in seen.items():
        src = DLRM[rank % 8]
        doc, want = _events(src)
        assert info == dict(doc["distributedInfo"], rank=rank, world_size=16)
        assert name.endswith(src.name)
        assert events == [e for e in want if json.loads(e).get("cat") != "Trace"]


@pytest.mark.slow
def test_neo4j_reference_on_a_job(tmp_path, session_graph):
    """bench.neo4j_reference --trace on a job's rank files (the 4 ranks of
    the gloo straggler example, 4 kB each: a job as the 8 DLRM ranks are,
    held whole by the loaders and streamed by the ingest): the three
    loaders write as many elements as the job's graph holds once ingested
    (its nodes, and its relationships, Trace membership included)."""
    if session_graph.backend != "neo4j":
        pytest.skip("a Neo4j test")
    from tracegraph.ingest.pipeline import ingest

    proc = _bench(
        "bench.neo4j_reference", "--db", NEO4J_URI, "--trace", *map(str, GLOO_JOB), "--repeat", "1", tmp_path=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    total = next(line for line in proc.stdout.splitlines() if " graph elements, best of 1" in line)
    elements = int(total.split(", ")[-2].split()[0].replace(",", ""))
    loaders = [line.split("  ")[1] for line in proc.stdout.splitlines() if line.startswith("  ")]
    assert loaders == ["reference loader", "tracegraph", "ingest from the files (parse, enrich, write)"]
    ingest(session_graph, GLOO_JOB, "bench-count", replace=True)
    try:
        nodes = session_graph.run("MATCH (n {trace: 'bench-count'}) RETURN count(n)").rows[0][0]
        rels = session_graph.run("MATCH (n {trace: 'bench-count'})-[r]->() RETURN count(r)").rows[0][0]
    finally:
        session_graph.drop_trace("bench-count")
    assert elements == nodes + rels


@pytest.mark.slow
def test_cluster_job_small(tmp_path):
    """bench.cluster_job on the gloo straggler job's 4 rank files (--files)
    into the test Neo4j: both runs (one process, a local cluster of 2)
    store the same counts, and the traces are dropped after."""
    from conftest import NEO4J_URI, NO_NEO4J

    if not NEO4J_URI:
        pytest.skip(NO_NEO4J)
    args = ("bench.cluster_job", str(tmp_path / "ranks"), "--db", NEO4J_URI, "--files", *map(str, GLOO_JOB))
    proc = _bench(*args, tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("4 rank files")
    assert [line.split()[0] for line in lines[1:3]] == ["one", "local:2"]
    assert lines[-1] == "same counts", proc.stdout
    from tracegraph.db.connect import open_graph

    graph = open_graph(NEO4J_URI)
    try:
        assert not [t for t in graph.list_traces() if t["trace"].startswith("bench-cluster-job")]
    finally:
        graph.close()


FAKE_HTA = """
import json, sys
cmd, *rest = sys.argv[3:]  # (-m bench.hta_compare CMD INPUT... --out FILE)
inputs, out = rest[:-2], rest[-1]
if cmd == "hta":
    doc = {p: {"load_s": 30.0, "kernel_breakdown_s": 1.0, "critical_path_s": 9.0, "kernels": {},
               "stream_busy_us": {}, "critical_path_us": 1.0, "peak_mb": 1200.0, "worker_peak_mb": 0.0} for p in inputs}
else:
    doc = {"load_s": 7.0, "kernel_breakdown_s": 0.5, "overlap_s": 0.5,
           "overlap_share": {str(r): 0.25 for r in range(len(inputs))}, "peak_mb": 400.0, "worker_peak_mb": 200.0}
open(out, "w").write(json.dumps(doc))
"""


@pytest.mark.slow
def test_hta_compare_side_by_side_makes_the_inputs_and_prints_one_table(tmp_path):
    """The one-run benchmark end to end on small inputs: it makes the big
    trace and the jobs, runs the two halves of each (HTA's here a stand-in
    that answers fixed figures, as HTA is not installed where the tests
    run; tracegraph's for real) and prints a row per input whose ratios
    are those of the halves' answers, worked out here again."""
    hta = tmp_path / "hta-python"
    (tmp_path / "fake_hta.py").write_text(FAKE_HTA)
    hta.write_text(f'#!/bin/sh\nexec {sys.executable} {tmp_path / "fake_hta.py"} "$@"\n')
    hta.chmod(0o755)
    work = tmp_path / "work"
    proc = _bench(
        "bench.hta_compare",
        "side-by-side",
        "--hta-python",
        str(hta),
        "--work",
        str(work),
        "--ranks",
        "8",
        "16",
        "--trace-mb",
        "1",
        "--job-mb",
        "0.2",
        tmp_path=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ") and not line.startswith("| input")]
    assert len(rows) == 3
    assert len(list((work / "job8x0.2mb").glob("*.gz"))) == 8 and len(list((work / "job16x0.2mb").glob("*.gz"))) == 16
    tg = json.loads((work / "tg_trace.json").read_text())[str(work / "big-1mb.json.gz")]
    ts = tg["ingest_s"] + tg["kernel_breakdown_s"] + tg["critical_path_s"]
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    assert cells[1:4] == ["40.00", f"{ts:.2f}", f"{40 / ts:.2f}x"]
    client = tg["peak_mb"] + tg["worker_peak_mb"]
    assert cells[7] == f"{client / 1200:.2f}"
    assert cells[8] == f"{(client + tg['server_peak_mb']) / 1200:.2f}"
    for row, ranks in zip(rows[1:], (8, 16), strict=True):
        job = json.loads((work / f"tg_job{ranks}.json").read_text())
        js = job["ingest_s"] + job["kernel_breakdown_s"] + job["overlap_s"] + job["job_analyses_s"]
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[0] == f"{ranks} rank files x 0.2 MB (DLRM)"
        assert cells[1:4] == ["8.00", f"{js:.2f}", f"{8 / js:.2f}x"]
        assert cells[7] == f"{(job['peak_mb'] + job['worker_peak_mb']) / 600:.2f}"
    assert "16 / 8 ranks, tracegraph: time" in proc.stdout
