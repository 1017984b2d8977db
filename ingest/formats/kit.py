"""What every format builds on: how a format says what it is, the uid
kinds, the device rules, op roles, which device kernels are communication,
and a builder that owns the rows.

A format module reads its file(s) and tells a :class:`FramesBuilder` what
it found (``b.op(...)``, ``b.kernel(...)``, ``b.device(name)``...); the
builder keeps the rows, names the uids the one way the whole trace uses,
applies the rules formats share (a device's kind from its name, the short
form of TF device names), and turns it all into checked
:class:`~tracegraph.ingest.frames.TraceFrames` (:meth:`FramesBuilder.build`).
The conventions are those of :mod:`tracegraph.ingest.frames`.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pandas is imported where frames are built: the CLI reads FORMAT without it
    from tracegraph.ingest.frames import TraceFrames

# One row of a frame: column name -> value (as :mod:`tracegraph.ingest.frames`).
Row = dict[str, Any]

# --- what a format is -----------------------------------------------------------------------


class Joins(Enum):
    """How files of a format combine with other files into one trace."""

    ALONE = "alone"  # a file is a trace of its own (the primary of a trace)
    RUN = "run"  # several files of the format are the parts of one run (rank files), read together
    DETAIL = "detail"  # adds detail to a primary format's trace (merged into it)


@dataclass(frozen=True)
class FormatInfo:
    """A format's declaration: its ``--format`` name, its framework, and how
    its files combine (``joins``). A DETAIL format's module defines
    ``merge(base, extra)``; a RUN format's module defines ``parse_many``."""

    name: str
    framework: str
    joins: Joins = Joins.ALONE
    summary: str = ""


# --- uids ---------------------------------------------------------------------------------------


class Kind(Enum):
    """The kind a uid starts with: uids are unique within the whole trace."""

    OP = "op"
    KERNEL = "k"
    TENSOR = "t"
    ALLOCATION = "a"
    DEVICE = "dev"
    STREAM = "s"
    ALLOCATOR = "mem"


def uid(kind: Kind, *parts: object) -> str:
    """``uid(Kind.OP, 0, 17)`` -> ``op:0:17``: the kind, then the parts, ``:``-joined."""
    return ":".join([kind.value, *(str(p) for p in parts)])


# --- devices ----------------------------------------------------------------------------------

_KIND_WORDS = {"gpu": "GPU", "cuda": "GPU", "cpu": "CPU", "host": "CPU", "tpu": "TPU", "unknown": "unknown"}


def device_kind(name: str) -> str:
    """A device's kind from its name, for every format's way of naming one:
    TF ``/job:w/replica:0/task:0/device:GPU:0`` and ``/device:CPU:0``,
    XPlane ``/host:CPU``, Kineto ``cuda:0``, MegEngine ``gpu0:0``,
    ``cpu0:0``: GPU, CPU or TPU; another family by its leading word in
    capitals (``xpu:1`` -> XPU); ``unknown`` for a name without one (or
    named ``unknown``)."""
    last = name.rsplit("/", 1)[-1]
    if last.startswith(("device:", "host:")):
        last = last.split(":", 1)[1] if last.startswith("device:") else last
    m = re.match(r"[A-Za-z]+", last)
    if not m:
        return "unknown"
    word = m.group(0).lower()
    return _KIND_WORDS.get(word, word.upper())


def scope_of(name: str) -> str:
    """The name scope of a scoped name (TF, XPlane and most formats name
    ops ``scope/inner/op``): the name without its last ``/`` component,
    ``""`` for a name without one. :meth:`FramesBuilder.frames` gives it
    to every op whose format set no scope of its own."""
    return name.rsplit("/", 1)[0] if "/" in name else ""


def short_device(name: str) -> str:
    """``/job:localhost/replica:0/task:0/device:GPU:0`` -> ``/device:GPU:0``
    (other names unchanged)."""
    i = name.find("/device:")
    return name[i:] if i >= 0 else name


# --- op roles ---------------------------------------------------------------------------------


class Role(Enum):
    """What an op is, as the parser knows it (stored as ``Op.role``):
    enrichment reads this rather than guessing from names or categories."""

    OP = "op"  # framework work (a TF node, an aten op, an HLO op)
    ANNOTATION = "annotation"  # marks a region (a user annotation, a Python frame, a step): not work itself
    RUNTIME = "runtime"  # a device runtime call that returns at once (a kernel launch, a copy issued)
    SYNC = "sync"  # a runtime call that blocks until device work ends (stream / device / event synchronize)


# --- communication kernels -----------------------------------------------------------------

