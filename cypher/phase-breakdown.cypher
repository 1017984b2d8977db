// @name phase-breakdown
// @summary Forward, backward, optimizer, communication and other: ops, summed weight and bytes allocated per phase.
// @requires times
// @param trace TRACE: the trace
// @column phase: forward / backward / optimizer / communication / other
// @column ops: executed ops of the phase
// @column total_us: their summed weight (us; steps for traces timed in steps)
// @column bytes_allocated: bytes of the allocations those ops made during the trace (null: the trace has no memory records)
//
// Definition. An op's phase is decided at ingest from its name and type
// (TF, one rule for every TF format, ingest/tf_names.py: collectives such
// as Horovod or NCCL all-reduces are communication, optimizer scopes and
// Apply* ops optimizer, ops under a `gradients/` or `gradient_tape/` scope
// backward, runtime plumbing such as `_SOURCE` or `_retval` other, a copy
// `edge_N_<node>` the phase of <node>, the rest forward; PyTorch: ops
// that launched communication kernels or name collectives are communication, work
// under `autograd::engine` backward, under `Optimizer.step` optimizer, the
// `ProfilerStep#N` annotation other, the rest forward); an op whose
// format gave no phase counts as other. Weight as in top-ops; ops that did
// not execute are left out. bytes_allocated sums the `bytes` of every
// allocation with an allocation time (alloc_us) made by the phase's ops;
// persistent memory, which has no allocation time in the trace, is not
// counted. Always five rows, in the order forward, backward, optimizer,
// communication, other (0 ops where a phase has none). Two grouped
// passes, one over the trace's ops and one over its allocations (each
// through its own index; walking from every op to its allocations is
// several times slower).
//
// Neo4j Browser:
//   :param trace => 'alexnet'
MATCH (tr:Trace {trace: $trace, uid: 'trace'})
OPTIONAL MATCH (o:Op {trace: $trace})
WHERE o.executed
WITH tr, coalesce(o.phase, 'other') AS phase, count(o) AS ops, sum(o.weight_us) AS total_us
WITH tr, collect({phase: phase, ops: ops, total_us: total_us}) AS found
OPTIONAL MATCH (a:Allocation {trace: $trace})<-[:ALLOCATED]-(o:Op)
WHERE a.alloc_us IS NOT NULL AND o.executed
WITH tr, found, coalesce(o.phase, 'other') AS phase, sum(a.bytes) AS bytes
WITH tr, found, collect({phase: phase, bytes: bytes}) AS allocated
UNWIND range(0, 4) AS i
WITH tr, i, ['forward', 'backward', 'optimizer', 'communication', 'other'][i] AS phase, found, allocated
WITH tr, i, phase, [f IN found WHERE f.phase = phase] AS hit, [a IN allocated WHERE a.phase = phase] AS made
RETURN phase,
       CASE WHEN size(hit) = 0 THEN 0 ELSE hit[0].ops END AS ops,
       CASE WHEN size(hit) = 0 THEN 0 ELSE hit[0].total_us END AS total_us,
       CASE WHEN tr.has_memory THEN CASE WHEN size(made) = 0 THEN 0 ELSE toInteger(made[0].bytes) END
            ELSE null END AS bytes_allocated
ORDER BY i
