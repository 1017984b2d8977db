"""Routes for the analysis catalog: list it, run an analysis, what-if.

Every catalog analysis also gets a route of its own
(``GET /traces/{trace}/queries/<name>``) whose OpenAPI parameters come
from the analysis's declared parameters: types, defaults and enums.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from tracegraph.api.deps import JSON_BODY_MAX, AppGraph, AppSettings
from tracegraph.api.models import WhatIfIn, error_responses
from tracegraph.api.settings import Settings
from tracegraph.db.base import Graph
from tracegraph.errors import BadRequest
from tracegraph.output import render
from tracegraph.queries.catalog import Analysis, Param, catalog, get
from tracegraph.queries.run import run_analysis
from tracegraph.queries.types import AnalysisInfo, AnalysisResult, WhatIfResult
from tracegraph.queries.whatif import what_if

router = APIRouter(tags=["analyses"])

JSON_TYPES = {
    "STRING": "string",
    "INTEGER": "integer",
    "FLOAT": "number",
    "BOOLEAN": "boolean",
    "TRACE": "string",
    "ENUM": "string",
}


@router.get(
    "/queries",
    response_model=list[AnalysisInfo],
    summary="The analysis catalog: summary, parameters (name, type, default, bounds), columns",
)
def list_queries() -> list[AnalysisInfo]:
    return [a.info() for a in catalog().values()]


@router.get(
    "/queries/{name}",
    response_model=AnalysisInfo,
    responses=error_responses(404),
    summary="One analysis, with its Cypher",
)
def get_query(name: str) -> AnalysisInfo:
    return get(name).info(with_query=True)


def run_query(trace: str, name: str, request: Request, graph: Graph, settings: Settings) -> AnalysisResult | Response:
    analysis = get(name)
    raw, fmt = _split_format(analysis, request.query_params)
    res = run_analysis(graph, name, trace, raw, timeout_ms=settings.query_timeout_ms or None)
    if fmt == "csv":
        headers = {"X-Tracegraph-Note": res.note.encode("ascii", "backslashreplace").decode()} if res.note else {}
        return Response(
            render(res.columns, res.rows, "csv") + "\n", media_type="text/csv; charset=utf-8", headers=headers
        )
    return res


FORMAT_PARAM = {
    "name": "format",
    "in": "query",
    "required": False,
    "schema": {"type": "string", "enum": ["json", "csv"], "default": "json"},
    "description": "json (default) or csv",
}
QUERY_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "model": AnalysisResult,
        "content": {"text/csv": {"schema": {"type": "string"}}},
        "headers": {
            "X-Tracegraph-Note": {
                "description": "format=csv: the answer's note (why there are no rows), when it has one",
                "required": False,
                "schema": {"type": "string"},
            }
        },
    },
    **error_responses(400, 404, 422, 503),
}


def _openapi_param(p: Param) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": JSON_TYPES[p.type]}
    if p.default is not None:
        schema["default"] = p.default
    if p.choices:
        schema["enum"] = list(p.choices)
    low, high = p.bounds()
    if low is not None:
        schema["minimum"] = low
    if high is not None:
        schema["maximum"] = high
    if p.type in ("STRING", "TRACE"):
        schema["pattern"] = "^[^\\x00]*$"  # no NUL character
    return {"name": p.name, "in": "query", "required": p.required, "description": p.doc, "schema": schema}


def _route_for(a: Analysis) -> None:
    def handler(trace: str, request: Request, graph: AppGraph, settings: AppSettings) -> AnalysisResult | Response:
        return run_query(trace, a.name, request, graph, settings)

    handler.__name__ = f"run_{a.name.replace('-', '_')}"
    router.add_api_route(
        f"/traces/{{trace}}/queries/{a.name}",
        handler,
        methods=["GET"],
        summary=a.summary,
        description=a.definition,
        operation_id=handler.__name__,
        response_model=AnalysisResult,
        responses=QUERY_RESPONSES,
        openapi_extra={"parameters": [FORMAT_PARAM] + [_openapi_param(p) for p in a.params if p.name != "trace"]},
    )


for _analysis in catalog().values():
    _route_for(_analysis)


@router.get(
    "/traces/{trace}/queries/{name}",
    response_model=AnalysisResult,
    responses=QUERY_RESPONSES,
    summary="Run any catalog analysis on a trace",
    description="The analysis's parameters are query parameters (see `GET /queries`); `format=csv` answers CSV.",
    openapi_extra={"parameters": [FORMAT_PARAM]},
)
def run_any(
    trace: str, name: str, request: Request, graph: AppGraph, settings: AppSettings
) -> AnalysisResult | Response:
    return run_query(trace, name, request, graph, settings)


@router.post(
    "/traces/{trace}/whatif",
    response_model=WhatIfResult,
    responses=error_responses(400, 404, 413, 422, 503),
    max_body_size=JSON_BODY_MAX,
    summary="What if some ops took `factor` times as long? The new critical path",
    description="Scales the weights of the ops `match` selects by `factor` and recomputes the "
    "critical path (see `tracegraph whatif`). When nothing matches, nothing changes "
    "(`matched_ops` 0); on a trace without dependencies `unavailable` says so.",
)
def whatif(trace: str, body: WhatIfIn, graph: AppGraph) -> WhatIfResult:
    return what_if(graph, trace, body.match, body.factor)


def _split_format(analysis: Analysis, query: Any) -> tuple[dict[str, Any], str]:
    """The analysis's raw parameters (a list where one was given more than
    once: :func:`~tracegraph.queries.run.bind` refuses it) and the answer's
    format (``format``, unless the analysis has a parameter of that name)."""
    reserved_format = all(p.name != "format" for p in analysis.params)
    fmt = "json"
    raw: dict[str, Any] = {}
    for key in set(query.keys()):
        values = query.getlist(key)
        if reserved_format and key == "format":
            fmt = values[-1]
            if fmt not in ("json", "csv"):
                raise BadRequest(f"format: expected json or csv, got {fmt!r}")
            continue
        raw[key] = values[0] if len(values) == 1 else values
    return raw, fmt
