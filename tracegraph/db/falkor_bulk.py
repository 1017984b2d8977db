"""The FalkorDB bulk loader: a trace's tables into a fresh graph with
``GRAPH.BULK``, FalkorDB's binary insert for new graphs.

A load always writes a graph of its own (see :mod:`tracegraph.db.falkor`),
which is what ``GRAPH.BULK`` builds: no Cypher to parse, no parameters to
decode, no node looked up again. Each call carries blobs of nodes of one
label or relationships of one type; the server numbers nodes in the order
they arrive (0, 1, 2, ... across calls), so the loader knows every node's
id before sending anything, and relationships name their ends by those
ids. A load may come in parts (a job's ranks, one after the other): each
part's nodes go first, then its relationships; a relationship between
parts names the ids the earlier parts got. The blobs are spooled and sent
in calls that grow with the graph (see :class:`Writer` for why).

A blob is a header (the label or type, NUL-terminated; the property
count, 4 bytes little-endian; the property names, NUL-terminated), then
per node its properties, or per relationship its source id and target id
(8 bytes each) and its properties. A property is a type byte (0 null,
1 bool, 2 double, 3 string, 4 integer, 5 array) and its value (1 byte; 8
bytes; UTF-8 and a NUL; 8 bytes; a count of 8 bytes and that many typed
values). A null property is left out, as in the Cypher loader.

The cells are encoded column by column by compiled code and interleaved
row by row; a column of Python objects (a frame handed in by a caller) is
encoded cell by cell. FalkorDB's strings end at a NUL character, in bulk
blobs and in Cypher text alike, so a NUL in a string is stored as U+2400
(the symbol for NUL) by both loaders. A value the bulk format has no type
for (an integer past 64 bits) raises :class:`NotBulkable`, and the caller
writes the trace with the Cypher loader (:mod:`tracegraph.db.falkor_load`)
instead.
"""

from __future__ import annotations

import math
import os
import struct
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import IO, Any

import numpy as np
import numpy.typing as npt

from tracegraph.columns import F64, I64, U8, B, Column, Lists, Strings, Table, Texts, kernel, read_only, take
from tracegraph.db.base import NodeTable, Progress, RelTable
from tracegraph.db.falkor import NUL_SIGN
from tracegraph.errors import DatabaseError

# The fewest bytes of blobs per GRAPH.BULK call (a call is sent once the
# spool holds GROWTH times what the graph has received: see Writer), and the
# most: the server holds a call about twice over while it reads it (its
# query buffer and the arguments), on top of the graph. GROWTH 0.25 rather
# than 0.5: an 8-rank job's last calls are half as large, and the server's
# peak 20-70 MB lower, at no cost in time on 8 or 64 ranks (bench/RESULTS.md).
CALL_BYTES = int(os.environ.get("TRACEGRAPH_BULK_CALL_BYTES", str(8 << 20)))
MAX_CALL_BYTES = int(os.environ.get("TRACEGRAPH_BULK_MAX_CALL_BYTES", str(128 << 20)))
GROWTH = float(os.environ.get("TRACEGRAPH_BULK_GROWTH", "0.25"))
# Rows per blob: a blob is built in memory whole.
BLOB_ROWS = int(os.environ.get("TRACEGRAPH_BULK_BLOB_ROWS", "10000"))
# The most bytes of one blob (fewer rows when long strings make it larger).
BLOB_BYTES = 64 << 20

# The type byte before each property value.
_T_NULL, _T_BOOL, _T_DOUBLE, _T_STRING, _T_LONG, _T_ARRAY = range(6)
_NULL = bytes([_T_NULL])
_TRUE = bytes([_T_BOOL, 1])
_FALSE = bytes([_T_BOOL, 0])
_TAGGED_INT64 = struct.Struct("<Bq")
_TAGGED_DOUBLE = struct.Struct("<Bd")
_NUL_SIGN_BYTES = np.frombuffer(NUL_SIGN.encode(), dtype=np.uint8).copy()

