"""Unit tests of the ingest-time computations the analyses read (no database).

Interval unions, copy exposure, stream busy time and gaps, and the
reusable DAG passes, each against answers worked out by hand.
"""

from __future__ import annotations

import numpy as np
from analysis_traces import chain, small_gpu

from tracegraph.dag import dag_passes, dependency_dag
from tracegraph.ingest.enrich import covered, enrich, union_intervals


def test_union_intervals():
    a, b = union_intervals([10, 0, 40, 45, 60, 29, 70], [30, 10, 55, 50, 62, 31, 70])
    # [0,10) and [10,30) touch and merge; [29,31) overlaps; [70,70) is empty but still a (zero) segment.
    assert a.tolist() == [0, 40, 60, 70] and b.tolist() == [31, 55, 62, 70]
    a, b = union_intervals([], [])
    assert len(a) == len(b) == 0
    a, b = union_intervals([0, np.nan, 5], [1, 3, 6])
    assert a.tolist() == [0, 5] and b.tolist() == [1, 6]


def test_covered():
    segs = ([0, 40, 60], [30, 55, 62])
    got = covered(*segs, [20, 60, 72, -5, 0, 35], [40, 70, 77, 100, 62, 38])
    assert got.tolist() == [10, 2, 0, 30 + 15 + 2, 47, 0]
    assert covered([], [], [1], [2]).tolist() == [0]


def test_small_gpu_streams_and_copies():
    tf = small_gpu()
    enrich(tf)
    busy = dict(zip(tf.streams["name"] + "@" + tf.streams["device"], tf.streams["busy_us"]))
    assert busy == {
        "stream:1@dev:/device:GPU:0": 47.0,
        "stream:2@dev:/device:GPU:0": 10.0,
        "memcpy@dev:/device:GPU:0": 35.0,
        "memcpy@dev:/device:GPU:1": 14.0,
    }
    k = tf.kernels.set_index("uid")
    assert k.loc[["k:f1", "k:g1", "k:g2", "k:h1", "k:j1"], "exposed_us"].tolist() == [10.0, 8.0, 5.0, 10.0, 4.0]
    assert k.loc[k["kind"] == "compute", "exposed_us"].isna().all()
    # Gap after each kernel: next start minus the running max end on its stream.
    gaps = {u: (None if v is None or v != v else v) for u, v in k["gap_after_us"].items()}  # NaN: last on its stream
    assert {u: gaps[u] for u in ("k:a1", "k:b1", "k:d1", "k:d2", "k:i1", "k:f1", "k:g1", "k:g2", "k:h1")} == {
        "k:a1": 0.0,
        "k:b1": 10.0,
        "k:d1": 0.0,
        "k:d2": 5.0,
        "k:i1": None,
        "k:f1": 20.0,
        "k:g1": 2.0,
        "k:g2": None,
        "k:h1": 10.0,
    }


def test_copy_fully_hidden_and_stream_without_times():
    tf = small_gpu()
    # Move the HtoD copy inside [0,30): fully hidden behind stream:1/stream:2 compute.
    f1 = tf.kernels["uid"] == "k:f1"
    tf.kernels.loc[f1, ["start_us", "end_us"]] = [2.0, 28.0]
    enrich(tf)
    assert tf.kernels.loc[f1, "exposed_us"].item() == 0.0
    plain = chain(2)
    enrich(plain)
    assert "busy_us" in plain.streams.columns and "exposed_us" in plain.kernels.columns


def test_enrich_slack_and_path_small():
    tf = small_gpu()
    summary = enrich(tf)
    assert summary.props["critical_path_us"] == 60.0 and summary.props["critical_path_ops"] == 3
    ops = tf.ops.set_index("uid")
    assert ops["weight_us"].to_dict() == {
        "op:A": 10,
        "op:B": 30,
        "op:C": 5,
        "op:D": 20,
        "op:E": 4,
        "op:F": 20,
        "op:F2": 15,
        "op:H": 10,
        "op:I": 2,
        "op:J": 4,
        "op:K": 0,
        "op:L": 3,
    }
    slack = ops["slack_us"].dropna().to_dict()
    assert slack == {
        "op:A": 0,
        "op:B": 0,
        "op:C": 25,
        "op:D": 0,
        "op:E": 54,
        "op:F": 40,
        "op:F2": 45,
        "op:H": 50,
        "op:I": 54,
        "op:J": 56,
        "op:L": 57,
    }
    assert ops.loc["op:K", ["es_us", "slack_us"]].isna().all()
    assert ops["cp_step"].dropna().to_dict() == {"op:A": 0, "op:B": 1, "op:D": 2}


def test_dag_passes_from_plain_arrays():
    # The same DAG as small_gpu's A B C D, given as plain lists, edges in any order.
    uids = ["b", "a", "d", "c", "x"]
    dag = dependency_dag(
        uids,
        [1, 0, 3, 2, None],
        [True, True, True, True, False],
        [("c", "d"), ("a", "b"), ("b", "d"), ("a", "c"), ("x", "a")],
    )
    p = dag_passes(dag, [30.0, 10.0, 20.0, 5.0, 99.0])
    assert p.length == 60.0
    assert [uids[i] for i in p.path] == ["a", "b", "d"]
    assert p.slack[:4].tolist() == [0, 0, 0, 25]
    assert p.es[:4].tolist() == [10, 0, 40, 10] and p.ls[:4].tolist() == [10, 0, 40, 35]
    # Two equally heavy branches: the path takes the lower seq (b: 1, c: 2); both have slack 0.
    tie = dag_passes(dag, [5.0, 10.0, 20.0, 5.0, 0.0])
    assert tie.length == 35.0 and [uids[i] for i in tie.path] == ["a", "b", "d"]
    assert tie.slack[:4].tolist() == [0, 0, 0, 0]
