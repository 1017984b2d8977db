"""The web UI end to end in a real headless Chromium (Playwright, driving
the system's chromium), against a real ``tracegraph serve`` with its own
data directory.

The bundled AlexNet step is uploaded through the page (the 202 job flow:
TRACEGRAPH_SYNC_UPLOAD_BYTES=0 turns every upload into a job), and every
view is checked against the HTTP API's own answers: the timeline's
highlighted ops against the critical-path analysis, its lanes' kinds
against the API's, the memory peak against 1,238,944,256 bytes, the CSV
download against the API's CSV, the graph of the 35-op critical path for
legibility (left to right, inside the frame, labels at a readable size
and apart). The bundled PyTorch sample (no dependencies between ops)
opens its timeline on the observed critical path, and the traces table
shows that path's length, labelled.

Two XPlane captures are dropped onto the page too: keras_cnn_train (TF2,
two tf_Compute threads, no dependencies) and jax_train_step (JAX, HLO
dependencies, the step run twice). Their timelines have one lane per host
thread, named after it (against the API's lanes and the ops' threads),
bars drawn in every lane, and open on the best path: JAX's dependency
critical path (listed as the critical-path analysis, exactly its runs
red), TF's observed one; top-ops and op-type-breakdown run through the
form show the API's rows as the table formats them; the graph view draws
JAX's critical path and an op's neighborhood (added to the path, and on
its own), and says "not available" for TF. The 4-rank gloo job with a
straggler: the Ranks view shows each job analysis as the API answers it,
rank 2 marked; the timeline has the ranks one above the other and draws
each collective's calls on their ranks' lanes (the API's JOINS), the
waits in the waiting color, the straggler framed. None of these pages logs an
error or a warning, shows an error box or gets an error answer.
Screenshots of each view go to tests/artifacts/ui/ (ignored by git).
Skipped, with the reason, when no Chromium or no Playwright is installed.
"""

from __future__ import annotations

import base64
import contextlib
import csv
import io
import itertools
import re
import sys
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import httpx
import pytest
from conftest import SEED_STEPSTATS

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # bench/ is a plain folder of the repository

from bench.browser import browser_context, serve, why_no_browser  # noqa: E402

REASON = why_no_browser()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"browser tests skipped: {REASON}")

ARTIFACTS = ROOT / "tests" / "artifacts" / "ui"
TRACE = "alexnet-ui"
PYTORCH = "pytorch-ui"
PYTORCH_SAMPLE = ROOT / "examples" / "traces" / "pytorch-cnn-cpu.pt.trace.json.gz"
PEAK = 1_238_944_256  # GPU_0_bfc's peak in tf1-alexnet-stepstats.pbtxt (memory_stats / the allocation records)
KEY = "ui-test-key-3141"
JOINED = "mlp-et-ui"
JOINED_FILES = (
    ROOT / "tests" / "data" / "pytorch_et" / "mlp_train.kineto.json.gz",
    ROOT / "tests" / "data" / "pytorch_et" / "mlp_train.et.json.gz",
)


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


@pytest.fixture(scope="module")
def playwright_instance():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        yield p


@pytest.fixture(scope="module")
def server(tmp_path_factory, session_graph, db_uri):
    """``tracegraph serve`` on the engine under test (each engine in turn)."""
    home = tmp_path_factory.mktemp("ui-home")
    env = {"TRACEGRAPH_SYNC_UPLOAD_BYTES": "0"}
    if db_uri != "embedded":
        env["TRACEGRAPH_DB"] = db_uri
    with serve(home, env=env, log=home / "serve.log") as base:
        yield base


@pytest.fixture(scope="module")
def http(server):
    with httpx.Client(base_url=server, timeout=120) as c:
        yield c


class Console:
    """Console errors and uncaught exceptions of a page."""

    def __init__(self, page) -> None:
        self.errors: list[str] = []
        page.on("console", lambda m: self.errors.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))


@pytest.fixture(scope="module")
def ui(playwright_instance, server):
    """One page for the module's views, its console and the requests it made."""
    with browser_context(playwright_instance) as ctx:
        page = ctx.new_page()
        page.set_default_timeout(60_000)
        console = Console(page)
        requests: list[tuple[str, str]] = []
        responses: list[tuple[str, str, int]] = []
        page.on("request", lambda r: requests.append((r.method, r.url)))
        page.on("response", lambda r: responses.append((r.request.method, r.url, r.status)))
        page.goto(server + "/")
        yield page, console, requests, responses


def drop_file(page, path: Path) -> None:
    """Drag-and-drop a file onto the upload zone (a real drop event with a DataTransfer)."""
    page.evaluate(
        """([name, b64]) => {
        const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
        const dt = new DataTransfer();
        dt.items.add(new File([bytes], name));
        const zone = document.getElementById("dropzone");
        zone.dispatchEvent(new DragEvent("dragover", {dataTransfer: dt, bubbles: true, cancelable: true}));
        zone.dispatchEvent(new DragEvent("drop", {dataTransfer: dt, bubbles: true, cancelable: true}));
    }""",
        [path.name, base64.b64encode(path.read_bytes()).decode()],
    )


def upload_via_api(http, trace: str, *paths: Path) -> None:
    """POST a trace's files (one trace) and wait for its job (every upload is one here)."""
    r = http.post("/traces", data={"trace": trace}, files=[("files", (p.name, p.read_bytes())) for p in paths])
    assert r.status_code in (201, 202), r.text
    if r.status_code == 202:
        job = r.json()
        while job["status"] not in ("done", "failed"):
            job = http.get(job["url"]).json()
        assert job["status"] == "done", job


@pytest.fixture(scope="module")
def uploaded(ui, http):
    """AlexNet uploaded through the page; returns what the page showed while it ran."""
    page, _console, _requests, _responses = ui
    page.goto(page.url.split("#")[0] + "#/traces")
    page.wait_for_selector("#dropzone")
    shot(page, "01-traces-empty")
    drop_file(page, SEED_STEPSTATS)
    assert page.input_value("#upload-name") == "tf1-alexnet-stepstats"  # named after the file
    page.fill("#upload-name", TRACE)
    statuses = []
    page.on("console", lambda m: None)
    page.click("#upload-go")
    status = page.locator("#upload-status")
    for _ in range(600):
        text = status.text_content() or ""
        if not statuses or statuses[-1] != text:
            statuses.append(text)
        if status.get_attribute("data-done") or status.get_attribute("data-failed"):
            break
        page.wait_for_timeout(50)
    page.wait_for_selector(f"tr[data-trace='{TRACE}']")
    shot(page, "02-traces-uploaded")
    return statuses


# ---------------------------------------------------------------------------- traces


def test_upload_runs_the_job_flow(ui, uploaded, http):
    page, _console, _requests, responses = ui
    status = page.locator("#upload-status")
    assert status.get_attribute("data-done") == TRACE, uploaded
    posts = [r for r in responses if r[0] == "POST" and r[1].endswith("/traces")]
    assert [r[2] for r in posts] == [202]  # a job, as the server was told to answer every upload
    jobs = [r for r in responses if r[0] == "GET" and "/jobs/" in r[1]]
    assert jobs and all(r[2] == 200 for r in jobs)
    assert any(s.startswith("ingesting:") for s in uploaded), uploaded
    summary = http.get(f"/traces/{TRACE}").json()
    row = page.locator(f"tr[data-trace='{TRACE}'] td")
    cells = [row.nth(i).text_content() for i in range(6)]
    assert cells[0] == TRACE and cells[1] == "tensorflow"
    assert cells[2] == f"{summary['ops']:,}"
    assert page.locator(f"tr[data-trace='{TRACE}'] td").nth(5).get_attribute("title") == f"{PEAK:,} bytes"
    # The critical path: the dependency one (AlexNet has dependencies), not labelled.
    cp = row.nth(4)
    assert cp.get_attribute("data-kind") == "dependency"
    assert float(cp.get_attribute("data-value")) == summary["critical_path_us"]
    assert "observed" not in cells[4]


# ---------------------------------------------------------------------------- timeline


def timeline_state(page):
    return page.evaluate("""() => {
        const t = window.__tracegraph.timeline;
        return {lanes: t.lanes, data: t.data(), view: t.view(), pixels: t.highlightPixels()};
    }""")


def test_timeline_highlights_the_critical_path(ui, uploaded, http):
    page, _console, _requests, _responses = ui
    page.goto(page.url.split("#")[0] + f"#/timeline/{TRACE}")
    page.wait_for_selector("#timeline-plot[data-ready='1']")
    page.wait_for_selector("#highlight-list ol li")
    shot(page, "03-timeline")
    cp = http.get(f"/traces/{TRACE}/queries/critical-path").json()
    cp_ops = {r[cp["columns"].index("op")] for r in cp["rows"]}
    assert len(cp_ops) > 10
    # The list under the plot is the analysis, in order.
    listed = page.locator("#highlight-list ol li").evaluate_all("els => els.map(e => e.dataset.op)")
    assert listed == [r[cp["columns"].index("op")] for r in cp["rows"]][:500]
    # Whole trace: every critical-path op lies inside a highlighted bar (single, or merged below a
    # pixel) of an op lane.
    state = timeline_state(page)
    kinds = {lane["id"]: lane["kind"] for lane in state["lanes"]}
    hl_bars = [
        (lane["s"][k], lane["e"][k])
        for lane in state["data"]["lanes"]
        if kinds[lane["id"]] == "ops"
        for k in range(len(lane["s"]))
        if lane["h"][k]
    ]
    timed = http.post(
        "/cypher",
        json={
            "query": "MATCH (o:Op {trace: $trace}) WHERE o.cp_step IS NOT NULL RETURN o.name, o.start_us, o.end_us",
            "trace": TRACE,
        },
    ).json()["rows"]
    assert {r[0] for r in timed} == cp_ops
    for name, start, end in timed:
        assert any(a <= start and end <= b for a, b in hl_bars), name
    # Zoom to the kernels of the heaviest critical-path op: its kernels are single bars, all red.
    weights = {r[cp["columns"].index("op")]: r[cp["columns"].index("dur_us")] for r in cp["rows"]}
    heavy = max(sorted(weights), key=lambda o: weights[o])
    card = http.get(f"/ui/traces/{TRACE}/op", params={"name": heavy}).json()
    k0 = min(k["start_us"] for k in card["kernels"])
    k1 = max(k["end_us"] for k in card["kernels"])
    page.evaluate(
        "([a, b]) => window.__tracegraph.timeline.setView(a, b)", [k0 - (k1 - k0) * 0.5, k1 + (k1 - k0) * 0.5]
    )
    page.wait_for_function(
        "() => { const t = window.__tracegraph.timeline; const d = t.data(), v = t.view();"
        " return d && d.t0 <= v.min && d.t1 >= v.max && d.res < (v.max - v.min) / 500; }"
    )
    page.wait_for_timeout(200)
    state = timeline_state(page)
    shot(page, "04-timeline-zoomed")
    assert state["pixels"] > 0  # the highlight color is on the canvas
    singles_hl, singles = [], 0
    for lane in state["data"]["lanes"]:
        for k, i in enumerate(lane["i"]):
            if i < 0:
                continue
            singles += 1
            name, _type, op = lane["names"][str(i)]
            assert bool(lane["h"][k]) == (op in cp_ops), (name, op)
            if lane["h"][k]:
                singles_hl.append((lane["id"], lane["s"][k], lane["e"][k], op))
    assert singles >= 2 and heavy in {b[3] for b in singles_hl}
    # Hover the widest highlighted op: the card names it and says it is highlighted.
    lane_id, s, e, op = max(singles_hl, key=lambda b: b[2] - b[1])
    p = page.evaluate("([l, s, e]) => window.__tracegraph.timeline.point(l, s, e)", [lane_id, s, e])
    page.mouse.move(p["x"], p["y"])
    tip = page.locator("#timeline-tip")
    tip.wait_for(state="visible")
    page.wait_for_function("() => document.getElementById('timeline-tip').textContent.includes('outputs:')")
    text = tip.text_content()
    assert op in text and "highlighted" in text and "inputs:" in text
    shot(page, "05-timeline-hover")


