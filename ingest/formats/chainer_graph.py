"""Chainer computational-graph dump with memory sizes (``chainer-graph``).

The file has no timings, only a graph and the rank of each function, so the
trace is expressed in *steps* (``time_unit = "step"``): memory analyses then
answer "which blocks are live at the worst step" instead of "at what time".

Layout (line-based, ``#`` not allowed, blank lines only at the end)::

    86 92                      number of memory blocks, of function applications
    <id> <bytes> <name>        one per block; name ``_`` = intermediate,
                               ``/predictor/...`` = parameter, ``0``/``1`` = inputs
    forward | backward         then, per function application:
    <n_in> <n_out>
    <block id> <role>          n_in lines; forward role ``_``; backward roles
                               ``gradient`` / ``input`` / ``output``
    <block id>                 n_out lines
    <function name>
    {"rank": 3, ...}           JSON attributes; ``rank`` = topological rank

Rules this parser applies (each one is a reading of the format, written down
so that analyses can be checked against it):

* Every memory block is a Tensor ``t:<id>`` with its bytes. ``param`` is the
  block name when it starts with ``/`` (a parameter path). ``name`` is that
  path, ``input <n>`` for the numeric names ``0``/``1`` (the data and label
  arrays; a bare ``0`` reads as a number, not a name), ``block <id>`` for
  ``_`` and the name as written otherwise.
* In a backward application ``<id> gradient`` is the gradient of block
  ``<id>``: a Tensor of its own, ``t:<id>:grad``, with the bytes of the block
  and the name ``grad(<block name>)``. ``<id> input`` / ``<id> output`` are the
  retained forward tensors ``t:<id>``. The outputs of a backward application
  are the gradients ``t:<id>:grad`` of the listed blocks.
* Each application is an Op ``op:<i>`` (``i`` = position in the file, from
  0) named ``<function>#<i>``, typed by the function name, phase forward or
  backward, with the JSON attributes (including ``rank``) as ``attrs``.
  Inputs are Consumes with ``input_index`` = position in the input list;
  outputs set the tensor's ``producer`` and ``output_index``.
* Execution order: forward applications by ascending rank, then backward
  ones by descending rank; equal ranks keep file order. Ranks are only an
  order: any integers, negative ones included. The position in that
  order is ``seq``; ``start_us = seq``, ``end_us = seq + 1``, ``dur_us`` is
  None (steps are not durations).
* A tensor read before (or by) the application that produces it in this
  order, or produced by two applications, is an InputError: the ranks
  cannot then be a topological order, so the file is corrupt (this is also
  how a dependency cycle shows up in this format).
* The file is streamed line by line (:func:`tracegraph.ingest.source.lines`:
  line limit, binary content and UTF-8 checked there).
* Deps: one ``data`` dep from the producer to each distinct consumer.
* One Device ``dev:chainer`` (kind ``device``: the dump does not say which)
  and one Allocator ``mem:chainer``.
* One Allocation ``a:<tensor uid>`` per tensor, ``bytes`` = tensor bytes.
  Kind: ``param`` for parameter blocks; ``gradient`` for gradients of
  parameters; ``input`` for any other tensor without producer (the data and
  label blocks, and the gradient of the loss that seeds backward);
  ``output`` for everything else (produced activations and the other
  gradients).
* Lifetime in steps, ``[alloc_us, free_us)``: from the producer's seq (0 when
  there is no producer) to the last consumer's seq + 1. Parameters and
  parameter gradients live to the end (= number of ops), since the optimizer
  reads them after the step. A tensor nobody reads lives one step (producer
  seq + 1, or ``[0, 1)`` without producer).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracegraph.errors import InputError
from tracegraph.ingest.formats.kit import FormatInfo, FramesBuilder, Joins
from tracegraph.ingest.frames import (
    Row,
    TraceFrames,
)
from tracegraph.ingest.source import head_lines
from tracegraph.ingest.source import lines as source_lines

FORMAT = FormatInfo("chainer-graph", "chainer", Joins.ALONE, "Chainer computational graph dump")

DEVICE = "dev:chainer"
ALLOCATOR = "mem:chainer"
_BACKWARD_ROLES = ("gradient", "input", "output")
_INT = re.compile(r"\d+")


@dataclass
class Block:
    id: int
    bytes: int
    name: str
    line: int


@dataclass
class Apply:
    """One function application as written in the file."""

    index: int
    line: int
    phase: str
    inputs: list[tuple[int, str, int]]  # (block id, role, line)
    outputs: list[tuple[int, int]]  # (block id, line)
    function: str
    attrs: dict[str, Any]  # the JSON object of the file
    rank: int


def sniff(head: bytes) -> bool:
    """A ``<blocks> <functions>`` header followed by ``<id> <bytes> <name>`` lines."""
    lines = head_lines(head)
    if not lines or len(lines) < 2:
        return False
    header = lines[0].split()
    if len(header) != 2 or not all(_INT.fullmatch(f) for f in header):
        return False
    n_blocks = int(header[0])
    if n_blocks == 0:
        return lines[1] in ("forward", "backward")
    for line in lines[1 : 1 + min(n_blocks, 32)]:
        fields = line.split(None, 2)
        if len(fields) != 3 or not (_INT.fullmatch(fields[0]) and _INT.fullmatch(fields[1])):
            return False
    return True


def parse(path: Path) -> TraceFrames:
    """The whole dump as frames in steps (rules in the module docstring)."""
    lines = _read_lines(path)
    blocks, applies = _read_graph(path, lines)
    return _frames(path, blocks, applies)


# --- reading -----------------------------------------------------------------


def _read_lines(path: Path) -> list[str]:
    """The file's lines, streamed with the line limit and UTF-8 checks of
    :func:`tracegraph.ingest.source.lines`."""
    lines = [ln.rstrip("\r") for ln in source_lines(path, FORMAT.name)]
    if not any(ln.strip() for ln in lines):
        raise InputError(path, "empty file")
    return lines


class _Cursor:
    """Hands out lines with their 1-based numbers; running out is an InputError."""

    def __init__(self, path: Path, lines: list[str]) -> None:
        self.path, self.lines, self.pos = path, lines, 0

    def next(self, expected: str) -> tuple[int, str]:
        if self.pos >= len(self.lines) or (self.pos == len(self.lines) - 1 and not self.lines[-1]):
            raise InputError(self.path, f"file ends early, expected {expected}", f"line {self.pos + 1}")
        self.pos += 1
        return self.pos, self.lines[self.pos - 1].strip()

    def ints(self, expected: str, count: int) -> tuple[int, list[int], list[str]]:
        """A line whose first ``count`` fields are non-negative integers."""
        no, text = self.next(expected)
        fields = text.split(None, count)
        if len(fields) < count or not all(_INT.fullmatch(f) for f in fields[:count]):
            raise InputError(self.path, f"expected {expected}, got {text[:40]!r}", f"line {no}")
        return no, [int(f) for f in fields[:count]], fields[count:]

    def error(self, what: str, line: int) -> InputError:
        return InputError(self.path, what, f"line {line}")


def _read_graph(path: Path, lines: list[str]) -> tuple[dict[int, Block], list[Apply]]:
    cur = _Cursor(path, lines)
    no, (n_blocks, n_applies), rest = cur.ints("header '<blocks> <functions>'", 2)
    if rest:
        raise cur.error("header has more than two numbers", no)
    blocks: dict[int, Block] = {}
    for _ in range(n_blocks):
        no, (bid, size), rest = cur.ints("memory block '<id> <bytes> <name>'", 2)
        if not rest:
            raise cur.error(f"memory block {bid} has no name", no)
        if bid in blocks:
            raise cur.error(f"memory block {bid} listed twice (first at line {blocks[bid].line})", no)
        blocks[bid] = Block(bid, size, rest[0], no)
    applies = [_read_apply(cur, blocks, i) for i in range(n_applies)]
    for no in range(cur.pos + 1, len(lines) + 1):
        if lines[no - 1].strip():
            raise cur.error(f"text after the last of {n_applies} functions", no)
    return blocks, applies


def _read_apply(cur: _Cursor, blocks: dict[int, Block], index: int) -> Apply:
    start, phase = cur.next("'forward' or 'backward'")
    if phase not in ("forward", "backward"):
        raise cur.error(f"expected 'forward' or 'backward', got {phase[:40]!r}", start)
    _, (n_in, n_out), rest = cur.ints("'<n_in> <n_out>'", 2)
    if rest:
        raise cur.error("expected two numbers '<n_in> <n_out>'", cur.pos)
    inputs = []
    for _ in range(n_in):
        no, (bid,), rest = cur.ints("input '<block id> <role>'", 1)
        role = rest[0] if rest else ""
        ok = role == "_" if phase == "forward" else role in _BACKWARD_ROLES
        if not ok:
            raise cur.error(f"unknown role {role[:40]!r} for a {phase} input", no)
        _known(cur, blocks, bid, no)
        inputs.append((bid, role, no))
    outputs = []
    for _ in range(n_out):
        no, (bid,), rest = cur.ints("output '<block id>'", 1)
        if rest:
            raise cur.error("output line has more than a block id", no)
        _known(cur, blocks, bid, no)
        outputs.append((bid, no))
    no, function = cur.next("function name")
    if not function:
        raise cur.error("empty function name", no)
    no, text = cur.next("JSON attributes")
    try:
        attrs = json.loads(text)
    except json.JSONDecodeError as e:  # what json.loads raises for text
        raise cur.error(f"attributes are not JSON ({e.msg}, column {e.colno})", no) from None
    if not isinstance(attrs, dict):
        raise cur.error("attributes are not a JSON object", no)
    rank = attrs.get("rank")
    if not isinstance(rank, int) or isinstance(rank, bool):
        raise cur.error("attributes lack an integer 'rank'", no)
    return Apply(index, start, phase, inputs, outputs, function, attrs, rank)


def _known(cur: _Cursor, blocks: dict[int, Block], bid: int, line: int) -> None:
    if bid not in blocks:
        raise cur.error(f"unknown memory block {bid}", line)


# --- building frames -----------------------------------------------------------


def _uid(bid: int, grad: bool) -> str:
    return f"t:{bid}:grad" if grad else f"t:{bid}"


def _block_name(b: Block) -> str:
    if b.name == "_":
        return f"block {b.id}"
    if _INT.fullmatch(b.name):
        return f"input {b.name}"
    return b.name


def _is_param(b: Block) -> bool:
    return b.name.startswith("/")


def _order(applies: list[Apply]) -> list[Apply]:
    """Forward by ascending rank, then backward by descending rank; ties keep file order."""
    fwd = sorted((a for a in applies if a.phase == "forward"), key=lambda a: (a.rank, a.index))
    bwd = sorted((a for a in applies if a.phase == "backward"), key=lambda a: (-a.rank, a.index))
    return fwd + bwd


def _frames(path: Path, blocks: dict[int, Block], applies: list[Apply]) -> TraceFrames:
    order = _order(applies)
    seq = {a.index: s for s, a in enumerate(order)}
    tensors, producer, readers, consumes = _link(path, blocks, order)
    deps = _deps(path, producer, readers, seq)
    ops = [
        {
            "uid": f"op:{a.index}",
            "name": f"{a.function}#{a.index}",
            "type": a.function,
            "device": DEVICE,
            "seq": seq[a.index],
            "start_us": float(seq[a.index]),
            "end_us": float(seq[a.index] + 1),
            "dur_us": None,
            "phase": a.phase,
            "executed": True,
            "attrs": json.dumps(a.attrs),
        }
        for a in order
    ]
    allocations = [_allocation(t, blocks, producer, readers, seq, len(order)) for t in tensors.values()]
    for t in tensors.values():
        del t["_block"]
    b = FramesBuilder(FORMAT.framework, [str(path)], time_unit="step")
    # The dump does not say which device: one of kind ``device`` (the uids DEVICE and ALLOCATOR).
    b.allocator("chainer", b.device("chainer", "device"))
    b.ops, b.consumes, b.allocations = ops, consumes, allocations
    b.tensors = tensors
    b.deps = {(d["src"], d["dst"]): d for d in deps}
    b.meta = {"memory_blocks": len(blocks), "functions": len(applies)}
    return b.build()


_Readers = dict[str, list[tuple[Apply, int]]]  # tensor uid -> (reader, line of the input)


def _link(
    path: Path, blocks: dict[int, Block], order: list[Apply]
) -> tuple[dict[str, Row], dict[str, Apply], _Readers, list[Row]]:
    """Tensor rows (blocks, then gradients as met), producers, readers and Consumes."""
    tensors = {_uid(b.id, False): _tensor(b, False) for b in sorted(blocks.values(), key=lambda b: b.id)}
    producer: dict[str, Apply] = {}
    readers: _Readers = {}
    consumes: list[Row] = []

    def tensor_of(bid: int, is_grad: bool) -> str:
        uid = _uid(bid, is_grad)
        if uid not in tensors:
            tensors[uid] = _tensor(blocks[bid], is_grad)
        return uid

    for a in order:
        for pos, (bid, no) in enumerate(a.outputs):
            uid = tensor_of(bid, a.phase == "backward")
            if uid in producer:
                raise InputError(
                    path,
                    f"block {bid} is produced twice (also by the function at line {producer[uid].line})",
                    f"line {no}",
                )
            producer[uid] = a
            tensors[uid].update(producer=f"op:{a.index}", output_index=pos)
        for pos, (bid, role, no) in enumerate(a.inputs):
            uid = tensor_of(bid, role == "gradient")
            readers.setdefault(uid, []).append((a, no))
            consumes.append({"op": f"op:{a.index}", "tensor": uid, "input_index": pos})
    return tensors, producer, readers, consumes


def _deps(path: Path, producer: dict[str, Apply], readers: _Readers, seq: dict[int, int]) -> list[Row]:
    """Producer -> reader data deps; a read at or before the producing step is corrupt input."""
    deps: dict[tuple[int, int], Row] = {}
    for uid, rs in readers.items():
        p = producer.get(uid)
        if p is None:
            continue
        for r, no in rs:
            if seq[p.index] >= seq[r.index]:
                what = f"the gradient of block {uid.split(':')[1]}" if uid.endswith(":grad") else f"block {uid[2:]}"
                raise InputError(
                    path,
                    f"{what} is read before the function at "
                    f"line {p.line} produces it (ranks are not a topological order)",
                    f"line {no}",
                )
            deps.setdefault((p.index, r.index), {"src": f"op:{p.index}", "dst": f"op:{r.index}", "kind": "data"})
    return list(deps.values())


def _tensor(b: Block, is_grad: bool) -> Row:
    name = _block_name(b)
    return {
        "uid": _uid(b.id, is_grad),
        "name": f"grad({name})" if is_grad else name,
        "dtype": None,
        "shape": None,
        "bytes": b.bytes,
        "producer": None,
        "output_index": None,
        "param": b.name if _is_param(b) and not is_grad else None,
        "_block": (b.id, is_grad),
    }


def _allocation(
    t: Row, blocks: dict[int, Block], producer: dict[str, Apply], readers: _Readers, seq: dict[int, int], n_ops: int
) -> Row:
    bid, is_grad = t["_block"]
    param = _is_param(blocks[bid])
    p = producer.get(t["uid"])
    start = seq[p.index] if p else 0
    if param:
        end = n_ops
    elif t["uid"] in readers:
        end = max(seq[r.index] for r, _ in readers[t["uid"]]) + 1
    else:
        end = start + 1
    if param:
        kind = "gradient" if is_grad else "param"
    else:
        kind = "output" if p else "input"
    return {
        "uid": f"a:{t['uid']}",
        "allocator": ALLOCATOR,
        "bytes": t["bytes"],
        "requested_bytes": None,
        "alloc_us": float(start),
        "free_us": float(end),
        "address": None,
        "kind": kind,
        "op": t["producer"],
        "tensor": t["uid"],
    }
