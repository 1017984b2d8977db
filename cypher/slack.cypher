// @name slack
// @summary Per op earliest start, latest start and slack over the dependency DAG; near-critical ops first.
// @requires deps
// @param trace TRACE: the trace
// @param max_slack_us FLOAT[0..] = null: keep only ops whose slack is at most this (us); null keeps every op
// @column op: op name
// @column type: op type
// @column earliest_start_us: earliest start: the largest earliest finish of its predecessors (0 for sources), weights summed along the heaviest chain into it (us)
// @column latest_start_us: latest start that does not lengthen the critical path: latest finish minus its weight (us)
// @column slack_us: latest start minus earliest start (us); 0 exactly on the critical path
// @empty no op's slack is at most {max_slack_us} us (null: any slack, so the DAG has no executed op)
//
// Definition. Over the dependency DAG of critical-path (`DATA` and
// `CONTROL` edges between executed ops; an edge closing a cycle is
// ignored), with an op's weight as in critical-path (the sum of its kernel
// durations when it launched any, else its own record's duration; 1 per op
// in traces timed in steps): a forward pass gives every op's earliest
// finish (weight + the largest earliest finish of its predecessors) and a
// backward pass its latest finish (the smallest latest start of its
// successors; the critical path length for ops without successors).
// earliest start = earliest finish - weight, latest start = latest finish -
// weight, slack = latest finish - earliest finish. Slack below 1e-6 us is
// stored as exactly 0, so the ops with slack 0 are the ops on a heaviest
// chain: exactly the critical-path rows when that chain is unique (when
// several chains tie, every op on any of them). These are ingest-time
// values (`es_us`, `ls_us`, `slack_us` on Op), not the times the ops
// actually ran at (see start_us in critical-path). Ops that did not execute
// are left out. Order: smallest slack first, then earliest start, then
// execution order, then name, then uid.
// A node that ran several times (a loop body) is one op per run, each
// with its own row (the Op's `run` and `iteration` tell them apart).
//
// Neo4j Browser:
//   :param trace => 'alexnet'
//   :param max_slack_us => null
MATCH (o:Op {trace: $trace})
WHERE o.slack_us IS NOT NULL AND ($max_slack_us IS NULL OR o.slack_us <= $max_slack_us)
RETURN o.name AS op, o.type AS type, o.es_us AS earliest_start_us, o.ls_us AS latest_start_us,
       o.slack_us AS slack_us
ORDER BY slack_us, earliest_start_us, o.seq, op, o.uid
