"""TensorFlow 2 and JAX profiler captures (``xplane``): the XPlane protobuf
(an ``XSpace``) that ``tf.profiler.experimental.start/stop``, the Keras
TensorBoard callback's ``profile_batch`` and ``jax.profiler.trace`` write
as ``<logdir>/plugins/profile/<run>/<host>.xplane.pb`` (plain, or gzipped).

The protobuf is decoded by :mod:`.messages` (no TensorFlow, JAX or xprof
needed; :mod:`.decoders` says why). Detected by
content: the head decodes as an XSpace whose first plane is named like a
profiler plane (``/host:CPU``, ``/device:GPU:0``, ``Task Environment``...),
gzipped or not. A binary StepStats or RunMetadata also starts with byte
0x0a but its first field's first field is a string (a device name), where
an XPlane's is its id (a varint) or its name: so neither is taken for the
other.

What becomes what:

* Devices: the host plane ``/host:CPU`` is one CPU device (``dev:/host:CPU``);
  every ``/device:*`` plane (GPU, TPU) is a device of the kind its name says.
* Framework: ``jax`` when the ``/host:metadata`` plane has a
  ``jax_version`` stat, or when the capture has HLO ops but no TF ops; else
  ``tensorflow`` (also for a TF program compiled with XLA).
* Threads: each line of ``/host:CPU`` is a thread (line id = thread id);
  ``Op.thread`` is the line's name (``tf_Compute/2875647937950081134``,
  ``python``), with `` (<id>)`` added when two lines share a name.
* TF ops: an event on any line of ``/host:CPU`` whose event metadata has a
  non-empty ``display_name`` D and a ``name`` ``<node>:D`` (the executor's
  ``node:type`` TraceMe): op name ``<node>``, type D, phase from
  :func:`tracegraph.ingest.formats.tf.names.phase_of` (name and type). The
  profiler's own events (``ThreadpoolListener::*``, ``ExecutorState::Process``,
  ``EagerLocalExecute: X``, ``FunctionRun``...) have no display name and are
  not ops. ``attrs.iter_num`` is the ``iter_num`` of the
  ``ExecutorState::Process`` event around the op on its line (the loop
  iteration in a ``tf.while_loop`` frame, 0 outside loops).
* HLO ops (JAX, TF with XLA): an event on ``/host:CPU`` carrying an
  ``hlo_op`` stat (the ``end: X`` events beside them carry none): op name =
  ``hlo_op``; type = the ``opcode`` of that instruction in the module's HLO
  (``fusion``, ``dot``, ``copy``, ``while``...) when the module named by
  ``hlo_module`` (with its ``program_id``) has an ``Hlo Proto`` on
  ``/host:metadata``, else the name without a ``.N`` suffix. ``attrs``:
  ``hlo_module``, ``program_id``, ``run_id``, and from the HLO
  ``computation``, ``fusion_kind``, ``op_name`` (the framework op it came
  from, e.g. ``jit(train_step)/jvp()/dot_general``) and ``op_type``.
  Phase is None (HLO names say nothing about forward or backward).
* Steps: an event on a host line with an integer ``step_num`` stat (TF's
  ``tf.profiler.experimental.Trace("train", step_num=i)`` and Keras's
  ``train`` steps, JAX's ``StepTraceAnnotation``) marks a step; it is not
  an op (it only frames the work, which runs on other threads, so as an op
  it would outweigh everything). Every op (and kernel op)
  that *starts* inside a step's interval ``[start, end)`` has
  ``attrs.step`` = its step_num (the innermost, latest-starting step when
  several hold it); ops starting outside every step have none (work JAX
  dispatches asynchronously may run after its step's marker ends).
  ``meta_steps`` lists the steps (JSON: step, name, duration, ops).
* Nesting: on each line, an op whose interval holds another's
  start is that op's ``parent`` (innermost; sorted by start, longer first,
  then line order), so an op's weight is its self time: a JAX ``while``
  holding the ops of its body (``lax.scan``) weighs only its own overhead.
* Device planes (GPU): events on lines named ``Stream ...`` are Kernels on
  Stream ``s:<plane>/<line id>`` (kind ``memcpy`` / ``memset`` from the name
  or a ``memcpy_details`` stat, with the ``size:N`` bytes given there;
  ``communication`` for the kit's communication kernels,
  :func:`~tracegraph.ingest.formats.kit.is_communication_kernel`; else ``compute``). A kernel's op is
  the op that launched it where the file says: the event with the same
  ``correlation_id`` on a host plane (``/host:CUPTI``'s runtime calls) gives
  the thread and time of the launch, and the innermost op of that thread
  (line id) around that time launched it; else the latest op started by
  then named by the kernel's ``tf_op`` (``node:type``) or ``hlo_op``
  (same ``hlo_module``) stat. A kernel linked to neither is an op of its
  own on the device (named by those stats, else by the kernel; attrs
  ``from_kernel``), so its time is counted. Other lines of device planes
  (``XLA Ops``, ``Steps``... which the profiler derives from the streams;
  a TPU's lines) are not read: ``meta_skipped_device_lines`` names them.
  The CPU captures in tests/data/xplane have no device planes; this part
  is checked against hand-built captures only.
* Not read: memory (allocator) events, the ``/host:python-tracer`` and
  other host planes' events (``/host:CUPTI`` only for the launch join),
  aggregated events (``num_occurrences`` instead of a time; counted),
  event metadata's ``metadata`` bytes and children.

Dependencies. TF captures record no inputs: no dependencies
(``meta_dependencies`` says so). For HLO ops the module's HLO gives them,
by this rule:

    Within one module execution (the HLO op events of one ``run_id`` of one
    ``hlo_module`` and ``program_id``), each op event E of instruction I
    gets DATA edges for the operands of I. Each operand is walked back to
    the values it is made of and, for each value (a *slot*: an operand
    that is a tuple holds one per element), to the instructions with
    events that may have produced it (:func:`.hlo.producers`): parameter,
    constant, tuple, get-tuple-element, bitcast and any other instruction
    without events in the capture are walked through to what feeds them,
    get-tuple-element picking its tuple element; a parameter of a called
    computation maps to the caller's operand, and for a while body or
    condition either to the while's operand (the first iteration) or to
    the body root's (the previous iteration's result). For each slot, of
    the events of its producers in the same execution that ended at or
    before E started and come before E in execution order (seq), the one
    that ended last is the source of one DATA edge to E. Control
    predecessors of I give CONTROL edges the same way. So a while op
    depends on what feeds each element of its operand; the first
    iteration of its body on what fed the loop, later iterations on the
    previous iteration's results. A slot with no such earlier event (an
    input of the program, a producer outside the capture) gives no edge.

Sources end before their targets start, so the dependencies have no cycle.
HLO ops (their ``carries_deps`` is set) make the dependency DAG.

Times: integer picoseconds while parsing (event start =
``line.timestamp_ns * 1000 + offset_ps``, end = start + ``duration_ps``),
then float microseconds since the earliest op, kernel or step start:
``(t - origin) / 1e6`` and durations ``(end -
start) / 1e6``, each the double nearest to the exact number of
microseconds (the picosecond integer converts to a double exactly below
2**53 ps, about 2.5 hours). So ``round(us * 1e6)`` gives the picoseconds
back, and a whole-nanosecond time (all the profiler writes on CPU) prints
exactly with 3 decimals. ``meta_time_origin_ps`` is the origin, on the
file's clock: the saved line timestamps are relative to the capture's
start, ``meta_profile_start_time`` (epoch ns, ``Task Environment``).

Meta (``meta_*`` on the Trace node): ``planes`` (names, JSON),
``event_counts`` (JSON: events read, TF / HLO ops, steps, kernels, ops made
for kernels, host events and aggregated events skipped), ``hostnames``,
``profile_start_time`` / ``profile_stop_time``, the ``*_version`` stats of
``/host:metadata`` (``jax_version``, ``jaxlib_version``), ``hlo_modules``,
``steps``, ``dependencies`` (where they came from, or why there are none),
``skipped_device_lines``, ``profiler_errors`` / ``profiler_warnings`` (the
XSpace's own), ``time_origin_ps``.

Errors (one line naming the file and the field, e.g. ``XSpace.planes[1].
lines[0].events[17]``): a truncated or foreign protobuf (a field past its
message's end, a known field of another wire type, text that is not UTF-8,
an event naming event or stat metadata its plane lacks), a negative
duration, a capture with no profiler plane, or with nothing to read (no
op, step or kernel); gzip errors; the size limit (on the decompressed
protobuf for .gz).
"""

