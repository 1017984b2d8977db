"""Routes for traces: list, describe, upload (an ingest job), drop."""

from __future__ import annotations

import concurrent.futures
import functools
import logging
import sys
from collections.abc import Callable
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, HTTPException, Query, Request, Response
from fastapi.concurrency import run_in_threadpool

from tracegraph.api.connection import GraphHolder
from tracegraph.api.deps import AppGraph, AppHolder, AppJobs, AppSettings, AppWriteGraph
from tracegraph.api.jobs import DONE, FAILED, Job
from tracegraph.api.models import JobOut, error_responses
from tracegraph.api.uploads import Upload, read_upload
from tracegraph.db.base import MAX_TRACE_NAME, check_trace_name, name_taken
from tracegraph.errors import BadRequest, UserError, first_line
from tracegraph.queries.ingest import MAX_MARKER_CHARS, check_marker, format_names, prepare, store
from tracegraph.queries.traces import describe_trace, drop_trace, list_traces, trace_exists
from tracegraph.queries.types import DroppedTrace, TraceSummary, as_json

log = logging.getLogger("tracegraph.api")
router = APIRouter(tags=["traces"])


def _location(what: str) -> dict[str, Any]:
    return {"description": what, "required": True, "schema": {"type": "string"}}


@router.get(
    "/traces", response_model=list[TraceSummary], summary="Every ready trace, by name", responses=error_responses(503)
)
def list_traces_route(graph: AppGraph) -> list[TraceSummary]:
    return list_traces(graph)


@router.get(
    "/traces/{trace}",
    response_model=TraceSummary,
    responses=error_responses(404, 503),
    summary="One trace: framework, counts, span, critical paths, peak memory, source files",
)
def get_trace(trace: str, graph: AppGraph) -> TraceSummary:
    return describe_trace(graph, trace)


@router.delete(
    "/traces/{trace}", response_model=DroppedTrace, responses=error_responses(404, 503), summary="Delete a trace"
)
def delete_trace(trace: str, graph: AppWriteGraph) -> DroppedTrace:
    return drop_trace(graph, trace)


@functools.lru_cache(maxsize=1)
def trace_name_pattern() -> str:
    """check_trace_name's rule as a JSON Schema pattern: printable characters
    (this Python's Unicode database: an exact class, not ``\\p{...}``, which
    the validator might read with another Unicode version), no '/' or '~',
    no leading or trailing space (the length is minLength/maxLength's).

    Written as "no barred character anywhere" (a lookahead) rather than "only
    allowed characters": the same strings, but a generator of examples
    (Hypothesis, behind schemathesis) then draws from any character and
    filters, instead of building a strategy for ~700 ranges per draw, which
    took half of the API fuzz test's time."""
    ranges: list[tuple[int, int]] = []
    for c in range(sys.maxunicode + 1):
        if not chr(c).isprintable() or chr(c) in "/~":
            if ranges and ranges[-1][1] == c - 1:
                ranges[-1] = (ranges[-1][0], c)
            else:
                ranges.append((c, c))

    def char(c: int) -> str:  # astral characters as themselves: \\u{...} is not read everywhere
        return f"\\u{c:04X}" if c <= 0xFFFF else chr(c)

    barred = "".join(char(a) if a == b else f"{char(a)}-{char(b)}" for a, b in ranges)
    return f"^(?! )(?!.* $)(?!.*[{barred}])."


def upload_schema(max_files: int) -> dict[str, Any]:
    """The multipart form of ``POST /traces`` (``max_files``: the app's limit),
    as api/uploads.py reads it: these fields only, each text field once."""
    return {
        "type": "object",
        "required": ["trace", "files"],
        "additionalProperties": False,
        "properties": {
            "trace": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_TRACE_NAME,
                "pattern": trace_name_pattern(),
                "description": "the trace's name: printable characters, no '/' or '~', no leading or trailing space",
            },
            "format": {
                "type": "string",
                "enum": ["auto", *format_names()],
                "default": "auto",
                "description": "the files' format; auto detects it from the content",
            },
            "replace": {
                "type": "boolean",
                "default": False,
                "description": "overwrite a trace of that name (the text true or false)",
            },
            "step_marker": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_MARKER_CHARS,
                "description": "the ops that mark steps: a Python regular expression searched in op names, its "
                "first group of digits the step's number (default: ProfilerStep#N, ProfileStep#N and JAX/TF "
                "step annotations)",
            },
            "files": {
                "type": "array",
                "minItems": 1,
                "maxItems": max_files,
                "items": {"type": "string", "format": "binary"},
                "description": "one trace file, or a primary file plus files that add detail to it",
            },
        },
    }


