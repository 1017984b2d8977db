"""Chrome Trace Event JSON from any producer (``chrome-trace``, issue 47).

Real captures: JAX's two files of one 2-step capture and PaddlePaddle's
(tests/data/chrome, with the scripts that made them), and a real A100
PyTorch trace (tests/data/hta/alexnet.json.gz) read as a generic Chrome
trace, the GPU case no CPU capture has. Expected numbers are read from the
JSON here, in a few lines, never from tracegraph; the rules' corner cases
(B/E pairs, flows, bind ids, device lanes, the array form left
unterminated) are small traces written by the tests, with answers worked
out by hand.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from conftest import cli_here, ready_traces

from tracegraph.errors import InputError
from tracegraph.ingest import pipeline
from tracegraph.ingest.formats.chrome import trace as chrome
from tracegraph.ingest.formats.kineto import trace as kineto
from tracegraph.queries.run import run_analysis

DATA = Path(__file__).parent / "data"
JAX_PERFETTO = DATA / "chrome" / "jax_train_step.perfetto_trace.json.gz"
JAX_VIEWER = DATA / "chrome" / "jax_train_step.trace.json.gz"
PADDLE = DATA / "chrome" / "paddle_train_step.paddle_trace.json"
A100 = DATA / "hta" / "alexnet.json.gz"
DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")


def events(path: Path) -> list[dict]:
    raw = path.read_bytes()
    doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def spans(path: Path) -> list[dict]:
    return [e for e in events(path) if e.get("ph") == "X"]


def write(tmp_path: Path, name: str, content: object) -> Path:
    p = tmp_path / name
    p.write_text(content if isinstance(content, str) else json.dumps(content))
    return p


# ---------------------------------------------------------------- detection


@pytest.mark.parametrize("path", [JAX_PERFETTO, JAX_VIEWER, PADDLE], ids=lambda p: p.name)
def test_real_captures_are_chrome_traces(path):
    assert pipeline.detect(path) == "chrome-trace"


def test_pytorch_traces_stay_kineto():
    assert pipeline.detect(A100) == "pytorch-kineto"
    assert pipeline.detect(DATA / "kineto" / "cnn-cpu.pt.trace.json.gz") == "pytorch-kineto"


def test_sniff_takes_both_forms_and_nothing_else():
    assert chrome.sniff(b'{"displayTimeUnit":"ns","traceEvents":[{"ph":"M"')
    assert chrome.sniff(b'[{"name": "a", "ph": "X", "ts": 1')
    assert chrome.sniff(b'[\n  {"pid": 1, "tid": 2')
    assert not chrome.sniff(b'{"nodes": []}')
    assert not chrome.sniff(b"[1, 2, 3]")
    assert not chrome.sniff(b'["traceEvents"]')
    # Kineto keeps what it reads; PaddlePaddle's header (schemaVersion and span_indx) is not Kineto's.
    assert not kineto.sniff(PADDLE.read_bytes()[:65536])
    assert not kineto.sniff(gzip.decompress(JAX_VIEWER.read_bytes())[:65536])


# ---------------------------------------------------------------- JAX


@pytest.mark.parametrize("path", [JAX_PERFETTO, JAX_VIEWER], ids=["perfetto", "trace-viewer"])
def test_jax_capture_every_span_is_an_op_with_its_duration(path):
    xs = spans(path)
    tf = chrome.parse(path)
    assert tf.framework == "jax"
    assert len(tf.ops) == len(xs) == 148
    # (to the nanosecond: JAX writes some durations of 1e-06 us)
    assert tf.ops["dur_us"].sum() == pytest.approx(sum(float(e["dur"]) for e in xs), abs=1e-3)
    assert sorted(tf.ops["name"]) == sorted(e["name"] for e in xs)
    first = min(float(e["ts"]) for e in xs)
    last = max(float(e["ts"]) + float(e["dur"]) for e in xs)
    assert tf.ops["start_us"].min() == 0.0
    assert tf.ops["end_us"].max() == pytest.approx(last - first, abs=1e-6)
    assert len(tf.kernels) == 0
    assert json.loads(tf.meta["skipped_events"]) == {"{}": 1}  # the trailing empty event
    assert tf.meta["display_time_unit"] == "ns"


def test_jax_step_annotations_are_markers_and_hold_their_step():
    tf = chrome.parse(JAX_VIEWER)
    steps = tf.ops[tf.ops["name"] == "train"]
    assert len(steps) == 2 and set(steps["role"]) == {"annotation"}
    assert sorted(json.loads(a)["step_num"] for a in steps["attrs"]) == ["0", "1"]
    # Nesting: every span on the python thread inside a step's interval has that step as an ancestor.
    ops = tf.ops.set_index("uid")
    for _, step in steps.iterrows():
        inside = tf.ops[
            (tf.ops["thread"] == step["thread"])
            & (tf.ops["start_us"] >= step["start_us"])
            & (tf.ops["end_us"] <= step["end_us"])
            & (tf.ops["uid"] != step["uid"])
        ]
        assert len(inside) > 0
        for u in inside["uid"]:
            chain = []
            while isinstance(u, str):
                chain.append(u)
                u = ops.loc[u, "parent"]
            assert step["uid"] in chain


def test_the_two_jax_files_are_the_same_trace():
    a, b = chrome.parse(JAX_PERFETTO), chrome.parse(JAX_VIEWER)
    cols = ["name", "thread", "start_us", "dur_us", "parent", "role"]
    assert a.ops[cols].round(6).equals(b.ops[cols].round(6))


# ---------------------------------------------------------------- PaddlePaddle


def test_paddle_capture_names_roles_and_phases():
    xs = spans(PADDLE)
    tf = chrome.parse(PADDLE)
    assert tf.framework == "paddle"
    assert len(tf.ops) == len(xs) == 208
    # (to the nanosecond: JAX writes some durations of 1e-06 us)
    assert tf.ops["dur_us"].sum() == pytest.approx(sum(float(e["dur"]) for e in xs), abs=1e-3)
    # The duration PaddlePaddle writes into every name is not part of it.
    assert sorted(tf.ops["name"]) == sorted(e["name"].rsplit("[", 1)[0] for e in xs)
    steps = tf.ops[tf.ops["type"] == "ProfileStep"]
    assert sorted(steps["name"]) == ["ProfileStep#0", "ProfileStep#1"]
    assert set(steps["role"]) == {"annotation"}
    # An operator inside a Backward span is backward, inside Optimization optimizer: read from the file.
    for cat, phase in (("Backward", "backward"), ("Optimization", "optimizer"), ("Forward", "forward")):
        regions = [(e["ts"], e["ts"] + e["dur"]) for e in xs if e["cat"] == cat]
        inside = {
            e["name"].rsplit("[", 1)[0]
            for e in xs
            if e["cat"] == "Operator" and any(a <= e["ts"] and e["ts"] + e["dur"] <= b for a, b in regions)
        }
        assert inside, cat
        got = tf.ops[tf.ops["category"] == "Operator"]
        for name in inside:
            assert phase in set(got.loc[got["name"] == name, "phase"]), (cat, name)
    # The Python and C++ lanes of one thread are one thread: operators nest in the step.
    assert tf.ops["thread"].nunique() == 1
    top = tf.ops[tf.ops["parent"].isna()]
    assert sorted(top["name"]) == ["ProfileStep#0", "ProfileStep#1"]


# ---------------------------------------------------------------- a real GPU trace, read as any Chrome trace


def test_a100_trace_kernels_and_launches_equal_the_files():
    ev = events(A100)
    device = [e for e in ev if e.get("ph") == "X" and e.get("cat") in DEVICE_CATEGORIES]
    runtime = {e["args"]["correlation"] for e in ev if e.get("cat") == "cuda_runtime"}
    tf = chrome.parse(A100)
    assert tf.framework == "chrome"
    assert len(tf.kernels) == len(device) == 98
    assert tf.kernels["dur_us"].sum() == pytest.approx(sum(float(e["dur"]) for e in device), abs=1e-3)
    launched = sum(1 for e in device if e["args"].get("correlation") in runtime)
    assert tf.kernels["launch"].notna().sum() == launched
    kinds = {"kernel": "compute", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
    expected = {}
    for e in device:
        expected[kinds[e["cat"]]] = expected.get(kinds[e["cat"]], 0) + 1
    assert tf.kernels["kind"].value_counts().to_dict() == expected
    # Each launch is the runtime call of the same correlation id.
    ops = tf.ops.set_index("uid")
    for _, k in tf.kernels[tf.kernels["launch"].notna()].iterrows():
        call = json.loads(ops.loc[k["launch"], "attrs"])
        assert ops.loc[k["launch"], "role"] in ("runtime", "sync")
        assert call["correlation"] == ev[int(k["uid"].split(":")[1])]["args"]["correlation"]
    # The generic reader and PyTorch's own agree on the device work.
    own = kineto.parse(A100)
    assert sorted(own.kernels["dur_us"].round(3)) == sorted(tf.kernels["dur_us"].round(3))
    assert own.kernels["launch"].notna().sum() == tf.kernels["launch"].notna().sum()


# ---------------------------------------------------------------- the rules, on small traces


def test_begin_end_pairs_instants_and_nesting(tmp_path):
    p = write(
        tmp_path,
        "be.json",
        [
            {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "main"}},
            {"ph": "B", "name": "step", "pid": 1, "tid": 1, "ts": 10},
            {"ph": "B", "name": "inner", "pid": 1, "tid": 1, "ts": 12.5, "args": {"a": 1}},
            {"ph": "i", "name": "mark", "pid": 1, "tid": 1, "ts": 13, "s": "t"},
            {"ph": "E", "pid": 1, "tid": 1, "ts": 15, "args": {"b": 2}},
            {"ph": "E", "pid": 1, "tid": 1, "ts": 30},
            {"ph": "E", "pid": 1, "tid": 1, "ts": 31},
            {"ph": "B", "name": "never closed", "pid": 1, "tid": 2, "ts": 40},
            {"ph": "C", "name": "fps", "pid": 1, "ts": 5, "args": {"value": 60}},
        ],
    )
    tf = chrome.parse(p)
    ops = tf.ops.set_index("name")
    assert list(tf.ops["name"]) == ["step", "inner", "mark"]
    # The origin is the first span or instant read (the counter at 5 us, not memory, is skipped).
    assert ops.loc["step", "start_us"] == 0.0 and ops.loc["step", "dur_us"] == 20.0
    assert ops.loc["inner", "dur_us"] == 2.5 and ops.loc["inner", "parent"] == ops.loc["step", "uid"]
    assert json.loads(ops.loc["inner", "attrs"])["a"] == 1 and json.loads(ops.loc["inner", "attrs"])["b"] == 2
    assert ops.loc["mark", "parent"] == ops.loc["inner", "uid"] and ops.loc["mark", "role"] == "annotation"
    assert ops.loc["mark", "dur_us"] == 0.0
    assert json.loads(tf.meta["skipped_events"]) == {"B never closed": 1, "C values not memory": 1, "E without B": 1}
    assert tf.framework == "chrome"


def test_device_lanes_flows_and_bind_ids(tmp_path):
    """A host thread issuing three kernels onto a device process: one by an
    s/f flow (string id), one by bind_id, one by correlation id; a fourth
    kernel has no launch. The device's derived lane (XLA Ops) is annotation."""
    p = write(
        tmp_path,
        "gpu.json",
        {
            "displayTimeUnit": "ms",
            "producer": "test",
            "traceEvents": [
                {"ph": "M", "name": "process_name", "pid": 7, "args": {"name": "/device:GPU:0"}},
                {"ph": "M", "name": "thread_name", "pid": 7, "tid": 1, "args": {"name": "Stream #1(Compute)"}},
                {"ph": "M", "name": "thread_name", "pid": 7, "tid": 2, "args": {"name": "XLA Ops"}},
                {"ph": "M", "name": "process_name", "pid": 3, "args": {"name": "/host:CPU"}},
                {"ph": "X", "name": "matmul", "cat": "op", "pid": 3, "tid": 9, "ts": 0, "dur": 100},
                {"ph": "X", "name": "cudaLaunchKernel", "cat": "cuda_runtime", "pid": 3, "tid": 9, "ts": 10, "dur": 5},
                {
                    "ph": "X",
                    "name": "cudaLaunchKernel",
                    "cat": "cuda_runtime",
                    "pid": 3,
                    "tid": 9,
                    "ts": 20,
                    "dur": 5,
                    "bind_id": 77,
                    "flow_out": True,
                },
                {
                    "ph": "X",
                    "name": "cudaLaunchKernel",
                    "cat": "cuda_runtime",
                    "pid": 3,
                    "tid": 9,
                    "ts": 30,
                    "dur": 5,
                    "args": {"correlation": 5},
                },
                {
                    "ph": "X",
                    "name": "cudaStreamSynchronize",
                    "cat": "cuda_runtime",
                    "pid": 3,
                    "tid": 9,
                    "ts": 40,
                    "dur": 50,
                },
                {"ph": "s", "id": "f1", "cat": "launch", "pid": 3, "tid": 9, "ts": 11},
                {"ph": "f", "id": "f1", "cat": "launch", "pid": 7, "tid": 1, "ts": 50, "bp": "e"},
                {"ph": "X", "name": "gemm", "pid": 7, "tid": 1, "ts": 50, "dur": 10},
                {
                    "ph": "X",
                    "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                    "pid": 7,
                    "tid": 1,
                    "ts": 60,
                    "dur": 10,
                    "bind_id": 77,
                    "flow_in": True,
                },
                {
                    "ph": "X",
                    "name": "MemcpyDtoH",
                    "cat": "gpu_memcpy",
                    "pid": 7,
                    "tid": 1,
                    "ts": 70,
                    "dur": 4,
                    "args": {"correlation": 5, "bytes": 4096},
                },
                {"ph": "X", "name": "orphan", "pid": 7, "tid": 1, "ts": 80, "dur": 2},
                {"ph": "X", "name": "dot.1", "pid": 7, "tid": 2, "ts": 50, "dur": 30},
            ],
        },
    )
    tf = chrome.parse(p)
    k = tf.kernels.set_index("name")
    ops = tf.ops.set_index("uid")
    assert sorted(tf.devices["name"]) == ["/device:GPU:0", "/host:CPU"]
    assert list(tf.streams["name"]) == ["Stream #1(Compute)"]
    assert k.loc["gemm", "kind"] == "compute"
    assert k.loc["ncclDevKernel_AllReduce_Sum_f32_RING_LL", "kind"] == "communication"
    assert (k.loc["MemcpyDtoH", "kind"], k.loc["MemcpyDtoH", "bytes"], k.loc["MemcpyDtoH", "direction"]) == (
        "memcpy",
        4096,
        "DtoH",
    )
    starts = {name: ops.loc[k.loc[name, "launch"], "start_us"] for name in ("gemm", "MemcpyDtoH")}
    assert starts == {"gemm": 10.0, "MemcpyDtoH": 30.0}
    assert ops.loc[k.loc["ncclDevKernel_AllReduce_Sum_f32_RING_LL", "launch"], "start_us"] == 20.0
    # The op that launched each is the op enclosing its runtime call.
    for name in ("gemm", "MemcpyDtoH", "ncclDevKernel_AllReduce_Sum_f32_RING_LL"):
        assert ops.loc[k.loc[name, "op"], "name"] == "matmul"
    assert pd_isna(k.loc["orphan", "launch"])
    assert ops.loc[k.loc["orphan", "op"], "name"] == "[launched outside the trace]"
    assert tf.meta["kernels_without_launch"] == 1
    roles = dict(zip(tf.ops["name"], tf.ops["role"]))
    assert roles["cudaStreamSynchronize"] == "sync" and roles["cudaLaunchKernel"] == "runtime"
    assert roles["dot.1"] == "annotation" and roles["matmul"] == "op"
    assert ops.loc[tf.ops.loc[tf.ops["name"] == "dot.1", "uid"].iloc[0], "device"] == "dev:/device:GPU:0"
    assert json.loads(tf.meta["file_keys"]) == {"producer": "test"}


