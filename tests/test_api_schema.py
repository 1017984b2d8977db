"""Property-based tests of the OpenAPI document (schemathesis): requests
generated from /openapi.json, valid and invalid, against the app on the
session's embedded FalkorDB with the seed trace loaded; the document and
the server must agree.

Every check schemathesis has runs, with its default expectations
(``validate_response`` runs them all): no 5xx; schema-valid requests are
accepted (2xx, or 404 for a name that is no trace, analysis or job, 409
for a taken one); schema-violating requests are refused with a 4xx;
answers conform to the document (status, content type, headers, body);
unsupported methods answer 405 with ``Allow``; and, for the same app with
an API key (``test_with_an_api_key``), no route but /health answers
without the key or with a wrong one.

So that requests reach the analyses, the timeline, the ingest and the
Cypher runner as well as the 404s, half the generated names are real ones
(the seed trace, one of its ops, a catalog analysis), most generated
Cypher is a query on the seed trace, and a third of the uploaded files is a
real trace file (the rest schemathesis's samples and random bytes).

Relaxed, each for one reason and for the one operation it concerns
(``DATA_REFUSALS``; the test then checks that the answer gives that
reason): a schema-valid request may carry content no schema can describe,
which the server refuses for what it says, not for its shape:

* ``POST /cypher``: Cypher the database does not run (400, "refused the
  query"), or that runs past the time limit (400, "timed out");
* ``POST /traces``: files that are no trace of any supported format (415)
  or do not parse as the format they claim (400); the answer names them.

And one failure schemathesis reports wrongly is dropped (``filter_failure``):
an upload it made "negative" with a null or a number in a text field, which
a multipart form sends as text that is valid after all.

Bounded so that the module runs in about a minute: 40 examples per
operation (5 with the key), derandomized. ``TRACEGRAPH_SCHEMA_EXAMPLES=500``
runs a longer hunt, random unless ``TRACEGRAPH_SCHEMA_SEED`` fixes it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from email.parser import BytesParser
from email.policy import HTTP
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis.core.failures import AcceptedNegativeData
from schemathesis.core.file_samples import FILE_SAMPLES  # schemathesis's own `format: binary` samples

from tracegraph.api.app import create_app
from tracegraph.api.settings import Settings
from tracegraph.queries.catalog import catalog

# The API's schema does not depend on the engine: the embedded one only.
pytestmark = pytest.mark.parametrize("db_uri", ["embedded"], indirect=True)

MAX_EXAMPLES = int(os.environ.get("TRACEGRAPH_SCHEMA_EXAMPLES", "40"))
DERANDOMIZE = "TRACEGRAPH_SCHEMA_EXAMPLES" not in os.environ
SEED_TRACE = "alexnet-seed"  # tests/conftest.py: the `alexnet` fixture
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


class _NoLifespan:
    """The app for schemathesis without its lifespan: the fixture runs that
    itself, so the embedded server is released when the module ends."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            raise RuntimeError("lifespan is run by the test fixture")
        await self.app(scope, receive, send)


def _config(max_examples: int, **more: Any) -> schemathesis.Config:
    positive = ["2xx", "3xx", "401", "403", "404", "409", "429", "5xx"]  # schemathesis's default
    operations = []
    for label, extra in DATA_REFUSALS.items():
        operations.append(
            {
                "include-name": label,  # "METHOD /path" (separate method and path filters would be either-or)
                "checks": {"positive_data_acceptance": {"expected-statuses": positive + [str(s) for s in extra]}},
            }
        )
    seed = {"seed": int(os.environ["TRACEGRAPH_SCHEMA_SEED"])} if "TRACEGRAPH_SCHEMA_SEED" in os.environ else {}
    return schemathesis.Config.from_dict(
        {**seed, "generation": {"max-examples": max_examples}, "operations": operations, **more}
    )


def _settings(**more: Any) -> Settings:
    return Settings(max_upload_bytes=1024 * 1024, cypher_timeout_ms=2000, cypher_max_rows=100, sync_wait_s=30, **more)


# Built at import time (schemathesis parametrizes at collection); it opens
# no database until the fixture below starts it, inside the session's
# TRACEGRAPH_HOME. (`schemathesis.pytest.from_fixture` would be the lazy way,
# but 4.x trips over pytest 9's node ids.)
APP = create_app("embedded", _settings())
schema = schemathesis.openapi.from_asgi("/openapi.json", _NoLifespan(APP), config=_config(MAX_EXAMPLES))

