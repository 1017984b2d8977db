"""Compile ingest's kernels once, before the tests run in parallel.

numba compiles a kernel on its first call and caches the machine code
beside its module (``__pycache__``); in a fresh checkout that first call
takes tens of seconds on a busy machine. ``tests/run.sh`` runs this first,
so that no test (least of all one that bounds a CLI call's time) pays for
it, and the test workers do not compile the same kernels side by side.

``tests/run.sh`` runs its two halves at once, in two processes: the
Kineto kernels (about 27 s on one core) and the rest (the other bundled
samples' formats and the bulk loader's cells, about 13 s); one process
would take their sum.
No argument compiles both.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def kineto() -> None:
    from tracegraph.ingest.pipeline import prepare

    data = ROOT / "tests" / "data"
    for paths in (
        [data / "hta" / "event_sync.json.gz"],  # kernels, syncs, streams
        sorted((data / "pytorch_dist").glob("straggler.rank*.json.gz")),  # host collectives, memory
        sorted((data / "nccl_dlrm").glob("*.gz")),  # NCCL collectives across ranks
    ):
        prepare(paths, "warm")


def rest() -> None:
    from tracegraph.columns import Lists, Strings, Texts
    from tracegraph.db import falkor_bulk
    from tracegraph.ingest.pipeline import prepare

    samples = ROOT / "examples" / "traces"
    prepare([samples / "tf1-alexnet-stepstats.pbtxt"], "warm")  # dependencies, tensors
    for paths in (  # the other bundled samples (the demo's), one per format
        [samples / "pytorch-mlp-train.et.json.gz", samples / "pytorch-mlp-train.kineto.json.gz"],
        [samples / "jax-train-step.xplane.pb.gz"],
        [samples / "chainer-vgg19-graph.txt"],
        [samples / "megengine-resnet50-profile.json"],
        [samples / "tf2-resnet50-opnames.txt"],
    ):
        prepare(paths, "warm")
    for column in (
        np.array([1.5, np.nan]),
        np.array([1, 2], dtype=np.int64),
        np.array([True, False]),
        Strings.of(["a", None]),
        Texts.of(["a", None]),
        Lists.of([[1.0], None], float),
        Lists.of([[1], None], int),
        Lists.of([[True], None], bool),
        Lists.of([["a"], None], str),
    ):
        falkor_bulk.blob(b"", [falkor_bulk.cells(column, False), falkor_bulk.cells(column, True)])


HALVES = {"kineto": kineto, "rest": rest}


def main(argv: list[str]) -> int:
    halves = argv or list(HALVES)
    unknown = sorted(set(halves) - set(HALVES))
    if unknown:
        print(f"warm_kernels.py: no half named {', '.join(unknown)} (one of: {', '.join(HALVES)})", file=sys.stderr)
        return 2
    for half in halves:
        HALVES[half]()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
