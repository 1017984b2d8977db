"""What the service layer answers: plain typed values, one per kind of answer.

The CLI renders these for terminals; the HTTP API sends them as they are
(FastAPI builds its response models and the OpenAPI document from these
dataclasses, so the document describes exactly what is sent). Nothing
here knows about either front end.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tracegraph.output import jsonable


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


@dataclass(frozen=True)
class TraceSummary:
    """One stored trace, as ``traces`` lists it (units: microseconds, or
    steps when ``time_unit`` is ``step``; bytes)."""

    trace: str
    framework: str | None = None
    time_unit: str | None = None
    ops: int | None = None
    executed_ops: int | None = None
    span_us: float | None = None
    critical_path_us: float | None = None  # over the dependencies (None: the trace has none)
    critical_path_ops: int | None = None
    longest_chain_ops: int | None = None
    observed_path_us: float | None = None  # over what actually ran (None: the trace has no times)
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
    collectives: int | None = None  # collectives joined across ranks (multi-rank jobs)
    collective_calls_unmatched: int | None = None
    sources: list[str] = field(default_factory=list)
    counts: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)  # the format's facts (the Trace node's ``meta_*``)

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

    name: str
    type: str  # STRING, INTEGER, FLOAT, BOOLEAN, TRACE or ENUM
    required: bool
    doc: str
    default: Any = None
    choices: list[str] = field(default_factory=list)
    minimum: float | None = None
    maximum: float | None = None


@dataclass(frozen=True)
class ColumnInfo:
    name: str
    doc: str


@dataclass(frozen=True)
class AnalysisInfo:
    """One catalog analysis: what it answers and what it takes."""

    name: str
    summary: str
    graph: bool  # answers paths / nodes for Neo4j Browser rather than a table
    requires: list[str]
    params: list[ParamInfo]  # ``trace`` excepted
    columns: list[ColumnInfo]
    definition: str
    url: str
    query: str | None = None  # the Cypher, runnable in Neo4j Browser (when asked for)


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

    step: int
    op: str
    type: str | None
    weight_us: float  # its weight after scaling
    base_weight_us: float  # its stored weight
    scaled: bool


@dataclass(frozen=True)
class WhatIfResult:
    """The critical path with the matched ops' weights scaled by ``factor``.
    ``unavailable`` is set (and the numbers None) when the trace has no
    dependencies."""

    trace: str
    match: list[str]
    factor: float
    matched_ops: int = 0
    baseline_us: float | None = None
    critical_path_us: float | None = None
    speedup: float | None = None  # baseline / new; None when the new path has length 0
    saved_us: float | None = None
    path: list[WhatIfOp] = field(default_factory=list)
    unavailable: Unavailable | None = None


@dataclass(frozen=True)
class DroppedTrace:
    trace: str
    deleted_nodes: int


def as_json(value: Any) -> Any:
    """A service value (or a list of them) as plain JSON (NaN and infinities as null)."""
    return jsonable(value)
