"""Neo4j ingest against a plain reference loader, side by side on one server,
and the first trace into an empty database against the next one.

    python -m bench.neo4j_reference --db bolt://127.0.0.1:7687 [--ops 10000] [--repeat 3] [--fresh]
    python -m bench.neo4j_reference --db bolt://127.0.0.1:7687 --trace FILE... [--repeat 3]

``--fresh`` (a scratch server only: it drops every trace there) first
empties the database and its plan cache (``db.clearQueryCaches()``: what
a database just created has), then stores the trace twice, timing the
first (into the empty database, every plan made on empty statistics)
against the second (into a database holding one).

Both write the same tables (the ones tracegraph stores for a generated
TF step of ``--ops`` ops, bench/generate.py, or with ``--trace`` for the
files given, any trace tracegraph ingests) into the same server:

* the reference: per label ``UNWIND $rows AS r CREATE (n:Label) SET n = r``
  with one map per row, then per relationship type ``UNWIND $rows AS r
  MATCH (a:A {trace: $trace, uid: r.src}) MATCH (b:B {trace: $trace, uid:
  r.dst}) CREATE (a)-[e:T]->(b) SET e = r.props``, both ends found through
  the (trace, uid) uniqueness constraint, 10,000 rows and one transaction
  per batch: the plainest fast way to load a graph with the driver;
* tracegraph's own ``Graph.store_trace`` (load under a temporary name,
  count checks, membership, the atomic publish).

For each it prints graph elements (nodes + relationships, membership
included) per second over the best of ``--repeat`` runs, and the ratio.
Only what happens after parsing and enrichment is timed (both start from
the same in-memory tables).

With ``--trace`` a third line times what ``tracegraph ingest`` does with
the files: parse, enrichment and write together, the same graph elements
(checked by their counts). A job's rank files are held whole for the
tables the two loaders write (``TRACEGRAPH_STREAM_JOBS=0``: every rank's
tables joined and enriched as one trace, the rows the streamed write
stores), while the ingest streams them rank by rank.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench import generate

BATCH = 10_000


def reference_load(driver: Any, database: str | None, trace: str, tables: Any) -> int:
    """Write ``tables`` as ``trace`` the plain way; returns the elements written."""
    from tracegraph.columns import take
    from tracegraph.db import load_plan
    from tracegraph.db.values import row_dicts

    written = 0

    def batch(query: str, rows: list[Any]) -> None:
        with driver.session(database=database) as s:
            s.execute_write(lambda tx: tx.run(query, rows=rows, trace=trace).consume())

    def in_batches(query: str, rows: list[Any]) -> int:
        """``query`` over ``rows``, BATCH rows a transaction; how many rows."""
        for i in range(0, len(rows), BATCH):
            batch(query, rows[i : i + BATCH])
        return len(rows)

    for t in tables.nodes:
        rows = [dict(r, trace=trace) for r in row_dicts(t.frame, ["uid", *t.columns], tables.int_columns)]
        written += in_batches(f"UNWIND $rows AS r CREATE (n:{t.label}) SET n = r", rows)
    with driver.session(database=database) as s:
        s.run("CREATE (t:Trace {trace: $trace, uid: 'trace'})", trace=trace).consume()
    written += 1
    uid_of = load_plan.uids(tables)
    for r in tables.rels:
        src, dst = r.ends()
        keep = (src >= 0) & (dst >= 0)
        # a table without property columns: one empty map a row (row_dicts gives no rows)
        props = row_dicts(r.frame.where(keep), r.columns, tables.int_columns) or [{}] * int(keep.sum())
        rows = [
            {"src": a, "dst": b, "props": p}
            for a, b, p in zip(
                take(uid_of[r.start], src[keep]).tolist(), take(uid_of[r.end], dst[keep]).tolist(), props
            )
        ]
        query = (
            f"UNWIND $rows AS r MATCH (a:{r.start} {{trace: $trace, uid: r.src}}) "
            f"MATCH (b:{r.end} {{trace: $trace, uid: r.dst}}) CREATE (a)-[e:{r.type}]->(b) SET e = r.props"
        )
        written += in_batches(query, rows)
    # Membership in batches too (one transaction for a big job's ops runs
    # out of the server's transaction memory).
    sizes = {t.label: t.frame.n for t in tables.nodes}
    for rel, label in tables.membership:
        uids = take(uid_of[label], np.arange(sizes[label], dtype=np.int64)).tolist()
        query = (
            f"MATCH (t:Trace {{trace: $trace, uid: 'trace'}}) UNWIND $rows AS u "
            f"MATCH (n:{label} {{trace: $trace, uid: u}}) CREATE (t)-[:{rel}]->(n)"
        )
        written += in_batches(query, uids)
    return written


def delete(graph: Any, trace: str) -> None:
    from tracegraph.db.base import LABELS

    # The Trace node last: before its members go, it holds a relationship
    # to each of them, too many to detach in one transaction.
    for label in [*LABELS[1:], LABELS[0]]:
        while graph.run(
            f"MATCH (n:{label} {{trace: $trace}}) WITH n LIMIT 5000 DETACH DELETE n RETURN count(*)",
            {"trace": trace},
            write=True,
        ).rows[0][0]:
            pass


def empty(graph: Any) -> None:
    """Every trace dropped, every tracegraph node gone, no cached plan."""
    from tracegraph.db.base import LABELS

    for t in graph.list_traces():
        graph.drop_trace(t["trace"])
    for label in [*LABELS[1:], LABELS[0]]:
        while graph.run(f"MATCH (n:{label}) WITH n LIMIT 20000 DETACH DELETE n RETURN count(*)", write=True).rows[0][0]:
            pass
    graph.run("CALL db.clearQueryCaches()", write=True)


def first_trace(graph: Any, tables: Any, elements: int) -> None:
    empty(graph)
    took = []
    for name in ("bench-first", "bench-second"):
        t0 = time.perf_counter()
        graph.store_trace(name, tables)
        took.append(time.perf_counter() - t0)
    print(f"first trace into an emptied database  {took[0]:6.2f} s  {elements / took[0]:10,.0f} elements/s", flush=True)
    print(f"the same trace again beside it        {took[1]:6.2f} s  {elements / took[1]:10,.0f} elements/s", flush=True)
    print(f"first / second: {took[0] / took[1]:.2f}x\n", flush=True)
    for name in ("bench-first", "bench-second"):
        graph.drop_trace(name)


def trace_tables(paths: list[Path]) -> Any:
    """The tables tracegraph stores for ``paths``, a job's ranks held whole."""
    from tracegraph.ingest import pipeline

    was = os.environ.get(pipeline.STREAM_ENV)
    os.environ[pipeline.STREAM_ENV] = "0"
    try:
        prepared = pipeline.prepare(paths, "bench-tables")
    finally:
        if was is None:
            del os.environ[pipeline.STREAM_ENV]
        else:
            os.environ[pipeline.STREAM_ENV] = was
    assert prepared.tables is not None
    return prepared.tables


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--db", required=True, help="a Neo4j URI (bolt://...); the traces it writes are removed after")
    p.add_argument("--ops", type=int, default=10_000)
    p.add_argument("--trace", nargs="+", type=Path, help="the tables of these files' trace instead of a TF step")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--fresh", action="store_true", help="also time the first trace into an emptied database")
    p.add_argument(
        "--keep",
        action="store_true",
        help="leave every trace written (a scratch server, wiped after: deleting a big job's reference copy in "
        "batches ran out of a 1 GB server's transaction memory); each loader then writes beside the ones before",
    )
    args = p.parse_args(argv)

    from tracegraph.db.connect import open_graph
    from tracegraph.ingest.pipeline import ingest, parse_files, tables_of

    graph = open_graph(args.db)
    assert graph.backend == "neo4j", "--db must name a Neo4j server"
    graph.ensure_schema()  # type: ignore[attr-defined]
    if args.trace:
        tables = trace_tables(args.trace)
        what = f"{', '.join(p.name for p in args.trace[:2])}{', ...' if len(args.trace) > 2 else ''}"
    else:
        with tempfile.TemporaryDirectory() as tmp:
            files = generate.write(generate.generate(args.ops, seed=0), Path(tmp))
            tf = parse_files([files["binary"]])
            tables = tables_of(tf)
        what = f"{args.ops:,} ops"
    elements = (
        tables.elements()
        + 1
        + sum(t.frame.n for t in tables.nodes if t.label in {label for _, label in tables.membership})
    )
    if args.fresh:
        first_trace(graph, tables, elements)
    # Both loaders at their best: plans made on the statistics of a
    # database holding a trace (the reference has no hints, and a plan
    # made on an empty label scans).
    graph.store_trace("bench-warm", tables)
    graph.run("CALL db.clearQueryCaches()", write=True)
    best: dict[str, float] = {}
    names = ("reference", "tracegraph", "ingest") if args.trace else ("reference", "tracegraph")
    for run in range(args.repeat):
        for name in names:
            trace = f"bench-{name}-{run}"
            t0 = time.perf_counter()
            if name == "reference":
                n = reference_load(graph._driver, graph._database, trace, tables)  # type: ignore[attr-defined]
                assert n == elements, (n, elements)
            elif name == "tracegraph":
                stored = graph.store_trace(trace, tables)
            else:  # the same graph, every label's and type's count
                streamed = ingest(graph, args.trace, trace).counts
                assert streamed == stored, (streamed, stored)
            took = time.perf_counter() - t0
            best[name] = min(best.get(name, took), took)
            print(f"run {run + 1}: {name:10s} {took:6.2f} s  {elements / took:10,.0f} elements/s", flush=True)
            if args.keep:
                continue
            if name == "reference":
                delete(graph, trace)
            else:
                graph.drop_trace(trace)
    if not args.keep:
        graph.drop_trace("bench-warm")
    ref, ours = elements / best["reference"], elements / best["tracegraph"]
    print(f"\n{what}, {elements:,} graph elements, best of {args.repeat}:")
    print(f"  reference loader  {best['reference']:6.2f} s  {ref:10,.0f} elements/s")
    print(
        f"  tracegraph        {best['tracegraph']:6.2f} s  {ours:10,.0f} elements/s  ({ours / ref:.2f}x the reference)"
    )
    if args.trace:
        whole = elements / best["ingest"]
        print(
            f"  ingest from the files (parse, enrich, write)  {best['ingest']:6.2f} s  {whole:10,.0f} elements/s  "
            f"({whole / ref:.2f}x the reference)"
        )
    graph.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
