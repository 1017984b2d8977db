"""An Execution Trace joined to the Kineto trace of the same step (the
rules in :mod:`.et`'s docstring): ET nodes matched to Kineto ops by
record-function id and name, the dependencies drawn over the matched
carriers with Kineto's allocations telling a reused storage id from the
same data, and the allocations that back a tensor linked to it."""

from __future__ import annotations

import json
from typing import Any

from tracegraph.errors import InputError
from tracegraph.ingest.formats.kineto.et_flow import DataFlow, add_flow, carriers_of, created, data_flow
from tracegraph.ingest.formats.kineto.et_nodes import ExecutionTrace
from tracegraph.ingest.formats.kit import FramesBuilder
from tracegraph.ingest.frames import TraceFrames

# Below this share of the ET's ops matched to Kineto events, a pair is refused.
MIN_MATCHED_SHARE = 0.5


def merge(base: TraceFrames, et: ExecutionTrace) -> TraceFrames:
    """The Kineto trace ``base`` with the tensors and dependencies of the
    Execution Trace ``et`` (the rules in :mod:`.et`'s docstring)."""
    if base.framework != "pytorch" or base.time_unit != "us":
        raise InputError(
            et.path, f"an Execution Trace joins a PyTorch (Kineto) trace, not the {base.framework} trace {base.sources}"
        )
    ops = base.ops
    uids = ops["uid"].tolist()
    match, kineto_ops, et_ops = _match(base, et)
    carriers = carriers_of(et)
    start = ops["start_us"].to_numpy(float)
    end = ops["end_us"].to_numpy(float)
    address, owner = _addresses(et, base, match)
    reused = _reuse_rule(base, match, address, start, end)
    flow = data_flow(et, carriers, reused)

    b = FramesBuilder(base.framework, base.sources)
    uid_of = {nid: uids[i] for nid, i in match.items()}
    add_flow(b, flow, uid_of)
    tf = base
    tf.sources = [*base.sources, str(et.path)]
    carrier_ops = {uid_of[c.id] for c in carriers if c.id in uid_of}
    ops["carries_deps"] = [True if u in carrier_ops else None for u in uids]
    joined = b.frames()
    tf.tensors, tf.consumes, tf.deps = joined.tensors, joined.consumes, joined.deps
    _link_memory(tf, flow, address, owner, uid_of)
    tf.meta.update(
        {
            "et_schema": et.schema,
            "et_ops_matched": len(match),
            "et_ops": et_ops,
            "et_carriers": len(carriers),
            "et_carriers_without_kineto": sum(1 for c in carriers if c.id not in match),
            "kineto_ops_without_et": len(kineto_ops - set(match.values())),
            "et_dependencies": len(tf.deps),
        }
    )
    return tf


def _match(base: TraceFrames, et: ExecutionTrace) -> tuple[dict[int, int], set[int], int]:
    """ET node id -> the position of its Kineto op (same record-function
    id and name, in the ET's process), the positions of the Kineto ops
    with a record-function id, and how many ET ops have one; refused when
    fewer than :data:`MIN_MATCHED_SHARE` of those match."""
    attrs = [json.loads(a) if isinstance(a, str) else {} for a in base.ops["attrs"].tolist()]
    names = base.ops["name"].tolist()
    kineto: dict[int, int] = {}  # rf_id -> op position, in the ET's process
    for i, a in enumerate(attrs):
        rf = a.get("Record function id")
        if isinstance(rf, int) and (et.pid is None or a.get("pid") in (None, et.pid)):
            kineto.setdefault(rf, i)
    et_ops = [n for n in et.ops() if n.rf_id is not None]
    match = {n.id: kineto[n.rf_id] for n in et_ops if n.rf_id in kineto and names[kineto[n.rf_id]] == n.name}
    if len(match) < MIN_MATCHED_SHARE * max(len(et_ops), 1):
        pid_note = ""
        kineto_pids = {a.get("pid") for a in attrs if a.get("pid") is not None}
        if et.pid is not None and kineto_pids and et.pid not in kineto_pids:
            pid_note = f"; the ET's process {et.pid} is not the Kineto trace's ({', '.join(map(str, sorted(kineto_pids, key=str)))})"
        raise InputError(
            et.path,
            f"does not match the Kineto trace {', '.join(base.sources)}: only {len(match)} of {len(et_ops)} of its "
            f"ops have a Kineto event with the same record-function id and name (files of different steps or "
            f"runs, or threads the Kineto trace did not record?){pid_note}",
        )
    return match, set(kineto.values()), len(et_ops)


def _addresses(et: ExecutionTrace, base: TraceFrames, match: dict[int, int]) -> tuple[dict[int, str], dict[int, int]]:
    """Storage -> the address of the one allocation of its size Kineto
    attributes to the op that created it, and storage -> that allocation's
    position (storages without exactly one such allocation are left out)."""
    al = base.allocations
    if al.empty:
        return {}, {}
    ops_uid = base.ops["uid"].tolist()
    by_op: dict[str, list[int]] = {}
    for i, op in enumerate(al["op"].tolist()):
        if isinstance(op, str):
            by_op.setdefault(op, []).append(i)
    nbytes = al["bytes"].tolist()
    addrs = al["address"].tolist()
    address: dict[int, str] = {}
    owner: dict[int, int] = {}
    for nid, i in match.items():
        mine = by_op.get(ops_uid[i])
        if not mine:
            continue
        for t in created(et, et.nodes[nid]):
            cands = [j for j in mine if nbytes[j] == t.bytes]
            if len(cands) == 1 and t.storage not in address:
                address[t.storage] = str(addrs[cands[0]])
                owner[t.storage] = cands[0]
    return address, owner


def _reuse_rule(base: TraceFrames, match: dict[int, int], address: dict[int, str], start: Any, end: Any) -> Any:
    """``reused(storage, writer, reader)``: was the allocation the writer
    wrote (the last one at the storage's address that began before the
    writer ended) freed before the reader started?"""
    al = base.allocations
    if al.empty or not address:
        return None
    at: dict[str, list[tuple[float, float | None]]] = {}
    for a, s, f in zip(al["address"].tolist(), al["alloc_us"].tolist(), al["free_us"].tolist()):
        if s == s and s is not None:  # timed allocations only
            at.setdefault(str(a), []).append((float(s), None if f is None or f != f else float(f)))

    def reused(storage: int, writer: int, reader: int) -> bool:
        addr = address.get(storage)
        if addr is None or writer not in match or reader not in match:
            return False
        w_end, r_start = float(end[match[writer]]), float(start[match[reader]])
        born = [(s, f) for s, f in at.get(addr, ()) if s <= w_end]
        if not born:
            return False
        _, freed = max(born)
        return freed is not None and freed < r_start

    return reused


def _link_memory(
    tf: TraceFrames, flow: DataFlow, address: dict[int, str], owner: dict[int, int], uid_of: dict[int, str]
) -> None:
    """An allocation found to hold a storage backs the tensor its first
    write made and belongs to the carrier that wrote it."""
    if not owner:
        return
    first: dict[int, tuple[int, str]] = {}  # storage -> (writer id, tensor uid), first write
    for (writer, storage), u in flow.first_version.items():
        if storage not in first or writer < first[storage][0]:
            first[storage] = (writer, u)
    al = tf.allocations
    tensors = al["tensor"].tolist()
    ops = al["op"].tolist()
    for storage, j in owner.items():
        if storage in first and first[storage][0] in uid_of:
            writer, u = first[storage]
            tensors[j], ops[j] = u, uid_of[writer]
    al["tensor"] = tensors
    al["op"] = ops
