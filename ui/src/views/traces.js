// Traces: the list (framework, ops, span, critical path, memory peak),
// upload by drag-and-drop or file picker with the upload's and then the
// ingest job's progress, and drop with a confirmation.
import { ApiError, enc, getJSON, request, upload } from "../api.js";
import { el, errorBox, fmtBytes, fmtInt, fmtTime } from "../util.js";

// The ingest formats (tests/test_ui_api.py checks them against the server's).
const FORMATS = [
  "auto",
  "pytorch-kineto",
  "pytorch-et",
  "chrome-trace",
  "nsys-sqlite",
  "rocprofv3-json",
  "rocpd-sqlite",
  "xplane",
  "tf-stepstats",
  "tf-oplist",
  "tf-opnames",
  "chainer-graph",
  "megengine-profile",
];

/**
 * The critical path's length: the dependency critical path's, else (a
 * trace without dependencies between ops, like PyTorch's) the observed
 * critical path's, labelled as such.
 */
function criticalPathCell(t, unit) {
  const has = (v) => v !== null && v !== undefined;
  if (has(t.critical_path_us)) {
    return el(
      "td.num",
      {
        "data-kind": "dependency",
        "data-value": t.critical_path_us,
        title: "critical path: the heaviest chain of dependent ops",
      },
      fmtTime(t.critical_path_us, unit),
    );
  }
  if (has(t.observed_path_us)) {
    return el(
      "td.num",
      {
        "data-kind": "observed",
        "data-value": t.observed_path_us,
        title:
          "observed critical path: the heaviest path through what actually ran (threads, launches, streams, syncs). " +
          "This trace has no dependencies between ops, so it has no dependency critical path.",
      },
      `${fmtTime(t.observed_path_us, unit)} (observed)`,
    );
  }
  return el("td.num", {}, "");
}

function traceRow(t, ctx, refresh) {
  const unit = t.time_unit === "step" ? "step" : "us";
  const link = (view, text) => el("a", { href: `#/${view}/${enc(t.trace)}` }, text);
  return el(
    "tr",
    { "data-trace": t.trace },
    el("td", {}, link("timeline", t.trace)),
    el("td", {}, t.framework || ""),
    el("td.num", {}, fmtInt(t.ops)),
    el("td.num", {}, t.span_us === null ? "" : fmtTime(t.span_us, unit)),
    criticalPathCell(t, unit),
    el(
      "td.num",
      { title: t.memory_peak_bytes === null ? "" : `${fmtInt(t.memory_peak_bytes)} bytes` },
      t.memory_peak_bytes === null ? "" : fmtBytes(t.memory_peak_bytes),
    ),
    el(
      "td.actions",
      {},
      link("timeline", "timeline"),
      " ",
      link("memory", "memory"),
      " ",
      link("graph", "graph"),
      " ",
      link("analyses", "analyses"),
      " ",
      el(
        "button.danger",
        {
          type: "button",
          "data-action": "drop",
          onclick: async () => {
            if (!window.confirm(`Drop trace "${t.trace}"? This deletes it from the database.`)) return;
            try {
              await request(`/traces/${enc(t.trace)}`, { method: "DELETE" });
              if (ctx.current() === t.trace) ctx.setCurrent(null);
              refresh();
            } catch (err) {
              window.alert(err.message);
            }
          },
        },
        "drop",
      ),
    ),
  );
}

