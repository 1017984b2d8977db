// @name top-ops
// @summary The n heaviest ops by weight.
// @requires times
// @param trace TRACE: the trace
// @param n INTEGER[0..] = 10: how many ops to return
// @param step INTEGER = null: only the ops of this step (its number, as step-breakdown lists it; null: every op)
// @column op: op name
// @column type: op type
// @column device: device the op ran on
// @column dur_us: the op's weight (us; steps for traces timed in steps)
// @column kernels_us: summed duration of its kernels on device streams (null: no kernels)
// @column share: dur_us as a fraction of all ops' summed weight (of the step's ops, given a step)
// @empty the trace has no executed op (in step {step}, when given; or n is {n})
//
// Definition. An op's weight is the sum of its kernel durations on device
// streams when it launched any, else its self time: its own record's
// duration minus those of the ops nested directly in it (only PyTorch
// traces nest ops; elsewhere the op's duration). Ops not
// executed in the trace are left out. Given a step, only the ops that
// belong to it (`step-breakdown`: the op's start lies in the step's host
// range), and the share is of their summed weight. Ties: lower execution
// sequence number first, then uid.
//
// Neo4j Browser:
//   :param trace => 'alexnet'
//   :param n => 10
//   :param step => null
MATCH (all:Op {trace: $trace})
WHERE $step IS NULL OR all.step = $step
WITH sum(all.weight_us) AS total
MATCH (o:Op {trace: $trace})
WHERE o.executed AND ($step IS NULL OR o.step = $step)
OPTIONAL MATCH (o)-[:LAUNCHED]->(k:Kernel)
WITH o, total, sum(k.dur_us) AS kernel_sum, count(k) AS kernels
WITH o, total, CASE WHEN kernels > 0 THEN kernel_sum ELSE null END AS kernels_us
ORDER BY o.weight_us DESC, o.seq, o.uid
LIMIT $n
RETURN o.name AS op, o.type AS type, o.device_name AS device, o.weight_us AS dur_us, kernels_us,
       CASE WHEN total > 0 THEN o.weight_us / total ELSE null END AS share
