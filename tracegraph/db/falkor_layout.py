"""The layout of a tracegraph database on FalkorDB: which version of the
key layout it holds, and claiming an empty one.

The layout key (``P:layout``) says which arrangement of keys and graphs
(:mod:`tracegraph.db.falkor`) a database holds. Once set it never
changes, so one GET settles every open but the first. A database without
it is either empty (claimed here, atomically, by whichever process comes
first) or written by tracegraph 0.1 (every trace in one graph), which this
tracegraph refuses with what to do.
"""

from __future__ import annotations

from typing import Any

import redis

from tracegraph.errors import DatabaseError, first_line

LAYOUT = "3"


def check_layout(client: Any, prefix: str, where: str, backend: str) -> None:
    # client: the redis connection of a FalkorDB client (untyped in its package)
    """Refuse a database in another layout; claim an empty one.

    The claim sets the layout key in a MULTI/EXEC, and what was read under
    WATCH counts only once an EXEC has confirmed that neither key changed
    since: two plain reads could straddle another process's claim (CI saw
    that once, as "layout of 0.1"). The catalog graph is created after the
    layout key, so a catalog never exists without it."""
    layout_key = f"{prefix}:layout"
    found = _text(client.get(layout_key))
    if found is None:
        found = _claim(client, prefix, layout_key, where)
    if found == LAYOUT:
        _catalog(client, prefix, where)
        return
    if found != "0.1":
        raise DatabaseError(
            f"the FalkorDB graph {prefix!r} at {where} has layout {found}, "
            f"this tracegraph reads layout {LAYOUT}: use the tracegraph that wrote it"
        )
    what_to_do = "move the data directory away" if backend == "embedded" else f"delete the key {prefix!r}"
    raise DatabaseError(
        f"the FalkorDB graph {prefix!r} at {where} holds traces in the layout of tracegraph 0.1 "
        "(every trace in one graph, which FalkorDB can corrupt on replace or drop); tracegraph 0.2 cannot "
        f"read it: {what_to_do} and ingest the traces again"
    )


def _text(raw: Any) -> str | None:
    return raw.decode() if isinstance(raw, bytes) else raw


def _catalog(client: Any, prefix: str, where: str) -> None:
    """Create the catalog graph (its indexes, which create its key) when a
    claimed database does not have it yet. Outside the claim's MULTI/EXEC:
    FalkorDB 4.16 can deadlock creating a graph inside one (seen once in
    hundreds of fresh databases opened at once). Idempotent, and safe from
    several processes at once (an index another made is not an error)."""
    if client.exists(prefix):
        return
    for statement in ("CREATE INDEX FOR (t:Trace) ON (t.trace)", "CREATE INDEX FOR (x:OpTotals) ON (x.trace)"):
        try:
            client.execute_command("GRAPH.QUERY", prefix, statement)
        except redis.ResponseError as e:
            if "already indexed" not in str(e):
                raise DatabaseError(f"FalkorDB at {where} refused to set up the catalog: {first_line(e)}") from None


def _claim(client: Any, prefix: str, layout_key: str, where: str) -> str:
    """The layout of a database that had no layout key: ours once this
    process or another has claimed it (the layout key is set first, so no
    process sees a catalog without it), ``0.1`` when a catalog graph exists
    without a layout key."""
    with client.pipeline(transaction=True) as pipe:
        while True:
            try:
                pipe.watch(layout_key, prefix)
                found = _text(pipe.get(layout_key))
                if found is not None:
                    return found
                legacy = bool(pipe.exists(prefix))
                pipe.multi()
                if legacy:
                    pipe.get(layout_key)  # only confirms what was read
                else:
                    pipe.set(layout_key, LAYOUT)
                replies = pipe.execute(raise_on_error=False)
                break
            except redis.WatchError:
                continue  # another process changed it meanwhile: look again
    failed = [r for r in replies if isinstance(r, Exception)]
    if failed:
        raise DatabaseError(f"FalkorDB at {where} refused to set up the catalog: {first_line(failed[0])}")
    return "0.1" if legacy else LAYOUT
