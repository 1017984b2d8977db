"""``import tracegraph``: the service in a notebook, answering in pandas
DataFrames (and, with ``tracegraph[notebook]``, plotly figures).

A front end like the CLI and the HTTP API, and as thin: every answer comes
from the service layer (:mod:`tracegraph.queries`), so an analysis binds and
checks its parameters in the one place the CLI's ``--param`` and the HTTP
query string go through (:func:`~tracegraph.queries.run.bind`), and raises
the same errors (:class:`~tracegraph.errors.BadRequest`, ``NotFound``, ...).

What it adds is the shape of the answers:

* rows become a :class:`pandas.DataFrame` whose columns are the catalog's
  (units in their names: ``dur_us``, ``bytes``) with a dtype per column
  from what it holds: ``Int64`` for integers, ``float64`` for numbers (and
  for an empty time column), ``boolean``, ``string``, ``object`` for lists
  and graph values; numbers as the CLI shows them (times to 1 ns);
  ``df.attrs`` keeps the analysis, trace, parameters and the note;
* an analysis a trace cannot answer (it lacks what the analysis needs) is a
  :class:`NotAvailable`: a value, shown as its one sentence, not an error;
* an answer without rows warns (:class:`NoRows`) with the one line saying
  why, the line the CLI prints on stderr.
"""

from __future__ import annotations

import html
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from tracegraph.db.base import Graph
from tracegraph.db.connect import open_graph
from tracegraph.output import is_time
from tracegraph.queries.catalog import catalog
from tracegraph.queries.cypher import run_cypher
from tracegraph.queries.ingest import cluster as dask_cluster
from tracegraph.queries.ingest import default_trace_name, prepare, store
from tracegraph.queries.run import run_analysis
from tracegraph.queries.traces import describe_trace, drop_trace, list_traces
from tracegraph.queries.types import IngestResult, TraceSummary, Unavailable, WhatIfResult
from tracegraph.queries.whatif import what_if

if TYPE_CHECKING:  # plotly is the notebook extra's: imported by the plots themselves
    from tracegraph.plots import Plots

__all__ = ["Connection", "NoRows", "NotAvailable", "WhatIf", "connect"]


class NoRows(UserWarning):
    """An answer without rows; the message says why (``no rows: ...``)."""


@dataclass(frozen=True)
class NotAvailable:
    """An analysis a trace cannot answer: the trace lacks ``fact`` (a word
    of the analysis's ``@requires``). Shown as its sentence; false in an
    ``if``, so ``if (df := g.query(...)) is not None`` is not the test:
    ``isinstance(answer, NotAvailable)`` (or ``not answer``) is."""

    analysis: str
    trace: str
    fact: str
    reason: str

    @classmethod
    def of(cls, analysis: str, unavailable: Unavailable) -> NotAvailable:
        return cls(analysis, unavailable.trace, unavailable.fact, unavailable.reason)

    def __str__(self) -> str:
        return f"{self.analysis} on trace {self.trace}: not available: {self.reason}"

    def __repr__(self) -> str:
        return str(self)

    def __bool__(self) -> bool:
        return False

    def _repr_html_(self) -> str:
        return f"<p><em>{html.escape(str(self))}</em></p>"


@dataclass(frozen=True)
class WhatIf:
    """What-if's answer: the critical path with the matched ops' weights
    scaled by ``factor`` (``path``: one row per op, ``weight_us`` after
    scaling, ``base_weight_us`` stored)."""

    trace: str
    match: list[str]
    factor: float
    matched_ops: int
    baseline_us: float
    critical_path_us: float
    speedup: float | None  # baseline / new; None when the new path has length 0
    saved_us: float
    path: pd.DataFrame = field(repr=False)

    def __str__(self) -> str:
        speedup = f"{self.speedup:.4g}x" if self.speedup is not None else "n/a"
        return (
            f"trace {self.trace}: {self.matched_ops:,} ops matching {' or '.join(self.match)} scaled by "
            f"{self.factor:g}: critical path {self.critical_path_us:,.3f} us (baseline {self.baseline_us:,.3f} us, "
            f"speedup {speedup}), {len(self.path)} ops"
        )

    def _repr_html_(self) -> str:
        return f"<p>{html.escape(str(self))}</p>{self.path.to_html(index=False)}"


def connect(db: str | None = None) -> Connection:
    """A connection to the database ``db`` names (a ``--db`` URI:
    ``neo4j://host:7687``, ``falkordb://host:6379``), by default
    ``$TRACEGRAPH_DB``, else the embedded one (started when needed)."""
    return Connection(open_graph(db))


