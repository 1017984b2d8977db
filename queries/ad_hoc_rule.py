"""The one rule for ad-hoc statements: they read the trace graph, and
nothing else.

An ad-hoc statement (``POST /cypher``, ``tracegraph cypher``,
``g.cypher(...)``, the web UI) is planned by the database first, never run
to find out, and refused before it runs when its plan holds a step that
reaches beyond the graph:

* ``LOAD CSV`` (any URL: the database server would fetch it, from inside
  its own network);
* a procedure not in :data:`ALLOWED_PROCEDURES` (``dbms.*`` lists the
  server's configuration, connections and queries; plug-ins reach
  anywhere), and on FalkorDB, whose plan does not name the procedure, a
  call tracegraph cannot name (:mod:`tracegraph.db.falkor_plan`);
* a command (``SHOW ...``, ``TERMINATE ...``, users, roles, databases);
* ``CALL { ... } IN TRANSACTIONS`` (it commits as it goes);
* a step on another database than the one tracegraph uses (``USE``).

Why the plan and not the text: the planner is the database's own reading
of the statement, after comments, backticks, escapes, line breaks,
``EXPLAIN``/``PROFILE`` prefixes, ``UNION`` branches and nested subqueries;
a statement the database cannot plan is refused with the database's own
error and never runs. Writes are the database's own business: the
statement runs in a read-only transaction (``GRAPH.RO_QUERY`` on FalkorDB)
unless ``write`` is asked, as before.

A refusal is :class:`~tracegraph.errors.NotAllowed`: HTTP 403, exit 1 on
the command line, one line naming what was refused.
"""

from __future__ import annotations

from tracegraph.db.base import PlanStep
from tracegraph.errors import NotAllowed

# The procedures a trace user needs: each describes the graph's own shape
# (its labels, relationship types, property keys and how they connect) and
# nothing outside it. Neo4j Browser's sidebar and schema view call these.
ALLOWED_PROCEDURES = frozenset(
    {
        "db.labels",
        "db.relationshipTypes",
        "db.propertyKeys",
        "db.schema.visualization",
        "db.schema.nodeTypeProperties",
        "db.schema.relTypeProperties",
    }
)

SUFFIX = "is not allowed in ad-hoc queries"


def check(steps: list[PlanStep]) -> None:
    """NotAllowed for the first step of ``steps`` (a statement's plan) that
    reaches beyond the trace graph; nothing when every step reads it."""
    for step in steps:
        if step.kind == PlanStep.LOAD_CSV:
            raise NotAllowed(f"LOAD CSV {SUFFIX}")
        if step.kind == PlanStep.PROCEDURE and step.name not in ALLOWED_PROCEDURES:
            named = f"procedure {step.name}" if step.name else "a procedure call whose procedure cannot be named"
            raise NotAllowed(f"{named} {SUFFIX} (allowed: {', '.join(sorted(ALLOWED_PROCEDURES))})")
        if step.kind == PlanStep.COMMAND:
            raise NotAllowed(f"{step.name or 'an administration command'} {SUFFIX}")
        if step.kind == PlanStep.IN_TRANSACTIONS:
            raise NotAllowed(f"CALL {{ ... }} IN TRANSACTIONS {SUFFIX}")
        if step.kind == PlanStep.DATABASE:
            raise NotAllowed(f"a statement on database {step.name!r} {SUFFIX} (USE)")
