"""Write an enriched trace into the graph, all or nothing; drop traces.

Neither engine can hold a million-element write in one transaction cheaply
(FalkorDB has no multi-statement transactions at all), so atomicity comes
from a state flag instead:

1. a ``Trace`` node is created first with ``status: 'loading'`` and a
   heartbeat; every query and listing only sees ``status: 'ready'`` traces;
2. nodes, then relationships, are written in ``UNWIND $rows`` batches
   (Neo4j: relationships by MATCH on the (trace, uid) key, below;
   FalkorDB: by internal node id, see :mod:`load_falkor`);
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
import os
import time
import uuid
from datetime import datetime, timezone

import pandas as pd

from tracegraph.db.base import LABELS, SCHEMA_VERSION, Graph
from tracegraph.errors import UserError
from tracegraph.ingest import graph_tables, load_falkor
from tracegraph.ingest.enrich import Summary
from tracegraph.ingest.frames import TraceFrames

# Rows per UNWIND batch on Neo4j (key lookups); TRACEGRAPH_BATCH_ROWS sets
# it (and FalkorDB's, see load_falkor).
BATCH_ROWS = int(os.environ.get("TRACEGRAPH_BATCH_ROWS", "5000"))
STALE_AFTER_S = 600


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
    tables = graph_tables.tables(tf)
    total = (sum(len(df) for _, df, _ in graph_tables.node_tables(tables))
             + sum(len(df) for _, df, _ in graph_tables.rel_tables(tables)))
    by_id = load_falkor.loads_by_id(graph)
    res = graph.run("CREATE (t:Trace {trace: $trace, uid: 'trace', name: $name, status: 'loading', heartbeat: $now})"
                    + (" RETURN id(t)" if by_id else ""),
                    {"trace": target, "name": name, "now": time.time()}, write=True)
    try:
        if by_id:
            counts = load_falkor.load_by_id(graph, target, int(res.rows[0][0]), tables,
                                             lambda done, n: _beat(graph, target, progress, done, n), total)
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
        load_falkor.compact_log(graph)
    return counts


def _load_by_key(graph: Graph, target: str, tables: dict, progress, total: int) -> dict:
    """Neo4j: nodes with ``SET n += row``, relationships by MATCH on the
    (trace, uid) key, which the uniqueness constraint makes an index seek."""
    done = 0
    counts: dict = {"nodes": {}, "relationships": {}}
    for label, df, cols in graph_tables.node_tables(tables):
        for rows in _chunks(df, ["uid", *cols]):
            graph.run(f"UNWIND $rows AS r CREATE (n:{label}) SET n += r, n.trace = $trace",
                      {"rows": rows, "trace": target}, write=True)
            done += len(rows)
            _beat(graph, target, progress, done, total)
        counts["nodes"][label] = counts["nodes"].get(label, 0) + len(df)
    for (rel, a, b, src, dst, props), df, _ in graph_tables.rel_tables(tables):
        set_props = "".join(f", e.{p} = r.{p}" for p in props)
        query = (f"UNWIND $rows AS r MATCH (a:{a} {{trace: $trace, uid: r.{src}}}) "
                 f"MATCH (b:{b} {{trace: $trace, uid: r.{dst}}}) CREATE (a)-[e:{rel}]->(b)"
                 + (f" SET {set_props[2:]}" if props else ""))
        for rows in _chunks(df, [src, dst, *props]):
            graph.run(query, {"rows": rows, "trace": target}, write=True)
            done += len(rows)
            _beat(graph, target, progress, done, total)
        counts["relationships"][rel] = counts["relationships"].get(rel, 0) + len(df)
    for rel, label in graph_tables.MEMBERSHIP:
        res = graph.run(f"MATCH (t:Trace {{trace: $trace, uid: 'trace'}}) MATCH (n:{label} {{trace: $trace}}) "
                        f"CREATE (t)-[:{rel}]->(n) RETURN count(*) AS c", {"trace": target}, write=True)
        counts["relationships"][rel] = int(res.rows[0][0]) if res.rows else 0
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

def _chunks(df: pd.DataFrame, cols: list[str]):
    """Rows as dicts without nulls (a missing property is how both engines
    spell null), ``BATCH_ROWS`` at a time."""
    records = df[cols].to_dict("records")
    for i in range(0, len(records), BATCH_ROWS):
        yield [{k: graph_tables.plain(k, v) for k, v in r.items() if not graph_tables.missing(v)} for r in records[i:i + BATCH_ROWS]]


def _trace_props(tf: TraceFrames, summary: Summary, counts: dict) -> dict:
    props = {k: v for k, v in summary.props.items() if not graph_tables.missing(v)}
    props["schema_version"] = SCHEMA_VERSION
    props["ingested_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    props["node_count"] = sum(counts["nodes"].values()) + 1
    props["relationship_count"] = sum(counts["relationships"].values())
    props["counts"] = json.dumps(counts)
    for k, v in tf.meta.items():
        if isinstance(v, (str, int, float, bool)):
            props[f"meta_{k}"] = v
    return props
