"""The enriched columns as the tables a loader writes: nodes, relationships
and properties as :mod:`schema` declares them.

:func:`trace_tables` turns an enriched
:class:`~tracegraph.ingest.columnar.ColumnarTrace` into the
engine-neutral :class:`~tracegraph.db.base.TraceTables` every engine's
loader writes, so all engines hold the same graph: the names the store
copies onto nodes (a kernel's op, stream and device names...) taken by
position, relationship ends as row positions.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import numpy as np

from tracegraph import schema
from tracegraph.columns import I64, Column, Lists, Strings, Table, Texts, distinct, take, values
from tracegraph.db.base import SCHEMA_VERSION, NodeTable, RelTable, TraceTables
from tracegraph.db.values import missing
from tracegraph.ingest.columnar import ColumnarTrace, executed, num, refs

# The tables of a job's part that crosses ranks (written once, by the job):
# OpTotals, the Collective and Rank nodes, JOINS and OBSERVED_NEXT.
JOB_TABLES = frozenset({"op_totals", "collectives", "ranks"})
JOB_RELATIONSHIPS = frozenset({"JOINS", "OBSERVED_NEXT"})


def trace_tables(ct: ColumnarTrace, props: dict[str, Any], *, rank_part: bool = False) -> TraceTables:
    """The enriched columns as node and relationship tables, plus the
    Trace node's properties (``props``: enrichment's). A ``rank_part`` is
    one rank of a job written rank by rank: without the tables the job
    writes (:data:`JOB_TABLES`, :data:`JOB_RELATIONSHIPS`)."""
    frames = _frames(ct)
    nodes = [
        NodeTable(t.label, t.name, complete_node(frames[t.name], t), tuple(t.properties()))
        for t in schema.NODE_TABLES
        if t.label is not None and not (rank_part and t.name in JOB_TABLES)
    ]
    rels = [
        RelTable(r.type, r.start, r.end, r.table, frames[r.table], r.src, r.dst, r.properties)
        for r in schema.RELATIONSHIPS
        if not (rank_part and r.type in JOB_RELATIONSHIPS)
    ]
    counts: dict[str, dict[str, int]] = {"nodes": {t.label: t.frame.n for t in nodes}, "relationships": {}}
    for r in rels:
        counts["relationships"][r.type] = counts["relationships"].get(r.type, 0) + r.count()
    for rel, label in schema.MEMBERSHIP:
        if label in counts["nodes"]:
            counts["relationships"][rel] = counts["nodes"][label]
    return TraceTables(
        trace_props=trace_props(ct, props, counts),
        nodes=nodes,
        rels=rels,
        membership=list(schema.MEMBERSHIP),
        int_columns=schema.int_columns(),
        bool_columns=bool_columns(),
    )


def bool_columns() -> frozenset[str]:
    """Every column declared ``bool``: booleans even where kept as floats (a column with nulls)."""
    return frozenset(c.name for t in schema.TABLES for c in t.columns if c.type in ("bool", "list[bool]"))


def complete_node(frame: Table, t: schema.Table) -> Table:
    """``frame`` with every column the node table stores (absent: no value)."""
    for c in ["uid", *t.properties()]:
        if c not in frame:
            frame[c] = np.full(frame.n, np.nan)
    return frame


def _names(ct: ColumnarTrace, table: str, positions: np.ndarray) -> Column:
    """The ``name`` of rows ``positions`` (-1: none) of ``table``."""
    col = ct[table]["name"]
    pos = np.asarray(positions, dtype=np.int64)
    if isinstance(col, Strings):
        return col.take(pos)
    names = values(col)
    return Strings.of([names[p] if p >= 0 else None for p in pos.tolist()])


# The names the store copies onto nodes: (table, column, the table it names a row of, the column naming it).
STORED_NAMES = (
    ("streams", "device_name", "devices", "device"),
    ("allocators", "device_name", "devices", "device"),
    ("ops", "device_name", "devices", "device"),
    ("kernels", "op_name", "ops", "op"),
    ("kernels", "stream_name", "streams", "stream"),
    ("tensors", "producer_name", "ops", "producer"),
    ("allocations", "allocator_name", "allocators", "allocator"),
    ("allocations", "op_name", "ops", "op"),
    ("allocations", "tensor_name", "tensors", "tensor"),
)


def _frames(ct: ColumnarTrace) -> dict[str, Table]:
    """The tables with the denormalized columns the nodes store."""
    ops, kernels, tensors = ct["ops"], ct["kernels"], ct["tensors"]
    streams, allocators, allocations, devices = ct["streams"], ct["allocators"], ct["allocations"], ct["devices"]
    stream_device = refs(streams["device"])
    device_rank = num(devices["rank"]) if "rank" in devices else np.full(devices.n, np.nan)
    kernel_device = stream_device[refs(kernels["stream"])] if kernels.n else np.zeros(0, np.int64)
    streams["rank"] = device_rank[stream_device] if streams.n else np.zeros(0)
    kernels["rank"] = device_rank[kernel_device] if kernels.n else np.zeros(0)
    kernels["device_name"] = _names(ct, "devices", kernel_device)
    for table, column, named, ref in STORED_NAMES:
        t = ct[table]
        t[column] = _names(ct, named, refs(t[ref]))
    joins = ct.tables.get("joins") or _no_rows(("op", "kernel", "collective", "rank"), ("wait_us",))
    deps, syncs = ct["deps"], ct["syncs"]
    dep_kind = values(deps["kind"])
    sync_kind = values(syncs["kind"])
    nxt = ct.tables.get("observed_next") or _no_rows(("src", "dst", "step"), (), ("src_label", "dst_label"))
    src_label, dst_label = values(nxt["src_label"]), values(nxt["dst_label"])
    out = {
        "op_totals": op_totals(ct),
        "devices": devices,
        "streams": streams,
        "allocators": allocators,
        "ops": ops,
        "kernels": kernels,
        "tensors": tensors,
        "allocations": allocations,
        "timelines": timelines(allocators),
        "collectives": ct.tables.get("collectives") or _empty("collectives"),
        "ranks": ct.tables.get("ranks") or _empty("ranks"),
        "steps": ct.tables.get("steps") or _empty("steps"),
        # one table per JOINS start label: a relationship table is one frame
        "op_joins": joins.where(refs(joins["op"]) >= 0),
        "kernel_joins": joins.where(refs(joins["kernel"]) >= 0),
        "consumes": ct["consumes"],
        "data_deps": deps.where(np.asarray([k == "data" for k in dep_kind], dtype=bool)),
        "control_deps": deps.where(np.asarray([k == "control" for k in dep_kind], dtype=bool)),
        "host_waits": syncs.where(np.asarray([k == "host_wait" for k in sync_kind], dtype=bool)),
        "stream_waits": syncs.where(np.asarray([k == "stream_wait" for k in sync_kind], dtype=bool)),
    }
    for a in ("Op", "Kernel"):
        for b in ("Op", "Kernel"):
            sel = np.asarray([x == a and y == b for x, y in zip(src_label, dst_label)], dtype=bool)
            out[schema.observed_next_table(a, b)] = nxt.where(sel)
    return out


def _empty(name: str) -> Table:
    t = Table(0)
    for c in schema.TABLE[name].columns:
        t[c.name] = Texts.of([]) if c.name == "uid" else np.zeros(0)
    return t


def _no_rows(positions: tuple[str, ...], floats: tuple[str, ...] = (), strings: tuple[str, ...] = ()) -> Table:
    """A table of no rows: node positions, numbers and strings."""
    t = Table(0)
    for c in positions:
        t[c] = np.zeros(0, dtype=np.int64)
    for c in floats:
        t[c] = np.zeros(0)
    for c in strings:
        t[c] = Strings(np.zeros(0, dtype=np.int32), ())
    return t


def op_totals(ct: ColumnarTrace) -> Table:
    """One OpTotals row: per (name, type) of the executed ops, their summed
    weight and number of runs, as parallel lists sorted by (name, type).

    Cross-trace analyses compare traces through this node alone, so that an
    engine which keeps every trace in a graph of its own can still answer
    them from the small per-trace nodes it keeps side by side.
    """
    return totals_table(totals(ct))


def totals(
    ct: ColumnarTrace, into: dict[tuple[str, str], list[float]] | None = None
) -> dict[tuple[str, str], list[float]]:
    """Per (name, type) of the executed ops (type "" where none): their
    summed weight and how many ran, added to ``into``. A job's ranks are
    summed one by one in rank order (each in its rows' order), so that a
    job written rank by rank (:mod:`.job`) adds up the same floats."""
    ops = ct["ops"]
    weight = num(ops["weight_us"]) if "weight_us" in ops else np.zeros(ops.n)
    out = {} if into is None else into
    ran = executed(ct)
    code, keys = _name_type_codes(ops["name"], ops["type"])
    rank = num(ops["rank"]) if "rank" in ops else np.full(ops.n, np.nan)
    by_rank = np.where(np.isnan(rank), -1, rank).astype(np.int64)
    for r in np.unique(by_rank).tolist():
        rows = np.flatnonzero(by_rank == r)
        _group_totals(code[rows], keys, weight[rows], ran[rows], out)
    return out


def _name_type_codes(names: Column, types: Column) -> tuple[I64, list[tuple[str, str]]]:
    """Each op's (name, type) key as a code into the keys (type "" where
    none; a name as its text): from the columns' dictionary codes when they
    are :class:`Strings` (no Python value per op), else value by value."""
    if isinstance(names, Strings) and isinstance(types, Strings):
        m = len(types.values) + 1
        pair = names.codes.astype(np.int64) * m + (types.codes.astype(np.int64) + 1)
        present, inverse = distinct(pair)
        name_text = [str(v) for v in names.values]
        type_text = ["", *(str(v) for v in types.values)]
        index: dict[tuple[str, str], int] = {}
        # (a name code of -1, no name, reads "None" as str(None) did; two codes of one text are one key)
        remap = np.asarray(
            [
                index.setdefault((name_text[p // m] if p >= 0 else "None", type_text[p % m]), len(index))
                for p in present.tolist()
            ],
            dtype=np.int64,
        )
        return remap[inverse.reshape(-1)], list(index)
    keys = [(str(n), "" if t is None else str(t)) for n, t in zip(values(names), values(types))]
    index = {}
    code = np.fromiter((index.setdefault(k, len(index)) for k in keys), dtype=np.int64, count=len(keys))
    return code, list(index)


def _group_totals(
    code: I64,
    keys: list[tuple[str, str]],
    weight: np.ndarray,
    ran: np.ndarray,
    totals: dict[tuple[str, str], list[float]],
) -> dict[tuple[str, str], list[float]]:
    """Sums and counts per (name, type) key (``code``: each op's key), the
    weights added in the ops' order."""
    if not len(code):
        return totals
    sel = np.asarray(ran, dtype=bool)
    sums = np.bincount(code[sel], weights=np.nan_to_num(weight[sel]), minlength=len(keys))
    runs = np.bincount(code[sel], minlength=len(keys))
    for i in np.flatnonzero(runs).tolist():
        k = keys[i]
        prev = totals.get(k)
        totals[k] = [float(sums[i]) + (prev[0] if prev else 0.0), float(runs[i]) + (prev[1] if prev else 0.0)]
    return totals


def totals_table(sums: dict[tuple[str, str], list[float]]) -> Table:
    """The OpTotals row of :func:`totals`: parallel lists sorted by (name, type)."""
    totals = sums
    keys = sorted(totals)
    t = Table(1)
    t["uid"] = Texts.of(["optotals"])
    t["ops"] = Lists.of([[k[0] for k in keys]], str)
    t["types"] = Lists.of([[k[1] for k in keys]], str)
    t["weights_us"] = Lists.of([[totals[k][0] for k in keys]], float)
    t["runs"] = Lists.of([[int(totals[k][1]) for k in keys]], int)
    return t


def timelines(allocators: Table) -> Table:
    """One MemoryTimeline row per allocator that has a timeline."""
    tl = allocators.get("timeline_us")
    rows = np.flatnonzero(tl.present()) if isinstance(tl, Lists) else np.zeros(0, dtype=np.int64)
    t = Table(len(rows))
    t["uid"] = Texts.of(["timeline:" + str(u) for u in values(take(allocators["uid"], rows))])
    t["allocator"] = rows.astype(np.int64)
    t["allocator_name"] = take(allocators["name"], rows)
    if isinstance(tl, Lists):
        lengths = np.diff(tl.offsets)[rows]
        t["points"] = lengths.astype(np.int64)
        t["t_us"] = take(tl, rows)
        t["live_bytes"] = take(allocators["timeline_bytes"], rows)
    else:
        t["points"] = np.zeros(0, dtype=np.int64)
        t["t_us"] = Lists.of([], float)
        t["live_bytes"] = Lists.of([], int)
    return t


def counts_props(counts: dict[str, dict[str, int]]) -> dict[str, Any]:
    """The Trace's properties about what is stored: layout version, time,
    counts (labels and types in :mod:`schema`'s order)."""
    labels = [t.label for t in schema.NODE_TABLES]
    types = list(dict.fromkeys([r.type for r in schema.RELATIONSHIPS] + [rel for rel, _ in schema.MEMBERSHIP]))
    counts = {
        "nodes": {k: counts["nodes"][k] for k in labels if k in counts["nodes"]},
        "relationships": {k: counts["relationships"][k] for k in types if k in counts["relationships"]},
    }
    return {
        "schema_version": SCHEMA_VERSION,
        "ingested_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "node_count": sum(counts["nodes"].values()) + 1,
        "relationship_count": sum(counts["relationships"].values()),
        "counts": json.dumps(counts),
    }


def trace_props(ct: ColumnarTrace, props: dict[str, Any], counts: dict[str, dict[str, int]]) -> dict[str, Any]:
    out = {k: v for k, v in props.items() if not missing(v)}
    out.update(counts_props(counts))
    for k, v in ct.meta.items():
        if isinstance(v, float) and v.is_integer() and abs(v) < 2**63:
            v = int(v)  # FalkorDB answers floats with 15 significant digits: whole numbers stay exact as ints
        if isinstance(v, (str, int, float, bool)):
            out[f"meta_{k}"] = v
    return out
