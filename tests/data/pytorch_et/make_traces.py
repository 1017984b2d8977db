"""Make the PyTorch Execution Trace (ET) + Kineto pairs in this folder.

Each model runs one step under ``torch.profiler.profile`` with an
``ExecutionTraceObserver`` attached, so the Kineto trace (Chrome trace JSON,
``prof.export_chrome_trace``) and the ET describe the same step: the profiler
starts the observer just before Kineto and stops it just before Kineto.  A
warm-up step runs outside the profiled window first.  Both files are kept
byte for byte as torch wrote them and gzipped with mtime=0.

Written here (``NAME.kineto.json.gz`` + ``NAME.et.json.gz``):

- ``two_branch``: forward only (``torch.no_grad``) of a module whose input
  feeds two parallel branches joined by ``torch.cat`` (a TensorList input):
  ``heavy_branch`` (three 512x512 ``Linear`` + ``relu`` on a 256x512 batch)
  and ``light_branch`` (one elementwise ``x * scale``, ``scale`` a (512,)
  buffer), each under a ``record_function`` of that name.
- ``mlp_train``: one training step of a 3-layer MLP: forward, cross-entropy
  loss, backward, ``SGD(momentum=0.9).step()``, ``zero_grad()``.
- ``cnn``: one training step of a small CNN (conv, batchnorm, relu, max
  pool, conv, relu, adaptive avg pool, linear) with ``Adam``.

The test suite never imports torch; this script is run by hand, in a
throwaway virtual environment (CPU wheel, pinned: unpinned ``torch`` is the
multi-GB CUDA build)::

    python3 -m venv /tmp/torch-venv
    /tmp/torch-venv/bin/pip install torch==2.13.0 numpy
    /tmp/torch-venv/bin/python tests/data/pytorch_et/make_traces.py

Each model runs in a fresh process (so rf_ids start at 1 in every file).
A rerun gives the same ops, names, shapes and rf_ids; the timings, pid and
addresses change, and with them the ET's node/tensor/storage ids from the
first freed-and-reused address on (ET storage ids are keyed by data
pointer).
"""

import gzip
import os
import subprocess
import sys
import tempfile

import torch
from torch import nn
from torch.profiler import ExecutionTraceObserver, ProfilerActivity, profile, record_function

HERE = os.path.dirname(os.path.abspath(__file__))


class TwoBranch(nn.Module):
    def __init__(self, width=512, depth=3):
        super().__init__()
        self.heavy = nn.ModuleList([nn.Linear(width, width) for _ in range(depth)])
        self.register_buffer("scale", torch.full((width,), 0.5))

    def forward(self, x):
        with record_function("heavy_branch"):
            h = x
            for lin in self.heavy:
                h = torch.relu(lin(h))
        with record_function("light_branch"):
            y = x * self.scale
        return torch.cat([h, y], dim=1)


def two_branch():
    model = TwoBranch().eval()
    x = torch.randn(256, 512)

    def step():
        with torch.no_grad():
            return model(x)

    return step


def mlp_train():
    model = nn.Sequential(
        nn.Linear(256, 512),
        nn.ReLU(),
        nn.Linear(512, 512),
        nn.ReLU(),
        nn.Linear(512, 10),
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(64, 256)
    target = torch.randint(0, 10, (64,))

    def step():
        out = model(x)
        loss = loss_fn(out, target)
        loss.backward()
        opt.step()
        opt.zero_grad()

    return step


def cnn():
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(16, 10),
    )
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(8, 3, 32, 32)
    target = torch.randint(0, 10, (8,))

    def step():
        out = model(x)
        loss = loss_fn(out, target)
        loss.backward()
        opt.step()
        opt.zero_grad()

    return step


MODELS = {"two_branch": two_branch, "mlp_train": mlp_train, "cnn": cnn}


def gzip_file(src, dst):
    with open(src, "rb") as f:
        data = f.read()
    # mtime=0 and no file name in the header: same input, same bytes
    with open(dst, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz:
        gz.write(data)


def trace(name, out_dir):
    torch.manual_seed(0)
    step = MODELS[name]()
    step()  # warm-up, outside the profiled window
    with tempfile.TemporaryDirectory() as tmp:
        et_tmp = os.path.join(tmp, name + ".et.json")
        kineto_tmp = name + ".kineto.json"  # relative: it becomes Kineto's traceName
        et = ExecutionTraceObserver().register_callback(et_tmp)
        with profile(
            activities=[ProfilerActivity.CPU],
            record_shapes=True,
            profile_memory=True,
            execution_trace_observer=et,
        ) as prof:
            step()
        # leaving the profile already called et.cleanup(): the process node
        # and "finish_ts" are written and the file is closed
        cwd = os.getcwd()
        os.chdir(tmp)
        try:
            prof.export_chrome_trace(kineto_tmp)
        finally:
            os.chdir(cwd)
        written = []
        for src, kind in ((os.path.join(tmp, kineto_tmp), "kineto"), (et_tmp, "et")):
            dst = os.path.join(out_dir, f"{name}.{kind}.json.gz")
            gzip_file(src, dst)
            written.append(dst)
    return written


def main(argv):
    if not argv:
        # one fresh process per model: ids (rf_id, node/tensor/storage ids)
        # then start from the same point whatever ran before
        print("torch", torch.__version__, flush=True)
        for name in MODELS:
            subprocess.run([sys.executable, os.path.abspath(__file__), name], check=True)
        return
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    for name in argv:
        for path in trace(name, HERE):
            print(f"wrote {os.path.relpath(path)} ({os.path.getsize(path)} bytes)", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
