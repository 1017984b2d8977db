"""A job's rank files ingested rank by rank: each rank read, enriched and
written on its own, what crosses ranks a small summary.

The trace is the one :mod:`.enrich` makes of all the ranks held together
(the same rows, the same Trace), but no rank's tables are held beside
another's: the client's memory is what one rank (per thread) takes, not
what the job does. The work per rank is plain functions of picklable
values (a cluster can run them where the file is):

1. :func:`survey_rank` (file -> :class:`RankSurvey`): read and assemble the
   rank (:mod:`.formats.kineto.assemble`); keep its tables in a spill file
   and return what the job needs of it: its first event, its ops' order
   keys, its collective calls (times in ns), its allocators' peaks, its
   facts for the one-run check.
2. The job, from the surveys (:func:`plan`): the time origin (the earliest
   event of any rank), every op's place in the job's order (``seq``: a
   merge of the ranks' keys), the collectives joined across ranks
   (:mod:`.collectives`: who waited, who came last), the top allocator.
3. :func:`write_rank` (survey + its :class:`RankPlan` -> written part +
   :class:`RankResult`): the rank's columns with the job's times and
   order, every pass that needs no other rank (:func:`.enrich.local`), its
   Rank rows (its lanes' idle time needs only its own calls' waits), its
   part written to the database (``Load.part``), and the summary of its
   happens-before graph for the job's path: for each of its calls that a
   collective's last arrival feeds (an *in-port*) and each call of its that
   came last (an *out-port*), the heaviest path between them inside the
   rank, and from each in-port to anywhere. As many ranks are written at
   once as the load takes parts (``Load.parts_at_once``): one on FalkorDB.
4. The job's observed critical path from those summaries (max-plus:
   a collective's last arrival's weight is the best over its rank's own
   start and the in-ports before it), then (:func:`inject_rank`) each rank
   once more with the weights that come in at its in-ports, and the path
   walked back across ranks (:func:`walk`). Its segments are written as
   updates of the nodes on it, OBSERVED_NEXT as links between parts.
5. The job's own part: OpTotals, the Collective and Rank nodes, JOINS;
   the Trace node's properties; ``Load.finish`` publishes it all at once.

A job of one file is the same with nothing to join: its path is found in
step 3 and written with its part. Everything the database sees goes
through one :class:`~tracegraph.db.base.Load`, so the guarantees of
``store_trace`` hold: nothing is visible before ``finish``, a failure
(or the process's death) leaves nothing, a replaced trace stays the old
version until then.

Ties among paths of equal weight are broken as the whole-trace
computation (:func:`.observed_path.whole`) breaks them at collectives: the
rank's own predecessor keeps a tie against another rank's arrival. Among a
rank's own edges the first found keeps a tie in both; the order they are
found in can differ where another rank's arrival holds a node back in the
whole job's topological order, and then the path taken is another of the
same length (not seen on the committed jobs: the test compares them).
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import socket
import tempfile
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from tracegraph import processes, schema
from tracegraph.columns import I64, Column, Lists, Strings, Table, kernel, take, values
from tracegraph.db.base import Graph, Link, Load, NodeRefs, NodeTable, PartWriter, TraceTables, checkpoint
from tracegraph.errors import InputError
from tracegraph.facts import Fact
from tracegraph.ingest import enrich, graph_tables, hb, heap, observed_path, ranks
from tracegraph.ingest.collectives import Call, Joined, RankCalls, join
from tracegraph.ingest.columnar import ColumnarTrace, num, refs
from tracegraph.ingest.formats.kineto import trace as kineto
from tracegraph.ingest.formats.kineto.assemble import NEVER_FREED, RankPart, read_part
from tracegraph.ingest.formats.kineto.run import RunFacts, check_one_run, header_rank, numbering

F64 = npt.NDArray[np.float64]
# Progress of a job: (phase, done, total): ``parse`` and ``write`` count ranks.
JobProgress = Callable[[str, int, int], None]
# A file a rank's task wrote (its path as the task named it, the rank file's index), readable here.
Fetch = Callable[[Path, int], Path]
T = TypeVar("T")


# --- 1. a rank surveyed -------------------------------------------------------------------------


@dataclass(frozen=True)
class RawCall:
    """A collective call as a rank's survey keeps it (times in ns)."""

    table: str  # ops / kernels
    row: int
    uid: str
    name: str
    group: tuple[str, str] | None  # an NCCL kernel's (process group, its ranks' text); None: a host call
    start: int
    end: int
    on_graph: bool


@dataclass
class RankSurvey:
    """What the job needs of a rank before writing any (see the module docstring)."""

    index: int  # the file's place among the job's files
    shell: RankPart  # the rank's facts (its tables are in ``spill``)
    facts: RunFacts
    first_ns: int | None
    spill: Path
    keys: Path  # its ops' order keys (start, -end) sorted, and their rows: (n, 3) int64
    n_ops: int
    calls: list[RawCall]
    allocators: list[tuple[float, int, str, str, int]]  # (peak bytes, peak ns, name, uid, row)


def survey_rank(index: int, path: Path, rank: int, multi: bool, spill_dir: Path) -> RankSurvey:
    """Read and assemble one rank file (``rank`` when the file names none);
    its tables go to a spill file in ``spill_dir`` (they live only while
    this runs). The heap is trimmed once after every rank's survey, not
    after each: the next rank reuses what this one freed, and handing it
    back in between only made the next one fault it in again (a third of
    the job's page faults, 0.1 s of system time on 8 ranks, for no lower
    peak: the write's is higher)."""
    part = read_part(path, rank, multi)
    ops, kernels, allocations = part.tables["ops"], part.tables["kernels"], part.tables["allocations"]
    firsts = [
        int(np.asarray(t[c]).min())
        for t, c in ((ops, "start_ns"), (kernels, "start_ns"), (allocations, "alloc_ns"))
        if t.n
    ]
    start, end = np.asarray(ops["start_ns"]), np.asarray(ops["end_ns"])
    order = np.lexsort((np.arange(len(start)), -end, start))
    keys = np.stack([start[order], -end[order], order], axis=1) if len(start) else np.zeros((0, 3), dtype=np.int64)
    spill = spill_dir / f"rank-{index}.pickle"
    key_file = spill_dir / f"keys-{index}.npy"
    np.save(key_file, np.ascontiguousarray(keys, dtype=np.int64))
    with spill.open("wb") as f:
        pickle.dump(part, f, protocol=pickle.HIGHEST_PROTOCOL)
    shell, facts, n_ops = replace(part, tables={}), part.run_facts(), ops.n
    ct = kineto.join([part])  # (times relative to the rank's own first event: enough for its survey)
    del part, ops, kernels, allocations  # (the join may share their arrays: see kineto.join)
    calls = _raw_calls(ct)
    allocators = _allocator_peaks(ct)
    del ct
    return RankSurvey(
        index=index,
        shell=shell,
        facts=facts,
        first_ns=min(firsts) if firsts else None,
        spill=spill,
        keys=key_file,
        n_ops=n_ops,
        calls=calls,
        allocators=allocators,
    )


