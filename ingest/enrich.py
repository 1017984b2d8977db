"""Ingest-time analysis: the parts Cypher does badly, stored as properties.

Cypher engines are good at matching and aggregating, poor at dynamic
programming over a DAG and at ordered running sums. So the loader stores
their results, and the canned queries only read them:

* op weight: the sum of the op's kernel durations when it has kernels, else
  its self time: its own record's duration minus those of the ops nested
  directly in it (formats without nesting: its duration; traces timed in
  steps: 1 per executed op);
* per op earliest/latest start and finish and slack from a forward and a
  backward pass over the dependency DAG (data + control edges), the heaviest
  predecessor (``cp_pred``), and the op's place on the critical path
  (dependencies with a cycle have no critical path: ingest refuses them,
  :func:`check_acyclic`, and the DAG code raises DependencyCycle);
* the same forward pass with weight 1 for the longest chain by op count;
* per allocator the memory timeline (running sum of allocations, frees
  before allocations at equal times), its peak and when it is first reached;
* per stream the next kernel in start order and the idle gap before it,
  and the stream's busy time (the length of the union of its kernel
  intervals);
* per copy kernel the time no compute kernel on its device overlaps
  (``exposed_us``);
* the observed critical path, the heaviest path through the order things
  actually ran in (:mod:`observed_path`);
* collectives joined across the ranks of a multi-rank trace, with each
  rank's wait for the last one (:mod:`collectives`), before the observed
  path, which crosses ranks at them;
* per rank, communication against computation (:mod:`ranks`) and each
  lane's idle time by cause (:mod:`idle`);
* the steps, each op's and kernel's step, and each step's device time
  broken down (:mod:`steps`).

The DAG passes themselves are :mod:`tracegraph.dag` (what-if reruns them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from tracegraph.columns import F64, I64, B, Lists, Strings, Table, Texts, kernel, present, values
from tracegraph.dag import dag_passes, dependency_dag
from tracegraph.errors import DependencyCycle
from tracegraph.facts import Fact
from tracegraph.ingest import steps
from tracegraph.ingest.columnar import ColumnarTrace, codes_of, executed, flags, num, refs
from tracegraph.ingest.intervals import covered, union_intervals
from tracegraph.ingest.ranks import DEVICE_COLUMNS

if TYPE_CHECKING:
    from tracegraph.ingest.frames import TraceFrames

TraceProp = str | int | float | bool | None


@dataclass
class Summary:
    """Trace-level facts stored on the Trace node."""

    props: dict[str, TraceProp] = field(default_factory=dict)


def enrich(tf: TraceFrames) -> Summary:
    """Add derived columns to ``tf`` in place (the passes run on its
    columns, :func:`whole`); return the trace summary."""
    from tracegraph.ingest.columnar import from_frames, write_back

    ct = from_frames(tf)
    props = whole(ct, tf.dag)
    write_back(ct, tf)
    return Summary(props)


def check_acyclic(tf: TraceFrames) -> None:
    """DependencyCycle naming the ops (by name, uid where the name is not
    enough) when ``tf.deps`` has a cycle among any of its ops, executed or
    not: dependencies that go round cannot be what ran. The DAG it builds is
    kept (``tf.dag``) for enrichment when its ops are the DAG's."""
    if tf.deps.empty:
        return
    ops = tf.ops
    uids = ops["uid"].tolist()
    try:
        tf.dag = dependency_dag(
            uids, ops["seq"].tolist(), np.ones(len(uids), dtype=bool), zip(tf.deps["src"], tf.deps["dst"])
        )
    except DependencyCycle as e:
        names = dict(zip(uids, ops["name"].tolist()))
        labels = {u: names[u] if u == f"op:{names[u]}" else f"{names[u]} ({u})" for u in e.cycle}
        raise DependencyCycle(e.cycle, labels) from None


# --- weights ------------------------------------------------------------------------------------


def weights(ct: ColumnarTrace) -> F64:
    """Kernel time when the op launched kernels, else its self time: its
    duration minus those of the ops nested directly in it (``parent``),
    never below 0; 1 per executed op for traces timed in steps."""
    ops, k = ct["ops"], ct["kernels"]
    ran = executed(ct)
    if ct.time_unit != "us":
        return ran.astype(np.float64)
    n = ops.n
    op_of = refs(k["op"]) if k.n else np.zeros(0, np.int64)
    valid = op_of >= 0
    kernel_sum = np.bincount(op_of[valid], weights=np.nan_to_num(num(k["dur_us"])[valid]), minlength=n)
    launched = np.bincount(op_of[valid], minlength=n) > 0
    own = np.nan_to_num(num(ops["dur_us"]))
    parent = refs(ops["parent"]) if "parent" in ops else np.full(n, -1)
    nested = parent >= 0
    if nested.any():
        children = np.bincount(parent[nested], weights=own[nested], minlength=n)
        own = np.maximum(own - children, 0.0)
    weight = np.where(launched, kernel_sum, own)
    return np.where(ran, weight, 0.0)


