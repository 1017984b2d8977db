// Small DOM and formatting helpers shared by the views.

/** el("div.cls#id", {attr: v, onclick: f}, child, ...) */
export function el(spec, attrs = {}, ...children) {
  const m = spec.match(/^([a-z0-9]+)?((?:[.#][\w-]+)*)$/i);
  const node = document.createElement(m[1] || "div");
  for (const part of (m[2] || "").match(/[.#][\w-]+/g) || []) {
    if (part[0] === ".") node.classList.add(part.slice(1));
    else node.id = part.slice(1);
  }
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(node.dataset, v);
    else if (k in node && k !== "list" && typeof v !== "string") node[k] = v;
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

export function clear(node) {
  while (node.firstChild) node.firstChild.remove();
  return node;
}

const intFmt = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });
const numFmt = new Intl.NumberFormat("en-US", { maximumFractionDigits: 3 });

export function fmtInt(v) {
  return v === null || v === undefined ? "" : intFmt.format(v);
}

export function fmtNum(v) {
  if (v === null || v === undefined) return "";
  if (typeof v !== "number") return String(v);
  return Number.isInteger(v) ? intFmt.format(v) : numFmt.format(v);
}

export function fmtBytes(v) {
  if (v === null || v === undefined) return "";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let x = v;
  let u = 0;
  while (Math.abs(x) >= 1024 && u < units.length - 1) {
    x /= 1024;
    u += 1;
  }
  return u === 0 ? `${intFmt.format(v)} B` : `${x.toFixed(2)} ${units[u]}`;
}

/** A duration or time in the trace's unit (us, or steps). */
export function fmtTime(v, unit = "us") {
  if (v === null || v === undefined) return "";
  if (unit === "step") return `${numFmt.format(v)} steps`;
  const a = Math.abs(v);
  if (a >= 1e6) return `${(v / 1e6).toFixed(a >= 1e7 ? 2 : 3)} s`;
  if (a >= 1e3) return `${(v / 1e3).toFixed(a >= 1e4 ? 2 : 3)} ms`;
  return `${numFmt.format(v)} us`;
}

export function debounce(fn, ms) {
  let t = null;
  return (...args) => {
    clearTimeout(t);
    t = setTimeout(() => fn(...args), ms);
  };
}

export function errorBox(err) {
  return el("div.error", { role: "alert" }, err && err.message ? err.message : String(err));
}

/** A <select> of trace names. */
export function traceSelect(traces, value, onchange, attrs = {}) {
  const sel = el(
    "select",
    { onchange: () => onchange(sel.value), ...attrs },
    traces.map((t) => el("option", { value: t.trace, selected: t.trace === value }, t.trace)),
  );
  return sel;
}

/** Axis labels for evenly spaced times: one unit for all, as few decimals as the spacing needs. */
export function fmtAxis(splits, unit = "us") {
  if (!splits.length) return [];
  if (unit === "step") return splits.map((v) => numFmt.format(v));
  const top = Math.max(...splits.map(Math.abs));
  const [div, name] = top >= 1e6 ? [1e6, "s"] : top >= 1e3 ? [1e3, "ms"] : [1, "us"];
  const step = splits.length > 1 ? Math.abs(splits[1] - splits[0]) / div : 1;
  let dec = 0;
  while (dec < 6 && Math.abs(Math.round(step * 10 ** dec) - step * 10 ** dec) > 1e-6 * 10 ** dec) dec += 1;
  return splits.map((v) => `${(v / div).toFixed(dec)} ${name}`);
}
