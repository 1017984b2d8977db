"""Freed memory handed back to the system between an ingest's phases.

A phase (reading a file, enriching, a rank's write) frees its temporary
arrays when it ends, but the C allocator (glibc's) keeps much of what was
freed in its heaps for reuse instead of returning it; the next phase's
arrays do not always fit there, so the process's resident size, the peak
people see, is the next phase's on top of the last one's leftovers. One
:func:`trim` between phases returns those pages: on a 112 MB trace the
client's peak fell from 402-424 MB to 396-401 MB (bench/RESULTS.md), for a
few milliseconds.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable


def trim() -> None:
    """Return the C heap's free pages to the system (glibc; elsewhere nothing)."""
    release = _malloc_trim()
    if release is not None:
        release(0)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim among the symbols this process has loaded (not
    ``ctypes.util.find_library``: it runs ``ldconfig`` in a child process,
    a fork of this one with all its memory)."""
    try:
        fn: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError, TypeError):
        return None  # not glibc (macOS, musl): their allocators return memory their own way
    return fn
