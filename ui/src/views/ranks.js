// Ranks: a multi-rank job rank by rank: who held the others up
// (straggler-ranks, stragglers), where each rank's time went
// (comm-compute-overlap, idle-breakdown) and the job's critical path leg
// by leg (job-critical-path). Each table is the catalog analysis's answer,
// as the Analyses view would show it; a trace that lacks what one needs
// shows its "not available" note instead.
import { enc, getJSON } from "../api.js";
import { resultTable } from "../table.js";
import { el, errorBox, fmtInt, traceSelect } from "../util.js";

const SECTIONS = [
  ["straggler-ranks", "Stragglers by rank"],
  ["stragglers", "Collectives held up by a straggler"],
  ["comm-compute-overlap", "Communication against computation"],
  ["idle-breakdown", "Idle time by cause"],
  ["job-critical-path", "The job's critical path, leg by leg"],
];

async function section(trace, name, title) {
  const box = el("section.rank-section", { "data-analysis": name }, el("h2", {}, title));
  try {
    const res = await getJSON(`/traces/${enc(trace)}/queries/${enc(name)}`);
    box.append(
      el("p.caption", { role: "status" }, `${fmtInt(res.rows.length)} rows`, res.note ? ` · ${res.note}` : ""),
    );
    if (res.rows.length) {
      // straggler-ranks: the ranks that held the others up (caused_us > 0: a straggler) are marked
      const caused = name === "straggler-ranks" ? res.columns.indexOf("caused_us") : -1;
      const rowClass = caused >= 0 ? (row) => (row[caused] > 0 ? "straggler" : null) : null;
      box.append(resultTable(res.columns, res.rows, { limit: 500, rowClass }));
    }
  } catch (err) {
    box.append(errorBox(err));
  }
  return box;
}

export async function render(root, [trace], query, ctx) {
  let traces = await ctx.traces();
  if (!traces.some((t) => t.trace === trace)) traces = await ctx.traces(true); // uploaded since the list was read
  root.append(
    el("h1", {}, "Ranks ", el("span.muted", {}, trace)),
    el(
      "div.toolbar",
      {},
      el(
        "label",
        {},
        "trace ",
        traceSelect(traces, trace, (v) => ctx.go("ranks", [v]), { id: "ranks-trace" }),
      ),
      el("a", { href: `#/timeline/${enc(trace)}` }, "see the ranks on the timeline"),
    ),
  );
  const boxes = await Promise.all(SECTIONS.map(([name, title]) => section(trace, name, title)));
  root.append(...boxes);
  return null;
}
