// Graph drawing: API graph values (nodes, relationships, paths) as
// Cytoscape elements, laid out left to right as a layered DAG (dagre),
// colored like Neo4j Browser with cypher/tracegraph.grass (bundled at
// build time as text).
//
// Legibility: labels are names shortened in the middle (the full name is
// on hover), the layout makes room for them, and a layout too long to be
// read whole is folded into rows like lines of text (each row left to
// right, the next below it). The view is fitted to the frame, but never
// below the zoom at which labels stay readable: beyond that, drag and the
// wheel move around.
import cytoscape from "cytoscape";
import dagre from "cytoscape-dagre";
import grassText from "../../cypher/tracegraph.grass";
import { fmtTime } from "./util.js";

cytoscape.use(dagre);

export const LABEL_PX = 11; // label font size at zoom 1
export const MIN_LABEL_PX = 10; // the smallest label size on screen a fit may give
export const MIN_ZOOM = MIN_LABEL_PX / LABEL_PX;
const MAX_FIT_ZOOM = 1.5; // a small graph is not blown up further
const PAD = 24; // px around the fitted graph
const ROW_GAP = 56; // model px between folded rows
const LABEL_CHARS = 40; // at most two lines of LABEL_WIDTH
const LABEL_WIDTH = 150; // model px
// Relationship types that point back in time (an op to its predecessor, an
// op to a tensor it read): drawn from the earlier end to the later one, so
// that time flows to the right (a tensor's producer, the tensor, its readers).
const BACKWARD = new Set(["CRITICAL_PRED", "CHAIN_PRED", "CONSUMES"]);

/** {label: {color, border, caption}} and {relType: {color, width}} from the grass style sheet. */
export function parseGrass(text) {
  const nodes = {};
  const rels = {};
  // A block's braces may hold quoted braces: caption: '{shape}';
  for (const m of text.matchAll(/(node|relationship)(?:\.(\w+))?\s*\{((?:'[^']*'|[^}'])*)\}/g)) {
    const props = Object.fromEntries([...m[3].matchAll(/([\w-]+)\s*:\s*([^;]+);/g)].map((p) => [p[1], p[2].trim()]));
    const key = m[2] || "*";
    if (m[1] === "node") nodes[key] = { color: props.color, border: props["border-color"], caption: props.caption };
    else rels[key] = { color: props.color, width: parseFloat(props["shaft-width"]) || 1 };
  }
  return { nodes, rels };
}

export const GRASS = parseGrass(grassText);

/** A node's caption in full: the property its grass style names (an op's name, a tensor's shape, ...). */
export function fullCaption(node) {
  const label = (node.labels || [])[0];
  const style = GRASS.nodes[label] || GRASS.nodes["*"] || {};
  const m = /\{(\w+)\}/.exec(style.caption || "{name}");
  const v = node.properties?.[m ? m[1] : "name"] ?? node.properties?.name ?? node.properties?.uid ?? node.id;
  return String(v);
}

/**
 * A name cut to about `max` characters for a label: the last parts of a
 * scoped name ("…/Conv2D_grad/Conv2DBackpropInput"), else its start and
 * end around an ellipsis.
 */
export function shortName(s, max = LABEL_CHARS) {
  if (s.length <= max) return s;
  const parts = s.split("/");
  let tail = parts.pop();
  while (parts.length && tail.length + parts[parts.length - 1].length + 2 <= max) tail = `${parts.pop()}/${tail}`;
  if (tail.length + 2 <= max) return `…/${tail}`;
  const keep = max - 1;
  const front = Math.ceil(keep * 0.55);
  return `${s.slice(0, front)}…${s.slice(s.length - (keep - front))}`;
}

