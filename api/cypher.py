"""``POST /cypher``: ad-hoc read-only Cypher."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse

from tracegraph.api.connection import GraphHolder
from tracegraph.api.deps import JSON_BODY_MAX, get_graph, get_settings
from tracegraph.api.models import CypherIn, CypherOut, error_responses
from tracegraph.api.settings import Settings
from tracegraph.output import jsonable, readable_rows

router = APIRouter(tags=["cypher"])


@router.post(
    "/cypher",
    response_model=CypherOut,
    responses=error_responses(400, 403, 404, 413, 422, 503),
    max_body_size=JSON_BODY_MAX,
    summary="Ad-hoc read-only Cypher",
    description=(
        "Runs in a read-only transaction (`GRAPH.RO_QUERY` on FalkorDB, a read transaction "
        "on Neo4j): the database itself refuses writes (403). `trace` names the trace the "
        "query reads and binds `$trace` (on FalkorDB each trace is a graph of its own; "
        "without `trace` a query sees every trace's Trace and OpTotals nodes). The whole "
        "request is bounded by TRACEGRAPH_CYPHER_TIMEOUT_MS (400 `timed out`) and answers "
        "at most TRACEGRAPH_CYPHER_MAX_ROWS rows (`truncated` says when there were more). "
        "Nodes, relationships and paths come back as JSON objects (`kind`, "
        "`labels`/`type`, `properties`)."
    ),
)
def cypher(
    body: CypherIn,
    graph: Annotated[GraphHolder, Depends(get_graph)],
    settings: Annotated[Settings, Depends(get_settings)],
) -> JSONResponse:
    res = graph.run(
        body.query, body.params or None, trace=body.trace, write=False, timeout_ms=settings.cypher_timeout_ms or None
    )
    cap = settings.cypher_max_rows
    rows = res.rows if not cap or len(res.rows) <= cap else res.rows[:cap]
    rows = readable_rows(res.columns, rows)
    return JSONResponse({"columns": list(res.columns), "rows": jsonable(rows), "truncated": len(rows) < len(res.rows)})
