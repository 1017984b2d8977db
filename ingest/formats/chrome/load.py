"""Reading a Chrome Trace Event file into its events and the keys around them.

The format has two forms: the JSON object (``{"traceEvents": [...],
"displayTimeUnit": "ns", ...}``) and the bare JSON array of events. Real
writers leave files that a strict JSON reader refuses, and the format
allows some of it: a trace being written (or cut by a crashed process) may
lack the closing ``]`` (``]}`` in the object form), and writers end the
list with a trailing ``,`` or an empty ``{}`` event (JAX, PaddlePaddle). So
a file a strict decode refuses as *truncated* is read once more with its
trailing commas dropped and the list (and object) closed; a file that
still does not decode, an event cut in half, is refused, naming the byte.

Numbers are decoded exactly: a float as :class:`~decimal.Decimal`, so that
a timestamp of microseconds since the epoch with fractions
(``1712195495519689.047``) reaches integer nanoseconds unrounded (a
float64's spacing there is 0.25 us).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import msgspec

from tracegraph.errors import InputError
from tracegraph.ingest import json_nesting, source

# The format's name: the key of its size limit.
FORMAT_NAME = "chrome-trace"

_DECODER = msgspec.json.Decoder(float_hook=Decimal)


@dataclass
class Document:
    """A decoded trace: its events in file order and, for the object form,
    every other top-level key (``displayTimeUnit``, ``metadata``, a
    producer's own keys)."""

    events: list[Any]
    keys: dict[str, Any] = field(default_factory=dict)
    repaired: str = ""  # what was added to close an unterminated file ("" when none)


def load(path: Path) -> Document:
    """The file's events (one-line InputError for what is not a trace)."""
    data = source.read_content(path, FORMAT_NAME)
    text = data.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not text:
        raise InputError(path, "empty file")
    if text[:1] not in (b"{", b"["):
        raise InputError(path, "not Chrome trace JSON: neither a JSON object nor an array", "line 1")
    json_nesting.check(path, text)
    try:
        doc, repaired = _decode(path, data, text)
    except RecursionError:  # pragma: no cover - check() refuses it first
        raise InputError(path, "JSON nested too deeply") from None
    if isinstance(doc, list):
        return Document(doc, {}, repaired)
    if not isinstance(doc, dict):  # pragma: no cover - the first byte says object or array
        raise InputError(path, "not Chrome trace JSON")
    events = doc.pop("traceEvents", None)
    if events is None:
        raise InputError(path, "a JSON object without a traceEvents list")
    if not isinstance(events, list):
        raise InputError(path, f"traceEvents is a {_kind(events)}, not a list")
    return Document(events, doc, repaired)


def _decode(path: Path, data: bytes, text: bytes) -> tuple[Any, str]:
    try:
        return _DECODER.decode(text), ""
    except msgspec.DecodeError as e:
        if "truncated" not in str(e):
            raise _malformed(path, data, e) from None
        first = e
    closers = ("]",) if text[:1] == b"[" else ("]}", "}")
    body = text.rstrip(b" \t\r\n,")
    for closer in closers:
        try:
            return _DECODER.decode(body + closer.encode()), closer
        except msgspec.DecodeError:
            continue
    raise InputError(path, f"truncated JSON: the file ends inside an event or value ({first})") from None


def _malformed(path: Path, data: bytes, e: msgspec.DecodeError) -> InputError:
    """The decoder's complaint, with the line and column of its byte."""
    message = str(e)
    where = ""
    if "(byte " in message:
        try:
            offset = int(message.rsplit("(byte ", 1)[1].rstrip(")"))
        except ValueError:
            offset = -1
        if offset >= 0:
            lead = len(data) - len(data.lstrip(b"\xef\xbb\xbf \t\r\n"))
            before = data[: lead + offset]
            line = before.count(b"\n") + 1
            column = len(before) - (before.rfind(b"\n") + 1) + 1
            where = f"line {line} column {column}"
            message = message.rsplit(" (byte ", 1)[0]
    return InputError(path, f"not JSON: {message}", where)


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "JSON object"
    return "string" if isinstance(value, str) else "number or constant"