# --- the dependency DAG -------------------------------------------------------------------------


def dag_members(ct: ColumnarTrace) -> B:
    """The ops that take part in the dependency DAG: the executed ones, and
    of those only the ones marked ``carries_deps`` when the format marks
    any (a PyTorch trace joined to its Execution Trace)."""
    member = executed(ct).copy()
    carries = ct["ops"].get("carries_deps")
    if carries is not None and present(carries).any():
        member &= flags(carries, False)
    return member


def path_weights(ct: ColumnarTrace, member: B, weight: F64) -> F64:
    """Each DAG op's weight plus the weights of the ops nested in it."""
    ops = ct["ops"]
    total = weight.copy()
    parent = refs(ops["parent"]) if "parent" in ops else np.full(ops.n, -1)
    if ct.time_unit == "us" and (parent >= 0).any():
        total = _subtree_sums(parent, total)
    return np.where(member, total, np.nan)


@kernel
def _subtree_sums(parent: I64, weight: F64) -> F64:  # pragma: no cover - compiled
    """Each op's weight plus its descendants' (children before parents: by depth)."""
    n = len(parent)
    depth = np.zeros(n, dtype=np.int64)
    for i in range(n):
        d = 0
        p = parent[i]
        while p >= 0:
            d += 1
            p = parent[p]
        depth[i] = d
    order = np.argsort(-depth, kind="mergesort")
    total = weight.copy()
    for k in range(n):
        i = order[k]
        if parent[i] >= 0:
            total[parent[i]] += total[i]
    return total


def dag(ct: ColumnarTrace, member: B) -> Any:
    ops, deps = ct["ops"], ct["deps"]
    uids = values(ops["uid"])
    seq = values(ops["seq"])
    src, dst = refs(deps["src"]), refs(deps["dst"])
    pairs = [(uids[s], uids[d]) for s, d in zip(src.tolist(), dst.tolist())]
    return dependency_dag(uids, seq, member, pairs)


def dag_passes_columns(ct: ColumnarTrace, weight: F64, known: Any = None) -> dict[str, TraceProp]:
    """Critical path (by path weight) and longest chain (by op count)."""
    ops = ct["ops"]
    n = ops.n
    member = dag_members(ct)
    for c in ("es_us", "ef_us", "ls_us", "lf_us", "slack_us", "chain_len", "path_weight_us"):
        ops[c] = np.full(n, np.nan)
    for c in ("cp_pred", "chain_pred"):
        ops[c] = np.full(n, -1, dtype=np.int64)
    for c in ("cp_step", "lc_step"):
        ops[c] = np.full(n, np.nan)
    if n == 0 or not member.any() or ct["deps"].n == 0:
        return {"critical_path_us": None, "longest_chain_ops": None}
    d = known if known is not None and bool(np.array_equal(known.executed, member)) else dag(ct, member)
    pw = path_weights(ct, member, weight)
    ops["path_weight_us"] = pw
    cp = dag_passes(d, np.nan_to_num(pw))
    lc = dag_passes(d, np.where(member, 1.0, 0.0))
    ops["es_us"] = np.where(member, cp.es, np.nan)
    ops["ef_us"] = np.where(member, cp.ef, np.nan)
    ops["lf_us"] = np.where(member, cp.lf, np.nan)
    ops["ls_us"] = np.where(member, cp.ls, np.nan)
    ops["slack_us"] = np.where(member, cp.slack, np.nan)
    ops["cp_pred"] = np.asarray(cp.pred, dtype=np.int64)
    ops["chain_len"] = np.where(member, lc.ef, np.nan)
    ops["chain_pred"] = np.asarray(lc.pred, dtype=np.int64)
    ops["cp_step"] = np.asarray([np.nan if s is None else s for s in cp.steps], dtype=np.float64)
    ops["lc_step"] = np.asarray([np.nan if s is None else s for s in lc.steps], dtype=np.float64)
    return {
        "critical_path_us": float(cp.length),
        "critical_path_ops": len(cp.path),
        "longest_chain_ops": int(lc.length),
    }


