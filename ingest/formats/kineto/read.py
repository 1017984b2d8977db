"""Reading a Kineto (Chrome trace-event) JSON file: its events, with only
the fields and args the caller reads, and the keys around them.

A PyTorch profile can be hundreds of MB of JSON, most of it the
``traceEvents`` list, and most of each event args the graph never reads
(shapes, strides, grid sizes). :class:`EventReader` decodes a file of up to
:data:`IN_MEMORY_JSON_BYTES` (decompressed) whole, in C (msgspec), straight
into small :class:`Event` structs that hold only the named args: 3x faster
than building every event as a dict, and the unread args never become
Python objects. A larger file, or one the C decoder refuses (whose error
the stream then names), is streamed instead (ijson's yajl2_c backend
builds one event dict at a time, converted to the same struct), so memory
stays bounded by what the caller keeps. Either way numbers arrive as
``int`` or ``Decimal`` (never ``float``): Kineto writes microseconds since
the epoch (or since ``baseTimeNanoseconds``) with three decimals, e.g.
``1712195495519689.047``, which a float64 cannot hold to the nanosecond
(its spacing there is 0.25 us); :func:`ns` turns them into exact integer
nanoseconds.

The keys around ``traceEvents`` (``schemaVersion``, ``deviceProperties``,
``distributedInfo``, ``baseTimeNanoseconds``, ``displayTimeUnit``, ...) are
read too. A short token scan reads those before the list first, which also
refuses a file that is not a JSON object before anything else is read; a
whole file's decode gives the rest, a stream takes those after the list from
its last bytes (kept while the events stream by).

Every failure is an :class:`InputError` naming the file: not gzip although
gzip-compressed in name or magic, truncated or malformed JSON, no
``traceEvents`` list.
"""

from __future__ import annotations

import gzip
import io
import json
import re
import zlib
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ijson
import msgspec

from tracegraph.errors import InputError, TooLarge, first_line
from tracegraph.ingest import json_nesting
from tracegraph.ingest.formats.kit import FormatInfo, Joins
from tracegraph.ingest.limits import MAX_FILE_BYTES, GiB, human
from tracegraph.ingest.source import GZIP_MAGIC, open_binary

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

FORMAT = FormatInfo("pytorch-kineto", "pytorch", Joins.RUN, "PyTorch profiler (Kineto) Chrome trace JSON")
# The most JSON a trace may hold, decompressed (the limit of its format).
MAX_JSON_BYTES = MAX_FILE_BYTES[FORMAT.name]
# Bytes kept from the end of the stream to read the keys after traceEvents.
_TAIL_BYTES = 4 << 20
# A file whose JSON (decompressed) is at most this is decoded whole; a larger
# one is streamed (slower, but its memory is what the caller keeps).
IN_MEMORY_JSON_BYTES = 1 * GiB
# The top-level keys a trace's header may hold that tracegraph reads.
HEADER_KEYS = ("schemaVersion", "displayTimeUnit", "deviceProperties", "distributedInfo", "baseTimeNanoseconds")


def open_text(path: Path) -> io.BufferedIOBase:
    """The file's bytes, gunzipped when it starts with the gzip magic (the
    file itself within the size limit; the gunzipped stream is counted
    while it is read, see :class:`_Tail`)."""
    raw = open_binary(path, FORMAT.name)
    magic = raw.read(2)
    raw.seek(0)
    if magic == GZIP_MAGIC:
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if str(path).endswith(".gz"):
        head = raw.read(1 << 12).lstrip()
        raw.seek(0)
        if not head.startswith(b"{"):
            raw.close()
            raise InputError(path, "named .gz but not gzip-compressed (and not JSON either)")
    return raw


def _too_large(path: Path) -> TooLarge:
    return TooLarge(path, f"more than the {FORMAT.name} size limit of {human(MAX_JSON_BYTES)} of JSON (decompressed)")


