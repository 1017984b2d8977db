"""Nsight Systems SQLite exports (``nsys-sqlite``, issue 47, slice 3).

A real export (Nsight Systems 2024.5, CloverLeaf on an A100; from the
public pipit repository, tests/data/nsys/NOTICE), gzipped as committed and
plain in a temporary copy. Every expected number is a few lines of SQL
over the file here, never tracegraph. NVTX ranges, several processes and
schema drift are made by editing a copy of the real database with SQL.
"""

from __future__ import annotations

import gzip
import shutil
import sqlite3
from pathlib import Path

import pytest
from conftest import cli_here, ready_traces

from tracegraph.errors import InputError
from tracegraph.ingest import pipeline
from tracegraph.ingest.formats.nsys import trace as nsys
from tracegraph.queries.run import run_analysis

PACKED = Path(__file__).parent / "data" / "nsys" / "perlmutter-cloverleaf-cuda.sqlite.gz"


@pytest.fixture(scope="module")
def export(tmp_path_factory) -> Path:
    """The export, plain (what nsys writes)."""
    p = tmp_path_factory.mktemp("nsys") / "cloverleaf.sqlite"
    p.write_bytes(gzip.decompress(PACKED.read_bytes()))
    return p


def sql(path: Path, query: str) -> list[tuple]:
    with sqlite3.connect(path) as db:
        return db.execute(query).fetchall()


def edited(export: Path, tmp_path: Path, *statements: str, name: str = "edited.sqlite") -> Path:
    p = tmp_path / name
    shutil.copyfile(export, p)
    with sqlite3.connect(p) as db:
        for s in statements:
            db.execute(s)
    return p


def test_detected_by_content_plain_and_gzipped(export):
    assert pipeline.detect(export) == "nsys-sqlite"
    assert pipeline.detect(PACKED) == "nsys-sqlite"


def test_counts_and_durations_equal_the_database(export):
    tf = nsys.parse(export)
    assert tf.framework == "cuda"
    ((kernels, kernel_ns),) = sql(export, "SELECT count(*), sum(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL")
    ((copies, copy_ns, copy_bytes),) = sql(
        export, "SELECT count(*), sum(end - start), sum(bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY"
    )
    ((calls, call_ns),) = sql(export, "SELECT count(*), sum(end - start) FROM CUPTI_ACTIVITY_KIND_RUNTIME")
    k = tf.kernels
    assert (k["kind"] == "compute").sum() == kernels == 1312
    assert k.loc[k["kind"] == "compute", "dur_us"].sum() == pytest.approx(kernel_ns / 1000, abs=1e-6)
    assert (k["kind"] == "memcpy").sum() == copies == 279
    assert k.loc[k["kind"] == "memcpy", "dur_us"].sum() == pytest.approx(copy_ns / 1000, abs=1e-6)
    assert k.loc[k["kind"] == "memcpy", "bytes"].sum() == copy_bytes
    assert len(tf.ops) == calls == 3048
    assert tf.ops["dur_us"].sum() == pytest.approx(call_ns / 1000, abs=1e-6)
    # names through StringIds, API version suffixes dropped
    names = dict(
        sql(
            export,
            "SELECT s.value, count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId GROUP BY 1",
        )
    )
    got = tf.ops["name"].value_counts().to_dict()
    assert got == {name.rsplit("_v", 1)[0] if "_v" in name else name: n for name, n in names.items()}
    kernel_names = dict(
        sql(
            export,
            "SELECT s.value, count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName "
            "GROUP BY 1",
        )
    )
    assert k.loc[k["kind"] == "compute", "name"].value_counts().to_dict() == kernel_names
    directions = dict(sql(export, "SELECT copyKind, count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY 1"))
    assert k.loc[k["kind"] == "memcpy", "direction"].value_counts().to_dict() == {
        {1: "HtoD", 2: "DtoH"}[kind]: n for kind, n in directions.items()
    }
    assert tf.meta["export_schema_version"] == "3.13.2"


