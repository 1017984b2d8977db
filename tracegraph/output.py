"""Rendering result rows for a terminal or a pipe: table, JSON, CSV; and
numbers as people read them, whatever the format."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import shutil
import sys
from typing import Any

# Times (a column or property named ``*_us``) are kept to 1 ns: the finest
# time any format records (Kineto's nanoseconds; XPlane's picoseconds are
# exact to whole nanoseconds only; the other formats are coarser), so 3
# decimals of a microsecond are a trace's resolution.
TIME_DECIMALS = 3
# Other numbers (shares, rates, ratios) keep 12 significant digits: all a
# measurement holds, and none of the binary noise of sums (0.1 + 0.2).
SIGNIFICANT_DIGITS = 12
# Every float is first cut to this many significant digits: the engines
# compute the same sum to within its last bits (FalkorDB answers 15 digits),
# and a value halfway between two nanoseconds must round the same on both.
SETTLE_DIGITS = 13


def is_time(name: str) -> bool:
    """Whether a column or property holds a time (the catalog's names say
    their unit: ``dur_us``, ``t_us``)."""
    return name.endswith("_us")


# Values every conversion here passes on as they are, known by their exact type.
_AS_IS = frozenset({str, int, bool, type(None)})


def readable(value: Any, time: bool = False) -> Any:
    """``value`` with every float rounded for reading: a time (``time``) to
    :data:`TIME_DECIMALS` decimals, any other to :data:`SIGNIFICANT_DIGITS`
    significant digits, so ``8782.11799999999`` reads ``8782.118`` in a
    table, CSV, JSON and a DataFrame alike. Lists keep their owner's kind;
    a dict's entries (a node's properties) take their own key's."""
    if type(value) in _AS_IS:  # (the most cells: no test below applies)
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            return value
        settled = float(f"{value:.{SETTLE_DIGITS}g}")
        return round(settled, TIME_DECIMALS) if time else float(f"{settled:.{SIGNIFICANT_DIGITS}g}")
    if isinstance(value, dict):
        return {k: readable(v, isinstance(k, str) and is_time(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [readable(v, time) for v in value]
    return value


def readable_rows(columns: list[str], rows: list[list[Any]]) -> list[list[Any]]:
    """Rows with their numbers :func:`readable`, each column's times by its name."""
    times = [is_time(c) for c in columns]
    return [[readable(v, t) for v, t in zip(r, times)] for r in rows]


def render(columns: list[str], rows: list[list[Any]], fmt: str, width: int | None = None) -> str:
    """Rows as ``table`` (fit to ``width`` columns of text when given),
    ``json`` or ``csv``."""
    if fmt == "json":
        return json.dumps([dict(zip(columns, r)) for r in rows], indent=2, default=str)
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(columns)
        for r in rows:
            w.writerow([_csv_cell(v) for v in r])
        return buf.getvalue().rstrip("\n")
    return table(columns, rows, width)


def terminal_width() -> int | None:
    """The width of the terminal stdout writes to; None when it is not one."""
    return shutil.get_terminal_size().columns if sys.stdout.isatty() else None


CELL_MAX = 60  # a text cell is never wider than this
CELL_MIN = 12  # text columns shrink to fit a terminal down to this


def table(columns: list[str], rows: list[list[Any]], width: int | None = None) -> str:
    """A plain aligned text table: numbers right-aligned with thousands
    separators, text left-aligned; a text cell longer than CELL_MAX, or than
    its column's share of a ``width`` too narrow for the whole table, is
    cut in the middle (``gradients/co…Conv2DBackpropFilter``), where names
    differ least usefully."""
    cells = [[_cell(v) for v in r] for r in rows]
    numeric = [all(_numeric(r[i]) or not r[i] for r in cells) and any(r[i] for r in cells) for i in range(len(columns))]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    widths = [w if numeric[i] else min(w, CELL_MAX) for i, w in enumerate(widths)]
    if width:
        over = sum(widths) + 2 * (len(widths) - 1) - width
        while over > 0:
            text = [i for i in range(len(widths)) if not numeric[i] and widths[i] > max(CELL_MIN, len(columns[i]))]
            if not text:
                break
            widest = max(text, key=lambda i: widths[i])
            cut = min(over, widths[widest] - max(CELL_MIN, len(columns[widest])))
            widths[widest] -= cut
            over -= cut
    line = "  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip()
    out = [line, "  ".join("-" * w for w in widths)]
    for r in cells:
        out.append(
            "  ".join(
                v.rjust(w) if numeric[i] else _middle(v, w).ljust(w) for i, (v, w) in enumerate(zip(r, widths))
            ).rstrip()
        )
    return "\n".join(out)


def _middle(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters in the middle, marked with an ellipsis."""
    if len(text) <= width:
        return text
    keep = width - 1
    return text[: (keep + 1) // 2] + "\u2026" + text[len(text) - keep // 2 :] if keep > 0 else text[:width]


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        if math.isnan(v):
            return ""
        if abs(v) < 1 and v != 0:
            return f"{v:.4g}"
        # Up to a nanosecond of a microsecond (TIME_DECIMALS), no trailing zeros.
        return f"{v:,.{TIME_DECIMALS}f}".rstrip("0").rstrip(".") if not v.is_integer() else f"{int(v):,}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    if isinstance(v, (dict, list)):
        return json.dumps(v, default=str)
    return str(v)


def _csv_cell(v: object) -> object:
    if isinstance(v, (dict, list)):
        return json.dumps(v, default=str)
    return "" if v is None else v


def _numeric(v: str) -> bool:
    return bool(v) and v.replace(",", "").replace(".", "", 1).replace("-", "", 1).replace("e", "", 1).isdigit()


def jsonable(v: object) -> object:
    """Plain JSON values: NaN/inf as null, dataclasses as objects, dates as
    ISO text, numpy scalars as Python numbers, anything else unknown as its
    text."""
    if type(v) in _AS_IS:  # (the most values first, by their exact type: a row of 400k cells costs a test each)
        return v
    if type(v) is float:
        return v if math.isfinite(v) else None
    if type(v) is list:
        return [jsonable(x) for x in v]
    if isinstance(v, (bool, int, str)):
        return v
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: jsonable(getattr(v, f.name)) for f in dataclasses.fields(v)}
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
