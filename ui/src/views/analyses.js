// Analyses: every catalog analysis (GET /queries) with a form for its
// parameters, results as a sortable table, CSV download (the server's
// CSV, fetched with the key and saved), and graph analyses drawn too.
import { download, enc, getJSON, qs } from "../api.js";
import { capGraph, collectGraph, drawGraph, hasGraph } from "../graph.js";
import { resultTable } from "../table.js";
import { clear, el, errorBox, fmtInt, traceSelect } from "../util.js";

function paramInput(p, traces, trace) {
  const id = `param-${p.name}`;
  let input;
  if (p.type === "STRING" && p.doc.startsWith("trace id")) {
    const others = traces.filter((t) => t.trace !== trace);
    input = el(
      "select",
      { id, name: p.name },
      (others.length ? others : traces).map((t) => el("option", { value: t.trace }, t.trace)),
    );
  } else if (p.choices && p.choices.length) {
    input = el(
      "select",
      { id, name: p.name },
      p.choices.map((c) => el("option", { value: c, selected: String(p.default) === c }, c)),
    );
  } else if (p.type === "BOOLEAN") {
    input = el(
      "select",
      { id, name: p.name },
      ["", "true", "false"].map((c) => el("option", { value: c, selected: String(p.default) === c }, c || "(default)")),
    );
  } else {
    input = el("input", {
      id,
      name: p.name,
      type: p.type === "STRING" ? "text" : "number",
      step: p.type === "INTEGER" ? 1 : "any",
      placeholder: p.default === null ? (p.required ? "required" : "null") : String(p.default),
      required: p.required,
    });
  }
  return el(
    "label.param",
    { title: p.doc },
    el("span", {}, `${p.name} `, el("small.muted", {}, p.type.toLowerCase())),
    input,
    el("small.muted", {}, p.doc),
  );
}

export async function render(root, [trace, name], query, ctx) {
  const [catalog, traces] = await Promise.all([getJSON("/queries"), ctx.traces()]);
  const current = catalog.find((a) => a.name === name) || catalog[0];
  root.append(el("h1", {}, "Analyses ", el("span.muted", {}, trace)));
  const side = el(
    "nav.catalog",
    {},
    catalog.map((a) =>
      el(
        "a",
        {
          href: `#/analyses/${enc(trace)}/${enc(a.name)}`,
          class: a.name === current.name ? "active" : null,
          title: a.summary,
        },
        a.name,
      ),
    ),
  );
  const pane = el("div.analysis");
  root.append(el("div.split", {}, side, pane));

  const tsel = traceSelect(traces, trace, (v) => ctx.go("analyses", [v, current.name]), { id: "analysis-trace" });
  const inputs = current.params.map((p) => paramInput(p, traces, trace));
  const out = el("div#analysis-result");
  const values = () => {
    const v = {};
    for (const p of current.params) {
      const x = document.getElementById(`param-${p.name}`).value;
      if (x !== "") v[p.name] = x;
    }
    return v;
  };
  const url = (fmt) => `/traces/${enc(trace)}/queries/${enc(current.name)}${qs({ ...values(), format: fmt })}`;

  async function run(ev) {
    ev.preventDefault();
    clear(out).append(el("p.muted", {}, "running…"));
    try {
      const res = await getJSON(url());
      const docs = Object.fromEntries(current.columns.map((c) => [c.name, c.doc]));
      clear(out).append(
        el("p.caption", { role: "status" }, `${fmtInt(res.rows.length)} rows`, res.note ? ` · ${res.note}` : ""),
        el(
          "button#analysis-csv",
          { type: "button", onclick: () => download(url("csv"), `${trace}-${current.name}.csv`) },
          "download CSV",
        ),
      );
      if (current.graph && hasGraph(res.rows)) {
        const g = capGraph(collectGraph(res.rows), 150);
        const box = el("div.graph");
        out.append(el("p.muted", {}, `showing ${fmtInt(g.nodes.size)} of ${fmtInt(g.total)} nodes`), box);
        drawGraph(box, g);
      }
      out.append(resultTable(res.columns, res.rows, { docs }));
    } catch (err) {
      clear(out).append(errorBox(err));
    }
  }
  pane.append(
    el("h2", {}, current.name),
    el("p", {}, current.summary),
    el("details", {}, el("summary", {}, "definition"), el("pre.definition", {}, current.definition)),
    el(
      "form.params#analysis-form",
      { onsubmit: run },
      el("label.param", {}, el("span", {}, "trace "), tsel),
      inputs,
      el("button#analysis-run", { type: "submit" }, "Run"),
    ),
    out,
  );
  return null;
}
