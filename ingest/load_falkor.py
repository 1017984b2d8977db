"""The FalkorDB loader: relationship ends found by internal node id.

Matching both ends of every relationship by (trace, uid) costs FalkorDB
two index scans per row (~60k relationships/s), and worse: its
append-only file replays those queries at the next server start before
the indexes exist, as label scans, so a replay is quadratic in the trace
(10 minutes for a 10k-op trace). So on FalkorDB the loader keeps the
internal id of every node it creates (``CREATE ... RETURN id(n)``, one
result row per UNWIND row, in row order) and finds nodes again with
``WHERE id(n) = x`` (a NodeByIdSeek: O(1), no index, replays the same).
Relationships to nodes that already exist are created in the same
statement as the node (a Kernel with its LAUNCHED and ON_STREAM), the
others in passes of their own once both ends exist. Rows travel as JSON
lists in the query's ``CYPHER name=value`` header (the form the client
itself sends, written by the C JSON encoder instead of per value in
Python). Neo4j 5 deprecates ``id()`` and FalkorDB has no ``elementId()``,
so there is no one portable text for this: Neo4j keeps the key-matching
loader of :mod:`store`.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tracegraph.db.base import Graph
from tracegraph.errors import DatabaseError
from tracegraph.ingest import graph_tables

# Rows per UNWIND batch (TRACEGRAPH_BATCH_ROWS); bench/RESULTS.md has the
# measured tradeoff behind the default.
FALKOR_BATCH_ROWS = int(os.environ.get("TRACEGRAPH_BATCH_ROWS", "10000"))
# Batches in flight: the client encodes the next batch and decodes the
# last one's ids while the server runs the current one.
FALKOR_IN_FLIGHT = int(os.environ.get("TRACEGRAPH_LOAD_IN_FLIGHT", "2"))
# Embedded FalkorDB: rewrite the append-only file once a load has grown it
# by this much (see compact_log).
AOF_COMPACT_BYTES = int(os.environ.get("TRACEGRAPH_AOF_COMPACT_BYTES", str(8 << 20)))


def loads_by_id(graph: Graph) -> bool:
    return getattr(graph, "kind", None) in ("embedded", "falkordb")


@dataclass
class _Pass:
    """One sweep over a table: create a node per row (``label``) or take the
    existing node named by column ``anchor``, plus relationships from/to
    existing nodes: ``(type, outgoing, other column, property columns)``."""

    attr: str
    label: str | None
    anchor: str
    cols: list = field(default_factory=list)
    rels: list = field(default_factory=list)
    member: str | None = None


def _passes() -> list[_Pass]:
    """graph_tables.NODE_TABLES in order, each with the relationships of graph_tables.REL_TABLES whose
    other end is created by an earlier table; the rest in passes of their
    own, grouped by (table, anchor column)."""
    member = {label: rel for rel, label in graph_tables.MEMBERSHIP}
    order = {label: i for i, (label, _, _) in enumerate(graph_tables.NODE_TABLES)}
    nodes = {attr: _Pass(attr, label, "uid", list(cols), [], member.get(label)) for label, attr, cols in graph_tables.NODE_TABLES}
    extra: dict = {}
    for rel, a, b, attr, src, dst, props in graph_tables.REL_TABLES:
        p = nodes.get(attr)
        if p is not None and dst == "uid" and p.label == b and order.get(a, len(order)) < order[b]:
            p.rels.append((rel, False, src, list(props)))
        elif p is not None and src == "uid" and p.label == a and order.get(b, len(order)) < order[a]:
            p.rels.append((rel, True, dst, list(props)))
        else:
            extra.setdefault((attr, src), _Pass(attr, None, src)).rels.append((rel, True, dst, list(props)))
    return list(nodes.values()) + list(extra.values())


def load_by_id(graph: Graph, target: str, trace_id: int, tables: dict, beat: Callable[[int, int], None],
               total: int) -> dict:
    """Write ``tables`` as trace ``target`` (whose Trace node has id ``trace_id``);
    ``beat(done, total)`` after every batch. Returns the node and relationship counts."""
    counts = expected_counts(tables)
    ids: dict = {}
    done = 0
    params = {"trace": target, "tid": trace_id}
    passes = _passes()
    with _InFlight(graph, FALKOR_IN_FLIGHT) as flight:
        ready = _prepare(passes[0], tables)
        for k, p in enumerate(passes):
            groups = ready
            # Every batch of the earlier passes must be done: their ids are
            # needed now. The next pass's properties were converted while
            # they ran (below), so the server seldom waits for the client.
            for n in flight.drain(block=True, into=ids):
                done += n
                beat(done, total)
            for sel, rels, values in groups:
                query = _pass_query(p, rels)
                head = [range(len(sel))] if p.label is not None else [_ids(sel[p.anchor], ids)]
                head += [_ids(sel[col], ids) for _, _, col, _ in rels]
                rows = list(zip(*head, *values))
                uids = sel["uid"].tolist() if p.label is not None else None
                # Progress counts what _load_by_key counts: nodes and the
                # relationships of graph_tables.REL_TABLES (not membership).
                weight = len(rels) + (p.label is not None)
                made = len(rels) + (p.member is not None and p.label is not None)
                for i in range(0, len(rows), FALKOR_BATCH_ROWS):
                    flight.submit(query, params, rows[i:i + FALKOR_BATCH_ROWS],
                                  None if uids is None else uids[i:i + FALKOR_BATCH_ROWS], made, weight)
            ready = _prepare(passes[k + 1], tables) if k + 1 < len(passes) else None
        for n in flight.drain(block=True, into=ids):
            done += n
            beat(done, total)
    return counts


def _prepare(p: _Pass, tables: dict) -> list:
    """A pass's rows, grouped by which of the optional other ends they have
    (each group gets its own statement): ``(rows, relationships, property
    columns)``; the id columns are added once those ids exist."""
    df = tables[p.attr]
    if p.label is None:
        df = df[df[p.anchor].notna()]
    code = np.zeros(len(df), dtype=np.int64)  # bit k: relationship k has its other end
    for k, (_, _, col, _) in enumerate(p.rels):
        code |= df[col].notna().to_numpy().astype(np.int64) << k
    groups = []
    for shape in sorted(set(code.tolist())):
        sel = df[code == shape]
        rels = [r for k, r in enumerate(p.rels) if shape >> k & 1]
        if p.label is None and not rels:
            continue
        values = [_values(sel[c], c) for _, _, _, props in rels for c in props]
        if p.label is not None:
            values += [_values(sel[c], c) for c in ["uid", *p.cols]]
        groups.append((sel, rels, values))
    return groups


def _pass_query(p: _Pass, rels: list) -> str:
    ends = ["a"] if p.label is None else []
    ends += [f"x{k}" for k in range(len(rels))]
    first = 1 if p.label is not None else 0  # created nodes: r[0] is the row number
    carry = (["t"] if p.member else []) + ["r"] + [f"r[{first + k}] AS {e}_id" for k, e in enumerate(ends)]
    q = ["MATCH (t) WHERE id(t) = $tid"] if p.member else []
    q.append("UNWIND $rows AS r")
    if ends:
        q.append("WITH " + ", ".join(carry))
        q += [f"MATCH ({e}) WHERE id({e}) = {e}_id" for e in ends]
    k = first + len(ends)
    rel_props = []
    for _, _, _, props in rels:
        rel_props.append(", ".join(f"{c}: r[{k + j}]" for j, c in enumerate(props)))
        k += len(props)
    node = "a"
    if p.label is not None:
        node = "n"
        props = ", ".join(f"{c}: r[{k + j}]" for j, c in enumerate(["uid", *p.cols]))
        q.append(f"CREATE (n:{p.label} {{{props}, trace: $trace}})")
    for (rel, out, _, _), e, rp in zip(rels, ends[1:] if p.label is None else ends, rel_props):
        body = f"[:{rel}{' {' + rp + '}' if rp else ''}]"
        q.append(f"CREATE ({node})-{body}->({e})" if out else f"CREATE ({e})-{body}->({node})")
    if p.member:
        q.append(f"CREATE (t)-[:{p.member}]->(n)")
    if p.label is not None:
        # One string instead of a row per node: the client decodes it in C.
        q.append("RETURN string.join(collect(toString(r[0]) + ':' + toString(id(n))), ',') AS ids")
    return " ".join(q)


def expected_counts(tables: dict) -> dict:
    """Node and relationship counts, keyed in the order _load_by_key uses."""
    counts: dict = {"nodes": {}, "relationships": {}}
    for label, df, _ in graph_tables.node_tables(tables):
        counts["nodes"][label] = counts["nodes"].get(label, 0) + len(df)
    for (rel, *_), df, _ in graph_tables.rel_tables(tables):
        counts["relationships"][rel] = counts["relationships"].get(rel, 0) + len(df)
    for rel, label in graph_tables.MEMBERSHIP:
        counts["relationships"][rel] = counts["nodes"].get(label, 0)
    return counts


_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False, check_circular=False).encode
# In JSON, a backslash before anything but a quote or a backslash is a
# control-character escape, which the CYPHER header does not read the same.
_CONTROL_ESCAPE = re.compile(r'\\[^"\\]')


def _run_rows(graph: Graph, query: str, params: dict):
    """``graph.run(query, params)``, with the header written as JSON."""
    try:
        header = "CYPHER " + " ".join(f"{k}={_ENCODE(v)}" for k, v in params.items()) + " "
    except ValueError:  # NaN or infinity: let the driver clean them
        header = None
    if header is None or _CONTROL_ESCAPE.search(header):
        return graph.run(query, params, write=True)
    return graph.run(header + query, None, write=True)


class _InFlight:
    """Up to ``depth`` batches running at once, results taken in order."""

    def __init__(self, graph: Graph, depth: int) -> None:
        self.graph = graph
        self.depth = max(1, depth)
        self.pool = ThreadPoolExecutor(max_workers=self.depth, thread_name_prefix="tracegraph-load")
        self.pending: list = []

    def __enter__(self) -> "_InFlight":
        return self

    def __exit__(self, *exc) -> None:
        # Never leave a batch running behind the caller's back (it would
        # land after a cleanup that deletes the trace).
        self.pool.shutdown(wait=True, cancel_futures=True)

    def submit(self, query: str, params: dict, rows: list, uids: list | None, rels: int, weight: int) -> None:
        """Run ``query`` on ``rows``; ``uids`` name the nodes it creates (one
        id comes back per row), ``rels`` relationships are made per row."""
        args = dict(params, rows=rows)
        used = {k: v for k, v in args.items() if f"${k}" in query}
        self.pending.append((self.pool.submit(_run_rows, self.graph, query, used), rows, uids, rels, weight))

    def drain(self, *, block: bool, into: dict):
        """Check every finished batch, oldest first, recording created ids in
        ``into`` and yielding the batch's progress weight (all batches when
        ``block``, else only those already done)."""
        while self.pending and (block or self.pending[0][0].done()):
            future, rows, uids, rels, weight = self.pending.pop(0)
            res = future.result()
            if uids is not None:
                text = res.rows[0][0] if res.rows else ""
                pairs = np.array(text.replace(":", ",").split(","), dtype=np.int64) if text else np.zeros(0, np.int64)
                rowno = pairs[0::2] - (rows[0][0] if rows else 0)
                if len(rowno) != len(rows) or len(np.unique(rowno)) != len(rows) or (len(rows) and (
                        rowno.min() < 0 or rowno.max() >= len(rows))):
                    raise DatabaseError(f"FalkorDB created {len(rowno)} of {len(rows)} nodes in a batch")
                made = np.empty(len(rows), dtype=np.int64)
                made[rowno] = pairs[1::2]
                into.update(zip(uids, made.tolist()))
            made = int(res.stats.get("relationships_created") or 0)
            if made != len(rows) * rels:
                raise DatabaseError(f"FalkorDB created {made} of {len(rows) * rels} relationships in a batch")
            yield len(rows) * weight


def _ids(uids: pd.Series, ids: dict) -> list:
    """The node ids of a uid column (every uid must have been created)."""
    return list(map(ids.__getitem__, uids.tolist()))


def _values(s: pd.Series, key: str) -> list:
    """A column as plain Python values, None where _chunks would leave the
    property out (and where the driver would send null: infinities),
    integers where _plain would make them integers."""
    kind = s.dtype.kind
    if kind in "iub":
        return s.tolist()
    if kind == "f":
        arr = s.to_numpy(dtype=float)
        vals = arr.tolist()
        bad = ~np.isfinite(arr)
        if key in graph_tables.INT_COLUMNS:
            whole = ~bad & (arr == np.trunc(arr))
            if (np.abs(arr[whole]) >= 2.0 ** 63).any():
                return [None if v != v or v in (_INF, -_INF) else int(v) if v.is_integer() else v for v in vals]
            at = np.flatnonzero(whole)
            for i, v in zip(at.tolist(), arr[at].astype(np.int64).tolist()):
                vals[i] = v
        for i in np.flatnonzero(bad).tolist():
            vals[i] = None
        return vals
    vals = s.tolist()
    kinds = set(map(type, vals))
    if kinds <= _PLAIN_TYPES:  # str, int, bool, None: nothing to convert
        return vals
    if kinds <= _PLAIN_TYPES | {float}:  # plus NaN for missing and floats to check
        for i in [i for i, v in enumerate(vals) if type(v) is float]:
            v = vals[i]
            vals[i] = None if v != v or v in (_INF, -_INF) else graph_tables.plain(key, v)
        return vals
    out = []
    append = out.append
    for v in vals:
        t = type(v)
        if t is str or t is int or t is bool:  # nothing to convert
            append(v)
        elif graph_tables.missing(v):
            append(None)
        else:
            v = graph_tables.plain(key, v)
            append(None if isinstance(v, float) and (v != v or v in (_INF, -_INF)) else v)
    return out


_INF = float("inf")
_PLAIN_TYPES = {str, int, bool, type(None)}


def compact_log(graph: Graph) -> None:
    """Embedded FalkorDB only: once loads have grown its append-only file by
    AOF_COMPACT_BYTES, rewrite it as a snapshot and wait for the rewrite.

    The next server start then loads the graph instead of replaying every
    load statement; waiting matters because the server stops when its last
    user leaves, and stopping kills a rewrite in progress.
    """
    conn = getattr(getattr(graph, "_db", None), "connection", None)
    if getattr(graph, "kind", None) != "embedded" or conn is None:
        return
    try:
        info = conn.info("persistence")
        if not info.get("aof_enabled") or info.get("aof_current_size", 0) - info.get("aof_base_size", 0) < AOF_COMPACT_BYTES:
            return
        if not info.get("aof_rewrite_in_progress"):
            conn.bgrewriteaof()
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            info = conn.info("persistence")
            if not info.get("aof_rewrite_in_progress") and not info.get("aof_rewrite_scheduled"):
                return
            time.sleep(0.05)
    except Exception:  # noqa: BLE001 - compaction is an optimization, never fatal
        return
