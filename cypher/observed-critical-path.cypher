// @name observed-critical-path
// @summary What actually made the trace take this long: the heaviest path through the order things ran in, one row per segment.
// @requires times
// @param trace TRACE: the trace
// @column step: 0-based position of the segment on the path (time order)
// @column event: name of the op or kernel the segment is attributed to
// @column kind: cpu_op / runtime / sync / kernel / memcpy / communication / idle
// @column start_us: when the segment starts (us since the trace's first event; steps for traces timed in steps)
// @column dur_us: its length: the time between its two ends (us)
// @column resource: where it ran: the host thread (`pid:tid`, `rank1/pid:tid`; the device for formats without threads) or the device stream (`cuda:0/stream:7`)
// @column counted: whether the segment counts towards the path's length (false: waiting, see below)
// @empty the trace has no op or kernel with a positive duration
//
// Definition. The happens-before graph has two nodes per event, its start
// and its end; events are the ops with a positive duration that do work
// (not `user_annotation` / `python_function` regions) and the kernels.
// Edges and the time each adds to a path (its weight):
//   op body: an op's start -> its first child's start -> that child's end
//     -> the next child's start ... -> the op's end (children: the ops nested
//     in it on its thread, in start order); weight = the time between the two
//     ends, except the last edge into a blocking call's end
//     (cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventSynchronize,
//     cudaEventQuery, cudaMemcpy, cudaMemcpyAsync, hip twins): 0;
//   thread order: a top-level op's end -> the next top-level op's start on
//     its thread (formats without threads: on its device, from the op with the
//     latest end at or before the start); weight 0;
//   data and control dependencies (TF StepStats): producer's end ->
//     consumer's start; weight 0;
//   kernel body: start -> end; weight = duration;
//   launch: the issuing runtime call's start (cudaLaunchKernel, ...; the
//     launching op when the format has none) -> the kernel's start; weight =
//     that time when the stream's previous kernel and any kernel it was made to
//     wait for had ended before the call started, else 0 (queued);
//   stream order: the previous kernel's end on the stream -> the kernel's
//     start; weight = the gap when the launch edge weighs 0 and the gap is
//     under 1,500 us, else 0;
//   synchronization: a kernel's end -> the end of the blocking call that
//     waited for it, or -> the start of the kernel a cudaStreamWaitEvent held
//     back; weight 0;
//   collectives joined across ranks (multi-rank jobs, see `stragglers`): a
//     collective completes on no rank before its last rank arrives. A call
//     still running at that arrival (an NCCL kernel, a blocking call) gets
//     a node at the arrival: its body up to it weighs 0 (waiting), the
//     last rank's call start -> that node weighs 0, and the node -> the
//     call's end weighs the time after the arrival (kind communication). A
//     host call that returned before the arrival (torch.distributed's
//     calls return once the work is queued; the thread waits outside any
//     op), on a thread running no op at the arrival: the last rank's call
//     start -> the first op the thread starts after it, weight = the time
//     from the arrival (kind communication); a thread busy then was not
//     waiting. And the thread-order edge into the last rank's host call
//     weighs its elapsed time: every other rank waited for it (host calls
//     only: a late NCCL kernel's delay is whatever its launch and stream
//     edges say). The path therefore crosses ranks at collectives
//     (`job-critical-path` lists it rank by rank); HTA's lengths agree on
//     one rank.
// The observed critical path is the path with the largest summed weight
// (one topological pass at ingest); that sum is its length, stored on the
// Trace node as `observed_path_us`. Ties: the first node reached in the
// topological order keeps its predecessor, except that an edge from
// another rank (a collective's last arrival) yields a tie to the rank's
// own; the path ends at the earliest node of maximal weight, so it
// neither starts nor ends with waiting.
// Each path edge with a positive elapsed time is one row (segment). It is
// attributed to: its op (op body), its kernel (kernel body), the runtime
// call (a counted launch edge: kind runtime, the launch delay); every
// other edge to the event it leads to: thread order and queue waits are
// kind idle (not counted), stream gaps idle (counted when under 1.5 ms and
// not queued), sync edges and the waiting in blocking calls kind sync (not
// counted). An op nested around others appears in several rows (its time
// before, between and after its children). The counted dur_us sum to
// `observed_path_us`; all dur_us sum to `observed_path_span_us`, the time
// from the path's first segment to its end (when nothing on the path waits
// the two are equal). The weights are those of Holistic Trace Analysis's
// critical path (HTA's length on the same whole trace agrees within 2%, see
// bench/RESULTS.md); unlike HTA it keeps a 0-weight stream edge where HTA has
// none, does not model the CUDA runtime lock across threads nor merge the
// backward thread into the forward one. Order: step.
//
// Neo4j Browser:
//   :param trace => 'cnn'
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
RETURN n.ocp_steps[i] AS step, n.name AS event, n.ocp_kinds[i] AS kind, n.ocp_starts_us[i] AS start_us,
       n.ocp_durs_us[i] AS dur_us, n.ocp_resource AS resource, n.ocp_counted[i] AS counted
ORDER BY step
