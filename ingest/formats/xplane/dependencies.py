"""DATA and CONTROL edges between the HLO op events of each module run,
from the module's HLO (the rule in :mod:`.trace`'s docstring: each slot of
an instruction's operands, walked back to its producers by
:func:`.hlo.producers`, gives one edge from the producer event of the same
run that ended last before the op started)."""

from __future__ import annotations

import bisect

from tracegraph.ingest.formats.xplane.capture import Capture, Op
from tracegraph.ingest.formats.xplane.hlo import Instruction, Module, Slots, producers

# An op event of a run, as the search for sources wants it: (end, start, seq, index in Capture.ops).
_Event = tuple[int, int, int, int]
# An instruction's operands and control predecessors, as slots of producers.
_Inputs = tuple[list[Slots], list[Slots]]


def add_dependencies(cap: Capture) -> bool:
    """The edges of every run whose module the capture holds; True when
    there was one (the HLO to derive dependencies from)."""
    runs: dict[tuple[tuple[str, int | None], object], list[int]] = {}
    for j, op in enumerate(cap.ops):
        if op.module is not None:
            runs.setdefault((op.module, op.run), []).append(j)
    derived = False
    inputs: dict[tuple[int, int, int], _Inputs] = {}  # (module, computation, instruction) -> its inputs
    with_events: dict[int, set[str]] = {}  # module -> the names of its instructions with events
    for (key, _run), members in runs.items():
        module = cap.module(*key)
        if module is None:
            continue
        derived = True
        names = with_events.get(id(module))
        if names is None:
            names = with_events[id(module)] = set()
            for (other, _), events in runs.items():
                if other == key:
                    names.update(cap.ops[j].name for j in events)
        _run_edges(cap, module, members, names, inputs)
    return derived


def _run_edges(
    cap: Capture, module: Module, members: list[int], names: set[str], inputs: dict[tuple[int, int, int], _Inputs]
) -> None:
    """The edges into the op events ``members`` of one run."""

    def has_events(ins: Instruction) -> bool:
        return ins.name in names

    # per instruction name: its events in this run by end, then start, then seq
    events: dict[str, list[_Event]] = {}
    for j in members:
        op = cap.ops[j]
        events.setdefault(op.name, []).append((op.end, op.start, op.seq, j))
    for found in events.values():
        found.sort()
    ends = {n: [e[0] for e in found] for n, found in events.items()}
    for j in members:
        op = cap.ops[j]
        ins = module.by_name.get(op.name)
        if ins is None:
            continue
        key = (id(module), ins.computation, ins.id)
        if key not in inputs:
            inputs[key] = (
                producers(module, ins.computation, ins.operand_ids, has_events),
                producers(module, ins.computation, ins.control_predecessor_ids, has_events),
            )
        data, control = inputs[key]
        for kind, operands in (("data", data), ("control", control)):
            for slot in (slot for slots in operands for slot in slots):
                source = _source(op, slot, events, ends)
                if source is not None:
                    cap.b.dep(cap.ops[source[3]].uid, op.uid, kind)


def _source(op: Op, slot: set[str], events: dict[str, list[_Event]], ends: dict[str, list[int]]) -> _Event | None:
    """Of the events of the slot's producers that ended at or before ``op``
    started and come before it (seq), the one that ended last."""
    best: _Event | None = None
    for n in slot:
        found = events.get(n)
        if not found:
            continue
        i = bisect.bisect_right(ends[n], op.start) - 1
        while i >= 0 and found[i][2] >= op.seq:
            i -= 1
        if i >= 0 and (best is None or found[i][:3] > best[:3]):
            best = found[i]
    return best
