// Result tables: sortable by any column (click the header; numbers sort as
// numbers, nulls last), graph values (nodes, relationships, paths) shown as
// short text, and CSV text of the rows as given.
import { el, fmtNum } from "./util.js";

export function cellText(v) {
  if (v === null || v === undefined) return "";
  if (typeof v === "number") return fmtNum(v);
  if (typeof v === "object") {
    if (v.kind === "node") return `(${(v.labels || []).join(":")} ${v.properties?.name ?? v.properties?.uid ?? v.id})`;
    if (v.kind === "relationship") return `[:${v.type}]`;
    if (v.kind === "path") return `path of ${(v.relationships || []).length} relationships`;
    return JSON.stringify(v);
  }
  return String(v);
}

function compare(a, b) {
  const na = a === null || a === undefined;
  const nb = b === null || b === undefined;
  if (na || nb) return na === nb ? 0 : na ? 1 : -1;
  if (typeof a === "number" && typeof b === "number") return a - b;
  return cellText(a).localeCompare(cellText(b), undefined, { numeric: true });
}

/** A sortable table of `rows` (arrays) under `columns`; `docs` are header tooltips. */
export function resultTable(columns, rows, { docs = {}, limit = 5000, onRowClick = null, rowClass = null } = {}) {
  const order = rows.map((_, i) => i);
  let sortCol = -1;
  let dir = 1;
  const tbody = el("tbody");
  const heads = columns.map((c, ci) =>
    el(
      "th",
      {
        title: docs[c] || "",
        "data-col": c,
        onclick: () => {
          dir = sortCol === ci ? -dir : 1;
          sortCol = ci;
          order.sort((x, y) => dir * compare(rows[x][ci], rows[y][ci]) || x - y);
          heads.forEach((h, hi) =>
            h.setAttribute("aria-sort", hi === ci ? (dir > 0 ? "ascending" : "descending") : "none"),
          );
          fill();
        },
      },
      c,
    ),
  );
  function fill() {
    tbody.replaceChildren(
      ...order.slice(0, limit).map((ri) =>
        el(
          "tr",
          {
            onclick: onRowClick ? () => onRowClick(rows[ri]) : null,
            class:
              [onRowClick ? "clickable" : null, rowClass ? rowClass(rows[ri]) : null].filter(Boolean).join(" ") || null,
          },
          rows[ri].map((v) => el("td", { class: typeof v === "number" ? "num" : null }, cellText(v))),
        ),
      ),
    );
  }
  fill();
  const note =
    rows.length > limit
      ? el("p.muted", {}, `showing the first ${limit} of ${rows.length} rows (the CSV has them all)`)
      : null;
  return el("div.table-wrap", {}, el("table.results", {}, el("thead", {}, el("tr", {}, heads)), tbody), note);
}

function csvField(v) {
  const s = v === null || v === undefined ? "" : typeof v === "object" ? JSON.stringify(v) : String(v);
  return /[",\n\r]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

export function toCSV(columns, rows) {
  return [columns, ...rows].map((r) => r.map(csvField).join(",")).join("\n") + "\n";
}
