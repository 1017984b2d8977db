"""PyTorch Execution Trace + Kineto pairs made by real torch 2.13 on a CPU
(tests/data/pytorch_et/, with the script that made them), against
tests/et_reference.py: a separate walk over the raw JSON that shares no
code with tracegraph. Every number here comes from that walk or from the
files' raw Kineto durations, never from tracegraph itself.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import et_reference as ref
import pytest
from conftest import everything, run_cli

from tracegraph.errors import InputError
from tracegraph.ingest.formats.kineto import et as et_format
from tracegraph.ingest.formats.kineto.op_schema import schema_marks
from tracegraph.ingest.pipeline import detect, ingest, parse_files
from tracegraph.queries.run import run_analysis
from tracegraph.queries.traces import describe_trace
from tracegraph.queries.whatif import what_if

DATA = Path(__file__).resolve().parent / "data" / "pytorch_et"
PAIRS = ("two_branch", "mlp_train", "cnn")


def files(name: str) -> tuple[Path, Path]:
    return DATA / f"{name}.kineto.json.gz", DATA / f"{name}.et.json.gz"


def reference(name: str):
    """(et, kineto, carriers by id, edges, durations) from the raw files."""
    kineto_path, et_path = files(name)
    et, kineto = ref.load(et_path, kineto_path)
    carriers = {c["id"]: c for c in ref.carriers(et)}
    return et, kineto, carriers, ref.data_edges(et, kineto), ref.kineto_durations(kineto, et)


def rf(node) -> int:
    return ref.attr(node, "rf_id")


def op_rf_ids(graph, trace: str) -> dict[str, int]:
    """Op uid -> its Kineto record-function id, read back from the graph."""
    rows = graph.run("MATCH (o:Op {trace: $trace}) RETURN o.uid, o.attrs", trace=trace).rows
    return {u: json.loads(a).get("Record function id") for u, a in rows if a}


@pytest.fixture(scope="module")
def joined(session_graph):
    """The three pairs ingested once (read-only for the tests)."""
    names = {}
    for name in PAIRS:
        ingest(session_graph, list(files(name)), f"et-{name}", replace=True)
        names[name] = f"et-{name}"
    yield names
    for trace in names.values():
        session_graph.drop_trace(trace)


def test_detected_by_content(tmp_path):
    for name in PAIRS:
        kineto, et = files(name)
        assert detect(et) == "pytorch-et"
        assert detect(kineto) == "pytorch-kineto"
        plain = tmp_path / f"{name}.json"
        plain.write_bytes(gzip.decompress(et.read_bytes()))
        assert detect(plain) == "pytorch-et"


@pytest.mark.parametrize("name", PAIRS)
def test_data_edges_equal_the_reference(graph, joined, name):
    """A DATA edge for every tensor that flows between two carriers (the
    reference's rule, storage-id reuse filtered by Kineto's memory events),
    and no other."""
    _, _, carriers, edges, _ = reference(name)
    trace = joined[name]
    rf_of = op_rf_ids(graph, trace)
    got = {
        (rf_of[a], rf_of[b])
        for a, b in graph.run("MATCH (a:Op {trace: $trace})-[:DATA]->(b:Op) RETURN a.uid, b.uid", trace=trace).rows
    }
    want = {(rf(carriers[a]), rf(carriers[b])) for a, b in edges}
    assert got == want and len(got) == {"two_branch": 7, "mlp_train": 52, "cnn": 114}[name]
    flagged = graph.run("MATCH (o:Op {trace: $trace}) WHERE o.carries_deps RETURN o.uid", trace=trace).rows
    assert {rf_of[u] for (u,) in flagged} == {rf(c) for c in carriers.values()}


@pytest.mark.parametrize("name", PAIRS)
def test_critical_path_is_the_reference_longest_path(graph, joined, name):
    _, _, carriers, edges, dur = reference(name)
    length, path = ref.longest_path(sorted(carriers), edges, dur)
    facts = describe_trace(graph, joined[name])
    assert facts.critical_path_us == pytest.approx(length, rel=0.01)
    rows = run_analysis(graph, "critical-path", joined[name]).records()
    assert [r["op"] for r in rows] == [carriers[n]["name"] for n in path]
    assert sum(r["dur_us"] for r in rows) == pytest.approx(facts.critical_path_us)
    assert facts.has_deps and facts.observed_path_us is not None
    assert facts.span_us is not None and facts.critical_path_us <= facts.span_us


def test_two_branches_heavy_on_the_path_light_slack_and_whatif(graph, joined):
    et, _, carriers, edges, dur = reference("two_branch")
    heavy = [n for n in carriers if ref.under(et, carriers[n], "heavy_branch")]
    light = [n for n in carriers if ref.under(et, carriers[n], "light_branch")]
    assert heavy and light
    trace = joined["two_branch"]
    path_rf = {
        json.loads(a)["Record function id"]
        for (a,) in graph.run(
            "MATCH (o:Op {trace: $trace}) WHERE o.cp_step IS NOT NULL RETURN o.attrs", trace=trace
        ).rows
    }
    assert {rf(carriers[n]) for n in heavy} <= path_rf
    assert not {rf(carriers[n]) for n in light} & path_rf
    # Slack of the light branch, worked out from the Kineto durations: the
    # longest path minus the longest path through it (every path enumerated).
    length, _ = ref.longest_path(sorted(carriers), edges, dur)
    through = max(sum(dur[n] for n in p) for p in ref.all_paths(sorted(carriers), edges) if set(p) & set(light))
    slack = {r["op"]: r["slack_us"] for r in run_analysis(graph, "slack", trace).records()}
    for n in light:
        assert slack[carriers[n]["name"]] == pytest.approx(length - through, rel=0.01)
    # What-if: the heavy branch's linears at half their time.
    scaled = {n: d * (0.5 if carriers[n]["name"] == "aten::linear" else 1.0) for n, d in dur.items()}
    new_length, _ = ref.longest_path(sorted(carriers), edges, scaled)
    r = what_if(graph, trace, ["type=aten::linear"], 0.5)
    assert r.baseline_us == pytest.approx(length, rel=1e-6)
    assert r.critical_path_us == pytest.approx(new_length, rel=1e-6)
    assert r.saved_us == pytest.approx(length - new_length, rel=1e-6)


def test_memory_names_the_producing_op_and_tensor(graph, joined):
    """Allocations whose address is a storage's back that storage's tensor
    and belong to the op that produced it: as many as the reference finds
    addresses for."""
    for name in PAIRS:
        et, kineto, _, _, _ = reference(name)
        backed = graph.run(
            "MATCH (t:Tensor {trace: $trace})-[:BACKED_BY]->(a:Allocation) RETURN count(a)", trace=joined[name]
        ).rows[0][0]
        assert backed == len(ref.storage_addresses(et, kineto))
    rows = run_analysis(graph, "peak-memory", joined["mlp_train"]).records()
    named = [r for r in rows if r["tensor"]]
    assert named and all(r["op"] and r["tensor"].startswith(r["op"] + ":") for r in named)


def test_every_analysis_answers(graph, joined):
    from test_every_seed import _params

    from tracegraph.queries.catalog import catalog

    for name, trace in joined.items():
        for a in catalog().values():
            res = run_analysis(graph, a.name, trace, _params(a, graph, trace))
            if a.name in ("critical-path", "longest-chain", "slack", "fan-out", "critical-path-graph"):
                assert res.available and res.rows, (name, a.name, res.note)


def test_kineto_alone_is_unchanged(graph):
    """Without its ET a Kineto trace has no dependencies, no tensors and no
    carries_deps flags: the answers of before."""
    kineto, _ = files("mlp_train")
    ingest(graph, [kineto], "et-kineto-alone")
    facts = describe_trace(graph, "et-kineto-alone")
    assert not facts.has_deps and facts.critical_path_us is None and facts.observed_path_us is not None
    assert graph.run("MATCH (t:Tensor {trace: $trace}) RETURN count(t)", trace="et-kineto-alone").rows[0][0] == 0
    assert (
        graph.run(
            "MATCH (o:Op {trace: $trace}) WHERE o.carries_deps IS NOT NULL RETURN count(o)", trace="et-kineto-alone"
        ).rows[0][0]
        == 0
    )
    assert not run_analysis(graph, "critical-path", "et-kineto-alone").available


def test_et_alone_has_the_structure_without_times(graph):
    _, et_path = files("two_branch")
    et, _, carriers, _, _ = reference("two_branch")
    ingest(graph, [et_path], "et-alone")
    facts = describe_trace(graph, "et-alone")
    assert facts.time_unit == "none" and facts.has_deps and not facts.has_times
    assert facts.ops == sum(1 for n in et["nodes"] if not ref.is_root(n))
    # Without times every carrier weighs 1: the critical path is the longest chain of carriers.
    length, _ = ref.longest_path(sorted(carriers), ref.data_edges(et), dict.fromkeys(carriers, 1.0))
    assert facts.critical_path_us == length == 7


def test_a_directory_holding_the_pair(graph, tmp_path):
    d = tmp_path / "step"
    d.mkdir()
    for f in files("two_branch"):
        shutil.copy(f, d / f.name)
    ingest(graph, [d], "et-dir")
    assert describe_trace(graph, "et-dir").critical_path_us == pytest.approx(
        describe_trace(graph, "et-dir").critical_path_us
    )
    assert graph.run("MATCH (:Op {trace: $trace})-[r:DATA]->() RETURN count(r)", trace="et-dir").rows[0][0] == 7


def test_mismatched_pair_is_refused_in_one_line(graph, tg_home, db_uri, tmp_path):
    kineto, _ = files("two_branch")
    _, et = files("mlp_train")
    with pytest.raises(InputError, match="does not match the Kineto trace"):
        parse_files([kineto, et])
    before = everything(graph)
    proc = run_cli("ingest", str(kineto), str(et), "--trace", "et-mismatch", home=tg_home, db=db_uri)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "does not match" in lines[0] and "record-function id" in lines[0]
    assert everything(graph) == before


def test_bad_execution_traces_are_one_line(tmp_path):
    _, et = files("two_branch")
    text = gzip.decompress(et.read_bytes())
    cases = {
        "truncated.et.json": text[: len(text) // 2],
        "truncated.et.json.gz": et.read_bytes()[:500],
        "no-nodes.et.json": b'{"schema": "1.1.1-chakra.0.0.4", "nodes": 3, "x": "execution_trace|"}',
        "bad-node.et.json": b'{"schema": "1.1.1-chakra.0.0.4", "nodes": [{"name": "x"}]}',
        "empty.et.json": b'{"schema": "1.1.1-chakra.0.0.4", "nodes": [{"id": 1, "name": "[pytorch|profiler|execution_trace|process]", "ctrl_deps": 1}]}',
    }
    for fname, body in cases.items():
        p = tmp_path / fname
        p.write_bytes(body)
        with pytest.raises(InputError) as e:
            et_format.parse(p)
        assert str(p) in str(e.value) and "\n" not in str(e.value), fname


def test_schema_marks():
    # An alias set holding an arrow (aten::split's returns) does not split the schema there.
    assert schema_marks("aten::split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]") == (
        [False, False, False],
        [False],
    )
    assert schema_marks("aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)") == (
        [True, False, False],
        [True],
    )
    assert schema_marks("aten::t(Tensor(a) self) -> Tensor(a)") == ([False], [False])
    assert schema_marks(
        "aten::sum.IntList_out(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None, Tensor(a!) out) -> Tensor(a!)"
    ) == (
        [False, False, False, False, True],
        [True],
    )
