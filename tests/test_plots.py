"""The notebook's figures (tracegraph/plots.py) on real traces, their
numbers against references computed here from the raw JSON:

- timeline of the PyTorch ET + Kineto pair (tests/data/pytorch_et/cnn):
  one bar per host op event of the Kineto file (every bar accounted for,
  merged ones by their count), the dependency critical path's ops, and
  the observed path's counted segments summing to its length;
- memory of the same pair: the curve's highest point is the peak of the
  ``[memory]`` records (paired by address, frees before allocations at one
  time), reached when they say, and the live set at it sums to it;
- streams of PARAM's 8-rank DLRM job (tests/data/nccl_dlrm): each stream's
  busy time is the union of its kernels' intervals in the rank's file;
- collectives of the 4-rank gloo job where rank 2 slept 80 ms: each wait
  bar is the reference's wait (tests/test_collectives.py), rank 2 the one
  straggler marked.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
from test_collectives import reference, union

import tracegraph

DATA = Path(__file__).resolve().parent / "data"
CNN = [DATA / "pytorch_et" / "cnn.kineto.json.gz", DATA / "pytorch_et" / "cnn.et.json.gz"]
OP_CATEGORIES = {"cpu_op", "user_annotation", "python_function", "cuda_runtime", "cuda_driver"}


def load(path: Path) -> dict:
    return json.loads(gzip.decompress(path.read_bytes()))


@pytest.fixture
def g(graph, db_uri):
    with tracegraph.connect(None if db_uri == "embedded" else db_uri) as conn:
        yield conn


def by_name(fig):
    return {t.name: t for t in fig.data}


def test_timeline_bars_and_both_critical_paths(g):
    g.ingest(CNN, "plot-cnn")
    fig = g.plot.timeline("plot-cnn")
    traces = by_name(fig)
    raw = [e for e in load(CNN[0])["traceEvents"] if e.get("ph") == "X" and e.get("cat") in OP_CATEGORIES]
    assert sum(traces["ops"].customdata) == len(raw)
    # Every bar lies within the trace: from 0 to its span.
    span = g.trace("plot-cnn").span_us
    assert min(traces["ops"].base) == 0 and max(
        b + x for b, x in zip(traces["ops"].base, traces["ops"].x)
    ) == pytest.approx(span)
    dep = traces["critical path (dependency)"]
    path = g.query("critical-path", "plot-cnn")
    assert sorted(zip(dep.text, dep.base)) == sorted(zip(path["op"], path["start_us"]))
    assert len(dep.x) == g.trace("plot-cnn").critical_path_ops
    observed = traces["critical path (observed)"]
    counted = sum(x for x, c in zip(observed.x, observed.customdata) if c)
    assert counted == pytest.approx(g.trace("plot-cnn").observed_path_us, abs=1e-3)
    assert sum(observed.x) == pytest.approx(g.trace("plot-cnn").observed_path_span_us, abs=1e-3)


def memory_reference(path: Path) -> tuple[int, float]:
    """Peak live bytes of the file's CPU allocator and when (us since the
    trace's first event), from its [memory] records alone."""
    doc = load(path)
    events = doc["traceEvents"]
    # The trace's origin: its first op, kernel or memory record (the Kineto format's rule).
    first = min(e["ts"] for e in events if e.get("cat") in OP_CATEGORIES or e.get("name") == "[memory]")
    records = sorted(
        (e for e in events if e.get("name") == "[memory]"),
        key=lambda e: (e["ts"], e["args"]["Bytes"] > 0),  # frees first at one time
    )
    live, peak, at, sizes = 0, 0, 0.0, {}
    for e in records:
        addr, nbytes = e["args"]["Addr"], e["args"]["Bytes"]
        if nbytes > 0:
            live += nbytes - sizes.pop(addr, 0)  # a reused address closes the earlier block
            sizes[addr] = nbytes
        elif addr in sizes:
            live -= sizes.pop(addr)
        if live > peak:
            peak, at = live, e["ts"] - first
    return peak, at


def test_memory_curve_peak_and_live_set(g):
    g.ingest(CNN, "plot-mem")
    fig = g.plot.memory("plot-mem", live=1000)
    traces = by_name(fig)
    peak, at = memory_reference(CNN[0])
    assert max(traces["cpu"].y) == peak
    assert (traces["peak"].x[0], traces["peak"].y[0]) == (pytest.approx(at, abs=1e-3), peak)
    live = traces["live at the peak of cpu"]
    assert sum(live.customdata) == peak
    assert all(b - 1e-3 <= at < b + x for b, x in zip(live.base, live.x))


def test_streams_busy_time_is_the_union_of_kernels(g):
    files = sorted((DATA / "nccl_dlrm").glob("worker*.json.gz"))
    g.ingest(files, "plot-dlrm")
    bars = by_name(g.plot.streams("plot-dlrm"))["busy share"]
    got = {y: c[0] for y, c in zip(bars.y, bars.customdata)}
    expected = {}
    for path in files:
        doc = load(path)
        rank = doc["distributedInfo"]["rank"]
        spans: dict[tuple, list] = {}
        for e in doc["traceEvents"]:
            if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
                key = (e["args"].get("device", e["pid"]), e["args"].get("stream", e["tid"]))
                spans.setdefault(key, []).append((e["ts"], e["ts"] + e["dur"]))
        for (device, stream), s in spans.items():
            expected[f"rank{rank}/cuda:{device} stream:{stream}"] = union(s)
    assert got.keys() == expected.keys()
    for key, busy in expected.items():
        assert got[key] == pytest.approx(busy, abs=2e-3), key
    span = g.trace("plot-dlrm").span_us
    assert list(bars.x) == [pytest.approx(100 * got[y] / span, abs=1e-6) for y in bars.y]


def test_collectives_mark_the_straggler(g):
    files = sorted((DATA / "pytorch_dist").glob("straggler.rank*.json.gz"))
    g.ingest(files, "plot-job")
    traces = by_name(g.plot.collectives("plot-job"))
    waits = traces["wait for the last rank"]
    ref = reference(files)
    got = {(int(re.search(r"#(\d+)", t)[1]), int(y.split()[1])): x for t, y, x in zip(waits.text, waits.y, waits.x)}
    expected = {(k, r): w for k, c in enumerate(ref) for r, w in c["waits"].items()}
    assert got.keys() == expected.keys()
    for key, wait in expected.items():
        assert got[key] == pytest.approx(wait, abs=2e-3), key
    marks = traces["straggler (held the others up by 10,000 us or more)"]
    stragglers = [(k, c["last_rank"]) for k, c in enumerate(ref) if c["caused"] >= 10_000]
    assert [(int(re.search(r"#(\d+)", t)[1]), int(y.split()[1])) for t, y in zip(marks.text, marks.y)] == stragglers
    assert [r for _, r in stragglers] == [2]


def test_a_figure_the_trace_cannot_draw_says_why(g):
    g.ingest(CNN, "plot-cpu")
    with pytest.raises(tracegraph.errors.UserError, match="has no collectives joined across ranks"):
        g.plot.collectives("plot-cpu")
    with pytest.raises(tracegraph.errors.UserError, match="not available: the trace has no device stream"):
        g.plot.streams("plot-cpu")
