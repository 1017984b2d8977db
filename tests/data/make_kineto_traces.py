"""Generate the PyTorch (Kineto) CPU traces under tests/data/kineto/.

Not run by the tests (torch is not a tracegraph dependency); run it by hand
in a throwaway virtualenv with a CPU build of torch:

    python3.11 -m venv /tmp/torchvenv && /tmp/torchvenv/bin/pip install torch==2.13.0
    /tmp/torchvenv/bin/python tests/data/make_kineto_traces.py

It profiles one training step (forward, backward, SGD update) of a small CNN
and of a small LSTM with ``record_shapes=True, profile_memory=True``, under
``ProfilerStep`` annotations, and writes each trace gzipped with
``export_chrome_trace``; and the CNN's step again with ``with_stack=True``
too (Python frames as events: ``cnn-cpu-stack.pt.trace.json.gz``, made
with torch 2.14.1). Seeds and thread counts are fixed so that a rerun
gives traces of the same shape (the times differ, of course). Names given
as arguments (``cnn``, ``lstm``, ``cnn-stack``) make only those traces.
"""

from __future__ import annotations

import gzip
import shutil
import sys
import tempfile
from pathlib import Path

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, schedule

OUT = Path(__file__).resolve().parent / "kineto"


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(16 * 8 * 8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(torch.relu(self.conv1(x)))
        x = self.pool(torch.relu(self.conv2(x)))
        return self.fc(torch.flatten(x, 1))


class SmallLSTM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(100, 16)
        self.lstm = nn.LSTM(16, 32, batch_first=True)
        self.head = nn.Linear(32, 100)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(self.embed(tokens))
        return self.head(out[:, -1])


def train_steps(
    model: nn.Module, inputs: torch.Tensor, target: torch.Tensor, path: Path, steps: int, with_stack: bool = False
) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    def one_step() -> None:
        opt.zero_grad()
        loss = loss_fn(model(inputs), target)
        loss.backward()
        opt.step()

    one_step()  # warm the allocator and the kernels' first-call paths
    with tempfile.TemporaryDirectory() as tmp:
        plain = Path(tmp) / "trace.json"

        def ready(prof) -> None:
            prof.export_chrome_trace(str(plain))

        with profile(
            activities=[ProfilerActivity.CPU],
            record_shapes=True,
            profile_memory=True,
            with_stack=with_stack,
            schedule=schedule(wait=0, warmup=1, active=steps, repeat=1),
            on_trace_ready=ready,
        ) as prof:
            for _ in range(steps + 1):
                one_step()
                prof.step()
        with open(plain, "rb") as src, gzip.open(path, "wb", compresslevel=9) as dst:
            shutil.copyfileobj(src, dst)
    print(f"{path}: {path.stat().st_size:,} bytes", file=sys.stderr)


def main() -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    OUT.mkdir(parents=True, exist_ok=True)
    cnn = (SmallCNN(), torch.randn(4, 3, 32, 32), torch.randint(0, 10, (4,)))
    lstm = (SmallLSTM(), torch.randint(0, 100, (4, 12)), torch.randint(0, 100, (4,)))
    traces = {
        "cnn": lambda: train_steps(*cnn, OUT / "cnn-cpu.pt.trace.json.gz", steps=1),
        "lstm": lambda: train_steps(*lstm, OUT / "lstm-cpu.pt.trace.json.gz", steps=1),
        "cnn-stack": lambda: train_steps(*cnn, OUT / "cnn-cpu-stack.pt.trace.json.gz", steps=1, with_stack=True),
    }
    for name in sys.argv[1:] or list(traces):
        traces[name]()


if __name__ == "__main__":
    main()
