"""The same answers on both engines: every analysis, every bundled trace.

Each trace is ingested into the embedded FalkorDB and into Neo4j
(``TRACEGRAPH_TEST_NEO4J``); every catalog analysis and what-if must give
the same rows in the same order on both. Floats may differ in their last
digits only (FalkorDB answers doubles with 15 significant digits);
integers must be integers on both, never ``0`` on one and ``0.0`` on the
other; nodes, relationships and paths compare by labels, types and
properties (their ids are the engine's own).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
from conftest import (
    EXAMPLES,
    NEO4J_URI,
    NO_NEO4J,
    SEED_CHAINER,
    SEED_MEGENGINE,
    SEED_OPLIST,
    SEED_OPNAMES,
    SEED_STEPSTATS,
)

from tracegraph.queries.catalog import catalog
from tracegraph.queries.ingest import prepare, store
from tracegraph.queries.run import run_analysis
from tracegraph.queries.types import as_json
from tracegraph.queries.whatif import what_if

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import generate  # noqa: E402

pytestmark = pytest.mark.skipif(not NEO4J_URI, reason=NO_NEO4J)

TRACES = {
    "par-alexnet": [SEED_STEPSTATS, SEED_OPLIST],
    "par-stepstats": [SEED_STEPSTATS],
    "par-oplist": [SEED_OPLIST],
    "par-opnames": [SEED_OPNAMES],
    "par-chainer": [SEED_CHAINER],
    "par-megengine": [SEED_MEGENGINE],
    "par-kineto-cpu": [EXAMPLES / "pytorch-cnn-cpu.pt.trace.json.gz"],
    "par-kineto-gpu": [ROOT / "tests" / "data" / "hta" / "event_sync_multi_stream.json.gz"],
    "par-tf-loop": [ROOT / "tests" / "data" / "tf-while-loop-lstm-stepstats.pb"],
    "par-et-mlp": [
        ROOT / "tests" / "data" / "pytorch_et" / "mlp_train.kineto.json.gz",
        ROOT / "tests" / "data" / "pytorch_et" / "mlp_train.et.json.gz",
    ],
    "par-et-alone": [ROOT / "tests" / "data" / "pytorch_et" / "cnn.et.json.gz"],
    "par-xplane-keras": [ROOT / "tests" / "data" / "xplane" / "keras_cnn_train.xplane.pb.gz"],
    "par-xplane-jax-scan": [ROOT / "tests" / "data" / "xplane" / "jax_scan.xplane.pb.gz"],
    "par-dist-straggler": sorted((ROOT / "tests" / "data" / "pytorch_dist").glob("straggler.rank*.json.gz")),
    "par-nccl-dlrm": sorted((ROOT / "tests" / "data" / "nccl_dlrm").glob("worker*.pt.trace.json.gz")),
}


@pytest.fixture(scope="module")
def engines(tmp_path_factory, tg_home):
    from tracegraph.db.connect import open_graph

    gen = generate.write(generate.generate(2000, seed=7), tmp_path_factory.mktemp("gen"))
    traces = dict(TRACES, **{"par-generated": [gen["binary"]]})
    graphs = {"falkordb": open_graph("embedded"), "neo4j": open_graph(NEO4J_URI)}
    for name, paths in traces.items():
        prepared = prepare(paths, name)  # read once, the same tables stored on both
        for g in graphs.values():
            store(g, prepared, replace=True)
    yield graphs, sorted(traces)
    for g in graphs.values():
        for name in traces:
            g.drop_trace(name)
        g.close()


def _cases(graph, trace):
    """(analysis, params) to run on ``trace``: defaults, plus the required
    parameters filled from the trace itself (a busy op, a base trace)."""
    busy = graph.run(
        "MATCH (o:Op {trace: $trace})-[:DATA|CONTROL]-() RETURN o.name, count(*) AS n ORDER BY n DESC, o.name LIMIT 1",
        trace=trace,
    ).rows
    peak = graph.run(
        "MATCH (m:Allocator {trace: $trace}) WHERE m.peak_us IS NOT NULL "
        "RETURN m.peak_us ORDER BY m.peak_us, m.uid LIMIT 1",
        trace=trace,
    ).rows
    for a in catalog().values():
        params = {}
        for p in a.params:
            if p.name == "base":
                params["base"] = "par-stepstats"
            elif p.name == "op":
                params["op"] = busy[0][0] if busy else "none"
            elif p.name == "at_us":
                params["at_us"] = peak[0][0] if peak else 0.0
        yield a.name, params


def test_every_analysis_same_rows_on_both(engines):
    graphs, traces = engines
    falkor, neo = graphs["falkordb"], graphs["neo4j"]
    compared = 0
    for trace in traces:
        for name, params in _cases(falkor, trace):
            a = run_analysis(falkor, name, trace, params)
            b = run_analysis(neo, name, trace, params)
            assert (a.columns, a.note) == (b.columns, b.note), (trace, name)
            assert len(a.rows) == len(b.rows), (trace, name, len(a.rows), len(b.rows))
            for i, (ra, rb) in enumerate(zip(a.rows, b.rows)):
                assert same(ra, rb), (trace, name, i, ra, rb)
            compared += len(a.rows)
    assert compared > 10_000


def test_whatif_same_on_both(engines):
    graphs, _ = engines
    for trace, match in (
        ("par-alexnet", "type=Conv2D.*"),
        ("par-generated", "name=conv"),
        ("par-et-mlp", "type=aten::linear"),
        ("par-xplane-jax-scan", "type=fusion"),
    ):
        a, b = (as_json(what_if(g, trace, [match], 0.5)) for g in (graphs["falkordb"], graphs["neo4j"]))
        assert a["matched_ops"] > 0 and a["unavailable"] is None, trace
        assert same(a, b), trace


def same(a, b) -> bool:
    """Equal as answers: see the module docstring."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.get("kind") in ("node", "relationship") and b.get("kind") == a.get("kind"):
            keys = ("labels", "type", "properties")
            return all(same(a.get(k), b.get(k)) for k in keys)
        if a.get("kind") == "path" and b.get("kind") == "path":
            return same(a["nodes"], b["nodes"]) and same(a["relationships"], b["relationships"])
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-9) or (math.isnan(a) and math.isnan(b))
    return type(a) is type(b) and a == b
