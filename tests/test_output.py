"""Terminal tables: numbers right-aligned with thousands separators, long
text cut in the middle, the whole table fitted to a terminal's width; and
the values every front end is given (plain JSON)."""

from __future__ import annotations

import dataclasses
import enum
import math

import numpy as np

from tracegraph.db.elements import plain
from tracegraph.output import jsonable, readable, render, table


def test_numbers_right_aligned_with_separators():
    out = table(["op", "dur_us"], [["a", 1234567.0], ["bb", 12]]).splitlines()
    assert out == ["op  dur_us", "--  ---------", "a   1,234,567", "bb         12"]


def test_long_text_is_cut_in_the_middle():
    name = "gradients/conv4/Conv2D_grad/Conv2DBackpropFilter/" + "x" * 40 + "/tail"
    (_, _, row) = table(["op"], [[name]]).splitlines()
    assert len(row) == 60 and row.startswith("gradients/conv4/") and row.endswith("xxxx/tail")
    assert "\u2026" in row


def test_fits_the_terminal_width_shrinking_text_not_numbers():
    rows = [["a" * 50, "b" * 40, 123456789], ["short", "x", 1]]
    out = render(["name", "other", "bytes"], rows, "table", width=60).splitlines()
    assert max(len(line) for line in out) <= 60
    assert out[2].endswith("123,456,789") and out[3].endswith("1")
    # Untouched without a width (a pipe): whole cells up to 60 characters.
    assert "a" * 50 in render(["name", "other", "bytes"], rows, "table")


class _Level(enum.IntEnum):
    HIGH = 2


@dataclasses.dataclass
class _Point:
    t_us: float
    name: str


def test_jsonable_values_by_hand():
    """Each kind of value a row may hold, plain scalars first (by their exact type) and the rest after."""
    row = [1, 2.5, "a", None, True, math.nan, -math.inf, [1.0, math.inf, ["x"]], {"k": math.nan}, (3, 4)]
    assert jsonable(row) == [1, 2.5, "a", None, True, None, None, [1.0, None, ["x"]], {"k": None}, [3, 4]]
    assert jsonable([_Level.HIGH, np.int64(7), np.float64("nan"), _Point(1.5, "p"), b"\xffz"]) == [
        2,
        7,
        None,
        {"t_us": 1.5, "name": "p"},
        "\ufffdz",
    ]
    assert type(jsonable(_Level.HIGH)) is _Level  # (an int of another type is still that int)


def test_readable_and_plain_leave_scalars_as_they_are():
    for v in (7, "7", True, None, _Level.HIGH):
        assert readable(v) is v
        assert plain(v, lambda x: None) is v
    assert readable(0.1 + 0.2) == 0.3
    assert plain([1, {"a": [2.0]}], lambda x: None) == [1, {"a": [2.0]}]
