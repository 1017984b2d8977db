"""xplane: TensorFlow 2 / JAX profiler captures (XSpace protobuf).

Three sources, each with its expected answers worked out apart from the
parser:

* the real captures of tests/data/xplane (TF 2.21, JAX 0.10) against
  tests/data/xplane/reference.json, which make_reference.py computed with
  the protobuf runtime and checked against xprof's own converter; the HLO
  operand edges for the dependency checks are decoded here the same
  independent way (the runtime, with make_reference.py's schema);
* hand-built captures (a small protobuf encoder below): a GPU capture whose
  kernels join their ops by correlation id, by ``tf_op`` and not at all,
  and captures with one thing wrong each;
* bad input: truncations judged by the protobuf runtime, byte flips, a
  StepStats protobuf, empty and fake-gzip files, through the parser and
  the CLI.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import random
import re
import struct
import sys
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from conftest import EXAMPLES, everything, run_cli
from test_every_seed import _expected_gaps, _params

from tracegraph.errors import InputError, TooLarge
from tracegraph.ingest import formats, source
from tracegraph.ingest.formats.xplane import trace as xplane
from tracegraph.ingest.limits import MAX_FILE_BYTES
from tracegraph.ingest.pipeline import detect, ingest, parse_files
from tracegraph.queries.catalog import catalog
from tracegraph.queries.run import run_analysis

DATA = Path(__file__).resolve().parent / "data"
XPLANE = DATA / "xplane"
REFERENCE = json.loads((XPLANE / "reference.json").read_text())["files"]
CAPTURES = sorted(REFERENCE)
JAX = [f for f in CAPTURES if REFERENCE[f]["framework"] == "jax"]


def _reference_schema():
    """make_reference.py's XSpace and HloProto classes (the protobuf
    runtime over the published field numbers): an independent decoder."""
    spec = importlib.util.spec_from_file_location("xplane_make_reference", XPLANE / "make_reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return module


REF = _reference_schema()


def attrs(tf, i) -> dict:
    return json.loads(tf.ops["attrs"].iloc[i])


def ps(us: float) -> int:
    """Microseconds as the parser stores them -> the integer picoseconds they stand for."""
    return round(us * 1e6)


@pytest.fixture(scope="module")
def parsed():
    return {f: xplane.parse(XPLANE / f) for f in CAPTURES}


# --- the real captures against reference.json ----------------------------------------------------


@pytest.mark.parametrize("name", CAPTURES)
def test_ops_equal_the_reference(parsed, name):
    tf, ref = parsed[name], REFERENCE[name]
    assert tf.framework == ref["framework"]
    ops = tf.ops[tf.ops["role"] == "op"]
    r = ref["ops"]
    assert len(ops) == r["count"]
    # Times are whole nanoseconds: every float is the exact microseconds, and
    # multiplying back gives the integer picoseconds.
    for col in ("start_us", "end_us", "dur_us"):
        assert all(ps(v) % 1000 == 0 and ps(v) / 1e6 == v for v in tf.ops[col])
    durs = [ps(v) for v in ops["dur_us"]]
    assert sum(durs) == r["total_duration_ps"]
    origin = tf.meta["time_origin_ps"]
    assert min(ps(v) for v in ops["start_us"]) + origin == r["first_start_ps"]
    assert max(ps(v) for v in ops["end_us"]) + origin == r["last_end_ps"]
    by_type: dict[str, list[int]] = {}
    by_name: dict[str, list] = {}
    for (_, op), d in zip(ops.iterrows(), durs):
        t = by_type.setdefault(op["type"], [0, 0])
        t[0] += 1
        t[1] += d
        n = by_name.setdefault(op["name"], [op["type"], 0, 0])
        assert n[0] == op["type"]
        n[1] += 1
        n[2] += d
    assert by_type == {t: [v["count"], v["duration_ps"]] for t, v in r["by_type"].items()}
    assert by_name == {n: [v["type"], v["count"], v["duration_ps"]] for n, v in r["by_name"].items()}
    assert dict(Counter(ops["thread"])) == r["lines"]
    assert tf.meta["profile_start_time"] == ref["capture"]["profile_start_time_ns"]
    assert tf.meta["profile_stop_time"] == ref["capture"]["profile_stop_time_ns"]
    assert json.loads(tf.meta["planes"]) == [p["name"] for p in ref["planes"]]
    assert set(tf.ops["executed"]) == {True} and tf.time_unit == "us"
    # seq: by start, longer first
    order = tf.ops.sort_values("seq")
    keys = list(zip(order["start_us"], -order["end_us"]))
    assert keys == sorted(keys) and sorted(tf.ops["seq"]) == list(range(len(tf.ops)))


@pytest.mark.parametrize("name", JAX)
def test_hlo_attributes(parsed, name):
    tf, ref = parsed[name], REFERENCE[name]["ops"]["by_name"]
    for i in range(len(tf.ops)):
        if tf.ops["role"].iloc[i] != "op":
            continue
        a, r = attrs(tf, i), ref[tf.ops["name"].iloc[i]]
        assert (a["hlo_module"], a["computation"], a["program_id"]) == (r["module"], r["computation"], 0)
        assert isinstance(a["run_id"], int)
        assert tf.ops["phase"].iloc[i] is None
    fusions = [attrs(tf, i) for i in range(len(tf.ops)) if tf.ops["type"].iloc[i] == "fusion"]
    assert fusions and all(a["fusion_kind"] in ("kLoop", "kCustom", "kInput", "kOutput") for a in fusions)
    assert any(a.get("op_name", "").startswith("jit(") for a in fusions)
    assert json.loads(tf.meta["hlo_modules"]) == sorted(REFERENCE[name]["hlo_modules"])
    assert tf.meta["jax_version"] == "0.10.2"


@pytest.mark.parametrize("name", CAPTURES)
def test_nesting_equals_the_reference(parsed, name):
    tf, r = parsed[name], REFERENCE[name]["ops"]
    names = dict(zip(tf.ops["uid"], tf.ops["name"]))
    got: dict[str, Counter] = {}
    for n, parent, role in zip(tf.ops["name"], tf.ops["parent"], tf.ops["role"]):
        if role == "op" and isinstance(parent, str):
            got.setdefault(n, Counter())[names[parent]] += 1
    want = {n: Counter(v["nested_in"]) for n, v in r["by_name"].items() if "nested_in" in v}
    assert got == want
    assert sum(sum(c.values()) for c in got.values()) == r["nested_in_another_op"]
    if name == "jax_scan.xplane.pb.gz":  # the scan's body ops run inside the while
        assert set(got) == {n for n, v in r["by_name"].items() if v["computation"] == "region_0.5"}
        assert all(set(c) == {"while.6"} for c in got.values())


@pytest.mark.parametrize("name", CAPTURES)
def test_steps(parsed, name):
    tf, ref = parsed[name], REFERENCE[name]["steps"]
    # A step's event is its marker: an annotation op (type step) holding its step_num.
    markers = tf.ops[tf.ops["role"] == "annotation"]
    assert set(markers["type"]) <= {"step"}
    assert sorted(
        (attrs(tf, i)["step_num"], tf.ops["name"].iloc[i], ps(tf.ops["dur_us"].iloc[i])) for i in markers.index
    ) == [(s["stats"]["step_num"], s["event_name"], s["duration_ps"]) for s in ref]
    work = tf.ops["role"] == "op"
    steps = Counter(attrs(tf, i).get("step") for i in range(len(tf.ops)) if work.iloc[i])
    # Every op of these captures lies wholly inside its step, so starting inside it is the same.
    assert {k: v for k, v in steps.items() if k is not None} == {s["stats"]["step_num"]: s["ops_within"] for s in ref}
    if ref:
        assert [(s["step"], s["name"], ps(s["dur_us"]), s["ops"]) for s in json.loads(tf.meta["steps"])] == [
            (s["stats"]["step_num"], s["event_name"], s["duration_ps"], s["ops_within"]) for s in ref
        ]
    else:
        assert None in steps and "steps" not in tf.meta


@pytest.mark.parametrize("name", [f for f in CAPTURES if REFERENCE[f]["steps"]])
def test_steps_are_step_nodes(graph, name):
    """Ingested, the capture's steps are Step nodes (step-breakdown): the
    reference's step numbers and durations, and each step's ops: its own
    work and its marker."""
    ref = REFERENCE[name]["steps"]
    trace = "xplane-steps-" + name.split(".")[0].replace("_", "-")
    ingest(graph, [XPLANE / name], trace)
    rows = run_analysis(graph, "step-breakdown", trace, {}).records()
    assert [(r["step"], r["name"], r["host_us"], r["ops"]) for r in rows] == [
        (s["stats"]["step_num"], s["event_name"], s["duration_ps"] / 1e6, s["ops_within"] + 1) for s in ref
    ]


def test_tf_iterations_and_phases(parsed):
    tf = parsed["tf_while_loop.xplane.pb.gz"]
    iters: dict[str, list[int]] = {}
    for i, n in enumerate(tf.ops["name"]):
        iters.setdefault(n, []).append(attrs(tf, i)["iter_num"])
    # tf.while_loop of 6 iterations: the condition runs 7 times, the body 6.
    assert iters["while/cond/_0/while/Less"] == list(range(7))
    assert iters["while/body/_1/while/Tanh"] == list(range(6))
    assert iters["Sum"] == [0]
    keras = parsed["keras_cnn_train.xplane.pb.gz"]
    phase = dict(zip(keras.ops["name"], keras.ops["phase"]))
    assert phase["gradient_tape/sequential_1/conv_1/ReluGrad"] == "backward"
    assert phase["sequential_1/conv_1/Relu"] == "forward"
    assert phase["sgd_1/AssignSubVariableOp"] == "optimizer"
    assert keras.ops["thread"].str.startswith("tf_Compute/").sum() == 68
    assert keras.meta["dependencies"].startswith("none in the file")
    assert tf.deps.empty and keras.deps.empty


# --- JAX dependencies ---------------------------------------------------------------------------


def _raw_space(name):
    space = REF.XSpace()
    space.ParseFromString(gzip.decompress((XPLANE / name).read_bytes()))
    return space


def _runtime_hlo(name):
    """The module's instructions by name, decoded by the protobuf runtime."""
    space = _raw_space(name)
    plane = next(p for p in space.planes if p.name == "/host:metadata")
    md = next(iter(plane.event_metadata.values()))
    stat = next(s for s in md.stats if plane.stat_metadata[s.metadata_id].name == "Hlo Proto")
    proto = REF.HloProto()
    proto.ParseFromString(stat.bytes_value)
    instructions = {}
    for comp in proto.hlo_module.computations:
        ids = {i.id: i for i in comp.instructions}
        for i in comp.instructions:
            instructions[i.name] = (i.opcode, [ids[o].name for o in i.operand_ids], comp.name)
    return instructions


