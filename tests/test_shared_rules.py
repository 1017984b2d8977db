"""One copy of each rule that several formats share, pinned on the cases
where the copies used to disagree: the TF training phase of a node, the
bytes of a TF dtype, reading a trace file's text, and format sniffing's
view of a file's head. Expected values are written out by hand."""

from __future__ import annotations

import pytest
from stepstats_builder import Op, write
from tensorboard.compat.proto import types_pb2

from tracegraph.errors import InputError, TooLarge
from tracegraph.ingest import formats
from tracegraph.ingest.formats import chainer_graph, megengine_profile
from tracegraph.ingest.formats.tf import oplist as tf_oplist
from tracegraph.ingest.formats.tf import opnames as tf_opnames
from tracegraph.ingest.formats.tf import stepstats as tf_stepstats
from tracegraph.ingest.formats.tf.names import DTYPE_BYTES, dtype_name, dtype_size, phase_of
from tracegraph.ingest.limits import MAX_LINE_BYTES, SNIFF_BYTES
from tracegraph.ingest.pipeline import detect
from tracegraph.ingest.source import head_lines

# ---------------------------------------------------------------- TF phases

# (node name, op type as a StepStats label records it, phase). The comments
# say what the two former classifiers answered (StepStats' / the name lists').
PHASES = [
    ("train/update_w", "Identity", "optimizer"),  # optimizer / forward
    ("RMSprop/update/w", "Identity", "optimizer"),  # forward / optimizer
    ("ConstantFolding/gradient_tape/dense/MatMul", "Const", "backward"),  # forward / backward
    ("tower_0/gradients/conv/Conv2D_grad/Conv2DBackpropInput", "Conv2DBackpropInput", "backward"),  # forward / backward
    (
        "gradients/dense/BiasAdd_grad/BroadcastGradientArgs",
        "BroadcastGradientArgs",
        "backward",
    ),  # communication / backward
    ("Func/DistributedGradientTape_Allreduce/cond/then/_1/input/_2", "Identity", "communication"),  # forward / comm.
    ("_SOURCE", "NoOp", "other"),  # other / forward
    ("edge_7_gradients/conv1/Conv2D_grad/Conv2DBackpropFilter", "MEMCPYDtoH", "backward"),  # forward / forward
    ("HorovodAllreduce_grads_0", "HorovodAllreduce", "communication"),  # agreed
    ("SGD/SGD/AssignAddVariableOp", "AssignAddVariableOp", "optimizer"),  # agreed
    ("dense/MatMul", "MatMul", "forward"),  # agreed
]


def test_phase_rule():
    assert [phase_of(name, op_type) for name, op_type, _ in PHASES] == [p for _, _, p in PHASES]


def test_every_tf_format_gives_a_node_the_same_phase(tmp_path):
    expected = {name: phase for name, _, phase in PHASES}
    steps = write(tmp_path, [Op(name, op_type, 10 * i, 5) for i, (name, op_type, _) in enumerate(PHASES)])
    names = tmp_path / "names.txt"
    names.write_text("".join(f"{name}\n" for name, _, _ in PHASES))
    listing = tmp_path / "listing.txt"
    listing.write_text(
        "".join(
            f"{name}:MEMCPYDtoH, (no input), (output 24 bytes), GPU, 0\n"
            if name.startswith("edge_")
            else f"{name}, (1), (float32 2x3), GPU, 0\n"
            for name, _, _ in PHASES
        )
    )
    for parse, path in ((tf_stepstats.parse, steps), (tf_opnames.parse, names), (tf_oplist.parse, listing)):
        ops = parse(path).ops  # (the listing names a copy node:MEMCPYDtoH)
        assert {n.split(":")[0]: p for n, p in zip(ops["name"], ops["phase"])} == expected, path.name


# ---------------------------------------------------------------- TF dtypes


def test_one_dtype_table_for_enums_and_both_spellings():
    assert dtype_size("float32") == dtype_size("float") == dtype_size(types_pb2.DT_FLOAT) == 4
    assert dtype_size("float16") == dtype_size("half") == dtype_size(types_pb2.DT_HALF) == 2
    assert dtype_size("float64") == dtype_size("double") == dtype_size(types_pb2.DT_DOUBLE) == 8
    assert dtype_size(types_pb2.DT_BFLOAT16) == dtype_size("bfloat16") == 2
    assert dtype_size(types_pb2.DT_INT64_REF) == 8  # reference types weigh what they refer to
    assert dtype_size("string") is None and dtype_size(types_pb2.DT_RESOURCE) is None
    assert dtype_size("float8_e5m2") is None  # not in the table: unknown size
    for name, value in types_pb2.DataType.items():
        if dtype_name(value) in DTYPE_BYTES:
            assert dtype_size(value) == DTYPE_BYTES[dtype_name(value)], name