def test_timeline_zooms_and_pans_with_the_mouse(ui, uploaded):
    page, _console, _requests, _responses = ui
    if "#/timeline/" not in page.url:
        page.goto(page.url.split("#")[0] + f"#/timeline/{TRACE}")
        page.wait_for_selector("#timeline-plot[data-ready='1']")
    page.click("#timeline-reset")
    page.wait_for_timeout(200)
    before = timeline_state(page)["view"]
    box = page.locator("#timeline-plot .u-over").bounding_box()
    cx, cy = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(cx, cy)
    for _ in range(5):
        page.mouse.wheel(0, -100)
        page.wait_for_timeout(50)
    page.wait_for_timeout(200)
    zoomed = timeline_state(page)["view"]
    assert (zoomed["max"] - zoomed["min"]) == pytest.approx((before["max"] - before["min"]) * 0.8**5, rel=1e-6)
    page.mouse.move(cx, cy)
    page.mouse.down()
    page.mouse.move(cx - 200, cy, steps=10)
    page.mouse.up()
    page.wait_for_timeout(200)
    panned = timeline_state(page)["view"]
    per_px = (zoomed["max"] - zoomed["min"]) / box["width"]
    assert panned["min"] - zoomed["min"] == pytest.approx(200 * per_px, rel=0.02)
    page.wait_for_function(
        "() => { const t = window.__tracegraph.timeline; const d = t.data(), v = t.view();"
        " return d && d.t0 <= v.min && d.t1 >= v.max; }"
    )


def test_timeline_lane_kinds_come_from_the_api(ui, uploaded, http):
    page, _console, _requests, _responses = ui
    page.goto(page.url.split("#")[0] + f"#/timeline/{TRACE}")
    page.wait_for_selector("#timeline-plot[data-ready='1']")
    api = http.get(f"/ui/traces/{TRACE}/timeline").json()
    lanes = page.evaluate("() => window.__tracegraph.timeline.lanes")
    assert [(lane["name"], lane["kind"]) for lane in lanes] == [(lane["name"], lane["kind"]) for lane in api["lanes"]]
    # AlexNet's copies run on GPU:0 stream:15, whose name does not say so: the API's kind does.
    (copy,) = [lane for lane in api["lanes"] if lane["kind"] == "memcpy"]
    assert copy["name"] == "/device:GPU:0 stream:15" and copy["kernel_kinds"] == {"memcpy": copy["bars"]}
    compute = next(
        lane for lane in api["lanes"] if lane["kind"] == "compute" and set(lane["kernel_kinds"]) == {"compute"}
    )
    # With nothing highlighted, the copy lane is drawn in the copy color only, a compute lane in the kernel color.
    page.select_option("#highlight-source", "")
    page.wait_for_function(
        "() => { const t = window.__tracegraph.timeline; const d = t.data();"
        " return t.highlight() === '' && d && d.highlight === null; }"
    )
    page.wait_for_timeout(200)
    colors = page.evaluate("() => window.__tracegraph.timeline.colors")

    def pixels(color: str, lane: dict) -> int:
        return page.evaluate("([c, l]) => window.__tracegraph.timeline.pixels(c, l)", [color, lane["id"]])

    assert pixels(colors["memcpy"], copy) > 0 and pixels(colors["compute"], copy) == 0
    assert pixels(colors["compute"], compute) > 0 and pixels(colors["memcpy"], compute) == 0
    assert page.evaluate("() => window.__tracegraph.timeline.highlightPixels()") == 0
    shot(page, "05b-timeline-lane-kinds")
    # The hover card names the lane's kind.
    data = page.evaluate("() => window.__tracegraph.timeline.data()")
    lane = next(x for x in data["lanes"] if x["id"] == copy["id"])
    k = max(range(len(lane["s"])), key=lambda k: lane["e"][k] - lane["s"][k])
    p = page.evaluate(
        "([l, s, e]) => window.__tracegraph.timeline.point(l, s, e)", [copy["id"], lane["s"][k], lane["e"][k]]
    )
    page.mouse.move(p["x"], p["y"])
    tip = page.locator("#timeline-tip")
    tip.wait_for(state="visible")
    assert f"{copy['name']} (copy stream)" in tip.text_content()
    page.mouse.move(0, 0)


@pytest.fixture(scope="module")
def pytorch_uploaded(http):
    """The bundled PyTorch sample, uploaded through the API."""
    upload_via_api(http, PYTORCH, PYTORCH_SAMPLE)
    summary = http.get(f"/traces/{PYTORCH}").json()
    assert summary["has_deps"] is False and summary["framework"] == "pytorch"
    return PYTORCH


def test_pytorch_timeline_opens_on_the_observed_path(ui, uploaded, pytorch_uploaded, http):
    page, _console, _requests, _responses = ui
    api = http.get(f"/ui/traces/{PYTORCH}/timeline").json()
    assert api["highlight_default"] == "observed-critical-path"
    page.goto(page.url.split("#")[0] + f"#/timeline/{PYTORCH}")
    page.wait_for_selector("#timeline-plot[data-ready='1']")
    page.wait_for_selector("#highlight-list ol li")
    assert page.input_value("#highlight-source") == "observed-critical-path"
    page.wait_for_timeout(200)
    state = timeline_state(page)
    shot(page, "05c-timeline-pytorch-observed")
    assert state["data"]["highlight"] == "observed-critical-path" and state["data"]["highlight_note"] is None
    assert "not available" not in page.text_content("#timeline-status")
    assert state["pixels"] > 0  # red bars on the canvas
    # The highlighted bars are the ops on the observed path (the nodes the path went through).
    on_path = {
        tuple(r)
        for r in http.post(
            "/cypher",
            json={
                "query": "MATCH (o:Op {trace: $trace}) WHERE o.ocp_steps IS NOT NULL RETURN o.name, o.start_us, o.end_us",
                "trace": PYTORCH,
            },
        ).json()["rows"]
    }
    assert on_path and state["data"]["highlight_ops"] == len(on_path)
    highlighted = 0
    for lane in state["data"]["lanes"]:
        for k, i in enumerate(lane["i"]):
            if i >= 0:
                bar = (lane["names"][str(i)][0], lane["s"][k], lane["e"][k])
                assert bool(lane["h"][k]) == (bar in on_path), bar
                highlighted += lane["h"][k]
    assert highlighted > 0
    # The list under the plot is the observed-critical-path analysis, in order.
    ocp = http.get(f"/traces/{PYTORCH}/queries/observed-critical-path").json()
    listed = page.locator("#highlight-list ol li").evaluate_all("els => els.map(e => e.dataset.op)")
    assert listed == [r[ocp["columns"].index("event")] for r in ocp["rows"]][:500]
    assert page.text_content("#highlight-list h3") == f"observed critical path: {len(ocp['rows']):,} segments"
    # The dependency critical path is still offered, marked as not available, with the reason.
    option = page.locator("#highlight-source option[value='critical-path']")
    assert option.text_content().endswith("not available")
    why = http.get(f"/traces/{PYTORCH}/queries/critical-path").json()["unavailable"]["reason"]
    assert why.startswith("the trace has no dependencies between ops")
    assert option.get_attribute("title") == why  # the analysis's own reason, from its @requires


def test_traces_table_shows_the_observed_path(ui, uploaded, pytorch_uploaded, http):
    page, _console, _requests, _responses = ui
    listed = next(t for t in http.get("/traces").json() if t["trace"] == PYTORCH)
    if "observed_path_us" not in listed:
        pytest.skip("GET /traces does not list observed_path_us (the trace summary lacks it)")
    assert listed["critical_path_us"] is None and listed["observed_path_us"] > 0
    page.goto(page.url.split("#")[0] + "#/traces")
    cell = page.locator(f"tr[data-trace='{PYTORCH}'] td").nth(4)
    cell.wait_for()
    text = cell.text_content()
    m = re.fullmatch(r"([\d.,]+) (us|ms|s) \(observed\)", text)
    assert m, text
    factor = {"us": 1, "ms": 1e3, "s": 1e6}[m[2]]
    decimals = len(m[1].split(".")[1]) if "." in m[1] else 0
    shown = float(m[1].replace(",", "")) * factor
    assert abs(shown - listed["observed_path_us"]) <= 0.5 * 10**-decimals * factor + 1e-9, (text, listed)
    assert cell.get_attribute("data-kind") == "observed"
    assert float(cell.get_attribute("data-value")) == listed["observed_path_us"]
    assert cell.get_attribute("title").startswith("observed critical path: ")
    shot(page, "05d-traces-observed")


# ---------------------------------------------------------------------------- memory


