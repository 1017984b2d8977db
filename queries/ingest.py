"""Ingest for every front end: files in, a stored trace and its report out.

:func:`prepare` does everything that can fail on the input without a
database (so the CLI refuses bad input before it opens, or starts, one);
:func:`store` writes atomically and reports what was written, the trace's
summary and its warnings (:class:`~tracegraph.queries.types.IngestResult`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tracegraph.db.base import Graph
from tracegraph.ingest import formats
from tracegraph.queries.traces import summary
from tracegraph.queries.types import IngestResult

if TYPE_CHECKING:  # the pipeline imports pandas (~1 s): a command that does not ingest must not pay it
    from tracegraph.ingest.pipeline import PhaseProgress as PhaseProgress
    from tracegraph.ingest.pipeline import Prepared as Prepared


def format_names() -> list[str]:
    """The formats a trace file may be in, in the order they are sniffed."""
    return formats.names()


def prepare(
    paths: list[Path],
    trace: str,
    *,
    fmt: str = "auto",
    source_names: dict[str, str] | None = None,
    progress: PhaseProgress | None = None,
) -> Prepared:
    """Read, check and enrich the files as trace ``trace`` (no database);
    ``source_names`` maps a path to the name the trace records for it."""
    from tracegraph.ingest import pipeline

    return pipeline.prepare(paths, trace, fmt=fmt, source_names=source_names, progress=progress)


def store(
    graph: Graph, prepared: Prepared, *, replace: bool = False, progress: PhaseProgress | None = None
) -> IngestResult:
    """Write a prepared trace, all or nothing (Conflict when the name is
    taken and not ``replace``)."""
    from tracegraph.ingest import pipeline

    report = pipeline.store(graph, prepared, replace=replace, progress=progress)
    return IngestResult(
        trace=report.trace,
        nodes=dict(report.counts["nodes"]),
        relationships=dict(report.counts["relationships"]),
        timings=dict(report.timings),
        summary=summary({**prepared.tables.trace_props, "trace": report.trace}),
    )


def ingest(
    graph: Graph,
    paths: list[Path],
    trace: str,
    *,
    fmt: str = "auto",
    replace: bool = False,
    progress: PhaseProgress | None = None,
    source_names: dict[str, str] | None = None,
) -> IngestResult:
    """:func:`prepare`, then :func:`store`."""
    prepared = prepare(paths, trace, fmt=fmt, source_names=source_names, progress=progress)
    return store(graph, prepared, replace=replace, progress=progress)
