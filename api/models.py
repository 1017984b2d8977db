"""The API's own models: requests (ad-hoc Cypher, what-if), jobs, errors.

Everything the service layer answers (traces, the catalog, analysis,
what-if and Cypher results, the timeline, health) is declared once, as the
dataclasses of :mod:`tracegraph.queries.types`: routes return those, and
FastAPI checks each answer against them and builds the OpenAPI document
from them, so the document describes exactly the JSON routes send."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, WithJsonSchema

from tracegraph.queries.catalog import INT64
from tracegraph.queries.cypher import MAX_DEPTH, check_value
from tracegraph.queries.types import TraceSummary
from tracegraph.queries.whatif import MAX_FACTOR


class ErrorOut(BaseModel):
    detail: str


class ValidationErrorOut(BaseModel):
    detail: str
    errors: list[dict[str, Any]] = []


class BrowserLink(BaseModel):
    """What to type in Neo4j Browser to play the guide: ``play`` and
    ``style`` carry a short-lived token when the API has a key
    (``expires_at``, UTC), none when it has none (``expires_at`` null)."""

    play: str
    style: str
    expires_at: str | None = None


class ProgressOut(BaseModel):
    done: int
    total: int | None = None
    fraction: float | None = None


class JobOut(BaseModel):
    id: str
    url: str
    trace: str
    files: list[str]
    worker: str = Field(description="the API process that runs it (host:pid)")
    status: str = Field(description="queued / running / done / failed")
    phase: str
    progress: ProgressOut
    error: str | None = Field(None, description="why it failed (one line)")
    error_status: int | None = Field(None, description="the HTTP status its error maps to")
    result: TraceSummary | None = Field(None, description="done: the trace stored")
    created_at: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    heartbeat_at: str | None = Field(None, description="when its API process last said it was at work on it")


# Cypher parameters as the service checks them (queries/cypher.py), in
# JSON Schema (api/app.py adds it to the document's components).
NO_NUL = r"^[^\x00]*$"
PARAM_KEY = r"^[^`\x00]+$"
CYPHER_VALUE_REF = {"$ref": "#/components/schemas/CypherValue"}
CYPHER_MAP: dict[str, Any] = {
    "type": "object",
    "propertyNames": {"pattern": PARAM_KEY},
    "additionalProperties": CYPHER_VALUE_REF,
}
CYPHER_VALUE: dict[str, Any] = {
    "description": "a Cypher parameter value: null, a boolean, a number within the 64-bit integer range, text "
    f"without NUL, or a list or map of values (keys: no backtick or NUL), nested at most {MAX_DEPTH} deep",
    "anyOf": [
        {"type": "null"},
        {"type": "boolean"},
        {"type": "number", "minimum": INT64[0], "maximum": INT64[1]},
        {"type": "string", "pattern": NO_NUL},
        {"type": "array", "items": CYPHER_VALUE_REF},
        CYPHER_MAP,
    ],
}


def _check_params(params: dict[str, Any]) -> dict[str, Any]:
    check_value(params, "params")  # ValueError: a 422 naming the value
    return params


class CypherIn(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={
            "examples": [
                {"query": "MATCH (t:Trace) RETURN t.trace AS trace, t.ops AS ops ORDER BY trace"},
                {
                    "query": "MATCH (o:Op {trace: $trace}) WHERE o.weight_us >= $min RETURN o.name, o.weight_us",
                    "params": {"min": 100},
                    "trace": "alexnet",
                },
            ]
        },
    )
    query: str = Field(min_length=1, max_length=200_000, description="one Cypher statement; run read-only")
    params: Annotated[
        dict[str, Any],
        AfterValidator(_check_params),
        WithJsonSchema({**CYPHER_MAP, "description": "$parameters (see CypherValue)"}),
    ] = Field(default_factory=dict)
    trace: str | None = Field(
        default=None, min_length=1, max_length=200, description="the trace the query reads; also bound as $trace"
    )


# `type=REGEX` or `name=REGEX`, REGEX not starting with a quantifier (*, +, ?
# or {: queries/whatif.py); then the whole text is a valid regular expression
# exactly when REGEX is (`type=` is plain text), hence `format: regex`.
MatchSpec = Annotated[
    str,
    Field(
        min_length=6,
        max_length=1000,
        pattern=r"^(type|name)=[^*+?{]",
        json_schema_extra={"format": "regex"},
    ),
]


class WhatIfIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    match: MatchSpec | Annotated[list[MatchSpec], Field(min_length=1, max_length=64)] = Field(
        description="which ops to scale: `type=REGEX` (the whole op type) or `name=REGEX` (anywhere in the "
        "op name), REGEX in Python's `re` syntax and not starting with `*`, `+`, `?` or `{`; a list scales the "
        "ops any of them matches",
        examples=["type=Conv2D.*", ["type=MatMul", "name=^dense"]],
    )
    factor: float = Field(
        ge=0,
        le=MAX_FACTOR,
        allow_inf_nan=False,
        description="the matched ops' weight multiplier (0.5: twice as fast, 0: free)",
    )


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    out: dict[int | str, dict[str, Any]] = {}
    for c in codes:
        out[c] = {"model": ValidationErrorOut if c == 422 else ErrorOut}
    return out
