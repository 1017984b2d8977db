"""rocprofv3 JSON captures (``rocprofv3-json``, issue 47, slice 4).

A real capture (rocprofv3's ``--kernel-trace`` of a PyTorch training run on
an MI350 node; from TraceLens's tests, tests/data/rocprof/NOTICE), and
captures made here in the same schema: the real file's own string tables,
agents and kernel symbols, with host calls, ROCTx ranges, copies and
allocations written by hand (the real file holds kernel dispatches only).
Every expected number is worked out from the JSON here with the standard
library, never by tracegraph.
"""

from __future__ import annotations

import copy
import gzip
import json
import sqlite3
from pathlib import Path

import pytest
from conftest import cli_here, ready_traces
from test_analyses import _union_length

from tracegraph.errors import InputError
from tracegraph.ingest import pipeline
from tracegraph.ingest.formats.rocprof import rocpd
from tracegraph.ingest.formats.rocprof import trace as rocprof
from tracegraph.queries.run import run_analysis

PACKED = Path(__file__).parent / "data" / "rocprof" / "rocprof_908_results.json.gz"


@pytest.fixture(scope="module")
def real() -> dict:
    return json.loads(gzip.decompress(PACKED.read_bytes()))


def _process(doc: dict) -> dict:
    return doc["rocprofiler-sdk-tool"][0]


def test_detected_by_content_plain_and_gzipped(real, tmp_path):
    plain = tmp_path / "908_results.json"
    plain.write_text(json.dumps(real))
    assert pipeline.detect(PACKED) == "rocprofv3-json"
    assert pipeline.detect(plain) == "rocprofv3-json"


def test_kernels_equal_the_file(real):
    p = _process(real)
    dispatches = p["buffer_records"]["kernel_dispatch"]
    symbols = {s["kernel_id"]: s["formatted_kernel_name"] for s in p["kernel_symbols"]}
    tf = rocprof.parse(PACKED)
    assert tf.framework == "rocm"
    assert len(tf.kernels) == len(dispatches) == 43915
    origin = min(d["start_timestamp"] for d in dispatches)
    # names and durations, kernel by kernel (file order)
    assert list(tf.kernels["name"]) == [symbols[d["dispatch_info"]["kernel_id"]] for d in dispatches]
    assert list(tf.kernels["dur_us"]) == [(d["end_timestamp"] - d["start_timestamp"]) / 1000 for d in dispatches]
    assert tf.kernels["start_us"].iloc[0] == (dispatches[0]["start_timestamp"] - origin) / 1000
    # streams: one per HIP stream of the one GPU
    streams = {d["stream_id"]["handle"] for d in dispatches}
    assert sorted(tf.streams["name"]) == sorted(f"stream:{s}" for s in streams)
    assert set(tf.streams["device"]) == {"dev:gpu:0"}
    # RCCL's kernels are communication
    comm = sum(1 for d in dispatches if symbols[d["dispatch_info"]["kernel_id"]].startswith("ncclDevKernel"))
    assert (tf.kernels["kind"] == "communication").sum() == comm == 1310
    # no HIP calls were traced: every kernel belongs to the stand-in op
    assert tf.meta["kernels_without_launch"] == 43915
    assert list(tf.ops["name"]) == ["[launched outside the trace]"] and tf.kernels["launch"].isna().all()
    assert tf.meta["hostname"] == "smci350-zts-gtu-c6-25"
    assert len(json.loads(tf.meta["gpus"])) == 8


