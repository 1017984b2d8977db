"""Column values to property values, the same way for every engine.

A missing value (None, NaN, pandas NA) is a property left out: that is how
both engines spell null. Numpy scalars become Python scalars; integer
columns kept as floats (because they have missing values) become integers
again, so a count is ``3`` on every engine and never ``3.0``. Infinities
are not storable anywhere and count as missing.

The loaders take :class:`tracegraph.columns.Table` frames;
:func:`as_tables` turns pandas frames handed in instead into them.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import Any

import numpy as np
import numpy.typing as npt

from tracegraph.columns import Column, Lists, Strings, Table, Texts
from tracegraph.columns import values as python_values
from tracegraph.db.base import NodeTable, RelTable, TraceTables

_INF = float("inf")
_PLAIN_TYPES = {str, int, bool, type(None)}


def missing(v: Any) -> bool:
    """Is ``v`` a null of any kind (None, NaN, pandas NA/NaT)?"""
    if v is None:
        return True
    if isinstance(v, float) and math.isnan(v):
        return True
    kind = type(v).__name__
    return kind in ("NAType", "NaTType")


def plain(v: Any, integer: bool = False) -> Any:
    """One value as a storable Python value (None when it is not storable)."""
    if missing(v):
        return None
    if hasattr(v, "item") and not isinstance(v, (str, bytes, list)):
        v = v.item()
    if isinstance(v, float):
        if v in (_INF, -_INF) or v != v:
            return None
        if integer and v.is_integer():
            return int(v)
    return v


def column_values(column: Column, integer: bool = False, boolean: bool = False) -> list[Any]:
    """A whole column as storable Python values (see :func:`plain`)."""
    if isinstance(column, (Strings, Texts)):
        return column.tolist()
    if isinstance(column, Lists):
        out = column.tolist()
        if isinstance(column.values, np.ndarray) and column.values.dtype.kind == "f":
            return [None if v is None else [None if not math.isfinite(x) else x for x in v] for v in out]
        return out
    kind = column.dtype.kind
    if kind in "iu":
        ints: list[Any] = column.tolist()
        return [bool(v) for v in ints] if boolean else ints
    if kind == "b":
        return column.tolist()  # type: ignore[no-any-return]
    if kind == "f":
        arr = column.astype(float)
        vals = arr.tolist()
        bad = ~np.isfinite(arr)
        if boolean:
            vals = [bool(v) for v in vals]
        elif integer:
            whole = ~bad & (arr == np.trunc(arr))
            if (np.abs(arr[whole]) >= 2.0**63).any():
                return [plain(v, True) for v in arr.tolist()]
            at = np.flatnonzero(whole)
            for i, v in zip(at.tolist(), arr[at].astype(np.int64).tolist()):
                vals[i] = v
        for i in np.flatnonzero(bad).tolist():
            vals[i] = None
        return vals  # type: ignore[no-any-return]
    vals = column.tolist()
    if set(map(type, vals)) <= _PLAIN_TYPES:
        return vals  # type: ignore[no-any-return]
    return [v if type(v) in _PLAIN_TYPES else plain(v, integer) for v in vals]


def row_dicts(table: Table, columns: Collection[str], int_columns: Collection[str]) -> list[dict[str, Any]]:
    """Rows as ``{column: value}`` without the missing values (see the module docstring)."""
    cols = [c for c in columns if c in table]
    vals = [column_values(table[c], c in int_columns) for c in cols]
    return [{c: v for c, v in zip(cols, row) if v is not None} for row in zip(*vals)]


# --- pandas frames handed in ----------------------------------------------------------------------


def as_tables(tables: TraceTables) -> TraceTables:
    """``tables`` with any pandas frame as a :class:`Table`, relationship
    ends given by uid as row positions."""
    if all(isinstance(t.frame, Table) for t in tables.nodes) and all(isinstance(r.frame, Table) for r in tables.rels):
        return tables
    nodes = [NodeTable(t.label, t.table, _table(t.frame), t.columns) for t in tables.nodes]
    by_table = {t.table: t.frame for t in nodes}
    index: dict[str, dict[Any, int]] = {
        t.label: {u: i for i, u in enumerate(python_values(t.frame["uid"]))} for t in nodes
    }
    rels = []
    for r in tables.rels:
        frame = by_table.get(r.table)
        if frame is None:
            frame = _table(r.frame)
        for end, label in ((r.src, r.start), (r.dst, r.end)):
            col = frame[end]
            if isinstance(col, np.ndarray) and col.dtype.kind in "iu":
                continue  # positions already
            if end == "uid" and r.table in by_table:
                continue  # the node table's own rows
            frame[end] = np.asarray(
                [index[label].get(u, -1) if u is not None else -1 for u in python_values(col)], dtype=np.int64
            )
        rels.append(RelTable(r.type, r.start, r.end, r.table, frame, r.src, r.dst, r.columns))
    return TraceTables(tables.trace_props, nodes, rels, tables.membership, tables.int_columns, tables.bool_columns)


def _table(frame: Any) -> Table:
    if isinstance(frame, Table):
        return frame
    t = Table(len(frame))
    for c in frame.columns:
        t[c] = _column(frame[c])
    return t


def _column(s: Any) -> Column:
    """A pandas column: numbers as float64 (NaN: none), booleans and
    integers without nulls as they are, anything else as Python objects."""
    dtype = s.dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "iub":
        same: npt.NDArray[Any] = s.to_numpy()
        return same
    if isinstance(dtype, np.dtype) and dtype.kind == "f":
        floats: npt.NDArray[np.float64] = s.to_numpy(dtype=np.float64)
        return floats
    vals = [None if missing(v) else v for v in s.astype(object).tolist()]
    out = np.empty(len(vals), dtype=object)
    out[:] = vals
    return out
