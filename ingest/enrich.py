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
  lane's idle time by cause (:mod:`idle`).

The DAG passes themselves are :mod:`tracegraph.dag` (what-if reruns them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pandas as pd

from tracegraph.dag import dag_passes, dependency_dag
from tracegraph.errors import DependencyCycle
from tracegraph.facts import Fact
from tracegraph.ingest.collectives import join_collectives
from tracegraph.ingest.frames import TraceFrames
from tracegraph.ingest.intervals import covered, union_intervals
from tracegraph.ingest.observed_path import observed_path
from tracegraph.ingest.ranks import rank_table

# A property value of the Trace node (None: left out when stored).
TraceProp = str | int | float | bool | None


@dataclass
class Summary:
    """Trace-level facts stored on the Trace node."""

    props: dict[str, TraceProp] = field(default_factory=dict)


def enrich(tf: TraceFrames) -> Summary:
    """Add derived columns to ``tf`` in place; return the trace summary."""
    ops = tf.ops
    ops["weight_us"] = _weights(tf)
    summary = Summary()
    summary.props.update(_dag_passes(tf))
    summary.props.update(_memory(tf))
    _peak_live(tf)
    _stream_order(tf)
    _stream_busy(tf)
    _copy_exposure(tf)
    _degrees(tf)
    summary.props.update(join_collectives(tf))
    summary.props[Fact.COMMUNICATION.flag] = rank_table(tf)
    summary.props.update(observed_path(tf))
    summary.props.update(_facts(tf))
    tf.check_enriched()
    return summary


def _weights(tf: TraceFrames) -> pd.Series:
    """Kernel time when the op launched kernels, else its self time: its
    duration minus those of the ops nested directly in it (``parent``; no
    nesting: its duration), never below 0."""
    ops = tf.ops
    executed = ops["executed"].fillna(True).astype(bool)
    if tf.time_unit != "us":
        return executed.astype(float)
    kernel_sum = tf.kernels.groupby("op")["dur_us"].sum() if len(tf.kernels) else pd.Series(dtype=float)
    own = pd.to_numeric(ops["dur_us"], errors="coerce").fillna(0.0)
    if "parent" in ops and ops["parent"].notna().any():
        nested = pd.DataFrame({"parent": ops["parent"], "dur": own})
        children = nested[nested["parent"].notna()].groupby("parent")["dur"].sum()
        own = (own - ops["uid"].map(children).fillna(0.0)).clip(lower=0.0)
    weight = ops["uid"].map(kernel_sum).astype(float).fillna(own)
    return weight.where(executed, 0.0).astype(float)


def dag_members(tf: TraceFrames) -> npt.NDArray[np.bool_]:
    """The ops that take part in the dependency DAG: the executed ones, and
    of those only the ones marked ``carries_deps`` when the format marks
    any (a PyTorch trace joined to its Execution Trace)."""
    ops = tf.ops
    member = np.array(ops["executed"].fillna(True).astype(bool).to_numpy(), dtype=bool)
    if "carries_deps" in ops and ops["carries_deps"].notna().any():
        member &= np.array(ops["carries_deps"].fillna(False).astype(bool).to_numpy(), dtype=bool)
    return member


def _path_weights(tf: TraceFrames, member: npt.NDArray[np.bool_]) -> npt.NDArray[np.float64]:
    """Each DAG op's weight plus the weights of the ops nested in it (its
    subtree by ``parent``): a PyTorch op's own weight is its self time, and
    on the DAG it stands for all it ran. Without nesting: the weight."""
    ops = tf.ops
    weight = ops["weight_us"].to_numpy(dtype=float)
    total = weight.copy()
    if tf.time_unit == "us" and "parent" in ops and ops["parent"].notna().any():
        index = {u: i for i, u in enumerate(ops["uid"].tolist())}
        parent = [index.get(p, -1) if isinstance(p, str) else -1 for p in ops["parent"].tolist()]
        depth = [0] * len(parent)
        for i in range(len(parent)):  # depth by walking up (trees are shallow)
            d, p = 0, parent[i]
            while p >= 0:
                d, p = d + 1, parent[p]
            depth[i] = d
        for i in sorted(range(len(parent)), key=lambda i: -depth[i]):  # children before parents
            if parent[i] >= 0:
                total[parent[i]] += total[i]
    return np.where(member, total, np.nan)


def _dag_passes(tf: TraceFrames) -> dict[str, TraceProp]:
    """Critical path (by path weight) and longest chain (by op count)."""
    ops = tf.ops
    n = len(ops)
    cols = ["es_us", "ef_us", "ls_us", "lf_us", "slack_us", "cp_pred", "cp_step", "chain_len", "chain_pred", "lc_step"]
    for c in cols:
        ops[c] = None
    executed = dag_members(tf)
    ops["path_weight_us"] = None
    if n == 0 or not executed.any() or tf.deps.empty:
        # Without dependencies every op is a chain of its own: no path to report.
        return {"critical_path_us": None, "longest_chain_ops": None}
    uids = ops["uid"].tolist()
    dag = tf.dag if tf.dag is not None and bool(np.array_equal(tf.dag.executed, executed)) else None
    if dag is None:
        dag = dependency_dag(uids, ops["seq"].tolist(), executed, zip(tf.deps["src"], tf.deps["dst"]))
    path_weight = _path_weights(tf, executed)
    ops["path_weight_us"] = [None if w != w else float(w) for w in path_weight]
    weight = np.nan_to_num(path_weight)
    cp = dag_passes(dag, weight)
    lc = dag_passes(dag, np.where(executed, 1.0, 0.0))
    live = executed  # every executed op is in ``order``; the rest get NaN
    ops["es_us"] = np.where(live, cp.es, np.nan)
    ops["ef_us"] = np.where(live, cp.ef, np.nan)
    ops["lf_us"] = np.where(live, cp.lf, np.nan)
    ops["ls_us"] = np.where(live, cp.ls, np.nan)
    ops["slack_us"] = np.where(live, cp.slack, np.nan)
    ops["cp_pred"] = [uids[p] if p >= 0 else None for p in cp.pred]
    ops["chain_len"] = np.where(live, lc.ef, np.nan)
    ops["chain_pred"] = [uids[p] if p >= 0 else None for p in lc.pred]
    ops["cp_step"] = cp.steps
    ops["lc_step"] = lc.steps
    return {
        "critical_path_us": float(cp.length),
        "critical_path_ops": len(cp.path),
        "longest_chain_ops": int(lc.length),
    }


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


def _memory(tf: TraceFrames) -> dict[str, TraceProp]:
    """Per allocator running sum, peak and timeline; stored on allocators."""
    al = tf.allocators
    for c in ("peak_bytes", "peak_us", "timeline_us", "timeline_bytes"):
        al[c] = None
    a = tf.allocations[tf.allocations["alloc_us"].notna()]
    if a.empty:
        return {"memory_peak_bytes": None}
    allocs = pd.DataFrame(
        {"allocator": a["allocator"], "t": a["alloc_us"].astype(float), "delta": a["bytes"].astype(float), "order": 1}
    )
    freed = a[a["free_us"].notna()]
    frees = pd.DataFrame(
        {
            "allocator": freed["allocator"],
            "t": freed["free_us"].astype(float),
            "delta": -freed["bytes"].astype(float),
            "order": 0,
        }
    )
    events = pd.concat([allocs, frees]).sort_values(["allocator", "t", "order"], kind="stable")
    events["live"] = events.groupby("allocator")["delta"].cumsum()
    # One point per timestamp: live bytes after every event at that time.
    points = events.groupby(["allocator", "t"], sort=True)["live"].last().reset_index()
    peak_all = 0.0
    for uid, pts in points.groupby("allocator"):
        i = int(pts["live"].to_numpy().argmax())  # first time the max is reached
        row = al.index[al["uid"] == uid][0]
        al.at[row, "peak_bytes"] = int(pts["live"].iloc[i])
        al.at[row, "peak_us"] = float(pts["t"].iloc[i])
        # A list in one cell of an object column is what pandas stores here;
        # pandas-stubs types .at[] assignments as scalars only.
        al.at[row, "timeline_us"] = pts["t"].astype(float).tolist()  # type: ignore[assignment]
        al.at[row, "timeline_bytes"] = pts["live"].astype(int).tolist()  # type: ignore[assignment]
        peak_all = max(peak_all, float(pts["live"].iloc[i]))
    return {"memory_peak_bytes": int(peak_all)}


def _peak_live(tf: TraceFrames) -> None:
    """``peak_live_bytes`` per op: the bytes of its allocations live at the
    trace's memory peak, the peak of the allocator with the largest peak
    (ties: name, then uid), first reached at its ``peak_us``; live means
    alloc_us <= peak_us < free_us (never freed: live); absent when 0. Stored so that
    layer-breakdown sums ops, not a grouping of every op's allocations."""
    ops = tf.ops
    ops["peak_live_bytes"] = None
    al = tf.allocators[tf.allocators["peak_bytes"].notna()]
    if al.empty:
        return
    top = al.assign(p=al["peak_bytes"].astype("int64")).sort_values(
        ["p", "name", "uid"], ascending=[False, True, True], kind="stable"
    )
    allocator, peak_us = top["uid"].iloc[0], float(top["peak_us"].iloc[0])
    a = tf.allocations
    alloc_us = pd.to_numeric(a["alloc_us"], errors="coerce")
    free_us = pd.to_numeric(a["free_us"], errors="coerce")
    live = a[(a["allocator"] == allocator) & (alloc_us <= peak_us) & (free_us.isna() | (free_us > peak_us))]
    per_op = live[live["op"].notna()].groupby("op")["bytes"].sum()
    # Absent (not 0) where nothing is live: most ops, and sum() skips nulls.
    ops["peak_live_bytes"] = [int(b) if b == b and b else None for b in ops["uid"].map(per_op)]


def _stream_order(tf: TraceFrames) -> None:
    """``next_kernel`` and the idle ``gap_us`` after each kernel on its stream."""
    k = tf.kernels
    k["next_kernel"] = None
    k["gap_after_us"] = None
    if k.empty:
        return
    ordered = k.sort_values(["stream", "start_us", "end_us", "uid"], kind="stable")
    nxt = ordered.groupby("stream")["uid"].shift(-1)
    next_start = ordered.groupby("stream")["start_us"].shift(-1)
    # Gap to the next kernel after everything before it on the stream ended.
    busy_until = ordered.groupby("stream")["end_us"].cummax()
    gap = (next_start - busy_until).clip(lower=0)
    k.loc[ordered.index, "next_kernel"] = nxt.where(nxt.notna(), None)
    k.loc[ordered.index, "gap_after_us"] = gap.where(nxt.notna(), None)


def _degrees(tf: TraceFrames) -> None:
    """``readers`` per tensor (distinct ops reading it) and ``inputs`` per
    op (data inputs, one per input position): fan-out and fan-in, counted
    here once so that fan-out does not aggregate every CONSUMES edge."""
    c = tf.consumes
    readers = c.drop_duplicates(["tensor", "op"]).groupby("tensor").size()
    inputs = c.groupby("op").size()
    tf.tensors["readers"] = tf.tensors["uid"].map(readers).fillna(0).astype("int64")
    tf.ops["inputs"] = tf.ops["uid"].map(inputs).fillna(0).astype("int64")


def _stream_busy(tf: TraceFrames) -> None:
    """``busy_us`` per stream: the length of the union of its kernel
    intervals (overlapping kernels count once; 0 for a stream without
    kernels, None when none of its kernels has times)."""
    st, k = tf.streams, tf.kernels
    st["busy_us"] = 0.0 if len(st) else None
    if k.empty or st.empty:
        return
    starts = pd.to_numeric(k["start_us"], errors="coerce")
    ends = pd.to_numeric(k["end_us"], errors="coerce")
    busy = {}
    for stream, idx in k.groupby("stream").groups.items():
        a, b = union_intervals(starts[idx], ends[idx])
        busy[stream] = float((b - a).sum()) if len(a) else None  # None: no kernel has times
    st["busy_us"] = [busy.get(u, 0.0) for u in st["uid"]]


def _copy_exposure(tf: TraceFrames) -> None:
    """``exposed_us`` per copy kernel (kind ``memcpy``): its duration minus
    the part of it that any compute kernel on the same device overlaps
    (interval arithmetic against the union of that device's compute kernel
    intervals). None for compute kernels."""
    k = tf.kernels
    k["exposed_us"] = None
    if k.empty:
        return
    device = k["stream"].map(dict(zip(tf.streams["uid"], tf.streams["device"])))
    starts = pd.to_numeric(k["start_us"], errors="coerce").astype(float)
    ends = pd.to_numeric(k["end_us"], errors="coerce").astype(float)
    copy = (k["kind"] == "memcpy").to_numpy()
    compute = (k["kind"] == "compute").to_numpy()
    exposed = pd.Series([None] * len(k), index=k.index, dtype=object)
    for dev in device[copy].dropna().unique():
        on_dev = (device == dev).to_numpy()
        seg_a, seg_b = union_intervals(starts[on_dev & compute], ends[on_dev & compute])
        sel = on_dev & copy
        a, b = starts[sel].to_numpy(), ends[sel].to_numpy()
        hidden = covered(seg_a, seg_b, a, b)
        exp = np.maximum((b - a) - hidden, 0.0)
        exposed[sel] = [None if np.isnan(x) else float(x) for x in exp]
    k["exposed_us"] = exposed


def _facts(tf: TraceFrames) -> dict[str, TraceProp]:
    """What the trace has, so analyses can say ``not available`` precisely."""
    ops = tf.ops
    timed = tf.time_unit in ("us", "step")
    end = pd.to_numeric(pd.concat([ops["end_us"], tf.kernels["end_us"]]), errors="coerce").max()
    return {
        "framework": tf.framework,
        "time_unit": tf.time_unit,
        "sources": json.dumps(tf.sources),
        "span_us": float(end) if timed and pd.notna(end) else None,
        "ops": len(ops),
        "executed_ops": int(ops["executed"].fillna(True).astype(bool).sum()),
        **{
            fact.flag: bool(has)
            for fact, has in (
                (Fact.TIMES, timed),
                (Fact.DEPS, len(tf.deps)),
                (Fact.KERNELS, len(tf.kernels)),
                (Fact.MEMORY, tf.allocations["alloc_us"].notna().any()),
                (Fact.COPIES, len(tf.kernels) and (tf.kernels["kind"] == "memcpy").any()),
            )
        },
    }
