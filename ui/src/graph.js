// Graph drawing: API graph values (nodes, relationships, paths) as
// Cytoscape elements laid out as a layered DAG (dagre), colored like Neo4j
// Browser with cypher/tracegraph.grass (bundled at build time as text).
import cytoscape from "cytoscape";
import dagre from "cytoscape-dagre";
import grassText from "../../cypher/tracegraph.grass";

cytoscape.use(dagre);

/** {label: {color, border, caption}} and {relType: {color, width}} from the grass style sheet. */
export function parseGrass(text) {
  const nodes = {};
  const rels = {};
  for (const m of text.matchAll(/(node|relationship)(?:\.(\w+))?\s*\{([^}]*)\}/g)) {
    const props = Object.fromEntries([...m[3].matchAll(/([\w-]+)\s*:\s*([^;]+);/g)].map((p) => [p[1], p[2].trim()]));
    const key = m[2] || "*";
    if (m[1] === "node") nodes[key] = { color: props.color, border: props["border-color"], caption: props.caption };
    else rels[key] = { color: props.color, width: parseFloat(props["shaft-width"]) || 1 };
  }
  return { nodes, rels };
}

export const GRASS = parseGrass(grassText);

function caption(node) {
  const label = (node.labels || [])[0];
  const style = GRASS.nodes[label] || GRASS.nodes["*"] || {};
  const m = /\{(\w+)\}/.exec(style.caption || "{name}");
  const v = node.properties?.[m ? m[1] : "name"] ?? node.properties?.name ?? node.properties?.uid ?? node.id;
  const s = String(v);
  return s.length > 28 ? `…${s.slice(-27)}` : s;
}

/** Walk result values for graph objects: {nodes: Map(id -> node), rels: Map(id -> rel)}, in first-seen order. */
export function collectGraph(rows) {
  const nodes = new Map();
  const rels = new Map();
  const visit = (v) => {
    if (!v || typeof v !== "object") return;
    if (Array.isArray(v)) { v.forEach(visit); return; }
    if (v.kind === "node") { if (!nodes.has(v.id)) nodes.set(v.id, v); return; }
    if (v.kind === "relationship") { if (!rels.has(v.id)) rels.set(v.id, v); return; }
    if (v.kind === "path") { (v.nodes || []).forEach(visit); (v.relationships || []).forEach(visit); return; }
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

/** Draw graph g into container; onNode(node) on a click. Returns the Cytoscape instance. */
export function drawGraph(container, g, { onNode = null, center = null } = {}) {
  const els = [];
  for (const [id, nd] of g.nodes) {
    const label = (nd.labels || [])[0] || "";
    const style = GRASS.nodes[label] || GRASS.nodes["*"] || {};
    els.push({
      data: {
        id: `n${id}`, label: caption(nd), color: style.color || "#A5ABB6", border: style.border || "#9AA1AC",
        kind: label, cp: nd.properties?.cp_step !== undefined && nd.properties?.cp_step !== null ? 1 : 0,
        center: center !== null && nd.properties?.name === center ? 1 : 0,
      },
    });
  }
  for (const [id, r] of g.rels) {
    const style = GRASS.rels[r.type] || GRASS.rels["*"] || {};
    els.push({ data: { id: `r${id}`, source: `n${r.start}`, target: `n${r.end}`, type: r.type, color: style.color || "#A5ABB6", width: Math.min(style.width || 1, 4) } });
  }
  const cy = cytoscape({
    container,
    elements: els,
        style: [
      { selector: "node", style: { "background-color": "data(color)", "border-color": "data(border)", "border-width": 2, label: "data(label)", "font-size": 9, "text-valign": "bottom", "text-margin-y": 3, width: 22, height: 22 } },
      { selector: "node[cp = 1]", style: { "border-color": "#E0201B", "border-width": 4 } },
      { selector: "node[center = 1]", style: { width: 34, height: 34, "font-weight": "bold" } },
      { selector: "edge", style: { "line-color": "data(color)", "target-arrow-color": "data(color)", "target-arrow-shape": "triangle", "curve-style": "bezier", width: "data(width)", "arrow-scale": 0.7 } },
    ],
    layout: { name: "dagre", rankDir: "TB", nodeSep: 45, rankSep: 45, animate: false },
  });
  // A long chain fitted whole is unreadable: keep labels legible and start
  // at the center op (or the first one); drag and wheel move around.
  if (cy.zoom() < 0.6) {
    const focus = cy.nodes("[center = 1]").first();
    cy.zoom(0.6);
    cy.center(focus.length ? focus : cy.nodes().first());
  }
  const byId = new Map([...g.nodes].map(([id, nd]) => [`n${id}`, nd]));
  if (onNode) cy.on("tap", "node", (ev) => onNode(byId.get(ev.target.id())));
  return cy;
}
