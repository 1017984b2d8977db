// Drawing the timeline: the uPlot chart that gives it a time axis, lane
// labels and a canvas, and the bars drawn on that canvas in its draw hook.
//
// A lane's color comes from its kind as the API sends it (ops, compute,
// memcpy, communication; queries/lanes.py); a single kernel bar takes its
// own kind's color (a copy on a compute stream is drawn as a copy).
// Highlighted bars are red; bars merged below a pixel are drawn paler,
// with a red band along their bottom when any op merged into them is
// highlighted, so an overview does not turn a whole lane red.
import uPlot from "uplot";
import { fmtAxis } from "../util.js";

export const LANE_H = 24; // css pixels per lane
// The lane labels' font (uPlot's axis font), the least width of the axis that holds them, and the room
// between a label and the plot (the axis's gap) and the canvas's left edge.
const LABEL_FONT = '12px system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif';
const LABEL_MIN = 190;
const LABEL_GAP = 4;
const LABEL_PAD = 8;
export const COLORS = {
  op: "#4C8EDA", // tracegraph.grass: Op
  compute: "#D7A013", // Kernel
  memcpy: "#B261A5", // Stream
  communication: "#2E9E8F",
  highlight: "#E0201B", // CRITICAL_PRED
  waiting: "#6A5ACD", // a rank waiting in a collective for the last rank
  straggler: "#E8731A", // the last rank of a collective it held up (stragglers)
  idle: "#FBE3E3",
  opLane: "#F3F5F8",
};
const BAR_KINDS = ["op", "compute", "memcpy", "communication"];
// A kernel's kind (Kernel.kind) -> its color; memsets are memory traffic like copies.
const KERNEL_COLOR = { compute: "compute", memcpy: "memcpy", memset: "memcpy", communication: "communication" };

/** The color key of a lane's bars: its kind ("ops" -> "op"). */
export function laneColor(lane) {
  if (lane.kind === "ops") return "op";
  return BAR_KINDS.includes(lane.kind) ? lane.kind : "compute";
}

/** The color key of a single bar of a lane (kernels by their own kind). */
function barColor(lane, type) {
  return lane.kind === "ops" ? "op" : KERNEL_COLOR[type] || laneColor(lane);
}

/** Canvas geometry of the lanes: top(i) and the bar height, in canvas pixels. */
export function laneGeometry(u, n) {
  const laneH = Math.abs(u.valToPos(0, "y", true) - u.valToPos(1, "y", true));
  const barH = Math.max(2, laneH * 0.7);
  return {
    laneH,
    barH,
    top: (i) => u.valToPos(n - i, "y", true),
    barTop: (i) => u.valToPos(n - i, "y", true) + (laneH - barH) / 2,
  };
}

/**
 * Draw the bars of `data` (a window answer; null: lane backgrounds only)
 * onto uPlot instance u. lanes: the lanes' metadata (GET .../timeline).
 */
