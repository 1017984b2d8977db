"""``POST /cypher``: ad-hoc read-only Cypher."""

from __future__ import annotations

from fastapi import APIRouter

from tracegraph.api.deps import JSON_BODY_MAX, AppGraph, AppSettings
from tracegraph.api.models import CypherIn, error_responses
from tracegraph.queries.cypher import run_cypher
from tracegraph.queries.types import CypherResult

router = APIRouter(tags=["cypher"])


@router.post(
    "/cypher",
    response_model=CypherResult,
    responses=error_responses(400, 403, 404, 413, 422, 503),
    max_body_size=JSON_BODY_MAX,
    summary="Ad-hoc read-only Cypher",
    description=(
        "Runs in a read-only transaction (`GRAPH.RO_QUERY` on FalkorDB, a read transaction "
        "on Neo4j): the database itself refuses writes (403). The statement reads the trace "
        "graph and nothing else: planned first (`EXPLAIN`, `GRAPH.EXPLAIN`), it is refused "
        "before it runs (403, one line naming what) when its plan holds `LOAD CSV`, a "
        "procedure other than `db.labels`, `db.relationshipTypes`, `db.propertyKeys` and "
        "`db.schema.*`'s three, a command (`SHOW`, `TERMINATE`, users, databases), "
        "`CALL { ... } IN TRANSACTIONS` or another database (`USE`). `trace` names the trace the "
        "query reads and binds `$trace` (on FalkorDB each trace is a graph of its own; "
        "without `trace` a query sees every trace's Trace and OpTotals nodes). The whole "
        "request is bounded by TRACEGRAPH_CYPHER_TIMEOUT_MS (400 `timed out`) and answers "
        "at most TRACEGRAPH_CYPHER_MAX_ROWS rows (`truncated` says when there were more). "
        "Nodes, relationships and paths come back as JSON objects (`kind`, "
        "`labels`/`type`, `properties`)."
    ),
)
def cypher(body: CypherIn, graph: AppGraph, settings: AppSettings) -> CypherResult:
    return run_cypher(
        graph,
        body.query,
        body.params,
        trace=body.trace,
        timeout_ms=settings.cypher_timeout_ms or None,
        max_rows=settings.cypher_max_rows or None,
    )
