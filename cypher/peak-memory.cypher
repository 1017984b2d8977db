// @name peak-memory
// @summary Per allocator, the allocations live at its memory peak, largest first.
// @requires memory
// @param trace TRACE: the trace
// @column allocator: allocator name (TF: GPU_0_bfc; MegEngine: comp node; Chainer: one pool)
// @column peak_bytes: the allocator's peak live bytes
// @column peak_at_us: when the peak is first reached (us since the trace's first event; steps for Chainer)
// @column bytes: bytes of this live allocation
// @column kind: output / temp / persistent / param / input / gradient
// @column op: op that made the allocation
// @column tensor: tensor it backs, when it backs one
// @column shape: that tensor's shape
// @column alloc_us: when it was allocated
// @column free_us: when it was freed (null: not within the trace)
//
// Definition. An allocator's memory timeline is the running sum of its
// allocations (+bytes at alloc time) and frees (-bytes at free time); at
// equal times frees count first. The peak is the timeline's maximum and
// peak_at_us the first time it is reached, both computed at ingest and
// stored on the Allocator. An allocation is live at the peak when
// alloc_us <= peak_at_us < free_us (never freed counts as live). The
// `bytes` of an allocator's rows sum to its peak_bytes; its first row is
// the largest live allocation. Persistent memory (no alloc/free time in
// the trace) is outside the timeline. Order: allocator name, then (ties)
// larger bytes first, then earlier alloc_us, then op name, then the
// allocation's uid.
//
// Neo4j Browser:
//   :param trace => 'alexnet'
MATCH (m:Allocator {trace: $trace})
WHERE m.peak_bytes IS NOT NULL
MATCH (a:Allocation)-[:IN_ALLOCATOR]->(m)
WHERE a.alloc_us <= m.peak_us AND (a.free_us IS NULL OR a.free_us > m.peak_us)
OPTIONAL MATCH (t:Tensor)-[:BACKED_BY]->(a)
RETURN m.name AS allocator, m.peak_bytes AS peak_bytes, m.peak_us AS peak_at_us, a.bytes AS bytes,
       a.kind AS kind, a.op_name AS op, t.name AS tensor, t.shape AS shape,
       a.alloc_us AS alloc_us, a.free_us AS free_us
ORDER BY allocator, bytes DESC, alloc_us, op, a.uid
