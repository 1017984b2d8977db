"""The FalkorDB statement loader: a trace's tables into a fresh graph by
Cypher statements, relationship ends found by internal node id. A trace is
normally written by bulk insert (:mod:`tracegraph.db.falkor_bulk`, 2x as
fast); this loader writes what bulk insert has no type for, and whatever
``TRACEGRAPH_FALKORDB_LOADER=cypher`` asks it to.

Matching both ends of every relationship by uid costs FalkorDB an index
lookup per end and row, and its append-only file replays those queries at
the next server start before any index exists, as label scans: quadratic in
the trace. So the loader keeps the internal id of every node it creates
(``CREATE ... RETURN`` one ``row:id`` pair per row) and finds nodes again
with ``WHERE id(n) = x`` (a NodeByIdSeek: O(1), no index, replays the
same). Relationships to nodes that already exist are created in the same
statement as the node (a Kernel with its LAUNCHED and ON_STREAM), the
others in passes of their own once both ends exist. Rows travel as JSON
lists in the query's ``CYPHER name=value`` header (the form the client
itself sends, written by the C JSON encoder instead of per value in
Python).

The graph written here is a load's own key, never a graph other traces
live in: nothing here ever deletes a node (see :mod:`tracegraph.db.falkor`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
import numpy.typing as npt

from tracegraph.db import load_plan
from tracegraph.db.base import Progress, Result, TraceTables, ends
from tracegraph.errors import DatabaseError

# Rows per UNWIND batch (TRACEGRAPH_BATCH_ROWS); bench/RESULTS.md has the
# measured tradeoff behind the default.
BATCH_ROWS = int(os.environ.get("TRACEGRAPH_BATCH_ROWS", "10000"))
# Batches in flight: the client encodes the next batch and decodes the
# last one's ids while the server runs the current one.
IN_FLIGHT = int(os.environ.get("TRACEGRAPH_LOAD_IN_FLIGHT", "2"))

# Runs one write statement on the load's graph; the statement carries its
# parameters in its CYPHER header already when the second argument is None.
RunWrite = Callable[[str, "dict[str, Any] | None"], Result]


def load(
    run: RunWrite, trace: str, trace_id: int, tables: TraceTables, progress: Progress | None
) -> dict[str, npt.NDArray[np.int64]]:
    """Write ``tables`` as trace ``trace`` into the graph ``run`` writes to,
    whose Trace node (already created) has internal id ``trace_id``, in the
    order of :mod:`load_plan`; returns each label's nodes' internal ids
    (by row). Every batch's created node and relationship counts are checked."""
    tables_frames = load_plan.frames(tables)
    ints, bools = tables.int_columns, tables.bool_columns
    total = tables.elements()
    ids: dict[str, npt.NDArray[np.int64]] = {t.label: np.full(t.frame.n, -1, dtype=np.int64) for t in tables.nodes}
    done = 0
    params = {"trace": trace, "tid": trace_id}
    passes = load_plan.passes(tables)
    with _InFlight(run, IN_FLIGHT) as flight:
        ready = load_plan.groups(passes[0], tables_frames, ints, bools) if passes else []
        for k, p in enumerate(passes):
            # Every batch of the earlier passes must be done: their ids are
            # needed now. The next pass's properties were converted while
            # they ran (below), so the server seldom waits for the client.
            for n in flight.drain(into=ids):
                done += n
                if progress:
                    progress(done, total)
            frame = tables_frames[p.table]
            for g in ready:
                query = _pass_query(p, g)
                head: list[Any] = (
                    [range(len(g.rows))]
                    if p.label is not None
                    else [_ids(ids[p.anchor_label], ends(frame, p.anchor)[g.rows])]
                )
                head += [_ids(ids[rel.other], ends(frame, rel.column)[g.rows]) for rel in g.rels]
                rows = list(zip(*head, *g.values))
                made = load_plan.relationships_per_row(p, g)
                weight = load_plan.elements_per_row(p, g)
                for i in range(0, len(rows), BATCH_ROWS):
                    flight.submit(
                        query,
                        params,
                        rows[i : i + BATCH_ROWS],
                        None if p.label is None else (p.label, g.rows[i : i + BATCH_ROWS]),
                        made,
                        weight,
                    )
            ready = load_plan.groups(passes[k + 1], tables_frames, ints, bools) if k + 1 < len(passes) else []
        for n in flight.drain(into=ids):
            done += n
            if progress:
                progress(done, total)
    return ids


