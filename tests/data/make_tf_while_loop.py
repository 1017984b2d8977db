"""Writes tf-while-loop-lstm-stepstats.pbtxt / .pb: the StepStats of one
step of a small LSTM unrolled by ``tf.while_loop`` (12 iterations).

Not run by the tests (TensorFlow is not a dependency of tracegraph). Run it
in a throwaway virtual environment outside the repository:

    python3.11 -m venv /tmp/tfvenv && /tmp/tfvenv/bin/pip install tensorflow-cpu
    /tmp/tfvenv/bin/python tests/data/make_tf_while_loop.py tests/data

TF1 graph mode with v1 control flow, so the loop runs as Enter / Merge /
Switch / NextIteration / Exit nodes and every body node is recorded once per
iteration under the same name. A warm-up run comes first so that the traced
step does not include one-time kernel setup.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import tensorflow as tf
from google.protobuf import text_format

STEPS, BATCH, INPUT, HIDDEN = 12, 8, 32, 64


def build():
    v1 = tf.compat.v1
    v1.disable_eager_execution()
    v1.disable_control_flow_v2()
    x = v1.placeholder(tf.float32, [STEPS, BATCH, INPUT], name="x")
    rng = np.random.default_rng(1)
    w = tf.constant(rng.normal(0, 0.1, (INPUT, 4 * HIDDEN)).astype(np.float32), name="lstm/w")
    u = tf.constant(rng.normal(0, 0.1, (HIDDEN, 4 * HIDDEN)).astype(np.float32), name="lstm/u")
    bias = tf.constant(np.zeros(4 * HIDDEN, np.float32), name="lstm/b")
    inputs = tf.TensorArray(tf.float32, size=STEPS, name="inputs").unstack(x)

    def body(t, h, c):
        gates = tf.matmul(inputs.read(t), w) + tf.matmul(h, u) + bias
        i, f, g, o = tf.split(gates, 4, axis=1)
        c = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(g)
        h = tf.sigmoid(o) * tf.tanh(c)
        return t + 1, h, c

    zeros = tf.zeros([BATCH, HIDDEN])
    _, h, _ = v1.while_loop(lambda t, *_: t < STEPS, body, (tf.constant(0), zeros, zeros), name="rnn")
    loss = tf.reduce_sum(h)
    return x, loss


def main(out_dir: str) -> None:
    x, loss = build()
    feed = {x: np.random.default_rng(0).standard_normal((STEPS, BATCH, INPUT)).astype(np.float32)}
    config = tf.compat.v1.ConfigProto(inter_op_parallelism_threads=2, intra_op_parallelism_threads=1)
    with tf.compat.v1.Session(config=config) as sess:
        sess.run(loss, feed)  # warm-up
        meta = tf.compat.v1.RunMetadata()
        opts = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
        sess.run(loss, feed, options=opts, run_metadata=meta)
    out = Path(out_dir)
    stats = meta.step_stats
    (out / "tf-while-loop-lstm-stepstats.pbtxt").write_text(text_format.MessageToString(stats))
    (out / "tf-while-loop-lstm-stepstats.pb").write_bytes(stats.SerializeToString())


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else str(Path(__file__).resolve().parent))
