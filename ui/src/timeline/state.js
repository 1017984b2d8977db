// The timeline's view window: the time range [min, max] on screen, kept
// within bounds (never narrower than a twentieth of a microsecond or half
// a step, never wider than three times the trace), and its changes
// coalesced into one call of `onChange` per animation frame.

const PAD = 0.01; // the whole-trace view leaves 1% of the span free on each side

/**
 * tMin, tMax: the trace's time span; unit: "us" or "step"; initial: a
 * {min, max} to open on (ignored unless max > min); onChange(view): called
 * once per frame after the view changed.
 */
export function createViewState({ tMin, tMax, unit, initial = null, onChange }) {
  const span = Math.max(tMax - tMin, 1e-9);
  const minWidth = unit === "step" ? 0.5 : 0.05;
  const maxWidth = span * 3;
  const wholeTrace = () => ({ min: tMin - span * PAD, max: tMax + span * PAD });
  let view = initial && initial.max > initial.min ? { min: initial.min, max: initial.max } : wholeTrace();
  let frame = null;

  function clamp(min, max) {
    const width = max - min;
    if (width < minWidth || width > maxWidth) {
      const c = (min + max) / 2;
      const w = width < minWidth ? minWidth : maxWidth;
      return { min: c - w / 2, max: c + w / 2 };
    }
    return { min, max };
  }

  function set(min, max) {
    view = clamp(min, max);
    if (!frame) {
      frame = requestAnimationFrame(() => {
        frame = null;
        onChange({ ...view });
      });
    }
  }

  return {
    span,
    /** The current window (a copy). */
    get: () => ({ ...view }),
    set,
    /** Scale the window by f around time `at` (its middle by default): f < 1 zooms in. */
    zoom(f, at = (view.min + view.max) / 2) {
      set(at - (at - view.min) * f, at + (view.max - at) * f);
    },
    /** The whole trace. */
    reset() {
      const w = wholeTrace();
      set(w.min, w.max);
    },
    dispose() {
      if (frame) cancelAnimationFrame(frame);
      frame = null;
    },
  };
}
