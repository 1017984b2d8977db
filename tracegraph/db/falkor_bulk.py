"""The FalkorDB bulk loader: a trace's tables into a fresh graph with
``GRAPH.BULK``, FalkorDB's binary insert for new graphs.

A load always writes a graph of its own (see :mod:`tracegraph.db.falkor`),
which is exactly what ``GRAPH.BULK`` builds: no Cypher to parse, no
parameters to decode, no node looked up again. Each call carries blobs of
nodes of one label or relationships of one type; the server numbers nodes
in the order they arrive (0, 1, 2, ... across calls), so the loader knows
every node's id before sending anything, and relationships name their
ends by those ids. Nodes go first (the Trace node is 0), then
relationships, in calls of about :data:`CALL_BYTES` so that the server
answers other clients between them.

A blob is a header (the label or type, NUL-terminated; the property
count, 4 bytes little-endian; the property names, NUL-terminated), then
per node its properties, or per relationship its source id and target id
(8 bytes each) and its properties. A property is a type byte (0 null,
1 bool, 2 double, 3 string, 4 integer, 5 array) and its value (1 byte; 8
bytes; UTF-8 and a NUL; 8 bytes; a count of 8 bytes and that many typed
values). A null property is left out, as in the Cypher loader.

FalkorDB's strings end at a NUL character, in bulk blobs and in Cypher
text alike, so a NUL in a string is stored as U+2400 (the symbol for NUL)
by both loaders. A value the bulk format has no type for (an integer past
64 bits) raises :class:`NotBulkable`, and the caller writes the trace with
the Cypher loader (:mod:`tracegraph.db.falkor_load`) instead.
"""

from __future__ import annotations

import math
import os
import re
import struct
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import chain
from typing import Any

import numpy as np
import pandas as pd

from tracegraph.db.base import Progress, TraceTables
from tracegraph.db.falkor import NUL_SIGN
from tracegraph.db.values import column_values
from tracegraph.errors import DatabaseError

# About this many bytes of blobs per GRAPH.BULK call (the server holds the
# graph's write lock while it reads one; Redis takes at most 512 MB per blob).
CALL_BYTES = int(os.environ.get("TRACEGRAPH_BULK_CALL_BYTES", str(8 << 20)))
# Rows per blob: a blob is built in memory whole.
BLOB_ROWS = int(os.environ.get("TRACEGRAPH_BULK_BLOB_ROWS", "10000"))
# The most bytes of one blob (fewer rows when long strings make it larger).
BLOB_BYTES = 64 << 20

# The type byte before each property value.
_T_NULL, _T_BOOL, _T_DOUBLE, _T_STRING, _T_LONG, _T_ARRAY = range(6)
_NULL = bytes([_T_NULL])
_TRUE = bytes([_T_BOOL, 1])
_FALSE = bytes([_T_BOOL, 0])
_TAGGED_INT64 = struct.Struct("<Bq")  # a type byte and an int64: an integer, or an array's length
_TAGGED_DOUBLE = struct.Struct("<Bd")
# A numpy column's type byte and value layout, by dtype kind.
_NUMPY = {"b": (_T_BOOL, "u1"), "i": (_T_LONG, "<i8"), "f": (_T_DOUBLE, "<f8")}
_ENDS = np.dtype([("src", "<u8"), ("dst", "<u8")])

# Runs one GRAPH.BULK command: its arguments after the command's name.
Execute = Callable[..., Any]


class NotBulkable(ValueError):
    """A value the bulk format has no type for."""


def load(
    execute: Execute, key: str, trace: str, trace_props: dict[str, Any], tables: TraceTables, progress: Progress | None
) -> None:
    """Create graph ``key`` (which must not exist) holding the Trace node
    (``trace_props``) and ``tables`` as trace ``trace``."""
    ids = _NodeIds(tables)
    with _Calls(execute, key) as calls:
        _send(calls, trace, trace_props, tables, ids, progress)


