"""The compiler's code pages handed back once the kernels it loads are in.

tracegraph's kernels are compiled by numba, whose compiler is LLVM: one
178 MB shared library (llvmlite's). Importing numba runs its static
initializers, and loading a kernel (from numba's on-disk cache) runs its
bitcode reader and linker, which together touch about 90 MB of that
library's code and read-only data. Those pages stay in the process's
resident set for the rest of the run, though nothing runs them until the
next kernel loads: on an 8-rank job they were a third of the client's
peak.

:func:`release` unmaps them (``madvise(MADV_DONTNEED)``) after every
kernel load: they are clean, file-backed pages, so they stay in the
system's file cache and the next load faults back the few it needs from
memory, not disk (about 1 ms a load). Only mappings that cannot hold
anything but the file's own bytes are touched: not writable, and no
page dirtied, copied or swapped out (a library's relocated read-only
data is such a copy and is left alone; see :func:`clean_mappings`).
Elsewhere than Linux nothing is done.
"""

from __future__ import annotations

import ctypes
import functools
import mmap
import sys
import threading
from collections.abc import Callable
from pathlib import Path

_MADV_DONTNEED = 4  # Linux
_lock = threading.Lock()


def release() -> None:
    """Unmap the compiler library's clean pages from this process (see the module docstring)."""
    advise = _madvise()
    if advise is None:
        return
    with _lock:
        for start, length in _clean_ranges():
            advise(start, length, _MADV_DONTNEED)


def release_after_each_load() -> None:
    """Call :func:`release` now and whenever numba lets go of its compiler
    lock, i.e. after every kernel it compiles or loads from its cache."""
    _listen()
    release()


@functools.cache
def _listen() -> None:
    from numba.core import event

    held = threading.local()  # this thread's depth in the (re-entrant) lock

    class _Released(event.Listener):
        """Numba announces every nested taking of its lock (a load takes it
        hundreds of times): release only when the outermost one ends, not
        in the middle of a load that is still running LLVM's code."""

        def on_start(self, event: event.Event) -> None:
            held.depth = getattr(held, "depth", 0) + 1

        def on_end(self, event: event.Event) -> None:
            held.depth = getattr(held, "depth", 1) - 1
            if held.depth <= 0:
                release()

    event.register("numba:compiler_lock", _Released())  # type: ignore[no-untyped-call]


@functools.cache
def _madvise() -> Callable[[int, int, int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


@functools.cache
def _clean_ranges() -> tuple[tuple[int, int], ...]:
    """The (start, length) of llvmlite's mappings that are read-only and
    clean, read once from ``/proc/self/smaps`` (the library, once loaded,
    stays where it is; a mapping that cannot be written stays clean)."""
    try:
        import llvmlite
    except ImportError:
        return ()
    return tuple(clean_mappings(Path(llvmlite.__file__).parent))


def clean_mappings(under: Path, smaps: str = "/proc/self/smaps") -> list[tuple[int, int]]:
    """The (start, length) of the file mappings of files under ``under``
    that are not writable and hold nothing but the file's bytes: no dirty
    page, no anonymous (copied-on-write) page, none swapped out (a
    relocated page, once swapped back in, can look clean). Such a mapping
    stays so: without write permission nothing copies its pages again
    (short of a debugger's breakpoints)."""
    prefix = str(under.resolve()) + "/"
    found: list[list[int]] = []  # start, length, kB not the file's own (dirty, anonymous, swapped)
    current: list[int] | None = None
    try:
        with open(smaps, encoding="utf-8", errors="replace") as f:
            for line in f:
                head = line.split(maxsplit=5)
                if len(head) >= 5 and "-" in head[0] and len(head[1]) == 4 and not line[0].isupper():
                    current = None
                    path = head[5].strip() if len(head) == 6 else ""
                    if path.startswith(prefix) and "w" not in head[1]:
                        lo, hi = (int(x, 16) for x in head[0].split("-"))
                        current = [lo, hi - lo, 0]
                        found.append(current)
                elif current is not None and line.startswith(
                    ("Private_Dirty:", "Shared_Dirty:", "Anonymous:", "Swap:")
                ):
                    current[2] += int(line.split()[1])
    except OSError:
        return []
    return [(lo, n) for lo, n, other in found if other == 0 and lo % mmap.PAGESIZE == 0]