export function drawBars(u, { lanes, tMin, tMax, data }) {
  const n = lanes.length;
  const c = u.ctx;
  const { left, top, width, height } = u.bbox;
  const xs = (v) => u.valToPos(v, "x", true);
  const g = laneGeometry(u, n);
  c.save();
  c.beginPath();
  c.rect(left, top, width, height);
  c.clip();
  const x0 = xs(tMin);
  const x1 = xs(tMax);
  for (let i = 0; i < n; i++) {
    // lane backgrounds: idle stretches of streams show pale red
    c.fillStyle = lanes[i].kind === "ops" ? COLORS.opLane : COLORS.idle;
    c.fillRect(x0, g.barTop(i), x1 - x0, g.barH);
  }
  if (data) {
    const single = Object.fromEntries([...BAR_KINDS, "highlight"].map((k) => [k, new Path2D()]));
    const merged = Object.fromEntries([...BAR_KINDS, "highlight"].map((k) => [k, new Path2D()]));
    const minW = Math.max(1, devicePixelRatio);
    const band = Math.max(2, g.barH * 0.35);
    for (const lane of data.lanes) {
      const meta = lanes[lane.id];
      const y = g.barTop(lane.id);
      const base = laneColor(meta);
      for (let j = 0; j < lane.s.length; j++) {
        const a = xs(lane.s[j]);
        const b = xs(lane.e[j]);
        if (b < left - 2 || a > left + width + 2) continue;
        const w = Math.max(minW, b - a);
        if (lane.n[j] > 1) {
          merged[base].rect(a, y, w, g.barH);
          if (lane.h[j]) merged.highlight.rect(a, y + g.barH - band, w, band);
        } else if (lane.h[j]) {
          single.highlight.rect(a, y, w, g.barH);
        } else {
          single[barColor(meta, lane.names[lane.i[j]][1])].rect(a, y, w, g.barH);
        }
      }
    }
    for (const k of BAR_KINDS) {
      c.fillStyle = COLORS[k];
      c.globalAlpha = 0.5;
      c.fill(merged[k]);
      c.globalAlpha = 1;
      c.fill(single[k]);
    }
    c.fillStyle = COLORS.highlight;
    c.fill(merged.highlight);
    c.fill(single.highlight);
  }
  c.restore();
}

// A collective's last rank is its straggler from this delay on: the stragglers analysis's default min_caused_us.
export const STRAGGLER_US = 10000;

/**
 * Collectives joined across ranks (the timeline info's `collectives`), drawn
 * over the bars: each rank's wait as a line from its call's start to the
 * last arrival, at mid-height of the call's lane, and a vertical line at
 * the last arrival through the lanes of all its calls. A collective whose
 * last rank held the others up by STRAGGLER_US or more draws that line,
 * and a frame around the last rank's call, in the straggler color.
 */
export function drawCollectives(u, { lanes, collectives }) {
  if (!collectives || !collectives.length) return;
  const n = lanes.length;
  const c = u.ctx;
  const { left, top, width, height } = u.bbox;
  const xs = (v) => u.valToPos(v, "x", true);
  const g = laneGeometry(u, n);
  const mid = (i) => g.top(i) + g.laneH / 2;
  const px = Math.max(1, devicePixelRatio);
  c.save();
  c.beginPath();
  c.rect(left, top, width, height);
  c.clip();
  for (const coll of collectives) {
    const placed = coll.calls.filter((k) => k.lane !== null && k.lane !== undefined);
    if (placed.length < 2) continue;
    const at = xs(coll.last_arrival_us);
    const lo = Math.min(...placed.map((k) => xs(k.start_us)));
    if (at < left - 2 || lo > left + width + 2) continue;
    const straggler = coll.caused_us >= STRAGGLER_US;
    c.strokeStyle = COLORS.waiting;
    c.lineWidth = 2 * px;
    c.beginPath();
    for (const k of placed) {
      if (k.wait_us <= 0) continue;
      c.moveTo(xs(k.start_us), mid(k.lane));
      c.lineTo(at, mid(k.lane));
    }
    c.stroke();
    const ys = placed.map((k) => mid(k.lane));
    c.strokeStyle = straggler ? COLORS.straggler : COLORS.waiting;
    c.lineWidth = (straggler ? 3 : 1) * px;
    c.beginPath();
    c.moveTo(at, Math.min(...ys));
    c.lineTo(at, Math.max(...ys));
    c.stroke();
    if (straggler) {
      const last = placed.find((k) => k.rank === coll.last_rank);
      if (last) {
        const a = xs(last.start_us);
        const w = Math.max(4 * px, xs(last.end_us) - a);
        c.strokeRect(a - 2 * px, g.barTop(last.lane) - 2 * px, w + 4 * px, g.barH + 4 * px);
      }
    }
  }
  c.restore();
}