# A device kernel is communication when its name (as the profiler prints it:
# demangled, with template and function arguments) names a collective
# communication library, by the names that library gives its kernels:
COMMUNICATION_KERNEL = re.compile(
    # NCCL, and RCCL (AMD's port keeps NCCL's kernel names): ncclKernel_AllReduce_RING_LL_Sum_float,
    # ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>), ncclSymkDevKernel_..., and any
    # kernel whose name begins with nccl; RCCL's own rcclGenericKernel<...>
    r"^nccl|ncclKernel|ncclDevKernel|\brccl"
    # MSCCL (inside RCCL: mscclKernel_Sum_half_Simple_false) and MSCCL++ (mscclpp:: in the kernel's
    # own name or in its arguments' types: allreduce_simple<__half>(mscclpp::SmChannelDeviceHandle *, ...))
    r"|\bmsccl"
    # DeepEP, the MoE all-to-all library: the open-source deep_ep:: kernels and DeepSeek's own
    # dpsk::ep:: (not cdpsk::ep::, a CUB scan of the same traces' sampling)
    r"|\bdeep_ep::|\bdpsk::ep::"
    # NVSHMEM: nvshmemi_proxy_rma_entrypoint_blocking, nvshmemx_..., nvshmem_...
    r"|\bnvshmem"
    # custom all-reduces over peer memory: vLLM's / SGLang's / aiter's cross_device_reduce_1stage
    # and _2stage, TensorRT-LLM's oneShotAllReduceKernel / twoShotAllReduceKernel
    r"|cross_device_reduce|tensorrt_llm::\w*AllReduce"
)


# The collective an NCCL (or RCCL) kernel's name gives:
# ncclKernel_AllReduce_RING_LL_Sum_float(...), ncclDevKernel_AllGather_RING_LL(...)
NCCL_COLLECTIVE = re.compile(r"nccl(?:Dev)?Kernel_([A-Za-z]+)")


# The op standing for a device's kernels whose launch is not in the trace
# (work queued before the profiler started): :meth:`FramesBuilder.outside_op`.
OUTSIDE_OP_NAME = "[launched outside the trace]"


def collective_in_name(name: str) -> str | None:
    """The collective a communication kernel's name gives (``AllReduce``,
    ``SendRecv``), None when it gives none (ROCm's ``Generic`` kernels)."""
    found = NCCL_COLLECTIVE.search(name)
    return found[1] if found and found[1] != "Generic" else None


@functools.lru_cache(maxsize=1 << 16)
def is_communication_kernel(name: str) -> bool:
    """Whether a device kernel named ``name`` is communication
    (:data:`COMMUNICATION_KERNEL`): the one rule every parser that tells
    communication kernels from compute kernels applies (kind
    ``communication``), so that ``comm-compute-overlap``, the rank tables
    and the observed critical path's labels agree for every library.
    Kernel names repeat by the thousand: each is matched once."""
    return COMMUNICATION_KERNEL.search(name) is not None


# --- the builder ------------------------------------------------------------------------------


