"""Nodes run more than once (tf.while_loop, a node recorded twice): every
run is an Op of its own, and each consumer run is linked to the producer
run that fed it.

Hand-built traces have their answers worked out by hand in the comments.
The real trace (tests/data/tf-while-loop-lstm-stepstats.*, made by
tests/data/make_tf_while_loop.py with TensorFlow) is checked against a
separate reference below: it reads the raw protobuf, numbers every node's
runs by start (run k of a loop node is iteration k), links them by the
plain rules of TF's v1 loops, and runs its own longest-path DP in integer
nanoseconds; it shares no code with the parser or the enrichment.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pandas as pd
import pytest
from google.protobuf import text_format
from stepstats_builder import Op, write
from tensorboard.compat.proto import step_stats_pb2

from tracegraph.ingest.enrich import enrich
from tracegraph.ingest.formats.tf import stepstats as tf_stepstats
from tracegraph.ingest.pipeline import ingest
from tracegraph.queries.run import run_analysis

DATA = Path(__file__).resolve().parent / "data"


def loop_ops() -> list[Op]:
    """A two-variable while loop in TF's v1 form, two body iterations.

    Loop variables: a counter ``i`` (fast chain: Mi, Less, LC, Si, Ii, inc,
    Ni) and a state ``h`` (slow chain: Mh, Sh, mm 20 us, add, Nh); ``x``
    reads the counter; ``lim`` is a loop constant recorded without inputs
    (one record per iteration, as TF records them); ``Ew`` a loop-invariant
    Enter. The counter runs ahead: by the time ``add`` of iteration 0 starts
    (t=30) ``x`` of iteration 1 has ended (t=20), and ``Sh`` of iteration 1
    (t=34) starts after ``LC`` of iteration 2 (t=23) ended, so "the latest
    run that ended before" would take the wrong iteration for both.
    """
    one = []

    def op(name, type_, start, dur, *inputs, **kw):
        one.append(Op(name, type_, start, dur, list(inputs), **kw))

    op("i0", "Const", 0, 1)
    op("h0", "Const", 1, 1)
    op("w", "Const", 2, 1)
    op("L/Ei", "Enter", 3, 1, "i0")
    op("L/Eh", "Enter", 4, 1, "h0")
    op("L/Ew", "Enter", 5, 1, "w")
    # iteration 0
    op("L/Mi", "Merge", 6, 1, "L/Ei", "L/Ni")
    op("L/Mh", "Merge", 6, 1, "L/Eh", "L/Nh")
    op("L/lim", "Const", 6, 1)
    op("L/Less", "Less", 7, 1, "L/Mi", "L/lim")
    op("L/LC", "LoopCond", 8, 1, "L/Less")
    op("L/Si", "Switch", 9, 1, "L/Mi", "L/LC")
    op("L/Sh", "Switch", 9, 1, "L/Mh", "L/LC")
    op("L/Ii", "Identity", 10, 1, "L/Si:1")
    op(
        "L/mm",
        "MatMul",
        10,
        20,
        "L/Sh:1",
        "L/Ew",
        kernels=[(13, 10, 20)],
        allocs=[(10, 4096), (33, -4096)],
        output_bytes=4096,
    )
    op("L/inc", "AddV2", 11, 1, "L/Ii")
    op("L/x", "Gather", 11, 2, "L/Ii")
    op("L/Ni", "NextIteration", 12, 1, "L/inc")
    # iteration 1 of the counter chain
    op("L/Mi", "Merge", 13, 1, "L/Ei", "L/Ni")
    op("L/lim", "Const", 13, 1)
    op("L/Less", "Less", 14, 1, "L/Mi", "L/lim")
    op("L/LC", "LoopCond", 15, 1, "L/Less")
    op("L/Si", "Switch", 16, 1, "L/Mi", "L/LC")
    op("L/Ii", "Identity", 17, 1, "L/Si:1")
    op("L/inc", "AddV2", 18, 1, "L/Ii")
    op("L/x", "Gather", 18, 2, "L/Ii")
    op("L/Ni", "NextIteration", 19, 1, "L/inc")
    # iteration 2: the condition turns false
    op("L/Mi", "Merge", 20, 1, "L/Ei", "L/Ni")
    op("L/lim", "Const", 20, 1)
    op("L/Less", "Less", 21, 1, "L/Mi", "L/lim")
    op("L/LC", "LoopCond", 22, 1, "L/Less")
    op("L/Si", "Switch", 23, 1, "L/Mi", "L/LC")
    # the state chain catches up
    op("L/add", "AddV2", 30, 2, "L/x", "L/mm")
    op("L/Nh", "NextIteration", 32, 1, "L/add")
    op("L/Mh", "Merge", 33, 1, "L/Eh", "L/Nh")
    op("L/Sh", "Switch", 34, 1, "L/Mh", "L/LC")
    op(
        "L/mm",
        "MatMul",
        35,
        20,
        "L/Sh:1",
        "L/Ew",
        kernels=[(13, 35, 20)],
        allocs=[(35, 4096), (58, -4096)],
        output_bytes=4096,
    )
    op("L/add", "AddV2", 55, 2, "L/x", "L/mm")
    op("L/Nh", "NextIteration", 57, 1, "L/add")
    op("L/Mh", "Merge", 58, 1, "L/Eh", "L/Nh")
    op("L/Sh", "Switch", 59, 1, "L/Mh", "L/LC")
    op("L/Xh", "Exit", 60, 1, "L/Sh")
    op("out", "Relu", 61, 1, "L/Xh")
    return one


def preds(tf) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for src, dst in zip(tf.deps["src"], tf.deps["dst"]):
        out.setdefault(dst, set()).add(src)
    return out


def test_loop_runs_are_ops_of_their_own(tmp_path: Path):
    tf = tf_stepstats.parse(write(tmp_path, loop_ops()))
    assert len(tf.ops) == 43 and tf.ops["uid"].is_unique
    ops = tf.ops.set_index("uid")
    # run = place among the node's records by start; iteration = loop iteration.
    assert [ops.at[u, "run"] for u in ("op:L/Mi", "op:L/Mi#2", "op:L/Mi#3")] == [0, 1, 2]
    assert ops.at["op:L/Mi#3", "iteration"] == 2 and ops.at["op:L/mm#2", "iteration"] == 1
    assert ops.at["op:L/lim#2", "iteration"] == 1  # a loop constant, placed by its reader
    assert ops.at["op:L/Xh", "iteration"] == 2  # Exit runs in the last iteration
    assert ops.at["op:out", "run"] == 0 and pd.isna(ops.at["op:out", "iteration"])  # outside the loop
    assert set(ops.loc[ops["name"] == "L/mm", "start_us"]) == {10.0, 35.0}


def test_loop_inputs_come_from_the_same_iteration(tmp_path: Path):
    tf = tf_stepstats.parse(write(tmp_path, loop_ops()))
    p = preds(tf)
    assert p["op:L/add"] == {"op:L/x", "op:L/mm"}  # not x#2, which ended (t=20) before add (t=30)
    assert p["op:L/add#2"] == {"op:L/x#2", "op:L/mm#2"}
    assert p["op:L/Sh#2"] == {"op:L/Mh#2", "op:L/LC#2"}  # not LC#3 (ended t=23, before t=34)
    assert p["op:L/Sh#3"] == {"op:L/Mh#3", "op:L/LC#3"}
    assert p["op:L/Mi"] == {"op:L/Ei"} and p["op:L/Mi#2"] == {"op:L/Ni"} and p["op:L/Mi#3"] == {"op:L/Ni#2"}
    assert p["op:L/Mh#2"] == {"op:L/Nh"}  # a Merge reads the input that fired, only
    assert p["op:L/Less#3"] == {"op:L/Mi#3", "op:L/lim#3"}
    assert p["op:L/mm#2"] == {"op:L/Sh#2", "op:L/Ew"}  # the loop invariant feeds every iteration
    assert p["op:L/Xh"] == {"op:L/Sh#3"}  # Sh's earlier runs output on port 1 (read by mm)
    assert p["op:out"] == {"op:L/Xh"}
    assert "op:L/Si#3" not in set(tf.deps["src"])  # its port-0 reader (an Exit) was not recorded
    c = tf.consumes
    assert list(c.loc[c["op"] == "op:L/Mh#2", "tensor"]) == ["t:L/Nh:0"]
    assert list(c.loc[c["op"] == "op:L/add#2", "tensor"]) == ["t:L/x:0#2", "t:L/mm:0#2"]


def test_loop_outputs_allocations_and_kernels_follow_their_run(tmp_path: Path):
    tf = tf_stepstats.parse(write(tmp_path, loop_ops()))
    t = tf.tensors.set_index("uid")
    assert t.at["t:L/mm:0", "producer"] == "op:L/mm" and t.at["t:L/mm:0#2", "producer"] == "op:L/mm#2"
    assert t.at["t:L/mm:0#2", "name"] == "L/mm:0"
    a = tf.allocations.set_index("op")
    assert (a.at["op:L/mm", "alloc_us"], a.at["op:L/mm", "free_us"], a.at["op:L/mm", "tensor"]) == (
        10.0,
        33.0,
        "t:L/mm:0",
    )
    assert (a.at["op:L/mm#2", "alloc_us"], a.at["op:L/mm#2", "tensor"]) == (35.0, "t:L/mm:0#2")
    k = tf.kernels.set_index("op")
    assert k.at["op:L/mm", "start_us"] == 10.0 and k.at["op:L/mm#2", "start_us"] == 35.0


# By hand (runs named as their uids: Mh#2 is Mh's second run), weights =
# record durations (mm's kernel lasts as long as mm):
# earliest finish ef: i0 1, Ei 2, Mi 3, lim 1, Less 4, LC 5; h0 1, Eh 2, Mh 3;
# Sh 6, Si 6, Ii 7, inc 8, x 9, Ni 9; w 1, Ew 2; mm 26, add 28, Nh 29, Mh#2 30;
# Mi#2 10, Less#2 11, LC#2 12, Sh#2 31, mm#2 51; Si#2 13, Ii#2 14, x#2 16,
# inc#2 15, Ni#2 16, Mi#3 17, Less#3 18, LC#3 19, Si#3 20; add#2 53, Nh#2 54,
# Mh#3 55, Sh#3 56, Xh 57, out 58.
LOOP_CRITICAL = [
    "i0",
    "L/Ei",
    "L/Mi",
    "L/Less",
    "L/LC",
    "L/Sh",
    "L/mm",
    "L/add",
    "L/Nh",
    "L/Mh",
    "L/Sh",
    "L/mm",
    "L/add",
    "L/Nh",
    "L/Mh",
    "L/Sh",
    "L/Xh",
    "out",
]
# Longest chain by op count: the counter's 19 ops to LC#3, then Sh#3, Xh, out.
LOOP_CHAIN = [
    "i0",
    "L/Ei",
    "L/Mi",
    "L/Less",
    "L/LC",
    "L/Si",
    "L/Ii",
    "L/inc",
    "L/Ni",
    "L/Mi",
    "L/Less",
    "L/LC",
    "L/Si",
    "L/Ii",
    "L/inc",
    "L/Ni",
    "L/Mi",
    "L/Less",
    "L/LC",
    "L/Sh",
    "L/Xh",
    "out",
]


def test_loop_critical_path_slack_and_chain_by_hand(tmp_path: Path, graph):
    ingest(graph, [write(tmp_path, loop_ops())], "loop-hand")
    cp = run_analysis(graph, "critical-path", "loop-hand", {}).records()
    assert [r["op"] for r in cp] == LOOP_CRITICAL
    assert sum(r["dur_us"] for r in cp) == 58.0 and cp[-1]["cum_us"] == 58.0
    runs = graph.run(
        "MATCH (o:Op {trace: 'loop-hand'}) WHERE o.cp_step IS NOT NULL RETURN o.run, o.iteration ORDER BY o.cp_step",
        trace="loop-hand",
    ).rows
    # i0, Ei (an Enter runs in the enclosing frame) and out have no iteration.
    assert [r[1] for r in runs] == [None, None] + [0] * 7 + [1] * 5 + [2] * 3 + [None]
    assert [r[0] for r in runs] == [0, 0] + [0] * 7 + [1] * 5 + [2, 2, 0] + [0]  # Xh: one record
    chain = run_analysis(graph, "longest-chain", "loop-hand", {}).records()
    assert [r["op"] for r in chain] == LOOP_CHAIN
    slack = {
        (r["op"], r["earliest_start_us"]): r["slack_us"]
        for r in run_analysis(graph, "slack", "loop-hand", {}).records()
    }
    # (names as uids: x is the first run, x#2 the second) x: ef 9, its reader
    # add (on the path) starts at 26 at the latest -> slack 17;
    # x#2: ef 16, add#2 latest start 51 -> 35; inc#2: ef 15, latest finish 51 -> 36
    # (Ni#2, Mi#3, Less#3, LC#3 each 1 us before Sh#3's latest start 55);
    # Si#3: ef 20, nothing reads it -> latest finish 58, slack 38.
    assert slack[("L/x", 7.0)] == 17.0 and slack[("L/x", 14.0)] == 35.0
    assert slack[("L/inc", 14.0)] == 36.0 and slack[("L/Si", 19.0)] == 38.0
    assert all(slack[(r["op"], r["earliest_start_us"])] == 0.0 for r in cp)


def no_loop_repeats() -> list[Op]:
    """A node recorded twice without any loop (a, h); plus a producer whose
    only record starts after its reader (g, f: clocks disagree)."""
    return [
        Op("a", "Conv2D", 0, 5),
        Op("c", "Relu", 6, 2, ["a"]),
        Op("a", "Conv2D", 10, 5),
        Op("e", "AddV2", 12, 1, ["a", "c"]),
        Op("d", "Relu", 20, 2, ["a"]),
        Op("f", "Relu", 25, 1, ["g"]),
        Op("g", "Const", 30, 1),
        Op("h", "MatMul", 40, 5),
        Op("k", "Relu", 42, 1, ["h"]),
        Op("h", "MatMul", 50, 5),
    ]


def test_repeated_name_without_loop_takes_the_latest_ready_run(tmp_path: Path, graph):
    tf = tf_stepstats.parse(write(tmp_path, no_loop_repeats()))
    p = preds(tf)
    assert p["op:c"] == {"op:a"}  # a#2 has not run yet
    assert p["op:e"] == {"op:a", "op:c"}  # a#2 started (10) but ends at 15, after e starts (12)
    assert p["op:d"] == {"op:a#2"}  # both ended: the more recent one
    assert p["op:f"] == {"op:g"}  # a single record is always the producer
    assert p["op:k"] == {"op:h"}  # none ended by 42: the last one started by then
    assert "op:a#2" in set(tf.deps["src"]) and "op:h#2" not in set(tf.deps["src"])
    assert set(tf.ops["iteration"].dropna()) == set()  # no loop: no iterations
    assert list(tf.ops.set_index("uid").loc[["op:a", "op:a#2", "op:h#2"], "run"]) == [0, 1, 1]
    # Paths: a c e = 5+2+1 = 8; a#2 d = 7; g f = 2; h k = 6.
    ingest(graph, [write(tmp_path, no_loop_repeats())], "repeat-hand")
    cp = run_analysis(graph, "critical-path", "repeat-hand", {}).records()
    assert [(r["op"], r["start_us"]) for r in cp] == [("a", 0.0), ("c", 6.0), ("e", 12.0)]
    assert cp[-1]["cum_us"] == 8.0


def test_kernels_of_a_repeated_op_pair_with_its_runs(tmp_path: Path):
    # Two short launches, then their kernels, both after the second launch:
    # kernel k goes to run k (same count), not both to the last run started.
    ops = [
        Op("a", "MatMul", 0, 1, kernels=[(13, 5, 10)]),
        Op("a", "MatMul", 2, 1, kernels=[(13, 15, 10)]),
        Op("b", "Relu", 30, 1, ["a"], kernels=[(13, 31, 2)]),
    ]
    tf = tf_stepstats.parse(write(tmp_path, ops))
    k = tf.kernels.sort_values("start_us")
    assert list(k["op"]) == ["op:a", "op:a#2", "op:b"]
    enrich(tf)
    assert list(tf.ops.set_index("uid").loc[["op:a", "op:a#2", "op:b"], "weight_us"]) == [10.0, 10.0, 2.0]


# ------------------------------------------------------------------ the real traces

LSTM = "tf-while-loop-lstm-stepstats"  # one loop, 12 iterations
NESTED = "tf-nested-while-loop-stepstats"  # 3 iterations of a loop that runs another, 2 each


def _type(node) -> str:
    return node.timeline_label.split(" = ", 1)[1].split("(", 1)[0]


def reference(path: Path) -> dict:
    """Every run's iteration, the dependency edges, the critical path, slack
    and longest chain of a real while-loop trace, from the raw protobuf with
    the plain rules of TF's v1 loops and nothing of tracegraph.

    Runs of a node are numbered by start. A node recorded once is outside
    the loops; an Enter or Exit of the inner loop runs in the outer one; a
    node of the inner loop (``/inner/`` in its name) recorded R times in the
    outer loop's N body iterations has R/N runs per inner loop, run k being
    iteration (k // (R/N), k % (R/N)); any other node's run k is iteration
    (k,). A Merge of iteration 0 reads its Enter, of iteration j its
    NextIteration of iteration j - 1; an Exit reads its Switch's last run of
    its loop; an Enter's value is the same in every iteration of the loop it
    enters. Each such producer must have ended before its reader began (else
    these rules do not describe the trace, and the test fails). Times are
    integer nanoseconds."""
    stats = text_format.Parse(path.read_text(), step_stats_pb2.StepStats())
    nodes = [n for d in stats.dev_stats for n in d.node_stats]
    runs: dict[str, list] = {}
    for n in sorted(nodes, key=lambda n: n.all_start_nanos):
        runs.setdefault(n.node_name, []).append(n)
    outer_body = len(runs["outer/Identity"]) if "outer/Identity" in runs else None

    def per_loop(name):  # runs per inner loop
        return len(runs[name]) // outer_body

    def tag(name: str, k: int) -> tuple:
        if len(runs[name]) == 1:
            return ()
        if "/inner/" in name and _type(runs[name][0]) not in ("Enter", "Exit"):
            return (k // per_loop(name), k % per_loop(name))
        return (k,)

    index = {name: {tag(name, k): k for k in range(len(lst))} for name, lst in runs.items()}
    key = {id(n): (name, k) for name, lst in runs.items() for k, n in enumerate(lst)}
    edges: dict[tuple, set] = {v: set() for v in key.values()}
    for n in nodes:
        me = key[id(n)]
        t = tag(*me)
        op_type, args = n.timeline_label.split(" = ", 1)[1].split("(", 1)
        for arg in (a.strip() for a in args.rstrip(")").split(",") if a.strip()):
            src = arg.lstrip("^").rsplit(":", 1)[0] if ":" in arg else arg.lstrip("^")
            if src not in runs:
                continue
            src_type = _type(runs[src][0])
            if op_type == "Merge":
                if (t[-1] == 0) != (src_type == "Enter"):
                    continue  # not the input that fired in this iteration
                want = t[:-1] if t[-1] == 0 else (*t[:-1], t[-1] - 1)
            elif op_type == "Exit":
                want = (*t, len(runs[src]) - 1 if len(t) == 0 else per_loop(src) - 1)
            elif src_type == "Enter":
                want = t[:-1]
            else:
                want = t
            k = 0 if len(runs[src]) == 1 else index[src][want]
            producer = runs[src][k]
            assert producer.all_start_nanos + producer.op_end_rel_nanos <= n.all_start_nanos, (me, src)
            edges[me].add((src, k))
    weight = {key[id(n)]: n.all_end_rel_nanos for n in nodes}
    succs: dict = {v: [] for v in edges}
    for v, ps in edges.items():
        for p in ps:
            succs[p].append(v)
    order, seen = [], set()

    def visit(v):  # depth-first: every producer before its readers
        if v not in seen:
            seen.add(v)
            for p in sorted(edges[v]):
                visit(p)
            order.append(v)

    for v in sorted(edges):
        visit(v)
    ef: dict = {}
    chain: dict = {}
    for v in order:
        ef[v] = weight[v] + max((ef[p] for p in edges[v]), default=0)
        chain[v] = 1 + max((chain[p] for p in edges[v]), default=0)
    length = max(ef.values())
    lf: dict = {}
    for v in reversed(order):
        lf[v] = min((lf[s] - weight[s] for s in succs[v]), default=length)
    ends = [v for v in ef if ef[v] == length]
    assert len(ends) == 1  # the path is unique (checked here and below), so comparing it is meaningful
    path = ends
    while edges[path[-1]]:
        top = max(ef[p] for p in edges[path[-1]])
        best = [p for p in edges[path[-1]] if ef[p] == top]
        assert len(best) == 1
        path.append(best[0])
    return {
        "length_ns": length,
        "path": path[::-1],
        "slack_ns": {v: lf[v] - ef[v] for v in ef},
        "chain": max(chain.values()),
        "edges": edges,
        "ops": len(nodes),
        "tags": {v: tag(*v) for v in edges},
        "types": {name: _type(lst[0]) for name, lst in runs.items()},
    }


@pytest.fixture(scope="module", params=[LSTM, NESTED])
def real(request) -> tuple[str, dict]:
    return request.param, reference(DATA / f"{request.param}.pbtxt")


def test_real_traces_are_loops():
    # Sanity of the samples themselves.
    lstm, nested = reference(DATA / f"{LSTM}.pbtxt"), reference(DATA / f"{NESTED}.pbtxt")
    assert lstm["ops"] == 405 and max(t[0] for t in lstm["tags"].values() if t) == 12  # 12 + the exit check
    assert nested["ops"] == 181 and {t for t in nested["tags"].values() if len(t) == 2} >= {(2, 1)}
    assert len(lstm["path"]) > 100 and len(nested["path"]) > 50  # the paths run through the iterations


def test_real_trace_frames_match_the_reference(real):
    stem, ref = real
    tf = tf_stepstats.parse(DATA / f"{stem}.pbtxt")
    summary = enrich(tf)
    ops = tf.ops.set_index("uid")
    uid = {(n, r): u for u, n, r in zip(tf.ops["uid"], tf.ops["name"], tf.ops["run"])}
    got_edges: dict = {}
    for s, d in zip(tf.deps["src"], tf.deps["dst"]):
        got_edges.setdefault(d, set()).add(s)
    for v, ps in ref["edges"].items():
        assert got_edges.get(uid[v], set()) == {uid[p] for p in ps}, v
    # Iterations: the innermost one, and the whole tag inside a nested loop.
    # Skipped: an Exit (its own iteration is its loop's last; the reference
    # counts it in the enclosing loop), and a loop constant or invariant Enter
    # that nothing read (run for a loop's exit check: nothing tells its iteration).
    read = {p for ps in ref["edges"].values() for p in ps}
    for v, t in ref["tags"].items():
        if ref["types"][v[0]] == "Exit" or (v not in read and (ref["types"][v[0]] == "Enter" or not ref["edges"][v])):
            continue
        got = ops.at[uid[v], "iteration"]
        assert pd.isna(got) if not t else got == t[-1], (v, t, got)
        if len(t) == 2:
            assert json.loads(ops.at[uid[v], "attrs"])["loop_iterations"] == list(t)
    assert summary.props["critical_path_us"] == pytest.approx(ref["length_ns"] / 1000, abs=1e-9)
    path = [uid[v] for v in ref["path"]]
    assert list(ops.index[ops["cp_step"].notna()][ops["cp_step"].dropna().argsort()]) == path
    for v, slack in ref["slack_ns"].items():
        assert ops.at[uid[v], "slack_us"] == pytest.approx(slack / 1000, abs=1e-6), v
    assert summary.props["longest_chain_ops"] == ref["chain"]


def test_real_trace_analyses_on_the_database(real, graph):
    stem, ref = real
    ingest(graph, [DATA / f"{stem}.pbtxt"], f"{stem}-text")
    ingest(graph, [DATA / f"{stem}.pb"], f"{stem}-binary")
    answers = {}
    for trace in (f"{stem}-text", f"{stem}-binary"):
        cp = run_analysis(graph, "critical-path", trace, {}).records()
        chain = run_analysis(graph, "longest-chain", trace, {}).records()
        slack = run_analysis(graph, "slack", trace, {}).records()
        stored = graph.run(
            "MATCH (t:Trace {trace: $t}) RETURN t.critical_path_us, t.longest_chain_ops", {"t": trace}, trace=trace
        ).rows[0]
        answers[trace] = (cp, chain, slack, stored)
        assert [r["op"] for r in cp] == [v[0] for v in ref["path"]]
        assert cp[-1]["cum_us"] == pytest.approx(ref["length_ns"] / 1000, abs=1e-9)
        assert stored[0] == pytest.approx(ref["length_ns"] / 1000, abs=1e-9)
        assert stored[1] == ref["chain"] == len(chain)
        assert sorted(r["slack_us"] for r in slack) == pytest.approx(
            sorted(s / 1000 for s in ref["slack_ns"].values()), abs=1e-6
        )
        # The longest chain is a chain of the reference's DAG.
        runs = graph.run(
            "MATCH (o:Op {trace: $t}) WHERE o.lc_step IS NOT NULL RETURN o.name, o.run ORDER BY o.lc_step",
            {"t": trace},
            trace=trace,
        ).rows
        for a, b in itertools.pairwise(runs):
            assert tuple(a) in ref["edges"][tuple(b)]
    assert answers[f"{stem}-text"] == answers[f"{stem}-binary"]


def test_real_trace_without_nanos_links_the_same(real, tmp_path: Path):
    """The same step as TF 1.x would record it (micros fields only, times
    truncated to the microsecond): every run is still fed by the same runs."""
    stem, ref = real
    stats = text_format.Parse((DATA / f"{stem}.pbtxt").read_text(), step_stats_pb2.StepStats())
    for dev in stats.dev_stats:
        for n in dev.node_stats:
            for f in (
                "all_start_nanos",
                "op_start_rel_nanos",
                "op_end_rel_nanos",
                "all_end_rel_nanos",
                "scheduled_nanos",
            ):
                n.ClearField(f)
    p = tmp_path / "micros.pb"
    p.write_bytes(stats.SerializeToString())
    tf = tf_stepstats.parse(p)
    assert all(float(x).is_integer() for x in tf.ops["dur_us"])
    uid = {(n, r): u for u, n, r in zip(tf.ops["uid"], tf.ops["name"], tf.ops["run"])}
    got: dict = {}
    for s, d in zip(tf.deps["src"], tf.deps["dst"]):
        got.setdefault(d, set()).add(s)
    for v, ps in ref["edges"].items():
        assert got.get(uid[v], set()) == {uid[p] for p in ps}, v
