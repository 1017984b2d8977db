"""Reading an Nsight Systems SQLite export: the database opened safely,
its tables by the columns they have, its strings and its schema version.

``nsys export --type sqlite`` writes one table per kind of record
(``CUPTI_ACTIVITY_KIND_KERNEL``, ``..._RUNTIME``, ``NVTX_EVENTS``, ...),
names as ids into ``StringIds``, and the export's own facts in
``META_DATA_EXPORT`` (older releases: ``EXPORT_META_DATA``). Tables and
columns come and go between releases, so a table is read by the columns
it has (:meth:`Export.rows`: the ones asked for that exist, the others
None), and only the schema's major version is held to what this reader
knows (:data:`KNOWN_MAJOR`).

The file comes from whoever ingests: it is opened read-only and
immutable (a gzipped one decompressed into memory, within the format's
size limit), its schema is not trusted (no view, trigger or virtual table
is ever read: only tables of the names this reader knows), and every
statement is cut off past :data:`QUERY_TIME_LIMIT_S`.
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

FORMAT_NAME = "nsys-sqlite"
SQLITE_MAGIC = b"SQLite format 3\x00"
# The export schema's major versions this reader was written against
# (Nsight Systems 2021.x to 2025.x write 2 and 3).
KNOWN_MAJOR = (2, 3)
# The longest any one statement may run on a file (seconds).
QUERY_TIME_LIMIT_S = 300.0


@dataclass
class Export:
    """An open export: its tables' columns, its strings, its version."""

    path: Path
    db: sqlite3.Connection
    columns: dict[str, list[str]] = field(default_factory=dict)  # table -> its columns
    meta: dict[str, str] = field(default_factory=dict)
    strings: dict[int, str] = field(default_factory=dict)

    def has(self, table: str) -> bool:
        return table in self.columns

    def rows(self, table: str, wanted: tuple[str, ...], where: str = "") -> Iterator[tuple[Any, ...]]:
        """The table's rows as tuples of the ``wanted`` columns (None for a
        column the table lacks; ``rowid``: the row's own id); none when the
        table is absent."""
        if table not in self.columns:
            return
        have = set(self.columns[table])
        select = ", ".join(f'"{c}"' if c in have else ("rowid" if c == "rowid" else "NULL") for c in wanted)
        yield from self._run(f'SELECT {select} FROM "{table}" {where}')

    def count(self, table: str) -> int:
        """The table's rows (0 when absent)."""
        if table not in self.columns:
            return 0
        (n,) = next(self._run(f'SELECT count(*) FROM "{table}"'))
        return int(n)

    def _run(self, sql: str, params: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
        deadline = time.monotonic() + QUERY_TIME_LIMIT_S
        self.db.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
        try:
            yield from self.db.execute(sql, params)
        except sqlite3.OperationalError as e:
            if "interrupted" in str(e):
                raise InputError(self.path, f"reading the database took over {QUERY_TIME_LIMIT_S:.0f} s") from None
            raise InputError(self.path, f"not a readable Nsight Systems export: {e}") from None
        except sqlite3.DatabaseError as e:
            raise InputError(self.path, f"not a readable SQLite database: {e}") from None
        finally:
            self.db.set_progress_handler(None, 0)

    def string(self, sid: Any) -> str | None:
        return self.strings.get(sid) if isinstance(sid, int) else None

    def close(self) -> None:
        self.db.close()


def open_export(path: Path) -> Export:
    """The export, checked: an SQLite database with Nsight Systems' tables
    and a schema version this reader knows (one-line InputError otherwise)."""
    db = _connect(path)
    ex = Export(path, db)
    try:
        for name, sql in ex._run("SELECT name, sql FROM sqlite_master WHERE type = 'table'"):
            if isinstance(name, str) and isinstance(sql, str):
                ex.columns[name] = [str(r[1]) for r in ex._run(f'PRAGMA table_info("{name}")')]
        if not ex.has("StringIds") or not any(
            t.startswith(("CUPTI_ACTIVITY_KIND_", "NVTX_EVENTS")) for t in ex.columns
        ):
            raise InputError(
                path, "an SQLite database without Nsight Systems' tables (StringIds, CUPTI_ACTIVITY_KIND_*)"
            )
        for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
            for name, value in ex.rows(table, ("name", "value")):
                ex.meta[str(name)] = str(value)
        major = ex.meta.get("EXPORT_SCHEMA_VERSION_MAJOR")
        if major is not None and (not major.isdigit() or int(major) not in KNOWN_MAJOR):
            known = " and ".join(str(m) for m in KNOWN_MAJOR)
            raise InputError(
                path,
                f"Nsight Systems export schema {ex.meta.get('EXPORT_SCHEMA_VERSION', major)}: "
                f"this reader knows major versions {known}",
            )
        for sid, value in ex.rows("StringIds", ("id", "value")):
            if isinstance(sid, int):
                ex.strings[sid] = str(value)
    except BaseException:
        db.close()
        raise
    return ex


def _connect(path: Path) -> sqlite3.Connection:
    source.check_size(path, FORMAT_NAME)
    try:
        if source.gzipped(path):
            data = source.read_content(path, FORMAT_NAME)
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
