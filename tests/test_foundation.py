"""Ingest + the first four analyses on a real database (each engine).

Expected values are worked out by hand (small traces) or recomputed in the
test from the raw seed file / the stored graph by a separate tiny reference.
"""

from __future__ import annotations

import itertools
import re
from functools import cache

import pytest
from conftest import SEED_STEPSTATS
from stepstats_builder import Op, write

from tracegraph.errors import UserError
from tracegraph.ingest.pipeline import ingest
from tracegraph.queries.run import run_analysis


def test_peak_memory_on_seed_equals_running_sum_of_records(graph, alexnet):
    text = SEED_STEPSTATS.read_text()
    recs = [(int(t), int(b)) for t, b in re.findall(r"alloc_micros: (\d+)\s*alloc_bytes: (-?\d+)", text)]
    origin = min(int(x) for x in re.findall(r"all_start_micros: (\d+)", text))
    live = peak = 0
    peak_t = None
    for t, b in sorted(recs, key=lambda r: (r[0], r[1] > 0)):
        live += b
        if live > peak:
            peak, peak_t = live, t - origin
    res = run_analysis(graph, "peak-memory", alexnet)
    rows = [r for r in res.records() if r["allocator"] == "GPU_0_bfc"]
    assert rows and all(r["peak_bytes"] == peak for r in rows)
    assert rows[0]["peak_at_us"] == peak_t
    assert sum(r["bytes"] for r in rows) == peak
    assert rows[0]["bytes"] == max(r["bytes"] for r in rows)
    assert all(r["alloc_us"] <= peak_t < r["free_us"] for r in rows)


def _dag(graph, trace):
    ops = {
        r[0]: (r[1], r[2])
        for r in graph.run(
            "MATCH (o:Op {trace: $t}) WHERE o.executed RETURN o.name, o.weight_us, o.seq", {"t": trace}, trace=trace
        ).rows
    }
    edges = graph.run(
        "MATCH (a:Op {trace: $t})-[:DATA|CONTROL]->(b:Op) RETURN a.name, b.name", {"t": trace}, trace=trace
    ).rows
    preds: dict = {n: [] for n in ops}
    for a, b in edges:
        preds[b].append(a)
    return ops, preds


def _longest(ops, preds, weight):
    @cache
    def finish(n):
        return weight(n) + max((finish(p) for p in preds[n]), default=0)

    # Memoized in dependency order, so that no call recurses deeper than
    # one level (a raised recursion limit would outlive this test in its
    # worker, and let C decoders elsewhere overflow the stack).
    done: set = set()
    for start in ops:
        stack = [start]
        while stack:
            n = stack[-1]
            todo = [p for p in preds[n] if p not in done]
            if todo:
                stack.extend(todo)
            else:
                finish(n)
                done.add(n)
                stack.pop()
    return max(finish(n) for n in ops)


def test_critical_path_on_seed(graph, alexnet):
    rows = run_analysis(graph, "critical-path", alexnet).records()
    assert [r["step"] for r in rows] == list(range(len(rows)))
    # Consecutive ops are linked by a dependency in the stored graph.
    for a, b in itertools.pairwise(rows):
        linked = graph.run(
            "MATCH (a:Op {trace: $t, name: $a})-[:DATA|CONTROL]->(b:Op {trace: $t, name: $b}) RETURN count(*)",
            {"t": alexnet, "a": a["op"], "b": b["op"]},
            trace=alexnet,
        ).rows[0][0]
        assert linked >= 1, (a["op"], b["op"])
    # Weight = kernel sum when the op has kernels, else its own duration.
    kernels = dict(
        graph.run(
            "MATCH (o:Op {trace: $t})-[:LAUNCHED]->(k:Kernel) RETURN o.name, sum(k.dur_us)",
            {"t": alexnet},
            trace=alexnet,
        ).rows
    )
    own = dict(graph.run("MATCH (o:Op {trace: $t}) RETURN o.name, o.dur_us", {"t": alexnet}, trace=alexnet).rows)
    for r in rows:
        assert r["dur_us"] == kernels.get(r["op"], own[r["op"]])
    ops, preds = _dag(graph, alexnet)
    weight = lambda n: kernels.get(n, own[n])  # noqa: E731
    best = _longest(ops, preds, weight)
    total = sum(r["dur_us"] for r in rows)
    assert total == pytest.approx(best)
    stored = graph.run(
        "MATCH (t:Trace {trace: $t, uid: 'trace'}) RETURN t.critical_path_us", {"t": alexnet}, trace=alexnet
    ).rows[0][0]
    assert stored == pytest.approx(total)


