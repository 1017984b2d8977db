"""Collectives joined across ranks: the same all-reduce on every rank is one
event of the job.

In a multi-rank trace (several PyTorch rank files ingested as one trace,
each op and device with its ``rank``), a
rank's *collective calls* are its NCCL kernels when the trace has any,
SendRecv kernels (point-to-point traffic, all_to_all too) left out: the
collective waits and completes on the device. They are grouped by process
group (the kernel's ``Process Group Name``, which newer PyTorch records
with ``Process Group Ranks`` and ``Collective name``; one group, of every
rank of the trace, when absent) and named by ``Collective name``, else by
the kernel name (``ncclKernel_AllReduce_...``: ``AllReduce``).

Without NCCL kernels, a rank's collective calls are its ops the format
marks as such (``Op.collective``): for PyTorch the host-side call
torch.distributed makes for every collective (``c10d::allreduce_``,
``c10d::barrier``, ``c10d::broadcast_``, ...; a ``c10d::`` op nested in
another is part of it; point-to-point calls such as ``c10d::send`` are not
collectives).

Matching. torch.distributed requires every rank of a group to call its
collectives in the same order, so the k-th collective call of every rank
is collective ``k``, for as long as every rank has a k-th call and all of them have the
same name. From the first k where a rank has none or the names differ (a
profiler window that starts or ends mid-job on one rank, process groups
whose calls interleave differently on different ranks), no call is joined:
those calls are counted in the Trace's ``collective_calls_unmatched``,
never guessed. (The CPU traces of torch 2.14 carry no process-group or
sequence number on these ops, so call order is the rule; every rank's
calls are taken as one group, the default one.)

Clock. Ranks' times are the files' own (``baseTimeNanoseconds`` and
``ts``, see the Kineto format): ranks on one machine share its clock;
across machines the skew between their clocks is not corrected, so waits
are off by up to that skew. On GPU jobs the collectives say how large it
can be: an NCCL collective's kernels end together on every rank, so the
spread of their ends (``Collective.end_spread_us``; its median over the
job on the Trace, ``collective_end_spread_us``) bounds the skew, give or
take the transfer's own jitter.

Values, per collective: a rank *arrives* when its call starts; the
collective cannot complete on any rank before the last arrival, so a rank
waits ``last arrival - its arrival`` (``JOINS.wait_us``), the last rank
none. ``caused_us`` is the last arrival minus the arrival before it: how
much later the collective could complete because of the last rank alone.
On a tie for last, the lowest rank is ``last_rank`` and ``caused_us`` is 0.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from tracegraph import schema
from tracegraph.ingest.frames import Row, TraceFrames, frame
from tracegraph.ingest.ranks import kernel_ranks, op_ranks, ranks

# NCCL kernels of point-to-point traffic (lowercased collective names); all_to_all runs as these too.
POINT_TO_POINT_KERNELS = frozenset({"sendrecv", "send", "recv"})

COLLECTIVE_COLUMNS = schema.TABLE["collectives"].names()
JOIN_COLUMNS = schema.TABLE["joins"].names()


def join_collectives(tf: TraceFrames) -> dict[str, int | bool | float | None]:
    """Set ``tf.collectives`` and ``tf.joins``; the Trace's counts."""
    collectives: list[Row] = []
    joins: list[Row] = []
    unmatched = 0
    groups = _kernel_calls(tf)
    if groups:
        everyone = _ranks(tf)
        if len(everyone) >= 2:  # one rank: nothing to join, nothing missed
            for (group, members_text), (members, calls) in sorted(groups.items()):
                ranks = members if members is not None else everyone
                # uids: coll:<group>:<k>, the ranks' text standing in for a name not recorded
                tag = group or members_text or None
                unmatched += _join(calls, ranks, group or None, tag, "kernel", collectives, joins)
    else:
        calls = _calls(tf)
        if len(calls) >= 2:  # one rank: nothing to join, nothing missed
            unmatched = _join(calls, sorted(calls), None, None, "op", collectives, joins)
    tf.collectives = frame(collectives, COLLECTIVE_COLUMNS)
    tf.joins = frame(joins, JOIN_COLUMNS)
    spreads = [c["end_spread_us"] for c in collectives if c["end_spread_us"] is not None]
    return {
        "has_collectives": bool(collectives),
        "collectives": len(collectives),
        "collective_calls_unmatched": unmatched,
        "collective_end_spread_us": float(np.median(spreads)) if spreads else None,
    }


Calls = dict[int, list[tuple[str, str, float, float]]]  # rank -> its calls (uid, name, start, end), by start


