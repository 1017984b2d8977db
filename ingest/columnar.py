"""A trace as columns (:class:`ColumnarTrace`): the canonical frames of
:mod:`.frames` in :mod:`tracegraph.columns` form, the form enrichment and
the loaders work on.

The same tables and columns as :mod:`tracegraph.schema` declares, with
two differences that make the passes vectorizable: a column that names a
row of another table by uid (an op's ``parent``, a kernel's ``stream``)
holds that row's position (-1: none; :data:`REFERENCES` says which table,
a sync's ``dst`` is an op for ``host_wait`` and a kernel for
``stream_wait``), and strings are dictionary codes or text buffers.

:func:`from_frames` and :func:`to_frames` convert from and to the pandas
frames parsers of the other formats build and tests read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from tracegraph import schema
from tracegraph.columns import Column, Lists, Strings, Table, Texts, values

if TYPE_CHECKING:
    import pandas as pd

    from tracegraph.ingest.frames import TraceFrames

# Table -> {column: the table whose row it names}.
REFERENCES: dict[str, dict[str, str]] = {
    "ops": {"parent": "ops", "device": "devices"},
    "kernels": {"op": "ops", "stream": "streams", "launch": "ops"},
    "streams": {"device": "devices"},
    "allocators": {"device": "devices"},
    "allocations": {"allocator": "allocators", "op": "ops", "tensor": "tensors"},
    "tensors": {"producer": "ops"},
    "consumes": {"op": "ops", "tensor": "tensors"},
    "deps": {"src": "ops", "dst": "ops"},
    "syncs": {"src": "kernels"},  # dst: see SYNC_DST
}
# A sync's dst by its kind.
SYNC_DST = {"host_wait": "ops", "stream_wait": "kernels"}
# The tables a parser fills, in :mod:`schema` order.
PARSED = ("devices", "streams", "allocators", "ops", "kernels", "tensors", "allocations", "consumes", "deps", "syncs")
# Columns that are strings (schema types str and json).
_TEXT_TYPES = ("str", "json")


@dataclass
class ColumnarTrace:
    """One trace's tables as columns (see the module docstring)."""

    framework: str
    sources: list[str]
    time_unit: str = "us"
    tables: dict[str, Table] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Table:
        """Table ``name`` (a parser's table the trace has no rows of: empty)."""
        if name not in self.tables and name in PARSED:
            self.tables[name] = empty_table(name)
        return self.tables[name]


def empty_table(name: str) -> Table:
    """A table of no rows with every parser column."""
    t = Table(0)
    for c in schema.TABLE[name].columns:
        if c.by != schema.PARSER:
            continue
        t[c.name] = _empty(name, c)
    return t


def complete(ct: ColumnarTrace) -> ColumnarTrace:
    """Every parser table of ``ct`` with every parser column (a column a
    format does not fill: no value in any row)."""
    for name in PARSED:
        t = ct[name]
        for c in schema.TABLE[name].columns:
            if c.by == schema.PARSER and c.name not in t:
                t[c.name] = _none(name, c, t.n)
    return ct


def _none(table: str, c: schema.Column, n: int) -> Column:
    """A column of ``n`` rows without a value."""
    if c.name in REFERENCES.get(table, {}) or (table == "syncs" and c.name == "dst"):
        return np.full(n, -1, dtype=np.int64)
    if c.name == "uid" or c.type == "json":
        return Texts(np.zeros(0, dtype=np.uint8), np.zeros(n + 1, dtype=np.int64), np.ones(n, dtype=bool))
    if c.type == "str":
        return Strings(np.full(n, -1, dtype=np.int32), ())
    return np.full(n, np.nan)


def _empty(table: str, c: schema.Column) -> Column:
    if c.name in REFERENCES.get(table, {}) or (table == "syncs" and c.name == "dst"):
        return np.zeros(0, dtype=np.int64)
    if c.name == "uid" or c.type == "json":
        return Texts.of([])
    if c.type == "str":
        return Strings(np.zeros(0, dtype=np.int32), ())
    if c.type.startswith("list["):
        return Lists.of([], str if c.type == "list[str]" else float)
    return np.zeros(0, dtype=np.float64)