# Sends one command given in pieces (a packed Redis command) and returns its reply.
Send = Callable[[Iterator[bytes]], Any]
# A column's cells: bytes and their offsets (n + 1).
Cells = tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]


class NotBulkable(ValueError):
    """A value the bulk format has no type for."""


# --- cells ----------------------------------------------------------------------------------------

# How a numeric column is written: a double, an integer, a boolean.
_AS_DOUBLE, _AS_INT, _AS_BOOL = 0, 1, 2


@kernel
def _number_width(v: float, how: int) -> int:  # pragma: no cover - compiled
    """Bytes of a number's cell: a null for NaN and infinities."""
    if not (v == v and v != np.inf and v != -np.inf):
        return 1
    return 2 if how == 2 else 9


@kernel
def _put_number(data: U8, o: int, v: float, how: int, scratch: I64) -> int:  # pragma: no cover - compiled
    """Write a number's cell at ``o`` (a boolean, an integer when ``how``
    asks and it is whole, else a double; NaN and infinities: null), using
    ``scratch`` (one int64) for its bytes; returns the offset after it."""
    if not (v == v and v != np.inf and v != -np.inf):
        data[o] = 0
        return o + 1
    if how == 2:
        data[o] = 1
        data[o + 1] = 1 if v != 0 else 0
        return o + 2
    if how == 1 and v == np.floor(v) and abs(v) < 9.223372036854776e18:
        data[o] = 4
        scratch[0] = np.int64(v)
    else:
        data[o] = 2
        scratch.view(np.float64)[0] = v
    data[o + 1 : o + 9] = scratch.view(np.uint8)
    return o + 9


@kernel
def _numeric_cells(x: F64, how: int) -> Cells:  # pragma: no cover - compiled
    """float64 values (NaN and infinities: null) as cells."""
    n = len(x)
    offsets = np.zeros(n + 1, dtype=np.int64)
    for i in range(n):
        offsets[i + 1] = offsets[i] + _number_width(x[i], how)
    data = np.empty(offsets[n], dtype=np.uint8)
    scratch = np.zeros(1, dtype=np.int64)
    for i in range(n):
        _put_number(data, offsets[i], x[i], how, scratch)
    return data, offsets


@kernel
def _int_cells(x: I64, how: int) -> Cells:  # pragma: no cover - compiled
    """int64 or bool values (no nulls) as cells."""
    n = len(x)
    width = 2 if how == 2 else 9
    offsets = np.arange(n + 1, dtype=np.int64) * width
    data = np.empty(n * width, dtype=np.uint8)
    i64 = np.empty(1, dtype=np.int64)
    i64b = i64.view(np.uint8)
    for i in range(n):
        o = i * width
        if how == 2:
            data[o] = 1
            data[o + 1] = 1 if x[i] != 0 else 0
        else:
            data[o] = 4
            i64[0] = x[i]
            data[o + 1 : o + 9] = i64b
    return data, offsets


@kernel
def _text_cells(codes: I64, text: U8, text_offsets: I64) -> Cells:  # pragma: no cover - compiled
    """Rows whose text is ``text[text_offsets[c]:text_offsets[c + 1]]`` for
    their ``codes`` (-1: null) as string cells."""
    n = len(codes)
    offsets = np.zeros(n + 1, dtype=np.int64)
    for i in range(n):
        c = codes[i]
        offsets[i + 1] = offsets[i] + (1 if c < 0 else text_offsets[c + 1] - text_offsets[c] + 2)
    data = np.empty(offsets[n], dtype=np.uint8)
    for i in range(n):
        o = offsets[i]
        c = codes[i]
        if c < 0:
            data[o] = 0
            continue
        data[o] = 3
        a, b = text_offsets[c], text_offsets[c + 1]
        data[o + 1 : o + 1 + b - a] = text[a:b]
        data[o + 1 + b - a] = 0
    return data, offsets


