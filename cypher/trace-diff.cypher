// @name trace-diff
// @summary Per op, how its weight changed from a base trace to this one; largest change first.
// @requires times
// @param trace TRACE: the trace
// @param base TRACE: the baseline trace to compare against
// @param min_delta_us FLOAT[0..] = 0: list a changed op only when its |delta_us| exceeds this (us); added and removed ops are always listed
// @column op: op name
// @column type: op type
// @column base_us: its weight in the base trace (null: not in it)
// @column dur_us: its weight in this trace (null: not in it)
// @column delta_us: dur_us - base_us, a missing side counting as 0 (us; positive: slower now)
// @column status: `changed`, `added` (only in this trace) or `removed` (only in the base)
// @empty no op's weight differs by more than {min_delta_us} us from trace {base}, and none was added or removed
//
// Definition. Ops that executed are matched across the two traces by name
// and type; the runs of one name and type within a trace (a node recorded
// twice, a loop body's iterations) are taken together, their weights
// summed. Weight as in top-ops: the sum of the op's kernel durations when
// it launched any, else its own record's duration. The per (name, type)
// sums are computed at ingest and stored on the trace's OpTotals node
// (parallel lists `ops`, `types`, `weights_us`, `runs`; `types` holds ''
// where the format gives no type, shown as null here), so that the diff
// reads two small nodes, never two traces' ops. An op whose weight is the
// same in both traces is not a row. Order: largest |delta_us| first, then
// op, then type ((op, type) is unique among the rows).
//
// Implementation: the OpTotals lists are bound once (WITH) before they
// are indexed: indexing the property itself, Neo4j reads the whole list
// again for every index (quadratic: minutes at 100k ops).
//
// Neo4j Browser:
//   :param trace => 'alexnet'
//   :param base => 'alexnet-before'
//   :param min_delta_us => 0.0
UNWIND [$base, $trace] AS side
MATCH (x:OpTotals {trace: side, uid: 'optotals'})
WITH side, x.ops AS ops, x.types AS types, x.weights_us AS ws
UNWIND range(0, size(ops) - 1) AS i
WITH side, ops[i] AS op, types[i] AS type, ws[i] AS w
WITH op, type,
     sum(CASE WHEN side = $base THEN 1 ELSE 0 END) AS in_base,
     sum(CASE WHEN side = $trace THEN 1 ELSE 0 END) AS in_trace,
     sum(CASE WHEN side = $base THEN w ELSE 0.0 END) AS base_w,
     sum(CASE WHEN side = $trace THEN w ELSE 0.0 END) AS trace_w
WITH op, type, CASE WHEN in_base > 0 THEN base_w ELSE null END AS base_us,
     CASE WHEN in_trace > 0 THEN trace_w ELSE null END AS dur_us
WITH op, type, base_us, dur_us, coalesce(dur_us, 0.0) - coalesce(base_us, 0.0) AS delta_us,
     CASE WHEN base_us IS NULL THEN 'added' WHEN dur_us IS NULL THEN 'removed' ELSE 'changed' END AS status
WHERE status <> 'changed' OR abs(delta_us) > $min_delta_us
RETURN op, CASE WHEN type = '' THEN null ELSE type END AS type, base_us, dur_us, delta_us, status
ORDER BY abs(delta_us) DESC, op, type
