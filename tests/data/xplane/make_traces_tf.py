"""Write real TensorFlow 2 profiler captures (XPlane protobuf) for the tests.

Not run by the tests (TensorFlow is not a dependency of tracegraph). To
regenerate, in a throwaway virtual environment:

    python3 -m venv /work/venvs/tf && /work/venvs/tf/bin/pip install tensorflow-cpu
    /work/venvs/tf/bin/python tests/data/xplane/make_traces_tf.py

(the committed files were made with tensorflow-cpu 2.21.0, Keras 3.15.1,
Python 3.11, on a 2-core CPU-only Linux machine; oneDNN on, as by default).

It writes, beside this script:

- keras_cnn_train.xplane.pb.gz: a small Keras CNN (Conv2D 4x3x3 relu,
  MaxPooling2D, Flatten, Dense 10) trained by a custom ``tf.function``
  train step (GradientTape, SparseCategoricalCrossentropy, SGD) on a
  constant batch of 8 16x16x1 images; one warm-up step (tracing) outside
  the capture, then 2 steps captured, each inside
  ``tf.profiler.experimental.Trace("train", step_num=i, _r=1)``.
- tf_while_loop.xplane.pb.gz: one call of a ``tf.function`` running
  ``tf.while_loop`` for 6 iterations of ``h = tanh(h @ w + b)`` on a 16x64
  state (64x64 weights), after a warm-up call.

Each capture runs in its own subprocess (so that nothing of one capture is
in the other), with ``tf.profiler.experimental.start(logdir, options=
ProfilerOptions(host_tracer_level=2, python_tracer_level=0,
device_tracer_level=0))`` and ``stop()``. The written
``<logdir>/plugins/profile/<run>/<host>.xplane.pb`` is gzipped with
mtime=0 (no file name in the header). Seeds are fixed; what varies from
run to run is timing and which thread ran which op.
"""

import glob
import gzip
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = ("keras_cnn_train", "tf_while_loop")


def _profiler_options(tf):
    return tf.profiler.experimental.ProfilerOptions(host_tracer_level=2, python_tracer_level=0, device_tracer_level=0)


def case_keras_cnn_train(tf, logdir):
    import numpy as np

    tf.keras.utils.set_random_seed(0)
    model = tf.keras.Sequential(
        [
            tf.keras.Input((16, 16, 1)),
            tf.keras.layers.Conv2D(4, 3, activation="relu", name="conv"),
            tf.keras.layers.MaxPooling2D(name="pool"),
            tf.keras.layers.Flatten(name="flatten"),
            tf.keras.layers.Dense(10, name="dense"),
        ]
    )
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    opt = tf.keras.optimizers.SGD(0.01)
    rng = np.random.RandomState(0)
    x = tf.constant(rng.rand(8, 16, 16, 1).astype("float32"))
    y = tf.constant(rng.randint(0, 10, 8).astype("int32"))

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    train_step(x, y).numpy()  # warm-up: tracing, optimizer slot creation
    tf.profiler.experimental.start(logdir, options=_profiler_options(tf))
    for step in range(2):
        with tf.profiler.experimental.Trace("train", step_num=step, _r=1):
            loss = train_step(x, y).numpy()
    tf.profiler.experimental.stop()
    return f"loss {loss:.6f}"


def case_tf_while_loop(tf, logdir):
    import numpy as np

    rng = np.random.RandomState(0)
    h0 = tf.constant(rng.randn(16, 64).astype("float32"))
    w = tf.constant((rng.randn(64, 64) * 0.1).astype("float32"))
    b = tf.constant((rng.randn(64) * 0.1).astype("float32"))

    @tf.function
    def loop(h0, w, b):
        def body(i, h):
            return i + 1, tf.tanh(tf.matmul(h, w) + b)

        _, h = tf.while_loop(lambda i, h: i < 6, body, (tf.constant(0), h0))
        return tf.reduce_sum(h)

    loop(h0, w, b).numpy()  # warm-up
    tf.profiler.experimental.start(logdir, options=_profiler_options(tf))
    out = loop(h0, w, b).numpy()
    tf.profiler.experimental.stop()
    return f"sum {out:.6f}"


def run_case(name, logdir):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    result = globals()["case_" + name](tf, logdir)
    print(f"{name}: TensorFlow {tf.__version__}, Keras {tf.keras.__version__}, {result}")


def main():
    import platform

    total_t0 = time.time()
    for name in CASES:
        t0 = time.time()
        with tempfile.TemporaryDirectory() as logdir:
            subprocess.run([sys.executable, os.path.abspath(__file__), "--case", name, logdir], check=True)
            found = glob.glob(os.path.join(logdir, "plugins", "profile", "*", "*.xplane.pb"))
            if len(found) != 1:
                raise SystemExit(f"expected one xplane.pb, found {found!r}")
            with open(found[0], "rb") as f:
                raw = f.read()
        out = os.path.join(HERE, name + ".xplane.pb.gz")
        with open(out, "wb") as f:
            f.write(gzip.compress(raw, compresslevel=9, mtime=0))
        print(
            f"wrote {os.path.relpath(out)}: {os.path.getsize(out)} bytes"
            f" ({len(raw)} uncompressed) in {time.time() - t0:.1f} s"
        )
    print(f"Python {platform.python_version()}; total {time.time() - total_t0:.1f} s")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--case":
        run_case(sys.argv[2], sys.argv[3])
    else:
        main()
