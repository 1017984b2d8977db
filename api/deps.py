"""What routes depend on: the app's settings, database connection and
jobs, and the API key.

Routes are plain module-level functions; these dependencies hand them the
per-app objects that :func:`tracegraph.api.app.create_app` keeps on
``app.state``.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, HTTPException, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from tracegraph.api import browser_token
from tracegraph.api.connection import GraphHolder
from tracegraph.api.jobs import JobManager
from tracegraph.api.settings import Settings
from tracegraph.db.base import Graph

# The pages Neo4j Browser fetches itself (no Authorization header) take a
# short-lived ``?token=`` instead of the key (api/browser_token.py).
BROWSER_TOKEN_PATHS = ("/browser/guide.html", "/browser/tracegraph.grass")

# JSON request bodies (/cypher, /whatif); uploads have limits of their own.
JSON_BODY_MAX = 16 * 1024 * 1024

BEARER = HTTPBearer(auto_error=False, description="the server's TRACEGRAPH_API_KEY")


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def get_holder(request: Request) -> GraphHolder:
    holder: GraphHolder = request.app.state.graph
    return holder


def get_graph(request: Request) -> Iterator[Graph]:
    """The database connection for one request that only reads: as the
    reading identity when ``TRACEGRAPH_DB_READ`` names one (dropped when
    the request loses the database, so that the next one connects again)."""
    reader: GraphHolder = request.app.state.read_graph
    with reader.use() as graph:
        yield graph


def get_write_graph(request: Request) -> Iterator[Graph]:
    """The database connection for one request that writes (the identity
    of ``--db`` / ``TRACEGRAPH_DB``)."""
    with get_holder(request).use() as graph:
        yield graph


def get_jobs(request: Request) -> JobManager:
    jobs: JobManager = request.app.state.jobs
    return jobs


# What routes declare.
AppGraph = Annotated[Graph, Depends(get_graph)]  # reads
AppWriteGraph = Annotated[Graph, Depends(get_write_graph)]
AppSettings = Annotated[Settings, Depends(get_settings)]
AppJobs = Annotated[JobManager, Depends(get_jobs)]
AppHolder = Annotated[GraphHolder, Depends(get_holder)]


def require_key(request: Request, creds: HTTPAuthorizationCredentials | None = Security(BEARER)) -> None:
    """401 unless the request carries the API key (or, for the pages Neo4j
    Browser fetches, a token made with it that is still valid). Only an app
    that has a key puts this dependency on its routes, so OpenAPI declares
    the bearer scheme exactly then. The key is never taken from a URL."""
    key = request.app.state.settings.api_key
    given = creds.credentials if creds else None
    if given is None and request.url.path in BROWSER_TOKEN_PATHS:
        token = request.query_params.get("token")
        if token is not None and browser_token.valid(key, token):
            return
    if not given or not hmac.compare_digest(given.encode(), key.encode()):
        raise HTTPException(
            401,
            "missing or wrong API key: send Authorization: Bearer <TRACEGRAPH_API_KEY>",
            headers={"WWW-Authenticate": "Bearer"},
        )
