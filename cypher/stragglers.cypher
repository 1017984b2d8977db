// @name stragglers
// @summary Collectives a rank arrived at last, late enough to name it: how long it held the others up, and each rank's wait.
// @requires collectives times
// @param trace TRACE: the trace (several ranks' files ingested as one)
// @param min_caused_us FLOAT[0..] = 10000: name a straggler only when it alone delayed the collective by at least this (us)
// @column seq: the collective's place among its process group's collectives (0-based, call order)
// @column collective: its call (`c10d::allreduce_`, ...; on GPU jobs the NCCL collective: `AllReduce`, ...)
// @column straggler_rank: the rank that arrived last
// @column caused_us: last arrival - the arrival before it (us): the delay the straggler alone caused
// @column rank: a rank of the collective (one row per rank, the straggler's too)
// @column wait_us: that rank's wait for the straggler: last arrival - its own arrival (us; 0 for the straggler)
// @column process_group: the collective's process group (NCCL kernels that record one; null otherwise)
// @empty no collective whose last rank held the others up by {min_caused_us} us or more
//
// Definition. A collective is the same call on every rank of a
// multi-rank job, joined at ingest (the k-th collective call of every
// rank, see `cypher/SCHEMA.md` and `ingest/collectives.py`). A rank
// arrives when its call starts; the collective cannot complete before the
// last arrival, so every other rank waits for the last one. A collective
// has a straggler when its last rank arrived at least `min_caused_us`
// after the rank before it (`Collective.caused_us`); the default, 10 ms,
// is above the scheduling noise of ranks sharing a machine's cores. On a
// tie for last nobody is named (caused_us is 0). Times are the ranks' own
// clocks: one clock on one machine; across machines, off by their skew.
// Order: process group, seq, then rank.
//
// Neo4j Browser:
//   :param trace => 'job'
//   :param min_caused_us => 10000.0
MATCH (c:Collective {trace: $trace})
WHERE c.caused_us >= $min_caused_us AND c.caused_us > 0
MATCH ()-[j:JOINS]->(c)
RETURN c.seq AS seq, c.name AS collective, c.last_rank AS straggler_rank, c.caused_us AS caused_us,
       j.rank AS rank, j.wait_us AS wait_us, c.process_group AS process_group
ORDER BY coalesce(process_group, ''), seq, rank
