"""The dependency DAG of a trace's ops and the passes over it.

Plain Python over plain sequences (op uids, their execution order, edges),
so that ingest-time enrichment (:mod:`tracegraph.ingest.enrich`) and the
what-if query (:mod:`tracegraph.queries.whatif`), which reruns the same
passes with other weights, share one implementation from below both.

Ties are broken the same way everywhere: the op with the lower ``seq``
(execution order), then the lower ``uid``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from tracegraph.errors import DependencyCycle

# Slack below this is zero: sums of float microseconds are not exact.
EPS = 1e-6

# The tie-break key of an op: (seq, or +inf when it has none; uid).
Rank = tuple[float, Any]


@dataclass
class Dag:
    """The dependency DAG over ops ``0..n-1`` (only executed ops take part).

    ``preds``/``succs`` are adjacency lists, ``order`` a topological order
    of the executed ops, ``rank`` the tie-break key (seq, uid) of every op.
    """

    preds: list[list[int]]
    succs: list[list[int]]
    order: list[int]
    rank: list[Rank]
    executed: np.ndarray


@dataclass
class Passes:
    """Forward and backward pass results for one weighting of a :class:`Dag`.

    Arrays are indexed like the ops; ops outside the DAG (not executed) hold
    meaningless values there (callers mask them). ``pred`` is the heaviest
    predecessor (-1 for sources), ``path`` the critical path's op indices in
    order, ``steps`` every op's 0-based position on it (None elsewhere).
    """

    es: np.ndarray
    ef: np.ndarray
    ls: np.ndarray
    lf: np.ndarray
    slack: np.ndarray
    pred: list[int]
    path: list[int]
    steps: list[int | None]
    length: float


def dependency_dag(uids: Sequence[Any], seqs: Sequence[Any], executed: Any, edges: Iterable[tuple[Any, Any]]) -> Dag:
    """Build the DAG from plain sequences: op uids, their ``seq`` (None/NaN
    allowed), executed flags, and ``(src_uid, dst_uid)`` edges. Edges
    touching an op that did not execute, and self loops, are left out.
    DependencyCycle when the edges among executed ops form a cycle."""
    uids = list(uids)
    n = len(uids)
    executed = np.asarray(executed, dtype=bool)
    index = {u: i for i, u in enumerate(uids)}
    rank = _rank_of(seqs, uids)
    preds: list[list[int]] = [[] for _ in range(n)]
    succs: list[list[int]] = [[] for _ in range(n)]
    for s, d in edges:
        i, j = index[s], index[d]
        if executed[i] and executed[j] and i != j:
            preds[j].append(i)
            succs[i].append(j)
    order = _topological(preds, succs, rank, executed)
    if len(order) < int(np.sum(executed)):
        raise DependencyCycle([uids[i] for i in _cycle(preds, rank, executed, set(order))])
    return Dag(preds, succs, order, rank, executed)


def dag_passes(dag: Dag, weight: Any) -> Passes:
    """Forward pass (earliest finish, heaviest predecessor), backward pass
    (latest finish), slack and the critical path for ``weight`` per op.
    Requires at least one executed op."""
    weight = np.asarray(weight, dtype=float)
    n = len(weight)
    order = dag.order
    ef, pred = _longest(order, dag.preds, weight, dag.rank)
    length = max(ef[i] for i in order)
    lf = np.full(n, np.nan)
    for i in reversed(order):
        lf[i] = min((lf[s] - weight[s] for s in dag.succs[i]), default=length)
    slack = np.where(np.abs(lf - ef) < EPS, 0.0, lf - ef)
    steps = _path_steps(ef, pred, order, dag.rank)
    on_path = {i: s for i, s in enumerate(steps) if s is not None}
    path = sorted(on_path, key=on_path.__getitem__)
    return Passes(
        es=ef - weight,
        ef=ef,
        ls=lf - weight,
        lf=lf,
        slack=slack,
        pred=pred,
        path=path,
        steps=steps,
        length=float(length),
    )


def _rank_of(seqs: Sequence[Any], uids: Sequence[Any]) -> list[Rank]:
    import pandas as pd  # (only frames-based traces come here: the columnar path never imports pandas)

    seq = pd.to_numeric(pd.Series(list(seqs), dtype=object), errors="coerce").fillna(np.inf).tolist()
    return list(zip(seq, list(uids)))


def _topological(
    preds: list[list[int]], succs: list[list[int]], rank: list[Rank], executed: npt.NDArray[np.bool_]
) -> list[int]:
    """Kahn's order over executed ops (sources by rank first). Ops on or
    after a cycle never become ready: the order is then short of them."""
    n = len(preds)
    indeg = [len(p) for p in preds]
    ready = deque(sorted((i for i in range(n) if executed[i] and indeg[i] == 0), key=lambda i: rank[i]))
    order: list[int] = []
    while ready:
        i = ready.popleft()
        order.append(i)
        for s in succs[i]:
            indeg[s] -= 1
            if indeg[s] == 0:
                ready.append(s)
    return order


def _cycle(preds: list[list[int]], rank: list[Rank], executed: npt.NDArray[np.bool_], done: set[int]) -> list[int]:
    """One cycle among the ops Kahn's order left out, in dependency order,
    starting and ending at its lowest-ranked op. Every such op has a
    predecessor that was left out too, so walking back (to the
    lowest-ranked one each time) from the lowest-ranked op must come round."""
    stuck = [i for i in range(len(preds)) if executed[i] and i not in done]
    at = min(stuck, key=lambda i: rank[i])
    walk: list[int] = []
    seen: dict[int, int] = {}
    while at not in seen:
        seen[at] = len(walk)
        walk.append(at)
        at = min((p for p in preds[at] if executed[p] and p not in done), key=lambda p: rank[p])
    loop = walk[seen[at] :][::-1]  # walked against the edges: reverse
    first = min(range(len(loop)), key=lambda k: rank[loop[k]])
    loop = loop[first:] + loop[:first]
    return loop + loop[:1]


def _longest(
    order: list[int], preds: list[list[int]], weight: npt.NDArray[np.float64], rank: list[Rank]
) -> tuple[npt.NDArray[np.float64], list[int]]:
    """Forward pass: finish[i] = weight[i] + max finish of preds, and the
    argmax predecessor (-1 for sources)."""
    n = len(weight)
    finish = np.zeros(n)
    best = [-1] * n
    for i in order:
        top, arg = 0.0, -1
        for p in preds[i]:
            f = finish[p]
            if arg < 0 or f > top + EPS or (abs(f - top) <= EPS and rank[p] < rank[arg]):
                top, arg = f, p
        finish[i] = top + weight[i]
        best[i] = arg
    return finish, best


def _path_steps(
    finish: npt.NDArray[np.float64], pred: list[int], order: list[int], rank: list[Rank]
) -> list[int | None]:
    """0-based step of each op on the path ending at the max-finish op."""
    end = min(order, key=lambda i: (-finish[i], rank[i]))
    path: list[int] = []
    while end >= 0:
        path.append(end)
        end = pred[end]
    steps: list[int | None] = [None] * len(finish)
    for step, i in enumerate(reversed(path)):
        steps[i] = step
    return steps
