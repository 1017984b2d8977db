// What the timeline highlights: the choice of source (queries/highlights.py's
// highlight sources, as they apply to this trace) and the list of the
// highlighted ops under the plot, read from the source's analysis.
import { enc, getJSON } from "../api.js";
import { el, errorBox, fmtInt, fmtTime } from "../util.js";

const LIST_MAX = 500;

/**
 * The source to open with: the one the URL names when the trace has it,
 * else the API's default (the best source the trace has: the dependency
 * critical path, else the observed one), else none ("").
 */
export function initialHighlight(sources, fromUrl, fallback) {
  if (sources.some((s) => s.name === fromUrl)) return fromUrl;
  return fallback && sources.some((s) => s.name === fallback) ? fallback : "";
}

/** The <select> of sources; sources it cannot answer for this trace say so. onChange(name) on a change. */
export function highlightSelect(sources, value, onChange) {
  const select = el(
    "select#highlight-source",
    { onchange: () => onChange(select.value) },
    el("option", { value: "" }, "nothing"),
    sources.map((s) =>
      el(
        "option",
        { value: s.name, selected: s.name === value, title: s.note || null, "data-available": s.available ? "1" : "0" },
        s.available ? s.label : `${s.label} — not available`,
      ),
    ),
  );
  return select;
}

/**
 * Fill `box` with the ops source `src` highlights, in the analysis's
 * order (the first 500). onPick(row, columns) when one is clicked.
 */
export async function showHighlightList(box, { trace, src, unit, onPick }) {
  box.replaceChildren();
  if (!src) return;
  try {
    const res = await getJSON(`/traces/${enc(trace)}/queries/${enc(src.analysis)}`);
    const col = res.columns.indexOf(src.column);
    const dur = res.columns.indexOf("dur_us");
    box.append(
      ...[
        el("h3", {}, `${src.label}: ${fmtInt(res.rows.length)} ${src.column === "op" ? "ops" : "segments"}`),
        res.note ? el("p.muted", {}, res.note) : null,
        el(
          "div.hl-ops-scroll",
          {},
          el(
            "ol.hl-ops",
            {},
            res.rows
              .slice(0, LIST_MAX)
              .map((r) =>
                el(
                  "li",
                  { "data-op": r[col], onclick: () => onPick(r, res.columns) },
                  r[col],
                  dur >= 0 ? el("span.muted", {}, ` ${fmtTime(r[dur], unit)}`) : null,
                ),
              ),
          ),
        ),
        res.rows.length > LIST_MAX
          ? el("p.muted", {}, `showing the first ${LIST_MAX} of ${fmtInt(res.rows.length)}`)
          : null,
      ].filter(Boolean),
    );
  } catch (err) {
    box.append(errorBox(err));
  }
}

/**
 * The time span [start, end] of a row of source `src`'s list: the op's own
 * times (its card) when the source names ops, else the row's own start
 * and duration (a segment of a path); null when neither is known.
 */
export async function rowSpan(src, row, columns, opDetail) {
  const at = (name) => (columns.includes(name) ? row[columns.indexOf(name)] : null);
  const d = src.column === "op" ? await opDetail(at("op")) : null;
  const s = d?.start_us ?? at("start_us");
  const e = d?.end_us ?? (s !== null && at("dur_us") !== null ? s + at("dur_us") : null);
  return s !== null && e !== null ? [s, e] : null;
}
