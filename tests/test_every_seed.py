"""Every seed ingests, and every catalog analysis answers on every seed trace:
rows where the trace has the data, ``not available: <reason>`` where not."""

from __future__ import annotations

import pytest
from conftest import SEED_CHAINER, SEED_MEGENGINE, SEED_OPLIST, SEED_OPNAMES, SEED_STEPSTATS

from tracegraph.ingest.pipeline import detect, ingest
from tracegraph.queries.catalog import catalog
from tracegraph.queries.run import run_analysis

SEEDS = {
    "seed-oplist": [SEED_OPLIST],
    "seed-stepstats": [SEED_STEPSTATS],
    "seed-joined": [SEED_OPLIST, SEED_STEPSTATS],
    "seed-opnames": [SEED_OPNAMES],
    "seed-chainer": [SEED_CHAINER],
    "seed-megengine": [SEED_MEGENGINE],
}

# What each trace can answer; everything else must say "not available".
NOT_AVAILABLE = {
    "seed-opnames": {
        "critical-path",
        "critical-path-graph",
        "longest-chain",
        "slack",
        "top-ops",
        "peak-memory",
        "peak-tensors-graph",
        "memory-timeline",
        "memory-at",
        "tensor-lifetimes",
        "stream-utilization",
        "idle-gaps",
        "memcpy-overhead",
        "op-type-breakdown",
        "layer-breakdown",
        "phase-breakdown",
        "trace-diff",
        "trace-diff-summary",
        "fan-out",
        "op-neighborhood",
        "op-neighborhood-graph",
    },
}


@pytest.fixture(scope="module")
def seeds(session_graph):
    for name, paths in SEEDS.items():
        ingest(session_graph, paths, name, replace=True)
    return session_graph


def test_detection_by_content():
    assert [detect(p) for p in (SEED_OPLIST, SEED_STEPSTATS, SEED_OPNAMES, SEED_CHAINER, SEED_MEGENGINE)] == [
        "tf-oplist",
        "tf-stepstats",
        "tf-opnames",
        "chainer-graph",
        "megengine-profile",
    ]


def test_op_counts(seeds):
    def count(trace, where=""):
        return seeds.run(f"MATCH (o:Op {{trace: $t}}) {where} RETURN count(o)", {"t": trace}, trace=trace).rows[0][0]

    opnames_lines = [line for line in SEED_OPNAMES.read_text().splitlines() if line.strip()]
    assert count("seed-opnames") == len(opnames_lines) == 2467
    assert count("seed-chainer") == 92
    assert count("seed-megengine", "WHERE o.executed") == 234
    assert count("seed-megengine") > 234  # operators outside comp_seq are kept, not executed
    # The joined AlexNet trace has the StepStats ops plus listing-only ones,
    # and the listing's control inputs.
    assert count("seed-joined") > count("seed-stepstats")
    ctrl = seeds.run("MATCH (:Op {trace: 'seed-joined'})-[c:CONTROL]->() RETURN count(c)", trace="seed-joined").rows[0][
        0
    ]
    assert ctrl == SEED_OPLIST.read_text().count(", ^")


def _params(analysis, graph, trace):
    out = {}
    for p in analysis.params:
        if p.name == "op":
            # The first op (in execution order) that has a dependency, if any.
            linked = graph.run(
                "MATCH (o:Op {trace: $t})-[:DATA|CONTROL]-() RETURN o.name ORDER BY o.seq LIMIT 1",
                {"t": trace},
                trace=trace,
            ).rows
            anyop = graph.run(
                "MATCH (o:Op {trace: $t}) RETURN o.name ORDER BY o.seq LIMIT 1", {"t": trace}, trace=trace
            ).rows
            out["op"] = (linked or anyop)[0][0]
        elif p.name == "base":
            out["base"] = trace
        elif p.name == "at_us":
            # The first memory peak, when the trace has one: something is live then.
            peak = graph.run(
                "MATCH (m:Allocator {trace: $t}) WHERE m.peak_us IS NOT NULL "
                "RETURN m.peak_us ORDER BY m.peak_us LIMIT 1",
                {"t": trace},
                trace=trace,
            ).rows
            out["at_us"] = peak[0][0] if peak else 0.0
    return out


@pytest.mark.parametrize("trace", list(SEEDS))
def test_every_analysis_answers(seeds, trace):
    for name, analysis in catalog().items():
        res = run_analysis(seeds, name, trace, _params(analysis, seeds, trace))
        if res.unavailable is not None:
            assert not res.rows
            assert name in NOT_AVAILABLE.get(trace, set()) or name in _expected_gaps(seeds, trace, analysis), (
                name,
                res.note,
            )
        elif name not in ("trace-diff",):  # a trace diffed with itself has no changed op
            assert res.rows, (name, trace, res.note)


def _expected_gaps(graph, trace, analysis):
    """Analyses whose @requires the trace genuinely lacks."""
    facts = graph.run("MATCH (t:Trace {trace: $t, uid: 'trace'}) RETURN t", {"t": trace}, trace=trace).rows[0][0][
        "properties"
    ]
    return {analysis.name} if any(not facts.get(fact.flag) for fact in analysis.requires) else set()