def _edges(tf):
    """DATA edges as (src name, src seq, dst name, dst seq)."""
    name = dict(zip(tf.ops["uid"], tf.ops["name"]))
    seq = dict(zip(tf.ops["uid"], tf.ops["seq"]))
    data = tf.deps[tf.deps["kind"] == "data"]
    return {(name[s], seq[s], name[d], seq[d]) for s, d in zip(data["src"], data["dst"])}


def test_train_step_dependencies_are_the_hlo_operands(parsed):
    # main.16 has no loop and no tuple operand: every operand of an op event
    # is an instruction with events (an edge from its event of the same run)
    # or a parameter or constant (no edge). Worked out from the runtime's
    # decoding of the HLO and the op events' run_id.
    tf = parsed["jax_train_step.xplane.pb.gz"]
    hlo = _runtime_hlo("jax_train_step.xplane.pb.gz")
    ops = tf.ops[tf.ops["role"] == "op"]
    run = {u: attrs(tf, i).get("run_id") for i, u in enumerate(tf.ops["uid"])}
    event = {(n, run[u]): (n, s) for u, n, s in zip(ops["uid"], ops["name"], ops["seq"])}
    want = set()
    for u, n, s in zip(ops["uid"], ops["name"], ops["seq"]):
        operands = hlo[n][1]
        for o in operands:
            if hlo[o][0] in ("parameter", "constant"):
                continue
            want.add((*event[(o, run[u])], n, s))
    assert _edges(tf) == want
    assert len(want) == 58 and tf.deps["kind"].eq("data").all()
    # The hand-checked pair: add_tanh_fusion = tanh(x @ w1 + b1) reads ynn_fusion.2 (x @ w1).
    assert sum(1 for s, _, d, _ in want if (s, d) == ("ynn_fusion.2", "add_tanh_fusion")) == 2
    assert tf.meta["dependencies"].startswith("from the HLO")


