"""The observed critical path: what actually made the trace take as long as
it did, as the longest path through its happens-before graph.

The dependency critical path (``critical-path``) asks what the longest
chain of data dependencies would take with unlimited resources. A profile
from PyTorch has no data dependencies; what it has is the order in which
things actually ran. This module builds that order as a DAG and finds its
heaviest path in one topological pass; the result is stored per Op/Kernel
and read by ``cypher/observed-critical-path*.cypher``, whose header is the
definition users read. In short:

* Nodes: the start and the end of every *path op* (an executed op with a
  positive duration whose role is not ``annotation``: annotations such as
  PyTorch's ``user_annotation`` and ``python_function`` mark regions, they
  are not work) and of every kernel.
* Edges, each with a *weight* (the time it adds to the path) and its
  elapsed time (the time between its two ends):
  - op body: an op's start -> its first path child's start -> that child's
    end -> the next child's start ... -> the op's end (children: the path ops
    whose parent, skipping non-path ops, is this op; in start order);
    weight = elapsed, except the last edge into the end of a blocking call
    (an op of role ``sync``, which its format names: e.g. Kineto's
    ``cudaStreamSynchronize``), which weighs 0: that time is waiting, and
    the wait is explained by the sync edge below;
  - thread order: the end of a top-level op -> the start of the next
    top-level op on its thread (formats without threads: on its device, from
    the op with the latest end at or before the start), weight 0 (the thread
    was idle or outside the profiler);
  - data and control dependencies (TF): the producer's end -> the consumer's
    start, weight 0;
  - kernel body: start -> end, weight = duration;
  - launch: the start of the runtime call that issued a kernel (the op that
    launched it when the format has no runtime calls) -> the kernel's start,
    weight = elapsed when the kernel waited for its launch (the stream's
    previous kernel, and any kernel it was made to wait for, had ended
    before the call started), else 0 (it waited in the stream's queue);
  - stream order: the previous kernel's end on the same stream -> the
    kernel's start, weight = the gap when the launch edge weighs 0 and the
    gap is under 1.5 ms (the stream's scheduling gap), else 0;
  - synchronization: a kernel's end -> the end of the blocking call that
    waited for it, and a kernel's end -> the start of the kernel a
    ``cudaStreamWaitEvent`` held back; weight 0;
  - collectives joined across ranks (:mod:`collectives`): a call still
    running when its collective's last rank arrives gets a *join node* at
    that arrival (its body's edge into it weighs 0: waiting; the node ->
    its end weighs the rest), which the last call's start also leads to
    (weight 0); a host call that returned before, on a thread running
    nothing at the arrival: the last call's start -> the first op the
    thread starts after it, weight = the time from the arrival; and the
    thread-order edge into the last rank's host call weighs its elapsed
    time (the others waited for it). The path thus crosses ranks.
* The path is the heaviest path (largest summed weight); its *length* is
  that weight. Ties: the first node reached in the topological order
  (sources by time) keeps its predecessor, except that an edge from another
  rank yields a tie to the rank's own (as a job streamed rank by rank,
  :mod:`.job`, must break it); the path ends at the earliest node of
  maximal weight.

These weights are those of Holistic Trace Analysis's critical path graph
(so its lengths agree with HTA's on the same trace of one rank), with three
differences: HTA adds no stream edge past 1.5 ms and none when the launch
edge counts (here: a 0-weight edge, a true happens-before); HTA chains
runtime calls across threads by completion order (the CUDA runtime lock),
not modelled here; HTA merges the backward thread into the forward one, here
threads stay apart (cross-thread order comes from launches and syncs).

Each path edge with a positive elapsed time is one *segment* (row): the
event it is attributed to, its kind, start, elapsed time and whether it
counts (weight > 0). Attribution: an op-body edge to its op, a kernel body
to its kernel, a counting launch edge to the runtime call, every other edge
(idle, queue wait, sync) to the event whose start or end it leads to.
Kinds: ``cpu_op``, ``runtime`` (runtime calls and launch delays), ``sync``
(blocking calls and sync edges), ``kernel``, ``memcpy`` (copies and
memsets), ``communication`` (communication kernels), ``idle`` (thread order, queue
waits and stream gaps). The counted segments sum to the length; all
segments sum to the path's span.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tracegraph.columns import Lists, Strings, Table, distinct, labelled, values
from tracegraph.ingest import hb
from tracegraph.ingest.collectives import Joined, RankCalls, calls
from tracegraph.ingest.columnar import ColumnarTrace, codes_of, executed, num, refs
from tracegraph.ingest.intervals import inside, union_intervals

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
B = npt.NDArray[np.bool_]

_ROLE = {"op": hb.R_OP, "annotation": hb.R_ANNOTATION, "runtime": hb.R_RUNTIME, "sync": hb.R_SYNC}
_KERNEL_KIND = {"compute": hb.K_KERNEL, "memcpy": hb.K_MEMCPY, "memset": hb.K_MEMCPY, "communication": hb.K_COMM}


@dataclass
class Inputs:
    """What :func:`hb.build` reads of a trace, and the resources' names."""

    op_start: F64
    op_end: F64
    op_keep: B
    op_role: I64
    op_parent: I64
    op_seq: F64
    op_resource: I64
    op_threaded: B
    resource_names: list[str]
    k_start: F64
    k_end: F64
    k_kind: I64
    k_stream: I64
    k_launch: I64
    k_labels: list[str]  # per stream: ``device name/stream name``
    sync_src: I64
    sync_dst: I64
    sync_kind: I64
    dep_src: I64
    dep_dst: I64


