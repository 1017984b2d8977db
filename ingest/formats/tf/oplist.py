"""TensorFlow 1.x op listing (``tf-oplist``): one graph node per line.

Line grammar (``, `` separated)::

    name, input..., output, DEVICE, <int>

where each input is a shape ``(128x64x56x56)``/``(int32 4x1)`` or a control
input ``^other/node``, and the output is a shape, ``(no output)`` or
``(output N bytes)``. Three kinds of line:

* **op lines** -> one op each (``op:<name>``, ``seq`` = order among op lines,
  ``executed`` True). Its output shape becomes tensor ``t:<name>:0``.
  The listing names no data inputs, so the input *shapes* are only kept in
  ``attrs`` (``input_shapes``, as written, dtype prefix included; a lone
  ``(1)`` is what the listing prints for source nodes such as variables and
  ``_SOURCE``) -- no data deps are invented.
* **kernel lines** ``op:OpType, (no input), (no output), ...`` say that ``op``
  ran a kernel of type ``OpType``. They set that op's ``type`` and are not
  ops themselves. (No kernel row: the listing gives neither stream nor time.)
  A kernel line whose node has no line of its own still yields that op
  (``executed`` True, no ``seq``, ``attrs.listed`` False): a kernel ran.
* **copy lines** ``edge_N_<node>:MEMCPYDtoH, (no input), (output B bytes)``
  -> an op of type ``MEMCPYDtoH`` with one memcpy kernel (``bytes`` B,
  ``direction`` DtoH) on stream ``s:<DEVICE>/memcpy``. When ``<node>`` is
  listed with an output tensor, the copy also *consumes* ``t:<node>:0``
  (the byte counts in the seed match those tensors).

Other decisions:

* ``type``: kernel line if any (``attrs.type_source = "kernel"``), else the
  copy direction (``"copy"``), else :func:`tf_names.op_type_from_name`
  (``"name"``), e.g. ``Variable/read`` -> ``Identity``, ``_SOURCE`` -> ``NoOp``.
* Tensor ``dtype`` is the prefix when the shape has one (``int32``), else
  ``float32``: the listing omits the dtype for float tensors (the seed's
  byte counts agree). ``bytes`` = product of dims x dtype size
  (:data:`tf_names.DTYPE_BYTES`).
* ``^name`` inputs -> deps ``(op:name, this op, "control")``, deduplicated.
  A ``^name`` that has no line of its own becomes an op with
  ``executed`` False, no device and no ``seq``.
* ``phase``: :func:`tf_names.phase_of` of the name, with the type when a
  kernel line gave it (``_SOURCE``/``_retval_*`` -> ``other``, a copy
  ``edge_N_<node>`` takes the phase of ``<node>``, ``gradients/`` -> backward).
* The file is streamed line by line (:func:`tracegraph.ingest.source.lines`:
  line limit, binary content and UTF-8 checked there).
* A node listed twice, a bad shape or dtype, a line not ending in
  ``, DEVICE, <int>`` -> InputError naming the line (a line cut short by
  truncation always fails one of these checks).
* Devices are the DEVICE texts as written: ``dev:GPU`` (kind GPU),
  ``dev:CPU`` (kind CPU). The trailing integer's meaning is not known; it is
  kept as ``attrs.trailing_int``.
* ``time_unit`` is ``none`` (sorted by name, not by execution).

:func:`merge` joins a listing into a StepStats trace of the same run.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pandas as pd

from tracegraph.errors import InputError
from tracegraph.ingest.formats.kit import FormatInfo, FramesBuilder, Joins, frames_of, snippet
from tracegraph.ingest.formats.tf.names import NODE_NAME, dtype_size, known_dtype, op_type_from_name, phase_of
from tracegraph.ingest.frames import Row, TraceFrames
from tracegraph.ingest.source import head_lines, lines

FORMAT = FormatInfo("tf-oplist", "tensorflow", Joins.DETAIL, "TensorFlow op listing (adds shapes and control inputs)")

_SHAPE = re.compile(r"\((?:([a-z][a-z0-9]*) )?((?:\d+|\?)(?:x(?:\d+|\?))*)\)\Z")
_COPY_OUT = re.compile(r"\(output (\d+) bytes\)\Z")
_DEVICE = re.compile(r"[A-Za-z][A-Za-z0-9_:/.\-]*\Z")
_INT = re.compile(r"-?\d+\Z")
# A node name, or ``node:OpType`` on kernel and copy lines.
_LISTED_NAME = re.compile(r"[A-Za-z0-9._>][A-Za-z0-9_.\-:>]*(?:/[A-Za-z0-9_.\-:>]+)*\Z")
_OP_TYPE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_EDGE = re.compile(r"\Aedge_\d+_(.+):(MEMCPY\w*)\Z")
_EDGE_NAME = re.compile(r"\Aedge_\d+_(.+?)(?::(MEMCPY\w*))?\Z")
_GRAMMAR = "expected `name, inputs..., (output), DEVICE, <int>`"


@dataclass
class _Shape:
    text: str  # as written inside the parentheses
    dtype: str
    dims: str  # 128x64x56x56
    bytes: int | None


@dataclass
class _Line:
    lineno: int
    name: str
    device: str
    trailing: int
    controls: list[str] = field(default_factory=list)
    input_shapes: list[str] = field(default_factory=list)
    output: _Shape | None = None
    copy_bytes: int | None = None
    kernel_type: str | None = None  # set on kernel lines only


def _shape(path: Path, lineno: int, item: str) -> _Shape:
    m = _SHAPE.match(item)
    if not m:
        raise InputError(path, f"bad shape {snippet(item)}", f"line {lineno}")
    dtype = m.group(1) or "float32"
    if not known_dtype(dtype):
        raise InputError(path, f"unknown dtype {dtype!r} in {snippet(item)}", f"line {lineno}")
    size = dtype_size(dtype)
    dims = m.group(2)
    nbytes = None if size is None or "?" in dims else math.prod(int(d) for d in dims.split("x")) * size
    return _Shape(item[1:-1], dtype, dims, nbytes)


def _parse_line(path: Path, lineno: int, line: str) -> _Line:
    """One line -> _Line; InputError when it does not follow the grammar."""
    where = f"line {lineno}"
    fields = line.split(", ")
    if len(fields) < 4:
        raise InputError(path, f"{_GRAMMAR}, got {snippet(line)}", where)
    name, device, trailing, output = fields[0], fields[-2], fields[-1], fields[-3]
    if not _LISTED_NAME.match(name):
        raise InputError(path, f"bad node name {snippet(name)}", where)
    if not _DEVICE.match(device) or not _INT.match(trailing):
        raise InputError(path, f"{_GRAMMAR}, line ends with {snippet(', '.join(fields[-2:]))}", where)
    out = _Line(lineno, name, device, int(trailing))
    inputs = fields[1:-3]
    if ":" in name and inputs == ["(no input)"] and output == "(no output)":
        op, _, op_type = name.rpartition(":")
        if not op or not NODE_NAME.match(op) or not _OP_TYPE.match(op_type):
            raise InputError(path, f"kernel line name is not `node:OpType`: {snippet(name)}", where)
        out.name, out.kernel_type = op, op_type
        return out
    copy = _COPY_OUT.match(output)
    if copy:
        out.copy_bytes = int(copy.group(1))
    elif output != "(no output)":
        out.output = _shape(path, lineno, output)
    if ":" in name and out.copy_bytes is None:
        raise InputError(path, f"':' in a node name outside a kernel or copy line: {snippet(name)}", where)
    for item in inputs:
        if item.startswith("^"):
            if not NODE_NAME.match(item[1:]):
                raise InputError(path, f"bad control input {snippet(item)}", where)
            out.controls.append(item[1:])
        elif item != "(no input)":
            out.input_shapes.append(_shape(path, lineno, item).text)
    return out


def _read_lines(path: Path) -> list[_Line]:
    parsed = []
    for lineno, raw in enumerate(lines(path, FORMAT.name), start=1):
        if raw.strip():
            parsed.append(_parse_line(path, lineno, raw.strip()))
    if not parsed:
        raise InputError(path, "no op lines (empty file)", "line 1")
    return parsed


def _op_row(
    uid: str, name: str, type_: str, device: str | None, seq: int | None, executed: bool, attrs: dict[str, Any]
) -> Row:
    # The phase rule sees the type only where the listing recorded it (a
    # kernel line); a type guessed from the name says nothing the name does not.
    recorded = type_ if attrs.get("type_source") == "kernel" else None
    return {
        "uid": uid,
        "name": name,
        "type": type_,
        "device": device,
        "seq": seq,
        "start_us": None,
        "end_us": None,
        "dur_us": None,
        "phase": phase_of(name, recorded),
        "executed": executed,
        "attrs": json.dumps(attrs),
    }


def sniff(head: bytes) -> bool:
    """True when the first lines all read ``name, ..., DEVICE, <int>`` and
    at least one has a parenthesised shape (``(...)``)."""
    lines = head_lines(head)
    if not lines:
        return False
    sample = lines[:50]
    for line in sample:
        fields = line.split(", ")
        if len(fields) < 4 or not _LISTED_NAME.match(fields[0]):
            return False
        if not _DEVICE.match(fields[-2]) or not _INT.match(fields[-1]):
            return False
        if not all(f.startswith("^") or (f.startswith("(") and f.endswith(")")) for f in fields[1:-2]):
            return False
    return any("(" in line for line in sample)


def parse(path: Path) -> TraceFrames:
    """The listing as frames; see the module doc for what each line becomes."""
    lines = _read_lines(path)
    listed: dict[str, _Line] = {}
    kernel_lines: dict[str, _Line] = {}
    for ln in lines:
        if ln.kernel_type is not None:
            kernel_lines.setdefault(ln.name, ln)
        elif ln.name in listed:
            first = listed[ln.name].lineno
            raise InputError(path, f"node {snippet(ln.name)} listed twice (first on line {first})", f"line {ln.lineno}")
        else:
            listed[ln.name] = ln

    b = FramesBuilder(FORMAT.framework, [str(path)], time_unit="none")
    ops, kernels, consumes = b.ops, b.kernels, b.consumes
    tensors: list[Row] = []
    device = b.device

    for seq, ln in enumerate(listed.values()):
        attrs: dict[str, Any] = {"input_shapes": ln.input_shapes, "line": ln.lineno, "trailing_int": ln.trailing}
        kernel = kernel_lines.get(ln.name)
        if kernel is not None:
            assert kernel.kernel_type is not None  # kernel_lines holds kernel lines only
            type_, attrs["type_source"] = kernel.kernel_type, "kernel"
        elif ln.copy_bytes is not None:
            edge = _EDGE.match(ln.name)
            type_, attrs["type_source"] = (edge.group(2) if edge else "MEMCPY"), "copy"
        else:
            type_, attrs["type_source"] = op_type_from_name(ln.name), "name"
        uid = f"op:{ln.name}"
        ops.append(_op_row(uid, ln.name, type_, device(ln.device), seq, True, attrs))
        if ln.output is not None:
            tensors.append(
                {
                    "uid": f"t:{ln.name}:0",
                    "name": f"{ln.name}:0",
                    "dtype": ln.output.dtype,
                    "shape": ln.output.dims,
                    "bytes": ln.output.bytes,
                    "producer": uid,
                    "output_index": 0,
                    "param": None,
                }
            )
        if ln.copy_bytes is not None:
            stream = b.stream(device(ln.device), f"{ln.device}/memcpy", "memcpy", key=f"{ln.device}/memcpy")
            direction = type_[len("MEMCPY") :] if type_.startswith("MEMCPY") else None
            kernels.append(
                {
                    "uid": f"k:{ln.name}",
                    "op": uid,
                    "stream": stream,
                    "name": ln.name,
                    "start_us": None,
                    "end_us": None,
                    "dur_us": None,
                    "kind": "memcpy",
                    "bytes": ln.copy_bytes,
                    "direction": direction or None,
                }
            )

    # A kernel line whose node has no line of its own: the kernel still ran.
    for name, kl in kernel_lines.items():
        if name not in listed:
            assert kl.kernel_type is not None  # kernel_lines holds kernel lines only
            attrs = {"input_shapes": [], "line": kl.lineno, "type_source": "kernel", "listed": False}
            ops.append(_op_row(f"op:{name}", name, kl.kernel_type, device(kl.device), None, True, attrs))

    known = {row["name"] for row in ops}
    tensor_uids = {row["uid"] for row in tensors}
    for ln in listed.values():
        edge = _EDGE.match(ln.name)
        if ln.copy_bytes is not None and edge and f"t:{edge.group(1)}:0" in tensor_uids:
            consumes.append({"op": f"op:{ln.name}", "tensor": f"t:{edge.group(1)}:0", "input_index": 0})

    deps: list[Row] = []
    seen_deps: set[tuple[str, str]] = set()
    for ln in listed.values():
        for src in ln.controls:
            if src not in known:
                known.add(src)
                ops.append(
                    _op_row(
                        f"op:{src}",
                        src,
                        op_type_from_name(src),
                        None,
                        None,
                        False,
                        {"input_shapes": [], "type_source": "name", "listed": False},
                    )
                )
            key = (f"op:{src}", f"op:{ln.name}")
            if key not in seen_deps:
                seen_deps.add(key)
                deps.append({"src": key[0], "dst": key[1], "kind": "control"})

    b.tensors = {t["uid"]: t for t in tensors}
    b.deps = {(d["src"], d["dst"]): d for d in deps}
    return b.build()


# --------------------------------------------------------------------------- merge


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA


def _copy_key(name: str, op_type: object) -> str | None:
    """``edge_177_x:MEMCPYDtoH`` -> ``x:MEMCPYDtoH``: edge numbers differ
    between a listing and the StepStats of the same run, the copied node
    and direction do not. A base may also name the copy ``edge_N_x`` and
    keep ``MEMCPYDtoH`` in ``type`` only; both give the same key."""
    m = _EDGE_NAME.match(name)
    if not m:
        return None
    kind = m.group(2) or (op_type if isinstance(op_type, str) and op_type.startswith("MEMCPY") else None)
    return f"{m.group(1)}:{kind}" if kind else None


def _attrs(text: object) -> dict[str, Any]:
    if _missing(text):
        return {}
    try:
        value = json.loads(str(text))
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _listing_attrs(text: object, keep_type_source: bool) -> dict[str, Any]:
    """A listing op's attrs as they read on a merged op: ``line`` becomes
    ``listing_line`` (the base has its own lines), and ``type_source`` is
    dropped when the type stays the base's."""
    attrs = _attrs(text)
    if "line" in attrs:
        attrs["listing_line"] = attrs.pop("line")
    if not keep_type_source:
        attrs.pop("type_source", None)
    return attrs


