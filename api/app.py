"""The tracegraph HTTP API: ``create_app(db_uri=None, settings=None)``.

Run it with ``tracegraph serve`` (binds 127.0.0.1:8000 unless told
otherwise). One database connection is opened at startup and closed at
shutdown (the embedded FalkorDB stops when its last user leaves); ingests
run in a background thread, one at a time. Routes:

* ``GET /health``: backend, reachability, version (503: database down)
* ``GET /traces``, ``GET|DELETE /traces/{trace}``, ``POST /traces`` (upload)
* ``GET /jobs/{id}``: an upload's ingest job
* ``GET /queries``, ``GET /queries/{name}``: the analysis catalog
* ``GET /traces/{trace}/queries/{name}?param=...&format=json|csv``
* ``POST /traces/{trace}/whatif``, ``POST /cypher`` (read-only)
* ``GET /browser/guide.html``, ``GET /browser/tracegraph.grass``: Neo4j Browser kit
* ``GET /openapi.json``, ``GET /docs``

Errors are ``{"detail": "one line"}``: 404 unknown trace/analysis/job, 422
bad parameters, 400/415 unreadable upload, 409 name taken, 413 too large,
503 database unreachable. When ``TRACEGRAPH_API_KEY`` is set, every route
but ``/health`` needs ``Authorization: Bearer <key>`` (pages a browser
opens, ``/docs``, ``/openapi.json`` and ``/browser/*``, also take
``?key=<key>``).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import hmac
import importlib
import json
import logging
import math
from contextlib import asynccontextmanager
from importlib import resources
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request, Security
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException

from tracegraph.api.connection import GraphHolder, one_line, version
from tracegraph.api.jobs import DONE, FAILED, Job, JobManager
from tracegraph.api.models import (AnalysisOut, CypherIn, CypherOut, DeletedOut, ErrorOut, HealthOut, JobOut,
                                   QueryResultOut, TraceOut, WhatIfIn, error_responses)
from tracegraph.api.settings import Settings
from tracegraph.api.uploads import read_upload
from tracegraph.errors import DatabaseError, InputError, NotFound, UserError

log = logging.getLogger("tracegraph.api")

INT64 = (-(2 ** 63), 2 ** 63 - 1)
JSON_BODY_MAX = 16 * 1024 * 1024  # JSON request bodies (/cypher, /whatif); uploads have their own limit
JSON_TYPES = {"STRING": "string", "INTEGER": "integer", "FLOAT": "number", "BOOLEAN": "boolean"}
BROWSER_KEY_PATHS = ("/docs", "/openapi.json", "/browser/guide.html", "/browser/tracegraph.grass")


# --------------------------------------------------------------------------
# Values and errors
# --------------------------------------------------------------------------

def jsonable(v: Any) -> Any:
    """Plain JSON: NaN/inf as null, dates as ISO text, anything else as text."""
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, set, frozenset)):
        return [jsonable(x) for x in v]
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8", "replace")
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return jsonable(dataclasses.asdict(v))
    if hasattr(v, "isoformat"):
        return v.isoformat()
    if hasattr(v, "item"):  # numpy scalars
        with contextlib.suppress(Exception):
            return jsonable(v.item())
    return str(v)



def _http_text(msg: str) -> str:
    """CLI wording to HTTP wording."""
    return msg.replace("(use --replace to overwrite it)", "(send replace=true to overwrite it)") \
              .replace(" (see `tracegraph traces`)", "").replace(" (see `tracegraph queries`)", "")


def status_for(e: Exception) -> int:
    if isinstance(e, NotFound):
        return 404
    if isinstance(e, DatabaseError):
        return 503
    if isinstance(e, InputError):
        return 415 if e.what.startswith("unrecognized format") else 400
    msg = str(e)
    if "exists (use --replace" in msg or "is being loaded" in msg:
        return 409
    if msg.startswith(("bad trace name", "unknown format")):
        return 422
    return 400


def error(status: int, detail: str, headers: dict | None = None) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status, headers=headers)


# --------------------------------------------------------------------------
# The app
# --------------------------------------------------------------------------

def create_app(db_uri: str | None = None, settings: Settings | None = None) -> FastAPI:
    from tracegraph.ingest import formats
    from tracegraph.queries.catalog import catalog

    settings = settings or Settings.from_env()
    holder = GraphHolder(db_uri)
    jobs = JobManager(settings.jobs_kept)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        await run_in_threadpool(holder.open)
        try:
            yield
        finally:
            await run_in_threadpool(jobs.shutdown)
            await run_in_threadpool(holder.close)

    app = FastAPI(
        title="tracegraph", version=version(), lifespan=lifespan,
        docs_url=None, redoc_url=None, openapi_url=None,
        description=("Deep-learning execution traces as a graph: upload traces, run the catalog's analyses, "
                     "ad-hoc read-only Cypher. Errors are `{\"detail\": ...}`."
                     + (" Every route but /health needs `Authorization: Bearer <TRACEGRAPH_API_KEY>`."
                        if settings.api_key else "")),
    )
    app.state.graph = holder
    app.state.jobs = jobs
    app.state.settings = settings
    app.add_middleware(_JsonBodyLimit)

    # -- auth ---------------------------------------------------------------
    deps = []
    if settings.api_key:
        bearer = HTTPBearer(auto_error=False, description="the server's TRACEGRAPH_API_KEY")
        key = settings.api_key.encode()

        async def require_key(request: Request,
                              creds: HTTPAuthorizationCredentials | None = Security(bearer)) -> None:
            given = creds.credentials if creds else None
            if given is None and request.url.path in BROWSER_KEY_PATHS:
                given = request.query_params.get("key")
            if not given or not hmac.compare_digest(given.encode(), key):
                raise HTTPException(401, "missing or wrong API key: send Authorization: Bearer <TRACEGRAPH_API_KEY>",
                                    headers={"WWW-Authenticate": "Bearer"})

        deps = [Depends(require_key)]
    api = APIRouter(dependencies=deps, responses={401: {"model": ErrorOut}} if settings.api_key else None)

    # -- errors -------------------------------------------------------------
    @app.exception_handler(UserError)
    async def _user_error(request: Request, exc: UserError):
        return error(status_for(exc), _http_text(one_line(str(exc))))

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError):
        errs = []
        for e in exc.errors():
            loc = [str(x) for x in e.get("loc", ())]
            errs.append({"loc": loc, "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))})
        text = "; ".join(f"{'.'.join(x['loc'])}: {x['msg']}" for x in errs) or "invalid request"
        return JSONResponse({"detail": one_line(text), "errors": errs}, status_code=422)

    @app.exception_handler(Exception)
    async def _bug(request: Request, exc: Exception):
        log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
        return error(500, f"internal error ({type(exc).__name__}); the server log has the details")

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException):
        headers = dict(getattr(exc, "headers", None) or {})
        if exc.status_code == 405:
            # Starlette's Allow names only the first route of the path (GET /traces
            # but not POST /traces): list every method of every route that matches.
            from starlette.routing import Match

            methods = set()
            for route in [*app.router.routes, *api.routes]:
                if not getattr(route, "methods", None):
                    continue
                match, _ = route.matches(request.scope)
                if match != Match.NONE:
                    methods |= set(route.methods)
            if methods:
                headers["Allow"] = ", ".join(sorted(methods))
        return error(exc.status_code, str(exc.detail), headers or None)

    # -- health -------------------------------------------------------------
    @app.get("/health", response_model=HealthOut, responses={503: {"model": HealthOut}}, tags=["server"],
             summary="Backend kind, database reachability, version")
    def health():
        ok, info = holder.health()
        return JSONResponse(info, status_code=200 if ok else 503)

    # -- traces -------------------------------------------------------------
    @api.get("/traces", response_model=list[TraceOut], tags=["traces"], summary="Every ready trace, by name",
             responses=error_responses(503))
    def list_traces_route():
        from tracegraph.queries.traces import list_traces

        return JSONResponse(jsonable(list_traces(holder)))

    @api.get("/traces/{trace}", response_model=TraceOut, tags=["traces"], responses=error_responses(404, 503),
             summary="One trace: framework, counts, span, peak memory, source files")
    def get_trace(trace: str):
        from tracegraph.queries.traces import describe_trace

        return JSONResponse(jsonable(describe_trace(holder, trace)))

    @api.delete("/traces/{trace}", response_model=DeletedOut, tags=["traces"], responses=error_responses(404, 503),
                summary="Delete a trace")
    def delete_trace_route(trace: str):
        from tracegraph.ingest.store import drop_trace
        from tracegraph.queries.run import trace_facts

        trace_facts(holder, trace)  # 404 unless it is a ready trace
        n = drop_trace(holder, trace)
        return JSONResponse({"trace": trace, "deleted_nodes": n})

    upload_schema = {
        "type": "object", "required": ["trace", "files"],
        "properties": {
            "trace": {"type": "string", "minLength": 1, "maxLength": 200,
                      "description": "the trace's name (no '/' or '~')"},
            "format": {"type": "string", "enum": ["auto", *formats.names()], "default": "auto",
                       "description": "the files' format; auto detects it from the content"},
            "replace": {"type": "boolean", "default": False, "description": "overwrite a trace of that name"},
            "files": {"type": "array", "minItems": 1, "maxItems": settings.max_upload_files,
                      "items": {"type": "string", "format": "binary"},
                      "description": "one trace file, or a primary file plus files that add detail to it"},
        },
    }

    @api.post("/traces", tags=["traces"], status_code=201,
              summary="Upload trace file(s) as one trace",
              description=("Multipart form: `files` (one or more), `trace`, optional `format` and `replace`. "
                           f"The upload streams to disk; past {settings.max_upload_bytes:,} bytes it is refused "
                           f"(413). Up to {settings.sync_upload_bytes:,} bytes the trace is ingested before "
                           "the answer (201, the trace's summary) when that takes less than "
                           f"{settings.sync_wait_s:g} s; otherwise the answer is 202 with a job to poll at "
                           "`GET /jobs/{id}`. A failed ingest leaves nothing behind."),
              responses={201: {"model": TraceOut}, 202: {"model": JobOut}, **error_responses(400, 409, 413, 415, 422, 503)},
              openapi_extra={"requestBody": {"required": True,
                                             "content": {"multipart/form-data": {"schema": upload_schema}}}})
    async def upload(request: Request):
        up = await read_upload(request, max_bytes=settings.max_upload_bytes,
                               max_files=settings.max_upload_files, upload_dir=settings.upload_dir)
        try:
            trace, fmt, replace = _upload_fields(up.fields, formats.names())
            if not up.files:
                raise HTTPException(422, "files: no files in the upload (send them in the multipart field 'files')")
            from tracegraph.ingest.store import trace_status

            status = await run_in_threadpool(trace_status, holder, trace)
            if status == "ready" and not replace:
                raise HTTPException(409, f"trace {trace!r} exists (send replace=true to overwrite it)")
            if status == "loading":
                raise HTTPException(409, f"trace {trace!r} is being loaded")
        except BaseException:
            up.cleanup()
            raise
        work = _ingest_work(holder, up, trace, fmt, replace)
        job, future = jobs.submit(trace, [f.name for f in up.files], work, on_cancel=up.cleanup)
        if up.total_bytes <= settings.sync_upload_bytes and settings.sync_wait_s > 0:
            await run_in_threadpool(concurrent.futures.wait, [future], settings.sync_wait_s)
        if job.status == DONE:
            return JSONResponse(job.result, status_code=201, headers={"Location": f"/traces/{quote(trace)}"})
        if job.status == FAILED:
            return error(job.error_status or 400, job.error or "ingest failed")
        return JSONResponse(job.public(), status_code=202, headers={"Location": f"/jobs/{job.id}"})

    @api.get("/jobs/{job_id}", response_model=JobOut, tags=["traces"], responses=error_responses(404),
             summary="An upload's ingest job: status, progress, error")
    def get_job(job_id: str):
        return JSONResponse(jobs.get(job_id).public())

    # -- catalog ------------------------------------------------------------
    def analysis_info(a, with_query: bool = False) -> dict:
        from tracegraph.api.guide import query_body

        return {
            "name": a.name, "summary": a.summary, "graph": a.graph, "requires": list(a.requires),
            "params": [{"name": p.name, "type": p.type, "required": p.required, "default": jsonable(p.default),
                        "doc": p.doc, "choices": [str(c) for c in p.choices]}
                       for p in a.params if p.name != "trace"],
            "columns": [{"name": c.name, "doc": c.doc} for c in a.columns],
            "definition": a.definition, "url": f"/traces/{{trace}}/queries/{a.name}",
            **({"query": query_body(a)} if with_query else {}),
        }

    @api.get("/queries", response_model=list[AnalysisOut], tags=["analyses"],
             summary="The analysis catalog: summary, parameters (name, type, default), columns")
    def list_queries():
        return JSONResponse([analysis_info(a) for a in catalog().values()])

    @api.get("/queries/{name}", response_model=AnalysisOut, tags=["analyses"], responses=error_responses(404),
             summary="One analysis, with its Cypher")
    def get_query(name: str):
        from tracegraph.queries.catalog import get

        return JSONResponse(analysis_info(get(name), with_query=True))

    def run_query(trace: str, name: str, request: Request) -> Response:
        from tracegraph.output import render
        from tracegraph.queries.catalog import get
        from tracegraph.queries.run import run_analysis

        analysis = get(name)
        params, fmt = _analysis_params(analysis, request.query_params)
        try:
            res = run_analysis(holder, name, trace, params, timeout_ms=settings.query_timeout_ms or None)
        except (NotFound, DatabaseError):
            raise
        except UserError as e:
            given = ", ".join(f"{k}={v!r}" for k, v in params.items())
            raise HTTPException(422 if given else 400,
                                one_line(str(e)) + (f" (parameters: {given})" if given else "")) from None
        if fmt == "csv":
            headers = {"X-Tracegraph-Note": res.note.encode("ascii", "backslashreplace").decode()} if res.note else {}
            return Response(render(res.columns, res.rows, "csv") + "\n", media_type="text/csv; charset=utf-8",
                            headers=headers)
        return JSONResponse({"analysis": res.analysis, "trace": res.trace, "columns": list(res.columns),
                             "rows": jsonable(res.rows), "note": res.note})

    format_param = {"name": "format", "in": "query", "required": False,
                    "schema": {"type": "string", "enum": ["json", "csv"], "default": "json"},
                    "description": "json (default) or csv"}
    query_responses = {200: {"model": QueryResultOut, "content": {"text/csv": {"schema": {"type": "string"}}}},
                       **error_responses(400, 404, 422, 503)}

    def make_handler(name: str):
        def handler(trace: str, request: Request) -> Response:
            return run_query(trace, name, request)

        handler.__name__ = f"run_{name.replace('-', '_')}"
        return handler

    for a in catalog().values():
        handler = make_handler(a.name)
        parameters = [format_param] + [
            {"name": p.name, "in": "query", "required": p.required, "description": p.doc,
             "schema": {"type": JSON_TYPES[p.type],
                        **({"default": p.default} if p.default is not None else {}),
                        **({"enum": list(p.choices)} if p.choices else {})}}
            for p in a.params if p.name != "trace"]
        api.add_api_route(f"/traces/{{trace}}/queries/{a.name}", handler, methods=["GET"], tags=["analyses"],
                          summary=a.summary, description=a.definition, operation_id=handler.__name__,
                          response_model=QueryResultOut, responses=query_responses,
                          openapi_extra={"parameters": parameters})

    @api.get("/traces/{trace}/queries/{name}", response_model=QueryResultOut, tags=["analyses"],
             responses=query_responses, summary="Run any catalog analysis on a trace",
             description="The analysis's parameters are query parameters (see `GET /queries`); "
                         "`format=csv` answers CSV.",
             openapi_extra={"parameters": [format_param]})
    def run_any(trace: str, name: str, request: Request):
        return run_query(trace, name, request)

    # -- what-if ------------------------------------------------------------
    @api.post("/traces/{trace}/whatif", tags=["analyses"], responses=error_responses(400, 404, 413, 422, 501, 503),
              max_body_size=JSON_BODY_MAX,
              summary="What if some ops took `factor` times as long? The new critical path",
              description="Scales the weights of the ops `match` selects by `factor` and recomputes the "
                          "critical path (see `tracegraph whatif`). 422 when nothing matches or the trace "
                          "has no dependencies.")
    def whatif_route(trace: str, body: WhatIfIn):
        from tracegraph.queries.run import trace_facts

        fn = _whatif_function()
        if fn is None:
            return error(501, "what-if analysis is not available in this version of tracegraph")
        trace_facts(holder, trace)  # 404 for an unknown trace
        try:
            out = fn(holder, trace, body.match, body.factor)
        except (NotFound, DatabaseError):
            raise
        except UserError as e:
            raise HTTPException(422, one_line(str(e))) from None
        return JSONResponse(jsonable(out))

    # -- ad-hoc Cypher ------------------------------------------------------
    @api.post("/cypher", response_model=CypherOut, tags=["cypher"], responses=error_responses(400, 413, 422, 503),
              max_body_size=JSON_BODY_MAX,
              summary="Ad-hoc read-only Cypher",
              description=("Runs in a read-only transaction (`GRAPH.RO_QUERY` on FalkorDB, a read "
                           "transaction on Neo4j): the database itself refuses writes (400). "
                           f"Timeout {settings.cypher_timeout_ms:,} ms (TRACEGRAPH_CYPHER_TIMEOUT_MS); "
                           f"at most {settings.cypher_max_rows:,} rows (TRACEGRAPH_CYPHER_MAX_ROWS), "
                           "`truncated` says when there were more. Nodes, relationships and paths come "
                           "back as JSON objects (`kind`, `labels`/`type`, `properties`)."))
    def cypher(body: CypherIn):
        _check_values(body.params, "params")
        try:
            params = dict(body.params or {})
            if body.trace is not None:
                params["trace"] = body.trace
            res = holder.run(body.query, params or None, write=False,
                             timeout_ms=settings.cypher_timeout_ms or None)
        except (DatabaseError, NotFound):
            raise
        except UserError as e:
            raise HTTPException(400, one_line(str(e))) from None
        except Exception as e:  # a driver choking on the statement or its values: still the query's fault
            log.warning("ad-hoc query failed", exc_info=True)
            raise HTTPException(400, one_line(f"query failed: {type(e).__name__}: {e}")) from None
        cap = settings.cypher_max_rows
        rows = res.rows if not cap or len(res.rows) <= cap else res.rows[:cap]
        return JSONResponse({"columns": list(res.columns), "rows": jsonable(rows),
                             "truncated": len(rows) < len(res.rows)})

    # -- Neo4j Browser kit ---------------------------------------------------
    cors = {"Access-Control-Allow-Origin": "*"}

    @api.get("/browser/guide.html", response_class=HTMLResponse, tags=["neo4j browser"],
             summary="Neo4j Browser guide to the catalog (`:play http://HOST:8000/browser/guide.html`)")
    def guide(request: Request, trace: str = "alexnet"):
        from tracegraph.api.guide import render_guide

        base = str(request.base_url).rstrip("/")
        html = render_guide(base, trace=trace, key=request.query_params.get("key") if settings.api_key else None)
        return HTMLResponse(html, headers=cors)

    @api.get("/browser/tracegraph.grass", tags=["neo4j browser"],
             summary="Neo4j Browser style sheet (`:style http://HOST:8000/browser/tracegraph.grass`)",
             responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}})
    def grass():
        text = resources.files("tracegraph.cypher").joinpath("tracegraph.grass").read_text(encoding="utf-8")
        return Response(text, media_type="text/plain; charset=utf-8", headers=cors)

    # -- docs ---------------------------------------------------------------
    @api.get("/openapi.json", include_in_schema=False)
    def openapi_json():
        return JSONResponse(app.openapi())

    @api.get("/docs", include_in_schema=False)
    def docs(request: Request):
        url = "/openapi.json"
        given = request.query_params.get("key")
        if settings.api_key and given:
            url += "?key=" + quote(given)
        return get_swagger_ui_html(openapi_url=url, title="tracegraph API")

    app.include_router(api)
    # The web UI (api/ui.py): its page at /, its bundle at /static, its data routes at /ui/*.
    from tracegraph.api import ui

    app.include_router(ui.pages)
    app.include_router(ui.router)
    app.mount("/static", ui.static_files(), name="static")
    return app


# --------------------------------------------------------------------------
# Helpers of the routes
# --------------------------------------------------------------------------

class _JsonBodyLimit:
    """413 as JSON for a JSON body announced larger than JSON_BODY_MAX (the
    routes' own max_body_size still stops chunked bodies, in plain text)."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["method"] == "POST" and not scope["path"].rstrip("/").endswith("/traces"):
            length = dict(scope.get("headers") or ()).get(b"content-length", b"")
            if length.isdigit() and int(length) > JSON_BODY_MAX:
                await error(413, f"request body larger than {JSON_BODY_MAX:,} bytes")(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _upload_fields(fields: dict[str, str], format_names: list[str]) -> tuple[str, str, bool]:
    trace = fields.get("trace", "")
    if not trace:
        raise HTTPException(422, "trace: required (the name to store the trace under)")
    if len(trace) > 200 or "~" in trace or "/" in trace or any(not c.isprintable() for c in trace) \
            or trace != trace.strip():
        raise HTTPException(422, f"trace: bad name {trace!r}: 1-200 printable characters, no '/' or '~', "
                                 "no leading or trailing spaces")
    fmt = fields.get("format") or "auto"
    if fmt != "auto" and fmt not in format_names:
        raise HTTPException(422, f"format: unknown format {fmt!r} (supported: auto, {', '.join(format_names)})")
    raw = (fields.get("replace") or "false").strip().lower()
    if raw not in ("true", "1", "yes", "on", "false", "0", "no", "off"):
        raise HTTPException(422, f"replace: expected true or false, got {raw!r}")
    return trace, fmt, raw in ("true", "1", "yes", "on")


def _ingest_work(holder: GraphHolder, up, trace: str, fmt: str, replace: bool):
    """The job body: ingest, name the sources after the uploaded files, summarize."""

    def scrub(msg: str) -> str:
        for f in up.files:
            msg = msg.replace(str(f.path), f.name)
        return msg.replace(str(up.tmpdir), "upload")

    def work(job: Job) -> None:
        from tracegraph.ingest.pipeline import ingest
        from tracegraph.queries.traces import describe_trace

        try:
            ingest(holder, [f.path for f in up.files], trace, fmt=fmt, replace=replace, progress=job.progress)
            _rename_sources(holder, trace, {str(f.path): f.name for f in up.files})
            job.result = jsonable(describe_trace(holder, trace))
            job.status = DONE
        except UserError as e:
            job.error = _http_text(scrub(one_line(str(e))))
            job.error_status = status_for(e)
            job.status = FAILED
        except Exception as e:  # a parser tripping over bad input, or a driver error
            log.warning("ingest of %s failed", [f.name for f in up.files], exc_info=True)
            mod = type(e).__module__.split(".")[0]
            job.error_status = 503 if mod in ("redis", "neo4j", "falkordb") else 400
            job.error = scrub(one_line(f"cannot ingest {', '.join(f.name for f in up.files)}: "
                                        f"{type(e).__name__}: {e}"))
            job.status = FAILED
        finally:
            up.cleanup()

    return work


def _rename_sources(holder: GraphHolder, trace: str, names: dict[str, str]) -> None:
    res = holder.run("MATCH (t:Trace {trace: $trace, uid: 'trace'}) RETURN t.sources", {"trace": trace})
    if not res.rows:
        return
    try:
        sources = json.loads(res.rows[0][0] or "[]")
    except (TypeError, ValueError):
        return
    renamed = [names.get(str(s), s) for s in sources]
    if renamed != sources:
        holder.run("MATCH (t:Trace {trace: $trace, uid: 'trace'}) SET t.sources = $sources",
                   {"trace": trace, "sources": json.dumps(renamed)}, write=True)


def _analysis_params(analysis, query) -> tuple[dict, str]:
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
                raise HTTPException(422, f"format: expected json or csv, got {fmt!r}")
            continue
        if key not in names:
            has = ", ".join(sorted(names)) or "none"
            raise HTTPException(422, f"{key}: analysis {analysis.name} has no parameter {key!r} (has: {has})")
        if len(values) > 1:
            raise HTTPException(422, f"{key}: given {len(values)} times")
        p = analysis.param(key)
        try:
            value = p.coerce(values[0])
        except UserError as e:
            raise HTTPException(422, str(e)) from None
        if isinstance(value, int) and not isinstance(value, bool) and not INT64[0] <= value <= INT64[1]:
            raise HTTPException(422, f"parameter {key}: {values[0]!r} is out of the 64-bit integer range")
        if isinstance(value, float) and not math.isfinite(value):
            raise HTTPException(422, f"parameter {key}: expected a finite number, got {values[0]!r}")
        params[key] = value
    for p in analysis.params:
        if p.required and p.name != "trace" and p.name not in params:
            raise HTTPException(422, f"{p.name}: analysis {analysis.name} needs parameter {p.name!r} ({p.doc})")
    return params, fmt


def _check_values(value: Any, where: str, depth: int = 0) -> None:
    """Cypher parameters both drivers can send: 64-bit integers, bounded nesting."""
    if depth > 32:
        raise HTTPException(422, f"{where}: nested too deeply")
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, int):
        if not INT64[0] <= value <= INT64[1]:
            raise HTTPException(422, f"{where}: integer out of the 64-bit range")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise HTTPException(422, f"{where}: expected a finite number")
    elif isinstance(value, dict):
        for k, v in value.items():
            _check_values(v, f"{where}.{k}", depth + 1)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_values(v, f"{where}[{i}]", depth + 1)


def _whatif_function():
    """``tracegraph.queries.whatif.what_if`` when that module exists, else None (501)."""
    try:
        mod = importlib.import_module("tracegraph.queries.whatif")
    except ModuleNotFoundError as e:
        if e.name in ("tracegraph.queries.whatif", "tracegraph.queries"):
            return None
        raise
    fn = getattr(mod, "what_if", None) or getattr(mod, "whatif", None)
    return fn if callable(fn) else None


# --------------------------------------------------------------------------
# `tracegraph serve`
# --------------------------------------------------------------------------

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def serve(host: str = "127.0.0.1", port: int = 8000, db: str | None = None, *, log_level: str = "info") -> int:
    """Run the API with uvicorn until SIGINT/SIGTERM (then close the database)."""
    import uvicorn

    settings = Settings.from_env()
    logging.basicConfig(level=getattr(logging, log_level.upper(), logging.INFO), format="%(levelname)s: %(message)s")
    if host not in LOOPBACK and not settings.api_key:
        log.warning("serving on %s without TRACEGRAPH_API_KEY: anyone who reaches this port can read "
                    "and delete traces", host)
    app = create_app(db, settings)
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, workers=1, lifespan="on",
                            proxy_headers=False, server_header=False)
    server = uvicorn.Server(config)
    try:
        server.run()
    except SystemExit as e:  # uvicorn exits 3 when it cannot bind; the CLI says 1 for "could not do it"
        return 0 if e.code in (0, None) else 1
    return 0
