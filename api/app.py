"""The tracegraph HTTP API: ``create_app(db_uri=None, settings=None)``.

Run it with ``tracegraph serve`` (binds 127.0.0.1:8000 unless told
otherwise). One database connection is opened at startup and closed at
shutdown; ingests run in a background thread, one at a time. The routes
live in modules of their own, one router each:

* ``GET /health``: backend, reachability, version (503: database down)
* :mod:`.traces`: ``GET /traces``, ``GET|DELETE /traces/{trace}``,
  ``POST /traces`` (upload), ``GET /jobs/{id}``
* :mod:`.analyses`: ``GET /queries``, ``GET /queries/{name}``,
  ``GET /traces/{trace}/queries/{name}``, ``POST /traces/{trace}/whatif``
* :mod:`.cypher`: ``POST /cypher`` (read-only)
* :mod:`.guide`: ``GET /browser/guide.html``, ``GET /browser/tracegraph.grass`` (and
  Neo4j Browser's CORS preflights to them), ``POST /browser/link``
* ``GET /openapi.json``, ``GET /docs``

Errors are ``{"detail": "one line"}`` with the status the error's class
carries (:mod:`tracegraph.errors`): 404 unknown trace/analysis/job, 422 bad
parameters, 400/415 unreadable upload, 409 name taken, 413 too large, 503
database unreachable. When ``TRACEGRAPH_API_KEY`` is set, every route but
``/health``, ``/docs`` and ``/openapi.json`` needs ``Authorization: Bearer
<key>``; the two pages Neo4j Browser fetches itself take a short-lived
``?token=`` instead (``POST /browser/link``, :mod:`.browser_token`): the
key is never taken from a URL.
"""

from __future__ import annotations

import ipaddress
import logging
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Receive, Scope, Send

import tracegraph
from tracegraph.api import analyses, cypher, guide, traces, ui
from tracegraph.api.connection import GraphHolder, SharedJobs
from tracegraph.api.deps import JSON_BODY_MAX, AppHolder, require_key
from tracegraph.api.jobs import JobManager
from tracegraph.api.models import CYPHER_VALUE, ErrorOut, ValidationErrorOut
from tracegraph.api.settings import Settings
from tracegraph.errors import BadRequest, UserError, first_line
from tracegraph.queries.health import health as database_health
from tracegraph.queries.health import unreachable
from tracegraph.queries.traces import sweep
from tracegraph.queries.types import Health

log = logging.getLogger("tracegraph.api")


