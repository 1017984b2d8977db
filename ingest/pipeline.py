"""Files in, stored trace out: detect -> parse -> merge -> check -> enrich -> store.

Everything that can fail on the input (reading, parsing, checking the
frames, enrichment) happens before the first write (:func:`prepare`, which
needs no database); the write itself is the engine's atomic
:meth:`~tracegraph.db.base.Graph.store_trace` (:func:`store`).
"""

from __future__ import annotations

import contextlib
import gc
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from tracegraph.db.base import Graph, TraceTables, check_trace_name
from tracegraph.errors import DependencyCycle, InputError, UnknownFormat, UserError
from tracegraph.ingest import formats, heap, source
from tracegraph.ingest.columnar import ColumnarTrace, from_frames, to_frames, write_back
from tracegraph.ingest.enrich import check_acyclic, whole
from tracegraph.ingest.formats.kit import Joins
from tracegraph.ingest.frames import TraceFrames
from tracegraph.ingest.graph_tables import trace_tables
from tracegraph.ingest.job import PreparedJob, Ranks, prepare_job, store_job
from tracegraph.ingest.step_marker import check_marker


@dataclass
class IngestReport:
    trace: str
    counts: dict[str, dict[str, int]]
    timings: dict[str, float] = field(default_factory=dict)
    trace_props: dict[str, Any] = field(default_factory=dict)


@dataclass
class Prepared:
    """A trace parsed, checked and enriched (``tables``), or a job of rank
    files surveyed and planned to be written rank by rank (``job``, see
    :mod:`.job`): everything that can fail on the input, before the write."""

    trace: str
    tables: TraceTables | None = None
    timings: dict[str, float] = field(default_factory=dict)
    job: PreparedJob | None = None


def detect(path: Path) -> str:
    """The format of ``path`` from its content (its first SNIFF_BYTES)."""
    head = source.head(path)
    if not head.strip():
        raise InputError(path, "empty file")
    content = source.unzipped_head(head)  # (a gzipped file is sniffed by its content)
    for name in formats.names():
        if formats.get(name).sniff(content):
            return name
    if head[:2] == b"\x1f\x8b":
        what = "gzip-compressed data of no supported format"
    else:
        what = "binary content of no supported format" if b"\0" in head else "unrecognized format"
    raise UnknownFormat(path, f"{what} (supported: {', '.join(formats.names())})")


def expand(paths: list[Path]) -> tuple[list[Path], list[Path]]:
    """The files ``paths`` name, and the directories among them.

    A directory stands for the files directly in it, sorted by name;
    hidden files (``.name``) and subdirectories are skipped. A path that is
    neither a file nor a directory is an InputError."""
    files: list[Path] = []
    folders: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            try:
                inside = sorted(
                    (c for c in p.iterdir() if not c.name.startswith(".") and c.is_file()), key=lambda c: c.name
                )
            except OSError as e:
                raise InputError(p, f"cannot read directory: {e.strerror or e}") from None
            if not inside:
                raise InputError(p, "directory has no trace files (hidden files and subdirectories are skipped)")
            folders.append(p)
            files.extend(inside)
        elif p.is_file():
            files.append(p)
        elif p.exists():
            raise InputError(p, "not a regular file")
        else:
            raise InputError(p, "no such file or directory")
    return files, folders


def _not_one_trace(named: list[tuple[str, Path]]) -> str | None:
    """Why files of these formats cannot make one trace, or None when they
    can: one file; files of a format that reads several as one run; or at
    most one primary format (or one run of it) plus formats that add
    detail to it."""
    if len(named) <= 1:
        return None
    primary = [(n, p) for n, p in named if formats.joins(n) is not Joins.DETAIL]
    if len({n for n, _ in primary}) == 1 and formats.joins(primary[0][0]) is Joins.RUN:
        return None
    if len(primary) > 1:
        return "one trace can hold only one timed profile; got " + ", ".join(f"{p} ({n})" for n, p in primary)
    return None


# How many files a directory's refusal lists at most.
_LISTED = 20


def _detect_all(files: list[Path], folders: list[Path], fmt: str) -> list[tuple[str, Path]]:
    """Each file's format; when directories were given and their files do
    not form one trace, one InputError listing the files and their formats."""
    named: list[tuple[str, Path]] = []
    found: list[str] = []
    unreadable = False
    for p in files:
        try:
            kind = detect(p) if fmt == "auto" else fmt
        except InputError as e:
            if not folders:
                raise
            unreadable = True
            found.append(f"{p.name} ({'unrecognized' if isinstance(e, UnknownFormat) else e.what})")
            continue
        named.append((kind, p))
        found.append(f"{p.name} ({kind})")
    reason = _not_one_trace(named)
    if folders and (unreadable or reason):
        why = "some are no trace" if unreadable else "more than one timed profile"
        listed = found[:_LISTED] + ([f"and {len(found) - _LISTED} more"] if len(found) > _LISTED else [])
        raise InputError(
            ", ".join(str(f) for f in folders),
            f"its files do not form one trace ({why}; name the files to use): " + "; ".join(listed),
        )
    if reason:
        raise UserError(reason)
    return named


