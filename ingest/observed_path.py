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
  (sources by time) keeps its predecessor; the path ends at the earliest
  node of maximal weight.

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

import itertools
from array import array
from collections import deque
from typing import Any

import numpy as np
import pandas as pd

from tracegraph import schema
from tracegraph.ingest.formats.kit import Role
from tracegraph.ingest.frames import TraceFrames
from tracegraph.ingest.intervals import inside, union_intervals

# A stream gap longer than this is not scheduling overhead (HTA's threshold).
KERNEL_GAP_LIMIT_US = 1500.0
_KERNEL_KIND = {"compute": "kernel", "memcpy": "memcpy", "memset": "memcpy", "communication": "communication"}
_EPS = 1e-9
PATH_COLUMNS = [c.name for c in schema.PATH]
# One segment of the path: (element, kind, start, elapsed, counted).
Segment = tuple[int, str, float, float, bool]


class _Edges:
    """The graph's edges: (source node, target node, weight, kind, element)
    in the order added. One tuple append per edge (there are several per
    op), moved into typed columns by :meth:`flush` every so often: a tuple
    and its numbers take ~190 bytes, a row of the columns ~40, and a job's
    1.5M edges as tuples were its ingest's peak."""

    def __init__(self) -> None:
        self.items: list[tuple[int, int, float, str, int]] = []
        self.add = self.items.append
        self._src, self._dst, self._attr = array("q"), array("q"), array("q")
        self._weight = array("d")
        self._kind: list[str] = []

    def flush(self) -> None:
        """Move the tuples added so far into the columns."""
        if self.items:
            src, dst, weight, kind, attr = zip(*self.items)
            self._src.extend(src)
            self._dst.extend(dst)
            self._weight.extend(weight)
            self._kind.extend(kind)
            self._attr.extend(attr)
            self.items.clear()  # (the same list: ``add`` stays bound to it)

    def columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str], np.ndarray]:
        """Sources, targets, weights, kinds and elements."""
        self.flush()
        as_array = np.frombuffer
        return (
            as_array(self._src, dtype=np.int64),
            as_array(self._dst, dtype=np.int64),
            as_array(self._weight, dtype=np.float64),
            self._kind,
            as_array(self._attr, dtype=np.int64),
        )


# How many ops or kernels between two flushes of the edge tuples.
_FLUSH_EVERY = 1 << 15


def observed_path(tf: TraceFrames) -> dict[str, float | None]:
    """Compute the path, store its segments on ``tf.ops``/``tf.kernels``
    (``ocp_*`` columns) and the element order in ``tf.observed_next``;
    return the Trace properties."""
    ops, kernels = tf.ops, tf.kernels
    for df in (ops, kernels):
        for c in PATH_COLUMNS:
            df[c] = None
    tf.observed_next = pd.DataFrame(columns=["src", "dst", "step", "src_label", "dst_label"])
    empty: dict[str, float | None] = {
        "observed_path_us": None,
        "observed_path_span_us": None,
        "observed_path_segments": None,
    }
    if tf.time_unit not in ("us", "step") or (ops.empty and kernels.empty):
        return empty
    g = _Graph(tf)
    if g.n_nodes == 0:
        return empty
    rows = g.longest()
    if not rows:
        return empty
    _store(tf, g, rows)
    length = float(sum(r[3] for r in rows if r[4]))
    span = float(sum(r[3] for r in rows))
    return {"observed_path_us": length, "observed_path_span_us": span, "observed_path_segments": len(rows)}


