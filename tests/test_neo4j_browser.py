"""The Neo4j Browser kit: the guide, the style sheet and their CORS
answers, checked on both engines, and then used in the real Neo4j Browser.

On both engines (through the HTTP API): the preflight Neo4j Browser sends
before it fetches the guide or the style sheet gets 204 with CORS headers
for any origin and the request headers it asks for; a trace's guide has a
slide for exactly the analyses the trace can answer (by its Trace node's
facts), sets ``$trace`` once, sets every other parameter in a block of
its own, survives the Browser's sanitizer unchanged, and every block runs:
each ``:param`` value evaluated by the database as the Browser has it
evaluated (integers stay integers), each query answering what the API
answers with the same parameters. For a TensorFlow, a PyTorch (Kineto +
Execution Trace), an XPlane (JAX) and a multi-rank trace.

In the Browser (the official build at ``../shared/neo4j-browser``, or
``$TRACEGRAPH_NEO4J_BROWSER``; ``tests/run.sh`` serves it and passes its
URL in ``$TRACEGRAPH_TEST_NEO4J_BROWSER``), against the test Neo4j and a
``tracegraph serve`` on it, driven through Playwright and the system's
Chromium: for the TF, PyTorch and multi-rank traces, ``:play`` the guide
and click every code block of every slide; no frame is an error, and each
graph analysis draws exactly the nodes and relationships its answer holds
(the API's, counted independently). The style sheet loads by URL (a block
of the guide) and pasted after ``:style`` alike, to the same rules.
Screenshots of the graph views go to tests/artifacts/neo4j-browser/.
Without Neo4j, the Browser build, Chromium or Playwright, the Browser
tests are skipped and say why.
"""

from __future__ import annotations

import contextlib
import html
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from conftest import NEO4J_URI, NO_NEO4J, SEED_OPLIST, SEED_STEPSTATS
from fastapi.testclient import TestClient

from tracegraph.api.app import create_app
from tracegraph.api.guide import BROWSER_SANITIZER, check_sanitizer, render_guide
from tracegraph.api.settings import Settings
from tracegraph.db.base import LABELS
from tracegraph.output import readable_rows
from tracegraph.queries.catalog import catalog, parse_header
from tracegraph.queries.run import run_analysis
from tracegraph.schema import RELATIONSHIPS

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # bench/ is a plain folder of the repository
from bench.browser import browser_context, free_port, serve, why_no_browser  # noqa: E402

EXAMPLES = ROOT / "examples" / "traces"
ARTIFACTS = ROOT / "tests" / "artifacts" / "neo4j-browser"
KIT = {
    "kit-tf": [SEED_STEPSTATS, SEED_OPLIST],
    "kit-pytorch": [EXAMPLES / "pytorch-mlp-train.kineto.json.gz", EXAMPLES / "pytorch-mlp-train.et.json.gz"],
    "kit-xplane": [EXAMPLES / "jax-train-step.xplane.pb.gz"],
    "kit-ranks": sorted(EXAMPLES.glob("pytorch-gloo-straggler.rank*.json.gz")),
}
# The traces played in the Browser (XPlane's guide is checked on the engines only).
PLAYED = ("kit-tf", "kit-pytorch", "kit-ranks")
GRAPH_VIEWS = ("critical-path-graph", "observed-critical-path-graph", "peak-tensors-graph", "op-neighborhood-graph")


@pytest.fixture(scope="module")
def kit(session_graph):
    from tracegraph.ingest.pipeline import ingest

    for name, paths in KIT.items():
        ingest(session_graph, paths, name, replace=True)
    yield session_graph
    for name in KIT:
        session_graph.drop_trace(name)


@pytest.fixture(scope="module")
def client(kit, db_uri):
    app = create_app(db_uri, Settings(api_key=None))
    with TestClient(app) as c:
        yield c


# -- what the guide says, parsed back -------------------------------------------------

SLIDE = re.compile(r"<slide\b.*?</slide>", re.S)
BLOCK = re.compile(r'<pre mode="cypher" class="pre-scrollable code runnable">(.*?)</pre>', re.S)


