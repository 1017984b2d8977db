"""The Neo4j Browser kit: a guide to the analysis catalog, made for one
trace at request time, the style sheet, and the CORS answers the Browser
needs to fetch them.

``:play http://localhost:8000/browser/guide.html`` lists the database's
traces, each with the ``:play`` line of its own guide
(``...guide.html?trace=NAME``). A trace's guide has a slide for every
analysis that trace can answer (chosen by the facts its Trace node
records, as ``query`` chooses ``not available``), with the parameters set
to values that fit it: an op on its critical path for the neighborhood
analyses, its memory peak's moment for ``memory-at``, another trace as the
diff's baseline. Every code block runs as shown in the Browser (2025.8),
which the guide is written around:

* the Browser fetches ``:play`` and ``:style`` URLs with ``pragma`` and
  ``cache-control`` headers (sometimes ``sentry-trace`` too), so it asks a
  CORS preflight first: :class:`BrowserKitCors` answers it on ``/browser/``;
* it strips anything that looks like an ``on...=`` attribute anywhere in
  the HTML, code included (:data:`BROWSER_SANITIZER`): every ``=`` of the
  text goes out as ``&#61;``, and :func:`check_sanitizer` refuses a guide
  the sanitizer would still change;
* ``:params {n: 10}`` stores 10 as a float (LIMIT refuses it), so each
  parameter gets a ``:param name => value`` block of its own (evaluated by
  the server: integers stay integers; several in one block are a syntax
  error), and a block ending in `` null`` does nothing when clicked, so
  no value is spelled ``null`` (``NULL`` is the same Cypher value);
* a slide sets its own parameters only: ``$trace`` is set once, on the
  first slide, so a user's choice there holds for every slide;
* "Connect result nodes", on by default, adds every relationship between
  the returned nodes to a drawing: the first slide turns it off
  (``:config autoComplete: false``), so a graph analysis shows exactly the
  relationships it returns.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from html import escape
from importlib import resources
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, PlainTextResponse
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tracegraph.api import browser_token
from tracegraph.api.deps import AppGraph, AppSettings
from tracegraph.api.models import BrowserLink
from tracegraph.db.base import Graph
from tracegraph.queries.catalog import Analysis, Param
from tracegraph.queries.guide import guide_inputs

router = APIRouter(tags=["neo4j browser"])

# Neo4j Browser's guide sanitizer (shared/services/remoteUtils.ts, 2025.8):
# it deletes every match from the fetched HTML before showing it.
BROWSER_SANITIZER = re.compile(r"""(\s+(on[^\s=]+)[^\s=]*\s*=\s*("[^"]*"|'[^']*'|[\w\-.:]+\s*))""", re.I | re.A)

# -- CORS ------------------------------------------------------------------------

