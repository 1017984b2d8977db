"""Rendering result rows for a terminal or a pipe: table, JSON, CSV."""

from __future__ import annotations

import csv
import io
import json
import math


def render(columns: list[str], rows: list[list], fmt: str) -> str:
    if fmt == "json":
        return json.dumps([dict(zip(columns, r)) for r in rows], indent=2, default=str)
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(columns)
        for r in rows:
            w.writerow([_csv_cell(v) for v in r])
        return buf.getvalue().rstrip("\n")
    return table(columns, rows)


def table(columns: list[str], rows: list[list]) -> str:
    """A plain aligned text table; long cells are cut at 60 characters."""
    cells = [[_cell(v) for v in r] for r in rows]
    widths = [len(c) for c in columns]
    for r in cells:
        for i, v in enumerate(r):
            widths[i] = max(widths[i], len(v))
    line = "  ".join(c.ljust(w) for c, w in zip(columns, widths))
    out = [line, "  ".join("-" * w for w in widths)]
    for r in cells:
        out.append("  ".join(v.rjust(w) if _numeric(v) else v.ljust(w) for v, w in zip(r, widths)).rstrip())
    return "\n".join(out)


def _cell(v) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        if math.isnan(v):
            return ""
        return f"{v:.4g}" if abs(v) < 1 and v != 0 else (f"{v:,.1f}" if not v.is_integer() else f"{int(v):,}")
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    if isinstance(v, (dict, list)):
        s = json.dumps(v, default=str)
    else:
        s = str(v)
    return s if len(s) <= 60 else s[:57] + "..."


def _csv_cell(v):
    if isinstance(v, (dict, list)):
        return json.dumps(v, default=str)
    return "" if v is None else v


def _numeric(v: str) -> bool:
    return bool(v) and v.replace(",", "").replace(".", "", 1).replace("-", "", 1).replace("e", "", 1).isdigit()


def jsonable(v: object) -> object:
    """Plain JSON values: NaN/inf as null, dates as ISO text, numpy scalars
    as Python numbers, anything else unknown as its text."""
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, set, frozenset)):
        return [jsonable(x) for x in v]
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8", "replace")
    if hasattr(v, "isoformat"):
        return v.isoformat()
    if hasattr(v, "item"):  # numpy scalars
        try:
            return jsonable(v.item())
        except (TypeError, ValueError):
            pass
    return str(v)
