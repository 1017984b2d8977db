"""PyTorch profiler traces (``pytorch-kineto``): Kineto's Chrome trace-event
JSON as written by ``torch.profiler.profile(...).export_chrome_trace`` and
``tensorboard_trace_handler`` (``*.pt.trace.json``, plain or gzipped).

Detected by content: a JSON object (gzipped or not) with a ``traceEvents``
list, or with Kineto's ``schemaVersion`` next to ``deviceProperties``,
``distributedInfo`` or ``baseTimeNanoseconds``. The file is decoded by
:mod:`.read` keeping only what the graph needs of each event; the rank
files of a job are checked to be one run and numbered (:mod:`.run`), each
read and assembled into its rank's frames (:mod:`.rank`, nesting in
:mod:`.nesting`) in a worker process (:mod:`tracegraph.ingest.parallel`),
and joined here.

What becomes what:

* Host events (``ph: X``) of category ``cpu_op``, ``user_annotation``,
  ``python_function`` and the runtime calls ``cuda_runtime`` /
  ``cuda_driver`` (older traces: ``Operator``, ``Runtime``) are Ops
  ``op:<rank>:<event index>`` with ``category`` = that category, ``thread``
  = ``pid:tid`` (``rank<r>/pid:tid`` for several ranks), ``device`` = the
  rank's CPU. ``type`` is the name for cpu ops and runtime calls
  (``aten::conv2d``, ``cudaLaunchKernel``), ``ProfilerStep`` for
  ``ProfilerStep#N`` and the part before ``#`` for other annotations
  (``Optimizer.step``), ``python_function`` for Python frames. ``attrs``
  keeps the category, pid, tid, and the args the profiler recorded
  (``Input Dims``, ``Input type``, ``External id``, ``correlation``, ...).
* Nesting: an op's ``parent`` is the innermost op of the same thread whose
  interval ``[ts, ts + dur)`` contains its start (sorted by start, then
  longer first, then file order). A child that ends after its parent (Kineto
  rounds some nanosecond traces that way) still counts as its child.
* Collective calls: an op named ``c10d::...`` (torch.distributed's
  host-side call of a collective) not nested directly in another
  ``c10d::`` op, point-to-point calls (``c10d::send``, ``c10d::recv_``,
  ``c10d::recv_any_source_``) left out, has ``collective`` = its name.
* Device events (``kernel``, ``gpu_memcpy``, ``gpu_memset``; older traces:
  ``Kernel``, ``Memcpy``, ``Memset``) are Kernels ``k:<rank>:<index>`` on
  Stream ``s:<rank>:<device>:<stream>`` (``args.stream``, else ``tid``) of
  Device ``dev:<rank>:cuda:<device>`` (``args.device``, else ``pid``).
  Kind: ``memcpy`` (with ``bytes`` and ``direction`` = the word after
  ``Memcpy`` in the name: HtoD, DtoH, DtoD, ...), ``memset`` (with
  ``bytes``), ``communication`` (the kit's rule,
  :func:`~tracegraph.ingest.formats.kit.is_communication_kernel`: NCCL,
  RCCL, MSCCL(++), DeepEP, NVSHMEM, custom all-reduces; with ``collective`` from
  ``args["Collective name"]``, else the word after ``ncclKernel_`` /
  ``ncclDevKernel_`` in the name, and ``process_group`` / ``group_ranks``
  from ``Process Group Name`` / ``Process Group Ranks`` when recorded),
  else ``compute``.
* A device event is joined to the runtime call that issued it by
  ``args.correlation`` (per rank), or, when it has none, by the ``ac2g``
  flow whose end is on it. That call is the kernel's ``launch``; the op
  that launched it (``LAUNCHED``) is the innermost ``cpu_op`` enclosing the
  call (the call itself when no cpu op encloses it). A device event whose
  call is not in the trace (work queued before the profiler started; real
  traces have many) has no ``launch``: it is a kernel of the op
  ``op:<rank>:outside:<device>`` named ``[launched outside the trace]``
  (type ``OutsideTrace``, phase ``other`` unless it launched NCCL kernels,
  no thread, zero duration at the
  first such kernel's start) of that rank and device, so that kernel totals
  and stream times include it, and their number is kept in
  ``meta_kernels_without_launch``.
* ``cuda_sync`` records give the synchronization edges (``syncs``):
  ``Stream Sync`` (and ``Context Sync``, for every stream of the device):
  the blocking call (``cudaStreamSynchronize``, ``cudaDeviceSynchronize``)
  waited for the kernel of that stream that started last before the
  record's end; ``Event Sync``: ``cudaEventSynchronize`` waited for the last
  kernel issued on ``wait_on_stream`` before the ``cudaEventRecord`` named by
  ``wait_on_cuda_event_record_corr_id``; ``Stream Wait Event``: the next
  kernel issued on ``stream`` by the same thread after the
  ``cudaStreamWaitEvent`` call starts after that same kernel. Records whose
  counterpart is not in the trace are skipped.
* Memory records (``ph: i``, name ``[memory]``: ``Addr``, ``Bytes`` > 0 for
  an allocation, < 0 for a free, ``Device Type`` 0 = CPU / 1 = CUDA,
  ``Device Id``) are paired by address per allocator
  ``mem:<rank>:<cpu|cuda:<id>>`` into Allocations (alloc, then the next
  free of that address, in time order: the file groups records by
  thread). Records without ``Addr`` (PyTorch 1.8/1.9) cannot be paired:
  they are left out and counted in ``meta_memory_records_without_address``. A free without an allocation in the trace (memory
  allocated before profiling started) is skipped and counted in
  ``meta_unpaired_frees``; an allocation of an address that is still live
  closes the earlier one at that moment (its free was not recorded). An
  allocation is attributed (``op``) to the innermost op of the same thread
  whose interval contains it. ``requested_bytes`` is left empty, ``kind``
  too (Kineto does not say what a block holds). The largest ``Total
  Allocated`` seen per allocator is kept in ``meta_reported_peak_bytes``
  (JSON; it includes memory allocated before the trace).
* Phase: ``communication`` for ops whose name mentions NCCL / c10d /
  collectives and for ops that launched a communication kernel;
  ``optimizer`` inside ``Optimizer.step``/``Optimizer.zero_grad``
  annotations; ``backward`` inside ``autograd::engine::evaluate_function``
  ops and ``*Backward*`` ops; ``other`` for ``ProfilerStep#N``; otherwise an
  op inherits its parent's phase, and top-level ops are ``forward``.
* Spans (``ph: X``) of other categories (``gpu_user_annotation``, MTIA
  events, the profiler's own ``Trace`` span, ...) are not read; their
  counts per category are kept in ``meta_skipped_span_categories`` (JSON).
* Times: integer nanoseconds while parsing (``baseTimeNanoseconds`` + ``ts``
  x 1000, exact), then float microseconds since the trace's first op, kernel
  or memory record. ``ts`` is microseconds in every Chrome trace
  (``displayTimeUnit`` only sets how viewers display it; it is kept in meta).
* Several rank files (:func:`parse_many`) make one trace: ranks from
  ``distributedInfo.rank`` (files without one take the lowest ranks no file
  names, in file order), one CPU device per
  rank and its GPUs, names prefixed ``rank<r>/`` (for people: every op and
  device has its ``rank``); times of all ranks share
  one origin (the earliest event of any rank, on the ``baseTimeNanoseconds``
  + ``ts`` clock). ``distributedInfo`` (JSON) is kept as
  ``meta_distributed_info`` (one rank) or ``meta_distributed_infos``.

Skipped: metadata (``ph: M``), flow events (``ac2g`` is used for joins
only, ``fwdbwd`` not at all), the profiler's own spans (``Trace``) and
instants, ``gpu_user_annotation``, counters.

Errors (one line naming the file and the event ``traceEvents[i]``): an
event without ``ph``, a span or memory record without ``ts``, a span
without ``dur`` or with a negative one, a ``[memory]`` record without
``Bytes``, ranks given twice, plus the reading errors of :mod:`.read`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from tracegraph.columns import Strings, Table, Texts, labelled
from tracegraph.errors import InputError
from tracegraph.ingest import parallel, source
from tracegraph.ingest.columnar import REFERENCES, ColumnarTrace, complete, to_frames
from tracegraph.ingest.formats.kineto import read as kineto_read
from tracegraph.ingest.formats.kineto.assemble import NEVER_FREED, RankPart, read_part
from tracegraph.ingest.formats.kineto.nesting import seq_order
from tracegraph.ingest.formats.kineto.run import check_one_run, header_rank, numbering
from tracegraph.ingest.frames import TraceFrames

FORMAT = kineto_read.FORMAT
NAME = FORMAT.name


def sniff(head: bytes) -> bool:
    """A JSON object with Kineto's keys, or a ``traceEvents`` list holding
    Kineto's categories (gzipped or not). Other Chrome traces (JAX,
    TensorFlow, PaddlePaddle, ...) are ``chrome-trace``'s: PaddlePaddle's
    header has a ``schemaVersion`` too, but also its ``span_indx``."""
    text = source.unzipped_head(head).lstrip()
    if not text.startswith(b"{") or _PADDLE_HEADER.search(text):
        return False
    if b'"traceEvents"' in text and _KINETO_CATEGORY.search(text):
        return True
    return b'"schemaVersion"' in text and (
        b'"traceEvents"' in text
        or any(k in text for k in (b'"deviceProperties"', b'"distributedInfo"', b'"baseTimeNanoseconds"'))
    )


# The categories only Kineto writes (older traces: Operator, Runtime, Kernel, Memcpy, Memset).
_KINETO_CATEGORY = re.compile(
    rb'"cat"\s*:\s*"(cpu_op|cuda_runtime|cuda_driver|user_annotation|python_function|gpu_memcpy|gpu_memset'
    rb"|kernel|cuda_sync|ac2g|gpu_user_annotation|Operator|Runtime|Kernel|Memcpy|Memset|Trace)" + rb'"'
)
_PADDLE_HEADER = re.compile(rb'"span_ind(x|ex)"\s*:')


def parse(path: Path) -> TraceFrames:
    """One trace file as frames (rules in the module docstring)."""
    return parse_many([path])


def parse_many(paths: list[Path], *, workers: int | None = None) -> TraceFrames:
    """Rank files of one job as one trace's frames (a single file is one rank)."""
    return to_frames(read_job(paths, workers=workers))