# --- memory -------------------------------------------------------------------------------------


def memory(ct: ColumnarTrace) -> dict[str, TraceProp]:
    """Per allocator running sum, peak and timeline (frees before
    allocations at equal times; one point per time: live bytes after
    every event then); the peak is first reached at ``peak_us``."""
    al, a = ct["allocators"], ct["allocations"]
    na = al.n
    al["peak_bytes"] = np.full(na, np.nan)
    al["peak_us"] = np.full(na, np.nan)
    empty = Lists(np.zeros(na + 1, dtype=np.int64), np.zeros(0), np.zeros(na, dtype=bool))
    al["timeline_us"] = empty
    al["timeline_bytes"] = Lists(
        np.zeros(na + 1, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(na, dtype=bool)
    )
    if a.n == 0 or np.isnan(num(a["alloc_us"])).all():
        return {"memory_peak_bytes": None}
    peak_bytes, peak_us, offsets, pt, pl, has = timelines(
        refs(a["allocator"]), num(a["alloc_us"]), num(a["free_us"]), num(a["bytes"]), na
    )
    al["peak_bytes"] = peak_bytes
    al["peak_us"] = peak_us
    al["timeline_us"] = Lists(offsets, pt.astype(np.float64), has)
    al["timeline_bytes"] = Lists(offsets, pl.astype(np.int64), has)
    return {"memory_peak_bytes": int(np.nanmax(peak_bytes))}


def timelines(alloc_of: I64, t_alloc: F64, t_free: F64, nbytes: F64, na: int) -> tuple[F64, F64, I64, F64, F64, B]:
    """The memory timelines of ``na`` allocators from allocations (allocator,
    alloc time (NaN: untimed, left out), free time (NaN: never), bytes):
    each allocator's peak and when it is first reached, and its points
    (times and live bytes, ``offsets`` per allocator; ``has``: it has
    any). Frees come before allocations at equal times; a point per time
    holds the live bytes after every event then."""
    timed = ~np.isnan(t_alloc)
    freed = timed & ~np.isnan(t_free)
    who = np.concatenate([alloc_of[timed], alloc_of[freed]])
    t = np.concatenate([t_alloc[timed], t_free[freed]])
    delta = np.concatenate([nbytes[timed], -nbytes[freed]])
    order_key = np.concatenate([np.ones(timed.sum()), np.zeros(freed.sum())])
    order = np.lexsort((np.arange(len(t)), order_key, t, who))
    who, t, delta = who[order], t[order], delta[order]
    live = np.cumsum(delta)
    starts = np.flatnonzero(np.r_[True, who[1:] != who[:-1]])
    base = np.repeat(np.r_[0.0, live[starts[1:] - 1]], np.diff(np.r_[starts, len(who)]))
    live = live - base
    # one point per (allocator, time): the last event's live bytes
    last = np.r_[(who[1:] != who[:-1]) | (t[1:] != t[:-1]), True]
    pw, pt, pl = who[last], t[last], live[last]
    group = np.flatnonzero(np.r_[True, pw[1:] != pw[:-1]])
    ends = np.r_[group[1:], len(pw)]
    peak_bytes = np.full(na, np.nan)
    peak_t = np.full(na, np.nan)
    counts = np.zeros(na, dtype=np.int64)
    for g0, g1 in zip(group.tolist(), ends.tolist()):
        i = g0 + int(np.argmax(pl[g0:g1]))
        w = int(pw[g0])
        peak_bytes[w] = pl[i]
        peak_t[w] = pt[i]
        counts[w] = g1 - g0
    offsets = np.zeros(na + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    # points are grouped by allocator in allocator order already (sorted by who)
    return peak_bytes, peak_t, offsets, pt, pl, counts > 0


def top_allocator(ct: ColumnarTrace) -> int:
    """The allocator with the largest peak (ties: name, then uid), -1: none."""
    al = ct["allocators"]
    peak = num(al["peak_bytes"])
    rows = np.flatnonzero(~np.isnan(peak))
    if not len(rows):
        return -1
    names = values(al["name"])
    uids = values(al["uid"])
    return int(min(rows.tolist(), key=lambda r: (-int(peak[r]), str(names[r]), str(uids[r]))))


def peak_live_of(ct: ColumnarTrace, allocator: int, peak_us: float) -> F64:
    """Per op, the bytes of its allocations of ``allocator`` live at
    ``peak_us`` (alloc <= peak < free; never freed: live); NaN: none."""
    ops, a = ct["ops"], ct["allocations"]
    out = np.full(ops.n, np.nan)
    if a.n == 0 or allocator < 0:
        return out
    alloc_us, free_us = num(a["alloc_us"]), num(a["free_us"])
    live = (refs(a["allocator"]) == allocator) & (alloc_us <= peak_us) & (np.isnan(free_us) | (free_us > peak_us))
    op = refs(a["op"])
    live &= op >= 0
    total = np.bincount(op[live], weights=num(a["bytes"])[live], minlength=ops.n)
    return np.where(total != 0, total, np.nan)


def peak_live(ct: ColumnarTrace) -> None:
    """``peak_live_bytes`` per op: bytes of its allocations live at the
    trace's memory peak (the top allocator's, first reached at its peak_us)."""
    top = top_allocator(ct)
    peak_us = float(num(ct["allocators"]["peak_us"])[top]) if top >= 0 else 0.0
    ct["ops"]["peak_live_bytes"] = peak_live_of(ct, top, peak_us)


# --- streams ------------------------------------------------------------------------------------


def stream_order(ct: ColumnarTrace) -> None:
    """``next_kernel`` and the idle ``gap_after_us`` after each kernel on its
    stream (order: start, end, uid; the gap: the next start minus the
    latest end so far on the stream, at least 0)."""
    k = ct["kernels"]
    n = k.n
    k["next_kernel"] = np.full(n, -1, dtype=np.int64)
    k["gap_after_us"] = np.full(n, np.nan)
    if n == 0:
        return
    stream = refs(k["stream"])
    start, end = num(k["start_us"]), num(k["end_us"])
    order = _by_stream(k, stream, start, end)
    s_o = stream[order]
    same_next = np.r_[s_o[1:] == s_o[:-1], False]
    nxt = np.full(n, -1, dtype=np.int64)
    nxt[:-1] = order[1:]
    busy_until = _group_cummax(s_o, end[order])
    next_start = np.r_[start[order][1:], np.nan]
    gap = np.maximum(next_start - busy_until, 0.0)
    gap = np.where(np.isnan(next_start - busy_until), np.nan, gap)
    next_kernel = np.full(n, -1, dtype=np.int64)
    gap_after = np.full(n, np.nan)
    next_kernel[order] = np.where(same_next, nxt, -1)
    gap_after[order] = np.where(same_next, gap, np.nan)
    k["next_kernel"] = next_kernel
    k["gap_after_us"] = gap_after


def _by_stream(k: Table, stream: I64, start: F64, end: F64) -> I64:
    """Kernels by (stream, start, end, uid): NaN times last, uids compared as text."""
    order = np.lexsort((np.arange(len(stream)), end, start, stream))
    s, a, b = stream[order], start[order], end[order]
    tie = np.r_[False, (s[1:] == s[:-1]) & (a[1:] == a[:-1]) & (b[1:] == b[:-1])]
    if tie.any():  # equal (stream, start, end): by uid text, a few runs
        uids = values(k["uid"])
        run_start = np.flatnonzero(~tie)
        run_end = np.r_[run_start[1:], len(order)]
        for r0, r1 in zip(run_start.tolist(), run_end.tolist()):
            if r1 - r0 > 1:
                part = order[r0:r1].tolist()
                order[r0:r1] = sorted(part, key=lambda i: uids[i])
    return order


def _group_cummax(group: I64, x: F64) -> F64:
    """Running max of ``x`` within each run of equal ``group`` (NaN skipped; NaN where x is NaN)."""
    return _cummax(group, x)


@kernel
def _cummax(group: I64, x: F64) -> F64:  # pragma: no cover - compiled
    out = np.empty(len(x))
    best = np.nan
    for i in range(len(x)):
        if i == 0 or group[i] != group[i - 1]:
            best = np.nan
        v = x[i]
        if v == v and (best != best or v > best):
            best = v
        out[i] = best if v == v else np.nan
    return out


def stream_busy(ct: ColumnarTrace) -> None:
    """``busy_us`` per stream: the length of the union of its kernel
    intervals (0 for a stream without kernels, None when none of its
    kernels has times)."""
    st, k = ct["streams"], ct["kernels"]
    busy = np.zeros(st.n)
    if k.n and st.n:
        stream = refs(k["stream"])
        start, end = num(k["start_us"]), num(k["end_us"])
        busy = _busy(stream, start, end, st.n)
    st["busy_us"] = busy


@kernel
def _busy(stream: I64, start: F64, end: F64, n: int) -> F64:  # pragma: no cover - compiled
    """Per stream the union length of its timed kernels' [start, max(end, start))."""
    keep = np.flatnonzero((start == start) & (end == end))
    order = keep[np.argsort(start[keep], kind="mergesort")]
    busy = np.zeros(n)
    timed = np.zeros(n, dtype=np.bool_)
    seen = np.zeros(n, dtype=np.bool_)
    cur_s = np.full(n, np.nan)
    cur_e = np.full(n, np.nan)
    for i in range(len(stream)):
        seen[stream[i]] = True
    for k in range(len(order)):
        i = order[k]
        s = stream[i]
        a = start[i]
        b = max(end[i], a)
        timed[s] = True
        if cur_s[s] != cur_s[s]:
            cur_s[s] = a
            cur_e[s] = b
        elif a > cur_e[s]:
            busy[s] += cur_e[s] - cur_s[s]
            cur_s[s] = a
            cur_e[s] = b
        elif b > cur_e[s]:
            cur_e[s] = b
    for s in range(n):
        if timed[s]:
            busy[s] += cur_e[s] - cur_s[s]
        elif seen[s]:
            busy[s] = np.nan
    return busy


def copy_exposure(ct: ColumnarTrace) -> None:
    """``exposed_us`` per copy kernel (kind ``memcpy``): its duration minus
    the part of it compute kernels on the same device overlap; None for
    other kernels."""
    k, st = ct["kernels"], ct["streams"]
    exposed = np.full(k.n, np.nan)
    if k.n:
        device = refs(st["device"])[refs(k["stream"])]
        start, end = num(k["start_us"]), num(k["end_us"])
        copy = codes_of(k["kind"], "memcpy")
        compute = codes_of(k["kind"], "compute")
        for dev in np.unique(device[copy]).tolist():
            on = device == dev
            seg_a, seg_b = union_intervals(start[on & compute], end[on & compute])
            sel = on & copy
            a, b = start[sel], end[sel]
            exposed[sel] = np.maximum((b - a) - covered(seg_a, seg_b, a, b), 0.0)
    k["exposed_us"] = exposed


def degrees(ct: ColumnarTrace) -> None:
    """``readers`` per tensor (distinct ops reading it) and ``inputs`` per op (data inputs)."""
    c, t, ops = ct["consumes"], ct["tensors"], ct["ops"]
    op, tensor = refs(c["op"]) if c.n else np.zeros(0, np.int64), refs(c["tensor"]) if c.n else np.zeros(0, np.int64)
    if c.n:
        pairs = np.unique(np.stack([tensor, op], axis=1), axis=0)
        t["readers"] = np.bincount(pairs[:, 0], minlength=t.n).astype(np.int64)
    else:
        t["readers"] = np.zeros(t.n, dtype=np.int64)
    ops["inputs"] = np.bincount(op, minlength=ops.n).astype(np.int64)


# --- facts --------------------------------------------------------------------------------------


def facts(ct: ColumnarTrace) -> dict[str, TraceProp]:
    """What the trace has, so analyses can say ``not available`` precisely."""
    ops, k = ct["ops"], ct["kernels"]
    timed = ct.time_unit in ("us", "step")
    ends = np.concatenate([num(ops["end_us"]), num(k["end_us"])]) if (ops.n or k.n) else np.zeros(0)
    end = float(np.nanmax(ends)) if len(ends) and not np.isnan(ends).all() else None
    a = ct["allocations"]
    return {
        "framework": ct.framework,
        "time_unit": ct.time_unit,
        "sources": json.dumps(ct.sources),
        "span_us": end if timed else None,
        "ops": ops.n,
        "executed_ops": int(executed(ct).sum()),
        **{
            fact.flag: bool(has)
            for fact, has in (
                (Fact.TIMES, timed),
                (Fact.DEPS, ct["deps"].n),
                (Fact.KERNELS, k.n),
                (Fact.MEMORY, a.n and (~np.isnan(num(a["alloc_us"]))).any()),
                (Fact.COPIES, k.n and codes_of(k["kind"], "memcpy").any()),
                (Fact.STEPS, "steps" in ct.tables and ct.tables["steps"].n),
            )
        },
    }


def local(ct: ColumnarTrace, known_dag: Any = None) -> dict[str, TraceProp]:
    """Every pass that needs nothing beyond this trace (or rank): weights,
    the DAG passes, memory timelines, stream order and busy time, copy
    exposure, degrees, facts."""
    ops = ct["ops"]
    w = weights(ct)
    ops["weight_us"] = w
    props: dict[str, TraceProp] = {}
    props.update(dag_passes_columns(ct, w, known_dag))
    props.update(memory(ct))
    ct.tables["steps"] = steps.steps(ct, ct.meta.get("step_marker"))
    stream_order(ct)
    stream_busy(ct)
    copy_exposure(ct)
    degrees(ct)
    props.update(facts(ct))
    return props


def whole(ct: ColumnarTrace, known_dag: Any = None) -> dict[str, TraceProp]:
    """Every pass over a trace held whole (every rank of it at once)."""
    from tracegraph.ingest import collectives, observed_path, ranks

    props = local(ct, known_dag)
    peak_live(ct)
    joined = collectives.join(observed_path.collective_calls(ct))
    props.update(joined.props())
    ct.tables["collectives"], ct.tables["joins"] = collective_tables(ct, joined)
    waits = {(table, row): w for (_, table, row), w in joined.waits().items()}
    rows, has_comm = ranks.rank_rows(ct, waits)
    ct.tables["ranks"] = rank_table(rows)
    props[Fact.COMMUNICATION.flag] = has_comm
    props.update(observed_path.whole(ct, joined))
    props.update(facts(ct))
    return props


def collective_tables(ct: ColumnarTrace, joined: Any) -> tuple[Table, Table]:
    """The Collective rows and the JOINS rows (an op or kernel row of ``ct`` each)."""
    return collective_table(joined), joins_table(joined)


def collective_table(joined: Any) -> Table:
    """The Collective rows of collectives joined across ranks."""
    cs = joined.collectives
    t = Table(len(cs))
    t["uid"] = Texts.of([c.uid for c in cs])
    t["name"] = Strings.of([c.name for c in cs])
    t["process_group"] = Strings.of([c.process_group for c in cs])
    t["seq"] = np.asarray([c.seq for c in cs], dtype=np.int64)
    t["ranks"] = np.asarray([c.ranks for c in cs], dtype=np.int64)
    t["last_rank"] = np.asarray([c.last_rank for c in cs], dtype=np.int64)
    t["first_arrival_us"] = np.asarray([c.first_arrival for c in cs], dtype=np.float64)
    t["last_arrival_us"] = np.asarray([c.last_arrival for c in cs], dtype=np.float64)
    t["caused_us"] = np.asarray([c.caused for c in cs], dtype=np.float64)
    t["waited_us"] = np.asarray([c.waited for c in cs], dtype=np.float64)
    t["end_spread_us"] = np.asarray([np.nan if c.end_spread is None else c.end_spread for c in cs], dtype=np.float64)
    return t


def joins_table(joined: Any) -> Table:
    """A JOINS row per rank's call of a collective: the call's op or kernel row, the collective's row."""
    members = [(i, m) for i, c in enumerate(joined.collectives) for m in c.members]
    j = Table(len(members))
    j["op"] = np.asarray([m.call.row if m.call.table == "ops" else -1 for _, m in members], dtype=np.int64)
    j["kernel"] = np.asarray([m.call.row if m.call.table == "kernels" else -1 for _, m in members], dtype=np.int64)
    j["collective"] = np.asarray([i for i, _ in members], dtype=np.int64)
    j["rank"] = np.asarray([m.rank for _, m in members], dtype=np.int64)
    j["wait_us"] = np.asarray([m.wait for _, m in members], dtype=np.float64)
    return j


def rank_table(rows: list[dict[str, Any]]) -> Table:
    t = Table(len(rows))
    t["uid"] = Texts.of([r["uid"] for r in rows])
    t["rank"] = np.asarray([r["rank"] for r in rows], dtype=np.int64)
    t["mode"] = Strings.of([r["mode"] for r in rows])
    for c in ("comm_us", "compute_us", "overlap_us", "exposed_comm_us", *(f"device_{d}" for d in DEVICE_COLUMNS)):
        t[c] = np.asarray([np.nan if r.get(c) is None else r[c] for r in rows], dtype=np.float64)
    t["lanes"] = Lists.of([r["lanes"] for r in rows], str)
    t["lane_kinds"] = Lists.of([r["lane_kinds"] for r in rows], str)
    for c in ("lane_window_us", "idle_us", "idle_collective_us", "idle_sync_us", "idle_host_us", "idle_other_us"):
        t[c] = Lists.of([r[c] for r in rows], float)
    return t
