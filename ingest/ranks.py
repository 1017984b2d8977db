"""Per rank of a job: time in communication, in computation, and both at
once (the ``Rank`` nodes behind ``comm-compute-overlap``).

Communication hidden behind computation costs the step nothing; exposed
communication is time the rank did nothing else. The shares are interval
arithmetic over the whole trace, done here once (Cypher does running
unions badly).

A rank is the ``rank`` the format gives an op and a device (several rank
files ingested as one trace); a trace of one rank is rank 0.
A rank with device kernels is measured on its devices (``mode`` gpu):
communication = its communication kernels (kind ``communication``: NCCL,
RCCL, MSCCL(++), DeepEP, NVSHMEM, ... by
:func:`~tracegraph.ingest.formats.kit.is_communication_kernel`), computation =
its compute kernels (copies and memsets are neither). A rank without
kernels is measured on its host (``mode`` cpu): communication = its ops of
phase ``communication`` (``c10d::`` calls, ``gloo:`` / ``nccl:`` regions,
``record_param_comms``), computation = its other ops that do work (role
``op``: not annotations, runtime or blocking calls). Each side is the union
of its intervals (overlapping ones count once), so threads and streams
working at once count once.

Every trace with times gets its ranks (steps for traces timed in steps); ``comm-compute-overlap``
answers only for traces with communication (the ``communication`` fact).
Each rank also lists its lanes' idle time by cause (:mod:`idle`): its
streams when it has kernels, else its host threads.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracegraph import schema
from tracegraph.ingest import idle
from tracegraph.ingest.formats.kit import Role
from tracegraph.ingest.frames import Row, TraceFrames, frame
from tracegraph.ingest.intervals import covered, union_intervals

RANK_COLUMNS = schema.TABLE["ranks"].names()


def ranks(column: pd.Series) -> np.ndarray:
    """A ``rank`` column as int64 ranks (absent: 0, a trace of one rank)."""
    return pd.to_numeric(column, errors="coerce").fillna(0).to_numpy(dtype=np.int64)


def op_ranks(tf: TraceFrames) -> np.ndarray:
    """The rank of each op."""
    return ranks(tf.ops["rank"])


def kernel_ranks(tf: TraceFrames, streams: pd.Series) -> np.ndarray:
    """The rank of each kernel, given its stream uid: its device's."""
    device_rank = pd.Series(ranks(tf.devices["rank"]), index=tf.devices["uid"].to_numpy(dtype=object))
    stream_device = pd.Series(
        tf.streams["device"].to_numpy(dtype=object), index=tf.streams["uid"].to_numpy(dtype=object)
    )
    return ranks(streams.map(stream_device).map(device_rank))


def rank_table(tf: TraceFrames) -> bool:
    """Set ``tf.ranks`` (a row per rank of a trace with times);
    whether the trace has communication."""
    ops, kernels = tf.ops, tf.kernels
    if tf.time_unit not in ("us", "step") or not (len(ops) or len(kernels)):
        tf.ranks = frame([], RANK_COLUMNS)
        return False
    k_comm = (kernels["kind"] == "communication").to_numpy()
    o_comm = (ops["phase"] == "communication").to_numpy()
    device_name = dict(zip(tf.devices["uid"].tolist(), tf.devices["name"].tolist()))
    k_rank = kernel_ranks(tf, kernels["stream"])
    lane = [
        t if isinstance(t, str) else str(device_name.get(d, d) if isinstance(d, str) else "host")
        for t, d in zip(ops["thread"].tolist(), ops["device"].tolist())
    ]
    o_rank = op_ranks(tf)
    k_start = pd.to_numeric(kernels["start_us"], errors="coerce").to_numpy(float)
    k_end = pd.to_numeric(kernels["end_us"], errors="coerce").to_numpy(float)
    o_start = pd.to_numeric(ops["start_us"], errors="coerce").to_numpy(float)
    o_end = pd.to_numeric(ops["end_us"], errors="coerce").to_numpy(float)
    k_compute = (kernels["kind"] == "compute").to_numpy()
    o_work = (ops["role"].fillna(Role.OP.value) == Role.OP.value).to_numpy() & ~o_comm
    o_work &= ops["executed"].fillna(True).astype(bool).to_numpy()
    waits = _waits(tf)
    streams = idle.stream_lanes(tf, waits) if len(kernels) else {}
    stream_rank = dict(zip(kernels["stream"].tolist(), k_rank.tolist()))
    rows: list[Row] = []
    for rank in sorted(set(o_rank.tolist()) | set(k_rank.tolist())):
        on_gpu = bool((k_rank == rank).any())
        if on_gpu:
            mine = k_rank == rank
            comm = union_intervals(k_start[mine & k_comm], k_end[mine & k_comm])
            work = union_intervals(k_start[mine & k_compute], k_end[mine & k_compute])
            lanes = [
                lane_ for s, lane_ in sorted(streams.items(), key=lambda x: x[1].name) if stream_rank.get(s) == rank
            ]
        else:
            mine = o_rank == rank
            comm = union_intervals(o_start[mine & o_comm], o_end[mine & o_comm])
            work = union_intervals(o_start[mine & o_work], o_end[mine & o_work])
            lanes = sorted(idle.thread_lanes(tf, np.flatnonzero(mine), lane, waits).values(), key=lambda x: x.name)
        comm_us = float((comm[1] - comm[0]).sum())
        overlap_us = float(covered(work[0], work[1], comm[0], comm[1]).sum())
        rows.append(
            {
                "uid": f"rank:{rank}",
                "rank": rank,
                "mode": "gpu" if on_gpu else "cpu",
                "comm_us": comm_us,
                "compute_us": float((work[1] - work[0]).sum()),
                "overlap_us": overlap_us,
                "exposed_comm_us": max(0.0, comm_us - overlap_us),
                **{column: [getattr(x, field) for x in lanes] or None for column, field in LANE_FIELDS.items()},
            }
        )
    tf.ranks = frame(rows, RANK_COLUMNS)
    return bool(k_comm.any() or o_comm.any())


# Rank column -> the Lane field it lists, one entry per lane.
LANE_FIELDS = {
    "lanes": "name",
    "lane_kinds": "kind",
    "lane_window_us": "window_us",
    "idle_us": "idle_us",
    "idle_collective_us": "collective_us",
    "idle_sync_us": "sync_us",
    "idle_host_us": "host_us",
    "idle_other_us": "other_us",
}


def _waits(tf: TraceFrames) -> dict[str, float]:
    """Each joined call's (op or kernel uid) wait for its collective's last rank."""
    j = tf.joins
    if j is None or j.empty:
        return {}
    out = {}
    for op, kernel, wait in zip(j["op"].tolist(), j["kernel"].tolist(), j["wait_us"].tolist()):
        out[kernel if isinstance(kernel, str) else op] = float(wait)
    return out