def read_job(paths: list[Path], *, workers: int | None = None) -> ColumnarTrace:
    """Rank files of one job as one trace's columns.

    Each file is read and assembled on its own (in worker processes when
    the job is large enough to pay for them, see :mod:`..parallel`); the
    parent only joins the ranks. ``workers`` overrides how many (1: in this
    process)."""
    paths = [Path(p) for p in paths]
    multi = len(paths) > 1
    ranks = numbering(paths, [header_rank(p) for p in paths])
    parts = parallel.map_files(
        read_part, [(p, rank, multi) for p, rank in zip(paths, ranks, strict=True)], paths, workers
    )
    # A rank named only after the events (the file's trailer) was unknown
    # when the others were numbered: number again, redo the files it moves.
    final = numbering(paths, [p.rank if p.named else None for p in parts])
    parts = [p if p.rank == rank else read_part(p.path, rank, multi) for p, rank in zip(parts, final, strict=True)]
    if not any(p.events for p in parts):
        raise InputError(paths[0], "no PyTorch profiler events (cpu_op, cuda_runtime, kernel, ...) in traceEvents")
    check_one_run([p.run_facts() for p in parts])
    return join(parts)


# --- all ranks -> one trace -------------------------------------------------------------------

TABLES = ("ops", "kernels", "allocations", "syncs", "devices", "streams", "allocators")


