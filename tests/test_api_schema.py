"""Property-based tests of the OpenAPI schema (schemathesis): requests
generated from /openapi.json, positive and negative, never get a 5xx and
their answers conform to the schema.

Bounded so the whole module runs in well under two minutes; the app runs
on the session's embedded FalkorDB with the seed trace loaded, so that
generated requests can hit real data as well as unknown names.
"""

from __future__ import annotations

import os

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings
from schemathesis.config import PositiveDataAcceptanceConfig
from schemathesis.config._checks import NegativeDataRejectionConfig  # not re-exported in 4.x

from tracegraph.api.app import create_app
from tracegraph.api.settings import Settings

# The API's schema does not depend on the engine: the embedded one only.
pytestmark = pytest.mark.parametrize("db_uri", ["embedded"], indirect=True)

# Per operation; TRACEGRAPH_SCHEMA_EXAMPLES=500 for a longer hunt (then not derandomized).
MAX_EXAMPLES = int(os.environ.get("TRACEGRAPH_SCHEMA_EXAMPLES", "40"))
DERANDOMIZE = "TRACEGRAPH_SCHEMA_EXAMPLES" not in os.environ


class _NoLifespan:
    """The app for schemathesis without its lifespan: the fixture runs that
    itself, so the embedded server is released when the module ends."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            raise RuntimeError("lifespan is run by the test fixture")
        await self.app(scope, receive, send)


# Built at import time (schemathesis parametrizes at collection); it opens
# no database until the fixture below starts it, inside the session's
# TRACEGRAPH_HOME. (`schemathesis.pytest.from_fixture` would be the lazy way,
# but 4.x trips over pytest 9's node ids.)
APP = create_app(
    "embedded", Settings(max_upload_bytes=1024 * 1024, cypher_timeout_ms=2000, cypher_max_rows=100, sync_wait_s=30)
)
schema = schemathesis.openapi.from_asgi("/openapi.json", _NoLifespan(APP))
schema.config.generation.update(max_examples=MAX_EXAMPLES)
# A schema-valid request may still be refused for what it says rather than
# its shape: a file that is no trace (415), Cypher that does not parse (400),
# a limit the database refuses or a regex that matches no op (422). Those
# answers are the API working; 5xx never is (not_a_server_error).
schema.config.checks.positive_data_acceptance = PositiveDataAcceptanceConfig(
    expected_statuses=["2xx", "3xx", "400", "401", "403", "404", "409", "413", "415", "422", "429"]
)
# An upload past the server's limits (size, number of files) is refused with
# 413 while it streams, before the rest of it could be validated.
schema.config.checks.negative_data_rejection = NegativeDataRejectionConfig(
    expected_statuses=["400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429"]
)


@pytest.fixture(scope="module", autouse=True)
def running_app(session_graph, alexnet):
    with TestClient(APP):  # lifespan: connect now, release the embedded server at the end
        yield APP


@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    database=None,
    derandomize=DERANDOMIZE,
    suppress_health_check=list(HealthCheck),
)
def test_no_server_errors(case, graph):
    response = case.call()
    assert response.status_code < 500, (
        f"{case.method} {case.formatted_path} -> {response.status_code}: {response.text[:500]}"
    )
    case.validate_response(response)
