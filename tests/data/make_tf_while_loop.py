"""Writes the StepStats of one step of two small ``tf.while_loop`` graphs:

* tf-while-loop-lstm-stepstats.pbtxt / .pb: a small LSTM unrolled by
  ``tf.while_loop`` (12 iterations);
* tf-nested-while-loop-stepstats.pbtxt / .pb: a while loop (3 iterations)
  whose body runs another (2 iterations each), built with grappler's
  constant folding off so that every loop node keeps its own name (the test's
  reference tells the inner loop's nodes by their ``inner/`` scope).

Not run by the tests (TensorFlow is not a dependency of tracegraph). Run it
in a throwaway virtual environment outside the repository:

    python3.11 -m venv /tmp/tfvenv && /tmp/tfvenv/bin/pip install tensorflow-cpu
    /tmp/tfvenv/bin/python tests/data/make_tf_while_loop.py tests/data [lstm|nested]

TF1 graph mode with v1 control flow, so a loop runs as Enter / Merge /
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
from tensorflow.core.protobuf import rewriter_config_pb2

v1 = tf.compat.v1
STEPS, BATCH, INPUT, HIDDEN = 12, 8, 32, 64


def build_lstm():
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
    feed = np.random.default_rng(0).standard_normal((STEPS, BATCH, INPUT)).astype(np.float32)
    return x, tf.reduce_sum(h), feed


def build_nested():
    x = v1.placeholder(tf.float32, [4, 8], name="x")
    w = tf.constant(np.random.default_rng(0).normal(0, 0.1, (8, 8)).astype(np.float32), name="w")

    def outer(i, h):
        def inner(j, g):
            return j + 1, tf.tanh(tf.matmul(g, w))

        _, g = v1.while_loop(lambda j, g: j < 2, inner, (tf.constant(0), h), name="inner")
        return i + 1, g + 1.0

    _, h = v1.while_loop(lambda i, h: i < 3, outer, (tf.constant(0), x), name="outer")
    return x, tf.reduce_sum(h), np.ones((4, 8), np.float32)


def trace(build, fold: bool):
    """The step_stats of one traced run of the graph ``build`` makes."""
    with tf.Graph().as_default():
        x, loss, value = build()
        config = v1.ConfigProto(inter_op_parallelism_threads=2, intra_op_parallelism_threads=1)
        if not fold:
            config.graph_options.rewrite_options.constant_folding = rewriter_config_pb2.RewriterConfig.OFF
        with v1.Session(config=config) as sess:
            sess.run(loss, {x: value})  # warm-up
            meta = v1.RunMetadata()
            opts = v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE)
            sess.run(loss, {x: value}, options=opts, run_metadata=meta)
    return meta.step_stats


def main(out_dir: str, which: list[str]) -> None:
    v1.disable_eager_execution()
    v1.disable_control_flow_v2()
    out = Path(out_dir)
    for name, build, fold in [("lstm", build_lstm, True), ("nested", build_nested, False)]:
        if which and name not in which:
            continue
        stats = trace(build, fold)
        stem = "tf-while-loop-lstm-stepstats" if name == "lstm" else "tf-nested-while-loop-stepstats"
        (out / f"{stem}.pbtxt").write_text(text_format.MessageToString(stats))
        (out / f"{stem}.pb").write_bytes(stats.SerializeToString())


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else str(Path(__file__).resolve().parent), sys.argv[2:])
