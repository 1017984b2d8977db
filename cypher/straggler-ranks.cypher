// @name straggler-ranks
// @summary Per rank of a multi-rank job: the waiting it caused as a straggler, and the waiting it suffered.
// @requires collectives times
// @param trace TRACE: the trace (several ranks' files ingested as one)
// @param min_caused_us FLOAT[0..] = 10000: count a rank as a collective's straggler only when it alone delayed it by at least this (us)
// @column rank: the rank
// @column collectives: collectives it joined
// @column straggled: collectives where it was the straggler (see stragglers)
// @column caused_us: time the job's collectives were held up by it alone: the union of those collectives' delays (us)
// @column caused_wait_us: every other rank's time waiting for it in those collectives, each rank's waits as a union, summed (us)
// @column suffered_us: its own time waiting for last ranks, over every collective it joined, as a union (us)
//
// Definition. The collectives and waits of `stragglers`, per rank: a rank
// is a collective's straggler when it arrived last and at least
// `min_caused_us` after the rank before it; the collective's *delay* is the
// interval from that arrival to the straggler's, and a rank's *wait* the
// interval from its own arrival to the last one. Times are unions of
// intervals, not sums: collectives issued together (DistributedDataParallel
// issues one all-reduce per gradient bucket during the backward pass, and
// a rank that starts its backward late is late to all of them) share one
// delay, which counts once. `caused_wait_us` is what the others lost to it;
// `suffered_us` is what it lost to others, including waits too small to
// name anyone. Ranks that joined no collective are not listed. Order:
// caused_us descending, then rank. (Each union is a reduce over the
// intervals in start order, carrying [length so far, furthest end].)
//
// Neo4j Browser:
//   :param trace => 'job'
//   :param min_caused_us => 10000.0
MATCH ()-[j:JOINS]->(c:Collective {trace: $trace})
WITH j.rank AS rank, c, c.last_arrival_us - j.wait_us AS arrived
ORDER BY rank, arrived
WITH rank, count(c) AS collectives, collect([arrived, c.last_arrival_us]) AS waits
WITH rank, collectives,
     reduce(u = [0.0, -1.0e308], w IN waits |
       [u[0] + CASE WHEN w[1] > u[1] THEN w[1] - CASE WHEN w[0] > u[1] THEN w[0] ELSE u[1] END ELSE 0.0 END,
        CASE WHEN w[1] > u[1] THEN w[1] ELSE u[1] END])[0] AS suffered_us
OPTIONAL MATCH (d:Collective {trace: $trace})
WHERE d.last_rank = rank AND d.caused_us >= $min_caused_us AND d.caused_us > 0
WITH rank, collectives, suffered_us, d
ORDER BY rank, d.last_arrival_us - d.caused_us
WITH rank, collectives, suffered_us, count(d) AS straggled,
     collect(CASE WHEN d IS NULL THEN null ELSE [d.last_arrival_us - d.caused_us, d.last_arrival_us] END) AS delays
WITH rank, collectives, suffered_us, straggled,
     reduce(u = [0.0, -1.0e308], w IN delays |
       [u[0] + CASE WHEN w[1] > u[1] THEN w[1] - CASE WHEN w[0] > u[1] THEN w[0] ELSE u[1] END ELSE 0.0 END,
        CASE WHEN w[1] > u[1] THEN w[1] ELSE u[1] END])[0] AS caused_us
OPTIONAL MATCH ()-[o:JOINS]->(e:Collective {trace: $trace})
WHERE e.last_rank = rank AND e.caused_us >= $min_caused_us AND e.caused_us > 0 AND o.rank <> rank
WITH rank, collectives, suffered_us, straggled, caused_us, o.rank AS other, e, o
ORDER BY rank, other, e.last_arrival_us - o.wait_us
WITH rank, collectives, suffered_us, straggled, caused_us, other,
     collect(CASE WHEN e IS NULL THEN null ELSE [e.last_arrival_us - o.wait_us, e.last_arrival_us] END) AS waited
WITH rank, collectives, suffered_us, straggled, caused_us,
     sum(reduce(u = [0.0, -1.0e308], w IN waited |
       [u[0] + CASE WHEN w[1] > u[1] THEN w[1] - CASE WHEN w[0] > u[1] THEN w[0] ELSE u[1] END ELSE 0.0 END,
        CASE WHEN w[1] > u[1] THEN w[1] ELSE u[1] END])[0]) AS caused_wait_us
RETURN rank, collectives, straggled, caused_us, caused_wait_us, suffered_us
ORDER BY caused_us DESC, rank
