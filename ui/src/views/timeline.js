// Timeline: one lane per device stream (kernels and copies) and op lanes
// per device; zoom with the wheel, pan by dragging, hover for details.
//
// Only what is visible is fetched: GET /ui/traces/{t}/timeline/window
// answers a time window at screen resolution (sub-pixel bars merged on the
// server, capped), for a window half a screen wider on each side so that a
// pan redraws from memory and fetches again only when it nears the edge.
// The highlighted ops (the critical path by default) come from a pluggable
// source (GET /ui/highlights): the server marks their bars, merged or not.
import uPlot from "uplot";
import { enc, getJSON, qs } from "../api.js";
import { clear, debounce, el, errorBox, fmtAxis, fmtInt, fmtTime } from "../util.js";

const LANE_H = 24;
const COLORS = {
  op: "#4C8EDA", // tracegraph.grass: Op
  compute: "#D7A013", // Kernel
  memcpy: "#B261A5", // Stream (copies)
  highlight: "#E0201B", // CRITICAL_PRED
  idle: "#FBE3E3",
  opLane: "#F3F5F8",
};

function perf() {
  window.__tgPerf = window.__tgPerf || { draws: [], fetches: [] };
  return window.__tgPerf;
}

/** Index of the bar of `lane` (window data) under time x, within tol; -1 if none. */
function barAt(lane, x, tol) {
  const s = lane.s;
  let lo = 0;
  let hi = s.length - 1;
  let k = -1;
  while (lo <= hi) { // last bar starting at or before x + tol
    const mid = (lo + hi) >> 1;
    if (s[mid] <= x + tol) { k = mid; lo = mid + 1; } else hi = mid - 1;
  }
  for (let j = k; j >= 0 && j > k - 64; j--) {
    if (lane.e[j] >= x - tol && lane.s[j] <= x + tol) return j;
  }
  return -1;
}

