"""The protobuf wire format: what the decoders of :mod:`.decoders` read
with (varints, skipping a field) and the errors they raise.

Encoding, as the protobuf documentation defines it: a message is a run of
fields, each a *tag* (varint ``number << 3 | wire type``) and a value:
``VARINT`` (a base-128 varint, least significant group first, at most 10
bytes), ``I64`` (8 bytes little-endian: doubles, fixed64), ``LEN`` (a
varint length, then that many bytes: strings, bytes, sub-messages, packed
repeated numbers) and ``I32`` (4 bytes). Wire types 3 and 4 (groups) are
proto2 relics neither schema uses; 6 and 7 do not exist. ``int64`` fields
are varints of the two's complement (a negative number takes 10 bytes).

Every problem is a :class:`Malformed` that says what is wrong and at which
byte; the decoders add where in the message tree it was
(:meth:`Malformed.inside`), and the parser turns it into an InputError.
"""

from __future__ import annotations

VARINT, I64, LEN, I32 = 0, 1, 2, 5
WIRE_NAMES = {0: "varint", 1: "64-bit", 2: "length-delimited", 3: "group start", 4: "group end", 5: "32-bit"}
SIGN = 1 << 63  # an int64 varint at or above it is negative: minus WRAP
WRAP = 1 << 64
_WIDTHS = {I64: 8, I32: 4}


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
    if value >= WRAP:
        raise Malformed("a number over 64 bits (not protobuf)", start)
    return value, pos


def skip(buf: bytes, pos: int, end: int, tag: int, at: int) -> int:
    """The position after the value of a field whose tag (read from ``at``)
    is ``tag`` and whose value starts at ``pos``: how a decoder passes
    over fields it does not read."""
    number, wire = tag >> 3, tag & 7
    if number == 0:
        raise Malformed("field number 0 (not protobuf)", at)
    if wire == VARINT:
        return varint(buf, pos, end)[1]
    if wire == LEN:
        size, pos = varint(buf, pos, end)
        if pos + size > end:
            raise past_end(number, size, end - pos, at)
        return pos + size
    width = _WIDTHS.get(wire)
    if width is None:
        raise Malformed(f"field {number} has wire type {wire} ({WIRE_NAMES.get(wire, 'invalid')})", at)
    if pos + width > end:
        raise short(number, width, end - pos, at)
    return pos + width


def past_end(number: int, size: int, left: int, at: int) -> Malformed:
    """The error for a length-delimited field running past its message."""
    return Malformed(f"truncated: field {number} is {size:,} bytes long but its message has {left:,} left", at, number)


def short(number: int, width: int, left: int, at: int) -> Malformed:
    """The error for a fixed-width field cut short."""
    return Malformed(f"truncated: field {number} needs {width} bytes, its message has {left} left", at, number)


def wrong_type(message: str, field: str, number: int, wire: int, want: int) -> Malformed:
    """The error for a known field that arrives with another wire type: the
    mark of a different message (another protobuf, or a corrupt file).
    Where it is, is the field path the decoders add."""
    return Malformed(f"{message}.{field} (field {number}) is {WIRE_NAMES.get(wire, 'invalid')}, not {WIRE_NAMES[want]}")
