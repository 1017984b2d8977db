"""Frame values to property values, the same way for every engine.

A missing value (None, NaN, pandas NA) is a property left out: that is how
both engines spell null. Numpy scalars become Python scalars; integer
columns that pandas widened to float (because they hold nulls) become
integers again, so a count is ``3`` on every engine and never ``3.0``.
Infinities are not storable anywhere and count as missing.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import Any

import numpy as np
import pandas as pd

_INF = float("inf")
_PLAIN_TYPES = {str, int, bool, type(None)}


def missing(v: Any) -> bool:
    """Is ``v`` a null of any kind (None, NaN, pandas NA/NaT)?"""
    if v is None:
        return True
    if isinstance(v, float) and math.isnan(v):
        return True
    return v is pd.NA or v is pd.NaT


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


def column_values(s: pd.Series, integer: bool) -> list[Any]:
    """A whole column as storable Python values (see :func:`plain`), fast
    for the common dtypes: this runs over every cell of a trace."""
    kind = s.dtype.kind
    if not isinstance(s.dtype, np.dtype):  # pandas' nullable dtypes (Int64, boolean, Float64, string): NA is None
        vals = s.astype(object).tolist()
        return [v if type(v) in _PLAIN_TYPES else plain(v, integer) for v in vals]
    if kind in "iub":
        return s.tolist()
    if kind == "f":
        arr = s.to_numpy(dtype=float)
        vals = arr.tolist()
        bad = ~np.isfinite(arr)
        if integer:
            whole = ~bad & (arr == np.trunc(arr))
            if (np.abs(arr[whole]) >= 2.0**63).any():
                return [plain(v, True) for v in vals]
            at = np.flatnonzero(whole)
            for i, v in zip(at.tolist(), arr[at].astype(np.int64).tolist()):
                vals[i] = v
        for i in np.flatnonzero(bad).tolist():
            vals[i] = None
        return vals
    vals = s.tolist()
    kinds = set(map(type, vals))
    if kinds <= _PLAIN_TYPES:  # nothing to convert
        return vals
    return [v if type(v) in _PLAIN_TYPES else plain(v, integer) for v in vals]


def row_dicts(df: pd.DataFrame, columns: Collection[str], int_columns: Collection[str]) -> list[dict[str, Any]]:
    """Rows as ``{column: value}`` without the missing values (see the module docstring)."""
    cols = list(columns)
    values = [column_values(df[c], c in int_columns) for c in cols]
    return [{c: v for c, v in zip(cols, row) if v is not None} for row in zip(*values)]