def test_analyses_on_both_engines(graph, real):
    pipeline.ingest(graph, [PACKED], "rocprof-real")
    p = _process(real)
    dispatches = p["buffer_records"]["kernel_dispatch"]
    symbols = {s["kernel_id"]: s["formatted_kernel_name"] for s in p["kernel_symbols"]}
    spans = [(d["start_timestamp"], d["end_timestamp"]) for d in dispatches]
    comm = [
        (d["start_timestamp"], d["end_timestamp"])
        for d in dispatches
        if symbols[d["dispatch_info"]["kernel_id"]].startswith("ncclDevKernel")
    ]
    compute = [s for s, d in zip(spans, dispatches) if not symbols[d["dispatch_info"]["kernel_id"]].startswith("nccl")]
    (row,) = run_analysis(graph, "device-time-breakdown", "rocprof-real", {}).records()
    window = max(e for _, e in spans) - min(s for s, _ in spans)
    assert row["window_us"] == pytest.approx(window / 1000, abs=1e-3)
    assert row["busy_us"] == pytest.approx(_union_length(spans) / 1000, abs=1e-3)
    assert row["communication_us"] == pytest.approx(_union_length(comm) / 1000, abs=1e-3)
    assert row["computation_us"] == pytest.approx(_union_length(compute) / 1000, abs=1e-3)
    # exposed communication: communication time with no compute kernel at the same time
    exposed = _union_length(comm) - (_union_length(comm) + _union_length(compute) - _union_length(comm + compute))
    assert row["exposed_communication_us"] == pytest.approx(exposed / 1000, abs=1e-3)
    # the busiest stream, by the union of its kernels
    per_stream: dict[int, list[tuple[int, int]]] = {}
    for d in dispatches:
        per_stream.setdefault(d["stream_id"]["handle"], []).append((d["start_timestamp"], d["end_timestamp"]))
    rows = run_analysis(graph, "stream-utilization", "rocprof-real", {"min_gap_us": "0"}).records()
    top = max(per_stream, key=lambda s: _union_length(per_stream[s]))
    by_name = {r["stream"]: r for r in rows}
    assert by_name[f"stream:{top}"]["busy_us"] == pytest.approx(_union_length(per_stream[top]) / 1000, abs=1e-3)
    assert by_name[f"stream:{top}"]["kernels"] == len(per_stream[top])
    for name in ("top-ops", "op-type-breakdown", "idle-gaps", "observed-critical-path"):
        res = run_analysis(graph, name, "rocprof-real", {})
        assert res.available and res.rows, (name, res.note)
    # no ROCTx range, no step: said in one line
    steps = run_analysis(graph, "step-breakdown", "rocprof-real", {})
    assert not steps.available and steps.note.startswith("not available: the trace has no steps")
    assert "\n" not in steps.note


# ------------------------------------------------------------- a capture with everything


def _ids(p: dict, kind: str, operation: str) -> tuple[int, int]:
    """(kind, operation) numbers of the file's own string tables."""
    kinds = [k["kind"] for k in p["strings"]["buffer_records"]]
    k = kinds.index(kind)
    return k, p["strings"]["buffer_records"][k]["operations"].index(operation)


T0 = 63_900_000_000_000  # ns, the profiler's clock
GPU = 37946  # agent handle of GPU 0 in the real file
CPU = 37944


def _record(p: dict, kind: str, operation: str, corr: int, start: int, end: int, tid: int = 7001) -> dict:
    k, o = _ids(p, kind, operation)
    return {
        "size": 40,
        "kind": k,
        "operation": o,
        "thread_id": tid,
        "correlation_id": {"internal": corr, "external": 0},
        "start_timestamp": T0 + start,
        "end_timestamp": T0 + end,
    }


def _dispatch(p: dict, kernel_id: int, corr: int, start: int, end: int, stream: int) -> dict:
    k, o = _ids(p, "KERNEL_DISPATCH", "KERNEL_DISPATCH_COMPLETE")
    return {
        "size": 184,
        "kind": k,
        "operation": o,
        "thread_id": 7001,
        "correlation_id": {"internal": corr, "external": 0},
        "start_timestamp": T0 + start,
        "end_timestamp": T0 + end,
        "dispatch_info": {
            "agent_id": {"handle": GPU},
            "queue_id": {"handle": 16},
            "kernel_id": kernel_id,
            "dispatch_id": corr,
            "workgroup_size": {"x": 256, "y": 1, "z": 1},
            "grid_size": {"x": 4096, "y": 1, "z": 1},
        },
        "stream_id": {"handle": stream},
    }