class _Tail(io.RawIOBase):
    """A read-through wrapper that remembers the last bytes read and
    refuses a stream past :data:`MAX_JSON_BYTES` (a gzip file inflating to
    more than any trace) as soon as it gets there."""

    def __init__(self, inner: io.BufferedIOBase, path: Path) -> None:
        self.inner = inner
        self.path = path
        self.chunks: deque[bytes] = deque()
        self.kept = 0
        self.total = 0

    @property
    def tail(self) -> bytes:
        return b"".join(self.chunks)[-_TAIL_BYTES:]

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        data = self.inner.read(size)
        if data:
            self.total += len(data)
            if self.total > MAX_JSON_BYTES:
                raise _too_large(self.path)
            self.chunks.append(data)
            self.kept += len(data)
            while self.kept - len(self.chunks[0]) >= _TAIL_BYTES:
                self.kept -= len(self.chunks.popleft())
        return data

    def readinto(self, b: WriteableBuffer) -> int:  # pragma: no cover - ijson uses read()
        view = memoryview(b)  # b: a bytearray or memoryview, typed as a plain Buffer
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)


def _errors(path: Path) -> Callable[[BaseException], InputError]:
    """Map the low-level failures of gzip and ijson to one-line InputErrors."""

    def wrap(exc: BaseException) -> InputError:
        if isinstance(exc, (gzip.BadGzipFile, zlib.error)):
            return InputError(path, f"not a valid gzip file: {first_line(exc)}")
        if isinstance(exc, EOFError):
            return InputError(path, "gzip stream ends early (truncated file)")
        if isinstance(exc, ijson.IncompleteJSONError):
            raw = exc.args[0] if exc.args else ""
            # yajl's message comes as bytes, with the bad text quoted on the lines after it
            msg = first_line(raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw) or repr(exc))
            if "premature EOF" in msg or "incomplete" in msg.lower():
                return InputError(path, "truncated JSON (the file ends inside the trace)")
            return InputError(path, f"malformed JSON: {msg}")
        if isinstance(exc, UnicodeDecodeError):
            return InputError(path, "not UTF-8 text")
        return InputError(path, f"cannot read: {first_line(exc)}")

    return wrap


_READ_ERRORS = (gzip.BadGzipFile, zlib.error, EOFError, ijson.JSONError, UnicodeDecodeError, OSError)


def read_header(path: Path) -> dict[str, Any]:
    """The top-level keys before ``traceEvents`` (a short token scan)."""
    wrap = _errors(path)
    tokens: list[tuple[str, str, Any]] = []
    found = False
    try:
        with open_text(path) as f:
            parser = ijson.parse(f, use_float=False)
            for prefix, event, value in parser:
                if not tokens and event != "start_map":
                    raise InputError(path, 'not a JSON object (a trace is {"traceEvents": [...], ...})')
                if prefix == "" and event == "map_key" and value == "traceEvents":
                    found = True
                    if next(parser, (None, None, None))[1] != "start_array":
                        raise InputError(path, "traceEvents is not a list", "traceEvents")
                    break
                tokens.append((prefix, event, value))
    except InputError:
        raise
    except _READ_ERRORS as e:
        raise wrap(e) from None
    if not found:
        raise InputError(path, "no traceEvents list: not a Chrome/Kineto trace")
    tokens.append(("", "end_map", None))
    header: dict[str, Any] = next(ijson.items(iter(tokens), ""))
    return header