# The same app with an API key: the document then declares the bearer scheme
# and 401 on every route but /health, and `ignored_auth` checks that each
# route refuses a request without the key or with a wrong one. Fewer
# examples: everything else is what the keyless app's test covers.
KEY = "schema-test-key"
KEYED_EXAMPLES = max(5, MAX_EXAMPLES // 8)
KEYED_APP = create_app("embedded", _settings(api_key=KEY))
keyed_schema = schemathesis.openapi.from_asgi(
    f"/openapi.json?key={KEY}",
    _NoLifespan(KEYED_APP),
    config=_config(KEYED_EXAMPLES, auth={"openapi": {"HTTPBearer": {"bearer": KEY}}}),
)


def _sometimes(values: dict[str, Any], real: dict[str, Any]) -> Any:
    """``values`` as generated, or with ``real``'s values in place of theirs
    (for each name that is there as a string: anything else is what makes a
    negative case, and stays)."""
    if not isinstance(values, dict) or not all(isinstance(values.get(k), str) for k in real):
        return st.just(values)
    return st.sampled_from([values, {**values, **real}])


def flatmap_path_parameters(context, path_parameters):
    """Half the time the seed trace instead of a generated name (never for
    DELETE: the seed trace is the session's, read-only), and a catalog
    analysis for ``GET /queries/{name}``."""
    label = context.operation.label
    if label == "GET /queries/{name}":
        return st.sampled_from(sorted(catalog())).flatmap(lambda name: _sometimes(path_parameters, {"name": name}))
    if context.operation.method.upper() == "DELETE" or "trace" not in context.operation.path:
        return st.just(path_parameters)
    return _sometimes(path_parameters, {"trace": SEED_TRACE})


def flatmap_query(context, query):
    """Half the time the seed trace as trace-diff's base, and an op of it where an op's name is asked for."""
    path = context.operation.path
    if path.endswith(("/trace-diff", "/trace-diff-summary")):
        return _sometimes(query, {"base": SEED_TRACE})
    if path.endswith(("/op-neighborhood", "/op-neighborhood-graph")):
        return _sometimes(query, {"op": SEED_OP})
    if path == "/ui/traces/{trace}/op":
        return _sometimes(query, {"name": SEED_OP})
    return st.just(query)


# Cypher that runs on the seed trace: nodes, relationships, paths, a table, a write (403).
SEED_QUERIES = (
    "MATCH (o:Op {trace: $trace}) RETURN o.name AS op, o.weight_us AS us ORDER BY us DESC LIMIT 3",
    "MATCH (n {trace: $trace}) RETURN n LIMIT 5",
    "MATCH (:Op {trace: $trace})-[r]->() RETURN r LIMIT 5",
    "MATCH p = (:Op {trace: $trace})-[:LAUNCHED]->(:Kernel)-[:ON_STREAM]->(:Stream) RETURN p LIMIT 3",
    "CREATE (n:Op {trace: $trace}) RETURN n",
)


def flatmap_case(context, case):
    """``POST /cypher``: mostly a query on the seed trace instead of
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


for _schema in (schema, keyed_schema):
    for _hook in (flatmap_path_parameters, flatmap_query, flatmap_case, filter_failure):
        _schema.hook(_hook)
UPLOAD_FORM = jsonschema_rs.validator_for(
    APP.openapi()["paths"]["/traces"]["post"]["requestBody"]["content"]["multipart/form-data"]["schema"]
)


# Files (`format: binary`): a real trace file as often as schemathesis's own
# samples and random bytes, so that uploads reach the ingest and its answers
# (201, the summary, Location) as well as the refusals of what is no trace.
# (A format strategy, not a hook that edits generated cases: schemathesis
# takes an edited body holding files for a schema-violating one.) Global to
# the process: this is the only module that runs schemathesis.
schemathesis.openapi.format(
    "binary",
    st.one_of(
        st.just(UPLOAD_SAMPLE.read_bytes()), st.sampled_from(list(FILE_SAMPLES.values())), st.binary(max_size=256)
    ),
)


@pytest.fixture(scope="module", autouse=True)
def running_apps(session_graph, alexnet):
    assert alexnet == SEED_TRACE
    # Lifespans: connect now, release the embedded server at the end.
    with TestClient(APP), TestClient(KEYED_APP):
        yield


def _check(case) -> None:
    response = case.call()
    case.validate_response(response)  # every check, as configured above
    refusals = DATA_REFUSALS.get(case.operation.label, {})
    positive = case.meta is not None and case.meta.generation.mode.is_positive
    if positive and response.status_code in refusals:
        detail = response.json()["detail"]
        assert refusals[response.status_code](detail, response), (
            f"{case.operation.label} -> {response.status_code} for another reason than its content: {detail}"
        )


HYPOTHESIS = {
    "deadline": None,
    "database": None,
    "derandomize": DERANDOMIZE,
    "suppress_health_check": list(HealthCheck),
}


@schema.parametrize()
@settings(max_examples=MAX_EXAMPLES, **HYPOTHESIS)
def test_document_and_server_agree(case, graph):
    _check(case)


@keyed_schema.parametrize()
@settings(max_examples=KEYED_EXAMPLES, **HYPOTHESIS)
def test_with_an_api_key(case, graph):
    _check(case)
