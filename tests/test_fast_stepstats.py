"""The fast StepStats text reader gives exactly the frames text_format gives.

``tf_stepstats.parse(path)`` reads text with ingest/stepstats_text.py and
falls back to ``text_format.Parse`` for anything that reader does not
handle; ``parse(path, fast=False)`` is the protobuf path alone. Every test
here compares the two (all frames, dtypes included, and errors).
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
from pandas.testing import assert_frame_equal

from tracegraph.errors import InputError
from tracegraph.ingest.formats.tf import stepstats as tf_stepstats
from tracegraph.ingest.formats.tf import stepstats_text

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # bench/ is a plain folder of the repository

from bad_input import EDITS, mutate  # noqa: E402
from stepstats_builder import Op, write  # noqa: E402

from bench import generate  # noqa: E402

SEED = ROOT / "examples" / "traces" / "tf1-alexnet-stepstats.pbtxt"
FRAMES = ["ops", "kernels", "tensors", "consumes", "deps", "allocations", "devices", "streams", "allocators"]


def assert_same_frames(a, b) -> None:
    for name in FRAMES:
        x, y = getattr(a, name), getattr(b, name)
        assert list(x.columns) == list(y.columns), name
        assert_frame_equal(x, y, check_dtype=True, check_exact=True, obj=name)
    assert (a.framework, a.sources, a.time_unit, a.meta) == (b.framework, b.sources, b.time_unit, b.meta)


def outcome(path: Path, fast: bool):
    """Frames, or the InputError text."""
    try:
        return tf_stepstats.parse(path, fast=fast)
    except InputError as e:
        return f"InputError: {e}"


def assert_same_outcome(path: Path) -> None:
    fast, slow = outcome(path, True), outcome(path, False)
    if isinstance(slow, str) or isinstance(fast, str):
        assert fast == slow
    else:
        assert_same_frames(fast, slow)


def test_seed_is_read_by_the_fast_path_with_the_same_frames():
    stepstats_text.parse(SEED.read_text(), wrapped=False)  # no fallback on the real TF text
    assert_same_frames(tf_stepstats.parse(SEED), tf_stepstats.parse(SEED, fast=False))


@pytest.mark.parametrize("name", ["tf-while-loop-lstm-stepstats", "tf-nested-while-loop-stepstats"])
def test_real_loop_traces_with_nanos_are_read_by_the_fast_path(name):
    """TF 2.x text (nanos fields, repeated node names): no fallback, the
    same frames as text_format, and the same as the binary form."""
    text = ROOT / "tests" / "data" / f"{name}.pbtxt"
    stepstats_text.parse(text.read_text(), wrapped=False)
    fast = tf_stepstats.parse(text)
    assert_same_frames(fast, tf_stepstats.parse(text, fast=False))
    binary = tf_stepstats.parse(text.with_suffix(".pb"))
    binary.sources = fast.sources
    assert_same_frames(binary, fast)


@pytest.mark.parametrize("ops,seed", [(30, 0), (1000, 1)])
def test_generated_traces_same_frames(tmp_path, ops, seed):
    out = generate.write(generate.generate(ops, seed), tmp_path)
    stepstats_text.parse(out["text"].read_text(), wrapped=False)
    assert_same_frames(tf_stepstats.parse(out["text"]), tf_stepstats.parse(out["text"], fast=False))
    # ... and the binary form of the same step gives the same frames too.
    binary = tf_stepstats.parse(out["binary"])
    text = tf_stepstats.parse(out["text"])
    binary.sources = text.sources
    assert_same_frames(binary, text)


def test_run_metadata_wrapper(tmp_path):
    body = SEED.read_text()
    p = tmp_path / "run_metadata.pbtxt"
    p.write_text("step_stats {\n" + "".join("  " + line + "\n" for line in body.splitlines()) + "}\n")
    stepstats_text.parse(p.read_text(), wrapped=True)
    assert_same_outcome(p)


REJECTED = {
    "comment": "# a comment\n",
    "unknown field": '  device: "x"\n  colour: 3\n',
    "escape in string": '  device: "a\\"b"\n',
    "two fields on a line": '  device: "x" node_stats { }\n',
    "octal": '  node_stats {\n    node_name: "a"\n    all_start_micros: 010\n  }\n',
    "hex": '  node_stats {\n    node_name: "a"\n    all_start_micros: 0x10\n  }\n',
    "out of range": '  node_stats {\n    node_name: "a"\n    thread_id: 4294967296\n  }\n',
    "field twice": '  node_stats {\n    node_name: "a"\n    node_name: "b"\n  }\n',
    "message with colon": '  node_stats: {\n    node_name: "a"\n  }\n',
    "angle brackets": '  node_stats <\n    node_name: "a"\n  >\n',
    "unknown enum": '  node_stats {\n    node_name: "a"\n    output {\n      tensor_description {\n        dtype: DT_NOPE\n'
    "      }\n    }\n  }\n",
}


@pytest.mark.parametrize("case", sorted(REJECTED))
def test_fast_reader_declines_what_it_does_not_read_exactly(tmp_path, case):
    text = "dev_stats {\n" + REJECTED[case] + "}\n"
    with pytest.raises(stepstats_text.Unsupported):
        stepstats_text.parse(text, wrapped=False)
    p = tmp_path / "case.pbtxt"
    p.write_text(text)
    assert_same_outcome(p)


@pytest.mark.parametrize(
    "text",
    [
        "dev_stats {\n",  # unterminated
        "dev_stats {\n}\n}\n",  # unbalanced
        'dev_stats {\n  device: "/job:a/device:GPU:0"\n}\n',  # no records
    ],
)
def test_broken_texts_give_the_same_error(tmp_path, text):
    p = tmp_path / "broken.pbtxt"
    p.write_text(text)
    assert_same_outcome(p)


def test_other_layouts_fall_back_to_protobuf(tmp_path):
    """Fields on one line (the test helper's layout) are text_format's job."""
    p = write(
        tmp_path,
        [
            Op("a", "MatMul", 0, 10, [], [(13, 1, 5)], [(1, 256), (9, -256)], 256),
            Op("b", "Relu", 12, 5, ["a"], [(13, 13, 3)]),
        ],
    )
    with pytest.raises(stepstats_text.Unsupported):
        stepstats_text.parse(p.read_text(), wrapped=False)
    assert_same_outcome(p)


def test_mutated_texts_agree(tmp_path):
    """Lines deleted, duplicated, swapped or edited at random: the fast
    path either declines or reads exactly what text_format reads."""
    base = generate.to_text(generate.generate(30, 3)).splitlines(keepends=True)
    rng = random.Random(7)
    for i in range(60):
        lines = mutate(base, rng, EDITS[i % len(EDITS)])
        p = tmp_path / f"m{i}.pbtxt"
        p.write_text("".join(lines))
        assert_same_outcome(p)