def made(real: dict, pid: int = 4242) -> dict:
    """Two ROCTx ranges "step 1" and "step 2" on the main thread; in them,
    kernel launches (ids 2001-2003), an RCCL all-reduce (2004), an async
    copy (2005), a malloc and a free (2006, 2007), a stream synchronize
    (2008); one kernel whose call is not in the file (2099)."""
    p = copy.deepcopy(_process(real))
    p["metadata"]["pid"] = pid
    symbols = {s["formatted_kernel_name"]: s["kernel_id"] for s in p["kernel_symbols"]}
    gemm = next(i for n, i in symbols.items() if "vectorized_elementwise_kernel" in n)
    nccl = symbols["ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)"]
    fill = symbols["__amd_rocclr_fillBufferAligned"]
    hip, rccl, roctx = "HIP_RUNTIME_API", "RCCL_API", "MARKER_CORE_API"
    p["buffer_records"] = {
        "kernel_dispatch": [
            _dispatch(p, gemm, 2001, 20_000, 50_000, 1),
            _dispatch(p, gemm, 2002, 50_000, 90_000, 1),
            _dispatch(p, fill, 2003, 130_000, 140_000, 2),
            _dispatch(p, nccl, 2004, 140_000, 200_000, 3),
            _dispatch(p, gemm, 2099, 300_000, 310_000, 1),
        ],
        "hip_api": [
            _record(p, hip, "hipLaunchKernel", 2001, 11_000, 15_000),
            _record(p, hip, "hipLaunchKernel", 2002, 16_000, 19_000),
            _record(p, hip, "hipMemcpyAsync", 2005, 20_000, 24_000),
            _record(p, hip, "hipMalloc", 2006, 25_000, 29_000),
            _record(p, hip, "hipExtLaunchKernel", 2003, 111_000, 114_000),
            _record(p, hip, "hipFree", 2007, 180_000, 185_000),
            _record(p, hip, "hipStreamSynchronize", 2008, 186_000, 200_500),
        ],
        "hsa_api": [],
        "rccl_api": [_record(p, rccl, "ncclAllReduce", 2004, 115_000, 120_000)],
        "marker_api": [
            _record(p, roctx, "roctxRangePushA", 3001, 10_000, 100_000),
            _record(p, roctx, "roctxRangePushA", 3002, 110_000, 201_000),
            _record(p, roctx, "roctxMarkA", 3003, 105_000, 105_000),
        ],
        "memory_copy": [
            {
                **_record(p, "MEMORY_COPY", "MEMORY_COPY_HOST_TO_DEVICE", 2005, 60_000, 70_000),
                "dst_agent_id": {"handle": GPU},
                "src_agent_id": {"handle": CPU},
                "bytes": 1 << 20,
                "stream_id": {"handle": 1},
            }
        ],
        "memory_allocation": [
            {
                **_record(p, "MEMORY_ALLOCATION", "MEMORY_ALLOCATION_ALLOCATE", 2006, 26_000, 28_000),
                "agent_id": {"handle": GPU},
                "address": "0x00007f0000000000",  # as rocprofv3 writes it
                "allocation_size": 64 << 20,
            },
            {
                **_record(p, "MEMORY_ALLOCATION", "MEMORY_ALLOCATION_FREE", 2007, 181_000, 182_000),
                "agent_id": {"handle": 0},
                "address": "0x00007f0000000000",
                "allocation_size": 0,
            },
        ],
        "scratch_memory": [{"size": 8}, {"size": 8}],
    }
    p["strings"]["marker_api"] = [{"key": 3001, "value": "step 1"}, {"key": 3002, "value": "step 2"}]
    p["strings"]["marker_api"].append({"key": 3003, "value": "checkpoint"})
    return {"rocprofiler-sdk-tool": [p]}


