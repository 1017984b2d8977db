"""Errors a user can act on, by kind.

Each class carries what it means to the two front ends: the CLI prints the
message as one line and exits with ``exit_code``; the HTTP API answers
``{"detail": message}`` with ``http_status``. Front ends map classes, never
message text. Anything that is not a :class:`UserError` is a bug and keeps
its traceback.
"""

from __future__ import annotations

import os


def first_line(message: BaseException | str) -> str:
    """A message as one line: its first line, and when that line ends with
    a colon (introducing the lines below it, as the Neo4j driver's "Couldn't
    connect to ...:" does) its last line too, which holds the reason. An
    exception without a message is named by its class."""
    lines = [line.strip() for line in str(message).strip().splitlines() if line.strip()]
    if not lines:
        return type(message).__name__ if isinstance(message, BaseException) else ""
    if lines[0].endswith(":") and len(lines) > 1:
        return f"{lines[0]} {lines[-1]}"
    return lines[0]


class UserError(Exception):
    """A problem with what the user asked for (a bad parameter, say).

    ``cli_hint`` is what the command line adds in parentheses (the command
    that lists what exists, say); HTTP clients get the message alone.
    """

    exit_code = 1
    http_status = 400

    def __init__(self, *args: object, cli_hint: str | None = None) -> None:
        super().__init__(*args)
        self.cli_hint = cli_hint


class BadRequest(UserError):
    """A request that names things correctly but asks for something invalid
    (a parameter of the wrong type, an unknown format name, a bad trace name)."""

    http_status = 422


class NotFound(UserError):
    """A named thing (trace, analysis, job) does not exist."""

    http_status = 404


class Conflict(UserError):
    """The name is taken: a trace exists, or another process is loading it."""

    http_status = 409


class InputError(UserError):
    """A trace file that cannot be read: names the file and where it broke.

    ``where`` is a line number (``line 12``), a field path
    (``graph_exec.var[3].mem_plan``) or empty when the whole file is wrong.
    """

    http_status = 400

    def __init__(self, path: str | os.PathLike[str], what: str, where: str = "") -> None:
        self.path = str(path)
        self.what = what
        self.where = where
        loc = f" ({where})" if where else ""
        super().__init__(f"{self.path}{loc}: {what}")

    def __reduce__(self) -> tuple[type[InputError], tuple[str, str, str]]:
        # Raised in a worker process (parallel rank files), it is pickled back whole.
        return (type(self), (self.path, self.what, self.where))


class UnknownFormat(InputError):
    """A file whose content matches no supported format."""

    http_status = 415


class TooLarge(InputError):
    """A file (or a line of it) past the documented input limits."""

    http_status = 413


class DependencyCycle(UserError):
    """Ops whose dependencies form a cycle: none of them can start first,
    so a trace with one has no critical path (ingest refuses it, naming
    the file; this is what the DAG code raises).

    ``cycle`` lists the op uids in dependency order, the first again at
    the end; ``labels`` maps a uid to what the message shows for it.
    """

    def __init__(self, cycle: list[str], labels: dict[str, str] | None = None) -> None:
        self.cycle = list(cycle)
        labels = labels or {}
        shown = [labels.get(u, u.removeprefix("op:")) for u in self.cycle]
        if len(shown) > 9:
            shown = [*shown[:4], "...", *shown[-4:]]
        super().__init__(f"dependency cycle of {len(self.cycle) - 1} ops: {' -> '.join(shown)}")


class QueryError(UserError):
    """The database refused a statement (syntax, types, a missing function)."""

    http_status = 400


class ReadOnlyViolation(QueryError):
    """A statement tried to write where only reading is allowed."""

    http_status = 403


class NotAllowed(QueryError):
    """An ad-hoc statement that reaches beyond the trace graph (LOAD CSV, a
    procedure not allowed, a command, another database): refused before
    it runs (tracegraph/queries/ad_hoc_rule.py)."""

    http_status = 403


class QueryTimeout(QueryError):
    """A statement ran past its time limit and was stopped."""


class DatabaseError(UserError):
    """The database cannot be reached, refused the credentials, or is not
    one tracegraph can use (missing database, too old, old layout)."""

    http_status = 503