def _pass_query(p: load_plan.Pass, g: load_plan.Group) -> str:
    """Rows are ``[row number (node passes) or anchor id, other ends' ids...,
    values...]``; every existing node is found by its internal id."""
    ends = [f"x{k}" for k in range(len(g.rels))]
    found = ends if p.label is not None else ["a", *ends]
    first = 1 if p.label is not None else 0  # r[0] of a node pass is the row number
    member = p.member is not None and p.label is not None
    q = ["MATCH (t) WHERE id(t) = $tid"] if member else []
    q.append("UNWIND $rows AS r")
    if found:
        carry = (["t"] if member else []) + ["r"] + [f"r[{first + k}] AS {e}_id" for k, e in enumerate(found)]
        q.append("WITH " + ", ".join(carry))
        q += [f"MATCH ({e}) WHERE id({e}) = {e}_id" for e in found]
    q += load_plan.creates(p, g, "n" if p.label is not None else "a", ends, first + len(found))
    if p.label is not None:
        # One string instead of a row per node: the client decodes it in C.
        q.append("RETURN string.join(collect(toString(r[0]) + ':' + toString(id(n))), ',') AS ids")
    return " ".join(q)


_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False, check_circular=False).encode
# In JSON, a backslash before anything but a quote or a backslash is a
# control-character escape, which the CYPHER header does not read the same.
_CONTROL_ESCAPE = re.compile(r'\\[^"\\]')


def _run_rows(run: RunWrite, query: str, params: dict[str, Any]) -> Result:
    """``run(query, params)``, with the header written as JSON when that is exact."""
    try:
        header: str | None = "CYPHER " + " ".join(f"{k}={_ENCODE(v)}" for k, v in params.items()) + " "
    except ValueError:  # NaN or infinity: let the client clean them
        header = None
    if header is None or _CONTROL_ESCAPE.search(header):
        return run(query, params)
    return run(header + query, None)


class _InFlight:
    """Up to ``depth`` batches running at once, results taken in order."""

    def __init__(self, run: RunWrite, depth: int) -> None:
        self.run = run
        self.depth = max(1, depth)
        self.pool = ThreadPoolExecutor(max_workers=self.depth, thread_name_prefix="tracegraph-load")
        self.pending: list[tuple[Future[Result], list[Any], tuple[str, npt.NDArray[np.int64]] | None, int, int]] = []

    def __enter__(self) -> _InFlight:
        return self

    def __exit__(self, *exc: object) -> None:
        # Never leave a batch running behind the caller's back (it would
        # land after the cleanup that deletes the load).
        self.pool.shutdown(wait=True, cancel_futures=True)

    def submit(
        self,
        query: str,
        params: dict[str, Any],
        rows: list[Any],
        nodes: tuple[str, npt.NDArray[np.int64]] | None,
        rels: int,
        weight: int,
    ) -> None:
        """Run ``query`` on ``rows``; ``nodes`` (label, rows of its table) name
        the nodes it creates (one id comes back per row), ``rels``
        relationships are made per row."""
        args = dict(params, rows=rows)
        used = {k: v for k, v in args.items() if f"${k}" in query}
        self.pending.append((self.pool.submit(_run_rows, self.run, query, used), rows, nodes, rels, weight))

    def drain(self, *, into: dict[str, npt.NDArray[np.int64]]) -> Iterator[int]:
        """Wait for every batch, oldest first, recording created ids in
        ``into`` and yielding each batch's progress weight."""
        while self.pending:
            future, rows, nodes, rels, weight = self.pending.pop(0)
            res = future.result()
            if nodes is not None:
                text = res.rows[0][0] if res.rows else ""
                pairs = np.array(text.replace(":", ",").split(","), dtype=np.int64) if text else np.zeros(0, np.int64)
                rowno = pairs[0::2] - (rows[0][0] if rows else 0)
                if (
                    len(rowno) != len(rows)
                    or len(np.unique(rowno)) != len(rows)
                    or (len(rows) and (rowno.min() < 0 or rowno.max() >= len(rows)))
                ):
                    raise DatabaseError(f"FalkorDB created {len(rowno)} of {len(rows)} nodes in a batch")
                made = np.empty(len(rows), dtype=np.int64)
                made[rowno] = pairs[1::2]
                label, table_rows = nodes
                into[label][table_rows] = made
            made_rels = int(res.stats.get("relationships_created") or 0)
            if made_rels != len(rows) * rels:
                raise DatabaseError(f"FalkorDB created {made_rels} of {len(rows) * rels} relationships in a batch")
            yield len(rows) * weight


def _ids(ids: npt.NDArray[np.int64], rows: npt.NDArray[np.int64]) -> list[int]:
    """The node ids of rows of a label's table (every one created already)."""
    got = ids[rows]
    if (got < 0).any():
        raise DatabaseError("a relationship names a node not written yet")
    return got.tolist()  # type: ignore[no-any-return]
