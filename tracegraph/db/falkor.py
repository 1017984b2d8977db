"""FalkorDB through its own client (``falkordb``), embedded or remote.

Layout (``P`` is the graph name of the URI, ``tracegraph`` by default):

* ``P:trace:NAME``: one graph per trace, holding exactly the nodes and
  relationships Neo4j holds for that trace, so one Cypher text fits both;
* ``P``: the catalog graph: a copy of every trace's ``Trace`` and
  ``OpTotals`` nodes, which listing and the cross-trace analyses read;
* ``P:load:ID``: a load in progress, owned by the client connection named
  ``tracegraph-load:ID`` (the lease: it dies with the loader's process);
* ``P:jobs``: the ingest jobs of every API process (:mod:`tracegraph.db.falkor_jobs`);
* ``P:layout``: the layout's version (:mod:`tracegraph.db.falkor_layout`).

Why a graph per trace: FalkorDB 4.16 corrupts a graph that has deleted
node slots below live nodes past id 16,384 once the graph goes through an
RDB round trip (``tests/falkordb_slot_repro.py``). tracegraph never
deletes a node: a load writes a fresh key, a replace is a RENAME over the
old key and a drop removes the whole key, each together with its catalog
update in one MULTI/EXEC, which is atomic for readers and in the
append-only file alike. Catalog nodes of dropped traces stay as
tombstones (``status: 'dropped'``, no other property) for the same reason.

Why graph keys are removed with GRAPH.DELETE, never UNLINK (or DEL on a
server that frees lazily): FalkorDB 4.16 keeps a list of the graphs in the
keyspace, and a graph freed after its "del" notification is taken off that
list twice. The second removal drops another, live graph from the list;
when it runs on Redis's background thread it races the main thread, the
list's length wraps and the next graph created crashes the server (seen in
CI: ``Globals_AddGraph``, signal 11). GRAPH.DELETE sends no notification.
``tests/test_falkordb_layout.py`` checks the list after drops and sweeps.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import redis
from falkordb import FalkorDB
from falkordb import Graph as FGraph
from falkordb.edge import Edge
from falkordb.helpers import stringify_param_value
from falkordb.node import Node
from falkordb.path import Path as FPath

from tracegraph import schema
from tracegraph.db.base import (
    CATALOG_LABELS,
    CLUSTER_REFUSED,
    Deadline,
    Graph,
    Link,
    NodeRefs,
    NodeTable,
    PartWriter,
    PlanStep,
    Progress,
    RelTable,
    Result,
    TraceTables,
    check_trace_name,
    checkpoint,
    name_taken,
    rows_query,
)
from tracegraph.db.elements import node_value, path_value, plain, relationship_value
from tracegraph.db.falkor_layout import check_layout
from tracegraph.db.falkor_wait import Liveness, connection_pool
from tracegraph.errors import (
    BadRequest,
    Conflict,
    DatabaseError,
    NotFound,
    QueryError,
    QueryTimeout,
    ReadOnlyViolation,
    UserError,
    first_line,
)

if TYPE_CHECKING:  # numpy and the columns: only loads use them; a CLI query must not pay their import
    import numpy as np

    from tracegraph.columns import Table

_SEP = "\x1f"  # ASCII unit separator: read_columns' column joiner
# What a NUL character in a string is stored as, by either loader: FalkorDB's
# strings end at NUL (in a statement's text and in a bulk insert's blobs).
NUL_SIGN = "\u2400"
LEASE_PREFIX = "tracegraph-load:"
# How much of the end of the embedded server's log holds a crash report's start.
CRASH_REPORT_TAIL = 256 * 1024
# Embedded: rewrite the append-only file once loads have grown it by this
# much (see _compact_log): after a load by statements (they replay slowly) ...
AOF_COMPACT_BYTES = 8 << 20
# ... and after bulk loads, by this much and by the size of the last rewrite
# (an unused server's reaper rewrites it sooner: embedded.rewrite_log).
AOF_COMPACT_BULK_BYTES = 4 << 30

T = TypeVar("T")


class FalkorGraph(Graph):
    """A tracegraph database on one FalkorDB server. ``backend`` is
    ``falkordb`` (a server the user runs) or ``embedded``."""

    def __init__(
        self,
        *,
        host: str | None = None,
        port: int | None = None,
        unix_socket: str | None = None,
        prefix: str = "tracegraph",
        backend: str = "falkordb",
        on_close: Callable[[], None] | None = None,
        where: str | None = None,
        server_log: Path | None = None,
        on_wedged: Callable[[], str] | None = None,
    ) -> None:
        self.backend = backend
        self.prefix = prefix
        self._on_close = on_close
        self.where = where or unix_socket or f"{host}:{port}"  # for messages: which server
        self._server_log = server_log
        self._address = (
            {"unix_socket_path": unix_socket} if unix_socket else {"host": host or "localhost", "port": port or 6379}
        )
        self._liveness = Liveness(self._address, self.where, ready=_loaded_by(server_log), on_wedged=on_wedged)
        try:
            self._db = FalkorDB(connection_pool=connection_pool(self._address, self._liveness))
            self._redis = self._db.connection
            self._redis.ping()
        except redis.RedisError as e:
            self._liveness.close()
            raise DatabaseError(f"cannot reach FalkorDB at {self.where}: {first_line(e)}") from None
        except BaseException:
            self._liveness.close()
            raise
        self._deadline = Deadline()
        check_layout(self._redis, self.prefix, self.where, self.backend)

    @property
    def connection(self) -> redis.Redis:
        """The client connection (its pool), for what this database keeps
        besides graphs (tracegraph/db/falkor_jobs.py)."""
        client: redis.Redis = self._redis
        return client

    def _lost(self, e: redis.ConnectionError | redis.TimeoutError) -> DatabaseError:
        """The error for a connection that broke: with where the server's
        crash report is, when the server we run crashed."""
        crashed = ""
        if self._server_log is not None:
            with contextlib.suppress(OSError), self._server_log.open("rb") as f:
                f.seek(max(0, f.seek(0, os.SEEK_END) - CRASH_REPORT_TAIL))
                tail = f.read()
                crash = max(tail.rfind(b"crashed by signal"), tail.rfind(b"BUG REPORT START"))
                if crash > tail.rfind(b"Redis is starting"):
                    crashed = f" (the server crashed: its report is in {self._server_log})"
        return DatabaseError(f"lost connection to FalkorDB at {self.where}: {first_line(e).rstrip('.')}{crashed}")

    # -- keys --------------------------------------------------------------

    def _trace_key(self, name: str) -> str:
        return f"{self.prefix}:trace:{name}"

    def _load_key(self, load_id: str) -> str:
        return f"{self.prefix}:load:{load_id}"

    # -- statements --------------------------------------------------------

    def _run(
        self, query: str, params: dict[str, Any], trace: str | None, write: bool, timeout_ms: int | None
    ) -> Result:
        return self._query(self._graph_key(trace), query, params, write=write, timeout_ms=timeout_ms)

    def _graph_key(self, trace: str | None) -> str:
        """The graph a statement about ``trace`` runs on: the trace's (NotFound
        when it has none), else the catalog's."""
        if trace is None:
            return self.prefix
        key = self._trace_key(trace)
        if not self._redis.exists(key):
            raise NotFound(f"no trace named {trace!r}")
        return key

    def _plan(self, query: str, params: dict[str, Any], trace: str | None, timeout_ms: int | None) -> list[PlanStep]:
        from tracegraph.db.falkor_plan import plan_steps

        key = self._graph_key(trace)
        text = _with_params(query, _clean(params)) if params else query

        def explain() -> list[str]:
            try:
                return list(self._redis.execute_command("GRAPH.EXPLAIN", key, text))
            except (redis.ConnectionError, redis.TimeoutError) as e:
                raise self._lost(e) from None
            except redis.ResponseError as e:
                raise _query_error(e) from None

        lines = self._deadline.run(timeout_ms, explain) if timeout_ms else explain()
        return plan_steps(lines, query)

    def _query(
        self, key: str, query: str, params: dict[str, Any] | None, *, write: bool, timeout_ms: int | None = None
    ) -> Result:
        if not timeout_ms:
            return self._statement(key, query, params, write=write)
        return self._deadline.run(timeout_ms, self._statement, key, query, params, write=write, timeout_ms=timeout_ms)

    def _statement(
        self, key: str, query: str, params: dict[str, Any] | None, *, write: bool, timeout_ms: int | None = None
    ) -> Result:
        # A fresh client-side Graph per statement: its cache of label and
        # property names must not outlive a replace of the key by anyone.
        graph = FGraph(self._db, key)
        try:
            if write:
                res = graph.query(query, _clean(params) if params else None, timeout=timeout_ms)
            else:
                res = graph.ro_query(query, _clean(params) if params else None, timeout=timeout_ms)
        except (redis.ConnectionError, redis.TimeoutError) as e:
            raise self._lost(e) from None
        except redis.ResponseError as e:
            raise _query_error(e) from None
        except (ValueError, TypeError) as e:  # the client cannot send these parameters
            raise QueryError(f"FalkorDB cannot take these parameters: {first_line(e)}") from None
        columns = [h[1] if isinstance(h, (list, tuple)) else str(h) for h in (res.header or [])]
        rows = [[_value(v) for v in row] for row in (res.result_set or [])]
        stats = {
            "nodes_created": res.nodes_created,
            "relationships_created": res.relationships_created,
            "nodes_deleted": res.nodes_deleted,
            "relationships_deleted": res.relationships_deleted,
            "properties_set": res.properties_set,
        }
        return Result(columns=columns, rows=rows, stats={k: int(v or 0) for k, v in stats.items()})

    def trace_facts(self, name: str) -> dict[str, Any] | None:
        res = self.run("MATCH (t:Trace {trace: $name, uid: 'trace'}) WHERE t.status = 'ready' RETURN t", {"name": name})
        return res.rows[0][0]["properties"] if res.rows else None

    def list_traces(self) -> list[dict[str, Any]]:
        res = self.run("MATCH (t:Trace) WHERE t.status = 'ready' RETURN t ORDER BY t.trace")
        return [r[0]["properties"] for r in res.rows]

    def read_columns(
        self, trace: str, label: str, columns: dict[str, type], where: str = "", timeout_ms: int | None = None
    ) -> list[tuple[Any, ...]]:
        """Each column comes back as one string (``string.join``, which Neo4j
        lacks): decoding 100k rows of six values costs ~0.8 s in RESP parsing,
        six strings ~0.3 s. A value holding the separator falls back to rows."""
        text = (
            f"MATCH (n:{label} {{trace: $trace}})"
            + (f" WHERE {where}" if where else "")
            + " RETURN "
            + ", ".join(f"string.join(collect(coalesce(toString(n.{c}), '')), $sep)" for c in columns)
        )
        joined = self.run(text, {"sep": _SEP}, trace=trace, timeout_ms=timeout_ms).rows[0]
        if (not joined or not joined[0]) and not self.run(
            f"MATCH (n:{label} {{trace: $trace}})" + (f" WHERE {where}" if where else "") + " RETURN count(n)",
            trace=trace,
            timeout_ms=timeout_ms,
        ).rows[0][0]:
            return []
        parts = [(text or "").split(_SEP) for text in joined]
        if len({len(p) for p in parts}) != 1:
            res = self.run(rows_query(label, columns, where), trace=trace, timeout_ms=timeout_ms)
            return [tuple(None if v is None else kind(v) for v, kind in zip(row, columns.values())) for row in res.rows]
        cols = [[kind(x) if x != "" else None for x in values] for values, kind in zip(parts, columns.values())]
        return list(zip(*cols))

    # -- storing -----------------------------------------------------------

    def trace_exists(self, name: str) -> bool:
        return bool(self._redis.exists(self._trace_key(name)))

    def store_trace(
        self, name: str, tables: TraceTables, *, replace: bool = False, progress: Progress | None = None
    ) -> dict[str, dict[str, int]]:
        """One part, by bulk insert; by statements when a value cannot travel
        in bulk (the bulk graph removed first)."""
        from tracegraph.db.falkor_bulk import NotBulkable
        from tracegraph.db.values import as_tables

        tables = as_tables(tables)
        catalog = [t for t in tables.nodes if t.label in CATALOG_LABELS]
        for cypher in (False, True):
            load = self.begin_trace(name, replace=replace, cypher=cypher)
            try:
                load.part(tables, progress)
                return load.finish(tables.trace_props, catalog)
            except NotBulkable:
                load.abort()
                continue
            except BaseException:
                load.abort()
                raise
        raise AssertionError("unreachable: the statement loader takes every value")

    def begin_trace(self, name: str, *, replace: bool = False, cypher: bool = False) -> FalkorLoad:
        check_trace_name(name)
        self.sweep()
        if not replace and self.trace_exists(name):
            raise name_taken(name)
        load_id = uuid.uuid4().hex
        lease = redis.Redis(
            connection_pool=connection_pool(self._address, self._liveness, client_name=LEASE_PREFIX + load_id),
            single_connection_client=True,
        )
        try:
            lease.ping()  # the lease holds from here until the connection closes
        except redis.RedisError as e:
            lease.close()
            raise DatabaseError(f"cannot reach FalkorDB at {self.where}: {first_line(e)}") from None
        cypher = cypher or os.environ.get("TRACEGRAPH_FALKORDB_LOADER", "bulk") == "cypher"
        return FalkorLoad(self, name, self._load_key(load_id), lease, replace, cypher)

    def _bulk_send(self, command: Iterator[bytes]) -> Any:
        """One GRAPH.BULK command, given packed and in pieces (streamed from
        the bulk loader's spool, see :class:`falkor_bulk.Writer`)."""
        pool = self._redis.connection_pool
        conn = None
        try:
            conn = pool.get_connection()
            conn.send_packed_command(command)
            return conn.read_response()
        except (redis.ConnectionError, redis.TimeoutError) as e:
            raise self._lost(e) from None
        except redis.ResponseError as e:
            text = first_line(e)
            # (redis-py strips the NOPERM of an ACL refusal into its exception's type)
            refused = isinstance(e, redis.exceptions.NoPermissionError) or "noperm" in text.lower()
            if refused or "unknown command" in text.lower():
                raise _NoBulkInsert(text) from None  # a server without GRAPH.BULK for us: statements then
            raise DatabaseError(f"FalkorDB refused a bulk insert: {text}") from None
        finally:
            if conn is not None:
                pool.release(conn)

    def _publish(
        self, key: str, name: str, props: dict[str, Any], catalog: list[NodeTable], replace: bool, ints: frozenset[str]
    ) -> None:
        """RENAME the load over the trace's key and update the catalog, in one
        MULTI/EXEC; without ``replace`` the trace's key is WATCHed, so that a
        trace of that name published meanwhile makes this one fail."""
        target = self._trace_key(name)
        from tracegraph.db.values import row_dicts

        rows = [("Trace", {**props, "trace": name, "uid": "trace", "status": "ready"})]
        for t in catalog:
            for row in row_dicts(t.frame, ["uid", *t.columns], ints):
                rows.append((t.label, {**row, "trace": name}))
        with self._redis.pipeline(transaction=True) as pipe:
            try:
                if not replace:
                    pipe.watch(target)
                    if pipe.exists(target):
                        raise name_taken(name)
                pipe.multi()
                pipe.rename(key, target)
                for label, node in rows:
                    pipe.execute_command(
                        "GRAPH.QUERY",
                        self.prefix,
                        _with_params(
                            f"MERGE (n:{label} {{trace: $trace, uid: $uid}}) SET n = $props",
                            {"trace": name, "uid": node["uid"], "props": _clean(node)},
                        ),
                    )
                replies = pipe.execute(raise_on_error=False)
            except redis.WatchError:
                raise Conflict(f"trace {name!r} was stored by another process meanwhile") from None
        failed = [r for r in replies if isinstance(r, Exception)]
        if failed:
            raise DatabaseError(f"FalkorDB did not publish trace {name!r}: {first_line(failed[0])}")

    def _delete_graph(self, key: str) -> None:
        """Remove graph ``key`` if it is there (see the module's docstring for why not UNLINK)."""
        try:
            self._redis.execute_command("GRAPH.DELETE", key)
        except redis.ResponseError as e:
            if not _no_such_graph(e):
                raise

    def drop_trace(self, name: str) -> int:
        key = self._trace_key(name)
        res = self._query(
            self.prefix,
            "MATCH (t:Trace {trace: $trace, uid: 'trace'}) WHERE t.status = 'ready' RETURN t.node_count",
            {"trace": name},
            write=False,
        )
        if not res.rows or not self._redis.exists(key):
            raise NotFound(f"no trace named {name!r}")
        checkpoint("drop-started")
        with self._redis.pipeline(transaction=True) as pipe:
            pipe.execute_command("GRAPH.DELETE", key)
            pipe.execute_command(
                "GRAPH.QUERY",
                self.prefix,
                _with_params(
                    "MATCH (n {trace: $trace}) WHERE n:Trace OR n:OpTotals "
                    "SET n = {trace: $trace, uid: n.uid, status: 'dropped'}",
                    {"trace": name},
                ),
            )
            deleted, tombstoned = pipe.execute(raise_on_error=False)
        if isinstance(deleted, redis.ResponseError) and _no_such_graph(deleted):
            raise NotFound(f"no trace named {name!r}")  # dropped by another process meanwhile
        for reply in (deleted, tombstoned):
            if isinstance(reply, Exception):
                raise DatabaseError(f"FalkorDB did not drop trace {name!r}: {first_line(reply)}")
        checkpoint("drop-done")
        return int(res.rows[0][0] or 0)

    def sweep(self) -> list[str]:
        """Remove loads whose loader is gone (no client holds their lease)."""
        try:
            live = {
                c.get("name", "")[len(LEASE_PREFIX) :]
                for c in self._redis.client_list()
                if c.get("name", "").startswith(LEASE_PREFIX)
            }
            removed = []
            for raw in self._redis.scan_iter(match=self._load_key("*"), count=1000):
                key = raw.decode() if isinstance(raw, bytes) else raw
                if key.rsplit(":", 1)[-1] not in live:
                    self._delete_graph(key)
                    removed.append(key)
        except redis.RedisError as e:
            raise DatabaseError(f"FalkorDB at {self.where}: {first_line(e)}") from None
        return removed

    def _compact_log(self, wait: bool) -> None:
        """Embedded only: rewrite the append-only file as a snapshot once
        loads have grown it enough (:func:`~tracegraph.db.embedded.rewrite_log`),
        and with ``wait`` (after a load by statements) wait for the rewrite.

        The next server start then loads the graphs instead of replaying
        every load. A Cypher load's statements replay slowly: after one, the
        log is rewritten once it has grown by AOF_COMPACT_BYTES, and the
        rewrite is waited for (the server may stop soon after this process
        leaves, and stopping kills a rewrite). A bulk load replays about as
        fast as the snapshot loads (8 x 16 MB rank files: a start in 1.0 s
        against 0.6 s), while a rewrite stalls the server for its fork (on
        this project's VMs 0.25 s at 500 MB, 2.4 s at 2.6 GB: every client
        waits) and writes out every stored trace: a bulk load leaves the
        rewrite to the reaper, once nobody uses the server, and does it
        here only for a server that is never left unused (``tracegraph
        serve``), once loads have appended AOF_COMPACT_BULK_BYTES and what
        the last rewrite wrote."""
        if self.backend != "embedded":
            return
        from tracegraph.db.embedded import rewrite_log, rewriting

        try:
            if not rewrite_log(self._redis, AOF_COMPACT_BYTES if wait else AOF_COMPACT_BULK_BYTES, relative=not wait):
                return
            if not wait:
                return
            deadline = time.monotonic() + 600
            while time.monotonic() < deadline and rewriting(self._redis):
                time.sleep(0.05)
        except redis.RedisError:
            return  # compaction is an optimization, never fatal

    # -- the rest of the interface ----------------------------------------

    def version(self) -> str:
        info = self._redis.info("server")
        mods = self._redis.execute_command("MODULE", "LIST")
        graph_ver = next(
            (
                m[b"ver"] if isinstance(m, dict) else m[3]
                for m in mods
                if (m.get(b"name") if isinstance(m, dict) else m[1]) in (b"graph", "graph")
            ),
            None,
        )
        return f"redis {info.get('redis_version')}, FalkorDB module {graph_ver}"

    def close(self) -> None:
        self._deadline.close()
        try:
            self._redis.close()
            self._liveness.close()
        finally:
            if self._on_close:
                self._on_close()
                self._on_close = None


