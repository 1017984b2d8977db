// @name idle-breakdown
// @summary Per rank and lane (device stream, or host thread of a rank without kernels): idle time split by what it waited for.
// @requires times
// @param trace TRACE: the trace
// @column rank: the rank (0 for a trace of one rank)
// @column lane: the stream (`rank0/cuda:0/stream:7`) or, on a rank without kernels, the host thread (`rank1/pid:tid`)
// @column kind: stream or thread
// @column window_us: from the lane's first event's start to its last event's end (us; steps for traces timed in steps)
// @column idle_us: the window minus the lane's work (us); the four causes below sum to it
// @column collective_us: idle waiting for another rank in a collective (us)
// @column sync_us: idle waiting on a synchronization (us)
// @column host_us: idle waiting for the host to launch the next kernel (us; streams only)
// @column other_us: the rest of the idle time (us)
// @column idle_share: idle_us / window_us (null for an empty window)
//
// Definition. Made at ingest (`ingest/idle.py`). A rank's lanes are its
// device streams when it has kernels, else its host threads (the device,
// for formats without threads). A lane's work is the union of its events
// (kernels; ops that do work, not annotations) minus the time they spent
// waiting: inside a collective call before its last rank arrived, and
// inside blocking calls (ops a thread ran while an asynchronous
// collective waited are work). Idle time is the window minus the work; each piece of it
// goes to the first cause that covers it: collective = a joined call (an
// NCCL kernel, a host collective call) from its start until its
// collective's last arrival (see `stragglers`; on a thread the wait goes
// on after an asynchronous call returns); sync = on a stream, the gap
// before a kernel a cudaStreamWaitEvent held back, until the kernel it
// waited for ended, on a thread a blocking call (cudaStreamSynchronize,
// ...); host = on a stream, the gap before a kernel until its runtime call
// (cudaLaunchKernel, ...) started; other = the rest (the host busy
// elsewhere, the profiler's window, dependencies not recorded). Order:
// rank, lane.
//
// Neo4j Browser:
//   :param trace => 'job'
MATCH (r:Rank {trace: $trace})
UNWIND range(0, size(coalesce(r.lanes, [])) - 1) AS i
RETURN r.rank AS rank, r.lanes[i] AS lane, r.lane_kinds[i] AS kind, r.lane_window_us[i] AS window_us,
       r.idle_us[i] AS idle_us, r.idle_collective_us[i] AS collective_us, r.idle_sync_us[i] AS sync_us,
       r.idle_host_us[i] AS host_us, r.idle_other_us[i] AS other_us,
       CASE WHEN r.lane_window_us[i] > 0 THEN r.idle_us[i] / r.lane_window_us[i] END AS idle_share
ORDER BY rank, lane
