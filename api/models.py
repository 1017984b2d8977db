"""The API's own request and response models (health, jobs, ad-hoc Cypher,
what-if's request, errors).

Everything the service layer answers (traces, the catalog, analysis and
what-if results) is declared once, as the dataclasses of
:mod:`tracegraph.queries.types`: routes name those as their response
models, so the OpenAPI document describes exactly the JSON they send."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from tracegraph.queries.types import TraceSummary


class ErrorOut(BaseModel):
    detail: str


class ValidationErrorOut(BaseModel):
    detail: str
    errors: list[dict[str, Any]] = []


class HealthOut(BaseModel):
    status: str = Field(description="ok / unavailable")
    backend: str = Field(description="embedded, falkordb or neo4j")
    database: str = Field(description="reachable / unreachable")
    version: str = Field(description="tracegraph version")
    database_version: str | None = None
    detail: str | None = None


class ProgressOut(BaseModel):
    done: int
    total: int | None = None
    fraction: float | None = None


class JobOut(BaseModel):
    id: str
    url: str
    trace: str
    files: list[str]
    status: str = Field(description="queued / running / done / failed")
    phase: str
    progress: ProgressOut
    error: str | None = None
    error_status: int | None = None
    result: TraceSummary | None = None
    created_at: str | None = None
    started_at: str | None = None
    finished_at: str | None = None


class CypherIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(min_length=1, max_length=200_000, description="one Cypher statement; run read-only")
    params: dict[str, Any] = Field(default_factory=dict, description="$parameters")
    trace: str | None = Field(
        default=None, min_length=1, max_length=200, description="the trace the query reads; also bound as $trace"
    )


class CypherOut(BaseModel):
    columns: list[str]
    rows: list[list[Any]]
    truncated: bool = Field(description="true when rows were cut at the row cap")


class WhatIfIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    match: (
        Annotated[str, Field(min_length=1, max_length=1000)]
        | Annotated[list[Annotated[str, Field(min_length=1, max_length=1000)]], Field(min_length=1, max_length=64)]
    ) = Field(
        description="which ops to scale: `type=REGEX` (the whole op type) or `name=REGEX` (anywhere in the "
        "op name); a list scales the ops any of them matches",
        examples=["type=Conv2D.*", ["type=MatMul", "name=^dense"]],
    )
    factor: float = Field(
        ge=0, allow_inf_nan=False, description="the matched ops' weight multiplier (0.5: twice as fast, 0: free)"
    )


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    out: dict[int | str, dict[str, Any]] = {}
    for c in codes:
        out[c] = {"model": ValidationErrorOut if c == 422 else ErrorOut}
    return out