class FalkorLoad:
    """A trace being written in parts into a graph of its own (``P:load:ID``)
    under a lease, published by :meth:`finish` (see
    :meth:`FalkorGraph.begin_trace`). Parts are written one at a time (a
    lock): the server numbers nodes in the order they arrive, and a part's
    relationships name its nodes by those numbers.

    A job's ranks are written one at a time too (``parts_at_once``): the
    server inserts on one thread, and one rank's write in the client keeps
    it busy. On 2 cores shared with the server, a second rank written
    beside the first made 8- and 64-rank jobs no faster and held a second
    rank's tables at the client's peak, 23-30 MB more (bench/RESULTS.md).
    With more cores, its work outside the lock (join, enrichment, graph)
    could overlap the first rank's: not measured yet."""

    parts_at_once: int | None = 1

    def __init__(
        self, graph: FalkorGraph, name: str, key: str, lease: redis.Redis, replace: bool, cypher: bool
    ) -> None:
        self.graph = graph
        self.name = name
        self.key = key
        self.lease = lease
        self.replace = replace
        self.cypher = cypher
        self.lock = threading.Lock()
        self.started = False
        self.done = False
        self.writer: Any = None  # falkor_bulk.Writer once started, by bulk insert
        self.nodes = 1  # written so far, the Trace node's included
        self.rels = 0
        self.first: list[dict[str, int]] = []  # per part: each label's first node id (bulk)
        self.ids: list[dict[str, np.ndarray]] = []  # per part: each label's node ids (statements)

    def _start(self) -> None:
        """Create the load's graph with its Trace node."""
        from tracegraph.db import falkor_bulk

        props = {"trace": self.name, "uid": "trace", "status": "loading"}
        if not self.cypher:
            writer = falkor_bulk.Writer(self.graph._bulk_send, self.key)
            try:
                writer.add_nodes(
                    falkor_bulk.header("Trace", list(props)) + b"".join(falkor_bulk._value(v) for v in props.values()),
                    1,
                )
                writer.flush()
                writer.wait()
                self.writer = writer
            except _NoBulkInsert:
                writer.close()
                self.graph._delete_graph(self.key)
                self.cypher = True
        if self.cypher:
            res = self.graph._query(
                self.key, "CREATE (t:Trace) SET t = $props RETURN id(t)", {"props": props}, write=True
            )
            if int(res.rows[0][0]) != 0:
                raise DatabaseError("FalkorDB gave the load's Trace node an id other than 0")
        self.started = True
        checkpoint("load-started")

    def part(self, tables: TraceTables, progress: Progress | None = None) -> int:
        import numpy as np

        from tracegraph.db import falkor_bulk, falkor_load
        from tracegraph.db.values import as_tables

        tables = as_tables(tables)
        with self.lock:
            if not self.started:
                self._start()
            member = {label: rel for rel, label in tables.membership}
            if self.cypher:

                def run_write(query: str, params: dict[str, Any] | None) -> Result:
                    return self.graph._query(self.key, query, params, write=True)

                ids = falkor_load.load(run_write, self.name, 0, tables, progress)
                self.ids.append(ids)
                self.first.append({})
            else:
                first: dict[str, int] = {}
                at = self.nodes
                for t in tables.nodes:
                    first[t.label] = at
                    at += t.frame.n
                rels = []
                for r in tables.rels:
                    src, dst = r.ends()
                    keep = (src >= 0) & (dst >= 0)
                    rels.append(
                        (
                            r if keep.all() else _rows_of(r, keep),
                            (src[keep] + first[r.start]).astype(np.uint64),
                            (dst[keep] + first[r.end]).astype(np.uint64),
                        )
                    )
                falkor_bulk.load_part(
                    self.writer,
                    tables.nodes,
                    rels,
                    member,
                    first,
                    self.name,
                    tables.int_columns,
                    tables.bool_columns,
                    progress,
                    0,
                    tables.elements(),
                )  # (sent when the writer's spool is due: calls grow with the graph)
                self.first.append(first)
                self.ids.append({})
            self.nodes += sum(t.frame.n for t in tables.nodes)
            self.rels += sum(r.count() for r in tables.rels) + sum(t.frame.n for t in tables.nodes if t.label in member)
            return len(self.first) - 1

    def _node_ids(self, label: str, refs: NodeRefs) -> np.ndarray:
        import numpy as np

        out = np.empty(len(refs), dtype=np.int64)
        part = np.asarray(refs.part, dtype=np.int64)
        row = np.asarray(refs.row, dtype=np.int64)
        for p in np.unique(part).tolist():
            sel = part == p
            if self.cypher:
                out[sel] = self.ids[p][label][row[sel]]
            else:
                out[sel] = self.first[p][label] + row[sel]
        return out

    def link(self, links: list[Link], progress: Progress | None = None) -> None:
        import numpy as np

        from tracegraph.db import falkor_bulk

        with self.lock:
            for ln in links:
                if not len(ln.src):
                    continue
                src = self._node_ids(ln.start, ln.src)
                dst = self._node_ids(ln.end, ln.dst)
                if self.cypher:
                    from tracegraph.db.values import column_values

                    values = [column_values(ln.props[c], c in ("step", "rank")) for c in ln.columns] if ln.props else []
                    props = ", ".join(f"{c}: r[{2 + j}]" for j, c in enumerate(ln.columns))
                    query = (
                        "UNWIND $rows AS r WITH r[0] AS i, r[1] AS j, r MATCH (a) WHERE id(a) = i MATCH (b) WHERE id(b) = j "
                        f"CREATE (a)-[:{ln.type}{' {' + props + '}' if props else ''}]->(b)"
                    )
                    rows = [list(r) for r in zip(src.tolist(), dst.tolist(), *values)]
                    for i in range(0, len(rows), 10000):
                        self.graph._query(self.key, query, {"rows": rows[i : i + 10000]}, write=True)
                else:
                    for count, data in falkor_bulk.edge_blobs(
                        ln.type,
                        src.astype(np.uint64),
                        dst.astype(np.uint64),
                        ln.props,
                        ln.columns,
                        frozenset({"step", "rank"}),
                    ):
                        self.writer.add_edges(data, count)
                    self.writer.flush()
                self.rels += len(ln.src)

    def update(self, label: str, nodes: NodeRefs, columns: Table, int_columns: frozenset[str]) -> None:
        from tracegraph.db.values import column_values

        with self.lock:
            if self.writer is not None:
                self.writer.flush()
                self.writer.wait()
            ids = self._node_ids(label, nodes)
            names = list(columns)
            values = [column_values(columns[c], c in int_columns) for c in names]
            sets = ", ".join(f"n.{c} = r[{1 + j}]" for j, c in enumerate(names))
            # (id(n) = r[0] would scan every node: FalkorDB seeks by id only for a plain variable)
            query = f"UNWIND $rows AS r WITH r[0] AS i, r MATCH (n) WHERE id(n) = i SET {sets}"
            rows = [list(r) for r in zip(ids.tolist(), *values)]
            for i in range(0, len(rows), 10000):
                self.graph._query(self.key, query, {"rows": rows[i : i + 10000]}, write=True)

    def finish(self, trace_props: dict[str, Any], catalog: list[NodeTable]) -> dict[str, dict[str, int]]:
        try:
            with self.lock:
                if not self.started:
                    self._start()
                if self.writer is not None:
                    self.writer.flush()
                    self.writer.wait()
                props = {**_clean(trace_props), "trace": self.name, "uid": "trace", "status": "ready"}
                self.graph._query(
                    self.key, "MATCH (t:Trace) WHERE id(t) = 0 SET t = $props", {"props": props}, write=True
                )
                self._verify()
                checkpoint("load-written")
                self.graph._publish(self.key, self.name, trace_props, catalog, self.replace, schema.int_columns())
                checkpoint("load-published")
        except BaseException:
            self.abort()
            raise
        self.done = True
        self._close()
        self.graph._compact_log(wait=self.cypher)
        counts: dict[str, dict[str, int]] = json.loads(trace_props["counts"])
        return counts

    def _verify(self) -> None:
        """The load's graph holds exactly what was written (a lease lost to a
        server restart, and a sweep that removed the key, would show here)."""
        got = self.graph._query(self.key, "MATCH (n) RETURN count(n)", None, write=False).rows[0][0]
        got_rels = self.graph._query(self.key, "MATCH ()-[r]->() RETURN count(r)", None, write=False).rows[0][0]
        if (got, got_rels) != (self.nodes, self.rels):
            raise DatabaseError(
                f"the load of this trace lost data on the server ({got} of {self.nodes} nodes, "
                f"{got_rels} of {self.rels} relationships); nothing was published"
            )

    def share(self, count: int) -> list[PartWriter]:
        """Refused: the server numbers a load's nodes in the order they
        arrive, so its parts go through this process, one at a time (and
        the embedded server's socket is local to this machine)."""
        raise BadRequest(CLUSTER_REFUSED)

    def abort(self) -> None:
        if self.done:
            return
        self.done = True
        try:
            # (if the server is gone too, the next sweep removes it: its lease went with this process)
            with contextlib.suppress(redis.RedisError, DatabaseError):
                if self.writer is not None:
                    with contextlib.suppress(Exception):
                        self.writer.close()
                self.graph._delete_graph(self.key)
        finally:
            self._close()

    def _close(self) -> None:
        if self.writer is not None:
            with contextlib.suppress(Exception):
                self.writer.close()
            self.writer = None
        self.lease.close()


