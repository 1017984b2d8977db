"""PyTorch Execution Traces (``pytorch-et``): the JSON that
``torch.profiler.ExecutionTraceObserver`` writes (MLCommons Chakra's
input), alone or joined to the Kineto trace of the same step.

A Kineto trace says when each op ran; the Execution Trace (ET) says which
tensors each op read and wrote, so together they give PyTorch steps real
data dependencies, and with them the critical path, slack, what-if and
who holds the memory.

Detected by content: a JSON object (gzipped or not) with ``nodes`` and
either the ET's root node names (``[pytorch|profiler|execution_trace|...``)
or a Chakra ``schema``. The file is read whole (limit in the README).

The rules (the README's "PyTorch Execution Trace" section says the same):

* **Ops.** Every node but the process and thread roots
  (``[pytorch|profiler|execution_trace|process]`` / ``...|thread]``) is an
  op; its parent is its ``ctrl_deps`` node unless that is a root. Node ids
  come from one counter taken when an op starts, so id order is start
  order, on every thread.
* **Tensors.** A tensor value is ``[tensor id, storage id, offset, numel,
  itemsize, device]`` (also inside lists: ``GenericList[Tensor(float),...]``).
  Data is identified by its *storage*: views share it with their base, and
  an in-place write through any view changes what every alias reads.
  Undefined tensors (storage 0) and empty ones (numel 0: they all share
  the null pointer's storage) are left out.
* **What a node reads and writes.** It reads every storage among its
  inputs. It writes a storage among its outputs that is new (not among its
  inputs) or that it mutates: its ``op_schema`` marks that argument or
  return ``!`` (``Tensor(a!)``), or, without a schema, its name ends in
  ``_`` (``aten::add_``); inputs marked ``!`` are written even when not
  returned (``out=`` arguments). A view (an output on an input's storage,
  no ``!``) writes nothing.
* **Which ops carry the dependencies.** The *carriers*: the outermost ops
  that read or write a tensor (an op with tensors none of whose ancestors
  has any): top-level aten ops in the forward pass, the autograd nodes
  (``AddmmBackward0``, ``AccumulateGrad``; their ``evaluate_function``
  scope has no tensors) and the in-place updates inside
  ``Optimizer.step``. A carrier's reads and writes are those of its whole
  subtree in id order (autograd nodes list only the incoming gradients;
  what they compute appears as their children's outputs), a read counting
  only when the subtree has not written that storage already (an op that
  fills its own output buffer).
* **Dependencies.** Over the carriers in id order, each storage has a last
  writer; a carrier that reads a storage depends on its last writer
  (``DATA``), then becomes the last writer of what it writes. Each write
  is a new ``Tensor`` (a version of the storage: ``PRODUCES``), each read
  a ``CONSUMES`` of the version read; a storage read before any write
  (parameters, inputs, what was made before the trace) is a tensor
  without a producer. Only true (read-after-write) dependencies count; a
  write does not wait for earlier readers. Ops on other threads (a
  separate autograd thread) take part like any other: id order is start
  order across threads.
* **Storage ids are reused.** The observer keys storages by data address,
  so memory freed and allocated again (a temporary, a Python scalar
  wrapped into a tensor outside any op) comes back with an old storage id.
  With the Kineto trace (its ``[memory]`` events), a dependency is left out
  when the allocation the writer wrote was freed before the reader
  started; the reader then reads a tensor without a producer. The address
  of a storage is the one allocation of its size (numel x itemsize) that
  Kineto attributes to the op that created it (output, not among its
  inputs nor made by a child); storages without exactly one such
  allocation keep every dependency.

Joined to a Kineto trace (:func:`merge`):

* **Matching.** An ET node and a Kineto ``cpu_op`` / ``user_annotation``
  event are the same op when the node's ``rf_id`` equals the event's
  ``Record function id`` and their names are equal, among the events of
  the ET's process (``pid``). A pair where fewer than half of the ET's ops
  match is refused: the files are of different steps or runs. ET carriers
  without a Kineto event (and their dependencies) and Kineto ops of that
  process without an ET node are counted in the trace's meta
  (``et_carriers_without_kineto``, ``kineto_ops_without_et``,
  ``et_ops_matched``).
* The Kineto ops keep everything they had (times, kernels, nesting); the
  matched carriers get ``carries_deps`` and the tensors, ``DATA`` edges,
  ``PRODUCES`` and ``CONSUMES`` above. An allocation whose address is a
  storage's (above) backs the tensor version that storage's first write
  made and belongs to the carrier that wrote it.

An ET alone (:func:`parse`) makes the same ops, tensors and dependencies
with no times (``time_unit`` ``none``).

Errors (one line naming the file): not JSON, truncated, no ``nodes``
list, a node without an integer ``id`` or a ``name``.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracegraph.errors import InputError, TooLarge, first_line
from tracegraph.ingest import source
from tracegraph.ingest.formats import kit
from tracegraph.ingest.formats.kineto.phase import assign_phases
from tracegraph.ingest.formats.kit import FormatInfo, FramesBuilder, Joins, Kind, Role
from tracegraph.ingest.frames import Row, TraceFrames
from tracegraph.ingest.limits import MAX_FILE_BYTES, human

FORMAT = FormatInfo(
    "pytorch-et", "pytorch", Joins.DETAIL, "PyTorch Execution Trace JSON (adds tensors and dependencies to Kineto)"
)
NAME = FORMAT.name
ROOT_PREFIX = "[pytorch|profiler|execution_trace|"
# Below this share of the ET's ops matched to Kineto events, a pair is refused.
MIN_MATCHED_SHARE = 0.5
_USER_ANNOTATION_SCOPE = 7


def sniff(head: bytes) -> bool:
    """A JSON object with ``nodes`` and the ET's root names or a Chakra schema."""
    text = source.unzipped_head(head).lstrip()
    if not text.startswith(b"{") or b'"nodes"' not in text:
        return False
    return b"execution_trace|" in text or (b'"schema"' in text and b"chakra" in text)


