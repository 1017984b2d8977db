"""The analysis catalog: every ``cypher/*.cypher`` file, read from its header.

A file documents itself, Perfetto-style, in ``//`` comment lines before the
query::

    // @name top-ops
    // @summary The n heaviest ops.
    // @requires times
    // @param trace STRING: trace id
    // @param n INTEGER = 10: how many ops
    // @column op: op name
    // (free text: the exact definition, tie-breaks, units)

``@param`` types are STRING, INTEGER, FLOAT, BOOLEAN, TRACE (the name of a
stored trace: ``trace`` is the one the analysis is about; an analysis with
another TRACE parameter compares traces and may read only their ``Trace``
and ``OpTotals`` nodes) and ``ENUM(a,b,c)`` (one of those words). A number
may carry bounds, both inclusive, either one optional: ``INTEGER[0..]``,
``INTEGER[1..10]``, ``FLOAT[0..]``; an INTEGER is always within 64 bits
and a FLOAT finite, and no text may hold a NUL character. A parameter
without ``= default`` is required; ``= null`` means "no value" (e.g. no
limit). The CLI, the HTTP API (OpenAPI types, bounds and enums; 422s) and
the Neo4j Browser guide all read parameters from here, and
:meth:`Param.coerce` is the one place values are checked.
``@requires`` names trace facts (times, deps, memory, kernels, copies); a
trace that lacks one gets ``not available: <reason>`` instead of rows.
``@empty`` is the one line an answer without rows carries (``no rows:
<it>``), with ``{param}`` standing for a parameter's value (``no collective
held the others up by {min_caused_us} us or more``); without it the line
is :data:`NO_ROWS`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, fields
from functools import lru_cache
from importlib import resources
from typing import Any

from tracegraph.errors import BadRequest, NotFound
from tracegraph.facts import Fact
from tracegraph.queries.types import AnalysisInfo, ColumnInfo, ParamInfo

TYPES = ("STRING", "INTEGER", "FLOAT", "BOOLEAN", "TRACE", "ENUM")
_PARAM = re.compile(
    r"^(?P<name>\w+)\s+(?P<type>[A-Z]+)(?:\((?P<choices>[\w,\s]+)\))?"
    r"(?:\[(?P<low>-?[\d.]*)\.\.(?P<high>-?[\d.]*)\])?"
    r"(?:\s*=\s*(?P<default>.*?))?\s*:\s*(?P<doc>.*)$"
)
# The range every INTEGER parameter is within (both engines store 64-bit integers).
INT64 = (-(2**63), 2**63 - 1)
_COLUMN = re.compile(r"^(?P<name>\w+)\s*:\s*(?P<doc>.*)$")
_PLACEHOLDER = re.compile(r"\{(\w+)\}")
# Why an answer has no rows, when its header does not say.
NO_ROWS = "the trace has nothing that matches"


@dataclass(frozen=True)
class Param(ParamInfo):
    """One declared parameter (:class:`~tracegraph.queries.types.ParamInfo`:
    ``type`` one of :data:`TYPES`, ``choices`` an ENUM's words) and how a
    value for it is checked."""

    def info(self) -> ParamInfo:
        """The declaration alone, as front ends show it."""
        return ParamInfo(*(getattr(self, f.name) for f in fields(ParamInfo)))

    @property
    def is_trace(self) -> bool:
        return self.type == "TRACE"

    def bounds(self) -> tuple[float | None, float | None]:
        """The inclusive (low, high) a value must be within: the declared
        bounds, and for integers the 64-bit range."""
        if self.type != "INTEGER":
            return self.minimum, self.maximum
        low = INT64[0] if self.minimum is None else max(INT64[0], int(self.minimum))
        high = INT64[1] if self.maximum is None else min(INT64[1], int(self.maximum))
        return low, high

    def coerce(self, raw: Any) -> object:
        """A CLI/HTTP value (usually text) as this parameter's type."""
        if raw is None:
            return None
        try:
            if self.type == "INTEGER":
                value: object = int(raw) if not isinstance(raw, bool) else int("x")
            elif self.type == "FLOAT":
                value = float(raw)
            elif self.type == "BOOLEAN":
                if isinstance(raw, bool):
                    value = raw
                elif str(raw).lower() in ("true", "1", "yes"):
                    value = True
                elif str(raw).lower() in ("false", "0", "no"):
                    value = False
                else:
                    raise ValueError
            else:
                value = str(raw)
        except (TypeError, ValueError, OverflowError):
            raise BadRequest(f"parameter {self.name}: expected {self.type.lower()}, got {raw!r}") from None
        if self.choices and value not in self.choices:
            raise BadRequest(f"parameter {self.name}: expected one of {', '.join(self.choices)}, got {raw!r}")
        if isinstance(value, str) and "\0" in value:
            raise BadRequest(f"parameter {self.name}: text may not hold a NUL character")
        if isinstance(value, float) and not math.isfinite(value):
            raise BadRequest(f"parameter {self.name}: expected a finite number, got {raw!r}")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            low, high = self.bounds()
            if (low is not None and value < low) or (high is not None and value > high):
                raise BadRequest(f"parameter {self.name}: {raw!r} is out of range ({_range(low, high)})")
        return value


def _range(low: float | None, high: float | None) -> str:
    """The bounds as words, leaving out the 64-bit ones every integer has."""
    shown = [None if b is None or b in INT64 else b for b in (low, high)]
    if shown[0] is not None and shown[1] is not None:
        return f"{shown[0]:g} to {shown[1]:g}"
    if shown[0] is not None:
        return f"at least {shown[0]:g}"
    if shown[1] is not None:
        return f"at most {shown[1]:g}"
    return "a 64-bit integer"


@dataclass(frozen=True)
class Analysis:
    name: str
    summary: str
    params: tuple[Param, ...]
    columns: tuple[ColumnInfo, ...]
    requires: tuple[Fact, ...]
    definition: str
    text: str
    file: str
    graph: bool = False  # returns paths/nodes for Neo4j Browser rather than a table
    empty: str | None = None  # why an answer has no rows (``@empty``, with {param} placeholders)

    def no_rows(self, params: dict[str, Any]) -> str:
        """The line an answer without rows carries: ``no rows: <why>``,
        the ``@empty`` text with the parameters' values put in."""

        def value(m: re.Match[str]) -> str:
            v = params.get(m[1])
            if v is None:
                return "null"
            if isinstance(v, float):
                return str(int(v)) if v.is_integer() and abs(v) < 1e15 else f"{v:g}"
            return str(v)

        return "no rows: " + _PLACEHOLDER.sub(value, self.empty or NO_ROWS)

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise BadRequest(
            f"analysis {self.name} has no parameter {name!r} (has: {', '.join(p.name for p in self.params)})"
        )

    @property
    def statement(self) -> str:
        """The Cypher after the ``//`` header."""
        lines = self.text.splitlines()
        i = 0
        while i < len(lines) and (not lines[i].strip() or lines[i].strip().startswith("//")):
            i += 1
        return "\n".join(lines[i:]).strip()

    def info(self, with_query: bool = False) -> AnalysisInfo:
        """What front ends show of it (``trace`` is every analysis's first
        parameter and left out)."""
        return AnalysisInfo(
            name=self.name,
            summary=self.summary,
            graph=self.graph,
            requires=[f.value for f in self.requires],
            params=[p.info() for p in self.params if p.name != "trace"],
            columns=list(self.columns),
            definition=self.definition,
            url=f"/traces/{{trace}}/queries/{self.name}",
            query=self.statement if with_query else None,
        )

    @property
    def compares_traces(self) -> bool:
        """Does it read traces besides ``trace`` (and so only their catalog nodes)?"""
        return any(p.is_trace and p.name != "trace" for p in self.params)


def parse_header(text: str, file: str) -> Analysis:
    """Read one .cypher file's header; ValueError says what is malformed."""
    tags: dict[str, list[str]] = {}
    free: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if not stripped.startswith("//"):
            break
        body = stripped[2:].strip()
        m = re.match(r"^@(\w+)\s*(.*)$", body)
        if m:
            tags.setdefault(m[1], []).append(m[2].strip())
        else:
            free.append(stripped[2:].removeprefix(" "))
    for required in ("name", "summary"):
        if required not in tags:
            raise ValueError(f"{file}: header lacks @{required}")
    params = []
    for raw in tags.get("param", []):
        m = _PARAM.match(raw)
        if not m or m["type"] not in TYPES:
            raise ValueError(f"{file}: bad @param {raw!r}")
        bounded = m["low"] is not None
        if bounded and m["type"] not in ("INTEGER", "FLOAT"):
            raise ValueError(f"{file}: bad @param {raw!r}: only INTEGER and FLOAT take [low..high] bounds")
        try:
            low = float(m["low"]) if bounded and m["low"] else None
            high = float(m["high"]) if bounded and m["high"] else None
        except ValueError:
            raise ValueError(f"{file}: bad @param {raw!r}: bounds are numbers") from None
        default_text = m["default"]
        doc = m["doc"]
        choices = [c.strip() for c in m["choices"].split(",")] if m["choices"] else []
        if (m["type"] == "ENUM") != bool(choices):
            raise ValueError(f"{file}: bad @param {raw!r}: ENUM(a,b,...) and only ENUM takes choices")
        p = Param(m["name"], m["type"], default_text is None, doc, None, choices, low, high)
        if default_text is not None and default_text != "null":
            p = Param(p.name, p.type, False, doc, p.coerce(default_text.strip("'\"")), choices, low, high)
        params.append(p)
    if any(p.name == "trace" and p.type != "TRACE" for p in params):
        raise ValueError(f"{file}: @param trace must be declared TRACE")
    columns = []
    for raw in tags.get("column", []):
        m = _COLUMN.match(raw)
        if not m:
            raise ValueError(f"{file}: bad @column {raw!r}")
        columns.append(ColumnInfo(m["name"], m["doc"]))
    empty = " ".join(tags["empty"]) if "empty" in tags else None
    unknown = {m for m in _PLACEHOLDER.findall(empty or "")} - {p.name for p in params}
    if unknown:
        raise ValueError(f"{file}: @empty names no parameter {', '.join(sorted(unknown))}")
    try:
        requires = tuple(Fact(r) for line in tags.get("requires", []) for r in line.split())
    except ValueError as e:
        raise ValueError(f"{file}: bad @requires ({e}; known: {', '.join(f.value for f in Fact)})") from None
    return Analysis(
        name=tags["name"][0],
        summary=tags["summary"][0],
        params=tuple(params),
        columns=tuple(columns),
        requires=requires,
        definition="\n".join(free).strip(),
        text=text,
        file=file,
        graph="graph" in tags,
        empty=empty,
    )


@lru_cache(maxsize=1)
def catalog() -> dict[str, Analysis]:
    """All analyses by name, in file-name order."""
    root = resources.files("tracegraph.cypher")
    out: dict[str, Analysis] = {}
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".cypher"):
            a = parse_header(entry.read_text(encoding="utf-8"), entry.name)
            if a.name in out:
                raise ValueError(f"analysis {a.name} defined twice")
            out[a.name] = a
    return out


def get(name: str) -> Analysis:
    try:
        return catalog()[name]
    except KeyError:
        raise NotFound(f"no analysis named {name!r}", cli_hint="see `tracegraph queries`") from None
