"""The StepStats parser against numbers read off the seed file independently.

The reference side of each test reads the raw text with plain regular
expressions, not with the parser or protobuf, so a parser bug cannot hide
in a shared helper.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import SEED_STEPSTATS
from google.protobuf import text_format
from tensorboard.compat.proto import config_pb2, step_stats_pb2

from tracegraph.errors import InputError
from tracegraph.ingest.enrich import enrich
from tracegraph.ingest.formats.tf import stepstats as tf_stepstats
from tracegraph.ingest.formats.tf import stepstats_text

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
    line = next(i for i, text in enumerate(p.read_text().splitlines(), 1) if "abc" in text)
    assert f"line {line}" in str(e.value)


# ------------------------------------------------------------------ nanoseconds

NANOS = """dev_stats {
  device: "/job:localhost/replica:0/task:0/device:GPU:0"
  node_stats { node_name: "a" all_start_micros: 1000000 all_end_rel_micros: 0
               all_start_nanos: 1000000000 all_end_rel_nanos: 400 timeline_label: "a = Const()" }
  node_stats { node_name: "b" all_start_micros: 1000000 all_end_rel_micros: 0
               all_start_nanos: 1000000500 all_end_rel_nanos: 300
               op_start_rel_micros: 0 op_start_rel_nanos: 20 op_end_rel_nanos: 280
               scheduled_micros: 1000000 scheduled_nanos: 1000000450 timeline_label: "b = Relu(a)" }
  node_stats { node_name: "c" all_start_micros: 1000001 all_end_rel_micros: 1
               all_start_nanos: 1000001200 all_end_rel_nanos: 1500 timeline_label: "c = MatMul(b)" }
  node_stats { node_name: "d" all_start_micros: 1000002 all_end_rel_micros: 1
               all_start_nanos: 1000002999 all_end_rel_nanos: 2 timeline_label: "d = Relu(c)" }
  node_stats { node_name: "e" all_start_micros: 1000010 all_end_rel_micros: 3 timeline_label: "e = Relu(d)"
               memory { allocator_name: "GPU_0_bfc" allocation_records { alloc_micros: 1000010 alloc_bytes: 64 }
                        allocation_records { alloc_micros: 1000012 alloc_bytes: -64 } } }
}
dev_stats {
  device: "/device:GPU:0/stream:13"
  node_stats { node_name: "c:MatMul" all_start_micros: 1000001 all_end_rel_micros: 1
               all_start_nanos: 1000001300 all_end_rel_nanos: 1250 }
}
"""


def nanos_frames(tmp_path: Path, binary: bool):
    p = tmp_path / ("n.pb" if binary else "n.pbtxt")
    if binary:
        p.write_bytes(text_format.Parse(NANOS, step_stats_pb2.StepStats()).SerializeToString())
    else:
        p.write_text(NANOS)
    tf = tf_stepstats.parse(p)
    tf.sources = []
    return tf


@pytest.mark.parametrize("binary", [False, True])
def test_sub_microsecond_ops_keep_fractional_times(tmp_path: Path, binary: bool):
    tf = nanos_frames(tmp_path, binary)
    ops = tf.ops.set_index("name")
    # ns since the first start (a's), / 1000; e has micros only (10 us after a).
    assert list(ops["start_us"]) == [0.0, 0.5, 1.2, 2.999, 10.0]
    assert list(ops["dur_us"]) == [0.4, 0.3, 1.5, 0.002, 3.0]
    assert list(ops["end_us"]) == [0.4, 0.8, 2.7, 3.001, 13.0]  # (start + dur) in ns, then / 1000
    attrs = json.loads(ops.at["b", "attrs"])
    assert (attrs["op_start_rel_us"], attrs["op_end_rel_us"], attrs["scheduled_us"]) == (0.02, 0.28, 0.45)
    k = tf.kernels.iloc[0]
    assert (k["op"], k["start_us"], k["dur_us"], k["end_us"]) == ("op:c", 1.3, 1.25, 2.55)
    a = tf.allocations.iloc[0]
    assert (a["alloc_us"], a["free_us"]) == (10.0, 12.0)  # allocation records have micros only
    summary = enrich(tf)
    # a -> b -> c -> d -> e; c weighs its kernel (1.25): 0.4 + 0.3 + 1.25 + 0.002 + 3.
    assert summary.props["critical_path_us"] == pytest.approx(4.952, abs=1e-12)
    assert tf.meta["origin_us"] == 1_000_000.0


def test_nanos_text_and_binary_and_fast_reader_agree(tmp_path: Path):
    from pandas.testing import assert_frame_equal

    text, binary = nanos_frames(tmp_path, False), nanos_frames(tmp_path, True)
    for name in ("ops", "kernels", "tensors", "deps", "allocations"):
        assert_frame_equal(getattr(text, name), getattr(binary, name), check_exact=True)
    # The fast text reader reads the nanos fields (TF's one-field-per-line layout).
    p = tmp_path / "layout.pbtxt"
    p.write_text(text_format.MessageToString(text_format.Parse(NANOS, step_stats_pb2.StepStats())))
    stepstats_text.parse(p.read_text(), wrapped=False)
    fast, slow = tf_stepstats.parse(p), tf_stepstats.parse(p, fast=False)
    for name in ("ops", "kernels", "allocations"):
        assert_frame_equal(getattr(fast, name), getattr(slow, name), check_exact=True)
    assert list(fast.ops["dur_us"]) == [0.4, 0.3, 1.5, 0.002, 3.0]


def test_micros_only_trace_times_are_the_raw_integers():
    """The seed has micros only: every op's times are exactly its record's
    integers relative to the first start, read here with a regex."""
    tf = tf_stepstats.parse(SEED_STEPSTATS)
    origin = raw_origin()
    op_level = re.findall(r'device: "(/job:[^"]+)"(.*?)(?=\ndev_stats|\Z)', TEXT, re.S)
    raw = []  # (name, start, duration) of every op-level record, in file order like the ops
    for _, body in op_level:
        for name, start, dur in re.findall(
            r'node_name: "([^"]+)"\s*all_start_micros: (\d+)(?:\s*op_\w+_rel_micros: \d+)*\s*'
            r"all_end_rel_micros: (\d+)",
            body,
        ):
            raw.append((name, int(start) - origin, int(dur), int(start) - origin + int(dur)))
    got = list(zip(tf.ops["name"], tf.ops["start_us"], tf.ops["dur_us"], tf.ops["end_us"]))
    assert len(raw) == 108 and got[: len(raw)] == raw
    assert all(tf.ops["attrs"][len(raw) :].str.contains("synthesized_from"))
    assert all(float(x).is_integer() for x in tf.ops["start_us"]) and tf.meta["origin_us"] == float(origin)