# --- the file as nodes ------------------------------------------------------------------------


@dataclass(frozen=True)
class Tensor:
    """One tensor value of a node's inputs or outputs."""

    tensor: int
    storage: int
    numel: int
    itemsize: int
    dtype: str
    shape: str

    @property
    def bytes(self) -> int:
        return self.numel * self.itemsize


@dataclass
class Node:
    """One ET node: ``inputs`` / ``outputs`` are (argument position, tensor)."""

    id: int
    name: str
    parent: int | None  # None: a root's child (or a root)
    rf_id: int | None
    tid: int | None
    scope: int | None
    schema: str
    inputs: list[tuple[int, Tensor]]
    outputs: list[tuple[int, Tensor]]
    root: bool = False
    children: list[int] = field(default_factory=list)

    def effects(self) -> tuple[list[Tensor], dict[int, Tensor]]:
        """(tensors read, written storage -> tensor): the rule in the module docstring."""
        read = [t for _, t in self.inputs]
        in_storages = {t.storage for t in read}
        if self.schema:
            arg_marks, ret_marks = schema_marks(self.schema)
            mut_in = [t for i, t in self.inputs if i < len(arg_marks) and arg_marks[i]]
            mut_out = [t for i, t in self.outputs if i < len(ret_marks) and ret_marks[i]]
        else:
            base = self.name.split("::")[-1].split(".")[0]
            mut_in = []
            mut_out = [t for _, t in self.outputs] if base.endswith("_") and not base.endswith("__") else []
        written: dict[int, Tensor] = {}
        for t in [*(t for _, t in self.outputs if t.storage not in in_storages), *mut_out, *mut_in]:
            written.setdefault(t.storage, t)
        return read, written


def _split_top(s: str) -> list[str]:
    """``a, f(b, c), d`` -> ``['a', 'f(b, c)', 'd']``."""
    parts: list[str] = []
    depth, cur = 0, list[str]()
    for ch in s:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


