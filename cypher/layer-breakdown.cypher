// @name layer-breakdown
// @summary Per name scope (layer) at a given depth: ops, summed weight and bytes live at the memory peak.
// @requires times
// @param trace TRACE: the trace
// @param depth INTEGER[1..] = 1: how many leading name-scope components make a layer
// @column scope: the first `depth` components of the op's name scope (`conv1`, `gradients/conv1` at depth 2); `(root)` for ops outside any scope
// @column ops: executed ops in the scope
// @column total_us: their summed weight (us; steps for traces timed in steps)
// @column peak_live_bytes: bytes of the allocations made by the scope's ops that are live at the trace's memory peak (null: the trace has no memory timeline)
// @empty the trace has no executed op
//
// Definition. An op's name scope is its name without the last `/`
// component (`conv1/Conv2D` -> `conv1`); the layer is its first `depth`
// components, all of them when it has fewer. Weight as in top-ops; ops
// that did not execute are left out. The trace's memory peak is the peak of
// the allocator with the largest peak (the Trace's `memory_peak_bytes`;
// ties: allocator name, then uid), reached first at its `peak_us`; an allocation of
// that allocator is live there when alloc_us <= peak_us < free_us (never
// freed counts as live), as in peak-memory. The peak_live_bytes of all
// rows sum to the trace's memory peak (allocations without an op are in
// no row). Each op's share is computed at ingest (`Op.peak_live_bytes`),
// so this is one pass over the ops. Order: largest total_us first, then
// scope (one row per scope).
//
// Neo4j Browser:
//   :param trace => 'alexnet'
//   :param depth => 1
MATCH (tr:Trace {trace: $trace, uid: 'trace'})
MATCH (o:Op {trace: $trace})
WHERE o.executed
WITH tr, o, split(o.scope, '/') AS parts
WITH tr, o,
     CASE WHEN coalesce(o.scope, '') = '' THEN '(root)'
          ELSE reduce(s = parts[0], x IN parts[1..CASE WHEN $depth > 1 THEN $depth ELSE 1 END] | s + '/' + x)
     END AS scope
WITH tr, scope, count(o) AS ops, sum(o.weight_us) AS total_us, sum(o.peak_live_bytes) AS live
RETURN scope, ops, total_us, CASE WHEN tr.memory_peak_bytes IS NULL THEN null ELSE toInteger(live) END AS peak_live_bytes
ORDER BY total_us DESC, scope
