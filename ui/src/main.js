// tracegraph web UI: a hash-routed single page over the HTTP API.
//
// Libraries (bundled by esbuild, pinned in ui/package-lock.json, licenses
// in api/static/THIRD_PARTY_LICENSES.txt):
// - uPlot (MIT): the memory plots and the timeline's time axis, zoom
//   scale, cursor and canvas. It is small (~50 kB) and draws straight to a
//   canvas, so a timeline of thousands of bars per frame stays fast; the
//   bars are drawn in its draw hook.
// - Cytoscape.js (MIT) with cytoscape-dagre (MIT; it bundles dagre, MIT):
//   graph rendering with a layered DAG layout, the standard pairing for
//   dependency graphs in the browser.
import "uplot/dist/uPlot.min.css";
import "./style.css";
import { getJSON } from "./api.js";
import { clear, el, errorBox } from "./util.js";
import * as tracesView from "./views/traces.js";
import * as timelineView from "./views/timeline.js";
import * as memoryView from "./views/memory.js";
import * as graphView from "./views/graph.js";
import * as analysesView from "./views/analyses.js";
import * as cypherView from "./views/cypher.js";
import * as diffView from "./views/diff.js";
import * as ranksView from "./views/ranks.js";

const VIEWS = {
  traces: { title: "Traces", view: tracesView, perTrace: false },
  timeline: { title: "Timeline", view: timelineView, perTrace: true },
  memory: { title: "Memory", view: memoryView, perTrace: true },
  graph: { title: "Graph", view: graphView, perTrace: true },
  analyses: { title: "Analyses", view: analysesView, perTrace: true },
  cypher: { title: "Cypher", view: cypherView, perTrace: true },
  diff: { title: "Diff", view: diffView, perTrace: true },
  ranks: { title: "Ranks", view: ranksView, perTrace: true },
};

const CURRENT = "tracegraph.trace";
let traceList = null;
let cleanup = null;
let renderToken = 0;

/** The shared context views get: trace list, current trace, navigation. */
export const ctx = {
  async traces(refresh = false) {
    if (!traceList || refresh) traceList = await getJSON("/traces");
    return traceList;
  },
  current() {
    return sessionStorage.getItem(CURRENT);
  },
  setCurrent(trace) {
    if (trace) sessionStorage.setItem(CURRENT, trace);
    else sessionStorage.removeItem(CURRENT);
  },
  go(view, parts = [], query = {}) {
    const q = new URLSearchParams(query).toString();
    location.hash = `#/${view}${parts.map((p) => `/${encodeURIComponent(p)}`).join("")}${q ? `?${q}` : ""}`;
  },
};

function parseHash() {
  const h = location.hash.replace(/^#\/?/, "");
  const [path, query = ""] = h.split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  const view = VIEWS[parts[0]] ? parts[0] : "traces";
  return { view, parts: parts.slice(1), query: Object.fromEntries(new URLSearchParams(query)) };
}

function nav(active, trace) {
  const links = Object.entries(VIEWS).map(([name, v]) => {
    const href = v.perTrace && trace ? `#/${name}/${encodeURIComponent(trace)}` : `#/${name}`;
    return el("a", { href, class: name === active ? "active" : null, "data-view": name }, v.title);
  });
  clear(document.getElementById("nav")).append(...links);
}

async function route() {
  const token = ++renderToken;
  if (cleanup) {
    try {
      cleanup();
    } catch (e) {
      console.warn(e);
    }
    cleanup = null;
  }
  const { view, parts, query } = parseHash();
  const spec = VIEWS[view];
  const root = clear(document.getElementById("main"));
  let trace = parts[0];
  try {
    if (spec.perTrace && !trace) {
      const list = await ctx.traces();
      const cur = ctx.current();
      trace = list.some((t) => t.trace === cur) ? cur : list[0]?.trace;
      if (!trace) {
        nav(view, null);
        root.append(el("p.empty", {}, "No traces yet: ", el("a", { href: "#/traces" }, "upload one"), "."));
        return;
      }
      if (token !== renderToken) return;
      history.replaceState(null, "", `#/${view}/${encodeURIComponent(trace)}`);
      parts[0] = trace;
    }
    if (spec.perTrace) ctx.setCurrent(trace);
    nav(view, spec.perTrace ? trace : ctx.current());
    document.title = `${spec.title}${trace && spec.perTrace ? ` · ${trace}` : ""} · tracegraph`;
    const out = await spec.view.render(root, parts, query, ctx);
    if (token !== renderToken) {
      if (typeof out === "function") out();
      return;
    }
    cleanup = typeof out === "function" ? out : null;
  } catch (err) {
    console.warn(err);
    if (token === renderToken) root.append(errorBox(err));
  }
}

window.addEventListener("hashchange", route);
route();
