"""The one interface every engine implements, and the values it trades in.

Everything above this package (ingest, the catalog, CLI, HTTP) talks to a
:class:`Graph` and never imports a driver, so the same Cypher text and the
same code path serve FalkorDB and Neo4j. What differs between engines (how
a trace is laid out, how a load becomes visible atomically, how a dead
loader is recognized) lives behind :meth:`Graph.store_trace`,
:meth:`Graph.drop_trace` and :meth:`Graph.sweep`.
"""

from __future__ import annotations

import concurrent.futures
import os
import signal
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from tracegraph import schema
from tracegraph.errors import BadRequest, Conflict, QueryTimeout

# The layout of a stored trace (labels, properties, relationships), stored
# on its Trace node: analyses refuse a trace written with another layout
# instead of answering from properties it does not have.
SCHEMA_VERSION = 7

# Labels whose nodes carry (trace, uid): the Trace node's and every node table's.
LABELS = ("Trace", *(t.label for t in schema.NODE_TABLES if t.label is not None))
# The per-trace nodes that cross-trace analyses (trace-diff, trace-diff-summary)
# read: an engine that keeps each trace apart must also keep these together.
CATALOG_LABELS = ("Trace", "OpTotals")

if TYPE_CHECKING:  # numpy and the columns: only loads use them; a CLI query must not pay their import
    import numpy as np

    from tracegraph.columns import Table

T = TypeVar("T")

# Progress callback of a load: (elements written, elements in all).
Progress = Callable[[int, int], None]

MAX_TRACE_NAME = 200

# Why a cluster cannot write into FalkorDB (one line, for every front end).
CLUSTER_REFUSED = (
    "a cluster writes into Neo4j only (--db neo4j://...): FalkorDB takes a load's parts from this "
    "process alone, and the embedded server's socket is local to this machine"
)


def check_cluster_target(backend: str) -> None:
    """Refuse, before any work, a cluster for a database its workers cannot
    write into (only Neo4j's loads can be shared: :meth:`Load.share`)."""
    if backend != "neo4j":
        raise BadRequest(CLUSTER_REFUSED)


def check_trace_name(name: str) -> None:
    """The one rule for trace names, everywhere (CLI, HTTP, storage).

    1-200 printable characters without leading or trailing spaces, no ``/``
    (a name is a URL path segment of the HTTP API) and no ``~`` (reserved
    for the names of loads and drops in progress).
    """
    if (
        not name
        or len(name) > MAX_TRACE_NAME
        or "~" in name
        or "/" in name
        or name != name.strip()
        or not name.isprintable()
    ):
        raise BadRequest(
            f"bad trace name {name!r}: 1-{MAX_TRACE_NAME} printable characters, no '/' or '~', "
            "no leading or trailing spaces"
        )


def name_taken(name: str) -> Conflict:
    """The error for storing a trace under a name a trace already has."""
    return Conflict(f"trace {name!r} exists (to overwrite it: --replace, or replace=true over HTTP)")


@dataclass(frozen=True)
class PlanStep:
    """One operator of a statement's plan, as the engine's planner gave it,
    in the terms the ad-hoc rule decides on
    (:mod:`tracegraph.queries.ad_hoc_rule`): ``kind`` one of the constants
    below; ``name`` the procedure (PROCEDURE; empty when the engine's plan
    does not say which), the command (COMMAND, when the plan says) or the
    database (DATABASE); ``operator`` the engine's own name for it."""

    READ = "read"  # everything else: reads (writes are the transaction's business)
    LOAD_CSV = "load-csv"
    PROCEDURE = "procedure"
    COMMAND = "command"  # SHOW ..., TERMINATE ..., users, roles, databases
    IN_TRANSACTIONS = "in-transactions"  # CALL { ... } IN TRANSACTIONS
    DATABASE = "database"  # a step on another database than this Graph's

    kind: str
    name: str = ""
    operator: str = ""


@dataclass
class Result:
    """Rows of plain Python values; graph values become dicts (see below)."""

    columns: list[str]
    rows: list[list[Any]] = field(default_factory=list)
    stats: dict[str, int] = field(default_factory=dict)

    def records(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, r)) for r in self.rows]


