"""A fast reader for the text form of TF ``StepStats`` (and ``RunMetadata``).

``text_format.Parse`` reads about 3 MB/s: most of a minute for the text of
a 100k-op step, longer than the whole ingest should take. This reader
accepts a strict subset of the protobuf text grammar -- the layout
``MessageToString`` and TensorFlow write: one ``name: value``, ``name {``
or ``}`` per line -- for the StepStats messages only, and walks the lines
with a small table-driven loop (about 40 MB/s).

It builds light objects with the same attribute names and defaults as the
protobuf messages, so :func:`tracegraph.ingest.formats.tf.stepstats.
frames_from_step_stats` turns either into frames the same way. Whatever it
does not read exactly as ``text_format`` would -- comments, unknown fields,
escapes in strings, several fields on a line, a field given twice, octal or
hex numbers, values out of range, ``<...>`` or ``name: {``, separators --
raises :class:`Unsupported`, and the caller falls back to
``text_format.Parse``, so correctness never depends on this reader.
tests/test_fast_stepstats.py checks that both give the same frames.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor
from tensorboard.compat.proto import config_pb2, types_pb2


class Unsupported(Exception):
    """The text uses something this reader does not handle; use protobuf."""


# ------------------------------------------------------------- messages
# Class attributes are the fields read, with their proto3 defaults (their
# types are TensorFlow's, SCHEMA below); set fields live in the instance
# __dict__, repeated fields become lists on first use. Each class is named
# as the message it stands in for.


class AllocationRecord:
    alloc_micros = 0
    alloc_bytes = 0


class AllocatorMemoryUsed:
    allocator_name = ""
    total_bytes = 0
    peak_bytes = 0
    live_bytes = 0
    allocation_records = ()
    allocator_bytes_in_use = 0


class AllocationDescription:
    requested_bytes = 0
    allocated_bytes = 0
    allocator_name = ""
    allocation_id = 0
    has_single_reference = False
    ptr = 0


class Dim:
    size = 0
    name = ""


class TensorShapeProto:
    dim = ()
    unknown_rank = False


class TensorDescription:
    dtype = 0
    shape = TensorShapeProto()
    allocation_description = AllocationDescription()


class NodeOutput:
    slot = 0
    tensor_description = TensorDescription()


class MemoryStats:
    temp_memory_size = 0
    persistent_memory_size = 0
    persistent_tensor_alloc_ids = ()
    device_temp_memory_size = 0
    device_persistent_memory_size = 0
    device_persistent_tensor_alloc_ids = ()


class NodeExecStats:
    node_name = ""
    all_start_micros = 0
    op_start_rel_micros = 0
    op_end_rel_micros = 0
    all_end_rel_micros = 0
    memory = ()
    output = ()
    timeline_label = ""
    scheduled_micros = 0
    thread_id = 0
    referenced_tensor = ()
    memory_stats = MemoryStats()
    all_start_nanos = 0
    op_start_rel_nanos = 0
    op_end_rel_nanos = 0
    all_end_rel_nanos = 0
    scheduled_nanos = 0


class ThreadNamesEntry:
    key = 0
    value = ""


class DeviceStepStats:
    device = ""
    node_stats = ()
    thread_names = ()


class StepStats:
    dev_stats = ()


class RunMetadata:
    step_stats = StepStats()


# Field kinds: message "m", repeated message "r"; scalars: signed/unsigned
# integers of 32/64 bits (with their range), strings, bools, the DataType
# enum; "R" + kind for repeated scalars.
_I64 = (-(1 << 63), (1 << 63) - 1)
_U64 = (0, (1 << 64) - 1)
_I32 = (-(1 << 31), (1 << 31) - 1)
_U32 = (0, (1 << 32) - 1)
_FD = descriptor.FieldDescriptor
_SCALARS: dict[int, tuple[str, Any]] = {
    _FD.TYPE_INT64: ("int", _I64),
    _FD.TYPE_UINT64: ("int", _U64),
    _FD.TYPE_INT32: ("int", _I32),
    _FD.TYPE_UINT32: ("int", _U32),
    _FD.TYPE_STRING: ("s", None),
    _FD.TYPE_BOOL: ("bool", None),
    _FD.TYPE_ENUM: ("enum", None),  # DataType, the one enum read
}

# Per message class, per field name: (kind, the message class or the range).
FieldSpec = tuple[str, Any]


def _schema(cls: type, message: descriptor.Descriptor, out: dict[type, dict[str, FieldSpec]]) -> None:
    """The fields a look-alike class declares (its attributes), typed as
    TensorFlow's ``.proto`` declares them (the message's descriptor), and
    the same for the messages they hold (look-alikes of the same name)."""
    fields: dict[str, FieldSpec] = out.setdefault(cls, {})
    for name in (a for a in vars(cls) if not a.startswith("_")):
        fd = message.fields_by_name[name]
        # protobuf 7 has ``is_repeated`` only, 4.x ``label`` only
        repeated = bool(getattr(fd, "is_repeated", getattr(fd, "label", None) == _FD.LABEL_REPEATED))
        if fd.message_type is not None:
            held = globals()[fd.message_type.name]
            fields[name] = ("r" if repeated else "m", held)
            _schema(held, fd.message_type, out)
        elif repeated:
            kind, arg = _SCALARS[fd.type]
            fields[name] = ("R" + kind, arg)
        else:
            fields[name] = _SCALARS[fd.type]


SCHEMA: dict[type, dict[str, FieldSpec]] = {}
_schema(RunMetadata, config_pb2.RunMetadata.DESCRIPTOR, SCHEMA)

_DTYPES = dict(types_pb2.DataType.items())
_BOOLS = {"true": True, "t": True, "1": True, "True": True, "false": False, "f": False, "0": False, "False": False}

_CHUNK = 4 << 20


def parse(text: str, wrapped: bool) -> StepStats:
    """The StepStats in ``text`` (inside a RunMetadata when ``wrapped``).

    Raises :class:`Unsupported` for anything not handled exactly as
    ``text_format.Parse(text, message, allow_unknown_field=True)`` would.
    """
    root = RunMetadata() if wrapped else StepStats()
    stack: list[tuple[object, dict[str, FieldSpec]]] = []
    cur: object = root
    fields = SCHEMA[type(root)]
    v: int | str | bool | None
    d = cur.__dict__
    n = len(text)
    pos = 0
    while pos < n:
        end = text.find("\n", pos + _CHUNK)
        end = n if end < 0 else end + 1
        chunk = text[pos:end]
        pos = end
        for line in chunk.split("\n"):
            s = line.strip()
            if not s:
                continue
            if s[-1] == "{":
                key = s[:-1].rstrip()
                spec = fields.get(key)
                if spec is None:
                    raise Unsupported(f"field {key!r}")
                kind, arg = spec
                if kind == "r":
                    child = arg()
                    lst = d.get(key)
                    if lst is None:
                        d[key] = [child]
                    else:
                        lst.append(child)
                elif kind == "m":
                    if key in d:
                        raise Unsupported(f"{key} twice")
                    child = d[key] = arg()
                else:
                    raise Unsupported(f"{key} is not a message")
                stack.append((cur, fields))
                cur, fields = child, SCHEMA[arg]
                d = child.__dict__
                continue
            if s == "}":
                if not stack:
                    raise Unsupported("unbalanced }")
                cur, fields = stack.pop()
                d = cur.__dict__
                continue
            key, _, val = s.partition(": ")
            spec = fields.get(key)
            if spec is None:
                raise Unsupported(f"line {s[:80]!r}")
            kind, arg = spec
            if kind == "int":
                if (val.isdigit() and val.isascii() and (val[0] != "0" or len(val) == 1)) or (
                    val[:1] == "-" and val[1:].isdigit() and val.isascii() and (val[1] != "0" or len(val) == 2)
                ):
                    v = int(val)
                else:
                    raise Unsupported(f"{key}: {val}")
                if not arg[0] <= v <= arg[1]:
                    raise Unsupported(f"{key}: {val} out of range")
            elif kind == "s":
                if len(val) < 2 or val[0] != '"' or val[-1] != '"' or val.count('"') != 2 or "\\" in val:
                    raise Unsupported(f"{key}: {val}")
                v = val[1:-1]
            elif kind == "enum":  # a DataType name, or a plain number
                v = _DTYPES.get(val)
                if v is None:
                    if not (
                        val.isdigit() and val.isascii() and (val[0] != "0" or len(val) == 1) and int(val) <= _I32[1]
                    ):
                        raise Unsupported(f"{key}: {val}")
                    v = int(val)
            elif kind == "bool":
                v = _BOOLS.get(val)
                if v is None:
                    raise Unsupported(f"{key}: {val}")
            elif kind == "Rint":
                lst = d.get(key)
                if lst is None:
                    lst = d[key] = []
                lst.append(_int64(val))
                continue
            else:
                raise Unsupported(f"{key} is a message")
            if d.get(key):  # text_format: a set (non-default) value may not be set again
                raise Unsupported(f"{key} twice")
            d[key] = v
    if stack:
        raise Unsupported("unterminated message")
    if isinstance(root, RunMetadata):  # wrapped
        return root.step_stats
    return root


def _int64(val: str) -> int:
    """A decimal int64 exactly as text_format reads it, else Unsupported."""
    digits = val[1:] if val[:1] == "-" else val
    if not (digits.isdigit() and digits.isascii() and (digits[0] != "0" or len(digits) == 1)):
        raise Unsupported(f"integer {val!r}")
    v = int(val)
    if not _I64[0] <= v <= _I64[1]:
        raise Unsupported(f"integer {val!r} out of range")
    return v
