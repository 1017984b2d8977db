// @name tensor-lifetimes
// @summary The largest or longest-held allocations: when each was allocated and freed, for how long, and how long it sat unused.
// @requires memory
// @param trace TRACE: the trace
// @param order ENUM(bytes,byte_us,idle_us) = bytes: sort key, largest first
// @param n INTEGER[0..] = 20: how many allocations to return
// @column op: op that made the allocation
// @column tensor: tensor it backs (null: a temporary buffer)
// @column bytes: allocated bytes
// @column alloc_us: when it was allocated (us since the trace's first event; steps for Chainer)
// @column free_us: when it was freed (null: not freed within the trace)
// @column held_us: how long it was held: free_us - alloc_us, up to the trace's end (span_us) when not freed
// @column byte_us: bytes x held_us (byte-microseconds: its share of the memory-time area)
// @column idle_us: how long it stayed allocated after its last use, never negative (null: unknown)
// @empty the trace has no allocations (or n is {n})
//
// Definition. Every allocation with an allocation time (persistent memory
// has none and is left out). Its release is free_us, or the end of the
// trace (span_us) when it is not freed within it. Its last use is the
// latest end_us of the ops that read the tensor it backs (`CONSUMES`);
// when no op reads it (temporary buffers, unread outputs), the end_us of
// the op that allocated it. idle_us = release - last use, or 0 when the
// release comes first (a buffer freed while its last reader was still
// running, as recorded on the host); null when the op has no end time.
// Order: by `order` (bytes, byte_us or idle_us) largest first, then larger
// bytes, earlier alloc_us, op name, the allocation's uid.
//
// Neo4j Browser:
//   :param trace => 'alexnet'
//   :param order => 'bytes'
//   :param n => 20
MATCH (tr:Trace {trace: $trace, uid: 'trace'})
MATCH (a:Allocation {trace: $trace})
WHERE a.alloc_us IS NOT NULL
OPTIONAL MATCH (maker:Op)-[:ALLOCATED]->(a)
OPTIONAL MATCH (a)<-[:BACKED_BY]-(:Tensor)<-[:CONSUMES]-(reader:Op)
WITH tr, a, maker, max(reader.end_us) AS last_read
WITH a, coalesce(a.free_us, tr.span_us) AS released, coalesce(last_read, maker.end_us) AS last_use
WITH a, released - a.alloc_us AS held_us,
     CASE WHEN last_use IS NULL OR released IS NULL THEN null
          WHEN released > last_use THEN released - last_use ELSE 0.0 END AS idle_us
WITH a, held_us, a.bytes * held_us AS byte_us, idle_us
RETURN a.op_name AS op, a.tensor_name AS tensor, a.bytes AS bytes, a.alloc_us AS alloc_us, a.free_us AS free_us,
       held_us, byte_us, idle_us
ORDER BY CASE $order WHEN 'byte_us' THEN coalesce(byte_us, -1.0) WHEN 'idle_us' THEN coalesce(idle_us, -1.0)
         ELSE bytes END DESC, bytes DESC, alloc_us, op, a.uid
LIMIT $n