/** Walk result values for graph objects: {nodes: Map(id -> node), rels: Map(id -> rel)}, in first-seen order. */
export function collectGraph(rows) {
  const nodes = new Map();
  const rels = new Map();
  const visit = (v) => {
    if (!v || typeof v !== "object") return;
    if (Array.isArray(v)) {
      v.forEach(visit);
      return;
    }
    if (v.kind === "node") {
      if (!nodes.has(v.id)) nodes.set(v.id, v);
      return;
    }
    if (v.kind === "relationship") {
      if (!rels.has(v.id)) rels.set(v.id, v);
      return;
    }
    if (v.kind === "path") {
      (v.nodes || []).forEach(visit);
      (v.relationships || []).forEach(visit);
      return;
    }
    Object.values(v).forEach(visit);
  };
  rows.forEach(visit);
  return { nodes, rels };
}

/** Keep the first `cap` nodes and the relationships among them. */
export function capGraph(g, cap) {
  const nodes = new Map([...g.nodes].slice(0, cap));
  const rels = new Map([...g.rels].filter(([, r]) => nodes.has(r.start) && nodes.has(r.end)));
  return { nodes, rels, total: g.nodes.size };
}

export function hasGraph(rows) {
  return collectGraph(rows.slice(0, 200)).nodes.size > 0;
}

/** A label that may wrap after the separators of scoped names (a zero-width space after each "/", "_", "-"). */
function breakable(label) {
  return label.replace(/([/_-])/g, "$1\u200b");
}

/** A key that names a node across answers (its uid within the trace, else the API's id). */
function nodeKey(nd) {
  return `n${nd.properties?.uid ?? nd.id}`;
}

/** Cytoscape elements of graph g (not already in `have`, a Set of element ids). */
function elementsOf(g, { center = null, have = new Set() } = {}) {
  const els = [];
  const keys = new Map();
  for (const [id, nd] of g.nodes) {
    const key = nodeKey(nd);
    keys.set(id, key);
    if (have.has(key)) continue;
    have.add(key);
    const label = (nd.labels || [])[0] || "";
    const style = GRASS.nodes[label] || GRASS.nodes["*"] || {};
    const name = fullCaption(nd);
    els.push({
      data: {
        id: key,
        label: breakable(shortName(name)),
        name,
        color: style.color || "#A5ABB6",
        border: style.border || "#9AA1AC",
        kind: label,
        uid: nd.properties?.uid ?? null,
        cp: nd.properties?.cp_step !== undefined && nd.properties?.cp_step !== null ? 1 : 0,
        center: center !== null && nd.properties?.name === center ? 1 : 0,
      },
    });
  }
  for (const r of g.rels.values()) {
    const [a, b] = [keys.get(r.start), keys.get(r.end)];
    if (!a || !b) continue;
    const [source, target] = BACKWARD.has(r.type) ? [b, a] : [a, b];
    const id = `r${r.type}:${source}:${target}`;
    if (have.has(id)) continue;
    have.add(id);
    const style = GRASS.rels[r.type] || GRASS.rels["*"] || {};
    els.push({
      data: { id, source, target, type: r.type, color: style.color || "#A5ABB6", width: Math.min(style.width || 1, 4) },
    });
  }
  return els;
}

const STYLE = [
  {
    selector: "node",
    style: {
      "background-color": "data(color)",
      "border-color": "data(border)",
      "border-width": 2,
      label: "data(label)",
      "font-size": LABEL_PX,
      "text-wrap": "wrap",
      "text-max-width": LABEL_WIDTH,
      "text-valign": "bottom",
      "text-margin-y": 3,
      "text-background-color": "#fff",
      "text-background-opacity": 0.8,
      "text-background-padding": 1,
      "min-zoomed-font-size": 6,
      width: 22,
      height: 22,
    },
  },
  { selector: "node[cp = 1]", style: { "border-color": "#E0201B", "border-width": 4 } },
  { selector: "node[center = 1]", style: { width: 34, height: 34, "font-weight": "bold" } },
  { selector: "node:selected", style: { "overlay-color": "#2870C2", "overlay-opacity": 0.2, "overlay-padding": 6 } },
  {
    selector: "edge",
    style: {
      "line-color": "data(color)",
      "target-arrow-color": "data(color)",
      "target-arrow-shape": "triangle",
      "curve-style": "bezier",
      width: "data(width)",
      "arrow-scale": 0.7,
    },
  },
  // An edge from the end of one folded row to the next row: a dashed line return.
  {
    selector: "edge.wrap",
    style: { "curve-style": "taxi", "taxi-direction": "downward", "line-style": "dashed", "taxi-turn": "60%" },
  },
];

