"""Nesting on a rank's threads (:mod:`.trace`'s rules), compiled: each
op's parent, the op each memory record happened in, the op that launches
what a runtime call issues, the ops that are the rank's calls of
collectives, and the order ops are taken in (``seq``)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np
import numpy.typing as npt

from tracegraph.columns import I64, B, kernel

# How far past its parent's end a nested op may end (ns): the rounding of
# microsecond timestamps; an op running on longer is not nested in it.
NEST_SLACK_NS = 1000


def nesting(
    op_thread: I64, op_start: I64, op_end: I64, op_index: I64, mem_thread: I64, mem_t: I64, mem_index: I64
) -> tuple[I64, I64]:
    """Parent position of each op (-1: none) and the op containing each
    memory record (-1: none), per thread.

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
    n_ops, n_mem = len(op_start), len(mem_t)
    thread = np.concatenate([op_thread, mem_thread])
    t = np.concatenate([op_start, mem_t])
    is_mem = np.concatenate([np.zeros(n_ops, dtype=np.int64), np.ones(n_mem, dtype=np.int64)])
    neg_end = np.concatenate([-op_end, np.zeros(n_mem, dtype=np.int64)])
    index = np.concatenate([op_index, mem_index])
    order = np.lexsort((index, neg_end, is_mem, t, thread))
    return _sweep(order, thread, t, is_mem, -neg_end, n_ops)


@kernel
def _sweep(
    order: I64, thread: I64, t: I64, is_mem: I64, end: I64, n_ops: int
) -> tuple[I64, I64]:  # pragma: no cover - compiled
    parents = np.full(n_ops, -1, dtype=np.int64)
    memory_op = np.full(len(t) - n_ops, -1, dtype=np.int64)
    stack_end = np.zeros(len(order) + 1, dtype=np.int64)
    stack_op = np.zeros(len(order) + 1, dtype=np.int64)
    top = 0
    current = -1
    for k in range(len(order)):
        x = order[k]
        if thread[x] != current or k == 0:
            current = thread[x]
            top = 0
        tx = t[x]
        while top > 0 and stack_end[top - 1] <= tx:
            top -= 1
        if is_mem[x]:
            memory_op[x - n_ops] = stack_op[top - 1] if top > 0 else -1
            continue
        e = end[x]
        for s in range(top - 1, -1, -1):
            open_end = stack_end[s]
            if tx < open_end and e <= open_end + NEST_SLACK_NS:
                parents[x] = stack_op[s]
                if open_end < e:
                    e = open_end
                break
        if e > tx:
            stack_end[top] = e
            stack_op[top] = x
            top += 1
    return parents, memory_op


@kernel
def launchers(parents: I64, runtime: B, cpu_op: B) -> I64:  # pragma: no cover - compiled
    """For each op, the op that launches what it issues: the innermost
    ``cpu_op`` ancestor of a runtime call (the call itself when none)."""
    out = np.arange(len(parents))
    for j in range(len(parents)):
        if not runtime[j]:
            continue
        p = parents[j]
        while p >= 0 and not cpu_op[p]:
            p = parents[p]
        if p >= 0:
            out[j] = p
    return out


def collective_calls(
    parents: I64, c10d: npt.NDArray[np.bool_], point_to_point: npt.NDArray[np.bool_]
) -> npt.NDArray[np.bool_]:
    """The ops that are a rank's host-side calls of collectives: the
    ``c10d::`` ops torch.distributed makes for every collective
    (``c10d::allreduce_``, ``c10d::barrier``, ...), not nested directly in
    another ``c10d::`` op (then they are part of it), point-to-point calls
    left out."""
    parent_c10d = np.zeros(len(parents), dtype=bool)
    has = parents >= 0
    parent_c10d[has] = c10d[parents[has]]
    return c10d & ~point_to_point & ~parent_c10d


def host_ops(threads: Sequence[Hashable], start: I64, end: I64) -> tuple[I64, I64]:
    """For host ops read from a format without memory records (Nsight
    Systems, rocprof): each op's parent position (-1: none) by
    :func:`nesting`'s rule on its thread (any key: a global thread id, an OS
    tid), and its ``seq`` (:func:`seq_order`)."""
    codes: dict[Hashable, int] = {}
    thread = np.asarray([codes.setdefault(t, len(codes)) for t in threads], dtype=np.int64)
    empty = np.zeros(0, dtype=np.int64)
    parents, _ = nesting(thread, start, end, np.arange(len(thread), dtype=np.int64), empty, empty, empty)
    return parents, seq_order(start, end)


def seq_order(start: I64, end: I64) -> I64:
    """Each op's place in the order by (start, longer first, position):
    an op comes after the ops that enclose it."""
    order = np.lexsort((np.arange(len(start)), -end, start))
    seq = np.empty(len(order), dtype=np.int64)
    seq[order] = np.arange(len(order))
    return seq


@kernel
def phases(order: I64, parents: I64, own: I64, other: int, forward: int) -> I64:  # pragma: no cover - compiled
    """Each op's phase code: its own (``own``, -1: none), else its
    parent's unless that is none or ``other``, else ``forward``; ops taken
    in ``order`` (by seq: parents first)."""
    out = np.full(len(order), -1, dtype=np.int64)
    for k in range(len(order)):
        i = order[k]
        mine = own[i]
        if mine < 0:
            p = parents[i]
            inherited = out[p] if p >= 0 else -1
            mine = inherited if (inherited >= 0 and inherited != other) else forward
        out[i] = mine
    return out