@dataclass(frozen=True)
class NodeTable:
    """One node per row of ``frame``: label ``label``, properties ``uid``
    plus ``columns`` (a missing value is a property left out). ``table``
    names the frame (:mod:`tracegraph.schema`'s table). ``frame`` is a
    :class:`~tracegraph.columns.Table` (a pandas frame is taken too, see
    :func:`tracegraph.db.values.as_tables`)."""

    label: str
    table: str
    frame: Table
    columns: tuple[str, ...]


@dataclass(frozen=True)
class RelTable:
    """One relationship per row of ``frame``: ``(start)-[:type]->(end)``,
    the ends named by columns ``src`` and ``dst``: row positions in the
    node tables of labels ``start`` and ``end`` of the same
    :class:`TraceTables` (-1: no relationship for that row), properties
    ``columns``."""

    type: str
    start: str
    end: str
    table: str
    frame: Table
    src: str
    dst: str
    columns: tuple[str, ...]

    def ends(self) -> tuple[np.ndarray, np.ndarray]:
        """Each row's start and end node positions (-1: no relationship)."""
        return ends(self.frame, self.src), ends(self.frame, self.dst)

    def count(self) -> int:
        """The relationships the table holds (rows with both ends)."""
        a, b = self.ends()
        return int(((a >= 0) & (b >= 0)).sum())


def ends(frame: Table, column: str) -> np.ndarray:
    """The node positions a relationship column names: ``uid`` is each row
    of a node table itself; any other column holds positions (-1: none)."""
    import numpy as np

    col = frame[column]
    if isinstance(col, np.ndarray) and col.dtype.kind in "iu":
        return col.astype(np.int64, copy=False)
    if column == "uid":
        return np.arange(frame.n, dtype=np.int64)
    raise TypeError(f"relationship column {column!r} holds no node positions")


@dataclass
class TraceTables:
    """Everything one trace stores, or one part of a trace written in
    parts (a rank of a job), engine-neutral (built by ingest).

    ``trace_props`` are the Trace node's properties besides ``trace``,
    ``uid`` and ``status``; ``membership`` lists ``(type, label)``: a
    relationship from the Trace node to every node of that label;
    ``int_columns`` (``bool_columns``) are properties that are integers
    (booleans) even where they are kept as floats (a column with nulls).
    """

    trace_props: dict[str, Any]
    nodes: list[NodeTable]
    rels: list[RelTable]
    membership: list[tuple[str, str]]
    int_columns: frozenset[str]
    bool_columns: frozenset[str] = frozenset()

    def elements(self) -> int:
        """Nodes and relationships to write, membership excluded (the unit of progress)."""
        return sum(t.frame.n for t in self.nodes) + sum(r.count() for r in self.rels)


@dataclass(frozen=True)
class NodeRefs:
    """Nodes a load's earlier parts wrote: each by the part that wrote it
    (what :meth:`Load.part` returned), its row in that part's node table
    of its label, and its uid."""

    part: np.ndarray
    row: np.ndarray
    uid: list[str]

    def __len__(self) -> int:
        return len(self.row)


@dataclass(frozen=True)
class Link:
    """Relationships ``(src[i]:start)-[:type]->(dst[i]:end)`` between nodes
    of a load's parts, with properties ``columns`` of ``props``."""

    type: str
    start: str
    end: str
    src: NodeRefs
    dst: NodeRefs
    props: Table | None = None
    columns: tuple[str, ...] = ()


class PartWriter(Protocol):
    """What writes a part of a load: the :class:`Load` itself, or a
    handle to it that another process writes through (:meth:`Load.share`)."""

    def part(self, tables: TraceTables, progress: Progress | None = None) -> int:
        """Write one part (its nodes and the relationships among them, and
        between them and the parts before); returns its index."""
        ...


