"""The analysis catalog on a real embedded FalkorDB.

Hand-built traces (``analysis_traces.small_gpu`` and friends) have answers
worked out by hand in the comments; the seed StepStats trace checks the
acceptance properties against independent recomputations from the stored
graph (plain Python over raw kernel / op rows, not the enrichment code).
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from analysis_traces import chain, slowed, small_gpu, store
from conftest import SEED_STEPSTATS

from tracegraph.db.base import SCHEMA_VERSION
from tracegraph.errors import NotFound, UserError
from tracegraph.facts import Fact
from tracegraph.ingest.frames import OP_COLUMNS, frame
from tracegraph.ingest.pipeline import parse_files
from tracegraph.queries.catalog import catalog, get, parse_header
from tracegraph.queries.run import run_analysis

CYPHER = Path(__file__).resolve().parent.parent / "cypher"

# Parameters to run an analysis with on the seed, for those that need
# more than the defaults ("SELF": the seed trace itself). Every analysis of
# the catalog runs; a new one needs an entry only when it has such a
# parameter.
SEED_PARAMS = {
    "memory-at": {"at_us": "5000"},
    "op-neighborhood": {"op": "conv2/Conv2D"},
    "op-neighborhood-graph": {"op": "conv2/Conv2D"},
    "trace-diff": {"base": "SELF"},
    "trace-diff-summary": {"base": "SELF"},
}
ANALYSES = sorted(catalog())


def rows(graph, name, trace, **params):
    res = run_analysis(graph, name, trace, {k: str(v) if v is not None else None for k, v in params.items()})
    assert res.columns == [c.name for c in get(name).columns], "RETURN columns must be the @column contract"
    return res.records()


# ------------------------------------------------------------------ catalog headers


@pytest.mark.parametrize("name", ANALYSES)
def test_header_is_complete(name):
    a = get(name)
    text = (CYPHER / f"{name}.cypher").read_text()
    assert parse_header(text, f"{name}.cypher") == a
    assert a.summary and a.definition and a.columns
    assert a.params[0].name == "trace"
    header = text.split("\n// Neo4j Browser:\n", 1)
    assert len(header) == 2, "header ends with a `// Neo4j Browser:` block"
    browser = [line for line in header[1].splitlines() if line.startswith("//")]
    # (so no comment inside the statement either)
    assert browser and all(line.startswith("//   :param ") for line in browser)
    assert {line.split()[2] for line in browser} == {p.name for p in a.params}
    # Portability rules (constructs one of the two engines lacks; a
    # `CALL { ... UNION ALL ... }` subquery runs on both, as the parity test shows).
    body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))
    assert not re.search(r"(?i)\b(EXISTS|COUNT)\s*\{|\bapoc\.|\bround\s*\(", body)
    assert not re.search(r"(?i)^\s*(OPTIONAL\s+)?MATCH\b.*shortestPath", body, re.M)


def test_order_choices_are_enforced(gpu, graph):
    assert get("tensor-lifetimes").param("order").choices == ["bytes", "byte_us", "idle_us"]
    with pytest.raises(UserError, match="one of bytes, byte_us, idle_us"):
        run_analysis(graph, "tensor-lifetimes", gpu, {"order": "size"})


# ------------------------------------------------------------------ slack


def test_slack_small(gpu, graph):
    # ef: A10 B40 C15 D60 | E4 -> I6 | F20 F2 15 H10 J4 L3; length 60.
    # lf: D60, B40, C40, A10; I60, E58; the isolated ops 60.
    got = [(r["op"], r["earliest_start_us"], r["latest_start_us"], r["slack_us"]) for r in rows(graph, "slack", gpu)]
    assert got == [
        ("net/conv1/Conv2D", 0, 0, 0),
        ("net/conv2/Conv2D", 10, 10, 0),
        ("gradients/net/conv1/Conv2D_grad/Conv2DBackpropInput", 40, 40, 0),
        ("net/relu/Relu", 10, 35, 25),
        ("net/copy", 0, 40, 40),
        ("net/copy2", 0, 45, 45),
        ("net/p2p", 0, 50, 50),
        ("_SOURCE", 0, 54, 54),
        ("net/late/Add", 4, 58, 54),
        ("net/mystery", 0, 56, 56),
        ("SGD/update", 0, 57, 57),
    ]  # net/unused did not execute: no row
    assert [r["op"] for r in rows(graph, "slack", gpu, max_slack_us=25)] == [
        "net/conv1/Conv2D",
        "net/conv2/Conv2D",
        "gradients/net/conv1/Conv2D_grad/Conv2DBackpropInput",
        "net/relu/Relu",
    ]
    zero = [r["op"] for r in rows(graph, "slack", gpu, max_slack_us=0)]
    assert zero == [r["op"] for r in rows(graph, "critical-path", gpu)]


def test_slack_zero_is_exactly_the_critical_path_on_seed(graph, alexnet):
    zero = rows(graph, "slack", alexnet, max_slack_us=0)
    cp = rows(graph, "critical-path", alexnet)
    assert len(cp) > 10
    assert sorted(r["op"] for r in zero) == sorted(r["op"] for r in cp)
    assert all(r["slack_us"] == 0 for r in zero)
    every = rows(graph, "slack", alexnet)
    assert len(every) == 118 and all(r["slack_us"] > 0 for r in every[len(zero) :])
    # Independent check of the definition: latest - earliest start = slack, and
    # the earliest starts along the path are the running sums of the weights.
    assert all(r["latest_start_us"] - r["earliest_start_us"] == pytest.approx(r["slack_us"], abs=1e-6) for r in every)
    by_op = {r["op"]: r for r in zero}
    total = 0.0
    for r in cp:
        assert by_op[r["op"]]["earliest_start_us"] == pytest.approx(total)
        total += r["dur_us"]


# ------------------------------------------------------------------ op types, phases, layers


def test_op_type_breakdown_small(gpu, graph):
    got = [
        (r["type"], r["count"], r["total_us"], r["mean_us"], r["p95_us"], r["share"])
        for r in rows(graph, "op-type-breakdown", gpu)
    ]
    total = 123.0  # 10+30+5+20+4+20+15+10+2+4+3; net/unused did not execute
    assert got == [
        ("Conv2D", 2, 40, 20, 30, pytest.approx(40 / total)),  # p95 of [10, 30]: ceil(1.9) = 2nd value
        ("Conv2DBackpropInput", 1, 20, 20, 20, pytest.approx(20 / total)),
        ("MEMCPYHtoD", 1, 20, 20, 20, pytest.approx(20 / total)),
        ("MEMCPYDtoH", 1, 15, 15, 15, pytest.approx(15 / total)),
        ("MEMCPYDtoD", 1, 10, 10, 10, pytest.approx(10 / total)),
        ("Relu", 1, 5, 5, 5, pytest.approx(5 / total)),
        ("MEMCPY", 1, 4, 4, 4, pytest.approx(4 / total)),
        ("NoOp", 1, 4, 4, 4, pytest.approx(4 / total)),
        ("ApplyGradientDescent", 1, 3, 3, 3, pytest.approx(3 / total)),
        ("Add", 1, 2, 2, 2, pytest.approx(2 / total)),
    ]


def test_op_type_p95_is_nearest_rank(graph):
    trace = store(graph, chain(20, weights=[float(w) for w in range(20, 0, -1)]), "p95")
    (r,) = rows(graph, "op-type-breakdown", trace)
    # 20 weights 1..20: nearest rank ceil(0.95 * 20) = 19th -> 19 (interpolation would give 19.05).
    assert (r["type"], r["count"], r["total_us"], r["mean_us"], r["p95_us"], r["share"]) == (
        "Mul",
        20,
        210,
        10.5,
        19,
        1.0,
    )


def test_op_type_breakdown_totals_equal_summed_weights_on_seed(graph, alexnet):
    ops = graph.run(
        "MATCH (o:Op {trace: $t}) WHERE o.executed RETURN o.type, o.weight_us", {"t": alexnet}, trace=alexnet
    ).rows
    per_type: dict = {}
    for t, w in ops:
        per_type.setdefault(t, []).append(w)
    got = rows(graph, "op-type-breakdown", alexnet)
    assert {r["type"] for r in got} == set(per_type)
    for r in got:
        ws = sorted(per_type[r["type"]])
        assert r["count"] == len(ws)
        assert r["total_us"] == pytest.approx(sum(ws))
        assert r["mean_us"] == round(sum(ws) / len(ws), 3)  # times to the nanosecond
        assert r["p95_us"] == ws[-(-95 * len(ws) // 100) - 1]
    assert sum(r["share"] for r in got) == pytest.approx(1.0)
    assert [r["total_us"] for r in got] == sorted((r["total_us"] for r in got), reverse=True)


def test_phase_breakdown_small(gpu, graph):
    got = [(r["phase"], r["ops"], r["total_us"], r["bytes_allocated"]) for r in rows(graph, "phase-breakdown", gpu)]
    assert got == [
        ("forward", 6, 61, 460),  # A B C H I J; bytes: A 100+50, B 200, C 70, H 40 (A's persistent 999 not counted)
        ("backward", 1, 20, 100),
        ("optimizer", 1, 3, 0),
        ("communication", 0, 0, 0),
        ("other", 3, 39, 0),  # E, and F / F2 whose phase is unknown
    ]


def test_phase_breakdown_on_seed_adds_up(graph, alexnet):
    got = rows(graph, "phase-breakdown", alexnet)
    assert [r["phase"] for r in got] == ["forward", "backward", "optimizer", "communication", "other"]
    assert sum(r["ops"] for r in got) == 118
    total = graph.run("MATCH (o:Op {trace: $t}) RETURN sum(o.weight_us)", {"t": alexnet}, trace=alexnet).rows[0][0]
    assert sum(r["total_us"] for r in got) == pytest.approx(total)
    allocated = graph.run(
        "MATCH (a:Allocation {trace: $t}) WHERE a.alloc_us IS NOT NULL RETURN sum(a.bytes)",
        {"t": alexnet},
        trace=alexnet,
    ).rows[0][0]
    assert sum(r["bytes_allocated"] for r in got) == allocated


def test_layer_breakdown_small(gpu, graph):
    got = [(r["scope"], r["ops"], r["total_us"], r["peak_live_bytes"]) for r in rows(graph, "layer-breakdown", gpu)]
    # Peak: GPU_0_bfc 370 at t=12, live a1 (A) 100 + a3 (B) 200 + a4 (C) 70; H's bytes are on GPU_1_bfc.
    assert got == [("net", 8, 96, 370), ("gradients", 1, 20, 0), ("(root)", 1, 4, 0), ("SGD", 1, 3, 0)]
    got2 = [
        (r["scope"], r["ops"], r["total_us"], r["peak_live_bytes"])
        for r in rows(graph, "layer-breakdown", gpu, depth=2)
    ]
    assert got2 == [
        ("net", 4, 49, 0),
        ("net/conv2", 1, 30, 200),
        ("gradients/net", 1, 20, 0),
        ("net/conv1", 1, 10, 100),
        ("net/relu", 1, 5, 70),
        ("(root)", 1, 4, 0),
        ("SGD", 1, 3, 0),
        ("net/late", 1, 2, 0),
    ]
    assert rows(graph, "layer-breakdown", gpu, depth=1) == rows(graph, "layer-breakdown", gpu)
    for depth in (0, -3):  # declared INTEGER[1..]: refused before any database sees it
        with pytest.raises(UserError, match=r"parameter depth: .* out of range \(at least 1\)"):
            rows(graph, "layer-breakdown", gpu, depth=depth)


def test_layer_breakdown_on_seed_sums_to_the_peak(graph, alexnet):
    peak = graph.run(
        "MATCH (t:Trace {trace: $t, uid: 'trace'}) RETURN t.memory_peak_bytes", {"t": alexnet}, trace=alexnet
    ).rows[0][0]
    for depth in (1, 2, 5):
        got = rows(graph, "layer-breakdown", alexnet, depth=depth)
        assert sum(r["peak_live_bytes"] for r in got) == peak
        assert sum(r["ops"] for r in got) == 118
    names = graph.run("MATCH (o:Op {trace: $t}) RETURN o.name, o.weight_us", {"t": alexnet}, trace=alexnet).rows
    conv1 = sum(w for n, w in names if n.startswith("conv1/"))
    assert {r["scope"]: r["total_us"] for r in rows(graph, "layer-breakdown", alexnet)}["conv1"] == pytest.approx(conv1)


# ------------------------------------------------------------------ memory


def test_memory_timeline_small(gpu, graph):
    def pts(**p):
        return [(r["allocator"], r["t_us"], r["live_bytes"]) for r in rows(graph, "memory-timeline", gpu, **p)]

    full = [
        ("GPU_0_bfc", t, b)
        for t, b in [(0, 100), (5, 150), (8, 100), (10, 300), (12, 370), (30, 270), (40, 370), (45, 270), (60, 70)]
    ] + [("GPU_1_bfc", 0, 40), ("GPU_1_bfc", 10, 0)]
    assert pts() == full
    assert pts(max_points=None) == full
    # 9 points, buckets of ceil(9/3) = 3: each bucket's highest point.
    assert pts(max_points=3) == [
        ("GPU_0_bfc", 5, 150),
        ("GPU_0_bfc", 12, 370),
        ("GPU_0_bfc", 40, 370),
        ("GPU_1_bfc", 0, 40),
        ("GPU_1_bfc", 10, 0),
    ]
    assert pts(max_points=2) == [
        ("GPU_0_bfc", 12, 370),
        ("GPU_0_bfc", 40, 370),
        ("GPU_1_bfc", 0, 40),
        ("GPU_1_bfc", 10, 0),
    ]
    # One point: the peak, at the first time it is reached (the tie at t=40 loses).
    assert pts(max_points=1) == [("GPU_0_bfc", 12, 370), ("GPU_1_bfc", 0, 40)]
    with pytest.raises(UserError, match=r"parameter max_points: .* out of range"):
        pts(max_points=0)


def test_memory_timeline_peak_equals_peak_memory_on_seed(graph, alexnet):
    peaks = {r["allocator"]: (r["peak_bytes"], r["peak_at_us"]) for r in rows(graph, "peak-memory", alexnet)}
    assert peaks
    for max_points in (None, 1000, 7, 1):
        got = rows(graph, "memory-timeline", alexnet, max_points=max_points)
        for alloc, (peak, at) in peaks.items():
            mine = [r for r in got if r["allocator"] == alloc]
            top = max(r["live_bytes"] for r in mine)
            assert top == peak
            assert min(r["t_us"] for r in mine if r["live_bytes"] == top) == at
            if max_points:
                assert len(mine) <= max_points
            assert [r["t_us"] for r in mine] == sorted(r["t_us"] for r in mine)


def test_tensor_lifetimes_small(gpu, graph):
    def got(**p):
        return [
            (r["op"], r["tensor"], r["bytes"], r["alloc_us"], r["free_us"], r["held_us"], r["byte_us"], r["idle_us"])
            for r in rows(graph, "tensor-lifetimes", gpu, **p)
        ]

    a1 = ("net/conv1/Conv2D", "net/conv1/Conv2D:0", 100, 0, 30, 30, 3000, 13)  # last reader C ends at 17
    a2 = ("net/conv1/Conv2D", None, 50, 5, 8, 3, 150, 6)  # unread temp: after its op's end (2)
    a3 = ("net/conv2/Conv2D", "net/conv2/Conv2D:0", 200, 10, 60, 50, 10000, 19)  # read by D, ends at 41
    a4 = ("net/relu/Relu", "net/relu/Relu:0", 70, 12, None, 65, 4550, 36)  # never freed: held to the span, 77
    a5 = ("gradients/net/conv1/Conv2D_grad/Conv2DBackpropInput", None, 100, 40, 45, 5, 500, 4)
    a7 = ("net/p2p", None, 40, 0, 10, 10, 400, 0)  # freed at 10 before its op's end at 12: 0, not -2
    assert got() == [a3, a1, a5, a4, a2, a7]  # 100-byte tie: earlier alloc first; persistent 999 left out
    assert got(order="byte_us") == [a3, a4, a1, a5, a7, a2]
    assert got(order="idle_us") == [a4, a3, a1, a2, a5, a7]
    assert got(order="idle_us", n=2) == [a4, a3]


# ------------------------------------------------------------------ streams and copies


def test_stream_utilization_small(gpu, graph):
    def got(**p):
        return [
            (
                r["device"],
                r["stream"],
                r["kernels"],
                r["busy_us"],
                r["window_us"],
                r["utilization"],
                r["gaps"],
                r["gap_us"],
            )
            for r in rows(graph, "stream-utilization", gpu, **p)
        ]

    # stream:1 [0,10) [10,30) [40,55) [45,50) [60,62): union 30 + 15 + 2 = 47; gaps 10 (at 30) and 5 (55 -> 60,
    # after the running max end 55, not the previous kernel's end 50). memcpy GPU:0 [20,40) [60,70) [72,77):
    # gaps 20 and 2. GPU:1 [0,10) [20,24): one gap of exactly 10, which is not longer than 10.
    assert got() == [
        ("/device:GPU:0", "memcpy", 3, 35, 77, pytest.approx(35 / 77), 1, 20),
        ("/device:GPU:0", "stream:1", 5, 47, 77, pytest.approx(47 / 77), 0, 0),
        ("/device:GPU:0", "stream:2", 1, 10, 77, pytest.approx(10 / 77), 0, 0),
        ("/device:GPU:1", "memcpy", 2, 14, 77, pytest.approx(14 / 77), 0, 0),
    ]
    assert [(g[1], g[6], g[7]) for g in got(min_gap_us=1)] == [
        ("memcpy", 2, 22),
        ("stream:1", 2, 15),
        ("stream:2", 0, 0),
        ("memcpy", 1, 10),
    ]
    assert [(g[6], g[7]) for g in got(min_gap_us=9.99)] == [(1, 20), (1, 10), (0, 0), (1, 10)]


def _union_length(intervals):
    total, end = 0.0, None
    for s, e in sorted(intervals):
        if end is None or s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total


def test_stream_busy_is_union_of_kernel_intervals_on_seed(graph, alexnet):
    kernels = graph.run(
        "MATCH (k:Kernel {trace: $t})-[:ON_STREAM]->(s:Stream) RETURN s.name, k.start_us, k.end_us, "
        "k.start_us + k.dur_us",
        {"t": alexnet},
        trace=alexnet,
    ).rows
    per: dict = {}
    for s, a, b, _ in kernels:
        per.setdefault(s, []).append((a, b))
    span = graph.run("MATCH (o:Op {trace: $t}) RETURN max(o.end_us)", {"t": alexnet}, trace=alexnet).rows[0][0]
    span = max(span, max(b for _, _, b, _ in kernels))
    got = rows(graph, "stream-utilization", alexnet, min_gap_us=0)
    assert {r["stream"] for r in got} == set(per) and len(got) == 3
    for r in got:
        iv = per[r["stream"]]
        assert r["kernels"] == len(iv)
        assert r["busy_us"] == pytest.approx(_union_length(iv))
        assert r["window_us"] == span
        assert r["utilization"] == pytest.approx(_union_length(iv) / span)
        # With every gap counted, busy + gaps covers first start .. last end.
        assert r["busy_us"] + r["gap_us"] == pytest.approx(max(b for _, b in iv) - min(a for a, _ in iv))
    # The union never exceeds the summed durations.
    for r in got:
        assert r["busy_us"] <= sum(b - a for a, b in per[r["stream"]]) + 1e-6


def test_idle_gaps_small(gpu, graph):
    got = [(r["stream"], r["gap_us"], r["before_op"], r["after_op"], r["at_us"]) for r in rows(graph, "idle-gaps", gpu)]
    assert got == [
        ("/device:GPU:0/memcpy", 20, "net/copy", "net/copy2", 40),
        ("/device:GPU:1/memcpy", 10, "net/p2p", "net/mystery", 10),
        ("/device:GPU:0/stream:1", 10, "net/conv2/Conv2D", "gradients/net/conv1/Conv2D_grad/Conv2DBackpropInput", 30),
        ("/device:GPU:0/stream:1", 5, "gradients/net/conv1/Conv2D_grad/Conv2DBackpropInput", "net/late/Add", 55),
        ("/device:GPU:0/memcpy", 2, "net/copy2", "net/copy2", 70),
    ]
    assert len(rows(graph, "idle-gaps", gpu, n=2)) == 2


def test_idle_gaps_on_seed_match_stream_utilization(graph, alexnet):
    gaps = rows(graph, "idle-gaps", alexnet, n=100000)
    util = rows(graph, "stream-utilization", alexnet, min_gap_us=0)
    for u in util:
        mine = [g for g in gaps if g["stream"] == f"{u['device']}/{u['stream']}"]
        assert len(mine) == u["gaps"]
        assert sum(g["gap_us"] for g in mine) == pytest.approx(u["gap_us"])
    assert [g["gap_us"] for g in gaps] == sorted((g["gap_us"] for g in gaps), reverse=True)
    assert rows(graph, "idle-gaps", alexnet, n=3) == gaps[:3]


def test_memcpy_overhead_small(gpu, graph):
    got = [
        (r["direction"], r["copies"], r["bytes"], r["total_us"], r["gbps"], r["exposed_us"])
        for r in rows(graph, "memcpy-overhead", gpu)
    ]
    # GPU:0 compute union [0,30) [40,55) [60,62): HtoD [20,40) is half hidden (10 exposed); DtoH [60,70) 8 + [72,77) 5.
    # GPU:1 has no compute kernel, so its copies are fully exposed although GPU:0 computes at [0,10).
    assert got == [
        ("HtoD", 1, 2000, 20, pytest.approx(0.1), 10),
        ("DtoH", 2, 5000, 15, pytest.approx(5000 / 15 / 1000), 13),
        ("DtoD", 1, 800, 10, pytest.approx(0.08), 10),
        ("unknown", 1, None, 4, None, 4),
    ]


def test_memcpy_overhead_on_seed(graph, alexnet):
    copies = graph.run(
        "MATCH (k:Kernel {trace: $t}) WHERE k.kind = 'memcpy' RETURN k.direction, k.bytes, k.dur_us, "
        "k.start_us, k.end_us, k.device_name",
        {"t": alexnet},
        trace=alexnet,
    ).rows
    compute = graph.run(
        "MATCH (k:Kernel {trace: $t}) WHERE k.kind = 'compute' RETURN k.start_us, k.end_us, k.device_name",
        {"t": alexnet},
        trace=alexnet,
    ).rows
    got = {r["direction"]: r for r in rows(graph, "memcpy-overhead", alexnet)}
    assert set(got) == {d for d, *_ in copies}
    for d, r in got.items():
        mine = [c for c in copies if c[0] == d]
        assert r["copies"] == len(mine)
        assert r["bytes"] == sum(c[1] for c in mine)
        assert r["total_us"] == pytest.approx(sum(c[2] for c in mine))
        assert r["gbps"] == pytest.approx(sum(c[1] for c in mine) / sum(c[2] for c in mine) / 1000)
        exposed = 0.0
        for _, _, _, a, b, dev in mine:  # copy minus its overlap with the union of same-device compute kernels
            clipped = [(max(s, a), min(e, b)) for s, e, kd in compute if kd == dev and min(e, b) > max(s, a)]
            exposed += (b - a) - _union_length(clipped)
        assert r["exposed_us"] == pytest.approx(exposed)


# ------------------------------------------------------------------ graph shape


def test_fan_out_small(gpu, graph):
    got = [(r["kind"], r["name"], r["degree"]) for r in rows(graph, "fan-out", gpu)]
    # D reads net/conv2/Conv2D:0 at two positions: degree 1 for the tensor (distinct readers), 3 inputs for D.
    assert got == [
        ("tensor", "net/conv1/Conv2D:0", 2),
        ("tensor", "net/conv2/Conv2D:0", 1),
        ("tensor", "net/relu/Relu:0", 1),
        ("op", "gradients/net/conv1/Conv2D_grad/Conv2DBackpropInput", 3),
        ("op", "net/conv2/Conv2D", 1),
        ("op", "net/relu/Relu", 1),
    ]
    got = [(r["kind"], r["name"], r["degree"]) for r in rows(graph, "fan-out", gpu, n=1)]
    assert got == [
        ("tensor", "net/conv1/Conv2D:0", 2),
        ("op", "gradients/net/conv1/Conv2D_grad/Conv2DBackpropInput", 3),
    ]


def test_fan_out_on_seed(graph, alexnet):
    pairs = graph.run(
        "MATCH (o:Op {trace: $t})-[:CONSUMES]->(x:Tensor) RETURN o.name, x.name", {"t": alexnet}, trace=alexnet
    ).rows
    readers: dict = {}
    inputs: dict = {}
    for o, x in pairs:
        readers.setdefault(x, set()).add(o)
        inputs[o] = inputs.get(o, 0) + 1
    got = rows(graph, "fan-out", alexnet, n=5)
    tensors = [(r["name"], r["degree"]) for r in got if r["kind"] == "tensor"]
    ops = [(r["name"], r["degree"]) for r in got if r["kind"] == "op"]
    assert tensors == sorted(((x, len(s)) for x, s in readers.items()), key=lambda p: (-p[1], p[0]))[:5]
    assert ops == sorted(inputs.items(), key=lambda p: (-p[1], p[0]))[:5]


def test_op_neighborhood_small(gpu, graph):
    def got(op, **p):
        return [
            (r["direction"], r["op"], r["type"], r["hops"]) for r in rows(graph, "op-neighborhood", gpu, op=op, **p)
        ]

    d = "gradients/net/conv1/Conv2D_grad/Conv2DBackpropInput"
    assert got(d) == [
        ("ancestor", "net/conv2/Conv2D", "Conv2D", 1),
        ("ancestor", "net/relu/Relu", "Relu", 1),
        ("ancestor", "net/conv1/Conv2D", "Conv2D", 2),
        ("ancestor", "net/unused", "Conv2D", 2),
    ]
    assert got(d, hops=1) == got(d)[:2]
    assert got("net/conv1/Conv2D") == [
        ("descendant", "net/conv2/Conv2D", "Conv2D", 1),
        ("descendant", "net/relu/Relu", "Relu", 1),
        ("descendant", d, "Conv2DBackpropInput", 2),
    ]
    assert got("net/relu/Relu", hops=1) == [
        ("ancestor", "net/conv1/Conv2D", "Conv2D", 1),
        ("ancestor", "net/unused", "Conv2D", 1),
        ("descendant", d, "Conv2DBackpropInput", 1),
    ]
    assert got("net/late/Add") == [("ancestor", "_SOURCE", "NoOp", 1)]  # a control edge
    assert got("no/such/op") == []
    with pytest.raises(UserError, match="needs parameter 'op'"):
        run_analysis(graph, "op-neighborhood", gpu, {})


def test_op_neighborhood_caps_at_ten_hops(graph):
    trace = store(graph, chain(13), "chain13")
    with pytest.raises(UserError, match=r"parameter hops: .* out of range \(1 to 10\)"):
        rows(graph, "op-neighborhood", trace, op="c12", hops=50)
    got = rows(graph, "op-neighborhood", trace, op="c12", hops=10)
    assert [(r["op"], r["hops"]) for r in got] == [(f"c{12 - h}", h) for h in range(1, 11)]  # c0, c1 are 12 and 11 away
    got = rows(graph, "op-neighborhood", trace, op="c5", hops=3)
    assert [(r["direction"], r["op"], r["hops"]) for r in got] == [
        ("ancestor", "c4", 1),
        ("ancestor", "c3", 2),
        ("ancestor", "c2", 3),
        ("descendant", "c6", 1),
        ("descendant", "c7", 2),
        ("descendant", "c8", 3),
    ]


def test_op_neighborhood_on_seed(graph, alexnet):
    edges = graph.run(
        "MATCH (a:Op {trace: $t})-[:DATA|CONTROL]->(b:Op) RETURN a.name, b.name", {"t": alexnet}, trace=alexnet
    ).rows
    preds: dict = {}
    for a, b in edges:
        preds.setdefault(b, set()).add(a)
    frontier, seen = {"conv2/Conv2D"}, {}
    for h in (1, 2, 3):
        frontier = {p for n in frontier for p in preds.get(n, ())} - set(seen) - {"conv2/Conv2D"}
        seen.update({n: h for n in frontier})
    got = rows(graph, "op-neighborhood", alexnet, op="conv2/Conv2D", hops=3)
    assert {r["op"]: r["hops"] for r in got if r["direction"] == "ancestor"} == seen


# ------------------------------------------------------------------ trace diff


def test_trace_diff_slowed_op_comes_first_on_seed(graph):
    base_tf = parse_files([SEED_STEPSTATS])
    victim = "op:conv3/BiasAdd"
    slow_tf = slowed(base_tf, victim, 5.0)
    base = store(graph, base_tf, "diff-base")
    new = store(graph, slow_tf, "diff-slow")
    w = float(base_tf.ops.loc[base_tf.ops["uid"] == victim, "weight_us"].iloc[0])
    got = rows(graph, "trace-diff", new, base=base)
    assert got == [
        {
            "op": "conv3/BiasAdd",
            "type": "BiasAdd",
            "base_us": w,
            "dur_us": 5 * w,
            "delta_us": 4 * w,
            "status": "changed",
        }
    ]
    assert rows(graph, "trace-diff", base, base=base) == []


def test_trace_diff_small_added_removed_changed(gpu, graph):
    tf = small_gpu()
    tf.ops = tf.ops[tf.ops["uid"] != "op:L"].copy()  # SGD/update removed (base 3)
    tf.ops.loc[tf.ops["uid"] == "op:C", ["dur_us", "end_us"]] = [2.0, 14.0]  # Relu 5 -> 2
    tf.ops.loc[tf.ops["uid"] == "op:I", "type"] = "AddV2"  # same name, other type: removed + added
    extra = frame(
        [
            {
                "uid": "op:M",
                "name": "net/new/Mul",
                "type": "Mul",
                "device": tf.ops["device"].iloc[0],
                "seq": 11,
                "start_us": 0.0,
                "end_us": 7.0,
                "dur_us": 7.0,
                "phase": "forward",
                "executed": True,
                "attrs": "{}",
            }
        ],
        OP_COLUMNS,
    )
    tf.ops = pd.concat([tf.ops, extra], ignore_index=True)
    tf.check()
    new = store(graph, tf, "small-gpu-v2")
    got = [
        (r["op"], r["type"], r["base_us"], r["dur_us"], r["delta_us"], r["status"])
        for r in rows(graph, "trace-diff", new, base=gpu)
    ]
    assert got == [
        ("net/new/Mul", "Mul", None, 7, 7, "added"),
        ("SGD/update", "ApplyGradientDescent", 3, None, -3, "removed"),
        ("net/relu/Relu", "Relu", 5, 2, -3, "changed"),
        ("net/late/Add", "Add", 2, None, -2, "removed"),
        ("net/late/Add", "AddV2", None, 2, 2, "added"),
    ]
    got = [(r["op"], r["status"]) for r in rows(graph, "trace-diff", new, base=gpu, min_delta_us=3)]
    assert got == [
        ("net/new/Mul", "added"),
        ("SGD/update", "removed"),
        ("net/late/Add", "removed"),
        ("net/late/Add", "added"),
    ]
    # The other way round, added and removed swap.
    back = [(r["op"], r["type"], r["delta_us"], r["status"]) for r in rows(graph, "trace-diff", gpu, base=new)]
    assert back[0] == ("net/new/Mul", "Mul", -7, "removed") and back[-1] == ("net/late/Add", "AddV2", -2, "removed")


def test_trace_diff_summary_small(gpu, graph):
    new = store(graph, slowed(small_gpu(), "op:B", 5.0), "small-gpu-slow")
    got = [(r["metric"], r["base"], r["value"], r["delta"]) for r in rows(graph, "trace-diff-summary", new, base=gpu)]
    # B's kernels stretch to [10,110) and [15,65): span 110; critical path A 10 + B 150 + D 20.
    assert got == [
        ("span_us", 77, 110, 33),
        ("critical_path_us", 60, 180, 120),
        ("memory_peak_bytes", 370, 370, 0),
        ("ops", 11, 11, 0),
    ]
    assert [
        (r["op"], r["base_us"], r["dur_us"], r["delta_us"], r["status"])
        for r in rows(graph, "trace-diff", new, base=gpu)
    ] == [("net/conv2/Conv2D", 30, 150, 120, "changed")]


def test_trace_diff_needs_a_ready_base(gpu, graph):
    for name in ("trace-diff", "trace-diff-summary"):
        with pytest.raises(NotFound, match="no trace named 'nope'"):
            run_analysis(graph, name, gpu, {"base": "nope"})
        with pytest.raises(UserError, match="needs parameter 'base'"):
            run_analysis(graph, name, gpu, {})
    graph.run("CREATE (:Trace {trace: 'half', uid: 'trace', status: 'loading', heartbeat: 0})", write=True)
    with pytest.raises(NotFound):
        run_analysis(graph, "trace-diff", gpu, {"base": "half"})


def test_trace_diff_base_without_times_is_not_available(gpu, graph):
    untimed = chain(2)
    untimed.time_unit = "none"
    base = store(graph, untimed, "untimed")
    res = run_analysis(graph, "trace-diff", gpu, {"base": base})
    assert res.rows == [] and res.note.startswith("not available: base trace 'untimed': the trace has no op times")


# ------------------------------------------------------------------ not available


def test_not_available_reasons(graph):
    plain = store(graph, chain(3), "plain")  # times and deps; no kernels, copies or memory
    expect = {
        "memory-timeline": "memory allocation records",
        "tensor-lifetimes": "memory allocation records",
        "stream-utilization": "kernel",
        "idle-gaps": "kernel",
        "memcpy-overhead": "memory copies",
    }
    for name, reason in expect.items():
        res = run_analysis(graph, name, plain, {})
        assert res.rows == [] and res.note.startswith("not available: ") and reason in res.note, (name, res.note)
    # What needs only times/deps still works, with null memory columns.
    assert [
        (r["scope"], r["ops"], r["total_us"], r["peak_live_bytes"]) for r in rows(graph, "layer-breakdown", plain)
    ] == [("(root)", 3, 3, None)]
    assert rows(graph, "phase-breakdown", plain)[0] == {
        "phase": "forward",
        "ops": 3,
        "total_us": 3,
        "bytes_allocated": None,
    }
    assert [r["slack_us"] for r in rows(graph, "slack", plain)] == [0, 0, 0]
    single = store(graph, chain(1), "single")  # no dependencies at all
    for name, params in [("slack", {}), ("fan-out", {}), ("op-neighborhood", {"op": "c0"})]:
        res = run_analysis(graph, name, single, params)
        assert res.note.startswith("not available: the trace has no dependencies between ops"), name
    untimed = chain(2)
    untimed.time_unit = "none"
    untimed = store(graph, untimed, "untimed2")
    for name in ("op-type-breakdown", "phase-breakdown", "layer-breakdown"):
        assert run_analysis(graph, name, untimed, {}).note.startswith("not available: the trace has no op times"), name


# ------------------------------------------------------------------ every analysis on the seed


@pytest.mark.parametrize("name", ANALYSES)
def test_runs_on_seed(graph, alexnet, name):
    params = {k: (alexnet if v == "SELF" else v) for k, v in SEED_PARAMS.get(name, {}).items()}
    res = run_analysis(graph, name, alexnet, params)
    assert res.columns == [c.name for c in get(name).columns]
    if Fact.COLLECTIVES in get(name).requires:  # a one-rank step: its rows are tests/test_collectives.py's
        assert res.note.startswith("not available: the trace has no collectives joined across ranks")
    elif Fact.COMMUNICATION in get(name).requires:  # a TF step: its rows are tests/test_comm_overlap.py's
        assert res.note.startswith("not available: the trace has no communication")
    elif Fact.STEPS in get(name).requires:  # a TF step without a step marker: tests/test_steps.py's rows
        assert res.note.startswith("not available: the trace has no steps")
    elif name == "trace-diff":
        assert res.rows == []  # a trace against itself
    else:
        assert res.rows, f"{name}: {res.note}"


def test_trace_stored_with_another_layout_is_refused(graph):
    # A trace written by an older tracegraph lacks properties and nodes the
    # analyses read: refuse it by name instead of answering from nothing.
    gpu = store(graph, small_gpu(), "small-gpu-old")  # its own: this test changes it
    assert rows(graph, "fan-out", gpu, n=1)
    # (the catalog's Trace node: where the runner reads a trace's facts)
    graph.run("MATCH (t:Trace {trace: $t, uid: 'trace'}) SET t.schema_version = 1", {"t": gpu}, write=True)
    with pytest.raises(
        UserError, match=rf"graph schema 1, this one reads {SCHEMA_VERSION}\): ingest it again with --replace"
    ):
        run_analysis(graph, "fan-out", gpu, {})
    graph.run("MATCH (t:Trace {trace: $t, uid: 'trace'}) REMOVE t.schema_version", {"t": gpu}, write=True)
    with pytest.raises(UserError, match="graph schema 1"):
        run_analysis(graph, "top-ops", gpu, {})


def test_readme_lists_every_analysis():
    """README.md's table of analyses names exactly the catalog (and whatif)."""
    readme = (CYPHER.parent / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Analyses\n", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\| `([a-z0-9-]+)`", section, re.M)
    assert len(listed) == len(set(listed))
    assert set(listed) == set(ANALYSES) | {"whatif"}
