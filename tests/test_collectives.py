"""Collectives joined across ranks, and the straggler analyses, on real
4-rank torch.distributed (gloo) traces (tests/data/pytorch_dist, made by
its make_traces.py): in ``straggler`` rank 2 sleeps 80 ms before its first
all-reduce; ``balanced`` is the same step without the sleep; in ``ddp``
(DistributedDataParallel, two gradient buckets) rank 2 sleeps 50 ms before
its backward, which delays both buckets' all-reduces at once.

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
from conftest import module_traces

from tracegraph.ingest.pipeline import ingest
from tracegraph.queries.run import run_analysis

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "pytorch_dist"
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
                "last": last,
            }
        )
    return out


@pytest.fixture(scope="module")
def jobs(session_graph):
    """The straggler and balanced jobs, stored once for the module (the tests read them)."""

    def load():
        for job in ("straggler", "balanced"):
            ingest(session_graph, rank_files(job), f"dist-{job}")
        return session_graph

    yield from module_traces(session_graph, load)


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


def union(intervals: list[tuple[float, float]]) -> float:
    """The length of the union of ``intervals`` (start, end)."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        total += max(0.0, end - max(start, reach))
        reach = max(reach, end)
    return total


def rank_totals(ref: list[dict], min_caused: float = 10_000.0) -> dict[int, dict]:
    """straggler-ranks' columns from the reference: delays and waits as
    unions of intervals (from an arrival to the last arrival)."""
    ranks = sorted(ref[0]["waits"])
    late = [c for c in ref if c["caused"] >= min_caused and c["caused"] > 0]
    return {
        r: {
            "straggled": sum(1 for c in late if c["last_rank"] == r),
            "caused_us": union([(c["last"] - c["caused"], c["last"]) for c in late if c["last_rank"] == r]),
            "caused_wait_us": sum(
                union([(c["last"] - c["waits"][o], c["last"]) for c in late if c["last_rank"] == r])
                for o in ranks
                if o != r
            ),
            "suffered_us": union([(c["last"] - c["waits"][r], c["last"]) for c in ref]),
        }
        for r in ranks
    }


@pytest.mark.parametrize("job", ["straggler", "ddp"])
def test_straggler_ranks_totals(graph, job):
    ingest(graph, rank_files(job), f"totals-{job}")  # (not the jobs fixture's dist-straggler)
    ref = reference(rank_files(job))
    want = rank_totals(ref)
    res = run_analysis(graph, "straggler-ranks", f"totals-{job}")
    assert res.rows[0][0] == 2  # the straggler first
    by_rank = {r[0]: dict(zip(res.columns, r)) for r in res.rows}
    assert sorted(by_rank) == [0, 1, 2, 3]
    for rank, row in by_rank.items():
        assert row["collectives"] == len(ref)
        assert row["straggled"] == want[rank]["straggled"]
        for column in ("caused_us", "caused_wait_us", "suffered_us"):
            assert row[column] == pytest.approx(want[rank][column], abs=0.05), (rank, column)
    assert all(row["caused_us"] == 0 for rank, row in by_rank.items() if rank != 2)


def test_one_delay_behind_several_collectives_counts_once(graph):
    """DDP's two bucket all-reduces are held up by the same 50 ms sleep:
    each collective names rank 2 with ~50 ms, and straggler-ranks credits
    rank 2 with ~50 ms in all, not the ~100 ms of their sum."""
    ingest(graph, rank_files("ddp"), "dist-ddp")
    ref = reference(rank_files("ddp"))
    late = [c for c in ref if c["caused"] >= 10_000]
    assert [c["last_rank"] for c in late] == [2, 2]
    assert all(c["caused"] == pytest.approx(50_000, rel=0.10) for c in late)
    row = run_analysis(graph, "straggler-ranks", "dist-ddp").rows[0]
    assert row[0] == 2 and row[2] == 2
    assert row[3] == pytest.approx(50_000, rel=0.10)
    assert row[3] < 0.6 * sum(c["caused"] for c in late)


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


