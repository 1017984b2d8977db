"""Chrome Trace Event Format from any producer (``chrome-trace``).

The lingua franca of trace files: JAX's ``perfetto_trace.json.gz`` and
TensorBoard's ``<host>.trace.json.gz`` (the trace viewer's JSON of an
XPlane, JAX or TensorFlow), PaddlePaddle's ``*.paddle_trace.json``, and
whatever else writes ``{"traceEvents": [...]}`` or a bare ``[...]`` of
events, gzipped or not (:mod:`.load` reads both forms and the unterminated
files writers leave). PyTorch's Kineto traces are Chrome traces too, but
have a reader of their own (``pytorch-kineto``), which detection prefers.

The producer is recognised by content (:mod:`.producers`) and names the
trace's ``framework``: ``jax``, ``tensorflow``, ``paddle``, or ``chrome``
for any other; every producer gets every analysis its facts allow.

What becomes what:

* Lanes. A process is a *device* when its name (``M`` ``process_name``,
  else its ``process_labels``, where Kineto writes ``GPU 0``) names one: ``/device:GPU:0`` (not ``CPU``), ``GPU 0``, ``TPU:1``,
  PaddlePaddle's ``Deivce 0 (GPU)``; the device is named
  ``/device:<KIND>:<N>``. Its threads named ``stream ...`` (any case) or
  not named at all are *streams* (named by the thread's name, else
  ``stream:<tid>``); its other named threads (the trace viewer's ``XLA
  Ops``, ``XLA Modules``, ``Steps``, ...) are derived views of the same
  device time, read as annotations, as are spans of an annotation category
  anywhere (Kineto's ``gpu_user_annotation``). Every other process is the
  host (one Device ``/host:CPU``).
* Spans (``X`` complete events; ``B``/``E`` pairs, each ``E`` closing the
  latest open ``B`` of its thread): on a stream, or anywhere with a device
  category (``kernel``, ``gpu_memcpy``, ``gpu_memset``, ``memcpy``,
  ``memset``: then on device ``args.device``, else the pid, and stream
  ``args.stream``, else the tid), they are Kernels ``k:<event index>``;
  kind ``memcpy`` / ``memset`` by category or name (``bytes`` from
  ``args.bytes``, ``direction`` from ``HtoD``-style words in the name),
  ``communication`` by the kit's rule, else ``compute``. Other spans are
  Ops ``op:<event index>`` on their thread (``thread`` = ``pid:tid``),
  with ``category`` = ``cat``, ``role`` from the category
  (:mod:`.producers`: runtime calls, synchronizing calls, annotations,
  else ``op``), ``type`` = the name without a step number (``#3``) or
  the producer's decorations, and ``attrs`` = the category, pid, tid and
  ``args``.
* Instants (``i``, ``I``, ``n``) are zero-length annotation Ops at their time.
* Nesting: an op's ``parent`` is the innermost op of its thread whose
  interval contains its start and (within 1 us of rounding) its end; sorted
  by start, longer first, then file order (``seq`` is that order over all
  ops).
* Launches: a flow (``s`` -> ``f`` with the same ``id`` and category, or
  ``bind_id`` with ``flow_out`` / ``flow_in`` on the spans themselves) from
  a host span to a kernel, or else the same ``args`` correlation id
  (``correlation``, ``correlation id``, ``correlation_id``) on a host span
  and a kernel, makes the host span the kernel's ``launch``; the op that
  launched it (``LAUNCHED``) is the innermost ancestor of role ``op`` of a
  runtime call (the call itself when none), or the span itself. A flow's
  start binds to the innermost span of its thread enclosing its time; its
  end likewise, or (without ``"bp": "e"``) to the next span starting after
  it. A kernel without a launch belongs to its device's op
  ``op:outside:<n>`` named ``[launched outside the trace]`` (as in every
  format with launches; type
  ``OutsideTrace``; zero-length at the first such kernel's start); their
  number is ``meta_kernels_without_launch``.
* Phase: PaddlePaddle's ``Forward``, ``Backward``, ``Optimization`` and
  ``Communication`` spans give what runs in them their phase; other
  producers record none.
* Times: ``ts`` and ``dur`` are microseconds with fractions, read exactly
  to the nanosecond (``displayTimeUnit`` only sets how viewers display them; it is kept as
  ``meta_display_time_unit``), made microseconds since the first span,
  instant or memory counter value read.
* Memory counters (``C`` events whose counter or series name says memory:
  ``mem``, ``bytes``, ``alloc``, ``heap``; non-negative values) are
  allocators, one per series (named by the counter, ``counter/key`` when
  it has several), on the process's device, with the allocations whose
  live bytes the series is (:mod:`.counters`): the memory analyses read
  them like any allocator's.
* Skipped, counted per phase (or category) in ``meta_skipped_events``
  (JSON): Kineto's ``cuda_sync`` records, the values of other counters,
  async events (``b``/``e``/``S``/``F``...), samples, object
  events, flow steps, ``E`` without a ``B``, a ``B`` never closed, and
  empty ``{}`` events (written by JAX and PaddlePaddle at the list's end).
  The object form's other top-level keys with a short scalar value are
  ``meta_file_keys`` (JSON); nested ones (a producer's whole environment,
  secrets included at times) are not kept.

Errors (one line naming the file, and the event as ``traceEvents[i]``):
no span, instant or counter at all; an event that is not a JSON object, or
has no ``ph``; a time past :data:`MAX_TIME_US`; a span, instant or
flow without a numeric ``ts``; an ``X`` without a numeric ``dur`` or with
a negative one; plus :mod:`.load`'s (not JSON, truncated, no
``traceEvents``).
"""