def slides(page: str) -> list[tuple[str, list[str]]]:
    """(title, code blocks as the Browser shows them) per slide."""
    out = []
    for s in SLIDE.findall(page):
        title = html.unescape(re.search(r"<h3>(.*?)</h3>", s).group(1))
        out.append((title, [html.unescape(b) for b in BLOCK.findall(s)]))
    return out


def param_block(block: str) -> tuple[str, str]:
    m = re.fullmatch(r":param (\w+) => (.+)", block)
    assert m, f"not one `:param name => value`: {block!r}"
    return m[1], m[2]


# -- CORS ---------------------------------------------------------------------------


def test_preflight_answers_any_origin_and_the_headers_asked(client):
    for path in ("/browser/guide.html", "/browser/tracegraph.grass", "/browser/guide.html?trace=kit-tf"):
        r = client.options(
            path,
            headers={
                "Origin": "http://localhost:7474",
                "Access-Control-Request-Method": "GET",
                "Access-Control-Request-Headers": "pragma,cache-control,sentry-trace",
            },
        )
        assert r.status_code == 204, path
        assert r.headers["access-control-allow-origin"] == "*"
        assert r.headers["access-control-allow-headers"] == "pragma,cache-control,sentry-trace"
        assert r.headers["access-control-allow-methods"] == "GET, HEAD, OPTIONS"
        got = client.get(path, headers={"Origin": "http://localhost:7474", "Pragma": "no-cache"})
        assert got.status_code == 200 and got.headers["access-control-allow-origin"] == "*"
        head = client.head(path)
        assert head.status_code == 200 and head.headers["access-control-allow-origin"] == "*"
    # Read-only: a write is not among the methods, and the rest of the API answers no preflight.
    assert client.post("/browser/guide.html").status_code == 405
    assert client.options("/traces", headers={"Access-Control-Request-Method": "GET"}).status_code == 405


def test_preflight_needs_no_key_but_the_guide_does(kit, db_uri):
    with TestClient(create_app(db_uri, Settings(api_key="k3y"))) as c:
        r = c.options("/browser/guide.html", headers={"Access-Control-Request-Method": "GET"})
        assert r.status_code == 204 and r.headers["access-control-allow-origin"] == "*"
        denied = c.get("/browser/guide.html")  # the Browser can show it: it carries the CORS header too
        assert denied.status_code == 401 and denied.headers["access-control-allow-origin"] == "*"
        assert c.get("/browser/guide.html?trace=kit-tf&key=k3y").status_code == 401  # never the key in a URL
        token = c.post("/browser/link", headers={"Authorization": "Bearer k3y"}).json()["play"].split("token=")[1]
        page = c.get(f"/browser/guide.html?trace=kit-tf&token={token}").text
        blocks = [b for _, bs in slides(page) for b in bs]
        assert f":style http://testserver/browser/tracegraph.grass?token={token}" in blocks
        assert f":play http://testserver/browser/guide.html?trace=kit-pytorch&token={token}" in blocks


# -- the sanitizer ---------------------------------------------------------------------


def test_the_sanitizer_is_the_browsers_and_cannot_cut_the_guide():
    # What the Browser did to critical-path-graph's one-op branch (issue 28).
    assert BROWSER_SANITIZER.sub("", "WHERE only.cp_step = lo\nRETURN 1 AS ops") == "WHERERETURN 1 AS ops"
    assert BROWSER_SANITIZER.sub("", '<p onclick="x()">a</p> one=1') == "<p>a</p>"
    with pytest.raises(ValueError, match="onclick"):
        check_sanitizer('<p onclick="x()">a</p>')
    # An analysis whose Cypher the sanitizer would cut goes out with its `=`
    # as &#61;, so the Browser shows it whole.
    text = (ROOT / "cypher" / "top-ops.cypher").read_text()
    risky = parse_header(text.replace("RETURN", "WITH o WHERE only.x = lo OR once= 1 RETURN", 1), "top-ops.cypher")
    facts = {"trace": "t", "framework": "tensorflow", "ops": 1}
    page = render_guide("http://localhost:8000", [facts], facts, analyses=[risky], values={})
    assert not BROWSER_SANITIZER.search(page)
    assert risky.statement in [b for _, bs in slides(BROWSER_SANITIZER.sub("", page)) for b in bs]