def sleep_before_first_call(path: Path) -> float:
    """From the raw JSON of one rank: the idle time on the thread of its
    first collective call between the end of the last op before the call
    (``cpu_op`` events ending at or before its start) and the call (us)."""
    doc = json.loads(gzip.decompress(path.read_bytes()))
    spans = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    call = min((e for e in spans if e["name"] == "c10d::allreduce_"), key=lambda e: e["ts"])
    before = [e["ts"] + e["dur"] for e in spans if e["tid"] == call["tid"] and e["ts"] + e["dur"] <= call["ts"]]
    return call["ts"] - max(before)


def test_job_critical_path_crosses_to_the_rank_everyone_waited_for(jobs):
    """The straggler's sleep is on the path (counted: every other rank waited
    for it), and the path crosses to another rank at that collective."""
    sleep = sleep_before_first_call(rank_files("straggler")[2])
    assert sleep == pytest.approx(80_000, rel=0.10)
    path = run_analysis(jobs, "observed-critical-path", "dist-straggler")
    seg = [dict(zip(path.columns, r)) for r in path.rows]
    on_sleep = [s for s in seg if s["resource"].startswith("rank2/") and s["kind"] == "idle" and s["dur_us"] > 1000]
    assert len(on_sleep) == 1 and on_sleep[0]["counted"] is True
    assert on_sleep[0]["dur_us"] == pytest.approx(sleep, abs=0.01)
    assert on_sleep[0]["event"] == "c10d::allreduce_"  # the idle gap leads to rank 2's call

    legs = [
        dict(zip(r.columns, row)) for r in [run_analysis(jobs, "job-critical-path", "dist-straggler")] for row in r.rows
    ]
    first_cross = next(i for i, leg in enumerate(legs) if leg["rank"] != legs[0]["rank"])
    assert legs[first_cross - 1]["rank"] == 2
    assert legs[first_cross - 1]["end_us"] == pytest.approx(on_sleep[0]["start_us"] + sleep, abs=0.01)
    assert legs[first_cross]["entered_at"] == "c10d::allreduce_"
    assert legs[first_cross]["start_us"] == pytest.approx(legs[first_cross - 1]["end_us"], abs=0.01)
    # The legs tile the path: their counted time is its length, every leg after the first entered at a collective.
    length = jobs.trace_facts("dist-straggler")["observed_path_us"]
    assert sum(leg["counted_us"] for leg in legs) == pytest.approx(length, abs=0.01)
    assert sum(leg["segments"] for leg in legs) == len(seg)
    assert all(leg["entered_at"].startswith("c10d::") for leg in legs[1:])
    # Nearly nothing on it waits: the straggler's sleep counts, the others' waits are not on it.
    assert length == pytest.approx(sum(s["dur_us"] for s in seg), rel=0.01)


def test_job_critical_path_of_one_rank_is_the_observed_critical_path(graph):
    ingest(graph, [ROOT / "examples" / "traces" / "pytorch-cnn-cpu.pt.trace.json.gz"], "one-rank")
    path = run_analysis(graph, "observed-critical-path", "one-rank")
    seg = [dict(zip(path.columns, r)) for r in path.rows]
    legs = run_analysis(graph, "job-critical-path", "one-rank")
    assert len(legs.rows) == 1
    leg = dict(zip(legs.columns, legs.rows[0]))
    assert (leg["leg"], leg["rank"], leg["entered_at"], leg["segments"]) == (0, None, seg[0]["event"], len(seg))
    assert leg["start_us"] == pytest.approx(seg[0]["start_us"])
    assert leg["end_us"] == pytest.approx(seg[-1]["start_us"] + seg[-1]["dur_us"])
    counted = sum(s["dur_us"] for s in seg if s["counted"])
    assert leg["counted_us"] == pytest.approx(counted)
    assert leg["counted_us"] == pytest.approx(graph.trace_facts("one-rank")["observed_path_us"])
