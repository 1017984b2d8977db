"""What a capture's host planes hold: the HLO modules on ``/host:metadata``,
and on ``/host:CPU`` the TF ops, HLO ops and steps of each thread (the
rules in :mod:`.trace`'s docstring)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from itertools import compress
from typing import Any

from tracegraph.ingest.formats import kit
from tracegraph.ingest.formats.kit import Kind, Role
from tracegraph.ingest.formats.tf.names import phase_of
from tracegraph.ingest.formats.xplane.capture import METADATA_PLANE, At, Capture, Op, Step, malformed
from tracegraph.ingest.formats.xplane.hlo import Module
from tracegraph.ingest.formats.xplane.messages import NUM_OCCURRENCES, Value, XEvent, XLine, XPlane, read_hlo_proto
from tracegraph.ingest.formats.xplane.wire import Malformed

_SUFFIX = re.compile(r"\.\d+\Z")
# The stats that make a host event an op or a step, or give an op's iteration.
_HOST_STATS = frozenset({"hlo_op", "step_num", "iter_num"})


def read_hlo_modules(cap: Capture) -> None:
    """The HLO of every module on /host:metadata, by (name, program_id)."""
    for pi, plane in enumerate(cap.space.planes):
        if plane.name != METADATA_PLANE:
            continue
        for key, md in plane.event_metadata.items():
            try:
                stats = plane.values(md.stats)
            except Malformed as e:
                raise cap.error(e.what, pi) from None
            proto = stats.get("Hlo Proto")
            if not isinstance(proto, bytes):
                continue
            try:
                module = Module.of(read_hlo_proto(proto))
            except Malformed as e:
                root = f"XSpace.planes[{pi}].event_metadata[{key}] Hlo Proto -> HloProto"
                raise malformed(cap.path, e, root) from None
            program = stats.get("program_id")
            program_id = program if isinstance(program, int) else None
            cap.modules.setdefault((module.name, program_id), module)


def timed_events(cap: Capture, line: XLine) -> Iterator[tuple[int, XEvent]]:
    """The events of a line that have a time, with their index; all are
    counted, the aggregated ones (a count, no time) as skipped."""
    timed = [ev.data_field != NUM_OCCURRENCES for ev in line.events]  # not ev.aggregated, without the call
    cap.counts["events"] += len(timed)
    cap.counts["aggregated_events_skipped"] += timed.count(False)
    return compress(enumerate(line.events), timed)


def read_host_plane(cap: Capture, pi: int, plane: XPlane, device: str) -> None:
    """The ops and steps of a host plane's threads (one line each)."""
    names: dict[str, int] = {}
    for line in plane.lines:
        names[line.name] = names.get(line.name, 0) + 1
    for li, line in enumerate(plane.lines):
        thread = line.name if names[line.name] == 1 else f"{line.name} ({line.id})"
        _host_line(cap, pi, li, plane, line, device, thread)


def _host_line(cap: Capture, pi: int, li: int, plane: XPlane, line: XLine, device: str, thread: str) -> None:
    base = line.timestamp_ns * 1000
    process: tuple[int, int, Value] | None = None  # the latest ExecutorState::Process: start, end, iter_num
    wanted = frozenset(i for i, m in plane.stat_metadata.items() if m.name in _HOST_STATS)
    for ei, ev in timed_events(cap, line):
        at = (pi, li, ei)
        name, display, stats = cap.event_stats(plane, ev, at, wanted)
        start = base + ev.offset_ps
        end = start + ev.duration_ps
        hlo_op = stats.get("hlo_op")
        step = stats.get("step_num")
        if name == "ExecutorState::Process":
            process = (start, end, stats.get("iter_num"))
            cap.counts["host_events_skipped"] += 1
        elif isinstance(hlo_op, str) and hlo_op:
            cap.timed(ev, at)
            op = hlo_op_of(cap, hlo_op, stats, device, start, end, at)
            op.thread, op.line = thread, (pi, li)
            cap.ops.append(op)
            cap.counts["hlo_ops"] += 1
        elif isinstance(step, int) and not isinstance(step, bool):
            cap.timed(ev, at)
            cap.steps.append(Step(name, step, start, end))
            cap.counts["steps"] += 1
            # The step's marker, an annotation op as every format's steps are
            # (Kineto's ProfilerStep#N, the same StepTraceAnnotation in a
            # Chrome trace): ingest makes a Step of it by its step_num.
            marker = Op(kit.uid(Kind.OP, *at), name, "step", device, start, end, at, role=Role.ANNOTATION)
            marker.thread, marker.line = thread, (pi, li)
            marker.attrs["step_num"] = step
            cap.ops.append(marker)
        elif display and name.endswith(":" + display) and _node_name(name[: -len(display) - 1]):
            cap.timed(ev, at)
            node = name[: -len(display) - 1]
            op = Op(kit.uid(Kind.OP, *at), node, display, device, start, end, at, phase=phase_of(node, display))
            op.thread, op.line = thread, (pi, li)
            if process is not None and process[0] <= start and end <= process[1] and process[2] is not None:
                op.attrs["iter_num"] = process[2]
            cap.ops.append(op)
            cap.counts["tf_ops"] += 1
        else:
            cap.counts["host_events_skipped"] += 1


def hlo_op_of(cap: Capture, hlo_op: str, stats: dict[str, Value], device: str, start: int, end: int, at: At) -> Op:
    """An HLO op (a host event, or a device event no host op launched):
    its type and attrs from its module's instruction when the capture has
    the module."""
    module_name = stats.get("hlo_module")
    program = stats.get("program_id")
    program_id = program if isinstance(program, int) else None
    attrs: dict[str, Any] = {"hlo_module": module_name, "program_id": program_id, "run_id": stats.get("run_id")}
    ins = None
    if isinstance(module_name, str):
        module = cap.module(module_name, program_id)
        ins = module.by_name.get(hlo_op) if module is not None else None
        if ins is not None and module is not None:
            attrs["computation"] = module.computation_name(ins)
            attrs["fusion_kind"] = ins.fusion_kind or None
            attrs["op_name"] = ins.op_name or None
            attrs["op_type"] = ins.op_type or None
    op_type = ins.opcode if ins is not None and ins.opcode else _SUFFIX.sub("", hlo_op)
    op = Op(kit.uid(Kind.OP, *at), hlo_op, op_type, device, start, end, at)
    op.attrs = {k: v for k, v in attrs.items() if v is not None and not isinstance(v, bytes)}
    if isinstance(module_name, str):
        op.module = (module_name, program_id)
        op.run = stats.get("run_id")
    return op


def _node_name(node: str) -> bool:
    """A TF node name as the executor's TraceMe gives it (no spaces)."""
    return bool(node) and not any(c.isspace() for c in node)
