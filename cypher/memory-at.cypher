// @name memory-at
// @summary Per allocator, the allocations live at a given time, largest first (peak-memory for any moment).
// @requires memory
// @param trace TRACE: the trace
// @param at_us FLOAT: the moment to look at (us since the trace's first event; steps for Chainer)
// @param allocator STRING = null: only this allocator (null: every allocator)
// @column allocator: allocator name (TF: GPU_0_bfc; MegEngine: comp node; Chainer: one pool)
// @column live_bytes: the allocator's live bytes at at_us: the sum of `bytes` over its rows
// @column bytes: bytes of this live allocation
// @column kind: output / temp / persistent / param / input / gradient
// @column op: op that made the allocation
// @column tensor: tensor it backs, when it backs one
// @column shape: that tensor's shape
// @column alloc_us: when it was allocated
// @column free_us: when it was freed (null: not within the trace)
// @column allocation: the allocation's uid (unique within the trace)
// @empty no allocation is live at {at_us} (allocator {allocator}; null: any)
//
// Definition. An allocation is live at time t when alloc_us <= t < free_us
// (never freed counts as live to the end): the liveness rule of
// peak-memory, at any t instead of the peak. So live_bytes equals the
// memory-timeline value in force at t (the live bytes after every
// allocation and free at or before t; frees at exactly t are no longer
// live, allocations at exactly t are), and at t = an allocator's
// peak_at_us the rows are peak-memory's rows with live_bytes = peak_bytes.
// Persistent memory (no alloc time) is outside the timeline and never
// listed. Allocators with nothing live at t have no rows. Order:
// allocator, then larger bytes first, then earlier alloc_us, then op name,
// then the allocation's uid. The allocations are matched twice (once for
// the sum, once for the rows) rather than collected and unwound: a row
// that carries the collected list makes a sort hold it once per row.
//
// Neo4j Browser:
//   :param trace => 'alexnet'
//   :param at_us => 1000.0
//   :param allocator => null
MATCH (m:Allocator {trace: $trace})
WHERE $allocator IS NULL OR m.name = $allocator
MATCH (a:Allocation)-[:IN_ALLOCATOR]->(m)
WHERE a.alloc_us <= $at_us AND (a.free_us IS NULL OR a.free_us > $at_us)
WITH m, toInteger(sum(a.bytes)) AS live_bytes
MATCH (a:Allocation)-[:IN_ALLOCATOR]->(m)
WHERE a.alloc_us <= $at_us AND (a.free_us IS NULL OR a.free_us > $at_us)
OPTIONAL MATCH (t:Tensor)-[:BACKED_BY]->(a)
RETURN m.name AS allocator, live_bytes, a.bytes AS bytes, a.kind AS kind, a.op_name AS op,
       t.name AS tensor, t.shape AS shape, a.alloc_us AS alloc_us, a.free_us AS free_us, a.uid AS allocation
ORDER BY allocator, bytes DESC, alloc_us, op, allocation
