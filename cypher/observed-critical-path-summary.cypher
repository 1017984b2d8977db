// @name observed-critical-path-summary
// @summary Where the observed critical path's time went: GPU compute, copies, communication, CPU, launch overhead, sync wait, idle.
// @requires times
// @param trace TRACE: the trace
// @column category: gpu_compute / gpu_memory / communication / cpu / launch / sync_wait / idle
// @column segments: path segments of the category
// @column total_us: their summed length (us; steps for traces timed in steps)
// @column counted_us: the part that counts towards the path's length (us)
// @column share: total_us / the path's span (the sum over all segments; null when the trace has no path)
//
// Definition. The segments of observed-critical-path (see its header for
// the path and its segments), grouped by kind: gpu_compute = kernel,
// gpu_memory = memcpy (copies and memsets), communication = communication kernels,
// cpu = cpu_op, launch = runtime (runtime calls and counted launch
// delays), sync_wait = sync (blocking calls waiting and sync edges), idle =
// idle (thread idle between top-level ops, kernels queued, stream gaps).
// The shares sum to 1; the counted_us sum to `observed_path_us` and the
// total_us to `observed_path_span_us` on the Trace node. Always seven rows,
// in the order above (0 segments where a category has none).
//
// Neo4j Browser:
//   :param trace => 'cnn'
CALL {
  MATCH (n:Op {trace: $trace})
  WHERE n.ocp_steps IS NOT NULL
  RETURN n
  UNION ALL
  MATCH (n:Kernel {trace: $trace})
  WHERE n.ocp_steps IS NOT NULL
  RETURN n
}
WITH collect(n) AS elements
MATCH (tr:Trace {trace: $trace, uid: 'trace'})
UNWIND CASE WHEN size(elements) = 0 THEN [null] ELSE elements END AS n
UNWIND range(0, coalesce(size(n.ocp_steps), 1) - 1) AS i
WITH tr, CASE WHEN n IS NULL THEN null ELSE n.ocp_kinds[i] END AS kind,
     CASE WHEN n IS NULL THEN 0.0 ELSE n.ocp_durs_us[i] END AS dur,
     CASE WHEN n IS NULL THEN false ELSE n.ocp_counted[i] END AS counted
WITH tr, kind, count(kind) AS segments, sum(dur) AS total_us,
     sum(CASE WHEN counted THEN dur ELSE 0.0 END) AS counted_us
WITH tr, collect({kind: kind, segments: segments, total_us: total_us, counted_us: counted_us}) AS found
UNWIND range(0, 6) AS j
WITH tr, j, found, ['gpu_compute', 'gpu_memory', 'communication', 'cpu', 'launch', 'sync_wait', 'idle'][j] AS category,
     ['kernel', 'memcpy', 'communication', 'cpu_op', 'runtime', 'sync', 'idle'][j] AS kind
WITH tr, j, category, [f IN found WHERE f.kind = kind] AS hit
RETURN category,
       CASE WHEN size(hit) = 0 THEN 0 ELSE hit[0].segments END AS segments,
       CASE WHEN size(hit) = 0 THEN 0.0 ELSE hit[0].total_us END AS total_us,
       CASE WHEN size(hit) = 0 THEN 0.0 ELSE hit[0].counted_us END AS counted_us,
       CASE WHEN size(hit) = 0 OR tr.observed_path_span_us IS NULL OR tr.observed_path_span_us = 0 THEN
            CASE WHEN tr.observed_path_span_us > 0 THEN 0.0 ELSE null END
            ELSE hit[0].total_us / tr.observed_path_span_us END AS share
ORDER BY j
