"""Training phase of each op of a PyTorch (Kineto) trace.

Kineto records no phase, but the profiler's own names say it: the autograd
engine wraps backward work in ``autograd::engine::evaluate_function: ...``
(and backward nodes are named ``*Backward*``), ``torch.optim`` wraps its
work in ``Optimizer.step#...`` / ``Optimizer.zero_grad#...`` annotations,
collectives go through ``c10d::`` / ``nccl:`` / ``gloo:`` ops and NCCL kernels. An op
takes the phase its own name gives, else its parent's (so everything inside
``optimizer.step()`` is optimizer work), else ``forward``; the
``ProfilerStep#N`` annotation itself is ``other`` and passes nothing down.
Ops that launched a communication kernel are ``communication`` whatever
their name; the op standing for launches outside the trace (type
``OutsideTrace``) is otherwise ``other``.
"""

from __future__ import annotations

import functools
import re

from tracegraph.ingest.frames import TraceFrames

_COMMUNICATION = re.compile(
    r"nccl|gloo:|c10d::|record_param_comms|allreduce|all_reduce|all_gather|allgather|reduce_scatter|alltoall|"
    r"broadcast_|ProcessGroup",
    re.IGNORECASE,
)
_OPTIMIZER = re.compile(r"^Optimizer\.(step|zero_grad)#|^Optimizer\.")
_BACKWARD = re.compile(r"^autograd::engine::evaluate_function|Backward\d*$|Backward\d*\b")


@functools.lru_cache(maxsize=1 << 16)
def own_phase(name: str) -> str | None:
    """The phase an op's name alone gives, or None (inherit); names repeat,
    so each is matched once."""
    if name.startswith("ProfilerStep#"):
        return "other"
    if _COMMUNICATION.search(name):
        return "communication"
    if _OPTIMIZER.search(name):
        return "optimizer"
    if _BACKWARD.search(name):
        return "backward"
    return None


def assign_phases(tf: TraceFrames) -> None:
    """Fill ``tf.ops["phase"]`` (ops are processed parents first)."""
    ops = tf.ops
    if ops.empty:
        return
    names = ops["name"].tolist()
    types = ops["type"].tolist()
    uids = ops["uid"].tolist()
    parents = ops["parent"].tolist()
    index = {u: i for i, u in enumerate(uids)}
    comm_launchers = set(tf.kernels.loc[tf.kernels["kind"] == "communication", "op"]) if len(tf.kernels) else set()
    phase: list[str | None] = [None] * len(uids)
    seq = ops["seq"].tolist()
    for i in sorted(range(len(uids)), key=seq.__getitem__):
        mine = "other" if types[i] == "OutsideTrace" else own_phase(names[i])
        if uids[i] in comm_launchers:
            mine = "communication"
        if mine is None:
            p = parents[i]
            inherited = phase[index[p]] if isinstance(p, str) else None
            mine = inherited if inherited not in (None, "other") else "forward"
        phase[i] = mine
    ops["phase"] = phase