@router.post(
    "/traces",
    status_code=201,
    summary="Upload trace file(s) as one trace",
    description=(
        "Multipart form: `files` (one or more), `trace`, optional `format` and `replace`. "
        "The upload streams to disk; past TRACEGRAPH_MAX_UPLOAD_BYTES it is refused (413). "
        "Up to TRACEGRAPH_SYNC_UPLOAD_BYTES the trace is ingested before the answer (201, "
        "the trace's summary) when that takes less than TRACEGRAPH_SYNC_WAIT_S; otherwise "
        "the answer is 202 with a job to poll at `GET /jobs/{id}`. A failed ingest leaves "
        "nothing behind."
    ),
    response_model=TraceSummary | JobOut,
    responses={
        201: {"model": TraceSummary, "headers": {"Location": _location("the trace: /traces/{trace}")}},
        202: {"model": JobOut, "headers": {"Location": _location("the job to poll: /jobs/{id}")}},
        **error_responses(400, 409, 413, 415, 422, 503),
    },
    # The form: api/app.py puts upload_schema() here, with the app's own file limit.
    openapi_extra={"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": {}}}}},
)
async def upload(
    request: Request, response: Response, holder: AppHolder, jobs: AppJobs, settings: AppSettings
) -> TraceSummary | JobOut:
    up = await read_upload(
        request,
        max_bytes=settings.max_upload_bytes,
        max_files=settings.max_upload_files,
        upload_dir=settings.upload_dir,
    )
    try:
        trace, fmt, replace, step_marker = _upload_fields(up.fields)
        if not up.files:
            raise HTTPException(422, "files: no files in the upload (send them in the multipart field 'files')")
        if not replace and await run_in_threadpool(_exists, holder, trace):
            raise name_taken(trace)
    except BaseException:
        up.cleanup()
        raise
    job, future = jobs.submit(
        trace,
        [f.name for f in up.files],
        _ingest_work(holder, up, trace, fmt, replace, step_marker),
        on_cancel=up.cleanup,
    )
    if up.total_bytes <= settings.sync_upload_bytes and settings.sync_wait_s > 0:
        await run_in_threadpool(concurrent.futures.wait, [future], settings.sync_wait_s)
    if job.status == DONE:
        response.headers["Location"] = f"/traces/{quote(trace)}"
        return TraceSummary(**job.result or {})
    if job.status == FAILED:
        raise HTTPException(job.error_status or 400, job.error or "ingest failed")
    response.status_code = 202
    response.headers["Location"] = f"/jobs/{job.id}"
    return job.public()


@router.get(
    "/jobs/{job_id}",
    response_model=JobOut,
    responses=error_responses(404),
    summary="An upload's ingest job: status, progress, error",
)
def get_job(job_id: str, jobs: AppJobs) -> JobOut:
    return jobs.get(job_id).public()


@router.get(
    "/jobs",
    response_model=list[JobOut],
    responses=error_responses(422, 503),
    summary="The newest ingest jobs of every API process serving this database, newest first",
)
def list_jobs(
    jobs: AppJobs, limit: Annotated[int, Query(ge=1, le=1000, description="how many jobs at most")] = 100
) -> list[JobOut]:
    return [job.public() for job in jobs.recent(limit)]


def _exists(holder: GraphHolder, trace: str) -> bool:
    with holder.use() as graph:
        return trace_exists(graph, trace)


def _upload_fields(fields: dict[str, str]) -> tuple[str, str, bool, str | None]:
    """The form's fields as upload_schema() declares them; BadRequest (422) otherwise."""
    trace = fields.get("trace", "")
    if not trace:
        raise BadRequest("trace: required (the name to store the trace under)")
    try:
        check_trace_name(trace)
    except BadRequest as e:
        raise BadRequest(f"trace: {e}") from None
    fmt = fields.get("format", "auto")
    if fmt != "auto" and fmt not in format_names():
        raise BadRequest(f"format: unknown format {fmt!r} (supported: auto, {', '.join(format_names())})")
    raw = fields.get("replace", "false")
    if raw not in ("true", "false"):
        raise BadRequest(f"replace: expected true or false, got {raw!r}")
    step_marker = fields.get("step_marker")
    if step_marker is not None:
        check_marker(step_marker)  # BadRequest (400) before the upload is queued
    return trace, fmt, raw == "true", step_marker


def _ingest_work(
    holder: GraphHolder, up: Upload, trace: str, fmt: str, replace: bool, step_marker: str | None
) -> Callable[[Job], None]:
    """The job body: ingest, name the sources after the uploaded files, summarize."""

    def scrub(msg: str) -> str:
        for f in up.files:
            msg = msg.replace(str(f.path), f.name)
        return msg.replace(str(up.tmpdir), "upload")

    def work(job: Job) -> None:
        try:
            names = {str(f.path): f.name for f in up.files}
            prepared = prepare(
                [f.path for f in up.files],
                trace,
                fmt=fmt,
                source_names=names,
                progress=job.progress,
                step_marker=step_marker,
            )
            with holder.use() as graph:
                result = store(graph, prepared, replace=replace, progress=job.progress)
            job.result = as_json(result.summary)
            job.status = DONE
        except UserError as e:
            job.error = scrub(first_line(str(e)))
            job.error_status = e.http_status
            job.status = FAILED
        except Exception as e:  # a parser tripping over bad input: a bug, but the file's fault to the user
            log.warning("ingest of %s failed", [f.name for f in up.files], exc_info=True)
            job.error_status = 400
            job.error = scrub(
                first_line(f"cannot ingest {', '.join(f.name for f in up.files)}: {type(e).__name__}: {e}")
            )
            job.status = FAILED
        finally:
            up.cleanup()

    return work