def schema_marks(schema: str) -> tuple[list[bool], list[bool]]:
    """Which arguments and which returns an op schema marks ``!`` (written):
    ``aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1)
    -> Tensor(a!)`` gives ``([True, False, False], [True])``."""
    head, ret = _split_arrow(schema)
    if "(" not in head or ")" not in head:
        return [], []
    args = head[head.index("(") + 1 : head.rindex(")")]
    ret = ret.strip()
    if ret.startswith("(") and ret.endswith(")"):
        ret = ret[1:-1]
    return ["!" in a for a in _split_top(args) if a != "*"], ["!" in r for r in _split_top(ret)]


def _split_arrow(schema: str) -> tuple[str, str]:
    """``(arguments, returns)`` at the ``->`` outside parentheses (alias
    sets may hold one: ``Tensor(a -> *)`` in ``aten::split``)."""
    depth = 0
    for i, ch in enumerate(schema):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif depth == 0 and schema.startswith(" -> ", i):
            return schema[:i], schema[i + 4 :]
    return schema, ""


_DTYPE = re.compile(r"Tensor\(([^)]*)\)")


def _tensors(value: Any, type_: str, shape: Any) -> Iterator[Tensor]:
    """The tensors of one input/output slot (looking inside lists)."""
    if "Tensor(" not in type_:
        return
    if (
        isinstance(value, list)
        and len(value) == 6
        and isinstance(value[5], str)
        and all(isinstance(x, int) and not isinstance(x, bool) for x in value[:5])
    ):
        if value[1] != 0 and value[3] > 0:  # undefined and empty tensors hold no data
            m = _DTYPE.search(type_)
            dims = shape if isinstance(shape, list) and all(isinstance(d, int) for d in shape) else []
            yield Tensor(
                value[0],
                value[1],
                value[3],
                value[4],
                m[1] if m else "",
                "x".join(str(d) for d in dims),
            )
        return
    if isinstance(value, list):
        shapes = shape if isinstance(shape, list) and len(shape) == len(value) else [None] * len(value)
        for v, s in zip(value, shapes):
            yield from _tensors(v, type_, s)


def _side(path: Path, raw: Any, where: str) -> list[tuple[int, Tensor]]:
    if raw is None:
        return []
    if not isinstance(raw, dict):
        raise InputError(path, "inputs/outputs is not an object", where)
    values, types, shapes = raw.get("values") or [], raw.get("types") or [], raw.get("shapes") or []
    if not isinstance(values, list) or not isinstance(types, list):
        raise InputError(path, "inputs/outputs values or types is not a list", where)
    if not isinstance(shapes, list) or len(shapes) != len(values):
        shapes = [None] * len(values)
    return [(i, t) for i, (v, ty, sh) in enumerate(zip(values, types, shapes)) for t in _tensors(v, str(ty), sh)]