def test_scan_dependencies_follow_the_loop(parsed):
    tf = parsed["jax_scan.xplane.pb.gz"]
    edges = _edges(tf)
    hlo = _runtime_hlo("jax_scan.xplane.pb.gz")
    # The while's operand is tuple(copy.11, copy.10, wrapped_broadcast, xs, w, u):
    # one edge per element with an event, in each of the two runs.
    into_while = sorted((s, d) for s, _, d, _ in edges if d == "while.6")
    assert into_while == sorted(2 * [("copy.10", "while.6"), ("copy.11", "while.6"), ("wrapped_broadcast", "while.6")])
    assert hlo["while.6"][1] == ["tuple.2"] and hlo["tuple.2"][1][:3] == ["copy.11", "copy.10", "wrapped_broadcast"]
    # ynn_fusion.1 = h @ W reads get-tuple-element 1 of the loop state: h0
    # (copy.10) in the first iteration, the previous add_tanh_fusion after.
    seq = dict(zip(tf.ops["uid"], tf.ops["seq"]))
    for run in sorted({attrs(tf, i)["run_id"] for i in range(len(tf.ops))}):  # two calls
        body = [
            (tf.ops["name"].iloc[i], tf.ops["seq"].iloc[i])
            for i in range(len(tf.ops))
            if attrs(tf, i)["run_id"] == run and attrs(tf, i)["computation"] == "region_0.5"
        ]
        h = [s for n, s in body if n == "ynn_fusion.1"]
        tanh = [s for n, s in body if n == "add_tanh_fusion"]
        assert len(h) == len(tanh) == 5
        feeds = {d: (sn, ss) for sn, ss, dn, d in edges if dn == "ynn_fusion.1"}
        assert feeds[h[0]][0] == "copy.10"
        assert [feeds[x] for x in h[1:]] == [("add_tanh_fusion", t) for t in tanh[:-1]]
        # the counter: copy.4 reads the state's element 0, copy.11 first, then wrapped_add
        counter = sorted(s for n, s in body if n == "copy.4")
        inc = sorted(s for n, s in body if n == "wrapped_add")
        feeds = {d: (sn, ss) for sn, ss, dn, d in edges if dn == "copy.4"}
        assert feeds[counter[0]][0] == "copy.11"
        assert [feeds[x] for x in counter[1:]] == [("wrapped_add", s) for s in inc[:-1]]
    # every source ends before its target starts, and comes before it
    start = dict(zip(tf.ops["uid"], tf.ops["start_us"]))
    end = dict(zip(tf.ops["uid"], tf.ops["end_us"]))
    assert all(end[s] <= start[d] and seq[s] < seq[d] for s, d in zip(tf.deps["src"], tf.deps["dst"]))