def _fresh(uid: str, used: set[str]) -> str:
    """``uid``, or ``uid#oplist``/``#oplist2``... if the base already has it."""
    candidate, n = uid, 1
    while candidate in used:
        candidate = f"{uid}#oplist" + (str(n) if n > 1 else "")
        n += 1
    used.add(candidate)
    return candidate


def _records(df: pd.DataFrame) -> list[Row]:
    rows = cast("list[Row]", df.to_dict("records"))  # the frames' column names are str
    return [{k: (None if _missing(v) else v) for k, v in row.items()} for row in rows]


def merge(base: TraceFrames, extra: TraceFrames) -> TraceFrames:
    """Join a listing (``extra``) into a StepStats trace (``base``) by node name.

    Base wins on every value it has (times, devices, seq, executed); the
    listing only fills gaps, because StepStats records what ran while the
    listing describes the graph:

    * ops matched by ``name`` -- copies by copied node and direction, since
      their ``edge_N`` numbers differ between the two files (:func:`_copy_key`)
      -- get ``type``, ``phase`` and ``device`` where base has none, and the
      listing's attrs keys base lacks (``input_shapes``, ``listing_line``);
    * listing-only ops are added with ``executed`` False, ``attrs.only_in_listing``
      and no ``seq`` or times (the listing's order is alphabetical, not
      comparable), on the base device of the same kind when there is exactly
      one (else the listing's device is added);
    * control deps are all added, mapped to base uids and deduplicated
      against base deps on (src, dst, kind);
    * tensors are matched by (producer, output_index): dtype/shape/bytes
      fill base gaps; unmatched ones are added. Consumes and copy kernels
      are added only where base has none for that op (and input index).

    Uses only the frames contract, so any base format works. ``sources`` is
    ``base.sources + extra.sources``; the result passes ``check()``.
    """
    used: set[str] = set()
    for df in (base.ops, base.kernels, base.tensors, base.allocations, base.devices, base.streams, base.allocators):
        used.update(df["uid"])
    rows = {"devices": _records(base.devices), "streams": _records(base.streams)}  # the merged frames' rows
    map_device = _device_mapper(rows["devices"], _records(extra.devices), used)
    rows["ops"], op_map = _merge_ops(_records(base.ops), _records(extra.ops), map_device, used)
    rows["tensors"], tensor_map = _merge_tensors(_records(base.tensors), _records(extra.tensors), op_map, used)
    rows["consumes"] = _merge_consumes(_records(base.consumes), _records(extra.consumes), op_map, tensor_map)
    rows["deps"] = _merge_deps(_records(base.deps), _records(extra.deps), op_map)
    rows["kernels"] = _merge_kernels(_records(base.kernels), extra, rows["streams"], op_map, map_device, used)
    sources = [*base.sources, *extra.sources]
    merged = frames_of(base.framework, sources, base.time_unit, {**extra.meta, **base.meta}, rows)
    merged.allocations = base.allocations.copy()
    merged.allocators = base.allocators.copy()
    merged.check()
    return merged


