"""Reading a rocprofv3 JSON file (``rocprofv3 --output-format json``, the
``<pid>_results.json`` it writes) into :mod:`.capture` records.

The file is one JSON object: ``{"rocprofiler-sdk-tool": [process, ...]}``,
a process being its ``metadata`` (pid, command, host), its ``agents``,
``strings`` (the names of record kinds and operations, and ROCTx messages),
``kernel_symbols`` and ``buffer_records`` (``kernel_dispatch``,
``memory_copy``, ``hip_api``, ``hsa_api``, ``marker_api``, ``rccl_api``,
``memory_allocation``, ...). A record names its kind and operation by
number; the numbers change between ROCm releases, so they are looked up in
the file's own ``strings.buffer_records`` (index = kind), never in a table
of ours.

Decoded in C by msgspec into typed records (unknown keys skipped), so a
field of the wrong type is refused naming its path in the document.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from tracegraph.errors import InputError
from tracegraph.ingest import json_nesting, source
from tracegraph.ingest.formats.rocprof.capture import Agent, Call, Memory, Process, Work, copy_direction

FORMAT_NAME = "rocprofv3-json"
TOP_KEY = "rocprofiler-sdk-tool"

# Marker operations that end a range another record already spans, or name things.
_MARKER_NOT_RANGES = frozenset(
    {"roctxRangePop", "roctxRangeStop", "roctxGetThreadId", "roctxNameOsThread", "roctxNameHsaAgent"}
    | {"roctxNameHipDevice", "roctxNameHipStream"}
)


class _Handle(msgspec.Struct):
    handle: int = 0


class _Correlation(msgspec.Struct):
    internal: int = 0
    external: Any = 0


class _Dim(msgspec.Struct):
    x: int = 0
    y: int = 0
    z: int = 0


class _Record(msgspec.Struct, kw_only=True):
    kind: int
    operation: int = 0
    thread_id: int = 0
    correlation_id: _Correlation = msgspec.field(default_factory=_Correlation)
    start_timestamp: int
    end_timestamp: int


class _DispatchInfo(msgspec.Struct, kw_only=True):
    agent_id: _Handle
    queue_id: _Handle = msgspec.field(default_factory=_Handle)
    kernel_id: int
    workgroup_size: _Dim | None = None
    grid_size: _Dim | None = None


class _Dispatch(_Record, kw_only=True):
    dispatch_info: _DispatchInfo
    stream_id: _Handle | None = None


class _Copy(_Record, kw_only=True):
    dst_agent_id: _Handle = msgspec.field(default_factory=_Handle)
    src_agent_id: _Handle = msgspec.field(default_factory=_Handle)
    bytes: int = 0
    stream_id: _Handle | None = None


class _Allocation(_Record, kw_only=True):
    agent_id: _Handle | None = None
    address: Any = 0
    allocation_size: int = 0


class _Unread(msgspec.Struct):
    """A record of a kind not read: only counted (its keys skipped)."""


class _Buffers(msgspec.Struct):
    kernel_dispatch: list[_Dispatch] = []
    memory_copy: list[_Copy] = []
    memory_allocation: list[_Allocation] = []
    hip_api: list[_Record] = []
    hsa_api: list[_Record] = []
    marker_api: list[_Record] = []
    rccl_api: list[_Record] = []
    scratch_memory: list[_Unread] = []
    pc_sample_host_trap: list[_Unread] = []
    pc_sample_stochastic: list[_Unread] = []
    rocdecode_api: list[_Unread] = []
    rocjpeg_api: list[_Unread] = []


_UNREAD = ("scratch_memory", "pc_sample_host_trap", "pc_sample_stochastic", "rocdecode_api", "rocjpeg_api")


class _KindNames(msgspec.Struct):
    kind: str = ""
    operations: list[str] = []


class _Message(msgspec.Struct):
    key: int = 0
    value: str = ""


class _Strings(msgspec.Struct):
    buffer_records: list[_KindNames] = []
    marker_api: list[_Message] = []


class _AgentDoc(msgspec.Struct):
    id: _Handle = msgspec.field(default_factory=_Handle)
    type: int = 0
    logical_node_type_id: int = -1
    node_id: int = -1
    name: str = ""
    product_name: str = ""


class _Symbol(msgspec.Struct):
    kernel_id: int = 0
    kernel_name: str = ""
    formatted_kernel_name: str = ""
    demangled_kernel_name: str = ""


class _ProcessDoc(msgspec.Struct):
    metadata: dict[str, Any] = {}
    agents: list[_AgentDoc] = []
    strings: _Strings = msgspec.field(default_factory=_Strings)
    kernel_symbols: list[_Symbol] = []
    buffer_records: _Buffers = msgspec.field(default_factory=_Buffers)


class _File(msgspec.Struct):
    processes: list[_ProcessDoc] = msgspec.field(name=TOP_KEY)


_DECODER = msgspec.json.Decoder(_File)
_RAW_BUFFERS = msgspec.json.Decoder(dict[str, dict[str, msgspec.Raw]])


def sniff(head: bytes) -> bool:
    """A JSON object whose first key is rocprofiler-sdk-tool."""
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    return text.startswith(b"{") and text[1:].lstrip().startswith(b'"' + TOP_KEY.encode() + b'"')


def read(path: Path) -> list[Process]:
    """The file's processes (one-line InputError for what is not one)."""
    data = source.read_content(path, FORMAT_NAME)
    if not sniff(data[:4096]):
        raise InputError(path, f'not a rocprofv3 JSON file: no "{TOP_KEY}" object')
    if json_nesting.stack_unguarded():
        json_nesting.check(path, data)
    try:
        doc = _DECODER.decode(data)
    except msgspec.ValidationError as e:
        raise InputError(path, f"not a rocprofv3 JSON file: {e}") from None
    except msgspec.DecodeError as e:
        what = "truncated JSON" if "truncated" in str(e) else f"not JSON: {e}"
        raise InputError(path, what) from None
    except RecursionError:
        raise InputError(path, "JSON nested too deeply") from None
    if not doc.processes:
        raise InputError(path, f'a rocprofv3 JSON file whose "{TOP_KEY}" list is empty')
    return [_process(path, i, p) for i, p in enumerate(doc.processes)]


