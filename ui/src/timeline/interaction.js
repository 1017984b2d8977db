// The timeline's mouse: the wheel zooms around the pointer, a drag pans,
// hovering a bar reports it, a click (a press without a drag) selects it.
// Hit testing finds the bar under the pointer in the window answer.

/** Index of the bar of `lane` (window data) under time x, within tol; -1 if none. */
export function barAt(lane, x, tol) {
  const s = lane.s;
  let lo = 0;
  let hi = s.length - 1;
  let k = -1;
  while (lo <= hi) {
    // the last bar starting at or before x + tol
    const mid = (lo + hi) >> 1;
    if (s[mid] <= x + tol) {
      k = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  for (let j = k; j >= 0 && j > k - 64; j--) {
    if (lane.e[j] >= x - tol && lane.s[j] <= x + tol) return j;
  }
  return -1;
}

/** Time per css pixel of plot u showing `view`. */
export function timePerPixel(u, view) {
  return (view.max - view.min) / (u.bbox.width / devicePixelRatio);
}

/**
 * The bar under mouse event ev: {lane (window data), li (lane id), j (bar
 * index)} or null. data: the window answer; n: how many lanes.
 */
export function hitTest(u, data, n, view, ev) {
  if (!data) return null;
  const li = n - 1 - Math.floor(u.posToVal(ev.offsetY, "y"));
  const lane = data.lanes.find((l) => l.id === li);
  if (!lane) return null;
  const j = barAt(lane, u.posToVal(ev.offsetX, "x"), 2 * timePerPixel(u, view));
  return j < 0 ? null : { lane, li, j };
}

/**
 * Wire the mouse of plot u to the view state: wheel and drag change the
 * view; onHover(ev) on a move while not dragging, onLeave() when the
 * pointer leaves, onClick(ev) on a press released without dragging.
 * Returns a function that removes the window-level listeners.
 */
export function attachMouse(u, { state, onHover, onLeave, onClick }) {
  const over = u.over;
  let drag = null;
  over.addEventListener(
    "wheel",
    (ev) => {
      ev.preventDefault();
      state.zoom(ev.deltaY < 0 ? 0.8 : 1.25, u.posToVal(ev.offsetX, "x"));
    },
    { passive: false },
  );
  over.addEventListener("mousedown", (ev) => {
    const v = state.get();
    drag = { x: ev.clientX, min: v.min, max: v.max, moved: false };
    ev.preventDefault();
  });
  over.addEventListener("mousemove", (ev) => {
    if (drag) onLeave();
    else onHover(ev);
  });
  over.addEventListener("mouseleave", () => onLeave());
  const onMove = (ev) => {
    if (!drag) return;
    const dx = ev.clientX - drag.x;
    if (Math.abs(dx) > 2) drag.moved = true;
    const per = timePerPixel(u, drag);
    state.set(drag.min - dx * per, drag.max - dx * per);
  };
  const onUp = (ev) => {
    if (drag && !drag.moved) onClick(ev);
    drag = null;
  };
  window.addEventListener("mousemove", onMove);
  window.addEventListener("mouseup", onUp);
  return () => {
    window.removeEventListener("mousemove", onMove);
    window.removeEventListener("mouseup", onUp);
  };
}