def pd_isna(value) -> bool:
    return value is None or value != value


MEMORY_COUNTER = [
    {"ph": "M", "name": "process_name", "pid": 2, "args": {"name": "GPU 0"}},
    {"ph": "X", "name": "step", "pid": 1, "tid": 1, "ts": 1000, "dur": 50},
    # live bytes 100, 300, 250, 50, 400 at 0, 10, 20, 30, 40 us after the span's start
    *(
        {"ph": "C", "name": "GPU memory", "pid": 2, "ts": 1000 + t, "args": {"bytes_in_use": v, "note": "x"}}
        for t, v in ((0, 100), (10, 300), (20, 250), (30, 50), (40, 400))
    ),
]


def test_memory_counters_become_an_allocator_timeline(tmp_path):
    """Worked by hand: a rise allocates the difference; a fall frees the
    most recent allocations first (splitting the last)."""
    tf = chrome.parse(write(tmp_path, "mem.json", MEMORY_COUNTER))
    assert tf.allocators[["name", "device"]].values.tolist() == [["GPU memory", "dev:/device:GPU:0"]]
    never = float("inf")  # not freed within the trace
    got = sorted(
        (int(b), a, never if f is None or f != f else f)
        for b, a, f in zip(tf.allocations["bytes"], tf.allocations["alloc_us"], tf.allocations["free_us"])
    )
    assert got == sorted([(50, 10.0, 20.0), (150, 10.0, 30.0), (50, 0.0, 30.0), (50, 0.0, never), (350, 40.0, never)])
    assert json.loads(tf.meta["skipped_events"]) == {"C values not memory": 5}  # the "note" series