# -- the guide, on both engines ----------------------------------------------------------


def test_guide_without_a_trace_lists_the_traces(client):
    page = client.get("/browser/guide.html").text
    (_intro, blocks), *rest = slides(page)
    assert rest, "a guide of one slide would be shown without its blocks' click handlers"
    plays = {b for b in blocks if b.startswith(":play ")}
    assert {f":play http://testserver/browser/guide.html?trace={name}" for name in KIT} <= plays
    assert ":config autoComplete: false" in blocks
    unknown = client.get("/browser/guide.html?trace=no-such-trace").text
    assert "No trace named <b>no-such-trace</b>" in unknown and len(slides(unknown)) == 2


def expected_slides(graph, trace: str, base: str) -> list[str]:
    """The analyses ``trace`` can answer, from its Trace node's flags (and
    the baseline's, for a diff), in catalog order."""
    facts = {t: graph.trace_facts(t) for t in (trace, base)}
    out = []
    for a in catalog().values():
        read = [trace] + [base for p in a.params if p.is_trace and p.name != "trace"]
        if all(facts[t].get(f.flag) for t in read for f in a.requires):
            out.append(a.name)
    return out


@pytest.mark.parametrize("trace", list(KIT))
def test_guide_for_a_trace_runs_block_by_block(client, kit, trace):
    """Every block of the guide, run as the Browser runs it: the ``:param``
    values evaluated by the database, then the query with them."""
    page = client.get(f"/browser/guide.html?trace={trace}").text
    assert not BROWSER_SANITIZER.search(page)
    shown = slides(page)
    assert shown == slides(BROWSER_SANITIZER.sub("", page))  # what the Browser shows is what was sent
    titles = [t for t, _ in shown]
    analyses = catalog()
    base = next(
        param_block(b)[1].strip("'")
        for t, bs in shown
        if t in ("trace-diff", "trace-diff-summary")
        for b in bs
        if b.startswith(":param base ")
    )
    # The diffs' baseline: another trace with times, of the same framework when there is one.
    ready = {t["trace"]: t for t in kit.list_traces()}
    others = [n for n, t in ready.items() if n != trace and t.get("has_times")]
    same = [n for n in others if ready[n].get("framework") == ready[trace].get("framework")]
    assert base in (same or others)
    expected = expected_slides(kit, trace, base)
    assert titles[0] == "tracegraph" and titles[-1] == "Further"
    assert [t for t in titles if t in analyses] == expected
    assert ("Not for this trace" in titles) == (len(expected) < len(analyses))
    every = [b for _, bs in shown for b in bs]
    assert every.count(f":param trace => '{trace}'") == 1 and f":param trace => '{trace}'" in shown[0][1]
    assert not any(b.startswith(":params") or b.endswith((" null", ":null")) for b in every)
    assert not any(b.startswith(":param trace ") for _, bs in shown[1:] for b in bs)
    for title, blocks in shown:
        if title not in analyses:
            continue
        a = analyses[title]
        *setup, statement = blocks
        assert statement == a.statement
        names = [param_block(b)[0] for b in setup]
        assert names == [p.name for p in a.params if p.name != "trace"]
        params = {"trace": trace}
        for block, p in zip(setup, (p for p in a.params if p.name != "trace"), strict=True):
            (value,) = kit.run(f"RETURN {param_block(block)[1]} AS v").rows[0]
            if p.type == "INTEGER" and value is not None:
                assert type(value) is int, (title, block)
            if p.default is not None:
                assert value == p.default, (title, block)
            params[p.name] = value
        got = kit.run(statement, params, trace=None if a.compares_traces else trace)
        api = run_analysis(kit, a.name, trace, {k: v for k, v in params.items() if k != "trace"})
        # (the API's numbers are rounded for reading; the Browser shows the database's)
        assert api.unavailable is None and readable_rows(api.columns, got.rows) == api.rows, title
        if a.graph:
            assert got.rows, f"{title} draws nothing on {trace}"