def create_app(db_uri: str | None = None, settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings.from_env()
    holder = GraphHolder(db_uri)
    # Two identities where the database has them (README "Security"): the
    # routes that only read go through TRACEGRAPH_DB_READ's.
    reader = GraphHolder(settings.read_db) if settings.read_db else holder

    def clean_up() -> None:
        with holder.use() as graph:
            sweep(graph)

    jobs = JobManager(settings.jobs_kept, SharedJobs(holder), settings.job_stale_s, clean_up)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await run_in_threadpool(holder.open)
        if reader is not holder:
            await run_in_threadpool(reader.open)
        try:
            yield
        finally:
            await run_in_threadpool(jobs.shutdown)
            await run_in_threadpool(holder.close)
            if reader is not holder:
                await run_in_threadpool(reader.close)

    app = FastAPI(
        title="tracegraph",
        version=tracegraph.__version__,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        description=(
            "Deep-learning execution traces as a graph: upload traces, run the catalog's analyses, "
            'ad-hoc read-only Cypher. Errors are `{"detail": ...}`.'
            + (
                " Every route but /health needs `Authorization: Bearer <TRACEGRAPH_API_KEY>`."
                if settings.api_key
                else ""
            )
        ),
    )
    app.state.graph = holder
    app.state.read_graph = reader
    app.state.jobs = jobs
    app.state.settings = settings
    app.openapi = lambda: _openapi(app, settings)  # type: ignore[method-assign]
    app.add_middleware(_JsonBodyLimit)
    app.add_middleware(guide.BrowserKitCors)  # Neo4j Browser's preflights to /browser/*
    for cls, handler in _HANDLERS.items():
        app.add_exception_handler(cls, handler)
    app.add_api_route(
        "/health",
        health,
        methods=["GET"],
        response_model=Health,
        tags=["server"],
        responses={503: {"model": Health}},
        summary="Backend kind, database reachability, version",
    )
    keyed: dict[str, Any] = {}
    if settings.api_key:
        keyed = {"dependencies": [Depends(require_key)], "responses": {401: {"model": ErrorOut}}}
    for module in (traces, analyses, cypher, guide):
        app.include_router(module.router, **keyed)
    # The API's description holds no data (the same for every deployment):
    # no key, so that a browser opens it without one in its URL.
    app.add_api_route("/openapi.json", openapi_json, include_in_schema=False)
    app.add_api_route("/docs", docs, include_in_schema=False)
    # The web UI: its page at / and its bundle at /static hold no data (no
    # key); its data routes (/ui/*) check the key themselves.
    app.include_router(ui.pages)
    app.include_router(ui.router, **keyed)
    app.mount("/static", ui.static_files(), name="static")
    return app


def _openapi(app: FastAPI, settings: Settings) -> dict[str, Any]:
    """FastAPI's document, completed where it cannot know: the CypherValue
    schema ``POST /cypher``'s parameters refer to, the upload form (with
    this app's file limit) and its two answers, and 422 answers as this API
    sends them (the ``{"detail", "errors"}`` of :class:`ValidationErrorOut`,
    not FastAPI's default model)."""
    if app.openapi_schema is None:
        doc = FastAPI.openapi(app)
        schemas = doc.setdefault("components", {}).setdefault("schemas", {})
        schemas["CypherValue"] = CYPHER_VALUE
        form = {"schema": traces.upload_schema(settings.max_upload_files)}
        upload = doc["paths"]["/traces"]["post"]
        upload["requestBody"] = {"required": True, "content": {"multipart/form-data": form}}
        # 201 is the trace (202 the job): FastAPI gives the route's status both of them.
        upload["responses"]["201"]["content"]["application/json"]["schema"] = {
            "$ref": "#/components/schemas/TraceSummary"
        }
        schemas.setdefault("ValidationErrorOut", ValidationErrorOut.model_json_schema())
        for operations in doc["paths"].values():
            for op in operations.values():
                for status, answer in op.get("responses", {}).items():
                    if status.startswith(("4", "5")):
                        answer["content"] = _error_content(status, answer.get("content", {}))
        for unused in ("HTTPValidationError", "ValidationError"):
            schemas.pop(unused, None)
        app.openapi_schema = doc
    return app.openapi_schema


def _error_content(status: str, content: dict[str, Any]) -> dict[str, Any]:
    """An error answer's content as the API sends it: JSON, whatever the
    route's own media type (an HTML page's 401 is JSON too), with this API's
    model (a 422 is ValidationErrorOut, not FastAPI's default model)."""
    schema = next((c.get("schema") for c in content.values() if c.get("schema")), None)
    if status == "422" or schema == {"$ref": "#/components/schemas/HTTPValidationError"}:
        schema = {"$ref": "#/components/schemas/ValidationErrorOut"}
    return {"application/json": {"schema": schema or {"$ref": "#/components/schemas/ErrorOut"}}}


def health(holder: AppHolder, response: Response) -> Health:
    try:
        with holder.use() as graph:
            return database_health(graph)
    except Exception as e:  # anything at all means: not usable now
        response.status_code = 503
        return unreachable(holder.backend, e)


def openapi_json(request: Request) -> dict[str, Any]:
    doc: dict[str, Any] = request.app.openapi()
    return doc


def docs() -> HTMLResponse:
    return get_swagger_ui_html(openapi_url="/openapi.json", title="tracegraph API")


# -- errors: every one a one-line JSON detail ---------------------------------


def error(status: int, detail: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status, headers=headers)


async def _user_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, UserError)
    return error(exc.http_status, first_line(str(exc)))


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errs = [
        {"loc": [str(x) for x in e.get("loc", ())], "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))}
        for e in exc.errors()
    ]
    text = "; ".join(f"{'.'.join(x['loc'])}: {x['msg']}" for x in errs) or "invalid request"
    return JSONResponse({"detail": first_line(text), "errors": errs}, status_code=422)


async def _bug(request: Request, exc: Exception) -> JSONResponse:
    log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
    return error(500, f"internal error ({type(exc).__name__}); the server log has the details")


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    headers = dict(getattr(exc, "headers", None) or {})
    if exc.status_code == 405:
        # Starlette's Allow names only the first route of the path (GET /traces
        # but not POST /traces): list every method of every route that matches.
        methods: set[str] = set()
        for route in _routes(request.app.router.routes):
            if getattr(route, "methods", None) and route.matches(request.scope)[0] != Match.NONE:
                methods |= set(route.methods)
        if methods:
            headers["Allow"] = ", ".join(sorted(methods))
    return error(exc.status_code, str(exc.detail), headers or None)


def _routes(routes: list[Any]) -> Iterator[Any]:
    """Every route, those of included routers too (FastAPI includes them lazily)."""
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is not None:
            yield from _routes(inner.routes)
        else:
            yield route


_HANDLERS = {
    UserError: _user_error,
    RequestValidationError: _validation_error,
    Exception: _bug,
    StarletteHTTPException: _http_error,
}


class _JsonBodyLimit:
    """413 as JSON for a JSON body announced larger than JSON_BODY_MAX."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and not scope["path"].rstrip("/").endswith("/traces"):
            length = dict(scope.get("headers") or ()).get(b"content-length", b"")
            if length.isdigit() and int(length) > JSON_BODY_MAX:
                await error(413, f"request body larger than {JSON_BODY_MAX:,} bytes")(scope, receive, send)
                return
        await self.app(scope, receive, send)


# -- `tracegraph serve` --------------------------------------------------------


def serve(
    host: str = "127.0.0.1", port: int = 8000, db: str | None = None, *, log_level: str = "info", workers: int = 1
) -> int:
    """Run the API with uvicorn until SIGINT/SIGTERM (then close the database).

    ``workers`` > 1 runs that many processes on the one port (uvicorn's
    supervisor restarts one that dies). They share nothing but the
    database, which is all they need: ingest jobs are kept there
    (api/jobs.py), so a job is seen from every process."""
    import uvicorn

    settings = Settings.from_env()
    check_exposure(host, settings)
    logging.basicConfig(level=getattr(logging, log_level.upper(), logging.INFO), format="%(levelname)s: %(message)s")
    options: dict[str, Any] = {
        "host": host,
        "port": port,
        "log_level": log_level,
        "lifespan": "on",
        "proxy_headers": False,
        "server_header": False,
    }
    try:
        if workers > 1:
            # Each worker process builds its app from the environment.
            if db:
                os.environ["TRACEGRAPH_DB"] = db
            uvicorn.run("tracegraph.api.app:app_from_env", factory=True, workers=workers, **options)
        else:
            uvicorn.Server(uvicorn.Config(create_app(db, settings), workers=1, **options)).run()
    except SystemExit as e:  # uvicorn exits 3 when it cannot bind; the CLI says 1 for "could not do it"
        return 0 if e.code in (0, None) else 1
    return 0


def check_exposure(host: str, settings: Settings) -> None:
    """Refuse to listen beyond loopback without an API key.

    Anyone who reaches such a port could read, ingest and delete every
    trace; a warning in a log scrolls by unseen (in a container's above
    all), so it is an error, unless ``TRACEGRAPH_ALLOW_NO_KEY=1`` says that
    something in front authenticates (a reverse proxy that checks who
    calls)."""
    if settings.api_key or _loopback(host) or os.environ.get("TRACEGRAPH_ALLOW_NO_KEY") == "1":
        return
    raise BadRequest(
        f"refusing to serve on {host} without TRACEGRAPH_API_KEY: anyone who reaches the port could read, "
        "ingest and delete traces (set TRACEGRAPH_API_KEY; TRACEGRAPH_ALLOW_NO_KEY=1 only behind a proxy "
        "that authenticates)"
    )


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve anywhere


def app_from_env() -> FastAPI:
    """The app of one ``serve --workers N`` process: database and settings from the environment."""
    return create_app(os.environ.get("TRACEGRAPH_DB") or None, Settings.from_env())
