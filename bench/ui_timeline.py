"""Browser benchmark of the web UI's timeline on a generated 100k-op trace.

Starts ``tracegraph serve`` on a data directory holding the trace (made
with ``python -m bench.generate`` and ingested first when missing), opens
``/#/timeline/TRACE`` in headless Chromium (bench/browser.py) and reads the
page's own performance marks:

* open: from the view's start (``tg-timeline-open``) to the first frame
  with bars (``tg-timeline-ready``), and from navigation start to that
  frame; the first open after the server started (its timeline cache
  empty) and then warm reopens;
* pan: the mouse drags the plot in small steps at three zoom levels while
  an in-page requestAnimationFrame loop records frame intervals; the bar
  drawing time per frame and the window fetches are recorded by the view.

    python -m bench.ui_timeline [--ops 100000] [--home /tmp/bench-ui-home] [--runs 3]

Figures are printed (and go in bench/RESULTS.md); nothing here is a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.browser import browser_context, serve, why_no_browser

ROOT = Path(__file__).resolve().parent.parent

FRAME_RECORDER = """() => {
  const rec = {frames: [], last: performance.now(), on: true};
  const tick = (t) => { rec.frames.push(t - rec.last); rec.last = t; if (rec.on) requestAnimationFrame(tick); };
  requestAnimationFrame(tick);
  window.__frames = rec;
  window.__tgPerf = {draws: [], fetches: []};
}"""


def ensure_trace(home: Path, ops: int, trace: str) -> None:
    env = dict(os.environ, TRACEGRAPH_HOME=str(home))
    env.pop("TRACEGRAPH_DB", None)
    have = subprocess.run(
        [sys.executable, "-m", "tracegraph.cli", "traces", "--format", "csv"], env=env, capture_output=True, text=True
    )
    if have.returncode == 0 and any(line.split(",")[0] == trace for line in have.stdout.splitlines()):
        return
    pb = ROOT / "bench" / "out" / f"stepstats-{ops}-s0.pb"
    if not pb.exists():
        subprocess.run([sys.executable, "-m", "bench.generate", "--ops", str(ops)], cwd=ROOT, check=True)
    print(f"ingesting {pb.name} as {trace} into {home} ...", flush=True)
    subprocess.run(
        [sys.executable, "-m", "tracegraph.cli", "ingest", str(pb), "--trace", trace, "--replace"], env=env, check=True
    )


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(p / 100 * (len(xs) - 1))))] if xs else float("nan")


def open_timeline(page, base: str, trace: str) -> dict:
    page.goto("about:blank")
    page.goto(f"{base}/#/timeline/{trace}")
    page.wait_for_selector("#timeline-plot[data-ready='1']", timeout=120_000)
    # The highlighted-ops list loads after the first bars; let it finish so the server is idle again.
    page.wait_for_selector("#highlight-list h3", timeout=120_000)
    return page.evaluate("""() => {
        const m = performance.getEntriesByName('tg-timeline-open-to-ready').pop();
        const r = performance.getEntriesByName('tg-timeline-ready').pop();
        return {view_ms: m.duration, since_navigation_ms: r.startTime,
                bars: window.__tracegraph.timeline.data().bars};
    }""")


def pan(page, fraction: float, steps: int = 60, step_px: int = 10) -> dict:
    """Zoom to `fraction` of the trace around its middle, then drag left in small steps."""
    page.evaluate(
        """(f) => { const t = window.__tracegraph.timeline; const i = t.info;
        const c = (i.t_min + i.t_max) / 2, w = (i.t_max - i.t_min) * f; t.setView(c - w / 2, c + w / 2); }""",
        fraction,
    )
    page.wait_for_function(
        """() => { const t = window.__tracegraph.timeline; const d = t.data(), v = t.view();
        return d && d.t0 <= v.min && d.t1 >= v.max; }""",
        timeout=60_000,
    )
    page.wait_for_timeout(300)
    box = page.locator("#timeline-plot .u-over").bounding_box()
    x, y = box["x"] + box["width"] * 0.8, box["y"] + box["height"] / 2
    page.mouse.move(x, y)
    page.evaluate(FRAME_RECORDER)
    page.mouse.down()
    t0 = time.perf_counter()
    for k in range(1, steps + 1):
        page.mouse.move(x - k * step_px, y)
    page.mouse.up()
    wall = time.perf_counter() - t0
    page.wait_for_timeout(500)  # let the last window arrive
    rec = page.evaluate(
        "() => { window.__frames.on = false; return {frames: window.__frames.frames,"
        " draws: window.__tgPerf.draws, fetches: window.__tgPerf.fetches,"
        " bars: window.__tracegraph.timeline.data().bars}; }"
    )
    frames = rec["frames"][1:]
    return {
        "fraction": fraction,
        "moves": steps,
        "wall_s": wall,
        "frames": len(frames),
        "frame_p50": pct(frames, 50),
        "frame_p95": pct(frames, 95),
        "frame_max": max(frames, default=float("nan")),
        "long_frames": sum(1 for f in frames if f > 50),
        "draw_p50": pct(rec["draws"], 50),
        "draw_max": max(rec["draws"], default=float("nan")),
        "fetches": len(rec["fetches"]),
        "fetch_p50": pct(rec["fetches"], 50),
        "fetch_max": max(rec["fetches"], default=float("nan")),
        "bars": rec["bars"],
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ops", type=int, default=100_000)
    ap.add_argument("--home", type=Path, default=Path("/tmp/bench-ui-home"))
    ap.add_argument("--runs", type=int, default=3, help="warm reopens")
    args = ap.parse_args(argv)
    reason = why_no_browser()
    if reason:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 1
    trace = f"gen{args.ops}"
    args.home.mkdir(parents=True, exist_ok=True)
    ensure_trace(args.home, args.ops, trace)
    from playwright.sync_api import sync_playwright

    with serve(args.home, log=args.home / "serve.log") as base, sync_playwright() as p, browser_context(p) as ctx:
        page = ctx.new_page()
        errors = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{base}/#/traces")
        page.wait_for_selector("#upload-go")
        cold = open_timeline(page, base, trace)
        warm = [open_timeline(page, base, trace) for _ in range(args.runs)]
        print(f"\ntimeline of {trace} ({args.ops:,} ops), Chromium headless, 1400x900 viewport")
        print(
            f"open, first after server start: {cold['view_ms']:.0f} ms from the view's start to bars drawn "
            f"({cold['since_navigation_ms']:.0f} ms since navigation), {cold['bars']:,} bars"
        )
        print(
            "open, warm (median of {}): {:.0f} ms ({:.0f} ms since navigation)".format(
                len(warm),
                statistics.median(w["view_ms"] for w in warm),
                statistics.median(w["since_navigation_ms"] for w in warm),
            )
        )
        print(
            f"\n{'zoom':>8} {'moves':>5} {'frames':>6} {'frame p50':>9} {'p95':>6} {'max':>6} {'>50ms':>5} "
            f"{'draw p50':>8} {'draw max':>8} {'fetches':>7} {'fetch p50':>9} {'bars':>6}"
        )
        for fraction in (1.0, 0.05, 0.001):
            r = pan(page, fraction)
            print(
                f"{fraction:>8g} {r['moves']:>5} {r['frames']:>6} {r['frame_p50']:>7.1f}ms {r['frame_p95']:>4.1f}ms "
                f"{r['frame_max']:>4.0f}ms {r['long_frames']:>5} {r['draw_p50']:>6.2f}ms {r['draw_max']:>6.2f}ms "
                f"{r['fetches']:>7} {r['fetch_p50']:>7.0f}ms {r['bars']:>6,}"
            )
        print(f"\nconsole errors: {len(errors)}" + (f": {errors[:3]}" if errors else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