/** How many canvas pixels have exactly color `hex` (#RRGGBB), in lane `laneId` only when given. */
export function countPixels(u, hex, laneId = null, n = 0) {
  const canvas = u.ctx.canvas;
  let y0 = 0;
  let h = canvas.height;
  if (laneId !== null) {
    const g = laneGeometry(u, n);
    y0 = Math.max(0, Math.floor(g.top(laneId)));
    h = Math.max(1, Math.min(canvas.height - y0, Math.ceil(g.laneH)));
  }
  const img = u.ctx.getImageData(0, y0, canvas.width, h).data;
  const [r, g, b] = [1, 3, 5].map((k) => parseInt(hex.slice(k, k + 2), 16));
  let count = 0;
  for (let p = 0; p < img.length; p += 4) if (img[p] === r && img[p + 1] === g && img[p + 2] === b) count++;
  return count;
}

/**
 * The lane labels as drawn and the width of the axis that holds them: wide
 * enough for the longest name, up to `max` css pixels (a thread's lane is
 * named after the thread: `/host:CPU tf_Compute/2875647937950081134`); a
 * name longer than that loses its middle ("…"), keeping the device it
 * starts with and the end that tells its thread or stream apart.
 */
export function laneLabels(names, max) {
  const ctx = document.createElement("canvas").getContext("2d");
  ctx.font = LABEL_FONT;
  const width = (s) => ctx.measureText(s).width;
  const room = Math.min(Math.max(0, ...names.map(width)), Math.max(LABEL_MIN, max) - LABEL_GAP - LABEL_PAD);
  const cut = (s, keep) => `${s.slice(0, Math.ceil(keep / 2))}…${s.slice(s.length - Math.floor(keep / 2))}`;
  const fit = (s) => {
    if (width(s) <= room) return s;
    let lo = 0; // characters kept
    let hi = s.length - 1;
    while (lo < hi) {
      const mid = Math.ceil((lo + hi) / 2);
      if (width(cut(s, mid)) <= room) lo = mid;
      else hi = mid - 1;
    }
    return cut(s, lo);
  };
  return { labels: names.map(fit), size: Math.max(LABEL_MIN, Math.ceil(room) + LABEL_GAP + LABEL_PAD) };
}

/**
 * The uPlot chart the bars are drawn on: x is time (its scale set by the
 * view state), y one unit per lane (lane 0 at the top), `labels` (from
 * laneLabels) as the y axis's labels on an axis `labelSize` wide. hooks:
 * {draw(u), scale()} (the x scale changed).
 */
export function createPlot(box, { lanes, labels, labelSize, unit, width, tMin, tMax, draw, scaled }) {
  const n = lanes.length;
  return new uPlot(
    {
      width,
      height: plotHeight(n),
      scales: {
        x: { time: false, auto: false, range: (_u, min, max) => [min, max] },
        y: { auto: false, range: [0, n] },
      },
      axes: [
        {
          scale: "x",
          values: (_u, splits) => fmtAxis(splits, unit),
          space: 70,
          size: 30,
          grid: { stroke: "#e6e6e6", width: 1 },
        },
        {
          scale: "y",
          size: labelSize,
          gap: LABEL_GAP,
          font: LABEL_FONT,
          ticks: { show: false },
          grid: { show: false },
          splits: () => lanes.map((_, i) => n - i - 0.5),
          values: (_u, splits) => splits.map((s) => labels[n - 1 - Math.floor(s)] ?? ""),
        },
      ],
      series: [{}, { scale: "y", paths: () => null, points: { show: false } }],
      legend: { show: false },
      cursor: { drag: { x: false, y: false, setScale: false }, points: { show: false }, y: false },
      hooks: {
        draw: [draw],
        setScale: [
          (_u, key) => {
            if (key === "x") scaled();
          },
        ],
      },
    },
    [
      [tMin, tMax],
      [null, null],
    ],
    box,
  );
}

export function plotHeight(n) {
  return n * LANE_H + 36;
}
