"""A statement's plan on FalkorDB (``GRAPH.EXPLAIN``), in the terms of the
ad-hoc rule (:mod:`tracegraph.queries.ad_hoc_rule`).

FalkorDB's plan names its operations one per line, indented by depth
(``Results``, ``    Project``, ``        Load CSV``, ``ProcedureCall``),
but not which procedure a ``ProcedureCall`` calls. The names come from
the statement's text, read by :func:`called_procedures` (a lexer that
knows Cypher's comments, strings and backticks), and are believed only
when it finds exactly as many calls as the plan has ``ProcedureCall``
operations: a call the lexer missed (or one it saw that the planner did
not) leaves every call unnamed, and an unnamed call is refused.
"""

from __future__ import annotations

from tracegraph.db.base import PlanStep

_OPERATIONS = {"Load CSV": PlanStep.LOAD_CSV, "ProcedureCall": PlanStep.PROCEDURE}


def plan_steps(lines: list[str], query: str) -> list[PlanStep]:
    """The steps of GRAPH.EXPLAIN's answer ``lines`` for ``query``."""
    operations = [line.strip().split(" | ", 1)[0] for line in lines]
    steps = [PlanStep(_OPERATIONS.get(op, PlanStep.READ), operator=op) for op in operations]
    calls = [i for i, s in enumerate(steps) if s.kind == PlanStep.PROCEDURE]
    names = called_procedures(query)
    if names is not None and len(names) == len(calls):
        for i, name in zip(calls, names):
            steps[i] = PlanStep(PlanStep.PROCEDURE, name, steps[i].operator)
    return steps


def called_procedures(text: str) -> list[str] | None:
    """The procedures ``text`` calls (``CALL a.b.c(``, parts possibly in
    backticks), in order; None when the text cannot be read to the end (an
    unclosed string, comment or backtick)."""
    tokens = _tokens(text)
    if tokens is None:
        return None
    names = []
    for i, (kind, value) in enumerate(tokens):
        if kind != "word" or value.upper() != "CALL":
            continue
        parts, j = [], i + 1
        while j < len(tokens) and tokens[j][0] in ("word", "quoted"):
            parts.append(tokens[j][1])
            if j + 1 < len(tokens) and tokens[j + 1] == ("punct", "."):
                j += 2
                continue
            j += 1
            break
        if parts and j < len(tokens) and tokens[j] == ("punct", "("):
            names.append(".".join(parts))
    return names


def _tokens(text: str) -> list[tuple[str, str]] | None:
    """``text`` as (kind, value) tokens: words, backticked names
    (``quoted``, doubled backticks undone), strings and single punctuation
    characters; comments and white space dropped."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                return None
            i = end + 2
        elif c in "'\"":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            if j >= n:
                return None
            out.append(("string", text[i + 1 : j]))
            i = j + 1
        elif c == "`":
            name, j = [], i + 1
            while True:
                end = text.find("`", j)
                if end < 0:
                    return None
                name.append(text[j:end])
                if text.startswith("``", end):
                    name.append("`")
                    j = end + 2
                    continue
                break
            out.append(("quoted", "".join(name)))
            i = end + 1
        elif c.isalnum() or c == "_" or c == "$":
            j = i
            while j < n and (text[j].isalnum() or text[j] in "_$"):
                j += 1
            out.append(("word", text[i:j]))
            i = j
        else:
            out.append(("punct", c))
            i += 1
    return out
