// Graph: an op's dependency neighborhood (op-neighborhood-graph) or a
// window of the critical path (critical-path-graph) as a layered DAG.
// Click a node to re-center on it. Sizes are capped, and the view says
// how many of how many nodes it shows.
import { enc, getJSON, qs } from "../api.js";
import { capGraph, collectGraph, drawGraph } from "../graph.js";
import { el, errorBox, fmtInt } from "../util.js";

const MAX_NODES = 150;
const CP_WINDOW = 60;

export async function render(root, [trace], query, ctx) {
  const mode = query.op ? "op" : "cp";
  const info = await getJSON(`/traces/${enc(trace)}`);
  root.append(el("h1", {}, "Graph ", el("span.muted", {}, trace)));
  const op = el("input#graph-op", { type: "text", value: query.op || "", placeholder: "op name, e.g. conv2/Conv2D", size: 40 });
  const hops = el("input#graph-hops", { type: "number", min: 1, max: 4, value: query.hops || 2 });
  const form = el("form.toolbar", {
    onsubmit: (ev) => { ev.preventDefault(); if (op.value.trim()) ctx.go("graph", [trace], { op: op.value.trim(), hops: hops.value }); },
  }, el("label", {}, "op ", op), el("label", {}, "hops ", hops), el("button", { type: "submit" }, "neighborhood"),
  el("button", { type: "button", onclick: () => ctx.go("graph", [trace], { cp: 1, first: 0 }) }, "critical path"));
  const caption = el("p.caption#graph-caption", { role: "status" });
  const box = el("div.graph#graph-box");
  root.append(form, caption, box);
  if (!info.has_deps) {
    caption.textContent = "not available: the trace has no dependencies between ops";
    return null;
  }
  const recenter = (nd) => { if (nd?.properties?.name && (nd.labels || []).includes("Op")) ctx.go("graph", [trace], { op: nd.properties.name, hops: hops.value }); };
  let cy = null;
  try {
    if (mode === "op") {
      const res = await getJSON(`/traces/${enc(trace)}/queries/op-neighborhood-graph${qs({ op: query.op, hops: hops.value })}`);
      const g = capGraph(collectGraph(res.rows), MAX_NODES);
      if (!g.total) { caption.textContent = res.note || `no op named ${query.op}`; return null; }
      caption.textContent = `${query.op}: ops within ${hops.value} hops — showing ${fmtInt(g.nodes.size)} of ${fmtInt(g.total)} nodes`;
      cy = drawGraph(box, g, { onNode: recenter, center: query.op });
    } else {
      const total = info.critical_path_ops || 0;
      const first = Math.max(0, Math.min(Number(query.first) || 0, Math.max(0, total - 1)));
      const res = await getJSON(`/traces/${enc(trace)}/queries/critical-path-graph${qs({ first_step: first, max_ops: CP_WINDOW })}`);
      const g = capGraph(collectGraph(res.rows), MAX_NODES);
      const prev = first > 0 ? el("button", { type: "button", onclick: () => ctx.go("graph", [trace], { cp: 1, first: Math.max(0, first - CP_WINDOW) }) }, "← earlier") : null;
      const next = first + g.nodes.size < total ? el("button", { type: "button", onclick: () => ctx.go("graph", [trace], { cp: 1, first: first + CP_WINDOW }) }, "later →") : null;
      caption.replaceChildren(`critical path: showing ${fmtInt(g.nodes.size)} of ${fmtInt(total)} ops (steps ${fmtInt(first)}–${fmtInt(first + g.nodes.size - 1)}) `, prev || "", " ", next || "");
      cy = drawGraph(box, g, { onNode: recenter });
    }
  } catch (err) {
    root.append(errorBox(err));
  }
  window.__tracegraph = window.__tracegraph || {};
  window.__tracegraph.graph = { cy };
  return () => cy && cy.destroy();
}
