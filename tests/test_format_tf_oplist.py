"""tf-oplist parser and merge: seed 000 (TF1 AlexNet op listing).

Expected numbers are worked out here from the raw lines with plain string
operations, independent of the parser's regular expressions.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import bad_input
import pytest

from tracegraph.errors import InputError
from tracegraph.ingest.formats.tf import oplist as tf_oplist
from tracegraph.ingest.frames import (
    DEP_COLUMNS,
    DEVICE_COLUMNS,
    KERNEL_COLUMNS,
    OP_COLUMNS,
    STREAM_COLUMNS,
    TENSOR_COLUMNS,
    TraceFrames,
    frame,
)

TRACES = Path(__file__).resolve().parents[1] / "examples" / "traces"
SEED = TRACES / "tf1-alexnet-oplist.txt"
OTHER_SEEDS = [
    "tf2-resnet50-opnames.txt",
    "tf1-alexnet-stepstats.pbtxt",
    "chainer-vgg19-graph.txt",
    "megengine-resnet50-profile.json",
]


def raw_lines() -> list[list[str]]:
    return [line.split(", ") for line in SEED.read_text().split("\n") if line.strip()]


def is_kernel_line(fields: list[str]) -> bool:
    return fields[1:-2] == ["(no input)", "(no output)"]


@pytest.fixture(scope="module")
def trace():
    return tf_oplist.parse(SEED)


def parse_or_error(path: Path):
    """The frames, or None after checking the InputError is one line naming file and line."""
    return bad_input.parse_or_error(tf_oplist.parse, path)


def test_ops_and_devices(trace):
    lines = raw_lines()
    assert len(lines) == 178
    op_lines = [f for f in lines if not is_kernel_line(f)]
    assert len(op_lines) == 116 and len(lines) - len(op_lines) == 62
    assert list(trace.ops["name"]) == [f[0] for f in op_lines]
    assert list(trace.ops["seq"]) == list(range(116))
    assert trace.ops["executed"].all()
    assert sorted(trace.devices["uid"]) == ["dev:CPU", "dev:GPU"]
    assert dict(zip(trace.devices["uid"], trace.devices["kind"])) == {"dev:GPU": "GPU", "dev:CPU": "CPU"}
    on_cpu = sum(1 for f in op_lines if f[-2] == "CPU")
    assert on_cpu == 10 and (trace.ops["device"] == "dev:CPU").sum() == on_cpu
    assert (trace.framework, trace.time_unit) == ("tensorflow", "none")
    trace.check()


def test_types(trace):
    types = dict(zip(trace.ops["name"], trace.ops["type"]))
    kernel_types = {f[0].rsplit(":", 1)[0]: f[0].rsplit(":", 1)[1] for f in raw_lines() if is_kernel_line(f)}
    assert len(kernel_types) == 62
    for name, op_type in kernel_types.items():
        assert types[name] == op_type
    assert types["conv1"] == "Relu" and types["pool5"] == "MaxPool"
    assert types["conv1/Conv2D-0-TransposeNHWCToNCHW-LayoutOptimizer"] == "Transpose"
    # No kernel line: guessed from the name.
    assert types["Variable/read"] == "Identity"
    assert types["_SOURCE"] == "NoOp"
    assert types["_retval_gradients/conv1/BiasAdd_grad/BiasAddGrad_0_0"] == "_Retval"
    assert types["ConstantFolding/gradients/conv1/Conv2D_grad/ShapeN-matshapes-1"] == "Const"
    assert types["gradients/conv2/Conv2D_grad/Conv2DBackpropInput-0-LayoutOptimizer"] == "Const"
    sources = [json.loads(a)["type_source"] for a in trace.ops["attrs"]]
    assert sources.count("kernel") == 62 and sources.count("copy") == 10 and sources.count("name") == 44


def test_phases(trace):
    expected = {}
    for f in raw_lines():
        if is_kernel_line(f):
            continue
        name = f[0]
        if name.startswith(("_SOURCE", "_retval_")):
            expected[name] = "other"
        elif "gradients/" in name:
            expected[name] = "backward"
        else:
            expected[name] = "forward"
    assert dict(zip(trace.ops["name"], trace.ops["phase"])) == expected
    assert trace.ops["phase"].value_counts().to_dict() == {"forward": 51, "backward": 54, "other": 11}


def test_control_deps(trace):
    expected = set()
    for f in raw_lines():
        for item in f[1:-3]:
            if item.startswith("^"):
                expected.add((f"op:{item[1:]}", f"op:{f[0]}"))
    assert len(expected) == 18
    assert set(zip(trace.deps["src"], trace.deps["dst"])) == expected
    assert len(trace.deps) == 18 and set(trace.deps["kind"]) == {"control"}


def test_tensors(trace):
    shaped = [
        f for f in raw_lines() if not is_kernel_line(f) and f[-3] != "(no output)" and not f[-3].startswith("(output ")
    ]
    assert len(shaped) == 95 and len(trace.tensors) == 95
    by_uid = trace.tensors.set_index("uid")
    for f in shaped:
        text = f[-3][1:-1]
        dtype, dims = text.split(" ") if " " in text else ("float32", text)
        size = {"float32": 4, "int32": 4}[dtype]
        row = by_uid.loc[f"t:{f[0]}:0"]
        assert (row["dtype"], row["shape"]) == (dtype, dims)
        assert row["bytes"] == math.prod(int(d) for d in dims.split("x")) * size
        assert row["producer"] == f"op:{f[0]}" and row["output_index"] == 0
    assert by_uid.loc["t:conv1/Conv2D:0", "bytes"] == 128 * 64 * 56 * 56 * 4 == 102760448
    assert by_uid.loc["t:PermConstNHWCToNCHW-LayoutOptimizer:0", "bytes"] == 16
    inputs = json.loads(trace.ops.set_index("name").loc["gradients/conv1/Conv2D_grad/Conv2DBackpropFilter", "attrs"])
    assert inputs["input_shapes"] == ["128x224x224x3", "int32 4x1", "128x56x56x64"]


def test_memcpy_copies(trace):
    copies = {f[0]: int(f[-3].split(" ")[1]) for f in raw_lines() if f[-3].startswith("(output ")}
    assert len(copies) == 10 and sum(copies.values()) == 9878784
    kernels = trace.kernels.set_index("op")
    assert len(trace.kernels) == 10
    assert int(trace.kernels["bytes"].sum()) == 9878784
    for name, nbytes in copies.items():
        k = kernels.loc[f"op:{name}"]
        assert (k["kind"], k["bytes"], k["direction"], k["stream"]) == ("memcpy", nbytes, "DtoH", "s:GPU/memcpy")
    types = dict(zip(trace.ops["name"], trace.ops["type"]))
    assert {types[n] for n in copies} == {"MEMCPYDtoH"}
    assert trace.streams.to_dict("records") == [
        {"uid": "s:GPU/memcpy", "device": "dev:GPU", "name": "GPU/memcpy", "kind": "memcpy"}
    ]
    # Each copy consumes the tensor it copies; the byte counts agree.
    tensor_bytes = dict(zip(trace.tensors["uid"], trace.tensors["bytes"]))
    assert len(trace.consumes) == 10
    for op, tensor in zip(trace.consumes["op"], trace.consumes["tensor"]):
        assert tensor_bytes[tensor] == copies[op[len("op:") :]]


def test_sniff():
    assert tf_oplist.sniff(SEED.read_bytes()[:65536])
    for other in OTHER_SEEDS:
        assert not tf_oplist.sniff((TRACES / other).read_bytes()[:65536]), other
    assert not tf_oplist.sniff(b"")
    assert not tf_oplist.sniff(bytes(range(256)))


def test_reordered_lines(tmp_path, trace):
    lines = SEED.read_text().split("\n")
    random.Random(1).shuffle(lines)
    path = tmp_path / "shuffled.txt"
    path.write_text("\n".join(lines))
    shuffled = tf_oplist.parse(path)

    def essence(t: TraceFrames):
        ops = sorted(zip(t.ops["uid"], t.ops["type"], t.ops["device"], t.ops["phase"]))
        return (
            ops,
            sorted(zip(t.deps["src"], t.deps["dst"])),
            sorted(t.tensors["uid"]),
            sorted(zip(t.kernels["op"], t.kernels["bytes"])),
            sorted(t.consumes["tensor"]),
        )

    assert essence(shuffled) == essence(trace)


def test_control_only_op_is_not_executed(tmp_path):
    path = tmp_path / "ctl.txt"
    path.write_text("a/b, ^c/d, ^c/d, (int32 4x1), GPU, 0\nx:Relu, (no input), (no output), GPU, 0\n")
    t = tf_oplist.parse(path)
    rows = t.ops.set_index("uid")
    assert rows.loc["op:c/d", "executed"] == False  # noqa: E712 (numpy bool)
    assert rows.loc["op:x", "type"] == "Relu"
    assert len(t.deps) == 1


def _line_starts() -> list[int]:
    data = SEED.read_bytes()
    return [0] + [i + 1 for i, b in enumerate(data) if b == ord("\n")]


@pytest.mark.parametrize("cut", [3, 57, 130, 1000, 5555, 7301, 9999, 12345, 14000, 14727])
def test_truncated_mid_line(tmp_path, cut):
    data = SEED.read_bytes()
    assert data[cut - 1 : cut] != b"\n"
    path = tmp_path / "cut.txt"
    path.write_bytes(data[:cut])
    line = data[:cut].count(b"\n") + 1
    complete = data[cut : cut + 1] == b"\n" or cut == len(data)
    if complete:  # the cut lands at a line end: a shorter, valid listing
        assert parse_or_error(path) is not None
        return
    with pytest.raises(InputError) as info:
        tf_oplist.parse(path)
    assert info.value.where == f"line {line}"
    assert parse_or_error(path) is None


def test_truncated_every_point_of_one_line(tmp_path):
    data = SEED.read_bytes()
    starts = _line_starts()
    begin, end = starts[92], starts[93] - 1  # line 93, Conv2DBackpropFilter
    for cut in range(begin + 1, end):
        path = tmp_path / f"cut{cut}.txt"
        path.write_bytes(data[:cut])
        with pytest.raises(InputError) as info:
            tf_oplist.parse(path)
        assert info.value.where == "line 93", (cut, str(info.value))
    path = tmp_path / "whole.txt"
    path.write_bytes(data[:end])
    assert parse_or_error(path) is not None


@pytest.mark.parametrize(
    "old, new",
    [
        ("(128x64x56x56)", "(128x64x56x56"),
        ("(128x64x56x56)", "(128xx64x56x56)"),
        ("(128x64x56x56)", "(128x64x56x56))"),
        ("(128x64x56x56)", "128x64x56x56"),
        ("(128x64x56x56)", "(128 64 56 56)"),
        ("(int32 4x1)", "(int33 4x1)"),
        ("(int32 4x1)", "(output 4x1 bytes)"),
        ("(no output)", "(no outputs)"),
        (", GPU, 0", ", GPU, zero"),
        (", GPU, 0", ", , 0"),
        ("conv1", "conv 1"),
    ],
)
def test_corrupted(tmp_path, old, new):
    text = SEED.read_text()
    first = text.index(old)
    line = text[:first].count("\n") + 1
    path = tmp_path / "bad.txt"
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(InputError) as info:
        tf_oplist.parse(path)
    assert info.value.where == f"line {line}", str(info.value)
    assert str(info.value).startswith(f"{path} (line {line}): ")
    assert "\n" not in str(info.value)


def test_duplicate_line(tmp_path):
    lines = SEED.read_text().split("\n")
    path = tmp_path / "dup.txt"
    path.write_text("\n".join([*lines, lines[20]]))
    with pytest.raises(InputError) as info:
        tf_oplist.parse(path)
    assert info.value.where == f"line {len(lines) + 1}" and "line 21" in info.value.what


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"\n \n",
        random.Random(0).randbytes(5000),
        b"\x00\x01\x02abc, (1), (1), GPU, 0\n",
        SEED.read_bytes()[:500] + b"\xff\n",
    ],
)
def test_empty_or_garbage(tmp_path, content):
    path = tmp_path / "garbage.txt"
    path.write_bytes(content)
    assert parse_or_error(path) is None


# --------------------------------------------------------------------------- merge

LISTING = """\
conv1, (2x3), (2x3), GPU, 0
conv1:Relu, (no input), (no output), GPU, 0
conv1/Conv2D, (2x2), (int32 2x3), GPU, 0
conv1/Conv2D:Conv2D, (no input), (no output), GPU, 0
extra/Const, ^conv1, ^conv1/Conv2D, (int32 4x1), GPU, 0
g, (4), (4), GPU, 0
edge_1_g:MEMCPYDtoH, (no input), (output 16 bytes), GPU, 0
edge_2_h:MEMCPYDtoH, (no input), (output 8 bytes), GPU, 0
"""


def small_base() -> TraceFrames:
    gpu = "dev:/job:localhost/replica:0/task:0/device:GPU:0"
    ops = [
        {
            "uid": "op:conv1/Conv2D",
            "name": "conv1/Conv2D",
            "type": "Conv2D",
            "device": gpu,
            "seq": 0,
            "start_us": 0.0,
            "end_us": 5.0,
            "dur_us": 5.0,
            "executed": True,
            "attrs": '{"label": "x"}',
        },
        {
            "uid": "op:conv1",
            "name": "conv1",
            "type": None,
            "device": gpu,
            "seq": 1,
            "start_us": 5.0,
            "end_us": 6.0,
            "dur_us": 1.0,
            "executed": True,
        },
        {
            "uid": "op:g",
            "name": "g",
            "type": "Identity",
            "device": gpu,
            "seq": 2,
            "start_us": 6.0,
            "end_us": 7.0,
            "dur_us": 1.0,
            "executed": True,
        },
        {
            "uid": "op:edge_9_g:MEMCPYDtoH",
            "name": "edge_9_g:MEMCPYDtoH",
            "type": "MEMCPYDtoH",
            "device": gpu,
            "seq": 3,
            "start_us": 7.0,
            "end_us": 9.0,
            "dur_us": 2.0,
            "executed": True,
        },
    ]
    return TraceFrames(
        framework="tensorflow",
        sources=["stepstats.pbtxt"],
        time_unit="us",
        ops=frame(ops, OP_COLUMNS),
        devices=frame(
            [
                {"uid": gpu, "name": "/job:localhost/replica:0/task:0/device:GPU:0", "kind": "GPU"},
                {"uid": "dev:cpu0", "name": "/device:CPU:0", "kind": "CPU"},
            ],
            DEVICE_COLUMNS,
        ),
        streams=frame([{"uid": "s:memcpy", "device": gpu, "name": "memcpy", "kind": "memcpy"}], STREAM_COLUMNS),
        kernels=frame(
            [
                {
                    "uid": "k:copy",
                    "op": "op:edge_9_g:MEMCPYDtoH",
                    "stream": "s:memcpy",
                    "name": "edge_9_g:MEMCPYDtoH",
                    "start_us": 7.0,
                    "end_us": 9.0,
                    "dur_us": 2.0,
                    "kind": "memcpy",
                }
            ],
            KERNEL_COLUMNS,
        ),
        tensors=frame(
            [
                {
                    "uid": "t:conv1/Conv2D:0",
                    "name": "conv1/Conv2D:0",
                    "dtype": "int32",
                    "producer": "op:conv1/Conv2D",
                    "output_index": 0,
                }
            ],
            TENSOR_COLUMNS,
        ),
        deps=frame(
            [
                {"src": "op:conv1", "dst": "op:g", "kind": "data"},
                {"src": "op:conv1/Conv2D", "dst": "op:conv1", "kind": "data"},
            ],
            DEP_COLUMNS,
        ),
        meta={"model": "alexnet"},
    )


def test_merge_small(tmp_path):
    path = tmp_path / "listing.txt"
    path.write_text(LISTING)
    base, extra = small_base(), tf_oplist.parse(path)
    merged = tf_oplist.merge(base, extra)
    merged.check()
    assert merged.sources == ["stepstats.pbtxt", str(path)]
    assert (merged.framework, merged.time_unit, merged.meta) == ("tensorflow", "us", {"model": "alexnet"})
    ops = merged.ops.set_index("uid")
    # Base keeps its values; gaps are filled from the listing.
    assert ops.loc["op:conv1", "type"] == "Relu"
    assert ops.loc["op:conv1/Conv2D", "type"] == "Conv2D"
    assert list(ops.loc[["op:conv1/Conv2D", "op:conv1", "op:g"], "start_us"]) == [0.0, 5.0, 6.0]
    attrs = json.loads(ops.loc["op:conv1/Conv2D", "attrs"])
    assert attrs["label"] == "x" and attrs["input_shapes"] == ["2x2"]
    # Listing-only ops: extra/Const and the copy of h (no base copy of h).
    added = set(merged.ops["uid"]) - set(base.ops["uid"])
    assert added == {"op:extra/Const", "op:edge_2_h:MEMCPYDtoH"}
    for uid in added:
        assert not ops.loc[uid, "executed"]
        assert ops.loc[uid, "device"] == "dev:/job:localhost/replica:0/task:0/device:GPU:0"
    # The copy of g matched base's edge_9 copy despite the other edge number.
    kernel = merged.kernels.set_index("uid").loc["k:copy"]
    assert (kernel["bytes"], kernel["direction"]) == (16, "DtoH")
    new_kernel = merged.kernels[merged.kernels["op"] == "op:edge_2_h:MEMCPYDtoH"]
    assert list(new_kernel["stream"]) == ["s:memcpy"] and list(new_kernel["bytes"]) == [8]
    assert len(merged.streams) == 1 and len(merged.devices) == 2
    # Deps: base's two plus the listing's two control deps.
    deps = set(zip(merged.deps["src"], merged.deps["dst"], merged.deps["kind"]))
    assert deps == {
        ("op:conv1", "op:g", "data"),
        ("op:conv1/Conv2D", "op:conv1", "data"),
        ("op:conv1", "op:extra/Const", "control"),
        ("op:conv1/Conv2D", "op:extra/Const", "control"),
    }
    # Tensors: base's conv1/Conv2D:0 gets shape and bytes, keeps its dtype.
    tensors = merged.tensors.set_index("uid")
    assert (tensors.loc["t:conv1/Conv2D:0", "shape"], tensors.loc["t:conv1/Conv2D:0", "bytes"]) == ("2x3", 24)
    assert {"t:conv1:0", "t:extra/Const:0", "t:g:0"} <= set(tensors.index)
    # The listing's copy of g consumes t:g:0 -> mapped onto base's copy op.
    assert set(zip(merged.consumes["op"], merged.consumes["tensor"])) == {("op:edge_9_g:MEMCPYDtoH", "t:g:0")}


def test_merge_is_idempotent_on_deps(tmp_path):
    path = tmp_path / "listing.txt"
    path.write_text(LISTING)
    extra = tf_oplist.parse(path)
    once = tf_oplist.merge(small_base(), extra)
    twice = tf_oplist.merge(once, extra)
    assert len(twice.deps) == len(once.deps)
    assert len(twice.ops) == len(once.ops)
    assert len(twice.tensors) == len(once.tensors)


def test_merge_with_stepstats_seed():
    stepstats = pytest.importorskip("tracegraph.ingest.formats.tf.stepstats")
    base = stepstats.parse(TRACES / "tf1-alexnet-stepstats.pbtxt")
    extra = tf_oplist.parse(SEED)
    merged = tf_oplist.merge(base, extra)
    merged.check()

    def key(name: str) -> str:  # copies: edge numbers differ, the copied node does not
        if name.startswith("edge_"):
            return name.split("_", 2)[2].split(":MEMCPY")[0]
        return name

    base_keys = {key(n) for n in base.ops["name"]}
    listing_only = [n for n in extra.ops["name"] if key(n) not in base_keys]
    # 5 ConstantFolding consts + 9 layout transposes the StepStats names differently.
    assert len(listing_only) == 14
    assert not any(":MEMCPY" in n for n in listing_only)
    assert len(merged.ops) == len(base.ops) + 14
    assert set(merged.ops.loc[~merged.ops["executed"].astype(bool), "name"]) == set(listing_only)
    assert set(base.ops["uid"]) <= set(merged.ops["uid"])
    # Copies are not counted twice; the listing's 18 control deps are added.
    copies = merged.kernels[merged.kernels["kind"] == "memcpy"]
    assert len(copies) == len(base.kernels[base.kernels["kind"] == "memcpy"])
    assert len(merged.deps) == len(base.deps) + 18
    assert merged.sources == base.sources + extra.sources
    # Base times are kept.
    times = merged.ops.set_index("uid")["start_us"]
    for uid, start in zip(base.ops["uid"], base.ops["start_us"]):
        assert times[uid] == start or (math.isnan(times[uid]) and math.isnan(start))