from __future__ import annotations

import bisect
import json
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from tracegraph.errors import InputError
from tracegraph.ingest import source
from tracegraph.ingest.formats.chrome import counters
from tracegraph.ingest.formats.chrome.load import FORMAT_NAME, Document, load
from tracegraph.ingest.formats.chrome.producers import DEVICE_CATEGORIES, Producer, recognise
from tracegraph.ingest.formats.kit import (
    OUTSIDE_OP_NAME,
    FormatInfo,
    FramesBuilder,
    Joins,
    Kind,
    Role,
    is_communication_kernel,
    uid,
)
from tracegraph.ingest.frames import TraceFrames

FORMAT = FormatInfo(FORMAT_NAME, "chrome", Joins.ALONE, "Chrome Trace Event JSON (JAX, TensorFlow, PaddlePaddle, any)")

# The largest time (or duration) an event may give, in microseconds: 2^62 ns,
# 146 years past any epoch's origin (the times become float microseconds).
MAX_TIME_US = 2**62 // 1000
# How far past its parent's end a nested op may end (ns): microsecond rounding.
NEST_SLACK_NS = 1000
CORRELATION_ARGS = ("correlation", "correlation id", "correlation_id", "correlationId")
# Records that are neither work nor markers: Kineto's synchronization records
# (a reader of their own, pytorch-kineto, turns them into sync edges).
SKIPPED_CATEGORIES = frozenset({"cuda_sync"})
HOST_DEVICE = "/host:CPU"

_DEVICE_PROCESS = (
    re.compile(r"/device:(?!CPU\b)([A-Za-z]+):(\d+)"),
    re.compile(r"(\d+)\s*\((GPU|TPU|NPU|XPU|HPU|MLU|IPU)\)", re.IGNORECASE),  # PaddlePaddle: Deivce 0 (GPU)
    re.compile(r"\b(GPU|TPU|NPU|XPU|HPU|MLU|IPU|cuda|hip)\s*:?\s*(\d+)", re.IGNORECASE),
)
_STREAM_LANE = re.compile(r"stream", re.IGNORECASE)
_DIRECTION = re.compile(r"\b(?:Memcpy\s*)?([HDAP]to[HDAP])\b", re.IGNORECASE)
_SNIFF_ARRAY = re.compile(rb'^\[\s*\{[^{}]*"(ph|ts|pid|tid)"\s*:')
_SPAN_PHASES = frozenset("XBE")
_INSTANT_PHASES = frozenset("iIn")
_FLOW_PHASES = frozenset("stf")


def sniff(head: bytes) -> bool:
    """A JSON object with a ``traceEvents`` list, or a JSON array whose
    first event has Chrome trace fields (gzipped or not)."""
    text = source.unzipped_head(head).lstrip(b"\xef\xbb\xbf \t\r\n")
    if text.startswith(b"{"):
        return re.search(rb'"traceEvents"\s*:\s*\[', text) is not None
    return _SNIFF_ARRAY.match(text) is not None