def _merge_deps(deps: list[Row], extra: list[Row], op_map: dict[str, str]) -> list[Row]:
    """Base deps, then the listing's mapped to base uids where base has no
    dep of that (src, dst, kind)."""
    seen = {(d["src"], d["dst"], d["kind"]) for d in deps}
    for row in extra:
        key = (op_map[row["src"]], op_map[row["dst"]], row["kind"])
        if key not in seen:
            seen.add(key)
            deps.append({"src": key[0], "dst": key[1], "kind": key[2]})
    return deps


def _device_mapper(devices: list[Row], extra_devices: list[Row], used: set[str]) -> Callable[[str | None], str | None]:
    """Listing device uid -> base device uid: the one base device of the same
    kind (``GPU``), narrowed by name when there are several; if that is still
    not one device, the listing's device is appended to ``devices``."""
    wanted = {row["uid"]: row for row in extra_devices}
    mapping: dict[str, str] = {}

    def map_device(uid: str | None) -> str | None:
        if uid is None or uid not in wanted:
            return None
        if uid not in mapping:
            want = wanted[uid]
            same = [d for d in devices if str(d["kind"]).upper() == str(want["kind"]).upper()]
            if len(same) > 1:
                same = [d for d in same if str(want["name"]) in str(d["name"])]
            if len(same) == 1:
                mapping[uid] = same[0]["uid"]
            else:
                mapping[uid] = _fresh(uid, used)
                devices.append({**want, "uid": mapping[uid]})
        return mapping[uid]

    return map_device