def _codes(column: object, mapping: dict[str, int], default: int) -> I64:
    s = column if isinstance(column, Strings) else Strings.of(values(column))  # type: ignore[arg-type]
    table = np.asarray([mapping.get(v, default) for v in s.values] + [default], dtype=np.int64)
    c = np.asarray(s.codes, dtype=np.int64)
    return table[np.where(c < 0, len(s.values), c)]


def inputs(ct: ColumnarTrace) -> Inputs:
    ops, k, st, dev = ct["ops"], ct["kernels"], ct["streams"], ct["devices"]
    start, end = num(ops["start_us"]), num(ops["end_us"])
    role = _codes(ops["role"], _ROLE, hb.R_OP)
    keep = executed(ct) & ~np.isnan(start) & ~np.isnan(end) & (end > start) & (role != hb.R_ANNOTATION)
    # resources: the op's thread, else its device's name ("host" without one)
    thread = ops["thread"] if isinstance(ops["thread"], Strings) else Strings.of(values(ops["thread"]))
    dev_names = values(dev["name"])
    device = refs(ops["device"])
    t_codes = np.asarray(thread.codes, dtype=np.int64)
    key = np.where(t_codes >= 0, t_codes, len(thread.values) + np.where(device >= 0, device, len(dev_names)))
    uniq, inverse = distinct(key)
    names_by_key = [
        thread.values[u]
        if u < len(thread.values)
        else (dev_names[u - len(thread.values)] if u - len(thread.values) < len(dev_names) else "host")
        for u in uniq.tolist()
    ]
    index: dict[str, int] = {}
    remap = np.asarray([index.setdefault(str(nm), len(index)) for nm in names_by_key] or [0], dtype=np.int64)
    resource = remap[inverse.reshape(-1)] if len(key) else np.zeros(0, dtype=np.int64)
    seq = num(ops["seq"]) if "seq" in ops else np.full(ops.n, np.nan)
    launch = refs(k["launch"]) if k.n else np.zeros(0, np.int64)
    k_op = refs(k["op"]) if k.n else np.zeros(0, np.int64)
    labels = [f"{dev_names[d] if d >= 0 else ''}/{s}" for d, s in zip(refs(st["device"]).tolist(), values(st["name"]))]
    sy = ct["syncs"]
    return Inputs(
        op_start=start,
        op_end=end,
        op_keep=keep,
        op_role=role,
        op_parent=refs(ops["parent"]) if "parent" in ops else np.full(ops.n, -1, dtype=np.int64),
        op_seq=seq,
        op_resource=resource,
        op_threaded=t_codes >= 0,
        resource_names=list(index),
        k_start=num(k["start_us"]),
        k_end=num(k["end_us"]),
        k_kind=_codes(k["kind"], _KERNEL_KIND, hb.K_KERNEL) if k.n else np.zeros(0, np.int64),
        k_stream=refs(k["stream"]) if k.n else np.zeros(0, np.int64),
        k_launch=np.where(launch >= 0, launch, k_op),
        k_labels=labels,
        sync_src=refs(sy["src"]),
        sync_dst=refs(sy["dst"]),
        sync_kind=codes_of(sy["kind"], "stream_wait").astype(np.int64),
        dep_src=refs(ct["deps"]["src"]),
        dep_dst=refs(ct["deps"]["dst"]),
    )


