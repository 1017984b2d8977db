"""The happens-before graph of one rank (or of a trace of one rank) and
its longest paths, compiled (the definition: :mod:`.observed_path`).

Elements 0..n_ops-1 are the path ops (executed, timed, positive duration,
not annotations), n_ops.. the timed kernels; element e has start node 2e
and end node 2e + 1; join nodes (a call still running when its
collective's last rank arrives) follow. Edges are built in the order the
definition lists them, and the heaviest path is found by one pass in
Kahn's order (sources by time, first in first out; the first predecessor
within EPS of the best keeps its place).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from tracegraph.columns import F64, I64, B, kernel

# A stream gap longer than this is not scheduling overhead (HTA's threshold).
KERNEL_GAP_LIMIT_US = 1500.0
EPS = 1e-9
# Segment kinds, by code.
KINDS = ("cpu_op", "runtime", "sync", "kernel", "memcpy", "communication", "idle")
K_CPU, K_RUNTIME, K_SYNC, K_KERNEL, K_MEMCPY, K_COMM, K_IDLE = range(7)
# Op roles, by code (as the columns' role values are mapped).
R_OP, R_ANNOTATION, R_RUNTIME, R_SYNC = range(4)
# Sync kinds.
S_HOST, S_STREAM = 0, 1
# The edge buffers a graph is built into: sources, targets, weights, kinds, elements.
Edges = tuple[I64, I64, F64, I64, I64]
# A graph's numbering: node times, each op's and each kernel's element (-1:
# none), each element's join node (-1: none).
Nodes = tuple[F64, I64, I64, I64]


@dataclass
class Graph:
    """A rank's graph: node times, edges (src, dst, weight, kind, element)."""

    op_rows: I64  # op row of each path op element
    kernel_rows: I64  # kernel row of each kernel element
    t: F64
    src: I64
    dst: I64
    w: F64
    kind: I64
    elem: I64
    n_nodes: int
    join_of: I64 = field(default_factory=lambda: np.zeros(0, np.int64))  # element -> its join node (-1)
    # edges from this index on cross ranks (a collective's last arrival ->
    # another rank): they yield a tie to the rank's own edges (-1: none)
    cross: int = -1

    @property
    def n_ops(self) -> int:
        return len(self.op_rows)