from __future__ import annotations

from pathlib import Path

from tracegraph.errors import InputError
from tracegraph.ingest import source
from tracegraph.ingest.formats.kit import FormatInfo, FramesBuilder, Joins
from tracegraph.ingest.formats.xplane.capture import HOST_PLANE, TASK_PLANE, Capture, malformed
from tracegraph.ingest.formats.xplane.dependencies import add_dependencies
from tracegraph.ingest.formats.xplane.device import read_device_plane
from tracegraph.ingest.formats.xplane.frames import assign_steps, frames, framework_of, number_ops
from tracegraph.ingest.formats.xplane.host import read_hlo_modules, read_host_plane
from tracegraph.ingest.formats.xplane.launches import link_kernels, nest
from tracegraph.ingest.formats.xplane.messages import XSpace, read_space
from tracegraph.ingest.formats.xplane.wire import Malformed, varint
from tracegraph.ingest.frames import TraceFrames

FORMAT = FormatInfo(
    "xplane", "tensorflow", Joins.ALONE, "TensorFlow 2 / JAX profiler capture (XPlane protobuf, .xplane.pb)"
)


# An XSpace's first byte: one of its fields 1-4 (planes, errors, warnings,
# hostnames), all length-delimited.
_XSPACE_TAGS = (0x0A, 0x12, 0x1A, 0x22)


