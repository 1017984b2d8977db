// @name job-critical-path
// @summary The observed critical path of a multi-rank job, rank by rank: where it runs on which rank, and the collective where it crosses to another.
// @requires times
// @param trace TRACE: the trace (one rank, or several ranks' files ingested as one)
// @column leg: 0-based position of the stretch on the path (time order)
// @column rank: the rank the stretch runs on (null: a trace of one rank, whose ops and kernels carry no `rank`)
// @column entered_at: the event of the stretch's first segment: for every leg but the first, the collective call where the path crossed to this rank
// @column start_us: when the stretch starts (us since the trace's first event)
// @column end_us: when it ends (us)
// @column counted_us: its segments' time that counts towards the path's length (us)
// @column segments: how many path segments it has
//
// Definition. The segments of `observed-critical-path` in step order,
// cut into legs wherever the rank of the segment's op or kernel (its
// `rank`) changes. The path crosses ranks only at collectives
// joined across ranks (`stragglers`, `cypher/SCHEMA.md`): a collective
// completes on no rank before its last rank arrives, so in the
// happens-before graph the last arrival's call start leads to every
// rank's completion of it (the end of a call still running then, such as
// an NCCL kernel or a blocking call, whose waiting before the arrival
// weighs 0; else, on a thread running no op at the arrival, the first op
// it starts after it), and on CPU jobs the last rank's idle time before
// its host call counts: every other rank waited for it (all edges in
// `observed-critical-path`). The counted_us of the legs sum to the
// Trace's `observed_path_us`. On a trace of one rank there is one leg: the
// observed critical path itself. Order: leg.
//
// Neo4j Browser:
//   :param trace => 'job'
CALL {
  MATCH (n:Op {trace: $trace})
  WHERE n.ocp_steps IS NOT NULL
  RETURN n
  UNION ALL
  MATCH (n:Kernel {trace: $trace})
  WHERE n.ocp_steps IS NOT NULL
  RETURN n
}
UNWIND range(0, size(n.ocp_steps) - 1) AS i
WITH n.ocp_steps[i] AS step, n.name AS event, n.ocp_starts_us[i] AS start, n.ocp_durs_us[i] AS dur,
     n.ocp_counted[i] AS counted,
     n.rank AS rank
ORDER BY step
WITH collect({event: event, start: start, dur: dur, counted: counted, rank: rank}) AS segs
WITH segs, [i IN range(0, size(segs) - 1) WHERE i = 0 OR segs[i].rank <> segs[i - 1].rank] AS firsts
UNWIND range(0, size(firsts) - 1) AS leg
WITH segs, leg, firsts[leg] AS a, CASE WHEN leg + 1 < size(firsts) THEN firsts[leg + 1] ELSE size(segs) END AS b
WITH leg, segs[a..b] AS part
RETURN leg, part[0].rank AS rank, part[0].event AS entered_at, part[0].start AS start_us,
       part[size(part) - 1].start + part[size(part) - 1].dur AS end_us,
       reduce(s = 0.0, x IN part | s + CASE WHEN x.counted THEN x.dur ELSE 0.0 END) AS counted_us,
       size(part) AS segments
ORDER BY leg
