"""How a collective shapes a job's observed critical path and idle time,
on 2-rank traces built by hand (tests/kineto_builder), worked out by hand.

GPU: rank 0's aten::mm [0, 105) issues (cudaLaunchKernel [100, 102)) an
NCCL all-reduce kernel [105, 200); rank 1's nccl:all_reduce [150, 155)
issues (launch [151, 153)) its kernel [160, 200). Rank 0's kernel waits
55 us for rank 1's, then both transfer for 40 us.

CPU: rank 0 calls c10d::allreduce_ [0, 5) and computes (aten::mm
[10, 90)); rank 1 computes (aten::add [0, 50)) and calls [50, 55). Rank 0
waits 50 us for rank 1, but asynchronously: it is busy computing when
rank 1 arrives.
"""

from __future__ import annotations

import pytest

from tests import kineto_builder
from tracegraph.ingest.pipeline import ingest
from tracegraph.queries.run import run_analysis

x = kineto_builder._x
NCCL = "ncclKernel_AllReduce_RING_LL_Sum_float"


def job(tmp_path, name, per_rank):
    files = []
    for rank, events in enumerate(per_rank):
        doc = kineto_builder.document(rank=rank)
        doc["traceEvents"] = events
        files.append(kineto_builder.write(tmp_path / f"{name}.rank{rank}.json.gz", doc))
    return files


def gpu_job(tmp_path):
    kernel = dict(tid=9, device=0, stream=9, pid=0)
    return job(
        tmp_path,
        "gpu",
        [
            [
                x("cpu_op", "aten::mm", 0, 105),
                x("cuda_runtime", "cudaLaunchKernel", 100, 2, correlation=1),
                x("kernel", NCCL, 105, 95, correlation=1, **kernel),
            ],
            [
                x("cpu_op", "nccl:all_reduce", 150, 5),
                x("cuda_runtime", "cudaLaunchKernel", 151, 2, correlation=1),
                x("kernel", NCCL, 160, 40, correlation=1, **kernel),
            ],
        ],
    )


def cpu_job(tmp_path):
    return job(
        tmp_path,
        "cpu",
        [
            [x("cpu_op", "c10d::allreduce_", 0, 5), x("cpu_op", "aten::mm", 10, 80)],
            [x("cpu_op", "aten::add", 0, 50), x("cpu_op", "c10d::allreduce_", 50, 5)],
        ],
    )


def segments(graph, trace):
    res = run_analysis(graph, "observed-critical-path", trace)
    return [dict(zip(res.columns, r)) for r in res.rows]


def test_a_waiting_kernel_keeps_the_transfer_after_the_last_arrival(graph, tmp_path):
    """Path: aten::mm until its launch (100) + the launch delay (5) + the
    kernel waiting (55, not counted) + the transfer after rank 1 arrived
    (40): 145 us of a 200 us job."""
    ingest(graph, gpu_job(tmp_path), "edges-gpu")
    facts = graph.trace_facts("edges-gpu")
    assert (facts["collectives"], facts["collective_calls_unmatched"]) == (1, 0)
    assert facts["observed_path_us"] == pytest.approx(145)
    path = [(s["event"], s["kind"], s["start_us"], s["dur_us"], s["counted"]) for s in segments(graph, "edges-gpu")]
    assert path[-2:] == [
        (NCCL, "communication", pytest.approx(105), pytest.approx(55), False),
        (NCCL, "communication", pytest.approx(160), pytest.approx(40), True),
    ]
    assert all(s[2] < 160 for s in path[:-1])  # the transfer is the path's end, on rank 0
    stragglers = run_analysis(graph, "stragglers", "edges-gpu", {"min_caused_us": 0.0})
    assert [(r[2], r[3], r[4], r[5]) for r in stragglers.rows] == [(1, 55.0, 0, 55.0), (1, 55.0, 1, 0.0)]


def test_a_rank_busy_when_the_last_arrives_did_not_wait(graph, tmp_path):
    """Rank 0 computes through rank 1's arrival: its matmul is not made to
    wait for the collective. Path: rank 0's call (5) and matmul (80), 85 us;
    one leg, on rank 0."""
    ingest(graph, cpu_job(tmp_path), "edges-cpu")
    assert graph.trace_facts("edges-cpu")["observed_path_us"] == pytest.approx(85)
    legs = run_analysis(graph, "job-critical-path", "edges-cpu").rows
    assert [(leg[0], leg[1], leg[5]) for leg in legs] == [(0, 0, pytest.approx(85))]


