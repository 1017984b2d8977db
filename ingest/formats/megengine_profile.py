"""MegEngine ``load_and_run --profile`` JSON (``megengine-profile``).

One JSON object with two parts: ``graph_exec`` (the compiled graph: operators,
vars, static memory chunks and the execution order ``comp_seq``) and
``profiler`` (per-operator host/device start/kern/end seconds and a
footprint with shapes, params, bytes and FLOPs). Joining the two by operator
id gives a timed graph with memory, which is what the graph schema wants.

Rules this parser applies:

* Every operator is an Op ``op:<id>`` (type, name). Operators in
  ``comp_seq`` have ``seq`` = their position there and ``executed = True``;
  the others (folded away at compile time) keep ``seq = None``,
  ``executed = False`` and no times.
* Times are seconds in the file; here microseconds since the earliest
  start/kern/end value anywhere in ``profiler.host`` and ``profiler.device``.
  ``start_us``/``end_us`` are the device times (earliest start, latest end
  over the op's comp nodes), else the host times; ``dur_us = end - start``.
  Host and device times per thread/comp node, including ``kern``, are kept in
  ``attrs`` (``host``/``device``) next to the footprint (``flops``,
  ``memory_bytes``, ``in_shapes``, ``out_shapes``, ``params``) and every
  operator field the parser does not map (``extra``, ``waiting_spec``, ...).
* One Kernel ``k:<op id>:<comp node>`` per device record, on the stream
  ``s:<comp node>`` (kind compute): MegEngine runs one queue per comp node,
  so stream analyses (overlap, idle gaps) work on these.
* Comp nodes (from vars and device records) are Devices ``dev:<name>`` and
  each has one Allocator ``mem:<name>``. The op's device is the comp node of
  its device record, else that of its first output var.
* Vars are Tensors ``t:<id>``: shape as ``10x3x224x224`` (static layout,
  else the statically inferred shape, else the footprint's out shape;
  ``scalar`` for ``[]``), dtype from the static layout, bytes = size of the
  static mem chunk, else the dynamic range ``prev_dev_ptr_end -
  prev_dev_ptr``. ``producer`` is the operator listing the var as output.
* Each mem chunk is an Allocation ``a:<chunk id>`` (bytes = size, address =
  dev_ptr, tensor = owner var, op = its producer), kind ``persistent`` when
  the owner var is flagged PERSISTENT_DEVICE_VALUE (weights) and ``output``
  otherwise. A var with no static chunk but a dynamic range (both pointers,
  non-zero) gets ``a:dyn:<var id>``, kind ``temp`` when flagged
  VOLATILE_CONTENT (workspaces), else ``output``. A var with
  ``mem_readonly_fwd_src`` has no memory of its own: it lives in its
  source's allocation (so a reshape keeps its input's block alive).
* Lifetime of an allocation: from ``start_us`` of the first executed op
  (comp_seq order) that produces or reads any var living in it to
  ``end_us`` of the last such op; None when no timed op touches it.
* Deps: one ``data`` dep from a var's producer to each consumer.
* Without any profiler times the trace is in steps (``start_us = seq``).

* A key given twice in one JSON object (an operator or var id listed
  twice) is an InputError: a JSON reader would silently keep the last.
  Operator *names* may repeat (ops are keyed by id).
* Times in seconds may have any sign (only their differences matter);
  a record whose end is before its start is an InputError.

Malformed input raises InputError naming the JSON field path
(``graph_exec.var["783"].mem_plan``) or the line/column of a syntax error.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from tracegraph.errors import InputError
from tracegraph.ingest.formats.kit import FormatInfo, FramesBuilder, Joins
from tracegraph.ingest.frames import (
    TENSOR_COLUMNS,
    Row,
    TraceFrames,
)
from tracegraph.ingest.source import read_text

FORMAT = FormatInfo("megengine-profile", "megengine", Joins.ALONE, "MegEngine profiler JSON")

_SNIFF = re.compile(rb'"(graph_exec|opr_footprint|opr_internal_pf|comp_seq|mem_chunk)"\s*:')
_MAPPED_OP_FIELDS = ("id", "name", "type", "input", "output", "node_type")
_TIME_KEYS = ("start", "kern", "end")


def sniff(head: bytes) -> bool:
    """A JSON object using the profile's own key names."""
    return head.lstrip().startswith(b"{") and _SNIFF.search(head) is not None