def _join(
    calls: Calls, ranks: list[int], group: str | None, tag: str | None, column: str, out: list[Row], joins: list[Row]
) -> int:
    """Join the k-th call of every rank of ``ranks`` while all have one and
    agree on the name; append Collective and JOINS rows (uids
    ``coll:<k>``, or ``coll:<tag>:<k>`` for a process group); return how
    many calls were left unmatched."""
    k = 0
    if all(r in calls for r in ranks) and len(ranks) >= 2:
        while k < min(len(calls[r]) for r in ranks):
            names = {calls[r][k][1] for r in ranks}
            if len(names) != 1:
                break
            times = np.array([calls[r][k][2] for r in ranks], dtype=float)
            last = int(np.argmax(times))  # the first maximum: the lowest rank on a tie
            waits = times[last] - times
            uid = f"coll:{k}" if tag is None else f"coll:{tag}:{k}"
            out.append(
                {
                    "uid": uid,
                    "name": names.pop(),
                    "process_group": group,
                    "seq": k,
                    "ranks": len(ranks),
                    "last_rank": ranks[last],
                    "first_arrival_us": float(times.min()),
                    "last_arrival_us": float(times[last]),
                    "caused_us": float(times[last] - np.sort(times)[-2]),
                    "waited_us": float(waits.sum()),
                    # NCCL kernels of one collective end together on every rank: how far apart
                    # their ends are bounds how far apart the ranks' clocks are
                    "end_spread_us": float(np.ptp([calls[r][k][3] for r in ranks])) if column == "kernel" else None,
                }
            )
            other = "kernel" if column == "op" else "op"
            joins += [
                {column: calls[r][k][0], other: None, "collective": uid, "rank": r, "wait_us": float(w)}
                for r, w in zip(ranks, waits)
            ]
            k += 1
    # calls past the k-th of the group's ranks, and every call of a rank outside the group
    return sum(len(c) - (k if r in ranks else 0) for r, c in calls.items())


def _calls(tf: TraceFrames) -> Calls:
    """Per rank, its collective calls ``(op uid, name, start)`` in start order."""
    ops = tf.ops
    call = ops["collective"].notna().to_numpy()
    if not call.any():
        return {}
    calls: Calls = {}
    chosen = ops[call]
    for uid, name, rank, start, end in zip(
        chosen["uid"], chosen["collective"], op_ranks(tf)[call].tolist(), chosen["start_us"], chosen["end_us"]
    ):
        if pd.notna(start):
            calls.setdefault(int(rank), []).append((str(uid), str(name), float(start), float(end)))
    for c in calls.values():
        c.sort(key=lambda call: (call[2], call[0]))
    return calls


def _ranks(tf: TraceFrames) -> list[int]:
    """Every rank of the trace (of its ops on threads and its devices)."""
    threaded = tf.ops["thread"].notna().to_numpy()
    return sorted(set(op_ranks(tf)[threaded].tolist()) | set(ranks(tf.devices["rank"]).tolist()))


def _kernel_calls(tf: TraceFrames) -> dict[tuple[str, str], tuple[list[int] | None, Calls]]:
    """Per process group, keyed by its name and its ranks' text (``""``
    where not recorded: unnamed groups of different ranks stay apart), its
    ranks (when recorded) and each rank's collective NCCL kernels in start
    order."""
    k = tf.kernels
    comm = k[(k["kind"] == "communication") & k["collective"].notna()]
    comm = comm[~comm["collective"].astype(str).str.lower().isin(POINT_TO_POINT_KERNELS)]
    if comm.empty:
        return {}
    ranks = kernel_ranks(tf, comm["stream"])
    out: dict[tuple[str, str], tuple[list[int] | None, Calls]] = {}
    for uid, name, group, members, start, end, rank in zip(
        comm["uid"],
        comm["collective"],
        comm["process_group"],
        comm["group_ranks"],
        comm["start_us"],
        comm["end_us"],
        ranks.tolist(),
    ):
        if pd.isna(start):
            continue
        key = (group if isinstance(group, str) else "", members if isinstance(members, str) else "")
        entry = out.setdefault(key, (_group_ranks(members), {}))
        entry[1].setdefault(int(rank), []).append((str(uid), str(name), float(start), float(end)))
    for _, calls in out.values():
        for c in calls.values():
            c.sort(key=lambda call: (call[2], call[0]))
    return out


def _group_ranks(text: object) -> list[int] | None:
    """``"[0, 1, 2, 3]"`` as ranks; None when absent or cut short (PyTorch
    writes ``[0, 1, ..., 29, ...]`` for groups past 30 ranks)."""
    if not isinstance(text, str):
        return None
    try:
        ranks = json.loads(text)
    except ValueError:
        return None
    if not isinstance(ranks, list) or not all(isinstance(r, int) for r in ranks):
        return None
    return sorted(ranks)
