"""The Neo4j Browser kit: the guide, generated from the catalog at request
time, and the style sheet.

Neo4j Browser plays it with ``:play http://HOST:8000/browser/guide.html``
(the host must be in ``browser.remote_content_hostname_allowlist``; the
API answers with CORS headers so the Browser may fetch it). Every code
block is runnable: clicking it puts it in the Browser's editor.
"""

from __future__ import annotations

from html import escape
from importlib import resources
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, PlainTextResponse

from tracegraph.queries.catalog import Analysis, Param, catalog

router = APIRouter(tags=["neo4j browser"])
# Neo4j Browser fetches the guide and the style sheet from its own origin.
CORS = {"Access-Control-Allow-Origin": "*"}


@router.get(
    "/browser/guide.html",
    response_class=HTMLResponse,
    summary="Neo4j Browser guide to the catalog (`:play http://HOST:8000/browser/guide.html`)",
)
def guide(request: Request, trace: str = "alexnet") -> HTMLResponse:
    base = str(request.base_url).rstrip("/")
    key = request.query_params.get("key") if request.app.state.settings.api_key else None
    return HTMLResponse(render_guide(base, trace=trace, key=key), headers=CORS)


@router.get(
    "/browser/tracegraph.grass",
    response_class=PlainTextResponse,
    summary="Neo4j Browser style sheet (`:style http://HOST:8000/browser/tracegraph.grass`)",
)
def grass() -> PlainTextResponse:
    text = resources.files("tracegraph.cypher").joinpath("tracegraph.grass").read_text(encoding="utf-8")
    return PlainTextResponse(text, headers=CORS)


def browser_params(analysis: Analysis, trace: str) -> list[tuple[str, str]]:
    """(name, Cypher value) of the header's ``Neo4j Browser:`` block
    (``:param name => value`` lines), the trace replaced; parameters the
    block lacks get their defaults."""
    out: dict[str, str] = {}
    for line in analysis.definition.splitlines():
        s = line.strip()
        if s.startswith(":param ") and "=>" in s:
            name, value = s[len(":param ") :].split("=>", 1)
            out[name.strip()] = value.strip()
    if any(p.name == "trace" for p in analysis.params):
        out["trace"] = _cypher_string(trace)
    for p in analysis.params:
        if p.name not in out and p.default is not None:
            out[p.name] = _cypher_literal(p.default)
    order = [p.name for p in analysis.params]
    return sorted(out.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order))


def params_command(pairs: list[tuple[str, str]]) -> str:
    """One Browser command that sets them all: ``:params {trace: 'x', n: 10}``."""
    return ":params {" + ", ".join(f"{k}: {v}" for k, v in pairs) + "}"