def write(tmp_path: Path, doc: dict, name: str = "made_results.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def test_calls_markers_launches_copies_and_memory(real, tmp_path):
    tf = rocprof.parse(write(tmp_path, made(real)))
    ops = tf.ops.set_index("uid")
    by_name = {n: ops[ops["name"] == n] for n in ops["name"].unique()}
    # markers: annotations named by their messages
    assert sorted(ops[ops["role"] == "annotation"]["name"]) == ["checkpoint", "step 1", "step 2"]
    assert set(ops[ops["role"] == "annotation"]["category"]) == {"roctx"}
    assert by_name["step 1"]["dur_us"].item() == 90.0 and by_name["checkpoint"]["dur_us"].item() == 0.0
    # nesting on the thread: every call in its range
    for call, step in (("hipLaunchKernel", "step 1"), ("hipMalloc", "step 1"), ("ncclAllReduce", "step 2")):
        for parent in by_name[call]["parent"]:
            assert ops.loc[parent, "name"] == step
    assert by_name["hipStreamSynchronize"]["role"].item() == "sync"
    assert by_name["hipLaunchKernel"]["category"].iloc[0] == "hip_runtime"
    assert by_name["ncclAllReduce"]["category"].item() == "rccl_api"
    assert by_name["hipLaunchKernel"]["thread"].iloc[0] == "4242:7001"
    # launches by correlation id
    launch_name = {u: ops.loc[u, "name"] for u in ops.index}
    kernels = tf.kernels.sort_values("start_us")
    got = [(k["kind"], launch_name.get(k["launch"])) for _, k in kernels.iterrows()]
    assert got == [
        ("compute", "hipLaunchKernel"),
        ("compute", "hipLaunchKernel"),
        ("memcpy", "hipMemcpyAsync"),
        ("compute", "hipExtLaunchKernel"),
        ("communication", "ncclAllReduce"),
        ("compute", None),
    ]
    assert tf.meta["kernels_without_launch"] == 1
    memcpy = kernels[kernels["kind"] == "memcpy"].iloc[0]
    assert (memcpy["name"], memcpy["bytes"], memcpy["direction"]) == ("Memcpy HtoD", 1 << 20, "HtoD")
    # times: microseconds since the earliest record (the first range, at T0 + 10 us)
    assert by_name["step 1"]["start_us"].item() == 0.0
    assert kernels.iloc[0]["start_us"] == 10.0
    # the allocation, freed by the free of its address, made by hipMalloc
    (a,) = tf.allocations.to_dict("records")
    assert (a["bytes"], a["alloc_us"], a["free_us"]) == (64 << 20, 18.0, 172.0)
    assert launch_name[a["op"]] == "hipMalloc" and a["address"] == 0x7F00_0000_0000
    assert tf.allocators.set_index("uid").loc[a["allocator"], "name"] == "gpu:0"
    assert json.loads(tf.meta["not_read"]) == {"scratch_memory": 2}


def test_ranges_name_steps_and_memory_answers(graph, db_uri, real, tmp_path):
    path = write(tmp_path, made(real))
    proc = cli_here("ingest", str(path), "--trace", "rocprof-steps", "--step-marker", r"^step (\d+)$", db=db_uri)
    assert proc.returncode == 0, proc.stderr
    rows = run_analysis(graph, "step-breakdown", "rocprof-steps", {}).records()
    assert [(r["step"], r["kernels"]) for r in rows] == [(1, 3), (2, 2)]
    # step 1's device window: its kernels and copy, 20 us to 90 us after T0
    assert rows[0]["window_us"] == pytest.approx(70.0)
    (peak,) = run_analysis(graph, "peak-memory", "rocprof-steps", {}).records()
    assert (peak["allocator"], peak["peak_bytes"], peak["op"]) == ("gpu:0", 64 << 20, "hipMalloc")
    assert (peak["alloc_us"], peak["free_us"]) == (18.0, 172.0)


def test_several_processes_are_the_ranks_of_a_job(real, tmp_path):
    one, two = made(real, pid=11), made(real, pid=12)
    doc = {"rocprofiler-sdk-tool": one["rocprofiler-sdk-tool"] + two["rocprofiler-sdk-tool"]}
    tf = rocprof.parse(write(tmp_path, doc))
    assert sorted(tf.devices["name"]) == ["rank0/cpu", "rank0/gpu:0", "rank1/cpu", "rank1/gpu:0"]
    assert tf.ops["rank"].value_counts().to_dict() == {0: 12, 1: 12}
    op_rank = dict(zip(tf.ops["uid"], tf.ops["rank"]))
    stream_device = dict(zip(tf.streams["uid"], tf.streams["device"]))
    for op, stream in zip(tf.kernels["op"], tf.kernels["stream"]):
        assert stream_device[stream].startswith(f"dev:rank{op_rank[op]}/")


def _bad(real: dict, edit) -> dict:
    doc = made(real)
    edit(doc["rocprofiler-sdk-tool"][0])
    return doc


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda real: {"rocprofiler-sdk-tool": []}, '"rocprofiler-sdk-tool" list is empty'),
        (
            lambda real: _bad(real, lambda p: p["buffer_records"]["hip_api"][0].update(start_timestamp="soon")),
            "buffer_records.hip_api[0].start_timestamp",
        ),
        (
            lambda real: _bad(real, lambda p: p["buffer_records"]["kernel_dispatch"][1].update(end_timestamp=T0)),
            "buffer_records.kernel_dispatch[1]: ends (63900000000000) before it starts (63900000050000)",
        ),
        (
            lambda real: _bad(real, lambda p: p["buffer_records"].update(kernel_dispatch={"a": 1})),
            "Expected `array`, got `object`",
        ),
        (
            lambda real: _bad(real, lambda p: p.update(buffer_records={})),
            "without records",
        ),
    ],
    ids=["no-process", "text-time", "end-before-start", "not-a-list", "no-records"],
)
def test_drifted_or_broken_captures_are_one_line(real, tmp_path, make, message):
    path = write(tmp_path, make(real))
    with pytest.raises(InputError) as e:
        rocprof.parse(path)
    assert str(e.value).startswith(str(path)) and message in str(e.value), str(e.value)
    assert "\n" not in str(e.value)


