"""Short-lived links for the pages Neo4j Browser fetches, instead of the
API key in their URLs.

Neo4j Browser fetches a guide (``:play URL``) and a style sheet
(``:style URL``) itself, with no way to add an ``Authorization`` header,
so with ``TRACEGRAPH_API_KEY`` set those URLs must carry a credential.
The key itself did (``?key=``): a URL lands in access logs, proxy logs,
the Browser's history and other pages' ``Referer``, and a key found there
opens every route for good. A token does neither: ``EXPIRY.SIGNATURE``,
an HMAC-SHA256 of the expiry keyed by the API key, opens only the
``/browser/`` pages (the guide and the style sheet: trace names and the
catalog's statements, no trace data) and only until it expires
(``TRACEGRAPH_BROWSER_LINK_S``, default 12 hours). ``POST /browser/link``
(with the key) makes one; the guide passes the token it was fetched with
on to its own links. Changing the key voids every token.
"""

from __future__ import annotations

import hashlib
import hmac
import time

# The longest life a token may claim: a token whose expiry lies further
# ahead was not made here (the setting's upper bound).
MAX_LIFE_S = 7 * 24 * 3600


def make(key: str, life_s: float, now: float | None = None) -> str:
    """A token valid for ``life_s`` seconds from ``now``."""
    expires = int((time.time() if now is None else now) + min(life_s, MAX_LIFE_S))
    return f"{expires}.{_signature(key, expires)}"


def valid(key: str, token: str, now: float | None = None) -> bool:
    """Was ``token`` made with ``key``, and is it still in its life?"""
    expires_text, _, signature = token.partition(".")
    if not expires_text.isdigit() or len(expires_text) > 12:
        return False
    expires = int(expires_text)
    moment = time.time() if now is None else now
    if not moment < expires <= moment + MAX_LIFE_S:
        return False
    return hmac.compare_digest(signature.encode(), _signature(key, expires).encode())


def expires_at(token: str) -> int:
    """The expiry (Unix seconds) a token made by :func:`make` carries."""
    return int(token.partition(".")[0])


def _signature(key: str, expires: int) -> str:
    return hmac.new(key.encode(), f"tracegraph-browser:{expires}".encode(), hashlib.sha256).hexdigest()