def _attrs(node: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for a in node.get("attrs") or ():
        if isinstance(a, dict) and "name" in a:
            out[str(a["name"])] = a.get("value")
    return out


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


@dataclass
class ExecutionTrace:
    """An ET file as nodes, by id, with its header."""

    path: Path
    pid: Any
    schema: str
    nodes: dict[int, Node]

    def ops(self) -> list[Node]:
        """Every node but the roots, in id (start) order."""
        return [n for _, n in sorted(self.nodes.items()) if not n.root]

    def carriers(self) -> list[Node]:
        """The outermost ops that read or write a tensor, in id order."""
        out = []
        for n in self.ops():
            if not (n.inputs or n.outputs):
                continue
            p, outer = n.parent, False
            while p is not None:
                up = self.nodes[p]
                if up.inputs or up.outputs:
                    outer = True
                    break
                p = up.parent
            if not outer:
                out.append(n)
        return out

    def subtree(self, node: Node) -> list[Node]:
        """The node and its descendants, in id order."""
        out, stack = [], [node.id]
        while stack:
            x = stack.pop()
            out.append(x)
            stack.extend(self.nodes[x].children)
        return [self.nodes[i] for i in sorted(out)]

    def accesses(self, carrier: Node) -> tuple[list[Tensor], dict[int, Tensor]]:
        """The carrier's reads and writes, over its subtree (see the module docstring)."""
        reads: list[Tensor] = []
        written: dict[int, Tensor] = {}
        for n in self.subtree(carrier):
            r, w = n.effects()
            reads.extend(t for t in r if t.storage not in written)
            for s, t in w.items():
                written.setdefault(s, t)
        return reads, written

    def created(self, node: Node) -> list[Tensor]:
        """The storages ``node`` creates: outputs not among its inputs nor
        made by one of its children (the allocation inside it is theirs)."""
        held = {t.storage for _, t in node.inputs}
        for c in node.children:
            r, w = self.nodes[c].effects()
            held |= set(w) - {t.storage for t in r}
        out: dict[int, Tensor] = {}
        for _, t in node.outputs:
            if t.storage not in held:
                out.setdefault(t.storage, t)
        return list(out.values())


def read(path: Path) -> ExecutionTrace:
    """The file as nodes (one-line InputErrors for what is not an ET)."""
    doc = _load(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), list):
        raise InputError(path, "no nodes list (not a PyTorch Execution Trace)")
    nodes: dict[int, Node] = {}
    for i, raw in enumerate(doc["nodes"]):
        where = f"nodes[{i}]"
        if not isinstance(raw, dict):
            raise InputError(path, "a node is not a JSON object", where)
        nid, name = _int(raw.get("id")), raw.get("name")
        if nid is None or not isinstance(name, str):
            raise InputError(path, "node without an integer id or a name", where)
        if nid in nodes:
            raise InputError(path, f"node id {nid} given twice", where)
        attrs = _attrs(raw)
        parent = _int(raw.get("ctrl_deps"))
        nodes[nid] = Node(
            id=nid,
            name=name,
            parent=None if parent == nid else parent,
            rf_id=_int(attrs.get("rf_id")),
            tid=_int(attrs.get("tid")),
            scope=_int(attrs.get("scope")),
            schema=str(attrs.get("op_schema") or ""),
            inputs=_side(path, raw.get("inputs"), f"{where}.inputs"),
            outputs=_side(path, raw.get("outputs"), f"{where}.outputs"),
            root=name.startswith(ROOT_PREFIX),
        )
    if not any(not n.root for n in nodes.values()):
        raise InputError(path, "no op nodes (an empty Execution Trace)")
    for n in nodes.values():
        if n.parent is not None and (n.parent not in nodes or nodes[n.parent].root):
            n.parent = None
        if n.parent is not None:
            nodes[n.parent].children.append(n.id)
    _check_tree(path, nodes)
    return ExecutionTrace(path, doc.get("pid"), str(doc.get("schema") or ""), nodes)


def _check_tree(path: Path, nodes: dict[int, Node]) -> None:
    """InputError when parents go round (a corrupt file): walks would not end."""
    state: dict[int, int] = {}
    for start in nodes:
        chain = []
        n: int | None = start
        while n is not None and n not in state:
            state[n] = 1
            chain.append(n)
            n = nodes[n].parent
        if n is not None and state.get(n) == 1 and n in chain:
            raise InputError(path, f"node {n}'s parents (ctrl_deps) form a cycle", f"node {n}")
        for c in chain:
            state[c] = 2


def _load(path: Path) -> Any:
    source.check_size(path, NAME)
    head = source.head(path)
    if head[:2] != b"\x1f\x8b" and not head.lstrip().startswith(b"{"):
        what = "binary content" if b"\0" in head else "text"
        raise InputError(path, f"{what} that is not a JSON object (not a PyTorch Execution Trace)")
    data = source.read_bytes(path, NAME)
    limit = MAX_FILE_BYTES[NAME]
    if data[:2] == b"\x1f\x8b":
        try:
            d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
            text = d.decompress(data, limit + 1)
        except zlib.error as e:
            raise InputError(path, f"not a valid gzip file: {first_line(e)}") from None
        if len(text) > limit:
            raise TooLarge(path, f"more than the {NAME} size limit of {human(limit)} of JSON (decompressed)")
        if not d.eof:
            raise InputError(path, "gzip stream ends early (truncated file)")
        data = text
    try:
        return json.loads(data)
    except UnicodeDecodeError:
        raise InputError(path, "not UTF-8 text") from None
    except json.JSONDecodeError as e:
        if e.pos >= len(data.rstrip()) - 1:
            raise InputError(path, "truncated JSON (the file ends inside the trace)") from None
        raise InputError(path, f"malformed JSON: {e.msg}", f"line {e.lineno}") from None