def test_longest_chain_on_seed(graph, alexnet):
    rows = run_analysis(graph, "longest-chain", alexnet).records()
    ops, preds = _dag(graph, alexnet)
    assert len(rows) == _longest(ops, preds, lambda n: 1)
    for a, b in itertools.pairwise(rows):
        assert a["op"] in preds[b["op"]]


def test_top_ops_on_seed(graph, alexnet):
    rows = run_analysis(graph, "top-ops", alexnet, {"n": "4"}).records()
    assert len(rows) == 4
    # LRNGrad of lrn2 has one kernel of 25,170 us in the file.
    text = SEED_STEPSTATS.read_text()
    m = re.search(
        r'node_name: "gradients/lrn2/LRN_grad/LRNGrad:LRNGrad"\s*all_start_micros: \d+\s*op_end_rel_micros: (\d+)', text
    )
    assert rows[0]["op"] == "gradients/lrn2/LRN_grad/LRNGrad" and rows[0]["dur_us"] == float(m[1])
    assert [r["dur_us"] for r in rows] == sorted((r["dur_us"] for r in rows), reverse=True)


def test_hand_built_critical_path_and_weights(graph, tmp_path):
    # a(5) feeds b and c; both feed d. b has two kernels (4 + 6 = 10), c has
    # no kernels and lasts 10 by its own record: a tie, which goes to the op
    # executed first (b). d has one kernel of 1.
    ops = [
        Op("a", "Const", 0, 5),
        Op("b", "Conv2D", 10, 50, ["a"], kernels=[(1, 10, 4), (2, 12, 6)]),
        Op("c", "Relu", 20, 10, ["a"]),
        Op("d", "Add", 40, 3, ["b", "c"], kernels=[(1, 40, 1)]),
    ]
    ingest(graph, [write(tmp_path, ops)], "hand-cp")
    rows = run_analysis(graph, "critical-path", "hand-cp").records()
    assert [(r["op"], r["dur_us"]) for r in rows] == [("a", 5.0), ("b", 10.0), ("d", 1.0)]
    assert [r["earliest_start_us"] for r in rows] == [0.0, 5.0, 15.0]
    top = run_analysis(graph, "top-ops", "hand-cp", {"n": 2}).records()
    assert [(r["op"], r["dur_us"]) for r in top] == [("b", 10.0), ("c", 10.0)]
    assert top[0]["kernels_us"] == 10.0 and top[1]["kernels_us"] is None
    chain = run_analysis(graph, "longest-chain", "hand-cp").records()
    assert [r["op"] for r in chain] == ["a", "b", "d"]


def test_hand_built_peak_frees_first_and_first_peak_wins(graph, tmp_path):
    # x: +100 at 10, -100 at 20.  y: +100 at 20 (same time as x's free:
    # frees count first, so live stays 100), -100 at 30.  z: +50 at 25,
    # -50 at 26. Live: 100 @10, 100 @20, 150 @25, 100 @26, 0 @30.
    ops = [
        Op("x", "A", 10, 1, allocs=[(10, 100), (20, -100)]),
        Op("y", "B", 20, 1, allocs=[(20, 100), (30, -100)]),
        Op("z", "C", 25, 1, allocs=[(25, 50), (26, -50)]),
    ]
    ingest(graph, [write(tmp_path, ops)], "hand-mem")
    rows = run_analysis(graph, "peak-memory", "hand-mem").records()
    # Times are relative to the first event (x at 10).
    assert [(r["op"], r["bytes"], r["peak_bytes"], r["peak_at_us"]) for r in rows] == [
        ("y", 100, 150, 15.0),
        ("z", 50, 150, 15.0),
    ]


def test_tie_at_the_peak_takes_the_first_time(graph, tmp_path):
    # Live: 80 @0 .. 0 @5, then 80 again @10: the peak is first reached at 0.
    ops = [
        Op("p", "A", 0, 1, allocs=[(0, 80), (5, -80)]),
        Op("q", "B", 10, 1, allocs=[(10, 80), (15, -80)]),
    ]
    ingest(graph, [write(tmp_path, ops)], "hand-tie")
    rows = run_analysis(graph, "peak-memory", "hand-tie").records()
    assert [(r["op"], r["peak_at_us"], r["bytes"]) for r in rows] == [("p", 0.0, 80)]


def test_read_only_by_default(graph, alexnet):
    n = graph.run("MATCH (o:Op {trace: $t}) RETURN count(o)", {"t": alexnet}, trace=alexnet).rows[0][0]
    with pytest.raises(UserError):
        graph.run("MATCH (o:Op {trace: $t}) DETACH DELETE o", {"t": alexnet}, trace=alexnet)
    assert graph.run("MATCH (o:Op {trace: $t}) RETURN count(o)", {"t": alexnet}, trace=alexnet).rows[0][0] == n