@kernel
def _without_nul(data: U8, offsets: I64, sign: U8) -> tuple[U8, I64]:  # pragma: no cover - compiled
    """Texts with each NUL byte replaced by ``sign`` (U+2400's bytes)."""
    nuls = 0
    for i in range(offsets[-1]):
        if data[i] == 0:
            nuls += 1
    if nuls == 0:
        return data, offsets
    grow = len(sign) - 1
    out_off = np.zeros(len(offsets), dtype=np.int64)
    out = np.empty(offsets[-1] + nuls * grow, dtype=np.uint8)
    o = 0
    for r in range(len(offsets) - 1):
        out_off[r] = o
        for i in range(offsets[r], offsets[r + 1]):
            if data[i] == 0:
                for k in range(len(sign)):
                    out[o] = sign[k]
                    o += 1
            else:
                out[o] = data[i]
                o += 1
    out_off[len(offsets) - 1] = o
    return out, out_off


@kernel
def _list_cells(
    offsets: I64, present: B, elem: F64, ielem: I64, elem_how: int, str_codes: I64, text: U8, text_offsets: I64
) -> Cells:  # pragma: no cover - compiled
    """Lists (rows ``offsets[i]:offsets[i+1]`` of the elements) as array
    cells; elements doubles or booleans (``elem``), integers (``ielem``,
    ``elem_how`` 1) or strings (``str_codes`` into ``text``, ``elem_how`` 3)."""
    n = len(present)
    out_off = np.zeros(n + 1, dtype=np.int64)
    for i in range(n):
        if not present[i]:
            out_off[i + 1] = out_off[i] + 1
            continue
        size = 9
        for j in range(offsets[i], offsets[i + 1]):
            if elem_how == 3:
                c = str_codes[j]
                size += 1 if c < 0 else text_offsets[c + 1] - text_offsets[c] + 2
            elif elem_how == 1:
                size += 9
            else:
                size += _number_width(elem[j], elem_how)
        out_off[i + 1] = out_off[i] + size
    data = np.empty(out_off[n], dtype=np.uint8)
    scratch = np.zeros(1, dtype=np.int64)
    i64b = scratch.view(np.uint8)
    for i in range(n):
        o = out_off[i]
        if not present[i]:
            data[o] = 0
            continue
        data[o] = 5
        scratch[0] = offsets[i + 1] - offsets[i]
        data[o + 1 : o + 9] = i64b
        o += 9
        for j in range(offsets[i], offsets[i + 1]):
            if elem_how == 3:
                c = str_codes[j]
                if c < 0:
                    data[o] = 0
                    o += 1
                else:
                    a, b = text_offsets[c], text_offsets[c + 1]
                    data[o] = 3
                    data[o + 1 : o + 1 + b - a] = text[a:b]
                    data[o + 1 + b - a] = 0
                    o += b - a + 2
            elif elem_how == 1:
                data[o] = 4
                scratch[0] = ielem[j]
                data[o + 1 : o + 9] = i64b
                o += 9
            else:
                o = _put_number(data, o, elem[j], elem_how, scratch)
    return data, out_off


@kernel
def _interleave(head: U8, data: U8, bases: I64, offsets: I64) -> U8:  # pragma: no cover - compiled
    """``head``, then row i of the blob: the cells of row i of every column,
    in column order (column k's cells at ``data[bases[k] + offsets[k, i] :
    ...]``). Filled column by column, each row's end kept as it grows: a
    column's cells and offsets are then read in order, not one cell from
    each column in turn (half the time of the row-by-row fill)."""
    k, m = offsets.shape
    n = m - 1
    at = np.full(n, len(head), dtype=np.int64)  # where row i's next cell goes
    for c in range(k):
        for i in range(n):
            at[i] += offsets[c, i + 1] - offsets[c, i]
    total = len(head)
    for i in range(n):  # rows' ends -> rows' starts
        width = at[i] - len(head)
        at[i] = total
        total += width
    out = np.empty(total, dtype=np.uint8)
    out[: len(head)] = head
    for c in range(k):
        base = bases[c]
        for i in range(n):
            o = at[i]
            for j in range(base + offsets[c, i], base + offsets[c, i + 1]):
                out[o] = data[j]
                o += 1
            at[i] = o
    return out