@dataclass
class FramesBuilder:
    """The rows of one trace as a format finds them.

    Devices, streams and allocators are kept once per uid (the first
    mention wins); dependencies once per (src, dst); tensors once per uid
    and may be updated until :meth:`build`. Everything else is kept in the
    order given.

    ``rank``: the rank of a multi-rank job that these rows are (a format
    whose files are a job's ranks builds each rank with a builder of its
    own); :meth:`frames` gives it to every op and device. None: a trace of
    one rank.
    """

    framework: str
    sources: list[str]
    time_unit: str = "us"
    rank: int | None = None
    ops: list[Row] = field(default_factory=list)
    kernels: list[Row] = field(default_factory=list)
    tensors: dict[str, Row] = field(default_factory=dict)
    consumes: list[Row] = field(default_factory=list)
    deps: dict[tuple[str, str], Row] = field(default_factory=dict)
    allocations: list[Row] = field(default_factory=list)
    syncs: list[Row] = field(default_factory=list)
    devices: dict[str, Row] = field(default_factory=dict)
    streams: dict[str, Row] = field(default_factory=dict)
    allocators: dict[str, Row] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)

    def device(self, name: str, kind: str | None = None, *, key: object = None) -> str:
        """The uid of device ``name`` (``dev:<key or name>``), added on first
        mention with ``kind`` (default: :func:`device_kind` of the name)."""
        u = uid(Kind.DEVICE, name if key is None else key)
        if u not in self.devices:
            self.devices[u] = {"uid": u, "name": name, "kind": kind or device_kind(name)}
        return u

    def stream(self, device: str, name: str, kind: str = "compute", *, key: object = None) -> str:
        """The uid of stream ``name`` of ``device`` (a device uid):
        ``s:<key>``, by default ``s:<device name>/<name>``."""
        u = uid(Kind.STREAM, f"{self.devices[device]['name']}/{name}" if key is None else key)
        if u not in self.streams:
            self.streams[u] = {"uid": u, "device": device, "name": name, "kind": kind}
        return u

    def allocator(self, name: str, device: str | None, *, key: object = None) -> str:
        """The uid of allocator ``name`` (``mem:<key or name>``) on ``device``."""
        u = uid(Kind.ALLOCATOR, name if key is None else key)
        if u not in self.allocators:
            self.allocators[u] = {"uid": u, "name": name, "device": device}
        return u

    def op(self, row: Row) -> str:
        """Add an op row (its ``uid`` made with :func:`uid`); returns the uid."""
        self.ops.append(row)
        return str(row["uid"])

    def outside_op(self, key: object, name: str, device: str, start_us: float, rank: int | None = None) -> str:
        """Add the op that stands for a device's kernels whose launch is not
        in the trace (``op:<key>``, type ``OutsideTrace``, zero-length at
        ``start_us``: its first such kernel's start); returns its uid."""
        return self.op(
            {
                "uid": uid(Kind.OP, key),
                "name": name,
                "type": "OutsideTrace",
                "device": device,
                "start_us": start_us,
                "end_us": start_us,
                "dur_us": 0.0,
                "executed": True,
                "attrs": "{}",
                "role": Role.OP.value,
                "rank": rank,
            }
        )

    def kernel(self, row: Row) -> str:
        self.kernels.append(row)
        return str(row["uid"])

    def tensor(self, row: Row) -> Row:
        """The tensor row of ``row['uid']``: added when new, else the kept one
        updated with the values ``row`` gives (not None)."""
        kept = self.tensors.get(row["uid"])
        if kept is None:
            self.tensors[row["uid"]] = kept = dict(row)
        else:
            kept.update({k: v for k, v in row.items() if v is not None})
        return kept

    def consume(self, op: str, tensor: str, index: int | None) -> None:
        self.consumes.append({"op": op, "tensor": tensor, "input_index": index})

    def dep(self, src: str, dst: str, kind: str = "data") -> None:
        """A dependency ``dst`` on ``src``; the first kind given for a pair stays."""
        if src != dst:
            self.deps.setdefault((src, dst), {"src": src, "dst": dst, "kind": kind})

    def allocation(self, row: Row) -> str:
        self.allocations.append(row)
        return str(row["uid"])

    def sync(self, src: str, dst: str, kind: str) -> None:
        self.syncs.append({"src": src, "dst": dst, "kind": kind})

    def frames(self) -> TraceFrames:
        """The rows as frames, not yet checked (a format may still adjust
        columns, e.g. times it keeps as integers, before :meth:`check`)."""
        held = {name: getattr(self, name) for name in FRAMES}  # lists, or dicts of the rows kept once per key
        rows = {name: list(r.values()) if isinstance(r, dict) else r for name, r in held.items()}
        tf = frames_of(self.framework, self.sources, self.time_unit, self.meta, rows)
        _scopes(tf)
        if self.rank is not None:
            tf.ops["rank"] = self.rank
            tf.devices["rank"] = self.rank
        return tf

    def build(self) -> TraceFrames:
        """The checked frames (ValueError names what a parser got wrong)."""
        tf = self.frames()
        tf.check()
        return tf


# The frames of a trace, each named as its table in :mod:`tracegraph.schema`
# (the builder holds each one's rows under the same name).
FRAMES = ("ops", "kernels", "tensors", "consumes", "deps", "allocations", "devices", "streams", "allocators", "syncs")


def frames_of(
    framework: str, sources: list[str], time_unit: str, meta: dict[str, Any], rows: dict[str, list[Row]]
) -> TraceFrames:
    """Rows, by frame name (``{"ops": [...]}``; a frame not given is empty),
    as frames not yet checked, with float time columns."""
    from tracegraph import schema
    from tracegraph.ingest.frames import TraceFrames, frame

    unknown = set(rows) - set(FRAMES)
    if unknown:
        raise ValueError(f"no frame named {sorted(unknown)}")
    tf = TraceFrames(framework=framework, sources=list(sources), time_unit=time_unit, meta=dict(meta))
    for name in FRAMES:
        setattr(tf, name, frame(rows.get(name, []), schema.TABLE[name].names(schema.PARSER)))
    return float_times(tf)


def float_times(tf: TraceFrames) -> TraceFrames:
    """Time columns as float (NaN when unknown) rather than all-None
    objects, so that numeric code downstream (sorting, cummax) works on
    untimed traces."""
    for df in (tf.ops, tf.kernels):
        cols = ["start_us", "end_us", "dur_us"]
        df[cols] = df[cols].astype("float64")
    return tf


def _scopes(tf: TraceFrames) -> None:
    """``scope`` from each op's name (:func:`scope_of`) where the format set none."""
    ops = tf.ops
    unset = ops["scope"].isna()
    if unset.any():
        names = ops.loc[unset, "name"].astype(str)
        uniques = {n: scope_of(n) for n in names.unique().tolist()}  # names repeat: each worked out once
        ops.loc[unset, "scope"] = names.map(uniques)


def snippet(text: str, limit: int = 60) -> str:
    """A short, single-line quotation of bad input for an error message."""
    return repr(text if len(text) <= limit else text[:limit] + "...")