def _raw_calls(ct: ColumnarTrace) -> list[RawCall]:
    """The rank's collective calls (NCCL kernels, host calls) with their ns times."""
    found = observed_path.collective_calls(ct)
    ns = {
        "ops": (np.asarray(ct["ops"]["start_ns"]), np.asarray(ct["ops"]["end_ns"])),
        "kernels": (np.asarray(ct["kernels"]["start_ns"]), np.asarray(ct["kernels"]["end_ns"])),
    }
    out = []
    for key, by_rank in found.kernel_groups.items():
        for cs in by_rank.values():
            out += [
                RawCall(
                    c.table,
                    c.row,
                    c.uid,
                    c.name,
                    key,
                    int(ns[c.table][0][c.row]),
                    int(ns[c.table][1][c.row]),
                    c.on_graph,
                )
                for c in cs
            ]
    for cs in found.op_calls.values():
        out += [
            RawCall(
                c.table, c.row, c.uid, c.name, None, int(ns[c.table][0][c.row]), int(ns[c.table][1][c.row]), c.on_graph
            )
            for c in cs
        ]
    return out


def _allocator_peaks(ct: ColumnarTrace) -> list[tuple[float, int, str, str, int]]:
    """Each allocator's peak (bytes, first time reached in ns), name, uid, row."""
    al = ct["allocators"]
    a = ct["allocations"]
    if al.n == 0 or a.n == 0:
        return []
    # the timeline on ns times since the rank's first allocation (exact in
    # a float64): the same running sum as enrich.memory
    alloc = np.asarray(a["alloc_ns"])
    base = int(alloc.min())
    free = np.asarray(a["free_ns"])
    t_alloc = (alloc - base).astype(np.float64)
    t_free = np.where(free == NEVER_FREED, np.nan, (free - base).astype(np.float64))
    peak_bytes, peak_t, *_ = enrich.timelines(refs(a["allocator"]), t_alloc, t_free, num(a["bytes"]), al.n)
    names, uids = values(al["name"]), values(al["uid"])
    return [
        (float(peak_bytes[r]), base + int(peak_t[r]), str(names[r]), str(uids[r]), r)
        for r in range(al.n)
        if not np.isnan(peak_bytes[r])
    ]


# --- 2. the job's plan ----------------------------------------------------------------------------


@dataclass(frozen=True)
class CallRole:
    """A rank's call joined to collective ``collective`` (index in the job's
    list): its table and row, the collective's last arrival (us), whether
    this call is that last one, and (a host call that came last) whether
    the idle time before it counts."""

    collective: int
    table: str
    row: int
    arrival: float
    last: bool
    late: bool


@dataclass
class RankPlan:
    """What a rank needs of the job to be written."""

    origin: int
    seq: I64  # each op's place in the job's order, by row
    whole: bool  # the job is this rank: its path is found here
    waits: dict[tuple[str, int], float]  # joined call (table, row) -> its wait
    roles: list[CallRole]
    top: tuple[int, int] | None  # (allocator row, peak ns) when the job's top allocator is this rank's
    step_marker: str | None = None  # the ops that mark steps (None: the known markers; see .steps)


@dataclass
class Plan:
    origin: int
    joined: Joined
    ranks: list[RankPlan]
    meta: dict[str, Any]
    top_peak: int | None


def plan(surveys: list[RankSurvey], fetch: Fetch = lambda path, index: path) -> Plan:
    """The job's origin, order, collectives and top allocator, and each
    rank's share of them (``fetch``: a rank's spill file readable here)."""
    check_one_run([s.facts for s in surveys])
    firsts = [s.first_ns for s in surveys if s.first_ns is not None]
    t0 = min(firsts) if firsts else 0
    seqs = _job_order([fetch(s.keys, s.index) for s in surveys])
    multi = len(surveys) > 1
    calls = RankCalls(set())
    for s in surveys:
        calls.ranks.add(s.shell.rank)  # (its devices: every rank has its CPU)
        for c in s.calls:
            call = Call(c.table, c.row, c.uid, c.name, (c.start - t0) / 1000.0, (c.end - t0) / 1000.0, c.on_graph)
            if c.group is None:
                calls.op_calls.setdefault(s.shell.rank, []).append(call)
            else:
                calls.kernel_groups.setdefault(c.group, {}).setdefault(s.shell.rank, []).append(call)
    for group in calls.kernel_groups.values():
        for cs in group.values():
            cs.sort(key=lambda c: (c.start, c.uid))
    for cs in calls.op_calls.values():
        cs.sort(key=lambda c: (c.start, c.uid))
    joined = join(calls) if multi else Joined([], 0)
    by_rank = {s.shell.rank: i for i, s in enumerate(surveys)}
    waits: list[dict[tuple[str, int], float]] = [{} for _ in surveys]
    roles: list[list[CallRole]] = [[] for _ in surveys]
    for ci, coll in enumerate(joined.collectives):
        found = sorted(((m.wait, m.rank, k) for k, m in enumerate(coll.members) if m.call.on_graph))
        for m in coll.members:
            waits[by_rank[m.rank]][(m.call.table, m.call.row)] = m.wait
        if len(found) < 2 or found[0][0] != 0.0:
            continue  # a collective whose last call is not on the graph is left out
        last = coll.members[found[0][2]]
        others = [coll.members[k] for _, _, k in found[1:]]
        arrival = last.call.start
        late = last.call.table == "ops" and arrival > max(m.call.start for m in others)
        roles[by_rank[last.rank]].append(CallRole(ci, last.call.table, last.call.row, arrival, True, late))
        for m in others:
            roles[by_rank[m.rank]].append(CallRole(ci, m.call.table, m.call.row, arrival, False, False))
    top = _top(surveys)
    plans = [
        RankPlan(
            origin=t0,
            seq=seqs[i],
            whole=not multi,
            waits=waits[i],
            roles=roles[i],
            top=(top[1], top[2]) if top is not None and top[0] == i else None,
        )
        for i in range(len(surveys))
    ]
    return Plan(t0, joined, plans, kineto.meta([s.shell for s in surveys]), None if top is None else top[3])


