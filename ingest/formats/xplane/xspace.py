"""An ``XSpace`` (tsl/profiler/protobuf/xplane.proto) as plain dataclasses.

The profiler of TensorFlow 2 and JAX saves one XSpace per host: planes
(``/host:CPU``, ``/device:GPU:0``, ``/host:metadata``, ``Task
Environment``...), each with lines (a thread, a GPU stream), each with
events; an event's name and its constant stats live once in the plane's
``event_metadata`` (by id), and every stat names its kind by an id into the
plane's ``stat_metadata``. Field numbers (package tensorflow.profiler):

* ``XSpace``: planes 1, errors 2, warnings 3, hostnames 4;
* ``XPlane``: id 1, name 2, lines 3, event_metadata 4 (map int64 ->
  XEventMetadata: an entry's key 1, value 2), stat_metadata 5 (map int64 ->
  XStatMetadata), stats 6;
* ``XLine``: id 1, name 2, timestamp_ns 3, events 4, duration_ps 9,
  display_id 10, display_name 11;
* ``XEvent``: metadata_id 1, offset_ps 2 or num_occurrences 5 (a oneof:
  the last one given counts), duration_ps 3, stats 4;
* ``XStat``: metadata_id 1, then one of double_value 2 (64-bit),
  uint64_value 3, int64_value 4, str_value 5, bytes_value 6, ref_value 7
  (the id of a stat metadata whose *name* is the value: how the profiler
  stores repeated strings such as ``hlo_op`` once);
* ``XEventMetadata``: id 1, name 2, metadata 3 (bytes, not read),
  display_name 4, stats 5, child_id 6 (not read);
* ``XStatMetadata``: id 1, name 2, description 3.

Fields not listed are skipped, as protobuf readers do (newer profilers add
fields); a listed field with another wire type is an error: it is what a
different protobuf (a StepStats, a RunMetadata) looks like when read as
this one. Nothing is interpreted here; :mod:`.trace` decides what becomes
what.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from tracegraph.ingest.formats.xplane.wire import (
    I64,
    LEN,
    VARINT,
    Malformed,
    double,
    fields,
    signed,
    skip,
    text,
    varint,
    wrong_type,
)

_SIGN = 1 << 63
_WRAP = 1 << 64

# A stat's value as the file gives it (ref values resolved by the plane).
Value = int | float | str | bytes | None
_T = TypeVar("_T")


@dataclass(slots=True)
class XStat:
    metadata_id: int
    value: Value
    ref: bool = False  # value is a stat metadata id whose name is the stat's value


@dataclass(slots=True)
class XEvent:
    metadata_id: int
    offset_ps: int  # from the line's timestamp
    duration_ps: int
    stats: list[XStat]
    num_occurrences: int | None = None  # set for aggregated events, which have no time of their own


@dataclass(slots=True)
class XLine:
    id: int = 0
    display_id: int = 0
    name: str = ""
    display_name: str = ""
    timestamp_ns: int = 0
    duration_ps: int = 0
    events: list[XEvent] = field(default_factory=list)


@dataclass(slots=True)
class XEventMetadata:
    id: int = 0
    name: str = ""
    display_name: str = ""
    stats: list[XStat] = field(default_factory=list)


@dataclass(slots=True)
class XStatMetadata:
    id: int = 0
    name: str = ""
    description: str = ""


@dataclass(slots=True)
class XPlane:
    id: int = 0
    name: str = ""
    lines: list[XLine] = field(default_factory=list)
    event_metadata: dict[int, XEventMetadata] = field(default_factory=dict)
    stat_metadata: dict[int, XStatMetadata] = field(default_factory=dict)
    stats: list[XStat] = field(default_factory=list)

    def stat_name(self, metadata_id: int) -> str:
        """The name of a stat kind (Malformed when the plane lacks it)."""
        md = self.stat_metadata.get(metadata_id)
        if md is None:
            raise Malformed(f"a stat refers to stat metadata {metadata_id}, which its plane does not define")
        return md.name

    def values(self, stats: list[XStat]) -> dict[str, Value]:
        """Stats by name, ref values resolved to their names (a name given
        twice keeps the last value)."""
        out: dict[str, Value] = {}
        for s in stats:
            value = s.value
            if s.ref:
                assert isinstance(value, int)
                value = self.stat_name(value)
            out[self.stat_name(s.metadata_id)] = value
        return out


@dataclass(slots=True)
class XSpace:
    planes: list[XPlane] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    hostnames: list[str] = field(default_factory=list)


def read_space(buf: bytes) -> XSpace:
    """The XSpace encoded in ``buf`` (Malformed saying where it is not one)."""
    space = XSpace()
    try:
        for number, wire, a, b in fields(buf, 0, len(buf)):
            if number == 1:
                _want(wire, LEN, "XSpace", "planes", number, a)
                try:
                    space.planes.append(_plane(buf, a, b))
                except Malformed as e:
                    raise e.inside(f"planes[{len(space.planes)}]") from None
            elif 2 <= number <= 4:
                name = ("errors", "warnings", "hostnames")[number - 2]
                _want(wire, LEN, "XSpace", name, number, a)
                value = text(buf, a, b, "XSpace", name)
                (space.errors, space.warnings, space.hostnames)[number - 2].append(value)
    except Malformed as e:
        raise _element(e, 1, "planes", len(space.planes)) from None
    return space


def _element(e: Malformed, number: int, name: str, index: int) -> Malformed:
    """``e`` placed in element ``index`` of repeated field ``name`` when it
    is that field's own encoding that broke (a truncated file ends inside
    the element being read)."""
    if not e.path and e.field == number:
        e.inside(f"{name}[{index}]")
    return e


def _want(wire: int, want: int, message: str, name: str, number: int, _value: int) -> None:
    if wire != want:
        raise wrong_type(message, name, number, wire, want)


def _plane(buf: bytes, start: int, stop: int) -> XPlane:
    plane = XPlane()
    try:
        _plane_fields(buf, start, stop, plane)
    except Malformed as e:
        raise _element(e, 3, "lines", len(plane.lines)) from None
    return plane


def _plane_fields(buf: bytes, start: int, stop: int, plane: XPlane) -> None:
    for number, wire, a, b in fields(buf, start, stop):
        if number == 1:
            _want(wire, VARINT, "XPlane", "id", number, a)
            plane.id = signed(a)
        elif number == 2:
            _want(wire, LEN, "XPlane", "name", number, a)
            plane.name = text(buf, a, b, "XPlane", "name")
        elif number == 3:
            _want(wire, LEN, "XPlane", "lines", number, a)
            try:
                plane.lines.append(_line(buf, a, b))
            except Malformed as e:
                raise e.inside(f"lines[{len(plane.lines)}]") from None
        elif number == 4:
            _want(wire, LEN, "XPlane", "event_metadata", number, a)
            try:
                key, emd = _map_entry(buf, a, b, _event_metadata)
            except Malformed as e:
                raise e.inside(f"event_metadata[{len(plane.event_metadata)}]") from None
            plane.event_metadata[key] = emd if emd is not None else XEventMetadata(id=key)
        elif number == 5:
            _want(wire, LEN, "XPlane", "stat_metadata", number, a)
            try:
                key, smd = _map_entry(buf, a, b, _stat_metadata)
            except Malformed as e:
                raise e.inside(f"stat_metadata[{len(plane.stat_metadata)}]") from None
            plane.stat_metadata[key] = smd if smd is not None else XStatMetadata(id=key)
        elif number == 6:
            _want(wire, LEN, "XPlane", "stats", number, a)
            try:
                plane.stats.append(_stat(buf, a, b))
            except Malformed as e:
                raise e.inside(f"stats[{len(plane.stats)}]") from None


# The varint fields of XLine and XEvent, by number (for error messages).
_LINE_NUMBERS = {1: "id", 3: "timestamp_ns", 9: "duration_ps", 10: "display_id"}
_EVENT_NUMBERS = {1: "metadata_id", 2: "offset_ps", 3: "duration_ps", 5: "num_occurrences"}


def _line(buf: bytes, start: int, stop: int) -> XLine:
    line = XLine()
    try:
        _line_fields(buf, start, stop, line)
    except Malformed as e:
        raise _element(e, 4, "events", len(line.events)) from None
    return line


def _line_fields(buf: bytes, start: int, stop: int, line: XLine) -> None:
    events = line.events
    for number, wire, a, b in fields(buf, start, stop):
        if number == 4:
            if wire != LEN:
                raise wrong_type("XLine", "events", number, wire, LEN)
            try:
                events.append(_event(buf, a, b))
            except Malformed as e:
                raise e.inside(f"events[{len(events)}]") from None
        elif number in _LINE_NUMBERS:
            _want(wire, VARINT, "XLine", _LINE_NUMBERS[number], number, a)
            if number == 1:
                line.id = signed(a)
            elif number == 3:
                line.timestamp_ns = signed(a)
            elif number == 9:
                line.duration_ps = signed(a)
            else:
                line.display_id = signed(a)
        elif number == 2:
            _want(wire, LEN, "XLine", "name", number, a)
            line.name = text(buf, a, b, "XLine", "name")
        elif number == 11:
            _want(wire, LEN, "XLine", "display_name", number, a)
            line.display_name = text(buf, a, b, "XLine", "display_name")


def _event(buf: bytes, pos: int, end: int) -> XEvent:
    """An XEvent. Events are most of a capture, so this decoder (and
    :func:`_stat`'s) reads tags and varints inline rather than through
    :func:`fields`: the same checks, in less than half the time."""
    metadata_id = offset = duration = 0
    occurrences: int | None = None
    stats: list[XStat] = []
    while pos < end:
        at = pos
        tag = buf[pos]
        pos += 1
        if tag >= 0x80:
            tag, pos = varint(buf, at, end)
        if tag == 0x22:  # 4: stats
            size, pos = varint(buf, pos, end)
            stop = pos + size
            if stop > end:
                raise _past_end(4, size, end - pos, at)
            try:
                stats.append(_stat(buf, pos, stop))
            except Malformed as e:
                raise e.inside(f"stats[{len(stats)}]") from None
            pos = stop
        elif tag in _EVENT_VARINTS:  # 1, 2, 3, 5
            # the varint, inline (offsets and durations take 4-6 bytes)
            value = shift = 0
            while True:
                if pos >= end:
                    raise Malformed("truncated: the message ends inside a number", at)
                b = buf[pos]
                pos += 1
                value |= (b & 0x7F) << shift
                if b < 0x80:
                    break
                shift += 7
                if shift > 63:
                    raise Malformed("a number longer than 10 bytes (not protobuf)", at)
            if value >= _SIGN:
                if value >= _WRAP:
                    raise Malformed("a number over 64 bits (not protobuf)", at)
                value -= _WRAP
            if tag == 0x08:
                metadata_id = value
            elif tag == 0x10:
                offset, occurrences = value, None
            elif tag == 0x18:
                duration = value
            else:
                occurrences = value
        else:
            number = tag >> 3
            if number == 4:
                raise wrong_type("XEvent", "stats", number, tag & 7, LEN)
            if number in _EVENT_NUMBERS:
                raise wrong_type("XEvent", _EVENT_NUMBERS[number], number, tag & 7, VARINT)
            pos = skip(buf, pos, end, tag, at)
    return XEvent(metadata_id, offset, duration, stats, occurrences)


_EVENT_VARINTS = frozenset({0x08, 0x10, 0x18, 0x28})
_STAT_NUMBERS = {1: "metadata_id", 2: "double_value", 3: "uint64_value", 4: "int64_value"}
_STAT_NUMBERS.update({5: "str_value", 6: "bytes_value", 7: "ref_value"})
_STAT_WIRES = {1: VARINT, 2: I64, 3: VARINT, 4: VARINT, 5: LEN, 6: LEN, 7: VARINT}
_STAT_VARINTS = frozenset({0x08, 0x18, 0x20, 0x38})


def _past_end(number: int, size: int, left: int, at: int) -> Malformed:
    return Malformed(f"truncated: field {number} is {size:,} bytes long but its message has {left:,} left", at, number)


def _stat(buf: bytes, pos: int, end: int) -> XStat:
    """An XStat (inline, as :func:`_event`)."""
    metadata_id = 0
    value: Value = None
    ref = False
    while pos < end:
        at = pos
        tag = buf[pos]
        pos += 1
        if tag >= 0x80:
            tag, pos = varint(buf, at, end)
        if tag in _STAT_VARINTS:  # 1, 3, 4, 7
            if pos < end and buf[pos] < 0x80:
                number = buf[pos]
                pos += 1
            else:
                number, pos = varint(buf, pos, end)
            if tag == 0x08:
                metadata_id = number - _WRAP if number >= _SIGN else number
            elif tag == 0x20:
                value, ref = (number - _WRAP if number >= _SIGN else number), False
            else:
                value, ref = number, tag == 0x38
        elif tag == 0x2A or tag == 0x32:  # 5, 6: text, bytes
            size, pos = varint(buf, pos, end)
            stop = pos + size
            if stop > end:
                raise _past_end(tag >> 3, size, end - pos, at)
            value = text(buf, pos, stop, "XStat", "str_value") if tag == 0x2A else buf[pos:stop]
            ref = False
            pos = stop
        elif tag == 0x11:  # 2: double
            if pos + 8 > end:
                raise Malformed(f"truncated: field 2 needs 8 bytes, its message has {end - pos} left", at, 2)
            value, ref = double(int.from_bytes(buf[pos : pos + 8], "little")), False
            pos += 8
        else:
            number = tag >> 3
            if number in _STAT_WIRES:
                raise wrong_type("XStat", _STAT_NUMBERS[number], number, tag & 7, _STAT_WIRES[number])
            pos = skip(buf, pos, end, tag, at)
    return XStat(metadata_id, value, ref)


def _event_metadata(buf: bytes, start: int, stop: int) -> XEventMetadata:
    md = XEventMetadata()
    for number, wire, a, b in fields(buf, start, stop):
        if number == 1:
            _want(wire, VARINT, "XEventMetadata", "id", number, a)
            md.id = signed(a)
        elif number == 2:
            _want(wire, LEN, "XEventMetadata", "name", number, a)
            md.name = text(buf, a, b, "XEventMetadata", "name")
        elif number == 4:
            _want(wire, LEN, "XEventMetadata", "display_name", number, a)
            md.display_name = text(buf, a, b, "XEventMetadata", "display_name")
        elif number == 5:
            _want(wire, LEN, "XEventMetadata", "stats", number, a)
            try:
                md.stats.append(_stat(buf, a, b))
            except Malformed as e:
                raise e.inside(f"stats[{len(md.stats)}]") from None
    return md


def _stat_metadata(buf: bytes, start: int, stop: int) -> XStatMetadata:
    md = XStatMetadata()
    for number, wire, a, b in fields(buf, start, stop):
        if number == 1:
            _want(wire, VARINT, "XStatMetadata", "id", number, a)
            md.id = signed(a)
        elif number in (2, 3):
            _want(wire, LEN, "XStatMetadata", "name" if number == 2 else "description", number, a)
            value = text(buf, a, b, "XStatMetadata", "name")
            if number == 2:
                md.name = value
            else:
                md.description = value
    return md


def _map_entry(buf: bytes, start: int, stop: int, read: Callable[[bytes, int, int], _T]) -> tuple[int, _T | None]:
    """A map<int64, message> entry: its key (field 1) and value (field 2)."""
    key: int = 0
    value: _T | None = None
    for number, wire, a, b in fields(buf, start, stop):
        if number == 1:
            _want(wire, VARINT, "map entry", "key", number, a)
            key = signed(a)
        elif number == 2:
            _want(wire, LEN, "map entry", "value", number, a)
            value = read(buf, a, b)
    return key, value
