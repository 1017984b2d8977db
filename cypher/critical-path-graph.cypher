// @name critical-path-graph
// @summary The critical path (or a window of it) as one graph path, from its last op back to its first.
// @graph
// @requires deps
// @param trace TRACE: the trace
// @param first_step INTEGER[0..] = 0: the window's first op, as its position on the critical path (0: the path's first op)
// @param max_ops INTEGER[1..] = 8: at most this many ops from first_step on (widen it to see more; null, possible in Neo4j Browser: to the end)
// @column ops: number of ops in the returned path
// @column window_us: the summed path weight of those ops (us; steps for traces timed in steps)
// @column critical_path_us: the whole critical path's summed weight (same unit)
// @column path: the path: Op nodes linked by CRITICAL_PRED, last op first
//
// Definition. The same path as critical-path, as a graph value for Neo4j
// Browser (or any client that draws paths). The path's ops carry cp_step
// 0 .. critical_path_ops - 1 (the Trace node's count); the window is the
// ops with first_step <= cp_step <= first_step + max_ops - 1, cut at the
// path's end (first_step below 0 counts as 0, max_ops below 1 as 1). The
// returned path starts at the window's last op and follows CRITICAL_PRED,
// each op's heaviest predecessor, back to its first. One row; no row when
// first_step is past the path's end. With first_step 0 and max_ops at
// least the path's length, `ops` equals critical_path_ops and window_us
// equals critical_path_us.
//
// Drawn. The default window, 8 ops, is what Neo4j Browser can draw with
// every op's name readable in its frame (cypher/tracegraph.grass: op names
// as captions, CRITICAL_PRED as thick red arrows captioned "waits for");
// page through the path with first_step, or widen the window with max_ops
// (1,000 ops still answer at once on paths of tens of thousands). The
// result is the path and nothing else: with the Browser's "Connect result
// nodes" on (its default; `:config autoComplete: false` turns it off), it
// would also draw every DATA, CONTROL and CHAIN_PRED between the path's
// ops, which run beside most of its links.
//
// Every op has at most one CRITICAL_PRED, so exactly one path joins the
// two ends; shortestPath finds it by a breadth-first walk, in time linear
// in its length (a plain variable-length MATCH would enumerate every
// prefix of the path first). A window of one op is the second branch of
// the UNION, a path of that one node: Neo4j refuses shortestPath between
// a node and itself.
//
// Neo4j Browser:
//   :param trace => 'alexnet'
//   :param first_step => 0
//   :param max_ops => 8
MATCH (tr:Trace {trace: $trace, uid: 'trace'})
WITH tr, CASE WHEN $first_step IS NULL OR $first_step < 0 THEN 0 ELSE $first_step END AS lo
WITH tr, lo, CASE WHEN $max_ops IS NULL OR lo + $max_ops > tr.critical_path_ops THEN tr.critical_path_ops - 1
                  WHEN $max_ops < 1 THEN lo ELSE lo + $max_ops - 1 END AS hi
WHERE hi > lo
MATCH (last:Op {trace: $trace})
WHERE last.cp_step = hi
MATCH (first:Op {trace: $trace})
WHERE first.cp_step = lo
WITH tr, shortestPath((last)-[:CRITICAL_PRED*1..]->(first)) AS p
RETURN length(p) + 1 AS ops, reduce(s = 0.0, n IN nodes(p) | s + n.path_weight_us) AS window_us,
       tr.critical_path_us AS critical_path_us, p AS path
UNION ALL
MATCH (tr:Trace {trace: $trace, uid: 'trace'})
WITH tr, CASE WHEN $first_step IS NULL OR $first_step < 0 THEN 0 ELSE $first_step END AS lo
WITH tr, lo, CASE WHEN $max_ops IS NULL OR lo + $max_ops > tr.critical_path_ops THEN tr.critical_path_ops - 1
                  WHEN $max_ops < 1 THEN lo ELSE lo + $max_ops - 1 END AS hi
WHERE hi = lo
MATCH p = (sole:Op {trace: $trace})
WHERE sole.cp_step = lo
RETURN 1 AS ops, sole.path_weight_us + 0.0 AS window_us, tr.critical_path_us AS critical_path_us, p AS path
