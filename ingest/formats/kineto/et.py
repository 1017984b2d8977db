"""PyTorch Execution Traces (``pytorch-et``): the JSON that
``torch.profiler.ExecutionTraceObserver`` writes (MLCommons Chakra's
input), alone or joined to the Kineto trace of the same step.

A Kineto trace says when each op ran; the Execution Trace (ET) says which
tensors each op read and wrote, so together they give PyTorch steps real
data dependencies, and with them the critical path, slack, what-if and
who holds the memory.

Detected by content: a JSON object (gzipped or not) with ``nodes`` and
either the ET's root node names (``[pytorch|profiler|execution_trace|...``)
or a Chakra ``schema``. The file is read whole (limit in the README).

The rules (the README's "PyTorch Execution Trace" section says the same):

* **Ops.** Every node but the process and thread roots
  (``[pytorch|profiler|execution_trace|process]`` / ``...|thread]``) is an
  op; its parent is its ``ctrl_deps`` node unless that is a root. Node ids
  come from one counter taken when an op starts, so id order is start
  order, on every thread.
* **Tensors.** A tensor value is ``[tensor id, storage id, offset, numel,
  itemsize, device]`` (also inside lists: ``GenericList[Tensor(float),...]``).
  Data is identified by its *storage*: views share it with their base, and
  an in-place write through any view changes what every alias reads.
  Undefined tensors (storage 0) and empty ones (numel 0: they all share
  the null pointer's storage) are left out.
* **What a node reads and writes.** It reads every storage among its
  inputs. It writes a storage among its outputs that is new (not among its
  inputs) or that it mutates: its ``op_schema`` marks that argument or
  return ``!`` (``Tensor(a!)``), or, without a schema, its name ends in
  ``_`` (``aten::add_``); inputs marked ``!`` are written even when not
  returned (``out=`` arguments). A view (an output on an input's storage,
  no ``!``) writes nothing.
* **Which ops carry the dependencies.** The *carriers*: the outermost ops
  that read or write a tensor (an op with tensors none of whose ancestors
  has any): top-level aten ops in the forward pass, the autograd nodes
  (``AddmmBackward0``, ``AccumulateGrad``; their ``evaluate_function``
  scope has no tensors) and the in-place updates inside
  ``Optimizer.step``. A carrier's reads and writes are those of its whole
  subtree in id order (autograd nodes list only the incoming gradients;
  what they compute appears as their children's outputs), a read counting
  only when the subtree has not written that storage already (an op that
  fills its own output buffer).
* **Dependencies.** Over the carriers in id order, each storage has a last
  writer; a carrier that reads a storage depends on its last writer
  (``DATA``), then becomes the last writer of what it writes. Each write
  is a new ``Tensor`` (a version of the storage: ``PRODUCES``), each read
  a ``CONSUMES`` of the version read; a storage read before any write
  (parameters, inputs, what was made before the trace) is a tensor
  without a producer. Only true (read-after-write) dependencies count; a
  write does not wait for earlier readers. Ops on other threads (a
  separate autograd thread) take part like any other: id order is start
  order across threads.
* **Storage ids are reused.** The observer keys storages by data address,
  so memory freed and allocated again (a temporary, a Python scalar
  wrapped into a tensor outside any op) comes back with an old storage id.
  With the Kineto trace (its ``[memory]`` events), a dependency is left out
  when the allocation the writer wrote was freed before the reader
  started; the reader then reads a tensor without a producer. The address
  of a storage is the one allocation of its size (numel x itemsize) that
  Kineto attributes to the op that created it (output, not among its
  inputs nor made by a child); storages without exactly one such
  allocation keep every dependency.

Joined to a Kineto trace (:func:`merge`, :mod:`.et_merge`):

* **Matching.** An ET node and a Kineto ``cpu_op`` / ``user_annotation``
  event are the same op when the node's ``rf_id`` equals the event's
  ``Record function id`` and their names are equal, among the events of
  the ET's process (``pid``). A pair where fewer than half of the ET's ops
  match is refused: the files are of different steps or runs. ET carriers
  without a Kineto event (and their dependencies) and Kineto ops of that
  process without an ET node are counted in the trace's meta
  (``et_carriers_without_kineto``, ``kineto_ops_without_et``,
  ``et_ops_matched``).
* The Kineto ops keep everything they had (times, kernels, nesting); the
  matched carriers get ``carries_deps`` and the tensors, ``DATA`` edges,
  ``PRODUCES`` and ``CONSUMES`` above. An allocation whose address is a
  storage's (above) backs the tensor version that storage's first write
  made and belongs to the carrier that wrote it.

An ET alone (:func:`parse`) makes the same ops, tensors and dependencies
with no times (``time_unit`` ``none``).

Errors (one line naming the file): not JSON, truncated, no ``nodes``
list, a node without an integer ``id`` or a ``name``.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracegraph.errors import InputError, TooLarge, first_line
from tracegraph.ingest import json_nesting, source
from tracegraph.ingest.formats import kit
from tracegraph.ingest.formats.kineto import et_merge
from tracegraph.ingest.formats.kineto.et_flow import add_flow, carriers_of, data_flow
from tracegraph.ingest.formats.kineto.et_nodes import ExecutionTrace, Node, nodes_of
from tracegraph.ingest.formats.kineto.phase import assign_phases
from tracegraph.ingest.formats.kit import FormatInfo, FramesBuilder, Joins, Kind, Role
from tracegraph.ingest.frames import TraceFrames
from tracegraph.ingest.limits import MAX_FILE_BYTES, human

FORMAT = FormatInfo(
    "pytorch-et", "pytorch", Joins.DETAIL, "PyTorch Execution Trace JSON (adds tensors and dependencies to Kineto)"
)
_USER_ANNOTATION_SCOPE = 7


def sniff(head: bytes) -> bool:
    """A JSON object with ``nodes`` and the ET's root names or a Chakra schema."""
    text = source.unzipped_head(head).lstrip()
    if not text.startswith(b"{") or b'"nodes"' not in text:
        return False
    return b"execution_trace|" in text or (b'"schema"' in text and b"chakra" in text)