@pytest.mark.parametrize("name", JAX)
def test_dependencies_are_acyclic_within_one_run(parsed, name):
    from tracegraph.ingest.enrich import check_acyclic

    tf = parsed[name]
    check_acyclic(tf)  # raises DependencyCycle otherwise
    run = {u: attrs(tf, i)["run_id"] for i, u in enumerate(tf.ops["uid"]) if tf.ops["role"].iloc[i] == "op"}
    assert all(run[s] == run[d] for s, d in zip(tf.deps["src"], tf.deps["dst"]))
    carries = dict(zip(tf.ops["uid"], tf.ops["carries_deps"]))
    assert all(carries[u] is (role == "op") for u, role in zip(tf.ops["uid"], tf.ops["role"]))


# --- detection and files ------------------------------------------------------------------------


def test_detected_by_content(tmp_path):
    others = [n for n in formats.names() if n != "xplane"]
    for name in CAPTURES:
        plain = tmp_path / "capture.bin"
        plain.write_bytes(gzip.decompress((XPLANE / name).read_bytes()))
        for p in (XPLANE / name, plain):
            assert detect(p) == "xplane"
            head = source.head(p)
            assert [n for n in others if formats.get(n).sniff(head)] == []
    samples = [p for p in EXAMPLES.iterdir() if p.is_file() and ".xplane." not in p.name]
    samples += [p for p in DATA.rglob("*") if p.is_file() and "xplane" not in p.parts]
    for p in samples:
        assert not xplane.sniff(source.head(p)), p


def test_a_stepstats_protobuf_is_not_taken_for_one(tmp_path):
    path = _stepstats(tmp_path)
    assert detect(path) == "tf-stepstats"
    with pytest.raises(InputError) as exc:
        xplane.parse(path)
    text = str(exc.value)
    assert text == (
        f"{path} (XSpace.planes[0]): not a readable XPlane capture: XPlane.id (field 1) is length-delimited, not varint"
    )


def _stepstats(tmp_path) -> Path:
    from tensorboard.compat.proto import step_stats_pb2

    stats = step_stats_pb2.StepStats()
    dev = stats.dev_stats.add(device="/job:localhost/replica:0/task:0/device:CPU:0")
    node = dev.node_stats.add(node_name="MatMul", all_start_micros=10, all_end_rel_micros=5)
    node.timeline_label = "MatMul = MatMul(a, b)"
    path = tmp_path / "step.pb"
    path.write_bytes(stats.SerializeToString())
    return path


def test_a_profile_directory_is_read(tmp_path):
    run = tmp_path / "logdir" / "plugins" / "profile" / "2026_01_01_00_00_00"
    run.mkdir(parents=True)
    (run / "vm.xplane.pb").write_bytes(gzip.decompress((XPLANE / "jax_scan.xplane.pb.gz").read_bytes()))
    tf = parse_files([run])
    assert tf.framework == "jax" and len(tf.ops) == 78 and tf.sources == [str(run / "vm.xplane.pb")]


