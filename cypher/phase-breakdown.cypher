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
// that launched NCCL kernels or name collectives are communication, work
// under `autograd::engine` backward, under `Optimizer.step` optimizer, the
// `ProfilerStep#N` annotation other, the rest forward); an op whose
// format gave no phase counts as other. Weight as in top-ops; ops that did
// not execute are left out. bytes_allocated sums the `bytes` of every
// allocation with an allocation time (alloc_us) made by the phase's ops;
// persistent memory, which has no allocation time in the trace, is not
// counted. Always five rows, in the order forward, backward, optimizer,
// communication, other (0 ops where a phase has none). One pass over
// the trace's ops, grouped by phase.
//
// Neo4j Browser:
//   :param trace => 'alexnet'
MATCH (tr:Trace {trace: $trace, uid: 'trace'})
OPTIONAL MATCH (o:Op {trace: $trace})
WHERE o.executed
OPTIONAL MATCH (o)-[:ALLOCATED]->(a:Allocation)
WHERE a.alloc_us IS NOT NULL
WITH tr, o, sum(a.bytes) AS op_bytes
WITH tr, coalesce(o.phase, 'other') AS phase, count(o) AS ops, sum(o.weight_us) AS total_us, sum(op_bytes) AS bytes
WITH tr, collect({phase: phase, ops: ops, total_us: total_us, bytes: bytes}) AS found
UNWIND range(0, 4) AS i
WITH tr, i, ['forward', 'backward', 'optimizer', 'communication', 'other'][i] AS phase, found
WITH tr, i, phase, [f IN found WHERE f.phase = phase] AS hit
RETURN phase,
       CASE WHEN size(hit) = 0 THEN 0 ELSE hit[0].ops END AS ops,
       CASE WHEN size(hit) = 0 THEN 0 ELSE hit[0].total_us END AS total_us,
       CASE WHEN tr.has_memory THEN CASE WHEN size(hit) = 0 THEN 0 ELSE toInteger(hit[0].bytes) END
            ELSE null END AS bytes_allocated
ORDER BY i
