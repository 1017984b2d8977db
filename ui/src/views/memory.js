// Memory: per allocator, live bytes over time (analysis memory-timeline)
// as a step plot with the peak marked. Clicking the plot lists what is
// live at that moment, largest first (memory-at; at the peak that is
// exactly peak-memory, which the "at the peak" button shows).
import uPlot from "uplot";
import { enc, getJSON, qs } from "../api.js";
import { resultTable } from "../table.js";
import { clear, el, errorBox, fmtAxis, fmtBytes, fmtInt, fmtTime } from "../util.js";

const MAX_POINTS = 2000;

function liveTable(res, docs) {
  const keep = ["bytes", "kind", "op", "tensor", "shape", "alloc_us", "free_us"];
  const idx = keep.map((c) => res.columns.indexOf(c)).filter((i) => i >= 0);
  return resultTable(
    idx.map((i) => res.columns[i]),
    res.rows.map((r) => idx.map((i) => r[i])),
    { docs },
  );
}

export async function render(root, [trace]) {
  root.append(el("h1", {}, "Memory ", el("span.muted", {}, trace)));
  const [tl, peak, catalog, info] = await Promise.all([
    getJSON(`/traces/${enc(trace)}/queries/memory-timeline${qs({ max_points: MAX_POINTS })}`),
    getJSON(`/traces/${enc(trace)}/queries/peak-memory`),
    getJSON("/queries"),
    getJSON(`/traces/${enc(trace)}`),
  ]);
  const unit = info.time_unit === "step" ? "step" : "us";
  if (!tl.rows.length) {
    root.append(el("p.empty", {}, tl.note || "no memory timeline"));
    return null;
  }
  const docs = {};
  for (const a of catalog) if (a.name === "memory-at") for (const c of a.columns) docs[c.name] = c.doc;
  const byAlloc = new Map();
  for (const [alloc, t, b] of tl.rows) {
    if (!byAlloc.has(alloc)) byAlloc.set(alloc, [[], []]);
    byAlloc.get(alloc)[0].push(t);
    byAlloc.get(alloc)[1].push(b);
  }
  const peaks = new Map();
  const c = Object.fromEntries(peak.columns.map((n, i) => [n, i]));
  for (const r of peak.rows)
    if (!peaks.has(r[c.allocator])) peaks.set(r[c.allocator], { bytes: r[c.peak_bytes], at: r[c.peak_at_us] });

  const plots = [];
  for (const [alloc, [xs, ys]] of byAlloc) {
    const pk = peaks.get(alloc);
    const head = el(
      "h2",
      {},
      alloc,
      " ",
      pk
        ? el(
            "span.peak",
            {},
            "peak ",
            el("b", { "data-testid": "peak-bytes", "data-allocator": alloc }, fmtInt(pk.bytes)),
            " bytes",
            ` (${fmtBytes(pk.bytes)}) at ${fmtTime(pk.at, unit)}`,
          )
        : null,
    );
    const box = el("div.memory-plot", { "data-allocator": alloc });
    const listing = el("div.live", { "data-allocator": alloc });
    const atPeak = el(
      "button",
      { type: "button", "data-action": "at-peak", onclick: () => showPeak() },
      "what is live at the peak",
    );
    root.append(
      el(
        "section.allocator",
        {},
        head,
        el("p.muted", {}, "Click the plot to list what is live at that time. ", atPeak),
        box,
        listing,
      ),
    );

    function showPeak() {
      const rows = peak.rows.filter((r) => r[c.allocator] === alloc);
      clear(listing).append(
        el(
          "h3",
          {},
          `Live at the peak, ${fmtTime(pk.at, unit)}: ${fmtInt(pk.bytes)} bytes in ${fmtInt(rows.length)} allocations`,
        ),
        liveTable({ columns: peak.columns, rows }, docs),
      );
      marker = pk.at;
      u.redraw(false);
    }
    async function showAt(t) {
      clear(listing).append(el("p.muted", {}, "loading…"));
      marker = t;
      u.redraw(false);
      try {
        const res = await getJSON(`/traces/${enc(trace)}/queries/memory-at${qs({ at_us: t, allocator: alloc })}`);
        const live = res.rows.length ? res.rows[0][res.columns.indexOf("live_bytes")] : 0;
        clear(listing).append(
          el(
            "h3",
            {},
            `Live at ${fmtTime(t, unit)}: `,
            el("span", { "data-testid": "live-bytes" }, fmtInt(live)),
            ` bytes in ${fmtInt(res.rows.length)} allocations`,
          ),
          liveTable(res, docs),
        );
      } catch (err) {
        clear(listing).append(errorBox(err));
      }
    }

    let marker = null;
    const u = new uPlot(
      {
        width: Math.max(400, root.clientWidth - 8),
        height: 260,
        scales: { x: { time: false } },
        axes: [
          { values: (_u, s) => fmtAxis(s, unit), space: 70 },
          { values: (_u, s) => s.map((v) => fmtBytes(v)), size: 96 },
        ],
        series: [
          {},
          {
            label: alloc,
            stroke: "#A5202A",
            fill: "rgba(241,102,103,0.15)",
            width: 1.5,
            paths: uPlot.paths.stepped({ align: 1 }),
            points: { show: false },
          },
        ],
        legend: { show: false },
        cursor: { drag: { x: true, y: false } },
        hooks: {
          draw: [
            (p) => {
              const ctx = p.ctx;
              ctx.save();
              if (pk) {
                // the peak: a dot and its value
                const x = p.valToPos(pk.at, "x", true);
                const y = p.valToPos(pk.bytes, "y", true);
                ctx.fillStyle = "#E0201B";
                ctx.beginPath();
                ctx.arc(x, y, 5 * devicePixelRatio, 0, 2 * Math.PI);
                ctx.fill();
                ctx.font = `${12 * devicePixelRatio}px sans-serif`;
                ctx.textAlign = x > p.bbox.left + p.bbox.width * 0.7 ? "right" : "left";
                ctx.fillText(
                  ` peak ${fmtBytes(pk.bytes)} `,
                  x,
                  Math.max(p.bbox.top + 12 * devicePixelRatio, y - 8 * devicePixelRatio),
                );
              }
              if (marker !== null) {
                const x = p.valToPos(marker, "x", true);
                ctx.strokeStyle = "#2A2C34";
                ctx.setLineDash([4, 4]);
                ctx.beginPath();
                ctx.moveTo(x, p.bbox.top);
                ctx.lineTo(x, p.bbox.top + p.bbox.height);
                ctx.stroke();
              }
              ctx.restore();
            },
          ],
        },
      },
      [xs, ys],
      box,
    );
    let down = null;
    u.over.addEventListener("mousedown", (ev) => {
      down = ev.clientX;
    });
    u.over.addEventListener("click", (ev) => {
      if (down !== null && Math.abs(ev.clientX - down) > 3) return; // a drag-zoom, not a click
      const t = u.posToVal(ev.offsetX, "x");
      if (pk && Math.abs(u.valToPos(pk.at, "x") - ev.offsetX) <= 6) showPeak();
      else showAt(t);
    });
    plots.push({
      allocator: alloc,
      plot: u,
      peak: pk,
      point(t, bytes) {
        // page coordinates of (t, bytes) on this plot
        const r = u.over.getBoundingClientRect();
        return { x: r.left + u.valToPos(t, "x"), y: r.top + u.valToPos(bytes, "y") };
      },
    });
  }
  window.__tracegraph = window.__tracegraph || {};
  window.__tracegraph.memory = { plots };
  return () => plots.forEach((p) => p.plot.destroy());
}
