"""A capture as it is read, before it becomes frames: the ops, kernels and
steps found on its planes (times in integer picoseconds), what was counted
and skipped, its HLO modules, and where in the XSpace an error lies.

The readers (:mod:`.host`, :mod:`.device`) fill a :class:`Capture`; the
passes (:mod:`.launches`, :mod:`.dependencies`, :mod:`.frames`) read and
complete it. The rules are in :mod:`.trace`'s docstring.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracegraph.errors import InputError
from tracegraph.ingest.formats.kit import FramesBuilder, Role
from tracegraph.ingest.formats.xplane.hlo import Module
from tracegraph.ingest.formats.xplane.messages import REF_VALUE, Value, XEvent, XPlane, XSpace
from tracegraph.ingest.formats.xplane.wire import Malformed

HOST_PLANE = "/host:CPU"
METADATA_PLANE = "/host:metadata"
TASK_PLANE = "Task Environment"
# Where an event is: (plane, line, event) index.
At = tuple[int, int, int]


@dataclass(slots=True)
class Op:
    """An op as found, times in integer picoseconds."""

    uid: str
    name: str
    type: str
    device: str
    start: int
    end: int
    order: At  # the tie-break after times
    role: Role = Role.OP
    thread: str | None = None
    line: tuple[int, int] | None = None  # (plane, line) of a host op, for nesting
    phase: str | None = None
    attrs: dict[str, Any] = field(default_factory=dict)
    module: tuple[str, int | None] | None = None  # an HLO op's (hlo_module, program_id)
    run: object = None  # an HLO op's run_id
    parent: int | None = None
    seq: int = 0


@dataclass(slots=True)
class Kernel:
    uid: str
    at: At
    name: str
    stream: str
    start: int
    end: int
    kind: str
    nbytes: int | None
    direction: str | None
    stats: dict[str, Value]
    device: str
    op: int | None = None  # the index of its op in Capture.ops


@dataclass(slots=True)
class Step:
    name: str
    step: int
    start: int
    end: int
    ops: int = 0  # ops starting inside it


# What meta_event_counts counts: events read, TF / HLO ops, steps, kernels,
# ops made for kernels, host events and aggregated events skipped.
_COUNTED = [
    "events",
    "tf_ops",
    "hlo_ops",
    "steps",
    "kernels",
    "kernel_ops",
    "host_events_skipped",
    "aggregated_events_skipped",
]


@dataclass
class Capture:
    """One capture being read (see the module docstring)."""

    path: Path
    space: XSpace
    b: FramesBuilder
    ops: list[Op] = field(default_factory=list)
    kernels: list[Kernel] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_COUNTED, 0))
    skipped_device_lines: list[str] = field(default_factory=list)
    modules: dict[tuple[str, int | None], Module] = field(default_factory=dict)  # by (name, program_id)

    def error(self, what: str, pi: int, li: int | None = None, ei: int | None = None) -> InputError:
        """The error for a problem with plane ``pi`` (line ``li``, event ``ei``)."""
        where = f"XSpace.planes[{pi}]"
        if li is not None:
            where += f".lines[{li}]"
        if ei is not None:
            where += f".events[{ei}]"
        return InputError(self.path, what, where)

    def module(self, name: str, program_id: int | None) -> Module | None:
        """The HLO module of that name and program, or the one of that name."""
        found = self.modules.get((name, program_id))
        if found is None:
            same = [m for (n, _), m in self.modules.items() if n == name]
            found = same[0] if len(same) == 1 else None
        return found

    def event_stats(
        self, plane: XPlane, ev: XEvent, at: At, wanted: frozenset[int] | None = None
    ) -> tuple[str, str, dict[str, Value]]:
        """An event's metadata name, display name, and stats (the
        metadata's, then the event's own, by name). With ``wanted`` (stat
        metadata ids), the stats are resolved only when the event has one of
        those (else ``{}``: most host events are read for their name alone);
        every stat's metadata is checked either way."""
        md = plane.event_metadata.get(ev.metadata_id)
        if md is None:
            raise self.error(
                f"an event refers to event metadata {ev.metadata_id}, which its plane does not define", *at
            )
        known = plane.stat_metadata
        for st in ev.stats:  # (``st.ref``, without the call: every stat of the capture passes here)
            if st.metadata_id not in known or (st.value_field == REF_VALUE and st.value not in known):
                bad = st.metadata_id if st.metadata_id not in known else st.value
                assert isinstance(bad, int)  # a ref is a stat metadata id
                raise self.error(f"a stat refers to stat metadata {bad}, which its plane does not define", *at)
        if wanted is not None and not md.stats and not any(st.metadata_id in wanted for st in ev.stats):
            return md.name, md.display_name, {}
        try:
            stats = plane.values(md.stats) if md.stats else {}
            if ev.stats:
                stats.update(plane.values(ev.stats))
        except Malformed as e:
            raise self.error(e.what, *at) from None
        return md.name, md.display_name, stats

    def timed(self, ev: XEvent, at: At) -> None:
        """Refuse an event with a negative duration."""
        if ev.duration_ps < 0:
            raise self.error(f"negative duration ({ev.duration_ps} ps)", *at)


def in_time_order(ops: list[Op], members: list[int]) -> list[int]:
    """Ops (indices into ``ops``) by start, longer first, then plane, line
    and event order."""
    return sorted(members, key=lambda j: (ops[j].start, -ops[j].end, ops[j].order))


def malformed(path: Path, e: Malformed, root: str) -> InputError:
    """The error for bytes that are not the message ``root`` (with where they broke)."""
    where = ".".join([root, *e.path])
    if e.offset is not None:
        where += f", byte {e.offset:,}"
    return InputError(path, f"not a readable XPlane capture: {e.what}", where)