def build(
    op_start: F64,
    op_end: F64,
    op_keep: B,
    op_role: I64,
    op_parent: I64,
    op_seq: F64,
    op_resource: I64,
    op_threaded: B,
    k_start: F64,
    k_end: F64,
    k_kind: I64,
    k_stream: I64,
    k_launch: I64,
    sync_src: I64,
    sync_dst: I64,
    sync_kind: I64,
    dep_src: I64,
    dep_dst: I64,
    waiting_elem: I64 | None = None,
    waiting_at: F64 | None = None,
    late_elem: I64 | None = None,
) -> Graph:
    """The graph of one rank: ops (``op_keep``: the path ops; role codes
    R_*; resource: a code per thread or device; threaded: the resource is
    a thread), kernels (kind codes K_KERNEL/K_MEMCPY/K_COMM; launch: the
    op row of its runtime call, else of the op that launched it, -1),
    syncs (kernel row -> op row (S_HOST) or kernel row (S_STREAM)),
    dependencies (op rows); ``waiting_*``: elements of calls still
    running at their collective's last arrival (a join node each, at
    ``waiting_at``), ``late_elem``: host calls that came last."""
    op_rows = np.flatnonzero(op_keep)
    k_keep = ~np.isnan(k_start) & ~np.isnan(k_end)
    kernel_rows = np.flatnonzero(k_keep)
    n_ops, n_k = len(op_rows), len(kernel_rows)
    n_base = 2 * (n_ops + n_k)
    t = np.empty(n_base)
    s, e = op_start[op_rows], op_end[op_rows]
    t[0 : 2 * n_ops : 2] = s
    t[1 : 2 * n_ops : 2] = np.maximum(e, s)
    ks, ke = k_start[kernel_rows], k_end[kernel_rows]
    t[2 * n_ops :: 2] = ks
    t[2 * n_ops + 1 :: 2] = np.maximum(ke, ks)
    n_elem = n_ops + n_k
    join_of = np.full(n_elem, -1, dtype=np.int64)
    late = np.zeros(n_elem, dtype=np.bool_)
    if waiting_elem is not None and len(waiting_elem):
        assert waiting_at is not None
        join_of[waiting_elem] = n_base + np.arange(len(waiting_elem))
        t = np.concatenate([t, waiting_at])
    if late_elem is not None and len(late_elem):
        late[late_elem] = True
    op_element = np.full(len(op_start), -1, dtype=np.int64)
    op_element[op_rows] = np.arange(n_ops)
    kernel_element = np.full(len(k_start), -1, dtype=np.int64)
    kernel_element[kernel_rows] = n_ops + np.arange(n_k)
    role = op_role[op_rows]
    seg_kind = np.where(role == R_RUNTIME, K_RUNTIME, np.where(role == R_SYNC, K_SYNC, K_CPU))
    cap = 4 * n_ops + 4 * n_k + len(dep_src) + len(sync_src) + 2 * len(join_of) + 16
    src = np.empty(cap, dtype=np.int64)
    dst = np.empty(cap, dtype=np.int64)
    w = np.empty(cap)
    kind = np.empty(cap, dtype=np.int64)
    elem = np.empty(cap, dtype=np.int64)
    edges = (src, dst, w, kind, elem)
    nodes = (t, op_element, kernel_element, join_of)
    m = _host_edges(nodes, op_rows, op_parent, op_seq, op_resource, op_threaded, seg_kind, late, edges, 0)
    m = _dep_edges(nodes, dep_src, dep_dst, edges, m)
    syncs = (sync_src, sync_dst, sync_kind)
    m = _kernel_edges(
        nodes, n_ops, kernel_rows, k_kind[kernel_rows], k_stream[kernel_rows], k_launch[kernel_rows], syncs, edges, m
    )
    return Graph(op_rows, kernel_rows, t, src[:m], dst[:m], w[:m], kind[:m], elem[:m], len(t), join_of)


@kernel
def offsets_of(keys: I64, n: int) -> I64:  # pragma: no cover - compiled
    """Where each of the ``n`` groups starts when rows are sorted by
    ``keys`` (0 <= key < n): counts, then their running sum (n + 1)."""
    first = np.zeros(n + 1, dtype=np.int64)
    for i in range(len(keys)):
        first[keys[i] + 1] += 1
    for v in range(n):
        first[v + 1] += first[v]
    return first


@kernel
def stably_by(keys: I64, n: int, rows: I64) -> I64:  # pragma: no cover - compiled
    """``rows`` ordered by ``keys[row]`` (0 <= key < n), rows of one key
    in their given order: a counting sort, O(n + rows)."""
    fill = np.zeros(n + 1, dtype=np.int64)
    for r in rows:
        fill[keys[r] + 1] += 1
    for v in range(n):
        fill[v + 1] += fill[v]
    out = np.empty(len(rows), dtype=np.int64)
    for r in rows:
        out[fill[keys[r]]] = r
        fill[keys[r]] += 1
    return out


@kernel
def _add(edges: Edges, m: int, a: int, b: int, weight: float, k: int, e: int) -> int:  # pragma: no cover - compiled
    """Edge ``m``: a -> b of ``weight``, kind ``k``, element ``e``; the next free index."""
    src, dst, w, kind, elem = edges
    src[m] = a
    dst[m] = b
    w[m] = weight
    kind[m] = k
    elem[m] = e
    return m + 1


