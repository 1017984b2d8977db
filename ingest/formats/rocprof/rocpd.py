"""rocprofv3's rocpd databases (``rocpd-sqlite``): the SQLite file
``rocprofv3`` writes by default from ROCm 7 (``--output-format rocpd``,
``<pid>_results.db``), plain or gzipped.

Detected by content: an SQLite database whose first pages name rocpd's
tables. Opened by :mod:`tracegraph.ingest.sqlite_file` (read-only, only
tables read, every statement time-limited), read into the records of
:mod:`.capture`; :mod:`.frames` makes frames of them, as for rocprofv3's
JSON (what becomes what).

The layout (rocpd schema version 3): each table's name carries the capture's
uuid (``rocpd_region_<uuid>``; a database merged from several captures has
a set of tables per uuid, each read). Host API calls and ROCTx ranges are
``rocpd_region`` rows (``start``, ``end``, process, thread, name), their
record kind (``HIP_RUNTIME_API``, ``MARKER_CORE_API``, ...) and internal
correlation id on their ``rocpd_event``; kernel dispatches
(``rocpd_kernel_dispatch``: agent, kernel symbol, queue, stream), copies
(``rocpd_memory_copy``: the operation's name, the two agents, ``size``) and
allocations (``rocpd_memory_allocate``: ``ALLOC``/``FREE`` of ``REAL``
memory; scratch and virtual memory are counted as not read) share the
correlation id of the call that issued them through their events.
Processes, threads, agents and streams are ``rocpd_info_*`` rows that the
records name by id.

Errors (one line naming the file): not an SQLite database, one without
rocpd's tables, a schema without the columns of version 3 (its
``schema_version`` named), a record that ends before it starts, no record
at all.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tracegraph.errors import InputError
from tracegraph.ingest.formats.kit import FormatInfo, Joins
from tracegraph.ingest.formats.rocprof import frames
from tracegraph.ingest.formats.rocprof.capture import Agent, Call, Memory, Process, Work, copy_direction
from tracegraph.ingest.frames import TraceFrames
from tracegraph.ingest.sqlite_file import SQLITE_MAGIC, Database, open_database

FORMAT_NAME = "rocpd-sqlite"
FORMAT = FormatInfo(FORMAT_NAME, "rocm", Joins.ALONE, "rocprofv3 rocpd database")
KNOWN_SCHEMA = "3"

_TABLE_WORDS = (b"rocpd_region", b"rocpd_kernel_dispatch", b"rocpd_info_agent", b"rocpd_string", b"rocpd_event")
# A capture's tables end in its uuid: the part after the table's name, checked
# before it is put in a statement (it comes from the file).
_SUFFIX = re.compile(r"^[_0-9A-Za-z]*$")
# The columns a version 3 table has that this reader needs.
_NEEDED = {
    "rocpd_region": ("start", "end", "pid", "tid", "name_id", "event_id"),
    "rocpd_kernel_dispatch": ("start", "end", "pid", "agent_id", "kernel_id", "event_id"),
}


def sniff(head: bytes) -> bool:
    """An SQLite database whose first pages name rocpd's tables."""
    return head.startswith(SQLITE_MAGIC) and sum(w in head for w in _TABLE_WORDS) >= 3


def parse(path: Path) -> TraceFrames:
    """The database as frames (rules in :mod:`.frames`)."""
    db = open_database(path, FORMAT_NAME, "rocpd database")
    try:
        processes = [p for suffix in _captures(db) for p in _Capture(db, suffix).processes()]
    finally:
        db.close()
    return frames.build(path, processes)


