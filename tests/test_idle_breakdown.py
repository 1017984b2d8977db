"""idle-breakdown: each lane's idle time by cause, worked out by hand on
hand-built Kineto traces (tests/kineto_builder.py) and against the raw
JSON of the real 4-rank gloo job."""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path

import pytest

from tests import kineto_builder
from tests.test_collectives import rank_files, reference
from tests.test_comm_overlap import union_length
from tracegraph.ingest.pipeline import ingest
from tracegraph.queries.run import run_analysis

COLUMNS = ["window_us", "idle_us", "collective_us", "sync_us", "host_us", "other_us"]


def lanes(graph, trace: str) -> dict[tuple[int, str], tuple[float, ...]]:
    res = run_analysis(graph, "idle-breakdown", trace)
    out = {}
    for row in res.rows:
        r = dict(zip(res.columns, row))
        assert r["idle_us"] == pytest.approx(r["collective_us"] + r["sync_us"] + r["host_us"] + r["other_us"])
        out[(r["rank"], r["lane"])] = tuple(round(r[c], 3) for c in COLUMNS)
    return out


def test_streams_of_one_rank(graph, tmp_path):
    """Stream 7: gemm [25, 65) (launched at 12), add_kernel [70, 80)
    (launched at 47, queued behind gemm), memset [108, 111) (launched at
    103): window 86, work 53, idle 33 = host [80, 103) 23 + other [65, 70)
    and [103, 108) 10. Stream 8 (one copy) and stream 9 (one NCCL kernel
    nobody else joins): no idle time."""
    ingest(graph, [kineto_builder.write(tmp_path / "one.json.gz")], "idle-one")
    assert lanes(graph, "idle-one") == {
        (0, "cuda:0/stream:7"): (86, 33, 0, 0, 23, 10),
        (0, "cuda:0/stream:8"): (20, 0, 0, 0, 0, 0),
        (0, "cuda:0/stream:9"): (40, 0, 0, 0, 0, 0),
    }


def test_a_stream_waiting_for_another_rank(graph, tmp_path):
    """Rank 1's NCCL kernel runs [120, 160) instead of [100, 140): rank 0's
    all-reduce [100, 140) waited 20 us for it, idle on stream 9 in a
    collective; rank 1 waited for nobody."""
    docs = [kineto_builder.document(rank=r) for r in (0, 1)]
    for e in docs[1]["traceEvents"]:
        if e.get("name", "").startswith("ncclKernel_"):
            e["ts"] = round(kineto_builder.T0 + 120, 3)
    files = [kineto_builder.write(tmp_path / f"r{r}.json.gz", d) for r, d in enumerate(docs)]
    ingest(graph, files, "idle-two")
    got = lanes(graph, "idle-two")
    assert got[(0, "rank0/cuda:0/stream:9")] == (40, 20, 20, 0, 0, 0)
    assert got[(1, "rank1/cuda:0/stream:9")] == (40, 0, 0, 0, 0, 0)
    assert got[(0, "rank0/cuda:0/stream:7")] == got[(1, "rank1/cuda:0/stream:7")] == (86, 33, 0, 0, 23, 10)


def test_a_thread_in_a_blocking_call(graph, tmp_path):
    """No kernels: the lane is the thread. aten::mm [0, 10),
    cudaDeviceSynchronize [10, 30), aten::add [40, 50): window 50, work 20,
    idle 30 = sync 20 + other 10."""
    x = kineto_builder._x
    doc = kineto_builder.document()
    doc["traceEvents"] = [
        x("cpu_op", "aten::mm", 0, 10),
        x("cuda_runtime", "cudaDeviceSynchronize", 10, 20),
        x("cpu_op", "aten::add", 40, 10),
    ]
    ingest(graph, [kineto_builder.write(tmp_path / "cpu.json.gz", doc)], "idle-cpu")
    assert lanes(graph, "idle-cpu") == {(0, "100:100"): (50, 30, 0, 20, 0, 10)}


def union(spans):
    out = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        elif b > a:
            out.append([a, b])
    return out


def clip(spans, lo, hi):
    return [(max(a, lo), min(b, hi)) for a, b in spans if min(b, hi) > max(a, lo)]


def test_threads_of_the_gloo_job_as_the_raw_json_says(graph):
    """Per rank's main thread: collective = its waits for the last rank
    (from the raw-JSON reference of test_collectives), each from its call's
    start, within the thread's window; idle = the window minus its cpu_op
    events, less the part of each wait inside its call."""
    files = rank_files("straggler")
    ref = reference(files)
    ingest(graph, files, "idle-gloo")
    got = lanes(graph, "idle-gloo")
    for rank, path in enumerate(files):
        doc = json.loads(gzip.decompress(Path(path).read_bytes()))
        ops = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
        calls = sorted((e for e in ops if e["name"] in ("c10d::allreduce_", "c10d::barrier")), key=lambda e: e["ts"])
        tid = calls[0]["tid"]
        mine = [(e["ts"], e["ts"] + e["dur"]) for e in ops if e["tid"] == tid]
        lo, hi = min(a for a, _ in mine), max(b for _, b in mine)
        waits = [(c["ts"], c["ts"] + ref[k]["waits"][rank]) for k, c in enumerate(calls)]
        # the part of each wait inside its call is not work; ops run during the rest of it are
        inside = [(c["ts"], min(c["ts"] + ref[k]["waits"][rank], c["ts"] + c["dur"])) for k, c in enumerate(calls)]
        key = next(k for k in got if k[0] == rank and k[1].endswith(f":{tid}"))
        window, idle, collective, sync, host, _ = got[key]
        assert window == pytest.approx(hi - lo, abs=0.01)
        assert collective == pytest.approx(union_length(clip(waits, lo, hi)), abs=0.01)
        # work: the thread's ops minus the waits inside the calls
        points = sorted({p for s in union(mine) + union(inside) for p in s})
        busy = sum(
            b - a
            for a, b in itertools.pairwise(points)
            if any(x <= (a + b) / 2 < y for x, y in union(mine)) and not any(x <= (a + b) / 2 < y for x, y in inside)
        )
        assert idle == pytest.approx((hi - lo) - busy, abs=0.01)
        assert (sync, host) == (0, 0)
    # rank 2 slept: its idle is other, not waiting; the others mostly waited
    assert got[next(k for k in got if k[0] == 2)][5] > 75_000
