"""Ad-hoc Cypher: one statement with its parameters, checked by one rule
for every front end.

A parameter's value is a JSON value that both engines' drivers can send
(FalkorDB's puts it in the statement's text): null, a boolean, a number
within the 64-bit integer range, text without NUL, or a list or map of
values (keys non-empty, without backtick or NUL), nested at most
:data:`MAX_DEPTH` deep. The HTTP API gets the values as JSON; the CLI's
``--param key=value`` is JSON when it reads as JSON (``5``, ``[1, 2]``,
``"5"``), else the text itself (:func:`param_from_text`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

from tracegraph.db.base import Graph
from tracegraph.errors import BadRequest
from tracegraph.output import jsonable, readable_rows
from tracegraph.queries import ad_hoc_rule
from tracegraph.queries.catalog import INT64
from tracegraph.queries.types import CypherResult

MAX_DEPTH = 32


def check_value(value: Any, where: str, depth: int = 0) -> None:
    """ValueError unless ``value`` is a parameter value (see above)."""
    if depth > MAX_DEPTH:
        raise ValueError(f"{where}: nested more than {MAX_DEPTH} deep")
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        if not INT64[0] <= value <= INT64[1]:  # NaN too
            raise ValueError(f"{where}: expected a number within the 64-bit integer range")
    elif isinstance(value, str):
        if "\0" in value:
            raise ValueError(f"{where}: text may not hold a NUL character")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            check_value(v, f"{where}[{i}]", depth + 1)
    elif isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str) or not k or "`" in k or "\0" in k:
                raise ValueError(f"{where}: bad key {k!r} (keys are non-empty, without backtick or NUL)")
            check_value(v, f"{where}.{k}", depth + 1)
    else:
        raise ValueError(f"{where}: not a JSON value")


def check_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters, checked (BadRequest naming the bad one)."""
    try:
        check_value(dict(params), "params")
    except ValueError as e:
        raise BadRequest(str(e)) from None
    return dict(params)


def param_from_text(text: str) -> Any:
    """A parameter given as text (the CLI's ``--param key=value``): its JSON
    value when it reads as JSON, else the text itself."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def run_cypher(
    graph: Graph,
    query: str,
    params: Mapping[str, Any] | None = None,
    *,
    trace: str | None = None,
    write: bool = False,
    timeout_ms: int | None = None,
    max_rows: int | None = None,
) -> CypherResult:
    """Run one statement, read-only unless ``write`` (the database itself
    refuses writes), once its plan passes the ad-hoc rule (it reads the
    trace graph and nothing else: :mod:`tracegraph.queries.ad_hoc_rule`,
    NotAllowed otherwise); ``trace`` binds ``$trace`` and names the trace
    it reads. At most ``max_rows`` rows (None: all)."""
    checked = check_params(params or {})
    ad_hoc_rule.check(graph.plan(query, checked, trace=trace, timeout_ms=timeout_ms))
    res = graph.run(query, checked, trace=trace, write=write, timeout_ms=timeout_ms)
    rows = res.rows if not max_rows or len(res.rows) <= max_rows else res.rows[:max_rows]
    changes = {k: int(v) for k, v in res.stats.items() if v}
    plain = cast(list[list[Any]], jsonable(readable_rows(res.columns, rows)))  # numbers readable, as every answer's
    return CypherResult(list(res.columns), plain, len(rows) < len(res.rows), changes)
