"""Columns in numpy memory: the tables ingest builds and the loaders write.

A trace is a few hundred thousand rows whose strings repeat (op names,
kernel names, threads) or are long and unique (an op's attrs, its uid);
kept as Python objects they cost ~60 bytes and a reference count each,
and every pass over them is a Python loop. Here a column is one of:

* a numpy array: float64 (NaN: no value), int64, bool; an ``int`` or
  ``bool`` column of :mod:`tracegraph.schema` that has missing values is
  kept as float64 with NaN, and written as integers (booleans);
* :class:`Strings`: strings as dictionary codes (``codes[i]`` indexes
  ``values``; -1: no value), for strings that repeat;
* :class:`Texts`: strings as one UTF-8 buffer and offsets, for strings
  that do not (uids, attrs);
* :class:`Lists`: a list per row as offsets into one values column
  (a numpy array or :class:`Strings`); ``present`` False: no list.

Passes over them are numpy operations or compiled kernels; Python objects
are made once per distinct string, or at the edge (a driver's parameters).
A :class:`Table` is named columns of one length.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
# Array types the compiled kernels take (their annotations).
U8 = npt.NDArray[np.uint8]
U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
B = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class Strings:
    """Repeating strings: row i is ``values[codes[i]]``, or no value where ``codes[i] < 0``."""

    codes: npt.NDArray[np.int32]
    values: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.codes)

    @staticmethod
    def of(items: Sequence[str | None]) -> Strings:
        """Strings from Python values (None: no value)."""
        index: dict[str, int] = {}
        codes = np.fromiter(
            (-1 if v is None else index.setdefault(v, len(index)) for v in items), dtype=np.int32, count=len(items)
        )
        return Strings(codes, tuple(index))

    @staticmethod
    def constant(value: str | None, n: int) -> Strings:
        if value is None:
            return Strings(np.full(n, -1, dtype=np.int32), ())
        return Strings(np.zeros(n, dtype=np.int32), (value,))

    def take(self, rows: npt.NDArray[np.integer[Any]]) -> Strings:
        """The rows at ``rows`` (-1: no value)."""
        rows = np.asarray(rows, dtype=np.int64)
        codes = np.where(rows >= 0, self.codes[np.maximum(rows, 0)] if len(self.codes) else -1, -1)
        return Strings(codes.astype(np.int32), self.values)

    def tolist(self) -> list[str | None]:
        table = np.array([*self.values, None], dtype=object)
        return table[np.where(self.codes < 0, len(self.values), self.codes)].tolist()  # type: ignore[no-any-return]

    def present(self) -> npt.NDArray[np.bool_]:
        return self.codes >= 0


@dataclass(frozen=True)
class Texts:
    """Strings that do not repeat: row i is ``data[offsets[i]:offsets[i + 1]]``
    decoded as UTF-8, or no value where ``missing[i]``."""

    data: npt.NDArray[np.uint8]
    offsets: IntArray
    missing: npt.NDArray[np.bool_] | None = None

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @staticmethod
    def of(items: Sequence[str | None]) -> Texts:
        encoded = [b"" if v is None else v.encode("utf-8", "surrogatepass") for v in items]
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        if encoded:
            np.cumsum([len(b) for b in encoded], out=offsets[1:])
        missing = np.fromiter((v is None for v in items), dtype=bool, count=len(items))
        return Texts(np.frombuffer(b"".join(encoded), dtype=np.uint8), offsets, missing if missing.any() else None)

    def tolist(self) -> list[str | None]:
        """The strings (one decode of the whole buffer, cut at the offsets)."""
        n = len(self)
        if n == 0:
            return []
        text = bytes(self.data[: self.offsets[-1]]).decode("utf-8", "surrogatepass")
        if text.isascii():  # byte offsets are character offsets
            off = self.offsets.tolist()
            out: list[str | None] = [text[off[i] : off[i + 1]] for i in range(n)]
        else:
            raw = bytes(self.data[: self.offsets[-1]])
            off = self.offsets.tolist()
            out = [raw[off[i] : off[i + 1]].decode("utf-8", "surrogatepass") for i in range(n)]
        if self.missing is not None:
            for i in np.flatnonzero(self.missing).tolist():
                out[i] = None
        return out

    def present(self) -> npt.NDArray[np.bool_]:
        return np.ones(len(self), dtype=bool) if self.missing is None else ~self.missing


@dataclass(frozen=True)
class Lists:
    """A list per row: row i is ``values[offsets[i]:offsets[i + 1]]``, no
    list where not ``present[i]``."""

    offsets: IntArray
    values: npt.NDArray[Any] | Strings
    present_rows: npt.NDArray[np.bool_]

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def tolist(self) -> list[list[Any] | None]:
        flat = self.values.tolist()
        off = self.offsets.tolist()
        return [flat[off[i] : off[i + 1]] if p else None for i, p in enumerate(self.present_rows.tolist())]

    def present(self) -> npt.NDArray[np.bool_]:
        return self.present_rows

    @staticmethod
    def of(items: Sequence[Sequence[Any] | None], dtype: Any) -> Lists:
        lengths = [0 if v is None else len(v) for v in items]
        offsets = np.zeros(len(items) + 1, dtype=np.int64)
        if items:
            np.cumsum(lengths, out=offsets[1:])
        flat = [x for v in items if v is not None for x in v]
        values: npt.NDArray[Any] | Strings = Strings.of(flat) if dtype is str else np.asarray(flat, dtype=dtype)
        return Lists(offsets, values, np.fromiter((v is not None for v in items), dtype=bool, count=len(items)))


Column = npt.NDArray[Any] | Strings | Texts | Lists


def present(column: Column) -> npt.NDArray[np.bool_]:
    """Which rows have a value."""
    if isinstance(column, np.ndarray):
        if column.dtype.kind == "f":
            return ~np.isnan(column)
        if column.dtype.kind == "O":
            return np.fromiter((v is not None for v in column.tolist()), dtype=bool, count=len(column))
        return np.ones(len(column), dtype=bool)
    return column.present()


def values(column: Column) -> list[Any]:
    """The column as Python values (None: no value)."""
    if isinstance(column, np.ndarray):
        if column.dtype.kind == "f":
            out = column.tolist()
            for i in np.flatnonzero(np.isnan(column)).tolist():
                out[i] = None
            return out  # type: ignore[no-any-return]
        return column.tolist()  # type: ignore[no-any-return]
    return column.tolist()


def take(column: Column, rows: npt.NDArray[np.integer[Any]]) -> Column:
    """The rows of ``column`` at ``rows`` (all >= 0)."""
    idx: I64 = np.asarray(rows, dtype=np.int64)
    if isinstance(column, np.ndarray):
        out: npt.NDArray[Any] = column[idx]
        return out
    if isinstance(column, Strings):
        return Strings(column.codes[idx], column.values)
    if isinstance(column, Texts):
        data, offsets = _gather(column.data, column.offsets, idx)
        return Texts(data, offsets, None if column.missing is None else column.missing[idx])
    rows = idx
    data_rows, offsets = _list_rows(column.offsets, rows)
    vals = column.values
    taken: npt.NDArray[Any] | Strings = (
        Strings(vals.codes[data_rows], vals.values) if isinstance(vals, Strings) else vals[data_rows]
    )
    return Lists(offsets, taken, column.present_rows[rows])


def _gather(data: npt.NDArray[np.uint8], offsets: IntArray, rows: IntArray) -> tuple[npt.NDArray[np.uint8], IntArray]:
    lengths = offsets[rows + 1] - offsets[rows]
    out_offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lengths, out=out_offsets[1:])
    if len(rows) < _COPY_ROWS_MIN:  # (a few rows: not worth loading the compiled copy)
        return data[_ranges(offsets[rows], lengths)], out_offsets
    copy_rows = _compiled_copy_rows()
    return copy_rows(read_only(data), offsets.astype(np.int64, copy=False), rows, out_offsets), out_offsets


# From how many rows a text column's rows are copied by the compiled loop
# (an index of every byte costs 8 bytes a byte and a pass more).
_COPY_ROWS_MIN = 256


def _copy_rows(
    data: npt.NDArray[np.uint8], offsets: I64, rows: I64, out_offsets: I64
) -> npt.NDArray[np.uint8]:  # pragma: no cover - compiled
    """The bytes of rows ``rows`` of a text column, one after the other."""
    out = np.empty(out_offsets[-1], dtype=np.uint8)
    for i in range(len(rows)):
        a = offsets[rows[i]]
        out[out_offsets[i] : out_offsets[i + 1]] = data[a : a + out_offsets[i + 1] - out_offsets[i]]
    return out


@functools.cache
def _compiled_copy_rows() -> Callable[[npt.NDArray[np.uint8], I64, I64, I64], npt.NDArray[np.uint8]]:
    """:func:`_copy_rows` compiled, once it is first needed (this module is
    also read by front ends that never load a kernel)."""
    return kernel(_copy_rows)


def _list_rows(offsets: IntArray, rows: IntArray) -> tuple[IntArray, IntArray]:
    lengths = offsets[rows + 1] - offsets[rows]
    out_offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lengths, out=out_offsets[1:])
    return _ranges(offsets[rows], lengths), out_offsets


def _ranges(starts: IntArray, lengths: IntArray) -> IntArray:
    """The concatenation of ``range(s, s + n)`` for each (s, n), vectorized."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(lengths)
    base = np.repeat(starts - (ends - lengths), lengths)
    return base + np.arange(total, dtype=np.int64)


