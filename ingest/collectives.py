"""Collectives joined across ranks: the same all-reduce on every rank is one
event of the job.

In a multi-rank trace (several PyTorch rank files ingested as one trace,
ops' threads named ``rank<r>/pid:tid``), a rank's *collective calls* are
its outermost ``c10d::`` ops: the host-side call torch.distributed makes
for every collective (``c10d::allreduce_``, ``c10d::barrier``,
``c10d::broadcast_``, ...; a ``c10d::`` op nested in another is part of
it). Point-to-point calls (``c10d::send``, ``c10d::recv_``,
``c10d::recv_any_source_``) are not collectives and are left out.

Matching. torch.distributed requires every rank to call collectives in
the same order, so the k-th collective call of every rank is collective
``k``, for as long as every rank has a k-th call and all of them have the
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
are off by up to that skew.

Values, per collective: a rank *arrives* when its call starts; the
collective cannot complete on any rank before the last arrival, so a rank
waits ``last arrival - its arrival`` (``JOINS.wait_us``), the last rank
none. ``caused_us`` is the last arrival minus the arrival before it: how
much later the collective could complete because of the last rank alone.
On a tie for last, the lowest rank is ``last_rank`` and ``caused_us`` is 0.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from tracegraph import schema
from tracegraph.ingest.frames import Row, TraceFrames, frame

_RANK = re.compile(r"^rank(\d+)/")
POINT_TO_POINT = frozenset({"c10d::send", "c10d::recv_", "c10d::recv_any_source_"})

COLLECTIVE_COLUMNS = schema.TABLE["collectives"].names()
JOIN_COLUMNS = schema.TABLE["joins"].names()


def join_collectives(tf: TraceFrames) -> dict[str, int | bool]:
    """Set ``tf.collectives`` and ``tf.joins``; the Trace's counts."""
    calls = _calls(tf.ops)
    collectives: list[Row] = []
    joins: list[Row] = []
    unmatched = 0
    if len(calls) >= 2:  # one rank: nothing to join, nothing missed
        ranks = sorted(calls)
        k = 0
        while k < min(len(c) for c in calls.values()):
            names = {calls[r][k][1] for r in ranks}
            if len(names) != 1:
                break
            times = np.array([calls[r][k][2] for r in ranks], dtype=float)
            last = int(np.argmax(times))  # the first maximum: the lowest rank on a tie
            waits = times[last] - times
            uid = f"coll:{k}"
            collectives.append(
                {
                    "uid": uid,
                    "name": names.pop(),
                    "seq": k,
                    "ranks": len(ranks),
                    "last_rank": ranks[last],
                    "first_arrival_us": float(times.min()),
                    "last_arrival_us": float(times[last]),
                    "caused_us": float(times[last] - np.sort(times)[-2]),
                    "waited_us": float(waits.sum()),
                }
            )
            joins += [
                {"op": calls[r][k][0], "collective": uid, "rank": r, "wait_us": float(w)} for r, w in zip(ranks, waits)
            ]
            k += 1
        unmatched = sum(len(c) - k for c in calls.values())
    tf.collectives = frame(collectives, COLLECTIVE_COLUMNS)
    tf.joins = frame(joins, JOIN_COLUMNS)
    return {
        "has_collectives": bool(collectives),
        "collectives": len(collectives),
        "collective_calls_unmatched": unmatched,
    }


def _calls(ops: pd.DataFrame) -> dict[int, list[tuple[str, str, float]]]:
    """Per rank, its collective calls ``(op uid, name, start)`` in start order."""
    names = ops["name"].astype(str)
    c10d = names.str.startswith("c10d::")
    if not c10d.any():
        return {}
    outermost = c10d & ~names.isin(POINT_TO_POINT) & ~ops["parent"].isin(set(ops.loc[c10d, "uid"]))
    calls: dict[int, list[tuple[str, str, float]]] = {}
    chosen = ops[outermost]
    for uid, name, thread, start in zip(chosen["uid"], chosen["name"], chosen["thread"], chosen["start_us"]):
        found = _RANK.match(str(thread or ""))
        if found is not None and pd.notna(start):
            calls.setdefault(int(found.group(1)), []).append((str(uid), str(name), float(start)))
    for c in calls.values():
        c.sort(key=lambda call: (call[2], call[0]))
    return calls