class _Graph:
    """The happens-before DAG of one trace. Elements 0..n_ops-1 are the path
    ops (positions ``self.op_rows`` in tf.ops), n_ops.. the kernels; element
    e has start node 2e and end node 2e + 1."""

    def __init__(self, tf: TraceFrames) -> None:
        ops, kernels = tf.ops, tf.kernels
        start = pd.to_numeric(ops["start_us"], errors="coerce").to_numpy(float)
        end = pd.to_numeric(ops["end_us"], errors="coerce").to_numpy(float)
        executed = ops["executed"].fillna(True).astype(bool).to_numpy()
        roles = ops["role"].fillna(Role.OP.value).tolist()
        keep = executed & ~np.isnan(start) & ~np.isnan(end) & (end > start)
        annotation = Role.ANNOTATION.value
        keep &= np.array([r != annotation for r in roles], dtype=bool)
        self.op_rows = np.flatnonzero(keep)
        kstart = pd.to_numeric(kernels["start_us"], errors="coerce").to_numpy(float)
        kend = pd.to_numeric(kernels["end_us"], errors="coerce").to_numpy(float)
        kkeep = ~np.isnan(kstart) & ~np.isnan(kend)
        self.kernel_rows = np.flatnonzero(kkeep)
        n_ops, n_k = len(self.op_rows), len(self.kernel_rows)
        self.n_ops = n_ops
        self.n_nodes = 2 * (n_ops + n_k)
        self.t = np.empty(self.n_nodes)
        self.t[0 : 2 * n_ops : 2] = start[self.op_rows]
        self.t[1 : 2 * n_ops : 2] = np.maximum(end[self.op_rows], start[self.op_rows])
        self.t[2 * n_ops :: 2] = kstart[self.kernel_rows]
        self.t[2 * n_ops + 1 :: 2] = np.maximum(kend[self.kernel_rows], kstart[self.kernel_rows])
        self.e = _Edges()
        uids = ops["uid"].tolist()
        self.op_element = {uids[r]: i for i, r in enumerate(self.op_rows)}
        kuids = kernels["uid"].tolist()
        self.kernel_element = {kuids[r]: n_ops + i for i, r in enumerate(self.kernel_rows)}
        # The segment kind of each path op: its role, ``op`` shown as ``cpu_op``.
        device_calls = (Role.RUNTIME.value, Role.SYNC.value)
        self.role: list[str] = ["cpu_op" if roles[r] not in device_calls else roles[r] for r in self.op_rows.tolist()]
        threads = ops["thread"].tolist()
        devices = ops["device"].tolist()
        device_names = _device_names(tf)
        self.resource = [
            threads[r] if isinstance(threads[r], str) else _device_name(device_names, devices[r]) for r in self.op_rows
        ]
        self.kernel_resource = _kernel_resources(tf, self.kernel_rows)
        self.kernel_kind = [_KERNEL_KIND.get(k, "kernel") for k in kernels["kind"].iloc[self.kernel_rows]]
        # Collectives joined across ranks (see _collective_edges).
        self._join_collectives(tf)
        self._host_edges(tf, uids, threads)
        self._dep_edges(tf)
        self._kernel_edges(tf)
        self._collective_edges()

    # --- host side ---

    def _host_edges(self, tf: TraceFrames, uids: list[str], threads: list[Any]) -> None:
        parents = tf.ops["parent"].tolist()
        index = {u: i for i, u in enumerate(uids)}
        op_rows = self.op_rows.tolist()  # plain ints and floats below: numpy scalars are slow one at a time
        keep = set(op_rows)
        # nearest ancestor that is a path op
        path_parent: list[int] = []
        for r in op_rows:
            p = parents[r]
            while isinstance(p, str) and index[p] not in keep:
                p = parents[index[p]]
            path_parent.append(self.op_element[p] if isinstance(p, str) else -1)
        children: dict[int, list[tuple[float, float, int]]] = {}
        top: dict[str, list[tuple[tuple[float, float, int], bool]]] = {}
        seq = pd.to_numeric(tf.ops["seq"], errors="coerce").fillna(np.inf).to_numpy(float).tolist()
        t = self.t.tolist()
        for e, r in enumerate(op_rows):
            key = (t[2 * e], seq[r], e)
            if path_parent[e] >= 0:
                children.setdefault(path_parent[e], []).append(key)
            else:
                top.setdefault(self.resource[e], []).append((key, isinstance(threads[r], str)))
        add, waiting = self.e.add, self.waiting
        for e, kind in enumerate(self.role):
            if not e % _FLUSH_EVERY:
                self.e.flush()
            prev = 2 * e
            for _, _, c in sorted(children.get(e, ())):
                add((prev, 2 * c, max(0.0, t[2 * c] - t[prev]), kind, e))
                prev = 2 * c + 1
            join = waiting.get(e)
            if join is not None and t[prev] <= t[join]:
                # a call waiting for the last rank: waiting until it arrives, then the collective's own time
                add((prev, join, 0.0, kind, e))
                add((join, 2 * e + 1, max(0.0, t[2 * e + 1] - t[join]), "communication", e))
            else:
                last = 0.0 if kind == "sync" else max(0.0, t[2 * e + 1] - t[prev])
                add((prev, 2 * e + 1, last, kind, e))
        for items in top.values():
            items.sort()
            threaded = items[0][1]
            elems = [k[2] for k, _ in items]
            if threaded:
                for a, b in itertools.pairwise(elems):
                    # the last rank's time before its collective call held every other rank up
                    late = max(0.0, t[2 * b] - t[2 * a + 1]) if b in self.late else 0.0
                    self.e.add((2 * a + 1, 2 * b, late, "idle", b))
                self.e.flush()
            else:
                ends = np.array([t[2 * a + 1] for a in elems])
                order = np.argsort(ends, kind="stable")
                sorted_ends = ends[order]
                starts = np.array([t[2 * b] for b in elems])
                # the op with the latest end at or before each op's start
                before = np.searchsorted(sorted_ends, starts, side="right") - 1
                for b, i in zip(elems, before.tolist()):
                    if i >= 0:
                        self.e.add((2 * elems[order[i]] + 1, 2 * b, 0.0, "idle", b))

    def _dep_edges(self, tf: TraceFrames) -> None:
        for s, d in zip(tf.deps["src"].tolist(), tf.deps["dst"].tolist()):
            a, b = self.op_element.get(s), self.op_element.get(d)
            if a is not None and b is not None and a != b:
                self.e.add((2 * a + 1, 2 * b, 0.0, "idle", b))

    # --- device side ---

    def _kernel_edges(self, tf: TraceFrames) -> None:
        k = tf.kernels.iloc[self.kernel_rows]
        n_ops, t = self.n_ops, self.t.tolist()
        launch = [lu if isinstance(lu, str) else ou for lu, ou in zip(k["launch"].tolist(), k["op"].tolist())]
        waits: dict[int, list[int]] = {}
        for s, d, kind in zip(tf.syncs["src"], tf.syncs["dst"], tf.syncs["kind"]):
            a = self.kernel_element.get(s)
            if a is None:
                continue
            if kind == "host_wait":
                b = self.op_element.get(d)
                if b is not None:
                    self.e.add((2 * a + 1, 2 * b + 1, 0.0, "sync", b))
            else:
                b = self.kernel_element.get(d)
                if b is not None and b != a:
                    waits.setdefault(b, []).append(a)
                    self.e.add((2 * a + 1, 2 * b, 0.0, "sync", b))
        streams = k["stream"].tolist()
        order = sorted(range(len(k)), key=lambda i: (streams[i], t[2 * (n_ops + i)], t[2 * (n_ops + i) + 1], i))
        last: dict[str, int] = {}
        for n, i in enumerate(order):
            if not n % _FLUSH_EVERY:
                self.e.flush()
            e = n_ops + i
            join = self.waiting.get(e)
            if join is not None:  # an NCCL kernel waiting for the last rank, then transferring
                self.e.add((2 * e, join, 0.0, self.kernel_kind[i], e))
                self.e.add((join, 2 * e + 1, max(0.0, t[2 * e + 1] - t[join]), self.kernel_kind[i], e))
            else:
                self.e.add((2 * e, 2 * e + 1, max(0.0, t[2 * e + 1] - t[2 * e]), self.kernel_kind[i], e))
            prev = last.get(streams[i])
            sync_ends = [t[2 * w + 1] for w in waits.get(e, ())]
            op = self.op_element.get(launch[i])
            counted_launch = False
            if op is not None:
                ls = t[2 * op]
                counted_launch = (prev is None or t[2 * prev + 1] < ls) and all(se < ls for se in sync_ends)
                if counted_launch:
                    self.e.add((2 * op, 2 * e, max(0.0, t[2 * e] - ls), "runtime", op))
                else:
                    self.e.add((2 * op, 2 * e, 0.0, "idle", e))
            if prev is not None:
                gap = t[2 * e] - t[2 * prev + 1]
                counted_gap = (
                    not counted_launch and gap < KERNEL_GAP_LIMIT_US and all(se < t[2 * prev + 1] for se in sync_ends)
                )
                self.e.add((2 * prev + 1, 2 * e, max(0.0, gap) if counted_gap else 0.0, "idle", e))
            last[streams[i]] = e

    # --- across ranks ---

    def _join_collectives(self, tf: TraceFrames) -> None:
        """Read the collectives joined across ranks (``tf.joins``): per
        collective, the last arrival's element and its other members'
        elements; which calls wait for the last arrival (each gets a join
        node at that arrival, see _collective_edges) and which host calls
        came last (the idle time before them counts)."""
        self.collectives: list[tuple[int, list[int]]] = []
        self.waiting: dict[int, int] = {}  # waiting call -> its join node (at the last arrival)
        self.late: set[int] = set()
        joins = tf.joins
        if joins is None or joins.empty:
            return
        members: dict[str, list[tuple[float, int, int]]] = {}
        for op, kernel, coll, rank, wait in zip(
            joins["op"], joins["kernel"], joins["collective"], joins["rank"], joins["wait_us"]
        ):
            e = self.kernel_element.get(kernel) if isinstance(kernel, str) else self.op_element.get(op)
            if e is not None:
                members.setdefault(str(coll), []).append((float(wait), int(rank), e))
        t = self.t
        joins_at: list[float] = []
        for found in members.values():
            found.sort()
            # The last arrival waited for nobody (the lowest rank on a tie); a
            # collective whose last call is not on the graph is left out.
            if len(found) < 2 or found[0][0] != 0.0:
                continue
            last = found[0][2]
            arrival = t[2 * last]
            others = [e for _, _, e in found[1:]]
            self.collectives.append((last, others))
            for e in others:
                if t[2 * e] < arrival < t[2 * e + 1]:
                    self.waiting[e] = self.n_nodes + len(joins_at)
                    joins_at.append(arrival)
            if last < self.n_ops and arrival > max(t[2 * e] for e in others):
                self.late.add(last)
        if joins_at:
            self.t = np.concatenate([self.t, np.asarray(joins_at)])
            self.n_nodes += len(joins_at)

    def _collective_edges(self) -> None:
        """A collective completes on no rank before its last rank arrives.
        A call still running at that arrival (an NCCL kernel, a blocking
        call) completes at its end: the last call's start -> its join node
        (weight 0), from which its body goes on to its end (the time after
        the arrival counts). A host call that returned before the arrival
        (torch.distributed's calls return once the work is queued; the
        thread waits later, outside any op), on a thread idle at the
        arrival, is followed by the first op the thread starts after it:
        the last call's start -> that op's start, weight = the time from the
        arrival. A thread busy at the arrival was not waiting: no edge."""
        if not self.collectives:
            return
        t = self.t
        after = self._thread_starts()
        busy = {res: union_intervals(t[2 * elems], t[2 * elems + 1]) for res, (_, elems) in after.items()}
        for last, others in self.collectives:
            arrival = t[2 * last]
            for e in others:
                join = self.waiting.get(e)
                if join is not None:
                    self.e.add((2 * last, join, 0.0, "communication", e))
                elif e < self.n_ops and t[2 * e + 1] <= arrival:
                    starts, elems = after[self.resource[e]]
                    if inside(*busy[self.resource[e]], np.array([arrival]))[0]:
                        continue
                    i = int(np.searchsorted(starts, arrival, side="left"))
                    if i < len(elems):
                        b = int(elems[i])
                        self.e.add((2 * last, 2 * b, max(0.0, t[2 * b] - arrival), "communication", e))

    def _thread_starts(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Per thread (resource), its path ops' starts ascending and their elements."""
        by: dict[str, list[int]] = {}
        for e in range(self.n_ops):
            by.setdefault(self.resource[e], []).append(e)
        out = {}
        for res, elems in by.items():
            arr = np.asarray(elems, dtype=np.int64)
            starts = self.t[2 * arr]
            order = np.argsort(starts, kind="stable")
            out[res] = (starts[order], arr[order])
        return out

    # --- the pass ---

    def longest(self) -> list[Segment]:
        """Segments of the heaviest path: (element, kind, start, elapsed, counted)."""
        src, dst, weight, kinds, attrs = self.e.columns()
        kind_codes, kind_names = pd.factorize(pd.Series(kinds, dtype=object))
        self.e = _Edges()  # (the arrays above hold the columns' buffers)
        return self._heaviest(src, dst, weight, kind_codes, np.asarray(kind_names, dtype=object), attrs)

    def _heaviest(
        self,
        src: np.ndarray,
        dst: np.ndarray,
        w: np.ndarray,
        kind_codes: np.ndarray,
        kind_names: np.ndarray,
        attrs: np.ndarray,
    ) -> list[Segment]:
        """:meth:`longest` over the edges as arrays (edge i: ``src[i]`` ->
        ``dst[i]``, weight ``w[i]``, kind ``kind_names[kind_codes[i]]``,
        element ``attrs[i]``)."""
        n = self.n_nodes
        order = np.lexsort((dst, src))
        src_s, dst_s, eid_s = src[order], dst[order], order
        first = np.searchsorted(src_s, np.arange(n + 1))
        indeg = np.bincount(dst, minlength=n)
        t = self.t
        ready = deque(sorted(np.flatnonzero(indeg == 0).tolist(), key=lambda v: (t[v], v)))
        best = [0.0] * n
        pred = [-1] * n
        indeg = indeg.tolist()
        dst_l, eid_l, w_l, first_l = dst_s.tolist(), eid_s.tolist(), w.tolist(), first.tolist()
        done = 0
        while ready:
            u = ready.popleft()
            done += 1
            bu = best[u]
            for j in range(first_l[u], first_l[u + 1]):
                v = dst_l[j]
                eid = eid_l[j]
                cand = bu + w_l[eid]
                if cand > best[v] + _EPS:
                    best[v] = cand
                    pred[v] = eid
                indeg[v] -= 1
                if indeg[v] == 0:
                    ready.append(v)
        if done < n:
            # A cycle can only come from clock skew between host and device
            # records: drop the edges that run backwards in time and retry.
            back = t[dst] < t[src] - _EPS
            if not back.any():
                raise ValueError("the happens-before graph has a cycle")
            keep = ~back
            return self._heaviest(src[keep], dst[keep], w[keep], kind_codes[keep], kind_names, attrs[keep])
        best_arr = np.asarray(best)
        top = best_arr.max()
        cands = np.flatnonzero(best_arr >= top - _EPS)
        end = int(min(cands.tolist(), key=lambda v: (t[v], v)))
        path_edges: list[int] = []
        while pred[end] >= 0:
            path_edges.append(pred[end])
            end = int(src[pred[end]])
        rows: list[Segment] = []
        for eid in reversed(path_edges):
            s, d = int(src[eid]), int(dst[eid])
            elapsed = max(0.0, float(t[d] - t[s]))
            if elapsed <= 0.0:
                continue
            rows.append((int(attrs[eid]), str(kind_names[kind_codes[eid]]), float(t[s]), elapsed, w_l[eid] > 0.0))
        return rows


def _device_names(tf: TraceFrames) -> dict[str, str]:
    return dict(zip(tf.devices["uid"].tolist(), tf.devices["name"].tolist()))


def _device_name(names: dict[str, str], device: object) -> str:
    if not isinstance(device, str):
        return "host"
    return names.get(device, device)


def _kernel_resources(tf: TraceFrames, rows: np.ndarray) -> list[str]:
    """``device name/stream name`` of each kernel (row positions in tf.kernels).

    Plain dicts, not pandas lookups: this runs once per kernel."""
    label = tf.stream_labels()
    return [label.get(stream, str(stream)) for stream in tf.kernels["stream"].iloc[rows].tolist()]


def _store(tf: TraceFrames, g: _Graph, rows: list[Segment]) -> None:
    per: dict[int, list[Segment]] = {}
    for step, (elem, kind, start, dur, counted) in enumerate(rows):
        per.setdefault(elem, []).append((step, kind, start, dur, counted))
    ops, kernels = tf.ops, tf.kernels
    cols: dict[str, list[Any]] = {c: [None] * len(ops) for c in PATH_COLUMNS}
    kcols: dict[str, list[Any]] = {c: [None] * len(kernels) for c in PATH_COLUMNS}
    for elem, segs in per.items():
        if elem < g.n_ops:
            target, pos, res = cols, int(g.op_rows[elem]), g.resource[elem]
        else:
            i = elem - g.n_ops
            target, pos, res = kcols, int(g.kernel_rows[i]), g.kernel_resource[i]
        steps, kinds, starts, durs, counts = zip(*segs)
        target["ocp_steps"][pos] = list(steps)
        target["ocp_kinds"][pos] = list(kinds)
        target["ocp_starts_us"][pos] = list(starts)
        target["ocp_durs_us"][pos] = list(durs)
        target["ocp_counted"][pos] = [bool(c) for c in counts]
        target["ocp_resource"][pos] = res
    for c in PATH_COLUMNS:
        ops[c] = cols[c]
        kernels[c] = kcols[c]
    op_uids, kernel_uids = ops["uid"].tolist(), kernels["uid"].tolist()
    uid_of: dict[int, tuple[Any, str]] = {}  # (uid, label); uid: a cell of an object column
    for elem in per:
        if elem < g.n_ops:
            uid_of[elem] = (op_uids[int(g.op_rows[elem])], "Op")
        else:
            uid_of[elem] = (kernel_uids[int(g.kernel_rows[elem - g.n_ops])], "Kernel")
    nxt: list[tuple[Any, Any, int, str, str]] = []
    for step in range(len(rows) - 1):
        a, b = rows[step][0], rows[step + 1][0]
        if a != b:
            (src, src_label), (dst, dst_label) = uid_of[a], uid_of[b]
            nxt.append((src, dst, step, src_label, dst_label))
    tf.observed_next = pd.DataFrame.from_records(nxt, columns=["src", "dst", "step", "src_label", "dst_label"])
