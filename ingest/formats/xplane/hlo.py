"""An XLA ``HloProto`` (xla/service/hlo.proto) as the instructions and
operand edges a dependency graph needs, and the walk from an operand to
the instructions whose events produce it.

JAX (and TF with XLA) put the optimized HLO of every compiled module on the
``/host:metadata`` plane, one event metadata per module with a stat ``Hlo
Proto`` (bytes). Field numbers read (package xla):

* ``HloProto``: hlo_module 1;
* ``HloModuleProto``: name 1, computations 3, id 5, entry_computation_id 6;
* ``HloComputationProto``: name 1, instructions 2, id 5, root_id 6;
* ``HloInstructionProto``: name 1, opcode 2, metadata 7 (``OpMetadata``:
  op_type 1, op_name 2), parameter_number 9, fusion_kind 11, tuple_index
  13, id 35, operand_ids 36, control_predecessor_ids 37,
  called_computation_ids 38 (repeated int64: packed, or one varint each).

Operand and control-predecessor ids name instructions of the same
computation, so instructions are keyed by (computation id, instruction id).
Names are unique within a module (XLA's rule); a repeated name keeps its
first instruction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tracegraph.ingest.formats.xplane.wire import LEN, VARINT, Malformed, fields, packed, signed, text, wrong_type

# An instruction's key in its module: (computation id, instruction id).
Key = tuple[int, int]
# How deeply nested a tuple element the walk follows (the tuple indices it
# carries, outermost first); past that it takes the whole tuple.
_MAX_INDEX_DEPTH = 16


@dataclass(slots=True)
class Instruction:
    id: int = 0
    name: str = ""
    opcode: str = ""
    computation: int = 0  # id of the computation holding it
    operands: list[int] = field(default_factory=list)
    control_predecessors: list[int] = field(default_factory=list)
    called: list[int] = field(default_factory=list)  # computation ids (a while: body, then condition)
    parameter_number: int = 0
    tuple_index: int = 0
    fusion_kind: str = ""
    op_name: str = ""  # OpMetadata.op_name: the framework op it came from (``jit(f)/jvp()/dot_general``)
    op_type: str = ""


@dataclass(slots=True)
class Computation:
    id: int = 0
    name: str = ""
    root_id: int = 0
    instructions: list[Instruction] = field(default_factory=list)


@dataclass
class Module:
    name: str = ""
    id: int = 0
    entry_computation_id: int = 0
    computations: dict[int, Computation] = field(default_factory=dict)
    instructions: dict[Key, Instruction] = field(default_factory=dict)
    by_name: dict[str, Instruction] = field(default_factory=dict)
    # computation id -> the instructions that call it (while, fusion, call, conditional, ...)
    callers: dict[int, list[Instruction]] = field(default_factory=dict)

    def computation_name(self, ins: Instruction) -> str:
        comp = self.computations.get(ins.computation)
        return comp.name if comp else ""


def read_hlo_proto(buf: bytes) -> Module:
    """The module of a serialized ``HloProto`` (Malformed when it is not one)."""
    module = Module()
    for number, wire, a, b in fields(buf, 0, len(buf)):
        if number == 1:
            if wire != LEN:
                raise wrong_type("HloProto", "hlo_module", number, wire, LEN)
            try:
                _module(buf, a, b, module)
            except Malformed as e:
                raise e.inside("hlo_module") from None
    for comp in module.computations.values():
        for ins in comp.instructions:
            module.instructions.setdefault((comp.id, ins.id), ins)
            module.by_name.setdefault(ins.name, ins)
            for called in ins.called:
                module.callers.setdefault(called, []).append(ins)
    return module


def _module(buf: bytes, start: int, stop: int, module: Module) -> None:
    for number, wire, a, b in fields(buf, start, stop):
        if number == 1:
            _want(wire, LEN, "HloModuleProto", "name", number, a)
            module.name = text(buf, a, b, "HloModuleProto", "name")
        elif number == 3:
            _want(wire, LEN, "HloModuleProto", "computations", number, a)
            try:
                comp = _computation(buf, a, b)
            except Malformed as e:
                raise e.inside(f"computations[{len(module.computations)}]") from None
            module.computations.setdefault(comp.id, comp)
        elif number in (5, 6):
            _want(wire, VARINT, "HloModuleProto", "id" if number == 5 else "entry_computation_id", number, a)
            if number == 5:
                module.id = signed(a)
            else:
                module.entry_computation_id = signed(a)


def _want(wire: int, want: int, message: str, name: str, number: int, _value: int) -> None:
    if wire != want:
        raise wrong_type(message, name, number, wire, want)


def _computation(buf: bytes, start: int, stop: int) -> Computation:
    comp = Computation()
    for number, wire, a, b in fields(buf, start, stop):
        if number == 1:
            _want(wire, LEN, "HloComputationProto", "name", number, a)
            comp.name = text(buf, a, b, "HloComputationProto", "name")
        elif number == 2:
            _want(wire, LEN, "HloComputationProto", "instructions", number, a)
            try:
                comp.instructions.append(_instruction(buf, a, b))
            except Malformed as e:
                raise e.inside(f"instructions[{len(comp.instructions)}]") from None
        elif number in (5, 6):
            _want(wire, VARINT, "HloComputationProto", "id" if number == 5 else "root_id", number, a)
            if number == 5:
                comp.id = signed(a)
            else:
                comp.root_id = signed(a)
    for ins in comp.instructions:
        ins.computation = comp.id
    return comp


_REPEATED = {36: "operand_ids", 37: "control_predecessor_ids", 38: "called_computation_ids"}


def _instruction(buf: bytes, start: int, stop: int) -> Instruction:
    ins = Instruction()
    for number, wire, a, b in fields(buf, start, stop):
        if number in _REPEATED:
            target = (ins.operands, ins.control_predecessors, ins.called)[number - 36]
            if wire == LEN:
                target.extend(signed(v) for v in packed(buf, a, b))
            elif wire == VARINT:
                target.append(signed(a))
            else:
                raise wrong_type("HloInstructionProto", _REPEATED[number], number, wire, LEN)
        elif number in (1, 2, 11):
            name = {1: "name", 2: "opcode", 11: "fusion_kind"}[number]
            _want(wire, LEN, "HloInstructionProto", name, number, a)
            value = text(buf, a, b, "HloInstructionProto", name)
            if number == 1:
                ins.name = value
            elif number == 2:
                ins.opcode = value
            else:
                ins.fusion_kind = value
        elif number in (9, 13, 35):
            name = {9: "parameter_number", 13: "tuple_index", 35: "id"}[number]
            _want(wire, VARINT, "HloInstructionProto", name, number, a)
            if number == 9:
                ins.parameter_number = signed(a)
            elif number == 13:
                ins.tuple_index = signed(a)
            else:
                ins.id = signed(a)
        elif number == 7:
            _want(wire, LEN, "HloInstructionProto", "metadata", number, a)
            for n, w, c, d in fields(buf, a, b):
                if n in (1, 2):
                    _want(w, LEN, "OpMetadata", "op_type" if n == 1 else "op_name", n, c)
                    value = text(buf, c, d, "OpMetadata", "op_type" if n == 1 else "op_name")
                    if n == 1:
                        ins.op_type = value
                    else:
                        ins.op_name = value
    return ins


# --- from an operand to the instructions whose events produce it ---------------------------

# What an operand is made of: one *slot* per value it holds (a tuple operand
# holds one per element), each slot the names of the instructions with
# events that may have produced it (several when a loop state is either the
# loop's initial value or the previous iteration's).
Slots = list[set[str]]
_MAX_DEPTH = 200  # instructions walked through in a row before the walk gives up on a slot


def producers(module: Module, comp: int, ids: list[int], has_events: Callable[[Instruction], bool]) -> list[Slots]:
    """For each of the instructions ``ids`` of computation ``comp`` (an
    instruction's operands, or its control predecessors), the slots it is
    made of: for each value it holds, the names of the instructions with
    events that may have produced it.

    An instruction with events is one slot, itself. One without (a
    parameter, constant, tuple, get-tuple-element, bitcast: what XLA does
    not run as a step of its own) is walked through:

    * ``get-tuple-element`` with index i: element i of what its operand is
      (the index is carried, so the walk picks the one element of a tuple
      further up rather than all of them);
    * ``tuple``: element i when an index is carried, else every operand,
      each its own slot(s);
    * ``parameter`` of a computation: what its caller passes in. For a
      ``while`` (whose body and condition take the loop state as their one
      parameter) that is either the while's operand (the first iteration)
      or the body's root (the previous iteration's result): the two are
      alternatives for the same slots (merged slot by slot when both hold
      as many, else into one slot); for a ``conditional`` branch k, the
      caller's operand k + 1; for any other caller (call, fusion, ...), the
      operand at the parameter's number. A parameter of the entry
      computation is an input of the whole program: nothing in the capture
      produced it (no slot);
    * a ``while`` or ``call`` without events: the root of its (body)
      computation, carrying the index (for a while, or its operand: a loop
      that ran no iteration returns it);
    * anything else without events (constant, bitcast, ...): the slots of
      all its operands (a constant has none).

    A walk that comes back to an (instruction, index) it is inside of (the
    loop body root -> parameter -> body root) stops there, contributing no
    slot, so loops end.
    """
    out: list[Slots] = []
    for first in ids:
        out.append(_Walk(module, has_events).slots(comp, first, (), 0))
    return out


class _Walk:
    """One operand's walk (see :func:`producers`), memoized per walk."""

    def __init__(self, module: Module, has_events: Callable[[Instruction], bool]) -> None:
        self.module = module
        self.has_events = has_events
        self.done: dict[tuple[int, int, tuple[int, ...]], Slots] = {}
        self.inside: set[tuple[int, int, tuple[int, ...]]] = set()

    def slots(self, c: int, i: int, path: tuple[int, ...], depth: int) -> Slots:
        key = (c, i, path)
        if key in self.done:
            return self.done[key]
        ins = self.module.instructions.get((c, i))
        if ins is None or key in self.inside or depth > _MAX_DEPTH:
            return []
        if self.has_events(ins):
            return [{ins.name}]
        self.inside.add(key)
        try:
            found = self._through(ins, path, depth + 1)
        finally:
            self.inside.discard(key)
        self.done[key] = found
        return found

    def _through(self, ins: Instruction, path: tuple[int, ...], depth: int) -> Slots:
        """The slots of ``ins`` (which has no events)."""
        c, op, module = ins.computation, ins.opcode, self.module
        if op == "get-tuple-element":
            deeper = (ins.tuple_index, *path) if len(path) < _MAX_INDEX_DEPTH else ()
            return self.slots(c, ins.operands[0], deeper, depth) if ins.operands else []
        if op == "tuple" and path:
            k = path[0]
            return self.slots(c, ins.operands[k], path[1:], depth) if 0 <= k < len(ins.operands) else []
        if op == "parameter":
            options: list[Slots] = []
            for caller in module.callers.get(c, []):
                cc = caller.computation
                if caller.opcode == "while":
                    if caller.operands:
                        options.append(self.slots(cc, caller.operands[0], path, depth))
                    body = module.computations.get(caller.called[0]) if caller.called else None
                    if body is not None:
                        options.append(self.slots(body.id, body.root_id, path, depth))
                elif caller.opcode == "conditional":
                    k = caller.called.index(c) + 1
                    if k < len(caller.operands):
                        options.append(self.slots(cc, caller.operands[k], path, depth))
                elif 0 <= ins.parameter_number < len(caller.operands):
                    options.append(self.slots(cc, caller.operands[ins.parameter_number], path, depth))
            return _either(options)
        if op in ("while", "call") and ins.called:
            body = module.computations.get(ins.called[0])
            options = [self.slots(body.id, body.root_id, path, depth)] if body is not None else []
            if op == "while" and ins.operands:  # a loop that ran no iteration returns its operand
                options.append(self.slots(c, ins.operands[0], path, depth))
            return _either(options)
        out: Slots = []
        for o in ins.operands:
            out.extend(self.slots(c, o, (), depth))
        return out


def _either(options: list[Slots]) -> Slots:
    """Alternatives for the same value: merged slot by slot when they hold
    as many slots, else all into one slot (empty alternatives ignored)."""
    options = [o for o in options if o]
    if not options:
        return []
    if all(len(o) == len(options[0]) for o in options):
        return [set().union(*column) for column in zip(*options)]
    return [set().union(*(s for o in options for s in o))]
