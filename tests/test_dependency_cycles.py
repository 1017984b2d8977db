"""Dependencies that form a cycle are refused, the cycle named.

A cycle has no critical path: the DAG code used to drop the edge that
closed it and answer anyway (a 3-op cycle: exit 0 and a path of fewer ops
than the cycle). Now ingest refuses such a trace, naming its file(s) and
the ops in dependency order from the one that ran first.
"""

from __future__ import annotations

import json

import pytest
from conftest import run_cli
from stepstats_builder import Op, write

from tracegraph.dag import dependency_dag
from tracegraph.errors import DependencyCycle, InputError
from tracegraph.ingest.pipeline import parse_files


def cycle_ops() -> list[Op]:
    """b reads a, c reads b, a reads c; recorded b first; d hangs off c."""
    return [
        Op("b", "Mul", 0, 10, ["a"]),
        Op("c", "Sub", 10, 10, ["b"]),
        Op("a", "Add", 20, 10, ["c"]),
        Op("d", "Neg", 30, 5, ["c"]),
    ]


def test_stepstats_cycle_is_refused_naming_it(tmp_path):
    p = write(tmp_path, cycle_ops(), "cycle.pbtxt")
    with pytest.raises(InputError) as e:
        parse_files([p])
    assert str(e.value) == f"{p}: dependency cycle of 3 ops: b -> c -> a -> b"


def test_cli_refuses_the_cycle_and_writes_nothing(tmp_path):
    p = write(tmp_path, cycle_ops()[:3], "cycle.pbtxt")
    home = tmp_path / "home"
    proc = run_cli("ingest", str(p), "--trace", "cyc", home=home)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [f"tracegraph: error: {p}: dependency cycle of 3 ops: b -> c -> a -> b"]
    assert json.loads(run_cli("traces", "--format", "json", home=home, check=True).stdout) == []


def test_op_listing_control_cycle(tmp_path):
    p = tmp_path / "listing.txt"
    p.write_text(
        "x/a, ^x/c, (float32 2x2), GPU, 0\n"
        "x/b, ^x/a, (float32 2x2), GPU, 0\n"
        "x/c, ^x/b, (float32 2x2), GPU, 0\n"
        "x/d, ^x/c, (float32 2x2), GPU, 0\n"
    )
    with pytest.raises(InputError) as e:
        parse_files([p])
    assert str(e.value) == f"{p}: dependency cycle of 3 ops: x/a -> x/b -> x/c -> x/a"


def test_listing_joined_to_stepstats_of_another_run(tmp_path):
    # Each file alone is acyclic; together they go round (b reads a; the listing says b before a).
    steps = write(tmp_path, [Op("n/a", "Add", 0, 10), Op("n/b", "Mul", 10, 10, ["n/a"])], "step.pbtxt")
    listing = tmp_path / "listing.txt"
    listing.write_text("n/a, ^n/b, (float32 2x2), GPU, 0\nn/b, (1), (float32 2x2), GPU, 0\n")
    with pytest.raises(InputError) as e:
        parse_files([steps, listing])
    assert str(e.value) == f"{steps}, {listing}: dependency cycle of 2 ops: n/a -> n/b -> n/a"


def test_megengine_cycle_names_operators_by_name_and_id(tmp_path):
    doc = {
        "graph_exec": {
            "operator": {
                "1": {"name": "a", "type": "Elemwise", "input": ["12"], "output": ["11"]},
                "2": {"name": "b", "type": "Elemwise", "input": ["11"], "output": ["12"]},
            },
            "var": {"11": {"comp_node": "gpu0:0"}, "12": {"comp_node": "gpu0:0"}},
            "comp_seq": ["1", "2"],
        }
    }
    p = tmp_path / "profile.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(InputError) as e:
        parse_files([p])
    assert str(e.value) == f"{p}: dependency cycle of 2 ops: a (op:1) -> b (op:2) -> a (op:1)"


def test_chainer_cycle_is_refused_by_its_ranks(tmp_path):
    # Function 0 reads block 2, which function 1 makes from block 1, which function 0 makes.
    p = tmp_path / "graph.txt"
    p.write_text(
        '3 2\n0 4 _\n1 4 _\n2 4 _\nforward\n1 1\n2 _\n1\nF\n{"rank": 0}\nforward\n1 1\n1 _\n2\nG\n{"rank": 1}\n'
    )
    with pytest.raises(InputError, match=r"block 2 is read before the function at line 11 produces it"):
        parse_files([p])


def test_the_dag_code_raises_on_a_cycle_too():
    # What-if rebuilds the DAG from stored edges: a cycle there is an error, not a dropped edge.
    uids = [f"op:n{i:02d}" for i in range(12)] + ["op:tail"]
    edges = [(uids[i], uids[(i + 1) % 12]) for i in range(12)] + [("op:n05", "op:tail")]
    with pytest.raises(DependencyCycle) as e:
        dependency_dag(uids, list(range(13)), [True] * 13, edges)
    assert e.value.cycle == uids[:12] + uids[:1]
    assert str(e.value) == "dependency cycle of 12 ops: n00 -> n01 -> n02 -> n03 -> ... -> n09 -> n10 -> n11 -> n00"
    # Only executed ops take part: the same ring with one op that did not run is a chain.
    executed = [True] * 13
    executed[3] = False
    dag = dependency_dag(uids, list(range(13)), executed, edges)
    assert [uids[i] for i in dag.order][:3] == ["op:n04", "op:n05", "op:n06"]