# --- dependencies -----------------------------------------------------------------------------


@dataclass
class DataFlow:
    """Tensors, reads and dependencies over the carriers (keyed by node id)."""

    tensors: list[Row] = field(default_factory=list)  # producer: a carrier's node id or None
    consumes: list[tuple[int, str, int]] = field(default_factory=list)  # (reader id, tensor uid, input index)
    deps: dict[tuple[int, int], None] = field(default_factory=dict)  # (writer id, reader id), in order
    first_version: dict[tuple[int, int], str] = field(default_factory=dict)  # (writer id, storage) -> tensor uid


def data_flow(et: ExecutionTrace, carriers: list[Node], reused: Any = None) -> DataFlow:
    """The module docstring's dependency rule. ``reused(storage, writer,
    reader)`` says when a reader sees a new allocation at the storage's
    address rather than what the writer wrote (None: never)."""
    flow = DataFlow()
    last: dict[int, tuple[int, str]] = {}  # storage -> (writer id, tensor uid)
    versions: dict[int, int] = {}

    def new_tensor(storage: int, t: Tensor, producer: int | None, name: str, index: int | None) -> str:
        versions[storage] = versions.get(storage, 0) + 1
        u = kit.uid(Kind.TENSOR, "et", storage, versions[storage])
        flow.tensors.append(
            {
                "uid": u,
                "name": name,
                "dtype": t.dtype or None,
                "shape": t.shape or None,
                "bytes": t.bytes,
                "producer": producer,
                "output_index": index,
            }
        )
        return u

    for c in carriers:
        reads, writes = et.accesses(c)
        seen: set[int] = set()
        for k, t in enumerate(reads):
            if t.storage in seen:
                continue
            seen.add(t.storage)
            held = last.get(t.storage)
            if held is not None and held[0] != c.id and reused is not None and reused(t.storage, held[0], c.id):
                held = None
            if held is None:
                u = new_tensor(t.storage, t, None, f"storage {t.storage}", None)
                last[t.storage] = (-1, u)  # read before any write: no producer
            else:
                u = held[1]
                if held[0] >= 0 and held[0] != c.id:
                    flow.deps[(held[0], c.id)] = None
            flow.consumes.append((c.id, u, k))
        for k, (storage, t) in enumerate(writes.items()):
            u = new_tensor(storage, t, c.id, f"{c.name}:{k}", k)
            last[storage] = (c.id, u)
            flow.first_version.setdefault((c.id, storage), u)
    return flow


# --- an ET alone --------------------------------------------------------------------------------


def _op_type(n: Node) -> str:
    if n.scope == _USER_ANNOTATION_SCOPE:
        return "ProfilerStep" if n.name.startswith("ProfilerStep#") else (n.name.split("#", 1)[0] or n.name)
    return n.name


@dataclass
class EtFrames(TraceFrames):
    """The frames of an ET alone, with the ET itself for :func:`merge`."""

    et: ExecutionTrace | None = field(default=None, repr=False, compare=False)


def parse(path: Path) -> EtFrames:
    """An ET alone: its ops, tensors and dependencies, no times."""
    et = read(Path(path))
    b = FramesBuilder(FORMAT.framework, [str(path)], time_unit="none")
    device = b.device("cpu", "CPU", key="et:cpu")
    uid_of = {n.id: kit.uid(Kind.OP, "et", n.id) for n in et.ops()}
    carriers = et.carriers()
    carrier_ids = {c.id for c in carriers}
    for seq, n in enumerate(et.ops()):
        b.op(
            {
                "uid": uid_of[n.id],
                "name": n.name,
                "type": _op_type(n),
                "device": device,
                "seq": seq,
                "executed": True,
                "parent": uid_of[n.parent] if n.parent is not None else None,
                "thread": f"et-tid:{n.tid}" if n.tid is not None else None,
                "role": (Role.ANNOTATION if n.scope == _USER_ANNOTATION_SCOPE else Role.OP).value,
                "carries_deps": n.id in carrier_ids,
                "attrs": json.dumps({"et_id": n.id, "rf_id": n.rf_id, "op_schema": n.schema or None}),
            }
        )
    flow = data_flow(et, carriers)
    _add_flow(b, flow, uid_of)
    b.meta.update({"et_schema": et.schema, "et_carriers": len(carriers), "et_dependencies": len(flow.deps)})
    plain = b.frames()
    tf = EtFrames(**{f: getattr(plain, f) for f in _FRAME_FIELDS}, et=et)
    assign_phases(tf)
    tf.check()
    return tf