@kernel
def _host_edges(
    nodes: Nodes,
    op_rows: I64,
    parent: I64,
    seq: F64,
    resource: I64,
    threaded: B,
    seg_kind: I64,
    late: B,
    edges: Edges,
    m: int,
) -> int:  # pragma: no cover - compiled
    t, op_element, _, join_of = nodes
    n_ops = len(op_rows)
    # nearest ancestor that is a path op
    path_parent = np.full(n_ops, -1, dtype=np.int64)
    for e in range(n_ops):
        p = parent[op_rows[e]]
        while p >= 0 and op_element[p] < 0:
            p = parent[p]
        if p >= 0:
            path_parent[e] = op_element[p]
    # children of each path op by (start, seq, element)
    child_key_t = np.empty(n_ops)
    child_key_s = np.empty(n_ops)
    for e in range(n_ops):
        child_key_t[e] = t[2 * e]
        s = seq[op_rows[e]]
        child_key_s[e] = s if s == s else np.inf
    idx = np.arange(n_ops)
    # sort elements by (path_parent, start, seq, element)
    order = sort4(path_parent, child_key_t, child_key_s, idx)
    first = offsets_of(path_parent + 1, n_ops + 1)  # groups: path_parent + 1 (0: top level)
    for e in range(n_ops):
        k = seg_kind[e]
        prev = 2 * e
        a, b = first[e + 1], first[e + 2]
        for q in range(a, b):
            c = order[q]
            m = _add(edges, m, prev, 2 * c, max(0.0, t[2 * c] - t[prev]), k, e)
            prev = 2 * c + 1
        j = join_of[e]
        if j >= 0 and t[prev] <= t[j]:
            m = _add(edges, m, prev, j, 0.0, k, e)
            m = _add(edges, m, j, 2 * e + 1, max(0.0, t[2 * e + 1] - t[j]), 5, e)
        else:
            last = 0.0 if k == 2 else max(0.0, t[2 * e + 1] - t[prev])
            m = _add(edges, m, prev, 2 * e + 1, last, k, e)
    # top-level ops per resource, resources in order of their first path op
    tops = order[first[0] : first[1]]
    n_top = len(tops)
    res = np.empty(n_top, dtype=np.int64)
    for q in range(n_top):
        res[q] = resource[op_rows[tops[q]]]
    # first element per resource -> the resources' order
    n_res = 0
    for q in range(n_top):
        if res[q] + 1 > n_res:
            n_res = res[q] + 1
    first_elem = np.full(n_res, n_ops + 1, dtype=np.int64)
    for q in range(n_top):
        e = tops[q]
        if e < first_elem[res[q]]:
            first_elem[res[q]] = e
    res_order = np.argsort(first_elem, kind="mergesort")
    by_res = sort4(res, np.zeros(n_top), np.zeros(n_top), np.arange(n_top))  # stable: tops are in (start, seq, e) order
    start_of = offsets_of(res, n_res)
    for ri in range(n_res):
        r = res_order[ri]
        a, b = start_of[r], start_of[r + 1]
        if b <= a:
            continue
        elems = np.empty(b - a, dtype=np.int64)
        for q in range(a, b):
            elems[q - a] = tops[by_res[q]]
        if threaded[op_rows[elems[0]]]:
            for q in range(len(elems) - 1):
                x, y = elems[q], elems[q + 1]
                lt = max(0.0, t[2 * y] - t[2 * x + 1]) if late[y] else 0.0
                m = _add(edges, m, 2 * x + 1, 2 * y, lt, 6, y)
        else:
            ends = np.empty(len(elems))
            for q in range(len(elems)):
                ends[q] = t[2 * elems[q] + 1]
            eo = np.argsort(ends, kind="mergesort")
            sorted_ends = ends[eo]
            for q in range(len(elems)):
                y = elems[q]
                i = np.searchsorted(sorted_ends, t[2 * y], side="right") - 1
                if i >= 0:
                    m = _add(edges, m, 2 * elems[eo[i]] + 1, 2 * y, 0.0, 6, y)
    return m