def test_guide_picks_values_from_the_trace(client, kit):
    """The values no default gives: an op on the critical path (whose
    neighborhood is drawn), the largest allocator's peak moment."""
    values = {}
    for _, blocks in slides(client.get("/browser/guide.html?trace=kit-tf").text):
        values.update(param_block(b) for b in blocks if b.startswith(":param "))
    op = values["op"].strip("'")
    ((cp_step, weight, namesakes),) = kit.run(
        "MATCH (o:Op {trace: 'kit-tf', name: $op}) MATCH (s:Op {trace: 'kit-tf', name: $op}) "
        "RETURN o.cp_step, o.path_weight_us, count(s)",
        {"op": op},
        trace="kit-tf",
    ).rows
    assert cp_step is not None and namesakes == 1
    heaviest = kit.run(
        "MATCH (o:Op {trace: 'kit-tf'}) WHERE o.cp_step IS NOT NULL RETURN max(o.path_weight_us)", trace="kit-tf"
    ).rows[0][0]
    assert weight == heaviest
    peaks = run_analysis(kit, "peak-memory", "kit-tf").rows
    assert float(values["at_us"]) == max(peaks, key=lambda r: r[1])[2]


# -- the style sheet ---------------------------------------------------------------------

GRASS = re.compile(r"(node|relationship)(?:\.(\w+))? \{ ((?:[\w-]+: (?:'[^']*'|[^;'{}]+); )+)\}")


def grass_rules(text: str) -> dict[str, dict[str, str]]:
    rules = {}
    for line in text.splitlines():
        m = GRASS.fullmatch(line)
        assert m, f"not one `selector {{ key: value; ... }}` rule on its line: {line!r}"
        selector = m[1] + (f".{m[2]}" if m[2] else "")
        rules[selector] = dict(p.split(": ", 1) for p in m[3].strip().rstrip(";").split("; "))
    return rules


def test_style_sheet_has_a_rule_per_label_and_relationship_type(client):
    r = client.get("/browser/tracegraph.grass")
    assert r.status_code == 200 and r.headers["access-control-allow-origin"] == "*"
    text = r.text
    assert text == (ROOT / "cypher" / "tracegraph.grass").read_text()
    # One rule per line: typed or pasted into the Browser's editor, whose
    # auto-closing braces reshuffle a rule that spans lines, it stays the
    # same rules (the Browser test pastes it).
    rules = grass_rules(text)
    for label in LABELS:
        rule = rules[f"node.{label}"]
        assert re.fullmatch(r"#[0-9A-F]{6}", rule["color"]) and rule["caption"].startswith("'")
        assert rule["diameter"].endswith("px")
    for rel in {r.type for r in RELATIONSHIPS}:
        assert re.fullmatch(r"#[0-9A-F]{6}", rules[f"relationship.{rel}"]["color"]), rel
    widths = {k: int(v["shaft-width"].removesuffix("px")) for k, v in rules.items() if "shaft-width" in v}
    assert widths["relationship.CRITICAL_PRED"] == max(widths.values())


# -- in the real Neo4j Browser ---------------------------------------------------------

BROWSER_BUILD = Path(os.environ.get("TRACEGRAPH_NEO4J_BROWSER") or ROOT.parent / "shared" / "neo4j-browser")


def why_no_neo4j_browser() -> str | None:
    if not NEO4J_URI:
        return NO_NEO4J
    if os.environ.get("TRACEGRAPH_TEST_NEO4J_BROWSER"):
        return why_no_browser()
    if not (BROWSER_BUILD / "serve.sh").is_file():
        return (
            f"no Neo4j Browser build at {BROWSER_BUILD} (../shared/neo4j-browser next to the repository, "
            "or TRACEGRAPH_NEO4J_BROWSER)"
        )
    return why_no_browser()