class Load(PartWriter, Protocol):
    """A trace being written in parts, all or nothing (:meth:`Graph.begin_trace`).

    Readers see nothing of it (or the old version of its name) until
    :meth:`finish` publishes it; :meth:`abort` (or the death of the
    writing process) leaves nothing behind.

    ``parts_at_once``: how many parts are worth writing at the same time
    from one process (None: as many as it has threads for). A load that
    takes its parts one at a time may say 1: a second rank written beside
    the first then spends its write waiting, its tables held."""

    parts_at_once: int | None

    def share(self, count: int) -> list[PartWriter]:
        """Writers of the next ``count`` parts, each picklable, that other
        processes (a cluster's workers) write through with connections of
        their own; this load still owns the trace (only it finishes or
        aborts it). Raises UserError on an engine whose server other
        machines cannot reach."""
        ...

    def link(self, links: list[Link], progress: Progress | None = None) -> None:
        """Write relationships between nodes of parts written before."""
        ...

    def update(self, label: str, nodes: NodeRefs, columns: Table, int_columns: frozenset[str]) -> None:
        """Set properties (``columns``, one row per node; no value: left
        as it is) of nodes of parts written before."""
        ...

    def finish(self, trace_props: dict[str, Any], catalog: list[NodeTable]) -> dict[str, dict[str, int]]:
        """Check what was written (``trace_props['counts']``), set the Trace
        node's properties and publish the trace; ``catalog``: its nodes
        that cross-trace analyses read (besides the Trace node)."""
        ...

    def abort(self) -> None:
        """Remove everything written (the load's name stays free or old)."""
        ...


class Graph(ABC):
    """A connection to one tracegraph database.

    ``run`` executes one Cypher statement. ``trace`` names the trace the
    statement reads (engines that keep each trace in a graph of its own
    run it there; it is also what ``$trace`` means in the catalog's texts);
    without it the statement sees every trace's ``Trace`` and ``OpTotals``
    nodes (and, on engines that keep all traces together, everything).
    ``write=False`` asks the engine itself to refuse writes (a read
    transaction on Neo4j, ``GRAPH.RO_QUERY`` on FalkorDB): that, not
    keyword filtering, is what makes ad-hoc queries safe. ``timeout_ms``
    bounds the whole statement, rows included.

    An engine is a subclass that implements the abstract methods.
    """

    backend: str  # "embedded", "falkordb" or "neo4j": for people (health, version), not for branching

    def run(
        self,
        query: str,
        params: dict[str, Any] | None = None,
        *,
        trace: str | None = None,
        write: bool = False,
        timeout_ms: int | None = None,
    ) -> Result:
        """The statement's rows (``$trace`` bound from ``trace``, here for every engine)."""
        bound = dict(params or {})
        if trace is not None:
            bound["trace"] = trace
        return self._run(query, bound, trace, write, timeout_ms)

    @abstractmethod
    def _run(
        self, query: str, params: dict[str, Any], trace: str | None, write: bool, timeout_ms: int | None
    ) -> Result:
        """:meth:`run` in the engine: ``params`` hold ``$trace`` already."""

    def plan(
        self,
        query: str,
        params: dict[str, Any] | None = None,
        *,
        trace: str | None = None,
        timeout_ms: int | None = None,
    ) -> list[PlanStep]:
        """How the engine would run the statement (``EXPLAIN``: planned,
        not run), as :class:`PlanStep` values; the engine's own error
        (QueryError) for a statement it cannot plan. ``trace`` as for
        :meth:`run`."""
        bound = dict(params or {})
        if trace is not None:
            bound["trace"] = trace
        return self._plan(query, bound, trace, timeout_ms)

    @abstractmethod
    def _plan(self, query: str, params: dict[str, Any], trace: str | None, timeout_ms: int | None) -> list[PlanStep]:
        """:meth:`plan` in the engine: ``params`` hold ``$trace`` already."""

    @abstractmethod
    def trace_facts(self, name: str) -> dict[str, Any] | None:
        """The Trace node properties of the ready trace ``name``, None when
        there is none. (Engines that publish in steps wait for one in
        progress, and finish one whose process died.)"""
        ...

    @abstractmethod
    def list_traces(self) -> list[dict[str, Any]]:
        """The Trace node properties of every ready trace, by name (what a
        trace is while it loads, swaps or drops is the engine's own)."""
        ...

    @abstractmethod
    def read_columns(
        self, trace: str, label: str, columns: dict[str, type], where: str = "", timeout_ms: int | None = None
    ) -> list[tuple[Any, ...]]:
        """Every ``label`` node of ``trace`` that matches ``where`` (a Cypher
        predicate on ``n``), as a tuple of the ``columns`` properties (each
        converted to its type, None when absent), in no particular order.

        The bulk read a drawing needs (the UI's timeline of 100k ops): each
        engine answers it the fastest way it can."""
        ...

    @abstractmethod
    def store_trace(
        self, name: str, tables: TraceTables, *, replace: bool = False, progress: Progress | None = None
    ) -> dict[str, dict[str, int]]:
        """Write a trace, all or nothing: readers see the old version (or
        none) until the new one is complete, then the new one. Raises
        Conflict when ``name`` exists and ``replace`` is false (checked
        again at the moment the new version becomes visible)."""
        ...

    @abstractmethod
    def begin_trace(self, name: str, *, replace: bool = False) -> Load:
        """Start writing a trace in parts (a job streamed rank by rank),
        with the guarantees of :meth:`store_trace` (Conflict as there)."""
        ...

    @abstractmethod
    def drop_trace(self, name: str) -> int:
        """Remove a trace atomically (NotFound when there is none); returns its node count."""
        ...

    @abstractmethod
    def sweep(self) -> list[str]:
        """Remove what dead loaders and interrupted drops left behind; returns what was removed."""
        ...

    @abstractmethod
    def version(self) -> str:
        """The server's version, for people."""

    @abstractmethod
    def close(self) -> None:
        """Let go of the connection (and of the embedded server)."""