# --- hand-built captures ------------------------------------------------------------------------


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, value) -> bytes:
    """One field: int -> varint, float -> 64-bit, str/bytes -> length-delimited."""
    if isinstance(value, float):
        return _varint(number << 3 | 1) + struct.pack("<d", value)
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    data = value.encode() if isinstance(value, str) else value
    return _varint(number << 3 | 2) + _varint(len(data)) + data


class Plane:
    """An XPlane under construction: metadata ids are given by name."""

    def __init__(self, name: str, stats: dict | None = None) -> None:
        self.name = name
        self.events: dict[str, tuple[int, str, dict]] = {}
        self.stat_ids: dict[str, int] = {}
        self.lines: list[tuple[int, str, int, list[bytes]]] = []
        self.stats = stats or {}

    def stat(self, name: str, value) -> bytes:
        sid = self.stat_ids.setdefault(name, len(self.stat_ids) + 1)
        if isinstance(value, tuple):  # ("ref", text): stored as a stat metadata name
            ref = self.stat_ids.setdefault(value[1], len(self.stat_ids) + 1)
            return _field(1, sid) + _field(7, ref)
        if isinstance(value, float):
            return _field(1, sid) + _field(2, value)
        if isinstance(value, int):
            return _field(1, sid) + _field(4, value)
        return _field(1, sid) + _field(5 if isinstance(value, str) else 6, value)

    def line(self, line_id: int, name: str, timestamp_ns: int = 0) -> list[bytes]:
        events: list[bytes] = []
        self.lines.append((line_id, name, timestamp_ns, events))
        return events

    def event(self, events: list[bytes], name: str, offset_ps: int, duration_ps: int, display: str = "", **stats):
        eid = self.events.setdefault(name, (len(self.events) + 1, display, {}))[0]
        body = _field(1, eid) + _field(2, offset_ps) + _field(3, duration_ps)
        body += b"".join(_field(4, self.stat(k, v)) for k, v in stats.items())
        events.append(body)

    def encode(self) -> bytes:
        out = _field(2, self.name)
        for line_id, name, ts, events in self.lines:
            body = _field(1, line_id) + _field(2, name) + _field(3, ts) + b"".join(_field(4, e) for e in events)
            out += _field(3, body)
        for name, (eid, display, _) in self.events.items():
            md = _field(1, eid) + _field(2, name) + (_field(4, display) if display else b"")
            out += _field(4, _field(1, eid) + _field(2, md))
        stats = b"".join(_field(6, self.stat(k, v)) for k, v in self.stats.items())
        for name, sid in self.stat_ids.items():
            out += _field(5, _field(1, sid) + _field(2, _field(1, sid) + _field(2, name)))
        return out + stats


def space(*planes: Plane) -> bytes:
    return b"".join(_field(1, p.encode()) for p in planes) + _field(4, "host")


def gpu_capture() -> bytes:
    """A TF GPU step, by hand (times in ps):

    /host:CPU, thread 7: MatMul [1, 11) us, BiasAdd [20, 22) us; thread 8:
    the step marker train#0 [0, 100) us. /host:CUPTI, thread 7: the
    cuLaunchKernel call of correlation 42 at 2 us (inside MatMul).
    /device:GPU:0: stream 1 runs sgemm [5, 8) us (correlation 42 -> MatMul),
    bias [25, 26) us (tf_op BiasAdd, no correlation -> the BiasAdd op
    started by then), mystery [30, 31) us (nothing: an op of its own);
    stream 2 copies 4096 bytes host to device [3, 4) us (an op of its own);
    the derived line "XLA Ops" is not read.
    """
    host = Plane("/host:CPU")
    t7 = host.line(7, "tf_Compute/7")
    host.event(t7, "model/dense/MatMul:MatMul", 1_000_000, 10_000_000, "MatMul")
    host.event(t7, "model/dense/BiasAdd:BiasAdd", 20_000_000, 2_000_000, "BiasAdd")
    py = host.line(8, "python")
    host.event(py, "train", 0, 100_000_000, step_num=0, _r=1)
    cupti = Plane("/host:CUPTI")
    cupti.event(cupti.line(7, "7"), "cuLaunchKernel", 2_000_000, 1_000_000, correlation_id=42)
    gpu = Plane("/device:GPU:0")
    s1 = gpu.line(1, "Stream #1(Compute)")
    gpu.event(s1, "sgemm", 5_000_000, 3_000_000, correlation_id=42)
    gpu.event(s1, "bias", 25_000_000, 1_000_000, tf_op=("ref", "model/dense/BiasAdd:BiasAdd"))
    gpu.event(s1, "mystery", 30_000_000, 1_000_000)
    s2 = gpu.line(2, "Stream #2(MemcpyH2D)")
    gpu.event(s2, "MemcpyH2D", 3_000_000, 1_000_000, memcpy_details="kind_src:pageable kind_dst:device size:4096")
    gpu.event(gpu.line(3, "XLA Ops"), "fusion.1", 5_000_000, 3_000_000)
    return space(host, cupti, gpu, Plane("Task Environment", {"profile_start_time": 1_000}))


