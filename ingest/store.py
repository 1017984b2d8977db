"""Write an enriched trace into the graph, all or nothing; drop traces.

Neither engine can hold a million-element write in one transaction cheaply
(FalkorDB has no multi-statement transactions at all), so atomicity comes
from a state flag instead:

1. a ``Trace`` node is created first with ``status: 'loading'`` and a
   heartbeat; every query and listing only sees ``status: 'ready'`` traces;
2. nodes, then relationships, are written in ``UNWIND $rows`` batches
   (Neo4j: relationships by MATCH on the (trace, uid) key; FalkorDB: by
   internal node id, see the FalkorDB section below);
3. the flag flips to ``ready`` in the very last statement.

If anything fails on the way, everything carrying the trace's id is deleted
before the error is re-raised. A loader killed outright leaves a
``loading`` trace whose heartbeat stops; the next ingest deletes such
leftovers once their heartbeat is older than :data:`STALE_AFTER_S`.

``--replace`` loads the new version under a temporary id, and only when it
is complete deletes the old one and renames the new one, so a failed
replace leaves the old trace untouched.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone

import numpy as np
import pandas as pd

from tracegraph.db.base import LABELS, SCHEMA_VERSION, Graph
from tracegraph.errors import DatabaseError, UserError
from tracegraph.ingest.enrich import Summary
from tracegraph.ingest.frames import TraceFrames

# Rows per UNWIND batch: Neo4j (key lookups) and FalkorDB (id lookups, see
# _load_by_id); TRACEGRAPH_BATCH_ROWS sets both. bench/RESULTS.md has the
# measured tradeoff behind the FalkorDB default.
BATCH_ROWS = int(os.environ.get("TRACEGRAPH_BATCH_ROWS", "5000"))
FALKOR_BATCH_ROWS = int(os.environ.get("TRACEGRAPH_BATCH_ROWS", "10000"))
# Batches in flight on FalkorDB: the client encodes the next batch and
# decodes the last one's ids while the server runs the current one.
FALKOR_IN_FLIGHT = int(os.environ.get("TRACEGRAPH_LOAD_IN_FLIGHT", "2"))
# Embedded FalkorDB: rewrite the append-only file once a load has grown it
# by this much (see _compact_log).
AOF_COMPACT_BYTES = int(os.environ.get("TRACEGRAPH_AOF_COMPACT_BYTES", str(32 << 20)))
STALE_AFTER_S = 600

# (label, frame attribute, columns stored as properties)
NODE_TABLES = [
    ("Device", "devices", ["name", "kind"]),
    ("Stream", "streams", ["name", "kind", "device_name", "busy_us"]),
    ("Allocator", "allocators", ["name", "device_name", "peak_bytes", "peak_us"]),
    # The timeline's lists can hold millions of values: a node of their own
    # keeps the Allocator light to return and draw.
    ("MemoryTimeline", "timelines", ["allocator_name", "points", "t_us", "live_bytes"]),
    ("Op", "ops", ["name", "type", "device_name", "seq", "start_us", "end_us", "dur_us", "weight_us", "phase",
                   "executed", "attrs", "scope", "es_us", "ef_us", "ls_us", "lf_us", "slack_us", "cp_step",
                   "chain_len", "lc_step", "inputs"]),
    ("Kernel", "kernels", ["name", "op_name", "stream_name", "device_name", "start_us", "end_us", "dur_us", "kind",
                           "bytes", "direction", "gap_after_us", "exposed_us"]),
    ("Tensor", "tensors", ["name", "dtype", "shape", "bytes", "output_index", "param", "producer_name", "readers"]),
    ("Allocation", "allocations", ["allocator_name", "bytes", "requested_bytes", "alloc_us", "free_us", "address",
                                   "kind", "op_name", "tensor_name"]),
]

# (type, from label, to label, frame attribute, from column, to column, property columns)
REL_TABLES = [
    ("ON_DEVICE", "Stream", "Device", "streams", "uid", "device", []),
    ("ON_DEVICE", "Allocator", "Device", "allocators", "uid", "device", []),
    ("ON_DEVICE", "Op", "Device", "ops", "uid", "device", []),
    ("DATA", "Op", "Op", "data_deps", "src", "dst", []),
    ("CONTROL", "Op", "Op", "control_deps", "src", "dst", []),
    ("CRITICAL_PRED", "Op", "Op", "ops", "uid", "cp_pred", []),
    ("CHAIN_PRED", "Op", "Op", "ops", "uid", "chain_pred", []),
    ("LAUNCHED", "Op", "Kernel", "kernels", "op", "uid", []),
    ("ON_STREAM", "Kernel", "Stream", "kernels", "uid", "stream", []),
    ("NEXT_ON_STREAM", "Kernel", "Kernel", "kernels", "uid", "next_kernel", ["gap_after_us"]),
    ("PRODUCES", "Op", "Tensor", "tensors", "producer", "uid", ["output_index"]),
    ("CONSUMES", "Op", "Tensor", "consumes", "op", "tensor", ["input_index"]),
    ("BACKED_BY", "Tensor", "Allocation", "allocations", "tensor", "uid", []),
    ("ALLOCATED", "Op", "Allocation", "allocations", "op", "uid", []),
    ("IN_ALLOCATOR", "Allocation", "Allocator", "allocations", "uid", "allocator", []),
    ("HAS_TIMELINE", "Allocator", "MemoryTimeline", "timelines", "allocator", "uid", []),
]
MEMBERSHIP = [("HAS_OP", "Op"), ("HAS_DEVICE", "Device"), ("HAS_ALLOCATOR", "Allocator")]


def write_trace(graph: Graph, tf: TraceFrames, summary: Summary, name: str, *,
                replace: bool = False, progress=None) -> dict:
    """Store ``tf`` as trace ``name``; returns node and relationship counts.

    ``progress(done, total)`` is called after every batch when given.
    """
    _check_name(name)
    graph.ensure_schema()
    collect_stale(graph)
    if trace_status(graph, name) == "ready" and not replace:
        raise UserError(f"trace {name!r} exists (use --replace to overwrite it)")
    target = f"{name}~loading~{uuid.uuid4().hex[:8]}" if replace else name
    if not replace and trace_status(graph, name) == "loading":
        raise UserError(f"trace {name!r} is being loaded by another process")
    tables = _tables(tf)
    total = sum(len(df) for _, df, _ in _node_batches(tables)) + sum(len(df) for _, df, _ in _rel_batches(tables))
    by_id = _loads_by_id(graph)
    res = graph.run("CREATE (t:Trace {trace: $trace, uid: 'trace', name: $name, status: 'loading', heartbeat: $now})"
                    + (" RETURN id(t)" if by_id else ""),
                    {"trace": target, "name": name, "now": time.time()}, write=True)
    try:
        if by_id:
            counts = _load_by_id(graph, target, int(res.rows[0][0]), tables, progress, total)
        else:
            counts = _load_by_key(graph, target, tables, progress, total)
        props = _trace_props(tf, summary, counts)
        if replace:
            delete_trace(graph, name)
            _rename(graph, target, name)
            target = name
        graph.run("MATCH (t:Trace {trace: $trace, uid: 'trace'}) SET t += $props, t.status = 'ready'",
                  {"trace": target, "props": props}, write=True)
    except BaseException:
        delete_trace(graph, target)
        raise
    if by_id:
        _compact_log(graph)
    return counts


def _load_by_key(graph: Graph, target: str, tables: dict, progress, total: int) -> dict:
    """Neo4j: nodes with ``SET n += row``, relationships by MATCH on the
    (trace, uid) key, which the uniqueness constraint makes an index seek."""
    done = 0
    counts: dict = {"nodes": {}, "relationships": {}}
    for label, df, cols in _node_batches(tables):
        for rows in _chunks(df, ["uid", *cols]):
            graph.run(f"UNWIND $rows AS r CREATE (n:{label}) SET n += r, n.trace = $trace",
                      {"rows": rows, "trace": target}, write=True)
            done += len(rows)
            _beat(graph, target, progress, done, total)
        counts["nodes"][label] = counts["nodes"].get(label, 0) + len(df)
    for (rel, a, b, src, dst, props), df, _ in _rel_batches(tables):
        set_props = "".join(f", e.{p} = r.{p}" for p in props)
        query = (f"UNWIND $rows AS r MATCH (a:{a} {{trace: $trace, uid: r.{src}}}) "
                 f"MATCH (b:{b} {{trace: $trace, uid: r.{dst}}}) CREATE (a)-[e:{rel}]->(b)"
                 + (f" SET {set_props[2:]}" if props else ""))
        for rows in _chunks(df, [src, dst, *props]):
            graph.run(query, {"rows": rows, "trace": target}, write=True)
            done += len(rows)
            _beat(graph, target, progress, done, total)
        counts["relationships"][rel] = counts["relationships"].get(rel, 0) + len(df)
    for rel, label in MEMBERSHIP:
        res = graph.run(f"MATCH (t:Trace {{trace: $trace, uid: 'trace'}}) MATCH (n:{label} {{trace: $trace}}) "
                        f"CREATE (t)-[:{rel}]->(n) RETURN count(*) AS c", {"trace": target}, write=True)
        counts["relationships"][rel] = int(res.rows[0][0]) if res.rows else 0
    return counts


# ---------------------------------------------------------------- FalkorDB
#
# Matching both ends of every relationship by (trace, uid) costs FalkorDB
# two index scans per row (~60k relationships/s), and worse: its
# append-only file replays those queries at the next server start before
# the indexes exist, as label scans, so a replay is quadratic in the trace
# (10 minutes for a 10k-op trace). So on FalkorDB the loader keeps the
# internal id of every node it creates (``CREATE ... RETURN id(n)``, one
# result row per UNWIND row, in row order) and finds nodes again with
# ``WHERE id(n) = x`` (a NodeByIdSeek: O(1), no index, replays the same).
# Relationships to nodes that already exist are created in the same
# statement as the node (a Kernel with its LAUNCHED and ON_STREAM), the
# others in passes of their own once both ends exist. Rows travel as JSON
# lists in the query's ``CYPHER name=value`` header (the form the client
# itself sends, written by the C JSON encoder instead of per value in
# Python). Neo4j 5 deprecates ``id()`` and FalkorDB has no ``elementId()``,
# so there is no one portable text for this: Neo4j keeps _load_by_key.


def _loads_by_id(graph: Graph) -> bool:
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
    """NODE_TABLES in order, each with the relationships of REL_TABLES whose
    other end is created by an earlier table; the rest in passes of their
    own, grouped by (table, anchor column)."""
    member = {label: rel for rel, label in MEMBERSHIP}
    order = {label: i for i, (label, _, _) in enumerate(NODE_TABLES)}
    nodes = {attr: _Pass(attr, label, "uid", list(cols), [], member.get(label)) for label, attr, cols in NODE_TABLES}
    extra: dict = {}
    for rel, a, b, attr, src, dst, props in REL_TABLES:
        p = nodes.get(attr)
        if p is not None and dst == "uid" and p.label == b and order.get(a, len(order)) < order[b]:
            p.rels.append((rel, False, src, list(props)))
        elif p is not None and src == "uid" and p.label == a and order.get(b, len(order)) < order[a]:
            p.rels.append((rel, True, dst, list(props)))
        else:
            extra.setdefault((attr, src), _Pass(attr, None, src)).rels.append((rel, True, dst, list(props)))
    return list(nodes.values()) + list(extra.values())


def _load_by_id(graph: Graph, target: str, trace_id: int, tables: dict, progress, total: int) -> dict:
    counts = _expected_counts(tables)
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
                _beat(graph, target, progress, done, total)
            for sel, rels, values in groups:
                query = _pass_query(p, rels)
                head = [range(len(sel))] if p.label is not None else [_ids(sel[p.anchor], ids)]
                head += [_ids(sel[col], ids) for _, _, col, _ in rels]
                rows = list(zip(*head, *values))
                uids = sel["uid"].tolist() if p.label is not None else None
                # Progress counts what _load_by_key counts: nodes and the
                # relationships of REL_TABLES (not membership).
                weight = len(rels) + (p.label is not None)
                made = len(rels) + (p.member is not None and p.label is not None)
                for i in range(0, len(rows), FALKOR_BATCH_ROWS):
                    flight.submit(query, params, rows[i:i + FALKOR_BATCH_ROWS],
                                  None if uids is None else uids[i:i + FALKOR_BATCH_ROWS], made, weight)
            ready = _prepare(passes[k + 1], tables) if k + 1 < len(passes) else None
        for n in flight.drain(block=True, into=ids):
            done += n
            _beat(graph, target, progress, done, total)
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


def _expected_counts(tables: dict) -> dict:
    """Node and relationship counts, keyed in the order _load_by_key uses."""
    counts: dict = {"nodes": {}, "relationships": {}}
    for label, df, _ in _node_batches(tables):
        counts["nodes"][label] = counts["nodes"].get(label, 0) + len(df)
    for (rel, *_), df, _ in _rel_batches(tables):
        counts["relationships"][rel] = counts["relationships"].get(rel, 0) + len(df)
    for rel, label in MEMBERSHIP:
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
        if key in INT_COLUMNS:
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
            vals[i] = None if v != v or v in (_INF, -_INF) else _plain(key, v)
        return vals
    out = []
    append = out.append
    for v in vals:
        t = type(v)
        if t is str or t is int or t is bool:  # nothing to convert
            append(v)
        elif _missing(v):
            append(None)
        else:
            v = _plain(key, v)
            append(None if isinstance(v, float) and (v != v or v in (_INF, -_INF)) else v)
    return out


_INF = float("inf")
_PLAIN_TYPES = {str, int, bool, type(None)}


def _compact_log(graph: Graph) -> None:
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


def delete_trace(graph: Graph, trace: str) -> int:
    """Delete every node (and so relationship) of ``trace``, in batches."""
    deleted = 0
    for label in LABELS:
        while True:
            res = graph.run(f"MATCH (n:{label} {{trace: $trace}}) WITH n LIMIT 20000 DETACH DELETE n RETURN count(*) AS c",
                            {"trace": trace}, write=True)
            n = int(res.rows[0][0]) if res.rows else 0
            deleted += n
            if n == 0:
                break
    return deleted


def drop_trace(graph: Graph, name: str) -> int:
    """Delete a ready trace; NotFound-style UserError when there is none."""
    if trace_status(graph, name) is None:
        raise UserError(f"no trace named {name!r}")
    return delete_trace(graph, name)


def trace_status(graph: Graph, name: str) -> str | None:
    res = graph.run("MATCH (t:Trace {trace: $trace, uid: 'trace'}) RETURN t.status", {"trace": name})
    return res.rows[0][0] if res.rows else None


def collect_stale(graph: Graph) -> list[str]:
    """Delete traces left ``loading`` by a loader that died."""
    res = graph.run("MATCH (t:Trace) WHERE t.status = 'loading' AND t.heartbeat < $cutoff RETURN t.trace",
                    {"cutoff": time.time() - STALE_AFTER_S})
    stale = [r[0] for r in res.rows]
    for trace in stale:
        delete_trace(graph, trace)
    return stale


def _rename(graph: Graph, old: str, new: str) -> None:
    for label in LABELS:
        while True:
            res = graph.run(f"MATCH (n:{label} {{trace: $old}}) WITH n LIMIT 20000 SET n.trace = $new RETURN count(*) AS c",
                            {"old": old, "new": new}, write=True)
            if not res.rows or int(res.rows[0][0]) == 0:
                break


def _beat(graph: Graph, trace: str, progress, done: int, total: int) -> None:
    if progress:
        progress(done, total)
    now = time.time()
    if now - getattr(_beat, "last", 0.0) > 30:
        _beat.last = now
        graph.run("MATCH (t:Trace {trace: $trace, uid: 'trace'}) SET t.heartbeat = $now",
                  {"trace": trace, "now": now}, write=True)


def _check_name(name: str) -> None:
    if not name or len(name) > 200 or "~" in name or any(ord(c) < 32 for c in name):
        raise UserError(f"bad trace name {name!r}: 1-200 printable characters, no '~'")


def _tables(tf: TraceFrames) -> dict[str, pd.DataFrame]:
    """The frames with the denormalized name columns the nodes store."""
    name_of = {}
    for df in (tf.ops, tf.tensors, tf.devices, tf.streams, tf.allocators):
        name_of.update(zip(df["uid"].tolist(), df["name"].tolist()))
    device_of = dict(zip(tf.streams["uid"].tolist(), tf.streams["device"].tolist()))

    def names(col: pd.Series, via: dict | None = None) -> pd.Series:
        # dict lookups (Series.map(dict) builds an index of the dict first)
        keys = col.tolist() if via is None else list(map(via.get, col.tolist()))
        return pd.Series(list(map(name_of.get, keys)), index=col.index, dtype=object)

    ops = tf.ops.assign(device_name=names(tf.ops["device"]))
    kernels = tf.kernels.assign(op_name=names(tf.kernels["op"]), stream_name=names(tf.kernels["stream"]),
                                device_name=names(tf.kernels["stream"], device_of))
    deps = tf.deps
    return {
        "devices": tf.devices,
        "streams": tf.streams.assign(device_name=names(tf.streams["device"])),
        "allocators": tf.allocators.assign(device_name=names(tf.allocators["device"])),
        "ops": ops,
        "kernels": kernels,
        "tensors": tf.tensors.assign(producer_name=names(tf.tensors["producer"])),
        "allocations": tf.allocations.assign(allocator_name=names(tf.allocations["allocator"]),
                                             op_name=names(tf.allocations["op"]),
                                             tensor_name=names(tf.allocations["tensor"])),
        "timelines": _timelines(tf.allocators),
        "consumes": tf.consumes,
        "data_deps": deps[deps["kind"] == "data"],
        "control_deps": deps[deps["kind"] == "control"],
    }


def _timelines(allocators: pd.DataFrame) -> pd.DataFrame:
    """One MemoryTimeline row per allocator that has a timeline."""
    al = allocators[allocators["timeline_us"].notna()] if "timeline_us" in allocators else allocators.iloc[:0]
    return pd.DataFrame({
        "uid": ("timeline:" + al["uid"].astype(str)).tolist(),
        "allocator": al["uid"].tolist(),
        "allocator_name": al["name"].tolist(),
        "points": [len(t) for t in al.get("timeline_us", [])],
        "t_us": al.get("timeline_us", pd.Series(dtype=object)).tolist(),
        "live_bytes": al.get("timeline_bytes", pd.Series(dtype=object)).tolist(),
    }, columns=["uid", "allocator", "allocator_name", "points", "t_us", "live_bytes"])


def _node_batches(tables):
    for label, attr, cols in NODE_TABLES:
        yield label, tables[attr], cols


def _rel_batches(tables):
    for rel, a, b, attr, src, dst, props in REL_TABLES:
        df = tables[attr]
        df = df[df[src].notna() & df[dst].notna()]
        yield (rel, a, b, src, dst, props), df, props


def _chunks(df: pd.DataFrame, cols: list[str]):
    """Rows as dicts without nulls (a missing property is how both engines
    spell null), ``BATCH_ROWS`` at a time."""
    records = df[cols].to_dict("records")
    for i in range(0, len(records), BATCH_ROWS):
        yield [{k: _plain(k, v) for k, v in r.items() if not _missing(v)} for r in records[i:i + BATCH_ROWS]]


def _missing(v) -> bool:
    if v is None:
        return True
    if isinstance(v, float) and math.isnan(v):
        return True
    return v is pd.NA or v is pd.NaT


# Counts and sizes are integers even where pandas widened them to float
# because the column also holds nulls.
INT_COLUMNS = {"seq", "bytes", "requested_bytes", "output_index", "input_index", "cp_step", "lc_step",
               "chain_len", "peak_bytes"}


def _plain(key: str, v):
    """numpy scalars to Python; integer columns back to int."""
    if hasattr(v, "item") and not isinstance(v, (str, bytes, list)):
        v = v.item()
    if key in INT_COLUMNS and isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def _trace_props(tf: TraceFrames, summary: Summary, counts: dict) -> dict:
    props = {k: v for k, v in summary.props.items() if not _missing(v)}
    props["schema_version"] = SCHEMA_VERSION
    props["ingested_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    props["node_count"] = sum(counts["nodes"].values()) + 1
    props["relationship_count"] = sum(counts["relationships"].values())
    props["counts"] = json.dumps(counts)
    for k, v in tf.meta.items():
        if isinstance(v, (str, int, float, bool)):
            props[f"meta_{k}"] = v
    return props