KIT_PREFIX = "/browser/"
# A header list as browsers send it in Access-Control-Request-Headers.
_HEADER_LIST = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+(\s*,\s*[A-Za-z0-9!#$%&'*+.^_`|~-]+)*$")


class BrowserKitCors:
    """CORS for the kit's routes (``/browser/*``), for any origin, read-only.

    Neo4j Browser is served from another origin than the API (Neo4j's
    port, or a page of its own), and it fetches ``:play`` and ``:style``
    URLs with extra request headers, so the browser it runs in asks a
    preflight first. The preflight (OPTIONS) is answered here, before
    routing and without the API key (a preflight never carries
    credentials and gets no data): 204, any origin, GET and HEAD only, and
    whatever request headers it asks for (the Browser adds
    ``sentry-trace`` on some page loads, so no fixed list will do). Every
    answer on the kit's routes, errors included, carries
    ``Access-Control-Allow-Origin: *``, so the Browser can show them.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(KIT_PREFIX):
            await self.app(scope, receive, send)
            return
        if scope["method"] == "OPTIONS":
            asked = Headers(scope=scope)
            headers = [
                (b"access-control-allow-origin", b"*"),
                (b"access-control-allow-methods", b"GET, HEAD, OPTIONS"),
                (b"access-control-max-age", b"600"),
                (b"vary", b"Access-Control-Request-Headers"),
                (b"content-length", b"0"),
            ]
            wanted = asked.get("access-control-request-headers", "").strip()
            if wanted and _HEADER_LIST.match(wanted):
                headers.append((b"access-control-allow-headers", wanted.encode("latin-1")))
            if asked.get("access-control-request-private-network") == "true":
                headers.append((b"access-control-allow-private-network", b"true"))
            await send({"type": "http.response.start", "status": 204, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return

        async def send_with_origin(message: Message) -> None:
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"access-control-allow-origin"]
                message = {**message, "headers": [*kept, (b"access-control-allow-origin", b"*")]}
            await send(message)

        await self.app(scope, receive, send_with_origin)


# -- routes ----------------------------------------------------------------------


def guide(request: Request, graph: AppGraph, trace: str | None = None) -> HTMLResponse:
    base = str(request.base_url).rstrip("/")
    # (checked by require_key: the guide's links carry the token it was fetched with)
    token = request.query_params.get("token") if request.app.state.settings.api_key else None
    return HTMLResponse(guide_for(graph, base, trace, token))


def guide_for(graph: Graph, base_url: str, trace: str | None, token: str | None = None) -> str:
    """The guide as the route sends it: the trace list, or ``trace``'s guide."""
    known = guide_inputs(graph, trace)
    if known.facts is None:
        return render_guide(base_url, known.traces, None, asked=trace, token=token)
    return render_guide(
        base_url,
        known.traces,
        known.facts,
        analyses=known.analyses,
        unavailable=known.unavailable,
        values=known.values,
        token=token,
    )


def grass() -> PlainTextResponse:
    return PlainTextResponse(style_sheet())


router.add_api_route(
    "/browser/guide.html",
    guide,
    methods=["GET"],
    response_class=HTMLResponse,
    summary="Neo4j Browser guide: the traces (`:play http://localhost:8000/browser/guide.html`), "
    "or one trace's analyses (`...guide.html?trace=NAME`)",
)
router.add_api_route("/browser/guide.html", guide, methods=["HEAD"], include_in_schema=False)
router.add_api_route(
    "/browser/tracegraph.grass",
    grass,
    methods=["GET"],
    response_class=PlainTextResponse,
    summary="Neo4j Browser style sheet (`:style http://localhost:8000/browser/tracegraph.grass`)",
)
router.add_api_route("/browser/tracegraph.grass", grass, methods=["HEAD"], include_in_schema=False)


def link(request: Request, settings: AppSettings) -> BrowserLink:
    base = str(request.base_url).rstrip("/")
    token = browser_token.make(settings.api_key, settings.browser_link_s) if settings.api_key else None
    expires = None
    if token is not None:
        expires = datetime.fromtimestamp(browser_token.expires_at(token), UTC).isoformat(timespec="seconds")
    return BrowserLink(
        play=":play " + _with_token(base + "/browser/guide.html", token),
        style=":style " + _with_token(base + "/browser/tracegraph.grass", token),
        expires_at=expires,
    )


router.add_api_route(
    "/browser/link",
    link,
    methods=["POST"],
    response_model=BrowserLink,
    summary="The `:play` and `:style` lines for Neo4j Browser; with an API key, they carry a token that opens "
    "those two pages only, for TRACEGRAPH_BROWSER_LINK_S seconds (the key itself never goes into a URL)",
)


def style_sheet() -> str:
    return resources.files("tracegraph.cypher").joinpath("tracegraph.grass").read_text(encoding="utf-8")


# -- rendering -------------------------------------------------------------------


def cypher_literal(v: object) -> str:
    """A value as Cypher text for a ``:param`` block. None is ``NULL``: the
    Browser ignores a clicked block whose text ends in `` null``."""
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    return "'" + str(v).replace("\\", "\\\\").replace("'", "\\'") + "'"


def header_values(analysis: Analysis) -> dict[str, str]:
    """The ``:param name => value`` lines of the header's ``Neo4j Browser:``
    block, as {name: Cypher text}."""
    out: dict[str, str] = {}
    for line in analysis.definition.split("Neo4j Browser:", 1)[-1].splitlines():
        s = line.strip()
        if s.startswith(":param ") and "=>" in s:
            name, value = s[len(":param ") :].split("=>", 1)
            out[name.strip()] = value.strip()
    return out


def param_blocks(analysis: Analysis, values: Mapping[str, Any]) -> list[str]:
    """One ``:param`` command per parameter but ``trace``: a default where
    the header has one, else the trace's own value (``values``), else the
    header's example."""
    blocks = []
    for p in analysis.params:
        if p.name == "trace":
            continue
        if not p.required:
            text = cypher_literal(p.default)
        elif p.name in values and values[p.name] is not None:
            text = cypher_literal(values[p.name])
        else:
            text = header_values(analysis)[p.name]
            text = "NULL" if text == "null" else text
        blocks.append(f":param {p.name} => {text}")
    return blocks


def _text(s: str) -> str:
    """Text for the guide's HTML: escaped, every ``=`` as ``&#61;`` (the
    Browser's sanitizer needs a literal ``=`` to cut anything)."""
    return escape(s).replace("=", "&#61;")


def _runnable(code: str) -> str:
    return f'<pre mode="cypher" class="pre-scrollable code runnable">{_text(code)}</pre>'


def _slide(title: str, lead: str, body: str) -> str:
    return (
        f'<slide class="row-fluid"><div class="col-sm-3"><h3>{_text(title)}</h3>'
        f'<p class="lead">{lead}</p></div><div class="col-sm-9">{body}</div></slide>'
    )


def _type_text(p: Param) -> str:
    return f"{p.type}({', '.join(p.choices)})" if p.choices else p.type


def _definition_html(analysis: Analysis) -> str:
    text = analysis.definition.split("Neo4j Browser:")[0].strip()
    paras = [" ".join(p.split()) for p in text.split("\n\n") if p.strip()]
    return "".join(f"<p>{_text(p)}</p>" for p in paras)


def _has(facts: Mapping[str, Any]) -> str:
    flags = [k[len("has_") :] for k, v in sorted(facts.items()) if k.startswith("has_") and v]
    return ", ".join(flags) or "ops only"


def check_sanitizer(html: str) -> str:
    """``html`` unchanged, or ValueError naming what Neo4j Browser's
    sanitizer would cut out of it."""
    m = BROWSER_SANITIZER.search(html)
    if m:
        raise ValueError(f"Neo4j Browser would cut {m.group(0)!r} out of the guide")
    return html


def render_guide(
    base_url: str,
    traces: list[dict[str, Any]],
    facts: Mapping[str, Any] | None,
    *,
    analyses: list[Analysis] | None = None,
    unavailable: list[tuple[Analysis, str]] | None = None,
    values: Mapping[str, Any] | None = None,
    asked: str | None = None,
    token: str | None = None,
) -> str:
    """The guide as one HTML fragment (``<article class="guide">``): for
    the trace ``facts`` describes, its ``analyses`` with their parameter
    ``values`` and the ``unavailable`` ones with the reason; without it,
    the list of ``traces`` (``asked``: a trace name that is not among them).

    ``token``: the Browser link's token the guide was fetched with
    (:mod:`tracegraph.api.browser_token`), passed on to the style sheet's
    and the other guides' URLs (the Browser cannot send an Authorization
    header)."""
    base = base_url.rstrip("/")
    slides = [_first_slide(base, token, traces, facts, asked)]
    if facts is None:
        # A guide of one slide is shown without its blocks' click handlers.
        slides.append(_further_slide(base))
    else:
        trace = facts["trace"]
        for a in analyses or []:
            slides.append(_analysis_slide(a, base, trace, values or {}))
        if unavailable:
            items = "".join(f"<li><b>{_text(a.name)}</b>: {_text(why)}</li>" for a, why in unavailable)
            slides.append(
                _slide(
                    "Not for this trace",
                    f"What {_text(trace)} cannot answer.",
                    f"<p>These analyses need what trace <b>{_text(trace)}</b> does not record:</p><ul>{items}</ul>",
                )
            )
        slides.append(_further_slide(base))
    html = (
        '<article class="guide"><carousel class="deck container-fluid">' + "".join(slides) + "</carousel></article>\n"
    )
    return check_sanitizer(html)


def _with_token(url: str, token: str | None) -> str:
    return url + (("&" if "?" in url else "?") + "token=" + quote(token, safe="") if token else "")


def _trace_list(base: str, token: str | None, traces: list[dict[str, Any]], current: str | None) -> str:
    """Every trace but ``current``, each with the ``:play`` line of its guide."""
    items = []
    for t in traces:
        if t["trace"] == current:
            continue
        facts = f"{t.get('framework') or 'unknown framework'}, {t.get('ops') or 0:,} ops; has: {_has(t)}"
        items.append(
            f"<li><b>{_text(t['trace'])}</b> ({_text(facts)})"
            + _runnable(f":play {_with_token(base + '/browser/guide.html?trace=' + quote(t['trace'], safe=''), token)}")
            + "</li>"
        )
    return f"<ul>{''.join(items)}</ul>"


def _first_slide(
    base: str,
    token: str | None,
    traces: list[dict[str, Any]],
    facts: Mapping[str, Any] | None,
    asked: str | None,
) -> str:
    intro = (
        "<p>tracegraph stores deep-learning execution traces as graphs: ops, kernels, tensors, "
        "allocations, devices and streams, with the dependencies between ops. Every analysis is one "
        "Cypher query that reads one trace.</p>"
    )
    setup = (
        "<p>Load the tracegraph style sheet (colors by label, names as captions, the critical path in "
        "thick red), or drag <code>cypher/tracegraph.grass</code> onto this window:</p>"
        + _runnable(f":style {_with_token(base + '/browser/tracegraph.grass', token)}")
        + "<p>Draw only what a query returns: by default the Browser adds every relationship between the "
        "nodes it draws (Settings, <i>Connect result nodes</i>), and around a path that is a tangle of "
        "dependencies. This turns it off (<code>:config autoComplete: true</code> turns it back on):</p>"
        + _runnable(":config autoComplete: false")
    )
    if facts is None:
        missing = f"<p>No trace named <b>{_text(asked)}</b> in this database.</p>" if asked is not None else ""
        if not traces:
            pick = (
                "<p>This database holds no trace yet: load one with <code>tracegraph ingest FILE --trace NAME</code> "
                f"(or <code>POST {_text(base)}/traces</code>), then play this guide again.</p>"
            )
        else:
            pick = "<p>Pick a trace: each line plays the guide to it.</p>" + _trace_list(base, token, traces, None)
        return _slide("tracegraph", "Deep-learning execution traces as a graph.", intro + missing + pick + setup)
    trace = facts["trace"]
    others = [t for t in traces if t["trace"] != trace]
    body = (
        intro + f"<p>This guide is for trace <b>{_text(trace)}</b> ({_text(str(facts.get('framework')))}, "
        f"{facts.get('ops') or 0:,} ops; has: {_text(_has(facts))}): each of its slides is an analysis this "
        "trace can answer. First make it the trace every query reads (the <code>$trace</code> parameter; "
        "the slides leave it alone, so another trace set here holds for all of them):</p>"
        + _runnable(f":param trace => {cypher_literal(trace)}")
        + setup
        + "<p>The trace, as its Trace node records it:</p>"
        + _runnable(
            "MATCH (t:Trace {trace: $trace})\nWHERE t.status = 'ready'\n"
            "RETURN t.trace AS trace, t.framework AS framework, t.ops AS ops, t.span_us AS span_us,\n"
            "       t.critical_path_us AS critical_path_us, t.observed_path_us AS observed_path_us,\n"
            "       t.memory_peak_bytes AS memory_peak_bytes"
        )
        + ("<p>Other traces in this database:</p>" + _trace_list(base, token, traces, trace) if others else "")
    )
    return _slide("tracegraph", f"Trace {_text(trace)}: the analyses it can answer, runnable.", body)


def _analysis_slide(a: Analysis, base: str, trace: str, values: Mapping[str, Any]) -> str:
    params = [p for p in a.params if p.name != "trace"]
    described = "".join(
        f"<li><code>{_text(p.name)}</code> ({_text(_type_text(p))}, "
        f"{'required' if p.required else 'default ' + _text(cypher_literal(p.default))}): {_text(p.doc)}</li>"
        for p in params
    )
    table = f"<p>Parameters:</p><ul>{described}</ul>" if params else ""
    setup = (
        "<p>Set its parameters, one block each (the trace is the one set on the first slide):</p>"
        + "".join(_runnable(b) for b in param_blocks(a, values))
        if params
        else "<p>Its only parameter is the trace, set on the first slide.</p>"
    )
    cols = "".join(f"<li><code>{_text(c.name)}</code>: {_text(c.doc)}</li>" for c in a.columns)
    view = (
        "<p>It returns paths: the result opens as a drawing (with the style sheet loaded, and <i>Connect "
        "result nodes</i> off as the first slide sets it). Double-click a node to add its neighbors.</p>"
        if a.graph
        else ""
    )
    api = (
        f"<p>Over HTTP: <code>GET {_text(base)}/traces/{_text(quote(trace, safe=''))}/queries/{_text(a.name)}</code>; "
        f"from the shell: <code>tracegraph query {_text(a.name)} --trace {_text(trace)}</code>.</p>"
    )
    body = (
        f"<p>{_text(a.summary)}</p>{table}{setup}<p>Run it:</p>"
        + _runnable(a.statement)
        + view
        + f"<p>Columns:</p><ul>{cols}</ul>"
        + _definition_html(a)
        + api
    )
    return _slide(a.name, _text(a.summary), body)


def _further_slide(base: str) -> str:
    return _slide(
        "Further",
        "Ad-hoc Cypher, the API, the CLI.",
        "<p>The graph schema is in <code>cypher/SCHEMA.md</code> (or run <code>CALL db.schema.visualization()</code>). "
        "Anchor every query on <code>{trace: $trace}</code>. For example, the ops that launched the most "
        "kernels, with their kernels:</p>"
        + _runnable(
            "MATCH (o:Op {trace: $trace})-[:LAUNCHED]->(k:Kernel)\nWITH o, count(k) AS kernels\n"
            "ORDER BY kernels DESC, o.name LIMIT 3\nMATCH p = (o)-[:LAUNCHED]->(:Kernel)\nRETURN p"
        )
        + f"<p>The same queries run over HTTP (<code>POST {_text(base)}/cypher</code>, read-only); the "
        f'API\'s reference is at <a href="{escape(base)}/docs" target="_blank">{_text(base)}/docs</a>.</p>',
    )
