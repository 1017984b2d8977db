"""Interval arithmetic over numpy arrays: unions of ``[start, end)``
intervals and how much of other intervals they cover. Enrichment measures
busy time, hidden copies and communication overlap with these, once at
ingest, instead of running sums in Cypher."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt


def union_intervals(
    starts: npt.ArrayLike, ends: npt.ArrayLike
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The union of intervals ``[start, end)`` as sorted, disjoint segments
    (intervals that touch or overlap merge; NaN intervals are ignored)."""
    starts_a = np.asarray(starts, dtype=float)
    ends_a = np.asarray(ends, dtype=float)
    keep = ~(np.isnan(starts_a) | np.isnan(ends_a))
    starts_a, ends_a = starts_a[keep], np.maximum(ends_a[keep], starts_a[keep])
    if len(starts_a) == 0:
        return np.zeros(0), np.zeros(0)
    order = np.argsort(starts_a, kind="stable")
    s, e = starts_a[order], ends_a[order]
    running = np.maximum.accumulate(e)
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > running[:-1]
    first = np.flatnonzero(new)
    return s[first], np.maximum.reduceat(e, first)


def covered(
    seg_starts: npt.ArrayLike, seg_ends: npt.ArrayLike, starts: npt.ArrayLike, ends: npt.ArrayLike
) -> npt.NDArray[np.float64]:
    """For each interval ``[start, end)``, how much of it the disjoint sorted
    segments cover."""
    seg_starts_a = np.asarray(seg_starts, dtype=float)
    seg_ends_a = np.asarray(seg_ends, dtype=float)
    starts_a = np.asarray(starts, dtype=float)
    ends_a = np.asarray(ends, dtype=float)
    if len(seg_starts_a) == 0:
        return np.zeros(len(starts_a))
    lengths = seg_ends_a - seg_starts_a
    before = np.concatenate([[0.0], np.cumsum(lengths)])  # covered length before segment i

    def upto(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:  # covered length in (-inf, x]
        i = np.searchsorted(seg_starts_a, x, side="right") - 1
        inside = np.clip(x - seg_starts_a[np.maximum(i, 0)], 0.0, lengths[np.maximum(i, 0)])
        return np.where(i < 0, 0.0, before[np.maximum(i, 0)] + inside)

    return np.maximum(upto(ends_a) - upto(starts_a), 0.0)


def inside(
    seg_starts: npt.NDArray[np.float64], seg_ends: npt.NDArray[np.float64], x: npt.NDArray[np.float64]
) -> npt.NDArray[np.bool_]:
    """Whether each point of ``x`` lies in one of the disjoint sorted segments."""
    if len(seg_starts) == 0:
        return np.zeros(len(x), dtype=bool)
    i = np.searchsorted(seg_starts, x, side="right") - 1
    return (i >= 0) & (x < seg_ends[np.maximum(i, 0)])


def pieces(
    *sets: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The elementary pieces every boundary of the segment sets cuts the line
    into: each piece's midpoint and length (a piece lies wholly inside or
    wholly outside each set)."""
    points = np.unique(np.concatenate([np.concatenate([s, e]) for s, e in sets] or [np.zeros(0)]))
    if len(points) < 2:
        return np.zeros(0), np.zeros(0)
    return (points[:-1] + points[1:]) / 2, np.diff(points)