def _top(surveys: list[RankSurvey]) -> tuple[int, int, int, int] | None:
    """The job's top allocator (largest peak; ties: name, then uid): (survey, row, peak ns, peak bytes)."""
    best: tuple[Any, ...] | None = None
    for i, s in enumerate(surveys):
        for peak, t, name, uid, row in s.allocators:
            key = (-int(peak), name, uid)
            if best is None or key < best[0]:
                best = (key, i, row, t, int(peak))
    return None if best is None else (best[1], best[2], best[3], best[4])


def _job_order(key_files: list[Path]) -> list[I64]:
    """Each rank's ops' places in the job's order (by start, longer first,
    then file order: rank files in order, events in file order), by row:
    a merge of the ranks' sorted keys (``key_files``: each rank's, as
    :func:`survey_rank` saved them). The keys are read one rank at a time,
    the two columns the merge compares into one array each: the job holds
    24 bytes an op (those and the places) and one rank's keys, where
    holding every rank's keys and their copies took 48, the 64-rank job's
    peak. (Not memory-mapped: a mapped file's pages count in the process's
    resident size for as long as they stay mapped.)"""
    lengths = [np.load(f, mmap_mode="r").shape[0] for f in key_files]  # (the headers only)
    offsets = np.zeros(len(key_files) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    start = np.empty(offsets[-1], dtype=np.int64)
    neg_end = np.empty(offsets[-1], dtype=np.int64)
    for i, f in enumerate(key_files):
        keys = np.load(f)
        start[offsets[i] : offsets[i + 1]] = keys[:, 0]
        neg_end[offsets[i] : offsets[i + 1]] = keys[:, 1]
        del keys  # (not held through the merge)
    place = _merge(start, neg_end, offsets)
    del start, neg_end
    out = []
    for i, f in enumerate(key_files):
        rows = np.load(f)[:, 2]
        seq = np.empty(len(rows), dtype=np.int64)
        seq[rows] = place[offsets[i] : offsets[i + 1]]
        out.append(seq)
    return out


@kernel
def _merge(start: I64, neg_end: I64, offsets: I64) -> I64:  # pragma: no cover - compiled
    """The place of each key among all (by (start, neg_end), then run, then
    position), the runs ``offsets[r]:offsets[r + 1]`` each sorted: a k-way
    merge with a binary heap of the runs' heads."""
    runs = len(offsets) - 1
    place = np.empty(len(start), dtype=np.int64)
    heap = np.empty(runs, dtype=np.int64)  # runs, by their head's key
    head = offsets[:-1].copy()
    size = 0
    for r in range(runs):
        if head[r] < offsets[r + 1]:
            heap[size] = r
            size += 1
    # heapify
    for i in range(size // 2 - 1, -1, -1):
        _sift(heap, size, i, start, neg_end, head)
    n = 0
    while size > 0:
        r = heap[0]
        place[head[r]] = n
        n += 1
        head[r] += 1
        if head[r] >= offsets[r + 1]:
            size -= 1
            heap[0] = heap[size]
        _sift(heap, size, 0, start, neg_end, head)
    return place


@kernel
def _sift(heap: I64, size: int, i: int, start: I64, neg_end: I64, head: I64) -> None:  # pragma: no cover - compiled
    """Move heap entry ``i`` down to its place (the least head key first; ties: the lower run)."""
    while True:
        least = i
        for c in (2 * i + 1, 2 * i + 2):
            if c < size:
                a, b = head[heap[c]], head[heap[least]]
                if (start[a], neg_end[a], heap[c]) < (start[b], neg_end[b], heap[least]):
                    least = c
        if least == i:
            return
        heap[i], heap[least] = heap[least], heap[i]
        i = least


def _load_part(s: RankSurvey) -> RankPart:
    with s.spill.open("rb") as f:
        part: RankPart = pickle.load(f)
    return part


# --- 3. a rank written ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Port:
    """Where the job's path may enter (an in-port: a collective's last
    arrival reaching ``node`` with ``weight``, attributed to ``element``,
    the rank's call) or leave the rank (an out-port: its last call's start)."""

    collective: int
    node: int
    weight: float
    element: int


@dataclass
class RankResult:
    """A rank written: the summary the job goes on with."""

    index: int
    part: int  # the Load's part it was written as
    counts: dict[str, dict[str, int]]
    props: dict[str, Any]  # its facts, for the Trace's
    totals: dict[tuple[str, str], list[float]]  # OpTotals: per (name, type) the weight summed and the runs
    rank_rows: list[dict[str, Any]]
    has_comm: bool
    ins: list[Port]
    outs: list[Port]
    d: F64  # (ins, outs + 1): the heaviest path from each in-port to each out-port, then to anywhere
    c: F64  # (outs): the heaviest path into each out-port from the rank's own start
    top: float  # the rank's heaviest path on its own
    graph: Path  # its graph, for the walk


def write_rank(survey: RankSurvey, rp: RankPlan, load: PartWriter, spill_dir: Path) -> RankResult:
    """Round 3 for one rank (see the module docstring)."""
    result = _write_rank(survey, rp, load, spill_dir)
    heap.trim()  # (the rank's tables are gone: see heap)
    return result


def _write_rank(survey: RankSurvey, rp: RankPlan, load: PartWriter, spill_dir: Path) -> RankResult:
    """The rank's write (its tables live only while this runs)."""
    part = _load_part(survey)
    ct = kineto.join([part], t0=rp.origin, seq=rp.seq)
    del part
    if rp.step_marker is not None:
        ct.meta["step_marker"] = rp.step_marker
    props = enrich.local(ct)
    ops = ct["ops"]
    ops["peak_live_bytes"] = np.full(ops.n, np.nan)
    if rp.top is not None:
        row, peak_ns = rp.top
        ops["peak_live_bytes"] = enrich.peak_live_of(ct, row, (peak_ns - rp.origin) / 1000.0)
    rows, has_comm = ranks.rank_rows(ct, rp.waits)
    observed_path.clear(ct)
    # the rank's part (its path is written later, as updates): first, so
    # that the server has it sooner and its tables are gone before the graph is made
    tables = graph_tables.trace_tables(ct, {}, rank_part=True)
    index = load.part(tables)
    counts = json_counts(tables)
    del tables
    checkpoint("rank-written")
    # the graph, with the job's collectives
    x = observed_path.inputs(ct)
    op_e, k_e = observed_path.elements(x)
    t_s, t_e = observed_path.node_times(x)

    def elem_of(role: CallRole) -> int:
        return int(op_e[role.row] if role.table == "ops" else k_e[role.row])

    waiting = [
        (elem_of(r), r.arrival) for r in rp.roles if not r.last and t_s[elem_of(r)] < r.arrival < t_e[elem_of(r)]
    ]
    late = [elem_of(r) for r in rp.roles if r.last and r.late]
    g = observed_path.graph(
        x,
        np.asarray([e for e, _ in waiting], dtype=np.int64),
        np.asarray([a for _, a in waiting], dtype=np.float64),
        np.asarray(late, dtype=np.int64),
    )
    entries = observed_path.Entries(g, x)
    ins: list[Port] = []
    outs: list[Port] = []
    for r in rp.roles:
        e = elem_of(r)
        if r.last:
            outs.append(Port(r.collective, 2 * e, 0.0, e))
        else:
            entry = entries.of(e, r.arrival)
            if entry is not None:
                ins.append(Port(r.collective, entry[0], entry[1], e))
    best, _, keep = hb.forward(g)
    c = np.asarray([best[p.node] for p in outs], dtype=np.float64)
    d = np.full((len(ins), len(outs) + 1), -np.inf)
    if ins:
        nodes = np.asarray([p.node for p in ins], dtype=np.int64)
        w = np.asarray([p.weight for p in ins], dtype=np.float64)
        for j, p in enumerate(outs):
            d[:, j] = w + hb.backward(g, keep, p.node)[nodes]
        d[:, len(outs)] = w + hb.backward_any(g, keep)[nodes]
    totals = graph_tables.totals(ct)
    spill = spill_dir / f"graph-{survey.index}.pickle"
    names = ElementNames(
        observed_path.resources(x, g), take(ops["uid"], g.op_rows), take(ct["kernels"]["uid"], g.kernel_rows)
    )
    with spill.open("wb") as f:  # the graph, then its names: who needs the graph only reads no further
        pickle.dump(g, f, protocol=pickle.HIGHEST_PROTOCOL)
        pickle.dump(names, f, protocol=pickle.HIGHEST_PROTOCOL)
    return RankResult(
        index=survey.index,
        part=index,
        counts=counts,
        props=props,
        totals=totals,
        rank_rows=rows,
        has_comm=has_comm,
        ins=ins,
        outs=outs,
        d=d,
        c=c,
        top=float(best.max()) if len(best) else 0.0,
        graph=spill,
    )


def json_counts(tables: TraceTables) -> dict[str, dict[str, int]]:
    """Nodes per label and relationships per type of a part (membership included)."""
    counts: dict[str, dict[str, int]] = json.loads(tables.trace_props["counts"])
    return counts


# --- 4. the job's path ----------------------------------------------------------------------------


def arrivals(results: list[RankResult], joined: Joined) -> dict[int, float]:
    """The heaviest path's weight at each collective's last arrival (the
    last call's start), collectives taken by arrival time: the best of the
    last rank's own start and its in-ports that arrived before."""
    by_out: dict[int, tuple[RankResult, int]] = {}
    for res in results:
        for j, p in enumerate(res.outs):
            by_out[p.collective] = (res, j)
    x: dict[int, float] = {}
    for ci in sorted(by_out, key=lambda c: (joined.collectives[c].last_arrival, c)):
        res, j = by_out[ci]
        best = float(res.c[j])
        for i, p in enumerate(res.ins):
            if p.collective in x and res.d[i, j] > -np.inf:
                best = max(best, x[p.collective] + float(res.d[i, j]))
        x[ci] = best
    return x


@dataclass
class Injected:
    """A rank's graph with the weights that come in at its in-ports: its
    best path weight and end node, and where the walk back reads from."""

    index: int
    top: float
    end: int
    end_t: float
    spill: Path  # (best, pred, keep, the in-port each injected node took)


def inject_rank(res: RankResult, x: dict[int, float], spill_dir: Path) -> Injected:
    """Round 4 for one rank: the heaviest paths into its nodes with the
    job's weights at its in-ports (the rank's own predecessor keeps a tie)."""
    with res.graph.open("rb") as f:
        g = pickle.load(f)
    known = [(i, p) for i, p in enumerate(res.ins) if p.collective in x]
    nodes = np.asarray([p.node for _, p in known], dtype=np.int64)
    vals = np.asarray([x[p.collective] + p.weight for _, p in known], dtype=np.float64)
    best, pred, _ = hb.forward(g, nodes, vals)
    took: dict[int, int] = {}
    for (i, _), node, v in zip(known, nodes.tolist(), vals.tolist()):
        if pred[node] == -2 and (
            node not in took or v > x[res.ins[took[node]].collective] + res.ins[took[node]].weight
        ):
            took[node] = i
    end = hb.path_end(g, best) if len(best) else 0
    spill = spill_dir / f"inject-{res.index}.pickle"
    with spill.open("wb") as f:
        pickle.dump((pred, took), f, protocol=pickle.HIGHEST_PROTOCOL)
    return Injected(
        res.index, float(best[end]) if len(best) else 0.0, end, float(g.t[end]) if len(best) else 0.0, spill
    )


@dataclass(frozen=True)
class ElementNames:
    """What a rank's path elements are called, as columns (a rank's graph
    spill holds them after the graph; strings are made only for the
    elements on the job's path)."""

    resources: Strings  # per element: its thread, device or stream label
    op_uids: Column  # per op element (the first ``n_ops`` elements)
    kernel_uids: Column  # per kernel element

    def of(self, n_ops: int, elems: list[int]) -> tuple[dict[int, str], dict[str, dict[int, str]]]:
        """The resource of each of ``elems``, and the uids of its ops and kernels by element (kernels: less ``n_ops``)."""
        at = np.asarray(elems, dtype=np.int64)
        ops, kernels = at[at < n_ops], at[at >= n_ops] - n_ops
        return dict(zip(elems, values(take(self.resources, at)))), {
            "ops": dict(zip(ops.tolist(), values(take(self.op_uids, ops)))),
            "kernels": dict(zip(kernels.tolist(), values(take(self.kernel_uids, kernels)))),
        }


@dataclass
class Step:
    """A segment of the job's path: its rank (survey index), element
    (the rank's), kind, start, elapsed, whether it counts."""

    rank: int
    elem: int
    kind: int
    start: float
    dur: float
    counted: bool


def walk(
    results: list[RankResult], injected: list[Injected], joined: Joined, fetch: Fetch = lambda path, index: path
) -> list[Step]:
    """The job's path, walked back from its end across ranks (``fetch``: a
    rank's spill file readable here)."""
    if not injected:
        return []
    top = max(i.top for i in injected)
    end = min((i for i in injected if i.top >= top - hb.EPS), key=lambda i: (i.end_t, i.index))
    by_index = {r.index: r for r in results}
    inj = {i.index: i for i in injected}
    out_of: dict[int, tuple[int, int]] = {}  # collective -> (rank index, its out-port's node)
    for r in results:
        for p in r.outs:
            out_of[p.collective] = (r.index, p.node)
    pieces: list[list[Step]] = []
    rank, node = end.index, end.end
    while True:
        res = by_index[rank]
        with fetch(res.graph, rank).open("rb") as f:
            g = pickle.load(f)
        with fetch(inj[rank].spill, rank).open("rb") as f:
            pred, took = pickle.load(f)
        edges, start = hb.walk_back(pred, g.src, node)
        seg = observed_path.segments(g, edges)
        piece = [
            Step(rank, int(e), int(k), float(s), float(d), bool(c))
            for e, k, s, d, c in zip(seg.elem, seg.kind, seg.start, seg.dur, seg.counted)
        ]
        if pred[start] != -2:
            pieces.append(piece)
            break
        port = res.ins[took[start]]
        arrival = joined.collectives[port.collective].last_arrival
        elapsed = float(g.t[start]) - arrival
        if elapsed > 0:  # the arrival's edge into the rank (a join node's is 0 long)
            piece.insert(0, Step(rank, port.element, hb.K_COMM, arrival, elapsed, port.weight > 0))
        pieces.append(piece)
        rank, node = out_of[port.collective]
    return [s for piece in reversed(pieces) for s in piece]


# --- 5. the whole job -----------------------------------------------------------------------------


def threads_for(n_files: int) -> int:
    """How many ranks are worked at once: the cores (the kernels run
    without the GIL), never more than the files."""
    from tracegraph.ingest.parallel import cores, worker_count

    env = os.environ.get("TRACEGRAPH_PARSE_WORKERS")
    return max(1, min(n_files, worker_count([Path()] * n_files) if env else cores()))


@dataclass(frozen=True)
class Placed:
    """Where a job's rank tasks find its rank files and keep their spill
    files: this machine's own paths when every process sees them, or
    copies on the workers' own disks (a cluster that shares no path with
    this machine), each rank's on the worker that runs all its tasks."""

    paths: list[Path]  # the rank files as the tasks name them
    spill_dir: Path  # the tasks' spill directory
    homes: list[str] | None = None  # the worker holding rank file k's copy and spills; None: any process
    fetched: Path = Path()  # (sent) where spill files the tasks wrote are copied to in this process


class Ranks(Protocol):
    """Where the ranks' work (rounds 1, 3 and 4) runs: threads of this
    process (:class:`Threads`), or a cluster's workers
    (:mod:`tracegraph.ingest.cluster`). ``scratch``: the directory the
    ranks' spill files go under (None: the system's temporary directory)."""

    scratch: Path | None

    def place(self, paths: list[Path], spill_dir: Path) -> Placed:
        """Where the tasks read ``paths`` and keep their spills (``spill_dir``:
        this process's own); raise UserError when they cannot."""
        ...

    def map(
        self,
        fn: Callable[..., T],
        calls: list[tuple[Any, ...]],
        done: Callable[[int], None],
        homes: list[str] | None = None,
        at_once: int | None = None,
    ) -> list[T]:
        """``fn(*call)`` of every call, in order; ``done(k)`` (in this
        process) as call ``k`` ends; ``homes``: where each call must run
        (from :attr:`Placed.homes`); ``at_once``: the most calls this
        process runs at the same time (None: as many as it has cores). On
        a failure it raises only once no call is running any more (a load
        is aborted after it)."""
        ...

    def fetch(self, placed: Placed, path: Path, index: int) -> Path:
        """A spill file that rank file ``index``'s task wrote, readable here."""
        ...

    def clear(self, placed: Placed, patterns: list[str]) -> None:
        """Remove the tasks' spill files that match ``patterns``."""
        ...

    def discard(self, placed: Placed) -> None:
        """Remove what :meth:`place` put anywhere but this process's spill directory."""
        ...

    def writers(self, load: Load, count: int) -> list[PartWriter]:
        """What each of ``count`` ranks writes its part through."""
        ...


class Threads:
    """The ranks worked on threads of this process (:func:`threads_for`)."""

    scratch: Path | None = None

    def place(self, paths: list[Path], spill_dir: Path) -> Placed:
        return Placed(paths, spill_dir)

    def map(
        self,
        fn: Callable[..., T],
        calls: list[tuple[Any, ...]],
        done: Callable[[int], None],
        homes: list[str] | None = None,
        at_once: int | None = None,
    ) -> list[T]:
        def one(k: int) -> T:
            out = fn(*calls[k])
            done(k)
            return out

        threads = threads_for(len(calls)) if at_once is None else max(1, min(threads_for(len(calls)), at_once))
        with ThreadPoolExecutor(threads, thread_name_prefix="tracegraph-rank") as pool:
            return _each(pool, one, list(range(len(calls))))

    def fetch(self, placed: Placed, path: Path, index: int) -> Path:
        return path

    def clear(self, placed: Placed, patterns: list[str]) -> None:
        clear_spills(placed.spill_dir, patterns)

    def discard(self, placed: Placed) -> None:
        pass

    def writers(self, load: Load, count: int) -> list[PartWriter]:
        return [load] * count


def clear_spills(spill_dir: Path | str, patterns: list[str]) -> None:
    """Remove the files of ``spill_dir`` that match ``patterns``."""
    for pattern in patterns:
        for spill in Path(spill_dir).glob(pattern):
            spill.unlink(missing_ok=True)


@dataclass
class PreparedJob:
    """A job surveyed and planned (rounds 1 and 2): everything that can fail
    on the input is behind it, nothing is written yet. Its ranks' tables
    wait in ``spill_dir`` and where ``placed`` put them (removed by
    :meth:`close`, or when this is dropped: a prepared job may be stored
    more than once, e.g. on two databases)."""

    paths: list[Path]
    sources: list[str]
    surveys: list[RankSurvey]
    plan: Plan
    spill_dir: Path
    placed: Placed
    timings: dict[str, float] = field(default_factory=dict)
    ranks: Ranks = field(default_factory=Threads)

    def __post_init__(self) -> None:
        self._cleanup = weakref.finalize(self, _remove_spills, self.ranks, self.placed, self.spill_dir)

    def fetch(self, path: Path, index: int) -> Path:
        return self.ranks.fetch(self.placed, path, index)

    def close(self) -> None:
        self._cleanup()


def _spill_prefix(pid: int) -> str:
    """A job's spill directory is named for its host and process, so that a
    later job can tell one left by a process that died (killed, out of
    memory: no ``finally`` ran) from one still in use."""
    return f"{_host_prefix()}{pid}-"


def _host_prefix() -> str:
    return f"tracegraph-job-{socket.gethostname()}-"


def sweep_dead_spills(scratch: Path) -> list[Path]:
    """Remove the spill directories in ``scratch`` left by processes of this
    host that are gone (a 64-rank job's are a gigabyte); those of live
    processes, of other hosts (a scratch the cluster shares) and of older
    names are kept. Returns the ones removed."""
    host = _host_prefix()
    removed: list[Path] = []
    try:
        entries = list(scratch.iterdir())
    except OSError:
        return removed
    for d in entries:
        # HOST-PID-SUFFIX exactly (mkdtemp's suffix has no "-": another host
        # whose name begins with this one's is not read as a pid)
        pid, _, suffix = d.name[len(host) :].partition("-")
        if not d.name.startswith(host) or not pid.isdigit() or not suffix or "-" in suffix:
            continue
        if not processes.runs(int(pid)) and d.is_dir():
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
    return removed


def _remove_spills(ranks: Ranks, placed: Placed, spill_dir: Path) -> None:
    try:
        ranks.discard(placed)
    finally:
        shutil.rmtree(spill_dir, ignore_errors=True)


def prepare_job(
    paths: list[Path],
    sources: list[str] | None = None,
    progress: JobProgress | None = None,
    ranks: Ranks | None = None,
) -> PreparedJob:
    """Rounds 1 and 2: every rank read and surveyed (on ``ranks``: threads
    of this process by default), the job planned."""
    report = progress or (lambda phase, done, total: None)
    paths = [Path(p) for p in paths]
    ranks = ranks or Threads()
    sweep_dead_spills(Path(ranks.scratch or tempfile.gettempdir()))
    spill_dir = Path(tempfile.mkdtemp(prefix=_spill_prefix(os.getpid()), dir=ranks.scratch))
    placed = None
    t0 = time.perf_counter()
    try:
        sizes = [p.stat().st_size for p in paths]
        placed = ranks.place(paths, spill_dir)
        done = _Counter(report, "parse", sum(sizes))
        named = numbering(paths, [header_rank(p) for p in paths])
        calls = [(i, p, r, True, placed.spill_dir) for i, (p, r) in enumerate(zip(placed.paths, named))]
        surveys = ranks.map(survey_rank, calls, lambda k: _surveyed(k, done, sizes[k]), placed.homes)
        heap.trim()  # (what the surveys freed, before the writes: see heap)
        # a rank named only after the events (the file's trailer) was unknown
        # when the others were numbered: number again, redo the files it moves
        final = numbering(paths, [s.shell.rank if s.shell.named else None for s in surveys])
        moved = [i for i, (s, r) in enumerate(zip(surveys, final)) if s.shell.rank != r]
        if moved:
            again = ranks.map(
                survey_rank,
                [(i, placed.paths[i], final[i], True, placed.spill_dir) for i in moved],
                lambda k: None,
                [placed.homes[i] for i in moved] if placed.homes else None,
            )
            for i, s in zip(moved, again):
                surveys[i] = s
        if not any(s.shell.events for s in surveys):
            raise InputError(paths[0], "no PyTorch profiler events (cpu_op, cuda_runtime, kernel, ...) in traceEvents")
        where = placed
        job = plan(surveys, lambda path, index: ranks.fetch(where, path, index))
    except BaseException:
        _remove_spills(ranks, placed or Placed(paths, spill_dir), spill_dir)
        raise
    return PreparedJob(
        paths,
        sources or [str(p) for p in paths],
        surveys,
        job,
        spill_dir,
        placed,
        {"parse_s": time.perf_counter() - t0},
        ranks,
    )


def _surveyed(index: int, done: _Counter, size: int) -> None:
    """Rank file ``index`` (``size`` bytes) surveyed, in this process."""
    done(None, size)
    if index == 0:  # once: tests stop the process here (Ctrl-C while the ranks are read)
        checkpoint("rank-surveyed")


def store_job(
    graph: Graph, job: PreparedJob, trace: str, *, replace: bool = False, progress: JobProgress | None = None
) -> tuple[dict[str, dict[str, int]], dict[str, Any], dict[str, float]]:
    """Rounds 3 to 5: the ranks written, the job's path, its own part, the
    Trace published (all through one Load: all or nothing). Returns the
    counts, the Trace's properties and the seconds of each round."""
    report = progress or (lambda phase, done, total: None)
    timings = dict(job.timings)
    try:
        load = graph.begin_trace(trace, replace=replace)
        try:
            t1 = time.perf_counter()
            done = _Counter(report, "write ranks", len(job.paths))
            where = job.placed
            writers = job.ranks.writers(load, len(job.surveys))
            work = [(s, rp, w, where.spill_dir) for s, rp, w in zip(job.surveys, job.plan.ranks, writers)]
            results: list[RankResult] = job.ranks.map(
                write_rank, work, lambda k: done(None), where.homes, load.parts_at_once
            )
            timings["write_s"] = time.perf_counter() - t1
            t2 = time.perf_counter()
            x = arrivals(results, job.plan.joined)
            injected = job.ranks.map(
                inject_rank, [(r, x, where.spill_dir) for r in results], lambda k: None, where.homes
            )
            steps = walk(results, injected, job.plan.joined, job.fetch)
            counts, props = _write_job(load, job.surveys, results, job.plan, steps, job.sources)
            timings["job_s"] = time.perf_counter() - t2
        except BaseException:
            load.abort()
            raise
    finally:  # this store's own spills (the ranks' tables stay for another store)
        job.ranks.clear(job.placed, ["graph-*.pickle", "inject-*.pickle"])
    return counts, props, timings


def _each(pool: ThreadPoolExecutor, fn: Callable[[Any], Any], items: list[Any]) -> list[Any]:
    """``fn`` of every item on the pool, in order; on a failure or Ctrl-C
    the items not started are dropped (the pool's exit waits only for the
    ranks under way)."""
    futures = [pool.submit(fn, item) for item in items]
    try:
        return [f.result() for f in futures]
    except BaseException:
        for f in futures:
            f.cancel()
        raise


class _Counter:
    """Reports a phase's progress as its ranks finish (from any thread)."""

    def __init__(self, report: JobProgress, phase: str, total: int) -> None:
        self.report, self.phase, self.total, self.done = report, phase, total, 0
        self.lock = threading.Lock()
        report(phase, 0, total)

    def __call__(self, value: Any, amount: int = 1) -> Any:
        with self.lock:
            self.done += amount
            self.report(self.phase, self.done, self.total)
        return value


def _write_job(
    load: Load, surveys: list[RankSurvey], results: list[RankResult], job: Plan, steps: list[Step], sources: list[str]
) -> tuple[dict[str, dict[str, int]], dict[str, Any]]:
    """The path's segments (updates, OBSERVED_NEXT), the job's own part
    (OpTotals, Collective, Rank; JOINS) and the Trace; then publish."""
    by_index = {r.index: r for r in results}
    counts: dict[str, dict[str, int]] = {"nodes": {}, "relationships": {}}
    for r in results:
        _add_counts(counts, r.counts)
    # the path
    uids: dict[int, dict[str, dict[int, str]]] = {}
    graphs: dict[int, Any] = {}
    for rank in sorted({s.rank for s in steps}):
        with by_index[rank].graph.open("rb") as f:
            g = pickle.load(f)
            names: ElementNames = pickle.load(f)
        labels, uids[rank] = names.of(g.n_ops, sorted({s.elem for s in steps if s.rank == rank}))
        graphs[rank] = (g, labels)
    for rank, (g, labels) in graphs.items():
        mine = [(k, s) for k, s in enumerate(steps) if s.rank == rank]
        for label, table, lo, hi, rows in (
            ("Op", "ops", 0, g.n_ops, g.op_rows),
            ("Kernel", "kernels", g.n_ops, g.n_ops + len(g.kernel_rows), g.kernel_rows),
        ):
            sel = [(k, s) for k, s in mine if lo <= s.elem < hi]
            if not sel:
                continue
            per: dict[int, list[tuple[int, Step]]] = {}
            for k, s in sel:
                per.setdefault(s.elem, []).append((k, s))
            elems = sorted(per)
            cols = Table(len(elems))
            seqs = [per[e] for e in elems]
            cols["ocp_steps"] = Lists.of([[k for k, _ in q] for q in seqs], int)
            cols["ocp_starts_us"] = Lists.of([[s.start for _, s in q] for q in seqs], float)
            cols["ocp_durs_us"] = Lists.of([[s.dur for _, s in q] for q in seqs], float)
            cols["ocp_kinds"] = Lists.of([[hb.KINDS[s.kind] for _, s in q] for q in seqs], str)
            cols["ocp_counted"] = Lists.of([[s.counted for _, s in q] for q in seqs], bool)
            cols["ocp_resource"] = Strings.of([labels[e] for e in elems])
            refs_ = NodeRefs(
                np.full(len(elems), by_index[rank].part, dtype=np.int64),
                rows[np.asarray(elems, dtype=np.int64) - lo],
                [uids[rank][table][e - lo] for e in elems],
            )
            load.update(label, refs_, cols, schema.int_columns())
    links = _observed_next(steps, graphs, uids, by_index)
    # the job's part
    totals: dict[tuple[str, str], list[float]] = {}
    for r in sorted(results, key=lambda r: surveys[r.index].shell.rank):  # summed in rank order
        for key, (w, n) in r.totals.items():
            prev = totals.get(key)
            totals[key] = [w + (prev[0] if prev else 0.0), n + (prev[1] if prev else 0.0)]
    rank_rows = sorted((row for r in results for row in r.rank_rows), key=lambda row: row["rank"])
    job_tables = _job_tables(
        graph_tables.totals_table(totals), enrich.collective_table(job.joined), enrich.rank_table(rank_rows)
    )
    part = load.part(job_tables)
    _add_counts(counts, json_counts(job_tables))
    links += _joins(job.joined, {s.shell.rank: by_index[s.index].part for s in surveys}, part)
    for ln in links:
        counts["relationships"][ln.type] = counts["relationships"].get(ln.type, 0) + len(ln.src)
    load.link(links)
    props = _trace_props(results, job, steps, sources)
    props.update(graph_tables.counts_props(counts))
    for name, v in job.meta.items():
        if isinstance(v, (str, int, float, bool)):
            props[f"meta_{name}"] = v
    catalog = [t for t in job_tables.nodes if t.label == "OpTotals"]
    load.finish(props, catalog)
    return counts, props


def _add_counts(into: dict[str, dict[str, int]], counts: dict[str, dict[str, int]]) -> None:
    for kind in ("nodes", "relationships"):
        for k, v in counts[kind].items():
            into[kind][k] = into[kind].get(k, 0) + v


def _job_tables(totals: Table, collectives: Table, rank_rows: Table) -> TraceTables:
    """The job's part: its OpTotals, Collective and Rank nodes."""
    ct = ColumnarTrace("pytorch", [], "us", {"op_totals": totals, "collectives": collectives, "ranks": rank_rows})
    nodes = []
    for t in schema.NODE_TABLES:
        if t.name in graph_tables.JOB_TABLES and t.label is not None:
            frame = ct.tables[t.name]
            nodes.append(NodeTable(t.label, t.name, graph_tables.complete_node(frame, t), tuple(t.properties())))
    tables = TraceTables({}, nodes, [], list(schema.MEMBERSHIP), schema.int_columns(), graph_tables.bool_columns())
    tables.trace_props["counts"] = json.dumps(
        {"nodes": {t.label: t.frame.n for t in nodes}, "relationships": {"HAS_OP_TOTALS": totals.n}}
    )
    return tables


def _node_refs(rank_part: dict[int, int], items: list[tuple[int, int, str]]) -> NodeRefs:
    """(rank, row, uid) of nodes of the ranks' parts."""
    return NodeRefs(
        np.asarray([rank_part[r] for r, _, _ in items], dtype=np.int64),
        np.asarray([row for _, row, _ in items], dtype=np.int64),
        [u for _, _, u in items],
    )


def _joins(joined: Joined, rank_part: dict[int, int], job_part: int) -> list[Link]:
    """JOINS: each rank's call of a collective -> the collective (the job's part)."""
    out = []
    for label, table in (("Op", "ops"), ("Kernel", "kernels")):
        rows = [(ci, m) for ci, c in enumerate(joined.collectives) for m in c.members if m.call.table == table]
        if not rows:
            continue
        src = _node_refs(rank_part, [(m.rank, m.call.row, m.call.uid) for _, m in rows])
        dst = NodeRefs(
            np.full(len(rows), job_part, dtype=np.int64),
            np.asarray([ci for ci, _ in rows], dtype=np.int64),
            [joined.collectives[ci].uid for ci, _ in rows],
        )
        props = Table(len(rows))
        props["rank"] = np.asarray([m.rank for _, m in rows], dtype=np.int64)
        props["wait_us"] = np.asarray([m.wait for _, m in rows], dtype=np.float64)
        out.append(Link("JOINS", label, "Collective", src, dst, props, ("rank", "wait_us")))
    return out


def _observed_next(
    steps: list[Step],
    graphs: dict[int, Any],
    uids: dict[int, dict[str, dict[int, str]]],
    by_index: dict[int, RankResult],
) -> list[Link]:
    """OBSERVED_NEXT between consecutive path elements (across ranks too); ``step``: the segment it leaves from."""
    groups: dict[tuple[str, str], list[tuple[tuple[int, int, str], tuple[int, int, str], int]]] = {}

    def node(s: Step) -> tuple[str, tuple[int, int, str]]:
        g = graphs[s.rank][0]
        if s.elem < g.n_ops:
            return "Op", (by_index[s.rank].part, int(g.op_rows[s.elem]), uids[s.rank]["ops"][s.elem])
        k = s.elem - g.n_ops
        return "Kernel", (by_index[s.rank].part, int(g.kernel_rows[k]), uids[s.rank]["kernels"][k])

    for k in range(len(steps) - 1):
        a, b = steps[k], steps[k + 1]
        if (a.rank, a.elem) == (b.rank, b.elem):
            continue
        (la, na), (lb, nb) = node(a), node(b)
        groups.setdefault((la, lb), []).append((na, nb, k))
    out = []
    for (la, lb), rows in groups.items():
        src = NodeRefs(
            np.asarray([a[0] for a, _, _ in rows]), np.asarray([a[1] for a, _, _ in rows]), [a[2] for a, _, _ in rows]
        )
        dst = NodeRefs(
            np.asarray([b[0] for _, b, _ in rows]), np.asarray([b[1] for _, b, _ in rows]), [b[2] for _, b, _ in rows]
        )
        props = Table(len(rows))
        props["step"] = np.asarray([k for _, _, k in rows], dtype=np.int64)
        out.append(Link("OBSERVED_NEXT", la, lb, src, dst, props, ("step",)))
    return out


def _trace_props(results: list[RankResult], job: Plan, steps: list[Step], sources: list[str]) -> dict[str, Any]:
    """The Trace's properties from the ranks' facts and the job's passes."""
    facts = [r.props for r in results]
    spans = [f["span_us"] for f in facts if f.get("span_us") is not None]
    peaks = [f["memory_peak_bytes"] for f in facts if f.get("memory_peak_bytes") is not None]
    props: dict[str, Any] = {
        "framework": "pytorch",
        "time_unit": "us",
        "sources": json.dumps(sources),
        "span_us": max(spans) if spans else None,
        "ops": sum(int(f["ops"]) for f in facts),
        "executed_ops": sum(int(f["executed_ops"]) for f in facts),
        "memory_peak_bytes": max(peaks) if peaks else None,
        **{
            fact.flag: any(bool(f.get(fact.flag)) for f in facts)
            for fact in (Fact.TIMES, Fact.DEPS, Fact.KERNELS, Fact.MEMORY, Fact.COPIES, Fact.STEPS)
        },
        **job.joined.props(),
        Fact.COMMUNICATION.flag: any(r.has_comm for r in results),
    }
    if steps:
        # summed as the whole-trace computation sums its segments (numpy's pairwise sum)
        durs = np.asarray([s.dur for s in steps], dtype=np.float64)
        counted = np.asarray([s.counted for s in steps], dtype=bool)
        props["observed_path_us"] = float(durs[counted].sum())
        props["observed_path_span_us"] = float(durs.sum())
        props["observed_path_segments"] = len(steps)
    return {k: v for k, v in props.items() if v is not None}
