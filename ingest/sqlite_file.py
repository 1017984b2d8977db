"""Reading a trace that is an SQLite database (Nsight Systems exports,
rocprofv3's rocpd files), safely, whoever wrote it.

The file comes from whoever ingests, so it is opened read-only and
immutable (a gzipped one decompressed into memory, within its format's size
limit), its schema is not trusted (no view, trigger or virtual table is ever
read: only tables, by the names the reader asks for; ``trusted_schema`` off),
and every statement is cut off past :data:`QUERY_TIME_LIMIT_S`. Tables and
columns come and go between the producers' releases, so a table is read by
the columns it has (:meth:`Database.rows`: the ones asked for that exist,
the others None). Errors are one line naming the file.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracegraph.errors import InputError
from tracegraph.ingest import source

SQLITE_MAGIC = b"SQLite format 3\x00"
# The longest any one statement may run on a file (seconds).
QUERY_TIME_LIMIT_S = 300.0


@dataclass
class Database:
    """An open trace database: its tables and their columns."""

    path: Path
    db: sqlite3.Connection
    what: str  # what the file should be, for messages ("Nsight Systems export")
    columns: dict[str, list[str]] = field(default_factory=dict)  # table -> its columns

    def has(self, table: str) -> bool:
        return table in self.columns

    def rows(self, table: str, wanted: tuple[str, ...], where: str = "") -> Iterator[tuple[Any, ...]]:
        """The table's rows as tuples of the ``wanted`` columns (None for a
        column the table lacks; ``rowid``: the row's own id); none when the
        table is absent. ``where`` is the reader's own SQL, never the file's."""
        if table not in self.columns:
            return
        have = set(self.columns[table])
        select = ", ".join(f'"{c}"' if c in have else ("rowid" if c == "rowid" else "NULL") for c in wanted)
        yield from self.run(f'SELECT {select} FROM "{table}" {where}')

    def count(self, table: str) -> int:
        """The table's rows (0 when absent)."""
        if table not in self.columns:
            return 0
        (n,) = next(self.run(f'SELECT count(*) FROM "{table}"'))
        return int(n)

    def times(self, table: str, start: Any, end: Any) -> tuple[int, int]:
        """A record's integer (start, end), checked: one-line InputError
        naming the table for times that are not integers or run backwards."""
        if not isinstance(start, int) or not isinstance(end, int):
            raise InputError(self.path, f"{table}: a record without integer start and end times")
        if end < start:
            raise InputError(self.path, f"{table}: a record ends ({end}) before it starts ({start})")
        return start, end

    def run(self, sql: str, params: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
        """A statement of the reader's, its rows, within the time limit."""
        deadline = time.monotonic() + QUERY_TIME_LIMIT_S
        self.db.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
        try:
            yield from self.db.execute(sql, params)
        except sqlite3.OperationalError as e:
            if "interrupted" in str(e):
                raise InputError(self.path, f"reading the database took over {QUERY_TIME_LIMIT_S:.0f} s") from None
            raise InputError(self.path, f"not a readable {self.what}: {e}") from None
        except sqlite3.DatabaseError as e:
            raise InputError(self.path, f"not a readable SQLite database: {e}") from None
        finally:
            self.db.set_progress_handler(None, 0)

    def close(self) -> None:
        self.db.close()


def open_database(path: Path, format_name: str, what: str) -> Database:
    """The database, its tables' columns listed (one-line InputError for
    what is not a readable SQLite database). ``format_name``: the key of its
    size limit."""
    db = _connect(path, format_name)
    out = Database(path, db, what)
    try:
        for name, sql in out.run("SELECT name, sql FROM sqlite_master WHERE type = 'table'"):
            if isinstance(name, str) and isinstance(sql, str):
                out.columns[name] = [str(r[1]) for r in out.run(f'PRAGMA table_info("{name}")')]
    except BaseException:
        db.close()
        raise
    return out


def _connect(path: Path, format_name: str) -> sqlite3.Connection:
    source.check_size(path, format_name)
    try:
        if source.gzipped(path):
            data = source.read_content(path, format_name)
            if not data.startswith(SQLITE_MAGIC):
                raise InputError(path, "gzip-compressed data that is not an SQLite database")
            db = sqlite3.connect(":memory:")
            db.deserialize(data)
        else:
            db = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro&immutable=1", uri=True)
        db.execute("PRAGMA trusted_schema = OFF")
        db.execute("PRAGMA query_only = ON")
        return db
    except sqlite3.DatabaseError as e:
        raise InputError(path, f"not a readable SQLite database: {e}") from None