def _dictionary_text(words: tuple[str, ...] | list[str]) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
    encoded = [_text(w) for w in words]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    if encoded:
        np.cumsum([len(b) for b in encoded], out=offsets[1:])
    return np.frombuffer(b"".join(encoded), dtype=np.uint8), offsets


def cells(column: Column, integer: bool, boolean: bool = False) -> Cells:
    """A column's cells (see :func:`column_cells`)."""
    how = _AS_BOOL if boolean else _AS_INT if integer else _AS_DOUBLE
    if isinstance(column, Strings):
        text, toff = _dictionary_text(column.values)
        return _text_cells(np.asarray(column.codes, dtype=np.int64), text, toff)
    if isinstance(column, Texts):
        data, off = _without_nul(read_only(column.data), column.offsets, _NUL_SIGN_BYTES)
        codes = np.arange(len(column), dtype=np.int64)
        if column.missing is not None:
            codes[column.missing] = -1
        return _text_cells(codes, read_only(data), off)
    if isinstance(column, Lists):
        vals = column.values
        none_f, none_i = np.zeros(0), np.zeros(0, dtype=np.int64)
        if isinstance(vals, Strings):
            text, toff = _dictionary_text(vals.values)
            return _list_cells(
                column.offsets,
                column.present_rows,
                none_f,
                none_i,
                3,
                np.asarray(vals.codes, dtype=np.int64),
                text,
                toff,
            )
        kind = vals.dtype.kind
        if kind == "O":
            return _object_cells(column.tolist())
        no_text = read_only(np.zeros(0, dtype=np.uint8))  # (as the strings' text is: one compilation)
        no_off = np.zeros(1, dtype=np.int64)
        if kind in "iu":
            return _list_cells(
                column.offsets, column.present_rows, none_f, vals.astype(np.int64), _AS_INT, none_i, no_text, no_off
            )
        how_e = _AS_BOOL if kind == "b" else _AS_DOUBLE
        return _list_cells(
            column.offsets, column.present_rows, vals.astype(np.float64), none_i, how_e, none_i, no_text, no_off
        )
    kind = column.dtype.kind
    if kind == "O":
        return _object_cells(column.tolist(), integer)
    if kind == "b":
        return _int_cells(column.astype(np.int64), _AS_BOOL)
    if kind in "iu":
        return _int_cells(column.astype(np.int64), _AS_BOOL if boolean else _AS_INT)
    return _numeric_cells(column.astype(np.float64), how)


def _object_cells(items: list[Any], integer: bool = False) -> Cells:
    """Cells of Python values, one by one (the rules of :func:`_value`)."""
    encoded = [_value(_plain(v, integer)) for v in items]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    if encoded:
        np.cumsum([len(b) for b in encoded], out=offsets[1:])
    return np.frombuffer(b"".join(encoded), dtype=np.uint8), offsets


def _plain(v: Any, integer: bool) -> Any:
    from tracegraph.db.values import plain

    if isinstance(v, list):
        return [_plain(x, False) for x in v]
    return plain(v, integer)


def blob(header: bytes, columns: list[Cells]) -> bytes | memoryview:
    """A blob: ``header``, then row by row each column's cell (a view of
    the array it is made in: it goes to the spool file as it is, with no
    copy into a bytes object)."""
    if not columns:
        return header
    data = np.concatenate([c[0] for c in columns]) if len(columns) > 1 else columns[0][0]
    bases = np.zeros(len(columns), dtype=np.int64)
    at = 0
    for k, c in enumerate(columns):
        bases[k] = at
        at += len(c[0])
    offsets = np.stack([c[1] for c in columns])
    head = np.frombuffer(header, dtype=np.uint8)
    return _interleave(head, read_only(np.ascontiguousarray(data)), bases, offsets).data


# --- the calls ------------------------------------------------------------------------------------


