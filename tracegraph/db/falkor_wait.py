"""Every wait on a FalkorDB server ends: a reply, or the verdict that the
server no longer answers.

A fixed read timeout cannot tell a slow call from a dead server: a big
bulk insert or an analysis over a large trace legitimately runs for
minutes, while a server deadlocked in a command (issue 51: FalkorDB's
graph list lock corrupted, the main thread waiting on it forever) never
answers anything again. So a waiting call does not give up on its own
clock; it asks the server. Every :data:`PROBE_EVERY_S` without a reply, a
ping goes out on a connection of its own, bounded by
:data:`PING_TIMEOUT_S`. FalkorDB runs queries on worker threads, so the
server's main thread answers pings while a long query runs; a server that
has answered no ping for ``TRACEGRAPH_WEDGED_AFTER_S`` seconds (default
120: the main thread may be busy that long in one bulk-insert call of
128 MB on a loaded machine, or forking for a log rewrite) is wedged, and
the call fails with :class:`ServerWedged`.

Sends are bounded too: a server that stops reading leaves a sender
blocked once the socket's buffer is full, so every socket carries a
timeout of the same length (a send that makes no progress for that long
fails). Connecting is bounded by :data:`CONNECT_TIMEOUT_S`.

The waits are made inside the connection class of the client's pool
(:func:`connection_pool`), so that every command of every client of the
server, pipelines and bulk inserts included, goes through them.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.connection import Connection, ConnectionPool, UnixDomainSocketConnection
from redis.retry import Retry
from redis.utils import SENTINEL

from tracegraph.errors import DatabaseError

PING_TIMEOUT_S = 2.0
PROBE_EVERY_S = 2.0
CONNECT_TIMEOUT_S = 10.0


def wedged_after() -> float:
    """``TRACEGRAPH_WEDGED_AFTER_S``: how long a server may answer no ping
    before it counts as wedged (seconds)."""
    raw = os.environ.get("TRACEGRAPH_WEDGED_AFTER_S", "120")
    try:
        value = float(raw)
    except ValueError:
        raise DatabaseError(f"TRACEGRAPH_WEDGED_AFTER_S must be a number of seconds, got {raw!r}") from None
    if not value > 0:
        raise DatabaseError(f"TRACEGRAPH_WEDGED_AFTER_S must be more than 0 seconds, got {raw!r}")
    return value


class ServerWedged(DatabaseError):
    """The server stopped answering: no reply to a ping for the wedge time."""


def probe_client(address: dict[str, Any]) -> redis.Redis:
    """A client for pings alone: plain connections (a ping never waits on
    the liveness it measures), each call bounded by PING_TIMEOUT_S."""
    return redis.Redis(
        **address,
        socket_timeout=PING_TIMEOUT_S,
        socket_connect_timeout=PING_TIMEOUT_S,
        retry=Retry(NoBackoff(), 0),
        protocol=2,  # (as the client's own connections: no HELLO at connect)
    )


def ping(client: redis.Redis) -> bool | None:
    """One ping through ``client`` (:func:`probe_client`): True when the
    server serves it; False when it answers that it cannot now (BUSY,
    LOADING, NOAUTH: it is there and reading); None when it says nothing
    within the timeout (or nothing listens)."""
    try:
        return bool(client.ping())
    except (redis.ConnectionError, redis.TimeoutError):
        return None
    except redis.ResponseError:
        return False


class Liveness:
    """Does the server at ``address`` still answer? Asked by pings on a
    client of its own (plain connections: a ping never waits on itself).

    ``ready`` (the embedded server): has the server finished loading its
    data? While it replays its append-only file, a command that arrives in
    the middle of a replayed transaction crashes it (see
    :mod:`tracegraph.db.embedded`), so a loading server is not pinged: it
    counts as answering.

    ``on_wedged`` (the embedded server): called once a call finds the
    server wedged, before the call fails; it replaces the server and says
    so (:meth:`tracegraph.db.embedded.EmbeddedServer.replace_wedged`)."""

    def __init__(
        self,
        address: dict[str, Any],
        where: str,
        ready: Callable[[], bool] | None = None,
        on_wedged: Callable[[], str] | None = None,
    ) -> None:
        self.where = where
        self.wedged_after = wedged_after()
        self._ready = ready
        self._on_wedged = on_wedged
        self._probe = probe_client(address)
        self._lock = threading.Lock()

    def answers(self) -> bool:
        """One ping within PING_TIMEOUT_S. Any reply counts, an error too
        (LOADING, BUSY, NOAUTH: the server is there and reading)."""
        if self._ready is not None and not self._ready():
            return True
        with self._lock:
            return ping(self._probe) is not None

    def wait_readable(self, conn: Connection) -> None:
        """Return once ``conn`` has a reply to read (or was closed: reading
        then says so); raise ServerWedged when the server has answered no
        ping for the wedge time meanwhile (``conn`` is dropped: its reply,
        if one ever came, belongs to nobody)."""
        answered = time.monotonic()
        while not conn.can_read(timeout=PROBE_EVERY_S):
            if self.answers():
                answered = time.monotonic()
            elif time.monotonic() - answered >= self.wedged_after:
                conn.disconnect()  # type: ignore[no-untyped-call]
                raise self.wedged()

    def wedged(self) -> ServerWedged:
        """The error for a server found wedged, once it was replaced (when
        ``on_wedged`` was given)."""
        said = (
            f"FalkorDB at {self.where} stopped answering: no reply to a ping for "
            f"{self.wedged_after:.0f} s (TRACEGRAPH_WEDGED_AFTER_S)"
        )
        if self._on_wedged is not None:
            try:
                said += f"; {self._on_wedged()}"
            except DatabaseError as e:
                said += f"; replacing it failed: {e}"
        return ServerWedged(said)

    def close(self) -> None:
        self._probe.close()


class _Watched:
    """Reads wait through :meth:`Liveness.wait_readable` (a read given its
    own timeout keeps it: redis-py's polls and pub/sub). A send that made
    no progress for the socket's timeout (the wedge time: the server read
    nothing that long) is a wedge when a ping then gets no answer either."""

    liveness: Liveness

    def send_packed_command(self, *args: Any, **kwargs: Any) -> None:
        try:
            super().send_packed_command(*args, **kwargs)  # type: ignore[misc]
        except redis.TimeoutError:
            if self.liveness.answers():
                raise
            raise self.liveness.wedged() from None

    def read_response(self, *args: Any, timeout: Any = SENTINEL, **kwargs: Any) -> Any:
        if timeout is SENTINEL:
            self.liveness.wait_readable(self)  # type: ignore[arg-type]
        return super().read_response(*args, timeout=timeout, **kwargs)  # type: ignore[misc]


class WatchedConnection(_Watched, Connection):
    def __init__(self, *, liveness: Liveness, **kwargs: Any) -> None:
        self.liveness = liveness
        super().__init__(**kwargs)  # type: ignore[no-untyped-call]


class WatchedUnixConnection(_Watched, UnixDomainSocketConnection):
    def __init__(self, *, liveness: Liveness, **kwargs: Any) -> None:
        self.liveness = liveness
        super().__init__(**kwargs)  # type: ignore[no-untyped-call]


def connection_pool(address: dict[str, Any], liveness: Liveness, client_name: str | None = None) -> ConnectionPool:
    """The pool of a FalkorDB client (``FalkorDB(connection_pool=...)``)
    whose every wait is bounded: what the client would make from
    ``address`` itself (decoded replies, RESP2, no retries), with watched
    connections named ``client_name``."""
    unix = "unix_socket_path" in address
    kwargs: dict[str, Any] = (
        {"path": address["unix_socket_path"]} if unix else {"host": address["host"], "port": address["port"]}
    )
    return ConnectionPool(
        connection_class=WatchedUnixConnection if unix else WatchedConnection,
        liveness=liveness,
        socket_timeout=liveness.wedged_after,
        socket_connect_timeout=CONNECT_TIMEOUT_S,
        decode_responses=True,
        encoding="utf-8",
        protocol=2,
        retry=Retry(NoBackoff(), 0),
        client_name=client_name,
        **kwargs,
    )
