"""What each Execution Trace node reads and writes, which ops carry the
dependencies, and the tensors and dependencies over them (the rules in
:mod:`.et`'s docstring), as rows for a :class:`FramesBuilder`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tracegraph.ingest.formats import kit
from tracegraph.ingest.formats.kineto.et_nodes import ExecutionTrace, Node, Tensor
from tracegraph.ingest.formats.kineto.op_schema import schema_marks
from tracegraph.ingest.formats.kit import FramesBuilder, Kind
from tracegraph.ingest.frames import Row


def effects(node: Node) -> tuple[list[Tensor], dict[int, Tensor]]:
    """(tensors read, written storage -> tensor) of one node."""
    read = [t for _, t in node.inputs]
    in_storages = {t.storage for t in read}
    if node.schema:
        arg_marks, ret_marks = schema_marks(node.schema)
        mut_in = [t for i, t in node.inputs if i < len(arg_marks) and arg_marks[i]]
        mut_out = [t for i, t in node.outputs if i < len(ret_marks) and ret_marks[i]]
    else:
        base = node.name.split("::")[-1].split(".")[0]
        mut_in = []
        mut_out = [t for _, t in node.outputs] if base.endswith("_") and not base.endswith("__") else []
    written: dict[int, Tensor] = {}
    for t in [*(t for _, t in node.outputs if t.storage not in in_storages), *mut_out, *mut_in]:
        written.setdefault(t.storage, t)
    return read, written


def carriers_of(et: ExecutionTrace) -> list[Node]:
    """The outermost ops that read or write a tensor, in id order."""
    out = []
    for n in et.ops():
        if not (n.inputs or n.outputs):
            continue
        p, outer = n.parent, False
        while p is not None:
            up = et.nodes[p]
            if up.inputs or up.outputs:
                outer = True
                break
            p = up.parent
        if not outer:
            out.append(n)
    return out


def accesses(et: ExecutionTrace, carrier: Node) -> tuple[list[Tensor], dict[int, Tensor]]:
    """A carrier's reads and writes, over its subtree."""
    reads: list[Tensor] = []
    written: dict[int, Tensor] = {}
    for n in et.subtree(carrier):
        r, w = effects(n)
        reads.extend(t for t in r if t.storage not in written)
        for s, t in w.items():
            written.setdefault(s, t)
    return reads, written


def created(et: ExecutionTrace, node: Node) -> list[Tensor]:
    """The storages ``node`` creates: outputs not among its inputs nor
    made by one of its children (the allocation inside it is theirs)."""
    held = {t.storage for _, t in node.inputs}
    for c in node.children:
        r, w = effects(et.nodes[c])
        held |= set(w) - {t.storage for t in r}
    out: dict[int, Tensor] = {}
    for _, t in node.outputs:
        if t.storage not in held:
            out.setdefault(t.storage, t)
    return list(out.values())


@dataclass
class DataFlow:
    """Tensors, reads and dependencies over the carriers (keyed by node id)."""

    tensors: list[Row] = field(default_factory=list)  # producer: a carrier's node id or None
    consumes: list[tuple[int, str, int]] = field(default_factory=list)  # (reader id, tensor uid, input index)
    deps: dict[tuple[int, int], None] = field(default_factory=dict)  # (writer id, reader id), in order
    first_version: dict[tuple[int, int], str] = field(default_factory=dict)  # (writer id, storage) -> tensor uid


def data_flow(et: ExecutionTrace, carriers: list[Node], reused: Any = None) -> DataFlow:
    """The dependency rule. ``reused(storage, writer,
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
        reads, writes = accesses(et, c)
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


def add_flow(b: FramesBuilder, flow: DataFlow, uid_of: dict[int, str]) -> None:
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