def origin(parts: list[RankPart]) -> int:
    """The earliest op, kernel or allocation of any rank (ns)."""
    firsts = []
    for p in parts:
        for name, col in (("ops", "start_ns"), ("kernels", "start_ns"), ("allocations", "alloc_ns")):
            t = p.tables[name]
            if t.n:
                firsts.append(int(np.asarray(t[col]).min()))
    return min(firsts) if firsts else 0


def join(parts: list[RankPart], t0: int | None = None, seq: np.ndarray | None = None) -> ColumnarTrace:
    """One trace: the ranks' rows, times since the job's first event
    (``t0``, default: the parts' first), seq over all ranks (``seq``,
    default: over the parts'). The trace may share arrays with the parts:
    they are not to be used after."""
    if t0 is None:
        t0 = origin(parts)
    tables: dict[str, Table] = {}
    base = {name: np.cumsum([0] + [p.tables[name].n for p in parts]) for name in TABLES}
    for name in TABLES:
        pieces = [p.tables[name] for p in parts]
        n = sum(t.n for t in pieces)
        out = Table(n)
        for c in pieces[0].columns:
            cols = [t[c] for t in pieces]
            ref = REFERENCES.get(name, {}).get(c)
            if name == "syncs" and c == "dst":
                shifted = [
                    np.where(
                        np.asarray(col) >= 0,
                        np.asarray(col) + np.where(_is_stream_wait(t), base["kernels"][i], base["ops"][i]),
                        -1,
                    )
                    for i, (col, t) in enumerate(zip(cols, pieces))
                ]
                out[c] = np.concatenate(shifted)
            elif ref is not None:
                out[c] = np.concatenate(
                    [np.where(np.asarray(col) >= 0, np.asarray(col) + base[ref][i], -1) for i, col in enumerate(cols)]
                )
            else:
                out[c] = _cat(cols)
        tables[name] = out
    ops, kernels, allocations = tables["ops"], tables["kernels"], tables["allocations"]
    for t in (ops, kernels):
        s, e = np.asarray(t["start_ns"]) - t0, np.asarray(t["end_ns"]) - t0
        t["start_us"] = s / 1000.0
        t["end_us"] = e / 1000.0
        t["dur_us"] = (e - s) / 1000.0
    a = np.asarray(allocations["alloc_ns"])
    f = np.asarray(allocations["free_ns"])
    allocations["alloc_us"] = (a - t0) / 1000.0
    allocations["free_us"] = np.where(f == NEVER_FREED, np.nan, (f - t0) / 1000.0)
    ops["seq"] = seq_order(np.asarray(ops["start_ns"]), np.asarray(ops["end_ns"])) if seq is None else seq
    return complete(ColumnarTrace(FORMAT.framework, [str(p.path) for p in parts], "us", tables, meta(parts)))


