"""Ingest for every front end: files in, a stored trace and its report out.

:func:`prepare` (the pipeline's own: read, check and enrich, no database;
so the CLI refuses bad input before it opens, or starts, one) and then
:func:`store`, which writes atomically and reports what was written, the
trace's summary and its warnings
(:class:`~tracegraph.queries.types.IngestResult`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracegraph.db.base import Graph, check_cluster_target
from tracegraph.ingest import formats
from tracegraph.ingest.step_marker import MAX_MARKER_CHARS as MAX_MARKER_CHARS
from tracegraph.ingest.step_marker import check_marker as check_marker
from tracegraph.queries.traces import summary
from tracegraph.queries.types import IngestResult

if TYPE_CHECKING:
    from tracegraph.ingest.cluster import Cluster as Cluster
    from tracegraph.ingest.pipeline import PhaseProgress as PhaseProgress
    from tracegraph.ingest.pipeline import Prepared as Prepared
    from tracegraph.ingest.pipeline import default_trace_name as default_trace_name
    from tracegraph.ingest.pipeline import prepare as prepare


def __getattr__(name: str) -> Any:
    """``prepare`` and ``default_trace_name`` (a trace's name from its first
    file's), the pipeline's own, imported when first used: the pipeline
    imports numpy, pandas and the compiled kernels (~1 s), which a command that does not ingest must not pay."""
    if name in ("prepare", "default_trace_name"):
        from tracegraph.ingest import pipeline

        return getattr(pipeline, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def format_names() -> list[str]:
    """The formats a trace file may be in, in the order they are sniffed."""
    return formats.names()


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
        summary=summary({**report.trace_props, "trace": report.trace}),
    )


@contextlib.contextmanager
def cluster(spec: Any, backend: str, scratch: Path | None = None, files: str = "auto") -> Iterator[Cluster]:
    """The Dask cluster ``spec`` names (:func:`tracegraph.ingest.cluster.connect`)
    to work a job's ranks on, for a database of ``backend``: refused in one
    line for one its workers cannot write into, before any work. ``files``:
    how its workers get the rank files (``auto``, ``shared``, ``send``)."""
    from tracegraph.ingest import cluster as dask

    check_cluster_target(backend)
    with dask.connect(spec, scratch, files) as ranks:
        yield ranks
