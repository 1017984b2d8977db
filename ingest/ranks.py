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

A rank with kernels also has its whole device span (its first kernel's
start to its last kernel's end) broken down as :mod:`.device_time` says
(``device_*``: what TraceLens's ``gpu_timeline`` reports for a trace).

Every trace with times gets its ranks (steps for traces timed in steps); ``comm-compute-overlap``
answers only for traces with communication (the ``communication`` fact).
Each rank also lists its lanes' idle time by cause (:mod:`idle`): its
streams when it has kernels, else its host threads.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from tracegraph.columns import Strings, values
from tracegraph.ingest import device_time
from tracegraph.ingest.collectives import rank_of_kernels, rank_of_ops
from tracegraph.ingest.columnar import ColumnarTrace, codes_of, executed, num, refs
from tracegraph.ingest.idle import NONE_SEGMENTS, Lane, breakdown, gaps
from tracegraph.ingest.intervals import covered, union_intervals

F64 = npt.NDArray[np.float64]
# The device time figures a rank with kernels stores, as ``device_<column>``.
DEVICE_COLUMNS = ("window_us", *(f"{figure}_us" for figure in device_time.FIGURES))
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


def rank_rows(ct: ColumnarTrace, waits: dict[tuple[str, int], float]) -> tuple[list[dict[str, Any]], bool]:
    """The Rank rows of the ranks ``ct`` holds (``waits``: each joined
    call's (table, row) -> its wait for its collective's last rank), and
    whether ``ct`` has communication."""
    ops, k = ct["ops"], ct["kernels"]
    if ct.time_unit not in ("us", "step") or not (ops.n or k.n):
        return [], False
    k_comm = codes_of(k["kind"], "communication") if k.n else np.zeros(0, bool)
    o_comm = codes_of(ops["phase"], "communication")
    k_rank = rank_of_kernels(ct)
    o_rank = rank_of_ops(ct)
    k_start, k_end = num(k["start_us"]), num(k["end_us"])
    o_start, o_end = num(ops["start_us"]), num(ops["end_us"])
    k_compute = codes_of(k["kind"], "compute") if k.n else np.zeros(0, bool)
    streams = stream_lanes(ct, waits) if k.n else {}
    stream_rank = {}
    for s, r in zip(refs(k["stream"]).tolist(), k_rank.tolist()):
        stream_rank[s] = r
    host: tuple[npt.NDArray[np.bool_], list[str]] | None = None  # made for a rank without device work only
    rows: list[dict[str, Any]] = []
    for rank in sorted(set(o_rank.tolist()) | set(k_rank.tolist())):
        on_gpu = bool((k_rank == rank).any())
        if on_gpu:
            mine = k_rank == rank
            comm = union_intervals(k_start[mine & k_comm], k_end[mine & k_comm])
            work = union_intervals(k_start[mine & k_compute], k_end[mine & k_compute])
            lanes = [ln for s, ln in sorted(streams.items(), key=lambda x: x[1].name) if stream_rank.get(s) == rank]
        else:
            if host is None:
                role = values(ops["role"])
                host = (
                    np.asarray([r is None or r == "op" for r in role], dtype=bool) & ~o_comm & executed(ct),
                    op_lanes(ct),
                )
            o_work, lane_names = host
            mine = o_rank == rank
            comm = union_intervals(o_start[mine & o_comm], o_end[mine & o_comm])
            work = union_intervals(o_start[mine & o_work], o_end[mine & o_work])
            lanes = sorted(thread_lanes(ct, np.flatnonzero(mine), lane_names, waits).values(), key=lambda x: x.name)
        comm_us = float((comm[1] - comm[0]).sum())
        overlap_us = float(covered(work[0], work[1], comm[0], comm[1]).sum())
        device: dict[str, float] = {}
        if on_gpu:  # the rank's whole device span, broken down (TraceLens's gpu_timeline)
            mine = k_rank == rank
            w0, w1 = float(np.nanmin(k_start[mine])), float(np.nanmax(k_end[mine]))
            device = device_time.breakdown(device_time.kernel_sets(ct, mine), w0, w1)
        rows.append(
            {
                "uid": f"rank:{rank}",
                "rank": rank,
                "mode": "gpu" if on_gpu else "cpu",
                "comm_us": comm_us,
                "compute_us": float((work[1] - work[0]).sum()),
                "overlap_us": overlap_us,
                "exposed_comm_us": max(0.0, comm_us - overlap_us),
                **{f"device_{c}": device.get(c) for c in DEVICE_COLUMNS},
                **{column: [getattr(x, f) for x in lanes] or None for column, f in LANE_FIELDS.items()},
            }
        )
    return rows, bool(k_comm.any() or o_comm.any())


def op_lanes(ct: ColumnarTrace) -> list[str]:
    """Each op's lane: its thread, else its device's name ("host" without one)."""
    ops = ct["ops"]
    thread = values(ops["thread"])
    dev_names = values(ct["devices"]["name"])
    device = refs(ops["device"]).tolist()
    return [t if isinstance(t, str) else (str(dev_names[d]) if d >= 0 else "host") for t, d in zip(thread, device)]


def stream_lanes(ct: ColumnarTrace, waits: dict[tuple[str, int], float]) -> dict[int, Lane]:
    """Per stream row (lanes named ``device/stream``)."""
    k, st = ct["kernels"], ct["streams"]
    dev_names = values(ct["devices"]["name"])
    labels = [f"{dev_names[d] if d >= 0 else ''}/{s}" for d, s in zip(refs(st["device"]).tolist(), values(st["name"]))]
    start, end = num(k["start_us"]), num(k["end_us"])
    o_start = num(ct["ops"]["start_us"])
    launch = refs(k["launch"])
    launch_at = np.where(launch >= 0, o_start[np.maximum(launch, 0)], np.nan) if len(o_start) else np.full(k.n, np.nan)
    held = np.full(k.n, -np.inf)
    sy = ct["syncs"]
    sw = codes_of(sy["kind"], "stream_wait")
    for s, d in zip(refs(sy["src"])[sw].tolist(), refs(sy["dst"])[sw].tolist()):
        held[d] = max(held[d], end[s])
    wait_of = np.zeros(k.n)
    for (table, row), w in waits.items():
        if table == "kernels":
            wait_of[row] = w
    stream = refs(k["stream"])
    out: dict[int, Lane] = {}
    order = np.argsort(stream, kind="stable")
    bounds = np.flatnonzero(np.r_[True, stream[order][1:] != stream[order][:-1]])
    for a, b in zip(bounds.tolist(), np.r_[bounds[1:], len(order)].tolist()):
        idx = order[a:b]
        idx = idx[~(np.isnan(start[idx]) | np.isnan(end[idx]))]
        if len(idx) == 0:
            continue
        idx = idx[np.lexsort((end[idx], start[idx]))]
        s, e = start[idx], np.maximum(end[idx], start[idx])
        busy_until = np.concatenate([[-np.inf], np.maximum.accumulate(e)[:-1]])
        gap_from = np.maximum(busy_until, s[0])
        wait = np.minimum(wait_of[idx], e - s)
        sync_to = held[idx]
        host_to = launch_at[idx]
        sid = int(stream[idx[0]])
        out[sid] = breakdown(
            labels[sid],
            "stream",
            union_intervals(s, e),
            union_intervals(s[wait > 0], (s + wait)[wait > 0]),
            gaps(gap_from, np.minimum(sync_to, s)),
            gaps(gap_from, np.minimum(np.nan_to_num(host_to, nan=-np.inf), s)),
        )
    return out


def thread_lanes(
    ct: ColumnarTrace, rows: npt.NDArray[np.intp], lane: list[str], waits: dict[tuple[str, int], float]
) -> dict[str, Lane]:
    """Per host thread (``lane`` per op) of the ops at ``rows``."""
    ops = ct["ops"]
    start = num(ops["start_us"])[rows]
    end = num(ops["end_us"])[rows]
    role = np.asarray(["op" if r is None else r for r in values(ops["role"])], dtype=object)[rows]
    ok = ~(np.isnan(start) | np.isnan(end)) & (role != "annotation") & executed(ct)[rows]
    wait = np.asarray([waits.get(("ops", int(r)), 0.0) for r in rows.tolist()])
    names = [lane[r] for r in rows.tolist()]
    out: dict[str, Lane] = {}
    by: dict[str, list[int]] = {}
    for i, nm in enumerate(names):
        by.setdefault(nm, []).append(i)
    for thread in sorted(by):
        idx = np.asarray(by[thread], dtype=np.int64)
        idx = idx[ok[idx]]
        if len(idx) == 0:
            continue
        s, e = start[idx], np.maximum(end[idx], start[idx])
        w, blocking = wait[idx], role[idx] == "sync"
        out[thread] = breakdown(
            thread,
            "thread",
            union_intervals(s, e),
            union_intervals(s[w > 0], (s + w)[w > 0]),
            union_intervals(s[blocking], e[blocking]),
            NONE_SEGMENTS,
            union_intervals(s[w > 0], np.minimum(s + w, e)[w > 0]),
        )
    return out


def _unused(x: Strings) -> Strings:
    return x
