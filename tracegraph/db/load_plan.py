"""The order in which a trace's tables are written, shared by every engine.

A relationship whose other end already exists is created in the very
statement that creates its node (a Kernel comes with its LAUNCHED and
ON_STREAM): the node needs no second lookup, and the number of statements
halves. The node tables are written in their order; each carries the
relationships of its own table whose other end an earlier table created.
The remaining relationships (both ends among the same or later tables)
follow in passes of their own, grouped by table and anchor column.

Rows of one pass whose optional other ends differ (a Kernel without an
Op) cannot share one statement: :func:`groups` splits them by which ends
they have. How an engine finds the other ends (by internal id on
FalkorDB, by the (trace, uid) index on Neo4j) is the engine's business.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from tracegraph.columns import Table, Texts, take
from tracegraph.db.base import TraceTables, ends
from tracegraph.db.values import column_values


@dataclass(frozen=True)
class RelSpec:
    """A relationship made in a pass: to (``outgoing``) or from the pass's
    node, whose other end (label ``other``) is named by column ``column``."""

    type: str
    outgoing: bool
    column: str
    other: str
    props: tuple[str, ...]


@dataclass
class Pass:
    """One sweep over a table: create a node per row (``label``) or take the
    existing node named by column ``anchor`` (label ``anchor_label``), plus
    relationships; ``member`` is the Trace's membership relationship to a
    created node, if any."""

    table: str
    label: str | None
    anchor: str
    anchor_label: str
    cols: list[str] = field(default_factory=list)
    rels: list[RelSpec] = field(default_factory=list)
    member: str | None = None


@dataclass
class Group:
    """Rows of a pass that have the same relationships: ``rows`` (their
    positions in the pass's frame), ``rels``, and ``values`` (one list per
    relationship property, then, for node passes, uid and the node's
    properties)."""

    rows: npt.NDArray[np.int64]
    rels: list[RelSpec]
    values: list[list[Any]]


def passes(tables: TraceTables) -> list[Pass]:
    member = {label: rel for rel, label in tables.membership}
    order = {t.label: i for i, t in enumerate(tables.nodes)}
    nodes = {
        t.table: Pass(t.table, t.label, "uid", t.label, list(t.columns), [], member.get(t.label)) for t in tables.nodes
    }
    extra: dict[tuple[str, str], Pass] = {}
    for r in tables.rels:
        p = nodes.get(r.table)
        if p is not None and r.dst == "uid" and p.label == r.end and order.get(r.start, len(order)) < order[r.end]:
            p.rels.append(RelSpec(r.type, False, r.src, r.start, r.columns))
        elif p is not None and r.src == "uid" and p.label == r.start and order.get(r.end, len(order)) < order[r.start]:
            p.rels.append(RelSpec(r.type, True, r.dst, r.end, r.columns))
        else:
            extra.setdefault((r.table, r.src), Pass(r.table, None, r.src, r.start)).rels.append(
                RelSpec(r.type, True, r.dst, r.end, r.columns)
            )
    return list(nodes.values()) + list(extra.values())


def frames(tables: TraceTables) -> dict[str, Table]:
    """Every table's frame by name (a node table's frame holds its relationship tables' rows too)."""
    out = {t.table: t.frame for t in tables.nodes}
    out.update({r.table: r.frame for r in tables.rels if r.table not in out})
    return out


def uids(tables: TraceTables) -> dict[str, Texts]:
    """Each label's node uids (its node table's)."""
    out = {}
    for t in tables.nodes:
        col = t.frame["uid"]
        out[t.label] = col if isinstance(col, Texts) else Texts.of(column_values(col))
    return out


def groups(p: Pass, frames: dict[str, Table], ints: frozenset[str], bools: frozenset[str] = frozenset()) -> list[Group]:
    df = frames[p.table]
    rows = np.arange(df.n, dtype=np.int64)
    if p.label is None:
        rows = rows[ends(df, p.anchor) >= 0]
    code = np.zeros(len(rows), dtype=np.int64)  # bit k: relationship k has its other end
    for k, rel in enumerate(p.rels):
        code |= (ends(df, rel.column)[rows] >= 0).astype(np.int64) << k
    out = []
    for shape in sorted(set(code.tolist())):
        sel = rows[code == shape]
        rels = [r for k, r in enumerate(p.rels) if shape >> k & 1]
        if p.label is None and not rels:
            continue
        values = [column_values(take(df[c], sel), c in ints, c in bools) for r in rels for c in r.props]
        if p.label is not None:
            values += [column_values(take(df[c], sel), c in ints, c in bools) for c in ["uid", *p.cols]]
        out.append(Group(sel, rels, values))
    return out


def relationships_per_row(p: Pass, group: Group) -> int:
    """Relationships a row of the group makes, membership included."""
    return len(group.rels) + (p.member is not None and p.label is not None)


def elements_per_row(p: Pass, group: Group) -> int:
    """Progress weight of a row: its node and its tables' relationships (not membership)."""
    return len(group.rels) + (p.label is not None)


def creates(p: Pass, group: Group, node: str, ends: list[str], first: int) -> list[str]:
    """The CREATE clauses of a pass: the node (properties ``r[first]``
    onwards, after the relationships' properties) and its relationships to
    ``ends`` (the other ends' variables, in ``group.rels`` order), and the
    membership from ``t``. Both engines' statements end with these."""
    k = first
    rel_props = []
    for rel in group.rels:
        rel_props.append(", ".join(f"{c}: r[{k + j}]" for j, c in enumerate(rel.props)))
        k += len(rel.props)
    out = []
    if p.label is not None:
        props = ", ".join(f"{c}: r[{k + j}]" for j, c in enumerate(["uid", *p.cols]))
        out.append(f"CREATE ({node}:{p.label} {{{props}, trace: $trace}})")
    for rel, end, props in zip(group.rels, ends, rel_props):
        body = f"[:{rel.type}{' {' + props + '}' if props else ''}]"
        out.append(f"CREATE ({node})-{body}->({end})" if rel.outgoing else f"CREATE ({end})-{body}->({node})")
    if p.member and p.label is not None:
        out.append(f"CREATE (t)-[:{p.member}]->({node})")
    return out
