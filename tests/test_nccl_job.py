"""A real 8-rank NCCL job (tests/data/nccl_dlrm, public PARAM test data):
its NCCL kernels joined across ranks, counted against the raw JSON, and
every analysis of the job answering on it.

The reference here reads the files without tracegraph: per rank
(``distributedInfo.rank``), its ``kernel`` events whose name starts with
``ncclKernel_`` or ``ncclDevKernel_``, by start; the collective is the word
after that prefix; SendRecv kernels are point-to-point, not collectives;
a collective's end spread is its kernels' latest end minus their earliest.
The k-th collective kernel of every rank is matched while all ranks have
one of the same collective.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from tracegraph.ingest.pipeline import ingest
from tracegraph.queries.run import run_analysis

DATA = Path(__file__).resolve().parent / "data" / "nccl_dlrm"
FILES = sorted(DATA.glob("worker*.pt.trace.json.gz"))


def reference() -> dict:
    kernels: dict[int, list[tuple[float, str]]] = {}
    for path in FILES:
        doc = json.loads(gzip.decompress(path.read_bytes()))
        found = [
            (e["ts"], re.match(r"nccl(?:Dev)?Kernel_([A-Za-z]+)", e["name"])[1], e["ts"] + e["dur"])
            for e in doc["traceEvents"]
            if e.get("ph") == "X"
            and e.get("cat") == "kernel"
            and e["name"].startswith(("ncclKernel_", "ncclDevKernel_"))
        ]
        kernels[doc["distributedInfo"]["rank"]] = sorted(k for k in found if k[1] != "SendRecv")
    k = 0
    while all(len(v) > k for v in kernels.values()) and len({v[k][1] for v in kernels.values()}) == 1:
        k += 1
    return {
        "ranks": sorted(kernels),
        "matched": k,
        "unmatched": sum(len(v) - k for v in kernels.values()),
        "names": [kernels[0][i][1] for i in range(k)],
        "last": [max(kernels, key=lambda r: (kernels[r][i][0], -r)) for i in range(k)],
        "end_spreads": [
            max(v[i][2] for v in kernels.values()) - min(v[i][2] for v in kernels.values()) for i in range(k)
        ],
    }


@pytest.fixture(scope="module")
def ref():
    return reference()


def test_every_collective_kernel_matched_as_the_raw_json_counts(graph, ref):
    assert len(FILES) == 8 and ref["ranks"] == list(range(8))
    assert (ref["matched"], ref["unmatched"]) == (3, 0)
    ingest(graph, FILES, "dlrm")
    facts = graph.trace_facts("dlrm")
    assert (facts["collectives"], facts["collective_calls_unmatched"]) == (ref["matched"], ref["unmatched"])
    rows = graph.run(
        "MATCH (k:Kernel)-[j:JOINS]->(c:Collective {trace: $trace}) "
        "RETURN c.seq, c.name, c.last_rank, count(k), count(DISTINCT j.rank), min(j.wait_us) ORDER BY c.seq",
        trace="dlrm",
    ).rows
    assert [(r[0], r[1], r[3], r[4], r[5]) for r in rows] == [(i, n, 8, 8, 0.0) for i, n in enumerate(ref["names"])]
    assert [r[2] for r in rows] == ref["last"]
    # The kernels of a collective end together: the spread of their ends bounds the ranks' clock skew.
    spreads = graph.run("MATCH (c:Collective {trace: $trace}) RETURN c.end_spread_us ORDER BY c.seq", trace="dlrm").rows
    assert [r[0] for r in spreads] == [pytest.approx(x, abs=1e-6) for x in ref["end_spreads"]]
    assert facts["collective_end_spread_us"] == pytest.approx(sorted(ref["end_spreads"])[1], abs=1e-6)
    assert facts["collective_end_spread_us"] < 10  # one node: one clock, within a few us


def test_every_job_analysis_answers(graph):
    ingest(graph, FILES, "dlrm")
    for name in ("stragglers", "straggler-ranks", "comm-compute-overlap", "job-critical-path"):
        res = run_analysis(graph, name, "dlrm", {"min_caused_us": 0.0} if name.startswith("straggler") else None)
        assert res.rows, name
    overlap = run_analysis(graph, "comm-compute-overlap", "dlrm")
    assert [(r[0], r[1]) for r in overlap.rows] == [(rank, "gpu") for rank in range(8)]
    length = graph.trace_facts("dlrm")["observed_path_us"]
    legs = run_analysis(graph, "job-critical-path", "dlrm").rows
    assert sum(leg[5] for leg in legs) == pytest.approx(length)