def test_memory_peak_and_what_is_live(ui, uploaded, http):
    page, _console, _requests, _responses = ui
    page.goto(page.url.split("#")[0] + f"#/memory/{TRACE}")
    peak = page.locator("[data-testid=peak-bytes][data-allocator=GPU_0_bfc]")
    peak.wait_for()
    assert peak.text_content() == f"{PEAK:,}"
    shot(page, "06-memory")
    # Click the peak marker: what is live then is peak-memory's answer.
    p = page.evaluate("""() => { const m = window.__tracegraph.memory.plots.find(x => x.allocator === 'GPU_0_bfc');
                                 return m.point(m.peak.at, m.peak.bytes); }""")
    page.mouse.click(p["x"], p["y"])
    listing = page.locator(".live[data-allocator=GPU_0_bfc]")
    listing.locator("table").wait_for()
    pm = http.get(f"/traces/{TRACE}/queries/peak-memory").json()
    rows = [r for r in pm["rows"] if r[0] == "GPU_0_bfc"]
    assert f"{PEAK:,} bytes in {len(rows)} allocations" in listing.locator("h3").text_content()
    first = listing.locator("tbody tr").first.locator("td").first.text_content()
    assert first == f"{rows[0][pm['columns'].index('bytes')]:,}"  # largest first
    shot(page, "07-memory-peak")
    # Click somewhere else: memory-at at that time, whose live bytes the timeline agrees with.
    m = page.evaluate("""() => { const m = window.__tracegraph.memory.plots.find(x => x.allocator === 'GPU_0_bfc');
                                 const p = m.point(m.peak.at, 0); return {x: p.x, y: p.y}; }""")
    box = page.locator(".memory-plot[data-allocator=GPU_0_bfc] .u-over").bounding_box()
    x = box["x"] + box["width"] * 0.2
    page.mouse.click(x, box["y"] + box["height"] / 2)
    live = listing.locator("[data-testid=live-bytes]")
    live.wait_for()
    heading = listing.locator("h3").text_content()
    at = page.evaluate(
        "([x]) => { const m = window.__tracegraph.memory.plots.find(p => p.allocator === 'GPU_0_bfc');"
        " const r = m.plot.over.getBoundingClientRect(); return m.plot.posToVal(x - r.left, 'x'); }",
        [x],
    )
    api = http.get(f"/traces/{TRACE}/queries/memory-at", params={"at_us": at, "allocator": "GPU_0_bfc"}).json()
    expect = api["rows"][0][api["columns"].index("live_bytes")] if api["rows"] else 0
    assert live.text_content() == f"{expect:,}", heading
    assert 0 < expect < PEAK and abs(m["x"] - x) > 20  # not the peak marker
    shot(page, "08-memory-live")


# ---------------------------------------------------------------------------- analyses, cypher


def test_analysis_form_table_and_csv(ui, uploaded, http, tmp_path):
    page, _console, _requests, _responses = ui
    page.goto(page.url.split("#")[0] + f"#/analyses/{TRACE}/top-ops")
    page.wait_for_selector("#analysis-form")
    page.fill("#param-n", "5")
    page.click("#analysis-run")
    page.wait_for_selector("#analysis-result table tbody tr")
    api = http.get(f"/traces/{TRACE}/queries/top-ops", params={"n": 5}).json()
    cells = page.locator("#analysis-result tbody tr td:first-child").all_text_contents()
    assert cells == [r[0] for r in api["rows"]]
    # Sort by a column: click "type" twice (descending).
    page.click("#analysis-result th[data-col=type]")
    page.click("#analysis-result th[data-col=type]")
    types = page.locator("#analysis-result tbody tr td:nth-child(2)").all_text_contents()
    assert types == sorted(types, reverse=True)
    shot(page, "09-analysis")
    with page.expect_download() as dl:
        page.click("#analysis-csv")
    path = tmp_path / "top-ops.csv"
    dl.value.save_as(path)
    assert dl.value.suggested_filename == f"{TRACE}-top-ops.csv"
    expect = http.get(f"/traces/{TRACE}/queries/top-ops", params={"n": 5, "format": "csv"}).text
    assert path.read_text() == expect
    assert next(iter(csv.reader(io.StringIO(expect)))) == api["columns"]


def test_cypher_box(ui, uploaded, http):
    page, console, _requests, _responses = ui
    page.goto(page.url.split("#")[0] + f"#/cypher/{TRACE}")
    page.wait_for_selector("#cypher-form")
    assert page.input_value("#cypher-trace") == TRACE
    page.fill("#cypher-query", "MATCH (o:Op {trace: $trace}) WHERE o.type = 'Conv2D' RETURN count(o) AS convs")
    page.click("#cypher-run")
    page.wait_for_selector("#cypher-result tbody tr")
    n = http.post(
        "/cypher",
        json={
            "query": "MATCH (o:Op {trace: $t}) WHERE o.type = 'Conv2D' RETURN count(o)",
            "params": {"t": TRACE},
            "trace": TRACE,
        },
    ).json()["rows"][0][0]
    assert n == 5  # conv1..conv5
    assert page.locator("#cypher-result tbody td").all_text_contents() == [str(n)]
    # Paths come back as a graph too.
    page.fill("#cypher-query", "MATCH p = (a:Op {trace: $trace, name: 'conv2/Conv2D'})-[:DATA]->(b:Op) RETURN p")
    page.click("#cypher-run")
    page.wait_for_selector("#cypher-graph canvas")
    assert "showing" in page.locator("#cypher-result").text_content()
    shot(page, "10-cypher")
    # Writes are refused by the database: the error is shown, nothing changes. (Chromium notes the
    # refused request, a 403, on the console: that one expected error is taken off the list.)
    before = len(console.errors)
    page.fill("#cypher-query", "MATCH (o:Op {trace: $trace}) SET o.x = 1 RETURN count(o)")
    page.click("#cypher-run")
    page.wait_for_selector("#cypher-result .error")
    page.wait_for_timeout(200)
    assert [e for e in console.errors[before:]] == [
        "console.error: Failed to load resource: the server responded with a status of 403 (Forbidden)"
    ]
    del console.errors[before:]
    assert http.post(
        "/cypher", json={"query": "MATCH (o:Op {trace: $trace}) WHERE o.x IS NOT NULL RETURN count(o)", "trace": TRACE}
    ).json()["rows"] == [[0]]


# ---------------------------------------------------------------------------- graph, diff, drop


def test_graph_neighborhood_and_recenter(ui, uploaded):
    page, _console, _requests, _responses = ui
    page.goto(page.url.split("#")[0] + f"#/graph/{TRACE}?op=conv2/Conv2D&hops=1")
    caption = page.locator("#graph-caption")
    caption.wait_for()
    page.wait_for_function("() => window.__tracegraph.graph && window.__tracegraph.graph.cy")
    m = re.search(r"showing (\d+) of (\d+) nodes", caption.text_content())
    assert m and int(m[1]) == page.evaluate("() => window.__tracegraph.graph.cy.nodes().length") > 1
    shot(page, "11-graph")
    # Click another op: the view re-centers on it.
    target = page.evaluate("""() => { const cy = window.__tracegraph.graph.cy;
        const n = cy.nodes().filter(x => x.data('center') !== 1)[0];
        const p = n.renderedPosition(), r = cy.container().getBoundingClientRect();
        return {x: r.left + p.x, y: r.top + p.y, name: n.data('name')}; }""")
    page.mouse.click(target["x"], target["y"])
    page.wait_for_function("() => !location.hash.includes('op=conv2%2FConv2D')")
    page.wait_for_function(
        "(name) => (document.getElementById('graph-caption')?.textContent || '').startsWith(name + ':')",
        arg=target["name"],
    )
    page.wait_for_function(
        "() => window.__tracegraph.graph.cy && window.__tracegraph.graph.cy.nodes('[center = 1]').length === 1"
    )
    assert page.evaluate("() => window.__tracegraph.graph.cy.nodes('[center = 1]').data('name')") == target["name"]
    page.goto(page.url.split("#")[0] + f"#/graph/{TRACE}?cp=1&first=0")
    page.wait_for_function(
        "() => /critical path: showing \\d+ of \\d+ ops/.test(document.getElementById('graph-caption')?.textContent)"
    )
    shot(page, "12-graph-critical-path")


GRAPH_STATE = """() => {
  const cy = window.__tracegraph.graph.cy;
  const frame = cy.container().getBoundingClientRect();
  const nodes = cy.nodes().map((n) => {
    const b = n.renderedBoundingBox({ includeLabels: true });
    const l = n.renderedBoundingBox({ includeNodes: false, includeEdges: false, includeLabels: true });
    const p = n.renderedPosition();
    return { name: n.data("name"), label: n.data("label").replaceAll("\\u200b", ""), x: p.x, y: p.y,
             box: [b.x1, b.y1, b.x2, b.y2], labelBox: [l.x1, l.y1, l.x2, l.y2],
             font: parseFloat(n.style("font-size")) * cy.zoom() };
  });
  return { nodes, zoom: cy.zoom(), frame: { left: frame.left, top: frame.top, w: cy.width(), h: cy.height() },
           viewport: { w: innerWidth, h: innerHeight } };
}"""
MIN_LABEL_PX = 10  # ui/src/graph.js: the smallest label size on screen a fit may give


def graph_nodes(value, out: dict) -> dict:
    """uid -> name of every node in an API answer (nodes, paths, lists of them)."""
    if isinstance(value, dict):
        if value.get("kind") == "node":
            out[value["properties"]["uid"]] = value["properties"].get("name")
        else:
            for v in value.values():
                graph_nodes(v, out)
    elif isinstance(value, list):
        for v in value:
            graph_nodes(v, out)
    return out


def assert_legible(state: dict) -> None:
    """Every node inside the frame, the frame inside the window, labels big enough and apart."""
    frame, eps = state["frame"], 0.5
    assert (
        frame["left"] >= 0
        and frame["left"] + frame["w"] <= state["viewport"]["w"]
        and frame["h"] <= state["viewport"]["h"]
    )
    for n in state["nodes"]:
        x1, y1, x2, y2 = n["box"]
        assert -eps <= x1 and x2 <= frame["w"] + eps and -eps <= y1 and y2 <= frame["h"] + eps, n
        assert n["font"] >= MIN_LABEL_PX - 1e-6, n
    boxes = [n["labelBox"] for n in state["nodes"]]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            overlap = min(a[2], b[2]) - max(a[0], b[0]) > eps and min(a[3], b[3]) - max(a[1], b[1]) > eps
            assert not overlap, (state["nodes"][i]["label"], a, b)


