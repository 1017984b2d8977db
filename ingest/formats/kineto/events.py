"""A Kineto trace file's events as columns (:class:`RankEvents`).

The file is decompressed in pieces and its ``traceEvents`` list scanned
by compiled code (:mod:`.scan`), so that memory stays what the columns
take and no Python object is made per event. A file the scanner does not
read exactly as the decoders of :mod:`.read` would (see :mod:`.scan`) is
read by them instead, event by event, into the same columns: the same
rows, or the same one-line error.

Times are absolute integer nanoseconds (``baseTimeNanoseconds`` added).
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt

from tracegraph.columns import Texts
from tracegraph.errors import InputError
from tracegraph.ingest.formats.kineto import read as kineto_read
from tracegraph.ingest.formats.kineto import scan
from tracegraph.ingest.formats.kineto.scan import V_CODE, V_INT, V_NONE
from tracegraph.ingest.source import GZIP_MAGIC

# Bytes decompressed (or read) per piece the scanner sees.
PIECE_BYTES = 4 << 20
# The most a deflate stream inflates: 258 bytes from each 2 bits, about 1032 to 1.
_MAX_DEFLATE_RATIO = 1032


@dataclass
class RankEvents:
    """One file's events, as :mod:`.scan`'s tables (rows in file order):
    ``ops`` host spans, ``devs`` device spans, ``syncs`` cuda_sync
    records, ``mems`` [memory] records, ``flows`` ac2g flows; a field
    that holds a value is two columns, its kind (:data:`~.scan.V_INT`:
    the value is the integer; :data:`~.scan.V_CODE`: a code into
    ``values``, the decoded values) and value. ``names`` and
    ``categories`` (lowercased) are the decoded dictionaries of names and
    of skipped span categories."""

    path: Path
    header: dict[str, Any]
    events: int
    ops: npt.NDArray[np.int64]
    devs: npt.NDArray[np.int64]
    syncs: npt.NDArray[np.int64]
    mems: npt.NDArray[np.int64]
    flows: npt.NDArray[np.int64]
    attrs: Texts
    names: list[str]
    values: list[Any]
    skipped: dict[str, int] = field(default_factory=dict)

    def value(self, kind: int, v: int) -> Any:
        """One field's value as the decoders give it (None: absent or null)."""
        if kind == V_INT:
            return v
        if kind == V_CODE:
            return self.values[v]
        return None


def read(path: Path) -> RankEvents:
    """The file's events (see the module docstring)."""
    header = kineto_read.read_header(path)  # refuses what is not a trace, before anything else is read
    scanned = _scan(path, header)
    if scanned is None:
        scanned = _decoded(path, header)
    base = scanned.header.get("baseTimeNanoseconds")
    if base is not None:
        if not isinstance(base, int) or isinstance(base, bool):
            raise InputError(path, "baseTimeNanoseconds is not an integer", "baseTimeNanoseconds")
        for table, columns in (
            (scanned.ops, (scan.O_TS, scan.O_END)),
            (scanned.devs, (scan.D_TS, scan.D_END)),
            (scanned.syncs, (scan.S_TS, scan.S_END)),
            (scanned.mems, (scan.M_TS,)),
            (scanned.flows, (scan.F_TS,)),
        ):
            for c in columns:
                table[:, c] += base
    return scanned


def _pieces(path: Path) -> Iterator[bytes]:
    """The file's JSON text in pieces, gunzipped when it is gzip (counted
    against the format's limit while it is read)."""
    total = 0
    with kineto_read.open_text(path) as f:
        while piece := f.read(PIECE_BYTES):
            total += len(piece)
            if total > kineto_read.MAX_JSON_BYTES:
                raise kineto_read._too_large(path)
            yield piece