def _rows_of(r: RelTable, keep: np.ndarray) -> RelTable:
    """``r`` restricted to the rows ``keep``: only the columns it writes are
    taken (its frame is often a whole node table)."""
    from tracegraph.columns import Table

    names = dict.fromkeys((r.src, r.dst, *r.columns))
    frame = Table(r.frame.n, {k: r.frame[k] for k in names if k in r.frame})
    return RelTable(r.type, r.start, r.end, r.table, frame.where(keep), r.src, r.dst, r.columns)


def _loaded_by(server_log: Path | None) -> Callable[[], bool] | None:
    """For the server we run: has it finished loading its data (its log
    says so)? See :class:`~tracegraph.db.falkor_wait.Liveness`."""
    if server_log is None:
        return None
    from tracegraph.db.embedded import loaded

    return lambda: loaded(server_log)


def _no_such_graph(e: redis.ResponseError) -> bool:
    """Is ``e`` GRAPH.DELETE's answer for a key that holds no graph?"""
    return "empty key" in str(e)


class _NoBulkInsert(Exception):
    """The server has no GRAPH.BULK, or this user may not run it."""


def _with_params(query: str, params: dict[str, Any]) -> str:
    """A statement with its parameters in the ``CYPHER k=v`` header, as the
    client would send it (for statements sent inside MULTI/EXEC)."""
    return "CYPHER " + " ".join(f"{k}={stringify_param_value(v)}" for k, v in params.items()) + " " + query


