"""The FalkorDB loader: a trace's tables into a fresh graph, relationship
ends found by internal node id.

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
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tracegraph.db.base import Progress, Result, TraceTables
from tracegraph.db.values import column_values
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


@dataclass
class _Pass:
    """One sweep over a table: create a node per row (``label``) or take the
    existing node named by column ``anchor``, plus relationships from/to
    existing nodes: ``(type, outgoing, other column, property columns)``."""

    table: str
    label: str | None
    anchor: str
    cols: list[str] = field(default_factory=list)
    rels: list[tuple[str, bool, str, list[str]]] = field(default_factory=list)
    member: str | None = None


def _passes(tables: TraceTables) -> list[_Pass]:
    """The node tables in order, each with the relationships whose other end
    an earlier table creates; the rest in passes of their own, grouped by
    (table, anchor column)."""
    member = {label: rel for rel, label in tables.membership}
    order = {t.label: i for i, t in enumerate(tables.nodes)}
    nodes = {t.table: _Pass(t.table, t.label, "uid", list(t.columns), [], member.get(t.label)) for t in tables.nodes}
    extra: dict[tuple[str, str], _Pass] = {}
    for r in tables.rels:
        p = nodes.get(r.table)
        if p is not None and r.dst == "uid" and p.label == r.end and order.get(r.start, len(order)) < order[r.end]:
            p.rels.append((r.type, False, r.src, list(r.columns)))
        elif p is not None and r.src == "uid" and p.label == r.start and order.get(r.end, len(order)) < order[r.start]:
            p.rels.append((r.type, True, r.dst, list(r.columns)))
        else:
            extra.setdefault((r.table, r.src), _Pass(r.table, None, r.src)).rels.append(
                (r.type, True, r.dst, list(r.columns)))
    return list(nodes.values()) + list(extra.values())


def load(run: RunWrite, trace: str, trace_id: int, tables: TraceTables, progress: Progress | None) -> None:
    """Write ``tables`` as trace ``trace`` into the graph ``run`` writes to,
    whose Trace node (already created) has internal id ``trace_id``. Every
    batch's created node and relationship counts are checked."""
    frames = {t.table: t.frame for t in tables.nodes}
    frames.update({r.table: r.frame for r in tables.rels if r.table not in frames})
    ints = tables.int_columns
    total = tables.elements()
    ids: dict[Any, int] = {}
    done = 0
    params = {"trace": trace, "tid": trace_id}
    passes = _passes(tables)
    with _InFlight(run, IN_FLIGHT) as flight:
        ready = _prepare(passes[0], frames, ints)
        for k, p in enumerate(passes):
            groups = ready
            # Every batch of the earlier passes must be done: their ids are
            # needed now. The next pass's properties were converted while
            # they ran (below), so the server seldom waits for the client.
            for n in flight.drain(into=ids):
                done += n
                if progress:
                    progress(done, total)
            for sel, rels, values in groups:
                query = _pass_query(p, rels)
                head: list[Any] = [range(len(sel))] if p.label is not None else [_ids(sel[p.anchor], ids)]
                head += [_ids(sel[col], ids) for _, _, col, _ in rels]
                rows = list(zip(*head, *values))
                uids = sel["uid"].tolist() if p.label is not None else None
                # Progress counts nodes and the relationships of the tables (not membership).
                weight = len(rels) + (p.label is not None)
                made = len(rels) + (p.member is not None and p.label is not None)
                for i in range(0, len(rows), BATCH_ROWS):
                    flight.submit(query, params, rows[i:i + BATCH_ROWS],
                                  None if uids is None else uids[i:i + BATCH_ROWS], made, weight)
            ready = _prepare(passes[k + 1], frames, ints) if k + 1 < len(passes) else []
        for n in flight.drain(into=ids):
            done += n
            if progress:
                progress(done, total)


def _prepare(p: _Pass, frames: dict[str, pd.DataFrame], ints: frozenset[str]) -> list[tuple[Any, ...]]:
    """A pass's rows, grouped by which of the optional other ends they have
    (each group gets its own statement): ``(rows, relationships, property
    columns)``; the id columns are added once those ids exist."""
    df = frames[p.table]
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
        values = [column_values(sel[c], c in ints) for _, _, _, props in rels for c in props]
        if p.label is not None:
            values += [column_values(sel[c], c in ints) for c in ["uid", *p.cols]]
        groups.append((sel, rels, values))
    return groups


def _pass_query(p: _Pass, rels: list[tuple[str, bool, str, list[str]]]) -> str:
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
        self.pending: list[tuple[Future[Result], list[Any], list[Any] | None, int, int]] = []

    def __enter__(self) -> _InFlight:
        return self

    def __exit__(self, *exc: object) -> None:
        # Never leave a batch running behind the caller's back (it would
        # land after the cleanup that deletes the load).
        self.pool.shutdown(wait=True, cancel_futures=True)

    def submit(self, query: str, params: dict[str, Any], rows: list[Any], uids: list[Any] | None,
               rels: int, weight: int) -> None:
        """Run ``query`` on ``rows``; ``uids`` name the nodes it creates (one
        id comes back per row), ``rels`` relationships are made per row."""
        args = dict(params, rows=rows)
        used = {k: v for k, v in args.items() if f"${k}" in query}
        self.pending.append((self.pool.submit(_run_rows, self.run, query, used), rows, uids, rels, weight))

    def drain(self, *, into: dict[Any, int]) -> Iterator[int]:
        """Wait for every batch, oldest first, recording created ids in
        ``into`` and yielding each batch's progress weight."""
        while self.pending:
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
            made_rels = int(res.stats.get("relationships_created") or 0)
            if made_rels != len(rows) * rels:
                raise DatabaseError(f"FalkorDB created {made_rels} of {len(rows) * rels} relationships in a batch")
            yield len(rows) * weight


def _ids(uids: pd.Series, ids: dict[Any, int]) -> list[int]:
    """The node ids of a uid column (every uid must have been created)."""
    return list(map(ids.__getitem__, uids.tolist()))
