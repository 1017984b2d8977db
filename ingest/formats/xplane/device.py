"""What a capture's device planes (``/device:GPU:0``...) hold: the kernels,
copies and sets of each ``Stream`` line; the lines the profiler derives
from the streams (``XLA Ops``, ``Steps``...) and a TPU's are named in the
meta, not read (the rules in :mod:`.trace`'s docstring)."""

from __future__ import annotations

import re

from tracegraph.ingest.formats import kit
from tracegraph.ingest.formats.kit import Kind
from tracegraph.ingest.formats.xplane.capture import Capture, Kernel
from tracegraph.ingest.formats.xplane.host import timed_events
from tracegraph.ingest.formats.xplane.messages import Value, XPlane

_SIZE = re.compile(r"\bsize:(\d+)")
_DIRECTION = re.compile(r"(HtoD|DtoH|DtoD|HtoH|PtoP|H2D|D2H|D2D|H2H|P2P)")


def read_device_plane(cap: Capture, pi: int, plane: XPlane) -> None:
    """The kernels of a device plane's streams."""
    device = cap.b.device(plane.name)
    for li, line in enumerate(plane.lines):
        if not line.name.startswith("Stream"):
            cap.skipped_device_lines.append(f"{plane.name} | {line.name}")
            cap.counts["events"] += len(line.events)
            continue
        kind = "memcpy" if "memcpy" in line.name.lower() else "compute"
        stream = cap.b.stream(device, line.name, kind, key=f"{plane.name}/{line.id}")
        base = line.timestamp_ns * 1000
        for ei, ev in timed_events(cap, line):
            at = (pi, li, ei)
            cap.timed(ev, at)
            name, _display, stats = cap.event_stats(plane, ev, at)
            start = base + ev.offset_ps
            kkind, nbytes, direction = kernel_kind(name, stats)
            uid = kit.uid(Kind.KERNEL, *at)
            end = start + ev.duration_ps
            cap.kernels.append(Kernel(uid, at, name, stream, start, end, kkind, nbytes, direction, stats, device))
            cap.counts["kernels"] += 1


def kernel_kind(name: str, stats: dict[str, Value]) -> tuple[str, int | None, str | None]:
    """kind, bytes and copy direction of a device event."""
    low = name.lower()
    details = stats.get("memcpy_details")
    if isinstance(details, str) or "memcpy" in low:
        text = details if isinstance(details, str) else ""
        size = _SIZE.search(text)
        direction = _DIRECTION.search(name) or _DIRECTION.search(text)
        d = direction.group(1) if direction else None
        if d is not None and "2" in d:
            d = d.replace("2", "to")
        return "memcpy", int(size.group(1)) if size else None, d
    if "memset" in low:
        size = _SIZE.search(str(stats.get("memset_details", "")))
        return "memset", int(size.group(1)) if size else None, None
    if kit.is_communication_kernel(name):
        return "communication", None, None
    return "compute", None, None