NO_BROWSER = why_no_neo4j_browser()
in_browser = pytest.mark.skipif(NO_BROWSER is not None, reason=f"Neo4j Browser tests skipped: {NO_BROWSER}")
# The Browser reads Neo4j: these tests run on its kit alone.
on_neo4j = pytest.mark.parametrize("db_uri", ["neo4j"], indirect=True)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status == 200
    except OSError:
        return False


def _wait_until_served(url: str) -> str:
    deadline = time.monotonic() + 120
    while not _answers(url + "/"):
        assert time.monotonic() < deadline, f"the Neo4j Browser build did not answer on {url}"
        time.sleep(0.2)
    return url


@pytest.fixture(scope="module")
def browser_url():
    """The Browser build's URL: run.sh's, else served here by its serve.sh (and stopped after)."""
    given = os.environ.get("TRACEGRAPH_TEST_NEO4J_BROWSER")
    if given:
        yield _wait_until_served(given.rstrip("/"))
        return
    port = free_port()
    out = subprocess.run(
        ["bash", str(BROWSER_BUILD / "serve.sh"), str(port)], capture_output=True, text=True, check=True, timeout=300
    )
    pid = int(out.stdout.split()[-1])
    try:
        yield _wait_until_served(f"http://localhost:{port}")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)


@pytest.fixture(scope="module")
def api_url(kit, tmp_path_factory):
    """``tracegraph serve`` on the test Neo4j, by the host name the
    Browser's guide allowlist has (localhost, not 127.0.0.1)."""
    home = tmp_path_factory.mktemp("browser-kit-home")
    with serve(home, env={"TRACEGRAPH_DB": NEO4J_URI}, log=home / "serve.log") as base:
        yield base.replace("127.0.0.1", "localhost")


@pytest.fixture(scope="module")
def playwright_instance():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        yield p


WAIT_MS = 120_000  # a busy 2-core machine: every wait is on a condition, with room to spare

# JavaScript over one frame element: is it finished, and is it an error?
FRAME_STATE = """(frame) => {
  const text = frame.innerText;
  const leaves = [...frame.querySelectorAll('*')].filter((e) => e.childElementCount === 0);
  const error = leaves.some((e) => e.textContent.trim() === 'ERROR')
    || /No guide by that name|Hostname is not allowed/.test(text);
  const command = frame.querySelector('[data-testid="frameCommand"]')?.innerText ?? '';
  let done = error;
  if (!done) {
    if (!command.trim().startsWith(':')) done = !!frame.querySelector('[data-testid="frame-loaded-contents"]');
    else if (/^:param /.test(command.trim())) done = /Successfully set your parameter/.test(text);
    else if (/^:play /.test(command.trim())) done = !!frame.querySelector('[data-testid="carousel"]');
    else if (/^:config /.test(command.trim())) done = /autoComplete/.test(text);
    else done = !frame.querySelector('[data-testid="spinner"]');
  }
  return {done, error, text: text.slice(0, 2000)};
}"""


