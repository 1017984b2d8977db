// @name memory-timeline
// @summary Per allocator, live bytes after each allocation event as a step function (optionally downsampled, peak kept).
// @requires memory
// @param trace TRACE: the trace
// @param max_points INTEGER[1..] = 1000: at most this many points per allocator (null, possible in Neo4j Browser, keeps every point)
// @column allocator: allocator name (TF: GPU_0_bfc; MegEngine: comp node; Chainer: one pool)
// @column t_us: time of the point (us since the trace's first event; steps for Chainer)
// @column live_bytes: bytes live after every allocation and free at t_us; the value holds until the allocator's next point
//
// Definition. An allocator's memory timeline is the running sum of its
// allocations (+bytes at alloc_us) and frees (-bytes at free_us), one point
// per distinct event time holding the live bytes after all events at that
// time (frees count before allocations at equal times); computed at ingest
// and stored on the allocator's MemoryTimeline node as the parallel lists
// `t_us` / `live_bytes`. Persistent memory (no alloc/free time) is outside
// it.
// Downsampling: with N points and max_points < N, the points are cut into
// consecutive buckets of ceil(N / max_points) points and each bucket keeps
// its highest point (the first of equal ones), so no more than max_points
// points remain, the curve is the upper envelope of the original, and the
// allocator's peak (peak-memory's peak_bytes at its peak_at_us, the first
// time the maximum is reached) is always one of the points. The highest
// live_bytes of an allocator equals its peak_bytes. Order: allocator name,
// then the allocator's uid (two allocators may share a name), then time
// (one point per time).
//
// Neo4j Browser:
//   :param trace => 'alexnet'
//   :param max_points => 1000
MATCH (tl:MemoryTimeline {trace: $trace})
WITH tl, tl.t_us AS ts, tl.live_bytes AS bs, tl.points AS n
WITH tl, ts, bs, n, CASE WHEN $max_points IS NULL OR $max_points >= n THEN n
                         WHEN $max_points < 1 THEN 1 ELSE $max_points END AS points
WITH tl, ts, bs, n, toInteger((n + points - 1) / points) AS width
WITH tl, ts, bs, [b IN range(0, toInteger((n - 1) / width)) |
       reduce(best = b * width, i IN range(b * width, CASE WHEN (b + 1) * width < n THEN (b + 1) * width - 1
                                                        ELSE n - 1 END) |
              CASE WHEN bs[i] > bs[best] THEN i ELSE best END)] AS picks
WITH [i IN picks | [tl.allocator_name, tl.uid, ts[i], bs[i]]] AS points
UNWIND points AS p
WITH p[0] AS allocator, p[1] AS uid, p[2] AS t_us, p[3] AS live_bytes
RETURN allocator, t_us, live_bytes
ORDER BY allocator, uid, t_us