def parse_files(paths: list[Path], fmt: str = "auto") -> TraceFrames:
    """:func:`parse_columns` as the frames of :mod:`.frames`."""
    ct = parse_columns(paths, fmt)
    return ct if isinstance(ct, TraceFrames) else to_frames(ct)


def parse_columns(paths: list[Path], fmt: str = "auto") -> ColumnarTrace | TraceFrames:
    """One trace from one or more files (a directory stands for its files,
    see :func:`expand`).

    Several files make one trace when exactly one of them is a primary
    format and the others add detail to it (a TF op listing joined to a
    StepStats file by node name), or when they are all of a format whose
    module reads several files as one run (``parse_many``: the rank files
    of a distributed PyTorch job). The result's dependencies are checked
    to have no cycle (:func:`~tracegraph.ingest.enrich.check_acyclic`).
    """
    return _parse_expanded(*expand(paths), fmt)


def _job_files(files: list[Path], folders: list[Path], fmt: str) -> list[Path] | None:
    """The files, when they are a job's rank files to be written rank by rank
    (two or more of a format that reads its runs so, nothing else); else None."""
    if len(files) < 2 or (fmt != "auto" and fmt not in formats.names()):
        return None
    named = _detect_all(files, folders, fmt)
    kinds = {n for n, _ in named}
    if len(kinds) != 1 or formats.joins(next(iter(kinds))) is not Joins.RUN:
        return None
    if not hasattr(formats.get(next(iter(kinds))), "read_job") or os.environ.get(STREAM_ENV, "1") == "0":
        return None
    return [p for _, p in named]


# Set to 0, a job's rank files are read and written as one trace held whole
# (the previous way; for comparisons).
STREAM_ENV = "TRACEGRAPH_STREAM_JOBS"


def _parse_expanded(files: list[Path], folders: list[Path], fmt: str) -> ColumnarTrace | TraceFrames:
    """The trace as columns when its format reads them so (a run's files
    and no detail files), else as frames (checked to have no cycle)."""
    if not files:
        raise UserError("no input files")
    if fmt != "auto" and fmt not in formats.names():
        raise UserError(f"unknown format {fmt!r} (supported: auto, {', '.join(formats.names())})")
    named = _detect_all(files, folders, fmt)
    tf = _parse_named(named)
    if isinstance(tf, TraceFrames):
        try:
            check_acyclic(tf)
        except DependencyCycle as e:
            raise InputError(", ".join(tf.sources), str(e)) from None
    return tf


def _parse_named(named: list[tuple[str, Path]]) -> ColumnarTrace | TraceFrames:
    """The primary files parsed (a run's files together), then each detail
    file parsed and merged into them; detail files alone: the first is the
    primary."""
    primary = [(n, p) for n, p in named if formats.joins(n) is not Joins.DETAIL]
    details = [(n, p) for n, p in named if formats.joins(n) is Joins.DETAIL]
    if not primary:
        primary, details = details[:1], details[1:]
    name = primary[0][0]
    module = formats.get(name)
    if not details and hasattr(module, "read_job"):  # a format that reads its files as columns
        job: ColumnarTrace = module.read_job([p for _, p in primary])
        return job
    if len(primary) > 1:  # parts of one run (checked by _not_one_trace)
        base = cast(formats.RunFormat, module).parse_many([p for _, p in primary])
    else:
        base = module.parse(primary[0][1])
    for detail, path in details:
        base = cast(formats.DetailFormat, formats.get(detail)).merge(base, formats.get(detail).parse(path))
    return base


# What a long ingest reports as it goes: (phase, done, total) with phase
# ``parse`` (bytes of the input files read; total None when unknown),
# ``enrich`` (0 of 1, then 1 of 1) or ``write`` (graph elements written).
PhaseProgress = Callable[[str, int, "int | None"], None]


def _silent(phase: str, done: int, total: int | None) -> None:
    pass


