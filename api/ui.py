"""The web UI: its page, its static bundle, and the few routes only it needs.

Everything the UI shows comes from the public HTTP API (traces, jobs, the
catalog's analyses, ``POST /cypher``), so it works the same on every
backend; these routes add what the API lacks for drawing a 100k-op trace,
each answered by the service (:mod:`tracegraph.queries.timeline`,
:mod:`tracegraph.queries.highlights`, :mod:`tracegraph.queries.ops`):

* ``GET /ui/traces/{trace}/timeline``: the timeline's lanes (each with
  its kind: ops, compute, memcpy, communication), time span, and which
  highlight sources the trace can answer (the best one as the default);
* ``GET /ui/traces/{trace}/timeline/window``: the bars of a time window at
  screen resolution (merged below a pixel, capped);
* ``GET /ui/traces/{trace}/op?name=``: one op's details for the hover card
  (type, times, device, input and output shapes, kernels);
* ``GET /ui/highlights``: the sources the timeline can highlight ops from.

The page (``/``) and ``/static/*`` are public (no trace data in them); the
``/ui/*`` routes need the API key like every other data route (the app
includes :data:`router` behind it).
"""

from __future__ import annotations

from importlib import resources
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, Field

from tracegraph.api.deps import AppGraph, AppSettings
from tracegraph.api.models import error_responses
from tracegraph.queries.highlights import available_highlights
from tracegraph.queries.lanes import MAX_PX
from tracegraph.queries.ops import op_detail
from tracegraph.queries.timeline import timeline_info, timeline_window
from tracegraph.queries.types import HighlightInfo, OpDetail, TimelineInfo, Window

STATIC_DIR = resources.files("tracegraph.api").joinpath("static")

pages = APIRouter(include_in_schema=False)
router = APIRouter(prefix="/ui", tags=["web ui"])

# A lane id has at most this many digits (the lanes of one trace number far fewer).
LANE_ID_DIGITS = 9
LANES_MAX_CHARS = 10_000


@pages.get("/")
def index() -> FileResponse:
    return FileResponse(
        str(STATIC_DIR.joinpath("index.html")), media_type="text/html", headers={"Cache-Control": "no-cache"}
    )


@router.get("/highlights", response_model=list[HighlightInfo], summary="What the timeline can highlight")
def highlights() -> list[HighlightInfo]:
    return [s.info() for s in available_highlights()]


@router.get(
    "/traces/{trace}/timeline",
    response_model=TimelineInfo,
    responses=error_responses(404, 503),
    summary="The timeline's lanes (op lanes per device, one per device stream) and time span",
)
def timeline(trace: str, graph: AppGraph, settings: AppSettings) -> TimelineInfo:
    return timeline_info(graph, trace, timeout_ms=settings.query_timeout_ms or None)


class WindowQuery(BaseModel):
    """The window's query parameters."""

    t0: float = Field(allow_inf_nan=False, description="window start")
    t1: float = Field(allow_inf_nan=False, description="window end (t1 <= t0: an empty window)")
    px: int = Field(1000, ge=1, le=MAX_PX, description="window width in pixels")
    lanes: str | None = Field(
        None,
        max_length=LANES_MAX_CHARS,
        pattern=rf"^[0-9]{{1,{LANE_ID_DIGITS}}}(,[0-9]{{1,{LANE_ID_DIGITS}}})*$",
        description=f"lane ids (at most {LANE_ID_DIGITS} digits each), comma-separated "
        "(default: all; ids that are no lane are left out)",
    )
    highlight: str | None = Field(
        None,
        max_length=200,
        # The sources this version has (register_highlight may add more: the server checks the live list).
        json_schema_extra={"enum": [s.name for s in available_highlights()]},
        description="a highlight source (GET /ui/highlights)",
    )

    def lane_ids(self) -> list[int] | None:
        return None if self.lanes is None else [int(x) for x in self.lanes.split(",")]


@router.get(
    "/traces/{trace}/timeline/window",
    responses=error_responses(404, 422, 503),
    summary="The bars of a time window at screen resolution (sub-pixel bars merged, capped)",
)
def window(trace: str, q: Annotated[WindowQuery, Query()], graph: AppGraph, settings: AppSettings) -> Window:
    timeout = settings.query_timeout_ms or None
    return timeline_window(graph, trace, q.t0, q.t1, q.px, q.lane_ids(), q.highlight, timeout_ms=timeout)


@router.get(
    "/traces/{trace}/op",
    response_model=OpDetail,
    responses=error_responses(404, 422, 503),
    summary="One op: type, times, device, input and output shapes, kernels (the first 20)",
)
def op(
    trace: str,
    graph: AppGraph,
    settings: AppSettings,
    name: Annotated[
        str, Query(min_length=1, max_length=10_000, pattern=r"^[^\x00]*$", description="the op's name (no NUL)")
    ],
) -> OpDetail:
    return op_detail(graph, trace, name, timeout_ms=settings.cypher_timeout_ms or None)


def static_files() -> StaticFiles:
    """The built bundle (api/static/, made from ui/ by esbuild), for ``app.mount("/static", ...)``."""
    return StaticFiles(directory=str(STATIC_DIR), check_dir=False)