export async function render(root, [trace], query, ctx) {
  performance.clearMarks("tg-timeline-open");
  performance.clearMarks("tg-timeline-ready");
  performance.mark("tg-timeline-open");
  const [info, sources] = await Promise.all([
    getJSON(`/ui/traces/${enc(trace)}/timeline`), getJSON("/ui/highlights"),
  ]);
  const unit = info.time_unit === "step" ? "step" : "us";
  root.append(el("h1", {}, "Timeline ", el("span.muted", {}, trace)));
  if (!info.lanes.length) {
    root.append(el("p.empty", {}, info.note || "nothing to draw"));
    return null;
  }
  const lanes = info.lanes;
  const n = lanes.length;
  const span = Math.max(info.t_max - info.t_min, 1e-9);
  let view = { min: info.t_min - span * 0.01, max: info.t_max + span * 0.01 };
  if (query.t0 && query.t1 && Number(query.t1) > Number(query.t0)) view = { min: Number(query.t0), max: Number(query.t1) };
  let highlight = sources.some((s) => s.name === query.highlight) ? query.highlight
    : sources.some((s) => s.name === "critical-path") ? "critical-path" : "";
  let data = null; // the last window answer
  let inflight = null;
  let ready = false;
  let listShown = false;

  const hlSelect = el("select#highlight-source", {
    onchange: () => { highlight = hlSelect.value; data = null; fetchWindow(); showHighlightList(); },
  }, el("option", { value: "" }, "nothing"), sources.map((s) => el("option", { value: s.name, selected: s.name === highlight }, s.label)));
  const status = el("span.status#timeline-status", { role: "status" });
  const toolbar = el("div.toolbar", {},
    el("label", {}, "highlight ", hlSelect),
    el("button", { type: "button", onclick: () => zoom(0.5) }, "zoom in"),
    el("button", { type: "button", onclick: () => zoom(2) }, "zoom out"),
    el("button", { type: "button", id: "timeline-reset", onclick: () => setView(info.t_min - span * 0.01, info.t_max + span * 0.01) }, "whole trace"),
    el("span.legend", {},
      el("i", { style: `background:${COLORS.op}` }), "op ",
      el("i", { style: `background:${COLORS.compute}` }), "kernel ",
      el("i", { style: `background:${COLORS.memcpy}` }), "copy ",
      el("i", { style: `background:${COLORS.highlight}` }), "highlighted ",
      el("i", { style: `background:${COLORS.idle}; border:1px solid #e9b` }), "idle stream ",
      el("i.merged", {}), "merged (zoom in)"),
    status);
  const plotBox = el("div.timeline-plot#timeline-plot");
  const tip = el("div.tooltip#timeline-tip", { hidden: true });
  const details = el("div.details#timeline-details");
  const hlList = el("div#highlight-list");
  root.append(toolbar, el("p.muted", {}, "Wheel to zoom, drag to pan, hover for details, click a bar to select it."),
    plotBox, tip, details, hlList);

  // ---------------------------------------------------------------- drawing
  function drawBars(u) {
    const t = performance.now();
    const c = u.ctx;
    const { left, top, width, height } = u.bbox;
    c.save();
    c.beginPath();
    c.rect(left, top, width, height);
    c.clip();
    const xs = (v) => u.valToPos(v, "x", true);
    const laneTop = (i) => u.valToPos(n - i, "y", true);
    const laneH = Math.abs(u.valToPos(0, "y", true) - u.valToPos(1, "y", true));
    const bh = Math.max(2, laneH * 0.7);
    const x0 = xs(info.t_min);
    const x1 = xs(info.t_max);
    for (let i = 0; i < n; i++) { // lane backgrounds: idle stretches of streams show pale red
      c.fillStyle = lanes[i].kind === "stream" ? COLORS.idle : COLORS.opLane;
      c.fillRect(x0, laneTop(i) + (laneH - bh) / 2, x1 - x0, bh);
    }
    if (data) {
      // Single bars in full color (highlighted ones red); merged bars paler,
      // with a red band along their bottom when any op merged into them is
      // highlighted, so an overview does not turn a whole lane red.
      const groups = { op: new Path2D(), compute: new Path2D(), memcpy: new Path2D(), highlight: new Path2D() };
      const merged = { op: new Path2D(), compute: new Path2D(), memcpy: new Path2D(), highlight: new Path2D() };
      const minW = Math.max(1, devicePixelRatio);
      const band = Math.max(2, bh * 0.35);
      for (const lane of data.lanes) {
        const meta = lanes[lane.id];
        const y = laneTop(lane.id) + (laneH - bh) / 2;
        const base = meta.kind === "ops" ? "op" : meta.name.endsWith("memcpy") ? "memcpy" : "compute";
        for (let j = 0; j < lane.s.length; j++) {
          const a = xs(lane.s[j]);
          const b = xs(lane.e[j]);
          if (b < left - 2 || a > left + width + 2) continue;
          const w = Math.max(minW, b - a);
          if (lane.n[j] > 1) {
            merged[base].rect(a, y, w, bh);
            if (lane.h[j]) merged.highlight.rect(a, y + bh - band, w, band);
            continue;
          }
          let kind = base;
          if (lane.h[j]) kind = "highlight";
          else if (meta.kind !== "ops" && lane.names[lane.i[j]][1] === "memcpy") kind = "memcpy";
          groups[kind].rect(a, y, w, bh);
        }
      }
      for (const k of ["op", "compute", "memcpy"]) {
        c.globalAlpha = 0.5;
        c.fillStyle = COLORS[k];
        c.fill(merged[k]);
        c.globalAlpha = 1;
        c.fill(groups[k]);
      }
      c.fillStyle = COLORS.highlight;
      c.fill(merged.highlight);
      c.fill(groups.highlight);
    }
    c.restore();
    perf().draws.push(performance.now() - t);
    if (data && !ready) {
      ready = true;
      performance.mark("tg-timeline-ready");
      performance.measure("tg-timeline-open-to-ready", "tg-timeline-open", "tg-timeline-ready");
      plotBox.dataset.ready = "1";
    }
  }

  const width = () => Math.max(400, root.clientWidth - 8);
  const u = new uPlot({
    width: width(),
    height: n * LANE_H + 36,
    scales: {
      x: { time: false, auto: false, range: (_u, min, max) => [min, max] },
      y: { auto: false, range: [0, n] },
    },
    axes: [
      { scale: "x", values: (_u, splits) => fmtAxis(splits, unit), space: 70, size: 30, grid: { stroke: "#e6e6e6", width: 1 } },
      {
        scale: "y", size: 190, gap: 4, ticks: { show: false }, grid: { show: false },
        splits: () => lanes.map((_, i) => n - i - 0.5),
        values: (_u, splits) => splits.map((s) => lanes[n - 1 - Math.floor(s)]?.name ?? ""),
      },
    ],
    series: [{}, { scale: "y", paths: () => null, points: { show: false } }],
    legend: { show: false },
    cursor: { drag: { x: false, y: false, setScale: false }, points: { show: false }, y: false },
    hooks: {
      draw: [drawBars],
      setScale: [(_u, key) => { if (key === "x") scheduleFetch(); }],
    },
  }, [[info.t_min, info.t_max], [null, null]], plotBox);

  // ---------------------------------------------------------------- data
  function covers(d) {
    const w = view.max - view.min;
    const need = w / u.bbox.width * devicePixelRatio; // time per css pixel
    return d && d.highlight === (highlight || null) && d.t0 <= view.min && d.t1 >= view.max && d.res <= need * 1.5;
  }

  async function fetchWindow() {
    if (covers(data)) { u.redraw(false); return; }
    if (inflight) inflight.abort();
    const ac = new AbortController();
    inflight = ac;
    const w = view.max - view.min;
    const plotW = Math.round(u.bbox.width / devicePixelRatio);
    const t0 = view.min - w / 2;
    const t1 = view.max + w / 2;
    const t = performance.now();
    status.textContent = "loading…";
    try {
      const d = await getJSON(`/ui/traces/${enc(trace)}/timeline/window${qs({ t0, t1, px: plotW * 2, highlight })}`, { signal: ac.signal });
      if (ac.signal.aborted) return;
      perf().fetches.push(performance.now() - t);
      data = d;
      if (!listShown) { listShown = true; showHighlightList(); } // after the first bars: it must not delay them
      status.textContent = `${fmtInt(d.bars)} bars${d.truncated ? " (capped: zoom in for the rest)" : ""}` +
        (d.highlight_note ? ` · ${d.highlight}: ${d.highlight_note}` : "");
      u.redraw(false);
    } catch (err) {
      if (err.name === "AbortError") return;
      status.textContent = err.message;
    } finally {
      if (inflight === ac) inflight = null;
    }
  }
  const scheduleFetch = debounce(fetchWindow, 40);

  let pending = null;
  function setView(min, max) {
    const minW = unit === "step" ? 0.5 : 0.05;
    if (max - min < minW) { const c = (min + max) / 2; min = c - minW / 2; max = c + minW / 2; }
    const maxW = span * 3;
    if (max - min > maxW) { const c = (min + max) / 2; min = c - maxW / 2; max = c + maxW / 2; }
    view = { min, max };
    if (!pending) {
      pending = requestAnimationFrame(() => {
        pending = null;
        u.setScale("x", { min: view.min, max: view.max });
      });
    }
  }
  function zoom(f, at = (view.min + view.max) / 2) {
    setView(at - (at - view.min) * f, at + (view.max - at) * f);
  }

  // ---------------------------------------------------------------- mouse
  const over = u.over;
  over.addEventListener("wheel", (ev) => {
    ev.preventDefault();
    zoom(ev.deltaY < 0 ? 0.8 : 1.25, u.posToVal(ev.offsetX, "x"));
  }, { passive: false });
  let drag = null;
  over.addEventListener("mousedown", (ev) => {
    drag = { x: ev.clientX, min: view.min, max: view.max, moved: false };
    ev.preventDefault();
  });
  const onMove = (ev) => {
    if (!drag) return;
    const dx = ev.clientX - drag.x;
    if (Math.abs(dx) > 2) drag.moved = true;
    const per = (drag.max - drag.min) / (u.bbox.width / devicePixelRatio);
    setView(drag.min - dx * per, drag.max - dx * per);
  };
  const onUp = (ev) => {
    if (drag && !drag.moved) select(ev);
    drag = null;
  };
  window.addEventListener("mousemove", onMove);
  window.addEventListener("mouseup", onUp);

  const opCache = new Map();
  async function opDetail(name) {
    if (!opCache.has(name)) {
      opCache.set(name, getJSON(`/ui/traces/${enc(trace)}/op${qs({ name })}`).catch(() => null));
    }
    return opCache.get(name);
  }

  function hit(ev) {
    if (!data) return null;
    const li = n - 1 - Math.floor(u.posToVal(ev.offsetY, "y"));
    const lane = data.lanes.find((l) => l.id === li);
    if (!lane) return null;
    const x = u.posToVal(ev.offsetX, "x");
    const tol = 2 * (view.max - view.min) / (u.bbox.width / devicePixelRatio);
    const j = barAt(lane, x, tol);
    return j < 0 ? null : { lane, li, j };
  }

  function describe(h) {
    const { lane, li, j } = h;
    const meta = lanes[li];
    const s = lane.s[j];
    const e = lane.e[j];
    const rows = [];
    if (lane.n[j] > 1) {
      rows.push(el("b", {}, `${fmtInt(lane.n[j])} ${meta.kind === "ops" ? "ops" : "kernels"} merged`), " (zoom in to see them)");
    } else {
      const [name, type, op] = lane.names[lane.i[j]];
      rows.push(el("b", {}, name), el("br"), meta.kind === "ops" ? `type ${type}` : `${type} kernel of op ${op}`);
    }
    rows.push(el("br"), `${fmtTime(s, unit)} → ${fmtTime(e, unit)} (${fmtTime(e - s, unit)})`, el("br"), el("span.muted", {}, meta.name));
    if (lane.n[j] > 1 && lane.h[j]) rows.push(el("br"), el("span.hl", {}, "some of them highlighted"));
    else if (lane.h[j]) rows.push(el("br"), el("span.hl", {}, `highlighted: ${hlSelect.selectedOptions[0].textContent}`));
    return rows;
  }

  function shapesOf(d) {
    if (!d) return [];
    const io = (xs) => xs.map((t) => `${t.shape || "?"} ${t.dtype || ""}`.trim()).join(", ") || "none";
    return [el("br"), `inputs: ${io(d.inputs)}`, el("br"), `outputs: ${io(d.outputs)}`];
  }

  let hoverKey = null;
  over.addEventListener("mousemove", async (ev) => {
    if (drag) { tip.hidden = true; return; }
    const h = hit(ev);
    if (!h) { tip.hidden = true; hoverKey = null; return; }
    const key = `${h.li}:${h.j}:${data.t0}`;
    tip.style.left = `${ev.pageX + 14}px`;
    tip.style.top = `${ev.pageY + 14}px`;
    tip.hidden = false;
    if (key === hoverKey) return;
    hoverKey = key;
    tip.replaceChildren(...describe(h));
    if (h.lane.n[h.j] === 1) {
      const op = h.lane.names[h.lane.i[h.j]][2];
      const d = await opDetail(op);
      if (hoverKey === key) tip.append(...shapesOf(d));
    }
  });
  over.addEventListener("mouseleave", () => { tip.hidden = true; hoverKey = null; });

  async function select(ev) {
    const h = hit(ev);
    if (!h) return;
    clear(details).append(el("h3", {}, "Selected"), el("p", {}, ...describe(h)));
    if (h.lane.n[h.j] > 1) {
      zoom(0.1, (h.lane.s[h.j] + h.lane.e[h.j]) / 2);
      return;
    }
    const op = h.lane.names[h.lane.i[h.j]][2];
    const d = await opDetail(op);
    details.append(el("p", {}, ...shapesOf(d).slice(1)),
      el("p", {}, el("a", { href: `#/graph/${enc(trace)}?${new URLSearchParams({ op })}` }, "dependency neighborhood of this op")));
  }

  // ---------------------------------------------------------------- highlighted ops
  async function showHighlightList() {
    clear(hlList);
    const src = sources.find((s) => s.name === highlight);
    if (!src) return;
    try {
      const res = await getJSON(`/traces/${enc(trace)}/queries/${enc(src.analysis)}`);
      const col = res.columns.indexOf("op");
      const start = res.columns.indexOf("start_us");
      const dur = res.columns.indexOf("dur_us");
      hlList.append(...[el("h3", {}, `${src.label}: ${fmtInt(res.rows.length)} ops`),
        res.note ? el("p.muted", {}, res.note) : null,
        el("ol.hl-ops", {}, res.rows.slice(0, 500).map((r) => el("li", {
          "data-op": r[col],
          onclick: async () => {
            const d = await opDetail(r[col]);
            const s = d?.start_us ?? (start >= 0 ? r[start] : null);
            const e = d?.end_us ?? (s !== null && dur >= 0 ? s + r[dur] : null);
            if (s !== null && e !== null) { const pad = Math.max((e - s) * 2, span * 0.001); setView(s - pad, e + pad); }
          },
        }, r[col], dur >= 0 ? el("span.muted", {}, ` ${fmtTime(r[dur], unit)}`) : null))),
        res.rows.length > 500 ? el("p.muted", {}, `showing the first 500 of ${fmtInt(res.rows.length)}`) : null].filter(Boolean));
    } catch (err) {
      hlList.append(errorBox(err));
    }
  }

  const onResize = debounce(() => u.setSize({ width: width(), height: n * LANE_H + 36 }), 100);
  window.addEventListener("resize", onResize);

  // For tests and the benchmark: the state behind the canvas.
  window.__tracegraph = window.__tracegraph || {};
  window.__tracegraph.timeline = {
    trace, info, lanes,
    view: () => ({ ...view }),
    data: () => data,
    setView,
    /** Page coordinates of the middle of time span [s, e] in lane laneId. */
    point(laneId, s, e) {
      const r = u.over.getBoundingClientRect();
      return { x: r.left + u.valToPos((s + e) / 2, "x"), y: r.top + u.valToPos(n - laneId - 0.5, "y") };
    },
    highlightPixels() {
      const img = u.ctx.getImageData(0, 0, u.ctx.canvas.width, u.ctx.canvas.height).data;
      let count = 0;
      for (let p = 0; p < img.length; p += 4) if (img[p] === 0xE0 && img[p + 1] === 0x20 && img[p + 2] === 0x1B) count++;
      return count;
    },
  };

  u.setScale("x", { min: view.min, max: view.max });
  fetchWindow();
  return () => {
    window.removeEventListener("mousemove", onMove);
    window.removeEventListener("mouseup", onUp);
    window.removeEventListener("resize", onResize);
    if (inflight) inflight.abort();
    if (window.__tracegraph) delete window.__tracegraph.timeline;
    u.destroy();
    tip.remove();
  };
}
