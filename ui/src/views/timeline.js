// Timeline: one lane per device stream (kernels and copies) and op lanes
// per device; zoom with the wheel, pan by dragging, hover for details. A
// multi-rank job's ranks come one above the other (the API orders devices
// by rank), its collectives drawn across them with the straggler marked.
//
// This module wires the parts in ../timeline/: the view window (state.js),
// the windows fetched from the API at screen resolution (data.js), the
// canvas (draw.js), the mouse (interaction.js), the hover card (card.js)
// and the highlight source with its list of ops (highlights.js). The
// highlighted ops come from a pluggable source (queries/highlights.py); the trace's
// timeline says which sources it can answer and opens with the best one.
import { enc, getJSON } from "../api.js";
import { debounce, el, fmtInt } from "../util.js";
import { createViewState } from "../timeline/state.js";
import { createOpCache, createWindowSource, perf } from "../timeline/data.js";
import {
  COLORS,
  countPixels,
  createPlot,
  drawBars,
  drawCollectives,
  laneLabels,
  plotHeight,
} from "../timeline/draw.js";
import { attachMouse, hitTest } from "../timeline/interaction.js";
import { createHoverCard, describeBar, showSelection } from "../timeline/card.js";
import { highlightSelect, initialHighlight, rowSpan, showHighlightList } from "../timeline/highlights.js";

function legend(collectives) {
  const swatch = (color, text, extra = "") => [el("i", { style: `background:${color}${extra}` }), text, " "];
  return el(
    "span.legend",
    {},
    swatch(COLORS.op, "op"),
    swatch(COLORS.compute, "kernel"),
    swatch(COLORS.memcpy, "copy"),
    swatch(COLORS.communication, "communication"),
    swatch(COLORS.highlight, "highlighted"),
    swatch(COLORS.idle, "idle stream", "; border:1px solid #e9b"),
    collectives ? swatch(COLORS.waiting, "waiting for the last rank") : null,
    collectives ? swatch(COLORS.straggler, "straggler") : null,
    el("i.merged", {}),
    "merged (zoom in)",
  );
}