def _text_bytes(path: Path) -> int:
    """The size of the file's JSON text, as far as it is known before
    reading it: a gzip file's own record of it (its last 4 bytes: the last
    member's size modulo 4 GiB), else the file's size. An estimate only,
    and the file's word: at most what deflate can inflate the file to
    (1032 to 1) and the format's limit."""
    try:
        with path.open("rb") as f:
            if f.read(2) != GZIP_MAGIC:
                return path.stat().st_size
            f.seek(-4, 2)
            said = int.from_bytes(f.read(4), "little")
            return min(said, _MAX_DEFLATE_RATIO * path.stat().st_size, kineto_read.MAX_JSON_BYTES)
    except OSError:
        return 0


def _scan(path: Path, header: dict[str, Any]) -> RankEvents | None:
    """The events by :func:`scan.scan`, or None: read them the old way."""
    cols = scan.Columns()
    buf = np.zeros(0, dtype=np.uint8)
    pos = -1  # where the list's events start in buf (-1: not found yet)
    index = 0
    tail = b""
    whole, read, reserved = _text_bytes(path), 0, False
    try:
        pieces = _pieces(path)
        final = False
        while not final:
            piece = next(pieces, None)
            final = piece is None
            if not reserved and int(cols.n[:5].sum()):
                reserved = True  # once: the first piece's rows, scaled to the whole text (a margin for skew)
                if whole > 2 * read:  # at most 64x: a gzip trailer is the file's word, not a fact
                    cols.reserve(min(1.2 * whole / read, 64.0))
            if piece is not None:
                read += len(piece)
                buf = (
                    np.concatenate([buf, np.frombuffer(piece, dtype=np.uint8)])
                    if len(buf)
                    else np.frombuffer(piece, dtype=np.uint8)
                )
            if pos < 0:
                pos = scan.events_start(buf, len(buf))
                if pos == -2 or (pos == -1 and final):
                    return None
                if pos == -1:
                    continue
            status, at, index, _ = scan.run(cols, buf, pos, len(buf), final, index)
            if status == scan.FALLBACK:
                return None
            if status == scan.DONE:
                tail = bytes(buf[at:]) + b"".join(pieces)
                break
            buf = buf[at:].copy()
            pos = 0
        else:
            return None
    except (OSError, EOFError, zlib.error):
        return None  # the old reader names what is wrong with the file
    trailer = kineto_read._object_tail(
        tail.decode("utf-8", "replace"), 0, len(tail.decode("utf-8", "replace").rstrip())
    )
    if trailer is None:
        return None
    for key in kineto_read.HEADER_KEYS:
        if key not in header and key in trailer:
            header[key] = trailer[key]
    n = cols.n.tolist()
    names = _decoded_names(cols.names.texts())
    name_codes = _merge_codes(names)
    for name, rows in (("ops", n[0]), ("devs", n[1]), ("syncs", n[2]), ("mems", n[3]), ("flows", n[4])):
        cols.resize(name, (rows, getattr(cols, name).shape[1]))
    cols.resize("attrs", (n[6],))
    cols.resize("attr_offsets", (n[0] + 1,))
    ops, devs = cols.ops, cols.devs
    if name_codes is not None:
        ops[:, scan.O_NAME] = name_codes[0][ops[:, scan.O_NAME]]
        devs[:, scan.D_NAME] = name_codes[0][devs[:, scan.D_NAME]]
        names = name_codes[1]
    values = [json.loads(t, parse_float=Decimal) for t in cols.values.texts()]
    cats = [t.decode("utf-8") for t in cols.cats.texts()]
    skipped: dict[str, int] = {}
    for code in np.flatnonzero(cols.skipped).tolist():
        skipped[cats[code]] = skipped.get(cats[code], 0) + int(cols.skipped[code])
    attrs = Texts(cols.attrs, cols.attr_offsets)
    return RankEvents(
        path,
        header,
        index,
        ops,
        devs,
        cols.syncs,
        cols.mems,
        cols.flows,
        attrs,
        names,
        values,
        skipped,
    )


