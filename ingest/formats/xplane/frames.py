"""A read capture's last passes and its frames: the framework, ``seq``,
each op's step, the rows with float microsecond times, and the Trace's
meta (the rules in :mod:`.trace`'s docstring)."""

from __future__ import annotations

import bisect
import json
from typing import Any

from tracegraph.ingest.formats.kit import Role
from tracegraph.ingest.formats.xplane.capture import METADATA_PLANE, TASK_PLANE, Capture, in_time_order
from tracegraph.ingest.formats.xplane.wire import Malformed
from tracegraph.ingest.frames import TraceFrames

_attrs_json = json.JSONEncoder(default=str, sort_keys=True).encode


def framework_of(cap: Capture) -> str:
    """``jax`` when /host:metadata has a ``jax_version`` stat, or the
    capture has HLO ops and no TF ops; else ``tensorflow``."""
    for plane in cap.space.planes:
        if plane.name == METADATA_PLANE and any(
            m.name == "jax_version" for m in (plane.stat_metadata.get(s.metadata_id) for s in plane.stats) if m
        ):
            return "jax"
    return "jax" if cap.counts["hlo_ops"] and not cap.counts["tf_ops"] else "tensorflow"


def number_ops(cap: Capture) -> None:
    """seq: by start, longer first, then plane, line and event order."""
    for seq, j in enumerate(in_time_order(cap.ops, list(range(len(cap.ops))))):
        cap.ops[j].seq = seq


def assign_steps(cap: Capture) -> None:
    """attrs.step of every op starting inside a step's interval (the
    latest-starting such step); a step's ``ops``: its work (its marker is
    not counted)."""
    if not cap.steps:
        return
    steps = sorted(cap.steps, key=lambda s: (s.start, -s.end, s.step))
    starts = [s.start for s in steps]
    for op in cap.ops:
        i = bisect.bisect_right(starts, op.start) - 1
        while i >= 0 and not (steps[i].start <= op.start < steps[i].end):
            i -= 1  # steps are few and rarely overlap: a short scan back
        if i >= 0:
            op.attrs["step"] = steps[i].step
            steps[i].ops += op.role is not Role.ANNOTATION


def frames(cap: Capture, framework: str, has_deps: bool) -> TraceFrames:
    """The checked frames of the capture, times from its earliest op,
    kernel or step start."""
    b, ops, kernels = cap.b, cap.ops, cap.kernels
    b.framework = framework
    origin = min([o.start for o in ops] + [k.start for k in kernels] + [s.start for s in cap.steps])
    # With dependencies, the HLO ops make the DAG.
    carries = has_deps and bool(b.deps)
    for op in ops:
        row: dict[str, Any] = {
            "uid": op.uid,
            "name": op.name,
            "type": op.type,
            "device": op.device,
            "seq": op.seq,
            "phase": "other" if framework == "tensorflow" and op.role is Role.ANNOTATION else op.phase,
            "executed": True,
            "attrs": _attrs_json(op.attrs),
            "thread": op.thread,
            "role": op.role.value,
            "parent": ops[op.parent].uid if op.parent is not None else None,
        }
        if carries:
            row["carries_deps"] = op.role is Role.OP
        b.op(row)
    for k in kernels:
        assert k.op is not None
        b.kernel(
            {
                "uid": k.uid,
                "op": ops[k.op].uid,
                "stream": k.stream,
                "name": k.name,
                "kind": k.kind,
                "bytes": k.nbytes,
                "direction": k.direction,
            }
        )
    b.meta = _meta(cap, framework, has_deps, origin)
    tf = b.frames()
    for df, items in ((tf.ops, ops), (tf.kernels, kernels)):
        if not items:
            continue
        start = [(x.start - origin) / 1e6 for x in items]
        end = [(x.end - origin) / 1e6 for x in items]
        dur = [(x.end - x.start) / 1e6 for x in items]
        df["start_us"], df["end_us"], df["dur_us"] = start, end, dur  # lists of floats: float64 columns
    tf.check()
    return tf


def _meta(cap: Capture, framework: str, has_deps: bool, origin: int) -> dict[str, Any]:
    space = cap.space
    meta: dict[str, Any] = {
        "planes": json.dumps([p.name for p in space.planes]),
        "event_counts": json.dumps(cap.counts, sort_keys=True),
    }
    if space.hostnames:
        meta["hostnames"] = json.dumps(space.hostnames)
    if space.errors:
        meta["profiler_errors"] = json.dumps(space.errors)
    if space.warnings:
        meta["profiler_warnings"] = json.dumps(space.warnings)
    for plane in space.planes:
        if plane.name in (TASK_PLANE, METADATA_PLANE):
            try:
                values = plane.values(plane.stats)
            except Malformed:
                continue
            for key in ("profile_start_time", "profile_stop_time"):
                if isinstance(values.get(key), int):
                    meta[key] = values[key]
            for key, value in values.items():
                if key.endswith("_version") and isinstance(value, str):
                    meta[key] = value
    if cap.skipped_device_lines:
        meta["skipped_device_lines"] = json.dumps(cap.skipped_device_lines)
    if cap.modules:
        meta["hlo_modules"] = json.dumps(sorted({name for name, _ in cap.modules}))
    if cap.steps:
        meta["steps"] = json.dumps(
            [
                {"step": s.step, "name": s.name, "dur_us": (s.end - s.start) / 1e6, "ops": s.ops}
                for s in sorted(cap.steps, key=lambda s: s.start)
            ]
        )
    if framework == "tensorflow" and not cap.counts["hlo_ops"]:
        meta["dependencies"] = "none in the file (TensorFlow captures record no op inputs)"
    elif has_deps:
        meta["dependencies"] = "from the HLO on /host:metadata: operands and control predecessors, per run"
    else:
        meta["dependencies"] = "none: the capture holds no HLO for its modules"
    meta["time_origin_ps"] = origin
    return meta