/**
 * Fold a long, thin left-to-right layout (a path, or a path with a little
 * around it) into rows that fit `width` (model px): the ranks (columns of
 * nodes) keep their order, each row left to right, the next row below the
 * previous one. A layout that is not too wide, or too tall for two rows to
 * fit in `height`, is left alone (folding a bushy graph only tangles it).
 * Returns how many rows it made.
 */
function fold(cy, width, height) {
  const bb = cy.nodes().boundingBox({ includeLabels: true });
  if (bb.w <= width || 2 * bb.h + ROW_GAP > height) return 1;
  const ranks = new Map(); // x -> {nodes, left, right}
  cy.nodes().forEach((node) => {
    const x = Math.round(node.position("x"));
    const b = node.boundingBox({ includeLabels: true });
    const r = ranks.get(x) || { nodes: [], left: Infinity, right: -Infinity };
    r.nodes.push(node);
    r.left = Math.min(r.left, b.x1);
    r.right = Math.max(r.right, b.x2);
    ranks.set(x, r);
  });
  const rowH = bb.h + ROW_GAP;
  let row = 0;
  let rowLeft = null;
  for (const x of [...ranks.keys()].sort((a, b) => a - b)) {
    const r = ranks.get(x);
    if (rowLeft === null) rowLeft = r.left;
    else if (r.right - rowLeft > width) {
      row += 1;
      rowLeft = r.left;
    }
    for (const node of r.nodes) {
      const p = node.position();
      node.position({ x: bb.x1 + (p.x - rowLeft), y: p.y + row * rowH });
      node.data("row", row);
    }
  }
  cy.edges().forEach((e) => {
    if (e.source().data("row") !== e.target().data("row")) e.addClass("wrap");
  });
  return row + 1;
}

/**
 * Lay out cy's elements left to right, fold the layout when it is too
 * long for the frame, grow the frame (up to most of the window) to show
 * the folded rows, and fit: never below MIN_ZOOM, where it shows the top
 * left corner (or `focus`) instead.
 */
export function layoutGraph(cy, { focus = null } = {}) {
  const container = cy.container();
  cy.edges().removeClass("wrap");
  cy.layout({
    name: "dagre",
    rankDir: "LR",
    nodeSep: 16,
    rankSep: 36,
    nodeDimensionsIncludeLabels: true,
    animate: false,
    fit: false,
  }).run();
  const frameW = container.clientWidth - 2 * PAD;
  if (frameW > 0) {
    const room = Math.max(container.clientHeight, Math.round(window.innerHeight * 0.8));
    fold(cy, frameW, room - 2 * PAD);
    const bb = cy.elements().boundingBox({ includeLabels: true });
    const want = Math.min(room, Math.ceil(bb.h + 2 * PAD));
    if (want > container.clientHeight) {
      container.style.height = `${want}px`;
      cy.resize();
    }
  }
  fitReadable(cy, focus);
}

