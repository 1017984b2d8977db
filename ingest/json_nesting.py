"""How deeply a JSON text nests, found without recursing.

The C JSON decoders (msgspec's, the standard library's) recurse once per
level of nesting and stop at the interpreter's recursion limit. On Python
3.11 that limit is also their only guard for the C stack: a process that
raised it (``sys.setrecursionlimit(100_000)``, as recursive code, notebooks
and some libraries do) lets ``[[[[...`` a hundred thousand levels deep
overflow the stack, and the process dies with a segmentation fault instead
of a one-line refusal. So a trace's JSON is measured here first, in numpy,
a block at a time, and anything nested deeper than :data:`MAX_DEPTH` is
refused before a decoder sees it.

Brackets inside strings do not count: a string starts and ends at a ``"``
not escaped, and a ``"`` is escaped when an odd run of backslashes comes
right before it. Invalid JSON gets a depth too (the decoder then refuses it
for what it is).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from tracegraph.errors import InputError

# No trace needs more: an event is 2 levels deep in its file and its args a
# few more. Far below what a decoder reaches on any stack.
MAX_DEPTH = 512

# Python's default recursion limit is 1,000; at a few times that the C
# decoders still stay well inside an 8 MiB stack.
GUARDED_RECURSION_LIMIT = 4000

# Bytes measured at a time: bounds the scan's own memory (a few index arrays
# of a block's special bytes) whatever the file's size.
_BLOCK = 16 * 1024 * 1024

_BACKSLASH = ord("\\")
# Each byte's kind: 0 for the bytes that do not matter.
_IS_QUOTE, _IS_BACKSLASH, _IS_OPEN, _IS_CLOSE = 1, 2, 3, 4
_KIND = np.zeros(256, dtype=np.uint8)
_KIND[ord('"')] = _IS_QUOTE
_KIND[_BACKSLASH] = _IS_BACKSLASH
_KIND[[ord("["), ord("{")]] = _IS_OPEN
_KIND[[ord("]"), ord("}")]] = _IS_CLOSE


def deepest(text: bytes | bytearray) -> int:
    """The greatest nesting depth of ``[``/``{`` outside strings in text."""
    data = np.frombuffer(text, dtype=np.uint8)
    depth, deepest_so_far, in_string = 0, 0, False
    start = 0
    while start < len(data):
        end = min(start + _BLOCK, len(data))
        # A block never ends inside a run of backslashes, so that whether
        # its last quote is escaped is decided within it.
        while end < len(data) and data[end - 1] == _BACKSLASH:
            end += 1
        depth, block_deepest, in_string = _scan(data[start:end], depth, in_string)
        deepest_so_far = max(deepest_so_far, block_deepest)
        start = end
    return deepest_so_far


def check(path: Path, text: bytes | bytearray, limit: int = MAX_DEPTH) -> None:
    """Refuse, in one line naming the file, JSON nested deeper than limit."""
    if deepest(text) > limit:
        raise InputError(path, f"JSON nested too deeply (more than {limit} levels of arrays and objects)")


def stack_unguarded() -> bool:
    """Whether a C decoder's recursion could outrun the C stack here: on
    Python 3.11 when the recursion limit was raised past
    :data:`GUARDED_RECURSION_LIMIT`. (Python 3.12 keeps a C recursion limit
    of its own, whatever ``sys.setrecursionlimit`` says.) Readers whose
    decode is the hot path measure nesting only then."""
    return sys.version_info < (3, 12) and sys.getrecursionlimit() > GUARDED_RECURSION_LIMIT


def _scan(block: np.ndarray, depth: int, in_string: bool) -> tuple[int, int, bool]:
    """(depth at the block's end, the block's deepest depth, whether it ends
    inside a string), given the depth and string state at its start."""
    kinds = _KIND[block]
    at = np.flatnonzero(kinds)  # the special bytes, in file order
    kind = kinds[at]
    quotes = at[kind == _IS_QUOTE]
    backslashes = at[kind == _IS_BACKSLASH]
    real = np.ones(len(quotes), dtype=bool) if not len(backslashes) else ~_escaped(quotes, backslashes)
    quotes_after = in_string ^ bool(np.count_nonzero(real) % 2)
    bracket = (kind == _IS_OPEN) | (kind == _IS_CLOSE)
    if not bracket.any():
        return depth, depth, quotes_after
    # A bracket is outside strings when an even number of real quotes (odd
    # when the block starts inside a string) come before it.
    real_quote = np.zeros(len(at), dtype=np.int64)
    real_quote[kind == _IS_QUOTE] = real
    quotes_before = np.cumsum(real_quote)[bracket]
    outside = (quotes_before % 2 == 0) != in_string
    steps = np.where(kind[bracket] == _IS_OPEN, 1, -1) * outside
    levels = depth + np.cumsum(steps)
    return int(levels[-1]), max(depth, int(levels.max())), quotes_after


def _escaped(quotes: np.ndarray, backslashes: np.ndarray) -> np.ndarray:
    """For each quote, whether an odd run of backslashes ends right before it."""
    # Each backslash's place in its run (0 for a run's first): a run starts
    # where a backslash does not follow another.
    starts = np.ones(len(backslashes), dtype=bool)
    starts[1:] = backslashes[1:] != backslashes[:-1] + 1
    run_start = np.maximum.accumulate(np.where(starts, np.arange(len(backslashes)), 0))
    place = np.arange(len(backslashes)) - run_start
    # A run ending at a backslash of even place (0, 2, ...) is odd long.
    odd_ends = backslashes[place % 2 == 0]
    at = np.searchsorted(odd_ends, quotes - 1)
    found = at < len(odd_ends)
    hit = np.zeros(len(quotes), dtype=bool)
    hit[found] = odd_ends[at[found]] == quotes[found] - 1
    # The backslash must end its run: the run's last one is right before
    # the quote by construction (quotes are not backslashes).
    return hit