# --- detection and reading -------------------------------------------------------------------


def sniff(head: bytes) -> bool:
    """An XSpace (gzipped or not) whose first plane has the fields of an
    XPlane (an id varint, then its name) and a profiler's plane name:
    ``/host:CPU``, ``/device:GPU:0``... (a ``/``) or ``Task Environment``."""
    data = source.unzipped_head(head)
    if data[:1] != b"\x0a":
        return False
    try:
        size, pos = varint(data, 1, len(data))
        end = min(pos + size, len(data))
        tag, pos = varint(data, pos, end)
        while tag == 0x08:  # XPlane.id
            pos = varint(data, pos, end)[1]
            tag, pos = varint(data, pos, end)
        if tag != 0x12:  # XPlane.name
            return False
        size, pos = varint(data, pos, end)
        if pos + size > end:
            return False
        name = data[pos : pos + size].decode("utf-8")
    except (Malformed, UnicodeDecodeError):
        return False
    return name.startswith("/") or name == TASK_PLANE


def read_bytes(path: Path) -> bytes:
    """The file's protobuf bytes, gunzipped when it starts with the gzip
    magic; refused unread when its first byte cannot start an XSpace, and
    past the size limit (decompressed, for gzip)."""
    source.check_size(path, FORMAT.name)
    head = source.head(path)
    if not head:
        raise InputError(path, "empty file")
    data = _gunzip(path, source.read_bytes(path, FORMAT.name)) if head.startswith(source.GZIP_MAGIC) else None
    first = (data if data is not None else head)[:1]
    if not first:
        raise InputError(path, "empty protobuf (gzip of nothing)")
    if first[0] not in _XSPACE_TAGS:
        raise InputError(
            path, f"not an XPlane capture: an XSpace protobuf starts with byte 0x0a (its planes), not 0x{first[0]:02x}"
        )
    return data if data is not None else source.read_bytes(path, FORMAT.name)


def _gunzip(path: Path, raw: bytes) -> bytes:
    """Every gzip member of ``raw``, decompressed, within the size limit."""
    return source.gunzip(path, raw, FORMAT.name)


def parse(path: Path) -> TraceFrames:
    """One capture as frames (rules in the module docstring)."""
    path = Path(path)
    data = read_bytes(path)
    try:
        space = read_space(data)
    except Malformed as e:
        raise malformed(path, e, "XSpace") from None
    return assemble(path, space)


def assemble(path: Path, space: XSpace) -> TraceFrames:
    """The frames of a decoded capture: its planes read, then the passes."""
    planes = space.planes
    if not any(p.name.startswith(("/host:", "/device:")) or p.name == TASK_PLANE for p in planes):
        names = ", ".join(repr(p.name) for p in planes[:5]) or "none"
        raise InputError(path, f"not an XPlane capture: no /host: or /device: plane (planes: {names})")
    cap = Capture(path, space, FramesBuilder(FORMAT.framework, [str(path)]))
    read_hlo_modules(cap)
    for pi, plane in enumerate(planes):
        if plane.name == HOST_PLANE:
            read_host_plane(cap, pi, plane, cap.b.device(plane.name, "CPU"))
    for pi, plane in enumerate(planes):
        if plane.name.startswith("/device:"):
            read_device_plane(cap, pi, plane)
    if not cap.ops and not cap.kernels:
        raise InputError(
            path,
            "nothing to read: no TF op, HLO op, step or device stream events in the capture "
            "(was the program running while the profiler was on?)",
        )
    nest(cap)
    link_kernels(cap)
    framework = framework_of(cap)
    number_ops(cap)
    assign_steps(cap)
    has_deps = add_dependencies(cap)
    return frames(cap, framework, has_deps)
