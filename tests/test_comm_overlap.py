"""comm-compute-overlap: per rank, communication against computation.

On the real 4-rank gloo traces (tests/data/pytorch_dist) the reference is
computed here from the raw JSON: communication = the ``c10d::`` calls and
``gloo:`` regions and every event nested in one on its thread, computation
= the other ``cpu_op`` events; each side the length of its union. On GPU
ranks (the hand-built Kineto trace of tests/kineto_builder, one rank as
is and one with its ``add_kernel`` moved under the NCCL kernel) the
numbers are worked out by hand in the test.
"""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path

import pytest

from tests import kineto_builder
from tracegraph.ingest.pipeline import ingest
from tracegraph.queries.run import run_analysis

DATA = Path(__file__).resolve().parent / "data" / "pytorch_dist"


def union_length(spans: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def both_length(xs: list[tuple[float, float]], ys: list[tuple[float, float]]) -> float:
    """Length of (union of xs) intersected with (union of ys): every piece between consecutive ends, tested at its middle."""
    points = sorted({p for a, b in xs + ys for p in (a, b)})
    out = 0.0
    for a, b in itertools.pairwise(points):
        mid = (a + b) / 2
        if any(x <= mid < y for x, y in xs) and any(x <= mid < y for x, y in ys):
            out += b - a
    return out


def cpu_reference(path: Path) -> dict[str, float]:
    doc = json.loads(gzip.decompress(path.read_bytes()))
    spans = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")]
    roots = [e for e in spans if e["name"].startswith(("c10d::", "gloo:"))]

    def inside_comm(e: dict) -> bool:
        return any(
            r["tid"] == e["tid"] and r["ts"] <= e["ts"] and e["ts"] + e["dur"] <= r["ts"] + r["dur"] for r in roots
        )

    comm = [(e["ts"], e["ts"] + e["dur"]) for e in spans if inside_comm(e)]
    work = [(e["ts"], e["ts"] + e["dur"]) for e in spans if e["cat"] == "cpu_op" and not inside_comm(e)]
    return {"comm_us": union_length(comm), "compute_us": union_length(work), "overlap_us": both_length(comm, work)}


def test_cpu_ranks_as_the_raw_json_says(graph):
    files = sorted(DATA.glob("straggler.rank*.json.gz"))
    ingest(graph, files, "overlap-cpu")
    res = run_analysis(graph, "comm-compute-overlap", "overlap-cpu")
    rows = [dict(zip(res.columns, r)) for r in res.rows]
    assert [r["rank"] for r in rows] == [0, 1, 2, 3]
    for row, path in zip(rows, files):
        ref = cpu_reference(path)
        assert row["mode"] == "cpu"
        for key, value in ref.items():
            assert row[key] == pytest.approx(value, abs=0.01), (path.name, key)
        assert row["exposed_comm_us"] == pytest.approx(ref["comm_us"] - ref["overlap_us"], abs=0.01)
        assert row["exposed_share"] == pytest.approx((ref["comm_us"] - ref["overlap_us"]) / ref["comm_us"])
    # Rank 2 slept instead of waiting: it spent the least time communicating.
    assert min(rows, key=lambda r: r["comm_us"])["rank"] == 2


def test_gpu_ranks_worked_out_by_hand(graph, tmp_path):
    """Rank 0: compute kernels gemm [25, 65) and add_kernel [70, 80) (copies
    and memsets are neither), the NCCL kernel [100, 140): 50 compute, 40
    comm, nothing overlaps. Rank 1: add_kernel moved to [95, 125): compute
    [25, 65) + [95, 125) = 70, overlap [100, 125) = 25, exposed 15."""
    rank0 = kineto_builder.document(rank=0)
    rank1 = kineto_builder.document(rank=1)
    for e in rank1["traceEvents"]:
        if e.get("name") == "add_kernel":
            e["ts"] = round(kineto_builder.T0 + 95, 3)
            e["dur"] = 30
    files = [kineto_builder.write(tmp_path / f"r{r}.json.gz", d) for r, d in ((0, rank0), (1, rank1))]
    ingest(graph, files, "overlap-gpu")
    res = run_analysis(graph, "comm-compute-overlap", "overlap-gpu")
    got = [tuple(r) for r in res.rows]
    assert got == [
        (
            0,
            "gpu",
            pytest.approx(40.0),
            pytest.approx(50.0),
            pytest.approx(0.0),
            pytest.approx(40.0),
            pytest.approx(1.0),
        ),
        (
            1,
            "gpu",
            pytest.approx(40.0),
            pytest.approx(70.0),
            pytest.approx(25.0),
            pytest.approx(15.0),
            pytest.approx(0.375),
        ),
    ]


def test_a_trace_without_communication_says_so(graph):
    ingest(
        graph,
        [Path(__file__).resolve().parent.parent / "examples" / "traces" / "pytorch-cnn-cpu.pt.trace.json.gz"],
        "no-comm",
    )
    res = run_analysis(graph, "comm-compute-overlap", "no-comm")
    assert res.rows == [] and res.note.startswith(
        "not available: the trace has no communication (kernels of a communication library: NCCL, RCCL, DeepEP"
    )