def parse(path: Path) -> TraceFrames:
    """The trace as frames (rules in the module docstring)."""
    doc = load(path)
    events = _Events.read(path, doc)
    if not events.spans and not events.samples:
        raise InputError(path, "no trace events (spans, instants or counters) in traceEvents")
    producer = recognise(doc.keys, events.categories(), events.names(), events.process_names.values())
    events.threads_as(producer)
    return _build(path, doc, events, producer)


# --- events ---------------------------------------------------------------------------------


@dataclass
class Span:
    """A span or instant of the file: its event index, lane and times (ns)."""

    index: int
    pid: Any
    tid: Any
    name: str
    cat: str
    start: int
    end: int
    args: dict[str, Any]
    instant: bool = False
    parent: int = -1  # position in its lane's spans


@dataclass
class Flow:
    """One end of a flow: its phase (``s`` or ``f``), lane, time and binding."""

    phase: str
    key: tuple[str, str]
    pid: Any
    tid: Any
    t: int
    enclosing: bool  # ``f`` binds to the enclosing span (``"bp": "e"``), else the next one


@dataclass
class _Events:
    spans: list[Span] = field(default_factory=list)
    flows: list[Flow] = field(default_factory=list)
    bound: list[tuple[str, Any, int]] = field(default_factory=list)  # (out/in, bind_id, span position)
    samples: list[counters.Sample] = field(default_factory=list)
    process_names: dict[Any, str] = field(default_factory=dict)
    process_labels: dict[Any, str] = field(default_factory=dict)
    thread_names: dict[tuple[Any, Any], str] = field(default_factory=dict)
    skipped: Counter[str] = field(default_factory=Counter)

    @classmethod
    def read(cls, path: Path, doc: Document) -> _Events:
        ev = cls()
        open_b: dict[tuple[Any, Any], list[tuple[int, dict[str, Any]]]] = defaultdict(list)
        for i, e in enumerate(doc.events):
            if not isinstance(e, dict):
                raise InputError(path, "event is not a JSON object", f"traceEvents[{i}]")
            if not e:
                ev.skipped["{}"] += 1
                continue
            ph = e.get("ph")
            if not isinstance(ph, str) or not ph:
                raise InputError(path, "event has no ph (phase)", f"traceEvents[{i}]")
            pid, tid = _lane_id(e.get("pid")), _lane_id(e.get("tid"))
            if ph == "M":
                ev._metadata(e, pid, tid)
            elif ph == "X":
                start = _ns(path, i, e, "ts")
                dur = _ns(path, i, e, "dur")
                if dur < 0:
                    raise InputError(path, f"negative dur {e['dur']}", f"traceEvents[{i}]")
                ev._span(i, e, pid, tid, start, start + dur)
            elif ph == "B":
                open_b[(pid, tid)].append((i, e))
                _ns(path, i, e, "ts")
            elif ph == "E":
                stack = open_b.get((pid, tid))
                if not stack:
                    ev.skipped["E without B"] += 1
                    continue
                j, b = stack.pop()
                args = {**_args(b), **_args(e)}
                ev._span(j, {**b, "args": args}, pid, tid, _ns(path, j, b, "ts"), _ns(path, i, e, "ts"))
            elif ph in _INSTANT_PHASES:
                t = _ns(path, i, e, "ts")
                ev._span(i, e, pid, tid, t, t, instant=True)
            elif ph == "C":
                t = _ns(path, i, e, "ts")
                name = str(e.get("name", ""))
                if "id" in e:  # a counter's id makes it another series of the same name
                    name = f"{name}[{e['id']}]"
                for series, value in _args(e).items():
                    ev.samples.append(counters.Sample(pid, name, str(series), t, value))
            elif ph in ("s", "f"):
                flow = (str(e.get("cat", "")), str(e.get("id", e.get("id2", ""))))
                ev.flows.append(Flow(ph, flow, pid, tid, _ns(path, i, e, "ts"), e.get("bp") == "e" or ph == "s"))
            else:
                ev.skipped[ph] += 1
        ev.skipped["B never closed"] += sum(len(s) for s in open_b.values())
        ev.skipped = Counter({k: v for k, v in ev.skipped.items() if v})
        ev.spans.sort(key=lambda s: s.index)  # B/E spans were added at their E
        return ev

    def _metadata(self, e: dict[str, Any], pid: Any, tid: Any) -> None:
        args = _args(e)
        name = args.get("name", args.get("labels"))
        if not isinstance(name, str):
            return
        if e.get("name") == "process_name":
            self.process_names.setdefault(pid, name)
        elif e.get("name") == "process_labels":  # Kineto names its GPU processes here: "GPU 0"
            self.process_labels.setdefault(pid, name)
        elif e.get("name") == "thread_name":
            self.thread_names.setdefault((pid, tid), name)

    def _span(self, i: int, e: dict[str, Any], pid: Any, tid: Any, start: int, end: int, instant: bool = False) -> None:
        name = e.get("name")
        name = name if isinstance(name, str) and name else ("[unnamed]" if name is None else str(name))
        cat = e.get("cat")
        self.spans.append(Span(i, pid, tid, name, cat if isinstance(cat, str) else "", start, end, _args(e), instant))
        bind = e.get("bind_id")
        if bind is not None:
            if e.get("flow_out"):
                self.bound.append(("out", bind, i))
            if e.get("flow_in"):
                self.bound.append(("in", bind, i))

    def threads_as(self, producer: Producer) -> None:
        """Thread ids as the producer's OS threads (:meth:`Producer.thread`)."""
        for s in self.spans:
            s.tid = producer.thread(s.tid)
        for f in self.flows:
            f.tid = producer.thread(f.tid)
        self.thread_names = {(pid, producer.thread(tid)): n for (pid, tid), n in self.thread_names.items()}

    def categories(self) -> set[str]:
        return {s.cat for s in self.spans}

    def names(self) -> set[str]:
        return {s.name for s in self.spans}