def prepare(
    paths: list[Path],
    trace: str,
    *,
    fmt: str = "auto",
    source_names: dict[str, str] | None = None,
    progress: PhaseProgress | None = None,
    ranks: Ranks | None = None,
    step_marker: str | None = None,
) -> Prepared:
    """Parse, check and enrich: everything that can fail on the input, no
    database needed.

    ``source_names`` maps a path to the name the trace should record for it
    (an upload's file name instead of its temporary path). ``ranks``: where
    a job's ranks are worked (a cluster: :mod:`.cluster`); only a job of
    rank files can be spread so. ``step_marker``: a regular expression
    naming the ops that mark steps (:mod:`.steps`; default: the known
    markers), kept on the Trace as ``meta_step_marker``."""
    check_trace_name(trace)
    if step_marker is not None:
        check_marker(step_marker)
    report = progress or _silent
    t0 = time.perf_counter()
    files, folders = expand([Path(p) for p in paths])
    run = _job_files(files, folders, fmt)
    if run is not None:  # a job's rank files: written rank by rank
        with collector_paused():
            job = prepare_job(run, [(source_names or {}).get(str(p), str(p)) for p in run], report, ranks)
        if step_marker is not None:
            job.plan.meta["step_marker"] = step_marker
            for rp in job.plan.ranks:
                rp.step_marker = step_marker
        return Prepared(trace, None, dict(job.timings, enrich_s=0.0), job)
    if ranks is not None:
        raise UserError("a cluster works the rank files of a PyTorch profiler (Kineto) job; these files are not one")
    sizes = sum(source.size(f) for f in files)
    report("parse", 0, sizes)
    with collector_paused():
        parsed = _parse_expanded(files, folders, fmt)
        report("parse", sizes, sizes)
        dag = parsed.dag if isinstance(parsed, TraceFrames) else None
        ct = from_frames(parsed) if isinstance(parsed, TraceFrames) else parsed
        del parsed
        heap.trim()  # (what reading the files left freed: see heap)
        if source_names:
            ct.sources = [source_names.get(str(s), str(s)) for s in ct.sources]
        if step_marker is not None:
            ct.meta["step_marker"] = step_marker
        t1 = time.perf_counter()
        report("enrich", 0, 1)
        props = whole(ct, dag)
        heap.trim()
        tables = trace_tables(ct, props)
    report("enrich", 1, 1)
    t2 = time.perf_counter()
    return Prepared(trace, tables, {"parse_s": t1 - t0, "enrich_s": t2 - t1})


def tables_of(tf: TraceFrames) -> TraceTables:
    """The tables a loader writes for parsed frames: enriched and laid out
    (what :func:`prepare` does after parsing); ``tf`` gets enrichment's
    columns too."""
    ct = from_frames(tf)
    props = whole(ct, tf.dag)
    write_back(ct, tf)
    return trace_tables(ct, props)


_paused = 0  # ingests preparing now
_was_on = True  # whether the collector was on when the first of them began
_paused_lock = threading.Lock()


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while a trace is parsed and
    enriched (for every ingest at once in this process, back on when the
    last one ends).

    A parser keeps millions of small lists and dicts alive, and the
    collector's full passes walk all of them again and again: on 8 rank
    files of 16 MB it took 60% of the reading time (bench/RESULTS.md). What
    is built here holds no reference cycles; plain reference counting frees
    it, and the collector runs again afterwards for anything else."""
    global _paused, _was_on
    with _paused_lock:
        _paused += 1
        if _paused == 1:
            _was_on = gc.isenabled()
            gc.disable()
    try:
        yield
    finally:
        with _paused_lock:
            _paused -= 1
            if _paused == 0 and _was_on:
                gc.enable()


def store(
    graph: Graph, prepared: Prepared, *, replace: bool = False, progress: PhaseProgress | None = None
) -> IngestReport:
    """Write a prepared trace, atomically."""
    report = progress or _silent
    t0 = time.perf_counter()
    if prepared.job is not None:
        with collector_paused():
            counts, props, rounds = store_job(graph, prepared.job, prepared.trace, replace=replace, progress=report)
        # a job's enrichment happens as each rank is written: its time is the write's
        timings = {**prepared.timings, "load_s": time.perf_counter() - t0, **rounds}
    else:
        assert prepared.tables is not None
        counts = graph.store_trace(
            prepared.trace, prepared.tables, replace=replace, progress=lambda done, total: report("write", done, total)
        )
        props = prepared.tables.trace_props
        timings = {**prepared.timings, "load_s": time.perf_counter() - t0}
    timings["total_s"] = timings["parse_s"] + timings["enrich_s"] + timings["load_s"]
    return IngestReport(trace=prepared.trace, counts=counts, timings=timings, trace_props=props)


def ingest(
    graph: Graph,
    paths: list[Path],
    trace: str,
    *,
    fmt: str = "auto",
    replace: bool = False,
    progress: PhaseProgress | None = None,
    source_names: dict[str, str] | None = None,
    ranks: Ranks | None = None,
    step_marker: str | None = None,
) -> IngestReport:
    """Parse and validate everything first; only then write, atomically."""
    prepared = prepare(
        paths, trace, fmt=fmt, source_names=source_names, progress=progress, ranks=ranks, step_marker=step_marker
    )
    try:
        return store(graph, prepared, replace=replace, progress=progress)
    finally:
        if prepared.job is not None:  # its spill files now, not when it is collected
            prepared.job.close()


# What a trace file's name ends with, besides the trace's own name.
TRACE_FILE_SUFFIXES = (".gz", ".json", ".pbtxt", ".pb", ".txt", ".trace", ".pt", ".xplane")


def default_trace_name(path: Path) -> str:
    """The trace's name when none is given: the first file's (or folder's)
    name without its format's suffixes (``run.pt.trace.json.gz``: ``run``)."""
    name = path.name
    while True:
        for suffix in TRACE_FILE_SUFFIXES:
            if name.lower().endswith(suffix) and len(name) > len(suffix):
                name = name[: -len(suffix)]
                break
        else:
            return name
