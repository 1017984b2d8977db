"""One op's details, as the timeline's card shows them: type, times,
device, the shapes it reads and writes, the kernels it launched."""

from __future__ import annotations

from typing import Any

from tracegraph.db.base import Graph
from tracegraph.errors import NotFound
from tracegraph.queries.run import trace_facts
from tracegraph.queries.types import KernelInfo, OpDetail, TensorInfo

# The op of that name with the lowest uid (PyTorch's names repeat); its
# outputs by slot, its inputs by slot, and its first 20 kernels by start.
OP_QUERY = """
MATCH (o:Op {trace: $trace, name: $name})
WITH o ORDER BY o.uid LIMIT 1
OPTIONAL MATCH (o)-[p:PRODUCES]->(t:Tensor)
WITH o, t ORDER BY p.output_index, t.uid
WITH o, collect(CASE WHEN t IS NULL THEN NULL
                     ELSE {name: t.name, shape: t.shape, dtype: t.dtype, bytes: t.bytes} END) AS outputs
OPTIONAL MATCH (o)-[c:CONSUMES]->(i:Tensor)
WITH o, outputs, c, i ORDER BY c.input_index, i.uid
WITH o, outputs, collect(CASE WHEN i IS NULL THEN NULL
                              ELSE {name: i.name, shape: i.shape, dtype: i.dtype} END) AS inputs
OPTIONAL MATCH (o)-[:LAUNCHED]->(k:Kernel)
WITH o, outputs, inputs, k ORDER BY k.start_us, k.uid
RETURN o.name AS name, o.type AS type, o.device_name AS device, o.start_us AS start_us, o.end_us AS end_us,
       o.weight_us AS weight_us, o.cp_step AS cp_step, o.phase AS phase, inputs, outputs,
       collect(CASE WHEN k IS NULL THEN NULL
                    ELSE {name: k.name, stream: k.stream_name, start_us: k.start_us, end_us: k.end_us} END)[0..20]
         AS kernels
"""


def op_detail(graph: Graph, trace: str, name: str, *, timeout_ms: int | None = None) -> OpDetail:
    """The op named ``name`` (the first by uid when the name repeats);
    NotFound for no such trace or op."""
    trace_facts(graph, trace)  # NotFound for no such trace
    res = graph.run(OP_QUERY, {"name": name}, trace=trace, timeout_ms=timeout_ms)
    if not res.rows:
        raise NotFound(f"trace {trace!r} has no op named {name!r}")
    row: dict[str, Any] = dict(zip(res.columns, res.rows[0]))

    def some(key: str) -> list[dict[str, Any]]:
        return [x for x in (row.get(key) or []) if x is not None]

    return OpDetail(
        name=row["name"],
        type=row["type"],
        device=row["device"],
        start_us=row["start_us"],
        end_us=row["end_us"],
        weight_us=row["weight_us"],
        cp_step=row["cp_step"],
        phase=row["phase"],
        inputs=[TensorInfo(t.get("name"), t.get("shape"), t.get("dtype")) for t in some("inputs")],
        outputs=[TensorInfo(t.get("name"), t.get("shape"), t.get("dtype"), t.get("bytes")) for t in some("outputs")],
        kernels=[
            KernelInfo(k.get("name"), k.get("stream"), k.get("start_us"), k.get("end_us")) for k in some("kernels")
        ],
    )
