// Graph: an op's dependency neighborhood (op-neighborhood-graph) or a
// window of the critical path (critical-path-graph), laid out left to
// right (long paths folded into rows, see ../graph.js), hover a node for
// its full name.
//
// Neighborhood: click a node to re-center on it. Critical path: click an
// op to select it; "show its neighborhood" then adds the ops within one
// dependency hop of it to the drawing (op-neighborhood-graph), so the
// path's surroundings come on demand. Sizes are capped, and the view says
// how many of how many nodes it shows.
//
// Tensors, on demand too: "show its tensors" adds the tensors the selected
// op (or, in a neighborhood, the op in the middle) read and wrote (CONSUMES
// and PRODUCES, through POST /cypher), the reads to its left and the
// writes to its right.
import { enc, getJSON, postJSON, qs } from "../api.js";
import { addGraph, capGraph, collectGraph, drawGraph } from "../graph.js";
import { el, errorBox, fmtInt, fmtTime } from "../util.js";

const MAX_NODES = 150;
const CP_WINDOW = 40;
const MAX_TENSORS = 100;
// The tensors some ops (by uid) read and wrote, as paths op -> tensor.
const TENSORS_QUERY = `MATCH p = (o:Op {trace: $trace})-[:PRODUCES|CONSUMES]->(t:Tensor)
WHERE o.uid IN $uids
RETURN p ORDER BY o.uid, t.uid LIMIT ${MAX_TENSORS}`;

async function neighborhood(trace, op, hops) {
  return getJSON(`/traces/${enc(trace)}/queries/op-neighborhood-graph${qs({ op, hops })}`);
}

/**
 * A button `selector` that runs `load()` once: "loading…" in `status` meanwhile,
 * then the text `load()` returns; on an error, the error there and the button
 * enabled again.
 */
function loadButton(selector, label, status, load) {
  const button = el(
    selector,
    {
      type: "button",
      onclick: async () => {
        button.disabled = true;
        status.textContent = "loading…";
        try {
          status.textContent = await load();
        } catch (err) {
          status.replaceChildren(errorBox(err));
          button.disabled = false;
        }
      },
    },
    label,
  );
  return button;
}

/** A button that adds the tensors the ops `uids()` names read and wrote to the drawn graph `cy()`. */
function tensorsButton(trace, uids, cy, focus, status) {
  return loadButton("button#graph-tensors", "show its tensors", status, async () => {
    const res = await postJSON("/cypher", { query: TENSORS_QUERY, params: { uids: uids() }, trace });
    const g = collectGraph(res.rows);
    const tensors = [...g.nodes.values()].filter((nd) => (nd.labels || []).includes("Tensor")).length;
    const added = addGraph(cy(), g, { focus: focus() });
    return (
      `${fmtInt(tensors)} tensor${tensors === 1 ? "" : "s"} read or written` +
      (added < tensors ? ` (${fmtInt(added)} new)` : "") +
      (res.rows.length >= MAX_TENSORS ? ` (the first ${MAX_TENSORS})` : "")
    );
  });
}

