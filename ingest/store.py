"""Write an enriched trace into the graph, all or nothing; drop traces.

Neither engine can hold a million-element write in one transaction cheaply
(FalkorDB has no multi-statement transactions at all), so atomicity comes
from a state flag instead:

1. a ``Trace`` node is created first with ``status: 'loading'`` and a
   heartbeat; every query and listing only sees ``status: 'ready'`` traces;
2. nodes, then relationships, are written in ``UNWIND $rows`` batches;
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
import time
import uuid
from datetime import datetime, timezone

import pandas as pd

from tracegraph.db.base import LABELS, Graph
from tracegraph.errors import UserError
from tracegraph.ingest.enrich import Summary
from tracegraph.ingest.frames import TraceFrames

BATCH_ROWS = int(os.environ.get("TRACEGRAPH_BATCH_ROWS", "5000"))
STALE_AFTER_S = 600

# (label, frame attribute, columns stored as properties)
NODE_TABLES = [
    ("Device", "devices", ["name", "kind"]),
    ("Stream", "streams", ["name", "kind", "device_name"]),
    ("Allocator", "allocators", ["name", "device_name", "peak_bytes", "peak_us", "timeline_us", "timeline_bytes"]),
    ("Op", "ops", ["name", "type", "device_name", "seq", "start_us", "end_us", "dur_us", "weight_us", "phase",
                   "executed", "attrs", "scope", "es_us", "ef_us", "ls_us", "lf_us", "slack_us", "cp_step",
                   "chain_len", "lc_step"]),
    ("Kernel", "kernels", ["name", "op_name", "stream_name", "device_name", "start_us", "end_us", "dur_us", "kind",
                           "bytes", "direction", "gap_after_us"]),
    ("Tensor", "tensors", ["name", "dtype", "shape", "bytes", "output_index", "param", "producer_name"]),
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
    done = 0
    counts: dict = {"nodes": {}, "relationships": {}}
    graph.run("CREATE (t:Trace {trace: $trace, uid: 'trace', name: $name, status: 'loading', heartbeat: $now})",
              {"trace": target, "name": name, "now": time.time()}, write=True)
    try:
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
    return counts


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
        name_of.update(zip(df["uid"], df["name"]))
    ops = tf.ops.assign(device_name=tf.ops["device"].map(name_of))
    kernels = tf.kernels.assign(op_name=tf.kernels["op"].map(name_of), stream_name=tf.kernels["stream"].map(name_of),
                                device_name=tf.kernels["stream"].map(dict(zip(tf.streams["uid"], tf.streams["device"]))).map(name_of))
    deps = tf.deps
    return {
        "devices": tf.devices,
        "streams": tf.streams.assign(device_name=tf.streams["device"].map(name_of)),
        "allocators": tf.allocators.assign(device_name=tf.allocators["device"].map(name_of)),
        "ops": ops,
        "kernels": kernels,
        "tensors": tf.tensors.assign(producer_name=tf.tensors["producer"].map(name_of)),
        "allocations": tf.allocations.assign(allocator_name=tf.allocations["allocator"].map(name_of),
                                             op_name=tf.allocations["op"].map(name_of),
                                             tensor_name=tf.allocations["tensor"].map(name_of)),
        "consumes": tf.consumes,
        "data_deps": deps[deps["kind"] == "data"],
        "control_deps": deps[deps["kind"] == "control"],
    }


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
    props["ingested_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    props["node_count"] = sum(counts["nodes"].values()) + 1
    props["relationship_count"] = sum(counts["relationships"].values())
    props["counts"] = json.dumps(counts)
    for k, v in tf.meta.items():
        if isinstance(v, (str, int, float, bool)):
            props[f"meta_{k}"] = v
    return props
