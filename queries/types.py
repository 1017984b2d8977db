"""What the service layer answers: plain typed values, one per kind of answer.

The CLI renders these for terminals; the HTTP API sends them as they are
(FastAPI builds its response models and the OpenAPI document from these
dataclasses, so the document describes exactly what is sent). Nothing
here knows about either front end.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from tracegraph.output import jsonable

# A field's attribute docstring is its description in the HTTP API's
# document: pydantic, which builds the document from these classes, reads
# them where a class says so.
DESCRIBED = {"use_attribute_docstrings": True}


@dataclass(frozen=True)
class Unavailable:
    """Why an analysis has no answer for a trace: the trace lacks a fact
    the analysis requires (``fact``, the word of its ``@requires`` line)."""

    fact: str
    trace: str
    reason: str  # "the trace has no dependencies between ops (pytorch, [...])"

    @property
    def note(self) -> str:
        """The one line front ends show: ``not available: <reason>``."""
        return f"not available: {self.reason}"


def _trace_property_meanings(schema: dict[str, Any]) -> None:
    """Describe TraceSummary's fields (in the HTTP API's document) as
    tracegraph/schema.py declares the Trace properties they are."""
    from tracegraph.schema import TRACE_PROPERTIES

    meaning = {c.name: c.meaning for c in TRACE_PROPERTIES}
    for name, prop in schema.get("properties", {}).items():
        if name in meaning:
            prop.setdefault("description", meaning[name])


# TraceSummary's fields are Trace properties: described once, in tracegraph/schema.py.
FROM_SCHEMA = {**DESCRIBED, "json_schema_extra": _trace_property_meanings}


@dataclass(frozen=True)
class TraceSummary:
    """One stored trace, as ``traces`` lists it (units: microseconds, or
    steps when ``time_unit`` is ``step``; bytes). Its fields are the Trace
    node's properties, described where tracegraph/schema.py declares them."""

    __pydantic_config__ = FROM_SCHEMA
    trace: str
    framework: str | None = None
    time_unit: str | None = None
    ops: int | None = None
    executed_ops: int | None = None
    span_us: float | None = None
    critical_path_us: float | None = None
    """over the dependencies (None: the trace has none)"""
    critical_path_ops: int | None = None
    longest_chain_ops: int | None = None
    observed_path_us: float | None = None
    """over what actually ran (None: the trace has no times)"""
    observed_path_span_us: float | None = None
    memory_peak_bytes: int | None = None
    node_count: int | None = None
    relationship_count: int | None = None
    ingested_at: str | None = None
    has_times: bool | None = None
    has_deps: bool | None = None
    has_kernels: bool | None = None
    has_memory: bool | None = None
    has_copies: bool | None = None
    has_collectives: bool | None = None
    collectives: int | None = None
    """collectives joined across ranks (multi-rank jobs)"""
    collective_calls_unmatched: int | None = None
    sources: list[str] = field(default_factory=list)
    counts: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    """the format's facts (the Trace node's ``meta_*``)"""
    warnings: list[str] = field(default_factory=list)
    """what the answers of its analyses are short of"""

    def path_summary(self) -> str:
        """One line: the dependency critical path against the observed one
        and the span, i.e. how much better overlap could win."""
        return path_summary(self)


def path_summary(t: TraceSummary) -> str:
    """See :meth:`TraceSummary.path_summary`."""
    unit = {"step": "steps", "none": "ops"}.get(t.time_unit or "us", "us")
    parts = []
    if t.span_us is not None:
        parts.append(f"span {t.span_us:,.1f} {unit}")
    if t.observed_path_us is not None:
        parts.append(f"observed critical path {t.observed_path_us:,.1f} {unit}")
    if t.critical_path_us is not None:
        dep = f"dependency critical path {t.critical_path_us:,.1f} {unit}"
        if t.span_us:
            share = t.critical_path_us / t.span_us
            dep += f" ({share:.0%} of the span: overlap could win up to {max(t.span_us - t.critical_path_us, 0):,.1f} {unit})"
        parts.append(dep)
    elif t.has_deps is False:
        parts.append("no dependencies (no dependency critical path)")
    return f"trace {t.trace}: " + ("; ".join(parts) if parts else "no times")


@dataclass(frozen=True)
class ParamInfo:
    """One parameter of an analysis, as its header declares it."""

    __pydantic_config__ = DESCRIBED
    name: str
    type: str
    """STRING, INTEGER, FLOAT, BOOLEAN, TRACE or ENUM"""
    required: bool
    doc: str
    default: Any = None
    """the value it takes when none is given (null: none, or no default: see `required`)"""
    choices: list[str] = field(default_factory=list)
    """an ENUM's words"""
    minimum: float | None = None
    """the smallest value a number may have (inclusive)"""
    maximum: float | None = None
    """the largest value a number may have (inclusive)"""


