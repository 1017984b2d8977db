"""``tracegraph mcp``: the service as a Model Context Protocol server, so an
assistant can ingest traces, run the catalog and read-only Cypher.

Two transports: stdio (``tracegraph mcp``, what a desktop assistant starts)
and streamable HTTP (``tracegraph mcp --http``, at ``/mcp``, for a shared
deployment): behind ``TRACEGRAPH_API_KEY`` (``Authorization: Bearer``,
the HTTP API's key and its rule: no key, no listening beyond loopback).

Built on the official MCP Python SDK (``mcp``, its low-level ``Server``):
the tools are generated from the catalog at start, each with the JSON
schema of its parameters, which the SDK's decorator API (tools from
Python signatures) cannot express without a second, hand-written list.
FastMCP would add a dependency for the same low-level calls.

Tools:

* ``traces``: every stored trace with its facts (framework, ops, span,
  critical paths, memory peak, what it has: times, kernels, steps, ...);
* ``ingest``: a file or a directory by path, as ``tracegraph ingest``;
  paths are resolved (symbolic links too) and must lie under the allowed
  root (``--root``, default the directory the server started in);
* ``cypher``: one read-only statement under the ad-hoc rule (it reads the
  trace graph and nothing else), ``tracegraph cypher``'s checks;
* one tool per catalog analysis, named as the analysis, its parameters
  those of the ``.cypher`` header (types, bounds, choices, defaults).
* ``whatif``: the what-if's new critical path (``tracegraph whatif``);
* ``explain``: a trace's facts and its headline analyses' rows
  (:data:`EXPLAIN`), each section its rows or why it is not available.

Resources: the graph schema (``tracegraph://schema``), each analysis's
``.cypher`` file (``tracegraph://analyses/NAME``) and a trace's summary
(``tracegraph://traces/TRACE``, a template).

Every tool goes through the service layer (:mod:`tracegraph.queries`) as the
CLI and the HTTP API do, with the HTTP API's limits (``TRACEGRAPH_QUERY_
TIMEOUT_MS``, ``TRACEGRAPH_CYPHER_TIMEOUT_MS``, ``TRACEGRAPH_CYPHER_MAX_ROWS``).
An answer is JSON (``structuredContent``, and the same as text): columns
with units in their names, at most :data:`ANSWER_ROWS` rows and how many
were cut; a refusal (bad input, an unknown trace, a statement the rule
refuses) is a tool error of one line, the CLI's; an analysis a trace cannot
answer is the typed ``not_available`` answer, not an error.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import os
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from starlette.types import ASGIApp, Receive, Scope, Send

import tracegraph
from tracegraph.api.app import check_exposure
from tracegraph.api.connection import GraphHolder
from tracegraph.api.settings import Settings
from tracegraph.errors import BadRequest, NotFound, UserError, first_line
from tracegraph.queries.catalog import Analysis, Param, catalog
from tracegraph.queries.cypher import run_cypher
from tracegraph.queries.ingest import format_names
from tracegraph.queries.run import run_analysis
from tracegraph.queries.traces import describe_trace, list_traces
from tracegraph.queries.types import as_json
from tracegraph.queries.whatif import what_if

# Rows an answer holds at most (the rest counted in rows_cut): an assistant
# reads every row it is given.
ANSWER_ROWS = 200
# The tools that are not analyses (an analysis may not take one's name).
SERVICE_TOOLS = ("traces", "ingest", "cypher", "whatif", "explain")
# explain's headline analyses: (analysis, its parameters, the rows it keeps).
EXPLAIN: tuple[tuple[str, dict[str, Any], int], ...] = (
    ("observed-critical-path-summary", {}, 10),
    ("top-ops", {"n": 5}, 5),
    ("idle-breakdown", {}, 10),
    ("peak-memory", {}, 5),
    ("step-breakdown", {}, 10),
    ("stragglers", {}, 5),
)
_JSON_TYPES = {"INTEGER": "integer", "FLOAT": "number", "BOOLEAN": "boolean"}


@dataclass(frozen=True)
class McpSettings:
    """What the server may do: where it may ingest from, and the limits."""

    root: Path  # ingest reads under this directory only
    limits: Settings


# ---------------------------------------------------------------- the tools, from the catalog


def _param_schema(p: Param) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": _JSON_TYPES.get(p.type, "string")}
    if p.choices:
        schema["enum"] = list(p.choices)
    if p.type in ("INTEGER", "FLOAT"):
        low, high = p.bounds()
        if low is not None:
            schema["minimum"] = low
        if high is not None:
            schema["maximum"] = high
    if p.default is not None:
        with contextlib.suppress(BadRequest):  # (the catalog's tests check every default)
            schema["default"] = p.coerce(p.default)
    described = p.doc or ""
    if p.type == "TRACE":
        described = described or "a stored trace's name (the traces tool lists them)"
    if described:
        schema["description"] = described
    return schema


def _analysis_tool(a: Analysis) -> types.Tool:
    properties = {p.name: _param_schema(p) for p in a.params}
    required = [p.name for p in a.params if p.required or p.name == "trace"]
    columns = ", ".join(c.name for c in a.columns)
    needs = f" Needs: {', '.join(f.value for f in a.requires)}." if a.requires else ""
    return types.Tool(
        name=a.name,
        description=f"{a.summary} Columns: {columns}.{needs}",
        input_schema={"type": "object", "properties": properties, "required": required, "additionalProperties": False},
        annotations=types.ToolAnnotations(read_only_hint=True, idempotent_hint=True),
    )


def tools() -> list[types.Tool]:
    """The service's tools and one per catalog analysis (never a list of our own)."""
    analyses = catalog()
    clash = set(analyses) & set(SERVICE_TOOLS)
    if clash:  # pragma: no cover - a catalog change the test suite catches
        raise RuntimeError(f"analyses named as service tools: {sorted(clash)}")
    service = [
        types.Tool(
            name="traces",
            description="Every stored trace with its facts: framework, ops, span_us, critical_path_us, "
            "observed_path_us, memory_peak_bytes, and what it has (has_times, has_kernels, has_memory, "
            "has_steps, ...), which says which analyses can answer.",
            input_schema={"type": "object", "properties": {}, "additionalProperties": False},
            annotations=types.ToolAnnotations(read_only_hint=True),
        ),
        types.Tool(
            name="ingest",
            description="Load a trace file, or a directory of them (one trace: a job's rank files), from a "
            "path under the server's allowed root, as `tracegraph ingest`. Formats are detected by content.",
            input_schema={
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "a file or directory under the allowed root"},
                    "trace": {"type": "string", "description": "the name to store it under (default: the file's)"},
                    "replace": {"type": "boolean", "default": False, "description": "replace a trace of that name"},
                    "format": {"type": "string", "enum": ["auto", *format_names()], "default": "auto"},
                    "step_marker": {"type": "string", "description": "a regex naming the ops that mark steps"},
                },
                "required": ["path"],
                "additionalProperties": False,
            },
        ),
        types.Tool(
            name="cypher",
            description="One read-only openCypher statement over the stored traces (read the trace graph "
            "and nothing else: no writes, LOAD CSV or procedures). `trace` binds $trace and, on the "
            "embedded database, picks that trace's graph. The graph schema: the tracegraph SCHEMA.md.",
            input_schema={
                "type": "object",
                "properties": {
                    "query": {"type": "string"},
                    "trace": {"type": "string", "description": "the trace it reads ($trace)"},
                    "params": {"type": "object", "description": "statement parameters", "default": {}},
                },
                "required": ["query"],
                "additionalProperties": False,
            },
            annotations=types.ToolAnnotations(read_only_hint=True),
        ),
        types.Tool(
            name="whatif",
            description="What if the ops a pattern matches took `factor` times as long? The new dependency "
            "critical path and the time saved (traces with dependencies).",
            input_schema={
                "type": "object",
                "properties": {
                    "trace": {"type": "string"},
                    "match": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "type=REGEX or name=REGEX, any of them",
                    },
                    "factor": {"type": "number", "minimum": 0, "description": "0.5: twice as fast"},
                },
                "required": ["trace", "match", "factor"],
                "additionalProperties": False,
            },
            annotations=types.ToolAnnotations(read_only_hint=True, idempotent_hint=True),
        ),
        types.Tool(
            name="explain",
            description="A trace's headline numbers in one answer: its facts, the observed critical path's "
            "heaviest segments, the top ops, idle time by cause, the memory peak, steps and stragglers "
            "(each section the analysis's rows, or why it is not available).",
            input_schema={
                "type": "object",
                "properties": {"trace": {"type": "string"}},
                "required": ["trace"],
                "additionalProperties": False,
            },
            annotations=types.ToolAnnotations(read_only_hint=True, idempotent_hint=True),
        ),
    ]
    return service + [_analysis_tool(a) for a in analyses.values()]