def _merge_ops(
    ops: list[Row], extra_ops: list[Row], map_device: Callable[[str | None], str | None], used: set[str]
) -> tuple[list[Row], dict[str, str]]:
    """Base ops with gaps filled, plus listing-only ops; and listing uid -> result uid."""
    by_name: dict[str, Row] = {}
    by_copy: dict[str, list[Row]] = {}
    for row in ops:
        by_name.setdefault(row["name"], row)
        key = _copy_key(str(row["name"]), row["type"])
        if key:
            by_copy.setdefault(key, []).append(row)
    op_map: dict[str, str] = {}
    matched: set[str] = set()
    for row in extra_ops:
        target = by_name.get(row["name"])
        if target is None:
            candidates = [
                r for r in by_copy.get(_copy_key(str(row["name"]), row["type"]) or "", []) if r["uid"] not in matched
            ]
            target = candidates[0] if len(candidates) == 1 else None
        if target is not None and target["uid"] not in matched:
            matched.add(target["uid"])
            op_map[row["uid"]] = target["uid"]
            listing = _listing_attrs(row["attrs"], keep_type_source=target["type"] is None)
            for col in ("type", "phase"):
                if target[col] is None:
                    target[col] = row[col]
            if target["device"] is None:
                target["device"] = map_device(row["device"])
            target["attrs"] = json.dumps({**listing, **_attrs(target["attrs"])})
            continue
        new = {
            **row,
            "uid": _fresh(row["uid"], used),
            "seq": None,
            "executed": False,
            "start_us": None,
            "end_us": None,
            "dur_us": None,
            "device": map_device(row["device"]),
            "attrs": json.dumps({**_listing_attrs(row["attrs"], True), "only_in_listing": True}),
        }
        op_map[row["uid"]] = new["uid"]
        ops.append(new)
    return ops, op_map


