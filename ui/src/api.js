// HTTP API access for the UI. The API key (when the server has one) is
// asked for once, kept in this tab's sessionStorage and sent only as an
// `Authorization: Bearer` header: never in a URL, never in localStorage.
const KEY = "tracegraph.key";

export class ApiError extends Error {
  constructor(status, detail) {
    super(detail);
    this.status = status;
  }
}

let keyPrompt = null; // the pending "enter the key" promise, shared by concurrent 401s

function headers(extra = {}) {
  const h = { ...extra };
  const key = sessionStorage.getItem(KEY);
  if (key) h.Authorization = `Bearer ${key}`;
  return h;
}

async function detailOf(res) {
  try {
    const body = await res.json();
    return body.detail || `${res.status} ${res.statusText}`;
  } catch {
    return `${res.status} ${res.statusText}`;
  }
}

/** Ask for the key (the dialog in index.html); resolves when one was entered. */
export function askKey(message) {
  if (keyPrompt) return keyPrompt;
  const dlg = document.getElementById("key-dialog");
  const input = dlg.querySelector("input");
  dlg.querySelector(".key-message").textContent = message || "";
  input.value = "";
  keyPrompt = new Promise((resolve) => {
    dlg.onsubmit = (ev) => {
      ev.preventDefault();
      const v = input.value.trim();
      if (!v) return;
      sessionStorage.setItem(KEY, v);
      dlg.close();
      keyPrompt = null;
      resolve();
    };
  });
  dlg.showModal();
  input.focus();
  return keyPrompt;
}

export function forgetKey() {
  sessionStorage.removeItem(KEY);
}

/** fetch() with the key; on 401 asks for the key and tries again. */
export async function request(path, opts = {}) {
  for (;;) {
    const res = await fetch(path, { ...opts, headers: headers(opts.headers) });
    if (res.status === 401) {
      const had = sessionStorage.getItem(KEY);
      forgetKey();
      await askKey(had ? "That key was refused. Enter the server's API key." : "This server needs its API key.");
      continue;
    }
    if (!res.ok) throw new ApiError(res.status, await detailOf(res));
    return res;
  }
}

export async function getJSON(path, opts) {
  return (await request(path, opts)).json();
}

export async function postJSON(path, body, opts = {}) {
  return getJSON(path, {
    ...opts,
    method: "POST",
    body: JSON.stringify(body),
    headers: { "Content-Type": "application/json" },
  });
}

export function qs(params) {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== "") p.append(k, String(v));
  }
  const s = p.toString();
  return s ? `?${s}` : "";
}

export const enc = encodeURIComponent;

/** POST a multipart form with upload progress (XHR: fetch cannot report it). */
export function upload(path, form, onProgress) {
  return new Promise((resolve, reject) => {
    const send = () => {
      const xhr = new XMLHttpRequest();
      xhr.open("POST", path);
      for (const [k, v] of Object.entries(headers())) xhr.setRequestHeader(k, v);
      xhr.upload.onprogress = (ev) => ev.lengthComputable && onProgress(ev.loaded, ev.total);
      xhr.onerror = () => reject(new ApiError(0, "the upload failed: the server could not be reached"));
      xhr.onload = async () => {
        let body = null;
        try {
          body = JSON.parse(xhr.responseText);
        } catch {
          /* not JSON */
        }
        if (xhr.status === 401) {
          forgetKey();
          await askKey("This server needs its API key.");
          send();
        } else if (xhr.status >= 400) {
          reject(new ApiError(xhr.status, (body && body.detail) || `${xhr.status} ${xhr.statusText}`));
        } else {
          resolve({ status: xhr.status, body });
        }
      };
      xhr.send(form);
    };
    send();
  });
}

/** Download a response as a file (the key goes in the header, so no plain link). */
export async function download(path, filename) {
  const res = await request(path);
  const blob = await res.blob();
  saveBlob(blob, filename);
}

export function saveBlob(blob, filename) {
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = filename;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