@dataclass(frozen=True)
class ColumnInfo:
    """One column of an analysis's answer, as its header declares it."""

    name: str
    doc: str


@dataclass(frozen=True)
class AnalysisInfo:
    """One catalog analysis: what it answers and what it takes."""

    __pydantic_config__ = DESCRIBED
    name: str
    summary: str
    graph: bool
    """answers paths / nodes for Neo4j Browser rather than a table"""
    requires: list[str]
    params: list[ParamInfo]
    """``trace`` excepted"""
    columns: list[ColumnInfo]
    definition: str
    url: str
    query: str | None = None
    """the Cypher, runnable in Neo4j Browser (when asked for)"""


@dataclass(frozen=True)
class AnalysisResult:
    """An analysis's answer. ``unavailable`` is set (and ``rows`` empty)
    when the trace lacks what the analysis needs; ``note`` is the one line
    front ends show beside the rows (that reason, or why there are none)."""

    analysis: str
    trace: str
    columns: list[str]
    rows: list[list[Any]] = field(default_factory=list)
    unavailable: Unavailable | None = None
    note: str | None = None

    @property
    def available(self) -> bool:
        return self.unavailable is None

    def records(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, r)) for r in self.rows]


@dataclass(frozen=True)
class WhatIfOp:
    """One op of the what-if critical path."""

    __pydantic_config__ = DESCRIBED
    step: int
    op: str
    type: str | None
    weight_us: float
    """its weight after scaling"""
    base_weight_us: float
    """its stored weight"""
    scaled: bool


@dataclass(frozen=True)
class WhatIfResult:
    """The critical path with the matched ops' weights scaled by ``factor``.
    ``unavailable`` is set (and the numbers None) when the trace has no
    dependencies."""

    __pydantic_config__ = DESCRIBED
    trace: str
    match: list[str]
    factor: float
    matched_ops: int = 0
    baseline_us: float | None = None
    critical_path_us: float | None = None
    speedup: float | None = None
    """baseline / new; None when the new path has length 0"""
    saved_us: float | None = None
    """baseline - new"""
    path: list[WhatIfOp] = field(default_factory=list)
    """the new critical path, step by step"""
    unavailable: Unavailable | None = None
    """why there is no answer (the trace has no dependencies)"""


@dataclass(frozen=True)
class DroppedTrace:
    """A trace removed."""

    __pydantic_config__ = DESCRIBED
    trace: str
    deleted_nodes: int
    """the nodes it had, its Trace node included"""


@dataclass(frozen=True)
class IngestResult:
    """A trace stored: what was written (nodes and relationships by label
    and type, the Trace node and the membership relationships aside), how
    long each phase took (seconds), and the trace as listed (with its
    warnings)."""

    trace: str
    nodes: dict[str, int]
    relationships: dict[str, int]
    timings: dict[str, float]
    summary: TraceSummary


@dataclass(frozen=True)
class CypherResult:
    """Ad-hoc Cypher's answer: at most the row cap's rows (``truncated``
    when there were more), and what a write changed."""

    __pydantic_config__ = DESCRIBED
    columns: list[str]
    rows: list[list[Any]]
    truncated: bool = False
    changes: dict[str, int] = field(default_factory=dict)
    """what a write changed (its counters that are not 0)"""


@dataclass(frozen=True)
class Health:
    """Whether the database answers (``status`` ok / unavailable,
    ``database`` reachable / unreachable), and the versions."""

    __pydantic_config__ = DESCRIBED
    status: str
    backend: str
    """embedded, falkordb or neo4j"""
    database: str
    version: str
    """tracegraph's"""
    database_version: str | None = None
    detail: str | None = None
    """why not reachable"""


def as_json(value: Any) -> Any:
    """A service value (or a list of them) as plain JSON (NaN and infinities as null)."""
    return jsonable(value)


# -- the web UI's timeline ------------------------------------------------------


@dataclass(frozen=True)
class HighlightInfo:
    """A source the timeline can highlight bars from: a catalog analysis."""

    __pydantic_config__ = DESCRIBED
    name: str
    label: str
    analysis: str
    column: str
    """the analysis's column that names the highlighted ops (or kernels)"""


@dataclass(frozen=True)
class TraceHighlight:
    """A highlight source as it applies to one trace."""

    __pydantic_config__ = DESCRIBED
    name: str
    label: str
    analysis: str
    column: str
    """the analysis's column that names the highlighted ops (or kernels)"""
    available: bool
    """whether the trace has what the source's analysis requires (its @requires)"""
    note: str | None = None
    """why it is not available"""


LaneKind = Literal["ops", "compute", "memcpy", "communication"]


