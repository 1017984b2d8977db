"""The columnar core's small helpers against plain reference computations."""

from __future__ import annotations

import numpy as np
import pytest

from tracegraph.columns import distinct, first_rows
from tracegraph.db import falkor_bulk
from tracegraph.ingest.hb import stably_by


@pytest.mark.parametrize(
    "codes",
    [
        [],
        [0],
        [3, 1, 3, 3, 0, 1],
        [-1, 2, -1, 5],  # negative: sorted the way np.unique does
        [10**12, 7, 10**12],  # a range far beyond the rows: sorted too
        list(np.random.default_rng(7).integers(0, 50, size=2000)),
    ],
)
def test_distinct_codes_are_numpys_unique(codes):
    c = np.asarray(codes, dtype=np.int64)
    uniq, inverse = distinct(c)
    ref = sorted(set(codes))
    assert uniq.tolist() == ref
    assert inverse.tolist() == [ref.index(x) for x in codes]


def test_first_rows_are_each_groups_first():
    groups = np.asarray([2, 0, 2, 1, 0, 1, 2], dtype=np.int64)
    assert first_rows(groups, 3).tolist() == [1, 3, 0]


def test_thread_pairs_are_numbered_as_sorted_rows():
    """assemble's (pid, tid) numbering: pairs in sorted order, each row's pair, each pair's first row."""
    pid = np.asarray([9, 4, 9, 4, 9, 2**40], dtype=np.int64)
    tid = np.asarray([5, 7, 5, 1, 2**40, 3], dtype=np.int64)
    _, pid_code = np.unique(pid, return_inverse=True)
    tid_values, tid_code = np.unique(tid, return_inverse=True)
    pairs, of = distinct(pid_code * len(tid_values) + tid_code)
    ref = sorted(set(zip(pid.tolist(), tid.tolist())))  # [(4, 1), (4, 7), (9, 5), (9, 2**40), (2**40, 3)]
    assert of.tolist() == [ref.index(p) for p in zip(pid.tolist(), tid.tolist())] == [2, 1, 2, 0, 3, 4]
    assert first_rows(of, len(pairs)).tolist() == [3, 1, 0, 4, 5]


def test_a_blob_is_its_header_then_each_rows_cells_in_column_order():
    rng = np.random.default_rng(3)
    for rows, columns in [(0, 2), (1, 1), (7, 3), (500, 19)]:
        cells = []
        for _ in range(columns):
            widths = rng.choice([1, 9, 17], size=rows)
            offsets = np.zeros(rows + 1, dtype=np.int64)
            np.cumsum(widths, out=offsets[1:])
            cells.append((rng.integers(0, 256, size=int(offsets[-1]), dtype=np.uint8), offsets))
        got = falkor_bulk.blob(b"Op\x00", cells)
        ref = b"Op\x00" + b"".join(
            bytes(data[offsets[i] : offsets[i + 1]]) for i in range(rows) for data, offsets in cells
        )
        assert got == ref


def test_stably_by_is_a_stable_sort_and_two_make_lexsorts_order():
    rng = np.random.default_rng(11)
    for n, m in [(1, 0), (1, 5), (7, 40), (300, 5000)]:
        src, dst = rng.integers(0, n, size=m), rng.integers(0, n, size=m)
        rows = np.arange(m)
        assert stably_by(dst, n, rows).tolist() == np.argsort(dst, kind="stable").tolist()
        # by src, then dst, then row: what the heaviest-path kernel walks edges in
        assert stably_by(src, n, stably_by(dst, n, rows)).tolist() == np.lexsort((rows, dst, src)).tolist()
    # a subset of rows, in the order given among equal keys
    keys = np.array([2, 0, 2, 1, 0])
    assert stably_by(keys, 3, np.array([4, 2, 0, 1])).tolist() == [4, 1, 2, 0]
