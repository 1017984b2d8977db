"""Random edits of a text file's lines, for the parsers' bad-input tests.

Each parser must turn any of these into either a correct trace or a
one-line error; the tests that use them say which outcome they check.
"""

from __future__ import annotations

import random

EDITS = ("delete", "duplicate", "swap", "digit", "respace")


def mutate(lines: list[str], rng: random.Random, edit: str) -> list[str]:
    """A copy of ``lines`` with one ``edit`` at places ``rng`` picks: delete a
    line, duplicate one, swap two, change one digit (to another digit, a
    sign, a letter or a space), or double the space after a line's first
    ``:``. An edit with nothing to change (no digit, no ``: ``) changes
    nothing."""
    out = list(lines)
    j, k = rng.randrange(len(out)), rng.randrange(len(out))
    if edit == "delete":
        del out[j]
    elif edit == "duplicate":
        out.insert(j, out[k])
    elif edit == "swap":
        out[j], out[k] = out[k], out[j]
    elif edit == "digit":
        spots = [(a, b) for a, line in enumerate(out) for b, ch in enumerate(line) if ch.isdigit()]
        if spots:
            a, b = rng.choice(spots)
            out[a] = out[a][:b] + rng.choice("0123456789-x ") + out[a][b + 1:]
    elif edit == "respace":
        out[j] = out[j].replace(": ", ":  ", 1)
    else:
        raise ValueError(f"unknown edit {edit!r}")
    return out
