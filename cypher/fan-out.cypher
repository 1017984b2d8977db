// @name fan-out
// @summary The tensors read by the most ops, and the ops with the most inputs.
// @requires deps
// @param trace TRACE: the trace
// @param n INTEGER[0..] = 10: how many tensors and how many ops to return (up to 2n rows)
// @column kind: `tensor` (degree = how many ops read it) or `op` (degree = how many inputs it has)
// @column name: tensor name (`op:slot` for TF) or op name
// @column degree: distinct ops reading the tensor, or the op's input count
// @empty the trace has no tensors read by ops (or n is {n})
//
// Definition. From the `CONSUMES` relationships (an op reads a tensor at
// an input position): a tensor's degree is the number of distinct ops
// that read it (its fan-out, stored at ingest as Tensor.readers); an op's
// degree is its number of data inputs, one per input position (a tensor
// read at two positions counts twice; control inputs are not counted;
// stored as Op.inputs). Tensors nobody reads and ops without
// inputs are left out. Rows: the n tensors with the highest degree, then
// the n ops with the highest degree; within each, highest degree first,
// then name, then uid (names can repeat: a loop's runs, Chainer's
// unnamed blocks).
//
// Neo4j Browser:
//   :param trace => 'alexnet'
//   :param n => 10
MATCH (t:Tensor {trace: $trace})
WHERE t.readers > 0
WITH t
ORDER BY t.readers DESC, t.name, t.uid
LIMIT $n
WITH collect({kind: 'tensor', name: t.name, degree: t.readers, uid: t.uid}) AS tensors
OPTIONAL MATCH (o:Op {trace: $trace})
WHERE o.inputs > 0
WITH tensors, o
ORDER BY o.inputs DESC, o.name, o.uid
LIMIT $n
WITH tensors, [x IN collect({kind: 'op', name: o.name, degree: o.inputs, uid: o.uid}) WHERE x.name IS NOT NULL] AS ops
UNWIND tensors + ops AS row
RETURN row.kind AS kind, row.name AS name, row.degree AS degree
ORDER BY CASE row.kind WHEN 'tensor' THEN 0 ELSE 1 END, degree DESC, name, row.uid