def _merge_tensors(
    tensors: list[Row], extra_tensors: list[Row], op_map: dict[str, str], used: set[str]
) -> tuple[list[Row], dict[str, str]]:
    """Match on (producer, output_index); fill dtype/shape/bytes gaps, add the rest."""
    by_output: dict[tuple[str | None, int | None], Row] = {
        (t["producer"], int(t["output_index"])): t
        for t in tensors
        if t["producer"] is not None and t["output_index"] is not None
    }
    tensor_map: dict[str, str] = {}
    for row in extra_tensors:
        producer = op_map.get(row["producer"]) if row["producer"] is not None else None
        index = int(row["output_index"]) if row["output_index"] is not None else None
        target = by_output.get((producer, index))
        if target is not None:
            tensor_map[row["uid"]] = target["uid"]
            for col in ("dtype", "shape", "bytes"):
                if target[col] is None:
                    target[col] = row[col]
        else:
            new = {**row, "uid": _fresh(row["uid"], used), "producer": producer}
            tensor_map[row["uid"]] = new["uid"]
            tensors.append(new)
    return tensors, tensor_map


def _merge_consumes(
    consumes: list[Row], extra_consumes: list[Row], op_map: dict[str, str], tensor_map: dict[str, str]
) -> list[Row]:
    """Add a listing consume unless base has that (op, tensor) or (op, input_index)."""
    taken = {(c["op"], c["tensor"]) for c in consumes} | {(c["op"], c["input_index"]) for c in consumes}
    for row in extra_consumes:
        op, tensor = op_map.get(row["op"]), tensor_map.get(row["tensor"])
        if op and tensor and (op, tensor) not in taken and (op, row["input_index"]) not in taken:
            taken |= {(op, tensor), (op, row["input_index"])}
            consumes.append({"op": op, "tensor": tensor, "input_index": row["input_index"]})
    return consumes


