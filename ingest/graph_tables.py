"""What a stored trace looks like: which frame columns become which nodes,
relationships and properties, and how values become property values.

Both loaders (the key-matching one for Neo4j in :mod:`store`, the by-id one
for FalkorDB in :mod:`load_falkor`) write exactly these tables, so the two
engines hold the same graph.
"""

from __future__ import annotations

import math

import pandas as pd

from tracegraph.ingest.frames import TraceFrames
from tracegraph.ingest.observed_path import PATH_COLUMNS

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
                   "chain_len", "lc_step", "inputs", "thread", "category", *PATH_COLUMNS]),
    ("Kernel", "kernels", ["name", "op_name", "stream_name", "device_name", "start_us", "end_us", "dur_us", "kind",
                           "bytes", "direction", "gap_after_us", "exposed_us", *PATH_COLUMNS]),
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
    ("PARENT_OF", "Op", "Op", "ops", "parent", "uid", []),
    ("ISSUED", "Op", "Kernel", "kernels", "launch", "uid", []),
    ("WAITED_FOR", "Op", "Kernel", "host_waits", "dst", "src", []),
    ("WAITED_FOR", "Kernel", "Kernel", "stream_waits", "dst", "src", []),
    ("OBSERVED_NEXT", "Op", "Op", "observed_next_oo", "src", "dst", ["step"]),
    ("OBSERVED_NEXT", "Op", "Kernel", "observed_next_ok", "src", "dst", ["step"]),
    ("OBSERVED_NEXT", "Kernel", "Op", "observed_next_ko", "src", "dst", ["step"]),
    ("OBSERVED_NEXT", "Kernel", "Kernel", "observed_next_kk", "src", "dst", ["step"]),
]
MEMBERSHIP = [("HAS_OP", "Op"), ("HAS_DEVICE", "Device"), ("HAS_ALLOCATOR", "Allocator")]


def tables(tf: TraceFrames) -> dict[str, pd.DataFrame]:
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
    syncs = tf.syncs
    nxt = getattr(tf, "observed_next", None)
    if nxt is None:
        nxt = pd.DataFrame(columns=["src", "dst", "step", "src_label", "dst_label"])
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
        "host_waits": syncs[syncs["kind"] == "host_wait"],
        "stream_waits": syncs[syncs["kind"] == "stream_wait"],
        **{f"observed_next_{a[0].lower()}{b[0].lower()}": nxt[(nxt["src_label"] == a) & (nxt["dst_label"] == b)]
           for a in ("Op", "Kernel") for b in ("Op", "Kernel")},
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


def node_tables(tables):
    for label, attr, cols in NODE_TABLES:
        yield label, tables[attr], cols


def rel_tables(tables):
    for rel, a, b, attr, src, dst, props in REL_TABLES:
        df = tables[attr]
        df = df[df[src].notna() & df[dst].notna()]
        yield (rel, a, b, src, dst, props), df, props



def missing(v) -> bool:
    if v is None:
        return True
    if isinstance(v, float) and math.isnan(v):
        return True
    return v is pd.NA or v is pd.NaT


# Counts and sizes are integers even where pandas widened them to float
# because the column also holds nulls.
INT_COLUMNS = {"seq", "bytes", "requested_bytes", "output_index", "input_index", "cp_step", "lc_step",
               "chain_len", "peak_bytes", "step"}


def plain(key: str, v):
    """numpy scalars to Python; integer columns back to int."""
    if hasattr(v, "item") and not isinstance(v, (str, bytes, list)):
        v = v.item()
    if key in INT_COLUMNS and isinstance(v, float) and v.is_integer():
        return int(v)
    return v
