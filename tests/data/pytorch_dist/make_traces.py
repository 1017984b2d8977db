"""Make the multi-rank PyTorch profiler traces in this folder.

Four processes on this machine (``torch.distributed`` with the gloo
backend, CPU only) each run one training step of a small MLP under
``torch.profiler.profile`` (``record_shapes=True``) and export their own
Kineto trace: forward, cross-entropy loss, backward, then one
``dist.all_reduce`` per parameter gradient (four) and a
``dist.barrier()``. Three steps run under the profiler's schedule (skip one,
warm up on one, record one), so every rank records from the end of the
barrier that closes step 2, whatever its profiler's start-up took.

Written here, each ``NAME.rankR.json.gz`` (R = 0..3), gzipped with mtime=0:

- ``straggler``: rank 2 sleeps 80 ms (``time.sleep(0.08)``) after its
  backward, before its first all-reduce: every other rank waits for it
  inside that all-reduce.
- ``balanced``: the same step with no sleep.
- ``ddp``: the model wrapped in ``DistributedDataParallel`` with small
  gradient buckets (``bucket_cap_mb=0.25``: three all-reduces a step,
  issued during the backward pass, waited for at its end); rank 2 sleeps
  50 ms before its backward, so that one delay holds up every bucket's
  all-reduce of that step at once.

The test suite never imports torch; this script is run by hand, in a
throwaway virtual environment::

    python3 -m venv /tmp/torchenv && /tmp/torchenv/bin/pip install torch
    /tmp/torchenv/bin/python tests/data/pytorch_dist/make_traces.py

Made with torch 2.14.1 (the CPU code of the default wheel). The step is
tiny, so scheduling noise of four processes on a small machine shows in
the timings: the references in the tests are computed from these files,
not from the script's intent.
"""

import gzip
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORLD = 4
SLOW_RANK = 2
SLEEP_S = 0.08


def join(rank: int, world: int, port: str) -> None:
    """This process as rank ``rank`` of the job, seeded, on one thread."""
    import torch
    import torch.distributed as dist

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = port
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    torch.set_num_threads(1)


def record(step, out: str, rank: int) -> None:  # type: ignore[no-untyped-def]
    """Three ``step()`` calls under the profiler, the third recorded, then
    leave the job. Step 1 is skipped, step 2 warms the profiler up, step 3
    is recorded: every rank is recording already when step 3 starts, right
    after the barrier that ends step 2."""
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile, schedule

    with profile(
        activities=[ProfilerActivity.CPU],
        record_shapes=True,
        schedule=schedule(wait=1, warmup=1, active=1),
        on_trace_ready=lambda p: p.export_chrome_trace(f"{out}.rank{rank}.json"),
    ) as prof:
        for _ in range(3):
            step()
            prof.step()
    dist.destroy_process_group()


def worker(rank: int, world: int, out: str, sleep_s: float, port: str) -> None:
    import torch
    import torch.distributed as dist

    join(rank, world, port)
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    x = torch.randn(64, 256)
    y = torch.randint(0, 10, (64,))

    def step() -> None:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        if rank == SLOW_RANK and sleep_s:
            time.sleep(sleep_s)
        for p in model.parameters():
            dist.all_reduce(p.grad)
        dist.barrier()

    record(step, out, rank)


def ddp_worker(rank: int, world: int, out: str, sleep_s: float, port: str) -> None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    join(rank, world, port)
    layers = [torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256), torch.nn.ReLU()]
    model = DistributedDataParallel(torch.nn.Sequential(*layers, torch.nn.Linear(256, 10)), bucket_cap_mb=0.25)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(64, 256)
    y = torch.randint(0, 10, (64,))

    def step() -> None:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        if rank == SLOW_RANK and sleep_s:
            time.sleep(sleep_s)
        loss.backward()
        opt.step()
        dist.barrier()

    record(step, out, rank)


def make(name: str, sleep_s: float, port: str, run=worker) -> None:  # type: ignore[no-untyped-def]
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / name)
        mp.spawn(run, args=(WORLD, out, sleep_s, port), nprocs=WORLD)
        for rank in range(WORLD):
            src = Path(f"{out}.rank{rank}.json")
            with open(src, "rb") as f, gzip.GzipFile(HERE / f"{name}.rank{rank}.json.gz", "wb", mtime=0) as g:
                shutil.copyfileobj(f, g)


if __name__ == "__main__":
    # Names given as arguments (straggler, balanced, ddp) make only those jobs.
    jobs = {
        "straggler": lambda: make("straggler", SLEEP_S, "29561"),
        "balanced": lambda: make("balanced", 0.0, "29562"),
        "ddp": lambda: make("ddp", 0.05, "29563", ddp_worker),
    }
    for job in sys.argv[1:] or list(jobs):
        jobs[job]()
    sys.exit(0)
