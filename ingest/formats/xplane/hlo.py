"""An XLA module's instructions keyed for the dependency walk, and the walk
from an operand to the instructions whose events produce it.

The module is the ``HloModuleProto`` that :mod:`.messages` decodes from a
``Hlo Proto`` stat. Operand and control-predecessor ids name instructions
of the same computation, so instructions are keyed by (computation id,
instruction id). Names are unique within a module (XLA's rule); a repeated
name keeps its first instruction, a repeated computation id its first
computation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tracegraph.ingest.formats.xplane.messages import HloComputationProto, HloInstructionProto, HloModuleProto

# An instruction's key in its module: (computation id, instruction id).
Key = tuple[int, int]
Instruction = HloInstructionProto
# How deeply nested a tuple element the walk follows (the tuple indices it
# carries, outermost first); past that it takes the whole tuple.
_MAX_INDEX_DEPTH = 16


@dataclass
class Module:
    """A module's computations and instructions, keyed."""

    name: str
    computations: dict[int, HloComputationProto] = field(default_factory=dict)  # by id
    instructions: dict[Key, Instruction] = field(default_factory=dict)
    by_name: dict[str, Instruction] = field(default_factory=dict)
    # computation id -> the instructions that call it (while, fusion, call, conditional, ...)
    callers: dict[int, list[Instruction]] = field(default_factory=dict)

    @classmethod
    def of(cls, proto: HloModuleProto) -> Module:
        """The keyed module (the rules in the module docstring); each
        instruction learns its computation's id."""
        module = cls(proto.name)
        for comp in proto.computations:
            for ins in comp.instructions:
                ins.computation = comp.id
            module.computations.setdefault(comp.id, comp)
        for comp in module.computations.values():
            for ins in comp.instructions:
                module.instructions.setdefault((comp.id, ins.id), ins)
                module.by_name.setdefault(ins.name, ins)
                for called in ins.called_computation_ids:
                    module.callers.setdefault(called, []).append(ins)
        return module

    def computation_name(self, ins: Instruction) -> str:
        comp = self.computations.get(ins.computation)
        return comp.name if comp else ""


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
            return self.slots(c, ins.operand_ids[0], deeper, depth) if ins.operand_ids else []
        if op == "tuple" and path:
            k = path[0]
            return self.slots(c, ins.operand_ids[k], path[1:], depth) if 0 <= k < len(ins.operand_ids) else []
        if op == "parameter":
            options: list[Slots] = []
            for caller in module.callers.get(c, []):
                cc = caller.computation
                if caller.opcode == "while":
                    if caller.operand_ids:
                        options.append(self.slots(cc, caller.operand_ids[0], path, depth))
                    body = (
                        module.computations.get(caller.called_computation_ids[0])
                        if caller.called_computation_ids
                        else None
                    )
                    if body is not None:
                        options.append(self.slots(body.id, body.root_id, path, depth))
                elif caller.opcode == "conditional":
                    k = caller.called_computation_ids.index(c) + 1
                    if k < len(caller.operand_ids):
                        options.append(self.slots(cc, caller.operand_ids[k], path, depth))
                elif 0 <= ins.parameter_number < len(caller.operand_ids):
                    options.append(self.slots(cc, caller.operand_ids[ins.parameter_number], path, depth))
            return _either(options)
        if op in ("while", "call") and ins.called_computation_ids:
            body = module.computations.get(ins.called_computation_ids[0])
            options = [self.slots(body.id, body.root_id, path, depth)] if body is not None else []
            if op == "while" and ins.operand_ids:  # a loop that ran no iteration returns its operand
                options.append(self.slots(c, ins.operand_ids[0], path, depth))
            return _either(options)
        out: Slots = []
        for o in ins.operand_ids:
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