def _captures(db: Database) -> list[str]:
    """The uuid suffixes of the captures in the database, checked."""
    suffixes = sorted(
        t.removeprefix("rocpd_metadata")
        for t in db.columns
        if t.startswith("rocpd_metadata") and t != "rocpd_metadata_"
    )
    suffixes = [s for s in suffixes if _SUFFIX.match(s)]
    if not suffixes or not any(db.has(f"rocpd_region{s}") or db.has(f"rocpd_kernel_dispatch{s}") for s in suffixes):
        raise InputError(db.path, "an SQLite database without rocpd's tables (rocpd_metadata, rocpd_region, ...)")
    for s in suffixes:
        version = dict(db.rows(f"rocpd_metadata{s}", ("tag", "value"))).get("schema_version", "unknown")
        for table, needed in _NEEDED.items():
            have = db.columns.get(f"{table}{s}")
            if have is not None and not set(needed) <= set(have):
                missing = ", ".join(c for c in needed if c not in have)
                raise InputError(
                    db.path,
                    f"rocpd schema version {version} ({table} without {missing}): "
                    f"this reader reads version {KNOWN_SCHEMA}",
                )
    return suffixes


class _Capture:
    """One capture's tables (one uuid suffix) read into records."""

    def __init__(self, db: Database, suffix: str) -> None:
        self.db = db
        self.s = suffix
        self.strings = {i: v for i, v in db.rows(self.t("rocpd_string"), ("id", "string")) if isinstance(i, int)}
        self.threads = {i: t for i, t in db.rows(self.t("rocpd_info_thread"), ("id", "tid")) if isinstance(i, int)}
        self.streams = {i: n for i, n in db.rows(self.t("rocpd_info_stream"), ("id", "name")) if isinstance(i, int)}
        self.symbols = {
            i: d or k
            for i, d, k in db.rows(self.t("rocpd_info_kernel_symbol"), ("id", "display_name", "kernel_name"))
            if isinstance(i, int)
        }
        self.agents = self._agents()

    def t(self, table: str) -> str:
        return f"{table}{self.s}"

    def processes(self) -> list[Process]:
        db = self.db
        out: dict[Any, Process] = {}
        for i, pid, command in db.rows(self.t("rocpd_info_process"), ("id", "pid", "command")):
            p = out[i] = Process(pid if isinstance(pid, int) else len(out))
            if isinstance(command, str) and command:
                p.meta["command"] = command
        agents = self.agents
        for p in out.values():
            p.agents = agents
        not_read: dict[Any, dict[str, int]] = {}

        def process(pid: Any) -> Process:
            if pid not in out:  # a record of a process the capture did not describe
                out[pid] = Process(pid if isinstance(pid, int) else len(out), agents=agents)
            return out[pid]

        for pid, call in self._calls():
            process(pid).calls.append(call)
        for pid, work in self._work():
            process(pid).work.append(work)
        for pid, memory in self._memory(not_read):
            process(pid).memory.append(memory)
        for pid, counts in not_read.items():
            process(pid).meta["not_read"] = counts
        return list(out.values())

    def _agents(self) -> dict[int, Agent]:
        agents: dict[int, Agent] = {}
        cols = ("id", "type", "type_index", "logical_index", "name", "product_name")
        for i, kind, type_index, logical, name, product in self.db.rows(self.t("rocpd_info_agent"), cols):
            if not isinstance(i, int):
                continue
            index = type_index if isinstance(type_index, int) else logical if isinstance(logical, int) else i
            agents[i] = Agent(i, str(kind or "other"), index, str(name or ""), str(product or ""))
        return agents

    def _joined(self, table: str, columns: tuple[str, ...]) -> Iterator[tuple[Any, ...]]:
        """The table's rows (the columns it has, None for the others) with
        their event's category and correlation id last."""
        if not self.db.has(self.t(table)):
            return
        have = set(self.db.columns[self.t(table)])
        select = ", ".join(f'r."{c}"' if c in have else "NULL" for c in columns)
        event = self.t("rocpd_event")
        if self.db.has(event) and "event_id" in have:
            sql = (
                f'SELECT {select}, e."category_id", e."correlation_id" FROM "{self.t(table)}" r '
                f'LEFT JOIN "{event}" e ON e."id" = r."event_id" ORDER BY r."rowid"'
            )
        else:
            sql = f'SELECT {select}, NULL, NULL FROM "{self.t(table)}" r ORDER BY r."rowid"'
        yield from self.db.run(sql)

    def _calls(self) -> Iterator[tuple[Any, Call]]:
        cols = ("start", "end", "pid", "tid", "name_id")
        for start, end, pid, tid, name_id, category, correlation in self._joined("rocpd_region", cols):
            start, end = self.db.times(self.t("rocpd_region"), start, end)
            domain = self.strings.get(category) or "UNKNOWN"
            name = self.strings.get(name_id) or "[unnamed region]"
            thread = self.threads.get(tid, tid if isinstance(tid, int) else 0)
            yield pid, Call(domain, name, thread, _int(correlation), 0, start, end)

    def _work(self) -> Iterator[tuple[Any, Work]]:
        dispatch = ("start", "end", "pid", "tid", "agent_id", "kernel_id", "queue_id", "stream_id")
        for start, end, pid, tid, agent, kernel, queue, stream, _, correlation in self._joined(
            "rocpd_kernel_dispatch", dispatch
        ):
            start, end = self.db.times(self.t("rocpd_kernel_dispatch"), start, end)
            name = self.symbols.get(kernel) or f"[kernel {kernel}]"
            thread = self.threads.get(tid, 0)
            lane = self._lane(stream, queue)
            yield pid, Work("kernel", name, _int(agent), lane, thread, _int(correlation), start, end)
        cols = (
            "start",
            "end",
            "pid",
            "tid",
            "name_id",
            "dst_agent_id",
            "src_agent_id",
            "size",
            "queue_id",
            "stream_id",
        )
        for start, end, pid, tid, name_id, dst, src, size, queue, stream, _, correlation in self._joined(
            "rocpd_memory_copy", cols
        ):
            start, end = self.db.times(self.t("rocpd_memory_copy"), start, end)
            direction = copy_direction(self.strings.get(name_id) or "")
            gpu_end = dst if self._is_gpu(dst) else src
            yield (
                pid,
                Work(
                    "memcpy",
                    f"Memcpy {direction or 'Unknown'}",
                    _int(gpu_end),
                    self._lane(stream, queue),
                    self.threads.get(tid, 0),
                    _int(correlation),
                    start,
                    end,
                    bytes=_int(size),
                    direction=direction,
                ),
            )

    def _memory(self, not_read: dict[Any, dict[str, int]]) -> Iterator[tuple[Any, Memory]]:
        """Allocations and frees of real memory; the others counted in not_read."""
        cols = ("start", "end", "pid", "tid", "agent_id", "type", "level", "address", "size")
        for start, end, pid, tid, agent, kind, level, address, size, _, correlation in self._joined(
            "rocpd_memory_allocate", cols
        ):
            _, end = self.db.times(self.t("rocpd_memory_allocate"), start, end)
            if kind not in ("ALLOC", "FREE") or level not in (None, "REAL"):
                what = f"memory_allocate {level or ''} {kind or ''}".replace("  ", " ").strip()
                counts = not_read.setdefault(pid, {})
                counts[what] = counts.get(what, 0) + 1
                continue
            yield (
                pid,
                Memory(
                    kind == "ALLOC",
                    agent if isinstance(agent, int) else None,
                    _int(address),
                    _int(size),
                    self.threads.get(tid, 0),
                    _int(correlation),
                    end,
                ),
            )

    def _is_gpu(self, agent: Any) -> bool:
        a = self.agents.get(agent)
        return a is not None and a.kind == "GPU"

    def _lane(self, stream: Any, queue: Any) -> str:
        if isinstance(stream, int):
            name = self.streams.get(stream)
            return f"stream:{name if name not in (None, '') else stream}"
        return f"queue:{queue}" if queue is not None else "copies"


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