@dataclass
class Table:
    """Named columns of one length (``n``)."""

    n: int
    columns: dict[str, Column] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Column:
        return self.columns[name]

    def __setitem__(self, name: str, column: Column) -> None:
        if len(column) != self.n:
            raise ValueError(f"column {name!r} has {len(column)} rows, the table {self.n}")
        self.columns[name] = column

    def __contains__(self, name: object) -> bool:
        return name in self.columns

    def __iter__(self) -> Iterator[str]:
        return iter(self.columns)

    def __len__(self) -> int:
        return self.n

    def get(self, name: str) -> Column | None:
        return self.columns.get(name)

    def take(self, rows: npt.NDArray[np.integer[Any]]) -> Table:
        rows = np.asarray(rows, dtype=np.int64)
        return Table(len(rows), {k: take(c, rows) for k, c in self.columns.items()})

    def where(self, mask: npt.NDArray[np.bool_]) -> Table:
        return self.take(np.flatnonzero(mask))


def distinct(codes: npt.NDArray[np.integer[Any]]) -> tuple[I64, I64]:
    """``np.unique(codes, return_inverse=True)``: the distinct codes
    ascending, and each row's place among them. Codes (dictionary codes,
    pairs of them) range over little more than the rows, so marking which
    occur costs O(rows + range) instead of a sort's O(rows log rows): 10x
    faster on a rank's ops. Negative codes, or a range much larger than the
    rows, are sorted as ``np.unique`` does."""
    c = np.asarray(codes, dtype=np.int64).reshape(-1)
    if len(c) == 0 or c.min() < 0 or c.max() >= 4 * len(c) + 4096:
        uniq, inverse = np.unique(c, return_inverse=True)
        return uniq.astype(np.int64), inverse.reshape(-1).astype(np.int64)
    seen = np.zeros(int(c.max()) + 1, dtype=np.bool_)
    seen[c] = True
    place = np.cumsum(seen, dtype=np.int64) - 1
    return np.flatnonzero(seen).astype(np.int64), place[c]