@dataclass(frozen=True)
class LaneInfo:
    """One row of the timeline."""

    __pydantic_config__ = DESCRIBED
    id: int
    name: str
    device: str
    kind: LaneKind
    """ops: op lanes of a device; compute, memcpy, communication: a device stream, by what its kernels are (all
    copies or memsets: memcpy; all NCCL: communication), else the stored Stream.kind"""
    bars: int
    stream: str | None = None
    """the stream's name (null for op lanes)"""
    kernel_kinds: dict[str, int] = field(default_factory=dict)
    """stream lanes: how many kernels of each Kernel.kind it holds"""


@dataclass(frozen=True)
class CollectiveCallInfo:
    """One rank's call of a collective, placed on the timeline."""

    __pydantic_config__ = DESCRIBED
    rank: int
    lane: int | None
    """the lane holding the call's bar (null: not drawn)"""
    start_us: float
    """the call's start: the rank's arrival"""
    end_us: float
    wait_us: float
    """its wait for the last rank"""


@dataclass(frozen=True)
class CollectiveInfo:
    """A collective joined across ranks, with its calls."""

    __pydantic_config__ = DESCRIBED
    seq: int
    name: str
    process_group: str | None
    last_rank: int
    """the rank that arrived last"""
    caused_us: float
    """the delay the last rank alone caused (see the stragglers analysis)"""
    last_arrival_us: float
    calls: list[CollectiveCallInfo]


@dataclass(frozen=True)
class TimelineInfo:
    """A trace's timeline: its lanes, time span, highlights and collectives."""

    __pydantic_config__ = DESCRIBED
    trace: str
    t_min: float
    t_max: float
    lanes: list[LaneInfo]
    time_unit: str | None = None
    note: str | None = None
    """why the timeline is empty"""
    highlights: list[TraceHighlight] = field(default_factory=list)
    """the highlight sources, in order of preference, for this trace"""
    highlight_default: str | None = None
    """the first available highlight source (null when none is): what the timeline opens with"""
    collectives: list[CollectiveInfo] = field(default_factory=list)
    """collectives joined across ranks, each call placed on its lane"""


@dataclass(frozen=True)
class WindowLane:
    """One lane's bars in a window, column by column."""

    __pydantic_config__ = DESCRIBED
    id: int
    s: list[float]
    """bar starts"""
    e: list[float]
    """bar ends"""
    n: list[int]
    """bars merged into this one (1: a single op or kernel)"""
    h: list[int]
    """1 when the bar (or any merged into it) is highlighted"""
    i: list[int]
    """single bars: a key of `names`; merged bars: -1"""
    names: dict[str, list[str | None]]
    """key -> [name, type, op]"""


@dataclass(frozen=True)
class Window:
    """The bars of a time window at screen resolution."""

    __pydantic_config__ = DESCRIBED
    trace: str
    t0: float
    t1: float
    px: int
    res: float
    """time per pixel"""
    bars: int
    truncated: bool
    """the bars went over the cap: the lanes after the last one sent are empty"""
    lanes: list[WindowLane]
    highlight: str | None = None
    """the highlight source asked for"""
    highlight_ops: int | None = None
    """how many ops (or kernels) the highlight source named"""
    highlight_note: str | None = None


@dataclass(frozen=True)
class TensorInfo:
    """A tensor an op reads or writes."""

    __pydantic_config__ = DESCRIBED
    name: str | None
    shape: str | None
    """like `128x64x56x56`"""
    dtype: str | None
    bytes: int | None = None
    """its size (the op's outputs)"""


@dataclass(frozen=True)
class KernelInfo:
    """A kernel an op launched."""

    __pydantic_config__ = DESCRIBED
    name: str | None
    stream: str | None
    """its stream's name"""
    start_us: float | None
    """in the trace's unit, from its first event, as every time here"""
    end_us: float | None


@dataclass(frozen=True)
class OpDetail:
    """One op, as the timeline's card shows it (times in the trace's unit,
    from its first event)."""

    __pydantic_config__ = DESCRIBED
    name: str
    type: str | None = None
    device: str | None = None
    """its device's name"""
    start_us: float | None = None
    end_us: float | None = None
    weight_us: float | None = None
    """its weight on the dependency critical path (kernel time when it launched kernels)"""
    cp_step: int | None = None
    """its step on the dependency critical path (null: not on it)"""
    phase: str | None = None
    """the training phase it ran in (forward, backward, optimizer, ...), when the format says"""
    inputs: list[TensorInfo] = field(default_factory=list)
    """the tensors it reads, by input slot"""
    outputs: list[TensorInfo] = field(default_factory=list)
    """the tensors it writes, by output slot"""
    kernels: list[KernelInfo] = field(default_factory=list)
    """the first 20 kernels it launched, by start"""
