"""What a rocprofiler-sdk capture holds, whatever file it came in.

``rocprofv3`` (ROCm 6.2 and later) writes a run's records as JSON
(``--output-format json``: :mod:`.json_file`), and from ROCm 7 also as a
``rocpd`` SQLite database, a CSV set or a Perfetto trace. The readers turn a
file into these records, one :class:`Process` per profiled process, so that
one set of rules (:mod:`.trace`) makes them frames whatever the file was.

Times are the profiler's integer nanoseconds (one clock for host and
device records); ids are the profiler's own: a record's ``correlation`` is
rocprofiler-sdk's internal correlation id, which a kernel dispatch or copy
shares with the API call that issued it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The record kinds read as host calls, with the category their ops get.
CALL_CATEGORIES = {
    "HIP_RUNTIME_API": "hip_runtime",
    "HIP_RUNTIME_API_EXT": "hip_runtime",
    "HIP_COMPILER_API": "hip_compiler",
    "HIP_COMPILER_API_EXT": "hip_compiler",
    "HSA_CORE_API": "hsa_api",
    "HSA_AMD_EXT_API": "hsa_api",
    "HSA_IMAGE_EXT_API": "hsa_api",
    "HSA_FINALIZE_EXT_API": "hsa_api",
    "RCCL_API": "rccl_api",
}
# Copy operations (MEMORY_COPY_<FROM>_TO_<TO>) as the direction words Kineto uses.
_DIRECTIONS = {"HOST": "H", "DEVICE": "D"}
# The record kinds of ROCTx markers (marker_api records).
MARKER_KINDS = frozenset({"MARKER_CORE_API", "MARKER_CORE_RANGE_API", "MARKER_CONTROL_API", "MARKER_NAME_API"})


@dataclass(frozen=True)
class Agent:
    """A CPU or GPU as rocprofiler-sdk enumerates them (``agents``)."""

    handle: int
    kind: str  # "CPU" or "GPU"
    index: int  # among the agents of its kind (a GPU's HIP device number)
    name: str  # the ISA (gfx950) for a GPU, the product name for a CPU
    product: str


@dataclass(frozen=True)
class Call:
    """A host API call (HIP, HSA, RCCL) or a ROCTx marker range: one
    buffer record."""

    domain: str  # the record kind's name: HIP_RUNTIME_API, RCCL_API, MARKER_CORE_API, ...
    name: str  # the operation (hipLaunchKernel, ncclAllReduce) or a marker's message
    thread: int
    correlation: int
    external: int  # the external correlation id a framework pushed (0: none)
    start: int
    end: int


@dataclass(frozen=True)
class Work:
    """A kernel dispatch or a memory copy on a GPU."""

    kind: str  # "kernel" or "memcpy"
    name: str  # a kernel's demangled name; "Memcpy HtoD" and the like for a copy
    agent: int  # the GPU's agent handle (for a copy, the GPU end's)
    lane: str  # "stream:<id>" (a HIP stream) or "queue:<id>" when the record names no stream
    thread: int
    correlation: int
    start: int
    end: int
    bytes: int | None = None
    direction: str | None = None
    grid: tuple[int, int, int] | None = None
    workgroup: tuple[int, int, int] | None = None


@dataclass(frozen=True)
class Memory:
    """An allocation or a free (``memory_allocation`` records)."""

    allocate: bool  # False: a free
    agent: int | None
    address: int
    bytes: int
    thread: int
    correlation: int
    time: int  # the record's end: the memory is held (or released) from then


@dataclass
class Process:
    """One profiled process: its agents and records, in file order."""

    pid: int
    agents: dict[int, Agent] = field(default_factory=dict)  # handle -> agent
    calls: list[Call] = field(default_factory=list)
    work: list[Work] = field(default_factory=list)
    memory: list[Memory] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)  # host, command, what was not read


def copy_direction(operation: str) -> str | None:
    """``MEMORY_COPY_HOST_TO_DEVICE`` -> ``HtoD`` (None for another name)."""
    parts = operation.removeprefix("MEMORY_COPY_").split("_TO_")
    if len(parts) != 2 or parts[0] not in _DIRECTIONS or parts[1] not in _DIRECTIONS:
        return None
    return f"{_DIRECTIONS[parts[0]]}to{_DIRECTIONS[parts[1]]}"