def test_launches_by_correlation_equal_the_database(export):
    tf = nsys.parse(export)
    pairs = sql(
        export,
        "SELECT k.start, r.start FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
        "ON r.correlationId = k.correlationId "
        "UNION ALL SELECT m.start, r.start FROM CUPTI_ACTIVITY_KIND_MEMCPY m JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
        "ON r.correlationId = m.correlationId",
    )
    assert len(pairs) == len(tf.kernels) == tf.kernels["launch"].notna().sum()
    ((origin,),) = sql(
        export,
        "SELECT min(t) FROM (SELECT min(start) t FROM CUPTI_ACTIVITY_KIND_KERNEL UNION ALL "
        "SELECT min(start) FROM CUPTI_ACTIVITY_KIND_MEMCPY UNION ALL SELECT min(start) FROM CUPTI_ACTIVITY_KIND_RUNTIME)",
    )
    ops = tf.ops.set_index("uid")
    got = sorted(
        (round(s * 1000) + origin, round(ops.loc[u, "start_us"] * 1000) + origin)
        for s, u in zip(tf.kernels["start_us"], tf.kernels["launch"])
    )
    assert got == sorted(pairs)
    assert tf.meta["kernels_without_launch"] == 0
    # the blocking calls waited for the kernel that ran last before they returned
    waits = sql(export, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION")[0][0]
    assert len(tf.syncs) == waits and set(tf.syncs["kind"]) == {"host_wait"}


def test_analyses_on_both_engines(graph, export):
    pipeline.ingest(graph, [PACKED], "nsys-clover")
    (busy_ns,) = sql(
        export,
        "SELECT sum(e - s) FROM (SELECT start s, end e FROM CUPTI_ACTIVITY_KIND_KERNEL UNION ALL "
        "SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY)",
    )[0]
    (row,) = run_analysis(graph, "stream-utilization", "nsys-clover", {"min_gap_us": "0"}).records()
    # one stream, its records one after the other: the union is their sum
    assert row["kernels"] == 1591 and row["busy_us"] == pytest.approx(busy_ns / 1000, abs=1e-3)
    for name in ("top-ops", "op-type-breakdown", "idle-gaps", "observed-critical-path", "device-time-breakdown"):
        res = run_analysis(graph, name, "nsys-clover", {})
        assert res.available and res.rows, (name, res.note)
    steps = run_analysis(graph, "step-breakdown", "nsys-clover", {})
    assert not steps.available and steps.note.startswith("not available: the trace has no steps")


NVTX = [
    "CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER, "
    "category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER, "
    "domainId INTEGER, uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, uint32Value INTEGER, "
    "int32Value INTEGER, floatValue REAL, jsonTextId INTEGER, jsonText TEXT)",
    # the domain, then three push/pop ranges "iteration N" on the main thread, each over a
    # third of the runtime calls, and a mark
    "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) "
    "VALUES (0, NULL, 75, 'cloverleaf', 310028055214088, 7)",
    *(
        "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) "
        f"SELECT min(start), max(end), 59, 'iteration {i}', 310028055214088, 7 FROM "
        f"(SELECT start, end FROM CUPTI_ACTIVITY_KIND_RUNTIME ORDER BY start LIMIT 1016 OFFSET {1016 * i})"
        for i in range(3)
    ),
    "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) "
    "SELECT start, NULL, 34, 'checkpoint', 310028055214088 FROM CUPTI_ACTIVITY_KIND_RUNTIME LIMIT 1",
]


def test_nvtx_ranges_are_annotations_and_name_steps(graph, export, tmp_path, db_uri):
    p = edited(export, tmp_path, *NVTX)
    tf = nsys.parse(p)
    nvtx = tf.ops[tf.ops["category"] == "nvtx"]
    assert sorted(nvtx["name"]) == ["checkpoint", "iteration 0", "iteration 1", "iteration 2"]
    assert set(nvtx["role"]) == {"annotation"}
    ranges = {n: d for n, d in sql(p, "SELECT text, end - start FROM NVTX_EVENTS WHERE eventType = 59")}
    for _, r in nvtx[nvtx["name"] != "checkpoint"].iterrows():
        assert r["dur_us"] == pytest.approx(ranges[r["name"]] / 1000, abs=1e-6)
        assert '"domain": "cloverleaf"' in r["attrs"]
    # every runtime call nests in its iteration
    runtime = tf.ops[tf.ops["category"] == "cuda_runtime"]
    assert runtime["parent"].notna().all()
    assert tf.ops.set_index("uid").loc[runtime["parent"], "name"].str.startswith("iteration ").all()
    proc = cli_here("ingest", str(p), "--trace", "nsys-steps", "--step-marker", r"^iteration (\d+)$", db=db_uri)
    assert proc.returncode == 0, proc.stderr
    rows = run_analysis(graph, "step-breakdown", "nsys-steps", {}).records()
    assert [r["step"] for r in rows] == [0, 1, 2]
    launched = sql(
        p,
        "SELECT n.text, count(*) FROM NVTX_EVENTS n JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
        "ON r.start >= n.start AND r.start < n.end JOIN "
        "(SELECT correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL UNION ALL SELECT correlationId FROM "
        "CUPTI_ACTIVITY_KIND_MEMCPY) k ON k.correlationId = r.correlationId WHERE n.eventType = 59 GROUP BY 1",
    )
    assert {f"iteration {r['step']}": r["kernels"] for r in rows} == dict(launched)


def test_several_processes_are_the_ranks_of_a_job(export, tmp_path):
    """A second process: every CUDA record copied under another pid (its
    globalPid and its threads' globalTid moved by the same offset)."""
    shift = 1 << 24  # the next pid
    tables = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION")
    statements = [f"INSERT INTO {t} SELECT * FROM {t}" for t in (*tables, "CUPTI_ACTIVITY_KIND_RUNTIME")]
    p = edited(export, tmp_path, *statements)
    with sqlite3.connect(p) as db:  # the copies are the rows past the originals' count
        for t in tables:
            n = db.execute(f"SELECT count(*) / 2 FROM {t}").fetchone()[0]
            db.execute(f"UPDATE {t} SET globalPid = globalPid + {shift} WHERE rowid > {n}")
        n = db.execute("SELECT count(*) / 2 FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0]
        db.execute(f"UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET globalTid = globalTid + {shift} WHERE rowid > {n}")
    tf = nsys.parse(p)
    assert sorted(tf.devices["name"]) == ["rank0/cpu", "rank0/cuda:0", "rank1/cpu", "rank1/cuda:0"]
    assert tf.ops["rank"].value_counts().to_dict() == {0: 3048, 1: 3048}
    assert len(tf.kernels) == 2 * 1591 and tf.kernels["launch"].notna().all()
    # each kernel launched by its own process's call
    op_rank = dict(zip(tf.ops["uid"], tf.ops["rank"]))
    stream_rank = {s: d.split("/")[0] for s, d in zip(tf.streams["uid"], tf.streams["device"])}
    for launch, stream in zip(tf.kernels["launch"], tf.kernels["stream"]):
        assert stream_rank[stream] == f"dev:rank{op_rank[launch]}"


@pytest.mark.parametrize(
    "statements,message",
    [
        (
            [
                "UPDATE META_DATA_EXPORT SET value = '9' WHERE name = 'EXPORT_SCHEMA_VERSION_MAJOR'",
                "UPDATE META_DATA_EXPORT SET value = '9.0.1' WHERE name = 'EXPORT_SCHEMA_VERSION'",
            ],
            "Nsight Systems export schema 9.0.1: this reader knows major versions 2 and 3",
        ),
        (["DROP TABLE StringIds"], "an SQLite database without Nsight Systems' tables"),
        (
            ["UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start - 5 WHERE rowid = 3"],
            "CUPTI_ACTIVITY_KIND_KERNEL: a record ends",
        ),
        (
            ["UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET start = 'x' WHERE rowid = 3"],
            "CUPTI_ACTIVITY_KIND_RUNTIME: a record without integer start and end times",
        ),
    ],
    ids=["unknown-major", "no-string-table", "end-before-start", "text-time"],
)
def test_drifted_or_foreign_exports_are_one_line(export, tmp_path, statements, message):
    p = edited(export, tmp_path, *statements)
    with pytest.raises(InputError) as e:
        nsys.parse(p)
    assert str(e.value).startswith(str(p)) and message in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_columns_come_and_go_between_releases(export, tmp_path):
    """A release without the demangled name (older) and with a column this
    reader does not know: read by the columns there are."""
    p = edited(
        export,
        tmp_path,
        "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN demangledName",
        "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL ADD COLUMN futureColumn INTEGER",
    )
    tf = nsys.parse(p)
    short = dict(
        sql(
            p,
            "SELECT s.value, count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName GROUP BY 1",
        )
    )
    assert tf.kernels.loc[tf.kernels["kind"] == "compute", "name"].value_counts().to_dict() == short


def test_a_view_is_never_read(export, tmp_path):
    """A database whose CUDA tables are views (a crafted file's way to run
    its own SQL when read): they are not tables, so not read."""
    p = edited(
        export,
        tmp_path,
        "DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME",
        "CREATE VIEW CUPTI_ACTIVITY_KIND_RUNTIME AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
        "SELECT x AS start, x AS end, 0 AS eventClass, 0 AS globalTid, 0 AS correlationId, 0 AS nameId FROM c",
    )
    tf = nsys.parse(p)
    assert len(tf.ops) == 1  # the runtime calls are gone: every kernel is launched outside the trace
    assert tf.meta["kernels_without_launch"] == 1591


def test_bad_files_leave_the_database_as_it_was(graph, db_uri, export, tmp_path):
    before = ready_traces(graph)
    cut = tmp_path / "cut.sqlite"
    cut.write_bytes(export.read_bytes()[:300_000])
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE StringIds (id INTEGER, value TEXT)")
        db.execute("CREATE TABLE TARGET_INFO_GPU (id INTEGER)")
        db.execute("CREATE TABLE things (x)")
    for bad, what in ((cut, "SQLite"), (other, "without Nsight Systems' tables")):
        proc = cli_here("ingest", str(bad), "--trace", "nsys-bad", "--format", "nsys-sqlite", db=db_uri)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 1 and len(lines) == 1 and str(bad) in lines[0] and what in lines[0], proc.stderr
    assert ready_traces(graph) == before


def test_http_upload(graph, db_uri):
    from fastapi.testclient import TestClient

    from tracegraph.api.app import create_app
    from tracegraph.api.settings import Settings

    with TestClient(create_app(db_uri, Settings(api_key=None))) as client:
        r = client.post("/traces", data={"trace": "nsys-up"}, files=[("files", (PACKED.name, PACKED.read_bytes()))])
        assert r.status_code == 201, r.text
        assert r.json()["framework"] == "cuda"
        rows = client.get("/traces/nsys-up/queries/stream-utilization").json()["rows"]
        assert len(rows) == 1
