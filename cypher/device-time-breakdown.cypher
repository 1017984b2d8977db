// @name device-time-breakdown
// @summary Per rank: its whole device span broken down into computation, communication, copies and idle time (TraceLens's GPU timeline).
// @requires kernels times
// @param trace TRACE: the trace (one rank, or several ranks' files ingested as one)
// @column rank: the rank (0 for a trace of one rank)
// @column window_us: its device span: its first kernel's start to its last kernel's end (us)
// @column busy_us: time any of its kernels, copies or memsets ran (us)
// @column computation_us: time compute kernels or memsets ran (us)
// @column communication_us: time communication kernels ran (us)
// @column memcpy_us: time copies ran (us)
// @column exposed_communication_us: communication with no computation at the same time (us)
// @column exposed_memcpy_us: copies with neither computation nor communication at the same time (us)
// @column idle_us: window_us - busy_us (us)
// @column busy_share: busy_us / window_us
// @empty no rank of the trace has timed kernels (or the trace was stored before tracegraph measured this: ingest it again with --replace)
//
// Definition. Made at ingest (`ingest/device_time.py`) per rank with
// kernels, over every kernel, copy and memset of the rank on any stream or
// device (at once: counted once). These are TraceLens's `gpu_timeline`
// figures (total_time = window_us, busy_time, computation_time,
// total_comm_time, total_memcpy_time, exposed_comm_time,
// exposed_memcpy_time, idle_time): memsets count as computation, and
// computation_us + exposed_communication_us + exposed_memcpy_us + idle_us =
// window_us. Communication kernels are those of the kit's one rule (NCCL,
// RCCL, MSCCL, DeepEP, NVSHMEM, custom all-reduces), where TraceLens takes
// kernels whose name contains `nccl`. Per step: `step-breakdown`. Order:
// rank.
//
// Neo4j Browser:
//   :param trace => 'step'
MATCH (r:Rank {trace: $trace})
WHERE r.device_window_us IS NOT NULL
RETURN r.rank AS rank, r.device_window_us AS window_us, r.device_busy_us AS busy_us,
       r.device_computation_us AS computation_us, r.device_communication_us AS communication_us,
       r.device_memcpy_us AS memcpy_us, r.device_exposed_communication_us AS exposed_communication_us,
       r.device_exposed_memcpy_us AS exposed_memcpy_us, r.device_idle_us AS idle_us,
       CASE WHEN r.device_window_us > 0 THEN r.device_busy_us / r.device_window_us END AS busy_share
ORDER BY rank
