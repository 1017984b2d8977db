"""What tracegraph makes of directories, negative times and repeated names
(README, "Trace formats"): each rule once, on files built here by hand."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import SEED_OPLIST, SEED_STEPSTATS, run_cli
from stepstats_builder import Op, stepstats_text, write

from tracegraph.errors import InputError
from tracegraph.ingest.formats import megengine_profile
from tracegraph.ingest.formats.tf import opnames as tf_opnames
from tracegraph.ingest.formats.tf import stepstats as tf_stepstats
from tracegraph.ingest.pipeline import parse_files

# ---------------------------------------------------------------- directories


def frames_equal(a, b) -> None:
    for table in ("ops", "kernels", "tensors", "deps", "allocations"):
        pa, pb = getattr(a, table), getattr(b, table)
        assert pa.astype(str).equals(pb.astype(str)), table


def test_directory_of_stepstats_and_listing_is_one_trace(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    shutil.copy(SEED_OPLIST, d / "b-oplist.txt")
    shutil.copy(SEED_STEPSTATS, d / "a-stepstats.pbtxt")
    (d / ".notes").write_text("hidden: skipped")
    (d / "older").mkdir()  # subdirectories are skipped
    shutil.copy(SEED_STEPSTATS, d / "older" / "other.pbtxt")
    got = parse_files([d])
    assert got.sources == [str(d / "a-stepstats.pbtxt"), str(d / "b-oplist.txt")]
    frames_equal(got, parse_files([d / "a-stepstats.pbtxt", d / "b-oplist.txt"]))


def test_directory_ingest_from_the_cli_is_named_after_it(tmp_path):
    d = tmp_path / "alexnet-step"
    d.mkdir()
    shutil.copy(SEED_STEPSTATS, d / "step.pbtxt")
    home = tmp_path / "home"
    out = run_cli("ingest", str(d), home=home, check=True).stdout
    assert out.startswith("trace alexnet-step: ")
    traces = json.loads(run_cli("traces", "--format", "json", home=home, check=True).stdout)
    assert [(t["trace"], t["ops"], t["sources"]) for t in traces] == [("alexnet-step", 118, [str(d / "step.pbtxt")])]


def test_directory_of_two_profiles_is_refused_listing_what_it_found(tmp_path):
    d = tmp_path / "mixed"
    d.mkdir()
    shutil.copy(SEED_STEPSTATS, d / "one.pbtxt")
    shutil.copy(SEED_STEPSTATS, d / "two.pbtxt")
    shutil.copy(SEED_OPLIST, d / "listing.txt")
    with pytest.raises(InputError) as e:
        parse_files([d])
    assert str(e.value) == (
        f"{d}: its files do not form one trace (more than one timed profile; name the files "
        "to use): listing.txt (tf-oplist); one.pbtxt (tf-stepstats); two.pbtxt (tf-stepstats)"
    )


def test_directory_with_a_file_of_no_format_is_refused(tmp_path):
    d = tmp_path / "with-readme"
    d.mkdir()
    shutil.copy(SEED_STEPSTATS, d / "step.pbtxt")
    (d / "README.md").write_text("# notes\n\nnot a trace\n")
    (d / "empty.txt").write_bytes(b"")
    with pytest.raises(InputError) as e:
        parse_files([d])
    assert str(e.value) == (
        f"{d}: its files do not form one trace (some are no trace; name the files to use): "
        "README.md (unrecognized); empty.txt (empty file); step.pbtxt (tf-stepstats)"
    )


def test_directory_without_files_and_a_missing_path(tmp_path):
    d = tmp_path / "hollow"
    d.mkdir()
    (d / ".hidden").write_text("x")
    (d / "sub").mkdir()
    with pytest.raises(InputError) as e:
        parse_files([d])
    assert str(e.value) == f"{d}: directory has no trace files (hidden files and subdirectories are skipped)"
    with pytest.raises(InputError) as e:
        parse_files([tmp_path / "nope"])
    assert str(e.value) == f"{tmp_path / 'nope'}: no such file or directory"


def test_directory_with_explicit_format(tmp_path):
    d = tmp_path / "names"
    d.mkdir()
    (d / "a.txt").write_text("x/y\n")
    with pytest.raises(InputError, match=r"a\.txt \(line 1\): expected header"):
        parse_files([d], "chainer-graph")
    assert list(parse_files([d], "tf-opnames").ops["name"]) == ["x/y"]


# ---------------------------------------------------------------- times


@pytest.mark.parametrize(
    "field, value",
    [("all_end_rel_micros", -5), ("op_end_rel_micros", -1), ("op_start_rel_micros", -2), ("all_end_rel_nanos", -7)],
)
def test_stepstats_negative_duration_is_refused_naming_the_record(tmp_path, field, value):
    b_dur = value if field == "all_end_rel_micros" else 10
    text = stepstats_text([Op("a", "Add", 0, 10), Op("b", "Mul", 10, b_dur, ["a"])])
    if field != "all_end_rel_micros":
        text = text.replace('node_name: "b"', f'node_name: "b"\n    {field}: {value}', 1)
    p = tmp_path / "neg.pbtxt"
    p.write_text(text)
    with pytest.raises(InputError) as e:
        tf_stepstats.parse(p)
    assert str(e.value) == (
        f"{p} (dev_stats[0].node_stats[1]): node 'b' has a negative {field} ({value}): an end before its start"
    )


def test_stepstats_negative_kernel_duration_is_refused(tmp_path):
    text = stepstats_text([Op("a", "Conv2D", 0, 10, kernels=[(7, 1, 5)])]).replace(
        "all_end_rel_micros: 5 }", "all_end_rel_micros: -5 }"
    )
    p = tmp_path / "neg-kernel.pbtxt"
    p.write_text(text)
    with pytest.raises(
        InputError,
        match=r"\(dev_stats\[1\]\.node_stats\[0\]\): node 'a:Conv2D' has a negative "
        r"all_end_rel_micros \(-5\)",
    ):
        tf_stepstats.parse(p)


def test_stepstats_times_are_relative_to_the_earliest_record_of_any_sign(tmp_path):
    ops = [Op("a", "Add", 0, 10), Op("b", "Mul", 10, 10, ["a"]), Op("c", "Sub", 20, 5, ["b"])]
    # An op at time 0 is at time 0, not before the others (it used to be
    # taken for "no time" and land at -10 us, the origin then being 10).
    zero = write(tmp_path, ops, "zero.pbtxt")
    zero.write_text(stepstats_text(ops, base=0))
    # Absolute times before the epoch: only the differences matter.
    negative = tmp_path / "negative.pbtxt"
    negative.write_text(stepstats_text(ops, base=-1_000))
    for p in (zero, negative):
        tf = tf_stepstats.parse(p)
        assert tf.ops[["name", "start_us", "end_us"]].values.tolist() == [["a", 0, 10], ["b", 10, 20], ["c", 20, 25]]


def test_megengine_negative_seconds_are_relative_and_end_before_start_refused(tmp_path):
    doc = megengine_doc(times={"1": (-2.0, -1.999), "2": (-1.999, -1.997)})
    p = tmp_path / "neg.json"
    p.write_text(json.dumps(doc))
    tf = megengine_profile.parse(p)
    assert tf.ops.sort_values("seq")[["name", "start_us", "end_us"]].round(6).values.tolist() == [
        ["a", 0.0, 1000.0],
        ["b", 1000.0, 3000.0],
    ]
    p.write_text(json.dumps(megengine_doc(times={"1": (0.0, 0.001), "2": (0.002, 0.001)})))
    with pytest.raises(InputError, match=r'\(profiler\.device\["2"\]\["gpu0:0"\]\.end\): end before start'):
        megengine_profile.parse(p)


# ---------------------------------------------------------------- repeated names


def megengine_doc(times: dict, names: tuple[str, str] = ("a", "b")) -> dict:
    """Two operators, 1 -> 2 through var 11, timed on one comp node."""
    return {
        "graph_exec": {
            "operator": {
                "1": {"name": names[0], "type": "Elemwise", "input": [], "output": ["11"]},
                "2": {"name": names[1], "type": "Elemwise", "input": ["11"], "output": ["12"]},
            },
            "var": {"11": {"comp_node": "gpu0:0"}, "12": {"comp_node": "gpu0:0"}},
            "comp_seq": ["1", "2"],
        },
        "profiler": {"device": {oid: {"gpu0:0": {"start": s, "end": e}} for oid, (s, e) in times.items()}},
    }


def test_megengine_id_given_twice_is_refused(tmp_path):
    text = json.dumps(megengine_doc(times={"1": (0.0, 0.001), "2": (0.001, 0.002)}))
    # The same operator id twice in graph_exec.operator: a JSON reader keeps the last one only.
    dup = text.replace('"2": {"name": "b"', '"1": {"name": "b"', 1)
    p = tmp_path / "dup.json"
    p.write_text(dup)
    with pytest.raises(InputError) as e:
        megengine_profile.parse(p)
    assert str(e.value) == f'{p}: key "1" given twice in one JSON object'


def test_megengine_repeated_operator_names_are_separate_ops(tmp_path):
    p = tmp_path / "same-names.json"
    p.write_text(json.dumps(megengine_doc(times={"1": (0.0, 0.001), "2": (0.001, 0.002)}, names=("conv", "conv"))))
    tf = megengine_profile.parse(p)
    assert sorted(tf.ops[["uid", "name"]].values.tolist()) == [["op:1", "conv"], ["op:2", "conv"]]


def test_repeated_names_in_tf_formats(tmp_path):
    # StepStats: one op per record (a run); node-name list: one op per line.
    tf = tf_stepstats.parse(write(tmp_path, [Op("loop/add", "Add", 0, 5), Op("loop/add", "Add", 10, 5)]))
    assert tf.ops[["uid", "run", "start_us"]].values.tolist() == [["op:loop/add", 0, 0], ["op:loop/add#2", 1, 10]]
    names = tmp_path / "names.txt"
    names.write_text("f/x\nf/y\nf/x\n")
    assert list(tf_opnames.parse(names).ops["uid"]) == ["op:f/x", "op:f/y", "op:f/x#2"]
    listing = tmp_path / "listing.txt"
    listing.write_text("a/b, (1), (float32 2x2), GPU, 0\na/b, (1), (float32 2x2), GPU, 0\n")
    with pytest.raises(InputError, match=r"\(line 2\): node 'a/b' listed twice \(first on line 1\)"):
        parse_files([listing])
