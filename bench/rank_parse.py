"""A job's rank files through the ingest's preparation (parse, check,
enrich; no database), against its largest file alone.

``python -m bench.rank_parse OUTDIR --mb 16`` makes a job of rank files
(each of PARAM's 8 DLRM rank files in tests/data/nccl_dlrm replicated in
time to about ``--mb`` MB of JSON, see ``bench.hta_compare big``) and
prepares, each in a fresh process, its largest file alone, and the whole
job in this process only (``TRACEGRAPH_PARSE_WORKERS=1``) and with a
worker process per file up to the cores (``ingest/parallel.py``). It
prints the seconds (parse / enrich) and the peak memory of each (the
preparing process's and its largest worker's), and the job's parse time
against the issue's target: the largest file's times ceil(files / cores).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_ONE = """
import json, os, resource, sys, time
from pathlib import Path
from tracegraph.ingest import pipeline
os.environ["TRACEGRAPH_PARSE_WORKERS"] = sys.argv[1]
paths = [Path(p) for p in sys.argv[2:]]
t0 = time.perf_counter()
prepared = pipeline.prepare(paths, "bench")
print(json.dumps({"s": time.perf_counter() - t0, **prepared.timings,
    "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "worker_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""


def timed(paths: list[Path], workers: int) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _ONE, str(workers), *map(str, paths)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


def dlrm_job(out: Path, mb: float) -> list[Path]:
    """PARAM's 8 DLRM rank files each replicated to about ``mb`` MB of JSON
    in ``out`` (made once: files already there are kept)."""
    from bench.hta_compare import big

    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for src in sorted((ROOT / "tests" / "data" / "nccl_dlrm").glob("worker*.pt.trace.json.gz")):
        dst = out / src.name
        if not dst.exists():
            big(src, dst, mb)
        paths.append(dst)
    return paths


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path)
    p.add_argument("--mb", type=float, default=16)
    args = p.parse_args(argv)
    from tracegraph.ingest import parallel

    paths = dlrm_job(args.out, args.mb)
    largest = max(paths, key=lambda q: q.stat().st_size)
    print(f"{len(paths)} rank files, {sum(q.stat().st_size for q in paths) / 1e6:.0f} MB gzipped")
    cores = parallel.cores()
    runs = {}
    for what, files, workers in (
        ("largest file", [largest], 1),
        ("whole job", paths, 1),
        ("whole job", paths, min(len(paths), cores)),
    ):
        r = timed(files, workers)
        runs[(what, workers)] = r
        print(
            f"{what:12s} {workers} process{'es' if workers > 1 else '  '} {r['s']:6.2f} s "
            f"(parse {r['parse_s']:5.2f}, enrich {r['enrich_s']:5.2f})  "
            f"peak {r['rss_mb']:5.0f} MB (largest worker {r['worker_mb']:4.0f} MB)",
            flush=True,
        )
    one = runs[("largest file", 1)]["parse_s"]
    job = runs[("whole job", min(len(paths), cores))]["parse_s"]
    target = one * math.ceil(len(paths) / cores)
    print(
        f"whole job's parse / (largest file's x ceil({len(paths)} files / {cores} cores)): "
        f"{job:.2f} / {target:.2f} s = {job / target:.2f}x"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