def read(path: Path) -> ExecutionTrace:
    """The file as nodes (one-line InputErrors for what is not an ET)."""
    return nodes_of(path, _load(path))


def _load(path: Path) -> Any:
    source.check_size(path, FORMAT.name)
    head = source.head(path)
    if head[:2] != b"\x1f\x8b" and not head.lstrip().startswith(b"{"):
        what = "binary content" if b"\0" in head else "text"
        raise InputError(path, f"{what} that is not a JSON object (not a PyTorch Execution Trace)")
    data = source.read_bytes(path, FORMAT.name)
    limit = MAX_FILE_BYTES[FORMAT.name]
    if data[:2] == b"\x1f\x8b":
        try:
            d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
            text = d.decompress(data, limit + 1)
        except zlib.error as e:
            raise InputError(path, f"not a valid gzip file: {first_line(e)}") from None
        if len(text) > limit:
            raise TooLarge(path, f"more than the {FORMAT.name} size limit of {human(limit)} of JSON (decompressed)")
        if not d.eof:
            raise InputError(path, "gzip stream ends early (truncated file)")
        data = text
    if json_nesting.stack_unguarded():
        json_nesting.check(path, data)
    try:
        return json.loads(data)
    except RecursionError:
        raise InputError(path, "JSON nested too deeply") from None
    except UnicodeDecodeError:
        raise InputError(path, "not UTF-8 text") from None
    except json.JSONDecodeError as e:
        if e.pos >= len(data.rstrip()) - 1:
            raise InputError(path, "truncated JSON (the file ends inside the trace)") from None
        raise InputError(path, f"malformed JSON: {e.msg}", f"line {e.lineno}") from None


def _op_type(n: Node) -> str:
    if n.scope == _USER_ANNOTATION_SCOPE:
        return "ProfilerStep" if n.name.startswith("ProfilerStep#") else (n.name.split("#", 1)[0] or n.name)
    return n.name


@dataclass
class EtFrames(TraceFrames):
    """The frames of an ET alone, with the ET itself for :func:`merge`."""

    et: ExecutionTrace | None = field(default=None, repr=False, compare=False)


def parse(path: Path) -> EtFrames:
    """An ET alone: its ops, tensors and dependencies, no times."""
    et = read(Path(path))
    b = FramesBuilder(FORMAT.framework, [str(path)], time_unit="none")
    device = b.device("cpu", "CPU", key="et:cpu")
    uid_of = {n.id: kit.uid(Kind.OP, "et", n.id) for n in et.ops()}
    carriers = carriers_of(et)
    carrier_ids = {c.id for c in carriers}
    for seq, n in enumerate(et.ops()):
        b.op(
            {
                "uid": uid_of[n.id],
                "name": n.name,
                "type": _op_type(n),
                "device": device,
                "seq": seq,
                "executed": True,
                "parent": uid_of[n.parent] if n.parent is not None else None,
                "thread": f"et-tid:{n.tid}" if n.tid is not None else None,
                "role": (Role.ANNOTATION if n.scope == _USER_ANNOTATION_SCOPE else Role.OP).value,
                "carries_deps": n.id in carrier_ids,
                "attrs": json.dumps({"et_id": n.id, "rf_id": n.rf_id, "op_schema": n.schema or None}),
            }
        )
    flow = data_flow(et, carriers)
    add_flow(b, flow, uid_of)
    b.meta.update({"et_schema": et.schema, "et_carriers": len(carriers), "et_dependencies": len(flow.deps)})
    plain = b.frames()
    tf = EtFrames(**{f: getattr(plain, f) for f in _FRAME_FIELDS}, et=et)
    assign_phases(tf)
    tf.check()
    return tf


_FRAME_FIELDS = [f for f in TraceFrames.__dataclass_fields__ if TraceFrames.__dataclass_fields__[f].init]


def merge(base: TraceFrames, extra: TraceFrames) -> TraceFrames:
    """The Kineto trace ``base`` with the tensors and dependencies of the
    ET ``extra`` (what :func:`parse` made; :mod:`.et_merge`)."""
    et = getattr(extra, "et", None)
    if not isinstance(et, ExecutionTrace):
        raise TypeError("merge wants the frames pytorch-et's parse made")
    return et_merge.merge(base, et)
