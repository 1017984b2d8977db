"""The web UI's server side on a real database (each engine): the memory-at
analysis, the timeline's lanes (and their kinds) and windows
(queries/lanes.py, queries/timeline.py, api/ui.py), the highlight sources a trace can answer and
the one it opens with, the op card, the page and its bundle, and the API
key on the /ui routes.

Expected values are worked out by hand from the tables in
``analysis_traces.small_gpu`` (see the comments at each test), or
recomputed independently from the seed trace's stored rows.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SEED_STEPSTATS
from fastapi.testclient import TestClient
from pydantic import TypeAdapter

from tracegraph.api.app import create_app
from tracegraph.api.settings import Settings
from tracegraph.queries import lanes as tlmod
from tracegraph.queries import timeline as tlread
from tracegraph.queries.run import run_analysis
from tracegraph.queries.types import TimelineInfo, Window

ROOT = Path(__file__).resolve().parent.parent
PYTORCH_SAMPLE = ROOT / "examples" / "traces" / "pytorch-cnn-cpu.pt.trace.json.gz"


ENGINE = {"uri": "embedded"}


@pytest.fixture(autouse=True)
def _engine(db_uri):
    """Every test here runs once per engine; client_for connects to it."""
    ENGINE["uri"] = db_uri


def client_for(**settings) -> TestClient:
    return TestClient(create_app(ENGINE["uri"], Settings(**settings)))


@pytest.fixture(scope="module")
def client(session_graph, db_uri):
    ENGINE["uri"] = db_uri
    with client_for() as c:
        yield c


def records(graph, name, trace, **params):
    return run_analysis(graph, name, trace, params).records()


# ------------------------------------------------------------------ memory-at


def test_memory_at_small(gpu, graph):
    # GPU_0_bfc allocations [alloc, free): a:1 100 B [0,30), a:2 50 B [5,8), a:3 200 B [10,60),
    # a:4 70 B [12,-), a:5 100 B [40,45), a:6 999 B persistent (no times: never listed);
    # GPU_1_bfc: a:7 40 B [0,10).
    def live(at, allocator=None):
        return [
            (r["allocator"], r["live_bytes"], r["bytes"], r["allocation"])
            for r in records(graph, "memory-at", gpu, at_us=at, allocator=allocator)
        ]

    # t=12: a:1, a:3 and a:4 (allocated at exactly 12: live); a:2 freed at 8; GPU_1's a:7 freed at 10.
    assert live(12) == [("GPU_0_bfc", 370, 200, "a:3"), ("GPU_0_bfc", 370, 100, "a:1"), ("GPU_0_bfc", 370, 70, "a:4")]
    # t=30: a:1 freed at exactly 30 is no longer live.
    assert live(30) == [("GPU_0_bfc", 270, 200, "a:3"), ("GPU_0_bfc", 270, 70, "a:4")]
    # t=40: a:5 joins; t=45: it is gone again.
    assert live(40) == [("GPU_0_bfc", 370, 200, "a:3"), ("GPU_0_bfc", 370, 100, "a:5"), ("GPU_0_bfc", 370, 70, "a:4")]
    assert [r[1] for r in live(45)] == [270, 270]
    # t=5.5 on both allocators: GPU_0 a:1 + a:2 = 150, GPU_1 a:7 = 40.
    assert live(5.5) == [("GPU_0_bfc", 150, 100, "a:1"), ("GPU_0_bfc", 150, 50, "a:2"), ("GPU_1_bfc", 40, 40, "a:7")]
    assert live(5.5, "GPU_1_bfc") == [("GPU_1_bfc", 40, 40, "a:7")]
    assert live(10, "GPU_1_bfc") == []  # freed at 10
    assert live(100) == [("GPU_0_bfc", 70, 70, "a:4")]  # never freed: live to the end
    assert live(-1) == []
    got = records(graph, "memory-at", gpu, at_us=12)
    assert all(isinstance(r["live_bytes"], int) and isinstance(r["bytes"], int) for r in got)
    assert [(r["kind"], r["op"], r["tensor"], r["shape"], r["alloc_us"], r["free_us"]) for r in got] == [
        ("output", "net/conv2/Conv2D", "net/conv2/Conv2D:0", "50", 10.0, 60.0),
        ("output", "net/conv1/Conv2D", "net/conv1/Conv2D:0", "25", 0.0, 30.0),
        ("output", "net/relu/Relu", "net/relu/Relu:0", "17", 12.0, None),
    ]


def test_memory_at_the_peak_is_peak_memory_on_seed(graph, alexnet):
    peak = records(graph, "peak-memory", alexnet)
    assert peak
    for alloc in {r["allocator"] for r in peak}:
        mine = [r for r in peak if r["allocator"] == alloc]
        at = records(graph, "memory-at", alexnet, at_us=mine[0]["peak_at_us"], allocator=alloc)
        assert sorted((r["bytes"], r["op"], r["alloc_us"]) for r in at) == sorted(
            (r["bytes"], r["op"], r["alloc_us"]) for r in mine
        )
        assert {r["live_bytes"] for r in at} == {mine[0]["peak_bytes"]}


def test_memory_at_equals_the_timeline_everywhere_on_seed(graph, alexnet):
    # At every point of the (full) memory timeline, and just before it, live_bytes is the step function's value.
    points = records(graph, "memory-timeline", alexnet, max_points=None)
    alloc = points[0]["allocator"]
    mine = [(r["t_us"], r["live_bytes"]) for r in points if r["allocator"] == alloc]
    for k in range(0, len(mine), max(1, len(mine) // 25)):
        t, value = mine[k]
        got = records(graph, "memory-at", alexnet, at_us=t, allocator=alloc)
        assert (got[0]["live_bytes"] if got else 0) == value
        assert sum(r["bytes"] for r in got) == value
        if k:
            before = records(graph, "memory-at", alexnet, at_us=t - 0.5, allocator=alloc)
            assert (before[0]["live_bytes"] if before else 0) == mine[k - 1][1]


# ------------------------------------------------------------------ timeline data


def lane_bars(tl, name):
    lane = next(lane for lane in tl.lanes if lane.name == name)
    return [(n, float(s), float(e)) for n, s, e in zip(lane.names, lane.start, lane.end)]


@pytest.fixture
def small_tl(gpu, graph):
    return tlmod.build(gpu, "k", *tlread.read_rows(graph, gpu))


def test_lanes_small(small_tl):
    tl = small_tl
    # Ops of GPU:0 by start: A[0,2) E[0,4) B[10,12) C[12,17) F[20,40) D[40,41) L[56,59) I[60,61) F2[60,77).
    # First fit: E overlaps A -> row 2; F2 overlaps I -> row 2; everything else fits row 1.
    assert [lane.name for lane in tl.lanes] == [
        "/device:GPU:0 ops #1",
        "/device:GPU:0 ops #2",
        "/device:GPU:0 memcpy",
        "/device:GPU:0 stream:1",
        "/device:GPU:0 stream:2",
        "/device:GPU:1 ops",
        "/device:GPU:1 memcpy",
    ]
    assert [b[0] for b in lane_bars(tl, "/device:GPU:0 ops #1")] == [
        "net/conv1/Conv2D",
        "net/conv2/Conv2D",
        "net/relu/Relu",
        "net/copy",
        "gradients/net/conv1/Conv2D_grad/Conv2DBackpropInput",
        "SGD/update",
        "net/late/Add",
    ]
    assert lane_bars(tl, "/device:GPU:0 ops #2") == [("_SOURCE", 0.0, 4.0), ("net/copy2", 60.0, 77.0)]
    assert [b[1:] for b in lane_bars(tl, "/device:GPU:0 stream:1")] == [(0, 10), (10, 30), (40, 55), (45, 50), (60, 62)]
    assert (tl.t_min, tl.t_max) == (0.0, 77.0)
    # The memcpy streams hold only copies (and are stored as kind memcpy); stream:1 and 2 only compute kernels.
    assert [lane.kind for lane in tl.lanes] == ["ops", "ops", "memcpy", "compute", "compute", "ops", "memcpy"]
    assert [lane.kernel_kinds for lane in tl.lanes] == [
        {},
        {},
        {"memcpy": 3},
        {"compute": 5},
        {"compute": 1},
        {},
        {"memcpy": 2},
    ]
    # cp_step is set on A, B, D (10 + 30 + 20 = 60 us, the heaviest chain).
    assert tl.critical == {
        "net/conv1/Conv2D",
        "net/conv2/Conv2D",
        "gradients/net/conv1/Conv2D_grad/Conv2DBackpropInput",
    }


def test_bulk_read_equals_the_row_query(alexnet, graph, gpu):
    """Graph.read_columns (each engine's fastest bulk read) gives exactly the
    rows of the portable one-row-per-node query."""
    from tracegraph.db.base import rows_query

    for trace in (alexnet, gpu):
        a = tlread.read_rows(graph, trace)
        for got, label, cols, where in (
            (a.ops, "Op", tlread.OP_COLUMNS, tlread.TIMED),
            (a.kernels, "Kernel", tlread.KERNEL_COLUMNS, tlread.TIMED),
            (a.streams, "Stream", tlread.STREAM_COLUMNS, ""),
        ):
            assert got
            rows = graph.run(rows_query(label, cols, where), trace=trace).rows
            want = [tuple(None if v is None else kind(v) for v, kind in zip(r, cols.values())) for r in rows]
            assert sorted(got, key=repr) == sorted(want, key=repr)
        assert (
            len(a[0])
            == graph.run(
                "MATCH (o:Op {trace: $t}) WHERE o.start_us IS NOT NULL RETURN count(o)", {"t": trace}, trace=trace
            ).rows[0][0]
        )


def test_window_merges_below_a_pixel(small_tl):
    tl = small_tl
    s1 = [lane.name for lane in tl.lanes].index("/device:GPU:0 stream:1")
    mask = tlmod.highlight_masks(tl, tl.critical)
    # [0, 80) over 8 px: 10 us a pixel. a1 [0,10) and b1 [10,30) and d1 [40,55) are a pixel or wider;
    # d2 [45,50) is narrow, and i1 [60,62) (narrow, 5 us after the running end 55) merges with it.
    w = tlmod.window(tl, 0, 80, 8, [s1], mask)
    (lane,) = w.lanes
    assert list(zip(lane.s, lane.e, lane.n)) == [(0, 10, 1), (10, 30, 1), (40, 55, 1), (45, 62, 2)]
    assert lane.h == [1, 1, 1, 1]  # a1, b1, d1, d2 are kernels of A, B, D; the merged bar holds d2
    assert lane.i[3] == -1 and [lane.names[str(i)][2] for i in lane.i[:3]] == [
        "net/conv1/Conv2D",
        "net/conv2/Conv2D",
        "gradients/net/conv1/Conv2D_grad/Conv2DBackpropInput",
    ]
    assert w.res == 10 and w.bars == 4 and not w.truncated
    # Zoomed to [40, 50) over 10 px: d1 and d2 only (a1, b1 end before 40; i1 starts after 50).
    (lane,) = tlmod.window(tl, 40, 50, 10, [s1]).lanes
    assert list(zip(lane.s, lane.e, lane.n, lane.h)) == [(40, 55, 1, 0), (45, 50, 1, 0)]
    # A cap below the total leaves later lanes empty and says so.
    w = tlmod.window(tl, 0, 80, 800, None, None, max_bars=6)
    assert w.truncated and sum(len(x.s) for x in w.lanes) <= 6


def test_window_keeps_every_bar_once_at_fine_resolution_on_seed(alexnet, graph):
    ops, kernels, streams = tlread.read_rows(graph, alexnet)
    tl = tlmod.build(alexnet, "k", ops, kernels, streams)
    w = tlmod.window(tl, tl.t_min, tl.t_max + 1, 8192)
    # The merged counts add up to every op and kernel with times.
    assert sum(sum(x.n) for x in w.lanes) == len(ops) + len(kernels)
    # Ops never overlap inside an op lane.
    for lane in tl.lanes:
        if lane.kind == "ops":
            assert all(lane.start[k + 1] >= lane.end[k] for k in range(lane.start.size - 1))


# ------------------------------------------------------------------ lane kinds


def test_lane_kind_rule():
    lk = tlmod.lane_kind
    assert lk({"memcpy": 3}, "compute") == "memcpy"  # the kernels agree: Kineto stores every stream as compute
    assert lk({"memcpy": 1, "memset": 2}, "compute") == "memcpy"  # memsets are memory traffic too
    assert lk({"communication": 4}, None) == "communication"
    assert lk({"compute": 2}, "memcpy") == "compute"
    assert lk({"compute": 2, "memcpy": 1}, "compute") == "compute"  # mixed: the stored kind
    assert lk({"compute": 2, "memcpy": 1}, "memcpy") == "memcpy"
    assert lk({"compute": 2, "communication": 1}, None) == "compute"
    assert lk({"kernel": 1}, "something-else") == "compute"
    assert lk({}, "memcpy") == "memcpy"


@pytest.fixture
def kineto(graph, tmp_path):
    """tests/kineto_builder.py's hand-built GPU trace, stored as ``ui-kineto``."""
    from kineto_builder import write

    from tracegraph.ingest.pipeline import ingest

    ingest(graph, [write(tmp_path / "hand.pt.trace.json.gz")], "ui-kineto")
    return "ui-kineto"


def kernel_kinds_by_stream(graph, trace):
    """(device, stream) -> {Kernel.kind: count}, straight from the stored kernels."""
    out: dict[tuple[str, str], dict[str, int]] = {}
    rows = graph.run(
        "MATCH (k:Kernel {trace: $trace}) RETURN k.device_name, k.stream_name, k.kind, count(k)", trace=trace
    ).rows
    for device, stream, kind, n in rows:
        out.setdefault((device, stream), {})[kind] = n
    return out


def test_lane_kinds_on_a_kineto_trace(client, kineto, graph):
    # kineto_builder: stream 7 runs gemm and add_kernel and a memset, stream 8 only the 4,000-byte DtoH
    # copy, stream 9 only the NCCL all-reduce kernel. Kineto stores every stream as kind compute, and no
    # lane's name says copy: only the kernels tell.
    info = client.get(f"/ui/traces/{kineto}/timeline").json()
    TypeAdapter(TimelineInfo).validate_python(info)  # the documented response model holds what the route sends
    streams = {lane["name"]: (lane["kind"], lane["kernel_kinds"]) for lane in info["lanes"] if lane["kind"] != "ops"}
    assert streams == {
        "cuda:0 stream:7": ("compute", {"compute": 2, "memset": 1}),
        "cuda:0 stream:8": ("memcpy", {"memcpy": 1}),
        "cuda:0 stream:9": ("communication", {"communication": 1}),
    }
    stored = graph.run("MATCH (s:Stream {trace: $trace}) RETURN s.name, s.kind ORDER BY s.name", trace=kineto).rows
    assert [tuple(r) for r in stored] == [("stream:7", "compute"), ("stream:8", "compute"), ("stream:9", "compute")]
    assert {lane["kind"] for lane in info["lanes"] if lane["stream"] is None} == {"ops"}


def test_lane_kinds_on_seed(client, alexnet, graph):
    # AlexNet's GPU:0 stream:15 only ran copies (TF stores it as a memcpy stream); its name does not say so.
    info = client.get(f"/ui/traces/{alexnet}/timeline").json()
    want = kernel_kinds_by_stream(graph, alexnet)
    stream_lanes = [lane for lane in info["lanes"] if lane["kind"] != "ops"]
    assert {(lane["device"], lane["stream"]) for lane in stream_lanes} == set(want)
    for lane in stream_lanes:
        kinds = want[(lane["device"], lane["stream"])]
        assert lane["kernel_kinds"] == kinds
        assert lane["kind"] == ("memcpy" if set(kinds) == {"memcpy"} else "compute"), lane
    copy_lanes = [lane["name"] for lane in stream_lanes if lane["kind"] == "memcpy"]
    assert copy_lanes == ["/device:GPU:0 stream:15"]
    assert all(lane["stream"] is None and lane["kernel_kinds"] == {} for lane in info["lanes"] if lane["kind"] == "ops")


# ------------------------------------------------------------------ highlight sources per trace


@pytest.fixture
def pytorch(graph):
    """The bundled PyTorch sample (CPU only: no dependencies between ops, an observed critical path)."""
    from tracegraph.ingest.pipeline import ingest

    ingest(graph, [PYTORCH_SAMPLE], "ui-pytorch")
    return "ui-pytorch"


def test_default_highlight_is_the_best_path_the_trace_has(client, alexnet, pytorch, graph):
    defaults = {}
    for trace in (alexnet, pytorch):
        facts = graph.trace_facts(trace)
        info = client.get(f"/ui/traces/{trace}/timeline").json()
        want = (
            "critical-path"
            if facts["has_deps"]
            else "observed-critical-path"
            if facts.get("observed_path_us") is not None
            else None
        )
        assert info["highlight_default"] == want
        defaults[trace] = info["highlight_default"]
    assert defaults == {alexnet: "critical-path", pytorch: "observed-critical-path"}
    info = client.get(f"/ui/traces/{pytorch}/timeline").json()
    # A source is available exactly when its analysis is: the same reason, from the analysis's @requires.
    why = run_analysis(graph, "critical-path", pytorch).unavailable
    assert why is not None and why.reason.startswith("the trace has no dependencies between ops (pytorch, ")
    assert run_analysis(graph, "observed-critical-path", pytorch).unavailable is None
    assert [(h["name"], h["available"], h["note"]) for h in info["highlights"]] == [
        ("critical-path", False, why.reason),
        ("observed-critical-path", True, None),
    ]
    # Asking for the dependency critical path anyway: nothing marked, and the window says why.
    w = client.get(
        f"/ui/traces/{pytorch}/timeline/window",
        params={"t0": info["t_min"], "t1": info["t_max"], "px": 1000, "highlight": "critical-path"},
    ).json()
    TypeAdapter(Window).validate_python(w)
    assert w["highlight_ops"] == 0 and w["highlight_note"] == why.note
    assert w["bars"] > 0 and not any(h for lane in w["lanes"] for h in lane["h"])


def test_observed_path_highlight_marks_the_ops_on_it(client, pytorch, graph):
    info = client.get(f"/ui/traces/{pytorch}/timeline").json()
    w = client.get(
        f"/ui/traces/{pytorch}/timeline/window",
        params={"t0": info["t_min"], "t1": info["t_max"] + 1, "px": 8192, "highlight": "observed-critical-path"},
    ).json()
    on_path = {
        (name, start, end)
        for name, start, end in graph.run(
            "MATCH (o:Op {trace: $trace}) WHERE o.ocp_steps IS NOT NULL RETURN o.name, o.start_us, o.end_us",
            trace=pytorch,
        ).rows
    }
    assert on_path and w["highlight_ops"] == len(on_path)  # a CPU trace: ops only, no kernels
    hl_bars = []  # (name or None for merged bars, start, end)
    singles = 0
    for lane in w["lanes"]:
        for k, i in enumerate(lane["i"]):
            s, e = lane["s"][k], lane["e"][k]
            if i >= 0:
                singles += 1
                name = lane["names"][str(i)][0]
                assert bool(lane["h"][k]) == ((name, s, e) in on_path), (name, s, e)
                if lane["h"][k]:
                    hl_bars.append((name, s, e))
            elif lane["h"][k]:
                assert any(s <= a and b <= e for _n, a, b in on_path)
                hl_bars.append((None, s, e))
    assert singles > len(on_path) / 2
    # Independently, from the analysis: every op-body segment of the observed critical path lies inside
    # a highlighted bar of its op (or a merged highlighted bar).
    segments = [r for r in records(graph, "observed-critical-path", pytorch) if r["kind"] == "cpu_op"]
    assert segments
    for r in segments:
        a, b = r["start_us"], r["start_us"] + r["dur_us"]
        assert any(n in (r["event"], None) and s <= a + 1e-6 and b - 1e-6 <= e for n, s, e in hl_bars), r


def test_marked_masks_mark_runs_not_names():
    # Two runs of aten::empty on one thread, only the second on the path; a kernel on a stream likewise.
    ops = [("aten::empty", "t", "cpu", 0.0, 2.0, None), ("aten::empty", "t", "cpu", 5.0, 6.0, None)]
    kernels = [("k", "compute", "aten::empty", "cuda:0", "stream:7", 1.0, 3.0)]
    tl = tlmod.build("t", "k", ops, kernels, [("stream:7", "cuda:0", "compute")])
    masks = tlmod.marked_masks(tl, [("aten::empty", 5.0, 6.0)], [])
    assert [lane.name for lane in tl.lanes] == ["cpu ops", "cuda:0 stream:7"]
    assert [m.tolist() for m in masks] == [[False, True], [False]]
    # By name (highlight_masks), both runs and the kernel of either would be marked.
    assert [m.tolist() for m in tlmod.highlight_masks(tl, {"aten::empty"})] == [[True, True], [True]]


# ------------------------------------------------------------------ /ui routes


def test_timeline_routes_on_seed(client, alexnet, graph):
    info = client.get(f"/ui/traces/{alexnet}/timeline").json()
    assert info["time_unit"] == "us" and info["note"] is None
    n_ops = graph.run(
        "MATCH (o:Op {trace: $t}) WHERE o.start_us IS NOT NULL RETURN count(o)", {"t": alexnet}, trace=alexnet
    ).rows[0][0]
    n_k = graph.run("MATCH (k:Kernel {trace: $t}) RETURN count(k)", {"t": alexnet}, trace=alexnet).rows[0][0]
    assert sum(lane["bars"] for lane in info["lanes"] if lane["kind"] == "ops") == n_ops
    assert sum(lane["bars"] for lane in info["lanes"] if lane["kind"] != "ops") == n_k
    r = client.get(
        f"/ui/traces/{alexnet}/timeline/window",
        params={"t0": info["t_min"], "t1": info["t_max"] + 1, "px": 8192, "highlight": "critical-path"},
    )
    assert r.status_code == 200, r.text
    w = r.json()
    cp = {row["op"] for row in records(graph, "critical-path", alexnet)}
    assert w["highlight_ops"] == len(cp)
    # Every single bar is highlighted exactly when its op (itself, or the kernel's op) is on the
    # critical path, and every critical-path op with times lies inside a highlighted bar (single,
    # or merged below a pixel) of an op lane.
    lanes = {lane["id"]: lane for lane in info["lanes"]}
    hl_bars = []
    for lane in w["lanes"]:
        for k, i in enumerate(lane["i"]):
            if i >= 0:
                name, _type, op = lane["names"][str(i)]
                assert bool(lane["h"][k]) == (op in cp), (name, op)
            if lanes[lane["id"]]["kind"] == "ops" and lane["h"][k]:
                hl_bars.append((lane["s"][k], lane["e"][k]))
    timed = graph.run(
        "MATCH (o:Op {trace: $t}) WHERE o.cp_step IS NOT NULL AND o.start_us IS NOT NULL "
        "RETURN o.name, o.start_us, o.end_us",
        {"t": alexnet},
        trace=alexnet,
    ).rows
    assert timed
    for name, start, end in timed:
        assert any(s <= start and end <= e for s, e in hl_bars), name
    assert sum(1 for lane in w["lanes"] for h in lane["h"] if h) < sum(len(lane["h"]) for lane in w["lanes"])


def test_timeline_routes_refuse_bad_requests(client, alexnet):
    base = f"/ui/traces/{alexnet}/timeline/window"
    # An empty window (t1 <= t0) is an answer with no bars, not an error.
    empty = client.get(base, params={"t0": 5, "t1": 5})
    assert empty.status_code == 200 and all(not lane["n"] for lane in empty.json()["lanes"]), empty.text
    for params in (
        {"t0": 0, "t1": 1, "highlight": "nope"},
        {"t0": 0, "t1": 1, "px": 0},
        {"t0": 0, "t1": 1, "lanes": "1,x"},
        {"t0": "nan", "t1": 1},
        {"t1": 1},
    ):
        r = client.get(base, params=params)
        assert r.status_code == 422, (params, r.text)
        assert r.json()["detail"]
    for path in (
        "/ui/traces/no-such/timeline",
        "/ui/traces/no-such/timeline/window?t0=0&t1=1",
        "/ui/traces/no-such/op?name=x",
        f"/ui/traces/{alexnet}/op?name=no-such-op",
    ):
        r = client.get(path)
        assert r.status_code == 404, (path, r.text)
        assert "\n" not in r.json()["detail"]


def test_op_card_on_seed(client, alexnet):
    # conv2/Conv2D in tf1-alexnet-stepstats.pbtxt: reads pool1:0 (128x64x27x27) and the 5x5x64x192
    # weights, writes 128x192x27x27 floats (71,663,616 bytes = 128*192*27*27*4).
    d = client.get(f"/ui/traces/{alexnet}/op", params={"name": "conv2/Conv2D"}).json()
    assert d["type"] == "Conv2D" and d["device"] == "/device:GPU:0"
    assert [(t["name"], t["shape"]) for t in d["inputs"]] == [
        ("pool1:0", "128x64x27x27"),
        ("conv2/weights/read:0", "5x5x64x192"),
    ]
    assert [(t["shape"], t["bytes"]) for t in d["outputs"]] == [("128x192x27x27", 128 * 192 * 27 * 27 * 4)]
    assert d["kernels"] and all(k["name"].startswith("conv2/Conv2D") for k in d["kernels"])
    assert "conv2/Conv2D" in SEED_STEPSTATS.read_text()


def test_highlight_sources(client):
    got = client.get("/ui/highlights").json()
    assert got[:2] == [
        {
            "name": "critical-path",
            "label": "critical path (dependency DAG)",
            "analysis": "critical-path",
            "column": "op",
        },
        {
            "name": "observed-critical-path",
            "label": "observed critical path",
            "analysis": "observed-critical-path",
            "column": "event",
        },
    ]
    from tracegraph.queries.catalog import catalog

    assert all(s["analysis"] in catalog() for s in got)


def test_replaced_trace_is_read_again(client, graph):
    from test_api import upload

    assert upload(client, "ui-replace", SEED_STEPSTATS).status_code == 201
    first = client.get("/ui/traces/ui-replace/timeline").json()
    small = ROOT / "examples" / "traces" / "megengine-resnet50-profile.json"
    assert upload(client, "ui-replace", small, replace=True).status_code == 201
    second = client.get("/ui/traces/ui-replace/timeline").json()
    assert first["lanes"] != second["lanes"]
    n = graph.run(
        "MATCH (o:Op {trace: 'ui-replace'}) WHERE o.start_us IS NOT NULL RETURN count(o)", trace="ui-replace"
    ).rows[0][0]
    assert sum(lane["bars"] for lane in second["lanes"] if lane["kind"] == "ops") == n


def test_page_and_bundle(client):
    r = client.get("/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert '<script src="/static/app.js"></script>' in r.text
    for path, kind in (
        ("/static/app.js", "javascript"),
        ("/static/app.css", "text/css"),
        ("/static/THIRD_PARTY_LICENSES.txt", "text/plain"),
    ):
        r = client.get(path)
        assert r.status_code == 200 and kind in r.headers["content-type"], path
    licenses = client.get("/static/THIRD_PARTY_LICENSES.txt").text
    for pkg in ("uplot", "cytoscape", "cytoscape-dagre", "@dagrejs/dagre"):
        assert f"\n{pkg} " in licenses
    assert licenses.count("(MIT)") >= 4 and "Permission is hereby granted" in licenses


def test_cypher_takes_a_trace(client, alexnet, graph):
    q = "MATCH (o:Op {trace: $trace}) RETURN count(o) AS n"
    n = graph.run(q, trace=alexnet).rows[0][0]
    r = client.post("/cypher", json={"query": q, "trace": alexnet})
    assert r.status_code == 200 and r.json()["rows"] == [[n]]
    # The field wins over a `trace` in params; without either the statement
    # cannot see the trace's ops ($trace is missing: Neo4j refuses it, 400;
    # FalkorDB's catalog graph has no Op to match, 0).
    r = client.post("/cypher", json={"query": q, "trace": alexnet, "params": {"trace": "other"}})
    assert r.json()["rows"] == [[n]]
    r = client.post("/cypher", json={"query": q})
    assert r.status_code == 400 or r.json()["rows"] == [[0]]
    assert client.post("/cypher", json={"query": q, "trace": ""}).status_code == 422
    assert client.post("/cypher", json={"query": q, "nope": 1}).status_code == 422


def test_api_key_on_ui_routes(session_graph, alexnet):
    with client_for(api_key="s3cret") as c:
        assert c.get("/").status_code == 200  # the page and bundle hold no data
        assert c.get("/static/app.js").status_code == 200
        for path in (
            "/ui/highlights",
            f"/ui/traces/{alexnet}/timeline",
            f"/ui/traces/{alexnet}/timeline/window?t0=0&t1=10",
            f"/ui/traces/{alexnet}/op?name=conv2/Conv2D",
        ):
            r = c.get(path)
            assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer", path
            assert c.get(path, headers={"Authorization": "Bearer wrong"}).status_code == 401
            assert c.get(path + ("&" if "?" in path else "?") + "key=s3cret").status_code == 401  # never in URLs
            assert c.get(path, headers={"Authorization": "Bearer s3cret"}).status_code == 200, path


def test_timeline_of_untimed_and_step_timed_traces(client, graph):
    from conftest import SEED_CHAINER, SEED_OPNAMES
    from test_api import upload

    assert upload(client, "ui-opnames", SEED_OPNAMES).status_code == 201
    info = client.get("/ui/traces/ui-opnames/timeline").json()
    assert info["lanes"] == [] and info["note"] == "not available: the trace has no op or kernel times"
    # Chainer: 92 ops, one per step, op i in [i, i + 1): one lane, no overlaps, span 0..92.
    assert info["highlight_default"] is None  # no times: no observed path; no dependencies either
    assert [(h["name"], h["available"]) for h in info["highlights"]] == [
        ("critical-path", False),
        ("observed-critical-path", False),
    ]
    assert upload(client, "ui-chainer", SEED_CHAINER).status_code == 201
    info = client.get("/ui/traces/ui-chainer/timeline").json()
    assert info["time_unit"] == "step" and (info["t_min"], info["t_max"]) == (0, 92)
    assert [(lane["kind"], lane["bars"]) for lane in info["lanes"]] == [("ops", 92)]
    w = client.get("/ui/traces/ui-chainer/timeline/window", params={"t0": 0, "t1": 92, "px": 92}).json()
    assert w["lanes"][0]["n"] == [1] * 92 and w["lanes"][0]["s"] == list(range(92))


def test_upload_form_offers_every_format():
    """The upload form's format list is the server's (sources in ui/)."""
    import re
    from pathlib import Path

    from tracegraph.ingest import formats

    js = (Path(__file__).resolve().parent.parent / "ui" / "src" / "views" / "traces.js").read_text()
    listed = re.search(r"const FORMATS = \[(.*?)\];", js, re.S)
    assert listed is not None
    assert sorted(re.findall(r'"([\w-]+)"', listed.group(1))) == sorted(["auto", *formats.names()])
