"""Bad input for the parsers' tests: random edits of a file's lines,
random bytes, and the check that a refusal is one line naming the file
and the place.

Each parser must turn any of these into either a correct trace or a
one-line error; the tests that use them say which outcome they check.
"""

from __future__ import annotations

import os
import random
import re
from collections.abc import Callable
from pathlib import Path

from tracegraph.errors import InputError
from tracegraph.ingest.frames import TraceFrames

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
            out[a] = out[a][:b] + rng.choice("0123456789-x ") + out[a][b + 1 :]
    elif edit == "respace":
        out[j] = out[j].replace(": ", ":  ", 1)
    else:
        raise ValueError(f"unknown edit {edit!r}")
    return out


def garbage(seed: int, size: int) -> bytes:
    """``size`` random bytes, repeatable per seed; seed 0: fresh ones, a
    tenth of the size."""
    return random.Random(seed).randbytes(size) if seed else os.urandom(max(1, size // 10))


def parse_or_error(
    parse: Callable[[Path], TraceFrames], path: Path, place: str = r"\(line \d+\)", *, or_empty: bool = False
) -> TraceFrames | None:
    """The frames ``parse`` reads from ``path``, checked; or None after
    checking that its InputError is one line starting with the file's path
    and naming the place (``place``, a regular expression), or, with
    ``or_empty``, saying that the file is empty."""
    try:
        frames = parse(path)
    except InputError as exc:
        message = str(exc)
        assert "\n" not in message and message.startswith(str(path)), message
        assert re.search(place, message) or (or_empty and message.endswith("empty file")), message
        return None
    frames.check()
    return frames