def parse(path: Path) -> TraceFrames:
    """The profile as frames in microseconds (rules in the module docstring)."""
    doc = _load(path)
    g = _get(path, doc, "graph_exec", dict, "")
    prof = _get(path, doc, "profiler", dict, "", {})
    ops = _get(path, g, "operator", dict, "graph_exec")
    vars_ = _get(path, g, "var", dict, "graph_exec")
    chunks = _get(path, g, "mem_chunk", dict, "graph_exec", {})
    seq = _comp_seq(path, g, ops)
    b = _Build(path, ops, vars_, seq)
    b.times(prof)
    b.add_ops(_get(path, prof, "opr_footprint", dict, "profiler", {}))
    b.add_vars()
    b.add_allocations(chunks)
    frames = b.frames()
    frames.check()
    return frames


# --- validated access -----------------------------------------------------------


class _DuplicateKey(Exception):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, refusing a key given twice: a plain JSON reader keeps
    only the last, so an operator or var listed twice would vanish."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for k, _ in pairs:  # the first key met a second time
            if k in seen:
                raise _DuplicateKey(k)
            seen.add(k)
    return obj


def _load(path: Path) -> dict[str, Any]:
    text = read_text(path, FORMAT.name)
    if not text.strip():
        raise InputError(path, "empty file")
    try:
        doc = json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as e:
        raise InputError(path, f"not JSON: {e.msg}", f"line {e.lineno} column {e.colno}") from None
    except _DuplicateKey as e:
        raise InputError(path, f"key {json.dumps(e.args[0])} given twice in one JSON object") from None
    except RecursionError:
        raise InputError(path, "JSON nested too deeply") from None
    if not isinstance(doc, dict):
        raise InputError(path, "not a JSON object", "line 1")
    return doc


_NOTHING = object()
_TYPE_NAMES = {dict: "an object", list: "a list", str: "a string", int: "an integer", float: "a number"}


def _field(where: str, key: str) -> str:
    """``graph_exec.var``: a key of the format's own schema."""
    return f"{where}.{key}" if where else key


def _item(where: str, key: str) -> str:
    """``graph_exec.var["783"]``: an id (operator, var, chunk, comp node), bracketed as in jq."""
    return f"{where}[{json.dumps(key)}]"


def _get(path: Path, obj: dict[str, Any], key: str, kind: type, where: str, default: Any = _NOTHING) -> Any:
    """``obj[key]`` checked to be ``kind``; a missing or null key gives ``default``."""
    value = obj.get(key)
    if value is None:
        if default is _NOTHING:
            raise InputError(path, f"missing {key!r}", _field(where, key))
        return default
    if not isinstance(value, kind) or isinstance(value, bool):
        raise InputError(path, f"expected {_TYPE_NAMES.get(kind, kind.__name__)}", _field(where, key))
    return value


def _id(path: Path, value: Any, where: str) -> str:
    """Ids are strings in the file; plain integers are accepted as the same id."""
    if isinstance(value, str) and value:
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise InputError(path, "expected an id", where)


def _count(path: Path, obj: dict[str, Any], key: str, where: str) -> int | None:
    """A non-negative integer (bytes, pointer) or None."""
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InputError(path, "expected a non-negative integer", _field(where, key))
    return value


def _seconds(path: Path, value: Any, where: str) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise InputError(path, "expected a time in seconds", where)
    return float(value)


def _shape(path: Path, value: Any, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in value):
        raise InputError(path, "expected a shape (list of sizes)", where)
    return "x".join(str(d) for d in value) if value else "scalar"