def test_gpu_kernels_join_their_ops(tmp_path):
    path = tmp_path / "gpu.xplane.pb"
    path.write_bytes(gpu_capture())
    assert detect(path) == "xplane"
    tf = xplane.parse(path)
    ops = tf.ops.set_index("uid")
    k = tf.kernels.set_index("name")
    assert ops.loc[k.loc["sgemm", "op"], "name"] == "model/dense/MatMul"
    assert ops.loc[k.loc["bias", "op"], "name"] == "model/dense/BiasAdd"
    mystery, copy = ops.loc[k.loc["mystery", "op"]], ops.loc[k.loc["MemcpyH2D", "op"]]
    assert (mystery["name"], mystery["type"]) == ("mystery", "kernel") and pd.isna(mystery["thread"])
    assert (copy["name"], copy["type"]) == ("MemcpyH2D", "kernel")
    assert json.loads(mystery["attrs"]) == {"from_kernel": True, "step": 0}
    assert tf.devices.set_index("uid").loc[mystery["device"], "kind"] == "GPU"
    assert (k.loc["MemcpyH2D", "kind"], k.loc["MemcpyH2D", "bytes"], k.loc["MemcpyH2D", "direction"]) == (
        "memcpy",
        4096,
        "HtoD",
    )
    assert list(k["kind"]) == ["compute", "compute", "compute", "memcpy"]
    assert sorted(tf.streams["name"]) == ["Stream #1(Compute)", "Stream #2(MemcpyH2D)"]
    assert json.loads(tf.meta["skipped_device_lines"]) == ["/device:GPU:0 | XLA Ops"]
    assert (k.loc["sgemm", "start_us"], k.loc["sgemm", "dur_us"]) == (5.0, 3.0)
    assert sorted(tf.devices["kind"]) == ["CPU", "GPU"]
    counts = json.loads(tf.meta["event_counts"])
    assert (counts["tf_ops"], counts["kernels"], counts["kernel_ops"], counts["steps"]) == (2, 4, 2, 1)
    assert all(attrs(tf, i).get("step") == 0 for i in range(len(tf.ops)))


def test_gpu_capture_end_to_end(graph, tmp_path):
    path = tmp_path / "gpu.xplane.pb"
    path.write_bytes(gpu_capture())
    ingest(graph, [path], "xp-gpu")
    rows = run_analysis(graph, "top-ops", "xp-gpu", {"n": 10})
    by_op = {r[0]: r for r in rows.rows}
    # MatMul's weight is its kernel's 3 us; BiasAdd's its kernel's 1 us.
    assert by_op["model/dense/MatMul"][3] == pytest.approx(3.0)
    assert by_op["model/dense/BiasAdd"][3] == pytest.approx(1.0)


def test_hlo_ops_without_their_module(tmp_path):
    host = Plane("/host:CPU")
    t = host.line(1, "tf_XLAPjRtCpuClient/1")
    host.event(t, "fusion.3", 0, 5_000, hlo_op=("ref", "fusion.3"), hlo_module=("ref", "jit_f"), run_id=-7)
    host.event(t, "end: fusion.3", 5_000, 1_000)
    host.event(t, "dot", 6_000, 2_000, hlo_op=("ref", "dot"), hlo_module=("ref", "jit_f"), run_id=-7)
    path = tmp_path / "x.pb"
    path.write_bytes(space(host))
    tf = xplane.parse(path)
    assert list(zip(tf.ops["name"], tf.ops["type"])) == [("fusion.3", "fusion"), ("dot", "dot")]
    assert tf.framework == "jax" and tf.deps.empty
    assert tf.meta["dependencies"] == "none: the capture holds no HLO for its modules"
    assert list(tf.ops["start_us"]) == [0.0, 0.006] and list(tf.ops["dur_us"]) == [0.005, 0.002]


def test_aggregated_events_are_counted_not_read(tmp_path):
    host = Plane("/host:CPU")
    t = host.line(1, "tf_Compute/1")
    host.event(t, "a:Add", 0, 1_000, "Add")
    t.append(_field(1, 1) + _field(5, 3) + _field(3, 10))  # num_occurrences instead of offset_ps
    path = tmp_path / "x.pb"
    path.write_bytes(space(host))
    tf = xplane.parse(path)
    assert len(tf.ops) == 1 and json.loads(tf.meta["event_counts"])["aggregated_events_skipped"] == 1