def test_graph_of_a_long_critical_path_is_legible(ui, uploaded, http):
    page, _console, _requests, _responses = ui
    cp = http.get(f"/traces/{TRACE}/queries/critical-path").json()
    ops = [r[cp["columns"].index("op")] for r in cp["rows"]]
    assert len(ops) == http.get(f"/traces/{TRACE}").json()["critical_path_ops"] >= 35
    page.goto(page.url.split("#")[0] + f"#/graph/{TRACE}?cp=1&first=0")
    page.wait_for_function("() => window.__tracegraph?.graph?.cy")
    page.locator("#graph-box").scroll_into_view_if_needed()
    state = page.evaluate(GRAPH_STATE)
    shot(page, "12b-graph-long-path")
    by_name = {n["name"]: n for n in state["nodes"]}
    assert sorted(by_name) == sorted(ops)  # the whole path, one node per op
    assert_legible(state)
    # Left to right: each op right of the one before it on its row, or the first of the next row
    # (further down, back at the left), and far fewer rows than ops.
    rows = 1
    for a, b in itertools.pairwise(ops):
        pa, pb = by_name[a], by_name[b]
        if abs(pb["y"] - pa["y"]) < 1:
            assert pb["x"] > pa["x"], (a, b)
        else:
            assert pb["y"] > pa["y"] and pb["x"] < pa["x"], (a, b)
            rows += 1
    assert rows <= len(ops) / 4, rows
    # Labels are shortened names; hovering a node shows its full name.
    long = next(n for n in state["nodes"] if n["label"] != n["name"])
    assert "…" in long["label"]
    page.mouse.move(state["frame"]["left"] + long["x"], state["frame"]["top"] + long["y"])
    tip = page.locator(".graph-tip")
    tip.wait_for(state="visible")
    assert long["name"] in tip.text_content()
    # The neighborhood on demand: select an op, then add the ops within one hop of it.
    op = "conv3/Conv2D"
    node = by_name[op]
    page.mouse.click(state["frame"]["left"] + node["x"], state["frame"]["top"] + node["y"])
    page.wait_for_function("(op) => document.querySelector('#graph-selection h3')?.textContent === op", arg=op)
    page.click("#graph-expand")
    status = page.locator("#graph-expand-status")
    page.wait_for_function("() => / added /.test(document.getElementById('graph-expand-status').textContent)")
    path_nodes = graph_nodes(
        http.get(f"/traces/{TRACE}/queries/critical-path-graph", params={"first_step": 0, "max_ops": 40}).json()[
            "rows"
        ],
        {},
    )
    near = graph_nodes(
        http.get(f"/traces/{TRACE}/queries/op-neighborhood-graph", params={"op": op, "hops": 1}).json()["rows"], {}
    )
    added = len(set(near) - set(path_nodes))
    assert added > 0 and status.text_content().startswith(f"{added} op{'' if added == 1 else 's'} added")
    page.locator("#graph-box").scroll_into_view_if_needed()
    state = page.evaluate(GRAPH_STATE)
    shot(page, "12c-graph-long-path-neighborhood")
    assert len(state["nodes"]) == len(set(near) | set(path_nodes))
    assert {n["name"] for n in state["nodes"]} == set(near.values()) | set(path_nodes.values())
    assert state["zoom"] * 11 >= MIN_LABEL_PX - 1e-6 and all(n["font"] >= MIN_LABEL_PX - 1e-6 for n in state["nodes"])


def test_diff_and_drop(ui, uploaded, http):
    page, _console, _requests, _responses = ui
    other = f"{TRACE}-again"
    upload_via_api(http, other, SEED_STEPSTATS)
    page.goto(page.url.split("#")[0] + f"#/diff/{TRACE}/{other}")
    page.wait_for_selector("#diff-caption")
    assert page.locator("#diff-caption").text_content().startswith("0 ops differ")  # the same step twice
    assert page.locator(".card").count() == 2
    shot(page, "13-diff")
    # Drop it from the list, confirming the dialog.
    page.goto(page.url.split("#")[0] + "#/traces")
    page.wait_for_selector(f"tr[data-trace='{other}']")
    page.once("dialog", lambda d: d.accept())
    page.click(f"tr[data-trace='{other}'] button[data-action=drop]")
    page.wait_for_selector(f"tr[data-trace='{other}']", state="detached")
    assert http.get(f"/traces/{other}").status_code == 404
    # Dismissing the dialog keeps the trace.
    page.once("dialog", lambda d: d.dismiss())
    page.click(f"tr[data-trace='{TRACE}'] button[data-action=drop]")
    page.wait_for_timeout(300)
    assert http.get(f"/traces/{TRACE}").status_code == 200


# ---------------------------------------------------------------------------- a joined PyTorch trace (ET + Kineto)


def drop_files(page, paths) -> None:
    """Drag-and-drop several files onto the upload zone at once (one drop event, one DataTransfer)."""
    page.evaluate(
        """(files) => {
        const dt = new DataTransfer();
        for (const [name, b64] of files) {
            dt.items.add(new File([Uint8Array.from(atob(b64), (c) => c.charCodeAt(0))], name));
        }
        const zone = document.getElementById("dropzone");
        zone.dispatchEvent(new DragEvent("dragover", {dataTransfer: dt, bubbles: true, cancelable: true}));
        zone.dispatchEvent(new DragEvent("drop", {dataTransfer: dt, bubbles: true, cancelable: true}));
    }""",
        [[p.name, base64.b64encode(p.read_bytes()).decode()] for p in paths],
    )


def graph_labels(value, out: dict) -> dict:
    """uid -> labels of every node in an API answer (nodes, paths, lists of them)."""
    if isinstance(value, dict):
        if value.get("kind") == "node":
            out[value["properties"]["uid"]] = value.get("labels") or []
        else:
            for v in value.values():
                graph_labels(v, out)
    elif isinstance(value, list):
        for v in value:
            graph_labels(v, out)
    return out


def cypher_rows(http, query: str, trace: str, **params) -> list:
    r = http.post("/cypher", json={"query": query, "trace": trace, "params": params})
    assert r.status_code == 200, r.text
    return r.json()["rows"]


# The drawn graph's nodes (kind, uid, name) and edges (type, source uid, target uid); the Cypher
# view does not publish its Cytoscape instance, so it is read from the container Cytoscape registers on.
DRAWN = """(sel) => {
  const cy = sel ? document.querySelector(sel)._cyreg.cy : window.__tracegraph.graph.cy;
  const uid = (n) => n.data("uid");
  return { nodes: cy.nodes().map((n) => ({ kind: n.data("kind"), uid: uid(n), name: n.data("name") })),
           edges: cy.edges().map((e) => ({ type: e.data("type"), source: uid(e.source()), target: uid(e.target()) })) };
}"""

# The page coordinates of the drawn node with a given uid (the graph view's).
NODE_AT = """(uid) => {
  const cy = window.__tracegraph.graph.cy;
  const n = cy.nodes().filter((x) => x.data("uid") === uid)[0];
  const p = n.renderedPosition(), r = cy.container().getBoundingClientRect();
  return { x: r.left + p.x, y: r.top + p.y };
}"""


def open_graph(page, route: str) -> None:
    """Open a graph view and wait for its drawing (not the last view's, whose handle is dropped first)."""
    page.evaluate("() => { if (window.__tracegraph) window.__tracegraph.graph = null; }")
    page.goto(page.url.split("#")[0] + route)
    page.wait_for_function("() => window.__tracegraph?.graph?.cy")


@pytest.fixture(scope="module")
def joined_uploaded(ui, uploaded, http):
    """mlp_train's Kineto trace and Execution Trace, dropped onto the page together: one trace."""
    page, _console, _requests, _responses = ui
    page.goto(page.url.split("#")[0] + "#/traces")
    page.wait_for_selector("#dropzone")
    drop_files(page, JOINED_FILES)
    assert page.text_content("#upload-status").startswith("2 file(s): ")
    page.fill("#upload-name", JOINED)
    page.click("#upload-go")
    status = page.locator("#upload-status")
    page.wait_for_function(
        "(t) => { const s = document.getElementById('upload-status'); return s.dataset.done === t || s.dataset.failed; }",
        arg=JOINED,
    )
    assert status.get_attribute("data-done") == JOINED, status.text_content()
    page.wait_for_selector(f"tr[data-trace='{JOINED}']")
    summary = http.get(f"/traces/{JOINED}").json()
    assert summary["framework"] == "pytorch" and summary["has_deps"] and summary["has_times"]
    assert [Path(s).name for s in summary["sources"]] == [p.name for p in JOINED_FILES]
    return JOINED


def test_joined_pytorch_trace_lists_its_dependency_critical_path(ui, joined_uploaded, http):
    page, _console, _requests, _responses = ui
    summary = http.get(f"/traces/{JOINED}").json()
    assert summary["critical_path_us"] < summary["observed_path_us"] <= summary["span_us"]
    cell = page.locator(f"tr[data-trace='{JOINED}'] td").nth(4)
    assert cell.get_attribute("data-kind") == "dependency"  # not the observed path's fallback
    assert float(cell.get_attribute("data-value")) == summary["critical_path_us"]
    assert "observed" not in cell.text_content()
    shot(page, "15-traces-joined-pytorch")


def open_joined_timeline(page) -> dict:
    page.goto(page.url.split("#")[0] + f"#/timeline/{JOINED}")
    page.wait_for_selector("#timeline-plot[data-ready='1']")
    page.wait_for_selector("#highlight-list ol li")
    page.wait_for_timeout(200)
    return timeline_state(page)


def path_runs(http) -> set[tuple[str, float, float]]:
    """(name, start, end) of the ops on the dependency critical path: the runs the timeline should mark."""
    return {
        tuple(r)
        for r in cypher_rows(
            http,
            "MATCH (o:Op {trace: $trace}) WHERE o.cp_step IS NOT NULL RETURN o.name, o.start_us, o.end_us",
            JOINED,
        )
    }


