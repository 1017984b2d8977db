// @name longest-chain
// @summary The dependency chain with the most ops, one row per op in execution order.
// @requires deps
// @param trace TRACE: the trace
// @column step: 0-based position on the chain
// @column op: op name
// @column type: op type
// @column dur_us: the op's path weight (us; steps for traces timed in steps; see critical-path)
// @column start_us: when the op started in the trace (us since the trace's first event)
// @empty the dependency DAG has no executed op
//
// Definition. Over the same dependency DAG as critical-path (data and
// control inputs), the chain of executed ops with the largest number of
// ops, regardless of their durations. Computed at ingest by a forward pass
// with weight 1 per op; ties go to the predecessor with the lower execution
// sequence number, then the lower uid, and among equally long chains to
// the one ending at the op executed first. Its op count is stored on the
// Trace node as `longest_chain_ops`; each op links to its predecessor on
// its longest chain by `CHAIN_PRED`.
// A node that ran several times (a loop body) is one op per run: rows
// may share a name (the Op's `run` and `iteration` tell them apart).
//
// Neo4j Browser:
//   :param trace => 'alexnet'
MATCH (o:Op {trace: $trace})
WHERE o.lc_step IS NOT NULL
RETURN o.lc_step AS step, o.name AS op, o.type AS type, o.path_weight_us AS dur_us, o.start_us AS start_us
ORDER BY step