def _refs(table: str, name: str, column: Column, uids: dict[str, list[Any]], kinds: list[Any] | None) -> list[Any]:
    rows = np.asarray(column, dtype=np.int64)
    if table == "syncs" and name == "dst":
        assert kinds is not None
        return [None if r < 0 else uids[SYNC_DST[k]][r] for r, k in zip(rows.tolist(), kinds)]
    target = uids[REFERENCES[table][name]]
    return [None if r < 0 else target[r] for r in rows.tolist()]


def to_frames(ct: ColumnarTrace) -> TraceFrames:
    """The pandas frames of :mod:`.frames` (uids for references)."""
    import pandas as pd

    from tracegraph.ingest.frames import TraceFrames, empty

    uids = {name: (values(t["uid"]) if "uid" in t else []) for name, t in ct.tables.items()}
    frames: dict[str, pd.DataFrame] = {}
    for name in PARSED:
        cols = schema.TABLE[name].names(schema.PARSER)
        t = ct.tables.get(name)
        if t is None or t.n == 0:
            frames[name] = empty(cols)
            continue
        kinds = values(t["kind"]) if name == "syncs" else None
        data: dict[str, Any] = {}
        for c in cols:
            col = t.get(c)
            if col is None:
                data[c] = [None] * t.n
            elif c in REFERENCES.get(name, {}) or (name == "syncs" and c == "dst"):
                data[c] = _refs(name, c, col, uids, kinds)
            else:
                data[c] = values(col) if not isinstance(col, np.ndarray) or col.dtype.kind == "f" else col
        frames[name] = pd.DataFrame(data, columns=cols)
    for name in ("ops", "kernels"):
        times = ["start_us", "end_us", "dur_us"]
        frames[name][times] = frames[name][times].astype("float64")
    return TraceFrames(ct.framework, list(ct.sources), ct.time_unit, meta=dict(ct.meta), **frames)


def num(column: Any) -> npt.NDArray[np.float64]:
    """A numeric column as float64 (NaN: no value)."""
    return np.asarray(column, dtype=np.float64)


def flags(column: Any, default: bool) -> npt.NDArray[np.bool_]:
    """A boolean column (NaN: ``default``)."""
    a = np.asarray(column)
    if a.dtype.kind == "b":
        return a
    f = a.astype(np.float64)
    return np.where(np.isnan(f), default, f != 0)


def codes_of(column: Any, value: str) -> npt.NDArray[np.bool_]:
    """Rows of a string column equal to ``value``."""
    if isinstance(column, Strings):
        if value not in column.values:
            return np.zeros(len(column), dtype=bool)
        same: npt.NDArray[np.bool_] = np.asarray(column.codes) == column.values.index(value)
        return same
    return np.asarray([v == value for v in values(column)], dtype=bool)


def executed(ct: ColumnarTrace) -> npt.NDArray[np.bool_]:
    return flags(ct["ops"]["executed"], True)


def refs(column: Any) -> npt.NDArray[np.int64]:
    return np.asarray(column, dtype=np.int64)


def from_frames(tf: TraceFrames) -> ColumnarTrace:
    """The frames as columns (references by uid become row positions)."""
    import pandas as pd

    uid_index = {
        name: pd.Index(getattr(tf, name)["uid"].to_numpy(dtype=object)) for name in PARSED if "uid" in getattr(tf, name)
    }
    tables: dict[str, Table] = {}
    for name in PARSED:
        df = getattr(tf, name)
        t = Table(len(df))
        for c in schema.TABLE[name].columns:
            if c.by != schema.PARSER or c.name not in df:
                continue
            s = df[c.name]
            if c.name in REFERENCES.get(name, {}):
                t[c.name] = _positions(uid_index[REFERENCES[name][c.name]], s)
            elif name == "syncs" and c.name == "dst":
                pos = np.full(len(df), -1, dtype=np.int64)
                kind = df["kind"].to_numpy(dtype=object)
                for k, target in SYNC_DST.items():
                    sel = kind == k
                    pos[sel] = _positions(uid_index[target], s[sel])
                t[c.name] = pos
            elif c.name == "uid" or c.type == "json":
                t[c.name] = Texts.of([None if _missing(v) else str(v) for v in s.tolist()])
            elif c.type == "str":
                codes, uniques = pd.factorize(s, use_na_sentinel=True)
                t[c.name] = Strings(codes.astype(np.int32), tuple(str(u) for u in uniques))
            else:
                t[c.name] = _numbers(s)
        tables[name] = t
    return ColumnarTrace(tf.framework, list(tf.sources), tf.time_unit, tables, dict(tf.meta))


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and v != v)