def graph(
    x: Inputs, waiting_elem: I64 | None = None, waiting_at: F64 | None = None, late: I64 | None = None
) -> hb.Graph:
    return hb.build(
        x.op_start,
        x.op_end,
        x.op_keep,
        x.op_role,
        x.op_parent,
        x.op_seq,
        x.op_resource,
        x.op_threaded,
        x.k_start,
        x.k_end,
        x.k_kind,
        x.k_stream,
        x.k_launch,
        x.sync_src,
        x.sync_dst,
        x.sync_kind,
        x.dep_src,
        x.dep_dst,
        waiting_elem,
        waiting_at,
        late,
    )


def elements(x: Inputs) -> tuple[I64, I64]:
    """Each op's and kernel's element on the graph (-1: not on it)."""
    op_rows = np.flatnonzero(x.op_keep)
    k_rows = np.flatnonzero(~np.isnan(x.k_start) & ~np.isnan(x.k_end))
    op_e = np.full(len(x.op_start), -1, dtype=np.int64)
    op_e[op_rows] = np.arange(len(op_rows))
    k_e = np.full(len(x.k_start), -1, dtype=np.int64)
    k_e[k_rows] = len(op_rows) + np.arange(len(k_rows))
    return op_e, k_e


def collective_calls(ct: ColumnarTrace) -> RankCalls:
    """The collective calls of the ranks ``ct`` holds, each marked whether
    it is an element of the happens-before graph (:func:`elements`; the
    inputs are made for this and not kept)."""
    op_e, k_e = elements(inputs(ct))
    return calls(ct, op_e >= 0, k_e >= 0)


def node_times(x: Inputs) -> tuple[F64, F64]:
    """Per element: its start node's and end node's time."""
    op_rows = np.flatnonzero(x.op_keep)
    k_rows = np.flatnonzero(~np.isnan(x.k_start) & ~np.isnan(x.k_end))
    s = np.concatenate([x.op_start[op_rows], x.k_start[k_rows]])
    e = np.concatenate([x.op_end[op_rows], x.k_end[k_rows]])
    return s, np.maximum(e, s)


@dataclass
class Segments:
    """The path's segments in step order: element, kind code, start, elapsed, counted."""

    elem: I64
    kind: I64
    start: F64
    dur: F64
    counted: B


def segments(g: hb.Graph, edges: I64) -> Segments:
    s, d = g.src[edges], g.dst[edges]
    elapsed = np.maximum(g.t[d] - g.t[s], 0.0)
    keep = elapsed > 0.0
    e = edges[keep]
    return Segments(g.elem[e], g.kind[e], g.t[s[keep]], elapsed[keep], g.w[e] > 0.0)


# --- a trace held whole -------------------------------------------------------------------------


