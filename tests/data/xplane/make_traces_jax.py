"""Write real JAX profiler captures (XPlane protobuf) for the tests.

Not run by the tests (JAX is not a dependency of tracegraph). To
regenerate, in a throwaway virtual environment:

    python3 -m venv /work/venvs/jax && /work/venvs/jax/bin/pip install 'jax[cpu]'
    /work/venvs/jax/bin/python tests/data/xplane/make_traces_jax.py

(the committed files were made with jax/jaxlib 0.10.2, Python 3.11, on a
2-core CPU-only Linux machine).

It writes, beside this script:

- jax_train_step.xplane.pb.gz: a jitted training step of a 2-layer MLP
  (32 -> 64 tanh -> 10, batch 16, softmax cross-entropy) computing
  ``jax.value_and_grad`` and an SGD update; compiled by a warm-up call
  outside the capture, then 2 steps captured, each inside
  ``jax.profiler.StepTraceAnnotation("train", step_num=i)``.
- jax_scan.xplane.pb.gz: a jitted function running ``jax.lax.scan`` over 5
  steps of ``h = tanh(h @ W + x_t @ U)`` (batch 8, 16 inputs, 32 hidden),
  emitting ``h.sum()`` per step; compiled by a warm-up call, then called
  twice in the capture.

Inputs are made with NumPy (seeded), not jax.random, so that the process
compiles nothing but the function under test: a JAX capture stores the HLO
of every executable compiled in the process on its ``/host:metadata``
plane. Each capture runs in its own subprocess, with
``jax.profiler.trace(logdir, profiler_options=...)`` where the options
have host_tracer_level=2 and python_tracer_level=0. The written
``<logdir>/plugins/profile/<run>/<host>.xplane.pb`` is gzipped with
mtime=0 (no file name in the header); the ``.trace.json.gz`` that JAX also
writes there is not kept. Seeds are fixed; what varies from run to run is
timing.
"""

import glob
import gzip
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = ("jax_train_step", "jax_scan")


def _options(jax):
    opts = jax.profiler.ProfileOptions()
    opts.host_tracer_level = 2
    opts.python_tracer_level = 0
    return opts


def case_jax_train_step(jax, logdir):
    import jax.numpy as jnp
    import numpy as np

    rng = np.random.RandomState(0)
    params = jax.device_put(
        {
            "w1": (rng.randn(32, 64) * 0.1).astype("float32"),
            "b1": np.zeros(64, "float32"),
            "w2": (rng.randn(64, 10) * 0.1).astype("float32"),
            "b2": np.zeros(10, "float32"),
        }
    )
    x = jax.device_put(rng.randn(16, 32).astype("float32"))
    y = jax.device_put((np.arange(16) % 10).astype("int32"))

    def loss_fn(p, x, y):
        h = jnp.tanh(x @ p["w1"] + p["b1"])
        logits = h @ p["w2"] + p["b2"]
        logp = jax.nn.log_softmax(logits)
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))

    @jax.jit
    def train_step(p, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(p, x, y)
        p = jax.tree_util.tree_map(lambda a, g: a - 0.1 * g, p, grads)
        return p, loss

    params, loss = train_step(params, x, y)  # warm-up: compile
    loss.block_until_ready()
    with jax.profiler.trace(logdir, profiler_options=_options(jax)):
        for step in range(2):
            with jax.profiler.StepTraceAnnotation("train", step_num=step):
                params, loss = train_step(params, x, y)
                loss.block_until_ready()
    return f"loss {float(loss):.6f}"


def case_jax_scan(jax, logdir):
    import jax.numpy as jnp
    import numpy as np

    rng = np.random.RandomState(0)
    h0 = jax.device_put(rng.randn(8, 32).astype("float32"))
    xs = jax.device_put(rng.randn(5, 8, 16).astype("float32"))
    w = jax.device_put((rng.randn(32, 32) * 0.1).astype("float32"))
    u = jax.device_put((rng.randn(16, 32) * 0.1).astype("float32"))

    @jax.jit
    def rnn(h0, xs, w, u):
        def cell(h, x):
            h = jnp.tanh(h @ w + x @ u)
            return h, h.sum()

        return jax.lax.scan(cell, h0, xs)

    _h, ys = rnn(h0, xs, w, u)  # warm-up: compile
    ys.block_until_ready()
    with jax.profiler.trace(logdir, profiler_options=_options(jax)):
        for _ in range(2):
            _h, ys = rnn(h0, xs, w, u)
            ys.block_until_ready()
    return f"ys[-1] {float(ys[-1]):.6f}"


def run_case(name, logdir):
    import jax
    import jaxlib

    result = globals()["case_" + name](jax, logdir)
    print(f"{name}: jax {jax.__version__}, jaxlib {jaxlib.__version__}, backend {jax.default_backend()}, {result}")


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