class Writer:
    """Blobs spooled to a temporary file and sent as GRAPH.BULK calls that
    grow with the graph; the first call creates it (BEGIN).

    Why the calls grow: each call makes FalkorDB fold its earlier additions
    into the label and relation matrices the call touches, which takes time
    in proportion to those matrices: a load sent in calls of a fixed size
    takes time quadratic in its size (a 64-rank job's write took 36 times
    an 8-rank one's). A call is therefore sent once the spool holds
    :data:`GROWTH` times what the graph has received (at least
    :data:`CALL_BYTES`, at most :data:`MAX_CALL_BYTES`): a few calls in
    all, and the total time linear. A call is also sent as soon as the
    previous one has answered, once the spool holds :data:`CALL_BYTES`:
    the server works while the client makes the next blobs instead of
    waiting idle for a full call, and what is left for the end of a load
    (whose caller waits for it) is small. Those calls still grow with the
    graph, since the spool fills while a call runs, and a call's time
    grows with the graph too. The spool keeps the client's memory
    flat (a call is streamed from it, one blob at a time); a call runs in a
    thread of its own while the next one is spooled, and calls reach the
    server one after the other, in order. In a call, its node blobs go
    before its relationship blobs (in the order spooled: node ids stay the
    order of arrival), so a relationship always finds its ends; the
    relationship blobs of one type go as one argument (see
    :meth:`Spool.arguments`)."""

    def __init__(self, send: Send, key: str) -> None:
        self.send = send
        self.key = key
        self.begun = False
        self.sent_bytes = 0
        self.spool: Spool | None = None
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tracegraph-bulk")
        self.running: Future[None] | None = None

    def close(self) -> None:
        """Never leave a call running behind the caller's back."""
        try:
            self.wait()
        finally:
            self.pool.shutdown(wait=True)
            if self.spool is not None:
                self.spool.file.close()
                self.spool = None

    def wait(self) -> None:
        running, self.running = self.running, None
        if running is not None:
            running.result()

    def add_nodes(self, data: bytes | memoryview, count: int) -> None:
        self._add(data, count, True)

    def add_edges(self, data: bytes | memoryview, count: int) -> None:
        self._add(data, count, False)

    def _add(self, data: bytes | memoryview, count: int, node: bool) -> None:
        spool = self.spool
        if spool is not None and spool.size + len(data) > self.call_bytes():
            self.flush()
            spool = None
        if spool is None:
            spool = self.spool = Spool(tempfile.TemporaryFile(prefix="tracegraph-bulk-"))  # noqa: SIM115 - closed once sent
        spool.file.write(data)
        spool.blobs.append(Blob(node, count, spool.size, len(data), _header_of(data)))
        spool.size += len(data)
        if spool.size >= CALL_BYTES and (self.running is None or self.running.done()):
            self.flush()  # the server is idle: keep it busy (see the class docstring)

    def call_bytes(self) -> int:
        """The size a call is sent at: it grows with what the graph has."""
        return int(min(MAX_CALL_BYTES, max(CALL_BYTES, GROWTH * self.sent_bytes)))

    def flush(self) -> None:
        """Send what is spooled as one call (once the previous one has answered)."""
        spool, self.spool = self.spool, None
        if spool is None:
            return
        begin = not self.begun
        self.begun = True
        self.sent_bytes += spool.size
        try:
            self.wait()
        except BaseException:
            spool.file.close()
            raise
        self.running = self.pool.submit(self._call, spool, begin)

    def _call(self, spool: Spool, begin: bool) -> None:
        try:
            node_args, edge_args = spool.arguments()
            n_nodes = sum(b.count for b in spool.blobs if b.node)
            n_edges = sum(b.count for b in spool.blobs if not b.node)
            head = [self.key, *(["BEGIN"] if begin else []), n_nodes, n_edges, len(node_args), len(edge_args)]
            reply = self.send(_command(head, spool, node_args + edge_args))
        finally:
            spool.file.close()
        text = reply.decode() if isinstance(reply, bytes) else str(reply)
        if text != f"{n_nodes} nodes created, {n_edges} edges created":
            raise DatabaseError(f"FalkorDB's bulk insert answered {text!r} for {n_nodes} nodes, {n_edges} edges")


