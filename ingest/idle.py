"""Idle time per lane (a device stream, or a host thread of a rank without
kernels), split by what it waited for: the rows behind ``idle-breakdown``.

A lane's *window* runs from its first event's start to its last event's
end. Its *work* is the union of its events (kernels on a stream; ops doing
work on a thread, not annotations) minus the time spent waiting inside
them: inside a collective call before its last rank arrived, and inside a
blocking call. Idle time is the window minus the work, each piece of it
given to the first cause that covers it:

1. ``collective``: waiting for another rank. On a stream, a joined NCCL
   kernel from its start until its collective's last arrival; on a thread,
   a joined host call from its start until the last arrival (the wait goes
   on after an asynchronous call returns; ops the thread ran meanwhile
   are work all the same).
2. ``sync``: waiting on a synchronization. On a stream, the gap before a
   kernel that a ``cudaStreamWaitEvent`` held back, until the kernel it
   waited for ended; on a thread, a blocking call (role ``sync``:
   ``cudaStreamSynchronize``, ...).
3. ``host`` (streams only): waiting for the host to launch: the gap before
   a kernel, until its runtime call (``cudaLaunchKernel``, ...) started.
4. ``other``: the rest (the host busy elsewhere, the profiler's window,
   dependencies the trace does not record).

The four add up to ``idle_us`` = window - work.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from tracegraph.ingest.formats.kit import Role
from tracegraph.ingest.frames import TraceFrames
from tracegraph.ingest.intervals import inside, pieces, union_intervals

Segments = tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]
_NONE: Segments = (np.zeros(0), np.zeros(0))


@dataclass(frozen=True)
class Lane:
    """One lane's idle breakdown (us)."""

    name: str
    kind: str  # stream / thread
    window_us: float
    idle_us: float
    collective_us: float
    sync_us: float
    host_us: float
    other_us: float


def breakdown(
    name: str,
    kind: str,
    work: Segments,
    waiting: Segments,
    sync: Segments,
    host: Segments,
    waiting_inside: Segments | None = None,
) -> Lane:
    """The lane's idle time by cause: ``work`` the union of its events,
    ``waiting`` / ``sync`` / ``host`` the spans each cause explains;
    ``waiting_inside`` the part of ``waiting`` inside the waiting calls
    themselves (default: all of it), which is not work."""
    inner = waiting if waiting_inside is None else waiting_inside
    if len(work[0]) == 0:
        return Lane(name, kind, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    lo, hi = float(work[0][0]), float(work[1][-1])
    window: Segments = (np.array([lo]), np.array([hi]))
    mid, length = pieces(window, work, waiting, sync, host, inner)
    in_window = inside(*window, mid)
    in_wait, in_sync = inside(*waiting, mid), inside(*sync, mid)
    idle = in_window & ~(inside(*work, mid) & ~inside(*inner, mid) & ~in_sync)
    coll = idle & in_wait
    syn = idle & ~in_wait & in_sync
    hst = idle & ~in_wait & ~in_sync & inside(*host, mid)
    other = idle & ~coll & ~syn & ~hst
    return Lane(
        name,
        kind,
        hi - lo,
        float(length[idle].sum()),
        float(length[coll].sum()),
        float(length[syn].sum()),
        float(length[hst].sum()),
        float(length[other].sum()),
    )


def stream_lanes(tf: TraceFrames, waits: dict[str, float]) -> dict[str, Lane]:
    """Per stream uid (lanes named ``device/stream``); ``waits`` is each
    joined NCCL kernel's wait for its collective's last rank."""
    label = tf.stream_labels()
    k = tf.kernels
    start = pd.to_numeric(k["start_us"], errors="coerce").to_numpy(float)
    end = pd.to_numeric(k["end_us"], errors="coerce").to_numpy(float)
    op_start = dict(zip(tf.ops["uid"].tolist(), pd.to_numeric(tf.ops["start_us"], errors="coerce").tolist()))
    launch_at = np.array([op_start.get(u, np.nan) if isinstance(u, str) else np.nan for u in k["launch"].tolist()])
    uids = k["uid"].tolist()
    end_of = dict(zip(uids, end.tolist()))
    held: dict[str, float] = {}
    sw = tf.syncs[tf.syncs["kind"] == "stream_wait"]
    for src, dst in zip(sw["src"].tolist(), sw["dst"].tolist()):
        held[dst] = max(held.get(dst, -np.inf), end_of.get(src, -np.inf))
    out: dict[str, Lane] = {}
    for key, idx in k.groupby("stream").indices.items():
        stream = str(key)
        idx = idx[~(np.isnan(start[idx]) | np.isnan(end[idx]))]
        if len(idx) == 0:
            continue
        idx = idx[np.lexsort((end[idx], start[idx]))]
        s, e = start[idx], np.maximum(end[idx], start[idx])
        busy_until = np.concatenate([[-np.inf], np.maximum.accumulate(e)[:-1]])
        gap_from = np.maximum(busy_until, s[0])
        wait = np.array([min(waits.get(uids[i], 0.0), e[j] - s[j]) for j, i in enumerate(idx)])
        sync_to = np.array([held.get(uids[i], -np.inf) for i in idx])
        host_to = launch_at[idx]
        out[stream] = breakdown(
            label.get(stream, stream),
            "stream",
            union_intervals(s, e),
            union_intervals(s[wait > 0], (s + wait)[wait > 0]),
            _gaps(gap_from, np.minimum(sync_to, s)),
            _gaps(gap_from, np.minimum(np.nan_to_num(host_to, nan=-np.inf), s)),
        )
    return out


def thread_lanes(
    tf: TraceFrames, rows: npt.NDArray[np.intp], lane: list[str], waits: dict[str, float]
) -> dict[str, Lane]:
    """Per host thread (``lane``, one per op: its thread, else its device)
    of the ops at positions ``rows``; ``waits`` is each joined host call's
    wait for its collective's last rank."""
    ops = tf.ops.iloc[rows]
    start = pd.to_numeric(ops["start_us"], errors="coerce").to_numpy(float)
    end = pd.to_numeric(ops["end_us"], errors="coerce").to_numpy(float)
    role = ops["role"].fillna(Role.OP.value).to_numpy()
    ok = ~(np.isnan(start) | np.isnan(end)) & (role != Role.ANNOTATION.value)
    ok &= ops["executed"].fillna(True).astype(bool).to_numpy()
    wait = np.array([waits.get(u, 0.0) for u in ops["uid"].tolist()])
    out: dict[str, Lane] = {}
    names = pd.Series([lane[r] for r in rows])
    for key, idx in names.groupby(names).indices.items():
        thread = str(key)
        idx = idx[ok[idx]]
        if len(idx) == 0:
            continue
        s, e = start[idx], np.maximum(end[idx], start[idx])
        w, blocking = wait[idx], role[idx] == Role.SYNC.value
        out[thread] = breakdown(
            thread,
            "thread",
            union_intervals(s, e),
            union_intervals(s[w > 0], (s + w)[w > 0]),
            union_intervals(s[blocking], e[blocking]),
            _NONE,
            union_intervals(s[w > 0], np.minimum(s + w, e)[w > 0]),
        )
    return out


def _gaps(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]) -> Segments:
    """The union of the spans ``[a, b)`` that are not empty."""
    keep = b > a
    return union_intervals(a[keep], b[keep])