def _send(
    calls: _Calls,
    trace: str,
    trace_props: dict[str, Any],
    tables: TraceTables,
    ids: _NodeIds,
    progress: Progress | None,
) -> None:
    calls.add_nodes(_header("Trace", list(trace_props)) + b"".join(_value(v) for v in trace_props.values()), 1)
    total = tables.elements()
    done = 0
    for t in tables.nodes:
        for part in _chunks(t.frame):
            for rows, blob in _node_blobs(t.label, part, ["uid", *t.columns], tables.int_columns, {"trace": trace}):
                calls.add_nodes(blob, rows)
            done += len(part)
            if progress:
                progress(done, total)
    member = dict((label, rel) for rel, label in tables.membership)
    for t in tables.nodes:
        rel = member.get(t.label)
        if rel is not None and len(t.frame):
            first = ids.first[t.label]
            ends = np.empty(len(t.frame), dtype=_ENDS)
            ends["src"] = 0
            ends["dst"] = np.arange(first, first + len(t.frame), dtype=np.uint64)
            for i in range(0, len(ends), BLOB_ROWS):
                some = ends[i : i + BLOB_ROWS]
                calls.add_edges(_header(rel, []) + some.tobytes(), len(some))
    for r in tables.rels:
        if not len(r.frame):
            continue
        for part in _chunks(r.frame):
            ends = np.empty(len(part), dtype=_ENDS)
            ends["src"] = ids.of(r.start, part[r.src], r.type)
            ends["dst"] = ids.of(r.end, part[r.dst], r.type)
            if not r.columns:
                calls.add_edges(_header(r.type, []) + ends.tobytes(), len(part))
            else:  # relationship properties are numbers (a step, a wait): a blob stays small
                names, cells = _columns(part, list(r.columns), tables.int_columns)
                cells.insert(0, _rows(ends.tobytes(), 16))
                calls.add_edges(_header(r.type, names) + b"".join(chain.from_iterable(zip(*cells))), len(part))
            done += len(part)
            if progress:
                progress(done, total)
    calls.flush()


class _NodeIds:
    """The id the server gives each node: the Trace node 0, then every node
    table's rows in order."""

    def __init__(self, tables: TraceTables) -> None:
        self.first: dict[str, int] = {}
        self.index: dict[str, pd.Index] = {}
        n = 1
        for t in tables.nodes:
            self.first[t.label] = n
            self.index[t.label] = pd.Index(t.frame["uid"].to_numpy(dtype=object))
            n += len(t.frame)

    def of(self, label: str, uids: pd.Series, rel: str) -> np.ndarray:
        at = self.index[label].get_indexer(pd.Index(uids.to_numpy(dtype=object)))
        if (at < 0).any():
            missing = uids.to_numpy(dtype=object)[at < 0][0]
            raise DatabaseError(f"a {rel} relationship names {label} {missing!r}, which the trace does not hold")
        return at.astype(np.uint64) + self.first[label]


class _Calls:
    """Blobs gathered into GRAPH.BULK calls of about CALL_BYTES; the first
    call creates the graph (BEGIN). A call runs in a thread of its own
    while the next one's blobs are encoded (the server's work overlaps the
    client's); calls still reach the server one after the other, in order."""

    def __init__(self, execute: Execute, key: str) -> None:
        self.execute = execute
        self.key = key
        self.begun = False
        self.blobs: list[bytes] = []
        self.size = 0
        self.nodes = 0
        self.edges = 0
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tracegraph-bulk")
        self.running: Future[None] | None = None

    def __enter__(self) -> _Calls:
        return self

    def __exit__(self, *exc: object) -> None:
        # Never leave a call running behind the caller's back (the caller
        # removes a failed load's graph next).
        try:
            self.wait()
        finally:
            self.pool.shutdown(wait=True)

    def wait(self) -> None:
        """Until the running call has answered (its error raised here)."""
        running, self.running = self.running, None
        if running is not None:
            running.result()

    def add_nodes(self, blob: bytes, count: int) -> None:
        if self.edges:
            self.flush()
        self._add(blob)
        self.nodes += count

    def add_edges(self, blob: bytes, count: int) -> None:
        if self.nodes:
            self.flush()
        self._add(blob)
        self.edges += count

    def _add(self, blob: bytes) -> None:
        if self.blobs and self.size + len(blob) > CALL_BYTES:
            self.flush()
        self.blobs.append(blob)
        self.size += len(blob)

    def flush(self) -> None:
        """Send the gathered blobs as one call (once the previous one has answered)."""
        if not self.blobs:
            return
        node_blobs = len(self.blobs) if self.nodes else 0
        head = ["BEGIN"] if not self.begun else []
        counts = [self.nodes, self.edges, node_blobs, len(self.blobs) - node_blobs]
        args = [self.key, *head, *map(str, counts), *self.blobs]
        self.wait()
        self.running = self.pool.submit(self._call, args, self.nodes, self.edges)
        self.begun = True
        self.blobs, self.size, self.nodes, self.edges = [], 0, 0, 0

    def _call(self, args: list[Any], nodes: int, edges: int) -> None:
        reply = self.execute(*args)
        text = reply.decode() if isinstance(reply, bytes) else str(reply)
        if text != f"{nodes} nodes created, {edges} edges created":
            raise DatabaseError(f"FalkorDB's bulk insert answered {text!r} for {nodes} nodes, {edges} edges")


