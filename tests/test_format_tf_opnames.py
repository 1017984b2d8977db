"""tf-opnames parser: seed 002 (TF2 + Horovod ResNet-50 node names).

Expected numbers are worked out here from the raw lines with plain string
tests, not with the parser's helpers, so a wrong rule in the parser shows up.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import bad_input
import pytest

from tracegraph.errors import InputError
from tracegraph.ingest.formats.tf import opnames as tf_opnames

TRACES = Path(__file__).resolve().parents[1] / "examples" / "traces"
SEED = TRACES / "tf2-resnet50-opnames.txt"
OTHER_SEEDS = [
    "tf1-alexnet-oplist.txt",
    "tf1-alexnet-stepstats.pbtxt",
    "chainer-vgg19-graph.txt",
    "megengine-resnet50-profile.json",
]


def raw_names() -> list[str]:
    return [line.strip() for line in SEED.read_text().split("\n") if line.strip()]


def expected_phase(name: str) -> str:
    if name.startswith(
        ("DistributedGradientTape_Allreduce/", "Func/DistributedGradientTape_Allreduce/", "HorovodBroadcast.")
    ):
        return "communication"
    if name.startswith("SGD/"):
        return "optimizer"
    if name.startswith(("gradient_tape/", "ConstantFolding/gradient_tape/")):
        return "backward"
    return "forward"


@pytest.fixture(scope="module")
def trace():
    return tf_opnames.parse(SEED)


def parse_or_error(path: Path):
    """The frames, or None after checking the InputError is one line naming file and line."""
    return bad_input.parse_or_error(tf_opnames.parse, path)


def test_counts_match_raw_lines(trace):
    names = raw_names()
    assert len(names) == 2467  # 2,466 newlines; the last line has none
    assert SEED.read_bytes().count(b"\n") == 2466
    assert len(trace.ops) == len(names)
    assert list(trace.ops["name"]) == names
    assert list(trace.ops["seq"]) == list(range(2467))
    assert trace.ops["uid"].is_unique
    assert set(trace.ops["device"]) == {"dev:unknown"}
    assert trace.devices.to_dict("records") == [
        {"uid": "dev:unknown", "name": "unknown", "kind": "unknown", "rank": None}
    ]
    assert trace.ops["start_us"].isna().all() and trace.ops["end_us"].isna().all()
    assert len(trace.deps) == 0 and len(trace.tensors) == 0
    assert (trace.framework, trace.time_unit) == ("tensorflow", "none")
    trace.check()


def test_phases(trace):
    counts: dict[str, int] = {}
    for name in raw_names():
        counts[expected_phase(name)] = counts.get(expected_phase(name), 0) + 1
    assert counts == {"forward": 1005, "communication": 750, "backward": 494, "optimizer": 218}
    assert trace.ops["phase"].value_counts().to_dict() == counts
    assert list(trace.ops["phase"]) == [expected_phase(n) for n in raw_names()]


def test_inferred_types(trace):
    types = dict(zip(trace.ops["name"], trace.ops["type"]))
    assert types["resnet50/conv2_block1_1_conv/Conv2D"] == "Conv2D"
    assert types["gradient_tape/resnet50/conv2_block1_1_conv/Conv2D/Conv2DBackpropFilter"] == "Conv2DBackpropFilter"
    assert types["resnet50/conv1_bn/FusedBatchNormV3/ReadVariableOp_1"] == "ReadVariableOp"
    assert types["resnet50/conv1_conv/Conv2D-0-TransposeNHWCToNCHW-LayoutOptimizer"] == "Transpose"
    assert types["resnet50/conv1_conv/Conv2D-0-PermConstNHWCToNCHW-LayoutOptimizer"] == "Const"
    assert types["resnet50/avg_pool/Mean-1-DataFormatDimMapNHWCToNCHW-LayoutOptimizer"] == "DataFormatDimMap"
    assert types["ConstantFolding/gradient_tape/resnet50/avg_pool/truediv_recip"] == "Const"
    assert types["resnet50/conv2_block1_add/add"] == "AddV2"
    assert types["AssignVariableOp_12"] == "AssignVariableOp"
    assert types["ArithmeticOptimizer/ReorderCastLikeAndValuePreserving_float_Reshape"] == "Reshape"
    assert types["Func/DistributedGradientTape_Allreduce/cond_213/else/_1705/input/_3421"] == "Identity"
    # Counted from the raw lines: names whose last component is X or X_<n>.
    last = [n.split("/")[-1] for n in raw_names()]
    read_vars = sum(1 for c in last if re.fullmatch(r"ReadVariableOp(_\d+)?", c))
    assert read_vars == 643
    assert (trace.ops["type"] == "ReadVariableOp").sum() == read_vars
    transposes = sum(1 for c in last if c.endswith("-TransposeNHWCToNCHW-LayoutOptimizer"))
    assert (trace.ops["type"] == "Transpose").sum() == transposes == 3
    assert (trace.ops["type"] == "Conv2D").sum() == sum(1 for c in last if c == "Conv2D") == 53


def test_scopes_in_attrs(trace):
    row = trace.ops.set_index("name").loc["resnet50/conv2_block1_1_conv/Conv2D"]
    attrs = json.loads(row["attrs"])
    assert attrs["scope"] == "resnet50/conv2_block1_1_conv"
    assert attrs["scopes"] == ["resnet50", "resnet50/conv2_block1_1_conv"]
    top = json.loads(trace.ops.set_index("name").loc["Cast", "attrs"])
    assert top["scope"] == "" and top["scopes"] == []


def test_sniff():
    assert tf_opnames.sniff(SEED.read_bytes()[:65536])
    for other in OTHER_SEEDS:
        assert not tf_opnames.sniff((TRACES / other).read_bytes()[:65536]), other
    assert not tf_opnames.sniff(b"")
    assert not tf_opnames.sniff(b"86 92\n0 12845056 _\n")
    assert not tf_opnames.sniff(b'dev_stats {\n  device: "x"\n')
    assert not tf_opnames.sniff(bytes(range(256)))


def test_repeated_names_get_unique_uids(tmp_path):
    path = tmp_path / "dup.txt"
    path.write_text("a/b\na/b\n\nc\na/b\n")
    trace = tf_opnames.parse(path)
    assert list(trace.ops["uid"]) == ["op:a/b", "op:a/b#2", "op:c", "op:a/b#3"]
    assert list(trace.ops["seq"]) == [0, 1, 2, 3]
    assert json.loads(trace.ops["attrs"].iloc[3])["line"] == 5


def test_reordered_lines(tmp_path):
    names = raw_names()
    shuffled = names[:]
    random.Random(2).shuffle(shuffled)
    path = tmp_path / "shuffled.txt"
    path.write_text("\n".join(shuffled) + "\n")
    trace = tf_opnames.parse(path)
    assert list(trace.ops["name"]) == shuffled
    original = tf_opnames.parse(SEED)
    assert dict(zip(trace.ops["uid"], trace.ops["type"])) == dict(zip(original.ops["uid"], original.ops["type"]))


@pytest.mark.parametrize("cut", [1, 9, 100, 4097, 65536, 99999, 129000, 129308])
def test_truncated(tmp_path, cut):
    data = SEED.read_bytes()[:cut]
    path = tmp_path / "cut.txt"
    path.write_bytes(data)
    trace = parse_or_error(path)
    lines = [line.strip() for line in data.decode().split("\n") if line.strip()]
    if trace is not None:
        assert list(trace.ops["name"]) == lines


@pytest.mark.parametrize(
    "bad, line",
    [
        ("resnet50/conv1_conv/Conv2D, GPU", 3),
        ("resnet50/ conv1", 3),
        ("resnet50/conv1(x)", 3),
        ('{"a": 1}', 3),
        ("resnet50//conv1", 3),
        ("resnet50/", 3),
    ],
)
def test_corrupted_line(tmp_path, bad, line):
    path = tmp_path / "bad.txt"
    path.write_text("a/b\nc/d\n" + bad + "\ne/f\n")
    with pytest.raises(InputError) as info:
        tf_opnames.parse(path)
    assert str(info.value) == f"{path} (line {line}): " + info.value.what
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "content", [b"", b"\n\n  \n", bytes(random.Random(0).randbytes(5000)), b"\x00\x01\x02abc\n", b"ok/name\n\xff\xfe\n"]
)
def test_empty_or_garbage(tmp_path, content):
    path = tmp_path / "garbage.txt"
    path.write_bytes(content)
    with pytest.raises(InputError) as info:
        tf_opnames.parse(path)
    assert str(path) in str(info.value) and re.search(r"\(line \d+\)", str(info.value))
    assert "\n" not in str(info.value)