def whole(
    ct: ColumnarTrace, joined: Joined | None, op_rank: I64 | None = None, k_rank: I64 | None = None
) -> dict[str, float | None]:
    """The path of ``ct`` held whole (every rank's elements on one graph,
    collectives' edges included); stores the segments (:func:`store`)."""
    empty: dict[str, float | None] = {
        "observed_path_us": None,
        "observed_path_span_us": None,
        "observed_path_segments": None,
    }
    clear(ct)
    ops, k = ct["ops"], ct["kernels"]
    if ct.time_unit not in ("us", "step") or (ops.n == 0 and k.n == 0):
        return empty
    x = inputs(ct)
    op_e, k_e = elements(x)
    n_ops = int((op_e >= 0).sum())
    t_s, t_e = node_times(x)
    # collectives: the last arrival's element and its other members on the graph
    colls: list[tuple[int, list[int]]] = []
    waiting: dict[int, int] = {}
    waiting_at: list[float] = []
    late: list[int] = []
    if joined is not None:
        for c in joined.collectives:
            found = []
            for m in c.members:
                e = int(op_e[m.call.row] if m.call.table == "ops" else k_e[m.call.row])
                if e >= 0:
                    found.append((m.wait, m.rank, e))
            found.sort()
            if len(found) < 2 or found[0][0] != 0.0:
                continue
            last = found[0][2]
            arrival = t_s[last]
            others = [e for _, _, e in found[1:]]
            colls.append((last, others))
            for e in others:
                if t_s[e] < arrival < t_e[e]:
                    waiting[e] = len(waiting_at)
                    waiting_at.append(arrival)
            if last < n_ops and arrival > max(t_s[e] for e in others):
                late.append(last)
    w_elem = np.asarray(list(waiting), dtype=np.int64)
    g = graph(x, w_elem, np.asarray(waiting_at, dtype=np.float64), np.asarray(late, dtype=np.int64))
    if g.n_nodes == 0:
        return empty
    if colls:
        g = _collective_edges(g, x, colls)
    best, pred, _ = hb.forward(g)
    if not len(best):
        return empty
    end = hb.path_end(g, best)
    path, _ = hb.walk_back(pred, g.src, end)
    seg = segments(g, path)
    if not len(seg.elem):
        return empty
    store(ct, g, seg, resources(x, g).tolist())
    nxt = observed_next(g, seg)
    ct.tables["observed_next"] = nxt
    return {
        "observed_path_us": float(seg.dur[seg.counted].sum()),
        "observed_path_span_us": float(seg.dur.sum()),
        "observed_path_segments": len(seg.elem),
    }


class Entries:
    """Where a collective's last arrival enters a rank's graph (see the
    definition): a call still running then, at its join node (weight 0);
    a host call that returned before, on a thread running nothing then, at
    the first op the thread starts after it (weight: the time from the
    arrival); else nowhere."""

    def __init__(self, g: hb.Graph, x: Inputs) -> None:
        self.g = g
        t, n_ops = g.t, g.n_ops
        self.res = res = x.op_resource[g.op_rows]
        # per resource: its path ops' starts ascending, and the union of their intervals
        self.by_res: dict[int, tuple[F64, I64, tuple[F64, F64]]] = {}
        order = np.lexsort((np.arange(n_ops), res))
        bounds = np.flatnonzero(np.r_[True, res[order][1:] != res[order][:-1]]) if n_ops else np.zeros(0, np.int64)
        for a, b in zip(bounds.tolist(), np.r_[bounds[1:], n_ops].tolist()):
            elems = order[a:b]
            starts = t[2 * elems]
            o = np.argsort(starts, kind="stable")
            self.by_res[int(res[elems[0]])] = (starts[o], elems[o], union_intervals(t[2 * elems], t[2 * elems + 1]))

    def of(self, e: int, arrival: float) -> tuple[int, float] | None:
        """Element ``e``'s entry for an arrival at ``arrival``: (node, weight), or None."""
        g = self.g
        t = g.t
        j = int(g.join_of[e])
        if j >= 0:
            return j, 0.0
        if e < g.n_ops and t[2 * e + 1] <= arrival:
            starts, elems, busy = self.by_res[int(self.res[e])]
            if inside(busy[0], busy[1], np.array([arrival]))[0]:
                return None
            i = int(np.searchsorted(starts, arrival, side="left"))
            if i < len(elems):
                b = int(elems[i])
                return 2 * b, max(0.0, float(t[2 * b] - arrival))
        return None


def _collective_edges(g: hb.Graph, x: Inputs, colls: list[tuple[int, list[int]]]) -> hb.Graph:
    """The edges of collectives (see the definition), after all others."""
    entries = Entries(g, x)
    src: list[int] = []
    dst: list[int] = []
    w: list[float] = []
    elem: list[int] = []
    for last, others in colls:
        for e in others:
            entry = entries.of(e, float(g.t[2 * last]))
            if entry is not None:
                src.append(2 * last)
                dst.append(entry[0])
                w.append(entry[1])
                elem.append(e)
    n = len(src)
    return hb.add_edges(
        g,
        np.asarray(src, dtype=np.int64),
        np.asarray(dst, dtype=np.int64),
        np.asarray(w, dtype=np.float64),
        np.full(n, hb.K_COMM, dtype=np.int64),
        np.asarray(elem, dtype=np.int64),
    )


