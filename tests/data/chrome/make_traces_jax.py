"""Write real JAX captures in Chrome Trace Event JSON for the tests.

Not run by the tests (JAX is not a dependency of tracegraph). To
regenerate, in a throwaway virtual environment:

    python3 -m venv /tmp/jaxenv && /tmp/jaxenv/bin/pip install 'jax[cpu]'
    /tmp/jaxenv/bin/python tests/data/chrome/make_traces_jax.py

(the committed files were made with jax/jaxlib 0.10.2, Python 3.11, on a
2-core CPU-only Linux machine).

One capture of a jitted training step of a 2-layer MLP (32 -> 64 tanh ->
10, batch 16, softmax cross-entropy, ``jax.value_and_grad`` and an SGD
update), compiled by a warm-up call outside the capture, then 2 steps
captured, each inside ``jax.profiler.StepTraceAnnotation("train",
step_num=i)``; ``jax.profiler.trace(logdir, create_perfetto_trace=True)``
with host_tracer_level=2, python_tracer_level=0. Of what JAX writes, two
files are kept, gzipped again with mtime=0:

- jax_train_step.perfetto_trace.json.gz: ``perfetto_trace.json.gz``, the
  file ``create_perfetto_trace=True`` writes for ui.perfetto.dev;
- jax_train_step.trace.json.gz: ``<host>.trace.json.gz``, TensorBoard's
  trace viewer JSON written beside the XPlane.

Inputs are made with NumPy (seeded), not jax.random, so that the process
compiles nothing but the step.
"""

import glob
import gzip
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> int:
    import jax
    import jax.numpy as jnp
    import numpy as np

    rng = np.random.RandomState(0)
    params = {
        "w1": jnp.asarray(rng.randn(32, 64).astype("float32") * 0.1),
        "b1": jnp.zeros(64, "float32"),
        "w2": jnp.asarray(rng.randn(64, 10).astype("float32") * 0.1),
        "b2": jnp.zeros(10, "float32"),
    }
    x = jnp.asarray(rng.randn(16, 32).astype("float32"))
    y = jnp.asarray(rng.randint(0, 10, 16))

    def loss(p, x, y):
        h = jnp.tanh(x @ p["w1"] + p["b1"])
        logits = h @ p["w2"] + p["b2"]
        logp = jax.nn.log_softmax(logits)
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))

    @jax.jit
    def step(p, x, y):
        value, grads = jax.value_and_grad(loss)(p, x, y)
        return value, jax.tree_util.tree_map(lambda a, g: a - 0.1 * g, p, grads)

    value, params = step(params, x, y)  # compile outside the capture
    value.block_until_ready()
    opts = jax.profiler.ProfileOptions()
    opts.host_tracer_level = 2
    opts.python_tracer_level = 0
    with tempfile.TemporaryDirectory() as logdir:
        with jax.profiler.trace(logdir, create_perfetto_trace=True, profiler_options=opts):
            for i in range(2):
                with jax.profiler.StepTraceAnnotation("train", step_num=i):
                    value, params = step(params, x, y)
                    value.block_until_ready()
        for pattern, name in (
            ("perfetto_trace.json.gz", "jax_train_step.perfetto_trace.json.gz"),
            ("*.trace.json.gz", "jax_train_step.trace.json.gz"),
        ):
            (found,) = glob.glob(os.path.join(logdir, "plugins", "profile", "*", pattern))
            with gzip.open(found, "rb") as f:
                data = f.read()
            with open(os.path.join(HERE, name), "wb") as out:
                out.write(gzip.compress(data, mtime=0))
            print(f"{name}: {len(data):,} bytes of JSON")
    return 0


if __name__ == "__main__":
    sys.exit(main())