@kernel
def sort4(
    a: npt.NDArray[Any], b: npt.NDArray[Any], c: npt.NDArray[Any], d: npt.NDArray[Any]
) -> I64:  # pragma: no cover - compiled
    """Order by (a, b, c, d) (a stable merge sort of the rows)."""
    n = len(a)
    order = np.arange(n)
    tmp = np.empty(n, dtype=np.int64)
    width = 1
    while width < n:
        for lo in range(0, n, 2 * width):
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            i, j, o = lo, mid, lo
            while i < mid and j < hi:
                x, y = order[i], order[j]
                if (a[y], b[y], c[y], d[y]) < (a[x], b[x], c[x], d[x]):
                    tmp[o] = y
                    j += 1
                else:
                    tmp[o] = x
                    i += 1
                o += 1
            while i < mid:
                tmp[o] = order[i]
                i += 1
                o += 1
            while j < hi:
                tmp[o] = order[j]
                j += 1
                o += 1
        for x in range(n):
            order[x] = tmp[x]
        width *= 2
    return order


@kernel
def _dep_edges(nodes: Nodes, dep_src: I64, dep_dst: I64, edges: Edges, m: int) -> int:  # pragma: no cover - compiled
    op_element = nodes[1]
    for i in range(len(dep_src)):
        a, b = op_element[dep_src[i]], op_element[dep_dst[i]]
        if a >= 0 and b >= 0 and a != b:
            m = _add(edges, m, 2 * a + 1, 2 * b, 0.0, 6, b)
    return m


@kernel
def _kernel_edges(
    nodes: Nodes,
    n_ops: int,
    kernel_rows: I64,
    k_kind: I64,
    k_stream: I64,
    k_launch: I64,
    syncs: tuple[I64, I64, I64],
    edges: Edges,
    m: int,
) -> int:  # pragma: no cover - compiled
    t, op_element, kernel_element, join_of = nodes
    sync_src, sync_dst, sync_kind = syncs
    n_k = len(kernel_rows)
    # the kernels each kernel was made to wait for (stream waits)
    wait_count = np.zeros(n_k + 1, dtype=np.int64)
    for i in range(len(sync_src)):
        a = kernel_element[sync_src[i]]
        if a < 0:
            continue
        if sync_kind[i] == 0:
            b = op_element[sync_dst[i]]
            if b >= 0:
                m = _add(edges, m, 2 * a + 1, 2 * b + 1, 0.0, 2, b)
        else:
            b = kernel_element[sync_dst[i]]
            if b >= 0 and b != a:
                wait_count[b - n_ops + 1] += 1
                m = _add(edges, m, 2 * a + 1, 2 * b, 0.0, 2, b)
    for i in range(1, n_k + 1):
        wait_count[i] += wait_count[i - 1]
    waits = np.empty(wait_count[n_k], dtype=np.int64)
    fill = wait_count[:-1].copy()
    for i in range(len(sync_src)):
        a = kernel_element[sync_src[i]]
        if a < 0 or sync_kind[i] == 0:
            continue
        b = kernel_element[sync_dst[i]]
        if b >= 0 and b != a:
            waits[fill[b - n_ops]] = a
            fill[b - n_ops] += 1
    starts = np.empty(n_k)
    ends = np.empty(n_k)
    for i in range(n_k):
        starts[i] = t[2 * (n_ops + i)]
        ends[i] = t[2 * (n_ops + i) + 1]
    order = sort4(k_stream, starts, ends, np.arange(n_k))
    last = -1
    last_stream = -1
    for q in range(n_k):
        i = order[q]
        e = n_ops + i
        kk = k_kind[i]
        j = join_of[e]
        if j >= 0:
            m = _add(edges, m, 2 * e, j, 0.0, kk, e)
            m = _add(edges, m, j, 2 * e + 1, max(0.0, t[2 * e + 1] - t[j]), kk, e)
        else:
            m = _add(edges, m, 2 * e, 2 * e + 1, max(0.0, t[2 * e + 1] - t[2 * e]), kk, e)
        prev = last if last_stream == k_stream[i] else -1
        op = op_element[k_launch[i]] if k_launch[i] >= 0 else -1
        counted_launch = False
        if op >= 0:
            ls = t[2 * op]
            counted_launch = prev < 0 or t[2 * prev + 1] < ls
            if counted_launch:
                for x in range(wait_count[i], wait_count[i + 1]):
                    if not t[2 * waits[x] + 1] < ls:
                        counted_launch = False
                        break
            if counted_launch:
                m = _add(edges, m, 2 * op, 2 * e, max(0.0, t[2 * e] - ls), 1, op)
            else:
                m = _add(edges, m, 2 * op, 2 * e, 0.0, 6, e)
        if prev >= 0:
            gap = t[2 * e] - t[2 * prev + 1]
            counted_gap = (not counted_launch) and gap < 1500.0
            if counted_gap:
                for x in range(wait_count[i], wait_count[i + 1]):
                    if not t[2 * waits[x] + 1] < t[2 * prev + 1]:
                        counted_gap = False
                        break
            m = _add(edges, m, 2 * prev + 1, 2 * e, max(0.0, gap) if counted_gap else 0.0, 6, e)
        last = e
        last_stream = k_stream[i]
    return m