_FRAME_FIELDS = [f for f in TraceFrames.__dataclass_fields__ if TraceFrames.__dataclass_fields__[f].init]


def _add_flow(b: FramesBuilder, flow: DataFlow, uid_of: dict[int, str]) -> None:
    """The flow's tensors, reads and dependencies on the ops ``uid_of`` names
    (a carrier it does not name: its tensors have no producer, its reads and
    dependencies are left out)."""
    for t in flow.tensors:
        b.tensor({**t, "producer": uid_of.get(t["producer"]) if t["producer"] is not None else None})
        if b.tensors[t["uid"]]["producer"] is None:
            b.tensors[t["uid"]]["output_index"] = None
    for reader, tensor, index in flow.consumes:
        if reader in uid_of:
            b.consume(uid_of[reader], tensor, index)
    for src, dst in flow.deps:
        if src in uid_of and dst in uid_of:
            b.dep(uid_of[src], uid_of[dst], "data")


# --- joined to Kineto ---------------------------------------------------------------------------


def merge(base: TraceFrames, extra: TraceFrames) -> TraceFrames:
    """The Kineto trace ``base`` with the tensors and dependencies of the
    ET ``extra`` (what :func:`parse` made; rules in the module docstring)."""
    et = getattr(extra, "et", None)
    if not isinstance(et, ExecutionTrace):
        raise TypeError("merge wants the frames pytorch-et's parse made")
    path = et.path
    if base.framework != "pytorch" or base.time_unit != "us":
        raise InputError(
            path, f"an Execution Trace joins a PyTorch (Kineto) trace, not the {base.framework} trace {base.sources}"
        )
    ops = base.ops
    attrs = [json.loads(a) if isinstance(a, str) else {} for a in ops["attrs"].tolist()]
    names, uids = ops["name"].tolist(), ops["uid"].tolist()
    kineto: dict[int, int] = {}  # rf_id -> op position, in the ET's process
    for i, a in enumerate(attrs):
        rf = a.get("Record function id")
        if isinstance(rf, int) and (et.pid is None or a.get("pid") in (None, et.pid)):
            kineto.setdefault(rf, i)
    et_ops = [n for n in et.ops() if n.rf_id is not None]
    match = {n.id: kineto[n.rf_id] for n in et_ops if n.rf_id in kineto and names[kineto[n.rf_id]] == n.name}
    if len(match) < MIN_MATCHED_SHARE * max(len(et_ops), 1):
        pid_note = ""
        kineto_pids = {a.get("pid") for a in attrs if a.get("pid") is not None}
        if et.pid is not None and kineto_pids and et.pid not in kineto_pids:
            pid_note = f"; the ET's process {et.pid} is not the Kineto trace's ({', '.join(map(str, sorted(kineto_pids, key=str)))})"
        raise InputError(
            path,
            f"does not match the Kineto trace {', '.join(base.sources)}: only {len(match)} of {len(et_ops)} of its "
            f"ops have a Kineto event with the same record-function id and name (files of different steps or "
            f"runs, or threads the Kineto trace did not record?){pid_note}",
        )
    carriers = et.carriers()
    start = ops["start_us"].to_numpy(float)
    end = ops["end_us"].to_numpy(float)
    address, owner = _addresses(et, base, match)
    reused = _reuse_rule(base, match, address, start, end)
    flow = data_flow(et, carriers, reused)

    b = FramesBuilder(base.framework, base.sources)
    uid_of = {nid: uids[i] for nid, i in match.items()}
    _add_flow(b, flow, uid_of)
    tf = base
    tf.sources = [*base.sources, str(path)]
    carrier_ops = {uid_of[c.id] for c in carriers if c.id in uid_of}
    ops["carries_deps"] = [True if u in carrier_ops else None for u in uids]
    joined = b.frames()
    tf.tensors, tf.consumes, tf.deps = joined.tensors, joined.consumes, joined.deps
    _link_memory(tf, flow, address, owner, uid_of)
    matched_ids = set(match)
    kineto_ids = {i for rf, i in kineto.items()}
    tf.meta.update(
        {
            "et_schema": et.schema,
            "et_ops_matched": len(match),
            "et_ops": len(et_ops),
            "et_carriers": len(carriers),
            "et_carriers_without_kineto": sum(1 for c in carriers if c.id not in matched_ids),
            "kineto_ops_without_et": len(kineto_ids - set(match.values())),
            "et_dependencies": len(tf.deps),
        }
    )
    return tf