def _cypher_string(s: str) -> str:
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _cypher_literal(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    return _cypher_string(str(v))


def _type_text(p: Param) -> str:
    return f"{p.type}({', '.join(p.choices)})" if p.choices else p.type


def _definition_html(analysis: Analysis) -> str:
    text = analysis.definition.split("Neo4j Browser:")[0].strip()
    paras = [" ".join(p.split()) for p in text.split("\n\n") if p.strip()]
    return "".join(f"<p>{escape(p)}</p>" for p in paras)


def _runnable(code: str) -> str:
    return f'<pre mode="cypher" class="pre-scrollable code runnable">{escape(code)}</pre>'


def _slide(title: str, lead: str, body: str) -> str:
    return (
        f'<slide class="row-fluid"><div class="col-sm-3"><h3>{escape(title)}</h3>'
        f'<p class="lead">{lead}</p></div><div class="col-sm-9">{body}</div></slide>'
    )


def render_guide(base_url: str, trace: str = "alexnet", key: str | None = None) -> str:
    """The whole guide as one HTML fragment (``<article class="guide">``).

    ``key``: the API key the guide was fetched with, passed on to the
    style sheet's URL (Neo4j Browser cannot send an Authorization header).
    """
    base = base_url.rstrip("/")
    grass_url = f"{base}/browser/tracegraph.grass" + (f"?key={quote(key)}" if key else "")
    items = list(catalog().values())
    slides = []
    overview = "".join(
        f"<li><b>{escape(a.name)}</b>{' (graph)' if a.graph else ''}: {escape(a.summary)}</li>" for a in items
    )
    slides.append(
        _slide(
            "tracegraph",
            "Deep-learning execution traces as a graph: the analysis catalog, runnable.",
            "<p>Every analysis is one Cypher query that reads one trace. Pick the trace first: the "
            "<code>$trace</code> parameter is what every query anchors on.</p>"
            + _runnable(f":param trace => {_cypher_string(trace)}")
            + "<p>The traces in this database:</p>"
            + _runnable(
                "MATCH (t:Trace)\nWHERE t.status = 'ready'\n"
                "RETURN t.trace AS trace, t.framework AS framework, t.ops AS ops, t.span_us AS span_us,\n"
                "       t.critical_path_us AS critical_path_us, t.memory_peak_bytes AS memory_peak_bytes\n"
                "ORDER BY trace"
            )
            + "<p>Load the tracegraph style sheet (colors by label, op names as captions, the critical "
            "path in thick red) before the graph analyses:</p>"
            + _runnable(f":style {grass_url}")
            + "<p>(or drag <code>cypher/tracegraph.grass</code> onto the Browser window). "
            "To see the schema, run <code>CALL db.schema.visualization()</code>.</p>"
            + f"<p>The analyses:</p><ul>{overview}</ul>",
        )
    )
    for a in items:
        params = [p for p in a.params if p.name != "trace"]
        rows = "".join(
            f"<tr><td><code>{escape(p.name)}</code></td><td>{escape(_type_text(p))}</td>"
            f"<td>{'required' if p.required else escape(repr(p.default) if p.default is not None else 'null')}</td>"
            f"<td>{escape(p.doc)}</td></tr>"
            for p in params
        )
        table = (
            (
                f'<table class="table table-condensed"><tr><th>parameter</th><th>type</th><th>default</th>'
                f"<th></th></tr>{rows}</table>"
            )
            if params
            else ""
        )
        cols = "".join(f"<li><code>{escape(c.name)}</code>: {escape(c.doc)}</li>" for c in a.columns)
        setup = params_command(browser_params(a, trace))
        needs = f"<p>Needs a trace with: {escape(', '.join(f.value for f in a.requires))}.</p>" if a.requires else ""
        view = (
            (
                "<p>It returns paths: look at the <b>Graph</b> view of the result (with the style sheet "
                "loaded). Double-click a node to expand its neighbors.</p>"
            )
            if a.graph
            else ""
        )
        api = (
            f"<p>Over HTTP: <code>GET {escape(base)}/traces/{escape(trace)}/queries/{escape(a.name)}</code>; "
            f"from the shell: <code>tracegraph query {escape(a.name)} --trace {escape(trace)}</code>.</p>"
        )
        body = (
            f"<p>{escape(a.summary)}</p>{needs}{table}"
            + "<p>Set the parameters:</p>"
            + _runnable(setup)
            + "<p>Run the analysis:</p>"
            + _runnable(a.statement)
            + view
            + f"<p>Columns:</p><ul>{cols}</ul>"
            + _definition_html(a)
            + api
        )
        slides.append(_slide(a.name, escape(a.summary), body))
    slides.append(
        _slide(
            "Further",
            "Ad-hoc Cypher, the API, the CLI.",
            "<p>The graph schema is in <code>cypher/SCHEMA.md</code>. Every query should anchor on "
            "<code>{trace: $trace}</code>. For example, an op and everything it launched:</p>"
            + _runnable(
                "MATCH p = (o:Op {trace: $trace})-[:LAUNCHED]->(:Kernel)-[:ON_STREAM]->(:Stream)\nRETURN p LIMIT 50"
            )
            + f"<p>The same queries run over HTTP (<code>POST {escape(base)}/cypher</code>, read-only) and "
            f'the API\'s reference is at <a href="{escape(base)}/docs" target="_blank">{escape(base)}/docs</a>.</p>',
        )
    )
    return (
        '<article class="guide"><carousel class="deck container-fluid">' + "".join(slides) + "</carousel></article>\n"
    )
