// @name observed-critical-path-graph
// @summary The observed critical path (or a window of it) as graph paths: its ops and kernels linked in path order.
// @graph
// @requires times
// @param trace TRACE: the trace
// @param first_step INTEGER[0..] = 0: the window's first segment, as its step on the path
// @param max_steps INTEGER[1..] = 10: at most this many segments from first_step on (widen it to see more; null, possible in Neo4j Browser: to the end)
// @column step: the step of the segment the link leaves from
// @column path: one link of the path: (event)-[:OBSERVED_NEXT]->(next event)
//
// Definition. The path of observed-critical-path (see its header), drawn:
// the ops and kernels its segments are attributed to, each linked to the
// event of the next segment by an `OBSERVED_NEXT` relationship carrying
// the step it leaves from (consecutive segments of the same event have no
// link: an op's time before and after a child are one node). One row per
// link whose step lies in the window first_step <= step <= first_step +
// max_steps - 2 (first_step below 0 counts as 0, max_steps below 2 as 2), so
// the links join the window's segments; an op that appears several times
// on the path is one node with several links. Order: step (unique: one link
// per step). No rows for a path of one segment.
//
// Drawn. The default window, 10 segments, is what Neo4j Browser can draw
// with every name readable in its frame (cypher/tracegraph.grass: the
// links as purple arrows captioned with their step); page through the path
// with first_step, or widen the window with max_steps. The result is the
// links and their ends only; with the Browser's "Connect result nodes" on
// (its default; `:config autoComplete: false` turns it off) it would also
// draw how those ops and kernels nest, launch and depend on each other.
//
// Neo4j Browser:
//   :param trace => 'cnn'
//   :param first_step => 0
//   :param max_steps => 10
CALL {
  MATCH (n:Op {trace: $trace})
  WHERE n.ocp_steps IS NOT NULL
  RETURN n
  UNION ALL
  MATCH (n:Kernel {trace: $trace})
  WHERE n.ocp_steps IS NOT NULL
  RETURN n
}
WITH n, CASE WHEN $first_step IS NULL OR $first_step < 0 THEN 0 ELSE $first_step END AS lo
MATCH p = (n)-[r:OBSERVED_NEXT]->()
WHERE r.step >= lo AND ($max_steps IS NULL OR r.step <= lo + CASE WHEN $max_steps < 2 THEN 2 ELSE $max_steps END - 2)
RETURN r.step AS step, p AS path
ORDER BY step
