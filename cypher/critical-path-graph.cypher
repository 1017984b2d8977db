// @name critical-path-graph
// @summary The critical path as one graph path, from its last op back to its first.
// @graph
// @requires deps
// @param trace STRING: trace id
// @column ops: number of ops on the path
// @column critical_path_us: the path's summed weight (us; steps for traces timed in steps)
// @column path: the path: Op nodes linked by CRITICAL_PRED, last op first
//
// Definition. The same path as critical-path, as a graph value for Neo4j
// Browser (or any client that draws paths): it starts at the op with
// cp_step = critical_path_ops - 1 (the end of the critical path) and
// follows CRITICAL_PRED, each op's heaviest predecessor, back to the op
// with cp_step 0. One row; `ops` equals the Trace node's
// critical_path_ops and the weight_us of the path's nodes sums to
// critical_path_us. Style the result with cypher/tracegraph.grass.
//
// Every op has at most one CRITICAL_PRED, so exactly one path joins the
// two ends; shortestPath finds it by a breadth-first walk, in time linear
// in its length (a plain variable-length MATCH would enumerate every
// prefix of the path first).
//
// Neo4j Browser:
//   :param trace => 'alexnet'
MATCH (tr:Trace {trace: $trace, uid: 'trace'})
MATCH (last:Op {trace: $trace})
WHERE last.cp_step = tr.critical_path_ops - 1
MATCH (first:Op {trace: $trace})
WHERE first.cp_step = 0
WITH tr, shortestPath((last)-[:CRITICAL_PRED*0..]->(first)) AS p
RETURN length(p) + 1 AS ops, tr.critical_path_us AS critical_path_us, p AS path