def _node_blobs(
    label: str, part: pd.DataFrame, columns: list[str], ints: frozenset[str], constant: dict[str, Any]
) -> Iterator[tuple[int, bytes]]:
    """The nodes of ``part`` as blobs of at most BLOB_BYTES (halving the
    rows while one is larger: a blob is one Redis argument, at most 512 MB),
    with their row counts."""
    names, cells = _columns(part, columns, ints, constant)
    blob = _header(label, names) + b"".join(chain.from_iterable(zip(*cells)))
    if len(blob) <= BLOB_BYTES or len(part) == 1:
        yield len(part), blob
        return
    del blob, cells
    half = len(part) // 2
    yield from _node_blobs(label, part.iloc[:half], columns, ints, constant)
    yield from _node_blobs(label, part.iloc[half:], columns, ints, constant)


def _chunks(frame: pd.DataFrame) -> Iterator[pd.DataFrame]:
    for i in range(0, len(frame), BLOB_ROWS):
        yield frame.iloc[i : i + BLOB_ROWS]


def _header(name: str, properties: list[str]) -> bytes:
    names = b"".join(_text(p) + b"\x00" for p in properties)
    return _text(name) + b"\x00" + struct.pack("<I", len(properties)) + names


def _columns(
    frame: pd.DataFrame, columns: list[str], ints: frozenset[str], constant: dict[str, Any] | None = None
) -> tuple[list[str], list[list[bytes]]]:
    """The columns' property names, in the order their cells come, and
    the cell lists to interleave row by row (fewer lists, fewer pieces to
    join). Numeric columns without a null come first, as one fixed-width
    block per row (numpy packs them); then the other columns (strings
    encoded and cut in one go); last, in one piece shared by every row,
    the columns with no value at all and the ``constant`` properties."""
    fixed: list[tuple[str, np.ndarray]] = []
    names: list[str] = []
    cells: list[list[bytes]] = []
    empty: list[str] = []
    for c in columns:
        col = frame[c]
        # numpy's own dtypes only: pandas' nullable ones (Int64, boolean) say i / b with nulls inside
        kind = col.dtype.kind if isinstance(col.dtype, np.dtype) else "O"
        if kind == "f" and c not in ints and np.isfinite(arr := col.to_numpy(dtype=np.float64)).all():
            fixed.append((c, arr))
        elif kind in "ib":
            fixed.append((c, col.to_numpy()))
        elif col.isna().all():
            empty.append(c)
        else:
            names.append(c)
            cells.append(_cells(col, c in ints))
    tail = [*empty, *(constant or {})]
    if tail:
        names += tail
        piece = _NULL * len(empty) + b"".join(_value(v) for v in (constant or {}).values())
        cells.append([piece] * len(frame))
    if not fixed:
        return names, cells
    layout: list[tuple[str, str]] = []
    for c, arr in fixed:
        layout += [(f"{c}:t", "u1"), (f"{c}:v", _NUMPY[arr.dtype.kind][1])]
    block = np.empty(len(frame), dtype=layout)
    for c, arr in fixed:
        block[f"{c}:t"] = _NUMPY[arr.dtype.kind][0]
        block[f"{c}:v"] = arr
    return [c for c, _ in fixed] + names, [_rows(block.tobytes(), block.dtype.itemsize), *cells]


def _rows(buf: bytes, width: int) -> list[bytes]:
    """``buf`` cut into rows of ``width`` bytes."""
    return [buf[i : i + width] for i in range(0, len(buf), width)]


def _cells(column: pd.Series, integer: bool) -> list[bytes]:
    """One column's cell per row (the rules of
    :func:`values.column_values`: a null is a left-out property)."""
    if column.dtype == np.float64 and not integer:
        arr = column.to_numpy(dtype=np.float64)
        cells = _rows(_tagged(arr), 9)
        for i in np.flatnonzero(~np.isfinite(arr)).tolist():
            cells[i] = _NULL
        return cells
    values: list[Any] = column.tolist()
    for i in np.flatnonzero(column.isna().to_numpy()).tolist():  # None, NaN, pd.NA: left out
        values[i] = None
    if set(map(type, values)) <= {str, type(None)}:
        return _strings(values)
    lists = _list_cells(values)
    if lists is not None:
        return lists
    return [_value(v) for v in column_values(pd.Series(values, dtype=object), integer)]