def _lane_id(value: Any) -> Any:
    """A pid or tid as a hashable key (numbers and strings as given)."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else str(value)
    return value if isinstance(value, int | str) else ("" if value is None else str(value))


def _args(e: dict[str, Any]) -> dict[str, Any]:
    args = e.get("args")
    return args if isinstance(args, dict) else {}


def _ns(path: Path, i: int, e: dict[str, Any], key: str) -> int:
    """A time field (microseconds) as exact integer nanoseconds."""
    value = e.get(key)
    if isinstance(value, bool) or not isinstance(value, int | Decimal):
        what = "no" if value is None else "a non-numeric"
        raise InputError(path, f"event has {what} {key}", f"traceEvents[{i}]")
    if isinstance(value, Decimal) and not value.is_finite():  # pragma: no cover - JSON has no NaN
        raise InputError(path, f"{key} is not a finite number", f"traceEvents[{i}]")
    if not -MAX_TIME_US <= value <= MAX_TIME_US:
        raise InputError(path, f"{key} {value} is out of range (at most {MAX_TIME_US:,} us)", f"traceEvents[{i}]")
    return value * 1000 if isinstance(value, int) else int((value * 1000).to_integral_value())


# --- lanes ------------------------------------------------------------------------------------


def device_of_process(name: str) -> str | None:
    """``/device:<KIND>:<N>`` for a process whose name names a device, else None."""
    for pattern in _DEVICE_PROCESS:
        m = pattern.search(name)
        if m:
            a, b = m.groups()
            kind, number = (b, a) if a.isdigit() else (a, b)
            kind = {"cuda": "GPU", "hip": "GPU"}.get(kind.lower(), kind.upper())
            return f"/device:{kind}:{number}"
    return None


# --- frames -----------------------------------------------------------------------------------


def _build(path: Path, doc: Document, ev: _Events, producer: Producer) -> TraceFrames:
    b = FramesBuilder(producer.framework, [str(path)])
    host = b.device(HOST_DEVICE, "CPU")
    device_processes = {
        pid: d
        for names in (ev.process_labels, ev.process_names)  # a device by its name wins over one by its labels
        for pid, n in names.items()
        if (d := device_of_process(n))
    }
    memory = {k: v for k, v in counters.series(ev.samples).items() if counters.is_memory(k[1], k[2], v)}
    ev.skipped["C values not memory"] += sum(len(v) for k, v in counters.series(ev.samples).items() if k not in memory)
    origin = min([s.start for s in ev.spans] + [v[0].t for v in memory.values()], default=0)

    def us(t: int) -> float:
        return (t - origin) / 1000.0

    # Which spans are kernels, and on which stream.
    ops: list[Span] = []
    kernels: list[tuple[Span, str]] = []
    for s in ev.spans:
        if s.cat.lower() in SKIPPED_CATEGORIES:
            ev.skipped[s.cat] += 1
            continue
        stream = _stream_of(b, s, producer, device_processes, ev.thread_names)
        if stream is None:
            ops.append(s)
        else:
            kernels.append((s, stream))
    lanes = _nest(ops)
    seq = {id(s): k for k, s in enumerate(sorted(ops, key=lambda s: (s.start, -s.end, s.index)))}
    parent_of = {id(s): (lanes[(s.pid, s.tid)][s.parent] if s.parent >= 0 else None) for s in ops}
    roles: dict[int, Role] = {}
    for s in ops:
        device = host
        derived = device_processes.get(s.pid)
        if derived is not None:
            device = b.device(derived)
        marker = s.instant or derived is not None or "step_num" in s.args  # TF/JAX StepTraceAnnotation
        role = Role.ANNOTATION if marker else producer.role(s.cat, s.name)
        roles[id(s)] = role
        name = producer.name(s.name)
        p = parent_of[id(s)]
        b.op(
            {
                "uid": uid(Kind.OP, s.index),
                "name": name,
                "type": producer.op_type(name),
                "device": device,
                "seq": seq[id(s)],
                "start_us": us(s.start),
                "end_us": us(s.end),
                "dur_us": (s.end - s.start) / 1000.0,
                "phase": None,
                "executed": True,
                "attrs": _attrs(s),
                "parent": uid(Kind.OP, p.index) if p is not None else None,
                "thread": f"{s.pid}:{s.tid}",
                "category": s.cat,
                "role": role.value,
            }
        )
    _phases(b, ops, parent_of, producer)
    launches = _launches(ev, ops, kernels, lanes)
    outside: dict[str, str] = {}
    for s, stream in kernels:
        launch = launches.get(s.index)
        if launch is not None:
            op = _launcher(launch, parent_of, roles)
            launch_uid: str | None = uid(Kind.OP, launch.index)
            op_uid = uid(Kind.OP, op.index)
        else:
            device = b.streams[stream]["device"]
            op_uid = outside.get(device) or b.outside_op(
                f"outside:{len(outside)}", OUTSIDE_OP_NAME, device, us(s.start)
            )
            outside[device] = op_uid
            launch_uid = None
        b.kernel(_kernel_row(s, stream, op_uid, launch_uid, producer, us))
    _allocations(b, memory, device_processes, us)
    b.meta.update(_meta(doc, ev, producer, sum(1 for s, _ in kernels if s.index not in launches)))
    return b.build()


def _allocations(
    b: FramesBuilder,
    memory: dict[tuple[Any, str, str], list[counters.Sample]],
    device_processes: dict[Any, str],
    us: Any,
) -> None:
    """Each memory series as an allocator and its allocations (:mod:`.counters`)."""
    keys_of: dict[tuple[Any, str], int] = defaultdict(int)
    for pid, counter, _ in memory:
        keys_of[(pid, counter)] += 1
    for n, ((pid, counter, key), values) in enumerate(memory.items()):
        name = counter if keys_of[(pid, counter)] == 1 else f"{counter}/{key}"
        device = b.device(device_processes[pid]) if pid in device_processes else b.device(HOST_DEVICE, "CPU")
        allocator = b.allocator(name, device, key=f"{pid}:{counter}:{key}")
        for m, block in enumerate(counters.blocks(values)):
            b.allocation(
                {
                    "uid": uid(Kind.ALLOCATION, n, m),
                    "allocator": allocator,
                    "bytes": block.bytes,
                    "alloc_us": us(block.alloc),
                    "free_us": us(block.free) if block.free is not None else None,
                }
            )


def _stream_of(
    b: FramesBuilder,
    s: Span,
    producer: Producer,
    device_processes: dict[Any, str],
    thread_names: dict[tuple[Any, Any], str],
) -> str | None:
    """The stream uid of a span that is device work, else None (an op)."""
    if s.instant or producer.role(s.cat, s.name) is Role.ANNOTATION:
        return None  # a marker, on a device's lane too (Kineto's gpu_user_annotation)
    device = device_processes.get(s.pid)
    if device is not None:
        lane = thread_names.get((s.pid, s.tid))
        if "stream" in s.args:
            name = f"stream:{s.args['stream']}"
        elif lane is None:
            name = f"stream:{s.tid}"
        elif _STREAM_LANE.search(lane):
            name = lane
        else:
            return None  # a derived view of the device (XLA Ops, Steps, ...)
        return b.stream(b.device(device), name)
    if s.cat.lower() in DEVICE_CATEGORIES:
        number = s.args.get("device", s.pid)
        dev = b.device(f"/device:GPU:{number}")
        return b.stream(dev, f"stream:{s.args.get('stream', s.tid)}")
    return None


def _nest(ops: list[Span]) -> dict[tuple[Any, Any], list[Span]]:
    """Each lane's spans in (start, longer first, file order) order, with
    ``parent`` set to the position of the innermost span containing each."""
    lanes: dict[tuple[Any, Any], list[Span]] = defaultdict(list)
    for s in ops:
        lanes[(s.pid, s.tid)].append(s)
    for spans in lanes.values():
        spans.sort(key=lambda s: (s.start, -s.end, s.index))
        stack: list[tuple[int, int]] = []  # (end, position)
        for k, s in enumerate(spans):
            while stack and stack[-1][0] <= s.start:
                stack.pop()
            end = s.end
            for open_end, position in reversed(stack):
                if s.start <= open_end and end <= open_end + NEST_SLACK_NS:
                    s.parent = position
                    end = min(end, open_end)
                    break
            if end > s.start:
                stack.append((end, k))
    return lanes


def _enclosing(lane: list[Span], starts: list[int], t: int) -> Span | None:
    """The innermost span of a lane enclosing time ``t`` (ends included)."""
    k = bisect.bisect_right(starts, t) - 1
    while k >= 0:
        if lane[k].end >= t:
            return lane[k]
        k = lane[k].parent
    return None


def _launches(
    ev: _Events, ops: list[Span], kernels: list[tuple[Span, str]], lanes: dict[tuple[Any, Any], list[Span]]
) -> dict[int, Span]:
    """Kernel event index -> the host span that launched it: by flow, else
    by correlation id."""
    kernel_index = {s.index: s for s, _ in kernels}
    op_index = {s.index: s for s in ops}
    kernel_lanes: dict[tuple[Any, Any], list[Span]] = defaultdict(list)
    for s, _ in kernels:
        kernel_lanes[(s.pid, s.tid)].append(s)
    for spans in kernel_lanes.values():
        spans.sort(key=lambda s: (s.start, -s.end, s.index))
    starts = {k: [s.start for s in v] for k, v in lanes.items()}
    kernel_starts = {k: [s.start for s in v] for k, v in kernel_lanes.items()}
    found: dict[int, Span] = {}

    def bind(flow: Flow) -> Span | None:
        lane_key = (flow.pid, flow.tid)
        if lane_key in lanes:
            return _enclosing(lanes[lane_key], starts[lane_key], flow.t)
        spans = kernel_lanes.get(lane_key)
        if not spans:
            return None
        k_starts = kernel_starts[lane_key]
        k = bisect.bisect_right(k_starts, flow.t) - 1
        if k >= 0 and spans[k].end >= flow.t:
            return spans[k]
        if not flow.enclosing and k + 1 < len(spans):
            return spans[k + 1]
        return None

    sources: dict[tuple[str, str], Span] = {}
    for flow in ev.flows:
        if flow.phase == "s":
            span = bind(flow)
            if span is not None and span.index in op_index:
                sources.setdefault(flow.key, span)
    for flow in ev.flows:
        if flow.phase == "f" and flow.key in sources:
            span = bind(flow)
            if span is not None and span.index in kernel_index:
                found.setdefault(span.index, sources[flow.key])
    outs: dict[Any, Span] = {}
    for direction, bind_id, index in ev.bound:
        if direction == "out" and index in op_index:
            outs.setdefault(bind_id, op_index[index])
    for direction, bind_id, index in ev.bound:
        if direction == "in" and index in kernel_index and bind_id in outs:
            found.setdefault(index, outs[bind_id])
    by_correlation: dict[Any, Span] = {}
    for s in ops:
        c = _correlation(s)
        if c is not None and (c not in by_correlation or s.start >= by_correlation[c].start):
            by_correlation[c] = s
    for s, _ in kernels:
        c = _correlation(s)
        if s.index not in found and c is not None and c in by_correlation:
            found[s.index] = by_correlation[c]
    return found


def _correlation(s: Span) -> Any:
    for key in CORRELATION_ARGS:
        value = s.args.get(key)
        if isinstance(value, int | str) and not isinstance(value, bool):
            return value
    return None


def _launcher(call: Span, parent_of: dict[int, Span | None], roles: dict[int, Role]) -> Span:
    """The op that launched what ``call`` issued: the innermost ancestor of
    role ``op`` of a runtime call (the call itself when none), else the
    span itself."""
    if roles[id(call)] not in (Role.RUNTIME, Role.SYNC):
        return call
    p = parent_of[id(call)]
    while p is not None:
        if roles[id(p)] is Role.OP:
            return p
        p = parent_of[id(p)]
    return call


def _kernel_row(s: Span, stream: str, op: str, launch: str | None, producer: Producer, us: Any) -> dict[str, Any]:
    name = producer.name(s.name)
    cat = s.cat.lower()
    lowered = name.lower()
    if "memcpy" in cat or lowered.startswith(("memcpy", "cudamemcpy", "hipmemcpy")):
        kind = "memcpy"
    elif "memset" in cat or lowered.startswith(("memset", "cudamemset", "hipmemset")):
        kind = "memset"
    elif is_communication_kernel(name):
        kind = "communication"
    else:
        kind = "compute"
    nbytes = s.args.get("bytes")
    direction = _DIRECTION.search(name) if kind == "memcpy" else None
    return {
        "uid": uid(Kind.KERNEL, s.index),
        "op": op,
        "stream": stream,
        "name": name,
        "start_us": us(s.start),
        "end_us": us(s.end),
        "dur_us": (s.end - s.start) / 1000.0,
        "kind": kind,
        "bytes": int(nbytes) if kind in ("memcpy", "memset") and isinstance(nbytes, int) else None,
        "direction": direction.group(1) if direction else None,
        "launch": launch,
    }


def _phases(b: FramesBuilder, ops: list[Span], parent_of: dict[int, Span | None], producer: Producer) -> None:
    """The producer's phases (PaddlePaddle's category spans), inherited by what runs in them."""
    if not producer.phases:
        return
    phase: dict[int, str | None] = {}
    rows = {row["uid"]: row for row in b.ops}
    for s in sorted(ops, key=lambda s: (s.start, -s.end, s.index)):
        mine = producer.phase(s.cat)
        if mine is None:
            p = parent_of[id(s)]
            inherited = phase.get(id(p)) if p is not None else None
            mine = inherited if inherited != "other" else None
        phase[id(s)] = mine
        rows[uid(Kind.OP, s.index)]["phase"] = mine


def _attrs(s: Span) -> str:
    return json.dumps({"category": s.cat, "pid": s.pid, "tid": s.tid, **s.args}, default=_json_value)


def _json_value(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    return str(value)


def _meta(doc: Document, ev: _Events, producer: Producer, without_launch: int) -> dict[str, Any]:
    meta: dict[str, Any] = {"kernels_without_launch": without_launch}
    unit = doc.keys.get("displayTimeUnit")
    if isinstance(unit, str):
        meta["display_time_unit"] = unit
    scalars = {
        k: v
        for k, v in doc.keys.items()
        if k != "displayTimeUnit" and isinstance(v, str | int | Decimal | bool) and len(str(v)) <= 256
    }
    if scalars:
        meta["file_keys"] = json.dumps(scalars, default=_json_value)
    skipped = {k: v for k, v in sorted(ev.skipped.items()) if v}
    if skipped:
        meta["skipped_events"] = json.dumps(skipped)
    if doc.repaired:
        meta["closed_unterminated"] = doc.repaired
    return meta
