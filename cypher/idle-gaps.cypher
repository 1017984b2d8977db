// @name idle-gaps
// @summary The longest idle gaps between consecutive kernels on a device stream.
// @requires kernels times
// @param trace TRACE: the trace
// @param n INTEGER[0..] = 20: how many gaps to return
// @column stream: device and stream (`/device:GPU:0/stream:13`)
// @column gap_us: idle time before the next kernel (us)
// @column before_op: op of the kernel just before the gap in start order
// @column after_op: op of the kernel that ends the gap
// @column at_us: when the gap starts: the moment every kernel started earlier on the stream has ended (us since the trace's first event)
// @empty no stream has a gap between two of its kernels (or n is {n})
//
// Definition. Kernels of a stream are ordered by start time (then end
// time, then uid) and linked by `NEXT_ON_STREAM`; the gap before a kernel
// is its start minus the running maximum of the end times of the kernels
// before it on the stream (`Kernel.gap_after_us` on the earlier kernel,
// computed at ingest; overlapping or touching kernels leave no gap). Only
// positive gaps are rows; the gap ends at after_op's kernel start, so
// at_us + gap_us is that start. These are the gaps stream-utilization
// counts. Order: longest first, then earlier at_us, then stream, then the
// earlier kernel's uid.
//
// Neo4j Browser:
//   :param trace => 'alexnet'
//   :param n => 20
MATCH (k:Kernel {trace: $trace})-[:NEXT_ON_STREAM]->(nk:Kernel)
WHERE k.gap_after_us > 0
RETURN k.device_name + '/' + k.stream_name AS stream, k.gap_after_us AS gap_us, k.op_name AS before_op,
       nk.op_name AS after_op, nk.start_us - k.gap_after_us AS at_us
ORDER BY gap_us DESC, at_us, stream, k.uid
LIMIT $n
