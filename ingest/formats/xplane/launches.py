"""Which op each kernel belongs to, and each host op's parent (the rules in
:mod:`.trace`'s docstring): the op that launched a kernel where the file
says (the launch's correlation id on a host plane, then the innermost op
of that thread around the launch; else the latest op started by then that
the kernel's ``tf_op`` or ``hlo_op`` names), else an op of its own."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from tracegraph.ingest.formats import kit
from tracegraph.ingest.formats.kit import Kind, Role
from tracegraph.ingest.formats.tf.names import phase_of
from tracegraph.ingest.formats.xplane.capture import METADATA_PLANE, Capture, Kernel, Op, in_time_order
from tracegraph.ingest.formats.xplane.host import hlo_op_of
from tracegraph.ingest.formats.xplane.messages import Value


def nest(cap: Capture) -> None:
    """Each host op's parent: the innermost op of its line holding its start."""
    by_line: dict[tuple[int, int], list[int]] = {}
    for j, op in enumerate(cap.ops):
        if op.line is not None:
            by_line.setdefault(op.line, []).append(j)
    for members in by_line.values():
        stack: list[int] = []
        for j in in_time_order(cap.ops, members):
            op = cap.ops[j]
            while stack and cap.ops[stack[-1]].end <= op.start:
                stack.pop()
            if stack:
                op.parent = stack[-1]
            if op.end > op.start:
                stack.append(j)


def link_kernels(cap: Capture) -> None:
    """Each kernel's op: its launcher, else an op made for it."""
    if not cap.kernels:
        return
    index = _Launchers.of(cap)
    for k in cap.kernels:
        k.op = index.launcher(k)
    for k in cap.kernels:
        if k.op is None:
            k.op = _kernel_op(cap, k)


@dataclass
class _Launchers:
    """Where to look a kernel's launcher up."""

    ops: list[Op]
    launches: dict[object, tuple[int, int]] = field(default_factory=dict)  # correlation id -> (thread id, time)
    threads: dict[int, list[int]] = field(default_factory=dict)  # host ops by thread id, in time order
    starts: dict[int, list[int]] = field(default_factory=dict)  # their starts
    by_name: dict[str, list[int]] = field(default_factory=dict)  # ops by name, in start order
    name_starts: dict[str, list[int]] = field(default_factory=dict)  # their starts

    @classmethod
    def of(cls, cap: Capture) -> _Launchers:
        index = cls(cap.ops)
        for plane in cap.space.planes:
            if plane.name.startswith("/device:") or plane.name == METADATA_PLANE:
                continue
            corr_ids = {i for i, m in plane.stat_metadata.items() if m.name == "correlation_id"}
            if not corr_ids:
                continue
            for line in plane.lines:
                base = line.timestamp_ns * 1000
                for ev in line.events:
                    for s in ev.stats:
                        if s.metadata_id in corr_ids and not s.ref:
                            index.launches[s.value] = (line.id, base + ev.offset_ps)
        threads: dict[int, list[int]] = {}
        for j, op in enumerate(cap.ops):
            if op.line is not None:
                threads.setdefault(cap.space.planes[op.line[0]].lines[op.line[1]].id, []).append(j)
        for tid, members in threads.items():
            index.threads[tid] = in_time_order(cap.ops, members)
            index.starts[tid] = [cap.ops[j].start for j in index.threads[tid]]
        for j, op in enumerate(cap.ops):
            if op.role is Role.OP:
                index.by_name.setdefault(op.name, []).append(j)
        for name, members in index.by_name.items():
            members.sort(key=lambda j: cap.ops[j].start)
            index.name_starts[name] = [cap.ops[j].start for j in members]
        return index

    def launcher(self, k: Kernel) -> int | None:
        """The op that launched ``k``, when the file says which."""
        ops = self.ops
        corr = k.stats.get("correlation_id")
        if corr is not None and corr in self.launches:
            tid, t = self.launches[corr]
            members = self.threads.get(tid, [])
            i = bisect.bisect_right(self.starts.get(tid, []), t) - 1
            j: int | None = members[i] if i >= 0 else None
            while j is not None and not (ops[j].start <= t <= ops[j].end and ops[j].role is Role.OP):
                j = ops[j].parent
            if j is not None:
                return j
        name, module = _named_op(k.stats)
        if name is None:
            return None
        named = self.by_name.get(name, [])
        i = bisect.bisect_right(self.name_starts.get(name, []), k.start) - 1
        while i >= 0:  # the latest op of that name (and module) started by then
            op = ops[named[i]]
            if module is None or op.module is None or op.module[0] == module:
                return named[i]
            i -= 1
        return None


def _kernel_op(cap: Capture, k: Kernel) -> int:
    """An op of its own for a kernel no host op launched (see above)."""
    name, module_name = _named_op(k.stats)
    if isinstance(module_name, str) and name is not None:
        op = hlo_op_of(cap, name, k.stats, k.device, k.start, k.end, k.at)
    else:
        tf_op = k.stats.get("tf_op")
        if isinstance(tf_op, str) and ":" in tf_op:
            op_name, op_type = tf_op.rsplit(":", 1)
            phase: str | None = phase_of(op_name, op_type)
        else:
            op_name, op_type, phase = (name or k.name), "kernel", None
        op = Op(kit.uid(Kind.OP, *k.at), op_name, op_type, k.device, k.start, k.end, k.at, phase=phase)
    op.attrs["from_kernel"] = True
    cap.ops.append(op)
    cap.counts["kernel_ops"] += 1
    return len(cap.ops) - 1


def _named_op(stats: dict[str, Value]) -> tuple[str | None, str | None]:
    """The op a device event names in its stats (``tf_op`` ``node:type`` ->
    ``node``; ``hlo_op``), and its ``hlo_module``."""
    tf_op = stats.get("tf_op")
    if isinstance(tf_op, str) and tf_op:
        return tf_op.rsplit(":", 1)[0] if ":" in tf_op else tf_op, None
    hlo_op = stats.get("hlo_op")
    module = stats.get("hlo_module")
    if isinstance(hlo_op, str) and hlo_op:
        return hlo_op, module if isinstance(module, str) else None
    return None, None
