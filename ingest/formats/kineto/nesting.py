"""Nesting on a rank's threads (:mod:`.trace`'s rules): each op's parent,
the op each memory record happened in, the op that launches what a
runtime call issues, and which ops are the rank's calls of collectives."""

from __future__ import annotations

from typing import Any

# Kineto's categories of runtime calls (kernel launches, copies issued, synchronizations).
RUNTIME_CATEGORIES = ("cuda_runtime", "cuda_driver")

# How far past its parent's end a nested op may end (ns): the rounding of
# microsecond timestamps; an op running on longer is not nested in it.
NEST_SLACK_NS = 1000


def nesting(ops: list[list[Any]], memory: list[list[Any]]) -> tuple[list[int | None], list[int | None]]:
    """Parent index of each op (innermost enclosing op of its thread) and
    the innermost op containing each memory record of that thread.

    One sweep per thread over ops sorted by (start, longer first, file
    order), with memory records at their time after the ops that start
    then; a stack holds the open ops. An op's parent is the innermost open
    op it ends in, or ends at most :data:`NEST_SLACK_NS` after (timestamps
    rounded to the microsecond: its end is then clamped to its parent's).
    An op that only begins inside another is not its child: with
    ``with_stack=True``, a ``ProfilerStep#N`` or ``Optimizer.step``
    annotation begins inside the Python frame that opens it
    (``_record_function_enter_new``) and runs on long after it, ending
    inside the frame that closes it; it is those frames' sibling, and the
    parent of what runs in it. (The time such a pair shares is in both
    ops' self times: a partial overlap has no place in a tree.)"""
    parents: list[int | None] = [None] * len(ops)
    memory_op: list[int | None] = [None] * len(memory)
    # per (pid, tid): (time, is memory, -end, file index, op or record position)
    items: dict[tuple[Any, Any], list[tuple[int, int, int, int, int]]] = {}
    for j, o in enumerate(ops):
        items.setdefault((o[3], o[4]), []).append((o[5], 0, -o[6], o[0], j))
    for m_i, m in enumerate(memory):
        items.setdefault((m[1], m[2]), []).append((m[3], 1, 0, m[0], m_i))
    for seq in items.values():
        seq.sort()
        stack: list[tuple[int, int]] = []  # (end, op index)
        for t, is_mem, neg_end, _, j in seq:
            while stack and stack[-1][0] <= t:
                stack.pop()
            if is_mem:
                memory_op[j] = stack[-1][1] if stack else None
                continue
            end = -neg_end
            for open_end, p in reversed(stack):
                if t < open_end and end <= open_end + NEST_SLACK_NS:
                    parents[j] = p
                    end = min(end, open_end)
                    break
            if end > t:
                stack.append((end, j))
    return parents, memory_op


# torch.distributed's point-to-point calls: not collectives.
POINT_TO_POINT = frozenset({"c10d::send", "c10d::recv_", "c10d::recv_any_source_"})


def collective_calls(ops: list[list[Any]], parents: list[int | None]) -> list[int]:
    """The ops that are a rank's host-side calls of collectives: the
    ``c10d::`` ops torch.distributed makes for every collective
    (``c10d::allreduce_``, ``c10d::barrier``, ...), not nested directly in
    another ``c10d::`` op (then they are part of it), point-to-point calls
    (:data:`POINT_TO_POINT`) left out."""
    c10d = [o[1].startswith("c10d::") for o in ops]
    calls = []
    for j, o in enumerate(ops):
        p = parents[j]
        if c10d[j] and o[1] not in POINT_TO_POINT and (p is None or not c10d[p]):
            calls.append(j)
    return calls


def launchers(ops: list[list[Any]], parents: list[int | None]) -> list[int]:
    """For each op, the op that launches what it issues: the innermost
    ``cpu_op`` ancestor of a runtime call (the call itself when none)."""
    out = list(range(len(ops)))
    for j, o in enumerate(ops):
        if o[2] not in RUNTIME_CATEGORIES:
            continue
        p = parents[j]
        while p is not None and ops[p][2] != "cpu_op":
            p = parents[p]
        if p is not None:
            out[j] = p
    return out