class Browser:
    """One Neo4j Browser page, connected to the test Neo4j."""

    def __init__(self, page, url: str) -> None:
        self.page = page
        self.errors: list[str] = []
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        bolt = NEO4J_URI.replace("neo4j://", "bolt://")
        page.goto(f"{url}/?connectURL={bolt}&preselectAuthMethod=NO_AUTH")
        page.get_by_text("You have a working connection").wait_for(timeout=WAIT_MS)
        # Fewer result frames kept on the page (the guide's is pinned): less for a busy machine to render.
        self.type_command(":config maxFrames: 4")
        self.new_frame()

    def frames(self):
        return self.page.locator('[data-testid="frame"]')

    def mark_frames(self) -> None:
        self.frames().evaluate_all("fs => fs.forEach((f) => f.setAttribute('data-tg-seen', '1'))")

    def new_frame(self) -> dict:
        """The state of the frame the last action added (the newest frame
        not marked by the last mark_frames), once it is done."""
        done = self.page.wait_for_function(
            "() => { const f = document.querySelector('[data-testid=\"frame\"]:not([data-tg-seen])');"
            f" if (!f) return null; const s = ({FRAME_STATE})(f); return s.done ? s : null; }}",
            polling="raf",
            timeout=WAIT_MS,
        )
        return done.json_value()

    def latest(self):
        return self.page.locator('[data-testid="frame"]:not([data-tg-seen])').first

    def slide(self, guide) -> dict:
        """The guide frame's slide: its title, its blocks' text, whether a next one follows."""
        return guide.evaluate(
            "(f) => ({title: f.querySelector('.slide h3')?.innerText ?? '',"
            " blocks: [...f.querySelectorAll('pre.runnable')].map((p) => p.innerText.trim()),"
            " next: !!f.querySelector('[data-testid=\"nextSlide\"]')})"
        )

    def click_block(self, guide, index: int) -> dict:
        """Click the play icon of the guide's block ``index`` (the Browser
        runs it in a frame of its own) and return that frame's state once
        it is done."""
        guide.evaluate(
            "(f, i) => { document.querySelectorAll('[data-testid=\"frame\"]')"
            ".forEach((x) => x.setAttribute('data-tg-seen', '1'));"
            " f.querySelectorAll('pre.runnable')[i].querySelector('i.fa-play-circle-o').click(); }",
            index,
        )
        return self.new_frame()

    def next_slide(self, guide, title: str) -> None:
        guide.evaluate("(f) => f.querySelector('[data-testid=\"nextSlide\"]').click()")
        self.page.wait_for_function(
            "([t]) => (document.querySelector('[data-tg-guide] .slide h3')?.innerText ?? t) !== t", arg=[title]
        )

    def settled(self, frame) -> None:
        """Wait until the drawing in ``frame`` stops moving (its force layout has run)."""
        self.page.wait_for_function(
            """(f) => { const now = [...f.querySelectorAll('svg .node')].map((n) => n.getAttribute('transform')).join();
              const same = now !== '' && now === f.dataset.tgLayout; f.dataset.tgLayout = now; return same; }""",
            arg=frame.element_handle(),
            polling=250,
            timeout=WAIT_MS,
        )

    def type_command(self, command: str, *, paste: bool = False) -> None:
        """Into the editor and run: typed (one line), or pasted as a clipboard paste does."""
        self.mark_frames()
        self.page.locator("#monaco-main-editor").click()
        if paste:
            self.page.keyboard.insert_text(":style ")
            self.page.evaluate(
                """(text) => { const dt = new DataTransfer(); dt.setData('text/plain', text);
                document.querySelector('#monaco-main-editor textarea').dispatchEvent(
                  new ClipboardEvent('paste', {clipboardData: dt, bubbles: true, cancelable: true})); }""",
                command,
            )
        else:
            self.page.keyboard.insert_text(command)
        self.page.locator('[data-testid="editor-Run"]').click()

    def grass(self) -> dict:
        return json.loads(self.page.evaluate("() => localStorage.getItem('neo4j.grass')") or "{}")


@pytest.fixture(scope="module")
def browser(playwright_instance, browser_url):
    with browser_context(playwright_instance, width=1400, height=1000) as ctx:
        page = ctx.new_page()
        page.set_default_timeout(WAIT_MS)
        yield Browser(page, browser_url)


def graph_answer(api_url: str, trace: str, name: str, params: dict) -> tuple[int, int]:
    """Distinct nodes and relationships in the API's answer to ``name``."""
    mine = {p.name for p in catalog()[name].params} - {"trace"}
    query = urllib.parse.urlencode({k: v for k, v in params.items() if k in mine and v != "NULL"})
    with urllib.request.urlopen(f"{api_url}/traces/{trace}/queries/{name}?{query}", timeout=120) as r:
        rows = json.loads(r.read())["rows"]
    nodes, rels = set(), set()

    def visit(v) -> None:
        if isinstance(v, list):
            for x in v:
                visit(x)
        elif isinstance(v, dict) and v.get("kind") == "path":
            nodes.update(n["id"] for n in v["nodes"])
            rels.update(r["id"] for r in v["relationships"])
        elif isinstance(v, dict) and v.get("kind") == "node":
            nodes.add(v["id"])

    visit(rows)
    return len(nodes), len(rels)


