"""One rank's events (:mod:`.events`) assembled into its tables
(:mod:`.trace`'s rules) with numpy and compiled kernels: uids, nesting,
launches, kernels joined to their calls, synchronization edges and memory
pairing. Work per distinct string (a name's type, role and phase; a
thread's name) is done once per string, never per event.

The tables (:class:`RankPart`) are :class:`tracegraph.columns.Table`s
whose references are row positions (an op's ``parent``, a kernel's
``op``, ``stream`` and ``launch``...); times stay absolute integer
nanoseconds until the job's ranks are joined (:mod:`.trace`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from tracegraph.columns import I64, U8, B, Strings, Table, Texts, distinct, first_rows, kernel, labelled
from tracegraph.errors import InputError
from tracegraph.ingest.formats import kit
from tracegraph.ingest.formats.kineto import events as kineto_events
from tracegraph.ingest.formats.kineto import nesting as nest
from tracegraph.ingest.formats.kineto import phase as kineto_phase
from tracegraph.ingest.formats.kineto import scan
from tracegraph.ingest.formats.kineto.run import RunFacts, info_rank, run_facts
from tracegraph.ingest.formats.kineto.scan import V_CODE, V_INT, V_NONE
from tracegraph.ingest.formats.kit import OUTSIDE_OP_NAME, Role, collective_in_name
from tracegraph.ingest.hb import offsets_of, sort4

# The categories of host spans as shown (``category``), by scan.HOST_CATEGORIES.
SHOWN_CATEGORIES = (
    "cpu_op",
    "cpu_op",
    "user_annotation",
    "python_function",
    "cuda_runtime",
    "cuda_runtime",
    "cuda_driver",
)
RUNTIME_CATEGORIES = ("cuda_runtime", "cuda_driver")
# Device span kinds, by scan.DEVICE_CATEGORIES.
DEVICE_KINDS = ("kernel", "memcpy", "memcpy", "memset", "memset")
# Runtime calls that block until device work ends (their ops' role is ``sync``).
BLOCKING_CALLS = frozenset(
    {
        "cudaDeviceSynchronize",
        "cudaStreamSynchronize",
        "cudaEventSynchronize",
        "cudaEventQuery",
        "cudaMemcpy",
        "cudaMemcpyAsync",
        "hipDeviceSynchronize",
        "hipStreamSynchronize",
        "hipEventSynchronize",
        "hipEventQuery",
        "hipMemcpy",
        "hipMemcpyAsync",
    }
)
_COPY_DIRECTION = re.compile(r"Memcpy\s+(\w+)")
# torch.distributed's point-to-point calls: not collectives.
POINT_TO_POINT = frozenset({"c10d::send", "c10d::recv_", "c10d::recv_any_source_"})
OUTSIDE_ATTRS = '{"synthesized_from":"kernels without a launch in the trace"}'
# An allocation's free time while it has none (times are int64 ns).
NEVER_FREED = int(np.iinfo(np.int64).min)
# cuda_sync record kinds the graph reads, by code.
SYNC_KINDS = ("Stream Sync", "Context Sync", "Event Sync", "Stream Wait Event")

# (kind, value) of a field as one int64 key: equal keys, equal values.
_INT_BASE = -(2**62)
_CODE_BASE = 2**62


def keys(kind: I64, value: I64) -> I64:
    """Fields as int64 keys (no value: one key of its own)."""
    return np.where(kind == V_INT, value, np.where(kind == V_CODE, _CODE_BASE + value, _INT_BASE))


@dataclass
class RankPart:
    """One rank assembled: its tables (row positions for references; no
    ``seq`` nor times yet: ``*_ns`` columns hold absolute integer ns),
    and what the trace's meta counts."""

    path: Path
    rank: int
    named: bool  # the rank comes from the file's distributedInfo (else from its place among the files)
    header: dict[str, Any]
    tables: dict[str, Table]
    events: int  # ops and kernels the file holds (the outside-trace ops not counted)
    skipped: dict[str, int] = field(default_factory=dict)
    unpaired_frees: int = 0
    kernels_without_launch: int = 0
    memory_without_address: int = 0
    reported_peak: dict[str, int] = field(default_factory=dict)

    def run_facts(self) -> RunFacts:
        """What checking the job's files are one run needs of this rank (:mod:`.run`)."""
        ops, kernels = self.tables["ops"], self.tables["kernels"]
        return run_facts(
            self.path,
            self.named,
            np.stack([np.asarray(ops["start_ns"]), np.asarray(ops["end_ns"])], axis=1),
            np.stack([np.asarray(kernels["start_ns"]), np.asarray(kernels["end_ns"])], axis=1),
        )


def read_part(path: Path, rank: int, multi: bool) -> RankPart:
    """Read and assemble one rank file (``rank`` when the file names none)."""
    ev = kineto_events.read(path)
    named = info_rank(ev.header)
    return assemble(ev, rank if named is None else named, named is not None, multi)


def assemble(ev: kineto_events.RankEvents, rank: int, named: bool, multi: bool) -> RankPart:
    return _Assembly(ev, rank, multi).part(named)