def _tagged(arr: np.ndarray) -> bytes:
    """A numeric array's values, each after its type byte (by the array's
    dtype kind, :data:`_NUMPY`), back to back."""
    code, layout = _NUMPY[arr.dtype.kind]
    packed = np.empty(len(arr), dtype=[("t", "u1"), ("v", layout)])
    packed["t"] = code
    packed["v"] = arr
    return packed.tobytes()


# A list element's numpy dtype, by the element's Python type.
_ELEMENT = {float: np.float64, int: np.int64, bool: np.bool_}


def _list_cells(values: list[Any]) -> list[bytes] | None:
    """A column of lists (or nulls) whose elements all have one type
    (float, int, bool or str), as cells: the elements encoded together (by
    numpy, or as one text) and cut per row. None for any other column,
    which :func:`_value` then encodes cell by cell (the rules are its)."""
    present = [v for v in values if v is not None]
    if not present or any(type(v) is not list for v in present):
        return None
    flat = list(chain.from_iterable(present))
    kinds = set(map(type, flat))
    if len(kinds) > 1:
        return None
    kind = kinds.pop() if kinds else float
    if kind is str:
        strings = _strings(flat)
        pieces: Callable[[int, int], bytes] = lambda a, b: b"".join(strings[a:b])  # noqa: E731
    elif kind in _ELEMENT:
        try:
            arr: np.ndarray = np.asarray(flat, dtype=_ELEMENT[kind])
        except OverflowError:  # an integer past 64 bits: _value says so
            return None
        if kind is float and not np.isfinite(arr).all():  # a non-finite element is a null element
            return None
        block, width = _tagged(arr), 1 + arr.dtype.itemsize
        pieces = lambda a, b: block[a * width : b * width]  # noqa: E731
    else:
        return None
    cells: list[bytes] = []
    at = 0
    for v in values:
        if v is None:
            cells.append(_NULL)
        else:
            n = len(v)
            cells.append(_TAGGED_INT64.pack(_T_ARRAY, n) + pieces(at, at + n))
            at += n
    return cells


# One string cell (_T_STRING, UTF-8 without NUL, NUL) or a null (a lone
# NUL, _T_NULL): UTF-8 never puts a NUL byte inside a character.
_STRING_CELL = re.compile(b"\x03[^\x00]*\x00|\x00")


def _strings(values: list[str | None]) -> list[bytes]:
    """A column of strings (or nulls) as cells, encoded as one text and
    cut into cells by one regular expression, in C."""
    if None in values:
        text = "".join("\x00" if v is None else "\x03" + v + "\x00" for v in values)
    else:
        text = "\x03" + "\x00\x03".join(values) + "\x00"  # type: ignore[arg-type]
    if text.count("\x00") != len(values):  # a NUL inside a string
        return [_value(v) for v in values]
    return _STRING_CELL.findall(text.encode("utf-8"))


def _value(v: Any) -> bytes:
    """One property value in the bulk format (None, NaN and infinities: null)."""
    if v is None:
        return _NULL
    t = type(v)
    if t is str:
        return bytes([_T_STRING]) + _text(v) + b"\x00"
    if t is bool:
        return _TRUE if v else _FALSE
    if t is int:
        if not -(2**63) <= v < 2**63:
            raise NotBulkable(f"integer {v} does not fit 64 bits")
        return _TAGGED_INT64.pack(_T_LONG, v)
    if t is float:
        return _TAGGED_DOUBLE.pack(_T_DOUBLE, v) if math.isfinite(v) else _NULL
    if t is list or t is tuple:
        return _TAGGED_INT64.pack(_T_ARRAY, len(v)) + b"".join(_value(x) for x in v)
    if isinstance(v, np.ndarray):
        return _value(v.tolist())
    if hasattr(v, "item"):  # a numpy scalar
        return _value(v.item())
    raise NotBulkable(f"a {t.__name__} property")


def _text(s: str) -> bytes:
    return s.replace("\x00", NUL_SIGN).encode("utf-8")
