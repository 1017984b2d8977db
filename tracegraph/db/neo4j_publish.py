"""Publishing traces on Neo4j, all or nothing, with no transaction over a
batch: the load / swap / drop protocol and the leases that tell a live
loader from a dead one.

Neo4j caps a transaction's memory (70% of the heap by default) and a
100k-op trace has half a million nodes, so nothing here holds more than a
batch in one transaction; atomicity comes from the Trace node instead:

* a new trace is loaded under its name with status ``loading`` and turns
  ``ready`` in one small transaction at the end;
* a replacement is loaded under ``NAME~load~ID``; then the old Trace node
  turns ``swapping`` (readers wait), the old version's nodes move to
  ``NAME~drop~ID`` and the new one's to ``NAME`` in batches, one small
  transaction swaps the two Trace nodes, and the old version is deleted;
* a drop turns the Trace node ``dropping`` (gone for readers at once) and
  deletes its nodes in batches.

Each step can be finished by someone else: a loader keeps a transaction
open for as long as it works, with metadata ``{"tracegraph_lease": ID}``
(its lease). The server ends that transaction when the loader's
connection goes, so ``SHOW TRANSACTIONS`` tells at once whether the owner
of a half-done load, swap or drop is alive; :meth:`Publisher.sweep` (run
by every load and drop) deletes dead loads and drops and finishes dead
swaps, so the new version stands. The statuses are this module's own:
:meth:`Publisher.list_traces` and :meth:`Publisher.trace_facts` show
readers ready traces only.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from tracegraph.columns import Table, Texts, take
from tracegraph.db import load_plan
from tracegraph.db.base import (
    CATALOG_LABELS,
    LABELS,
    Link,
    NodeRefs,
    NodeTable,
    PartWriter,
    Progress,
    TraceTables,
    check_trace_name,
    checkpoint,
    ends,
    name_taken,
)
from tracegraph.db.values import as_tables, column_values
from tracegraph.errors import Conflict, DatabaseError, NotFound, QueryError

if TYPE_CHECKING:
    from tracegraph.db.neo4j_db import Neo4jGraph

T = TypeVar("T")

# Rows per UNWIND batch (TRACEGRAPH_NEO4J_BATCH_ROWS); bench/RESULTS.md has the measurements.
BATCH_ROWS = int(os.environ.get("TRACEGRAPH_NEO4J_BATCH_ROWS", "2500"))
# Batches of one pass written at once, each in a transaction of its own
# (TRACEGRAPH_NEO4J_IN_FLIGHT); bench/RESULTS.md has the measurements.
IN_FLIGHT = int(os.environ.get("TRACEGRAPH_NEO4J_IN_FLIGHT", "2"))
# Nodes deleted per transaction (with their relationships: an op has a
# dozen), and renamed per transaction; each within Neo4j's default
# transaction memory on a 1 GB heap.
DELETE_BATCH = 5000
# The order a trace's nodes are deleted in: the many (ops, kernels, tensors,
# allocations) first, each batch taking its few relationships along, the
# hubs (a stream's ON_STREAM, an allocator's IN_ALLOCATOR; traces stored
# before 2026-11-28 also the Trace node's HAS_OP and a device's ON_DEVICE,
# one per op) last, when they have none left. A hub
# deleted first takes all its relationships in one transaction: a job of
# 400k nodes then exceeded a 1 GB server's transaction memory.
DELETE_ORDER = tuple(sorted(LABELS, key=lambda label: label not in ("Allocation", "Tensor", "Kernel", "Op")))
RENAME_BATCH = int(os.environ.get("TRACEGRAPH_NEO4J_RENAME_BATCH", "20000"))
LEASE_KEY = "tracegraph_lease"
# How long a reader waits for another process's replace to swap versions.
SWAP_WAIT_S = 300.0


class Publisher:
    """The protocol above, over one :class:`~tracegraph.db.neo4j_db.Neo4jGraph`
    (its statements and transactions)."""

    def __init__(self, graph: Neo4jGraph) -> None:
        self.graph = graph

    def run(self, query: str, params: dict[str, Any] | None = None, *, write: bool = False) -> Any:
        return self.graph.run(query, params, write=write)

    def _transaction(self, work: Callable[[Any], T], *, write: bool) -> T:
        return self.graph._transaction(work, write=write)

    def trace_facts(self, name: str) -> dict[str, Any] | None:
        """The ready trace's Trace node properties. While a replace swaps
        versions (status ``swapping``), wait for it; if its process died,
        finish the swap first (:meth:`sweep`)."""
        deadline = time.monotonic() + SWAP_WAIT_S
        while True:
            res = self.run("MATCH (t:Trace {trace: $name, uid: 'trace'}) RETURN t", {"name": name})
            props: dict[str, Any] | None = res.rows[0][0]["properties"] if res.rows else None
            if props is None or props.get("status") != "swapping":
                return props if props and props.get("status") == "ready" else None
            if props.get("lease") not in self._live_leases():
                self.sweep()
            elif time.monotonic() > deadline:
                raise DatabaseError(
                    f"trace {name!r} is being replaced by another process (for over {SWAP_WAIT_S:.0f} s); try again"
                )
            else:
                time.sleep(0.2)

    def list_traces(self) -> list[dict[str, Any]]:
        """Ready traces, and a trace being replaced with its old facts (its
        swap is invisible to a listing)."""
        res = self.run("MATCH (t:Trace) WHERE t.status IN ['ready', 'swapping'] RETURN t ORDER BY t.trace")
        return [{**r[0]["properties"], "status": "ready"} for r in res.rows]

    def store_trace(
        self, name: str, tables: TraceTables, *, replace: bool = False, progress: Progress | None = None
    ) -> dict[str, dict[str, int]]:
        load = self.begin_trace(name, replace=replace)
        try:
            load.part(tables, progress)
            return load.finish(tables.trace_props, [t for t in tables.nodes if t.label in CATALOG_LABELS])
        except BaseException:
            load.abort()
            raise

    def begin_trace(self, name: str, *, replace: bool = False) -> Neo4jLoad:
        check_trace_name(name)
        self.graph.ensure_schema()
        self.sweep()
        current = self._status(name)
        if current is not None and current != "ready":
            raise Conflict(f"trace {name!r} is being {current.removesuffix('ing')}ed by another process; try again")
        if current == "ready" and not replace:
            raise name_taken(name)
        lease_id = uuid.uuid4().hex
        # A new name is loaded under that name (readers wait for `ready`); a
        # replacement under a name of its own, swapped in when complete.
        target = name if current is None else f"{name}~load~{lease_id}"
        lease = _Lease(self, lease_id).__enter__()
        try:
            props = {"trace": target, "uid": "trace", "status": "loading", "lease": lease_id}
            try:
                self.run("CREATE (t:Trace) SET t = $props", {"props": props}, write=True)
            except Conflict:  # another process created that Trace node meanwhile
                raise Conflict(f"trace {name!r} is being loaded by another process; try again") from None
            checkpoint("load-started")
        except BaseException:
            with contextlib.suppress(DatabaseError, QueryError):
                self._delete_all(target)
            lease.__exit__()
            raise
        return Neo4jLoad(self, name, target, lease_id, lease)

    def _status(self, name: str) -> str | None:
        res = self.run("MATCH (t:Trace {trace: $name, uid: 'trace'}) RETURN t.status", {"name": name})
        return str(res.rows[0][0]) if res.rows else None

    def _swap(self, name: str, temp: str, grave: str, lease_id: str) -> None:
        """Replace ``name`` by the complete version loaded as ``temp``, in
        steps that a later sweep can finish if this process dies: the old
        Trace node says ``swapping`` (readers wait), the old version's nodes
        go to ``grave`` and the new one's to ``name`` in batches, then one
        transaction swaps the two Trace nodes; the old version is deleted.
        No transaction holds more than a batch: Neo4j caps a transaction's
        memory, and a 100k-op trace has half a million nodes."""
        res = self.run(
            "MATCH (t:Trace {trace: $name, uid: 'trace'}) WHERE t.status = 'ready' "
            "SET t.status = 'swapping', t.swap_phase = 'old-out', t.lease = $lease, "
            "t.replacement = $temp, t.grave = $grave RETURN count(t)",
            {"name": name, "lease": lease_id, "temp": temp, "grave": grave},
            write=True,
        )
        if not res.rows or not res.rows[0][0]:
            raise Conflict(f"trace {name!r} changed while it was being replaced; try again")
        checkpoint("swap-started")
        self._finish_swap(name, temp, grave, "old-out")

    def _finish_swap(self, name: str, temp: str, grave: str, phase: str) -> None:
        """The swap from ``phase`` on: ``old-out`` (the old version's nodes
        moving to ``grave``), then ``new-in`` (the new one's to ``name``; the
        old Trace node, which stays ``name`` till the end, records the
        phase), then the flip of the two Trace nodes."""
        if phase == "old-out":
            self._rename_all(name, grave)
            self.run(
                "MATCH (t:Trace {trace: $name, uid: 'trace'}) SET t.swap_phase = 'new-in'", {"name": name}, write=True
            )
        self._rename_all(temp, name)
        checkpoint("swap-renamed")

        def flip(tx: Any) -> None:
            tx.run(
                "MATCH (t:Trace {trace: $name, uid: 'trace'}) SET t.trace = $grave, t.status = 'dropping' "
                "REMOVE t.replacement, t.grave, t.swap_phase",
                name=name,
                grave=grave,
            ).consume()
            tx.run(
                "MATCH (t:Trace {trace: $temp, uid: 'trace'}) SET t.trace = $name, t.status = 'ready' REMOVE t.lease",
                temp=temp,
                name=name,
            ).consume()

        self._transaction(flip, write=True)
        self._delete_all(grave)

    def _rename_all(self, old: str, new: str) -> None:
        """Every node of ``old`` but its Trace node renamed to ``new``, a batch per transaction."""
        self._in_batches(old, "SET n.trace = $new", {"new": new}, RENAME_BATCH, checkpoint_name="swap-batch")

    def _in_batches(
        self,
        trace: str,
        action: str,
        params: dict[str, Any],
        batch: int,
        *,
        checkpoint_name: str | None = None,
        labels: tuple[str, ...] = LABELS,
    ) -> None:
        """Apply ``action`` (to ``n``) to every node of ``trace`` but its
        Trace node, ``batch`` nodes per transaction, label by label in the
        order of ``labels``, until none is left to match; the action must
        make a node stop matching (rename or delete)."""
        for label in labels:
            keep = " AND n.uid <> 'trace'" if label == "Trace" else ""
            while True:
                res = self.run(
                    f"MATCH (n:{label} {{trace: $trace}}) USING INDEX SEEK n:{label}(trace) "
                    f"WHERE true{keep} WITH n LIMIT {batch} "
                    f"{action} RETURN count(*)",
                    {**params, "trace": trace},
                    write=True,
                )
                if not res.rows or int(res.rows[0][0]) == 0:
                    break
                if checkpoint_name:
                    checkpoint(checkpoint_name)

    def drop_trace(self, name: str) -> int:
        """One small transaction marks the trace ``dropping`` (gone for
        every reader at once); its nodes are then deleted in batches, and a
        sweep finishes the deletion if this process dies."""
        self.sweep()
        lease_id = uuid.uuid4().hex
        with _Lease(self, lease_id):
            checkpoint("drop-started")
            res = self.run(
                "MATCH (t:Trace {trace: $name, uid: 'trace'}) WHERE t.status = 'ready' "
                "SET t.status = 'dropping', t.lease = $lease RETURN t.node_count",
                {"name": name, "lease": lease_id},
                write=True,
            )
            if not res.rows:
                raise NotFound(f"no trace named {name!r}")
            checkpoint("drop-marked")
            self._delete_all(name)
            checkpoint("drop-done")
        return int(res.rows[0][0] or 0)

    def sweep(self) -> list[str]:
        """Finish what processes that died left half done: a replace's swap
        (finished, so the new version stands), a load (deleted), a drop
        (deleted). A process that is alive holds its lease."""
        leftovers = self.run(
            "MATCH (t:Trace) WHERE t.status IN ['loading', 'dropping', 'swapping'] "
            "RETURN t.trace, t.status, t.lease, t.replacement, t.grave, t.swap_phase"
        )
        if not leftovers.rows:
            return []
        live = self._live_leases()
        done = []
        dead = [row for row in leftovers.rows if row[2] not in live]
        replacements = {row[3] for row in dead if row[1] == "swapping"}
        for trace, status, _lease, replacement, grave, phase in dead:
            if status == "swapping":
                self._finish_swap(trace, replacement, grave, phase)
                done.append(trace)
        for trace, status, _lease, _replacement, _grave, _phase in dead:
            if status != "swapping" and trace not in replacements:
                self._delete_all(trace)
                done.append(trace)
        return done

    def _live_leases(self) -> set[str]:
        res = self.run(
            f"SHOW TRANSACTIONS YIELD metaData WHERE metaData.{LEASE_KEY} IS NOT NULL RETURN metaData.{LEASE_KEY}"
        )
        return {r[0] for r in res.rows}

    def _delete_all(self, trace: str) -> None:
        """Delete every node of ``trace`` in batches, its Trace node last (so
        that an interrupted deletion is still found by the next sweep)."""
        self._in_batches(trace, "DETACH DELETE n", {}, DELETE_BATCH, labels=DELETE_ORDER)
        self.run("MATCH (t:Trace {trace: $trace}) DETACH DELETE t", {"trace": trace}, write=True)


class Neo4jLoad:
    """A trace being written in parts under its load name (see
    :meth:`Publisher.begin_trace`); parts go in transactions of their own,
    several at once (the server writes them on threads of its own)."""

    parts_at_once: int | None = None

    def __init__(self, publisher: Publisher, name: str, target: str, lease_id: str, lease: _Lease) -> None:
        self.publisher = publisher
        self.name = name
        self.target = target
        self.lease_id = lease_id
        self.lease = lease
        self.parts: list[dict[str, Texts]] = []  # per part: each label's uids
        self.done = False

    def part(self, tables: TraceTables, progress: Progress | None = None) -> int:
        tables = as_tables(tables)
        write_part(self.publisher, self.target, tables, progress)
        self.parts.append({})
        return len(self.parts) - 1

    def share(self, count: int) -> list[PartWriter]:
        """The next ``count`` parts, each written by whichever process it is
        sent to (:mod:`tracegraph.db.neo4j_shared`)."""
        from tracegraph.db.neo4j_shared import SharedPart

        g = self.publisher.graph
        first = len(self.parts)
        self.parts += [{} for _ in range(count)]
        return [SharedPart(g._uri, g._auth, g._database, self.target, first + k) for k in range(count)]

    def link(self, links: list[Link], progress: Progress | None = None) -> None:
        for ln in links:
            names = [c for c in ln.columns]
            values = [column_values(ln.props[c], False) for c in names] if ln.props is not None else []
            rows = [list(r) for r in zip(ln.src.uid, ln.dst.uid, *values)]
            props = ", ".join(f"{c}: r[{2 + j}]" for j, c in enumerate(names))
            query = (
                "UNWIND $rows AS r "
                f"MATCH (a:{ln.start} {{trace: $trace, uid: r[0]}}) USING INDEX SEEK a:{ln.start}(trace, uid) "
                f"MATCH (b:{ln.end} {{trace: $trace, uid: r[1]}}) USING INDEX SEEK b:{ln.end}(trace, uid) "
                f"CREATE (a)-[:{ln.type}{' {' + props + '}' if props else ''}]->(b)"
            )
            for i in range(0, len(rows), BATCH_ROWS):
                batch = rows[i : i + BATCH_ROWS]
                _batch(self.publisher, query, batch, self.target, {"relationships_created": len(batch)}, ln.type)

    def update(self, label: str, nodes: NodeRefs, columns: Table, int_columns: frozenset[str]) -> None:
        names = list(columns)
        values = [column_values(columns[c], c in int_columns) for c in names]
        rows = [list(r) for r in zip(nodes.uid, *values)]
        sets = ", ".join(f"n.{c} = r[{1 + j}]" for j, c in enumerate(names))
        query = (
            f"UNWIND $rows AS r MATCH (n:{label} {{trace: $trace, uid: r[0]}}) "
            f"USING INDEX SEEK n:{label}(trace, uid) SET {sets}"
        )
        for i in range(0, len(rows), BATCH_ROWS):
            self.publisher.run(query, {"rows": rows[i : i + BATCH_ROWS], "trace": self.target}, write=True)

    def finish(self, trace_props: dict[str, Any], catalog: list[NodeTable]) -> dict[str, dict[str, int]]:
        pub, name, target = self.publisher, self.name, self.target
        try:
            pub.run(
                "MATCH (t:Trace {trace: $target, uid: 'trace'}) SET t += $props",
                {"target": target, "props": {k: v for k, v in trace_props.items() if v is not None}},
                write=True,
            )
            checkpoint("load-written")
            if target == name:
                pub.run(
                    "MATCH (t:Trace {trace: $name, uid: 'trace'}) SET t.status = 'ready' REMOVE t.lease",
                    {"name": name},
                    write=True,
                )
            else:
                pub._swap(name, target, f"{name}~drop~{self.lease_id}", self.lease_id)
            checkpoint("load-published")
        except BaseException:
            self.abort()
            raise
        self.done = True
        self.lease.__exit__()
        counts: dict[str, dict[str, int]] = json.loads(trace_props["counts"])
        return counts

    def abort(self) -> None:
        """A swap under way is left for the next sweep to finish (the new
        version is complete); anything else is removed."""
        if self.done:
            return
        self.done = True
        try:
            with contextlib.suppress(DatabaseError, QueryError):
                if self.target == self.name or self.publisher._status(self.name) != "swapping":
                    self.publisher._delete_all(self.target)
        finally:
            self.lease.__exit__()


class _Lease:
    """An open, idle transaction whose metadata names ``lease_id``: proof,
    for as long as this process lives, that its load or drop is alive."""

    def __init__(self, graph: Publisher, lease_id: str) -> None:
        self.graph, self.lease_id = graph, lease_id

    def __enter__(self) -> _Lease:
        driver = self.graph.graph._driver
        self.session = driver.session(database=self.graph.graph._database, default_access_mode="READ")
        self.tx = self.session.begin_transaction(metadata={LEASE_KEY: self.lease_id})
        self.tx.run("RETURN 1").consume()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.tx.close()
        finally:
            self.session.close()


def write_part(graph: Publisher, trace: str, tables: TraceTables, progress: Progress | None) -> None:
    """The passes of :mod:`load_plan` as ``UNWIND`` batches of positional
    rows (a null is a property not set), the other ends of relationships
    found through the (trace, uid) constraint's index. The batches of a
    pass go ``IN_FLIGHT`` at a time, each in its own transaction (the
    server runs a transaction on one core); a pass starts when the one
    before it is complete. Counts are checked per batch."""
    ints, bools = tables.int_columns, tables.bool_columns
    total = tables.elements()
    tables_frames = load_plan.frames(tables)
    uids = load_plan.uids(tables)
    done = 0
    with concurrent.futures.ThreadPoolExecutor(max(IN_FLIGHT, 1), thread_name_prefix="tracegraph-load") as pool:
        for p in load_plan.passes(tables):
            work: dict[concurrent.futures.Future[None], int] = {}  # a batch -> its graph elements
            frame = tables_frames[p.table]
            for g in load_plan.groups(p, tables_frames, ints, bools):
                query = _pass_query(p, g)
                head = (
                    [] if p.label is not None else [take(uids[p.anchor_label], ends(frame, p.anchor)[g.rows]).tolist()]
                )
                head += [take(uids[rel.other], ends(frame, rel.column)[g.rows]).tolist() for rel in g.rels]
                rows = [list(r) for r in zip(*head, *g.values)]
                rels = load_plan.relationships_per_row(p, g)
                per_row = load_plan.elements_per_row(p, g)
                for i in range(0, len(rows), BATCH_ROWS):
                    batch = rows[i : i + BATCH_ROWS]
                    want = {
                        "nodes_created": len(batch) if p.label is not None else 0,
                        "relationships_created": len(batch) * rels,
                    }
                    future = pool.submit(_batch, graph, query, batch, trace, want, p.label or p.anchor_label)
                    work[future] = len(batch) * per_row
            try:
                for future in concurrent.futures.as_completed(work):
                    future.result()
                    done += work[future]
                    if progress:
                        progress(done, total)
            except BaseException:
                for future in work:
                    future.cancel()
                concurrent.futures.wait(work)
                raise


def _batch(graph: Publisher, query: str, rows: list[list[Any]], trace: str, want: dict[str, int], what: str) -> None:
    res = graph.run(query, {"rows": rows, "trace": trace}, write=True)
    got = {k: res.stats.get(k, 0) for k in want}
    if got != want:
        raise DatabaseError(f"Neo4j made {got} of {want} in a batch of {what}")


def _pass_query(p: load_plan.Pass, g: load_plan.Group) -> str:
    """Rows are ``[anchor uid (relationship passes), other ends' uids...,
    values...]``; every existing node is found by its (trace, uid)."""
    ends = [f"x{k}" for k in range(len(g.rels))]
    lookups = ([] if p.label is not None else [("a", p.anchor_label)]) + [(e, r.other) for e, r in zip(ends, g.rels)]
    member = p.member is not None and p.label is not None
    # The hints pin the (trace, uid) seeks. Without them, a plan made while
    # the database (or a label) was empty, with every estimate at 0 rows,
    # may scan the whole index for every row instead, and plans are cached:
    # the first trace into a fresh or emptied database took 7x as long as
    # the next (bench/RESULTS.md). USING INDEX alone is no cure: an index
    # scan satisfies it; USING INDEX SEEK does not.
    q = ["MATCH (t:Trace {trace: $trace, uid: 'trace'}) USING INDEX SEEK t:Trace(trace, uid)"] if member else []
    q.append("UNWIND $rows AS r")
    q += [
        f"MATCH ({v}:{label} {{trace: $trace, uid: r[{k}]}}) USING INDEX SEEK {v}:{label}(trace, uid)"
        for k, (v, label) in enumerate(lookups)
    ]
    q += load_plan.creates(p, g, "n" if p.label is not None else "a", ends, len(lookups))
    return " ".join(q)
