"""Reading an Nsight Systems SQLite export: its tables, its strings and its
schema version.

``nsys export --type sqlite`` writes one table per kind of record
(``CUPTI_ACTIVITY_KIND_KERNEL``, ``..._RUNTIME``, ``NVTX_EVENTS``, ...),
names as ids into ``StringIds``, and the export's own facts in
``META_DATA_EXPORT`` (older releases: ``EXPORT_META_DATA``). The database is
opened and read by :mod:`tracegraph.ingest.sqlite_file` (read-only, tables
by the columns they have, every statement time-limited); only the schema's
major version is held to what this reader knows (:data:`KNOWN_MAJOR`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracegraph.errors import InputError
from tracegraph.ingest.sqlite_file import SQLITE_MAGIC, Database, open_database

FORMAT_NAME = "nsys-sqlite"
__all__ = ["FORMAT_NAME", "KNOWN_MAJOR", "SQLITE_MAGIC", "Export", "open_export"]
# The export schema's major versions this reader was written against
# (Nsight Systems 2021.x to 2025.x write 2 and 3).
KNOWN_MAJOR = (2, 3)


@dataclass
class Export(Database):
    """An open export: a database with its strings and its version."""

    meta: dict[str, str] = field(default_factory=dict)
    strings: dict[int, str] = field(default_factory=dict)

    def string(self, sid: Any) -> str | None:
        return self.strings.get(sid) if isinstance(sid, int) else None


def open_export(path: Path) -> Export:
    """The export, checked: an SQLite database with Nsight Systems' tables
    and a schema version this reader knows (one-line InputError otherwise)."""
    base = open_database(path, FORMAT_NAME, "Nsight Systems export")
    ex = Export(base.path, base.db, base.what, base.columns)
    try:
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
        ex.close()
        raise
    return ex
