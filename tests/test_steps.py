"""Steps (issue 47, slice 2): Step nodes, each op's and kernel's step,
``step-breakdown``, ``device-time-breakdown``, the ``step`` parameter and
``--step-marker``, on both engines.

The expected figures are worked out here from the files' JSON in a few
lines, the way TraceLens's GPU timeline works them out (merge each
category's intervals; memsets count as computation; total = the span of
every GPU event), never from tracegraph.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from conftest import cli_here, ready_traces

from tracegraph.errors import BadRequest
from tracegraph.ingest import pipeline, step_marker
from tracegraph.queries.run import run_analysis

DATA = Path(__file__).parent / "data"
H100 = DATA / "kineto-gpu" / "traces_h100_Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
MI300 = DATA / "kineto-gpu" / "traces_mi300_Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
NCCL_RANKS = sorted((DATA / "nccl_dlrm").glob("worker*.json.gz"))
PADDLE = DATA / "chrome" / "paddle_train_step.paddle_trace.json"
JAX = DATA / "chrome" / "jax_train_step.trace.json.gz"
GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")


def events(path: Path) -> list[dict]:
    raw = path.read_bytes()
    return json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)["traceEvents"]


def merge(intervals: list[tuple[float, float]]) -> list[list[float]]:
    out: list[list[float]] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def length(segments) -> float:
    return sum(e - s for s, e in segments)


def minus(a, b) -> list[tuple[float, float]]:
    """The merged segments ``b`` less the merged segments ``a``."""
    out = []
    for bs, be in b:
        cur = bs
        for s, e in a:
            if e <= cur or s >= be:
                continue
            if s > cur:
                out.append((cur, min(be, s)))
            cur = max(cur, e)
            if cur >= be:
                break
        if cur < be:
            out.append((cur, be))
    return out


def clip(segments, w0: float, w1: float) -> list[list[float]]:
    return [[max(s, w0), min(e, w1)] for s, e in segments if e > w0 and s < w1]


def gpu_timeline(gpu: list[dict], window: tuple[float, float] | None = None) -> dict[str, float]:
    """TraceLens's figures of GPU events (over their span, or ``window``)."""

    def iv(es):
        return [(float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in es]

    comp = merge(iv([e for e in gpu if e["cat"] != "gpu_memcpy" and "nccl" not in e["name"].lower()]))
    comm = merge(iv([e for e in gpu if e["cat"] != "gpu_memcpy" and "nccl" in e["name"].lower()]))
    mem = merge(iv([e for e in gpu if e["cat"] == "gpu_memcpy"]))
    busy = merge(iv(gpu))
    w0, w1 = window or (busy[0][0], busy[-1][1])
    comp, comm, mem, busy = (clip(x, w0, w1) for x in (comp, comm, mem, busy))
    return {
        "window_us": w1 - w0,
        "busy_us": length(busy),
        "computation_us": length(comp),
        "communication_us": length(comm),
        "memcpy_us": length(mem),
        "exposed_communication_us": length(minus(comp, comm)),
        "exposed_memcpy_us": length(minus(comm, minus(comp, mem))),
        "idle_us": (w1 - w0) - length(busy),
    }


def step_of_file(ev: list[dict]) -> tuple[dict, list[dict]]:
    """The file's one ProfilerStep and the GPU events whose runtime call lies in it."""
    (step,) = [
        e
        for e in ev
        if e.get("ph") == "X" and e.get("cat") == "user_annotation" and e.get("name", "").startswith("ProfilerStep#")
    ]
    t0, t1 = float(step["ts"]), float(step["ts"]) + float(step["dur"])
    calls = {
        e["args"]["correlation"]: float(e["ts"])
        for e in ev
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    gpu = [e for e in ev if e.get("ph") == "X" and e.get("cat") in GPU_CATEGORIES]
    mine = []
    for e in gpu:
        at = calls.get(e["args"].get("correlation"), float(e["ts"]))  # no call in the trace: its own start
        if t0 <= at < t1:
            mine.append(e)
    return step, mine


def origin(ev: list[dict]) -> float:
    """The trace's time origin: its first op's or kernel's start (the files have no [memory] record earlier)."""
    return min(float(e["ts"]) for e in ev if e.get("ph") == "X" and e.get("cat") not in ("Trace",))


@pytest.fixture(scope="module")
def gpu_traces(session_graph):
    from conftest import module_traces

    yield from module_traces(
        session_graph,
        lambda: {
            path: pipeline.ingest(session_graph, [path], f"steps-{path.name[7:11]}").trace for path in (H100, MI300)
        },
    )


@pytest.mark.parametrize("path", [H100, MI300], ids=["h100", "mi300"])
def test_step_breakdown_of_a_real_gpu_step(graph, gpu_traces, path):
    ev = events(path)
    step, mine = step_of_file(ev)
    gpu = [e for e in ev if e.get("ph") == "X" and e.get("cat") in GPU_CATEGORIES]
    w0 = min(float(e["ts"]) for e in mine)
    w1 = max(float(e["ts"]) + float(e["dur"]) for e in mine)
    expected = gpu_timeline(gpu, (w0, w1))
    res = run_analysis(graph, "step-breakdown", gpu_traces[path], {})
    assert res.available, res.note
    (row,) = res.records()
    assert (row["rank"], row["step"], row["name"]) == (0, 6, "ProfilerStep#6")
    assert row["host_us"] == pytest.approx(float(step["dur"]), abs=1e-3)
    assert row["kernels"] == len(mine)
    for figure, value in expected.items():
        assert row[figure] == pytest.approx(value, abs=0.05), figure
    assert row["computation_us"] + row["exposed_communication_us"] + row["exposed_memcpy_us"] + row[
        "idle_us"
    ] == pytest.approx(row["window_us"], abs=1e-6)


@pytest.mark.parametrize("path", [H100, MI300], ids=["h100", "mi300"])
def test_device_time_breakdown_is_tracelens_gpu_timeline(graph, gpu_traces, path):
    ev = events(path)
    expected = gpu_timeline([e for e in ev if e.get("ph") == "X" and e.get("cat") in GPU_CATEGORIES])
    res = run_analysis(graph, "device-time-breakdown", gpu_traces[path], {})
    (row,) = res.records()
    for figure, value in expected.items():
        assert row[figure] == pytest.approx(value, abs=0.05), figure
    assert row["busy_share"] == pytest.approx(expected["busy_us"] / expected["window_us"], rel=1e-6)


def test_the_step_parameter_of_top_ops_op_types_and_streams(graph, gpu_traces):
    trace = gpu_traces[H100]
    ev = events(H100)
    step, mine = step_of_file(ev)
    t0, t1 = float(step["ts"]), float(step["ts"]) + float(step["dur"])
    host = [
        e for e in ev if e.get("ph") == "X" and e.get("cat") not in (*GPU_CATEGORIES, "Trace", "gpu_user_annotation")
    ]
    in_step = sum(1 for e in host if t0 <= float(e["ts"]) < t1)
    types = run_analysis(graph, "op-type-breakdown", trace, {"step": "6"})
    assert sum(r["count"] for r in types.records()) == in_step
    assert sum(r["share"] for r in types.records()) == pytest.approx(1.0)
    everything = run_analysis(graph, "op-type-breakdown", trace, {})
    assert sum(r["count"] for r in everything.records()) > in_step  # the ops before and after the step
    none = run_analysis(graph, "op-type-breakdown", trace, {"step": "5"})
    assert none.rows == [] and "in step 5" in (none.note or "")
    top = run_analysis(graph, "top-ops", trace, {"step": "6", "n": "5"})
    assert len(top.rows) == 5
    # stream-utilization of the step: the stream's busy time within the step's window
    w0 = min(float(e["ts"]) for e in mine)
    w1 = max(float(e["ts"]) + float(e["dur"]) for e in mine)
    gpu = [e for e in ev if e.get("ph") == "X" and e.get("cat") in GPU_CATEGORIES]
    (row,) = run_analysis(graph, "stream-utilization", trace, {"step": "6", "min_gap_us": "0"}).records()
    busy = length(clip(merge([(float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in gpu]), w0, w1))
    assert row["kernels"] == len(mine)
    assert row["window_us"] == pytest.approx(w1 - w0, abs=1e-3)
    assert row["busy_us"] == pytest.approx(busy, abs=0.05)
    (whole,) = run_analysis(graph, "stream-utilization", trace, {"min_gap_us": "0"}).records()
    assert whole["kernels"] == len(gpu)


def test_every_rank_of_a_job_has_its_steps(graph):
    """An 8-rank NCCL job, written rank by rank: each rank's ProfilerStep#10
    with its NCCL time, as worked out from each rank's file."""
    pipeline.ingest(graph, NCCL_RANKS, "steps-nccl")
    res = run_analysis(graph, "step-breakdown", "steps-nccl", {})
    rows = {r["rank"]: r for r in res.records()}
    assert sorted(rows) == list(range(8))
    for path in NCCL_RANKS:
        doc = json.loads(gzip.decompress(path.read_bytes()))
        ev, rank = doc["traceEvents"], doc["distributedInfo"]["rank"]
        _, mine = step_of_file(ev)
        w0 = min(float(e["ts"]) for e in mine)
        w1 = max(float(e["ts"]) + float(e["dur"]) for e in mine)
        expected = gpu_timeline([e for e in ev if e.get("ph") == "X" and e.get("cat") in GPU_CATEGORIES], (w0, w1))
        row = rows[rank]
        assert (row["step"], row["kernels"]) == (10, len(mine))
        assert expected["communication_us"] > 0
        for figure, value in expected.items():
            assert row[figure] == pytest.approx(value, abs=0.05), (rank, figure)


def test_cpu_steps_of_paddle_and_jax(graph):
    for path, name, marker in ((PADDLE, "steps-paddle", "ProfileStep#"), (JAX, "steps-jax", None)):
        pipeline.ingest(graph, [path], name)
        ev = [e for e in events(path) if e.get("ph") == "X"]
        if marker:
            steps = [e for e in ev if e["name"].startswith(marker)]
            numbers = [int(e["name"].split("#")[1].split("[")[0]) for e in steps]
        else:
            steps = [e for e in ev if "step_num" in e.get("args", {})]
            numbers = [int(e["args"]["step_num"]) for e in steps]
        res = run_analysis(graph, "step-breakdown", name, {})
        rows = res.records()
        assert [r["step"] for r in rows] == numbers == [0, 1]
        for r, e in zip(rows, steps):
            t0, t1 = float(e["ts"]), float(e["ts"]) + float(e["dur"])
            assert r["host_us"] == pytest.approx(float(e["dur"]), abs=1e-3)
            assert r["ops"] == sum(1 for x in ev if t0 <= float(x["ts"]) < t1)
            assert r["kernels"] == 0 and r["window_us"] is None
        top = run_analysis(graph, "top-ops", name, {"step": "1", "n": "1000"})
        assert sum(r["share"] for r in top.records()) == pytest.approx(1.0)
        assert len(top.rows) == rows[1]["ops"]


def test_a_step_marker_of_ones_own(graph, db_uri):
    """``--step-marker``: the pattern alone names the steps (JAX's own step
    annotations no longer count), numbered by the digits it captures, else
    in start order; the pattern is kept on the Trace."""
    proc = cli_here(
        "ingest", str(JAX), "--trace", "steps-mine", "--step-marker", r"^PjitFunction\(step\)$", "--quiet", db=db_uri
    )
    assert proc.returncode == 0, proc.stderr
    rows = run_analysis(graph, "step-breakdown", "steps-mine", {}).records()
    calls = sorted((float(e["ts"]), float(e["dur"])) for e in events(JAX) if e.get("name") == "PjitFunction(step)")
    assert [r["step"] for r in rows] == list(range(len(calls))) == [0, 1, 2, 3]
    assert [r["host_us"] for r in rows] == pytest.approx([d for _, d in calls], abs=1e-3)
    meta = graph.run(
        "MATCH (t:Trace {trace: $trace, uid: 'trace'}) RETURN t.meta_step_marker, t.has_steps",
        {"trace": "steps-mine"},
        trace="steps-mine",
    ).rows
    assert meta == [[r"^PjitFunction\(step\)$", True]]
    # A pattern that finds nothing: no steps, said in one line.
    assert (
        cli_here("ingest", str(JAX), "--trace", "steps-none", "--step-marker", "^nothing$", db=db_uri).returncode == 0
    )
    res = run_analysis(graph, "step-breakdown", "steps-none", {})
    assert not res.available and res.note.startswith("not available: the trace has no steps")


@pytest.mark.parametrize(
    "pattern,message",
    [
        ("(a+)+$", "a repeat inside a repeat"),
        (r"(\w)\1", "backreference"),
        ("[", "not a regular expression"),
        ("x" * 201, "longer than 200 characters"),
        ("", "an empty pattern"),
    ],
)
def test_a_bad_step_marker_is_refused_before_anything_is_read(graph, db_uri, pattern, message):
    before = ready_traces(graph)
    proc = cli_here("ingest", str(JAX), "--trace", "steps-bad", "--step-marker", pattern, db=db_uri)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert ready_traces(graph) == before


def test_a_marker_that_backtracks_is_stopped(monkeypatch):
    """A pattern no check refuses can still backtrack for ever on a long
    name: it runs in a child process, killed at the time limit."""
    monkeypatch.setattr(step_marker, "MARKER_TIME_LIMIT_S", 1.0)
    with pytest.raises(BadRequest, match="still matching op names after 1 s"):
        step_marker.search("(a|a)*b", ["a" * 40])
    assert step_marker.search(r"^iter (\d+)$", ["iter 7", "x", "iter 9"]) == {0: 7, 2: 9}


def test_the_upload_form_takes_a_step_marker(graph, db_uri):
    from fastapi.testclient import TestClient

    from tracegraph.api.app import create_app
    from tracegraph.api.settings import Settings

    with TestClient(create_app(db_uri, Settings(api_key=None))) as client:
        files = [("files", (JAX.name, JAX.read_bytes()))]
        r = client.post("/traces", data={"trace": "steps-up", "step_marker": r"^PjitFunction"}, files=files)
        assert r.status_code == 201, r.text
        rows = client.get("/traces/steps-up/queries/step-breakdown").json()["rows"]
        assert len(rows) == 4
        r = client.post("/traces", data={"trace": "steps-up2", "step_marker": "(a+)+"}, files=files)
        assert r.status_code == 422 and "a repeat inside a repeat" in r.json()["detail"]  # as every bad form field
        assert client.get("/traces/steps-up2").status_code == 404
