"""Memory counters of a Chrome trace as allocations.

A counter event (``"ph": "C"``) gives the values of one or more named
series at a time: ``{"name": "GPU memory", "args": {"bytes_in_use":
1048576}}``. A series that counts memory (its counter's or key's name
says so: ``mem``, ``bytes``, ``alloc``, ``heap``) is the live bytes of an
allocator over time, and tracegraph's memory analyses read allocations. So
each memory series becomes the allocations whose live bytes it is: a rise
is an allocation of the difference at that time; a fall frees the most
recent allocations first (the last one split when the fall is smaller),
so the allocator's timeline is the counter's, value for value. The first
value is an allocation at its time (memory already in use). Allocations
still live at the last value are not freed within the trace.

Series whose values are not non-negative numbers, or whose names do not
say memory, are not memory; the caller counts them as skipped.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

MEMORY_SERIES = re.compile(r"mem|bytes|alloc|heap", re.IGNORECASE)


@dataclass(frozen=True)
class Sample:
    """One value of one series: a counter event's arg."""

    pid: Any
    counter: str
    key: str
    t: int  # ns
    value: Any


@dataclass(frozen=True)
class Block:
    """An allocation made from a series: bytes live from alloc to free (ns; free None: live at the end)."""

    bytes: int
    alloc: int
    free: int | None


def series(samples: list[Sample]) -> dict[tuple[Any, str, str], list[Sample]]:
    """The samples per series (pid, counter, key), in time order (file order on ties)."""
    out: dict[tuple[Any, str, str], list[Sample]] = defaultdict(list)
    for s in samples:
        out[(s.pid, s.counter, s.key)].append(s)
    for values in out.values():
        values.sort(key=lambda s: s.t)
    return dict(out)


def is_memory(counter: str, key: str, values: list[Sample]) -> bool:
    """Whether a series is an allocator's live bytes (see the module docstring)."""
    if not MEMORY_SERIES.search(f"{counter} {key}"):
        return False
    return all(isinstance(s.value, int | Decimal) and not isinstance(s.value, bool) and s.value >= 0 for s in values)


def blocks(values: list[Sample]) -> list[Block]:
    """The allocations whose live bytes are the series' values."""
    live: list[list[int]] = []  # [bytes, alloc], most recent last
    done: list[Block] = []
    level = 0
    for s in values:
        value = int(s.value)
        if value > level:
            live.append([value - level, s.t])
        fall = level - value
        while fall > 0:
            size, alloc = live[-1]
            if size <= fall:
                live.pop()
                done.append(Block(size, alloc, s.t))
                fall -= size
            else:
                live[-1][0] = size - fall
                done.append(Block(fall, alloc, s.t))
                fall = 0
        level = value
    return done + [Block(size, alloc, None) for size, alloc in live]
