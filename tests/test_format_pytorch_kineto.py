"""pytorch-kineto: PyTorch profiler (Kineto) traces.

Three sources, each with its expected numbers worked out apart from the
parser:

* a hand-built GPU trace (tests/kineto_builder.py): every answer below is
  worked out by hand in the comments;
* real torch CPU traces (tests/data/kineto, made by
  tests/data/make_kineto_traces.py): expected values from a small reference
  walk over the raw JSON written here (its own nesting and pairing code);
* Holistic Trace Analysis's critical-path test traces (tests/data/hta, MIT):
  kernel totals from the raw JSON, and HTA's own critical path lengths
  (printed by bench/hta_compare.py with HTA 0.5.0) for the observed path.
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import kineto_builder as kb
import pytest
from conftest import everything, module_traces

from tracegraph.errors import InputError
from tracegraph.ingest.formats.kineto import trace as pytorch_kineto
from tracegraph.ingest.pipeline import detect, ingest, parse_files
from tracegraph.queries.run import run_analysis

DATA = Path(__file__).resolve().parent / "data"
CPU_TRACES = [DATA / "kineto" / "cnn-cpu.pt.trace.json.gz", DATA / "kineto" / "lstm-cpu.pt.trace.json.gz"]
STACK_TRACE = DATA / "kineto" / "cnn-cpu-stack.pt.trace.json.gz"  # the CNN's step with with_stack=True
HTA = DATA / "hta"
# HTA 0.5.0 critical_path_analysis(rank=0, annotation="", instance_id=None)
# over the whole trace, with HTA_DISABLE_NS_ROUNDING=1 and
# CRITICAL_PATH_ADD_ZERO_WEIGHT_LAUNCH_EDGE=1 (bench/hta_compare.py --critical-path-only).
HTA_CRITICAL_PATH_US = {
    "simple_add.json.gz": 41435234.0,
    "alexnet.json.gz": 43355655.0,
    "event_sync.json.gz": 2401.0,
    "event_sync_multi_stream.json.gz": 1178.0,
    "amd_mi250.json.gz": 7452.353,
}


def rows(graph, analysis, trace, **params):
    res = run_analysis(graph, analysis, trace, params)
    return [dict(zip(res.columns, r)) for r in res.rows]


# A file refused while it is read reaches no database: checked on the
# embedded one only (an engine's side of a failed ingest, that it leaves
# the database as it was, is tests/test_store.py's, on each engine).
parse_level = pytest.mark.parametrize("db_uri", ["embedded"], indirect=True)


@pytest.fixture
def gpu_file(tmp_path) -> Path:
    return kb.write(tmp_path / "run.pt.trace.json.gz")


@pytest.fixture(scope="module")
def gpu(session_graph, tmp_path_factory):
    """The hand-built GPU trace stored once for the module as ``k-gpu`` (the tests read it)."""

    def load():
        ingest(session_graph, [kb.write(tmp_path_factory.mktemp("kineto") / "run.pt.trace.json.gz")], "k-gpu")
        return "k-gpu"

    yield from module_traces(session_graph, load)


# --- the hand-built GPU trace ------------------------------------------------------------------


def test_detected_by_content(tmp_path, gpu_file):
    plain = kb.write(tmp_path / "run.json", gz=False)
    odd_name = kb.write(tmp_path / "trace.bin")
    assert detect(gpu_file) == detect(plain) == detect(odd_name) == "pytorch-kineto"


def test_frames_of_the_hand_built_trace(gpu_file):
    tf = pytorch_kineto.parse(gpu_file)
    ops = tf.ops.set_index("name", drop=False)
    # 1 annotation + 5 cpu ops + 6 runtime calls
    assert len(tf.ops) == 12 and len(tf.kernels) == 5
    # times: us since the first kept event (the step annotation at T0), exact
    assert ops.loc["ProfilerStep#1", "start_us"] == 0.0
    assert ops.loc["aten::mm", "start_us"] == pytest.approx(10.0, abs=1e-9)
    assert ops.loc["aten::copy_", "dur_us"] == pytest.approx(28.0, abs=1e-9)
    parent = dict(zip(tf.ops["uid"], tf.ops["parent"]))
    name = dict(zip(tf.ops["uid"], tf.ops["name"]))
    launches = tf.ops[tf.ops["name"] == "cudaLaunchKernel"]
    assert sorted(name[parent[u]] for u in launches["uid"]) == ["aten::add", "aten::mm", "nccl:all_reduce"]
    assert name[parent[ops.loc["aten::mm", "uid"]]] == "ProfilerStep#1"
    k = tf.kernels.set_index("name")
    assert name[k.loc["gemm", "op"]] == "aten::mm" and name[k.loc["gemm", "launch"]] == "cudaLaunchKernel"
    assert name[k.loc["Memcpy DtoH (Device -> Pageable)", "op"]] == "aten::copy_"
    assert k.loc["Memcpy DtoH (Device -> Pageable)", "direction"] == "DtoH"
    assert k.loc["Memcpy DtoH (Device -> Pageable)", "bytes"] == 4000
    assert (k.loc["Memset (Device)", "kind"], k.loc["Memset (Device)", "bytes"]) == ("memset", 1024)
    assert k.loc["ncclKernel_AllReduce_RING_LL_Sum_float", "kind"] == "communication"
    assert sorted(tf.streams["name"]) == ["stream:7", "stream:8", "stream:9"]
    # Context Sync: the last kernel started on each stream of device 0 before its end (145)
    waited = sorted(dict(zip(tf.kernels["uid"], tf.kernels["name"]))[s] for s in tf.syncs["src"])
    assert waited == ["Memcpy DtoH (Device -> Pageable)", "Memset (Device)", "ncclKernel_AllReduce_RING_LL_Sum_float"]
    assert set(tf.syncs["dst"]) == {ops.loc["cudaDeviceSynchronize", "uid"]}
    # memory: A, B, C on cuda:0 and 64 bytes on the CPU; one free without allocation
    a = tf.allocations.sort_values("alloc_us")
    assert a["bytes"].tolist() == [1000, 64, 4000, 500]
    assert a["free_us"].tolist()[0] == pytest.approx(61.0) and math.isnan(a["free_us"].tolist()[1])
    assert tf.meta["unpaired_frees"] == 1
    assert json.loads(tf.meta["skipped_span_categories"]) == {"trace": 1}  # the profiler's own span
    assert tf.meta["kernels_without_launch"] == 0 and tf.meta["memory_records_without_address"] == 0
    assert [name[o] for o in a["op"]] == ["aten::mm", "aten::mm", "aten::add", "aten::copy_"]
    attrs = json.loads(ops.loc["aten::mm", "attrs"])
    assert attrs["Input Dims"] == [[8, 16], [16, 4]] and attrs["category"] == "cpu_op"


def test_flow_events_join_a_kernel_without_correlation(tmp_path):
    doc = kb.document()
    for ev in doc["traceEvents"]:
        if ev.get("name") == "gemm":
            del ev["args"]["correlation"]
    tf = pytorch_kineto.parse(kb.write(tmp_path / "flow.json.gz", doc))
    name = dict(zip(tf.ops["uid"], tf.ops["name"]))
    gemm = tf.kernels[tf.kernels["name"] == "gemm"].iloc[0]
    assert name[gemm["op"]] == "aten::mm" and name[gemm["launch"]] == "cudaLaunchKernel"


def test_top_ops_and_breakdowns(graph, gpu):
    # weight: kernel time when the op launched kernels, else self time;
    # ProfilerStep#1: 200 - (30 + 15 + 28 + 8 + 8 + 30) = 81
    top = rows(graph, "top-ops", gpu, n=6)
    assert [(r["op"], r["dur_us"]) for r in top] == [
        ("ProfilerStep#1", pytest.approx(81.0)),
        ("aten::mm", pytest.approx(40.0)),
        ("nccl:all_reduce", pytest.approx(40.0)),
        ("cudaDeviceSynchronize", pytest.approx(30.0)),
        ("cudaMemcpyAsync", pytest.approx(24.0)),
        ("aten::copy_", pytest.approx(20.0)),
    ]
    types = {r["type"]: r for r in rows(graph, "op-type-breakdown", gpu)}
    assert types["cudaLaunchKernel"]["count"] == 3 and types["cudaLaunchKernel"]["total_us"] == pytest.approx(17.0)
    assert sum(r["total_us"] for r in types.values()) == pytest.approx(
        81 + 40 + 8 + 10 + 5 + 20 + 24 + 40 + 4 + 3 + 3 + 30
    )
    phases = {r["phase"]: r for r in rows(graph, "phase-breakdown", gpu)}
    # nccl:all_reduce (its NCCL kernel, 40) and the launch inside it (4)
    assert (phases["communication"]["ops"], phases["communication"]["total_us"]) == (2, pytest.approx(44.0))
    assert (phases["other"]["ops"], phases["other"]["total_us"]) == (1, pytest.approx(81.0))
    assert phases["forward"]["ops"] == 9 and phases["forward"]["total_us"] == pytest.approx(143.0)
    assert phases["forward"]["bytes_allocated"] == 1000 + 64 + 4000 + 500
    assert phases["backward"]["ops"] == 0


def test_streams_idle_gaps_and_copies(graph, gpu):
    util = {r["stream"]: r for r in rows(graph, "stream-utilization", gpu, min_gap_us=0)}
    # union of kernel intervals: stream 7 = 40 + 10 + 3, stream 8 = 20, stream 9 = 40; span 200
    assert {s: r["busy_us"] for s, r in util.items()} == {
        "stream:7": pytest.approx(53.0),
        "stream:8": pytest.approx(20.0),
        "stream:9": pytest.approx(40.0),
    }
    assert util["stream:7"]["window_us"] == pytest.approx(200.0)
    assert (util["stream:7"]["gaps"], util["stream:7"]["gap_us"]) == (2, pytest.approx(33.0))
    gaps = rows(graph, "idle-gaps", gpu)
    assert [(g["gap_us"], g["before_op"], g["after_op"], g["at_us"]) for g in gaps] == [
        (pytest.approx(28.0), "aten::add", "aten::zero_", pytest.approx(80.0)),
        (pytest.approx(5.0), "aten::mm", "aten::add", pytest.approx(65.0)),
    ]
    copies = rows(graph, "memcpy-overhead", gpu)
    # one DtoH copy [66, 86): compute kernels cover [66, 70) is free, [70, 80) covered, [80, 86) free
    assert copies == [
        {
            "direction": "DtoH",
            "copies": 1,
            "bytes": 4000,
            "total_us": pytest.approx(20.0),
            "gbps": pytest.approx(0.2),
            "exposed_us": pytest.approx(10.0),
        }
    ]


def test_memory(graph, gpu):
    peak = rows(graph, "peak-memory", gpu)
    cuda = [r for r in peak if r["allocator"] == "cuda:0"]
    # cuda:0 live bytes: 1000 (11), 5000 (46), 4000 (61), 4500 (63), 500 (150): peak 5000, A and B live
    assert sorted(r["bytes"] for r in cuda) == [1000, 4000]
    res = run_analysis(graph, "memory-timeline", gpu, {})
    points = [
        (r[res.columns.index("t_us")], r[res.columns.index("live_bytes")])
        for r in res.rows
        if r[res.columns.index("allocator")] == "cuda:0"
    ]
    assert [(pytest.approx(t), b) for t, b in points] == [
        (11.0, 1000),
        (46.0, 5000),
        (61.0, 4000),
        (63.0, 4500),
        (150.0, 500),
    ]


def test_observed_critical_path_by_hand(graph, gpu):
    path = rows(graph, "observed-critical-path", gpu)
    got = [(r["event"], r["kind"], r["start_us"], r["dur_us"], r["counted"]) for r in path]
    a = pytest.approx
    assert got == [
        ("aten::mm", "cpu_op", a(10), a(2), True),
        ("cudaLaunchKernel", "runtime", a(12), a(8), True),
        ("aten::mm", "cpu_op", a(20), a(20), True),
        ("aten::add", "idle", a(40), a(5), False),
        ("aten::add", "cpu_op", a(45), a(2), True),
        ("cudaLaunchKernel", "runtime", a(47), a(5), True),
        ("aten::add", "cpu_op", a(52), a(8), True),
        ("aten::copy_", "idle", a(60), a(2), False),
        ("aten::copy_", "cpu_op", a(62), a(2), True),
        ("cudaMemcpyAsync", "sync", a(64), a(24), False),
        ("aten::copy_", "cpu_op", a(88), a(2), True),
        ("nccl:all_reduce", "idle", a(90), a(2), False),
        ("nccl:all_reduce", "cpu_op", a(92), a(1), True),
        ("cudaLaunchKernel", "runtime", a(93), a(7), True),
        ("ncclKernel_AllReduce_RING_LL_Sum_float", "communication", a(100), a(40), True),
    ]
    assert [r["step"] for r in path] == list(range(15))
    assert path[-1]["resource"] == "cuda:0/stream:9" and path[0]["resource"] == "100:100"
    trace = graph.run(
        "MATCH (t:Trace {trace: $t, uid: 'trace'}) RETURN t.observed_path_us, t.observed_path_span_us",
        {"t": gpu},
        trace=gpu,
    ).rows[0]
    assert trace == [a(97.0), a(130.0)]
    summary = {r["category"]: r for r in rows(graph, "observed-critical-path-summary", gpu)}
    assert list(summary) == ["gpu_compute", "gpu_memory", "communication", "cpu", "launch", "sync_wait", "idle"]
    assert {c: r["total_us"] for c, r in summary.items()} == {
        "gpu_compute": 0.0,
        "gpu_memory": 0.0,
        "communication": a(40),
        "cpu": a(37),
        "launch": a(20),
        "sync_wait": a(24),
        "idle": a(9),
    }
    assert sum(r["counted_us"] for r in summary.values()) == a(97.0)
    assert sum(r["share"] for r in summary.values()) == a(1.0)
    links = rows(graph, "observed-critical-path-graph", gpu, max_steps=4)
    assert [r["step"] for r in links] == [0, 1, 2]
    names = [[n["properties"]["name"] for n in r["path"]["nodes"]] for r in links]
    assert names == [["aten::mm", "cudaLaunchKernel"], ["cudaLaunchKernel", "aten::mm"], ["aten::mm", "aten::add"]]


def test_not_available_without_dependencies(graph, gpu):
    res = run_analysis(graph, "critical-path", gpu, {})
    assert res.rows == [] and res.note.startswith("not available: the trace has no dependencies")


def test_two_ranks_make_one_trace(graph, tmp_path):
    r0 = kb.write(tmp_path / "rank0.json.gz", kb.document(rank=0))
    # rank 1 started 1 ms later on the same clock
    r1 = kb.write(tmp_path / "rank1.json.gz", kb.document(rank=1, base_ns=kb.BASE_NS + 1_000_000))
    tf = parse_files([r1, r0])
    assert sorted(tf.devices["name"]) == ["rank0/cpu", "rank0/cuda:0", "rank1/cpu", "rank1/cuda:0"]
    assert len(tf.ops) == 24 and len(tf.kernels) == 10
    steps = tf.ops[tf.ops["name"] == "ProfilerStep#1"].set_index("thread")["start_us"]
    assert steps.to_dict() == {"rank0/100:100": 0.0, "rank1/100:100": pytest.approx(1000.0)}
    assert json.loads(tf.meta["distributed_infos"])["1"]["world_size"] == 2
    ingest(graph, [r0, r1], "k-ranks")
    util = rows(graph, "stream-utilization", "k-ranks")
    assert [(r["device"], r["stream"]) for r in util][:3] == [
        ("rank0/cuda:0", "stream:7"),
        ("rank0/cuda:0", "stream:8"),
        ("rank0/cuda:0", "stream:9"),
    ]
    with pytest.raises(InputError, match="rank 0 given twice"):
        parse_files([r0, kb.write(tmp_path / "again.json.gz", kb.document(rank=0))])


def test_a_file_without_a_rank_takes_one_no_file_names(tmp_path):
    """Files without distributedInfo.rank take the lowest free ranks, so a
    file that names rank 0 or 1 after them no longer collides."""
    plain = kb.write(tmp_path / "plain.json.gz", kb.document())
    one = kb.write(tmp_path / "one.json.gz", kb.document(rank=1))
    zero = kb.write(tmp_path / "zero.json.gz", kb.document(rank=0))
    for files, plain_rank in (([plain, one], 0), ([plain, zero], 1), ([zero, plain, one], 2)):
        tf = parse_files(files)
        assert json.loads(tf.meta["ranks"]) == sorted({0, 1, plain_rank})
        plain_devices = {d for d in tf.devices["name"] if d.startswith(f"rank{plain_rank}/")}
        assert plain_devices == {f"rank{plain_rank}/cpu", f"rank{plain_rank}/cuda:0"}
        assert len(tf.kernels) == 5 * len(files)


def test_kernels_launched_outside_the_trace_are_kept(graph, tmp_path):
    """A device event whose runtime call is not in the trace (work queued
    before the profiler started) is a kernel of the op that stands for
    launches outside the trace: it counts on its stream and in the kernel
    totals; before, such a trace was refused."""
    doc = kb.document()
    doc["traceEvents"][6]["args"]["correlation"] = 77  # add_kernel's cudaLaunchKernel is now someone else's
    path = kb.write(tmp_path / "orphan.json.gz", doc)
    ingest(graph, [path], "k-orphan")
    (launched,) = graph.run(
        "MATCH (o:Op {trace: $trace})-[:LAUNCHED]->(k:Kernel {name: 'add_kernel'}) "
        "RETURN o.name, o.type, o.phase, o.start_us, o.dur_us",
        trace="k-orphan",
    ).rows
    assert launched == ["[launched outside the trace]", "OutsideTrace", "other", 70.0, 0.0]
    facts = graph.trace_facts("k-orphan")
    assert facts["meta_kernels_without_launch"] == 1
    # stream 7 is busy with gemm [25, 65), add_kernel [70, 80) and the memset [108, 111)
    util = {r["stream"]: r["busy_us"] for r in rows(graph, "stream-utilization", "k-orphan")}
    assert util["stream:7"] == pytest.approx(40 + 10 + 3)
    top = {r["op"]: r["dur_us"] for r in rows(graph, "top-ops", "k-orphan", n=20)}
    assert top["[launched outside the trace]"] == pytest.approx(10.0)
    assert run_analysis(graph, "observed-critical-path", "k-orphan", {}).rows


def test_memory_is_paired_in_time_order(tmp_path):
    """Kineto groups records by thread: a free may come before its
    allocation in the file. Pairing follows time, not the file."""
    doc = kb.document()
    events = doc["traceEvents"]
    free_a = next(e for e in events if e.get("name") == "[memory]" and e["args"]["Bytes"] == -1000)
    events.remove(free_a)
    events.insert(1, free_a)  # the free of A (t=61) first in the file
    no_address = kb._mem(70, None, 256, 4756)
    del no_address["args"]["Addr"]  # PyTorch 1.8/1.9 records carry no address
    events.append(no_address)
    tf = pytorch_kineto.parse(kb.write(tmp_path / "reordered.json.gz", doc))
    a = tf.allocations.sort_values("alloc_us")
    assert a["bytes"].tolist() == [1000, 64, 4000, 500]
    assert a["free_us"].tolist()[0] == pytest.approx(61.0)
    assert tf.meta["unpaired_frees"] == 1 and tf.meta["memory_records_without_address"] == 1


def test_gzipped_json_of_another_kind_says_so(tmp_path):
    path = tmp_path / "memory_timeline.raw.gz"
    path.write_bytes(gzip.compress(b'{"some": "other json"}'))
    with pytest.raises(InputError, match="gzip-compressed data of no supported format"):
        detect(path)


def test_nanosecond_timestamps_stay_exact(tmp_path):
    """Kineto ns traces write us since the epoch with 3 decimals; a float64
    would round those to 0.25 us."""
    # written as text: a Python float could not even hold these values
    path = tmp_path / "ns.json"
    path.write_text(
        '{"schemaVersion": 1, "traceEvents": ['
        '{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1712195495519689.047, '
        '"dur": 1.001},'
        '{"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 1712195495519700.123, '
        '"dur": 0.003}], "displayTimeUnit": "ns"}'
    )
    assert float("1712195495519700.123") - float("1712195495519689.047") != pytest.approx(11.076, abs=1e-3)
    tf = pytorch_kineto.parse(path)
    b = tf.ops.set_index("name").loc["b"]
    assert b["start_us"] == pytest.approx(11.076, abs=1e-9) and b["dur_us"] == pytest.approx(0.003, abs=1e-12)
    assert tf.ops.set_index("name").loc["a", "dur_us"] == pytest.approx(1.001, abs=1e-12)
    assert tf.meta["display_time_unit"] == "ns"


# --- bad input -----------------------------------------------------------------------------------


def _bad(tmp_path, mutate, name="bad.json"):
    doc = kb.document()
    mutate(doc)
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(
    "mutate, message, where",
    [
        (lambda d: d["traceEvents"][3].pop("ts"), "has no ts", r"traceEvents\[3\]"),
        (lambda d: d["traceEvents"][5].__setitem__("dur", -2.5), "negative duration", r"traceEvents\[5\]"),
        (lambda d: d["traceEvents"][-4]["args"].pop("Bytes"), "[memory] record without Bytes", ""),
        (lambda d: d["traceEvents"][2].pop("ph"), "has no ph", r"traceEvents\[2\]"),
        (lambda d: d.pop("traceEvents"), "no traceEvents", ""),
    ],
)
@parse_level
def test_bad_events_are_one_line_errors(graph, tmp_path, mutate, message, where):
    path = _bad(tmp_path, mutate)
    before = everything(graph)
    with pytest.raises(InputError) as exc:
        ingest(graph, [path], "k-bad", fmt="pytorch-kineto")
    text = str(exc.value)
    assert "\n" not in text and text.startswith(str(path)) and message in text
    if where:
        import re

        assert re.search(where, text)
    assert everything(graph) == before


@parse_level
def test_truncated_and_fake_gzip(graph, tmp_path, gpu_file):
    data = gzip.decompress(gpu_file.read_bytes())
    cut = tmp_path / "cut.json"
    cut.write_bytes(data[: len(data) // 2])
    cut_gz = tmp_path / "cut.json.gz"
    cut_gz.write_bytes(gpu_file.read_bytes()[:-40])
    fake = tmp_path / "fake.json.gz"
    fake.write_bytes(b"\x1f\x8bnot really gzip at all" * 10)
    named = tmp_path / "named.json.gz"
    named.write_bytes(b"garbage that is neither")
    for path, message in (
        (cut, "truncated JSON"),
        (cut_gz, "gzip stream ends early"),
        (fake, "not a valid gzip file"),
        (named, "named .gz but not gzip"),
    ):
        with pytest.raises(InputError) as exc:
            ingest(graph, [path], "k-bad", fmt="pytorch-kineto")
        assert message in str(exc.value) and "\n" not in str(exc.value) and str(exc.value).startswith(str(path))
    assert graph.run("MATCH (t:Trace {trace: 'k-bad'}) RETURN count(t)").rows[0][0] == 0


# --- real torch CPU traces -------------------------------------------------------------------------


def _raw(path: Path) -> dict:
    with gzip.open(path, "rt") as f:
        return json.load(f)


def _reference(path: Path) -> dict:
    """Own walk over the raw JSON: ops, innermost containing op, self time,
    paired allocations and their peak, top-level op time."""
    doc = _raw(path)
    ops = [
        dict(e, _idx=j)
        for j, e in enumerate(doc["traceEvents"])
        if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation", "python_function")
    ]
    for i, o in enumerate(ops):
        o["_i"] = i
        o["_end"] = o["ts"] + o["dur"]

    def innermost(t, tid, exclude=None, strict_end=True):
        best = None
        for o in ops:
            if o is exclude or o["tid"] != tid or not (o["ts"] <= t < o["_end"]):
                continue
            if exclude is not None and not (
                o["dur"] > exclude["dur"] or (o["dur"] == exclude["dur"] and o["_i"] < exclude["_i"])
            ):
                continue
            if best is None or o["dur"] < best["dur"] or (o["dur"] == best["dur"] and o["_i"] > best["_i"]):
                best = o
        return best

    parent = {o["_i"]: innermost(o["ts"], o["tid"], exclude=o) for o in ops}
    child_time: dict = {}
    for i, p in parent.items():
        if p is not None:
            child_time[p["_i"]] = child_time.get(p["_i"], 0.0) + ops[i]["dur"]
    self_time = {o["_i"]: max(0.0, o["dur"] - child_time.get(o["_i"], 0.0)) for o in ops}
    by_type: dict = {}
    for o in ops:
        t = (
            "ProfilerStep"
            if o["name"].startswith("ProfilerStep#")
            else (o["name"].split("#")[0] if o["cat"] == "user_annotation" else o["name"])
        )
        by_type[t] = by_type.get(t, 0.0) + self_time[o["_i"]]
    mem = sorted((e for e in doc["traceEvents"] if e.get("name") == "[memory]"), key=lambda e: e["ts"])
    live, pairs = {}, []
    for e in mem:
        a = e["args"]
        if a["Bytes"] > 0:
            live[a["Addr"]] = [e["ts"], None, a["Bytes"]]
            pairs.append(live[a["Addr"]])
        elif a["Addr"] in live:
            live.pop(a["Addr"])[1] = e["ts"]
    peak = 0
    for t in sorted({p[0] for p in pairs}):
        peak = max(peak, sum(p[2] for p in pairs if p[0] <= t and (p[1] is None or t < p[1])))

    def cpu_parent(o):
        p = parent[o["_i"]]
        while p is not None and p["cat"] != "cpu_op":
            p = parent[p["_i"]]
        return p

    top_level = sum(o["dur"] for o in ops if o["cat"] == "cpu_op" and o["dur"] > 0 and cpu_parent(o) is None)
    return {
        "ops": len(ops),
        "parent": parent,
        "self": self_time,
        "by_type": by_type,
        "allocations": len(pairs),
        "peak": peak,
        "top_level_us": top_level,
        "raw_ops": ops,
    }


@pytest.mark.parametrize("path", CPU_TRACES, ids=lambda p: p.name.split(".")[0])
def test_torch_cpu_trace(graph, path):
    ref = _reference(path)
    tf = pytorch_kineto.parse(path)
    assert len(tf.ops) == ref["ops"] and tf.kernels.empty
    by_index = {f"op:0:{o['_idx']}": o for o in ref["raw_ops"]}
    parent_name = dict(zip(tf.ops["uid"], tf.ops["name"]))
    for _, op in tf.ops.iterrows():
        raw = by_index[op["uid"]]
        assert raw["name"] == op["name"] and op["dur_us"] == pytest.approx(raw["dur"], abs=1e-6)
        want = ref["parent"][raw["_i"]]
        got = op["parent"]
        assert (None if want is None else want["name"]) == (parent_name[got] if isinstance(got, str) else None)
    trace = f"k-{path.name.split('.')[0]}"
    ingest(graph, [path], trace)
    types = {r["type"]: r["total_us"] for r in rows(graph, "op-type-breakdown", trace)}
    assert types.keys() == ref["by_type"].keys()
    for t, total in ref["by_type"].items():
        assert types[t] == pytest.approx(total, abs=1e-6), t
    top = rows(graph, "top-ops", trace, n=5)
    assert [r["dur_us"] for r in top] == pytest.approx(sorted(ref["self"].values(), reverse=True)[:5])
    peak = rows(graph, "peak-memory", trace)
    assert sum(r["bytes"] for r in peak) == ref["peak"] and ref["peak"] > 0
    facts = graph.run(
        "MATCH (t:Trace {trace: $t, uid: 'trace'}) RETURN t.memory_peak_bytes, t.observed_path_us",
        {"t": trace},
        trace=trace,
    ).rows[0]
    assert facts[0] == ref["peak"]
    # one host thread, no GPU: the path runs through every top-level cpu op
    assert facts[1] == pytest.approx(ref["top_level_us"], abs=1e-6)
    assert {r["phase"] for r in rows(graph, "phase-breakdown", trace) if r["ops"]} >= {
        "forward",
        "backward",
        "optimizer",
    }


# --- HTA's traces -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(HTA_CRITICAL_PATH_US))
def test_observed_path_matches_hta(name):
    from tracegraph.ingest.enrich import enrich

    tf = pytorch_kineto.parse(HTA / name)
    props = enrich(tf).props
    assert props["observed_path_us"] == pytest.approx(HTA_CRITICAL_PATH_US[name], rel=0.02)
    assert props["observed_path_us"] <= props["observed_path_span_us"] + 1e-6


def test_kernel_totals_per_name_equal_the_raw_trace(graph):
    path = HTA / "simple_add.json.gz"
    doc = _raw(path)
    want: dict = {}
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            want[e["name"]] = want.get(e["name"], 0) + e["dur"]
    ingest(graph, [path], "k-hta")
    got = dict(graph.run("MATCH (k:Kernel {trace: 'k-hta'}) RETURN k.name, sum(k.dur_us)", trace="k-hta").rows)
    assert got.keys() == want.keys()
    for k, v in want.items():
        assert got[k] == pytest.approx(v, abs=1e-6)
    # stream busy time: the union of kernel intervals per stream, by a sweep here
    by_stream: dict = {}
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            by_stream.setdefault(f"stream:{e['args']['stream']}", []).append((e["ts"], e["ts"] + e["dur"]))
    busy = {}
    for s, iv in by_stream.items():
        total, end = 0, -math.inf
        for a, b in sorted(iv):
            if a > end:
                total += b - a
                end = b
            elif b > end:
                total += b - end
                end = b
        busy[s] = total
    util = {r["stream"]: r["busy_us"] for r in rows(graph, "stream-utilization", "k-hta")}
    assert util == {s: pytest.approx(v) for s, v in busy.items()}


def test_with_stack_annotations_hold_what_runs_in_them(graph):
    """With ``with_stack=True``, ``ProfilerStep#1`` and the ``Optimizer.``
    annotations begin inside the Python frames that open them and end
    inside the ones that close them: they must still hold the ops that run
    in them. References from the raw JSON: every cpu_op that starts inside
    an ``Optimizer.`` annotation is in the optimizer phase; the ops' self
    times summed are the time the thread was inside any op (the union of
    the events' intervals: each instant counted once, in its innermost op),
    plus at most the time each annotation shares with the frames it only
    partly overlaps (counted in both). Before: the annotations held
    nothing, their whole length was their own time (2x the union), and the
    optimizer's ops were ``forward``."""
    events = json.loads(gzip.decompress(STACK_TRACE.read_bytes()))["traceEvents"]
    host = [
        e for e in events if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation", "python_function")
    ]
    spans = [(float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in host]
    union, reach = 0.0, -math.inf
    for start, end in sorted(spans):
        union += max(0.0, end - max(start, reach))
        reach = max(reach, end)
    shared = 0.0
    for e, (a, b) in zip(host, spans):
        if e["cat"] == "user_annotation":
            shared += max([pb - a for pa, pb in spans if pa < a < pb < b], default=0.0)  # begins inside
            shared += max([b - pa for pa, pb in spans if a < pa < b < pb], default=0.0)  # ends inside
    optimizer = [(a, b) for e, (a, b) in zip(host, spans) if e["name"].startswith("Optimizer.")]
    in_optimizer = sum(
        1 for e, (a, _) in zip(host, spans) if e["cat"] == "cpu_op" and any(s <= a < t for s, t in optimizer)
    )
    assert len(optimizer) == 2 and in_optimizer > 20 and shared < 0.1 * union
    ingest(graph, [STACK_TRACE], "k-stack")
    total = graph.run("MATCH (o:Op {trace: $trace}) RETURN sum(o.weight_us)", trace="k-stack").rows[0][0]
    assert union - 0.01 <= total <= union + shared
    phases = dict(
        graph.run(
            "MATCH (o:Op {trace: $trace}) WHERE o.category = 'cpu_op' RETURN o.phase, count(*)", trace="k-stack"
        ).rows
    )
    assert phases["optimizer"] == in_optimizer


def test_files_of_another_run_or_twice_the_same_are_not_made_ranks(tmp_path):
    """Files given together are one job's ranks. A trace given twice (its
    .json beside its .json.gz, no rank in either) and a file of another
    run (its events hours away from the others') are refused, in one line
    naming the file; ranks that name themselves may hold the same events
    (a built job), and files of one run are taken, apart by less than a
    second (clocks of different machines)."""
    plain = kb.write(tmp_path / "step.json", gz=False)
    packed = kb.write(tmp_path / "step.json.gz")
    later = kb.write(tmp_path / "later.json.gz", kb.document(base_ns=kb.BASE_NS + 3 * 3600 * 10**9))
    with pytest.raises(InputError) as e:
        pytorch_kineto.parse_many([plain, packed])
    assert str(e.value) == f"{packed}: the same events as {plain}: one trace given twice"
    with pytest.raises(InputError) as e:
        pytorch_kineto.parse_many([plain, later])
    assert str(e.value).startswith(f"{plain}: its events are 10,800.0 s away from the other files': not a rank of")
    ranks = [
        kb.write(tmp_path / f"rank{r}.json.gz", kb.document(rank=r, base_ns=kb.BASE_NS + r * 10**8)) for r in (0, 1)
    ]
    assert json.loads(pytorch_kineto.parse_many(ranks).meta["ranks"]) == [0, 1]


def test_a_job_given_without_some_of_its_ranks_says_which(tmp_path):
    """distributedInfo says the job's size: ranks it names that no file
    gives are listed on the Trace (``meta_ranks_missing``) and the ingest
    warns, since its collectives and stragglers are then among the ranks
    given only."""
    from conftest import run_cli

    paths = []
    for r in (0, 2):
        doc = kb.document(rank=r)
        doc["distributedInfo"]["world_size"] = 4
        paths.append(kb.write(tmp_path / f"rank{r}.json.gz", doc))
    assert json.loads(pytorch_kineto.parse_many(paths).meta["ranks_missing"]) == [1, 3]
    out = run_cli("ingest", *map(str, paths), "--trace", "partial", home=tmp_path / "home", check=True).stdout
    assert out.splitlines()[-1] == (
        "  warning: the job's ranks 1, 3 are not among the files: its collectives are joined, "
        "and its stragglers named, among the ranks given"
    )
    whole = [kb.write(tmp_path / f"whole{r}.json.gz", kb.document(rank=r)) for r in (0, 1)]  # world_size 2
    assert "ranks_missing" not in pytorch_kineto.parse_many(whole).meta
