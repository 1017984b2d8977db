// What the timeline says about a bar: the hover card and the selection's
// details (name, type, times, lane; input and output shapes from the op's
// card, GET /ui/traces/{t}/op).
import { enc } from "../api.js";
import { clear, el, fmtInt, fmtTime } from "../util.js";

const LANE_WORDS = { ops: "op lane", compute: "compute stream", memcpy: "copy stream", communication: "NCCL stream" };

/**
 * The lines describing hit h ({lane, li, j}, see interaction.js) of lane
 * `meta` (GET .../timeline) in `unit`; highlightLabel: the highlight
 * source's label.
 */
export function describeBar(h, meta, unit, highlightLabel) {
  const { lane, j } = h;
  const s = lane.s[j];
  const e = lane.e[j];
  const rows = [];
  if (lane.n[j] > 1) {
    rows.push(
      el("b", {}, `${fmtInt(lane.n[j])} ${meta.kind === "ops" ? "ops" : "kernels"} merged`),
      " (zoom in to see them)",
    );
  } else {
    const [name, type, op] = lane.names[lane.i[j]];
    rows.push(el("b", {}, name), el("br"), meta.kind === "ops" ? `type ${type}` : `${type} kernel of op ${op}`);
  }
  rows.push(
    el("br"),
    `${fmtTime(s, unit)} → ${fmtTime(e, unit)} (${fmtTime(e - s, unit)})`,
    el("br"),
    el("span.muted", {}, `${meta.name} (${LANE_WORDS[meta.kind] || meta.kind})`),
  );
  if (lane.n[j] > 1 && lane.h[j]) rows.push(el("br"), el("span.hl", {}, "some of them highlighted"));
  else if (lane.h[j]) rows.push(el("br"), el("span.hl", {}, `highlighted: ${highlightLabel}`));
  return rows;
}

/** The op of a single bar (its own name for op lanes, the launching op for kernels); null for merged bars. */
export function opOf(h) {
  return h.lane.n[h.j] === 1 ? h.lane.names[h.lane.i[h.j]][2] : null;
}

/** Lines with an op's input and output shapes (d: its card, or null). */
export function shapeLines(d) {
  if (!d) return [];
  const io = (xs) => xs.map((t) => `${t.shape || "?"} ${t.dtype || ""}`.trim()).join(", ") || "none";
  return [`inputs: ${io(d.inputs)}`, el("br"), `outputs: ${io(d.outputs)}`];
}

/**
 * The hover card in element `tip`. describe(h): the lines for hit h;
 * opDetail(name): a promise of the op's card (data.js).
 */
export function createHoverCard(tip, { describe, opDetail }) {
  let shown = null; // the key of the bar the card describes

  function hide() {
    tip.hidden = true;
    shown = null;
  }

  /** Show the card for hit h (null: hide it) near mouse event ev; key names the bar. */
  async function show(ev, h, key) {
    if (!h) {
      hide();
      return;
    }
    tip.style.left = `${ev.pageX + 14}px`;
    tip.style.top = `${ev.pageY + 14}px`;
    tip.hidden = false;
    if (key === shown) return;
    shown = key;
    tip.replaceChildren(...describe(h));
    const op = opOf(h);
    if (op === null) return;
    const d = await opDetail(op);
    if (shown === key && d) tip.append(el("br"), ...shapeLines(d));
  }

  return { show, hide };
}

/** Fill `details` with hit h, its op's shapes and a link to its dependency neighborhood (graph view). */
export async function showSelection(details, h, { trace, describe, opDetail }) {
  clear(details).append(el("h3", {}, "Selected"), el("p", {}, ...describe(h)));
  const op = opOf(h);
  if (op === null) return;
  const d = await opDetail(op);
  const href = `#/graph/${enc(trace)}?${new URLSearchParams({ op })}`;
  details.append(el("p", {}, ...shapeLines(d)), el("p", {}, el("a", { href }, "dependency neighborhood of this op")));
}