def _process(path: Path, index: int, doc: _ProcessDoc) -> Process:
    meta = doc.metadata
    pid = meta.get("pid")
    out = Process(pid if isinstance(pid, int) else index)
    out.meta = _meta(meta)
    unread = {t: n for t in _UNREAD if (n := len(getattr(doc.buffer_records, t)))}
    if unread:
        out.meta["not_read"] = unread
    gpus = cpus = 0
    for a in doc.agents:
        kind = "GPU" if a.type == 2 else "CPU" if a.type == 1 else "other"
        if a.logical_node_type_id >= 0:
            position = a.logical_node_type_id
        else:
            position = gpus if kind == "GPU" else cpus
        gpus += kind == "GPU"
        cpus += kind == "CPU"
        out.agents[a.id.handle] = Agent(a.id.handle, kind, position, a.name, a.product_name)
    kinds = [k.kind for k in doc.strings.buffer_records]
    operations = [k.operations for k in doc.strings.buffer_records]
    messages = {m.key: m.value for m in doc.strings.marker_api}
    symbols = {s.kernel_id: s for s in doc.kernel_symbols}
    where = f"{TOP_KEY}[{index}].buffer_records"

    def times(r: _Record, table: str, i: int) -> tuple[int, int]:
        if r.start_timestamp < 0 or r.end_timestamp < r.start_timestamp:
            raise InputError(
                path, f"{where}.{table}[{i}]: ends ({r.end_timestamp}) before it starts ({r.start_timestamp})"
            )
        return r.start_timestamp, r.end_timestamp

    def kind_of(r: _Record) -> str:
        return kinds[r.kind] if 0 <= r.kind < len(kinds) else f"KIND_{r.kind}"

    def operation_of(r: _Record) -> str:
        names = operations[r.kind] if 0 <= r.kind < len(operations) else []
        return names[r.operation] if 0 <= r.operation < len(names) else f"operation {r.operation}"

    buffers = doc.buffer_records
    for table in ("hip_api", "hsa_api", "rccl_api", "marker_api"):
        for i, r in enumerate(getattr(buffers, table)):
            start, end = times(r, table, i)
            domain = kind_of(r)
            name = operation_of(r)
            if table == "marker_api":
                if name in _MARKER_NOT_RANGES and r.correlation_id.internal not in messages:
                    continue
                name = messages.get(r.correlation_id.internal) or name
            external = _int(r.correlation_id.external)
            out.calls.append(Call(domain, name, r.thread_id, r.correlation_id.internal, external, start, end))
    for i, d in enumerate(buffers.kernel_dispatch):
        start, end = times(d, "kernel_dispatch", i)
        info = d.dispatch_info
        out.work.append(
            Work(
                "kernel",
                _kernel_name(symbols.get(info.kernel_id), info.kernel_id),
                info.agent_id.handle,
                _lane(d.stream_id, info.queue_id),
                d.thread_id,
                d.correlation_id.internal,
                start,
                end,
                grid=_dim(info.grid_size),
                workgroup=_dim(info.workgroup_size),
            )
        )
    for i, c in enumerate(buffers.memory_copy):
        start, end = times(c, "memory_copy", i)
        direction = copy_direction(operation_of(c))
        gpu_end = c.dst_agent_id.handle
        if out.agents.get(gpu_end, None) is None or out.agents[gpu_end].kind != "GPU":
            gpu_end = c.src_agent_id.handle
        out.work.append(
            Work(
                "memcpy",
                f"Memcpy {direction or 'Unknown'}",
                gpu_end,
                _lane(c.stream_id, None),
                c.thread_id,
                c.correlation_id.internal,
                start,
                end,
                bytes=c.bytes,
                direction=direction,
            )
        )
    for i, m in enumerate(buffers.memory_allocation):
        _, end = times(m, "memory_allocation", i)
        op = operation_of(m)
        if "ALLOCATE" not in op and "FREE" not in op:
            continue
        out.memory.append(
            Memory(
                "ALLOCATE" in op,
                m.agent_id.handle if m.agent_id is not None else None,
                _address(m.address),
                m.allocation_size,
                m.thread_id,
                m.correlation_id.internal,
                end,
            )
        )
    return out


