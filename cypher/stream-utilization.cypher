// @name stream-utilization
// @summary Per device stream: kernels, busy time (union of kernel intervals), utilization over the trace span, idle gaps.
// @requires kernels times
// @param trace TRACE: the trace
// @param min_gap_us FLOAT[0..] = 10: count only idle gaps longer than this (us)
// @param step INTEGER = null: only this step (its number, as step-breakdown lists it; null: the whole trace)
// @column device: device the stream belongs to
// @column stream: stream name (`stream:13`; `memcpy` for TF's copy records)
// @column kernels: kernels and copies run on the stream (given a step: those that belong to it)
// @column busy_us: length of the union of its kernel intervals [start_us, end_us) (overlapping kernels count once; given a step: within the step's device window; us)
// @column window_us: the trace's span: from its first event (0) to the last end of any op or kernel (given a step: the step's device window; us)
// @column utilization: busy_us / window_us
// @column gaps: idle gaps between consecutive kernels on the stream longer than min_gap_us (given a step: the gaps after its kernels)
// @column gap_us: their summed length (us)
// @empty the trace has no kernel with a start and an end
//
// Definition. busy_us is computed at ingest per stream (`Stream.busy_us`)
// from every kernel on it, copies included. An idle gap is the time from
// the moment everything started earlier on the stream has ended (the
// running maximum of end times, not just the previous kernel's end) to the
// start of the next kernel (`Kernel.gap_after_us`, 0 when they overlap or
// touch); the time before the stream's first kernel and after its last is
// not a gap. With min_gap_us = 0 every positive gap counts, and then
// busy_us + gap_us = last kernel end - first kernel start. Given a step
// (`step-breakdown`), the window is the step's device window on the
// stream's rank (the earliest start to the latest end of the step's
// kernels), busy_us the time the stream ran anything in it (kept per
// stream on the Step at ingest), and the kernels and gaps those of the
// step's kernels; a stream of a rank without that step has no window.
// Order: device, then stream, then the stream's uid.
//
// Neo4j Browser:
//   :param trace => 'alexnet'
//   :param min_gap_us => 10.0
//   :param step => null
MATCH (tr:Trace {trace: $trace, uid: 'trace'})
MATCH (s:Stream {trace: $trace})
OPTIONAL MATCH (k:Kernel)-[:ON_STREAM]->(s)
WHERE $step IS NULL OR k.step = $step
WITH tr, s, count(k) AS kernels,
     sum(CASE WHEN k.gap_after_us > $min_gap_us THEN 1 ELSE 0 END) AS gaps,
     sum(CASE WHEN k.gap_after_us > $min_gap_us THEN k.gap_after_us ELSE 0.0 END) AS gap_us
OPTIONAL MATCH (st:Step {trace: $trace})
WHERE st.number = $step AND st.rank = coalesce(s.rank, 0)
WITH tr, s, kernels, gaps, gap_us, st
WITH s, kernels, gaps, gap_us,
     CASE WHEN $step IS NULL THEN s.busy_us
          ELSE coalesce([i IN range(0, size(coalesce(st.stream_uids, [])) - 1)
                         WHERE st.stream_uids[i] = s.uid | st.stream_busy_us[i]][0], 0.0) END AS busy_us,
     CASE WHEN $step IS NULL THEN tr.span_us ELSE st.window_us END AS window_us
RETURN s.device_name AS device, s.name AS stream, kernels, busy_us, window_us,
       CASE WHEN window_us > 0 THEN busy_us / window_us ELSE null END AS utilization,
       toInteger(gaps) AS gaps, gap_us
ORDER BY device, stream, s.uid
