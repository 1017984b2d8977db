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
from dataclasses import dataclass, field

import numpy as np

from tracegraph.columns import Strings, take, values
from tracegraph.ingest.columnar import ColumnarTrace, codes_of, num, refs

# NCCL kernels of point-to-point traffic (lowercased collective names); all_to_all runs as these too.
POINT_TO_POINT_KERNELS = frozenset({"sendrecv", "send", "recv"})


@dataclass(frozen=True)
class Call:
    """One collective call: its table (``ops`` or ``kernels``) and row in
    its rank's tables, uid, name, start and end (us), and its happens-before
    element's node times (start, max(end, start); None: not on that graph)."""

    table: str
    row: int
    uid: str
    name: str
    start: float
    end: float
    on_graph: bool


@dataclass
class RankCalls:
    """A rank's collective calls: NCCL kernels per process group (keyed by
    its name and its ranks' text, "" where not recorded), and host calls;
    each in (start, uid) order. ``ranks``: the ranks this part holds."""

    ranks: set[int]
    kernel_groups: dict[tuple[str, str], dict[int, list[Call]]] = field(default_factory=dict)
    op_calls: dict[int, list[Call]] = field(default_factory=dict)


def rank_of_ops(ct: ColumnarTrace) -> np.ndarray:
    return np.nan_to_num(num(ct["ops"]["rank"]), nan=0.0).astype(np.int64)


def rank_of_kernels(ct: ColumnarTrace) -> np.ndarray:
    k = ct["kernels"]
    if k.n == 0:
        return np.zeros(0, dtype=np.int64)
    device = refs(ct["streams"]["device"])[refs(k["stream"])]
    dev_rank = np.nan_to_num(num(ct["devices"]["rank"]), nan=0.0).astype(np.int64)
    return dev_rank[device]


def calls(ct: ColumnarTrace, on_graph_ops: np.ndarray, on_graph_kernels: np.ndarray) -> RankCalls:
    """The collective calls of the ranks ``ct`` holds (``on_graph_*``: which
    ops and kernels are elements of the happens-before graph)."""
    ops, k = ct["ops"], ct["kernels"]
    op_rank = rank_of_ops(ct)
    threaded = (
        ops["thread"].present()
        if isinstance(ops["thread"], Strings)
        else np.asarray([v is not None for v in values(ops["thread"])])
    )
    dev_rank = np.nan_to_num(num(ct["devices"]["rank"]), nan=0.0).astype(np.int64)
    out = RankCalls(set(op_rank[threaded].tolist()) | set(dev_rank.tolist()))
    if k.n:
        kind = codes_of(k["kind"], "communication")
        coll = k["collective"]
        coll_values = values(coll)
        comm = kind & np.asarray([v is not None and str(v).lower() not in POINT_TO_POINT_KERNELS for v in coll_values])
        start = num(k["start_us"])
        comm &= ~np.isnan(start)
        rows = np.flatnonzero(comm)
        if len(rows):
            # (the calls' own rows as Python values, not every kernel's)
            uids = values(take(k["uid"], rows))
            group = values(take(k["process_group"], rows))
            members = values(take(k["group_ranks"], rows))
            end = num(k["end_us"])
            k_rank = rank_of_kernels(ct)
            for at, r in enumerate(rows.tolist()):
                key = (
                    group[at] if isinstance(group[at], str) else "",
                    members[at] if isinstance(members[at], str) else "",
                )
                c = Call(
                    "kernels",
                    r,
                    str(uids[at]),
                    str(coll_values[r]),
                    float(start[r]),
                    float(end[r]),
                    bool(on_graph_kernels[r]),
                )
                out.kernel_groups.setdefault(key, {}).setdefault(int(k_rank[r]), []).append(c)
            for by_rank in out.kernel_groups.values():
                for cs in by_rank.values():
                    cs.sort(key=lambda c: (c.start, c.uid))
    coll_op = ops["collective"]
    if ops.n and coll_op.present().any():  # type: ignore[union-attr]
        start = num(ops["start_us"])
        end = num(ops["end_us"])
        rows = np.flatnonzero(coll_op.present() & ~np.isnan(start))  # type: ignore[union-attr]
        uids = values(take(ops["uid"], rows))
        names = values(take(coll_op, rows))
        for at, r in enumerate(rows.tolist()):
            c = Call("ops", r, str(uids[at]), str(names[at]), float(start[r]), float(end[r]), bool(on_graph_ops[r]))
            out.op_calls.setdefault(int(op_rank[r]), []).append(c)
        for cs in out.op_calls.values():
            cs.sort(key=lambda c: (c.start, c.uid))
    return out