@dataclass
class Blob:
    """One spooled blob: nodes or relationships, its rows, where it is in
    the spool, its bytes, and its header (the first of those bytes)."""

    node: bool
    count: int
    at: int
    size: int
    header: bytes


@dataclass
class Spool:
    """The blobs of the next call: their bytes in ``file`` and each
    :class:`Blob` in the order written."""

    file: IO[bytes]
    blobs: list[Blob] = field(default_factory=list)
    size: int = 0

    def arguments(self) -> tuple[list[list[int]], list[list[int]]]:
        """The call's node arguments and relationship arguments, as the
        blobs (indexes) each is made of: every node blob on its own, in the
        order written (node ids are given in the order of arrival); the
        relationship blobs with one header (type and properties) joined
        into one argument.

        Why relationships are joined: FalkorDB assembles a relation's pending
        additions before it takes the next argument of that type, which
        costs time in proportion to all it holds pending, the whole load's
        relationships of that type so far; one argument per type and call
        (rather than one per 10,000 rows and part) keeps that a few times a
        call."""
        nodes = [[i] for i, b in enumerate(self.blobs) if b.node]
        edges: dict[bytes, list[int]] = {}
        for i, b in enumerate(self.blobs):
            if not b.node:
                edges.setdefault(b.header, []).append(i)
        return nodes, list(edges.values())

    def read(self, at: int, length: int) -> bytes:
        self.file.seek(at)
        data = self.file.read(length)
        if len(data) != length:
            raise DatabaseError("the bulk insert's spool file came back short")
        return data


def _header_of(blob: bytes | memoryview) -> bytes:
    """A blob's header (see :func:`_header_length`), read from its first
    bytes: a header is its type and property names, far less than 64 KB."""
    head = bytes(blob[: 1 << 16])
    try:
        return head[: _header_length(head)]
    except (ValueError, struct.error):  # longer than that after all
        whole = bytes(blob)
        return whole[: _header_length(whole)]


def _header_length(blob: bytes) -> int:
    """The bytes of a blob's header: its label or type and its property
    names, each NUL-terminated, with the property count between them."""
    at = blob.index(b"\x00") + 1
    (count,) = struct.unpack_from("<I", blob, at)
    at += 4
    for _ in range(count):
        at = blob.index(b"\x00", at) + 1
    return at


def _command(head: list[Any], spool: Spool, arguments: list[list[int]]) -> Iterator[bytes]:
    """GRAPH.BULK with ``head`` and the spool's blobs as ``arguments`` (see
    :meth:`Spool.arguments`) as a Redis command, in pieces: each blob read
    from the spool as it is sent, a joined argument's header once."""
    words = [b"GRAPH.BULK", *(str(w).encode() for w in head)]
    yield b"*%d\r\n" % (len(words) + len(arguments)) + b"".join(b"$%d\r\n%s\r\n" % (len(w), w) for w in words)
    for blobs in arguments:
        first, *rest = (spool.blobs[i] for i in blobs)
        parts = [(first.at, first.size), *((b.at + len(b.header), b.size - len(b.header)) for b in rest)]
        yield b"$%d\r\n" % sum(size for _, size in parts)
        for at, size in parts:
            yield spool.read(at, size)
        yield b"\r\n"


def header(name: str, properties: list[str]) -> bytes:
    names = b"".join(_text(p) + b"\x00" for p in properties)
    return _text(name) + b"\x00" + struct.pack("<I", len(properties)) + names


def _kinds(columns: list[str], ints: frozenset[str], bools: frozenset[str]) -> list[tuple[bool, bool]]:
    return [(c in ints, c in bools) for c in columns]


def node_blobs(
    t: NodeTable, ints: frozenset[str], bools: frozenset[str], constant: dict[str, Any]
) -> Iterator[tuple[int, bytes | memoryview]]:
    """The nodes of ``t`` as blobs of at most BLOB_ROWS rows and BLOB_BYTES,
    with their row counts; columns with no value in a blob are left out of it."""
    frame = t.frame
    names = ["uid", *t.columns]
    for a in range(0, frame.n, BLOB_ROWS):
        rows = np.arange(a, min(a + BLOB_ROWS, frame.n))
        yield from _node_part(t.label, frame, names, rows, ints, bools, constant)


