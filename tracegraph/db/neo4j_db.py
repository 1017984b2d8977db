"""Neo4j 5 through the official ``neo4j`` driver: statements, transactions,
errors and values.

Layout: every trace in one database, told apart by the ``trace`` property
that every node carries; ``(trace, uid)`` is unique per label (constraint)
and ``trace`` is indexed. How a trace is published all or nothing (the
Trace node's status, leases, swaps in batches) is
:mod:`tracegraph.db.neo4j_publish`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any, TypeVar

from neo4j import GraphDatabase, NotificationMinimumSeverity, unit_of_work
from neo4j.exceptions import (
    AuthError,
    ClientError,
    ConfigurationError,
    ConstraintError,
    DriverError,
    Neo4jError,
    ServiceUnavailable,
    SessionExpired,
    TransientError,
)
from neo4j.graph import Node, Path, Relationship

from tracegraph.db.base import LABELS, Deadline, Graph, Load, PlanStep, Progress, Result, TraceTables, rows_query
from tracegraph.db.elements import node_value, path_value, plain, relationship_value
from tracegraph.db.neo4j_publish import Publisher
from tracegraph.errors import (
    Conflict,
    DatabaseError,
    QueryError,
    QueryTimeout,
    ReadOnlyViolation,
    UserError,
    first_line,
)

T = TypeVar("T")

# The driver logs through `logging`; with no handler configured, Python
# would print its warnings on stderr. Users see tracegraph's own one-line
# errors instead (``--debug`` configures logging and shows the driver's).
logging.getLogger("neo4j").addHandler(logging.NullHandler())


class Neo4jGraph(Graph):
    """One Neo4j database (default: the server's default database)."""

    backend = "neo4j"

    def __init__(self, uri: str, auth: tuple[str, str] | None, database: str | None = None) -> None:
        self._uri = uri
        self._auth = auth  # (for the parts a cluster's workers write: neo4j_shared)
        self._database = database
        self._schema_ready = False
        self._deadline = Deadline()
        self._publisher = Publisher(self)
        # Every session of this Graph shares one bookmark manager: a read
        # sees every write made through it before (read-your-writes), also
        # on a cluster (neo4j://, Aura) where reads go to other members.
        self._bookmarks = GraphDatabase.bookmark_manager()
        try:
            self._driver = GraphDatabase.driver(
                uri, auth=auth, user_agent="tracegraph", notifications_min_severity=NotificationMinimumSeverity.OFF
            )
        except (ConfigurationError, ValueError) as e:
            raise DatabaseError(f"bad Neo4j URI {uri!r}: {e}") from None
        try:
            self._check_server()
        except BaseException:
            self._driver.close()
            raise

    def _check_server(self) -> None:
        """One-line errors for the ways a server can be unusable."""
        who = f"Neo4j at {self._uri}"
        try:
            self._driver.verify_connectivity()
            agent = self._driver.get_server_info().agent
            found = re.search(r"/(\d+)\.", agent)
            major = int(found.group(1)) if found else 0
            if major < 5:
                raise DatabaseError(f"{who} is {agent}: tracegraph needs Neo4j 5 or newer")
            self.run("RETURN 1")
        except AuthError:
            raise DatabaseError(
                f"{who} refused the credentials: give them in the URI (neo4j://user:password@host) "
                "or in NEO4J_USER / NEO4J_PASSWORD"
            ) from None
        except (ServiceUnavailable, SessionExpired, OSError) as e:
            raise DatabaseError(f"cannot reach {who}: {first_line(e)}") from None

    # -- statements --------------------------------------------------------

    def _run(
        self, query: str, params: dict[str, Any], trace: str | None, write: bool, timeout_ms: int | None
    ) -> Result:
        if not timeout_ms:
            return self._transaction(lambda tx: _run_in(tx, query, params), write=write)
        # Deadline.run's fn is generic: the return type does not carry through it.
        result: Result = self._deadline.run(
            timeout_ms, self._transaction, lambda tx: _run_in(tx, query, params), write=write, timeout_ms=timeout_ms
        )
        return result

    def _plan(self, query: str, params: dict[str, Any], trace: str | None, timeout_ms: int | None) -> list[PlanStep]:
        def explain(tx: Any) -> tuple[str, dict[str, Any]]:
            summary = tx.run("EXPLAIN " + query, params).consume()
            return summary.database or "", summary.plan or {}

        if timeout_ms:
            database, plan = self._deadline.run(
                timeout_ms, self._transaction, explain, write=False, timeout_ms=timeout_ms
            )
        else:
            database, plan = self._transaction(explain, write=False)
        return plan_steps(plan, database)

    def _transaction(
        self,
        work: Callable[[Any], T],
        *,
        write: bool,
        timeout_ms: int | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> T:
        """``work(tx)`` in one managed transaction (retried on transient errors)."""
        fn = unit_of_work(timeout=timeout_ms / 1000 if timeout_ms else None, metadata=metadata)(work)
        try:
            with self._driver.session(
                database=self._database,
                default_access_mode="WRITE" if write else "READ",
                bookmark_manager=self._bookmarks,
            ) as session:
                return session.execute_write(fn) if write else session.execute_read(fn)
        except (ServiceUnavailable, SessionExpired) as e:
            raise DatabaseError(f"lost connection to Neo4j at {self._uri}: {first_line(e)}") from None
        except AuthError:
            raise DatabaseError(f"Neo4j at {self._uri} refused the credentials") from None
        except Neo4jError as e:
            raise self._error(e) from None
        except DriverError as e:
            raise QueryError(f"Neo4j: {first_line(e)}") from None

    def _error(self, e: Neo4jError) -> UserError:
        code = e.code or ""
        text = first_line(e.message or str(e))
        if code == "Neo.ClientError.Database.DatabaseNotFound":
            return DatabaseError(f"Neo4j at {self._uri} has no database {self._database or '(default)'!r}")
        if code.startswith("Neo.ClientError.Security."):
            return DatabaseError(f"Neo4j at {self._uri} refused access: {text}")
        if code in (
            "Neo.ClientError.Transaction.TransactionTimedOut",
            "Neo.ClientError.Transaction.TransactionTimedOutClientConfiguration",
        ):
            return QueryTimeout(f"the query timed out: it ran past its time limit ({text})")
        if code == "Neo.ClientError.Statement.AccessMode" or "in read access mode" in text:
            return ReadOnlyViolation(f"this query may only read: Neo4j refused a write ({text})")
        if isinstance(e, ConstraintError):
            return Conflict(f"Neo4j refused a duplicate: {text}")
        if isinstance(e, (ClientError, TransientError)):
            return QueryError(f"Neo4j refused the query: {text}")
        return DatabaseError(f"Neo4j failed: {text}")

    def ensure_schema(self) -> None:
        """(trace, uid) unique per label, plus an index on ``trace`` alone;
        ingest jobs unique by id.

        Idempotent, and safe when two processes run it at once: every
        statement is IF NOT EXISTS, and an equivalent schema rule created
        by the other process meanwhile counts as done."""
        if self._schema_ready:
            return
        statements = [
            "CREATE CONSTRAINT ingestjob_id IF NOT EXISTS FOR (j:IngestJob) REQUIRE j.id IS UNIQUE",
        ]
        for label in LABELS:
            low = label.lower()
            statements += [
                f"CREATE CONSTRAINT {low}_key IF NOT EXISTS FOR (n:{label}) REQUIRE (n.trace, n.uid) IS UNIQUE",
                f"CREATE INDEX {low}_trace IF NOT EXISTS FOR (n:{label}) ON (n.trace)",
            ]
        for stmt in statements:
            try:
                self.run(stmt, write=True)
            except (QueryError, Conflict) as e:
                if "already exists" not in str(e) and "equivalent" not in str(e).lower():
                    raise
        self.run("CALL db.awaitIndexes(300)")
        self._schema_ready = True

    def read_columns(
        self, trace: str, label: str, columns: dict[str, type], where: str = "", timeout_ms: int | None = None
    ) -> list[tuple[Any, ...]]:
        res = self.run(rows_query(label, columns, where), trace=trace, timeout_ms=timeout_ms)
        return [tuple(None if v is None else kind(v) for v, kind in zip(row, columns.values())) for row in res.rows]

    # -- storing: the protocol is neo4j_publish's --------------------------

    def trace_facts(self, name: str) -> dict[str, Any] | None:
        return self._publisher.trace_facts(name)

    def list_traces(self) -> list[dict[str, Any]]:
        return self._publisher.list_traces()

    def store_trace(
        self, name: str, tables: TraceTables, *, replace: bool = False, progress: Progress | None = None
    ) -> dict[str, dict[str, int]]:
        return self._publisher.store_trace(name, tables, replace=replace, progress=progress)

    def begin_trace(self, name: str, *, replace: bool = False) -> Load:
        return self._publisher.begin_trace(name, replace=replace)

    def drop_trace(self, name: str) -> int:
        return self._publisher.drop_trace(name)

    def sweep(self) -> list[str]:
        return self._publisher.sweep()

    # -- the rest of the interface ----------------------------------------

    def version(self) -> str:
        info = self._driver.get_server_info()
        return f"{info.agent}"

    def close(self) -> None:
        self._deadline.close()
        self._driver.close()


def plan_steps(plan: dict[str, Any], database: str) -> list[PlanStep]:
    """Neo4j's plan (the driver's dict: ``operatorType`` such as
    ``ProcedureCall@neo4j``, ``args``, ``children``), every operator in
    it, as :class:`PlanStep` values. ``database`` is the one the
    statement was planned in: an operator on another (``@system`` for an
    administration command, or a ``USE``) is a DATABASE step."""
    steps = []
    todo = [plan] if plan else []
    while todo:
        op = todo.pop()
        todo.extend(op.get("children") or [])
        operator = str(op.get("operatorType", ""))
        details = str((op.get("args") or op.get("arguments") or {}).get("Details", ""))
        name, _, on = operator.partition("@")
        if name == "AdministrationCommand":
            steps.append(PlanStep(PlanStep.COMMAND, "", operator))
        elif on and on != database:
            steps.append(PlanStep(PlanStep.DATABASE, on, operator))
        elif name == "LoadCSV":
            steps.append(PlanStep(PlanStep.LOAD_CSV, "", operator))
        elif name == "ProcedureCall":
            # Details: "db.labels() :: (label :: STRING)", the name as the planner resolved it
            steps.append(PlanStep(PlanStep.PROCEDURE, details.split("(", 1)[0].strip(), operator))
        elif name.startswith(("Show", "Terminate")):
            steps.append(PlanStep(PlanStep.COMMAND, " ".join(re.findall(r"[A-Z][a-z]*", name)).upper(), operator))
        elif name in ("TransactionApply", "TransactionForeach"):
            steps.append(PlanStep(PlanStep.IN_TRANSACTIONS, "", operator))
        else:
            steps.append(PlanStep(PlanStep.READ, "", operator))
    return steps


def _run_in(tx: Any, query: str, params: dict[str, Any]) -> Result:
    res = tx.run(query, params)
    keys = list(res.keys())
    rows = [[_value(v) for v in rec.values()] for rec in res]
    c = res.consume().counters
    stats = {
        "nodes_created": c.nodes_created,
        "relationships_created": c.relationships_created,
        "nodes_deleted": c.nodes_deleted,
        "relationships_deleted": c.relationships_deleted,
        "properties_set": c.properties_set,
    }
    return Result(columns=keys, rows=rows, stats=stats)


def _value(v: Any) -> Any:
    return plain(v, _element)


def _element(v: Any) -> dict[str, Any] | None:
    if isinstance(v, Node):
        return node_value(v.element_id, sorted(v.labels), dict(v))
    if isinstance(v, Relationship):
        start, end = v.start_node, v.end_node
        return relationship_value(
            v.element_id, v.type, start.element_id if start else None, end.element_id if end else None, dict(v)
        )
    if isinstance(v, Path):
        return path_value([_value(n) for n in v.nodes], [_value(r) for r in v.relationships])
    return None