export async function render(root, [trace], query, ctx) {
  const mode = query.op ? "op" : "cp";
  const info = await getJSON(`/traces/${enc(trace)}`);
  const unit = info.time_unit === "step" ? "step" : "us";
  root.append(el("h1", {}, "Graph ", el("span.muted", {}, trace)));
  const op = el("input#graph-op", {
    type: "text",
    value: query.op || "",
    placeholder: "op name, e.g. conv2/Conv2D",
    size: 40,
  });
  const hops = el("input#graph-hops", { type: "number", min: 1, max: 4, value: query.hops || 2 });
  const form = el(
    "form.toolbar",
    {
      onsubmit: (ev) => {
        ev.preventDefault();
        if (op.value.trim()) ctx.go("graph", [trace], { op: op.value.trim(), hops: hops.value });
      },
    },
    el("label", {}, "op ", op),
    el("label", {}, "hops ", hops),
    el("button", { type: "submit" }, "neighborhood"),
    el("button", { type: "button", onclick: () => ctx.go("graph", [trace], { cp: 1, first: 0 }) }, "critical path"),
  );
  const caption = el("p.caption#graph-caption", { role: "status" });
  const box = el("div.graph#graph-box");
  const selection = el("div.graph-selection#graph-selection");
  root.append(
    form,
    caption,
    el("p.muted", {}, "Time flows to the right; hover a node for its full name, wheel to zoom, drag to pan."),
    box,
    selection,
  );
  const isOp = (nd) => nd?.properties?.name && (nd.labels || []).includes("Op");
  const recenter = (nd) => {
    if (isOp(nd)) ctx.go("graph", [trace], { op: nd.properties.name, hops: hops.value });
  };
  let cy = null;

  /** Critical path: the selected op, with its neighborhood on demand. */
  function select(nd, node) {
    if (!isOp(nd)) return;
    const name = nd.properties.name;
    const p = nd.properties;
    const status = el("span.status#graph-expand-status", { role: "status" });
    const tensorStatus = el("span.status#graph-tensors-status", { role: "status" });
    const expand = loadButton("button#graph-expand", "show its neighborhood here", status, async () => {
      const res = await neighborhood(trace, name, 1);
      const added = addGraph(cy, capGraph(collectGraph(res.rows), MAX_NODES), { focus: node });
      return `${fmtInt(added)} op${added === 1 ? "" : "s"} added (within 1 dependency hop)`;
    });
    selection.replaceChildren(
      el("h3", {}, name),
      el(
        "p",
        {},
        p.type ? `type ${p.type}` : "",
        p.weight_us !== undefined && p.weight_us !== null ? ` · weight ${fmtTime(p.weight_us, unit)}` : "",
        p.cp_step !== undefined && p.cp_step !== null ? ` · critical path step ${fmtInt(p.cp_step)}` : "",
      ),
      el(
        "p",
        {},
        expand,
        " ",
        el(
          "a",
          { href: `#/graph/${enc(trace)}?${new URLSearchParams({ op: name, hops: hops.value })}` },
          "open its neighborhood",
        ),
        " ",
        status,
      ),
      el(
        "p",
        {},
        tensorsButton(
          trace,
          () => [p.uid],
          () => cy,
          () => node,
          tensorStatus,
        ),
        " ",
        tensorStatus,
      ),
    );
  }

  try {
    if (mode === "op") {
      const res = await neighborhood(trace, query.op, hops.value);
      const g = capGraph(collectGraph(res.rows), MAX_NODES);
      if (res.unavailable || !g.total) {
        caption.textContent = res.note || `no op named ${query.op}`;
        return null;
      }
      caption.textContent = `${query.op}: ops within ${hops.value} hops — showing ${fmtInt(g.nodes.size)} of ${fmtInt(g.total)} nodes`;
      cy = drawGraph(box, g, { onNode: recenter, center: query.op, unit });
      const centers = () => cy.nodes("[center = 1]");
      const tensorStatus = el("span.status#graph-tensors-status", { role: "status" });
      selection.replaceChildren(
        el(
          "p",
          {},
          tensorsButton(
            trace,
            () => centers().map((n) => n.data("uid")),
            () => cy,
            centers,
            tensorStatus,
          ),
          " ",
          tensorStatus,
        ),
      );
    } else {
      const total = info.critical_path_ops || 0;
      const first = Math.max(0, Math.min(Number(query.first) || 0, Math.max(0, total - 1)));
      const res = await getJSON(
        `/traces/${enc(trace)}/queries/critical-path-graph${qs({ first_step: first, max_ops: CP_WINDOW })}`,
      );
      if (res.unavailable) {
        // The server says why (the analysis's @requires against the trace's facts).
        caption.textContent = res.note;
        return null;
      }
      const g = capGraph(collectGraph(res.rows), MAX_NODES);
      const go = (from) => () => ctx.go("graph", [trace], { cp: 1, first: from });
      const prev =
        first > 0 ? el("button", { type: "button", onclick: go(Math.max(0, first - CP_WINDOW)) }, "← earlier") : null;
      const next =
        first + g.nodes.size < total
          ? el("button", { type: "button", onclick: go(first + CP_WINDOW) }, "later →")
          : null;
      caption.replaceChildren(
        `critical path: showing ${fmtInt(g.nodes.size)} of ${fmtInt(total)} ops (steps ${fmtInt(first)}–${fmtInt(first + g.nodes.size - 1)}) `,
        prev || "",
        " ",
        next || "",
        " · click an op for its neighborhood",
      );
      cy = drawGraph(box, g, { onNode: select, unit });
    }
  } catch (err) {
    root.append(errorBox(err));
  }
  window.__tracegraph = window.__tracegraph || {};
  window.__tracegraph.graph = { cy };
  return () => cy && cy.destroy();
}