/** Fit the graph in its frame, within [MIN_ZOOM, MAX_FIT_ZOOM]; below MIN_ZOOM show `focus` (or the top left). */
export function fitReadable(cy, focus = null) {
  cy.fit(undefined, PAD);
  if (cy.zoom() > MAX_FIT_ZOOM) {
    cy.zoom(MAX_FIT_ZOOM);
    cy.center();
  }
  if (cy.zoom() < MIN_ZOOM) {
    cy.zoom(MIN_ZOOM);
    if (focus && focus.length) cy.center(focus);
    else {
      const bb = cy.elements().boundingBox({ includeLabels: true });
      cy.pan({ x: PAD - bb.x1 * MIN_ZOOM, y: PAD - bb.y1 * MIN_ZOOM });
    }
  }
}

/** A tooltip over the graph's frame with a node's full name (and an op's type and weight) on hover. */
function attachTooltip(cy, byKey, describe) {
  const container = cy.container();
  const tip = document.createElement("div");
  tip.className = "tooltip graph-tip";
  tip.hidden = true;
  container.parentElement?.append(tip);
  cy.on("mouseover", "node", (ev) => {
    const nd = byKey.get(ev.target.id());
    tip.replaceChildren(...describe(ev.target, nd));
    const p = ev.target.renderedPosition();
    const r = container.getBoundingClientRect();
    tip.style.left = `${window.scrollX + r.left + p.x + 14}px`;
    tip.style.top = `${window.scrollY + r.top + p.y + 14}px`;
    tip.hidden = false;
  });
  cy.on("mouseout", "node", () => {
    tip.hidden = true;
  });
  cy.on("destroy", () => tip.remove());
  return tip;
}

function describeNode(node, nd, unit) {
  const lines = [node.data("name")];
  const p = nd?.properties || {};
  const kind = node.data("kind");
  if (kind) lines.push(p.type ? `${kind} · ${p.type}` : kind);
  if (kind === "Tensor") {
    // Its caption is its shape: name it, with its type and size.
    if (p.name && p.name !== node.data("name")) lines.push(p.name);
    const what = [p.dtype, p.bytes !== undefined && p.bytes !== null ? `${p.bytes.toLocaleString()} bytes` : null];
    if (what.some(Boolean)) lines.push(what.filter(Boolean).join(" · "));
  }
  if (p.weight_us !== undefined && p.weight_us !== null) lines.push(`weight ${fmtTime(p.weight_us, unit)}`);
  if (p.cp_step !== undefined && p.cp_step !== null) lines.push(`critical path step ${p.cp_step}`);
  const out = [];
  lines.forEach((line, i) => {
    if (i) out.push(document.createElement("br"));
    const span = document.createElement(i ? "span" : "b");
    span.textContent = line;
    out.push(span);
  });
  return out;
}

/**
 * Draw graph g into container; onNode(node, element) on a click (node: the
 * API's node). center: an op name drawn larger; unit: the trace's time unit
 * ("us" or "step") for the hover card. Returns the Cytoscape instance;
 * addGraph() adds more to it.
 */
export function drawGraph(container, g, { onNode = null, center = null, unit = "us" } = {}) {
  const have = new Set();
  const cy = cytoscape({ container, elements: elementsOf(g, { center, have }), style: STYLE });
  const byKey = new Map([...g.nodes.values()].map((nd) => [nodeKey(nd), nd]));
  cy.scratch("tg", { have, byKey });
  attachTooltip(cy, byKey, (node, nd) => describeNode(node, nd, unit));
  layoutGraph(cy, { focus: cy.nodes("[center = 1]") });
  if (onNode) cy.on("tap", "node", (ev) => onNode(byKey.get(ev.target.id()), ev.target));
  return cy;
}

/** Add graph g (e.g. an op's neighborhood) to a drawn graph, lay it out again; returns how many nodes it added. */
export function addGraph(cy, g, { focus = null } = {}) {
  const { have, byKey } = cy.scratch("tg");
  const before = cy.nodes().length;
  for (const nd of g.nodes.values()) if (!byKey.has(nodeKey(nd))) byKey.set(nodeKey(nd), nd);
  cy.add(elementsOf(g, { have }));
  layoutGraph(cy, { focus });
  return cy.nodes().length - before;
}
