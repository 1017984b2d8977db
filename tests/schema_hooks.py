"""Schemathesis hooks for tests/test_api_schema.py (loaded by the
``schemathesis run`` it starts, through ``SCHEMATHESIS_HOOKS``).

So that requests reach the analyses, the timeline, the ingest and the
Cypher runner as well as the 404s, three in four generated names are real ones
(the stored trace, one of its ops, a catalog analysis), most generated
Cypher is a query on the stored trace, and a third of the uploaded files
is a real trace file (the rest schemathesis's samples and random bytes).

A schema-valid request may carry content no schema can describe, which
the server refuses for what it says, not for its shape (``DATA_REFUSALS``;
the run's configuration accepts those statuses for those operations, and
the check ``refusals_are_about_the_content`` here makes sure the answer
gives that reason):

* ``POST /cypher``: Cypher the database does not run (400, "refused the
  query"), or that runs past the time limit (400, "timed out");
* ``POST /traces``: files that are no trace of any supported format (415)
  or do not parse as the format they claim (400); the answer names them.

And one failure schemathesis reports wrongly is dropped (``filter_failure``):
an upload it made "negative" with a null or a number in a text field, which
a multipart form sends as text that is valid after all.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Callable
from email.parser import BytesParser
from email.policy import HTTP
from pathlib import Path
from typing import Any

import jsonschema_rs
import schemathesis
from hypothesis import strategies as st
from schemathesis.core.failures import AcceptedNegativeData
from schemathesis.core.file_samples import FILE_SAMPLES  # schemathesis's own `format: binary` samples

from tracegraph.api.settings import Settings
from tracegraph.api.traces import upload_schema
from tracegraph.db.base import MAX_TRACE_NAME
from tracegraph.queries.catalog import catalog

SEED_TRACE = os.environ.get("TRACEGRAPH_SCHEMA_TRACE", "alexnet-seed")  # the trace the server has stored
SEED_OP = "conv2/Conv2D"  # one of its ops
# A small real trace for uploads (ingested in well under a second).
UPLOAD_SAMPLE = Path(__file__).resolve().parent.parent / "examples" / "traces" / "pytorch-cnn-cpu.pt.trace.json.gz"


def _about_the_query(detail: str, response: Any) -> bool:
    return "refused the query" in detail or "timed out" in detail


def _about_a_file(detail: str, response: Any) -> bool:
    """The ingest's refusal names the file(s) it is about (``name: what``,
    ``name (where): what``, or what the files are together); the upload's
    own refusals (the form, multipart) never answer 400 or 415 to a valid request."""
    sent = re.findall(rb'filename="([^"]*)"', response.request.body or b"")
    return "multipart" not in detail and any(n.decode() in detail for n in sent)


# Statuses a schema-valid request may get besides schemathesis's defaults,
# per operation, and what the answer's detail must show (see the docstring).
DATA_REFUSALS: dict[str, dict[int, Callable[[str, Any], bool]]] = {
    "POST /cypher": {400: _about_the_query},
    "POST /traces": {400: _about_a_file, 415: _about_a_file},
}


def _sometimes(values: dict[str, Any], real: dict[str, Any]) -> Any:
    """``values`` as generated (a quarter of the time), or with ``real``'s
    values in place of theirs (for each name that is there as a string:
    anything else is what makes a negative case, and stays). Three in four:
    an operation that takes two real names (a trace in the path and an op
    in the query) gets both in half its requests, and reaches its answer."""
    if not isinstance(values, dict) or not all(isinstance(values.get(k), str) for k in real):
        return st.just(values)
    merged = {**values, **real}
    return st.sampled_from([values, merged, merged, merged])


@schemathesis.hook
def flatmap_path_parameters(context, path_parameters):
    """Mostly the stored trace instead of a generated name (never for
    DELETE: the stored trace stays), and a catalog analysis for ``GET
    /queries/{name}``."""
    label = context.operation.label
    if label == "GET /queries/{name}":
        return st.sampled_from(sorted(catalog())).flatmap(lambda name: _sometimes(path_parameters, {"name": name}))
    if context.operation.method.upper() == "DELETE" or "trace" not in context.operation.path:
        return st.just(path_parameters)
    return _sometimes(path_parameters, {"trace": SEED_TRACE})


_uploads = itertools.count()


@schemathesis.hook
def before_call(context, case, kwargs):
    """Two edits to a request about to go (schemathesis classifies it again after):

    * the stored trace stays for the whole run: a delete of it (schemathesis
      takes names from earlier answers, such as ``GET /traces``) goes to a
      name no trace has, and is answered as one;
    * every other upload under a good name gets a name of its own (a
      numbered suffix): generated names repeat, and an operation whose
      valid requests all met 409 would never show its 201. The others
      keep theirs, so the 409s are still asked for."""
    label = case.operation.label
    if label == "DELETE /traces/{trace}" and (case.path_parameters or {}).get("trace") == SEED_TRACE:
        case.path_parameters = {**case.path_parameters, "trace": f"{SEED_TRACE}-kept"}
    elif label == "POST /traces" and isinstance(case.body, dict):
        n, name = next(_uploads), case.body.get("trace")
        if n % 2 and isinstance(name, str) and TRACE_NAME.is_valid(name):
            suffix = f"-{n}"
            case.body = {**case.body, "trace": name[: MAX_TRACE_NAME - len(suffix)] + suffix}


@schemathesis.hook
def flatmap_query(context, query):
    """Mostly the stored trace as trace-diff's base, and an op of it where an op's name is asked for."""
    path = context.operation.path
    if path.endswith(("/trace-diff", "/trace-diff-summary")):
        return _sometimes(query, {"base": SEED_TRACE})
    if path.endswith(("/op-neighborhood", "/op-neighborhood-graph")):
        return _sometimes(query, {"op": SEED_OP})
    if path == "/ui/traces/{trace}/op":
        return _sometimes(query, {"name": SEED_OP})
    return st.just(query)


# Cypher that runs on the stored trace: nodes, relationships, paths, a table, a write (403).
SEED_QUERIES = (
    "MATCH (o:Op {trace: $trace}) RETURN o.name AS op, o.weight_us AS us ORDER BY us DESC LIMIT 3",
    "MATCH (n {trace: $trace}) RETURN n LIMIT 5",
    "MATCH (:Op {trace: $trace})-[r]->() RETURN r LIMIT 5",
    "MATCH p = (:Op {trace: $trace})-[:LAUNCHED]->(:Kernel)-[:ON_STREAM]->(:Stream) RETURN p LIMIT 3",
    "CREATE (n:Op {trace: $trace}) RETURN n",
)


@schemathesis.hook
def flatmap_case(context, case):
    """``POST /cypher``: mostly a query on the stored trace instead of
    generated text (which is practically never Cypher). The edited body is
    checked against the schema again, so a case keeps what it is."""
    body = case.body
    if (
        context.operation.label != "POST /cypher"
        or not isinstance(body, dict)
        or not isinstance(body.get("query"), str)
    ):
        return st.just(case)

    def with_query(query: str | None) -> Any:
        if query is not None:
            case.body = {**body, "query": query, "trace": SEED_TRACE}
        return case

    return st.sampled_from((None, *SEED_QUERIES)).map(with_query)


# The upload form as the server reads it.
UPLOAD = upload_schema(Settings().max_upload_files)
UPLOAD_FORM = jsonschema_rs.validator_for(UPLOAD)
# A good trace name, as the document says (tests/test_api.py holds that to the server's rule).
TRACE_NAME = jsonschema_rs.validator_for(UPLOAD["properties"]["trace"])


@schemathesis.hook
def filter_failure(context, failure, case, response):
    """Keep every failure but one schemathesis gets wrong: a multipart form
    sends every value as text, so an upload made "negative" by a null or a
    number in a text field (`trace: null`) is, as sent, a valid one (the
    name "null"); schemathesis cannot tell when the form holds files."""
    return not (
        context.operation.label == "POST /traces"
        and isinstance(failure, AcceptedNegativeData)
        and _sent_form_is_valid(response)
    )


def _sent_form_is_valid(response: Any) -> bool:
    """Whether the multipart form as sent, read as the server reads it (text
    fields once each, `replace` the text true or false), fits the document."""
    ctype = response.request.headers["Content-Type"]
    message = BytesParser(policy=HTTP).parsebytes(f"Content-Type: {ctype}\r\n\r\n".encode() + response.request.body)
    form: dict[str, Any] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        text = part.get_payload(decode=True).decode(errors="replace")
        if name == "files":
            form.setdefault("files", []).append("")
        elif name in form:
            return False
        else:
            form[name] = {"true": True, "false": False}.get(text, text) if name == "replace" else text
    return UPLOAD_FORM.is_valid(form)


@schemathesis.check
def refusals_are_about_the_content(ctx, response, case):
    """A schema-valid request refused with one of DATA_REFUSALS' statuses
    is refused for its content, and the answer says so."""
    refusals = DATA_REFUSALS.get(case.operation.label, {})
    positive = case.meta is not None and case.meta.generation.mode.is_positive
    if positive and response.status_code in refusals:
        detail = response.json()["detail"]
        if not refusals[response.status_code](detail, response):
            raise AssertionError(
                f"{case.operation.label} -> {response.status_code} for another reason than its content: {detail}"
            )


# Files (`format: binary`): a real trace file as often as schemathesis's own
# samples and random bytes, so that uploads reach the ingest and its answers
# (201, the summary, Location) as well as the refusals of what is no trace.
# (A format strategy, not a hook that edits generated cases: schemathesis
# takes an edited body holding files for a schema-violating one.)
schemathesis.openapi.format(
    "binary",
    st.one_of(
        st.just(UPLOAD_SAMPLE.read_bytes()), st.sampled_from(list(FILE_SAMPLES.values())), st.binary(max_size=256)
    ),
)