def first_rows(inverse: I64, groups: int) -> I64:
    """The first row of each of ``groups`` groups, rows given their group (every group has one)."""
    first = np.full(groups, len(inverse), dtype=np.int64)
    np.minimum.at(first, inverse, np.arange(len(inverse), dtype=np.int64))
    return first


def labelled(codes: npt.NDArray[np.integer[Any]], labels: Sequence[str | None]) -> Strings:
    """Strings whose row i is ``labels[codes[i]]`` (``codes[i] < 0`` or a None
    label: no value), with each distinct label once in the dictionary."""
    index: dict[str, int] = {}
    remap = np.asarray([-1 if s is None else index.setdefault(s, len(index)) for s in labels] + [-1], dtype=np.int32)
    c = np.asarray(codes, dtype=np.int64)
    return Strings(remap[np.where(c < 0, len(labels), c)], tuple(index))


F = TypeVar("F", bound=Callable[..., Any])


def kernel(fn: F) -> F:
    """``fn`` compiled by numba: a per-row loop at C speed, run without
    holding the GIL (two threads run two kernels at once) and cached on
    disk beside its module (the first use in a fresh install compiles it).
    Its annotations are for readers and mypy; numba types it from its
    arguments. The compiler's own code is not kept resident between loads
    (:mod:`tracegraph.compiler_pages`)."""
    from numba import njit

    from tracegraph import compiler_pages

    compiler_pages.release_after_each_load()
    return cast(F, njit(cache=True, nogil=True)(fn))


def read_only(data: U8) -> U8:
    """A read-only view of ``data``, for a kernel's byte buffer: numba
    compiles a kernel once per kind of array it is given, and bytes read
    from a file arrive read-only while arrays made in memory are writable,
    so without this a kernel is compiled twice (seconds each, on a
    machine's first traces)."""
    view = data.view()
    view.flags.writeable = False
    return view