def resources(x: Inputs, g: hb.Graph) -> Strings:
    """Each element's resource: its op's thread or device, its kernel's
    stream label (none for a kernel without a stream)."""
    ks = np.asarray(x.k_stream[g.kernel_rows], dtype=np.int32)
    codes = np.concatenate(
        [np.asarray(x.op_resource[g.op_rows], dtype=np.int32), np.where(ks >= 0, ks + len(x.resource_names), -1)]
    )
    return Strings(codes.astype(np.int32, copy=False), (*x.resource_names, *x.k_labels))


PATH_COLUMNS = ("ocp_steps", "ocp_starts_us", "ocp_durs_us", "ocp_kinds", "ocp_counted", "ocp_resource")


def clear(ct: ColumnarTrace) -> None:
    """No element on the path (every ocp_* column empty)."""
    for name in ("ops", "kernels"):
        t = ct[name]
        n = t.n
        none = np.zeros(n, dtype=bool)
        off = np.zeros(n + 1, dtype=np.int64)
        t["ocp_steps"] = Lists(off, np.zeros(0, dtype=np.int64), none)
        t["ocp_starts_us"] = Lists(off, np.zeros(0), none)
        t["ocp_durs_us"] = Lists(off, np.zeros(0), none)
        t["ocp_kinds"] = Lists(off, Strings(np.zeros(0, dtype=np.int32), hb.KINDS), none)
        t["ocp_counted"] = Lists(off, np.zeros(0, dtype=bool), none)
        t["ocp_resource"] = Strings(np.full(n, -1, dtype=np.int32), ())
    ct.tables["observed_next"] = _next_table(
        np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, bool), np.zeros(0, bool)
    )


def store(ct: ColumnarTrace, g: hb.Graph, seg: Segments, labels: list[str | None], steps: I64 | None = None) -> None:
    """The segments as each op's and kernel's ocp_* columns (``steps``:
    their steps on the path, default 0, 1, ...)."""
    step = np.arange(len(seg.elem), dtype=np.int64) if steps is None else steps
    for name, rows, lo, hi in (
        ("ops", g.op_rows, 0, g.n_ops),
        ("kernels", g.kernel_rows, g.n_ops, g.n_ops + len(g.kernel_rows)),
    ):
        t = ct[name]
        mine = (seg.elem >= lo) & (seg.elem < hi)
        row = rows[seg.elem[mine] - lo]
        order = np.argsort(row, kind="stable")
        r = row[order]
        counts = np.bincount(r, minlength=t.n) if len(r) else np.zeros(t.n, dtype=np.int64)
        off = np.zeros(t.n + 1, dtype=np.int64)
        np.cumsum(counts, out=off[1:])
        has = counts > 0
        sel = np.flatnonzero(mine)[order]
        t["ocp_steps"] = Lists(off, step[sel], has)
        t["ocp_starts_us"] = Lists(off, seg.start[sel], has)
        t["ocp_durs_us"] = Lists(off, seg.dur[sel], has)
        t["ocp_kinds"] = Lists(off, Strings(seg.kind[sel].astype(np.int32), hb.KINDS), has)
        t["ocp_counted"] = Lists(off, seg.counted[sel], has)
        res = np.full(t.n, -1, dtype=np.int64)
        res[r] = seg.elem[mine][order]
        t["ocp_resource"] = labelled(np.where(res >= 0, res, -1), labels)


def _next_table(src: I64, dst: I64, step: I64, src_kernel: B, dst_kernel: B) -> Table:
    t = Table(len(src))
    t["src"] = src
    t["dst"] = dst
    t["step"] = step
    t["src_label"] = Strings(src_kernel.astype(np.int32), ("Op", "Kernel"))
    t["dst_label"] = Strings(dst_kernel.astype(np.int32), ("Op", "Kernel"))
    return t


def observed_next(g: hb.Graph, seg: Segments) -> Table:
    """Consecutive path elements (rows of ops or kernels) and the step they leave from."""
    a, b = seg.elem[:-1], seg.elem[1:]
    change = np.flatnonzero(a != b)
    rows = np.concatenate([g.op_rows, g.kernel_rows])
    src, dst = a[change], b[change]
    return _next_table(rows[src], rows[dst], change.astype(np.int64), src >= g.n_ops, dst >= g.n_ops)
