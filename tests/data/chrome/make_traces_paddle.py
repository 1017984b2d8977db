"""Write a real PaddlePaddle capture in Chrome Trace Event JSON for the tests.

Not run by the tests (PaddlePaddle is not a dependency of tracegraph). To
regenerate, in a throwaway virtual environment:

    python3 -m venv /tmp/paddleenv && /tmp/paddleenv/bin/pip install paddlepaddle
    /tmp/paddleenv/bin/python tests/data/chrome/make_traces_paddle.py

(the committed file was made with paddlepaddle 3.3.1, Python 3.11, on a
2-core CPU-only Linux machine).

A dygraph training step of a 2-layer MLP (32 -> 64 tanh -> 10, batch 16,
softmax cross-entropy, SGD with learning rate 0.1), run once outside the
capture, then 2 steps captured by ``paddle.profiler.Profiler`` (CPU target,
``scheduler=(0, 2)``, ``p.step()`` after each step) and written by
``paddle.profiler.export_chrome_tracing``: the file
``<host>_pid_<pid>_time_<...>.paddle_trace.json`` is kept as
paddle_train_step.paddle_trace.json, as written.
"""

import glob
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> int:
    import numpy as np
    import paddle
    import paddle.profiler as profiler

    paddle.seed(0)
    rng = np.random.default_rng(0)
    model = paddle.nn.Sequential(paddle.nn.Linear(32, 64), paddle.nn.Tanh(), paddle.nn.Linear(64, 10))
    opt = paddle.optimizer.SGD(learning_rate=0.1, parameters=model.parameters())
    x = paddle.to_tensor(rng.standard_normal((16, 32)).astype("float32"))
    y = paddle.to_tensor(rng.integers(0, 10, (16, 1)).astype("int64"))

    def step() -> None:
        loss = paddle.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.clear_grad()

    step()
    out = tempfile.mkdtemp()
    prof = profiler.Profiler(
        targets=[profiler.ProfilerTarget.CPU], scheduler=(0, 2), on_trace_ready=profiler.export_chrome_tracing(out)
    )
    prof.start()
    for _ in range(2):
        step()
        prof.step()
    prof.stop()
    (written,) = glob.glob(os.path.join(out, "*.paddle_trace.json"))
    shutil.copyfile(written, os.path.join(HERE, "paddle_train_step.paddle_trace.json"))
    shutil.rmtree(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
