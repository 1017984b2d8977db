// @name trace-diff-summary
// @summary Headline numbers of this trace against a base trace: step span, critical path, memory peak, op count.
// @param trace TRACE: the trace
// @param base TRACE: the baseline trace to compare against
// @column metric: `span_us` (step span), `critical_path_us` (critical path length), `memory_peak_bytes` (largest allocator peak), `ops` (executed ops)
// @column base: the value in the base trace (null: that trace does not have it)
// @column value: the value in this trace
// @column delta: value - base (null when either is null)
//
// Definition. The values are the ingest-time facts on the two Trace
// nodes: span_us (first event to the last end of any op or kernel, us;
// steps for traces timed in steps), critical_path_us (summed weight of the
// heaviest dependency chain, see critical-path), memory_peak_bytes (the
// largest allocator peak, see peak-memory) and executed_ops. Always four
// rows, in that order.
//
// Neo4j Browser:
//   :param trace => 'alexnet'
//   :param base => 'alexnet-before'
MATCH (b:Trace {trace: $base, uid: 'trace'})
MATCH (t:Trace {trace: $trace, uid: 'trace'})
WITH b, t, [['span_us', b.span_us, t.span_us], ['critical_path_us', b.critical_path_us, t.critical_path_us],
             ['memory_peak_bytes', b.memory_peak_bytes, t.memory_peak_bytes],
             ['ops', b.executed_ops, t.executed_ops]] AS metrics
UNWIND range(0, size(metrics) - 1) AS i
WITH i, metrics[i] AS m
RETURN m[0] AS metric, m[1] AS base, m[2] AS value, m[2] - m[1] AS delta
ORDER BY i