def stream_events(path: Path, trailer: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Each element of ``traceEvents`` in file order; on exhaustion
    ``trailer`` holds the top-level keys that follow the list."""
    wrap = _errors(path)
    try:
        with open_text(path) as f:
            tail = _Tail(f, path)
            yield from ijson.items(tail, "traceEvents.item", use_float=False)
            # Drain the rest so that the tail covers the end of the file and
            # a truncated end is detected.
            while tail.read(1 << 16):
                pass
    except InputError:
        raise
    except _READ_ERRORS as e:
        raise wrap(e) from None
    trailer.update(_trailing_keys(tail.tail))


class ArgsNotAnObject(ValueError):
    """An event's args are neither an object nor empty."""


class Event(msgspec.Struct):
    """One element of ``traceEvents``: the fields the graph reads, each any
    JSON value as the file has it (None when absent), and ``args``: None,
    or a struct of the :class:`EventReader`'s arg names (read it with
    :meth:`EventReader.args`)."""

    ph: Any = None
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    id: Any = None
    args: Any = None


_WHERE = re.compile(r" - at `\$(?:\.traceEvents)?(?:\[(\d+)\])?")


class EventReader:
    """Reads trace files' events keeping only the args named at creation
    (every other arg is skipped by the decoder, never built)."""

    def __init__(self, arg_names: Sequence[str]) -> None:
        self.arg_names = tuple(arg_names)
        fields = [(f"a{i}", Any, msgspec.field(default=msgspec.UNSET, name=k)) for i, k in enumerate(self.arg_names)]
        args_type = msgspec.defstruct("Args", fields)
        # An Event whose args are the struct above (a subclass: callers see an Event).
        # args of any JSON type decode (a profiler's metadata events may have
        # a string there): only the events the graph keeps need an object.
        any_args = args_type | None | list[Any] | str | bool | int | float
        self.event_type: type[Event] = msgspec.defstruct("KeptEvent", [("args", any_args, None)], bases=(Event,))  # type: ignore[assignment]
        header = [(k, msgspec.Raw | msgspec.UnsetType, msgspec.UNSET) for k in HEADER_KEYS]
        file_type = msgspec.defstruct("TraceFile", [("traceEvents", list[self.event_type]), *header])  # type: ignore[name-defined]
        self._decoder = msgspec.json.Decoder(file_type, float_hook=Decimal)

    def args(self, ev: Event, first: int | None = None) -> dict[str, Any]:
        """The event's args among the named ones (the ``first`` names only,
        when given) that the file gives, in the order named. No args, or
        empty ones of another type (``[]``, ``false``, ``""``), are none;
        other args that are not an object raise :class:`ArgsNotAnObject`."""
        if not isinstance(ev.args, msgspec.Struct):
            if ev.args:
                raise ArgsNotAnObject(ev.args)
            return {}
        values = msgspec.structs.astuple(ev.args)
        names = self.arg_names if first is None else self.arg_names[:first]
        return {k: v for k, v in zip(names, values) if v is not msgspec.UNSET}

    def read(self, path: Path) -> tuple[dict[str, Any], Sequence[Event] | Iterator[Event]]:
        """The file's top-level keys (:data:`HEADER_KEYS` it gives) and its
        events in file order: a list when the file is decoded whole, else a
        stream (the header then complete only once it is exhausted)."""
        header = read_header(path)  # also refuses what is not a JSON object, unread
        data = _whole(path)
        if data is None or (json_nesting.stack_unguarded() and json_nesting.deepest(data) > json_nesting.MAX_DEPTH):
            # (Nesting msgspec's recursion could not survive: the stream
            # builds values without recursing.)
            return header, self._stream(path, header)
        try:
            doc = self._decoder.decode(data)
            for key in HEADER_KEYS:
                raw = getattr(doc, key)
                if key not in header and raw is not msgspec.UNSET:
                    header[key] = json.loads(bytes(raw))
        except msgspec.ValidationError as e:
            raise _invalid(path, str(e)) from None
        except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
            # What the C decoder refuses, the stream reads or refuses with
            # its own one-line reason (truncated, malformed, not UTF-8), so
            # that both readers accept and refuse the same files. (msgspec
            # gives up past ~1,000 levels of nesting, even in args it skips.)
            return header, self._stream(path, header)
        del data
        events: list[Event] = getattr(doc, "traceEvents")  # noqa: B009 - a field of a struct made at run time
        return header, events

    def _stream(self, path: Path, header: dict[str, Any]) -> Iterator[Event]:
        trailer: dict[str, Any] = {}
        for i, ev in enumerate(stream_events(path, trailer)):
            try:
                yield msgspec.convert(ev, self.event_type)
            except msgspec.ValidationError as e:
                raise _invalid(path, str(e), i) from None
        for key in HEADER_KEYS:
            if key not in header and key in trailer:
                header[key] = trailer[key]


def _invalid(path: Path, msg: str, index: int | None = None) -> InputError:
    """A decoder's complaint about the file's shape as a one-line error
    naming the event (``index``: the event's, when ``msg`` is about it alone)."""
    found = _WHERE.search(msg)
    at = found[1] if found else None
    if index is not None:
        at = str(index)
    if "missing required field" in msg:
        return InputError(path, "no traceEvents list: not a Chrome/Kineto trace")
    if at is None:
        return InputError(path, "traceEvents is not a list", "traceEvents")
    return InputError(path, "an event is not a JSON object", f"traceEvents[{at}]")


def _whole(path: Path) -> bytearray | None:
    """The file's JSON when it is at most :data:`IN_MEMORY_JSON_BYTES`, else
    None. Read in chunks into one growing buffer: no buffer of the limit's
    size up front, and never the chunks and their join at once."""
    data = bytearray()
    try:
        with open_text(path) as f:
            while chunk := f.read(16 << 20):
                data += chunk
                if len(data) > MAX_JSON_BYTES:
                    raise _too_large(path)
                if len(data) > IN_MEMORY_JSON_BYTES:
                    return None
    except _READ_ERRORS as e:
        raise _errors(path)(e) from None
    return data


def _trailing_keys(tail: bytes) -> dict[str, Any]:
    """The keys after the traceEvents list, from the stream's last bytes.

    The list ends at a ``]`` after which the rest of the text is the tail of
    an object (``, "k": v ... }`` or ``}``). The first ``]`` whose rest
    parses that way is the list's end: a ``]`` inside the last event is
    followed by that event's closing brace and then the list's ``]``, which
    never parses as an object's tail. Parsing works in place (no copies of
    the rest), so each wrong candidate costs only the text up to its error.
    """
    text = tail.decode("utf-8", errors="replace")
    end = len(text.rstrip())
    pos = text.find("]")
    while pos >= 0:
        found = _object_tail(text, pos + 1, end)
        if found is not None:
            return found
        pos = text.find("]", pos + 1)
    return {}


_DECODER = json.JSONDecoder()
_WS = " \t\n\r"


def _object_tail(text: str, i: int, end: int) -> dict[str, Any] | None:
    """``text[i:]`` as the rest of an object after a value (``, "k": v}``
    or ``}``) followed by nothing but whitespace; None otherwise."""
    out: dict[str, Any] = {}
    n = len(text)
    while True:
        while i < n and text[i] in _WS:
            i += 1
        if i >= n:
            return None
        if text[i] == "}":
            return out if i + 1 == end else None
        if text[i] != ",":
            return None
        i += 1
        while i < n and text[i] in _WS:
            i += 1
        if i >= n or text[i] != '"':
            return None
        try:
            key, i = _DECODER.raw_decode(text, i)
            while i < n and text[i] in _WS:
                i += 1
            if i >= n or text[i] != ":":
                return None
            i += 1
            while i < n and text[i] in _WS:
                i += 1
            value, i = _DECODER.raw_decode(text, i)
        except (ValueError, RecursionError):  # (no header key nests a thousand levels deep)
            return None
        out[key] = value


_THOUSAND = Decimal(1000)


def ns(value: object) -> int:
    """Microseconds as read from the file -> integer nanoseconds, exactly
    (half-even at the nanosecond for values with more than three decimals)."""
    if isinstance(value, bool):
        raise TypeError("boolean")
    if isinstance(value, int):
        return value * 1000
    if isinstance(value, Decimal):
        return int((value * _THOUSAND).to_integral_value(ROUND_HALF_EVEN))
    if isinstance(value, float):
        return round(Decimal(repr(value)) * _THOUSAND)
    if isinstance(value, str):
        try:
            return ns(Decimal(value))
        except InvalidOperation:
            raise TypeError("text") from None
    raise TypeError(type(value).__name__)