def _query_error(e: redis.ResponseError) -> UserError:
    text = first_line(e)
    low = text.lower()
    if "timed out" in low or "timeout" in low:
        return QueryTimeout(f"the query timed out: it ran past its time limit ({text})")
    if "read-only" in low or "ro_query" in low or "is a write" in low:
        return ReadOnlyViolation(f"this query may only read: FalkorDB refused a write ({text})")
    return QueryError(f"FalkorDB refused the query: {text}")


def _clean(value: Any) -> Any:
    """NaN/inf are not Cypher literals: send them as null. A NUL character
    would end the statement's text: send it as :data:`NUL_SIGN`, as the
    bulk loader stores it."""
    if isinstance(value, str):
        return value.replace("\x00", NUL_SIGN)
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):  # numpy scalars
        return _clean(value.item())
    return value


def _value(v: Any) -> Any:
    return plain(v, _element)


def _element(v: Any) -> dict[str, Any] | None:
    if isinstance(v, Node):
        return node_value(v.id, v.labels or [], v.properties)
    if isinstance(v, Edge):
        src = v.src_node.id if isinstance(v.src_node, Node) else v.src_node
        dst = v.dest_node.id if isinstance(v.dest_node, Node) else v.dest_node
        return relationship_value(v.id, v.relation, src, dst, v.properties)
    if isinstance(v, FPath):
        return path_value([_value(n) for n in v.nodes()], [_value(e) for e in v.edges()])
    return None