# ---------------------------------------------------------------- answering


def _compact(columns: list[str], rows: list[list[Any]], **extra: Any) -> dict[str, Any]:
    """At most ANSWER_ROWS rows, as objects keyed by column, and what was cut."""
    shown = rows[:ANSWER_ROWS]
    answer: dict[str, Any] = {"columns": columns, "rows": [dict(zip(columns, r)) for r in shown]}
    if len(rows) > len(shown):
        answer["rows_cut"] = len(rows) - len(shown)
        answer["narrow"] = "ask for fewer rows: a parameter (n, min_gap_us, step), or a LIMIT in cypher"
    return {**answer, **{k: v for k, v in extra.items() if v is not None}}


def inside_root(root: Path, given: str) -> Path:
    """The path, resolved (symbolic links followed), when it lies under root."""
    path = Path(given).expanduser()
    if not path.is_absolute():
        path = root / path
    try:
        resolved = path.resolve(strict=True)
    except (OSError, RuntimeError):
        raise BadRequest(f"{given}: no such file or directory") from None
    if not resolved.is_relative_to(root.resolve()):
        raise BadRequest(f"{given}: outside the directory this server may ingest from ({root})")
    return resolved


class Service:
    """The tools' answers: the service layer called with the server's limits."""

    def __init__(self, db: str | None, settings: McpSettings) -> None:
        self.holder = GraphHolder(db)
        self.settings = settings
        self._calls: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "traces": self._traces,
            "ingest": self._ingest,
            "cypher": self._cypher,
            "whatif": self._whatif,
            "explain": self._explain,
        }

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if name in self._calls:
            return self._calls[name](arguments)
        if name in catalog():
            return self._analysis(name, arguments)
        raise BadRequest(f"no tool {name!r}")

    def _traces(self, arguments: dict[str, Any]) -> dict[str, Any]:
        with self.holder.use() as graph:
            summaries = list_traces(graph)
        return {"traces": [{k: v for k, v in asdict(t).items() if v is not None} for t in summaries]}

    def _ingest(self, arguments: dict[str, Any]) -> dict[str, Any]:
        from tracegraph.queries.ingest import default_trace_name, prepare, store

        path = inside_root(self.settings.root, str(arguments["path"]))
        name = arguments.get("trace") or default_trace_name(path)
        prepared = prepare(
            [path], name, fmt=arguments.get("format") or "auto", step_marker=arguments.get("step_marker")
        )
        with self.holder.use() as graph:
            result = store(graph, prepared, replace=bool(arguments.get("replace")))
        return {"trace": result.trace, "nodes": result.nodes, "relationships": result.relationships}

    def _cypher(self, arguments: dict[str, Any]) -> dict[str, Any]:
        params = arguments.get("params") or {}
        if not isinstance(params, dict):
            raise BadRequest("params: expected an object")
        limits = self.settings.limits
        with self.holder.use() as graph:
            res = run_cypher(
                graph,
                str(arguments["query"]),
                params,
                trace=arguments.get("trace"),
                timeout_ms=limits.cypher_timeout_ms,
                max_rows=limits.cypher_max_rows,
            )
        return _compact(res.columns, res.rows, truncated_at=limits.cypher_max_rows if res.truncated else None)

    def _whatif(self, arguments: dict[str, Any]) -> dict[str, Any]:
        match = arguments.get("match")
        if not isinstance(match, list) or not all(isinstance(m, str) for m in match):
            raise BadRequest("match: expected a list of type=REGEX or name=REGEX")
        with self.holder.use() as graph:
            r = what_if(graph, str(arguments.get("trace")), match, float(arguments.get("factor", 1.0)))
        if r.unavailable is not None:
            return {"not_available": {"fact": r.unavailable.fact, "reason": r.unavailable.reason}}
        body: dict[str, Any] = as_json(r)
        path = body.pop("path", [])
        body["path"] = path[:ANSWER_ROWS]
        if len(path) > ANSWER_ROWS:
            body["path_cut"] = len(path) - ANSWER_ROWS
        return body

    def _explain(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The trace's facts and the headline analyses' rows (or why not)."""
        trace = str(arguments.get("trace"))
        with self.holder.use() as graph:
            summary = describe_trace(graph, trace)
            out: dict[str, Any] = {"trace": {k: v for k, v in asdict(summary).items() if v is not None}}
            for name, params, keep in EXPLAIN:
                result = run_analysis(graph, name, trace, params, timeout_ms=self.settings.limits.query_timeout_ms)
                if result.unavailable is not None:
                    out[name] = {"not_available": result.unavailable.reason}
                else:
                    rows = [dict(zip(result.columns, r)) for r in result.rows[:keep]]
                    out[name] = {
                        "rows": rows,
                        **({"rows_cut": len(result.rows) - keep} if len(result.rows) > keep else {}),
                    }
        return out

    def _analysis(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        args = dict(arguments)
        trace = args.pop("trace", None)
        if not isinstance(trace, str):
            raise BadRequest(f"analysis {name}: the trace parameter is required")
        with self.holder.use() as graph:
            result = run_analysis(graph, name, trace, args, timeout_ms=self.settings.limits.query_timeout_ms)
        if result.unavailable is not None:
            u = result.unavailable
            return {"not_available": {"fact": u.fact, "reason": u.reason}, "note": u.note}
        return _compact(result.columns, result.rows, note=result.note)


# ---------------------------------------------------------------- resources

SCHEMA_URI = "tracegraph://schema"
ANALYSIS_URI = "tracegraph://analyses/{name}"
TRACE_URI = "tracegraph://traces/{trace}"


def resource_list() -> list[types.Resource]:
    """The graph schema, and each analysis's definition (its .cypher file)."""
    out = [
        types.Resource(
            uri=SCHEMA_URI,
            name="schema",
            description="The graph schema: every label, relationship and property (cypher/SCHEMA.md).",
            mime_type="text/markdown",
        )
    ]
    for a in catalog().values():
        out.append(
            types.Resource(
                uri=ANALYSIS_URI.format(name=a.name),
                name=f"analysis {a.name}",
                description=f"{a.summary} (its definition: header and Cypher)",
                mime_type="text/plain",
            )
        )
    return out


def read(service: Service, uri: str) -> tuple[str, str]:
    """(MIME type, text) of a resource: the schema, an analysis's .cypher
    file, or a trace's summary (JSON)."""
    if uri == SCHEMA_URI:
        return "text/markdown", resources.files("tracegraph.cypher").joinpath("SCHEMA.md").read_text(encoding="utf-8")
    prefix_analysis, prefix_trace = ANALYSIS_URI.split("{")[0], TRACE_URI.split("{")[0]
    if uri.startswith(prefix_analysis):
        name = uri.removeprefix(prefix_analysis)
        analyses = catalog()
        if name not in analyses:
            raise NotFound(f"no analysis {name!r}")
        return "text/plain", analyses[name].text
    if uri.startswith(prefix_trace):
        trace = unquote(uri.removeprefix(prefix_trace))
        with service.holder.use() as graph:
            summary = describe_trace(graph, trace)
        return "application/json", json.dumps({k: v for k, v in asdict(summary).items() if v is not None}, default=str)
    raise NotFound(f"no resource {uri!r}")


def server(service: Service) -> Server[Any]:
    """The MCP server answering with ``service``, one call at a time."""
    listed = tools()
    lock = threading.Lock()  # one statement at a time from one assistant: the limits are per call

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        def answer() -> dict[str, Any]:
            with lock:
                return service.call(params.name, dict(params.arguments or {}))

        try:
            body = await anyio.to_thread.run_sync(answer)
        except UserError as e:
            return types.CallToolResult(content=[types.TextContent(text=first_line(e))], is_error=True)
        text = json.dumps(body, default=str)
        return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=body)

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=resource_list())

    async def list_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        template = types.ResourceTemplate(
            uri_template=TRACE_URI,
            name="trace",
            description="A stored trace's summary: its facts and counts (JSON)",
            mime_type="application/json",
        )
        return types.ListResourceTemplatesResult(resource_templates=[template])

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        def text() -> tuple[str, str]:
            with lock:
                return read(service, str(params.uri))

        try:
            mime, body = await anyio.to_thread.run_sync(text)
        except UserError as e:
            raise MCPError(types.INVALID_PARAMS, first_line(e)) from None
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=params.uri, text=body, mime_type=mime)]
        )

    return Server(
        "tracegraph",
        version=tracegraph.__version__,
        instructions="Deep-learning execution traces as a graph: list traces, ingest one, then run the "
        "catalog's analyses (each a tool) or read-only Cypher over the graph.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
    )