class _Assembly:
    def __init__(self, ev: kineto_events.RankEvents, rank: int, multi: bool) -> None:
        self.ev = ev
        self.rank = rank
        self.pre = f"rank{rank}/" if multi else ""
        self.multi = multi
        # devices: key -> row (the CPU first); names, kinds
        self.device_rows: dict[Any, int] = {}
        self.device_uids: list[str] = []
        self.device_names: list[str] = []
        self.device_kinds: list[str] = []
        self._device(False)
        self.meta = RankPart(ev.path, rank, False, ev.header, {}, len(ev.ops) + len(ev.devs), dict(ev.skipped))

    def value(self, kind: int, v: int) -> Any:
        return self.ev.value(kind, v)

    def _device(self, gpu: bool, index: Any = None) -> int:
        """The row of the rank's CPU, or of its GPU ``index`` (a file's value), added on first mention."""
        uid = f"dev:{self.rank}:cuda:{index}" if gpu else f"dev:{self.rank}:cpu"
        row = self.device_rows.get(uid)
        if row is None:
            row = self.device_rows[uid] = len(self.device_uids)
            self.device_uids.append(uid)
            self.device_names.append(f"{self.pre}cuda:{index}" if gpu else f"{self.pre}cpu")
            self.device_kinds.append("GPU" if gpu else "CPU")
        return row

    def part(self, named: bool) -> RankPart:
        ev = self.ev
        H = ev.ops
        n_ops = len(H)
        names = ev.names
        # --- ops of the file ---
        name_code = H[:, scan.O_NAME]
        shown_code = (
            np.asarray([0, 0, 1, 2, 3, 3, 4], dtype=np.int64)[H[:, scan.O_CAT]] if n_ops else np.zeros(0, np.int64)
        )
        shown_names = ("cpu_op", "user_annotation", "python_function", "cuda_runtime", "cuda_driver")
        pair = name_code * 8 + shown_code
        uniq, inverse = distinct(pair)
        types: list[str] = []
        roles: list[str] = []
        for p in uniq.tolist():
            nm, cat = names[p // 8], shown_names[p % 8]
            types.append(_op_type(nm, cat))
            roles.append(_role(nm, cat).value)
        pair_code = inverse.reshape(-1)
        runtime = (shown_code == 3) | (shown_code == 4)
        cpu_op = shown_code == 0
        # threads: (pid, tid) pairs of ops and memory records, one id each
        M = ev.mems
        pid = np.concatenate([keys(H[:, scan.O_PID], H[:, scan.O_PIDV]), keys(M[:, scan.M_PID], M[:, scan.M_PIDV])])
        tid = np.concatenate([keys(H[:, scan.O_TID], H[:, scan.O_TIDV]), keys(M[:, scan.M_TID], M[:, scan.M_TIDV])])
        pids = np.concatenate([H[:, [scan.O_PID, scan.O_PIDV]], M[:, [scan.M_PID, scan.M_PIDV]]])
        tids = np.concatenate([H[:, [scan.O_TID, scan.O_TIDV]], M[:, [scan.M_TID, scan.M_TIDV]]])
        thread_of = np.zeros(len(pid), dtype=np.int64)
        thread_names: list[str] = []
        if len(pid):
            # the distinct (pid, tid) pairs, in their order (np.unique(axis=0) sorts rows 10x slower)
            _, pid_code = np.unique(pid, return_inverse=True)
            tid_values, tid_code = np.unique(tid, return_inverse=True)
            pairs, thread_of = distinct(pid_code.reshape(-1) * len(tid_values) + tid_code.reshape(-1))
            first_t = first_rows(thread_of, len(pairs))
            thread_names = [f"{self.pre}{self.value(*pids[i])}:{self.value(*tids[i])}" for i in first_t.tolist()]
        op_thread = thread_of[:n_ops]
        mem_thread = thread_of[n_ops:]
        start = H[:, scan.O_TS].copy()
        end = H[:, scan.O_END].copy()
        parents, memory_op = nest.nesting(
            op_thread, start, end, H[:, scan.O_INDEX], mem_thread, M[:, scan.M_TS], M[:, scan.M_INDEX]
        )
        c10d = np.fromiter((s.startswith("c10d::") for s in names), dtype=bool, count=len(names))
        p2p = np.fromiter((s in POINT_TO_POINT for s in names), dtype=bool, count=len(names))
        calls = nest.collective_calls(parents, c10d[name_code], p2p[name_code]) if n_ops else np.zeros(0, bool)
        launcher = nest.launchers(parents, runtime, cpu_op) if n_ops else np.zeros(0, np.int64)
        # --- kernels ---
        kern = self._kernels(H, runtime, launcher, start)
        # --- ops table (the file's, then the outside-trace ones) ---
        n_out = len(kern["outside_devices"])
        total = n_ops + n_out
        op_start = np.concatenate([start, kern["outside_start"]])
        op_end = np.concatenate([end, kern["outside_start"]])
        outside_name = len(names)
        all_names = (*names, OUTSIDE_OP_NAME)
        op_name = np.concatenate([name_code, np.full(n_out, outside_name, dtype=np.int64)])
        by_pair = np.concatenate([pair_code, np.full(n_out, len(types), dtype=np.int64)])
        uid = _uid_texts(f"op:{self.rank}:", H[:, scan.O_INDEX])
        if n_out:
            extra = Texts.of([f"op:{self.rank}:outside:{d}" for d in kern["outside_labels"]])
            uid = _concat_texts(uid, extra)
        attrs = ev.attrs
        if n_out:
            attrs = _concat_texts(attrs, Texts.of([OUTSIDE_ATTRS] * n_out))
        seq = nest.seq_order(op_start, op_end)
        all_parents = np.concatenate([parents, np.full(n_out, -1, dtype=np.int64)])
        # phases: own by name (OutsideTrace: other), communication for ops that launched NCCL kernels
        phase_values = ("forward", "backward", "optimizer", "communication", "other")
        phase_code = {p: i for i, p in enumerate(phase_values)}
        own_by_name = np.asarray(
            [-1 if (p := kineto_phase.own_phase(s)) is None else phase_code[p] for s in all_names], dtype=np.int64
        )
        own = own_by_name[op_name]
        own[n_ops:] = phase_code["other"]
        comm_ops = kern["op"][kern["kind"] == 3]  # kind code 3: communication
        own[comm_ops[comm_ops >= 0]] = phase_code["communication"]
        order = np.argsort(seq, kind="stable")
        phase = nest.phases(order, all_parents, own, phase_code["other"], phase_code["forward"])
        scopes = tuple(kit.scope_of(s) for s in all_names)
        ops = Table(total)
        ops["uid"] = uid
        ops["name"] = Strings(op_name.astype(np.int32), all_names)
        ops["type"] = labelled(by_pair, [*types, "OutsideTrace"])
        ops["device"] = np.concatenate([np.zeros(n_ops, dtype=np.int64), kern["outside_devices"]])
        ops["executed"] = np.ones(total, dtype=bool)
        ops["attrs"] = attrs
        ops["thread"] = Strings(np.concatenate([op_thread, np.full(n_out, -1)]).astype(np.int32), tuple(thread_names))
        cat_codes = np.concatenate([shown_code, np.full(n_out, -1, dtype=np.int64)])
        ops["category"] = Strings(cat_codes.astype(np.int32), shown_names)
        ops["role"] = labelled(by_pair, [*roles, Role.OP.value])
        ops["phase"] = Strings(phase.astype(np.int32), phase_values)
        ops["parent"] = all_parents
        coll = np.where(np.concatenate([calls, np.zeros(n_out, dtype=bool)]), op_name, -1)
        ops["collective"] = Strings(coll.astype(np.int32), all_names)
        ops["scope"] = labelled(op_name, scopes)
        ops["rank"] = np.full(total, float(self.rank) if self.multi else np.nan)
        ops["start_ns"] = op_start
        ops["end_ns"] = op_end
        ops["seq"] = seq
        # --- syncs, memory ---
        syncs = self._syncs(H, kern, start)
        allocations = self._memory(memory_op)
        devices = Table(len(self.device_uids))
        devices["uid"] = Texts.of(self.device_uids)
        devices["name"] = Strings.of(self.device_names)
        devices["kind"] = Strings.of(self.device_kinds)
        devices["rank"] = np.full(len(self.device_uids), float(self.rank) if self.multi else np.nan)
        self.meta.tables = {
            "ops": ops,
            "kernels": kern["table"],
            "streams": kern["streams"],
            "devices": devices,
            "syncs": syncs,
            "allocations": allocations,
            "allocators": self.allocators,
        }
        self.meta.named = named
        return self.meta

    # --- kernels ---

    def _kernels(self, H: I64, runtime: npt.NDArray[np.bool_], launcher: I64, op_start: I64) -> dict[str, Any]:
        ev = self.ev
        D = ev.devs
        n = len(D)
        dev_key = keys(D[:, scan.D_DEV], D[:, scan.D_DEVV])
        stream_key = keys(D[:, scan.D_STREAM], D[:, scan.D_STREAMV])
        kstart = D[:, scan.D_TS]
        kend = D[:, scan.D_END]
        # runtime calls by correlation (the last call of a correlation wins) and by (pid, tid, start)
        corr_kind, corr_v = H[:, scan.O_CORR], H[:, scan.O_CORRV]
        has_corr = self._present(corr_kind, corr_v) & runtime
        rt = np.flatnonzero(has_corr)
        by_corr = _last_index(keys(corr_kind[rt], corr_v[rt]), rt)
        rta = np.flatnonzero(runtime)
        at_keys = np.stack(
            [
                keys(H[rta, scan.O_PID], H[rta, scan.O_PIDV]),
                keys(H[rta, scan.O_TID], H[rta, scan.O_TIDV]),
                H[rta, scan.O_TS],
            ],
            axis=1,
        )
        by_at = _last_index_rows(at_keys, rta)
        kcorr_kind, kcorr_v = D[:, scan.D_CORR], D[:, scan.D_CORRV]
        j = np.full(n, -1, dtype=np.int64)
        kc = self._present(kcorr_kind, kcorr_v)
        j[kc] = _lookup(by_corr, keys(kcorr_kind[kc], kcorr_v[kc]))
        missing = np.flatnonzero(j < 0)
        if len(missing):
            F = ev.flows
            ends = F[F[:, scan.F_END] == 1]
            starts = F[F[:, scan.F_END] == 0]
            end_keys = np.stack(
                [
                    keys(ends[:, scan.F_PID], ends[:, scan.F_PIDV]),
                    keys(ends[:, scan.F_TID], ends[:, scan.F_TIDV]),
                    ends[:, scan.F_TS],
                ],
                axis=1,
            )
            flow_end = _last_index_rows(end_keys, keys(ends[:, scan.F_ID], ends[:, scan.F_IDV]))
            flow_start = _last_index(
                keys(starts[:, scan.F_ID], starts[:, scan.F_IDV]),
                np.arange(len(starts), dtype=np.int64),
            )
            kk = np.stack([dev_key[missing], stream_key[missing], kstart[missing]], axis=1)
            fid = _lookup_rows(flow_end, kk, empty=-(2**63))
            got = fid != -(2**63)
            src = np.full(len(missing), -1, dtype=np.int64)
            src[got] = _lookup(flow_start, fid[got])
            ok = src >= 0
            s_rows = starts[src[ok]]
            skeys = np.stack(
                [
                    keys(s_rows[:, scan.F_PID], s_rows[:, scan.F_PIDV]),
                    keys(s_rows[:, scan.F_TID], s_rows[:, scan.F_TIDV]),
                    s_rows[:, scan.F_TS],
                ],
                axis=1,
            )
            found = np.full(len(missing), -1, dtype=np.int64)
            found[np.flatnonzero(ok)] = _lookup_rows(by_at, skeys, empty=-1)
            j[missing] = found
        # devices and streams, in order of first mention
        dev_rows = np.zeros(n, dtype=np.int64)
        if n:
            uniq_d, first_d, inv_d = np.unique(dev_key, return_index=True, return_inverse=True)
            row_of = np.zeros(len(uniq_d), dtype=np.int64)
            for u in np.argsort(first_d, kind="stable").tolist():
                i = int(first_d[u])
                v = self.value(int(D[i, scan.D_DEV]), int(D[i, scan.D_DEVV]))
                row_of[u] = self._device(True, v)
            dev_rows = row_of[inv_d.reshape(-1)]
        pair = np.stack([dev_key, stream_key], axis=1) if n else np.zeros((0, 2), dtype=np.int64)
        stream_uids: list[str] = []
        stream_names: list[str] = []
        stream_device: list[int] = []
        stream_of = np.zeros(n, dtype=np.int64)
        if n:
            uniq_s, first_s, inv_s = np.unique(pair, axis=0, return_index=True, return_inverse=True)
            row_s = np.zeros(len(uniq_s), dtype=np.int64)
            by_uid: dict[str, int] = {}
            for u in np.argsort(first_s, kind="stable").tolist():
                i = int(first_s[u])
                dv = self.value(int(D[i, scan.D_DEV]), int(D[i, scan.D_DEVV]))
                sv = self.value(int(D[i, scan.D_STREAM]), int(D[i, scan.D_STREAMV]))
                uid = f"s:{self.rank}:{dv}:{sv}"
                row = by_uid.get(uid)
                if row is None:
                    row = by_uid[uid] = len(stream_uids)
                    stream_uids.append(uid)
                    stream_names.append(f"stream:{sv}")
                    stream_device.append(int(dev_rows[i]))
                row_s[u] = row
            stream_of = row_s[inv_s.reshape(-1)]
        streams = Table(len(stream_uids))
        streams["uid"] = Texts.of(stream_uids)
        streams["device"] = np.asarray(stream_device, dtype=np.int64)
        streams["name"] = Strings.of(stream_names)
        streams["kind"] = Strings.constant("compute", len(stream_uids))
        # kinds: kernels of a communication library are communication (kit.is_communication_kernel)
        names = ev.names
        dcat = D[:, scan.D_CAT]
        name_code = D[:, scan.D_NAME]
        is_comm_name = np.fromiter((kit.is_communication_kernel(s) for s in names), dtype=bool, count=len(names))
        kind_values = ("compute", "memcpy", "memset", "communication")
        kind = (
            np.where(dcat == 0, np.where(is_comm_name[name_code], 3, 0), np.where(dcat <= 2, 1, 2))
            if n
            else np.zeros(0, np.int64)
        )
        # copies' direction, copies' and memsets' bytes
        direction_by_name = tuple(_direction(s) for s in names)
        direction = np.where(kind == 1, name_code, -1)
        bytes_col = np.full(n, np.nan)
        sized = np.flatnonzero((kind == 1) | (kind == 2))
        if len(sized):
            bk = keys(D[sized, scan.D_BYTES], D[sized, scan.D_BYTESV])
            _, first_b, inv_b = np.unique(bk, return_index=True, return_inverse=True)
            vals = []
            for i in first_b.tolist():
                row = sized[i]
                v = _int_or_none(self.value(int(D[row, scan.D_BYTES]), int(D[row, scan.D_BYTESV])))
                vals.append(np.nan if v is None else float(v))
            bytes_col[sized] = np.asarray(vals)[inv_b.reshape(-1)]
        # NCCL fields per (name, collective, group, ranks)
        coll_codes = np.full((3, n), -1, dtype=np.int64)
        coll_values: list[list[str]] = [[], [], []]
        comm = np.flatnonzero(kind == 3)
        if len(comm):
            quad = np.stack(
                [
                    name_code[comm],
                    keys(D[comm, scan.D_COLL], D[comm, scan.D_COLLV]),
                    keys(D[comm, scan.D_GROUP], D[comm, scan.D_GROUPV]),
                    keys(D[comm, scan.D_RANKS], D[comm, scan.D_RANKSV]),
                ],
                axis=1,
            )
            uniq_q, first_q, inv_q = np.unique(quad, axis=0, return_index=True, return_inverse=True)
            index: list[dict[str, int]] = [{}, {}, {}]
            per = np.full((3, len(uniq_q)), -1, dtype=np.int64)
            for u, i in enumerate(first_q.tolist()):
                row = comm[i]
                args = {}
                for col, key in (
                    (scan.D_COLL, "Collective name"),
                    (scan.D_GROUP, "Process Group Name"),
                    (scan.D_RANKS, "Process Group Ranks"),
                ):
                    if D[row, col] != V_NONE:
                        args[key] = self.value(int(D[row, col]), int(D[row, col + 1]))
                fields = _collective_fields(names[int(name_code[row])], args)
                for f, k in enumerate(("collective", "process_group", "group_ranks")):
                    v = fields[k]
                    if v is not None:
                        per[f, u] = index[f].setdefault(v, len(index[f]))
            inv_q = inv_q.reshape(-1)
            for f in range(3):
                coll_codes[f, comm] = per[f, inv_q]
                coll_values[f] = list(index[f])
        # ops: the launcher of the call, or the op standing for launches outside the trace
        launched = j >= 0
        op = np.full(n, -1, dtype=np.int64)
        op[launched] = launcher[j[launched]]
        outside = np.flatnonzero(~launched)
        self.meta.kernels_without_launch = len(outside)
        outside_devices = np.zeros(0, dtype=np.int64)
        outside_start = np.zeros(0, dtype=np.int64)
        outside_labels: list[str] = []
        n_ops = len(H)
        if len(outside):
            od = dev_rows[outside]
            uniq_o, first_o, inv_o = np.unique(od, return_index=True, return_inverse=True)
            order_o = np.argsort(first_o, kind="stable")
            position = np.empty(len(uniq_o), dtype=np.int64)
            position[order_o] = np.arange(len(uniq_o))
            inv_o = inv_o.reshape(-1)
            op[outside] = n_ops + position[inv_o]
            outside_devices = uniq_o[order_o]
            outside_start = np.full(len(uniq_o), np.iinfo(np.int64).max, dtype=np.int64)
            np.minimum.at(outside_start, position[inv_o], kstart[outside])
            outside_labels = [self.device_uids[int(d)].rsplit(":", 1)[-1] for d in outside_devices.tolist()]
        table = Table(n)
        table["uid"] = _uid_texts(f"k:{self.rank}:", D[:, scan.D_INDEX])
        table["op"] = op
        table["stream"] = stream_of
        table["name"] = Strings(name_code.astype(np.int32), tuple(names))
        table["kind"] = Strings(kind.astype(np.int32), kind_values)
        table["bytes"] = bytes_col
        table["direction"] = labelled(direction, direction_by_name)
        table["collective"] = Strings(coll_codes[0].astype(np.int32), tuple(coll_values[0]))
        table["process_group"] = Strings(coll_codes[1].astype(np.int32), tuple(coll_values[1]))
        table["group_ranks"] = Strings(coll_codes[2].astype(np.int32), tuple(coll_values[2]))
        table["launch"] = j
        table["start_ns"] = kstart.copy()
        table["end_ns"] = kend.copy()
        return {
            "table": table,
            "streams": streams,
            "op": op,
            "kind": kind,
            "j": j,
            "dev_key": dev_key,
            "stream_key": stream_key,
            "outside_devices": outside_devices,
            "outside_start": outside_start,
            "outside_labels": outside_labels,
        }

    def _present(self, kind: I64, v: I64) -> npt.NDArray[np.bool_]:
        """Fields with a value other than null."""
        nulls = np.asarray([x is None for x in self.ev.values] or [False], dtype=bool)
        out: B = (kind == V_INT) | ((kind == V_CODE) & ~nulls[np.where(kind == V_CODE, v, 0)])
        return out

    # --- synchronization ---

    def _syncs(self, H: I64, kern: dict[str, Any], op_start: I64) -> Table:
        ev = self.ev
        S = ev.syncs
        n = len(S)
        kinds = np.full(n, -1, dtype=np.int64)
        if n:
            kk = keys(S[:, scan.S_KIND], S[:, scan.S_KINDV])
            _, first_k, inv_k = np.unique(kk, return_index=True, return_inverse=True)
            code_of = []
            for i in first_k.tolist():
                kd = int(S[i, scan.S_KIND])
                text = "" if kd == V_NONE else str(self.value(kd, int(S[i, scan.S_KINDV])))
                code_of.append(SYNC_KINDS.index(text) if text in SYNC_KINDS else -1)
            kinds = np.asarray(code_of, dtype=np.int64)[inv_k.reshape(-1)]
        corr = keys(H[:, scan.O_CORR], H[:, scan.O_CORRV])
        runtime = np.isin(H[:, scan.O_CAT], [4, 5, 6])
        rt = np.flatnonzero(runtime & self._present(H[:, scan.O_CORR], H[:, scan.O_CORRV]))
        by_corr = _last_index(corr[rt], rt)
        call = np.full(n, -1, dtype=np.int64)
        rec = np.full(n, -1, dtype=np.int64)
        if n:
            sc = self._present(S[:, scan.S_CORR], S[:, scan.S_CORRV])
            call[sc] = _lookup(by_corr, keys(S[sc, scan.S_CORR], S[sc, scan.S_CORRV]))
            wr = self._present(S[:, scan.S_WREC], S[:, scan.S_WRECV])
            rec[wr] = _lookup(by_corr, keys(S[wr, scan.S_WREC], S[wr, scan.S_WRECV]))
        K = kern["table"]
        j = kern["j"]
        launch_start = (
            np.where(j >= 0, op_start[np.maximum(j, 0)], np.iinfo(np.int64).min) if len(j) else np.zeros(0, np.int64)
        )
        pid = keys(H[:, scan.O_PID], H[:, scan.O_PIDV])
        tid = keys(H[:, scan.O_TID], H[:, scan.O_TIDV])
        kpid = np.where(j >= 0, pid[np.maximum(j, 0)], 0) if len(j) else np.zeros(0, np.int64)
        ktid = np.where(j >= 0, tid[np.maximum(j, 0)], 0) if len(j) else np.zeros(0, np.int64)
        # kernels' uids in string order (ties of a stream's order are broken by uid)
        index = ev.devs[:, scan.D_INDEX]
        lex = np.empty(len(index), dtype=np.int64)
        lex[np.argsort(index.astype(str), kind="stable")] = np.arange(len(index))
        src, dst, kind = _sync_edges(
            kinds,
            keys(S[:, scan.S_DEV], S[:, scan.S_DEVV]) if n else np.zeros(0, np.int64),
            keys(S[:, scan.S_STREAM], S[:, scan.S_STREAMV]) if n else np.zeros(0, np.int64),
            keys(S[:, scan.S_WSTREAM], S[:, scan.S_WSTREAMV]) if n else np.zeros(0, np.int64),
            S[:, scan.S_END] if n else np.zeros(0, np.int64),
            call,
            rec,
            op_start,
            pid,
            tid,
            kern["dev_key"],
            kern["stream_key"],
            K["start_ns"],
            K["end_ns"],
            lex,
            launch_start,
            kpid,
            ktid,
        )
        # each (src, dst) once, the first kept (a host wait's dst is an op, a stream wait's a kernel)
        if len(src):
            _, first = np.unique(np.stack([src, dst, kind], axis=1), axis=0, return_index=True)
            keep = np.sort(first)
            src, dst, kind = src[keep], dst[keep], kind[keep]
        table = Table(len(src))
        table["src"] = src
        table["dst"] = dst
        table["kind"] = Strings(kind.astype(np.int32), ("host_wait", "stream_wait"))
        return table

    # --- memory ---

    def _memory(self, memory_op: I64) -> Table:
        ev = self.ev
        M = ev.mems
        n = len(M)
        order = np.argsort(M[:, scan.M_TS], kind="stable")
        self.allocator_uids: list[str] = []
        self.allocator_names: list[str] = []
        self.allocator_devices: list[int] = []
        allocator_of = np.zeros(n, dtype=np.int64)
        if n:
            dk = np.stack(
                [keys(M[:, scan.M_DTYPE], M[:, scan.M_DTYPEV]), keys(M[:, scan.M_DID], M[:, scan.M_DIDV])], axis=1
            )
            uniq, inverse = np.unique(dk, axis=0, return_inverse=True)
            inverse = inverse.reshape(-1)
            first_seen = np.full(len(uniq), n, dtype=np.int64)
            np.minimum.at(first_seen, inverse[order], np.arange(n))
            rows: dict[Any, int] = {}
            which = np.zeros(len(uniq), dtype=np.int64)
            pos_of = np.empty(n, dtype=np.int64)
            pos_of[order] = np.arange(n)
            for u in np.argsort(first_seen, kind="stable").tolist():
                i = int(order[first_seen[u]])
                dtype = self.value(int(M[i, scan.M_DTYPE]), int(M[i, scan.M_DTYPEV]))
                did = self.value(int(M[i, scan.M_DID]), int(M[i, scan.M_DIDV]))
                gpu = dtype == 1 or (isinstance(did, int) and did >= 0 and dtype not in (0, None))
                key = ("cuda", did) if gpu else "cpu"
                row = rows.get(key)
                if row is None:
                    row = rows[key] = len(self.allocator_uids)
                    if gpu:
                        self.allocator_uids.append(f"mem:{self.rank}:cuda:{did}")
                        self.allocator_names.append(f"{self.pre}cuda:{did}")
                        self.allocator_devices.append(self._device(True, did))
                    else:
                        self.allocator_uids.append(f"mem:{self.rank}:cpu")
                        self.allocator_names.append(f"{self.pre}cpu")
                        self.allocator_devices.append(0)
                which[u] = row
            allocator_of = which[inverse]
        allocators = Table(len(self.allocator_uids))
        allocators["uid"] = Texts.of(self.allocator_uids)
        allocators["name"] = Strings.of(self.allocator_names)
        allocators["device"] = np.asarray(self.allocator_devices, dtype=np.int64)
        self.allocators = allocators
        # reported peaks: the largest Total Allocated (an integer) per allocator
        total_int = M[:, scan.M_TOTAL] == V_INT
        for a in np.unique(allocator_of[total_int]).tolist():
            mine = total_int & (allocator_of == a)
            self.meta.reported_peak[self.allocator_names[a]] = int(M[mine, scan.M_TOTALV].max())
        # bytes: an integer, else refused
        nbytes = np.zeros(n, dtype=np.int64)
        if n:
            bk = keys(M[:, scan.M_BYTES], M[:, scan.M_BYTESV])
            uniq_b, first_b, inv_b = np.unique(bk, return_index=True, return_inverse=True)
            vals = []
            bad = np.zeros(len(uniq_b), dtype=bool)
            for u, i in enumerate(first_b.tolist()):
                v = _int_or_none(self.value(int(M[i, scan.M_BYTES]), int(M[i, scan.M_BYTESV])))
                bad[u] = v is None
                vals.append(0 if v is None else v)
            inv_b = inv_b.reshape(-1)
            if bad.any():
                first = order[np.flatnonzero(bad[inv_b[order]])[0]]
                raw = self.value(int(M[first, scan.M_BYTES]), int(M[first, scan.M_BYTESV]))
                raise InputError(
                    ev.path, f"[memory] Bytes is not an integer: {raw!r}", f"traceEvents[{int(M[first, scan.M_INDEX])}]"
                )
            nbytes = np.asarray(vals, dtype=np.int64)[inv_b]
        has_addr = self._present(M[:, scan.M_ADDR], M[:, scan.M_ADDRV]) if n else np.zeros(0, bool)
        self.meta.memory_without_address = int((~has_addr).sum())
        addr_key = keys(M[:, scan.M_ADDR], M[:, scan.M_ADDRV])
        slot = np.zeros(n, dtype=np.int64)
        if n:
            _, slot = np.unique(np.stack([allocator_of, addr_key], axis=1), axis=0, return_inverse=True)
            slot = slot.reshape(-1)
        alloc_rec, free_t, unpaired = _pair(order, has_addr, nbytes, slot, M[:, scan.M_TS], NEVER_FREED)
        self.meta.unpaired_frees = int(unpaired)
        table = Table(len(alloc_rec))
        table["uid"] = _uid_texts(f"a:{self.rank}:", M[alloc_rec, scan.M_INDEX])
        table["allocator"] = allocator_of[alloc_rec]
        table["bytes"] = nbytes[alloc_rec]
        table["address"] = self._addresses(M[alloc_rec])
        table["op"] = memory_op[alloc_rec]
        table["alloc_ns"] = M[alloc_rec, scan.M_TS].copy()
        table["free_ns"] = free_t
        return table

    def _addresses(self, rows: I64) -> Texts:
        kind, v = rows[:, scan.M_ADDR], rows[:, scan.M_ADDRV]
        ints = kind == V_INT
        if ints.all():
            return _uid_texts("", v)
        return Texts.of([str(self.value(int(k), int(x))) for k, x in zip(kind.tolist(), v.tolist())])


# --- helpers -------------------------------------------------------------------------------------


def _last_index(k: I64, positions: I64) -> tuple[I64, I64]:
    """Sorted unique keys and, for each, the position of its last occurrence."""
    if len(k) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    order = np.lexsort((np.arange(len(k)), k))
    ks = k[order]
    last = np.ones(len(ks), dtype=bool)
    last[:-1] = ks[1:] != ks[:-1]
    return ks[last], positions[order][last]


def _lookup(table: tuple[I64, I64], k: I64, empty: int = -1) -> I64:
    ks, vs = table
    if len(ks) == 0:
        return np.full(len(k), empty, dtype=np.int64)
    i = np.searchsorted(ks, k)
    i = np.minimum(i, len(ks) - 1)
    return np.where(ks[i] == k, vs[i], empty)


def _last_index_rows(rows: I64, values: I64) -> tuple[I64, I64]:
    """For rows of keys (n, 3): sorted unique rows (as a structured view) and the value of each's last occurrence."""
    if len(rows) == 0:
        return np.zeros(0, dtype=[("a", "<i8"), ("b", "<i8"), ("c", "<i8")]), np.zeros(0, np.int64)
    s = _rows_view(rows)
    order = np.lexsort((np.arange(len(s)), rows[:, 2], rows[:, 1], rows[:, 0]))
    ss = s[order]
    last = np.ones(len(ss), dtype=bool)
    last[:-1] = ss[1:] != ss[:-1]
    return ss[last], values[order][last]


def _lookup_rows(table: tuple[Any, I64], rows: I64, empty: int) -> I64:
    ks, vs = table
    if len(ks) == 0 or len(rows) == 0:
        return np.full(len(rows), empty, dtype=np.int64)
    s = _rows_view(rows)
    i = np.minimum(np.searchsorted(ks, s), len(ks) - 1)
    return np.where(ks[i] == s, vs[i], empty)


def _rows_view(rows: I64) -> Any:
    r = np.ascontiguousarray(rows, dtype=np.int64)
    return r.view([("a", "<i8"), ("b", "<i8"), ("c", "<i8")]).reshape(-1)


def _concat_texts(a: Texts, b: Texts) -> Texts:
    data = np.concatenate([a.data[: a.offsets[-1]], b.data[: b.offsets[-1]]])
    offsets = np.concatenate([a.offsets, b.offsets[1:] + a.offsets[-1]])
    missing = None
    if a.missing is not None or b.missing is not None:
        missing = np.concatenate([a.present() == False, b.present() == False])  # noqa: E712
    return Texts(data, offsets, missing)


def _uid_texts(prefix: str, numbers: I64) -> Texts:
    """``prefix`` followed by each number in decimal, as Texts."""
    p = np.frombuffer(prefix.encode(), dtype=np.uint8)
    data, offsets = _digits(p, np.ascontiguousarray(numbers, dtype=np.int64))
    return Texts(data, offsets)


@kernel
def _digits(prefix: U8, numbers: I64) -> tuple[U8, I64]:  # pragma: no cover - compiled
    n = len(numbers)
    offsets = np.zeros(n + 1, dtype=np.int64)
    size = 0
    for i in range(n):
        v = numbers[i]
        w = 1 if v >= 0 else 2
        a = abs(v)
        while a >= 10:
            a //= 10
            w += 1
        size += len(prefix) + w
        offsets[i + 1] = size
    data = np.empty(size, dtype=np.uint8)
    for i in range(n):
        o = offsets[i]
        for k in range(len(prefix)):
            data[o + k] = prefix[k]
        e = offsets[i + 1]
        v = numbers[i]
        neg = v < 0
        a = -v if neg else v
        j = e - 1
        while True:
            data[j] = 48 + a % 10
            a //= 10
            j -= 1
            if a == 0:
                break
        if neg:
            data[j] = 45
    return data, offsets


@kernel
def _pair(
    order: I64, has_addr: B, nbytes: I64, slot: I64, t: I64, never: int
) -> tuple[I64, I64, int]:  # pragma: no cover - compiled
    """Allocations from memory records taken in time order: (record of
    each allocation, its free time, frees without an allocation)."""
    live = np.full(len(order) + 1, -1, dtype=np.int64)
    alloc = np.zeros(len(order), dtype=np.int64)
    free = np.zeros(len(order), dtype=np.int64)
    count = 0
    unpaired = 0
    for k in range(len(order)):
        i = order[k]
        if not has_addr[i]:
            continue
        s = slot[i]
        b = nbytes[i]
        if b > 0:
            if live[s] >= 0:
                free[live[s]] = t[i]
            alloc[count] = i
            free[count] = never
            live[s] = count
            count += 1
        elif b < 0:
            if live[s] >= 0:
                free[live[s]] = t[i]
                live[s] = -1
            else:
                unpaired += 1
    return alloc[:count], free[:count], unpaired


@kernel
def _after(values: I64, order: I64, a: int, b: int, t: int, inclusive: bool) -> int:  # pragma: no cover - compiled
    """The first position q in [a, b) of ``order`` (ascending by ``values``)
    whose value is past ``t`` (with ``inclusive``: above it, else: at or above)."""
    lo, hi = a, b
    while lo < hi:
        mid = (lo + hi) // 2
        v = values[order[mid]]
        if v < t or (inclusive and v == t):
            lo = mid + 1
        else:
            hi = mid
    return lo


@kernel
def _stream_row(sdevs: I64, sstreams: I64, ns: int, device: int, stream: int) -> int:  # pragma: no cover - compiled
    """The stream (device, stream) among the first ``ns``, or -1."""
    for s in range(ns):
        if sdevs[s] == device and sstreams[s] == stream:
            return s
    return -1


@kernel
def _sync_edges(
    kinds: I64,
    sdev: I64,
    sstream: I64,
    swstream: I64,
    send: I64,
    call: I64,
    rec: I64,
    op_start: I64,
    pid: I64,
    tid: I64,
    kdev: I64,
    kstream: I64,
    kstart: I64,
    kend: I64,
    klex: I64,
    klaunch: I64,
    kpid: I64,
    ktid: I64,
) -> tuple[I64, I64, I64]:  # pragma: no cover - compiled
    """The synchronization edges (src kernel, dst, 0 host_wait / 1
    stream_wait) of the rank's cuda_sync records (.trace's rules)."""
    nk = len(kdev)
    # streams in order of first mention, each with its kernels by (start, end, uid) and by (launch start, uid)
    sid = np.full(nk, -1, dtype=np.int64)
    sdevs = np.zeros(nk, dtype=np.int64)
    sstreams = np.zeros(nk, dtype=np.int64)
    ns = 0
    for i in range(nk):
        found = -1
        for s in range(ns):
            if sdevs[s] == kdev[i] and sstreams[s] == kstream[i]:
                found = s
                break
        if found < 0:
            sdevs[ns] = kdev[i]
            sstreams[ns] = kstream[i]
            found = ns
            ns += 1
        sid[i] = found
    by_start = sort4(sid, kstart, kend, klex)  # by (stream, start, end, uid)
    starts_first = offsets_of(sid, ns)
    launched = np.zeros(nk, dtype=np.int64)
    nl = 0
    for i in range(nk):
        if klaunch[i] != np.iinfo(np.int64).min:
            launched[nl] = i
            nl += 1
    launched = launched[:nl]
    by_launch = launched[sort4(sid[launched], klaunch[launched], klex[launched], np.zeros(nl, dtype=np.int64))]
    launch_first = offsets_of(sid[launched], ns)
    out_src = np.zeros(len(kinds) * (ns + 1) + 1, dtype=np.int64)
    out_dst = np.zeros(len(kinds) * (ns + 1) + 1, dtype=np.int64)
    out_kind = np.zeros(len(kinds) * (ns + 1) + 1, dtype=np.int64)
    m = 0
    for r in range(len(kinds)):
        kd = kinds[r]
        if kd < 0 or call[r] < 0:
            continue
        c = call[r]
        if kd == 0 or kd == 1:
            for s in range(ns):
                if sdevs[s] != sdev[r]:
                    continue
                if kd == 0 and sstreams[s] != sstream[r]:
                    continue
                # the stream's kernel that started last at or before the record's end
                a = starts_first[s]
                lo = _after(kstart, by_start, a, starts_first[s + 1], send[r], True)
                if lo > a:
                    out_src[m] = by_start[lo - 1]
                    out_dst[m] = c
                    out_kind[m] = 0
                    m += 1
        else:
            if rec[r] < 0:
                continue
            t = op_start[rec[r]]
            src = -1
            s = _stream_row(sdevs, sstreams, ns, sdev[r], swstream[r])
            if s >= 0:
                a = launch_first[s]
                lo = _after(klaunch, by_launch, a, launch_first[s + 1], t, False)
                if lo > a:
                    src = by_launch[lo - 1]
            if kd == 2:
                if src >= 0:
                    out_src[m] = src
                    out_dst[m] = c
                    out_kind[m] = 0
                    m += 1
            else:
                tc = op_start[c]
                nxt = -1
                s = _stream_row(sdevs, sstreams, ns, sdev[r], sstream[r])
                if s >= 0:
                    b = launch_first[s + 1]
                    for q in range(_after(klaunch, by_launch, launch_first[s], b, tc, True), b):
                        k = by_launch[q]
                        if kpid[k] == pid[c] and ktid[k] == tid[c]:
                            nxt = k
                            break
                if src >= 0 and nxt >= 0 and src != nxt:
                    out_src[m] = src
                    out_dst[m] = nxt
                    out_kind[m] = 1
                    m += 1
    return out_src[:m], out_dst[:m], out_kind[:m]


def _collective_fields(name: str, args: dict[str, Any]) -> dict[str, Any]:
    """An NCCL kernel's collective, process group and its ranks: the
    metadata newer PyTorch records on the kernel, else the collective from
    the kernel's name (``Generic`` kernels of ROCm name none; a
    ``SendRecv`` kernel is ``SendRecv`` whatever its metadata says)."""
    word = collective_in_name(name)
    collective = word if word == "SendRecv" else (args.get("Collective name") or word)
    group = args.get("Process Group Name")
    ranks = args.get("Process Group Ranks")
    return {
        "collective": str(collective) if collective is not None else None,
        "process_group": str(group) if group is not None else None,
        "group_ranks": str(ranks) if ranks is not None else None,
    }


def _direction(name: str) -> str | None:
    m = _COPY_DIRECTION.search(name)
    return m[1] if m else None


def _int_or_none(v: Any) -> int | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int):
        return v
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return int(f) if f.is_integer() else None


def _role(name: str, cat: str) -> Role:
    if cat in RUNTIME_CATEGORIES:
        return Role.SYNC if name in BLOCKING_CALLS else Role.RUNTIME
    if cat in ("user_annotation", "python_function"):
        return Role.ANNOTATION
    return Role.OP


def _op_type(name: str, cat: str) -> str:
    if cat == "python_function":
        return "python_function"
    if cat == "user_annotation":
        if name.startswith("ProfilerStep#"):
            return "ProfilerStep"
        return name.split("#", 1)[0] or name
    return name