def _node_part(
    label: str,
    frame: Table,
    names: list[str],
    rows: npt.NDArray[np.int64],
    ints: frozenset[str],
    bools: frozenset[str],
    constant: dict[str, Any],
) -> Iterator[tuple[int, bytes | memoryview]]:
    kept: list[str] = []
    cols: list[Cells] = []
    for name in names:
        col = frame.get(name)
        if col is None:
            continue
        part = take(col, rows) if len(rows) != frame.n else col
        from tracegraph.columns import present

        if not present(part).any():
            continue
        kept.append(name)
        cols.append(cells(part, name in ints, name in bools))
    const = b"".join(_value(v) for v in constant.values())
    if const:
        kept += list(constant)
        cols.append(
            (np.frombuffer(const * len(rows), dtype=np.uint8), np.arange(len(rows) + 1, dtype=np.int64) * len(const))
        )
    data = blob(header(label, kept), cols)
    if len(data) <= BLOB_BYTES or len(rows) == 1:
        yield len(rows), data
        return
    del data, cols
    half = len(rows) // 2
    yield from _node_part(label, frame, names, rows[:half], ints, bools, constant)
    yield from _node_part(label, frame, names, rows[half:], ints, bools, constant)


_ENDS = np.dtype([("src", "<u8"), ("dst", "<u8")])


def edge_blobs(
    rel_type: str,
    src: npt.NDArray[np.uint64],
    dst: npt.NDArray[np.uint64],
    props: Table | None,
    names: tuple[str, ...],
    ints: frozenset[str],
) -> Iterator[tuple[int, bytes | memoryview]]:
    """Relationships ``src[i] -> dst[i]`` (node ids) with ``props`` as blobs."""
    n = len(src)
    for a in range(0, n, BLOB_ROWS):
        b = min(a + BLOB_ROWS, n)
        ends = np.empty(b - a, dtype=_ENDS)
        ends["src"] = src[a:b]
        ends["dst"] = dst[a:b]
        raw = np.frombuffer(ends.tobytes(), dtype=np.uint8)
        if not names:
            yield b - a, header(rel_type, []) + raw.tobytes()
            continue
        assert props is not None
        rows = np.arange(a, b)
        cols: list[Cells] = [(raw, np.arange(b - a + 1, dtype=np.int64) * 16)]
        cols += [cells(take(props[c], rows), c in ints) for c in names]
        yield b - a, blob(header(rel_type, list(names)), cols)


def load_part(
    writer: Writer,
    nodes: list[NodeTable],
    rels: list[tuple[RelTable, npt.NDArray[np.uint64], npt.NDArray[np.uint64]]],
    member: dict[str, str],
    first_ids: dict[str, int],
    trace: str,
    ints: frozenset[str],
    bools: frozenset[str],
    progress: Progress | None,
    done: int,
    total: int,
) -> int:
    """Send one part: its nodes (ids from ``first_ids[label]`` on), the
    membership of each from the Trace node (id 0), then its relationships
    (ends given as ids); returns the elements done."""
    for t in nodes:
        for count, data in node_blobs(t, ints, bools, {"trace": trace}):
            writer.add_nodes(data, count)
        done += t.frame.n
        if progress:
            progress(done, total)
    for t in nodes:
        rel = member.get(t.label)
        if rel is not None and t.frame.n:
            first = first_ids[t.label]
            ids = np.arange(first, first + t.frame.n, dtype=np.uint64)
            for count, data in edge_blobs(rel, np.zeros(t.frame.n, dtype=np.uint64), ids, None, (), ints):
                writer.add_edges(data, count)
    for r, src, dst in rels:
        if not len(src):
            continue
        for count, data in edge_blobs(r.type, src, dst, r.frame, r.columns, ints):
            writer.add_edges(data, count)
        done += len(src)
        if progress:
            progress(done, total)
    return done


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
    return s.replace("\x00", NUL_SIGN).encode("utf-8", "surrogatepass")