def test_joined_pytorch_timeline_opens_on_the_dependency_path(ui, joined_uploaded, http):
    page, _console, _requests, _responses = ui
    api = http.get(f"/ui/traces/{JOINED}/timeline").json()
    assert api["highlight_default"] == "critical-path"  # the best path it has: dependencies, not the observed one
    assert {h["name"]: h["available"] for h in api["highlights"]} == {
        "critical-path": True,
        "observed-critical-path": True,
    }
    state = open_joined_timeline(page)
    shot(page, "16-timeline-joined-pytorch")
    assert page.input_value("#highlight-source") == "critical-path"
    assert state["data"]["highlight"] == "critical-path" and state["data"]["highlight_note"] is None
    assert state["pixels"] > 0
    # The list under the plot is the critical-path analysis, in order (op names repeat: three aten::linear).
    cp = http.get(f"/traces/{JOINED}/queries/critical-path").json()
    ops = [r[cp["columns"].index("op")] for r in cp["rows"]]
    assert len(ops) == summary_ops(http) and len(set(ops)) < len(ops)
    listed = page.locator("#highlight-list ol li").evaluate_all("els => els.map(e => e.dataset.op)")
    assert listed == ops
    assert page.text_content("#highlight-list h3") == f"critical path (dependency DAG): {len(ops)} ops"
    # Every op of the path lies inside a red bar (drawn alone, or merged below a pixel) of an op lane.
    on_path = path_runs(http)
    assert sorted(n for n, _, _ in on_path) == sorted(ops)
    kinds = {lane["id"]: lane["kind"] for lane in state["lanes"]}
    assert set(kinds.values()) == {"ops"}  # a CPU trace: op lanes only
    red = [
        (lane["s"][k], lane["e"][k]) for lane in state["data"]["lanes"] for k in range(len(lane["s"])) if lane["h"][k]
    ]
    for name, start, end in on_path:
        assert any(a <= start and end <= b for a, b in red), name


def test_joined_pytorch_timeline_marks_only_the_paths_runs(ui, joined_uploaded, http):
    """The highlighted bars are exactly the runs on the path: an op whose name is on the path but
    that is not (the optimizer's other aten::add_) stays unhighlighted."""
    page, _console, _requests, _responses = ui
    on_path = path_runs(http)
    state = open_joined_timeline(page)
    assert state["data"]["highlight_ops"] == len(on_path)

    def check(state) -> int:
        singles = 0
        for lane in state["data"]["lanes"]:
            for k, i in enumerate(lane["i"]):
                if i >= 0:
                    singles += 1
                    bar = (lane["names"][str(i)][0], lane["s"][k], lane["e"][k])
                    assert bool(lane["h"][k]) == (bar in on_path), bar
        return singles

    check(state)
    # Zoom to the optimizer step, where aten::add_ runs a dozen times and twice on the path: each a bar of its own.
    (s0, s1) = cypher_rows(
        http,
        "MATCH (o:Op {trace: $trace}) WHERE o.name STARTS WITH 'Optimizer.step' RETURN min(o.start_us), max(o.end_us)",
        JOINED,
    )[0]
    page.evaluate("([a, b]) => window.__tracegraph.timeline.setView(a, b)", [s0, s1])
    page.wait_for_function(
        "() => { const t = window.__tracegraph.timeline; const d = t.data(), v = t.view();"
        " return d && d.t0 <= v.min && d.t1 >= v.max && d.res < (v.max - v.min) / 500; }"
    )
    state = timeline_state(page)
    shot(page, "16b-timeline-joined-pytorch-optimizer")
    adds = [
        (lane["names"][str(i)][0], lane["s"][k], lane["e"][k])
        for lane in state["data"]["lanes"]
        for k, i in enumerate(lane["i"])
        if i >= 0 and lane["names"][str(i)][0] == "aten::add_"
    ]
    assert len(adds) > 2 and sum(a in on_path for a in adds) == 2
    assert check(state) >= len(adds)


def summary_ops(http, trace: str = JOINED) -> int:
    return http.get(f"/traces/{trace}").json()["critical_path_ops"]


def assert_draws_the_critical_path(page, http, trace: str, screenshot: str) -> tuple[int, dict]:
    """The graph view, open on ``trace``'s critical path from its first op,
    draws one node per op of the path, the very ops (by uid)
    critical-path-graph returns, legibly; returns the path's op count and
    its nodes by uid."""
    n = summary_ops(http, trace)
    assert page.text_content("#graph-caption").startswith(f"critical path: showing {n} of {n} ops")
    page.locator("#graph-box").scroll_into_view_if_needed()
    state = page.evaluate(GRAPH_STATE)
    drawn = page.evaluate(DRAWN, None)
    shot(page, screenshot)
    path = graph_nodes(
        http.get(f"/traces/{trace}/queries/critical-path-graph", params={"first_step": 0, "max_ops": 40}).json()[
            "rows"
        ],
        {},
    )
    cp = http.get(f"/traces/{trace}/queries/critical-path").json()
    assert len(path) == n
    assert sorted(x["uid"] for x in drawn["nodes"]) == sorted(path)
    assert sorted(x["name"] for x in drawn["nodes"]) == sorted(r[cp["columns"].index("op")] for r in cp["rows"])
    assert {x["kind"] for x in drawn["nodes"]} == {"Op"}
    assert_legible(state)
    return n, path


def test_joined_pytorch_graph_draws_the_critical_path_and_an_ops_tensors(ui, joined_uploaded, http):
    page, _console, _requests, _responses = ui
    open_graph(page, f"#/graph/{JOINED}?cp=1&first=0")
    n, _path = assert_draws_the_critical_path(page, http, JOINED, "17-graph-joined-pytorch")
    # Select an op of the path that reads and writes tensors, then add its tensors to the drawing.
    uid, name = cypher_rows(
        http,
        "MATCH (o:Op {trace: $trace})-[:PRODUCES]->(:Tensor) WHERE o.cp_step IS NOT NULL "
        "MATCH (o)-[:CONSUMES]->(:Tensor) RETURN DISTINCT o.uid, o.name, o.cp_step ORDER BY o.cp_step LIMIT 1",
        JOINED,
    )[0][:2]
    at = page.evaluate(NODE_AT, uid)  # that very op: names repeat on a PyTorch path
    page.mouse.click(at["x"], at["y"])
    page.wait_for_function("(op) => document.querySelector('#graph-selection h3')?.textContent === op", arg=name)
    page.click("#graph-tensors")
    page.wait_for_function("() => / read or written/.test(document.getElementById('graph-tensors-status').textContent)")
    want = cypher_rows(
        http,
        "MATCH (o:Op {trace: $trace, uid: $uid})-[r:PRODUCES|CONSUMES]->(t:Tensor) RETURN type(r), t.uid, t.name",
        JOINED,
        uid=uid,
    )
    assert {r[0] for r in want} == {"PRODUCES", "CONSUMES"}
    drawn = page.evaluate(DRAWN, None)
    page.locator("#graph-box").scroll_into_view_if_needed()
    state = page.evaluate(GRAPH_STATE)
    shot(page, "18-graph-joined-pytorch-tensors")
    tensors = {x["uid"] for x in drawn["nodes"] if x["kind"] == "Tensor"}
    assert tensors == {r[1] for r in want}
    assert page.text_content("#graph-tensors-status").startswith(f"{len(tensors)} tensor")
    # Drawn the way data flows: what the op read into it, what it wrote out of it.
    edges = {(e["type"], e["source"], e["target"]) for e in drawn["edges"] if e["type"] in ("PRODUCES", "CONSUMES")}
    assert edges == {("PRODUCES", uid, t) if kind == "PRODUCES" else ("CONSUMES", t, uid) for kind, t, _ in want}
    assert len(drawn["nodes"]) == n + len(tensors)
    assert all(x["font"] >= MIN_LABEL_PX - 1e-6 for x in state["nodes"])
    # A tensor's label is its shape; hovering it names it.
    t_uid, t_name = next((r[1], r[2]) for r in want if r[0] == "PRODUCES")
    shape = cypher_rows(http, "MATCH (t:Tensor {trace: $trace, uid: $u}) RETURN t.shape", JOINED, u=t_uid)[0][0]
    assert shape and any(x["name"] == shape for x in state["nodes"])
    at = page.evaluate(NODE_AT, t_uid)
    page.mouse.move(at["x"], at["y"])
    tip = page.locator(".graph-tip")
    tip.wait_for(state="visible")
    assert t_name in tip.text_content() and "bytes" in tip.text_content()
    page.mouse.move(0, 0)


def test_joined_pytorch_neighborhood_with_tensors(ui, joined_uploaded, http):
    page, _console, _requests, _responses = ui
    op = "aten::relu"  # twice in the forward pass: the neighborhood is both runs'
    open_graph(page, f"#/graph/{JOINED}?op={op}&hops=1")
    near = graph_nodes(
        http.get(f"/traces/{JOINED}/queries/op-neighborhood-graph", params={"op": op, "hops": 1}).json()["rows"], {}
    )
    drawn = page.evaluate(DRAWN, None)
    assert {x["uid"] for x in drawn["nodes"]} == set(near)
    page.click("#graph-tensors")
    page.wait_for_function("() => / read or written/.test(document.getElementById('graph-tensors-status').textContent)")
    want = cypher_rows(
        http,
        "MATCH (o:Op {trace: $trace, name: $op})-[:PRODUCES|CONSUMES]->(t:Tensor) RETURN DISTINCT t.uid",
        JOINED,
        op=op,
    )
    drawn = page.evaluate(DRAWN, None)
    shot(page, "19-graph-joined-neighborhood-tensors")
    assert want and {x["uid"] for x in drawn["nodes"] if x["kind"] == "Tensor"} == {r[0] for r in want}


def test_joined_pytorch_tensors_in_a_cypher_graph(ui, joined_uploaded, http):
    page, _console, _requests, _responses = ui
    query = "MATCH p=(o:Op {trace:$trace})-[:PRODUCES]->(t:Tensor)<-[:CONSUMES]-(r:Op) RETURN p LIMIT 20"
    page.goto(page.url.split("#")[0] + f"#/cypher/{JOINED}")
    page.wait_for_selector("#cypher-form")
    assert page.input_value("#cypher-trace") == JOINED
    page.fill("#cypher-query", query)
    with page.expect_response(lambda r: r.url.endswith("/cypher")) as answer:
        page.click("#cypher-run")
    page.wait_for_selector("#cypher-graph canvas")
    api = graph_labels(answer.value.json()["rows"], {})  # what the page was sent
    tensors = {u for u, labels in api.items() if "Tensor" in labels}
    ops = {u for u, labels in api.items() if "Op" in labels}
    assert tensors and ops and len(tensors) + len(ops) == len(api)
    # They are the trace's tensors that one op wrote and another read.
    assert cypher_rows(
        http,
        "MATCH (t:Tensor {trace: $trace}) WHERE t.uid IN $uids AND (t)<-[:PRODUCES]-(:Op) AND (t)<-[:CONSUMES]-(:Op) "
        "RETURN count(t)",
        JOINED,
        uids=sorted(tensors),
    ) == [[len(tensors)]]
    drawn = page.evaluate(DRAWN, "#cypher-graph")
    shot(page, "20-cypher-joined-tensors")
    assert {x["uid"] for x in drawn["nodes"] if x["kind"] == "Tensor"} == tensors
    assert {x["uid"] for x in drawn["nodes"] if x["kind"] == "Op"} == ops
    # Producer -> tensor -> reader: both relationships drawn in the direction the data went.
    for e in drawn["edges"]:
        assert (
            (e["source"] in ops and e["target"] in tensors)
            if e["type"] == "PRODUCES"
            else (e["type"] == "CONSUMES" and e["source"] in tensors and e["target"] in ops)
        ), e


