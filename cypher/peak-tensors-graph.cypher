// @name peak-tensors-graph
// @summary Per allocator, the tensors live at its memory peak with the ops that produced them, as graph paths.
// @graph
// @requires memory
// @param trace TRACE: the trace
// @param n INTEGER[0..] = 5: at most this many tensors per allocator, the largest (widen it to see more; null, possible in Neo4j Browser, keeps all)
// @column allocator: allocator name
// @column bytes: bytes of the live allocation
// @column path: (op)-[:PRODUCES]->(tensor)-[:BACKED_BY]->(allocation)-[:IN_ALLOCATOR]->(allocator)
//
// Definition. The allocations live at an allocator's peak are those of
// peak-memory (alloc_us <= peak_us < free_us, never freed counts as
// live); this analysis keeps the ones that back a tensor and returns, for
// each, the path from the producing op through the tensor and the
// allocation to the allocator. Allocations that back no tensor (temp
// memory) are left out, so the bytes of an allocator's rows can sum to
// less than its peak. Per allocator the n largest are kept (the table form
// of them all is peak-memory). Order and ties: allocator name, then larger
// bytes first, then the tensor's name, then the allocation's uid.
//
// Drawn. Every path ends at its allocator, so Neo4j Browser draws each
// allocator's peak as one star of op -> tensor -> allocation arms; the
// default, 5 per allocator, is what it draws with every caption readable
// in its frame (cypher/tracegraph.grass: op names, tensor shapes,
// allocation bytes); widen it with n. The result is the paths only: with
// the Browser's "Connect result nodes" on (its default; `:config
// autoComplete: false` turns it off) it would also draw which op
// allocated each allocation and read each tensor.
//
// Neo4j Browser:
//   :param trace => 'alexnet'
//   :param n => 5
MATCH (m:Allocator {trace: $trace})
WHERE m.peak_bytes IS NOT NULL
MATCH p = (op:Op)-[:PRODUCES]->(t:Tensor)-[:BACKED_BY]->(a:Allocation)-[:IN_ALLOCATOR]->(m)
WHERE a.alloc_us <= m.peak_us AND (a.free_us IS NULL OR a.free_us > m.peak_us)
WITH m, a, t, p
ORDER BY m.name, a.bytes DESC, t.name, a.uid
WITH m, collect(p) AS paths, collect(a.bytes) AS sizes
WITH m, CASE WHEN $n IS NULL OR $n > size(paths) THEN size(paths) ELSE $n END AS keep, paths, sizes
WITH m, [i IN range(0, keep - 1) | [i, sizes[i], paths[i]]] AS kept
UNWIND kept AS k
WITH m, k[0] AS i, k[1] AS bytes, k[2] AS path
RETURN m.name AS allocator, bytes, path
ORDER BY allocator, i