function uploader(ctx, refresh) {
  const files = el("input", { type: "file", multiple: true, id: "upload-files" });
  const name = el("input", {
    type: "text",
    id: "upload-name",
    placeholder: "trace name",
    required: true,
    maxlength: 200,
  });
  const format = el(
    "select",
    { id: "upload-format" },
    FORMATS.map((f) => el("option", { value: f }, f)),
  );
  const replace = el("input", { type: "checkbox", id: "upload-replace" });
  const bar = el("progress", { max: 1, value: 0, hidden: true, id: "upload-progress" });
  const status = el("span.status", { id: "upload-status", role: "status" });
  let chosen = [];

  function choose(list) {
    chosen = Array.from(list);
    if (chosen.length && !name.value) name.value = chosen[0].name.replace(/\.[^.]*$/, "").replace(/[/~]/g, "_");
    status.textContent = chosen.length ? `${chosen.length} file(s): ${chosen.map((f) => f.name).join(", ")}` : "";
  }
  files.addEventListener("change", () => choose(files.files));

  const zone = el("div.dropzone", { id: "dropzone" }, "Drop trace files here, or ", files);
  zone.addEventListener("dragover", (ev) => {
    ev.preventDefault();
    zone.classList.add("over");
  });
  zone.addEventListener("dragleave", () => zone.classList.remove("over"));
  zone.addEventListener("drop", (ev) => {
    ev.preventDefault();
    zone.classList.remove("over");
    choose(ev.dataTransfer.files);
  });

  async function follow(job) {
    // The 202 flow: poll GET /jobs/{id} until it is done or failed.
    for (;;) {
      const p = job.progress || {};
      bar.max = 1;
      bar.value = p.fraction ?? 0;
      status.textContent =
        `ingesting: ${job.status}, ${job.phase}` + (p.total ? ` (${fmtInt(p.done)} of ${fmtInt(p.total)})` : "");
      if (job.status === "done") return job.result;
      if (job.status === "failed") throw new ApiError(job.error_status || 400, job.error || "ingest failed");
      await new Promise((r) => setTimeout(r, 400));
      job = await getJSON(`/jobs/${enc(job.id)}`);
    }
  }

  async function submit(ev) {
    ev.preventDefault();
    if (!chosen.length) {
      status.textContent = "choose or drop a file first";
      return;
    }
    const form = new FormData();
    form.append("trace", name.value.trim());
    form.append("format", format.value);
    form.append("replace", replace.checked ? "true" : "false");
    for (const f of chosen) form.append("files", f, f.name);
    bar.hidden = false;
    go.disabled = true;
    try {
      const res = await upload("/traces", form, (done, total) => {
        bar.max = total;
        bar.value = done;
        status.textContent = `uploading ${fmtBytes(done)} of ${fmtBytes(total)}`;
      });
      const summary = res.status === 202 ? await follow(res.body) : res.body;
      bar.max = 1;
      bar.value = 1;
      status.textContent = `done: ${summary.trace}, ${fmtInt(summary.ops)} ops`;
      status.dataset.done = summary.trace;
      ctx.setCurrent(summary.trace);
      chosen = [];
      files.value = "";
      name.value = "";
      refresh();
    } catch (err) {
      status.textContent = `failed: ${err.message}`;
      status.dataset.failed = "1";
    } finally {
      go.disabled = false;
    }
  }
  const go = el("button", { type: "submit", id: "upload-go" }, "Upload");
  return el(
    "form.upload",
    { onsubmit: submit },
    el("h2", {}, "Upload"),
    zone,
    el(
      "div.row",
      {},
      el("label", {}, "name ", name),
      el("label", {}, "format ", format),
      el("label", {}, replace, " replace"),
      go,
    ),
    el("div.row", {}, bar, status),
  );
}

export async function render(root, _parts, _query, ctx) {
  const list = el("div", { id: "trace-list" });
  async function refresh() {
    try {
      const traces = await ctx.traces(true);
      const rows = traces.map((t) => traceRow(t, ctx, refresh));
      list.replaceChildren(
        traces.length
          ? el(
              "table.results#traces-table",
              {},
              el(
                "thead",
                {},
                el(
                  "tr",
                  {},
                  ["trace", "framework", "ops", "span", "critical path", "memory peak", ""].map((h) => el("th", {}, h)),
                ),
              ),
              el("tbody", {}, rows),
            )
          : el("p.empty", {}, "No traces yet: upload one below."),
      );
    } catch (err) {
      list.replaceChildren(errorBox(err));
    }
  }
  root.append(el("h1", {}, "Traces"), list, uploader(ctx, refresh));
  await refresh();
}