# ---------------------------------------------------------------------------- XPlane captures (TF2 and JAX)

XPLANE_DIR = ROOT / "tests" / "data" / "xplane"
KERAS = "keras-xplane-ui"  # keras_cnn_train: TF ops on two tf_Compute threads; no dependencies
JAX = "jax-xplane-ui"  # jax_train_step: HLO ops on one XLA client thread; dependencies from the HLO
XPLANE = {
    KERAS: (XPLANE_DIR / "keras_cnn_train.xplane.pb.gz", "tensorflow"),
    JAX: (XPLANE_DIR / "jax_train_step.xplane.pb.gz", "jax"),
}
# Chromium's note on repeated canvas read-backs (the tests count pixels): not the page's doing.
READBACK_NOTE = "willReadFrequently"


@contextlib.contextmanager
def page_stays_clean(ui):
    """Fails when the page logs an error or a warning (a view's caught error is a console.warn plus an
    error box), shows an error box, or gets an error answer while the block runs."""
    page, console, _requests, responses = ui
    errors, answers = len(console.errors), len(responses)
    warnings: list[str] = []

    def on_console(m) -> None:
        if m.type == "warning" and READBACK_NOTE not in m.text:
            warnings.append(m.text)

    page.on("console", on_console)
    try:
        yield
        page.wait_for_timeout(100)  # what the last request answered is handled
        assert console.errors[errors:] == []
        assert warnings == []
        assert [r for r in responses[answers:] if r[2] >= 400] == []
        assert page.locator("#main .error").count() == 0, page.locator("#main .error").all_text_contents()
    finally:
        page.remove_listener("console", on_console)


def go(page, route: str) -> None:
    """Open a route of the page and return once the router has cleared the last view (the router's
    hashchange listener runs before this one), so that waiting for an element finds the new view's."""
    page.evaluate(
        """(h) => new Promise((done) => {
        if (location.hash === h) return done();
        window.addEventListener("hashchange", () => done(), { once: true });
        location.hash = h;
    })""",
        route,
    )


def upload_through_page(page, path: Path, trace: str) -> None:
    """Drop one file onto the upload zone, name the trace, upload, and wait for its job."""
    go(page, "#/traces")
    page.wait_for_selector("#dropzone")
    page.fill("#upload-name", "")
    drop_file(page, path)
    assert page.input_value("#upload-name") == path.name.removesuffix(".gz")  # named after the file
    assert page.input_value("#upload-format") == "auto"
    page.fill("#upload-name", trace)
    page.click("#upload-go")
    page.wait_for_function(
        "(t) => { const s = document.getElementById('upload-status'); return s.dataset.done === t || s.dataset.failed; }",
        arg=trace,
    )
    status = page.locator("#upload-status")
    assert status.get_attribute("data-done") == trace, status.text_content()
    page.wait_for_selector(f"tr[data-trace='{trace}']")


@pytest.fixture(scope="module")
def xplane_uploaded(ui, http):
    """keras_cnn_train and jax_train_step, each dropped onto the page (every upload a job here)."""
    page, _console, _requests, _responses = ui
    with page_stays_clean(ui):
        for trace, (path, framework) in XPLANE.items():
            upload_through_page(page, path, trace)
            summary = http.get(f"/traces/{trace}").json()
            assert summary["framework"] == framework and summary["sources"] == [path.name]
            assert summary["has_times"] and summary["has_deps"] == (trace == JAX)
        shot(page, "21-traces-xplane")
    return list(XPLANE)


def test_xplane_traces_listed_with_their_best_path(ui, xplane_uploaded, http):
    page, _console, _requests, _responses = ui
    with page_stays_clean(ui):
        go(page, "#/traces")
        for trace, (_path, framework) in XPLANE.items():
            summary = http.get(f"/traces/{trace}").json()
            row = page.locator(f"tr[data-trace='{trace}'] td")
            row.first.wait_for()
            assert [row.nth(i).text_content() for i in range(3)] == [trace, framework, f"{summary['ops']:,}"]
            cp = row.nth(4)
            if trace == JAX:  # dependencies: the dependency critical path, shorter than the observed one
                assert cp.get_attribute("data-kind") == "dependency"
                assert float(cp.get_attribute("data-value")) == summary["critical_path_us"]
                assert summary["critical_path_us"] < summary["observed_path_us"]
            else:  # none: the observed one, labelled
                assert summary["critical_path_us"] is None
                assert cp.get_attribute("data-kind") == "observed"
                assert float(cp.get_attribute("data-value")) == summary["observed_path_us"]
                assert cp.text_content().endswith(" (observed)")


def timed_ops(http, trace: str) -> list[tuple[str, str, float, float]]:
    """(thread, name, start, end) of every timed op of the trace."""
    return [
        (r[0], r[1], r[2], r[3])
        for r in cypher_rows(
            http,
            "MATCH (o:Op {trace: $trace}) WHERE o.start_us IS NOT NULL AND o.end_us IS NOT NULL "
            "RETURN o.thread, o.name, o.start_us, o.end_us",
            trace,
        )
    ]


# Canvas pixels in lane laneId's band, inside the plot, that no background has: lane backgrounds,
# the grid and the page are white or grey, idle stream time pale red; bars (blue ops, red highlights,
# paler merged bars) are far more saturated.
BAR_PIXELS = """(laneId) => {
  const t = window.__tracegraph.timeline;
  const canvas = document.querySelector("#timeline-plot canvas");
  const c = canvas.getBoundingClientRect(), over = document.querySelector("#timeline-plot .u-over").getBoundingClientRect();
  const k = canvas.width / c.width;
  const mid = t.point(laneId, 0, 0).y;
  const x0 = Math.round((over.left - c.left) * k), y0 = Math.round((mid - c.top - 8) * k);
  const img = canvas.getContext("2d").getImageData(x0, y0, Math.round(over.width * k), Math.round(16 * k)).data;
  let n = 0;
  for (let p = 0; p < img.length; p += 4) {
    if (Math.max(img[p], img[p + 1], img[p + 2]) - Math.min(img[p], img[p + 1], img[p + 2]) > 50) n++;
  }
  return n;
}"""


# Canvas pixels drawn in the leftmost 3 css pixels of the plot's canvas, beside the lanes: a lane label
# too long for the room left of the plot runs into the canvas's edge and is cut there.
LABELS_CUT = """() => {
  const canvas = document.querySelector("#timeline-plot canvas");
  const c = canvas.getBoundingClientRect(), over = document.querySelector("#timeline-plot .u-over").getBoundingClientRect();
  const k = canvas.width / c.width;
  const row = (x, w) => canvas.getContext("2d")
    .getImageData(Math.round(x * k), Math.round((over.top - c.top) * k), Math.round(w * k), Math.round(over.height * k)).data;
  const drawn = (img) => { let n = 0; for (let p = 3; p < img.length; p += 4) if (img[p] > 0) n++; return n; };
  return { edge: drawn(row(0, 3)), labels: drawn(row(0, over.left - c.left)) };
}"""

# Items of the list under the timeline whose text runs out of their box (into the next column).
LIST_OVERFLOW = """() => [...document.querySelectorAll("#highlight-list ol li")].filter((li) => {
  const box = li.getBoundingClientRect(), r = document.createRange();
  r.selectNodeContents(li);
  return [...r.getClientRects()].some((q) => q.right > box.right + 0.5 || q.left < box.left - 0.5);
}).map((li) => li.dataset.op)"""


def check_legible_timeline(page, state: dict) -> None:
    """Lane labels drawn whole (the full lane names, not cut at the canvas's edge); the list's items inside
    their columns."""
    assert page.evaluate("() => window.__tracegraph.timeline.labels") == [x["name"] for x in state["lanes"]]
    cut = page.evaluate(LABELS_CUT)
    assert cut["labels"] > 0 and cut["edge"] == 0, cut
    assert page.evaluate(LIST_OVERFLOW) == []


def open_timeline(page, trace: str) -> dict:
    go(page, f"#/timeline/{trace}")
    page.wait_for_selector("#timeline-plot[data-ready='1']")
    page.wait_for_selector("#highlight-list ol li")
    page.wait_for_timeout(200)
    return timeline_state(page)


def check_xplane_lanes(page, http, trace: str, state: dict) -> None:
    """The lanes are the host threads' op lanes, as the API gives them, and every lane has bars drawn."""
    api = http.get(f"/ui/traces/{trace}/timeline").json()
    assert [(x["id"], x["name"], x["kind"], x["bars"]) for x in state["lanes"]] == [
        (x["id"], x["name"], x["kind"], x["bars"]) for x in api["lanes"]
    ]
    ops = timed_ops(http, trace)
    per_thread: dict[str, int] = {}
    for thread, *_ in ops:
        per_thread[thread] = per_thread.get(thread, 0) + 1
    # XPlane captures here have no op nested in another: one lane per thread, named after it, holding its ops.
    assert all(x["kind"] == "ops" and x["device"] == "/host:CPU" and x["stream"] is None for x in api["lanes"])
    assert sorted((x["name"], x["bars"]) for x in api["lanes"]) == sorted(
        (f"/host:CPU {t}", n) for t, n in per_thread.items()
    )
    thread_of = {x["id"]: x["name"].removeprefix("/host:CPU ") for x in api["lanes"]}
    runs = {(t, n, s, e) for t, n, s, e in ops}
    singles = 0
    for lane in state["data"]["lanes"]:
        assert lane["s"], lane["id"]  # the whole trace: bars in every lane
        for k, i in enumerate(lane["i"]):
            if i >= 0:
                singles += 1
                assert (thread_of[lane["id"]], lane["names"][str(i)][0], lane["s"][k], lane["e"][k]) in runs
        assert sum(lane["n"]) == state["lanes"][lane["id"]]["bars"]
    assert singles > 0
    for x in api["lanes"]:
        assert page.evaluate(BAR_PIXELS, x["id"]) > 0, x["name"]


