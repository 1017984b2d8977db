"""The StepStats parser against numbers read off the seed file independently.

The reference side of each test reads the raw text with plain regular
expressions, not with the parser or protobuf, so a parser bug cannot hide
in a shared helper.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from google.protobuf import text_format
from tensorboard.compat.proto import config_pb2, step_stats_pb2

from conftest import SEED_STEPSTATS
from tracegraph.errors import InputError
from tracegraph.ingest.enrich import enrich
from tracegraph.ingest.formats import tf_stepstats

TEXT = SEED_STEPSTATS.read_text()


def raw_records() -> list[tuple[int, int]]:
    """(alloc_micros, alloc_bytes) of every allocation record in the file."""
    pairs = re.findall(r"allocation_records \{\s*alloc_micros: (\d+)\s*alloc_bytes: (-?\d+)", TEXT)
    return [(int(t), int(b)) for t, b in pairs]


def raw_origin() -> int:
    return min(int(x) for x in re.findall(r"all_start_micros: (\d+)", TEXT))


def test_seed_record_counts():
    recs = raw_records()
    assert sum(b > 0 for _, b in recs) == 97 and sum(b < 0 for _, b in recs) == 97
    tf = tf_stepstats.parse(SEED_STEPSTATS)
    paired = tf.allocations[tf.allocations["alloc_us"].notna()]
    assert len(paired) == 97
    assert paired["free_us"].notna().all()
    assert int(paired["bytes"].sum()) == sum(b for _, b in recs if b > 0)


def test_seed_peak_matches_running_sum_of_records():
    # Reference: sort every record by time, frees first at equal times.
    events = sorted(raw_records(), key=lambda r: (r[0], r[1] > 0))
    live, peak, peak_t = 0, 0, None
    for t, b in events:
        live += b
        if live > peak:
            peak, peak_t = live, t
    tf = tf_stepstats.parse(SEED_STEPSTATS)
    enrich(tf)
    gpu = tf.allocators.set_index("name").loc["GPU_0_bfc"]
    assert gpu["peak_bytes"] == peak == 1238944256
    assert gpu["peak_us"] == peak_t - raw_origin()


def test_seed_ops_and_kernels():
    tf = tf_stepstats.parse(SEED_STEPSTATS)
    op_level = re.findall(r'device: "(/job:[^"]+)"(.*?)(?=\ndev_stats|\Z)', TEXT, re.S)
    n_op_records = sum(body.count("node_stats {") for _, body in op_level)
    copies_only = set(tf.ops.loc[tf.ops["attrs"].str.contains("synthesized_from"), "name"])
    assert len(tf.ops) == n_op_records + len(copies_only)
    # Every copy op is an edge_N_ memcpy without an op-level record.
    assert all(name.startswith("edge_") for name in copies_only)
    streams = re.findall(r'device: "(/device:GPU:0/stream:\d+)"(.*?)(?=\ndev_stats|\Z)', TEXT, re.S)
    n_kernels = sum(body.count("node_stats {") for _, body in streams)
    assert len(tf.kernels) == n_kernels  # stream:all and repeated memcpy records skipped
    assert set(tf.streams["name"]) == {"stream:13", "stream:15", "stream:18"}
    conv = tf.ops.set_index("name").loc["conv1/Conv2D"]
    assert conv["type"] == "Conv2D" and conv["device"] == "dev:/device:GPU:0"


def test_labels_give_data_and_control_inputs(tmp_path: Path):
    text = """
dev_stats { device: "/job:localhost/replica:0/task:0/device:GPU:0"
  node_stats { node_name: "a" all_start_micros: 100 all_end_rel_micros: 5 timeline_label: "a = Const()" }
  node_stats { node_name: "b" all_start_micros: 110 all_end_rel_micros: 5 timeline_label: "b = Split(a)" }
  node_stats { node_name: "c" all_start_micros: 120 all_end_rel_micros: 5
               timeline_label: "[GPU_0_bfc 1.0MB 1.0MB] c = Add(b, b:1, ^a)" }
}
"""
    p = tmp_path / "t.pbtxt"
    p.write_text(text)
    tf = tf_stepstats.parse(p)
    deps = {(s, d, k) for s, d, k in tf.deps.itertuples(index=False)}
    assert deps == {("op:a", "op:b", "data"), ("op:b", "op:c", "data"), ("op:a", "op:c", "control")}
    consumed = sorted(tf.consumes.loc[tf.consumes["op"] == "op:c", "tensor"])
    assert consumed == ["t:b:0", "t:b:1"]
    assert tf.ops.set_index("name").loc["c", "type"] == "Add"
    assert list(tf.ops["start_us"]) == [0.0, 10.0, 20.0]


@pytest.mark.parametrize("wrap", [False, True])
@pytest.mark.parametrize("binary", [False, True])
def test_four_encodings_give_the_same_trace(tmp_path: Path, wrap: bool, binary: bool):
    stats = text_format.Parse(TEXT, step_stats_pb2.StepStats())
    msg = stats
    if wrap:
        msg = config_pb2.RunMetadata()
        msg.step_stats.CopyFrom(stats)
    p = tmp_path / ("x.pb" if binary else "x.pbtxt")
    if binary:
        p.write_bytes(msg.SerializeToString())
    else:
        p.write_text(text_format.MessageToString(msg))
    assert tf_stepstats.sniff(p.read_bytes()[:65536])
    got = tf_stepstats.parse(p)
    ref = tf_stepstats.parse(SEED_STEPSTATS)
    assert got.ops.drop(columns="attrs").equals(ref.ops.drop(columns="attrs"))
    assert got.allocations.equals(ref.allocations)
    assert got.kernels.equals(ref.kernels)


@pytest.mark.parametrize("cut", [0.3, 0.5, 0.9])
def test_truncated_text_is_one_line_error(tmp_path: Path, cut: float):
    p = tmp_path / "cut.pbtxt"
    p.write_text(TEXT[: int(len(TEXT) * cut)])
    with pytest.raises(InputError) as e:
        tf_stepstats.parse(p)
    msg = str(e.value)
    assert "\n" not in msg and str(p) in msg and "line" in msg


def test_truncated_binary_is_one_line_error(tmp_path: Path):
    data = text_format.Parse(TEXT, step_stats_pb2.StepStats()).SerializeToString()
    p = tmp_path / "cut.pb"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError) as e:
        tf_stepstats.parse(p)
    assert str(p) in str(e.value) and "\n" not in str(e.value)


def test_corrupted_field_names_line(tmp_path: Path):
    p = tmp_path / "bad.pbtxt"
    p.write_text(TEXT.replace("all_end_rel_micros: 131", "all_end_rel_micros: abc", 1))
    with pytest.raises(InputError) as e:
        tf_stepstats.parse(p)
    line = next(i for i, l in enumerate(p.read_text().splitlines(), 1) if "abc" in l)
    assert f"line {line}" in str(e.value)
