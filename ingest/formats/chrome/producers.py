"""Who wrote a Chrome trace, and what that producer's categories and names mean.

The format is shared by many writers; what an event *is* (framework work,
a marker, a runtime call, device work) is in each writer's categories and
lane names, never in the format. :func:`recognise` reads the producer from
the content; :class:`Producer` holds its rules, on top of the rules every
producer shares (:data:`SHARED_ROLES`, the device categories).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tracegraph.ingest.formats.kit import Role

# Categories (lowercased) whose spans are device work, whoever wrote them
# (Kineto's names, and PaddlePaddle's Kernel / Memcpy / Memset).
DEVICE_CATEGORIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset", "gpu_op"})

# Categories (lowercased) every producer uses the same way.
SHARED_ROLES: dict[str, Role] = {
    "cuda_runtime": Role.RUNTIME,
    "cuda_driver": Role.RUNTIME,
    "runtime": Role.RUNTIME,
    "cudaruntime": Role.RUNTIME,  # PaddlePaddle
    "hip_runtime": Role.RUNTIME,
    "hip_api": Role.RUNTIME,
    "user_annotation": Role.ANNOTATION,
    "gpu_user_annotation": Role.ANNOTATION,
    "python_function": Role.ANNOTATION,
}

# Step markers: PyTorch's ProfilerStep#N, PaddlePaddle's ProfileStep#N.
STEP_NAME = re.compile(r"^(ProfilerStep|ProfileStep)#\d+")

# A runtime call that blocks until device work ends.
SYNC_CALL = re.compile(r"^(cuda|hip|cu|hsa)\w*Synchronize|^(cuda|hip)StreamWaitEvent$|Synchronize$")

# PaddlePaddle writes every span's duration into its name: ``matmul dygraph[0.012 ms]``.
_PADDLE_DURATION = re.compile(r"\[\d+(\.\d+)? ?(ms|us|ns|s)\]$")
_PADDLE_SUFFIX = re.compile(r" (dygraph|pybind_imperative_func|pybind_patch_func|kernel launch)$")
_PADDLE_LANE = re.compile(r"^(\d+)\((Python|C\+\+)\)$")
_STEP_NUMBER = re.compile(r"#\d+$")
# Names only JAX's runtime gives its spans (PjRt clients, jitted calls).
_JAX_NAMES = re.compile(r"PjitFunction|PjRt|pjit|XlaPmap")
# The trace viewer's converter (TSL/XProf: TensorFlow, and JAX) names its processes so.
_TSL_PROCESS = re.compile(r"^/(host|device):[A-Za-z]+")
_PADDLE_CATEGORIES = frozenset({"ProfileStep", "OperatorInner", "DygraphKernelLaunch", "PythonUserDefined"})


@dataclass(frozen=True)
class Producer:
    """One writer's rules: its framework name and roles by category."""

    framework: str
    roles: dict[str, Role] = field(default_factory=dict)
    phases: dict[str, str] = field(default_factory=dict)  # category (lowercased) -> phase of what runs in it

    def role(self, category: str, name: str) -> Role:
        """What a host span of this category and name is."""
        cat = category.lower()
        role = self.roles.get(cat) or SHARED_ROLES.get(cat, Role.OP)
        if STEP_NAME.match(name):
            return Role.ANNOTATION
        if role is Role.RUNTIME and SYNC_CALL.search(name):
            return Role.SYNC
        return role

    def name(self, raw: str) -> str:
        """A span's name as people say it (a producer's decorations removed)."""
        if self.framework == "paddle":
            return _PADDLE_DURATION.sub("", raw)
        return raw

    def op_type(self, name: str) -> str:
        """An op's type: its name, a step's number (``#3``) and a
        producer's suffix words dropped."""
        kind = _STEP_NUMBER.sub("", name)
        if self.framework == "paddle":
            kind = _PADDLE_SUFFIX.sub("", kind)
        return kind or name

    def thread(self, tid: Any) -> Any:
        """A thread id as one OS thread: PaddlePaddle splits each thread
        into a ``<tid>(Python)`` and a ``<tid>(C++)`` lane, whose spans nest
        in each other (the step and the forward pass hold the operators)."""
        if self.framework == "paddle" and isinstance(tid, str):
            m = _PADDLE_LANE.match(tid)
            if m:
                return int(m.group(1))
        return tid

    def phase(self, category: str) -> str | None:
        return self.phases.get(category.lower())


GENERIC = Producer("chrome")
JAX = Producer("jax")
TENSORFLOW = Producer("tensorflow")
PADDLE = Producer(
    "paddle",
    roles={
        "profilestep": Role.ANNOTATION,
        "forward": Role.ANNOTATION,
        "backward": Role.ANNOTATION,
        "optimization": Role.ANNOTATION,
        "dataloader": Role.ANNOTATION,
        "userdefined": Role.ANNOTATION,
        "pythonuserdefined": Role.ANNOTATION,
    },
    phases={
        "forward": "forward",
        "backward": "backward",
        "optimization": "optimizer",
        "communication": "communication",
        "profilestep": "other",
    },
)


def recognise(
    keys: Iterable[str], categories: Iterable[str], names: Iterable[str], processes: Iterable[str]
) -> Producer:
    """The producer of a trace with these top-level keys, span categories,
    span names and process names: PaddlePaddle by its header
    (``span_indx``, ``ExtraInfo``) or its own categories; JAX by its
    runtime's span names (``PjitFunction(...)``, ``PjRt...``); TensorFlow
    by the trace viewer's process names (``/host:CPU``,
    ``/device:GPU:0``) without JAX's; else the generic producer."""
    if set(keys) & {"span_indx", "span_index", "ExtraInfo"} or _PADDLE_CATEGORIES & set(categories):
        return PADDLE
    if any(_JAX_NAMES.search(n) for n in names):
        return JAX
    if any(_TSL_PROCESS.search(p) for p in processes):
        return TENSORFLOW
    return GENERIC
