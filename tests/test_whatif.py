"""What-if (queries/whatif.py and `tracegraph whatif`): scaled weights, new critical path.

The small trace is ``analysis_traces.small_gpu``: DAG A->B->D, A->C->D with
weights A 10, B 30, C 5, D 20 (critical path A B D = 60), isolated ops up
to F = 20, and E -> I = 6.
"""

from __future__ import annotations

import json

import pytest
from analysis_traces import chain, store
from conftest import cli_here

from tracegraph.errors import NotFound, UserError
from tracegraph.queries.types import as_json
from tracegraph.queries.whatif import parse_match
from tracegraph.queries.whatif import what_if as what_if_result


def what_if(*args):
    """The what-if answer as the JSON the CLI and HTTP send."""
    return as_json(what_if_result(*args))


ABD = ["net/conv1/Conv2D", "net/conv2/Conv2D", "gradients/net/conv1/Conv2D_grad/Conv2DBackpropInput"]
ACD = ["net/conv1/Conv2D", "net/relu/Relu", "gradients/net/conv1/Conv2D_grad/Conv2DBackpropInput"]


def test_factor_one_is_the_baseline_exactly(gpu, graph):
    r = what_if(graph, gpu, ["type=Conv2D"], 1)
    assert r["baseline_us"] == r["critical_path_us"] == 60.0
    assert r["speedup"] == 1.0 and r["saved_us"] == 0.0
    assert [p["op"] for p in r["path"]] == ABD
    assert r["matched_ops"] == 2  # net/unused is a Conv2D too, but did not execute


def test_factor_one_is_the_baseline_exactly_on_seed(graph, alexnet):
    stored = graph.run(
        "MATCH (t:Trace {trace: $t, uid: 'trace'}) RETURN t.critical_path_us", {"t": alexnet}, trace=alexnet
    ).rows[0][0]
    cp = graph.run(
        "MATCH (o:Op {trace: $t}) WHERE o.cp_step IS NOT NULL RETURN o.name ORDER BY o.cp_step",
        {"t": alexnet},
        trace=alexnet,
    ).rows
    for match in (["type=Conv2D"], ["name=."], ["type=Conv2D", "name=gradients/"]):
        r = what_if(graph, alexnet, match, 1.0)
        assert r["baseline_us"] == stored
        assert r["critical_path_us"] == stored
        assert r["speedup"] == 1.0
        assert [p["op"] for p in r["path"]] == [c[0] for c in cp]


def test_conv2d_at_half_matches_hand_computation(gpu, graph):
    r = what_if(graph, gpu, ["type=Conv2D"], 0.5)
    # A 5, B 15 (Conv2DBackpropInput is not type Conv2D): A B D = 5 + 15 + 20 = 40 > A C D = 30 > F = 20.
    assert (r["baseline_us"], r["critical_path_us"], r["speedup"], r["saved_us"]) == (60.0, 40.0, 1.5, 20.0)
    assert [(p["op"], p["weight_us"], p["base_weight_us"], p["scaled"]) for p in r["path"]] == [
        (ABD[0], 5.0, 10.0, True),
        (ABD[1], 15.0, 30.0, True),
        (ABD[2], 20.0, 20.0, False),
    ]
    assert [p["step"] for p in r["path"]] == [0, 1, 2]


def test_path_moves_when_the_branch_shrinks(gpu, graph):
    r = what_if(graph, gpu, ["type=Conv2D"], 0.1)
    # A 1, B 3: A B D = 24 < A C D = 1 + 5 + 20 = 26 > F 20.
    assert r["critical_path_us"] == pytest.approx(26.0)
    assert r["speedup"] == pytest.approx(60 / 26)
    assert [p["op"] for p in r["path"]] == ACD


def test_name_regex_and_slowdown(gpu, graph):
    r = what_if(graph, gpu, ["name=copy"], 4)
    # net/copy 20 -> 80 and net/copy2 15 -> 60: the isolated copy becomes the whole path.
    assert r["matched_ops"] == 2
    assert (r["critical_path_us"], r["speedup"]) == (80.0, 0.75)
    assert [(p["op"], p["scaled"]) for p in r["path"]] == [("net/copy", True)]
    # Several --match: an op matched by any is scaled; type= is a full match.
    r = what_if(graph, gpu, ["type=Conv2D.*", "name=^net/relu"], 0)
    assert r["matched_ops"] == 4  # A B D C
    assert r["critical_path_us"] == 20.0 and [p["op"] for p in r["path"]] == ["net/copy"]
    assert r["speedup"] == 3.0


def test_zero_length_path_has_no_speedup(graph):
    trace = store(graph, chain(3), "whatif-chain")
    r = what_if(graph, trace, ["type=Mul"], 0)
    assert r["baseline_us"] == 3.0 and r["critical_path_us"] == 0.0 and r["speedup"] is None


def test_bad_requests(gpu, graph):
    with pytest.raises(NotFound):
        what_if(graph, "nope", ["type=Conv2D"], 1)
    # A full match: no type is just "Conv"; nothing matched, nothing changes.
    none = what_if(graph, gpu, ["type=Conv"], 1)
    assert none["matched_ops"] == 0 and none["critical_path_us"] == none["baseline_us"] == 60.0
    for bad in ("Conv2D", "kind=Conv2D", "type=", "name=("):
        with pytest.raises(UserError):
            parse_match(bad)
    for factor in (-1, float("nan"), float("inf"), "x"):
        with pytest.raises(UserError, match="factor"):
            what_if(graph, gpu, ["type=Conv2D"], factor)
    single = store(graph, chain(1), "whatif-single")
    r = what_if_result(graph, single, ["type=Mul"], 2)
    assert r.unavailable is not None and r.unavailable.fact == "deps" and r.path == []
    assert r.unavailable.note.startswith("not available: the trace has no dependencies")


def test_cli(gpu, graph, db_uri):
    """The CLI's answers (called in this process)."""
    out = cli_here(
        "whatif",
        "--trace",
        gpu,
        "--match",
        "type=Conv2D",
        "--factor",
        "0.5",
        "--format",
        "json",
        db=db_uri,
        check=True,
    ).stdout
    r = json.loads(out)
    assert (r["critical_path_us"], r["baseline_us"], r["speedup"]) == (40.0, 60.0, 1.5)
    assert [p["op"] for p in r["path"]] == ABD
    one = json.loads(
        cli_here(
            "whatif",
            "--trace",
            gpu,
            "--match",
            "name=.",
            "--factor",
            "1",
            "--format",
            "json",
            db=db_uri,
            check=True,
        ).stdout
    )
    assert one["critical_path_us"] == one["baseline_us"] == 60.0
    table = cli_here(
        "whatif", "--trace", gpu, "--match", "type=Conv2D", "--factor", "0.5", db=db_uri, check=True
    ).stdout
    assert "critical path 40.0 us (baseline 60.0 us, speedup 1.5x), 3 ops:" in table
    assert table.splitlines()[2].split() == ["step", "op", "type", "weight_us", "base_weight_us", "scaled"]
    proc = cli_here("whatif", "--trace", "nope", "--match", "type=Conv2D", "--factor", "1", db=db_uri)
    assert (
        proc.returncode == 1
        and proc.stderr.strip() == "tracegraph: error: no trace named 'nope' (see `tracegraph traces`)"
    )