@in_browser
@on_neo4j
@pytest.mark.parametrize("trace", PLAYED)
def test_every_block_of_the_guide_runs_in_the_browser(browser, api_url, kit, trace):
    b = browser
    b.type_command(":clear")
    b.page.wait_for_function("() => document.querySelectorAll('[data-testid=\"frame\"]').length === 0")
    b.type_command(f":play {api_url}/browser/guide.html?trace={trace}")
    state = b.new_frame()
    assert not state["error"], state["text"]
    b.latest().evaluate("(f) => f.setAttribute('data-tg-guide', '1')")
    guide = b.page.locator("[data-tg-guide]")
    guide.locator('[title="Pin at top"]').click()  # pinned frames stay while the results pile up
    seen, failures, drawn = [], [], {}
    params: dict[str, object] = {}
    while True:
        slide = b.slide(guide)
        title = slide["title"]
        seen.append(title)
        for i, text in enumerate(slide["blocks"]):
            state = b.click_block(guide, i)
            if state["error"]:
                failures.append(f"[{title}] {text[:80]!r}: {state['text'][:300]}")
                continue
            if text.startswith(":param "):
                name, value = text[len(":param ") :].split(" => ", 1)
                params[name] = value.strip("'")
            if title in GRAPH_VIEWS and not text.startswith(":"):
                frame = b.latest()
                frame.locator("svg .node").first.wait_for(timeout=WAIT_MS)
                b.settled(frame)
                ARTIFACTS.mkdir(parents=True, exist_ok=True)
                frame.screenshot(path=str(ARTIFACTS / f"{trace}-{title}.png"))
                drawn[title] = (frame.locator("svg .node").count(), frame.locator("svg .relationship").count())
                expected = graph_answer(api_url, trace, title, params)
                assert drawn[title] == expected, (title, drawn[title], expected)
        if not slide["next"]:
            break
        b.next_slide(guide, title)
    assert not failures, "\n".join(failures)
    assert not b.errors, b.errors
    assert seen[0] == "tracegraph" and seen[-1] == "Further" and len(seen) > 10
    graphs = {t for t in seen if t in GRAPH_VIEWS}
    if trace == "kit-ranks":  # no dependencies, no memory records: the observed path only
        assert graphs == {"observed-critical-path-graph"}
    else:
        assert graphs >= {"critical-path-graph", "observed-critical-path-graph", "op-neighborhood-graph"}
    assert all(n > 0 for n, _ in drawn.values()), drawn


@in_browser
@on_neo4j
def test_style_sheet_loads_by_url_and_pasted(browser, api_url, kit):
    b = browser
    expected = {
        k: {p: v.strip("'") for p, v in rule.items()}
        for k, rule in grass_rules((ROOT / "cypher" / "tracegraph.grass").read_text()).items()
    }
    for how in ("url", "pasted"):
        b.type_command(":style reset")
        b.new_frame()
        b.page.wait_for_function("() => !(localStorage.getItem('neo4j.grass') || '').includes('OBSERVED_NEXT')")
        if how == "url":
            b.type_command(f":style {api_url}/browser/tracegraph.grass")
        else:
            b.type_command((ROOT / "cypher" / "tracegraph.grass").read_text(), paste=True)
        state = b.new_frame()
        assert not state["error"], (how, state["text"])
        # The Browser keeps its style in localStorage (written a moment after it changes).
        b.page.wait_for_function("() => (localStorage.getItem('neo4j.grass') || '').includes('OBSERVED_NEXT')")
        assert b.grass() == expected, how
    assert not b.errors, b.errors
