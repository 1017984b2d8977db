// Cypher: ad-hoc read-only queries (POST /cypher) against one trace: the
// selected trace goes in the request's `trace` field (the server binds it
// as $trace). Results as a table, and as a graph when they hold nodes,
// relationships or paths.
import { postJSON, saveBlob } from "../api.js";
import { capGraph, collectGraph, drawGraph, hasGraph } from "../graph.js";
import { resultTable, toCSV } from "../table.js";
import { clear, el, errorBox, fmtInt, traceSelect } from "../util.js";

const EXAMPLE =
  "MATCH (o:Op {trace: $trace})\nRETURN o.name AS op, o.type AS type, o.weight_us AS us\nORDER BY us DESC, op\nLIMIT 10";
const KEEP = "tracegraph.cypher";

export async function render(root, [trace], _query, ctx) {
  const traces = await ctx.traces();
  let chosen = trace;
  root.append(el("h1", {}, "Cypher"));
  const text = el("textarea#cypher-query", { rows: 8, spellcheck: false }, sessionStorage.getItem(KEEP) || EXAMPLE);
  const params = el("input#cypher-params", {
    type: "text",
    placeholder: '{"n": 5}  (JSON; $trace is the trace chosen)',
    size: 50,
  });
  const out = el("div#cypher-result");
  async function run(ev) {
    ev.preventDefault();
    sessionStorage.setItem(KEEP, text.value);
    clear(out).append(el("p.muted", {}, "running…"));
    try {
      const p = params.value.trim() ? JSON.parse(params.value) : {};
      const res = await postJSON("/cypher", { query: text.value, params: p, trace: chosen });
      clear(out).append(
        el(
          "p.caption",
          { role: "status" },
          `${fmtInt(res.rows.length)} rows${res.truncated ? " (truncated at the server's row cap)" : ""}`,
        ),
        el(
          "button",
          {
            type: "button",
            onclick: () => saveBlob(new Blob([toCSV(res.columns, res.rows)], { type: "text/csv" }), "cypher.csv"),
          },
          "download CSV",
        ),
      );
      if (hasGraph(res.rows)) {
        const g = capGraph(collectGraph(res.rows), 200);
        const box = el("div.graph#cypher-graph");
        out.append(el("p.muted", {}, `graph: showing ${fmtInt(g.nodes.size)} of ${fmtInt(g.total)} nodes`), box);
        drawGraph(box, g);
      }
      out.append(resultTable(res.columns, res.rows));
    } catch (err) {
      clear(out).append(errorBox(err));
    }
  }
  root.append(
    el(
      "form.cypher#cypher-form",
      { onsubmit: run },
      el(
        "div.row",
        {},
        el(
          "label",
          {},
          "trace ",
          traceSelect(
            traces,
            trace,
            (v) => {
              chosen = v;
              ctx.setCurrent(v);
            },
            { id: "cypher-trace" },
          ),
        ),
        el("label", {}, "params ", params),
      ),
      text,
      el(
        "div.row",
        {},
        el("button#cypher-run", { type: "submit" }, "Run (read-only)"),
        el("span.muted", {}, "Ctrl+Enter runs; the database refuses writes"),
      ),
    ),
    out,
  );
  text.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) run(ev);
  });
  return null;
}
