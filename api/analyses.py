"""Routes for the analysis catalog: list it, run an analysis, what-if.

Every catalog analysis also gets a route of its own
(``GET /traces/{trace}/queries/<name>``) whose OpenAPI parameters come
from the analysis's declared parameters: types, defaults and enums.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response

from tracegraph.api.connection import GraphHolder, one_line
from tracegraph.api.deps import JSON_BODY_MAX, get_graph, get_settings
from tracegraph.api.models import AnalysisOut, QueryResultOut, WhatIfIn, error_responses
from tracegraph.api.settings import Settings
from tracegraph.errors import BadRequest, QueryError, QueryTimeout
from tracegraph.output import jsonable, render
from tracegraph.queries.catalog import Analysis, Param, catalog, get
from tracegraph.queries.run import run_analysis
from tracegraph.queries.whatif import what_if

router = APIRouter(tags=["analyses"])
Graph = Annotated[GraphHolder, Depends(get_graph)]
AppSettings = Annotated[Settings, Depends(get_settings)]

INT64 = (-(2**63), 2**63 - 1)
JSON_TYPES = {
    "STRING": "string",
    "INTEGER": "integer",
    "FLOAT": "number",
    "BOOLEAN": "boolean",
    "TRACE": "string",
    "ENUM": "string",
}


def analysis_info(a: Analysis, with_query: bool = False) -> dict[str, Any]:
    from tracegraph.api.guide import query_body

    return {
        "name": a.name,
        "summary": a.summary,
        "graph": a.graph,
        "requires": [f.value for f in a.requires],
        "params": [
            {
                "name": p.name,
                "type": p.type,
                "required": p.required,
                "default": jsonable(p.default),
                "doc": p.doc,
                "choices": list(p.choices),
            }
            for p in a.params
            if p.name != "trace"
        ],
        "columns": [{"name": c.name, "doc": c.doc} for c in a.columns],
        "definition": a.definition,
        "url": f"/traces/{{trace}}/queries/{a.name}",
        **({"query": query_body(a)} if with_query else {}),
    }


@router.get(
    "/queries",
    response_model=list[AnalysisOut],
    summary="The analysis catalog: summary, parameters (name, type, default), columns",
)
def list_queries() -> JSONResponse:
    return JSONResponse([analysis_info(a) for a in catalog().values()])


@router.get(
    "/queries/{name}",
    response_model=AnalysisOut,
    responses=error_responses(404),
    summary="One analysis, with its Cypher",
)
def get_query(name: str) -> JSONResponse:
    return JSONResponse(analysis_info(get(name), with_query=True))


def run_query(trace: str, name: str, request: Request, graph: GraphHolder, settings: Settings) -> Response:
    analysis = get(name)
    params, fmt = _analysis_params(analysis, request.query_params)
    try:
        res = run_analysis(graph, name, trace, params, timeout_ms=settings.query_timeout_ms or None)
    except QueryTimeout:
        raise
    except QueryError as e:
        # The catalog's texts are tested: a statement the database refuses
        # was given a value it cannot take (a negative limit, say).
        given = ", ".join(f"{k}={v!r}" for k, v in params.items()) or "none"
        raise BadRequest(f"{one_line(str(e))} (parameters: {given})") from None
    if fmt == "csv":
        headers = {"X-Tracegraph-Note": res.note.encode("ascii", "backslashreplace").decode()} if res.note else {}
        return Response(
            render(res.columns, res.rows, "csv") + "\n", media_type="text/csv; charset=utf-8", headers=headers
        )
    return JSONResponse(
        {
            "analysis": res.analysis,
            "trace": res.trace,
            "columns": list(res.columns),
            "rows": jsonable(res.rows),
            "note": res.note,
        }
    )


FORMAT_PARAM = {
    "name": "format",
    "in": "query",
    "required": False,
    "schema": {"type": "string", "enum": ["json", "csv"], "default": "json"},
    "description": "json (default) or csv",
}
QUERY_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"model": QueryResultOut, "content": {"text/csv": {"schema": {"type": "string"}}}},
    **error_responses(400, 404, 422, 503),
}


def _openapi_param(p: Param) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": JSON_TYPES[p.type]}
    if p.default is not None:
        schema["default"] = p.default
    if p.choices:
        schema["enum"] = list(p.choices)
    return {"name": p.name, "in": "query", "required": p.required, "description": p.doc, "schema": schema}


def _route_for(a: Analysis) -> None:
    def handler(trace: str, request: Request, graph: Graph, settings: AppSettings) -> Response:
        return run_query(trace, a.name, request, graph, settings)

    handler.__name__ = f"run_{a.name.replace('-', '_')}"
    router.add_api_route(
        f"/traces/{{trace}}/queries/{a.name}",
        handler,
        methods=["GET"],
        summary=a.summary,
        description=a.definition,
        operation_id=handler.__name__,
        response_model=QueryResultOut,
        responses=QUERY_RESPONSES,
        openapi_extra={"parameters": [FORMAT_PARAM] + [_openapi_param(p) for p in a.params if p.name != "trace"]},
    )


for _analysis in catalog().values():
    _route_for(_analysis)


@router.get(
    "/traces/{trace}/queries/{name}",
    response_model=QueryResultOut,
    responses=QUERY_RESPONSES,
    summary="Run any catalog analysis on a trace",
    description="The analysis's parameters are query parameters (see `GET /queries`); `format=csv` answers CSV.",
    openapi_extra={"parameters": [FORMAT_PARAM]},
)
def run_any(trace: str, name: str, request: Request, graph: Graph, settings: AppSettings) -> Response:
    return run_query(trace, name, request, graph, settings)


@router.post(
    "/traces/{trace}/whatif",
    responses=error_responses(400, 404, 413, 422, 503),
    max_body_size=JSON_BODY_MAX,
    summary="What if some ops took `factor` times as long? The new critical path",
    description="Scales the weights of the ops `match` selects by `factor` and recomputes the "
    "critical path (see `tracegraph whatif`). 422 when nothing matches or the trace "
    "has no dependencies.",
)
def whatif(trace: str, body: WhatIfIn, graph: Graph) -> JSONResponse:
    return JSONResponse(jsonable(what_if(graph, trace, body.match, body.factor)))


def _analysis_params(analysis: Analysis, query: Any) -> tuple[dict[str, Any], str]:
    """Typed analysis parameters from the query string; 422 naming the bad one."""
    names = {p.name for p in analysis.params if p.name != "trace"}
    reserved_format = "format" not in names
    fmt = "json"
    params: dict[str, Any] = {}
    for key in set(query.keys()):
        values = query.getlist(key)
        if reserved_format and key == "format":
            fmt = values[-1]
            if fmt not in ("json", "csv"):
                raise BadRequest(f"format: expected json or csv, got {fmt!r}")
            continue
        if key not in names:
            has = ", ".join(sorted(names)) or "none"
            raise BadRequest(f"{key}: analysis {analysis.name} has no parameter {key!r} (has: {has})")
        if len(values) > 1:
            raise BadRequest(f"{key}: given {len(values)} times")
        value = analysis.param(key).coerce(values[0])
        if isinstance(value, int) and not isinstance(value, bool) and not INT64[0] <= value <= INT64[1]:
            raise BadRequest(f"parameter {key}: {values[0]!r} is out of the 64-bit integer range")
        if isinstance(value, float) and not math.isfinite(value):
            raise BadRequest(f"parameter {key}: expected a finite number, got {values[0]!r}")
        params[key] = value
    for p in analysis.params:
        if p.required and p.name != "trace" and p.name not in params:
            raise BadRequest(f"{p.name}: analysis {analysis.name} needs parameter {p.name!r} ({p.doc})")
    return params, fmt