def _comp_seq(path: Path, g: dict[str, Any], ops: dict[str, Any]) -> dict[str, int]:
    seq: dict[str, int] = {}
    for i, raw in enumerate(_get(path, g, "comp_seq", list, "graph_exec")):
        where = f"graph_exec.comp_seq[{i}]"
        oid = _id(path, raw, where)
        if oid not in ops:
            raise InputError(path, f"unknown operator {oid!r}", where)
        if oid in seq:
            raise InputError(path, f"operator {oid!r} listed twice (also at [{seq[oid]}])", where)
        seq[oid] = i
    return seq


# --- building ----------------------------------------------------------------------


class _Build:
    """Accumulates rows; one method per part of the file, in dependency order."""

    def __init__(self, path: Path, ops: dict[str, Any], vars_: dict[str, Any], seq: dict[str, int]) -> None:
        self.path, self.raw_ops, self.raw_vars, self.seq = path, ops, vars_, seq
        self.ops: dict[str, Row] = {}
        self.kernels: list[Row] = []
        # var id -> its tensor row, plus working keys (node, chunk, where, fwd,
        # flags, dynamic) that frames() leaves out
        self.tensors: dict[str, dict[str, Any]] = {}
        self.consumes: list[Row] = []
        self.deps: dict[tuple[str, str], Row] = {}
        self.allocations: list[Row] = []
        self.comp_nodes: dict[str, None] = {}
        self.producer: dict[str, str] = {}  # var id -> op id
        self.readers: dict[str, list[str]] = {}  # var id -> op ids
        self.host: dict[str, dict[str, dict[str, float]]] = {}  # op id -> thread -> {start,kern,end} seconds
        self.device: dict[str, dict[str, dict[str, float]]] = {}  # op id -> comp node -> {start,kern,end} seconds
        self.out_shapes: dict[str, Any] = {}  # op id -> footprint out_shapes
        self.origin = 0.0
        self.unit = "us"

    def times(self, prof: dict[str, Any]) -> None:
        """Read host/device records; the origin is the earliest value of all."""
        for part, out in (("host", self.host), ("device", self.device)):
            for oid, per_node in _get(self.path, prof, part, dict, "profiler", {}).items():
                where = _item(f"profiler.{part}", oid)
                if oid not in self.raw_ops:
                    raise InputError(self.path, f"times for unknown operator {oid!r}", where)
                if not isinstance(per_node, dict):
                    raise InputError(self.path, "expected an object", where)
                out[oid] = {node: self._record(rec, _item(where, node)) for node, rec in per_node.items()}
        values = [
            t
            for recs in (self.host, self.device)
            for per in recs.values()
            for rec in per.values()
            for t in rec.values()
        ]
        if values:
            self.origin = min(values)
        else:
            self.unit = "step"

    def _record(self, rec: Any, where: str) -> dict[str, float]:
        if not isinstance(rec, dict):
            raise InputError(self.path, "expected an object", where)
        out = {k: _seconds(self.path, rec.get(k), _field(where, k)) for k in _TIME_KEYS if k in rec}
        if "start" not in out or "end" not in out:
            raise InputError(self.path, "record needs 'start' and 'end'", where)
        if out["end"] < out["start"]:
            raise InputError(self.path, "end before start", _field(where, "end"))
        return out

    def _us(self, seconds: float) -> float:
        return (seconds - self.origin) * 1e6

    def add_ops(self, footprints: dict[str, Any]) -> None:
        for oid, raw in self.raw_ops.items():
            where = _item("graph_exec.operator", oid)
            if not isinstance(raw, dict):
                raise InputError(self.path, "expected an object", where)
            fp = footprints.get(oid, {})
            if not isinstance(fp, dict):
                raise InputError(self.path, "expected an object", _item("profiler.opr_footprint", oid))
            self._op(oid, raw, fp, where)
        for oid in footprints:
            if oid not in self.raw_ops:
                raise InputError(
                    self.path, f"footprint of unknown operator {oid!r}", _item("profiler.opr_footprint", oid)
                )

    def _link(self, oid: str, raw: dict[str, Any], where: str) -> None:
        """Outputs make the op a var's producer, inputs make it a reader."""
        for key in ("output", "input"):
            for i, v in enumerate(_get(self.path, raw, key, list, where, [])):
                at = f"{_field(where, key)}[{i}]"
                vid = _id(self.path, v, at)
                if vid not in self.raw_vars:
                    raise InputError(self.path, f"unknown var {vid!r}", at)
                if key == "output":
                    if vid in self.producer:
                        raise InputError(
                            self.path, f"var {vid!r} is also output of operator {self.producer[vid]!r}", at
                        )
                    self.producer[vid] = oid
                    self.tensors.setdefault(vid, {})["output_index"] = i
                else:
                    self.readers.setdefault(vid, []).append(oid)
                    self.consumes.append({"op": f"op:{oid}", "tensor": f"t:{vid}", "input_index": i})

    def _op(self, oid: str, raw: dict[str, Any], fp: dict[str, Any], where: str) -> None:
        uid = f"op:{oid}"
        self._link(oid, raw, where)
        executed = oid in self.seq
        host = self.host.get(oid, {}) if executed else {}
        device = self.device.get(oid, {}) if executed else {}
        span = device or host
        start = min((r["start"] for r in span.values()), default=None)
        end = max((r["end"] for r in span.values()), default=None)
        start_us: float | None
        end_us: float | None
        if self.unit == "step" and executed:
            start_us, end_us = float(self.seq[oid]), float(self.seq[oid] + 1)
        else:
            start_us = None if start is None else self._us(start)
            end_us = None if end is None else self._us(end)
        attrs = {k: v for k, v in raw.items() if k not in _MAPPED_OP_FIELDS}
        attrs.update(self._footprint(fp))
        self.out_shapes[oid] = fp.get("out_shapes")
        if host:
            attrs["host"] = {n: {f"{k}_us": self._us(t) for k, t in r.items()} for n, r in host.items()}
        if device:
            attrs["device"] = {n: {f"{k}_us": self._us(t) for k, t in r.items()} for n, r in device.items()}
        for node in device:
            self.comp_nodes.setdefault(node)
        self.ops[oid] = {
            "uid": uid,
            "name": _get(self.path, raw, "name", str, where, oid),
            "type": _get(self.path, raw, "type", str, where),
            "device": f"dev:{next(iter(device))}" if device else None,
            "seq": self.seq.get(oid),
            "start_us": start_us,
            "end_us": end_us,
            "dur_us": None if start_us is None or end_us is None else end_us - start_us,  # both or neither
            "phase": None,
            "executed": executed,
            "attrs": json.dumps(attrs),
        }
        for node, r in device.items():
            s, e = self._us(r["start"]), self._us(r["end"])
            self.kernels.append(
                {
                    "uid": f"k:{oid}:{node}",
                    "op": uid,
                    "stream": f"s:{node}",
                    "name": self.ops[oid]["name"],
                    "start_us": s,
                    "end_us": e,
                    "dur_us": e - s,
                    "kind": "compute",
                    "bytes": None,
                    "direction": None,
                }
            )

    @staticmethod
    def _footprint(fp: dict[str, Any]) -> dict[str, Any]:
        """Footprint fields under clearer names; unknown ones keep theirs."""
        names = {"computation": "flops", "memory": "memory_bytes", "param": "params"}
        return {names.get(k, k): v for k, v in fp.items()}

    def add_vars(self) -> None:
        for vid, raw in self.raw_vars.items():
            where = _item("graph_exec.var", vid)
            if not isinstance(raw, dict):
                raise InputError(self.path, "expected an object", where)
            node = _get(self.path, raw, "comp_node", str, where)
            self.comp_nodes.setdefault(node)
            plan = _get(self.path, raw, "mem_plan", dict, where, None)
            pw = _field(where, "mem_plan")
            chunk = _id(self.path, plan.get("mem_chunk_id"), _field(pw, "mem_chunk_id")) if plan else None
            layout = _get(self.path, plan, "layout", dict, pw, {}) if plan else {}
            lw = _field(pw, "layout")
            dtype = _get(self.path, layout, "dtype", str, lw, None)
            shape = _shape(self.path, layout.get("shape"), _field(lw, "shape"))
            if shape is None:
                shape = self._inferred_shape(raw, where)
            if shape is None:
                shape = self._footprint_shape(vid)
            producer = self.producer.get(vid)
            t = self.tensors.setdefault(vid, {})
            t.update(
                {
                    "uid": f"t:{vid}",
                    "name": _get(self.path, raw, "name", str, where, vid),
                    "dtype": dtype,
                    "shape": shape,
                    "bytes": None,
                    "producer": None if producer is None else f"op:{producer}",
                    "param": None,
                    "node": node,
                    "chunk": chunk,
                    "where": where,
                }
            )
            t.setdefault("output_index", None)
            lo, hi = _count(self.path, raw, "prev_dev_ptr", where), _count(self.path, raw, "prev_dev_ptr_end", where)
            if lo and hi is not None:
                if hi < lo:
                    raise InputError(
                        self.path, "dynamic range ends before it starts", _field(where, "prev_dev_ptr_end")
                    )
                t["dynamic"] = (lo, hi - lo)
                t["bytes"] = hi - lo
            t["fwd"] = (
                _id(self.path, raw["mem_readonly_fwd_src"], _field(where, "mem_readonly_fwd_src"))
                if raw.get("mem_readonly_fwd_src") is not None
                else None
            )
            if t["fwd"] is not None and t["fwd"] not in self.raw_vars:
                raise InputError(self.path, f"unknown var {t['fwd']!r}", _field(where, "mem_readonly_fwd_src"))
            t["flags"] = _get(self.path, raw, "flag", list, where, [])

    def _inferred_shape(self, raw: dict[str, Any], where: str) -> str | None:
        tags = raw.get("static_infer_tags")
        tag = tags.get("SHAPE") if isinstance(tags, dict) else None
        if not isinstance(tag, dict):
            return None
        return _shape(self.path, tag.get("inferred_result"), _field(where, "static_infer_tags.SHAPE.inferred_result"))

    def _footprint_shape(self, vid: str) -> str | None:
        """The footprint's out shape, when it says more than ``[]``."""
        oid = self.producer.get(vid)
        if oid is None:
            return None
        shapes = self.out_shapes.get(oid)
        i = self.tensors[vid].get("output_index")
        if not isinstance(shapes, list) or i is None or i >= len(shapes) or not shapes[i]:
            return None
        return _shape(self.path, shapes[i], _field(_item("profiler.opr_footprint", oid), "out_shapes") + f"[{i}]")

    def add_allocations(self, chunks: dict[str, Any]) -> None:
        residents: dict[str, list[str]] = {}  # chunk id or "dyn:<var>" -> var ids living there
        for vid, t in self.tensors.items():
            if t["chunk"] is not None:
                if t["chunk"] not in chunks:
                    raise InputError(
                        self.path,
                        f"unknown mem chunk {t['chunk']!r}",
                        _field(_field(t["where"], "mem_plan"), "mem_chunk_id"),
                    )
                residents.setdefault(t["chunk"], []).append(vid)
        for vid, t in self.tensors.items():
            if t["chunk"] is None and t["fwd"] is None and "dynamic" in t:
                residents.setdefault(f"dyn:{vid}", []).append(vid)
        for vid in self.tensors:
            home = self._home(vid)
            if home != vid:
                key = self._key_of(home, residents)
                if key is not None:
                    residents[key].append(vid)
        for cid, raw in chunks.items():
            self._chunk(cid, raw, residents.get(cid, []))
        for key, vids in residents.items():
            if key.startswith("dyn:"):
                self._dynamic(key[4:], vids)

    def _home(self, vid: str) -> str:
        """Follow read-only forwarding to the var that owns the memory."""
        seen = {vid}
        while self.tensors[vid]["fwd"] is not None:
            vid = self.tensors[vid]["fwd"]
            if vid in seen:
                raise InputError(
                    self.path, "read-only forwarding loop", _field(self.tensors[vid]["where"], "mem_readonly_fwd_src")
                )
            seen.add(vid)
        return vid

    def _key_of(self, vid: str, residents: dict[str, list[str]]) -> str | None:
        chunk: str | None = self.tensors[vid]["chunk"]
        if chunk is not None:
            return chunk
        return f"dyn:{vid}" if f"dyn:{vid}" in residents else None

    def _chunk(self, cid: str, raw: Any, vids: list[str]) -> None:
        where = _item("graph_exec.mem_chunk", cid)
        if not isinstance(raw, dict):
            raise InputError(self.path, "expected an object", where)
        size = _count(self.path, raw, "size", where)
        if size is None:
            raise InputError(self.path, "missing 'size'", _field(where, "size"))
        owner = _id(self.path, raw.get("owner_var"), _field(where, "owner_var"))
        if owner not in self.tensors:
            raise InputError(self.path, f"unknown var {owner!r}", _field(where, "owner_var"))
        t = self.tensors[owner]
        for vid in vids:
            if self.tensors[vid]["chunk"] is not None:
                self.tensors[vid]["bytes"] = size
        persistent = "PERSISTENT_DEVICE_VALUE" in t["flags"]
        self._allocation(
            f"a:{cid}",
            owner,
            size,
            _count(self.path, raw, "dev_ptr", where),
            "persistent" if persistent else "output",
            vids or [owner],
        )

    def _dynamic(self, vid: str, vids: list[str]) -> None:
        t = self.tensors[vid]
        address, size = t["dynamic"]
        kind = "temp" if "VOLATILE_CONTENT" in t["flags"] else "output"
        self._allocation(f"a:dyn:{vid}", vid, size, address, kind, vids)

    def _allocation(self, uid: str, vid: str, size: int, address: int | None, kind: str, vids: list[str]) -> None:
        users: set[str] = set()
        for v in vids:
            users.update(self.readers.get(v, []))
            if v in self.producer:
                users.add(self.producer[v])
        touched = sorted(
            (o for o in users if o in self.seq and self.ops[o]["start_us"] is not None), key=self.seq.__getitem__
        )
        t = self.tensors[vid]
        self.allocations.append(
            {
                "uid": uid,
                "allocator": f"mem:{t['node']}",
                "bytes": size,
                "requested_bytes": None,
                "alloc_us": self.ops[touched[0]]["start_us"] if touched else None,
                "free_us": self.ops[touched[-1]]["end_us"] if touched else None,
                "address": address,
                "kind": kind,
                "op": t["producer"],
                "tensor": t["uid"],
            }
        )

    def frames(self) -> TraceFrames:
        for vid, t in self.tensors.items():
            oid = self.producer.get(vid)
            if oid is not None and self.ops[oid]["device"] is None:
                self.ops[oid]["device"] = f"dev:{t['node']}"
        for vid, readers in self.readers.items():
            src = self.producer.get(vid)
            for dst in readers:
                if src is not None and src != dst:
                    self.deps.setdefault((src, dst), {"src": f"op:{src}", "dst": f"op:{dst}", "kind": "data"})
        nodes = list(self.comp_nodes)
        streams = sorted({k["stream"][2:] for k in self.kernels})
        tensors = [{c: t[c] for c in TENSOR_COLUMNS} for t in self.tensors.values()]
        b = FramesBuilder(FORMAT.framework, [str(self.path)], time_unit=self.unit)
        for n in nodes:  # one device, allocator (and stream, where kernels ran) per comp node
            device = b.device(n)
            b.allocator(n, device)
            if n in streams:
                b.stream(device, n, key=n)
        b.ops = list(self.ops.values())
        b.kernels, b.consumes, b.allocations = self.kernels, self.consumes, self.allocations
        b.tensors = {t["uid"]: t for t in tensors}
        b.deps = self.deps
        b.meta = {"operators": len(self.ops), "executed": len(self.seq)}
        return b.frames()