export async function render(root, [trace], query) {
  performance.clearMarks("tg-timeline-open");
  performance.clearMarks("tg-timeline-ready");
  performance.mark("tg-timeline-open");
  const info = await getJSON(`/ui/traces/${enc(trace)}/timeline`);
  const unit = info.time_unit === "step" ? "step" : "us";
  root.append(el("h1", {}, "Timeline ", el("span.muted", {}, trace)));
  if (!info.lanes.length) {
    root.append(el("p.empty", {}, info.note || "nothing to draw"));
    return null;
  }
  const lanes = info.lanes;
  const n = lanes.length;
  const collectives = info.collectives || [];
  const sources = info.highlights || [];
  let highlight = initialHighlight(sources, query.highlight, info.highlight_default);
  let ready = false;
  let listShown = false;
  const opDetail = createOpCache(trace);

  // ---------------------------------------------------------------- page
  const hlSelect = highlightSelect(sources, highlight, (name) => {
    highlight = name;
    source.forget();
    refresh();
    showList();
  });
  const status = el("span.status#timeline-status", { role: "status" });
  const toolbar = el(
    "div.toolbar",
    {},
    el("label", {}, "highlight ", hlSelect),
    el("button", { type: "button", onclick: () => state.zoom(0.5) }, "zoom in"),
    el("button", { type: "button", onclick: () => state.zoom(2) }, "zoom out"),
    el("button", { type: "button", id: "timeline-reset", onclick: () => state.reset() }, "whole trace"),
    legend(collectives.length > 0),
    status,
  );
  const plotBox = el("div.timeline-plot#timeline-plot");
  const tip = el("div.tooltip#timeline-tip", { hidden: true });
  const details = el("div.details#timeline-details");
  const hlList = el("div#highlight-list");
  root.append(
    toolbar,
    el("p.muted", {}, "Wheel to zoom, drag to pan, hover for details, click a bar to select it."),
    plotBox,
    tip,
    details,
    hlList,
  );

  // ---------------------------------------------------------------- parts
  const initial = query.t0 && query.t1 ? { min: Number(query.t0), max: Number(query.t1) } : null;
  const state = createViewState({
    tMin: info.t_min,
    tMax: info.t_max,
    unit,
    initial,
    onChange: (v) => u.setScale("x", { min: v.min, max: v.max }),
  });
  const source = createWindowSource({
    trace,
    onStart: () => {
      status.textContent = "loading…";
    },
    onData: (d) => {
      if (!listShown) {
        listShown = true; // after the first bars: the list must not delay them
        showList();
      }
      status.textContent =
        `${fmtInt(d.bars)} bars${d.truncated ? " (capped: zoom in for the rest)" : ""}` +
        (d.highlight_note ? ` · ${d.highlight}: ${d.highlight_note}` : "");
      u.redraw(false);
    },
    onError: (err) => {
      status.textContent = err.message;
    },
  });
  const width = () => Math.max(400, root.clientWidth - 8);
  const cssWidth = () => u.bbox.width / devicePixelRatio;
  // Lane labels get up to 30% of the width; longer names lose their middle (the hover card has them whole).
  const { labels, size: labelSize } = laneLabels(
    lanes.map((l) => l.name),
    width() * 0.3,
  );
  const u = createPlot(plotBox, {
    lanes,
    labels,
    labelSize,
    unit,
    width: width(),
    tMin: info.t_min,
    tMax: info.t_max,
    draw: (plot) => {
      const t = performance.now();
      const data = source.data();
      drawBars(plot, { lanes, tMin: info.t_min, tMax: info.t_max, data });
      drawCollectives(plot, { lanes, collectives });
      perf().draws.push(performance.now() - t);
      if (data && !ready) {
        ready = true;
        performance.mark("tg-timeline-ready");
        performance.measure("tg-timeline-open-to-ready", "tg-timeline-open", "tg-timeline-ready");
        plotBox.dataset.ready = "1";
      }
    },
    scaled: () => scheduleRefresh(),
  });

  /** Draw the view from the last window when it covers it, else fetch one. */
  function refresh() {
    const v = state.get();
    if (source.covers(v, cssWidth(), highlight)) u.redraw(false);
    else source.load(v, cssWidth(), highlight);
  }
  const scheduleRefresh = debounce(refresh, 40);

  // ---------------------------------------------------------------- mouse
  const highlightLabel = () => hlSelect.selectedOptions[0]?.textContent || "";
  const describe = (h) => describeBar(h, lanes[h.li], unit, highlightLabel());
  const card = createHoverCard(tip, { describe, opDetail });
  const hit = (ev) => hitTest(u, source.data(), n, state.get(), ev);
  const detach = attachMouse(u, {
    state,
    onHover: (ev) => {
      const h = hit(ev);
      card.show(ev, h, h && `${h.li}:${h.j}:${source.data().t0}`);
    },
    onLeave: () => card.hide(),
    onClick: (ev) => {
      const h = hit(ev);
      if (!h) return;
      showSelection(details, h, { trace, describe, opDetail });
      if (h.lane.n[h.j] > 1) state.zoom(0.1, (h.lane.s[h.j] + h.lane.e[h.j]) / 2); // merged bars: zoom in on them
    },
  });

  // ---------------------------------------------------------------- highlighted ops
  function showList() {
    const src = sources.find((s) => s.name === highlight);
    showHighlightList(hlList, {
      trace,
      src,
      unit,
      onPick: async (row, columns) => {
        const span = await rowSpan(src, row, columns, opDetail);
        if (span) {
          const pad = Math.max((span[1] - span[0]) * 2, state.span * 0.001);
          state.set(span[0] - pad, span[1] + pad);
        }
      },
    });
  }

  const onResize = debounce(() => u.setSize({ width: width(), height: plotHeight(n) }), 100);
  window.addEventListener("resize", onResize);

  // For tests and the benchmark: the state behind the canvas.
  window.__tracegraph = window.__tracegraph || {};
  window.__tracegraph.timeline = {
    trace,
    info,
    lanes,
    labels,
    view: () => state.get(),
    data: () => source.data(),
    highlight: () => highlight,
    collectives,
    setView: (min, max) => state.set(min, max),
    /** Page coordinates of the middle of time span [s, e] in lane laneId. */
    point(laneId, s, e) {
      const r = u.over.getBoundingClientRect();
      return { x: r.left + u.valToPos((s + e) / 2, "x"), y: r.top + u.valToPos(n - laneId - 0.5, "y") };
    },
    /** Canvas pixels in color hex (#RRGGBB), in lane laneId only when given. */
    pixels: (hex, laneId = null) => countPixels(u, hex, laneId, n),
    highlightPixels: () => countPixels(u, COLORS.highlight),
    colors: { ...COLORS },
  };

  const v = state.get();
  u.setScale("x", { min: v.min, max: v.max });
  refresh();
  return () => {
    detach();
    window.removeEventListener("resize", onResize);
    state.dispose();
    source.abort();
    if (window.__tracegraph) delete window.__tracegraph.timeline;
    u.destroy();
    tip.remove();
  };
}