def test_memory_counters_peak_on_both_engines(graph, tmp_path):
    pipeline.ingest(graph, [write(tmp_path, "mem.json", MEMORY_COUNTER)], "chrome-mem")
    rows = graph.run(
        "MATCH (a:Allocator {trace: $trace}) RETURN a.name, a.peak_bytes, a.peak_us",
        {"trace": "chrome-mem"},
        trace="chrome-mem",
    ).rows
    assert rows == [["GPU memory", 400, 40.0]]
    timeline = run_analysis(graph, "memory-timeline", "chrome-mem", {})
    assert timeline.available


@pytest.mark.parametrize(
    "text,closed",
    [
        ('[{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 2},\n', "]"),
        ('[{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 2}', "]"),
        ('{"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 2}, {}', "]}"),
    ],
    ids=["array-trailing-comma", "array-no-bracket", "object-unterminated"],
)
def test_unterminated_files_as_writers_leave_them(tmp_path, text, closed):
    tf = chrome.parse(write(tmp_path, "open.json", text))
    assert list(tf.ops["name"]) == ["a"] and tf.ops["dur_us"].tolist() == [2.0]
    assert tf.meta["closed_unterminated"] == closed


def test_microsecond_fractions_are_exact(tmp_path):
    p = write(
        tmp_path,
        "ns.json",
        '[{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1712195495519689.047, "dur": 0.001},'
        '{"ph": "X", "name": "b", "pid": 1, "tid": 1, "ts": 1712195495519689.048, "dur": 1.5}]',
    )
    tf = chrome.parse(p)
    assert tf.ops["start_us"].tolist() == [0.0, 0.001]
    assert tf.ops["parent"].isna().all()  # a ends at .048 exactly: b is not inside it


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "content,message",
    [
        ('[{"ph": "X", "name": "a", "ts": 1, "dur": 2}, {"ph": "X", "na', "truncated JSON"),
        ('[{"name": "a", "ts": 1}]', "(traceEvents[0]): event has no ph (phase)"),
        ('[{"ph": "X", "name": "a", "ts": 1, "dur": -2}]', "(traceEvents[0]): negative dur -2"),
        ('[{"ph": "X", "name": "a", "ts": "1", "dur": 2}]', "(traceEvents[0]): event has a non-numeric ts"),
        ('[{"ph": "X", "name": "a", "ts": 1}]', "(traceEvents[0]): event has no dur"),
        ('[{"ph": "X", "name": "a", "ts": 1, "dur": 1}, 7]', "(traceEvents[1]): event is not a JSON object"),
        ('{"traceEvents": {"ph": "X"}}', "traceEvents is a JSON object, not a list"),
        ('{"displayTimeUnit": "ns"}', "a JSON object without a traceEvents list"),
        ('[{"ph": "X", "ts": 1, "dur": 1} xx]', "(line 1 column 33): not JSON: JSON is malformed"),
        ('[{"ph": "X", "ts": 1e308, "dur": 1}]', "(traceEvents[0]): ts 1E+308 is out of range"),
        ('[{"ph": "X", "ts": 1, "dur": 123456789012345678901234567890}]', "(traceEvents[0]): dur 1234"),
        ('{"traceEvents": [{"ph": "X", "args": ' + "[" * 100_000 + "]" * 100_000 + "}]}", ": JSON nested too deeply"),
        ("", "empty file"),
    ],
)
def test_bad_files_are_one_line_naming_the_file(tmp_path, content, message):
    p = write(tmp_path, "bad.json", content)
    with pytest.raises(InputError) as e:
        chrome.parse(p)
    assert str(e.value).startswith(str(p)) and message in str(e.value), str(e.value)
    assert "\n" not in str(e.value)