def _addresses(et: ExecutionTrace, base: TraceFrames, match: dict[int, int]) -> tuple[dict[int, str], dict[int, int]]:
    """Storage -> the address of the one allocation of its size Kineto
    attributes to the op that created it, and storage -> that allocation's
    position (storages without exactly one such allocation are left out)."""
    al = base.allocations
    if al.empty:
        return {}, {}
    ops_uid = base.ops["uid"].tolist()
    by_op: dict[str, list[int]] = {}
    for i, op in enumerate(al["op"].tolist()):
        if isinstance(op, str):
            by_op.setdefault(op, []).append(i)
    nbytes = al["bytes"].tolist()
    addrs = al["address"].tolist()
    address: dict[int, str] = {}
    owner: dict[int, int] = {}
    for nid, i in match.items():
        mine = by_op.get(ops_uid[i])
        if not mine:
            continue
        for t in et.created(et.nodes[nid]):
            cands = [j for j in mine if nbytes[j] == t.bytes]
            if len(cands) == 1 and t.storage not in address:
                address[t.storage] = str(addrs[cands[0]])
                owner[t.storage] = cands[0]
    return address, owner


def _reuse_rule(base: TraceFrames, match: dict[int, int], address: dict[int, str], start: Any, end: Any) -> Any:
    """``reused(storage, writer, reader)``: was the allocation the writer
    wrote (the last one at the storage's address that began before the
    writer ended) freed before the reader started?"""
    al = base.allocations
    if al.empty or not address:
        return None
    at: dict[str, list[tuple[float, float | None]]] = {}
    for a, s, f in zip(al["address"].tolist(), al["alloc_us"].tolist(), al["free_us"].tolist()):
        if s == s and s is not None:  # timed allocations only
            at.setdefault(str(a), []).append((float(s), None if f is None or f != f else float(f)))

    def reused(storage: int, writer: int, reader: int) -> bool:
        addr = address.get(storage)
        if addr is None or writer not in match or reader not in match:
            return False
        w_end, r_start = float(end[match[writer]]), float(start[match[reader]])
        born = [(s, f) for s, f in at.get(addr, ()) if s <= w_end]
        if not born:
            return False
        _, freed = max(born)
        return freed is not None and freed < r_start

    return reused


def _link_memory(
    tf: TraceFrames, flow: DataFlow, address: dict[int, str], owner: dict[int, int], uid_of: dict[int, str]
) -> None:
    """An allocation found to hold a storage backs the tensor its first
    write made and belongs to the carrier that wrote it."""
    if not owner:
        return
    first: dict[int, tuple[int, str]] = {}  # storage -> (writer id, tensor uid), first write
    for (writer, storage), u in flow.first_version.items():
        if storage not in first or writer < first[storage][0]:
            first[storage] = (writer, u)
    al = tf.allocations
    tensors = al["tensor"].tolist()
    ops = al["op"].tolist()
    for storage, j in owner.items():
        if storage in first and first[storage][0] in uid_of:
            writer, u = first[storage]
            tensors[j], ops[j] = u, uid_of[writer]
    al["tensor"] = tensors
    al["op"] = ops
