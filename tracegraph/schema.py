"""What a trace's graph holds, declared once.

Every column of the canonical frames (:mod:`tracegraph.ingest.frames`):
its type, who makes it (a format parser, enrichment, or the store, which
copies names onto nodes so queries need not follow a relationship), what
it means, and whether it becomes a property of the table's node label.
Then every relationship (which table, which columns name its ends) and
every property of the Trace node.

Everything else reads these declarations: the parsers' column contract
(``frames.OP_COLUMNS``...), :meth:`TraceFrames.check`, the tables the
loaders write (:mod:`graph_tables`) and the node and relationship tables of
``cypher/SCHEMA.md``, which ``python -m tracegraph.schema`` prints
and a test compares.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

PARSER, ENRICH, STORE = "parser", "enrich", "store"


@dataclass(frozen=True)
class Column:
    """One column. ``type`` is str, int, float, bool, json (text holding
    JSON) or list[...]; ``stored``: a property of the table's node label
    (else the column only names a relationship's end, or helps the store)."""

    name: str
    type: str
    meaning: str
    by: str = PARSER
    stored: bool = True


@dataclass(frozen=True)
class Table:
    """A frame. ``label`` is the node label of its rows (None: a table of
    relationships only); ``one_per`` says what a row is."""

    name: str
    label: str | None
    one_per: str
    columns: tuple[Column, ...]

    def names(self, by: str | None = None) -> list[str]:
        return [c.name for c in self.columns if by is None or c.by == by]

    def properties(self) -> list[str]:
        """The node's stored properties, ``uid`` excepted (always stored)."""
        return [c.name for c in self.columns if c.stored and c.name != "uid"]


def _c(name: str, type_: str, meaning: str, by: str = PARSER, stored: bool = True) -> Column:
    return Column(name, type_, meaning, by, stored)


UID = _c(
    "uid",
    "str",
    "unique within the trace, prefixed by its kind (`op:`, `k:`, `t:`, `a:`, `dev:`, `s:`, `mem:`, `coll:`)",
)
PATH = (
    _c("ocp_steps", "list[int]", "on the observed critical path: the steps (positions) of its segments", ENRICH),
    _c("ocp_starts_us", "list[float]", "their start times", ENRICH),
    _c("ocp_durs_us", "list[float]", "their durations", ENRICH),
    _c("ocp_kinds", "list[str]", "their kinds (cpu_op, runtime, sync, kernel, memcpy, communication, idle)", ENRICH),
    _c("ocp_counted", "list[bool]", "whether each counts toward the path's length (waiting does not)", ENRICH),
    _c("ocp_resource", "str", "the thread (`pid:tid`) or stream (`cuda:0/stream:7`) the segments ran on", ENRICH),
)


def _device_time(prefix: str, where: str) -> tuple[Column, ...]:
    """The device time figures over a window (``ingest/device_time.py``;
    see `step-breakdown`) as columns ``<prefix><figure>_us``: a Step's over
    its window, a Rank's over its whole device span."""
    meanings = (
        ("busy", "union of the rank's kernels, copies and memsets"),
        ("computation", "union of compute kernels and memsets"),
        ("communication", "union of communication kernels"),
        ("memcpy", "union of copies"),
        ("exposed_communication", "communication with no computation beside it"),
        ("exposed_memcpy", "copies with neither computation nor communication beside them"),
        ("idle", "the window minus busy"),
    )
    return tuple(_c(f"{prefix}{figure}_us", "float", f"{where}: {meaning}", ENRICH) for figure, meaning in meanings)


TABLES: tuple[Table, ...] = (
    Table(
        "op_totals",
        "OpTotals",
        "trace: its executed ops summed per (name, type), for cross-trace analyses",
        (
            _c("uid", "str", "`optotals`", STORE),
            _c("ops", "list[str]", "op names, sorted with `types`", STORE),
            _c("types", "list[str]", "op types ('' where the format gives none)", STORE),
            _c("weights_us", "list[float]", "summed weights of the ops of that name and type", STORE),
            _c("runs", "list[int]", "how many ops (runs) of that name and type", STORE),
        ),
    ),
    Table(
        "devices",
        "Device",
        "device",
        (
            UID,
            _c("name", "str", "`/device:GPU:0`, `cuda:0`, ..."),
            _c("kind", "str", "GPU / CPU / ..."),
            _c("rank", "int", "the rank of the job it belongs to (multi-rank traces; absent in a trace of one rank)"),
        ),
    ),
    Table(
        "streams",
        "Stream",
        "device stream",
        (
            UID,
            _c("device", "str", "uid of its device", stored=False),
            _c("name", "str", "`stream:13`, `memcpy`, ..."),
            _c("kind", "str", "`compute` / `memcpy`"),
            _c("device_name", "str", "its device's name", STORE),
            _c("rank", "int", "its device's rank (multi-rank traces)", STORE),
            _c("busy_us", "float", "length of the union of its kernel intervals", ENRICH),
        ),
    ),
    Table(
        "allocators",
        "Allocator",
        "memory allocator",
        (
            UID,
            _c("name", "str", "`GPU_0_bfc`, ..."),
            _c("device", "str", "uid of its device", stored=False),
            _c("device_name", "str", "its device's name", STORE),
            _c("peak_bytes", "int", "the highest live bytes of its memory timeline", ENRICH),
            _c("peak_us", "float", "the first time the peak is reached", ENRICH),
            _c("timeline_us", "list[float]", "the timeline's times (stored on its MemoryTimeline)", ENRICH, False),
            _c("timeline_bytes", "list[int]", "live bytes after each (stored on its MemoryTimeline)", ENRICH, False),
        ),
    ),
    Table(
        "timelines",
        "MemoryTimeline",
        "allocator with timed allocations (a node of its own, so that the Allocator stays small to return and draw)",
        (
            _c("uid", "str", "`timeline:` + its allocator's uid", STORE),
            _c("allocator", "str", "uid of its allocator", STORE, False),
            _c("allocator_name", "str", "its allocator's name", STORE),
            _c("points", "int", "how many points the timeline has", STORE),
            _c("t_us", "list[float]", "the times, ascending", STORE),
            _c("live_bytes", "list[int]", "live bytes after all events at each time", STORE),
        ),
    ),
    Table(
        "ops",
        "Op",
        "executed (or declared) graph node; every run of a node that ran several times",
        (
            UID,
            _c("name", "str", "the node's name"),
            _c("type", "str", "op type (`Conv2D`, `aten::mm`, ...)"),
            _c("device", "str", "uid of its device", stored=False),
            _c("seq", "int", "execution order, 0-based"),
            _c("start_us", "float", "start (us since the trace's first event; steps for traces timed in steps)"),
            _c("end_us", "float", "end"),
            _c("dur_us", "float", "its own record's duration"),
            _c("phase", "str", "forward / backward / optimizer / communication / other"),
            _c("executed", "bool", "whether it ran in the trace (a listing declares ops that did not)"),
            _c("attrs", "json", "everything else the format had for it"),
            _c("run", "int", "TF StepStats: 0-based place among the records of the same name, by start"),
            _c(
                "iteration",
                "int",
                "TF StepStats: the loop iteration of that run (innermost loop; absent outside loops)",
            ),
            _c("parent", "str", "uid of the op it runs nested directly inside on its thread (PyTorch)", stored=False),
            _c("thread", "str", "host thread (`pid:tid`; `rank1/pid:tid` in multi-rank traces; PyTorch)"),
            _c("category", "str", "PyTorch event category (`cpu_op`, `cuda_runtime`, ...)"),
            _c(
                "role",
                "str",
                "`op` (framework work), `annotation` (marks a region: a user annotation, a Python frame), "
                "`runtime` (a device runtime call that returns at once), `sync` (a runtime call that blocks "
                "until device work ends); set by the format",
            ),
            _c(
                "carries_deps",
                "bool",
                "takes part in the dependency DAG (absent on every op of a trace: every executed op does; "
                "a PyTorch trace joined to its Execution Trace marks its outermost tensor ops)",
            ),
            _c(
                "rank",
                "int",
                "the rank of the job it ran on (multi-rank traces, on every op of a rank; absent in a trace of one rank)",
            ),
            _c(
                "collective",
                "str",
                "on a rank's host-side call of a collective, the call (`c10d::allreduce_`, ...; set by the format: "
                "PyTorch's outermost `c10d::` ops, point-to-point calls left out); absent on other ops",
            ),
            _c("scope", "str", "its name scope: the name without its last `/` component (set by the format)"),
            _c("device_name", "str", "its device's name", STORE),
            _c("weight_us", "float", "its weight (see below)", ENRICH),
            _c(
                "path_weight_us",
                "float",
                "its weight on the dependency DAG: its weight plus the weights of the ops nested in it "
                "(equal to weight_us without nesting; absent for ops outside the DAG)",
                ENRICH,
            ),
            _c("es_us", "float", "earliest start on the dependency DAG", ENRICH),
            _c("ef_us", "float", "earliest finish", ENRICH),
            _c("ls_us", "float", "latest start", ENRICH),
            _c("lf_us", "float", "latest finish", ENRICH),
            _c("slack_us", "float", "latest finish - earliest finish (0 on the critical path)", ENRICH),
            _c("cp_pred", "str", "uid of its heaviest predecessor", ENRICH, False),
            _c("cp_step", "int", "its position on the critical path (absent elsewhere)", ENRICH),
            _c("chain_len", "int", "ops on the longest chain ending at it", ENRICH),
            _c("chain_pred", "str", "uid of its predecessor on that chain", ENRICH, False),
            _c("lc_step", "int", "its position on the longest chain (absent elsewhere)", ENRICH),
            _c("inputs", "int", "its data inputs, one per input position", ENRICH),
            _c(
                "peak_live_bytes",
                "int",
                "bytes of its allocations live at the trace's memory peak (see layer-breakdown; absent: none)",
                ENRICH,
            ),
            _c("step", "int", "the number of the step whose host range holds its start (absent: none)", ENRICH),
            *PATH,
        ),
    ),
    Table(
        "kernels",
        "Kernel",
        "kernel, copy or memset execution on a device stream",
        (
            UID,
            _c("op", "str", "uid of the op that launched it (the op enclosing the launching call)", stored=False),
            _c("stream", "str", "uid of its stream", stored=False),
            _c("name", "str", "kernel name (`op:Type` for TF)"),
            _c("start_us", "float", "start"),
            _c("end_us", "float", "end"),
            _c("dur_us", "float", "duration"),
            _c(
                "kind",
                "str",
                "`compute` / `memcpy` / `memset` / `communication` (NCCL, RCCL, DeepEP, NVSHMEM, ...: the kit's rule)",
            ),
            _c("bytes", "int", "bytes copied or set (copies and memsets)"),
            _c("direction", "str", "copy direction (`HtoD`, `DtoH`, `DtoD`, ...)"),
            _c(
                "collective",
                "str",
                "NCCL kernels: the collective (`Collective name`, else from the kernel name: `AllReduce`, `SendRecv`)",
            ),
            _c("process_group", "str", "NCCL kernels: its process group's name (`Process Group Name`), when recorded"),
            _c("group_ranks", "str", "NCCL kernels: its process group's ranks (`Process Group Ranks`), when recorded"),
            _c("launch", "str", "uid of the runtime call that issued it (PyTorch)", stored=False),
            _c("op_name", "str", "its op's name", STORE),
            _c("stream_name", "str", "its stream's name", STORE),
            _c("device_name", "str", "its stream's device's name", STORE),
            _c("rank", "int", "its stream's device's rank (multi-rank traces)", STORE),
            _c("next_kernel", "str", "uid of the next kernel on its stream in start order", ENRICH, False),
            _c("gap_after_us", "float", "idle time before the next kernel on the stream", ENRICH),
            _c("exposed_us", "float", "copies: copy time no compute kernel on the same device covers", ENRICH),
            _c(
                "step",
                "int",
                "the number of its step: its runtime call's, else its op's, else the one whose host range holds its "
                "start (absent: none)",
                ENRICH,
            ),
            *PATH,
        ),
    ),
    Table(
        "tensors",
        "Tensor",
        "op output (or memory block)",
        (
            UID,
            _c("name", "str", "`op:slot` for TF"),
            _c("dtype", "str", "element type"),
            _c("shape", "str", "`128x64x56x56`"),
            _c("bytes", "int", "size"),
            _c("producer", "str", "uid of the op that produced it", stored=False),
            _c("output_index", "int", "its output slot"),
            _c("param", "str", "parameter name, for parameters"),
            _c("producer_name", "str", "its producer's name", STORE),
            _c("readers", "int", "distinct ops that read it", ENRICH),
        ),
    ),
    Table(
        "allocations",
        "Allocation",
        "allocation, paired from alloc/free records",
        (
            UID,
            _c("allocator", "str", "uid of its allocator", stored=False),
            _c("bytes", "int", "bytes allocated"),
            _c("requested_bytes", "int", "bytes asked for"),
            _c("alloc_us", "float", "when it was allocated (absent: persistent memory)"),
            _c("free_us", "float", "when it was freed (absent: not within the trace)"),
            _c("address", "str", "device address"),
            _c("kind", "str", "output / temp / persistent / param / input / gradient"),
            _c("op", "str", "uid of the op that allocated it", stored=False),
            _c("tensor", "str", "uid of the tensor it backs", stored=False),
            _c("allocator_name", "str", "its allocator's name", STORE),
            _c("op_name", "str", "its op's name", STORE),
            _c("tensor_name", "str", "its tensor's name", STORE),
        ),
    ),
    Table(
        "collectives",
        "Collective",
        "collective (all-reduce, barrier, ...) of a multi-rank job, joined across its ranks",
        (
            _c("uid", "str", "`coll:<seq>`, `coll:<process group>:<seq>` for a recorded process group", ENRICH),
            _c(
                "name",
                "str",
                "the call (`c10d::allreduce_`, `c10d::barrier`, ...; NCCL: `AllReduce`, `allreduce`, ...)",
                ENRICH,
            ),
            _c("process_group", "str", "NCCL: its process group's name, when recorded", ENRICH),
            _c("seq", "int", "its place among its group's collectives, 0-based, in call order", ENRICH),
            _c("ranks", "int", "ranks that joined it", ENRICH),
            _c("last_rank", "int", "the rank that called it last (the lowest such rank on a tie)", ENRICH),
            _c("first_arrival_us", "float", "the earliest rank's call start", ENRICH),
            _c("last_arrival_us", "float", "the last rank's call start: it cannot complete before", ENRICH),
            _c(
                "caused_us",
                "float",
                "last arrival - the arrival before it: the delay the last rank alone caused",
                ENRICH,
            ),
            _c("waited_us", "float", "the waits of every rank summed (see JOINS.wait_us)", ENRICH),
            _c(
                "end_spread_us",
                "float",
                "NCCL: last kernel end - first kernel end across ranks (they end together: it bounds clock skew)",
                ENRICH,
            ),
        ),
    ),
    Table(
        "ranks",
        "Rank",
        "rank of a job (0 for a trace of one rank), for traces with times",
        (
            _c("uid", "str", "`rank:<rank>`", ENRICH),
            _c("rank", "int", "the rank (its ops' and devices' `rank`; 0 for a trace of one rank)", ENRICH),
            _c(
                "mode", "str", "`gpu`: measured on its kernels; `cpu`: on its host ops (a rank without kernels)", ENRICH
            ),
            _c("comm_us", "float", "length of the union of its communication intervals", ENRICH),
            _c("compute_us", "float", "length of the union of its computation intervals", ENRICH),
            _c("overlap_us", "float", "time in both at once", ENRICH),
            _c("exposed_comm_us", "float", "comm_us - overlap_us: communication with no computation beside it", ENRICH),
            _c(
                "device_window_us",
                "float",
                "its device span: its first kernel's start to its last kernel's end",
                ENRICH,
            ),
            *_device_time("device_", "in its device span"),
            _c("lanes", "list[str]", "its lanes: device streams (`rank0/cuda:0/stream:7`), else host threads", ENRICH),
            _c("lane_kinds", "list[str]", "per lane: `stream` / `thread`", ENRICH),
            _c("lane_window_us", "list[float]", "per lane: its first event's start to its last event's end", ENRICH),
            _c("idle_us", "list[float]", "per lane: the window minus its work (see `idle-breakdown`)", ENRICH),
            _c("idle_collective_us", "list[float]", "per lane: idle waiting for another rank in a collective", ENRICH),
            _c("idle_sync_us", "list[float]", "per lane: idle waiting on a synchronization", ENRICH),
            _c("idle_host_us", "list[float]", "per lane: idle waiting for the host to launch (streams)", ENRICH),
            _c("idle_other_us", "list[float]", "per lane: the rest of its idle time", ENRICH),
        ),
    ),
    Table(
        "steps",
        "Step",
        "iteration of the traced loop (its marker: `ProfilerStep#N`, `ProfileStep#N`, a StepTraceAnnotation, "
        "or the user's `--step-marker`), with its device time broken down (see `step-breakdown`)",
        (
            _c("uid", "str", "`step:<rank>:<n>`, n its place among its rank's steps in start order", ENRICH),
            _c("number", "int", "the step's number (`ProfilerStep#3`: 3); its ops' and kernels' `step`", ENRICH),
            _c("name", "str", "its marker op's name", ENRICH),
            _c("rank", "int", "its rank (0 for a trace of one rank)", ENRICH),
            _c("start_us", "float", "its host range's start: its marker's start", ENRICH),
            _c("end_us", "float", "its host range's end", ENRICH),
            _c("host_us", "float", "end_us - start_us: the host step time", ENRICH),
            _c("ops", "int", "ops that belong to it", ENRICH),
            _c("kernels", "int", "kernels, copies and memsets that belong to it", ENRICH),
            _c("device_start_us", "float", "its device window's start: the earliest start of its kernels", ENRICH),
            _c("device_end_us", "float", "its device window's end: the latest end of its kernels", ENRICH),
            _c("window_us", "float", "device_end_us - device_start_us", ENRICH),
            *_device_time("", "in the window"),
            _c("stream_uids", "list[str]", "the rank's streams (uids), for `stream-utilization` of one step", ENRICH),
            _c("stream_busy_us", "list[float]", "per stream: the time it ran anything in the window", ENRICH),
        ),
    ),
    Table(
        "joins",
        None,
        "a rank's call of a collective",
        (
            _c("op", "str", "uid of the rank's call when it is a host op (an op with `collective`)", ENRICH),
            _c("kernel", "str", "uid of the rank's call when it is a device kernel (NCCL)", ENRICH),
            _c("collective", "str", "uid of the collective", ENRICH),
            _c("rank", "int", "the rank", ENRICH),
            _c("wait_us", "float", "last arrival - this call's start: how long the rank waited for the others", ENRICH),
        ),
    ),
    Table(
        "consumes",
        None,
        "data input of an op",
        (
            _c("op", "str", "uid of the reading op"),
            _c("tensor", "str", "uid of the tensor read"),
            _c("input_index", "int", "input position"),
        ),
    ),
    Table(
        "deps",
        None,
        "dependency between ops",
        (
            _c("src", "str", "uid of the op depended on"),
            _c("dst", "str", "uid of the op that depends"),
            _c("kind", "str", "`data` / `control`"),
        ),
    ),
    Table(
        "syncs",
        None,
        "synchronization on a kernel",
        (
            _c("src", "str", "uid of the kernel waited for"),
            _c("dst", "str", "uid of the op (`host_wait`) or kernel (`stream_wait`) that waited"),
            _c("kind", "str", "`host_wait` / `stream_wait`"),
        ),
    ),
)
TABLE = {t.name: t for t in TABLES}
# The tables whose rows are nodes, in writing order (a relationship is
# written with its node when its other end's table comes earlier).
NODE_TABLES: list[Table] = [t for t in TABLES if t.label is not None]


@dataclass(frozen=True)
class Relationship:
    """``(start)-[:type]->(end)``, one per row of ``table`` that has both
    ``src`` and ``dst`` (columns naming the ends by uid)."""

    type: str
    start: str
    end: str
    table: str
    src: str
    dst: str
    properties: tuple[str, ...]
    meaning: str


def _r(
    type_: str, start: str, end: str, table: str, src: str, dst: str, meaning: str, properties: tuple[str, ...] = ()
) -> Relationship:
    return Relationship(type_, start, end, table, src, dst, properties, meaning)


def observed_next_table(src_label: str, dst_label: str) -> str:
    """The table of OBSERVED_NEXT relationships between two labels (Op or Kernel)."""
    return f"observed_next_{src_label[0].lower()}{dst_label[0].lower()}"


RELATIONSHIPS: tuple[Relationship, ...] = (
    _r("ON_DEVICE", "Stream", "Device", "streams", "uid", "device", "placement"),
    _r("ON_DEVICE", "Allocator", "Device", "allocators", "uid", "device", "placement"),
    _r("DATA", "Op", "Op", "data_deps", "src", "dst", "the second op reads an output of the first"),
    _r("CONTROL", "Op", "Op", "control_deps", "src", "dst", "control dependency (`^name` inputs)"),
    _r(
        "CRITICAL_PRED",
        "Op",
        "Op",
        "ops",
        "uid",
        "cp_pred",
        "the op's heaviest predecessor: followed from the critical path's last op, it walks the path backwards",
    ),
    _r("CHAIN_PRED", "Op", "Op", "ops", "uid", "chain_pred", "predecessor on the op's longest chain by op count"),
    _r("LAUNCHED", "Op", "Kernel", "kernels", "op", "uid", "an op may launch several kernels"),
    _r("ON_STREAM", "Kernel", "Stream", "kernels", "uid", "stream", "the stream it ran on"),
    _r(
        "NEXT_ON_STREAM",
        "Kernel",
        "Kernel",
        "kernels",
        "uid",
        "next_kernel",
        "next kernel on the same stream in start order",
        ("gap_after_us",),
    ),
    _r("PRODUCES", "Op", "Tensor", "tensors", "producer", "uid", "output slot", ("output_index",)),
    _r("CONSUMES", "Op", "Tensor", "consumes", "op", "tensor", "input position", ("input_index",)),
    _r("BACKED_BY", "Tensor", "Allocation", "allocations", "tensor", "uid", "the memory holding the tensor"),
    _r("ALLOCATED", "Op", "Allocation", "allocations", "op", "uid", "the op that allocated it"),
    _r("IN_ALLOCATOR", "Allocation", "Allocator", "allocations", "uid", "allocator", "its allocator"),
    _r(
        "HAS_TIMELINE",
        "Allocator",
        "MemoryTimeline",
        "timelines",
        "allocator",
        "uid",
        "the allocator's memory timeline",
    ),
    _r(
        "PARENT_OF",
        "Op",
        "Op",
        "ops",
        "parent",
        "uid",
        "the second op runs nested directly inside the first on the same thread (PyTorch)",
    ),
    _r(
        "ISSUED",
        "Op",
        "Kernel",
        "kernels",
        "launch",
        "uid",
        "the runtime call (`cudaLaunchKernel`, ...) that issued the kernel; LAUNCHED comes from the op enclosing it",
    ),
    _r(
        "WAITED_FOR",
        "Op",
        "Kernel",
        "host_waits",
        "dst",
        "src",
        "the blocking call (`cudaStreamSynchronize`, ...) returned only after the kernel ended",
    ),
    _r(
        "WAITED_FOR",
        "Kernel",
        "Kernel",
        "stream_waits",
        "dst",
        "src",
        "the kernel (held back by `cudaStreamWaitEvent`) started only after the other ended",
    ),
    *(
        _r(
            "JOINS",
            label,
            "Collective",
            f"{column}_joins",
            column,
            "collective",
            f"a rank's call of the collective ({what}); `rank`, and `wait_us` it waited for the last rank",
            ("rank", "wait_us"),
        )
        for label, column, what in (("Op", "op", "host side"), ("Kernel", "kernel", "NCCL kernel"))
    ),
    *(
        _r(
            "OBSERVED_NEXT",
            a,
            b,
            observed_next_table(a, b),
            "src",
            "dst",
            "consecutive events on the observed critical path; `step` is the segment it leaves from",
            ("step",),
        )
        for a in ("Op", "Kernel")
        for b in ("Op", "Kernel")
    ),
)
# Trace -> every node of the label: the few (devices, allocators). Not the
# many: a relationship from one node to each of hundreds of thousands of ops
# (or from a host device to each of its ops) is a dense node that no query
# needs (they find a trace's nodes by the indexed ``trace`` property and an
# op's device by ``device_name``) but that every write pays for (58% of a
# PyTorch job's relationships) and that drowns Neo4j Browser's expansions.
MEMBERSHIP: tuple[tuple[str, str], ...] = (
    ("HAS_OP_TOTALS", "OpTotals"),
    ("HAS_DEVICE", "Device"),
    ("HAS_ALLOCATOR", "Allocator"),
)
# Relationship properties that are integers (the node columns say their own types).
INT_RELATIONSHIP_PROPERTIES = frozenset({"step", "output_index", "input_index", "rank"})


def int_columns() -> frozenset[str]:
    """Every column declared ``int``: integers even where pandas widened them to floats (a column with nulls)."""
    return frozenset(
        {c.name for t in TABLES for c in t.columns if c.type in ("int", "list[int]")} | INT_RELATIONSHIP_PROPERTIES
    )


TRACE_PROPERTIES: tuple[Column, ...] = (
    _c(
        "status",
        "str",
        "`ready` (Neo4j: `loading` / `dropping` while a load or drop runs; FalkorDB's catalog: "
        "`dropped` for a dropped trace's tombstone)",
        STORE,
    ),
    _c("schema_version", "int", "the layout this page describes; analyses refuse a trace stored with another", STORE),
    _c("framework", "str", "tensorflow / pytorch / jax / chainer / megengine", ENRICH),
    _c("time_unit", "str", "`us`, `step` or `none`", ENRICH),
    _c("sources", "json", "the files it was read from", ENRICH),
    _c("ingested_at", "str", "when it was stored (ISO 8601, UTC)", STORE),
    _c("span_us", "float", "first event to the last end of any op or kernel", ENRICH),
    _c("ops", "int", "ops", ENRICH),
    _c("executed_ops", "int", "ops that ran", ENRICH),
    _c("critical_path_us", "float", "length of the dependency critical path", ENRICH),
    _c("critical_path_ops", "int", "ops on it", ENRICH),
    _c("longest_chain_ops", "int", "ops on the longest chain", ENRICH),
    _c("memory_peak_bytes", "int", "the largest allocator peak", ENRICH),
    _c("observed_path_us", "float", "length of the observed critical path (its counted segments)", ENRICH),
    _c("observed_path_span_us", "float", "the time the observed critical path spans", ENRICH),
    _c("observed_path_segments", "int", "segments on it", ENRICH),
    _c("node_count", "int", "nodes stored for it, its Trace node included", STORE),
    _c("relationship_count", "int", "relationships stored for it", STORE),
    _c("counts", "json", "nodes per label and relationships per type", STORE),
    _c("has_times", "bool", "it has op times (steps count)", ENRICH),
    _c("has_deps", "bool", "it has dependencies between ops", ENRICH),
    _c("has_kernels", "bool", "it has device stream (kernel) records", ENRICH),
    _c("has_memory", "bool", "it has timed allocations", ENRICH),
    _c("has_copies", "bool", "it has memory copies", ENRICH),
    _c("has_collectives", "bool", "it has collectives joined across ranks", ENRICH),
    _c("collectives", "int", "collectives joined across ranks", ENRICH),
    _c(
        "collective_end_spread_us",
        "float",
        "GPU jobs: the median end_spread_us of its NCCL collectives: how far apart the ranks' clocks can be",
        ENRICH,
    ),
    _c("has_communication", "bool", "it has communication (communication kernels, collective ops): Rank nodes", ENRICH),
    _c("has_steps", "bool", "it has steps (Step nodes; see step-breakdown)", ENRICH),
    _c(
        "collective_calls_unmatched",
        "int",
        "collective calls of a rank not joined to the other ranks' (see below)",
        ENRICH,
    ),
    _c("meta_*", "str", "facts of the format (`meta_distributed_info`, ...)", PARSER),
)


def markdown() -> str:
    """The node and relationship tables of cypher/SCHEMA.md."""
    out = ["| label | one per | properties (besides `trace`, `uid`) |", "|---|---|---|"]

    def props(cols: list[Column]) -> str:
        return "; ".join(f"`{c.name}` ({c.type}{', ' + c.by if c.by != PARSER else ''}): {c.meaning}" for c in cols)

    out.append(f"| `Trace` | stored trace | {props(list(TRACE_PROPERTIES))} |")
    for t in NODE_TABLES:
        out.append(f"| `{t.label}` | {t.one_per} | {props([c for c in t.columns if c.stored and c.name != 'uid'])} |")
    out += ["", "| type | from -> to | properties | meaning |", "|---|---|---|---|"]
    out += [f"| `{rel}` | Trace -> {label} | | membership |" for rel, label in MEMBERSHIP]
    for r in RELATIONSHIPS:
        out.append(f"| `{r.type}` | {r.start} -> {r.end} | {', '.join(f'`{p}`' for p in r.properties)} | {r.meaning} |")
    return "\n".join(out)


if __name__ == "__main__":
    sys.stdout.write(markdown() + "\n")