def _decoded_names(raw: list[bytes]) -> list[str]:
    """Names as the scanner kept them (a string's text between its quotes) decoded."""
    return [t.decode("utf-8") if b"\\" not in t else json.loads(b'"' + t + b'"') for t in raw]


def _merge_codes(names: list[str]) -> tuple[npt.NDArray[np.int64], list[str]] | None:
    """Codes of names spelled differently in the file (escapes) that are
    the same name, merged: (old code -> new code, the names); None when
    every name is spelled once."""
    first: dict[str, int] = {}
    remap = [first.setdefault(s, len(first)) for s in names]
    if len(first) == len(names):
        return None
    return np.asarray(remap, dtype=np.int64), list(first)


# --- the old way: the decoders of .read, event by event -------------------------------------------

_READER = kineto_read.EventReader(scan.ARGS)
_N_KEPT = len(scan.KEPT_ARGS)
_HOST_SHOWN = {"operator": "cpu_op", "runtime": "cuda_runtime"}


class _Values:
    """Values to (kind, value) the way the scanner makes them."""

    def __init__(self) -> None:
        self.codes: dict[Any, int] = {}
        self.values: list[Any] = []

    def __call__(self, v: Any, present: bool = True) -> tuple[int, int]:
        if not present:
            return V_NONE, 0
        if type(v) is int and -(10**18) < v < 10**18:
            return V_INT, v
        key = (type(v).__name__, v) if not isinstance(v, (list, dict)) else ("json", json.dumps(v, default=str))
        code = self.codes.get(key)
        if code is None:
            code = self.codes[key] = len(self.values)
            self.values.append(v)
        return V_CODE, code


def _decoded(path: Path, header: dict[str, Any]) -> RankEvents:
    """The events read by :class:`.read.EventReader` (refusing what it refuses)."""
    header, events = _READER.read(path)
    names: dict[str, int] = {}
    value = _Values()
    ops: list[list[int]] = []
    attrs: list[str] = []
    devs: list[list[int]] = []
    syncs: list[list[int]] = []
    mems: list[list[int]] = []
    flows: list[list[int]] = []
    skipped: dict[str, int] = {}
    host = {c: i for i, c in enumerate(scan.HOST_CATEGORIES)}
    device = {c: i for i, c in enumerate(scan.DEVICE_CATEGORIES)}
    count = 0
    for i, ev in enumerate(events):
        count = i + 1
        ph = ev.ph
        if ph is None:
            raise InputError(path, "event has no ph (phase)", _where(i))
        if ph == "X":
            cat = "" if ev.cat is None else str(ev.cat).lower()
            if cat not in host and cat not in device and cat != scan.SYNC_CATEGORY:
                skipped[cat] = skipped.get(cat, 0) + 1
                continue
            start = _time(path, ev, "ts", i)
            dur = _time(path, ev, "dur", i)
            if dur < 0:
                raise InputError(path, f"negative duration {ev.dur} for {ev.name!r}", _where(i))
            name = names.setdefault("" if ev.name is None else str(ev.name), len(names))
            if cat in host:
                args = _args(path, i, ev, _N_KEPT)
                shown = _HOST_SHOWN.get(cat, cat)
                attrs.append(_attrs_json({"category": shown, "pid": ev.pid, "tid": ev.tid, **args}))
                ops.append(
                    [
                        i,
                        name,
                        host[cat],
                        *value(ev.pid),
                        *value(ev.tid),
                        start,
                        start + dur,
                        *value(args.get("correlation"), "correlation" in args),
                    ]
                )
                continue
            args = _args(path, i, ev)
            row = np.zeros(scan.D_FIELDS if cat in device else scan.S_FIELDS, dtype=object)
            row[scan.X_INDEX] = i
            row[scan.X_TS], row[scan.X_END] = start, start + dur
            _put(row, scan.X_DEV, value(args.get("device", ev.pid)))
            _put(row, scan.X_CORR, value(args.get("correlation"), "correlation" in args))
            if cat in device:
                row[scan.D_NAME], row[scan.D_CAT] = name, device[cat]
                _put(row, scan.X_STREAM, value(args.get("stream", ev.tid)))
                for col, k in (
                    (scan.D_BYTES, "bytes"),
                    (scan.D_COLL, "Collective name"),
                    (scan.D_GROUP, "Process Group Name"),
                    (scan.D_RANKS, "Process Group Ranks"),
                ):
                    _put(row, col, value(args.get(k), k in args))
                devs.append(row.tolist())
            else:
                kind = args["cuda_sync_kind"] if "cuda_sync_kind" in args else ("" if ev.name is None else str(ev.name))
                _put(row, scan.X_STREAM, value(args.get("stream"), "stream" in args))
                _put(row, scan.S_KIND, value(kind))
                _put(row, scan.S_WSTREAM, value(args.get("wait_on_stream"), "wait_on_stream" in args))
                key = "wait_on_cuda_event_record_corr_id"
                _put(row, scan.S_WREC, value(args.get(key), key in args))
                syncs.append(row.tolist())
        elif ph == "i" or ph == "I":
            if ev.name != "[memory]":
                continue
            t = _time(path, ev, "ts", i)
            args = _args(path, i, ev)
            if "Bytes" not in args:
                raise InputError(path, "[memory] record without Bytes", _where(i))
            mems.append(
                [
                    i,
                    *value(ev.pid),
                    *value(ev.tid),
                    t,
                    *(
                        x
                        for k in ("Bytes", "Addr", "Total Allocated", "Device Type", "Device Id")
                        for x in value(args.get(k), k in args)
                    ),
                ]
            )
        elif ph in ("s", "f") and ev.cat == "ac2g":
            t = _time(path, ev, "ts", i)
            flows.append([i, 1 if ph == "f" else 0, *value(ev.pid), *value(ev.tid), t, *value(ev.id)])
    return RankEvents(
        path,
        header,
        count,
        _rows(ops, scan.O_FIELDS),
        _rows(devs, scan.D_FIELDS),
        _rows(syncs, scan.S_FIELDS),
        _rows(mems, scan.M_FIELDS),
        _rows(flows, scan.F_FIELDS),
        Texts.of(attrs),
        list(names),
        value.values,
        skipped,
    )