# ---------------------------------------------------------------- on the database


@pytest.mark.parametrize("path", [JAX_VIEWER, PADDLE], ids=["jax", "paddle"])
def test_ingest_and_analyses_on_both_engines(graph, path):
    name = "chrome-" + path.name.split(".")[0]
    pipeline.ingest(graph, [path], name)
    xs = spans(path)
    rows = graph.run("MATCH (o:Op {trace: $trace}) RETURN count(o), sum(o.dur_us)", {"trace": name}, trace=name).rows
    assert rows[0][0] == len(xs)
    assert rows[0][1] == pytest.approx(sum(float(e["dur"]) for e in xs), abs=1e-3)
    top = run_analysis(graph, "top-ops", name, {"n": "3"})
    assert top.available and len(top.rows) == 3
    breakdown = run_analysis(graph, "op-type-breakdown", name, {})
    assert breakdown.available and breakdown.rows
    assert run_analysis(graph, "observed-critical-path", name, {}).available
    for analysis in ("stream-utilization", "idle-gaps"):
        res = run_analysis(graph, analysis, name, {})
        assert not res.available and "no device stream" in (res.note or ""), res.note


def test_a_gpu_chrome_trace_answers_stream_analyses_on_both_engines(graph):
    pipeline.ingest(graph, [A100], "chrome-a100", fmt="chrome-trace")
    ev = events(A100)
    device = [e for e in ev if e.get("ph") == "X" and e.get("cat") in DEVICE_CATEGORIES]
    assert graph.run(
        "MATCH (k:Kernel {trace: $trace}) RETURN count(k)", {"trace": "chrome-a100"}, trace="chrome-a100"
    ).rows[0][0] == len(device)
    launched = graph.run(
        "MATCH (:Op {trace: $trace})-[:ISSUED]->(k:Kernel) RETURN count(k)",
        {"trace": "chrome-a100"},
        trace="chrome-a100",
    ).rows[0][0]
    runtime = {e["args"]["correlation"] for e in ev if e.get("cat") == "cuda_runtime"}
    assert launched == sum(1 for e in device if e["args"].get("correlation") in runtime)
    util = run_analysis(graph, "stream-utilization", "chrome-a100", {"min_gap_us": "0"})
    assert util.available
    by_stream = {r["stream"]: r for r in util.records()}
    for stream in {e["args"]["stream"] for e in device}:
        mine = sorted(
            (float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in device if e["args"]["stream"] == stream
        )
        busy, end = 0.0, float("-inf")
        for a, b in mine:
            busy += max(0.0, b - max(a, end))
            end = max(end, b)
        assert by_stream[f"stream:{stream}"]["busy_us"] == pytest.approx(busy, rel=1e-6, abs=1e-3)
    assert run_analysis(graph, "idle-gaps", "chrome-a100", {}).available


def test_a_bad_chrome_file_changes_nothing(graph, db_uri, tmp_path):
    before = ready_traces(graph)
    bad = write(tmp_path, "cut.json", '{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 2}, {"ph": "X", "n')
    proc = cli_here("ingest", str(bad), "--trace", "cut", db=db_uri)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and "truncated JSON" in lines[0], proc.stderr
    assert ready_traces(graph) == before


def test_http_upload_detects_each_producer(graph, db_uri):
    from fastapi.testclient import TestClient

    from tracegraph.api.app import create_app
    from tracegraph.api.settings import Settings

    with TestClient(create_app(db_uri, Settings(api_key=None))) as client:
        for path, framework in ((PADDLE, "paddle"), (JAX_PERFETTO, "jax")):
            name = f"up-{framework}"
            r = client.post("/traces", data={"trace": name}, files=[("files", (path.name, path.read_bytes()))])
            assert r.status_code == 201, r.text
            assert r.json()["framework"] == framework
            top = client.get(f"/traces/{name}/queries/top-ops?n=2")
            assert top.status_code == 200 and len(top.json()["rows"]) == 2
        r = client.post(
            "/traces", data={"trace": "up-bad"}, files=[("files", ("bad.json", b'{"traceEvents": [{"ph": "X", "ts'))]
        )
        assert r.status_code == 400 and "bad.json" in r.json()["detail"] and "truncated JSON" in r.json()["detail"]
        assert client.get("/traces/up-bad").status_code == 404