def serve_stdio(db: str | None, root: Path | None = None) -> int:
    """Serve over stdin/stdout until the client closes them."""
    settings = McpSettings(Path(root or os.getcwd()).resolve(), Settings.from_env())
    srv = server(Service(db, settings))

    async def run() -> None:
        async with stdio_server() as (read, write):
            await Server.run(srv, read, write, srv.create_initialization_options())

    anyio.run(run)
    return 0


# ---------------------------------------------------------------- streamable HTTP


class RequireKey:
    """ASGI middleware: a request without ``Authorization: Bearer <key>``
    is answered 401 before it reaches the MCP app (lifespan events pass)."""

    def __init__(self, app: ASGIApp, key: str) -> None:
        self.app = app
        self.key = f"Bearer {key}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.key):
                body = json.dumps(
                    {"detail": "missing or wrong API key: send Authorization: Bearer <TRACEGRAPH_API_KEY>"}
                )
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")],
                    }
                )
                await send({"type": "http.response.body", "body": body.encode()})
                return
        await self.app(scope, receive, send)


def http_app(service: Service, host: str, api_key: str | None) -> Any:
    """The streamable HTTP app (``/mcp``), behind the key when there is one."""
    app = server(service).streamable_http_app(streamable_http_path="/mcp", host=host)
    return RequireKey(app, api_key) if api_key else app


def serve_http(db: str | None, root: Path | None, host: str, port: int) -> int:
    """Serve streamable HTTP with uvicorn until SIGINT/SIGTERM."""
    import uvicorn

    limits = Settings.from_env()
    check_exposure(host, limits)
    settings = McpSettings(Path(root or os.getcwd()).resolve(), limits)
    app = http_app(Service(db, settings), host, limits.api_key)
    config = uvicorn.Config(app, host=host, port=port, lifespan="on", server_header=False, log_level="warning")
    try:
        uvicorn.Server(config).run()
    except SystemExit as e:  # uvicorn exits 3 when it cannot bind
        return 0 if e.code in (0, None) else 1
    return 0