def test_bad_files_leave_the_database_as_it_was(graph, db_uri, real, tmp_path):
    before = ready_traces(graph)
    text = json.dumps(made(real))
    cut = tmp_path / "cut_results.json"
    cut.write_text(text[: len(text) // 2])
    other = tmp_path / "other.json"
    other.write_text('{"rocprofiler-sdk-tool": 7}')
    newer = rocpd_of(made(real), tmp_path / "v4.db", schema_version="4", with_start=False)
    cut_db = tmp_path / "cut.db"
    cut_db.write_bytes(rocpd_of(made(real), tmp_path / "whole.db").read_bytes()[:8192])
    for bad, what, fmt in (
        (cut, "truncated JSON", "rocprofv3-json"),
        (other, "Expected `array`, got `int`", "rocprofv3-json"),
        (newer, "rocpd schema version 4", "rocpd-sqlite"),
        (cut_db, "SQLite", "rocpd-sqlite"),
    ):
        proc = cli_here("ingest", str(bad), "--trace", "rocprof-bad", "--format", fmt, db=db_uri)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 1 and len(lines) == 1 and str(bad) in lines[0] and what in lines[0], proc.stderr
    assert ready_traces(graph) == before


def test_http_upload(graph, db_uri):
    from fastapi.testclient import TestClient

    from tracegraph.api.app import create_app
    from tracegraph.api.settings import Settings

    with TestClient(create_app(db_uri, Settings(api_key=None))) as client:
        r = client.post("/traces", data={"trace": "rocprof-up"}, files=[("files", (PACKED.name, PACKED.read_bytes()))])
        assert r.status_code == 201, r.text
        assert r.json()["framework"] == "rocm"
        rows = client.get("/traces/rocprof-up/queries/device-time-breakdown").json()["rows"]
        assert len(rows) == 1


# ------------------------------------------------------------- the same captures as rocpd databases

SUFFIX = "_0f1e2d3c_0000_4000_8000_00000000beef"  # a capture's uuid, as rocpd names its tables


def rocpd_of(doc: dict, path: Path, schema_version: str = "3", with_start: bool = True) -> Path:
    """A rocpd (schema 3) database holding what the rocprofv3 JSON ``doc``
    holds: the records of its processes, named by the same strings."""
    s = SUFFIX
    db = sqlite3.connect(path)
    tables = {
        "rocpd_metadata": "id INTEGER PRIMARY KEY, tag TEXT, value TEXT",
        "rocpd_string": "id INTEGER PRIMARY KEY, guid TEXT, string TEXT",
        "rocpd_info_process": "id INTEGER PRIMARY KEY, guid TEXT, nid INTEGER, ppid INTEGER, pid INTEGER, command TEXT",
        "rocpd_info_thread": "id INTEGER PRIMARY KEY, guid TEXT, nid INTEGER, pid INTEGER, tid INTEGER",
        "rocpd_info_agent": "id INTEGER PRIMARY KEY, guid TEXT, nid INTEGER, pid INTEGER, type TEXT, "
        "absolute_index INTEGER, logical_index INTEGER, type_index INTEGER, name TEXT, product_name TEXT",
        "rocpd_info_queue": "id INTEGER PRIMARY KEY, guid TEXT, nid INTEGER, pid INTEGER, name TEXT",
        "rocpd_info_stream": "id INTEGER PRIMARY KEY, guid TEXT, nid INTEGER, pid INTEGER, name TEXT",
        "rocpd_info_kernel_symbol": "id INTEGER PRIMARY KEY, guid TEXT, nid INTEGER, pid INTEGER, "
        "code_object_id INTEGER, kernel_name TEXT, display_name TEXT",
        "rocpd_event": "id INTEGER PRIMARY KEY, guid TEXT, category_id INTEGER, correlation_id INTEGER",
        "rocpd_region": "id INTEGER PRIMARY KEY, guid TEXT, nid INTEGER, pid INTEGER, tid INTEGER, "
        + ("start BIGINT, end BIGINT, " if with_start else "start_id INTEGER, end_id INTEGER, ")
        + "name_id INTEGER, event_id INTEGER",
        "rocpd_kernel_dispatch": "id INTEGER PRIMARY KEY, guid TEXT, nid INTEGER, pid INTEGER, tid INTEGER, "
        "agent_id INTEGER, kernel_id INTEGER, dispatch_id INTEGER, queue_id INTEGER, stream_id INTEGER, "
        "start BIGINT, end BIGINT, workgroup_size_x INTEGER, grid_size_x INTEGER, event_id INTEGER",
        "rocpd_memory_copy": "id INTEGER PRIMARY KEY, guid TEXT, nid INTEGER, pid INTEGER, tid INTEGER, "
        "start BIGINT, end BIGINT, name_id INTEGER, dst_agent_id INTEGER, src_agent_id INTEGER, size INTEGER, "
        "queue_id INTEGER, stream_id INTEGER, event_id INTEGER",
        "rocpd_memory_allocate": "id INTEGER PRIMARY KEY, guid TEXT, nid INTEGER, pid INTEGER, tid INTEGER, "
        "agent_id INTEGER, type TEXT, level TEXT, start BIGINT, end BIGINT, address INTEGER, size INTEGER, "
        "event_id INTEGER",
    }
    for name, cols in tables.items():
        db.execute(f'CREATE TABLE "{name}{s}" ({cols})')
    db.execute(f'INSERT INTO "rocpd_metadata{s}" (tag, value) VALUES (?, ?)', ("schema_version", schema_version))
    strings: dict[str, int] = {}

    def string(text: str) -> int:
        if text not in strings:
            strings[text] = len(strings) + 1
            db.execute(f'INSERT INTO "rocpd_string{s}" (id, string) VALUES (?, ?)', (strings[text], text))
        return strings[text]

    def insert(table: str, **row) -> int:
        cur = db.execute(
            f'INSERT INTO "{table}{s}" ({", ".join(row)}) VALUES ({", ".join("?" * len(row))})', tuple(row.values())
        )
        return int(cur.lastrowid)

    for p in doc["rocprofiler-sdk-tool"]:
        proc = insert("rocpd_info_process", pid=p["metadata"]["pid"], command=" ".join(p["metadata"]["command"]))
        agents = {
            a["id"]["handle"]: insert(
                "rocpd_info_agent",
                pid=proc,
                type="GPU" if a["type"] == 2 else "CPU",
                type_index=a["logical_node_type_id"],
                name=a["name"],
                product_name=a["product_name"],
            )
            for a in p["agents"]
        }
        threads: dict[int, int] = {}
        streams: dict[int, int] = {}
        symbols: dict[int, int] = {}
        names = {s_["kernel_id"]: s_["formatted_kernel_name"] for s_ in p["kernel_symbols"]}
        kinds = p["strings"]["buffer_records"]
        messages = {m["key"]: m["value"] for m in p["strings"]["marker_api"]}

        def thread(tid: int, threads: dict = threads, proc: int = proc) -> int:
            if tid not in threads:
                threads[tid] = insert("rocpd_info_thread", pid=proc, tid=tid)
            return threads[tid]

        def stream(handle: int, streams: dict = streams, proc: int = proc) -> int:
            if handle not in streams:
                streams[handle] = insert("rocpd_info_stream", pid=proc, name=str(handle))
            return streams[handle]

        def event(r: dict, kinds: list = kinds) -> int:
            return insert(
                "rocpd_event",
                category_id=string(kinds[r["kind"]]["kind"]),
                correlation_id=r["correlation_id"]["internal"],
            )

        buffers = p["buffer_records"]
        for table in ("hip_api", "hsa_api", "rccl_api", "marker_api"):
            for r in buffers.get(table, []):
                op = kinds[r["kind"]]["operations"][r["operation"]]
                name = messages.get(r["correlation_id"]["internal"], op) if table == "marker_api" else op
                insert(
                    "rocpd_region",
                    pid=proc,
                    tid=thread(r["thread_id"]),
                    **({"start": r["start_timestamp"], "end": r["end_timestamp"]} if with_start else {}),
                    name_id=string(name),
                    event_id=event(r),
                )
        for d in buffers.get("kernel_dispatch", []):
            k = d["dispatch_info"]["kernel_id"]
            if k not in symbols:
                symbols[k] = insert(
                    "rocpd_info_kernel_symbol", pid=proc, kernel_name=names[k] + ".kd", display_name=names[k]
                )
            insert(
                "rocpd_kernel_dispatch",
                pid=proc,
                tid=thread(d["thread_id"]),
                agent_id=agents[d["dispatch_info"]["agent_id"]["handle"]],
                kernel_id=symbols[k],
                queue_id=d["dispatch_info"]["queue_id"]["handle"],
                stream_id=stream(d["stream_id"]["handle"]),
                start=d["start_timestamp"],
                end=d["end_timestamp"],
                event_id=event(d),
            )
        for c in buffers.get("memory_copy", []):
            insert(
                "rocpd_memory_copy",
                pid=proc,
                tid=thread(c["thread_id"]),
                start=c["start_timestamp"],
                end=c["end_timestamp"],
                name_id=string(kinds[c["kind"]]["operations"][c["operation"]]),
                dst_agent_id=agents[c["dst_agent_id"]["handle"]],
                src_agent_id=agents[c["src_agent_id"]["handle"]],
                size=c["bytes"],
                stream_id=stream(c["stream_id"]["handle"]),
                event_id=event(c),
            )
        for m in buffers.get("memory_allocation", []):
            op = kinds[m["kind"]]["operations"][m["operation"]]
            insert(
                "rocpd_memory_allocate",
                pid=proc,
                tid=thread(m["thread_id"]),
                agent_id=agents.get(m["agent_id"]["handle"]),
                type="ALLOC" if op.endswith("_ALLOCATE") else "FREE",
                level="REAL",
                start=m["start_timestamp"],
                end=m["end_timestamp"],
                address=int(m["address"], 16),
                size=m["allocation_size"],
                event_id=event(m),
            )
    db.commit()
    db.close()
    return path


def _named(tf) -> dict:
    """The frames with uids replaced by what they name (two readers number alike
    things apart), missing values as None."""
    op_name = dict(zip(tf.ops["uid"], tf.ops["name"]))
    stream_name = dict(zip(tf.streams["uid"], tf.streams["name"]))

    def rows(df, columns, **named) -> list[tuple]:
        out = []
        for r in df.to_dict("records"):
            values = [named[c].get(r[c]) if c in named else r[c] for c in columns]
            out.append(tuple(None if v is None or (isinstance(v, float) and v != v) else v for v in values))
        return sorted(out, key=repr)

    return {
        "ops": rows(tf.ops, ("name", "start_us", "end_us", "role", "category", "thread", "parent"), parent=op_name),
        "kernels": rows(
            tf.kernels,
            ("name", "start_us", "end_us", "kind", "stream", "op", "launch", "bytes", "direction"),
            stream=stream_name,
            op=op_name,
            launch=op_name,
        ),
        "allocations": rows(tf.allocations, ("bytes", "alloc_us", "free_us", "address", "op"), op=op_name),
        "devices": sorted(tf.devices["name"]),
    }


def test_a_rocpd_database_reads_as_its_json(real, tmp_path):
    doc = made(real)
    db = rocpd_of(doc, tmp_path / "made_results.db")
    assert pipeline.detect(db) == "rocpd-sqlite"
    from_db = rocpd.parse(db)
    assert from_db.framework == "rocm"
    assert _named(from_db) == _named(rocprof.parse(write(tmp_path, doc)))
    assert from_db.meta["kernels_without_launch"] == 1


def test_the_real_capture_as_rocpd_reads_as_its_json(real, tmp_path):
    db = rocpd_of(real, tmp_path / "908_results.db")
    gz = tmp_path / "908_results.db.gz"
    gz.write_bytes(gzip.compress(db.read_bytes()))
    expected = _named(rocprof.parse(PACKED))
    assert _named(rocpd.parse(db)) == expected
    assert _named(rocpd.parse(gz)) == expected


def test_rocpd_ingested_and_answered_on_both_engines(graph, db_uri, real, tmp_path):
    db = rocpd_of(made(real), tmp_path / "made_results.db")
    proc = cli_here("ingest", str(db), "--trace", "rocpd-steps", "--step-marker", r"^step (\d+)$", db=db_uri)
    assert proc.returncode == 0, proc.stderr
    rows = run_analysis(graph, "step-breakdown", "rocpd-steps", {}).records()
    assert [(r["step"], r["kernels"]) for r in rows] == [(1, 3), (2, 2)]
    (peak,) = run_analysis(graph, "peak-memory", "rocpd-steps", {}).records()
    assert (peak["allocator"], peak["peak_bytes"], peak["op"]) == ("gpu:0", 64 << 20, "hipMalloc")


def test_rocpd_of_another_schema_or_none_is_one_line(real, tmp_path):
    newer = rocpd_of(made(real), tmp_path / "v4.db", schema_version="4", with_start=False)
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as db:
        # rocpd's names, but as views over a table of the file's own: views are never read
        db.execute("CREATE TABLE things (x)")
        for name in ("rocpd_metadata_x", "rocpd_region_x", "rocpd_kernel_dispatch_x", "rocpd_info_agent_x"):
            db.execute(f"CREATE VIEW {name} AS SELECT x AS start FROM things")
        db.execute("CREATE VIEW rocpd_string_x AS SELECT 1")
        db.execute("CREATE VIEW rocpd_event_x AS SELECT 1")
    for path, message in (
        (newer, "rocpd schema version 4 (rocpd_region without start, end): this reader reads version 3"),
        (foreign, "an SQLite database without rocpd's tables"),
    ):
        with pytest.raises(InputError) as e:
            rocpd.parse(path)
        assert str(e.value).startswith(str(path)) and message in str(e.value), str(e.value)
