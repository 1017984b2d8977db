// @name op-neighborhood
// @summary Ancestors and descendants of one op within a number of dependency hops.
// @requires deps
// @param trace TRACE: the trace
// @param op STRING: op name (every op of that name when a node was recorded more than once)
// @param hops INTEGER[1..10] = 2: how many DATA/CONTROL edges away to look
// @column direction: `ancestor` (the op depends on it) or `descendant` (it depends on the op)
// @column op: the neighbor's name
// @column type: the neighbor's type
// @column hops: fewest edges between the op and the neighbor
// @empty no op named '{op}' has a dependency within {hops} hops (or there is no op of that name)
//
// Definition. Ancestors are the ops from which a directed path of `DATA`
// and `CONTROL` edges (data and control inputs) of at most `hops` edges
// leads to the op; descendants the ops such a path leads to from the op.
// hops is the shortest such path's length. Cypher cannot take a
// variable-length bound from a parameter, so paths are searched up to 10
// edges and filtered by length (so hops is at most 10). Every edge of the
// stored graph counts, including those of ops that did not execute and
// edges the critical path ignores for closing a cycle; the op itself is
// never its own neighbor. No rows when no op has that name. Order:
// ancestors first, then fewer hops, then name, then uid (a loop runs one
// name many times).
//
// Neo4j Browser:
//   :param trace => 'alexnet'
//   :param op => 'conv2/Conv2D'
//   :param hops => 2
MATCH (o:Op {trace: $trace})
WHERE o.name = $op
OPTIONAL MATCH up = (a:Op)-[:DATA|CONTROL*1..10]->(o)
WHERE length(up) <= $hops AND a <> o
WITH a, min(length(up)) AS h
WITH collect(CASE WHEN a IS NULL THEN null
                  ELSE {direction: 'ancestor', op: a.name, type: a.type, hops: h, uid: a.uid} END) AS ancestors
MATCH (o:Op {trace: $trace})
WHERE o.name = $op
OPTIONAL MATCH down = (o)-[:DATA|CONTROL*1..10]->(d:Op)
WHERE length(down) <= $hops AND d <> o
WITH ancestors, d, min(length(down)) AS h
WITH ancestors, collect(CASE WHEN d IS NULL THEN null
                             ELSE {direction: 'descendant', op: d.name, type: d.type, hops: h, uid: d.uid} END) AS descendants
UNWIND ancestors + descendants AS row
RETURN row.direction AS direction, row.op AS op, row.type AS type, row.hops AS hops
ORDER BY direction, hops, op, row.uid