def _merge_kernels(
    kernels: list[Row],
    extra: TraceFrames,
    streams: list[Row],
    op_map: dict[str, str],
    map_device: Callable[[str | None], str | None],
    used: set[str],
) -> list[Row]:
    """Copy kernels: fill bytes/direction on base kernels of the same op and
    kind; add the kernel (on the base stream of that kind and device, if
    there is exactly one) only for ops base has no kernel for."""
    ops_with_kernels = {k["op"] for k in kernels}
    extra_streams = {row["uid"]: row for row in _records(extra.streams)}
    stream_map: dict[str, str] = {}
    for row in _records(extra.kernels):
        op = op_map[row["op"]]
        if op in ops_with_kernels:
            for k in kernels:
                if k["op"] == op and k["kind"] == row["kind"]:
                    for col in ("bytes", "direction"):
                        if k[col] is None:
                            k[col] = row[col]
            continue
        if row["stream"] not in stream_map:
            want = extra_streams[row["stream"]]
            dev = map_device(want["device"])
            same = [s for s in streams if s["device"] == dev and s["kind"] == want["kind"]]
            if len(same) == 1:
                stream_map[row["stream"]] = same[0]["uid"]
            else:
                stream_map[row["stream"]] = _fresh(want["uid"], used)
                streams.append({**want, "uid": stream_map[row["stream"]], "device": dev})
        kernels.append({**row, "uid": _fresh(row["uid"], used), "op": op, "stream": stream_map[row["stream"]]})
    return kernels
