"""The benchmark's synthetic StepStats generator (bench/generate.py).

Its text must be exactly what text_format writes for the same message, it
must be deterministic, and a generated trace ingested into the embedded
database must answer peak-memory with what a plain running sum over the
generator's own allocation records gives.
"""

from __future__ import annotations

import sys
from pathlib import Path

from google.protobuf import text_format

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # bench/ is a plain folder of the repository

from bench import generate  # noqa: E402


def test_text_writer_is_message_to_string():
    trace = generate.generate(200, seed=5)
    assert generate.to_text(trace) == text_format.MessageToString(generate.to_message(trace))


def test_deterministic_and_exact_op_count():
    a, b = generate.generate(1000, seed=2), generate.generate(1000, seed=2)
    assert generate.to_text(a) == generate.to_text(b)
    assert generate.to_text(a) != generate.to_text(generate.generate(1000, seed=3))
    assert a.counts()["op_records"] == 1000


def test_realistic_shape():
    text = generate.to_text(generate.generate(1000, seed=0))
    for needle in (
        'device: "/job:localhost/replica:0/task:0/device:GPU:0"',
        'device: "/device:GPU:0/stream:all"',
        'device: "/device:GPU:0/memcpy"',
        "allocation_records {",
        "allocation_description {",
        ":MEMCPYHtoD",
        ":MEMCPYDtoH",
        ":Snapshot:MEMCPYDtoD",
        "FusedBatchNormV3:1",
        "= NoOp(^",
    ):
        assert needle in text, needle


def running_sum_peaks(trace: generate.Trace) -> dict:
    """Independent of the generator's own reference: one pass over the raw
    records, frees before allocations at one time, the first maximum."""
    out = {}
    for allocator, events in trace.allocation_events().items():
        by_time: dict = {}
        for t, b in events:
            by_time.setdefault(t, []).append(b)
        live, peak, at = 0, None, None
        for t in sorted(by_time):
            live += sum(by_time[t])  # the value after all events at t
            if peak is None or live > peak:
                peak, at = live, t
        out[allocator] = (peak, float(at - trace.origin))
    return out


def test_peak_memory_matches_running_sum_of_records(graph, tmp_path):
    from tracegraph.ingest.pipeline import ingest
    from tracegraph.queries.run import run_analysis

    trace = generate.generate(1000, seed=0)
    files = generate.write(trace, tmp_path)
    expected = running_sum_peaks(trace)
    assert expected == trace.peak_memory()
    for path, name in ((files["text"], "bench-gen-text"), (files["binary"], "bench-gen-binary")):
        ingest(graph, [path], name)
        res = run_analysis(graph, "peak-memory", name)
        got: dict = {}
        for r in res.records():
            peak, at, total = got.get(r["allocator"], (r["peak_bytes"], r["peak_at_us"], 0))
            got[r["allocator"]] = (peak, at, total + r["bytes"])
        assert set(got) == set(expected)
        for allocator, (peak, at) in expected.items():
            assert got[allocator] == (peak, at, peak), allocator  # rows sum to the peak
