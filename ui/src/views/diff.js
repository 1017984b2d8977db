// Diff: two traces side by side (their summaries), the headline deltas
// (trace-diff-summary) and the per-op weight changes (trace-diff).
import { enc, getJSON, qs } from "../api.js";
import { resultTable } from "../table.js";
import { el, errorBox, fmtBytes, fmtInt, fmtTime, traceSelect } from "../util.js";

function card(t) {
  const unit = t.time_unit === "step" ? "step" : "us";
  const row = (k, v) => el("tr", {}, el("th", {}, k), el("td.num", {}, v));
  return el(
    "div.card",
    { "data-trace": t.trace },
    el("h3", {}, t.trace),
    el(
      "table",
      {},
      row("framework", t.framework || ""),
      row("ops", fmtInt(t.ops)),
      row("span", fmtTime(t.span_us, unit)),
      row("critical path", fmtTime(t.critical_path_us, unit)),
      row("memory peak", fmtBytes(t.memory_peak_bytes)),
    ),
  );
}

export async function render(root, [trace, base], query, ctx) {
  let traces = await ctx.traces();
  const listed = (name) => traces.some((t) => t.trace === name);
  if (!listed(trace) || (base && !listed(base))) traces = await ctx.traces(true); // uploaded since the list was read
  const baseName =
    base && traces.some((t) => t.trace === base) ? base : (traces.find((t) => t.trace !== trace) || traces[0]).trace;
  root.append(el("h1", {}, "Diff"));
  const minDelta = el("input#diff-min", { type: "number", min: 0, step: "any", value: query.min || 0 });
  root.append(
    el(
      "div.toolbar",
      {},
      el(
        "label",
        {},
        "base ",
        traceSelect(traces, baseName, (v) => ctx.go("diff", [trace, v]), { id: "diff-base" }),
      ),
      el(
        "label",
        {},
        "this ",
        traceSelect(traces, trace, (v) => ctx.go("diff", [v, baseName]), { id: "diff-trace" }),
      ),
      el("label", {}, "min |delta| (us) ", minDelta),
      el(
        "button",
        { type: "button", onclick: () => ctx.go("diff", [trace, baseName], { min: minDelta.value }) },
        "apply",
      ),
    ),
  );
  const byName = Object.fromEntries(traces.map((t) => [t.trace, t]));
  root.append(el("div.side-by-side", {}, card(byName[baseName]), card(byName[trace])));
  try {
    const [summary, diff] = await Promise.all([
      getJSON(`/traces/${enc(trace)}/queries/trace-diff-summary${qs({ base: baseName })}`),
      getJSON(`/traces/${enc(trace)}/queries/trace-diff${qs({ base: baseName, min_delta_us: query.min || 0 })}`),
    ]);
    root.append(
      el("h2", {}, "Headline"),
      resultTable(summary.columns, summary.rows),
      el("h2", {}, "Per op"),
      el("p.caption#diff-caption", {}, `${fmtInt(diff.rows.length)} ops differ`, diff.note ? ` · ${diff.note}` : ""),
      resultTable(diff.columns, diff.rows, { limit: 2000 }),
    );
  } catch (err) {
    root.append(errorBox(err));
  }
  return null;
}
