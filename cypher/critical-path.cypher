// @name critical-path
// @summary The weight-heaviest dependency chain, one row per op in execution order.
// @requires deps
// @param trace TRACE: the trace
// @column step: 0-based position on the path
// @column op: op name
// @column type: op type
// @column dur_us: the op's weight (us; steps for traces timed in steps)
// @column start_us: when the op started in the trace (us since the trace's first event)
// @column earliest_start_us: when it could start at the earliest, every predecessor's weight summed along the path (us)
// @column cum_us: weight of the path up to and including this op (us)
//
// Definition. The dependency DAG has an edge for every data input and every
// control input (`DATA` and `CONTROL` relationships). An op's weight is the
// sum of its kernel durations on device streams when it launched any, else
// its own record's duration; ops of traces without clock times weigh 1
// (the path is then the longest chain by op count). The critical path is
// the chain whose summed weight is largest; its length is stored on the
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
RETURN o.cp_step AS step, o.name AS op, o.type AS type, o.weight_us AS dur_us,
       o.start_us AS start_us, o.es_us AS earliest_start_us, o.ef_us AS cum_us
ORDER BY step
