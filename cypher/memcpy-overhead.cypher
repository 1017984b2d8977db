// @name memcpy-overhead
// @summary Per copy direction (HtoD, DtoH, DtoD, ...): copies, bytes, time, bandwidth and the time no compute kernel hides.
// @requires copies
// @param trace TRACE: the trace
// @column direction: copy direction as the trace names it (HtoD, DtoH, DtoD, ...; `unknown` when it does not)
// @column copies: copy records (kernels of kind memcpy)
// @column bytes: bytes copied (null: no copy of this direction states its size)
// @column total_us: summed copy durations (us)
// @column gbps: bandwidth in GB/s (1e9 bytes per second) over the copies that state their size: their bytes / their summed duration
// @column exposed_us: summed copy time during which no compute kernel ran on the same device (us)
//
// Definition. A copy is a kernel of kind `memcpy` (TF: `MEMCPYxxx`
// records on a stream or on `/memcpy`). Its exposed time is computed at
// ingest (`Kernel.exposed_us`): its interval [start_us, end_us) minus the
// part covered by the union of the intervals of all compute kernels
// (kind `compute`, any stream) of the same device, so a copy fully hidden
// behind compute has 0 and one running while the device computes nothing
// has its whole duration. Copies running at the same time as each other
// each count in full. A trace without copy times (an op listing) has
// null total_us and exposed_us. Order: largest total_us first (null
// last), then direction (one row per direction).
//
// Neo4j Browser:
//   :param trace => 'alexnet'
MATCH (k:Kernel {trace: $trace})
WHERE k.kind = 'memcpy'
WITH coalesce(k.direction, 'unknown') AS direction, count(k) AS copies, count(k.bytes) AS sized,
     count(k.dur_us) AS timed, count(k.exposed_us) AS exposed, sum(k.bytes) AS bytes, sum(k.dur_us) AS total_us,
     sum(CASE WHEN k.bytes IS NOT NULL THEN k.dur_us ELSE 0.0 END) AS sized_us, sum(k.exposed_us) AS exposed_us
RETURN direction, copies, CASE WHEN sized > 0 THEN toInteger(bytes) ELSE null END AS bytes,
       CASE WHEN timed > 0 THEN total_us ELSE null END AS total_us,
       CASE WHEN sized > 0 AND sized_us > 0 THEN bytes / sized_us / 1000.0 ELSE null END AS gbps,
       CASE WHEN exposed > 0 THEN exposed_us ELSE null END AS exposed_us
ORDER BY coalesce(total_us, -1.0) DESC, direction
