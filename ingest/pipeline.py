"""Files in, stored trace out: detect -> parse -> merge -> enrich -> store.

Everything that can fail on the input (reading, parsing, checking the
frames, enrichment) happens before the first write; the write itself is
the engine's atomic :meth:`~tracegraph.db.base.Graph.store_trace`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tracegraph.db.base import Graph, check_trace_name
from tracegraph.errors import InputError, UnknownFormat, UserError
from tracegraph.ingest import formats
from tracegraph.ingest.enrich import enrich
from tracegraph.ingest.frames import TraceFrames
from tracegraph.ingest.graph_tables import trace_tables

SNIFF_BYTES = 65536


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # parse_files names the file and the problem


@dataclass
class IngestReport:
    trace: str
    counts: dict
    timings: dict = field(default_factory=dict)


def detect(path: Path) -> str:
    """The format of ``path`` from its content (first 64 KiB)."""
    try:
        with open(path, "rb") as f:
            head = f.read(SNIFF_BYTES)
    except OSError as e:
        raise InputError(path, f"cannot read: {e.strerror}") from None
    if not head.strip():
        raise InputError(path, "empty file")
    for name in formats.names():
        if formats.get(name).sniff(head):
            return name
    raise UnknownFormat(path, f"unrecognized format (supported: {', '.join(formats.names())})")


def parse_files(paths: list[Path], fmt: str = "auto") -> TraceFrames:
    """One trace from one or more files.

    Several files make one trace when exactly one of them is a primary
    format and the others add detail to it (a TF op listing joined to a
    StepStats file by node name), or when they are all of a format whose
    module reads several files as one run (``parse_many``: the rank files
    of a distributed PyTorch job).
    """
    if not paths:
        raise UserError("no input files")
    if fmt != "auto" and fmt not in formats.names():
        raise UserError(f"unknown format {fmt!r} (supported: auto, {', '.join(formats.names())})")
    named = []
    for p in paths:
        p = Path(p)
        if not p.is_file():
            raise InputError(p, "no such file")
        named.append((detect(p) if fmt == "auto" else fmt, p))
    # Formats whose files are parts of one run (PyTorch ranks) read them together.
    kinds = {n for n, _ in named}
    if len(named) > 1 and len(kinds) == 1 and hasattr(formats.get(named[0][0]), "parse_many"):
        return formats.get(named[0][0]).parse_many([p for _, p in named])
    parsed = [(name, p, formats.get(name).parse(p)) for name, p in named]
    if len(parsed) == 1:
        return parsed[0][2]
    primary = [x for x in parsed if not hasattr(formats.get(x[0]), "merge")]
    extras = [x for x in parsed if hasattr(formats.get(x[0]), "merge")]
    if len(primary) > 1:
        raise UserError("one trace can hold only one timed profile; got " + ", ".join(f"{p} ({n})" for n, p, _ in primary))
    if not primary:
        primary, extras = extras[:1], extras[1:]
    base = primary[0][2]
    for name, _, tf in extras:
        base = formats.get(name).merge(base, tf)
    return base


# What a long ingest reports as it goes: (phase, done, total) with phase
# ``parse`` (bytes of the input files read; total None when unknown),
# ``enrich`` (0 of 1, then 1 of 1) or ``write`` (graph elements written).
PhaseProgress = Callable[[str, int, "int | None"], None]


def ingest(graph: Graph, paths: list[Path], trace: str, *, fmt: str = "auto",
           replace: bool = False, progress: PhaseProgress | None = None,
           source_names: dict[str, str] | None = None) -> IngestReport:
    """Parse and validate everything first; only then write, atomically.

    ``source_names`` maps a path to the name the trace should record for it
    (an upload's file name instead of its temporary path)."""
    check_trace_name(trace)
    report: PhaseProgress = progress or (lambda phase, done, total: None)
    t0 = time.perf_counter()
    sizes = [_size(Path(p)) for p in paths]
    report("parse", 0, sum(sizes))
    tf = parse_files([Path(p) for p in paths], fmt)
    report("parse", sum(sizes), sum(sizes))
    if source_names:
        tf.sources = [source_names.get(str(s), str(s)) for s in tf.sources]
    t1 = time.perf_counter()
    report("enrich", 0, 1)
    summary = enrich(tf)
    tables = trace_tables(tf, summary)
    report("enrich", 1, 1)
    t2 = time.perf_counter()
    counts = graph.store_trace(trace, tables, replace=replace,
                               progress=lambda done, total: report("write", done, total))
    t3 = time.perf_counter()
    return IngestReport(trace=trace, counts=counts,
                        timings={"parse_s": t1 - t0, "enrich_s": t2 - t1, "load_s": t3 - t2, "total_s": t3 - t0})
