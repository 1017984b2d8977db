// @name critical-path
// @summary The weight-heaviest dependency chain, one row per op in execution order.
// @requires deps
// @param trace TRACE: the trace
// @column step: 0-based position on the path
// @column op: op name
// @column type: op type
// @column dur_us: the op's path weight (us; steps for traces timed in steps)
// @column start_us: when the op started in the trace (us since the trace's first event)
// @column earliest_start_us: when it could start at the earliest, every predecessor's weight summed along the path (us)
// @column cum_us: weight of the path up to and including this op (us)
// @empty the dependency DAG has no executed op
//
// Definition. The dependency DAG has an edge for every data input and every
// control input (`DATA` and `CONTROL` relationships). Its ops are the
// executed ops, except where the format marks the ops that carry the
// dependencies (`carries_deps`): in a PyTorch trace joined to its
// Execution Trace, the outermost ops that read or write tensors (the ops
// nested in them and annotations are left out); in a JAX capture, the HLO
// ops. An op's weight is the sum of its kernel durations on device
// streams when it launched any, else its self time (its record's duration
// minus those of the ops nested directly in it); its path weight
// (`path_weight_us`) adds the weights of every op nested in it, so a
// PyTorch op counts all it ran (its Kineto duration on the CPU), and
// without nesting equals its weight. A zero-duration op (a view, say)
// weighs 0 and may sit on the path without lengthening it. Ops of traces
// without clock times weigh 1 (the path is then the longest chain by op
// count). The critical path is
// the chain whose summed path weight is largest; its length is stored on the
// Trace node as `critical_path_us`, and the `dur_us` of the rows sum to it.
// Computed at ingest by a forward pass (earliest finish = weight + the
// latest earliest finish of the predecessors); ties go to the predecessor
// with the lower execution sequence number, then the lower uid.
// Every op on the path has slack 0. Each op links to its heaviest
// predecessor by `CRITICAL_PRED`: see critical-path-graph for the path
// itself.
// A node that ran several times (a loop body) is one op per run: rows
// may share a name (the Op's `run` and `iteration` tell them apart), and
// each run depends on the producer runs that fed it (cypher/SCHEMA.md,
// format notes).
//
// Neo4j Browser:
//   :param trace => 'alexnet'
MATCH (o:Op {trace: $trace})
WHERE o.cp_step IS NOT NULL
RETURN o.cp_step AS step, o.name AS op, o.type AS type, o.path_weight_us AS dur_us,
       o.start_us AS start_us, o.es_us AS earliest_start_us, o.ef_us AS cum_us
ORDER BY step
