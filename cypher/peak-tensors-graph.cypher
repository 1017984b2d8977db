// @name peak-tensors-graph
// @summary Per allocator, the tensors live at its memory peak with the ops that produced them, as graph paths.
// @graph
// @requires memory
// @param trace TRACE: the trace
// @param n INTEGER[0..] = 100: at most this many tensors per allocator, the largest (null, possible in Neo4j Browser, keeps all)
// @column allocator: allocator name
// @column bytes: bytes of the live allocation
// @column path: (op)-[:PRODUCES]->(tensor)-[:BACKED_BY]->(allocation)
// @column allocator_node: the Allocator node (name, peak_bytes, peak_us)
//
// Definition. The allocations live at an allocator's peak are those of
// peak-memory (alloc_us <= peak_us < free_us, never freed counts as
// live); this analysis keeps the ones that back a tensor and returns, for
// each, the path from the producing op through the tensor to the
// allocation. Allocations that back no tensor (temp memory) are left out,
// so the bytes of an allocator's rows can sum to less than its peak. The
// Allocator node is returned too, so Neo4j Browser draws the IN_ALLOCATOR
// relationships and each allocator's peak becomes one cluster. Per
// allocator the n largest are kept (a drawing of thousands of paths
// helps nobody; the table form is peak-memory). Order and ties: allocator
// name, then larger bytes first, then the tensor's name, then the
// allocation's uid.
//
// Neo4j Browser:
//   :param trace => 'alexnet'
//   :param n => 100
MATCH (m:Allocator {trace: $trace})
WHERE m.peak_bytes IS NOT NULL
MATCH (a:Allocation)-[:IN_ALLOCATOR]->(m)
WHERE a.alloc_us <= m.peak_us AND (a.free_us IS NULL OR a.free_us > m.peak_us)
MATCH p = (op:Op)-[:PRODUCES]->(t:Tensor)-[:BACKED_BY]->(a)
WITH m, a, t, p
ORDER BY m.name, a.bytes DESC, t.name, a.uid
WITH m, collect(p) AS paths, collect(a.bytes) AS sizes
WITH m, CASE WHEN $n IS NULL OR $n > size(paths) THEN size(paths) ELSE $n END AS keep, paths, sizes
WITH m, [i IN range(0, keep - 1) | [i, sizes[i], paths[i]]] AS kept
UNWIND kept AS k
WITH m, k[0] AS i, k[1] AS bytes, k[2] AS path
RETURN m.name AS allocator, bytes, path, m AS allocator_node
ORDER BY allocator, i
