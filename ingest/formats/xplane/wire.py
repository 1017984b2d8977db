"""The protobuf wire format, read by hand: only what an XSpace and an HLO
module need.

Why not the protobuf runtime: the message classes for ``xplane.proto`` and
``hlo.proto`` ship with TensorFlow (``tensorflow.tsl.profiler.protobuf``,
a 1.3 GB dependency) or are compiled into xprof's C++ extension (its wheel
has no Python classes), and building them at run time needs a schema that
is nothing but a few dozen field numbers. Those numbers are facts of the
published ``.proto`` files; decoding the handful of wire types they use is
a page of code (this module), with no generated code, no dependency, and
errors that say which field of which message is wrong.

Encoding, as the protobuf documentation defines it: a message is a run of
fields, each a *tag* (varint ``number << 3 | wire type``) and a value:
``VARINT`` (a base-128 varint, least significant group first, at most 10
bytes), ``I64`` (8 bytes little-endian: doubles, fixed64), ``LEN`` (a
varint length, then that many bytes: strings, bytes, sub-messages, packed
repeated numbers) and ``I32`` (4 bytes). Wire types 3 and 4 (groups) are
proto2 relics neither schema uses; 6 and 7 do not exist. ``int64`` fields
are varints of the two's complement (a negative number takes 10 bytes).

Every problem is a :class:`Malformed` that says what is wrong and at which
byte; the decoders above it add where in the message tree it was
(:meth:`Malformed.inside`), and the parser turns it into an InputError.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

VARINT, I64, LEN, I32 = 0, 1, 2, 5
WIRE_NAMES = {0: "varint", 1: "64-bit", 2: "length-delimited", 3: "group start", 4: "group end", 5: "32-bit"}
_SIGN = 1 << 63
_WRAP = 1 << 64
_DOUBLE = struct.Struct("<d")


class Malformed(Exception):
    """Bytes that are not the message they should be: ``what`` is wrong,
    at byte ``offset`` of the buffer, inside ``path`` (outermost first, e.g.
    ``["planes[2]", "lines[0]", "events[17]"]``, filled in on the way out)."""

    def __init__(self, what: str, offset: int | None = None, field: int | None = None) -> None:
        super().__init__(what)
        self.what = what
        self.offset = offset
        self.field = field  # the number of the field that broke, when it is known
        self.path: list[str] = []

    def inside(self, step: str) -> Malformed:
        """Record that the problem lies inside ``step`` (called outermost last)."""
        self.path.insert(0, step)
        return self


def varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """The unsigned varint at ``pos`` and the position after it."""
    if pos >= end:
        raise Malformed("truncated: the message ends inside a number", pos)
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    start = pos
    value = b & 0x7F
    shift = 7
    pos += 1
    while True:
        if pos >= end:
            raise Malformed("truncated: the message ends inside a number", start)
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if shift > 63:
            raise Malformed("a number longer than 10 bytes (not protobuf)", start)
    if value >= _WRAP:
        raise Malformed("a number over 64 bits (not protobuf)", start)
    return value, pos


def signed(value: int) -> int:
    """An ``int64`` field's varint as the signed number it encodes."""
    return value - _WRAP if value >= _SIGN else value


def double(raw: int) -> float:
    """An ``I64`` field's 8 bytes (as :func:`fields` gives them) as a double."""
    return float(_DOUBLE.unpack(raw.to_bytes(8, "little"))[0])


def fields(buf: bytes, pos: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """The fields of the message ``buf[pos:end]``, in order, as ``(number,
    wire type, a, b)``: for VARINT ``a`` is the value; for I64 and I32
    ``a`` is the raw little-endian unsigned integer; for LEN ``a, b`` are
    the payload's start and end in ``buf``. ``b`` is 0 where unused."""
    while pos < end:
        at = pos
        tag = buf[pos]
        if tag < 0x80:
            pos += 1
        else:
            tag, pos = varint(buf, pos, end)
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise Malformed("field number 0 (not protobuf)", at)
        if wire == VARINT:
            if pos < end and buf[pos] < 0x80:
                yield number, wire, buf[pos], 0
                pos += 1
            else:
                value, pos = varint(buf, pos, end)
                yield number, wire, value, 0
        elif wire == LEN:
            if pos < end and buf[pos] < 0x80:
                size = buf[pos]
                pos += 1
            else:
                size, pos = varint(buf, pos, end)
            stop = pos + size
            if stop > end:
                raise Malformed(
                    f"truncated: field {number} is {size:,} bytes long but its message has {end - pos:,} left",
                    at,
                    number,
                )
            yield number, wire, pos, stop
            pos = stop
        elif wire == I64:
            if pos + 8 > end:
                raise Malformed(
                    f"truncated: field {number} needs 8 bytes, its message has {end - pos} left", at, number
                )
            yield number, wire, int.from_bytes(buf[pos : pos + 8], "little"), 0
            pos += 8
        elif wire == I32:
            if pos + 4 > end:
                raise Malformed(
                    f"truncated: field {number} needs 4 bytes, its message has {end - pos} left", at, number
                )
            yield number, wire, int.from_bytes(buf[pos : pos + 4], "little"), 0
            pos += 4
        else:
            raise Malformed(f"field {number} has wire type {wire} ({WIRE_NAMES.get(wire, 'invalid')})", at)


def skip(buf: bytes, pos: int, end: int, tag: int, at: int) -> int:
    """The position after the value of a field whose tag (read from ``at``)
    is ``tag`` and whose value starts at ``pos``: how a fast decoder passes
    over fields it does not read."""
    number, wire = tag >> 3, tag & 7
    if number == 0:
        raise Malformed("field number 0 (not protobuf)", at)
    if wire == VARINT:
        return varint(buf, pos, end)[1]
    if wire == LEN:
        size, pos = varint(buf, pos, end)
        if pos + size > end:
            raise Malformed(
                f"truncated: field {number} is {size:,} bytes long but its message has {end - pos:,} left", at, number
            )
        return pos + size
    width = {I64: 8, I32: 4}.get(wire)
    if width is None:
        raise Malformed(f"field {number} has wire type {wire} ({WIRE_NAMES.get(wire, 'invalid')})", at)
    if pos + width > end:
        raise Malformed(f"truncated: field {number} needs {width} bytes, its message has {end - pos} left", at, number)
    return pos + width


def wrong_type(message: str, field: str, number: int, wire: int, want: int) -> Malformed:
    """The error for a known field that arrives with another wire type: the
    mark of a different message (another protobuf, or a corrupt file).
    Where it is, is the field path the decoders add."""
    return Malformed(f"{message}.{field} (field {number}) is {WIRE_NAMES.get(wire, 'invalid')}, not {WIRE_NAMES[want]}")


def text(buf: bytes, start: int, stop: int, message: str, field: str) -> str:
    """A ``string`` field's payload (protobuf strings are UTF-8)."""
    try:
        return buf[start:stop].decode("utf-8")
    except UnicodeDecodeError:
        raise Malformed(f"{message}.{field} is not UTF-8 text", start) from None


def packed(buf: bytes, start: int, stop: int) -> list[int]:
    """The varints of a packed repeated field's payload, in order."""
    out: list[int] = []
    pos = start
    while pos < stop:
        b = buf[pos]
        if b < 0x80:
            out.append(b)
            pos += 1
        else:
            value, pos = varint(buf, pos, stop)
            out.append(value)
    return out
