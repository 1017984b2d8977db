"""The enriched frames as the tables a loader writes: nodes, relationships
and properties as :mod:`schema` declares them.

:func:`trace_tables` turns an enriched :class:`TraceFrames` into the
engine-neutral :class:`~tracegraph.db.base.TraceTables` every engine's
loader writes, so all engines hold the same graph.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pandas as pd

from tracegraph import schema
from tracegraph.db.base import SCHEMA_VERSION, NodeTable, RelTable, TraceTables
from tracegraph.db.values import missing
from tracegraph.ingest.enrich import Summary
from tracegraph.ingest.frames import TraceFrames, empty


def trace_tables(tf: TraceFrames, summary: Summary) -> TraceTables:
    """The enriched frames as node and relationship tables, plus the Trace node's properties."""
    frames = _frames(tf)
    nodes = [
        NodeTable(t.label, t.name, frames[t.name], tuple(t.properties()))
        for t in schema.NODE_TABLES
        if t.label is not None  # always: NODE_TABLES are the tables with a label
    ]
    rels = []
    for r in schema.RELATIONSHIPS:
        df = frames[r.table]
        df = df[df[r.src].notna() & df[r.dst].notna()]
        rels.append(RelTable(r.type, r.start, r.end, r.table, df, r.src, r.dst, r.properties))
    counts = {"nodes": {t.label: len(t.frame) for t in nodes}, "relationships": {}}
    for t in rels:
        counts["relationships"][t.type] = counts["relationships"].get(t.type, 0) + len(t.frame)
    for rel, label in schema.MEMBERSHIP:
        counts["relationships"][rel] = counts["nodes"][label]
    props = _trace_props(tf, summary, counts)
    return TraceTables(
        trace_props=props, nodes=nodes, rels=rels, membership=list(schema.MEMBERSHIP), int_columns=schema.int_columns()
    )


def _frames(tf: TraceFrames) -> dict[str, pd.DataFrame]:
    """The frames with the denormalized name columns the nodes store."""
    name_of: dict[Any, Any] = {}
    for df in (tf.ops, tf.tensors, tf.devices, tf.streams, tf.allocators):
        name_of.update(zip(df["uid"].tolist(), df["name"].tolist()))
    device_of = dict(zip(tf.streams["uid"].tolist(), tf.streams["device"].tolist()))
    device_rank = pd.Series(tf.devices["rank"].to_numpy(), index=tf.devices["uid"].to_numpy(dtype=object))

    def names(col: pd.Series, via: dict[Any, Any] | None = None) -> pd.Series:
        # dict lookups (Series.map(dict) builds an index of the dict first)
        keys = col.tolist() if via is None else list(map(via.get, col.tolist()))
        return pd.Series(list(map(name_of.get, keys)), index=col.index, dtype=object)

    deps = tf.deps
    syncs = tf.syncs
    nxt = tf.observed_next
    joins = tf.joins if tf.joins is not None else empty(schema.TABLE["joins"].names())
    if nxt is None:
        nxt = pd.DataFrame(columns=["src", "dst", "step", "src_label", "dst_label"])
    return {
        "op_totals": _op_totals(tf.ops),
        "devices": tf.devices,
        "streams": tf.streams.assign(
            device_name=names(tf.streams["device"]), rank=tf.streams["device"].map(device_rank).to_numpy()
        ),
        "allocators": tf.allocators.assign(device_name=names(tf.allocators["device"])),
        "ops": tf.ops.assign(device_name=names(tf.ops["device"])),
        "kernels": tf.kernels.assign(
            op_name=names(tf.kernels["op"]),
            stream_name=names(tf.kernels["stream"]),
            device_name=names(tf.kernels["stream"], device_of),
            rank=tf.kernels["stream"].map(device_of).map(device_rank).to_numpy(),
        ),
        "tensors": tf.tensors.assign(producer_name=names(tf.tensors["producer"])),
        "allocations": tf.allocations.assign(
            allocator_name=names(tf.allocations["allocator"]),
            op_name=names(tf.allocations["op"]),
            tensor_name=names(tf.allocations["tensor"]),
        ),
        "timelines": _timelines(tf.allocators),
        "collectives": tf.collectives if tf.collectives is not None else empty(schema.TABLE["collectives"].names()),
        "ranks": tf.ranks if tf.ranks is not None else empty(schema.TABLE["ranks"].names()),
        # one table per JOINS start label: a relationship table is one frame
        "op_joins": joins[joins["op"].notna()],
        "kernel_joins": joins[joins["kernel"].notna()],
        "consumes": tf.consumes,
        "data_deps": deps[deps["kind"] == "data"],
        "control_deps": deps[deps["kind"] == "control"],
        "host_waits": syncs[syncs["kind"] == "host_wait"],
        "stream_waits": syncs[syncs["kind"] == "stream_wait"],
        **{
            schema.observed_next_table(a, b): nxt[(nxt["src_label"] == a) & (nxt["dst_label"] == b)]
            for a in ("Op", "Kernel")
            for b in ("Op", "Kernel")
        },
    }


def _op_totals(ops: pd.DataFrame) -> pd.DataFrame:
    """One OpTotals row: per (name, type) of the executed ops, their summed
    weight and number of runs, as parallel lists sorted by (name, type).

    Cross-trace analyses compare traces through this node alone, so that an
    engine which keeps every trace in a graph of its own can still answer
    them from the small per-trace nodes it keeps side by side.
    """
    executed = ops[ops["executed"].fillna(True).astype(bool)]
    grouped = (
        executed.assign(type=executed["type"].fillna(""))
        .groupby(["name", "type"], sort=True)["weight_us"]
        .agg(["sum", "size"])
        .reset_index()
    )
    return pd.DataFrame(
        {
            "uid": ["optotals"],
            "ops": [grouped["name"].astype(str).tolist()],
            "types": [grouped["type"].astype(str).tolist()],
            "weights_us": [grouped["sum"].astype(float).tolist()],
            "runs": [grouped["size"].astype(int).tolist()],
        }
    )


def _timelines(allocators: pd.DataFrame) -> pd.DataFrame:
    """One MemoryTimeline row per allocator that has a timeline."""
    al = allocators[allocators["timeline_us"].notna()] if "timeline_us" in allocators else allocators.iloc[:0]
    return pd.DataFrame(
        {
            "uid": ("timeline:" + al["uid"].astype(str)).tolist(),
            "allocator": al["uid"].tolist(),
            "allocator_name": al["name"].tolist(),
            "points": [len(t) for t in al.get("timeline_us", [])],
            "t_us": al.get("timeline_us", pd.Series(dtype=object)).tolist(),
            "live_bytes": al.get("timeline_bytes", pd.Series(dtype=object)).tolist(),
        },
        columns=["uid", "allocator", "allocator_name", "points", "t_us", "live_bytes"],
    )


def _trace_props(tf: TraceFrames, summary: Summary, counts: dict[str, dict[str, int]]) -> dict[str, Any]:
    props = {k: v for k, v in summary.props.items() if not missing(v)}
    props["schema_version"] = SCHEMA_VERSION
    props["ingested_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    props["node_count"] = sum(counts["nodes"].values()) + 1
    props["relationship_count"] = sum(counts["relationships"].values())
    props["counts"] = json.dumps(counts)
    for k, v in tf.meta.items():
        if isinstance(v, float) and v.is_integer() and abs(v) < 2**63:
            v = int(v)  # FalkorDB answers floats with 15 significant digits: whole numbers stay exact as ints
        if isinstance(v, (str, int, float, bool)):
            props[f"meta_{k}"] = v
    return props
