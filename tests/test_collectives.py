"""Collectives joined across ranks, and the straggler analyses, on real
4-rank torch.distributed (gloo) traces (tests/data/pytorch_dist, made by
its make_traces.py): in ``straggler`` rank 2 sleeps 80 ms before its first
all-reduce; ``balanced`` is the same step without the sleep.

The reference is computed here from the raw JSON, without tracegraph:
each rank's outermost ``c10d::`` events (not inside another ``c10d::``
event of the same thread) by start, the k-th of every rank joined, waits
as the last start minus each start.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tracegraph.ingest.pipeline import ingest
from tracegraph.queries.run import run_analysis

DATA = Path(__file__).resolve().parent / "data" / "pytorch_dist"
P2P = {"c10d::send", "c10d::recv_", "c10d::recv_any_source_"}


def rank_files(job: str) -> list[Path]:
    return sorted(DATA.glob(f"{job}.rank*.json.gz"))


def reference(paths: list[Path]) -> list[dict]:
    """Per collective: name, last rank, caused (us), each rank's wait (us)."""
    calls: dict[int, list[tuple[float, str]]] = {}
    for path in paths:
        doc = json.loads(gzip.decompress(path.read_bytes()))
        rank = doc["distributedInfo"]["rank"]
        events = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("name", "").startswith("c10d::")]
        outer = [
            e
            for e in events
            if e["name"] not in P2P
            and not any(
                f is not e
                and (f["pid"], f["tid"]) == (e["pid"], e["tid"])
                and f["ts"] <= e["ts"]
                and e["ts"] + e["dur"] <= f["ts"] + f["dur"]
                for f in events
            )
        ]
        calls[rank] = sorted((e["ts"], e["name"]) for e in outer)
    out = []
    for k in range(min(len(c) for c in calls.values())):
        names = {c[k][1] for c in calls.values()}
        if len(names) != 1:
            break
        starts = {r: c[k][0] for r, c in calls.items()}
        last = max(starts.values())
        out.append(
            {
                "name": names.pop(),
                "last_rank": min(r for r, t in starts.items() if t == last),
                "caused": last - sorted(starts.values())[-2],
                "waits": {r: last - t for r, t in sorted(starts.items())},
            }
        )
    return out


@pytest.fixture
def jobs(graph):
    for job in ("straggler", "balanced"):
        ingest(graph, rank_files(job), f"dist-{job}")
    return graph


def test_collectives_joined_as_the_reference(jobs):
    for job in ("straggler", "balanced"):
        ref = reference(rank_files(job))
        assert len(ref) == 5  # four gradient all-reduces and a barrier
        rows = jobs.run(
            "MATCH (o:Op)-[j:JOINS]->(c:Collective {trace: $trace}) "
            "RETURN c.seq, c.name, c.last_rank, c.caused_us, j.rank, j.wait_us, o.name ORDER BY c.seq, j.rank",
            trace=f"dist-{job}",
        ).rows
        assert len(rows) == 5 * 4
        for seq, name, last_rank, caused, rank, wait, op_name in rows:
            assert (name, op_name, last_rank) == (ref[seq]["name"], ref[seq]["name"], ref[seq]["last_rank"])
            assert caused == pytest.approx(ref[seq]["caused"], abs=0.01)
            assert wait == pytest.approx(ref[seq]["waits"][rank], abs=0.01)
        facts = jobs.trace_facts(f"dist-{job}")
        assert (facts["has_collectives"], facts["collectives"], facts["collective_calls_unmatched"]) == (True, 5, 0)


def test_stragglers_names_the_delayed_rank_and_nobody_else(jobs):
    ref = reference(rank_files("straggler"))[0]
    res = run_analysis(jobs, "stragglers", "dist-straggler")
    assert [(r[0], r[1], r[2], r[4]) for r in res.rows] == [(0, "c10d::allreduce_", 2, rank) for rank in range(4)]
    caused = res.rows[0][3]
    assert caused == pytest.approx(ref["caused"], abs=0.01)
    assert caused == pytest.approx(80_000, rel=0.10)  # the script's sleep, within scheduling noise
    for row in res.rows:
        assert row[5] == pytest.approx(ref["waits"][row[4]], abs=0.01)
        assert row[5] == (0 if row[4] == 2 else pytest.approx(80_000, rel=0.10))

    assert run_analysis(jobs, "stragglers", "dist-balanced").rows == []
    # Below the threshold the small delays of the balanced job show: the threshold is what names nobody.
    assert run_analysis(jobs, "stragglers", "dist-balanced", {"min_caused_us": 100}).rows


def test_straggler_ranks_totals(jobs):
    ref = reference(rank_files("straggler"))
    res = run_analysis(jobs, "straggler-ranks", "dist-straggler")
    assert res.rows[0][0] == 2  # the straggler first
    by_rank = {r[0]: dict(zip(res.columns, r)) for r in res.rows}
    assert sorted(by_rank) == [0, 1, 2, 3]
    for rank, row in by_rank.items():
        assert row["collectives"] == 5
        assert row["suffered_us"] == pytest.approx(sum(c["waits"][rank] for c in ref), abs=0.05)
    assert (by_rank[2]["straggled"], by_rank[0]["straggled"]) == (1, 0)
    assert by_rank[2]["caused_us"] == pytest.approx(ref[0]["caused"], abs=0.01)
    assert by_rank[2]["caused_wait_us"] == pytest.approx(sum(ref[0]["waits"].values()), abs=0.05)
    assert all(row["caused_us"] == 0 for rank, row in by_rank.items() if rank != 2)


def test_a_rank_missing_its_last_call_leaves_it_unmatched(graph, tmp_path):
    """Rank 3's file cut before its last collective: the first four join,
    the other ranks' fifth calls are counted, not guessed."""
    files = rank_files("straggler")
    doc = json.loads(gzip.decompress(files[3].read_bytes()))
    last = max(e["ts"] for e in doc["traceEvents"] if e.get("name") == "c10d::barrier")
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("ts", 0) < last]
    cut = tmp_path / "straggler.rank3.json"
    cut.write_text(json.dumps(doc))
    ingest(graph, [*files[:3], cut], "dist-cut")
    facts = graph.trace_facts("dist-cut")
    assert (facts["collectives"], facts["collective_calls_unmatched"]) == (4, 3)
    assert [r[0] for r in run_analysis(graph, "stragglers", "dist-cut").rows] == [0, 0, 0, 0]


def test_one_rank_has_no_collectives(graph):
    ingest(graph, rank_files("straggler")[:1], "dist-one")
    facts = graph.trace_facts("dist-one")
    assert (facts["has_collectives"], facts["collectives"]) == (False, 0)
    res = run_analysis(graph, "stragglers", "dist-one")
    assert res.rows == [] and res.note.startswith("not available: the trace has no collectives")