def check_highlighted_bars(state: dict, on_path: set) -> None:
    """A bar drawn alone is red exactly when it is a run on the path; every run on the path is inside a red bar."""
    red, singles = [], 0
    for lane in state["data"]["lanes"]:
        for k, i in enumerate(lane["i"]):
            if lane["h"][k]:
                red.append((lane["s"][k], lane["e"][k]))
            if i >= 0:
                singles += 1
                bar = (lane["names"][str(i)][0], lane["s"][k], lane["e"][k])
                assert bool(lane["h"][k]) == (bar in on_path), bar
    assert singles and red
    for name, start, end in on_path:
        assert any(a <= start and end <= b for a, b in red), name


def test_xplane_jax_timeline_opens_on_the_dependency_critical_path(ui, xplane_uploaded, http):
    page, _console, _requests, _responses = ui
    with page_stays_clean(ui):
        api = http.get(f"/ui/traces/{JAX}/timeline").json()
        assert api["highlight_default"] == "critical-path"
        state = open_timeline(page, JAX)
        shot(page, "22-timeline-xplane-jax")
        check_xplane_lanes(page, http, JAX, state)
        check_legible_timeline(page, state)
        assert page.input_value("#highlight-source") == "critical-path"
        assert state["data"]["highlight"] == "critical-path" and state["data"]["highlight_note"] is None
        # The list under the plot is the critical-path analysis's ops, in order.
        cp = http.get(f"/traces/{JAX}/queries/critical-path").json()
        ops = [r[cp["columns"].index("op")] for r in cp["rows"]]
        assert len(ops) == http.get(f"/traces/{JAX}").json()["critical_path_ops"] > 1
        listed = page.locator("#highlight-list ol li").evaluate_all("els => els.map(e => e.dataset.op)")
        assert listed == ops
        assert page.text_content("#highlight-list h3") == f"critical path (dependency DAG): {len(ops)} ops"
        # Red: the runs on the path (the step runs twice: each op name has a run on the path and one off it).
        on_path = {
            tuple(r)
            for r in cypher_rows(
                http,
                "MATCH (o:Op {trace: $trace}) WHERE o.cp_step IS NOT NULL RETURN o.name, o.start_us, o.end_us",
                JAX,
            )
        }
        assert sorted(n for n, _, _ in on_path) == sorted(ops)
        assert state["data"]["highlight_ops"] == len(on_path)
        assert {n for _t, n, _s, _e in timed_ops(http, JAX) if n in set(ops)} == set(ops)
        assert sum(1 for _t, n, _s, _e in timed_ops(http, JAX) if n in set(ops)) > len(ops)  # names repeat
        check_highlighted_bars(state, on_path)
        assert state["pixels"] > 0


def test_xplane_tf_timeline_opens_on_the_observed_critical_path(ui, xplane_uploaded, http):
    page, _console, _requests, _responses = ui
    with page_stays_clean(ui):
        api = http.get(f"/ui/traces/{KERAS}/timeline").json()
        assert api["highlight_default"] == "observed-critical-path"
        state = open_timeline(page, KERAS)
        shot(page, "23-timeline-xplane-tf")
        check_xplane_lanes(page, http, KERAS, state)
        check_legible_timeline(page, state)
        # Keras's step ran on two tf_Compute threads; its step marker on the python thread
        assert sorted(x["name"].split(" ", 1)[1].split("/")[0] for x in state["lanes"]) == [
            "python",
            "tf_Compute",
            "tf_Compute",
        ]
        assert page.input_value("#highlight-source") == "observed-critical-path"
        assert state["data"]["highlight"] == "observed-critical-path" and state["data"]["highlight_note"] is None
        assert "not available" not in page.text_content("#timeline-status")
        on_path = {
            tuple(r)
            for r in cypher_rows(
                http,
                "MATCH (o:Op {trace: $trace}) WHERE o.ocp_steps IS NOT NULL RETURN o.name, o.start_us, o.end_us",
                KERAS,
            )
        }
        assert on_path and state["data"]["highlight_ops"] == len(on_path)
        check_highlighted_bars(state, on_path)
        assert state["pixels"] > 0
        # The list under the plot is the observed-critical-path analysis, in order.
        ocp = http.get(f"/traces/{KERAS}/queries/observed-critical-path").json()
        listed = page.locator("#highlight-list ol li").evaluate_all("els => els.map(e => e.dataset.op)")
        assert listed == [r[ocp["columns"].index("event")] for r in ocp["rows"]][:500]
        assert page.text_content("#highlight-list h3") == f"observed critical path: {len(ocp['rows']):,} segments"
        # The dependency critical path is offered as not available, with the API's reason.
        (dep,) = [h for h in api["highlights"] if h["name"] == "critical-path"]
        option = page.locator("#highlight-source option[value='critical-path']")
        assert option.text_content().endswith("not available")
        assert dep["available"] is False and option.get_attribute("title") == dep["note"]