def _meta(meta: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    node = meta.get("node")
    if isinstance(node, dict) and isinstance(node.get("hostname"), str):
        out["hostname"] = node["hostname"]
    command = meta.get("command")
    if isinstance(command, list) and all(isinstance(c, str) for c in command):
        out["command"] = " ".join(command)
    return out


def _kernel_name(symbol: _Symbol | None, kernel_id: int) -> str:
    if symbol is None:
        return f"[kernel {kernel_id}]"
    for name in (symbol.formatted_kernel_name, symbol.demangled_kernel_name, symbol.kernel_name):
        if name and name != "0":
            return name.removesuffix(".kd")
    return f"[kernel {kernel_id}]"


def _lane(stream: _Handle | None, queue: _Handle | None) -> str:
    if stream is not None:
        return f"stream:{stream.handle}"
    return f"queue:{queue.handle}" if queue is not None else "copies"


def _dim(d: _Dim | None) -> tuple[int, int, int] | None:
    return (d.x, d.y, d.z) if d is not None else None


def _address(value: Any) -> int:
    """An allocation's address: rocprofv3 writes it as a hex string
    (``"0x00007f3a2c000000"``); a number or ``{"handle": n}`` is read too."""
    if isinstance(value, dict):
        value = value.get("handle", value.get("value", 0))
    if isinstance(value, str):
        try:
            return int(value, 16)
        except ValueError:
            return 0
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _int(value: Any) -> int:
    if isinstance(value, dict):
        value = value.get("value", 0)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