def test_idle_of_a_thread_that_worked_while_it_waited(graph, tmp_path):
    """Rank 0's thread: window [0, 90), work 85 less its wait inside the call
    [0, 5): idle 10, all of it in the collective's wait ([0, 5) in the call,
    [5, 10) before the matmul); the matmul inside the wait is work. Rank 1:
    no idle."""
    ingest(graph, cpu_job(tmp_path), "edges-idle")
    res = run_analysis(graph, "idle-breakdown", "edges-idle")
    got = [(r[0], r[3], r[4], r[5], r[6], r[7], r[8]) for r in res.rows]
    assert got == [(0, 90, 10, 10, 0, 0, 0), (1, 55, 0, 0, 0, 0, 0)]


def meta(collective, group, ranks):
    return {"Collective name": collective, "Process Group Name": group, "Process Group Ranks": ranks}


def test_process_groups_from_the_kernels_metadata(graph, tmp_path):
    """Two groups whose calls the ranks make in opposite orders join by
    group; a SendRecv kernel serving all_to_all is point-to-point; ROCm's
    Generic kernel names no collective; a group with a rank whose file is
    missing (2) joins nothing and its calls are counted."""
    kernel = dict(tid=9, device=0, stream=9, pid=0)

    def rank_events(order):
        out = []
        for i, (name, args) in enumerate(order):
            out += [
                x("cuda_runtime", "cudaLaunchKernel", 10 * i, 2, correlation=i + 1),
                x("kernel", name, 10 * i + 3, 5, correlation=i + 1, **kernel, **args),
            ]
        return out

    reduce_ = ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)", meta("allreduce", "0", "[0, 1]"))
    gather = ("ncclDevKernel_AllGather_RING_LL(x)", meta("_allgather_base", "1", "[0, 1]"))
    a2a = ("ncclDevKernel_SendRecv(x)", meta("all_to_all", "0", "[0, 1]"))
    generic = ("ncclDevKernel_Generic(x)", {})
    wide = ("ncclDevKernel_Broadcast_RING_LL(x)", meta("broadcast", "2", "[0, 1, 2]"))
    files = job(
        tmp_path,
        "groups",
        [rank_events([reduce_, gather, a2a, generic, wide]), rank_events([gather, a2a, reduce_, generic, wide])],
    )
    ingest(graph, files, "groups")
    facts = graph.trace_facts("groups")
    assert (facts["collectives"], facts["collective_calls_unmatched"]) == (2, 2)
    rows = graph.run(
        "MATCH (k:Kernel)-[j:JOINS]->(c:Collective {trace: $trace}) "
        "RETURN c.uid, c.name, c.process_group, c.seq, count(k) ORDER BY c.uid",
        trace="groups",
    ).rows
    assert rows == [["coll:0:0", "allreduce", "0", 0, 2], ["coll:1:0", "_allgather_base", "1", 0, 2]]
    res = run_analysis(graph, "stragglers", "groups", {"min_caused_us": 0.0})
    assert {(r[res.columns.index("process_group")], r[1]) for r in res.rows} == {
        ("0", "allreduce"),
        ("1", "_allgather_base"),
    }


def test_one_rank_with_nccl_kernels_misses_nothing(graph, tmp_path):
    ingest(graph, gpu_job(tmp_path)[:1], "one-nccl")
    facts = graph.trace_facts("one-nccl")
    assert (facts["collectives"], facts["collective_calls_unmatched"]) == (0, 0)


def test_edges_running_backwards_in_time_are_dropped_to_break_a_cycle():
    """The observed path's graph has a cycle only through clock skew between
    records: its pass drops the edges that run backwards in time and tries
    again. Four nodes at 0, 10, 5 and 20 us; 1 -> 2 runs backwards and closes
    the cycle 1 -> 2 -> 1; what is left: 0 -> 1 (10 us), 2 -> 1, 2 -> 3
    (15 us): the path is 2 -> 3."""
    import numpy as np

    from tracegraph.ingest import hb, observed_path

    edges = [
        (0, 1, 10.0, hb.K_CPU, 100),
        (1, 2, 0.0, hb.K_IDLE, 101),
        (2, 1, 5.0, hb.K_SYNC, 102),
        (2, 3, 15.0, hb.K_KERNEL, 103),
    ]
    src, dst, w, kind, elem = (np.array(c) for c in zip(*edges))
    none = np.zeros(0, dtype=np.int64)
    g = hb.Graph(none, none, np.array([0.0, 10.0, 5.0, 20.0]), src, dst, w.astype(float), kind, elem, 4)
    best, pred, _ = hb.forward(g)
    path, _ = hb.walk_back(pred, g.src, hb.path_end(g, best))
    seg = observed_path.segments(g, np.asarray(path))
    rows = list(
        zip(
            seg.elem.tolist(),
            [hb.KINDS[k] for k in seg.kind],
            seg.start.tolist(),
            seg.dur.tolist(),
            seg.counted.tolist(),
        )
    )
    assert rows == [(103, "kernel", 5.0, 15.0, True)]
