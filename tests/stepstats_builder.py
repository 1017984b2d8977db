"""Tiny StepStats texts for tests whose answers are worked out by hand."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

GPU = "/job:localhost/replica:0/task:0/device:GPU:0"


@dataclass
class Op:
    name: str
    type: str
    start: int
    dur: int
    inputs: list[str] = field(default_factory=list)
    kernels: list[tuple[int, int, int]] = field(default_factory=list)  # (stream, start, dur)
    allocs: list[tuple[int, int]] = field(default_factory=list)  # (micros, +/-bytes)
    output_bytes: int | None = None
    # Nanosecond times (then ``start``/``dur`` are ignored): the record gets
    # all_start_nanos / all_end_rel_nanos and the micros fields TF derives
    # from them (start // 1000, end // 1000 - start // 1000).
    start_ns: int | None = None
    dur_ns: int | None = None


def _times(op: Op, base: int) -> list[str]:
    if op.start_ns is None:
        return [f"    all_start_micros: {base + op.start}", f"    all_end_rel_micros: {op.dur}"]
    start = base * 1000 + op.start_ns
    end = start + op.dur_ns
    return [
        f"    all_start_micros: {start // 1000}",
        f"    all_end_rel_micros: {end // 1000 - start // 1000}",
        f"    all_start_nanos: {start}",
        f"    all_end_rel_nanos: {op.dur_ns}",
    ]


def stepstats_text(ops: list[Op], base: int = 1_000_000) -> str:
    """A StepStats text: op-level records on GPU:0, kernels on stream:N.
    A name may repeat (one record per run, as a loop body gives)."""
    out = [f'dev_stats {{\n  device: "{GPU}"']
    for op in ops:
        args = ", ".join(op.inputs)
        rec = [f'  node_stats {{\n    node_name: "{op.name}"', *_times(op, base)]
        if op.allocs:
            rec.append('    memory {\n      allocator_name: "GPU_0_bfc"')
            for t, b in op.allocs:
                rec.append(f"      allocation_records {{ alloc_micros: {base + t} alloc_bytes: {b} }}")
            rec.append("    }")
        if op.output_bytes:
            rec.append(f"""    output {{ slot: 0 tensor_description {{ dtype: DT_FLOAT shape {{ dim {{ size: {op.output_bytes // 4} }} }}
      allocation_description {{ requested_bytes: {op.output_bytes} allocated_bytes: {op.output_bytes} allocator_name: "GPU_0_bfc" ptr: 4096 }} }} }}""")
        rec.append(f'    timeline_label: "{op.name} = {op.type}({args})"\n  }}')
        out.append("\n".join(rec))
    out.append("}")
    streams: dict[int, list[str]] = {}
    for op in ops:
        for stream, start, dur in op.kernels:
            streams.setdefault(stream, []).append(
                f'  node_stats {{ node_name: "{op.name}:{op.type}" all_start_micros: {base + start} all_end_rel_micros: {dur} }}'
            )
    for stream, recs in sorted(streams.items()):
        out.append(f'dev_stats {{\n  device: "/device:GPU:0/stream:{stream}"\n' + "\n".join(recs) + "\n}")
    return "\n".join(out) + "\n"


def write(tmp: Path, ops: list[Op], name: str = "trace.pbtxt") -> Path:
    p = tmp / name
    p.write_text(stepstats_text(ops))
    return p