class Connection:
    """One database, its traces and the analysis catalog. Close it (or use
    it as a context manager) when done: the embedded server stops once no
    process has used it for ``TRACEGRAPH_IDLE_S`` seconds."""

    def __init__(self, graph: Graph) -> None:
        self._graph = graph

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._graph.close()

    def __repr__(self) -> str:
        return f"<tracegraph.Connection {getattr(self._graph, 'backend', '?')}>"

    # --- traces -------------------------------------------------------------------------

    def ingest(
        self,
        paths: str | PathLike[str] | Sequence[str | PathLike[str]],
        trace: str | None = None,
        *,
        replace: bool = False,
        format: str = "auto",
        cluster: Any = None,
        cluster_files: str = "auto",
        step_marker: str | None = None,
    ) -> IngestResult:
        """Load trace files (or a directory of them) as one trace, all or
        nothing, as ``tracegraph ingest`` does; ``trace`` defaults to the
        first file's name without its suffixes. An existing name is refused
        unless ``replace``. ``cluster``: a job's rank files worked on a Dask
        cluster writing into Neo4j (``"local:N"``, a scheduler's
        ``"tcp://host:8786"``, or a ``distributed.Client``), as ``--cluster``;
        ``cluster_files``: ``"auto"``, ``"shared"`` or ``"send"``, as ``--cluster-files``;
        ``step_marker``: the ops that mark steps, as ``--step-marker``."""
        files = [Path(paths)] if isinstance(paths, (str, PathLike)) else [Path(p) for p in paths]
        name = trace or default_trace_name(files[0])
        if cluster is None:
            return store(self._graph, prepare(files, name, fmt=format, step_marker=step_marker), replace=replace)
        with dask_cluster(cluster, self._graph.backend, files=cluster_files) as ranks:
            prepared = prepare(files, name, fmt=format, ranks=ranks, step_marker=step_marker)
            return store(self._graph, prepared, replace=replace)

    def traces(self) -> pd.DataFrame:
        """Every stored trace, one row each (``tracegraph traces``):
        framework, ops, span, both critical paths, memory peak, what it has."""
        summaries = list_traces(self._graph)
        columns = [name for name in TraceSummary.__dataclass_fields__ if name not in ("counts", "meta")]
        return _frame(columns, [[getattr(t, c) for c in columns] for t in summaries])

    def trace(self, name: str) -> TraceSummary:
        """One trace's summary (its counts and the format's facts too)."""
        return describe_trace(self._graph, name)

    def drop(self, trace: str) -> int:
        """Delete a trace; the nodes it had."""
        return drop_trace(self._graph, trace).deleted_nodes

    # --- analyses -----------------------------------------------------------------------

    def analyses(self) -> pd.DataFrame:
        """The catalog (``tracegraph queries``): name, summary, parameters
        with their defaults, columns."""
        rows = [
            [
                a.name,
                a.summary,
                ", ".join(p.name + ("" if p.required else f"={p.default}") for p in a.params if p.name != "trace"),
                ", ".join(c.name for c in a.columns),
            ]
            for a in catalog().values()
        ]
        return _frame(["name", "summary", "params", "columns"], rows)

    def query(self, name: str, trace: str, **params: Any) -> pd.DataFrame | NotAvailable:
        """Catalog analysis ``name`` on ``trace`` (``tracegraph query``),
        its parameters as keywords (``g.query("top-ops", "step", n=5)``).
        A :class:`NotAvailable` when the trace lacks what it needs; a
        :class:`NoRows` warning when it has no rows."""
        result = run_analysis(self._graph, name, trace, params)
        if result.unavailable is not None:
            return NotAvailable.of(name, result.unavailable)
        df = _frame(result.columns, result.rows)
        df.attrs.update(analysis=name, trace=trace, params=dict(params), note=result.note)
        if result.note:
            warnings.warn(f"{name} on trace {trace}: {result.note}", NoRows, stacklevel=2)
        return df

    def cypher(self, text: str, /, trace: str | None = None, **params: Any) -> pd.DataFrame:
        """Ad-hoc read-only Cypher (``tracegraph cypher``): ``trace`` binds
        ``$trace`` and, on FalkorDB, picks the trace's graph; the database
        itself refuses writes, and a statement that reaches beyond the
        trace graph (LOAD CSV, most procedures, commands) raises
        :class:`~tracegraph.errors.NotAllowed` before it runs."""
        res = run_cypher(self._graph, text, params, trace=trace)
        return _frame(res.columns, res.rows)

    def whatif(self, trace: str, match: str | Sequence[str], factor: float) -> WhatIf | NotAvailable:
        """What if the ops ``match`` selects (``type=REGEX``, ``name=REGEX``;
        several: any) took ``factor`` times as long? The new critical path
        (``tracegraph whatif``)."""
        r: WhatIfResult = what_if(self._graph, trace, [match] if isinstance(match, str) else list(match), factor)
        if r.unavailable is not None:
            return NotAvailable.of("whatif", r.unavailable)
        assert r.baseline_us is not None and r.critical_path_us is not None and r.saved_us is not None
        columns = ["step", "op", "type", "weight_us", "base_weight_us", "scaled"]
        path = _frame(columns, [[getattr(op, c) for c in columns] for op in r.path])
        return WhatIf(
            r.trace, r.match, r.factor, r.matched_ops, r.baseline_us, r.critical_path_us, r.speedup, r.saved_us, path
        )

    # --- figures ------------------------------------------------------------------------

    @property
    def plot(self) -> Plots:
        """The figures (plotly; ``pip install 'tracegraph[notebook]'``):
        ``g.plot.timeline(trace)``, ``.memory(trace)``, ``.streams(trace)``,
        ``.collectives(trace)``."""
        from tracegraph.plots import Plots

        return Plots(self)


def _frame(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> pd.DataFrame:
    """Rows as a DataFrame with a dtype per column (see the module's docstring)."""
    data = {i: pd.Series([r[i] for r in rows], dtype=_dtype(c, [r[i] for r in rows])) for i, c in enumerate(columns)}
    df = pd.DataFrame(data, index=pd.RangeIndex(len(rows)))
    df.columns = pd.Index(list(columns))
    return df


def _dtype(column: str, values: list[Any]) -> str:
    present = [v for v in values if v is not None]
    if not present:
        return "float64" if is_time(column) else "object"
    kinds = {type(v) for v in present}
    if kinds == {bool}:
        return "boolean"
    if kinds == {int}:
        return "Int64"
    if kinds <= {int, float}:
        return "float64"
    if kinds == {str}:
        return "string"
    return "object"
