// @name op-type-breakdown
// @summary Per op type: how many ops, their summed, mean and 95th-percentile weight, and share of the total.
// @requires times
// @param trace TRACE: the trace
// @param step INTEGER = null: only the ops of this step (its number, as step-breakdown lists it; null: every op)
// @column type: op type
// @column count: executed ops of this type
// @column total_us: their summed weight (us; steps for traces timed in steps)
// @column mean_us: total_us / count
// @column p95_us: 95th percentile of their weights, nearest rank: the ceil(0.95 x count)-th smallest weight
// @column share: total_us as a fraction of the summed weight of all executed ops
// @empty the trace has no executed op (in step {step}, when given)
//
// Definition. An op's weight is the sum of its kernel durations on device
// streams when it launched any, else its self time (its own record's
// duration minus those of the ops nested directly in it; only PyTorch traces
// nest ops) and 1 per op in traces timed in steps; ops that did not execute are left out. The
// total_us of all rows sum to the summed weight of the trace's executed ops
// and their shares to 1. The percentile is percentileDisc (nearest rank, no
// interpolation: a value some op of the type really has). Given a step,
// only the ops that belong to it (`step-breakdown`), and the shares are of
// their summed weight. Order: largest total_us first, then type.
//
// Neo4j Browser:
//   :param trace => 'alexnet'
//   :param step => null
MATCH (x:Op {trace: $trace})
WHERE x.executed AND ($step IS NULL OR x.step = $step)
WITH sum(x.weight_us) AS grand
MATCH (o:Op {trace: $trace})
WHERE o.executed AND ($step IS NULL OR o.step = $step)
WITH grand, o.type AS type, count(o) AS n, sum(o.weight_us) AS total_us,
     percentileDisc(o.weight_us, 0.95) AS p95_us
RETURN type, n AS `count`, total_us, total_us / n AS mean_us, p95_us,
       CASE WHEN grand > 0 THEN total_us / grand ELSE null END AS share
ORDER BY total_us DESC, type
