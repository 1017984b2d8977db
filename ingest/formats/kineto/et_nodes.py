"""An Execution Trace's JSON as nodes (the rules in :mod:`.et`'s
docstring): each node's tensors among its inputs and outputs, its parent
and children, checked to form a tree."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracegraph.errors import InputError

ROOT_PREFIX = "[pytorch|profiler|execution_trace|"


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

    def subtree(self, node: Node) -> list[Node]:
        """The node and its descendants, in id order."""
        out, stack = [], [node.id]
        while stack:
            x = stack.pop()
            out.append(x)
            stack.extend(self.nodes[x].children)
        return [self.nodes[i] for i in sorted(out)]


def nodes_of(path: Path, doc: Any) -> ExecutionTrace:
    """The JSON document ``doc`` of file ``path`` as nodes (one-line
    InputErrors for what is not an ET)."""
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