def add_edges(g: Graph, src: I64, dst: I64, w: F64, kind: I64, elem: I64) -> Graph:
    """``g`` with more edges (after its own), ones that cross ranks."""
    return Graph(
        g.op_rows,
        g.kernel_rows,
        g.t,
        np.concatenate([g.src, src]),
        np.concatenate([g.dst, dst]),
        np.concatenate([g.w, w]),
        np.concatenate([g.kind, kind]),
        np.concatenate([g.elem, elem]),
        g.n_nodes,
        g.join_of,
        len(g.src) if g.cross < 0 else g.cross,
    )


# --- longest paths -------------------------------------------------------------------------------


def forward(g: Graph, inject_node: I64 | None = None, inject_value: F64 | None = None) -> tuple[F64, I64, B]:
    """Best (heaviest) path weight into every node and its predecessor
    edge (-1: none; -2: the injected value); with ``inject_*``, nodes that
    also get a value from outside (another rank), kept unless the graph's
    own best is lower by more than EPS. Ties: the first predecessor found
    keeps a node, but an edge across ranks (or an injected value) yields
    to the rank's own edges, so that a rank's path does not depend on when
    another rank's arrival is found. Edges that close a cycle (clock skew)
    are dropped: those running backwards in time. Returns (best, pred,
    edges kept)."""
    n = g.n_nodes
    keep = np.ones(len(g.src), dtype=bool)
    inj_node = np.zeros(0, np.int64) if inject_node is None else inject_node
    inj_val = np.zeros(0) if inject_value is None else inject_value
    cross = np.arange(len(g.src)) >= (len(g.src) if g.cross < 0 else g.cross)
    while True:
        best, pred, done = _heaviest(n, g.t, g.src[keep], g.dst[keep], g.w[keep], cross[keep], inj_node, inj_val)
        if done:
            kept = np.flatnonzero(keep)
            pred = np.where(pred >= 0, kept[np.maximum(pred, 0)], pred)
            return best, pred, keep
        back = keep & (g.t[g.dst] < g.t[g.src] - EPS)
        if not back.any():
            raise ValueError("the happens-before graph has a cycle")
        keep &= ~back