@pytest.mark.parametrize(
    "mutate, message, where",
    [
        (
            lambda t: t.append(_field(1, 1) + _field(2, 0) + _field(3, -5)),
            "negative duration (-5 ps)",
            "lines[0].events[1]",
        ),
        (lambda t: t.append(_field(1, 9) + _field(2, 0)), "event metadata 9, which its plane", "lines[0].events[1]"),
        (lambda t: t.append(_field(1, 1) + _field(4, _field(1, 77))), "stat metadata 77", "lines[0].events[1]"),
        (lambda t: t.append(_field(1, "x")), "XEvent.metadata_id (field 1) is length-delimited", "events[1])"),
        (lambda t: t.append(_field(2, b"\xff\xfe")), "XEvent.offset_ps (field 2) is length-delimited", "events[1]"),
    ],
)
def test_bad_events_are_one_line_errors(tmp_path, mutate, message, where):
    host = Plane("/host:CPU")
    t = host.line(1, "tf_Compute/1")
    host.event(t, "a:Add", 0, 1_000, "Add")
    mutate(t)
    path = tmp_path / "x.pb"
    path.write_bytes(space(host))
    with pytest.raises(InputError) as exc:
        xplane.parse(path)
    text = str(exc.value)
    assert "\n" not in text and text.startswith(f"{path} (XSpace.planes[0].") and message in text and where in text


def test_captures_with_nothing_to_read(tmp_path):
    for body, message in (
        (space(Plane("Task Environment")), "nothing to read"),
        (space(Plane("weights"), Plane("more")), "no /host: or /device: plane (planes: 'weights', 'more')"),
        (_field(4, "host"), "no /host: or /device: plane (planes: none)"),
    ):
        path = tmp_path / "x.pb"
        path.write_bytes(body)
        with pytest.raises(InputError, match=re.escape(message)):
            xplane.parse(path)


def test_gzip_past_the_limit(tmp_path, monkeypatch):
    path = tmp_path / "big.xplane.pb.gz"
    path.write_bytes(gzip.compress(gpu_capture()))
    limit = path.stat().st_size + 1  # the file itself fits; what it expands to does not
    assert len(gpu_capture()) > limit
    monkeypatch.setitem(MAX_FILE_BYTES, "xplane", limit)
    with pytest.raises(TooLarge, match=rf"more than the xplane size limit of {limit:,} bytes \(decompressed\)"):
        xplane.parse(path)


# --- bad input ----------------------------------------------------------------------------------


def _refused(path: Path, message: str = "") -> str:
    with pytest.raises(InputError) as exc:
        xplane.parse(path)
    text = str(exc.value)
    assert "\n" not in text and text.startswith(str(path)) and message in text, text
    return text


@pytest.mark.parametrize("name", ["jax_train_step.xplane.pb.gz", "keras_cnn_train.xplane.pb.gz"])
def test_truncated_anywhere(tmp_path, name):
    """A prefix the protobuf runtime refuses is refused; one it reads (cut
    between two planes) is read or refused for what it lacks, never a crash."""
    data = gzip.decompress((XPLANE / name).read_bytes())
    rng = random.Random(7)
    cuts = sorted({*rng.sample(range(1, len(data)), 150), 1, 2, 3, len(data) - 1})
    path = tmp_path / "cut.xplane.pb"
    refused = 0
    for cut in cuts:
        path.write_bytes(data[:cut])
        try:
            REF.XSpace().ParseFromString(data[:cut])
            runtime_reads = True
        except Exception:  # DecodeError
            runtime_reads = False
        if runtime_reads:
            try:
                xplane.parse(path).check()
            except InputError as e:
                assert str(e).startswith(str(path)) and "\n" not in str(e)
        else:
            text = _refused(path)
            assert "truncated" in text or "not an XPlane capture" in text, text
            refused += 1
    assert refused >= len(cuts) - 5
    gz = tmp_path / "cut.xplane.pb.gz"
    gz.write_bytes((XPLANE / name).read_bytes()[:-20])
    _refused(gz, "gzip stream ends early (truncated file)")


