"""The web UI: its page, its static bundle, and the few routes only it needs.

Everything the UI shows comes from the public HTTP API (traces, jobs, the
catalog's analyses, ``POST /cypher``), so it works the same on every
backend; this module adds what the API lacks for drawing a 100k-op trace:

* ``GET /ui/traces/{trace}/timeline``: the timeline's lanes (each with
  its kind: ops, compute, memcpy, communication), time span, and which
  highlight sources the trace can answer (the best one as the default);
* ``GET /ui/traces/{trace}/timeline/window``: the bars of a time window at
  screen resolution (merged below a pixel, capped; see api/timeline.py);
* ``GET /ui/traces/{trace}/op?name=``: one op's details for the hover card
  (type, times, device, input and output shapes, kernels);
* ``GET /ui/highlights``: the sources the timeline can highlight ops from.

The page (``/``) and ``/static/*`` are public (no trace data in them); the
``/ui/*`` routes need the API key like every other data route (the app
includes :data:`router` behind it). The routes are plain module-level
functions; they reach the app's shared database connection and settings
through :mod:`tracegraph.api.deps`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Query
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, Field

from tracegraph.api import timeline as tlmod
from tracegraph.api.connection import GraphHolder
from tracegraph.api.deps import get_graph, get_settings
from tracegraph.api.models import error_responses
from tracegraph.api.settings import Settings
from tracegraph.errors import NotFound, UserError
from tracegraph.output import jsonable

STATIC_DIR = resources.files("tracegraph.api").joinpath("static")


Graph = Annotated[GraphHolder, Depends(get_graph)]
AppSettings = Annotated[Settings, Depends(get_settings)]

pages = APIRouter(include_in_schema=False)
router = APIRouter(prefix="/ui", tags=["web ui"])


# --------------------------------------------------------------------------
# Highlight sources
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class HighlightSource:
    """A catalog analysis whose ``column`` names the ops the timeline highlights.

    ``from_timeline``, when given, reads the same set of ops from what the
    timeline loaded anyway, without running the analysis (critical-path
    returns exactly the ops whose ``cp_step`` is set, and the timeline reads
    ``cp_step`` with the ops; tests/test_ui_api.py checks the two agree).

    ``marked``, when given, is a Cypher predicate on ``n`` that selects
    exactly the Op and Kernel nodes the analysis returns (the observed
    critical path's nodes carry ``ocp_steps``; the dependency critical
    path's ops ``cp_step``): the timeline reads them and marks those very
    bars, not every op of the same name (PyTorch's names repeat), without
    running the analysis. With ``marks_launches`` the kernels marked are
    those the marked ops launched.

    ``available``, when given, tells from the trace's facts (its Trace
    node) whether the analysis has an answer for it, and ``missing`` says
    why not. The order of :data:`HIGHLIGHT_SOURCES` is the order of
    preference: a trace's timeline opens with the first source available.
    """

    name: str
    label: str
    analysis: str
    column: str = "op"
    from_timeline: Callable[[tlmod.TraceTimeline], set[str]] | None = None
    marked: str | None = None
    marks_launches: bool = False
    available: Callable[[dict[str, Any]], bool] | None = None
    missing: str = "not available for this trace"

    def available_for(self, facts: dict[str, Any]) -> bool:
        return self.available is None or bool(self.available(facts))


HIGHLIGHT_SOURCES: list[HighlightSource] = [
    HighlightSource(
        "critical-path",
        "critical path (dependency DAG)",
        "critical-path",
        marked="n.cp_step IS NOT NULL",
        marks_launches=True,
        available=lambda facts: bool(facts.get("has_deps")),
        missing="the trace has no dependencies between ops",
    ),
    HighlightSource(
        "observed-critical-path",
        "observed critical path",
        "observed-critical-path",
        column="event",
        marked="n.ocp_steps IS NOT NULL",
        available=lambda facts: facts.get("observed_path_us") is not None,
        missing="the trace has no observed critical path (no times)",
    ),
]


def register_highlight(source: HighlightSource) -> None:
    """Add (or replace, by name) a highlight source."""
    HIGHLIGHT_SOURCES[:] = [s for s in HIGHLIGHT_SOURCES if s.name != source.name] + [source]


def available_highlights() -> list[HighlightSource]:
    """The sources whose analysis this version's catalog has."""
    from tracegraph.queries.catalog import catalog

    names = catalog()
    return [s for s in HIGHLIGHT_SOURCES if s.analysis in names]


def _highlight_out(s: HighlightSource) -> dict[str, Any]:
    return {"name": s.name, "label": s.label, "analysis": s.analysis, "column": s.column}


def trace_highlights(facts: dict[str, Any]) -> list[dict[str, Any]]:
    """The available sources as they apply to one trace (its facts), in order of preference."""
    out = []
    for s in available_highlights():
        ok = s.available_for(facts)
        out.append({**_highlight_out(s), "available": ok, "note": None if ok else s.missing})
    return out


def highlighted_ops(
    graph: GraphHolder, trace: str, source: HighlightSource, timeout_ms: int | None
) -> tuple[set[str], str | None]:
    """The op names the source's analysis returns for the trace, and its note."""
    from tracegraph.queries.run import run_analysis

    res = run_analysis(graph, source.analysis, trace, {}, timeout_ms=timeout_ms)
    if source.column not in res.columns:
        raise UserError(f"analysis {source.analysis} has no column {source.column!r}")
    col = res.columns.index(source.column)
    return {r[col] for r in res.rows if r[col] is not None}, res.note


# --------------------------------------------------------------------------
# Models (documentation of the JSON these routes send)
# --------------------------------------------------------------------------


class HighlightOut(BaseModel):
    name: str
    label: str
    analysis: str
    column: str = Field(description="the analysis's column that names the highlighted ops (or kernels)")


class TraceHighlightOut(HighlightOut):
    available: bool = Field(description="whether the trace has what the source's analysis needs")
    note: str | None = Field(None, description="why it is not available")


LaneKind = Literal["ops", "compute", "memcpy", "communication"]


class LaneOut(BaseModel):
    id: int
    name: str
    device: str
    kind: LaneKind = Field(
        description="ops: op lanes of a device; compute, memcpy, communication: a device stream, by what its "
        "kernels are (all copies or memsets: memcpy; all NCCL: communication), else the stored Stream.kind"
    )
    stream: str | None = Field(None, description="the stream's name (null for op lanes)")
    kernel_kinds: dict[str, int] = Field(
        default_factory=dict, description="stream lanes: how many kernels of each Kernel.kind it holds"
    )
    bars: int


class CollectiveCallOut(BaseModel):
    rank: int
    lane: int | None = Field(description="the lane holding the call's bar (null: not drawn)")
    start_us: float = Field(description="the call's start: the rank's arrival")
    end_us: float
    wait_us: float = Field(description="its wait for the last rank")


class CollectiveOut(BaseModel):
    seq: int
    name: str
    process_group: str | None = None
    last_rank: int = Field(description="the rank that arrived last")
    caused_us: float = Field(description="the delay the last rank alone caused (see the stragglers analysis)")
    last_arrival_us: float
    calls: list[CollectiveCallOut]


class TimelineOut(BaseModel):
    trace: str
    time_unit: str | None = None
    t_min: float
    t_max: float
    lanes: list[LaneOut]
    note: str | None = None
    highlights: list[TraceHighlightOut] = Field(
        default_factory=list, description="the highlight sources, in order of preference, for this trace"
    )
    highlight_default: str | None = Field(
        None, description="the first available highlight source (null when none is): what the timeline opens with"
    )
    collectives: list[CollectiveOut] = Field(
        default_factory=list, description="collectives joined across ranks, each call placed on its lane"
    )


class WindowLaneOut(BaseModel):
    id: int
    s: list[float] = Field(description="bar starts")
    e: list[float] = Field(description="bar ends")
    n: list[int] = Field(description="bars merged into this one (1: a single op or kernel)")
    h: list[int] = Field(description="1 when the bar (or any merged into it) is highlighted")
    i: list[int] = Field(description="single bars: a key of `names`; merged bars: -1")
    names: dict[str, list[str | None]] = Field(description="key -> [name, type, op]")


class WindowOut(BaseModel):
    trace: str
    t0: float
    t1: float
    px: int
    res: float = Field(description="time per pixel")
    bars: int
    truncated: bool
    highlight: str | None = None
    highlight_ops: int | None = None
    highlight_note: str | None = None
    lanes: list[WindowLaneOut]


class OpOut(BaseModel):
    model_config = {"extra": "allow"}
    name: str
    type: str | None = None
    device: str | None = None
    start_us: float | None = None
    end_us: float | None = None
    weight_us: float | None = None
    cp_step: int | None = None
    inputs: list[dict[str, Any]] = []
    outputs: list[dict[str, Any]] = []
    kernels: list[dict[str, Any]] = []


# --------------------------------------------------------------------------
# Routes
# --------------------------------------------------------------------------

_cache = tlmod.TimelineCache(size=4)


def _facts(graph: GraphHolder, trace: str) -> dict[str, Any]:
    from tracegraph.queries.run import trace_facts

    return trace_facts(graph, trace)  # NotFound -> 404


def _version(facts: dict[str, Any]) -> tuple[Any, ...]:
    """What tells one stored version of a trace from another (ingested_at has
    whole seconds: a replace within the same second still changes the counts)."""
    return tuple(facts.get(k) for k in ("ingested_at", "node_count", "relationship_count", "sources", "span_us"))


def _timeline(graph: GraphHolder, settings: Settings, trace: str) -> tuple[tlmod.TraceTimeline, dict[str, Any]]:
    facts = _facts(graph, trace)
    timeout = settings.query_timeout_ms or None
    key = _version(facts)

    def load() -> tlmod.TraceTimeline:
        return tlmod.build(trace, key, *tlmod.read_rows(graph, trace, timeout))

    return _cache.get(trace, key, load), facts


@pages.get("/")
def index() -> FileResponse:
    return FileResponse(
        str(STATIC_DIR.joinpath("index.html")), media_type="text/html", headers={"Cache-Control": "no-cache"}
    )


@router.get("/highlights", response_model=list[HighlightOut], summary="What the timeline can highlight")
def highlights() -> list[dict[str, Any]]:
    return [_highlight_out(s) for s in available_highlights()]


@router.get(
    "/traces/{trace}/timeline",
    response_model=TimelineOut,
    responses=error_responses(404, 503),
    summary="The timeline's lanes (op lanes per device, one per device stream) and time span",
)
def timeline_info(trace: str, graph: Graph, settings: AppSettings) -> JSONResponse:
    tl, facts = _timeline(graph, settings, trace)
    out = tl.info()
    out["time_unit"] = facts.get("time_unit")
    out["note"] = None if tl.lanes else "not available: the trace has no op or kernel times"
    out["highlights"] = trace_highlights(facts)
    out["highlight_default"] = next((h["name"] for h in out["highlights"] if h["available"]), None)
    out["collectives"] = (
        tlmod.collective_links(tl, tlmod.read_collectives(graph, trace, settings.query_timeout_ms or None))
        if facts.get("has_collectives")
        else []
    )
    return JSONResponse(out)


def _highlight_masks(
    graph: GraphHolder,
    trace: str,
    tl: tlmod.TraceTimeline,
    facts: dict[str, Any],
    source: HighlightSource,
    settings: Settings,
) -> tuple[list[Any], str | None, int]:
    """Per-lane masks of the bars ``source`` highlights, its note, and how many ops (or kernels) it named."""
    timeout = settings.query_timeout_ms or None
    if not source.available_for(facts):
        return tlmod.highlight_masks(tl, set()), f"not available: {source.missing}", 0
    if source.marked is not None:
        op_rows, kernel_rows = tlmod.read_marked(graph, trace, source.marked, timeout, launches=source.marks_launches)
        named = len(op_rows) if source.marks_launches else len(op_rows) + len(kernel_rows)
        return tlmod.marked_masks(tl, op_rows, kernel_rows), None, named
    note: str | None = None
    if source.from_timeline is not None:
        ops = source.from_timeline(tl)
    else:
        ops, note = highlighted_ops(graph, trace, source, timeout)
    return tlmod.highlight_masks(tl, ops), note, len(ops)


@router.get(
    "/traces/{trace}/timeline/window",
    response_model=WindowOut,
    responses=error_responses(404, 422, 503),
    summary="The bars of a time window at screen resolution (sub-pixel bars merged, capped)",
)
def timeline_window(
    trace: str,
    graph: Graph,
    settings: AppSettings,
    t0: Annotated[float, Query(allow_inf_nan=False, description="window start")],
    t1: Annotated[float, Query(allow_inf_nan=False, description="window end (t1 <= t0: an empty window)")],
    px: Annotated[int, Query(ge=1, le=tlmod.MAX_PX, description="window width in pixels")] = 1000,
    lanes: Annotated[
        str | None,
        Query(
            max_length=10_000,
            pattern=r"^[0-9]+(,[0-9]+)*$",
            description="lane ids, comma-separated (default: all; ids that are no lane are left out)",
        ),
    ] = None,
    highlight: Annotated[
        str | None,
        Query(
            max_length=200,
            # The sources this version has (register_highlight may add more: the server checks the live list).
            json_schema_extra={"enum": [s.name for s in available_highlights()]},
            description="a highlight source (GET /ui/highlights)",
        ),
    ] = None,
) -> JSONResponse:
    tl, facts = _timeline(graph, settings, trace)
    mask, hl_count, note = None, None, None
    if highlight is not None:
        source = next((s for s in available_highlights() if s.name == highlight), None)
        if source is None:
            have = ", ".join(s.name for s in available_highlights())
            raise HTTPException(422, f"highlight: unknown source {highlight!r} (have: {have})")
        if source.name not in tl.highlights:
            tl.highlights[source.name] = _highlight_masks(graph, trace, tl, facts, source, settings)
        mask, note, hl_count = tl.highlights[source.name]
    out = tlmod.window(tl, t0, t1, px, _lane_ids(lanes), mask)
    out.update(highlight=highlight, highlight_ops=hl_count, highlight_note=note)
    return JSONResponse(out)


def _lane_ids(lanes: str | None) -> list[int] | None:
    """The ``lanes`` parameter's ids (None: every lane); an id too long to be
    a lane's (the pattern allows any digits) is -1, which is no lane."""
    if not lanes:
        return None
    return [int(x) if len(x.lstrip("0")) <= 9 else -1 for x in lanes.split(",")]


OP_QUERY = """
MATCH (o:Op {trace: $trace, name: $name})
WITH o ORDER BY o.uid LIMIT 1
OPTIONAL MATCH (o)-[p:PRODUCES]->(t:Tensor)
WITH o, t ORDER BY p.output_index, t.uid
WITH o, collect(CASE WHEN t IS NULL THEN NULL
                     ELSE {name: t.name, shape: t.shape, dtype: t.dtype, bytes: t.bytes} END) AS outputs
OPTIONAL MATCH (o)-[c:CONSUMES]->(i:Tensor)
WITH o, outputs, c, i ORDER BY c.input_index, i.uid
WITH o, outputs, collect(CASE WHEN i IS NULL THEN NULL
                              ELSE {name: i.name, shape: i.shape, dtype: i.dtype} END) AS inputs
OPTIONAL MATCH (o)-[:LAUNCHED]->(k:Kernel)
WITH o, outputs, inputs, k ORDER BY k.start_us, k.uid
RETURN o.name AS name, o.type AS type, o.device_name AS device, o.start_us AS start_us, o.end_us AS end_us,
       o.weight_us AS weight_us, o.cp_step AS cp_step, o.phase AS phase, inputs, outputs,
       collect(CASE WHEN k IS NULL THEN NULL
                    ELSE {name: k.name, stream: k.stream_name, start_us: k.start_us, end_us: k.end_us} END)[0..20]
         AS kernels
"""


@router.get(
    "/traces/{trace}/op",
    response_model=OpOut,
    responses=error_responses(404, 422, 503),
    summary="One op: type, times, device, input and output shapes, kernels (the first 20)",
)
def op_detail(
    trace: str,
    graph: Graph,
    settings: AppSettings,
    name: Annotated[
        str, Query(min_length=1, max_length=10_000, pattern=r"^[^\x00]*$", description="the op's name (no NUL)")
    ],
) -> JSONResponse:
    _facts(graph, trace)
    res = graph.run(OP_QUERY, {"name": name}, trace=trace, timeout_ms=settings.cypher_timeout_ms or None)
    if not res.rows:
        raise NotFound(f"trace {trace!r} has no op named {name!r}")
    row = dict(zip(res.columns, res.rows[0]))
    for k in ("inputs", "outputs", "kernels"):
        row[k] = [x for x in (row.get(k) or []) if x is not None]
    return JSONResponse(jsonable(row))


def static_files() -> StaticFiles:
    """The built bundle (api/static/, made from ui/ by esbuild), for ``app.mount("/static", ...)``."""
    return StaticFiles(directory=str(STATIC_DIR), check_dir=False)