@dataclass
class Member:
    """A rank's call of a joined collective and its wait for the last rank."""

    rank: int
    call: Call
    wait: float


@dataclass
class Collective:
    uid: str
    name: str
    process_group: str | None
    seq: int
    ranks: int
    last_rank: int
    first_arrival: float
    last_arrival: float
    caused: float
    waited: float
    end_spread: float | None
    members: list[Member]


@dataclass
class Joined:
    """Collectives joined across ranks and the Trace's counts."""

    collectives: list[Collective]
    unmatched: int

    def props(self) -> dict[str, int | bool | float | None]:
        spreads = [c.end_spread for c in self.collectives if c.end_spread is not None]
        return {
            "has_collectives": bool(self.collectives),
            "collectives": len(self.collectives),
            "collective_calls_unmatched": self.unmatched,
            "collective_end_spread_us": float(np.median(spreads)) if spreads else None,
        }

    def waits(self) -> dict[tuple[int, str, int], float]:
        """(rank, table, row) of each joined call -> its wait."""
        return {(m.rank, m.call.table, m.call.row): m.wait for c in self.collectives for m in c.members}


def merge(parts: list[RankCalls]) -> RankCalls:
    out = RankCalls(set())
    for p in parts:
        out.ranks |= p.ranks
        for key, by_rank in p.kernel_groups.items():
            target = out.kernel_groups.setdefault(key, {})
            for r, cs in by_rank.items():
                target.setdefault(r, []).extend(cs)
        for r, cs in p.op_calls.items():
            out.op_calls.setdefault(r, []).extend(cs)
    for by_rank in out.kernel_groups.values():
        for cs in by_rank.values():
            cs.sort(key=lambda c: (c.start, c.uid))
    for cs in out.op_calls.values():
        cs.sort(key=lambda c: (c.start, c.uid))
    return out


def join(all_calls: RankCalls) -> Joined:
    """Join the k-th call of every rank of each group (see :mod:`.collectives`)."""
    collectives: list[Collective] = []
    unmatched = 0
    if all_calls.kernel_groups:
        everyone = sorted(all_calls.ranks)
        if len(everyone) >= 2:
            for (group, members_text), by_rank in sorted(all_calls.kernel_groups.items()):
                members = _group_ranks(members_text)
                ranks = members if members is not None else everyone
                tag = group or members_text or None
                unmatched += _join(by_rank, ranks, group or None, tag, True, collectives)
    elif len(all_calls.op_calls) >= 2:
        unmatched = _join(all_calls.op_calls, sorted(all_calls.op_calls), None, None, False, collectives)
    return Joined(collectives, unmatched)


def _join(
    calls: dict[int, list[Call]],
    ranks: list[int],
    group: str | None,
    tag: str | None,
    kernels: bool,
    out: list[Collective],
) -> int:
    k = 0
    if all(r in calls for r in ranks) and len(ranks) >= 2:
        while k < min(len(calls[r]) for r in ranks):
            names = {calls[r][k].name for r in ranks}
            if len(names) != 1:
                break
            times = np.array([calls[r][k].start for r in ranks], dtype=float)
            last = int(np.argmax(times))
            waits = times[last] - times
            uid = f"coll:{k}" if tag is None else f"coll:{tag}:{k}"
            out.append(
                Collective(
                    uid=uid,
                    name=names.pop(),
                    process_group=group,
                    seq=k,
                    ranks=len(ranks),
                    last_rank=ranks[last],
                    first_arrival=float(times.min()),
                    last_arrival=float(times[last]),
                    caused=float(times[last] - np.sort(times)[-2]),
                    waited=float(waits.sum()),
                    end_spread=float(np.ptp([calls[r][k].end for r in ranks])) if kernels else None,
                    members=[Member(r, calls[r][k], float(w)) for r, w in zip(ranks, waits)],
                )
            )
            k += 1
    return sum(len(c) - (k if r in ranks else 0) for r, c in calls.items())


def _group_ranks(text: object) -> list[int] | None:
    """``"[0, 1, 2, 3]"`` as ranks; None when absent or cut short."""
    if not isinstance(text, str) or not text:
        return None
    try:
        ranks = json.loads(text)
    except ValueError:
        return None
    if not isinstance(ranks, list) or not all(isinstance(r, int) for r in ranks):
        return None
    return sorted(ranks)