def test_listing_and_stepstats_weigh_tensors_alike(tmp_path):
    listing = tmp_path / "listing.txt"
    listing.write_text("a/h, (1), (float16 2x3), GPU, 0\na/f, (1), (2x3), GPU, 0\na/d, (1), (float64 2x3), GPU, 0\n")
    assert dict(zip(tf_oplist.parse(listing).tensors["dtype"], tf_oplist.parse(listing).tensors["bytes"])) == {
        "float16": 12,
        "float32": 24,
        "float64": 48,
    }
    steps = tmp_path / "step.pbtxt"
    steps.write_text(
        "".join(
            f'dev_stats {{\n  device: "/device:GPU:0"\n  node_stats {{\n    node_name: "a/{n}"\n'
            f"    all_start_micros: {1000 + i}\n    all_end_rel_micros: 1\n"
            f"    output {{ slot: 0 tensor_description {{ dtype: {dt} shape {{ dim {{ size: 2 }} dim {{ size: 3 }} }} }} }}\n"
            f'    timeline_label: "a/{n} = Cast()"\n  }}\n}}\n'
            for i, (n, dt) in enumerate([("h", "DT_HALF"), ("f", "DT_FLOAT"), ("d", "DT_DOUBLE")])
        )
    )
    tensors = tf_stepstats.parse(steps).tensors
    assert dict(zip(tensors["dtype"], tensors["bytes"])) == {"half": 12, "float": 24, "double": 48}


# ---------------------------------------------------------------- reading a trace file's text

TEXT_FORMATS = {
    "tf-stepstats": (tf_stepstats.parse, b'dev_stats {\n  device: "/device:GPU:0"\n'),
    "megengine-profile": (megengine_profile.parse, b'{\n  "graph_exec":\n'),
    "chainer-graph": (chainer_graph.parse, b"1 0\n0 4 _\n"),
    "tf-oplist": (tf_oplist.parse, b"a/b, (1), (float32 2x2), GPU, 0\nc/d, (1), (2), GPU, 0\n"),
    "tf-opnames": (tf_opnames.parse, b"a/b\nc/d\n"),
}


@pytest.mark.parametrize("fmt", sorted(TEXT_FORMATS))
@pytest.mark.parametrize(
    "line3, what",
    [(b'  "caf\xe9"', "not UTF-8 text"), (b"\x00\x01\x02", "binary content (a NUL byte), not a {fmt} text file")],
)
def test_text_that_is_not_text_is_one_message_naming_the_line(tmp_path, fmt, line3, what):
    parse, start = TEXT_FORMATS[fmt]
    p = tmp_path / "bad.txt"
    p.write_bytes(start + line3 + b"\n}\n")
    with pytest.raises(InputError) as e:
        parse(p)
    assert str(e.value) == f"{p} (line 3): {what.format(fmt=fmt)}"


@pytest.mark.parametrize("fmt", ["chainer-graph", "tf-oplist", "tf-opnames"])
def test_line_formats_refuse_a_line_past_the_limit(tmp_path, fmt):
    parse, start = TEXT_FORMATS[fmt]
    p = tmp_path / "long.txt"
    p.write_bytes(start + b"x " * (MAX_LINE_BYTES // 2) + b"\n")  # at the limit: read, then refused as no trace line
    with pytest.raises(InputError) as e:
        parse(p)
    assert not isinstance(e.value, TooLarge)
    p.write_bytes(start + b"x " * (MAX_LINE_BYTES // 2) + b"x\n")
    with pytest.raises(TooLarge) as e:
        parse(p)
    assert str(e.value) == f"{p} (line 3): line longer than the limit of 1 MiB"


# ---------------------------------------------------------------- sniffing a head


def test_head_lines_keeps_the_last_line_only_when_it_is_complete():
    # A short head is the whole file: its last line counts, newline or not.
    assert head_lines(b"1 0\n0 4 _") == ["1 0", "0 4 _"]
    # A full head may end mid-line: the cut line does not count.
    full = (b"a/b\n" * SNIFF_BYTES)[: SNIFF_BYTES - 3] + b"c d"
    assert len(full) == SNIFF_BYTES and head_lines(full)[-1] == "a/b"
    # Not text: no lines at all.
    assert head_lines(b"a/b\n\x00") is None and head_lines(b"2 0\n0 4 x\xff\n") is None


def test_every_line_sniffer_reads_the_head_the_same_way(tmp_path):
    # A complete Chainer dump without a final newline (Chainer's own copy
    # dropped its last line and did not recognize it).
    short = tmp_path / "graph.txt"
    short.write_bytes(b"1 0\n0 4 _")
    assert detect(short) == "chainer-graph"
    # Chainer's copy read undecodable bytes as if they were not there; now
    # no sniffer takes such a head.
    odd = b"2 0\n0 4 x\xff\n1 4 _\n"
    assert not any(formats.get(name).sniff(odd) for name in formats.names())


def test_detection_reads_exactly_sniff_bytes(tmp_path):
    names = (b"scope/op\n" * (SNIFF_BYTES // 9 + 1))[:SNIFF_BYTES]
    p = tmp_path / "names.txt"
    p.write_bytes(names + b"not a name!\n")  # past the head: detection does not see it
    assert detect(p) == "tf-opnames"
    p.write_bytes(names[:-100] + b"\nnot a name!\n")
    with pytest.raises(InputError, match="unrecognized format"):
        detect(p)