def cell_text(v) -> str:
    """How ui/src/table.js (cellText, fmtNum) shows a value: numbers in en-US with at most 3 decimals,
    rounded half away from zero (ECMA-402's halfExpand) on the shortest decimal that reads back as the
    number (JavaScript's and Python's repr: Chromium shows 2894.2915 as 2,894.292)."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if v.is_integer():
            return f"{int(v):,}"
        s = f"{Decimal(repr(v)).quantize(Decimal('0.001'), rounding=ROUND_HALF_UP):,}"
        return s.rstrip("0").rstrip(".") if "." in s else s
    assert isinstance(v, str), v
    return v


@pytest.mark.parametrize("analysis", ["top-ops", "op-type-breakdown"])
@pytest.mark.parametrize("trace", [KERAS, JAX])
def test_xplane_analyses_through_the_form(ui, xplane_uploaded, http, trace, analysis):
    page, _console, _requests, _responses = ui
    with page_stays_clean(ui):
        go(page, f"#/analyses/{trace}/{analysis}")
        page.wait_for_selector("#analysis-form")
        assert page.input_value("#analysis-trace") == trace
        with page.expect_response(lambda r: f"/queries/{analysis}" in r.url) as answer:
            page.click("#analysis-run")
        page.wait_for_selector("#analysis-result table")
        shot(page, f"24-analysis-xplane-{trace}-{analysis}")
        api = http.get(f"/traces/{trace}/queries/{analysis}").json()
        assert api["rows"] and api.get("note") is None
        assert answer.value.json()["rows"] == api["rows"]  # the form's defaults are the API's
        assert page.locator("#analysis-result thead th").all_text_contents() == api["columns"]
        shown = page.locator("#analysis-result tbody tr").evaluate_all(
            "trs => trs.map(tr => [...tr.querySelectorAll('td')].map(td => td.textContent))"
        )
        assert shown == [[cell_text(v) for v in row] for row in api["rows"]]
        assert page.text_content("#analysis-result p.caption") == f"{len(api['rows']):,} rows"


def open_xplane_graph(page, route: str) -> None:
    """Open a graph view and wait for its drawing (not the last view's, whose handle is dropped first)."""
    page.evaluate("() => { if (window.__tracegraph) window.__tracegraph.graph = null; }")
    go(page, route)
    page.wait_for_function("() => window.__tracegraph?.graph?.cy")


def test_xplane_jax_graph_draws_the_critical_path_and_a_neighborhood(ui, xplane_uploaded, http):
    page, _console, _requests, _responses = ui
    with page_stays_clean(ui):
        open_xplane_graph(page, f"#/graph/{JAX}?cp=1&first=0")
        n, path = assert_draws_the_critical_path(page, http, JAX, "25-graph-xplane-jax-critical-path")
        # Select the op in the middle of the path and add its neighborhood (both runs of its name).
        uid, name = cypher_rows(
            http, "MATCH (o:Op {trace: $trace}) WHERE o.cp_step = $k RETURN o.uid, o.name", JAX, k=n // 2
        )[0]
        at = page.evaluate(NODE_AT, uid)
        page.mouse.click(at["x"], at["y"])
        page.wait_for_function("(op) => document.querySelector('#graph-selection h3')?.textContent === op", arg=name)
        page.click("#graph-expand")
        page.wait_for_function("() => / added /.test(document.getElementById('graph-expand-status').textContent)")
        near = graph_nodes(
            http.get(f"/traces/{JAX}/queries/op-neighborhood-graph", params={"op": name, "hops": 1}).json()["rows"],
            {},
        )
        added = len(set(near) - set(path))
        assert added > 0
        status = page.text_content("#graph-expand-status")
        assert status.startswith(f"{added} op{'' if added == 1 else 's'} added"), status
        drawn = page.evaluate(DRAWN, None)
        shot(page, "26-graph-xplane-jax-path-neighborhood")
        assert {x["uid"] for x in drawn["nodes"]} == set(path) | set(near)
        # The neighborhood view itself: the ops within one hop of every run of that name, the runs in the middle.
        open_xplane_graph(page, f"#/graph/{JAX}?op={name}&hops=1")
        caption = page.text_content("#graph-caption")
        assert caption == f"{name}: ops within 1 hops — showing {len(near)} of {len(near)} nodes", caption
        drawn = page.evaluate(DRAWN, None)
        shot(page, "27-graph-xplane-jax-neighborhood")
        assert {x["uid"] for x in drawn["nodes"]} == set(near)
        runs = cypher_rows(http, "MATCH (o:Op {trace: $trace, name: $name}) RETURN o.uid", JAX, name=name)
        assert len(runs) == 2  # one per step
        centers = page.evaluate("() => window.__tracegraph.graph.cy.nodes('[center = 1]').map((x) => x.data('uid'))")
        assert sorted(centers) == sorted(r[0] for r in runs)


def test_xplane_tf_graph_says_not_available(ui, xplane_uploaded, http):
    page, _console, _requests, _responses = ui
    reason = next(
        h["note"] for h in http.get(f"/ui/traces/{KERAS}/timeline").json()["highlights"] if h["name"] == "critical-path"
    )
    api = http.get(f"/traces/{KERAS}/queries/critical-path-graph").json()
    assert api["rows"] == [] and api["note"].startswith(f"not available: {reason}")
    with page_stays_clean(ui):
        for route in (f"#/graph/{KERAS}?cp=1&first=0", f"#/graph/{KERAS}?op=sequential_1/conv_1/Relu&hops=1"):
            page.evaluate("() => { if (window.__tracegraph) window.__tracegraph.graph = null; }")
            go(page, route)
            page.wait_for_function(
                "() => (document.getElementById('graph-caption')?.textContent || '').startsWith('not available')"
            )
            page.wait_for_timeout(200)
            assert page.text_content("#graph-caption") == f"not available: {reason}"
            assert page.locator("#graph-box").inner_html() == ""  # nothing drawn, no error either
            assert page.evaluate("() => window.__tracegraph?.graph ?? null") is None
        shot(page, "28-graph-xplane-tf-not-available")


# ---------------------------------------------------------------------------- ranks

DIST = "ddp-ui"
DIST_FILES = sorted((ROOT / "tests" / "data" / "pytorch_dist").glob("straggler.rank*.json.gz"))


@pytest.fixture(scope="module")
def dist_uploaded(http):
    """The 4-rank gloo job with a straggler (rank 2), its rank files uploaded at once."""
    upload_via_api(http, DIST, *DIST_FILES)
    return DIST


def test_ranks_view_names_the_straggler(ui, dist_uploaded, http):
    """Every section is its analysis's answer; rank 2 (80 ms late) heads
    straggler-ranks, marked, and is the straggler of the only collective
    stragglers names."""
    page, console, _requests, _responses = ui
    page.goto(page.url.split("#")[0] + f"#/ranks/{DIST}")
    page.wait_for_selector("section[data-analysis='job-critical-path'] p.caption")
    shot(page, "13-ranks")
    for name in ("straggler-ranks", "stragglers", "comm-compute-overlap", "idle-breakdown", "job-critical-path"):
        api = http.get(f"/traces/{DIST}/queries/{name}").json()
        section = page.locator(f"section[data-analysis='{name}']")
        assert section.locator("p.caption").text_content() == f"{len(api['rows']):,} rows"
        assert section.locator("tbody tr").count() == len(api["rows"]) > 0, name
        cells = section.locator("tbody tr").first.locator("td").evaluate_all("tds => tds.map(td => td.textContent)")
        assert cells[0] == str(api["rows"][0][0]), name
    assert page.input_value("#ranks-trace") == DIST
    ranks = page.locator("section[data-analysis='straggler-ranks'] tbody tr")
    assert ranks.first.locator("td").first.text_content() == "2"
    assert page.locator("section[data-analysis='straggler-ranks'] tr.straggler").count() == 1
    assert "straggler" in (ranks.first.get_attribute("class") or "")
    stragglers = http.get(f"/traces/{DIST}/queries/stragglers").json()
    assert {r[2] for r in stragglers["rows"]} == {2}
    assert not [e for e in console.errors if DIST in e]


def test_timeline_shows_the_ranks_and_links_their_collectives(ui, dist_uploaded, http):
    """Ranks one above the other; each collective's calls placed on their
    ranks' lanes (as the API's JOINS say), the waits drawn in the waiting
    color on the ranks that waited, the straggler's call framed in the
    straggler color on rank 2's lane."""
    page, _console, _requests, _responses = ui
    page.goto(page.url.split("#")[0] + f"#/timeline/{DIST}")
    page.wait_for_selector("#timeline-plot[data-ready='1']")
    page.wait_for_timeout(200)
    shot(page, "14-timeline-ranks")
    t = page.evaluate(
        """() => { const t = window.__tracegraph.timeline;
        return {lanes: t.lanes, collectives: t.collectives, colors: t.colors}; }"""
    )
    lane_rank = [int(re.match(r"rank(\d+)/", lane["name"])[1]) for lane in t["lanes"]]
    assert lane_rank == sorted(lane_rank) and set(lane_rank) == {0, 1, 2, 3}  # one rank above the next
    joins = http.post(
        "/cypher",
        json={
            "query": "MATCH (o:Op)-[j:JOINS]->(c:Collective {trace: $trace}) "
            "RETURN c.seq, j.rank, o.start_us, j.wait_us ORDER BY c.seq, j.rank",
            "trace": DIST,
        },
    ).json()["rows"]
    drawn = [(c["seq"], k["rank"], k["start_us"], k["wait_us"]) for c in t["collectives"] for k in c["calls"]]
    assert drawn == [tuple(r) for r in joins] and len(drawn) == 20
    for c in t["collectives"]:
        for k in c["calls"]:
            assert k["lane"] is not None and lane_rank[k["lane"]] == k["rank"]
    first = t["collectives"][0]
    assert (first["last_rank"], first["caused_us"] >= 10_000) == (2, True)
    assert all(c["caused_us"] < 10_000 for c in t["collectives"][1:])
    pixels = lambda hex_, lane: page.evaluate("([h, l]) => window.__tracegraph.timeline.pixels(h, l)", [hex_, lane])  # noqa: E731
    by_rank = {k["rank"]: k["lane"] for k in first["calls"]}
    assert pixels(t["colors"]["straggler"], by_rank[2]) > 0
    for rank in (0, 1, 3):
        assert pixels(t["colors"]["waiting"], by_rank[rank]) > 0, rank
    # Zoomed in on a stretch where no collective runs, nothing of them is drawn.
    page.evaluate("() => window.__tracegraph.timeline.setView(0, 200)")
    page.wait_for_timeout(300)
    assert pixels(t["colors"]["straggler"], None) == 0 and pixels(t["colors"]["waiting"], None) == 0


def test_no_console_errors(ui, uploaded):
    _page, console, _requests, responses = ui
    assert console.errors == []
    assert not [r for r in responses if r[2] >= 400 and "/cypher" not in r[1]]


# ---------------------------------------------------------------------------- API key


def test_api_key_flow(playwright_instance, tmp_path):
    home = tmp_path / "home"
    with serve(home, env={"TRACEGRAPH_API_KEY": KEY}, log=tmp_path / "serve.log") as base:
        with httpx.Client(base_url=base) as http:
            assert http.get("/traces").status_code == 401
            assert http.get("/").status_code == 200
        with browser_context(playwright_instance) as ctx:
            page = ctx.new_page()
            page.set_default_timeout(60_000)
            console = Console(page)
            urls, statuses = [], []
            page.on("request", lambda r: urls.append(r.url))
            page.on("response", lambda r: statuses.append((r.url, r.status)))
            page.goto(base + "/#/traces")
            dialog = page.locator("#key-dialog[open]")
            dialog.wait_for()
            assert ("/traces" in statuses[-1][0] and statuses[-1][1] == 401) or any(s == 401 for _, s in statuses)
            shot(page, "14-key-dialog")
            page.fill("#key-dialog input", "wrong-key")
            page.click("#key-dialog button[type=submit]")
            page.wait_for_function(
                "() => document.querySelector('#key-dialog .key-message').textContent.includes('refused')"
            )
            page.fill("#key-dialog input", KEY)
            page.click("#key-dialog button[type=submit]")
            page.wait_for_selector("#upload-go")
            assert page.locator("#key-dialog[open]").count() == 0
            assert page.evaluate("() => sessionStorage.getItem('tracegraph.key')") == KEY
            assert page.evaluate("() => localStorage.length") == 0
            # Kept for the tab: a reload asks no more.
            page.reload()
            page.wait_for_selector("#upload-go")
            page.wait_for_timeout(300)
            assert page.locator("#key-dialog[open]").count() == 0
            assert not any(KEY in u for u in urls)  # never in a URL
            # The only console errors are the browser's own notes on the refused requests.
            assert console.errors and all("401" in e for e in console.errors), console.errors


# ---------------------------------------------------------------------------- the traces beyond the framework profilers

DATA = Path(__file__).parent / "data"
BEYOND = [
    ("paddle-ui", DATA / "chrome" / "paddle_train_step.paddle_trace.json", "paddle"),
    ("nsys-ui", DATA / "nsys" / "perlmutter-cloverleaf-cuda.sqlite.gz", "cuda"),
    ("rocprof-ui", DATA / "rocprof" / "rocprof_908_results.json.gz", "rocm"),
]


def upload_through_the_page(page, trace: str, path: Path) -> None:
    """Drop the file on the upload zone, name the trace, upload, wait for its row."""
    page.goto(page.url.split("#")[0] + "#/traces")
    page.wait_for_selector("#dropzone")
    drop_file(page, path)
    page.fill("#upload-name", trace)
    page.click("#upload-go")
    status = page.locator("#upload-status")
    for _ in range(2400):
        if status.get_attribute("data-done") == trace or status.get_attribute("data-failed"):
            break
        page.wait_for_timeout(50)
    assert status.get_attribute("data-done") == trace, status.text_content()
    page.wait_for_selector(f"tr[data-trace='{trace}']")


@pytest.mark.parametrize(("trace", "path", "framework"), BEYOND, ids=[b[2] for b in BEYOND])
def test_a_chrome_an_nsys_and_a_rocprof_trace_in_the_page(ui, uploaded, http, trace, path, framework):
    """Each new kind of file goes in through the page as a user drops it, is
    listed with its framework, and its timeline draws what the API gives:
    the Chrome trace's host lanes, the GPU streams of the NVIDIA and AMD
    captures with their kernels."""
    page, _console, _requests, _responses = ui
    upload_through_the_page(page, trace, path)
    summary = http.get(f"/traces/{trace}").json()
    cells = page.locator(f"tr[data-trace='{trace}'] td")
    assert cells.nth(0).text_content() == trace and cells.nth(1).text_content() == framework
    assert cells.nth(2).text_content() == f"{summary['ops']:,}"
    page.goto(page.url.split("#")[0] + f"#/timeline/{trace}")
    page.wait_for_selector("#timeline-plot[data-ready='1']")
    api = http.get(f"/ui/traces/{trace}/timeline").json()
    lanes = page.evaluate("() => window.__tracegraph.timeline.lanes")
    assert [(lane["name"], lane["kind"]) for lane in lanes] == [(lane["name"], lane["kind"]) for lane in api["lanes"]]
    assert lanes, api
    colors = page.evaluate("() => window.__tracegraph.timeline.colors")
    if framework in ("cuda", "rocm"):
        assert any(lane["kind"] == "compute" and lane["bars"] for lane in api["lanes"]), api["lanes"]
        # with nothing highlighted, its kernels are drawn in the kernel color
        page.select_option("#highlight-source", "")
        page.wait_for_function(
            "() => { const t = window.__tracegraph.timeline; const d = t.data();"
            " return t.highlight() === '' && d && d.highlight === null; }"
        )
        page.wait_for_timeout(200)
        assert page.evaluate("([c]) => window.__tracegraph.timeline.pixels(c)", [colors["compute"]]) > 0
    shot(page, f"20-beyond-{framework}")