class Deadline:
    """Statements with a time limit on the whole of them, rows included.

    The engines' own timeouts are checked now and then (Neo4j's monitor
    every 2 s by default, FalkorDB between operations) and do not cover
    decoding the rows; so a timed statement runs on a worker thread and
    the caller gets QueryTimeout when the limit passes. The engine's own
    timeout (given the same limit) stops the statement soon after;
    whatever it answers late is dropped.
    """

    # How long close() waits for statements given up on: the engine's own
    # timeout stops them soon after their limit (Neo4j checks every ~2 s).
    CLOSE_WAIT_S = 10.0

    def __init__(self) -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="tracegraph-timed")
        self._running: set[concurrent.futures.Future[Any]] = set()

    def run(self, limit_ms: int, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)``, or QueryTimeout once ``limit_ms`` has passed."""
        future = self._pool.submit(fn, *args, **kwargs)
        self._running.add(future)
        future.add_done_callback(self._running.discard)
        try:
            return future.result(timeout=limit_ms / 1000)
        except concurrent.futures.TimeoutError:
            raise QueryTimeout(f"the query timed out: it ran past its time limit of {limit_ms:,} ms") from None

    def close(self) -> None:
        """Wait (a bounded while) for statements still running after their
        caller gave up: they hold pooled connections, and closing a driver
        under a connection in use breaks it (the engine stops them soon)."""
        concurrent.futures.wait(list(self._running), timeout=self.CLOSE_WAIT_S)
        self._pool.shutdown(wait=False, cancel_futures=True)


def rows_query(label: str, columns: dict[str, type], where: str = "") -> str:
    """The portable text of :meth:`Graph.read_columns`: one row per node."""
    return (
        f"MATCH (n:{label} {{trace: $trace}})"
        + (f" WHERE {where}" if where else "")
        + " RETURN "
        + ", ".join(f"n.{c}" for c in columns)
    )


def checkpoint(name: str) -> None:
    """A named point in a load or drop where tests can stop this process.

    ``TRACEGRAPH_KILL_AT=name`` sends SIGKILL to the process itself when it
    reaches that point: the crash-safety tests use it to die exactly where
    a power cut could. ``TRACEGRAPH_PAUSE_AT=name`` sends it SIGSTOP
    instead (the test sends SIGCONT): another process then meets this one
    in exactly that state, without a race. Unset (always, outside those
    tests), it does nothing.
    """
    if os.environ.get("TRACEGRAPH_KILL_AT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
    if os.environ.get("TRACEGRAPH_PAUSE_AT") == name:
        os.kill(os.getpid(), signal.SIGSTOP)
