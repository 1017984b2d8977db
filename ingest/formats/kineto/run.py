"""The rank files of one job: checking that they are one run, and
numbering their ranks (:mod:`.trace`'s rules)."""

from __future__ import annotations

import hashlib
import itertools
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracegraph.errors import InputError
from tracegraph.ingest.formats.kineto import read as kineto_read

if TYPE_CHECKING:
    from tracegraph.ingest.formats.kineto.rank import RankPart


# Rank files whose events are further apart than this (and than the longest
# file's span) are of different runs (ns).
OTHER_RUN_GAP_NS = 10**9


def check_one_run(parts: list[RankPart]) -> None:
    """Files ingested as one trace must be the ranks of one run: refused,
    a file whose events another file without a rank of its own also holds
    (the same trace twice, e.g. ``x.json`` beside ``x.json.gz``), and a file
    of another run: its events more than :data:`OTHER_RUN_GAP_NS` and more
    than the longest file's span away from every other file's (a job's
    ranks are profiled at once; machines' clocks may differ, by less)."""
    if len(parts) < 2:
        return
    seen: dict[bytes, Path] = {}
    spans: list[tuple[int, int] | None] = []
    for p in parts:
        times = [t for t in (p.op_times, p.kernel_times) if len(t)]
        spans.append(
            (min(int(t[:, 0].min()) for t in times), max(int(t[:, 1].max()) for t in times)) if times else None
        )
        if p.named or not times:
            continue
        key = hashlib.sha256(b"".join(t.tobytes() for t in (p.op_times, p.kernel_times))).digest()
        if key in seen:
            raise InputError(p.path, f"the same events as {seen[key]}: one trace given twice")
        seen[key] = p.path
    present = [x for x in spans if x is not None]
    apart = max(OTHER_RUN_GAP_NS, max(b - a for a, b in present))
    for i, span in enumerate(spans):
        others = [o for j, o in enumerate(spans) if j != i and o is not None]
        if span is None or not others:
            continue
        gap = min(max(0, a - span[1], span[0] - b) for a, b in others)
        if gap > apart:
            raise InputError(
                parts[i].path,
                f"its events are {gap / 1e9:,.1f} s away from the other files': not a rank of the same run "
                "(files ingested together are one job's ranks; ingest it as a trace of its own)",
            )


def header_rank(path: Path) -> int | None:
    """``distributedInfo.rank`` when the file gives it before its events."""
    return info_rank(kineto_read.read_header(path))


def info_rank(header: dict[str, Any]) -> int | None:
    """The rank a file's ``distributedInfo`` names, if it names one."""
    info = header.get("distributedInfo")
    rank = info.get("rank") if isinstance(info, dict) else None
    return rank if isinstance(rank, int) and not isinstance(rank, bool) else None


def numbering(paths: list[Path], named: list[int | None]) -> list[int]:
    """Every file's rank: the one it names, else the lowest rank no file
    names, in file order. A rank named twice is an error."""
    seen: dict[int, Path] = {}
    for path, rank in zip(paths, named, strict=True):
        if rank is None:
            continue
        if rank in seen:
            raise InputError(path, f"rank {rank} given twice (also {seen[rank]})", "distributedInfo.rank")
        seen[rank] = path
    free = (n for n in itertools.count() if n not in seen)
    return [rank if rank is not None else next(free) for rank in named]