def _is_stream_wait(t: Table) -> np.ndarray:
    k = t["kind"]
    assert isinstance(k, Strings)
    code = k.values.index("stream_wait") if "stream_wait" in k.values else -2
    out: np.ndarray = np.asarray(k.codes) == code
    return out


def _cat(cols: list[Any]) -> Any:
    """The columns one after the other; one column is itself (no copy: a
    part joined alone is its caller's to give, not to keep using)."""
    first = cols[0]
    if len(cols) == 1 and (
        isinstance(first, np.ndarray) or (isinstance(first, Strings) and len(set(first.values)) == len(first.values))
    ):
        return first
    if len(cols) == 1 and isinstance(first, Texts):
        return Texts(first.data[: first.offsets[-1]], first.offsets, first.missing)
    if isinstance(first, np.ndarray):
        return np.concatenate(cols)
    if isinstance(first, Strings):
        labels = [s for c in cols for s in c.values]
        codes = []
        at = 0
        for c in cols:
            codes.append(np.where(c.codes >= 0, c.codes + at, -1))
            at += len(c.values)
        return labelled(np.concatenate(codes), labels)
    if isinstance(first, Texts):
        data = np.concatenate([c.data[: c.offsets[-1]] for c in cols])
        offs = [cols[0].offsets]
        at = int(cols[0].offsets[-1])
        for c in cols[1:]:
            offs.append(c.offsets[1:] + at)
            at += int(c.offsets[-1])
        missing = None
        if any(c.missing is not None for c in cols):
            missing = np.concatenate([~c.present() for c in cols])
        return Texts(data, np.concatenate(offs), missing)
    raise TypeError(type(first))


def meta(parts: list[RankPart]) -> dict[str, Any]:
    m: dict[str, Any] = {"ranks": json.dumps(sorted(p.rank for p in parts))}
    infos = {p.rank: p.header.get("distributedInfo") for p in parts if p.header.get("distributedInfo")}
    if len(parts) == 1 and infos:
        m["distributed_info"] = json.dumps(next(iter(infos.values())), sort_keys=True)
    elif infos:
        m["distributed_infos"] = json.dumps({str(k): v for k, v in sorted(infos.items())}, sort_keys=True)
        sizes = {i.get("world_size") for i in infos.values() if isinstance(i, dict)}
        size = sizes.pop() if len(sizes) == 1 else None
        if isinstance(size, int) and not isinstance(size, bool) and size <= 1 << 20:
            missing = sorted(set(range(size)) - {p.rank for p in parts})
            if missing:
                m["ranks_missing"] = json.dumps(missing)
    first = parts[0].header
    for key, name in (("schemaVersion", "schema_version"), ("displayTimeUnit", "display_time_unit")):
        if isinstance(first.get(key), (int, str)) and not isinstance(first.get(key), bool):
            m[name] = first[key]
    props = first.get("deviceProperties")
    if isinstance(props, list) and props:
        m["device_names"] = json.dumps([p.get("name") for p in props if isinstance(p, dict)])
    m["unpaired_frees"] = sum(p.unpaired_frees for p in parts)
    m["kernels_without_launch"] = sum(p.kernels_without_launch for p in parts)
    skipped: dict[str, int] = {}
    for p in parts:
        for cat, n in p.skipped.items():
            skipped[cat] = skipped.get(cat, 0) + n
    if skipped:
        m["skipped_span_categories"] = json.dumps(skipped, sort_keys=True)
    m["memory_records_without_address"] = sum(p.memory_without_address for p in parts)
    peak = {k: v for p in parts for k, v in p.reported_peak.items()}
    if peak:
        m["reported_peak_bytes"] = json.dumps(peak, sort_keys=True)
    return m