def _positions(index: Any, s: Any) -> npt.NDArray[np.int64]:
    vals = s.to_numpy(dtype=object)
    present = np.asarray([not _missing(v) for v in vals], dtype=bool)
    out = np.full(len(vals), -1, dtype=np.int64)
    if present.any():
        out[present] = index.get_indexer(vals[present])
    return out


def _numbers(s: Any) -> npt.NDArray[np.float64]:
    """A numeric or boolean frame column as float64 (NaN: no value)."""
    import pandas as pd

    if s.dtype.kind in "fiub":
        out: npt.NDArray[np.float64] = s.to_numpy(dtype=np.float64)
        return out
    vals = [np.nan if _missing(v) else (1.0 if v is True else 0.0 if v is False else v) for v in s.tolist()]
    return pd.to_numeric(pd.Series(vals, dtype=object), errors="coerce").to_numpy(dtype=np.float64)


def write_back(ct: ColumnarTrace, tf: TraceFrames) -> None:
    """Enrichment's columns of ``ct`` into ``tf``'s frames (uids for references),
    and its tables (collectives, joins, ranks, observed_next)."""
    import pandas as pd

    uids: dict[str, list[Any]] = {}
    for name in ("ops", "kernels", "tensors", "streams", "allocators"):
        uids[name] = values(ct[name]["uid"])
    enrich_refs: dict[str, dict[str, str]] = {
        "ops": {"cp_pred": "ops", "chain_pred": "ops"},
        "kernels": {"next_kernel": "kernels"},
    }
    for name in ("ops", "kernels", "tensors", "streams", "allocators"):
        df = getattr(tf, name)
        t = ct[name]
        for c in schema.TABLE[name].columns:
            if c.by != schema.ENRICH or c.name not in t:
                continue
            col = t[c.name]
            ref = enrich_refs.get(name, {}).get(c.name)
            if ref is not None:
                df[c.name] = [None if r < 0 else uids[ref][r] for r in np.asarray(col).tolist()]
            elif isinstance(col, np.ndarray) and col.dtype.kind == "f" and c.type in ("int", "bool"):
                df[c.name] = [None if v != v else (int(v) if c.type == "int" else bool(v)) for v in col.tolist()]
            else:
                df[c.name] = values(col) if not isinstance(col, np.ndarray) or col.dtype.kind == "f" else col
    coll = ct.tables.get("collectives")
    if coll is not None:
        tf.collectives = pd.DataFrame({c: values(coll[c]) for c in coll}, columns=list(coll))
        j = ct["joins"]
        coll_uids = values(coll["uid"])
        tf.joins = pd.DataFrame(
            {
                "op": [None if r < 0 else uids["ops"][r] for r in np.asarray(j["op"]).tolist()],
                "kernel": [None if r < 0 else uids["kernels"][r] for r in np.asarray(j["kernel"]).tolist()],
                "collective": [coll_uids[r] for r in np.asarray(j["collective"]).tolist()],
                "rank": np.asarray(j["rank"]),
                "wait_us": np.asarray(j["wait_us"]),
            },
            columns=["op", "kernel", "collective", "rank", "wait_us"],
        )
    ranks = ct.tables.get("ranks")
    if ranks is not None:
        tf.ranks = pd.DataFrame({c: values(ranks[c]) for c in ranks}, columns=schema.TABLE["ranks"].names())
    nxt = ct.tables.get("observed_next")
    if nxt is not None:
        src_l, dst_l = values(nxt["src_label"]), values(nxt["dst_label"])
        table = {"Op": "ops", "Kernel": "kernels"}
        tf.observed_next = pd.DataFrame.from_records(
            [
                (uids[table[a]][s], uids[table[b]][d], st, a, b)
                for s, d, st, a, b in zip(
                    np.asarray(nxt["src"]).tolist(),
                    np.asarray(nxt["dst"]).tolist(),
                    np.asarray(nxt["step"]).tolist(),
                    src_l,
                    dst_l,
                )
            ],
            columns=["src", "dst", "step", "src_label", "dst_label"],
        )
