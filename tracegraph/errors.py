"""Errors a user can act on. The CLI prints them as one line and exits 1;
the HTTP API maps them to 4xx. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations


class UserError(Exception):
    """A problem with what the user asked for (unknown trace, bad parameter)."""


class NotFound(UserError):
    """A named thing (trace, analysis, job) does not exist."""


class InputError(UserError):
    """A trace file that cannot be read: names the file and where it broke.

    ``where`` is a line number (``line 12``), a field path
    (``graph_exec.var[3].mem_plan``) or empty when the whole file is wrong.
    """

    def __init__(self, path: str, what: str, where: str = "") -> None:
        self.path = str(path)
        self.what = what
        self.where = where
        loc = f" ({where})" if where else ""
        super().__init__(f"{self.path}{loc}: {what}")


class DatabaseError(UserError):
    """The database cannot be reached or refused the request."""