def _put(row: npt.NDArray[Any], col: int, kind_value: tuple[int, int]) -> None:
    """A field's (kind, value) into columns (col, col + 1) of ``row``."""
    row[col], row[col + 1] = kind_value


def _rows(rows: list[list[int]], width: int) -> npt.NDArray[np.int64]:
    return np.asarray(rows, dtype=np.int64).reshape(len(rows), width)


def _args(path: Path, i: int, ev: kineto_read.Event, first: int | None = None) -> dict[str, Any]:
    try:
        return _READER.args(ev, first)
    except kineto_read.ArgsNotAnObject:
        raise InputError(path, "args is not an object", _where(i)) from None


def _time(path: Path, ev: kineto_read.Event, key: str, i: int) -> int:
    value = getattr(ev, key)
    if value is None:
        raise InputError(path, f"{ev.name if ev.name is not None else 'event'!r} has no {key}", _where(i))
    try:
        return kineto_read.ns(value)
    except TypeError:
        raise InputError(path, f"{key} is not a number: {value!r}", _where(i)) from None


def _where(i: int) -> str:
    return f"traceEvents[{i}]"


# One encoder for every op's attrs (numbers the reader kept as Decimal are
# written as strings, anything else unusual as its str): the scanner writes
# what this writes.
_ATTRS_ENCODER = msgspec.json.Encoder(enc_hook=str)


def _attrs_json(attrs: dict[str, Any]) -> str:
    try:
        return _ATTRS_ENCODER.encode(attrs).decode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate escape (\ud800) in a name: json writes it escaped
        return json.dumps(attrs, default=str)
