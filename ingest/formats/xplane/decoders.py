"""Protobuf decoders written from a field table: one function per message,
generated from the table (:mod:`.schema` holds the table) and compiled
once, at import.

Why not the protobuf runtime: the message classes for ``xplane.proto`` and
``hlo.proto`` ship with TensorFlow (``tensorflow.tsl.profiler.protobuf``,
a 1.3 GB dependency) or are compiled into xprof's C++ extension (its wheel
has no Python classes), and what they would be built from at run time is
nothing but a few dozen field numbers: facts of the published ``.proto``
files, which :mod:`.schema` declares. Decoding the handful of wire types
they use (:mod:`.wire`) takes no dependency and gives errors that say which
field of which message is wrong.

Decoding, as protobuf readers do: a field the table does not list is
skipped (newer profilers add fields); a listed field given with another
wire type is an error (it is what a different protobuf looks like when
read as this one); a singular field given twice keeps the last value, a
singular message given twice is the two merged; a repeated number may come
packed or one varint at a time; the members of a ``oneof`` share one
attribute, the last one given counts.

Why generated: events and their stats are most of a capture, and a loop
that looks each field up in the table as it goes (one generic decoder for
every message) took a fifth to a quarter longer than hand-written
decoders; the function written from the table for each message is the one
a careful hand would write (a chain of ``if tag == ...``, the value read
and stored inline, in locals) and decodes a capture a little faster than
the hand-written ones did (bench/xplane_decode.py). :func:`source` shows
what it writes.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tracegraph.ingest.formats.xplane.wire import (
    I64,
    LEN,
    SIGN,
    VARINT,
    WRAP,
    Malformed,
    past_end,
    short,
    skip,
    varint,
    wrong_type,
)

_DOUBLE = struct.Struct("<d")


@dataclass(frozen=True)
class Field:
    """A field of a message: its number, its ``.proto`` name, its type (a
    scalar of :data:`SCALARS` or a message's class), whether it is
    ``repeated`` (a list) or a ``map<key, type>`` (``key``: a dict), and
    for a member of a ``oneof`` the attribute the oneof's members share
    (``<oneof>_field`` then holds the number of the member given last)."""

    number: int
    name: str
    type: str | type[Any]
    repeated: bool = False
    key: str = ""
    oneof: str = ""

    @property
    def attribute(self) -> str:
        return self.oneof or self.name

    @property
    def message(self) -> str:
        """The name of the message this field holds ("" for a scalar)."""
        return "" if isinstance(self.type, str) else self.type.__name__


_FIELDS = "protobuf"  # the dataclass field metadata key that holds a message field's Fields


def number(n: int, type_: str | type[Any], *, repeated: bool = False, key: str = "") -> Any:
    """A message field, declared on its dataclass attribute (which is the
    ``.proto`` field's name): ``name: str = number(2, "string")``, ``lines:
    list[XLine] = number(3, XLine, repeated=True)``, ``event_metadata:
    dict[int, XEventMetadata] = number(4, XEventMetadata, key="int64")``.
    Its default is protobuf's: zero, empty, or None for a message."""
    f = Field(n, "", type_, repeated, key)
    if repeated:
        return dataclasses.field(default_factory=list, metadata={_FIELDS: (f,)})
    if key:
        return dataclasses.field(default_factory=dict, metadata={_FIELDS: (f,)})
    default = SCALARS[type_] if isinstance(type_, str) else None
    return dataclasses.field(default=default, metadata={_FIELDS: (f,)})


def oneof(default: object, **members: tuple[int, str]) -> Any:
    """A ``oneof``, declared on the attribute its members share (the
    oneof's name), with its value when no member is given: ``value: Value
    = oneof(None, double_value=(2, "double"), ...)``; the message also
    declares ``<oneof>_field: int = 0``."""
    fields = tuple(Field(n, name, type_) for name, (n, type_) in members.items())
    return dataclasses.field(default=default, metadata={_FIELDS: fields})


@dataclass(frozen=True)
class Message:
    """A message: its name (its class's, or protoc's for a map's entries),
    the dataclass it decodes into, and its fields by number."""

    name: str
    cls: type[Any]
    fields: dict[int, Field]


def messages(*roots: type[Any]) -> dict[str, Message]:
    """The messages declared by the dataclasses ``roots`` and those they
    hold, by name; a map's entries are a message of their own (protobuf
    encodes a ``map<K, V>`` as repeated messages of key 1 and value 2),
    named as protoc names them (``XPlane.EventMetadataEntry``)."""
    table: dict[str, Message] = {}
    todo = list(roots)
    while todo:
        cls = todo.pop()
        if cls.__name__ in table:
            continue
        fields: dict[int, Field] = {}
        for a in dataclasses.fields(cls):
            for f in a.metadata.get(_FIELDS, ()):
                fields[f.number] = dataclasses.replace(f, name=f.name or a.name, oneof=a.name if f.name else "")
        table[cls.__name__] = Message(cls.__name__, cls, fields)
        for f in fields.values():
            if not isinstance(f.type, str):
                todo.append(f.type)
            if f.key:
                entry = _entry(cls.__name__, f)
                table[entry] = Message(entry, _MapEntry, {1: Field(1, "key", f.key), 2: Field(2, "value", f.type)})
    return table


# A compiled message decoder: the message in ``buf[pos:end]``.
Decoder = Callable[[bytes, int, int], Any]

# The scalar types a field may have (any other type is a message's class),
# and their values when not given.
SCALARS: dict[str, object] = {"int64": 0, "uint64": 0, "double": 0.0, "string": "", "bytes": b""}
_WIRES = {"int64": VARINT, "uint64": VARINT, "double": I64, "string": LEN, "bytes": LEN}


@dataclass(slots=True)
class _MapEntry:
    key: Any = 0
    value: Any = None


def compile_messages(*roots: type[Any]) -> dict[type[Any], Decoder]:
    """A decoder for each message of :func:`messages`, by class: the
    functions :func:`source` writes, compiled (see the module docstring)."""
    table = messages(*roots)
    namespace: dict[str, Any] = {
        "Malformed": Malformed,
        "varint": varint,
        "_SIGN": SIGN,
        "_WRAP": WRAP,
        "_double": _DOUBLE.unpack_from,
        "_packed": _packed,
        "_other": _other,
        "_short": short,
        "_past_end": past_end,
        "_merge": lambda old, new, name: _merge(old, new, table[name], table),
    }
    for message in table.values():
        namespace[f"_make_{_ident(message.name)}"] = message.cls
        namespace[f"_known_{_ident(message.name)}"] = _known(message)
    exec(compile(source(*roots), "<protobuf decoders>", "exec"), namespace)
    return {m.cls: namespace[f"_decode_{_ident(m.name)}"] for m in table.values() if m.cls is not _MapEntry}


def source(*roots: type[Any]) -> str:
    """The decoders of :func:`compile_messages`, as Python source."""
    table = messages(*roots)
    return "\n\n".join("\n".join(_decoder(message, table)) for message in table.values()) + "\n"


def _entry(message: str, f: Field) -> str:
    return f"{message}.{''.join(w.title() for w in f.name.split('_'))}Entry"


def _ident(name: str) -> str:
    return name.replace(".", "_")


def _known(message: Message) -> dict[int, tuple[str, int]]:
    """Field number -> (name, the wire type it must have): what an unlisted
    tag of a listed field is said to be instead of."""
    return {
        n: (f.name, _WIRES[f.type] if isinstance(f.type, str) and not f.repeated else LEN)
        for n, f in message.fields.items()
    }


def _decoder(message: Message, table: dict[str, Message]) -> list[str]:
    """The source of ``message``'s decoder (see :func:`compile_messages`)."""
    name, fn = message.name, _ident(message.name)
    init = [a for a in dataclasses.fields(message.cls) if a.init]
    lines = [f"def _decode_{fn}(buf, pos, end):"]
    for a in init:
        lines.append(f"    m_{a.name} = {_default(name, a)}")
    lines += [
        "    try:",
        "        while pos < end:",
        "            at = pos",
        "            tag = buf[pos]",
        "            pos += 1",
        "            if tag >= 0x80:",
        "                tag, pos = varint(buf, at, end)",
    ]
    if not message.fields:
        raise TypeError(f"{name}: a message with no field to read")
    branch = "if"
    for f in message.fields.values():
        for tag, body in _field(name, f):
            lines.append(f"            {branch} tag == {tag}:")
            lines += [" " * 16 + line for line in body]
            branch = "elif"
    lines += [
        "            else:",
        f"                pos = _other(buf, pos, end, tag, at, {name!r}, _known_{fn})",
        "    except Malformed as e:",
        "        # a repeated message whose own field broke (a truncated file ends",
        "        # inside the element being read): place the error in that element",
    ]
    for number, f in message.fields.items():
        if (f.repeated or f.key) and f.message:
            lines.append(f"        if not e.path and e.field == {number}:")
            lines.append(f'            e.inside(f"{f.name}[{{len(m_{f.attribute})}}]")')
    lines += ["        raise", f"    return _make_{fn}({', '.join(f'm_{a.name}' for a in init)})"]
    return lines


def _default(message: str, a: dataclasses.Field[Any]) -> str:
    """A dataclass attribute's default as source."""
    if a.default_factory is list:
        return "[]"
    if a.default_factory is dict:
        return "{}"
    if a.default is not dataclasses.MISSING and (a.default is None or type(a.default) in (int, float, str, bytes)):
        return repr(a.default)
    raise TypeError(f"{message}.{a.name}: the default must be a number, text, None, a list or a dict")


def _field(message: str, f: Field) -> list[tuple[int, list[str]]]:
    """The branches (tag, body) that read field ``f`` of ``message`` into
    ``v`` and store it."""
    attr, number = f"m_{f.attribute}", f.number
    if f.message:
        sub = _entry(message, f) if f.key else f.message
        where = f'f"{f.name}[{{len({attr})}}]"' if f.repeated or f.key else repr(f.name)
        read = [
            *_payload(number),
            "try:",
            f"    v = _decode_{_ident(sub)}(buf, pos, stop)",
            "except Malformed as e:",
            f"    raise e.inside({where}) from None",
            "pos = stop",
        ]
        if f.key:
            store = f"{attr}[v.key] = _make_{_ident(f.message)}() if v.value is None else v.value"
        elif f.repeated:
            store = f"{attr}.append(v)"
        else:  # a singular message given again is merged (protobuf's rule)
            store = f"{attr} = v if {attr} is None else _merge({attr}, v, {f.message!r})"
        return [(number << 3 | LEN, [*read, store])]
    assert isinstance(f.type, str)
    if f.type not in SCALARS:
        raise TypeError(f"{message}.{f.name}: unknown type {f.type!r}")
    if f.repeated and f.type == "double":
        raise TypeError(f"{message}.{f.name}: repeated doubles are not supported")
    wire = _WIRES[f.type]
    read = _scalar(message, number, f)
    if f.repeated:
        branches = [(number << 3 | wire, [*read, f"{attr}.append(v)"])]
        if wire == VARINT:  # or packed into one length-delimited field
            packed = [*_payload(number), f"{attr}.extend(_packed(buf, pos, stop, {f.type == 'int64'}))", "pos = stop"]
            branches.append((number << 3 | LEN, packed))
        return branches
    if f.oneof:
        return [(number << 3 | wire, [*read, f"{attr} = v", f"m_{f.oneof}_field = {number}"])]
    return [(number << 3 | wire, [*read, f"{attr} = v"])]


def _scalar(message: str, number: int, f: Field) -> list[str]:
    """Source that reads a scalar field's value into ``v``."""
    if f.type in ("int64", "uint64"):
        lines = [
            "if pos < end and buf[pos] < 0x80:",
            "    v = buf[pos]",
            "    pos += 1",
            "else:",
            "    v, pos = varint(buf, pos, end)",
        ]
        if f.type == "int64":  # the two's complement
            lines += ["    if v >= _SIGN:", "        v -= _WRAP"]
        return lines
    if f.type == "double":
        return [
            "if pos + 8 > end:",
            f"    raise _short({number}, 8, end - pos, at)",
            "v = _double(buf, pos)[0]",
            "pos += 8",
        ]
    if f.type == "string":
        return [
            *_payload(number),
            "try:",
            '    v = buf[pos:stop].decode("utf-8")',
            "except UnicodeDecodeError:",
            f"    raise Malformed({f'{message}.{f.name} is not UTF-8 text'!r}, pos) from None",
            "pos = stop",
        ]
    return [*_payload(number), "v = buf[pos:stop]", "pos = stop"]


def _payload(number: int) -> list[str]:
    """Source that finds a length-delimited value's payload, ``buf[pos:stop]``."""
    return [
        "if pos < end and buf[pos] < 0x80:",
        "    size = buf[pos]",
        "    pos += 1",
        "else:",
        "    size, pos = varint(buf, pos, end)",
        "stop = pos + size",
        "if stop > end:",
        f"    raise _past_end({number}, size, end - pos, at)",
    ]


def _other(buf: bytes, pos: int, end: int, tag: int, at: int, message: str, known: dict[int, tuple[str, int]]) -> int:
    """Past a field the decoder has no branch for: skipped when the table
    does not list its number, an error when it does (another wire type)."""
    wanted = known.get(tag >> 3)
    if wanted is not None:
        raise wrong_type(message, wanted[0], tag >> 3, tag & 7, wanted[1])
    return skip(buf, pos, end, tag, at)


def _packed(buf: bytes, pos: int, stop: int, signed: bool) -> list[int]:
    """The varints of a packed repeated field's payload, in order."""
    out: list[int] = []
    while pos < stop:
        value, pos = varint(buf, pos, stop)
        out.append(value - WRAP if signed and value >= SIGN else value)
    return out


def _merge(old: Any, new: Any, message: Message, table: dict[str, Message]) -> Any:
    """``new`` merged into ``old`` (protobuf's rule for a singular message
    given twice): ``new``'s scalars that are set (not their default) and
    its oneofs that are replace, its lists and maps add, its messages merge."""
    for f in message.fields.values():
        a = f.attribute
        value = getattr(new, a)
        if f.key:
            getattr(old, a).update(value)
        elif f.repeated:
            getattr(old, a).extend(value)
        elif f.oneof:
            given = getattr(new, f"{f.oneof}_field")
            if given:
                setattr(old, a, value)
                setattr(old, f"{f.oneof}_field", given)
        elif f.message:
            if value is not None:
                held = getattr(old, a)
                setattr(old, a, value if held is None else _merge(held, value, table[f.message], table))
        elif value != SCALARS[str(f.type)]:
            setattr(old, a, value)
    return old
