// @name op-neighborhood-graph
// @summary The ops within a few dependency hops of one op, as graph paths.
// @graph
// @requires deps
// @param trace TRACE: the trace
// @param op STRING: the op's name (exact, as in top-ops or critical-path)
// @param hops INTEGER[1..4] = 1: how many DATA/CONTROL hops to follow (widen it to see more)
// @column hops: the path's length in relationships
// @column neighbor: name of the op at the far end of the path
// @column path: the path from the op to that neighbor
//
// Definition. Every path of 1 to `hops` DATA or CONTROL relationships that
// starts at the named op, followed in either direction (its producers and
// its consumers, then theirs), one row per path, shortest first, then by
// the neighbor's execution sequence number, then name, then the path's
// ops and relationship types in order (their uids and types joined: two
// paths to one neighbor differ there). `hops` is capped at 4 (Cypher
// cannot take a parameter as a variable-length bound, so the pattern is
// fixed at *1..4 and filtered on length); a hub op (a constant read by
// hundreds of ops) has many paths, so at most 1000 are returned. No rows
// when no op has that name.
//
// Drawn. The default, 1 hop, draws the op amid its producers and consumers,
// which Neo4j Browser lays out readably; each further hop multiplies the
// paths (and two hops of a busy op cross each other). The result is the
// paths only: with the Browser's "Connect result nodes" on (its default;
// `:config autoComplete: false` turns it off) it would also draw the
// dependencies among the neighbors and the critical-path links beside them.
//
// Neo4j Browser:
//   :param trace => 'alexnet'
//   :param op => 'conv3/Conv2D'
//   :param hops => 1
MATCH (o:Op {trace: $trace, name: $op})
MATCH p = (o)-[:DATA|CONTROL*1..4]-(n:Op)
WHERE length(p) <= $hops
WITH p, n, reduce(key = '', x IN nodes(p) | key + x.uid + '|') +
     reduce(key = '', r IN relationships(p) | key + type(r) + '|') AS key
ORDER BY length(p), n.seq, n.name, key
LIMIT 1000
RETURN length(p) AS hops, n.name AS neighbor, p AS path
