// @name straggler-ranks
// @summary Per rank of a multi-rank job: the waiting it caused as a straggler, and the waiting it suffered.
// @requires collectives times
// @param trace TRACE: the trace (several ranks' files ingested as one)
// @param min_caused_us FLOAT[0..] = 10000: count a rank as a collective's straggler only when it alone delayed it by at least this (us)
// @column rank: the rank
// @column collectives: collectives it joined
// @column straggled: collectives where it was the straggler (see stragglers)
// @column caused_us: sum over those of the delay it alone caused (us)
// @column caused_wait_us: sum over those of every other rank's wait for it (us)
// @column suffered_us: its own waits for the last rank, summed over every collective it joined (us)
//
// Definition. The collectives and waits of `stragglers`, per rank: a rank
// is a collective's straggler when it arrived last and at least
// `min_caused_us` after the rank before it. `caused_wait_us` is what the
// others lost to it (their waits summed); `suffered_us` is what it lost to
// others, including waits too small to name anyone. Ranks that joined no
// collective are not listed. Order: caused_us descending, then rank.
//
// Neo4j Browser:
//   :param trace => 'job'
//   :param min_caused_us => 10000.0
MATCH ()-[j:JOINS]->(c:Collective {trace: $trace})
WITH j.rank AS rank, c, j,
     CASE WHEN c.last_rank = j.rank AND c.caused_us >= $min_caused_us AND c.caused_us > 0 THEN 1 ELSE 0 END AS late
RETURN rank, count(c) AS collectives, count(CASE WHEN late = 1 THEN c END) AS straggled,
       sum(CASE WHEN late = 1 THEN c.caused_us ELSE 0.0 END) AS caused_us,
       sum(CASE WHEN late = 1 THEN c.waited_us ELSE 0.0 END) AS caused_wait_us,
       sum(j.wait_us) AS suffered_us
ORDER BY caused_us DESC, rank
