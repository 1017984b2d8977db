"""A job's rank files through the ingest's preparation (parse, check,
enrich; no database), against its largest file alone.

``python -m bench.rank_parse OUTDIR --mb 16`` makes a job of rank files
(each of PARAM's 8 DLRM rank files in tests/data/nccl_dlrm replicated in
time to about ``--mb`` MB of JSON, see ``bench.hta_compare big``) and
prepares, each in a fresh process, its largest file alone and the whole
job, with Python's garbage collector paused as the ingest does
(``ingest.pipeline.collector_paused``) and, for comparison, left on. It
prints the seconds (parse / enrich) and the peak memory of each, and the
job's time over its largest file's.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_ONE = """
import contextlib, json, resource, sys, time
from pathlib import Path
from tracegraph.ingest import pipeline
if sys.argv[1] == "on":
    pipeline.collector_paused = contextlib.nullcontext
paths = [Path(p) for p in sys.argv[2:]]
t0 = time.perf_counter()
prepared = pipeline.prepare(paths, "bench")
print(json.dumps({"s": time.perf_counter() - t0, **prepared.timings,
    "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def timed(paths: list[Path], collector: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _ONE, collector, *map(str, paths)], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path)
    p.add_argument("--mb", type=float, default=16)
    args = p.parse_args(argv)
    from bench.hta_compare import big

    args.out.mkdir(parents=True, exist_ok=True)
    paths = []
    for src in sorted((ROOT / "tests" / "data" / "nccl_dlrm").glob("worker*.pt.trace.json.gz")):
        dst = args.out / src.name
        if not dst.exists():
            big(src, dst, args.mb)
        paths.append(dst)
    largest = max(paths, key=lambda q: q.stat().st_size)
    print(f"{len(paths)} rank files, {sum(q.stat().st_size for q in paths) / 1e6:.0f} MB gzipped")
    runs = {}
    for what, files in (("largest file", [largest]), ("whole job", paths)):
        for collector in ("paused", "on"):
            r = timed(files, collector)
            runs[(what, collector)] = r
            print(
                f"{what:12s} collector {collector:6s} {r['s']:6.2f} s "
                f"(parse {r['parse_s']:5.2f}, enrich {r['enrich_s']:5.2f})  peak {r['rss_mb']:5.0f} MB",
                flush=True,
            )
    job, one = runs[("whole job", "paused")]["s"], runs[("largest file", "paused")]["s"]
    print(f"whole job / largest file: {job / one:.1f}x for {len(paths)} files")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
