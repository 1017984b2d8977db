"""An aten op schema string (an Execution Trace node's ``op_schema``) read
for what :mod:`.et_flow` needs: which arguments and returns the op writes
(marked ``!`` in their alias set, ``Tensor(a!)``)."""

from __future__ import annotations

from collections.abc import Iterator


def schema_marks(schema: str) -> tuple[list[bool], list[bool]]:
    """Which arguments and which returns an op schema marks ``!`` (written):
    ``aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1)
    -> Tensor(a!)`` gives ``([True, False, False], [True])``."""
    head, ret = _split_arrow(schema)
    if "(" not in head or ")" not in head:
        return [], []
    args = head[head.index("(") + 1 : head.rindex(")")]
    ret = ret.strip()
    if ret.startswith("(") and ret.endswith(")"):
        ret = ret[1:-1]
    return ["!" in a for a in _split_top(args) if a != "*"], ["!" in r for r in _split_top(ret)]


def _outside_brackets(s: str) -> Iterator[int]:
    """The positions in ``s`` of the characters outside every parenthesis
    and bracket (alias sets and default values hold commas and arrows)."""
    depth = 0
    for i, ch in enumerate(s):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif depth == 0:
            yield i


def _split_top(s: str) -> list[str]:
    """``a, f(b, c), d`` -> ``['a', 'f(b, c)', 'd']``."""
    parts: list[str] = []
    start = 0
    for i in _outside_brackets(s):
        if s[i] == ",":
            parts.append(s[start:i].strip())
            start = i + 1
    if s[start:].strip():
        parts.append(s[start:].strip())
    return parts


def _split_arrow(schema: str) -> tuple[str, str]:
    """``(arguments, returns)`` at the ``->`` outside parentheses (alias
    sets may hold one: ``Tensor(a -> *)`` in ``aten::split``)."""
    for i in _outside_brackets(schema):
        if schema.startswith(" -> ", i):
            return schema[:i], schema[i + 4 :]
    return schema, ""
