"""Device time broken down: what the device was doing over a window.

The breakdown every per-iteration report gives (TraceLens's
``gpu_timeline``, HTA's temporal breakdown), computed once at ingest for
each step (:mod:`.steps`) and each rank's whole device span (:mod:`.ranks`).
Over a window ``[w0, w1)`` and a set of kernels (copies and memsets
included), each figure is the length of a union of intervals clipped to
the window (kernels on several streams at once count once):

* ``busy``: every kernel;
* ``computation``: compute kernels and memsets (TraceLens counts a memset
  as computation; so does this, so that the figures add up the same way);
* ``communication``: communication kernels (the kit's rule: NCCL, RCCL,
  MSCCL, DeepEP, NVSHMEM, custom all-reduces);
* ``memcpy``: copies;
* ``exposed_communication``: communication with no computation at the
  same time;
* ``exposed_memcpy``: copies with neither computation nor communication at
  the same time;
* ``idle``: the window minus ``busy``.

So ``computation + exposed_communication + exposed_memcpy + idle`` is the
window, as in TraceLens.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from tracegraph.ingest.columnar import ColumnarTrace, codes_of, num
from tracegraph.ingest.intervals import covered, inside, pieces, union_intervals

F64 = npt.NDArray[np.float64]
Segments = tuple[F64, F64]

# The figures, as stored (``<name>_us``), in the order analyses list them.
FIGURES = (
    "busy",
    "computation",
    "communication",
    "memcpy",
    "exposed_communication",
    "exposed_memcpy",
    "idle",
)


def kernel_sets(ct: ColumnarTrace, mine: npt.NDArray[np.bool_]) -> dict[str, Segments]:
    """The unions of the kernels ``mine`` selects: busy, computation, communication, memcpy."""
    k = ct["kernels"]
    start, end = num(k["start_us"]), num(k["end_us"])
    compute = codes_of(k["kind"], "compute") | codes_of(k["kind"], "memset")
    comm = codes_of(k["kind"], "communication")
    copy = codes_of(k["kind"], "memcpy")
    return {
        "busy": union_intervals(start[mine], end[mine]),
        "computation": union_intervals(start[mine & compute], end[mine & compute]),
        "communication": union_intervals(start[mine & comm], end[mine & comm]),
        "memcpy": union_intervals(start[mine & copy], end[mine & copy]),
    }


def breakdown(sets: dict[str, Segments], w0: float, w1: float) -> dict[str, float]:
    """The figures over ``[w0, w1)`` (``<figure>_us``, and ``window_us``)."""
    clipped = {name: _clip(s, w0, w1) for name, s in sets.items()}
    window = (np.asarray([w0]), np.asarray([w1]))
    length = {name: float(covered(s[0], s[1], window[0], window[1])[0]) for name, s in clipped.items()}
    mid, size = pieces(*clipped.values())
    comp = inside(*clipped["computation"], mid)
    comm = inside(*clipped["communication"], mid)
    copy = inside(*clipped["memcpy"], mid)
    return {
        "window_us": w1 - w0,
        "busy_us": length["busy"],
        "computation_us": length["computation"],
        "communication_us": length["communication"],
        "memcpy_us": length["memcpy"],
        "exposed_communication_us": float(size[comm & ~comp].sum()),
        "exposed_memcpy_us": float(size[copy & ~comp & ~comm].sum()),
        "idle_us": (w1 - w0) - length["busy"],
    }


def _clip(segments: Segments, w0: float, w1: float) -> Segments:
    s, e = segments
    keep = (e > w0) & (s < w1)
    return np.maximum(s[keep], w0), np.minimum(e[keep], w1)
