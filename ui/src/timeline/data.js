// What the timeline draws, fetched from the API.
//
// Windows: GET /ui/traces/{t}/timeline/window answers a time window at
// screen resolution (sub-pixel bars merged on the server, capped). A view
// is fetched half a screen wider on each side, so a pan redraws from the
// last answer and fetches again only near its edge; a new request aborts
// the one in flight. Op details (the hover card's shapes) are fetched once
// per op name.
import { enc, getJSON, qs } from "../api.js";

/** Timings of window fetches and bar drawing, for the benchmark (bench/ui_timeline.py). */
export function perf() {
  window.__tgPerf = window.__tgPerf || { draws: [], fetches: [] };
  return window.__tgPerf;
}

/**
 * trace: the trace's name. load() calls onData(answer) with each new
 * window, onStart() when a request goes out and onError(err) when it fails
 * (not when it was aborted).
 */
export function createWindowSource({ trace, onStart, onData, onError }) {
  let data = null; // the last answer
  let inflight = null; // the AbortController of the request in flight

  /** Whether the last answer serves `view` drawn `cssWidth` pixels wide with highlight source `highlight`. */
  function covers(view, cssWidth, highlight) {
    if (!data) return false;
    const need = (view.max - view.min) / cssWidth; // time per css pixel
    return (
      data.highlight === (highlight || null) && data.t0 <= view.min && data.t1 >= view.max && data.res <= need * 1.5
    );
  }

  /** Fetch the window for `view` (and half of it on each side), replacing any request in flight. */
  async function load(view, cssWidth, highlight) {
    abort();
    const ac = new AbortController();
    inflight = ac;
    const w = view.max - view.min;
    const params = { t0: view.min - w / 2, t1: view.max + w / 2, px: Math.round(cssWidth) * 2, highlight };
    const t = performance.now();
    onStart();
    try {
      const d = await getJSON(`/ui/traces/${enc(trace)}/timeline/window${qs(params)}`, { signal: ac.signal });
      if (ac.signal.aborted) return;
      perf().fetches.push(performance.now() - t);
      data = d;
      onData(d);
    } catch (err) {
      if (err.name !== "AbortError") onError(err);
    } finally {
      if (inflight === ac) inflight = null;
    }
  }

  function abort() {
    if (inflight) inflight.abort();
    inflight = null;
  }

  return {
    covers,
    load,
    abort,
    /** The last answer (null before the first). */
    data: () => data,
    /** Forget the last answer (the highlight source changed: every bar's mark may differ). */
    forget() {
      data = null;
    },
  };
}

/** GET /ui/traces/{t}/op per op name, each fetched once (null when the op has no card). */
export function createOpCache(trace) {
  const cache = new Map();
  return function opDetail(name) {
    if (!cache.has(name)) {
      cache.set(
        name,
        getJSON(`/ui/traces/${enc(trace)}/op${qs({ name })}`).catch(() => null),
      );
    }
    return cache.get(name);
  };
}