@kernel
def _heaviest(
    n: int, t: F64, src: I64, dst: I64, w: F64, cross: B, inj_node: I64, inj_val: F64
) -> tuple[F64, I64, bool]:  # pragma: no cover - compiled
    m = len(src)
    order = stably_by(src, n, stably_by(dst, n, np.arange(m)))  # edges by (src, dst, index)
    first = offsets_of(src, n)
    indeg = np.zeros(n, dtype=np.int64)
    for i in range(m):
        indeg[dst[i]] += 1
    best = np.zeros(n)
    pred = np.full(n, -1, dtype=np.int64)
    # injected values: a node's best starts there (the graph's own edges must beat it by EPS)
    injected = np.full(n, -np.inf)
    for k in range(len(inj_node)):
        v = inj_node[k]
        if inj_val[k] > injected[v]:
            injected[v] = inj_val[k]
    sources = np.flatnonzero(indeg == 0)
    st = np.empty(len(sources))
    for k in range(len(sources)):
        st[k] = t[sources[k]]
    so = np.argsort(st, kind="mergesort")  # by (time, node)
    queue = np.empty(n, dtype=np.int64)
    head = 0
    tail = 0
    for k in range(len(so)):
        queue[tail] = sources[so[k]]
        tail += 1
    done = 0
    while head < tail:
        u = queue[head]
        head += 1
        done += 1
        if injected[u] > best[u] + 1e-9:
            best[u] = injected[u]
            pred[u] = -2
        bu = best[u]
        for j in range(first[u], first[u + 1]):
            eid = order[j]
            v = dst[eid]
            cand = bu + w[eid]
            if cand > best[v] + 1e-9 or (not cross[eid] and cand > best[v] - 1e-9 and pred[v] >= 0 and cross[pred[v]]):
                best[v] = cand
                pred[v] = eid
            indeg[v] -= 1
            if indeg[v] == 0:
                queue[tail] = v
                tail += 1
    return best, pred, done == n


def backward(g: Graph, keep: B, target: int) -> F64:
    """Longest path weight from every node to ``target`` (-inf: none)."""
    return _backward(g.n_nodes, g.t, g.src[keep], g.dst[keep], g.w[keep], target)


def backward_any(g: Graph, keep: B) -> F64:
    """Longest path weight from every node to any node (0: itself)."""
    return _backward(g.n_nodes, g.t, g.src[keep], g.dst[keep], g.w[keep], -1)


@kernel
def _backward(n: int, t: F64, src: I64, dst: I64, w: F64, target: int) -> F64:  # pragma: no cover - compiled
    m = len(src)
    outdeg = np.zeros(n, dtype=np.int64)
    for i in range(m):
        outdeg[src[i]] += 1
    first = offsets_of(dst, n)  # in-edges by dst
    ins = stably_by(dst, n, np.arange(m))
    back = np.full(n, -np.inf)
    if target < 0:
        back[:] = 0.0
    else:
        back[target] = 0.0
    queue = np.empty(n, dtype=np.int64)
    head = 0
    tail = 0
    for v in range(n):
        if outdeg[v] == 0:
            queue[tail] = v
            tail += 1
    while head < tail:
        v = queue[head]
        head += 1
        bv = back[v]
        for j in range(first[v], first[v + 1]):
            i = ins[j]
            u = src[i]
            if bv > -np.inf:
                cand = bv + w[i]
                if cand > back[u]:
                    back[u] = cand
            outdeg[u] -= 1
            if outdeg[u] == 0:
                queue[tail] = u
                tail += 1
    return back


def path_end(g: Graph, best: F64) -> int:
    """The earliest node (by time, then node) of maximal weight (within EPS)."""
    top = best.max()
    cands = np.flatnonzero(best >= top - EPS)
    return int(cands[np.lexsort((cands, g.t[cands]))[0]])


def walk_back(pred: I64, src: I64, end: int) -> tuple[I64, int]:
    """The path's edges ending at ``end`` (first to last) and the node it starts
    at (where the predecessor is none, or injected: -2 at that node)."""
    edges, start = _walk_back(np.asarray(pred, dtype=np.int64), np.asarray(src, dtype=np.int64), int(end))
    return edges, int(start)


@kernel
def _walk_back(pred: I64, src: I64, end: int) -> tuple[I64, int]:  # pragma: no cover - compiled
    """(A path of a large trace has hundreds of thousands of edges: no Python int each.)"""
    n = 0
    v = end
    while pred[v] >= 0:
        n += 1
        v = src[pred[v]]
    edges = np.empty(n, dtype=np.int64)
    v = end
    while pred[v] >= 0:
        n -= 1
        edges[n] = pred[v]
        v = src[pred[v]]
    return edges, v
