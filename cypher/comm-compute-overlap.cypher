// @name comm-compute-overlap
// @summary Per rank: time in communication, in computation and in both at once, and the share of communication nothing hid.
// @requires communication times
// @param trace TRACE: the trace (one rank, or several ranks' files ingested as one)
// @column rank: the rank (0 for a trace of one rank)
// @column mode: gpu (measured on the rank's kernels) or cpu (on its host ops: a rank without kernels)
// @column comm_us: time in communication: the union of its communication intervals (us)
// @column compute_us: time in computation: the union of its computation intervals (us)
// @column overlap_us: time in both at once (us)
// @column exposed_comm_us: comm_us - overlap_us: communication with no computation beside it (us)
// @column exposed_share: exposed_comm_us / comm_us (null when comm_us is 0)
//
// Definition. Made at ingest per rank (`ingest/ranks.py`). A rank is the
// `rank` the format gives an op or a device. On a rank with
// kernels (mode gpu), communication = its communication kernels (NCCL,
// RCCL, MSCCL, MSCCL++, DeepEP, NVSHMEM, custom all-reduces: the one rule
// of `ingest/formats/kit.py`), computation = its
// compute kernels (copies and memsets are neither), on any of its streams.
// On a rank without kernels (mode cpu), communication = its ops of phase
// communication (`c10d::` calls, `gloo:` / `nccl:` regions,
// `record_param_comms` and the ops inside them), computation = its other
// ops that do work (not annotations, runtime or blocking calls), on any of
// its threads. Each side is a union of intervals, so work on several
// streams or threads at once counts once. Exposed communication is time
// the rank spent communicating and doing nothing else: what overlapping
// could still save. Order: rank.
//
// Neo4j Browser:
//   :param trace => 'job'
MATCH (r:Rank {trace: $trace})
RETURN r.rank AS rank, r.mode AS mode, r.comm_us AS comm_us, r.compute_us AS compute_us, r.overlap_us AS overlap_us,
       r.exposed_comm_us AS exposed_comm_us,
       CASE WHEN r.comm_us > 0 THEN r.exposed_comm_us / r.comm_us END AS exposed_share
ORDER BY rank
