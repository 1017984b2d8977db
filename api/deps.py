"""What routes depend on: the app's settings, graph and jobs, and the API key.

Routes are plain module-level functions; these dependencies hand them the
per-app objects that :func:`tracegraph.api.app.create_app` keeps on
``app.state``.
"""

from __future__ import annotations

import hmac

from fastapi import HTTPException, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from tracegraph.api.connection import GraphHolder
from tracegraph.api.jobs import JobManager
from tracegraph.api.settings import Settings

# Pages a browser opens directly may carry the key as ``?key=`` (documented in api/README.md).
BROWSER_KEY_PATHS = ("/docs", "/openapi.json", "/browser/guide.html", "/browser/tracegraph.grass")

# JSON request bodies (/cypher, /whatif); uploads have limits of their own.
JSON_BODY_MAX = 16 * 1024 * 1024

BEARER = HTTPBearer(auto_error=False, description="the server's TRACEGRAPH_API_KEY")


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def get_graph(request: Request) -> GraphHolder:
    graph: GraphHolder = request.app.state.graph
    return graph


def get_jobs(request: Request) -> JobManager:
    jobs: JobManager = request.app.state.jobs
    return jobs


def require_key(request: Request, creds: HTTPAuthorizationCredentials | None = Security(BEARER)) -> None:
    """401 unless the request carries the API key. Only an app that has a key
    puts this dependency on its routes, so OpenAPI declares the bearer
    scheme exactly then."""
    key = request.app.state.settings.api_key
    given = creds.credentials if creds else None
    if given is None and request.url.path in BROWSER_KEY_PATHS:
        given = request.query_params.get("key")
    if not given or not hmac.compare_digest(given.encode(), key.encode()):
        raise HTTPException(
            401,
            "missing or wrong API key: send Authorization: Bearer <TRACEGRAPH_API_KEY>",
            headers={"WWW-Authenticate": "Bearer"},
        )