@pytest.mark.parametrize("name", ["jax_scan.xplane.pb.gz", "tf_while_loop.xplane.pb.gz"])
def test_flipped_bytes_never_crash(tmp_path, name):
    data = gzip.decompress((XPLANE / name).read_bytes())
    rng = random.Random(11)
    path = tmp_path / "flipped.xplane.pb"
    outcomes = Counter()
    for _ in range(120):
        bad = bytearray(data)
        for _ in range(rng.choice((1, 1, 3))):
            bad[rng.randrange(len(bad))] = rng.randrange(256)
        path.write_bytes(bytes(bad))
        try:
            xplane.parse(path).check()
            outcomes["read"] += 1
        except InputError as e:
            assert str(e).startswith(str(path)) and "\n" not in str(e), str(e)
            outcomes["refused"] += 1
    assert outcomes["refused"] > 10 and outcomes["read"] > 10


def test_other_bad_files(tmp_path):
    empty = tmp_path / "empty.xplane.pb"
    empty.write_bytes(b"")
    assert _refused(empty) == f"{empty}: empty file"
    fake = tmp_path / "fake.xplane.pb.gz"
    fake.write_bytes(b"\x1f\x8b" + b"not really gzip at all" * 10)
    _refused(fake, "not a valid gzip file")
    noise = tmp_path / "noise.xplane.pb.gz"
    noise.write_bytes(gzip.compress(random.Random(3).randbytes(5000)))
    _refused(noise)
    text = tmp_path / "text.xplane.pb"
    text.write_text("hello world\n")
    assert _refused(text) == (
        f"{text}: not an XPlane capture: an XSpace protobuf starts with byte 0x0a (its planes), not 0x68"
    )
    stepstats = DATA / "tf-nested-while-loop-stepstats.pb"
    _refused(stepstats, "not a readable XPlane capture: XPlane.id (field 1) is length-delimited, not varint")


def test_refused_through_the_cli_writes_nothing(tmp_path):
    home = tmp_path / "home"
    before = run_cli("traces", "--format", "json", home=home, check=True).stdout
    data = gzip.decompress((XPLANE / "jax_scan.xplane.pb.gz").read_bytes())
    cut = tmp_path / "cut.xplane.pb"
    cut.write_bytes(data[: len(data) // 2])
    garbage = tmp_path / "garbage.xplane.pb.gz"
    garbage.write_bytes(b"\x1f\x8b\x08\x00" + bytes(200))
    empty = tmp_path / "empty.xplane.pb"
    empty.write_bytes(b"")
    for path, fmt, pattern in (
        (cut, "xplane", r"\(XSpace\.planes\[1\], byte 11,818\): not a readable XPlane capture: truncated"),
        (_stepstats(tmp_path), "xplane", r"XPlane\.id \(field 1\) is length-delimited, not varint"),
        (garbage, "xplane", r": not a valid gzip file"),
        (empty, "auto", r": empty file$"),
    ):
        proc = run_cli("ingest", str(path), "--trace", "bad", "--format", fmt, home=home)
        assert proc.returncode == 1, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"tracegraph: error: {path}"), proc.stderr
        assert re.search(pattern, lines[0]), lines[0]
    assert run_cli("traces", "--format", "json", home=home, check=True).stdout == before


# --- end to end ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", CAPTURES)
def test_every_analysis_answers(graph, name):
    trace = "xp-" + name.split(".")[0].replace("_", "-")
    ingest(graph, [XPLANE / name], trace)
    facts = graph.trace_facts(trace)
    jax = REFERENCE[name]["framework"] == "jax"
    assert facts["framework"] == REFERENCE[name]["framework"] and facts["has_deps"] is jax
    answered = set()
    for analysis_name, analysis in catalog().items():
        res = run_analysis(graph, analysis_name, trace, _params(analysis, graph, trace))
        if res.unavailable is not None:
            assert not res.rows
            assert analysis_name in _expected_gaps(graph, trace, analysis), (analysis_name, res.note)
        else:
            answered.add(analysis_name)
    must = {"top-ops", "op-type-breakdown", "observed-critical-path"} | ({"critical-path"} if jax else set())
    assert must <= answered
    for analysis_name in must:
        assert run_analysis(graph, analysis_name, trace, {}).rows, analysis_name
    if jax:  # the dependency path runs through HLO ops only, never the step markers
        path = run_analysis(graph, "critical-path", trace, {}).rows
        assert path and not any("#" in r[1] for r in path)
    ops = graph.run("MATCH (o:Op {trace: $t}) RETURN count(o)", {"t": trace}, trace=trace).rows[0][0]
    assert ops == len(xplane.parse(XPLANE / name).ops)


def test_refused_ingest_leaves_the_database_unchanged(graph, tmp_path):
    before = everything(graph)
    cut = tmp_path / "cut.xplane.pb"
    cut.write_bytes(gzip.decompress((XPLANE / "keras_cnn_train.xplane.pb.gz").read_bytes())[:5000])
    with pytest.raises(InputError):
        ingest(graph, [cut], "xp-bad")
    assert everything(graph) == before
