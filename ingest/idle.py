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

from tracegraph.ingest.intervals import inside, pieces, union_intervals

Segments = tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]
NONE_SEGMENTS: Segments = (np.zeros(0), np.zeros(0))


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


def gaps(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]) -> Segments:
    """The union of the spans ``[a, b)`` that are not empty."""
    keep = b > a
    return union_intervals(a[keep], b[keep])
