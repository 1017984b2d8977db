"""Terminal tables: numbers right-aligned with thousands separators, long
text cut in the middle, the whole table fitted to a terminal's width."""

from __future__ import annotations

from tracegraph.output import render, table


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
