"""A job's rank files into Neo4j in one process and through a Dask cluster.

``python -m bench.cluster_job OUTDIR --db bolt://HOST:7687 --mb 16`` makes
the job of ``bench.rank_parse`` (PARAM's 8 DLRM rank files, each
replicated in time to about ``--mb`` MB of JSON) and ingests it into the
Neo4j at ``--db``, each run in a fresh process: in that process alone
(its ranks on threads), and with ``--cluster local:N`` (``--workers``, a
LocalCluster of N worker processes). It prints the seconds (parse, write,
the job's pass), the client's peak memory and the largest peak of the
processes it waited for (with a cluster: the workers and their nannies),
and checks that both runs stored the same counts. The traces are dropped
afterwards (a warning when the server refuses: on a 1 GB heap the drop of
the 16 MB job's 405k nodes runs out of transaction memory), unless
``--keep``.

``--files RANK_FILE...`` takes a job's rank files as they are (the 64 x 16
MB job of ``bench.hta_compare job OUTDIR --ranks 64``; a small job in its
test, which checks the script's workings, not its figures); ``--runs`` picks the
runs: ``one`` (the job in one process), ``cluster`` (through the
cluster, its files got as ``--cluster-files`` says) and ``rank`` (the
first rank file alone in one process: one rank's work, the yardstick of
the cluster client's memory).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_ONE = """
import json, resource, sys, time
from pathlib import Path
from tracegraph.db.connect import open_graph
from tracegraph.ingest import cluster
from tracegraph.ingest.pipeline import ingest
db, trace, spec, files, *paths = sys.argv[1:]
graph = open_graph(db)
t0 = time.perf_counter()
if spec == "-":
    report = ingest(graph, [Path(p) for p in paths], trace, replace=True)
else:
    with cluster.connect(spec, files=files) as ranks:
        t0 = time.perf_counter()  # (the cluster's start not counted)
        report = ingest(graph, [Path(p) for p in paths], trace, replace=True, ranks=ranks)
s = time.perf_counter() - t0
graph.close()
print(json.dumps({"s": s, **report.timings, "counts": report.counts,
    "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "children_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""


def timed(db: str, trace: str, spec: str, paths: list[Path], files: str = "auto") -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _ONE, db, trace, spec, files, *map(str, paths)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path)
    p.add_argument("--db", required=True, help="a Neo4j URI (bolt://127.0.0.1:7687)")
    p.add_argument("--mb", type=float, default=16)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--files", type=Path, nargs="+", help="the job's rank files (default: make the DLRM job in OUT)")
    p.add_argument("--runs", default="one,cluster", help="comma-separated: one, cluster, rank (default one,cluster)")
    p.add_argument("--cluster-files", default="auto", choices=["auto", "shared", "send"])
    p.add_argument("--keep", action="store_true", help="leave the traces in the database")
    args = p.parse_args(argv)
    from bench.rank_parse import dlrm_job

    paths = args.files or dlrm_job(args.out, args.mb)
    print(f"{len(paths)} rank files, {sum(q.stat().st_size for q in paths) / 1e6:.0f} MB on disk, into {args.db}")
    spec = f"local:{args.workers}"
    plans = {
        "one": ("one process", "-", paths),
        "cluster": (f"{spec} ({args.cluster_files})", spec, paths),
        "rank": ("one rank", "-", paths[:1]),
    }
    runs = {}
    for run in args.runs.split(","):
        what, where, files = plans[run]
        r = timed(args.db, f"bench-cluster-job-{run}", where, files, args.cluster_files)
        runs[run] = r
        print(
            f"{what:18s} {r['s']:7.2f} s (parse {r['parse_s']:6.2f}, write {r.get('write_s', 0):6.2f}, "
            f"job {r.get('job_s', 0):5.2f})  client peak {r['rss_mb']:5.0f} MB "
            f"(largest child {r['children_mb']:4.0f} MB)",
            flush=True,
        )
    if "rank" in runs and "cluster" in runs:
        ratio = runs["cluster"]["rss_mb"] / runs["rank"]["rss_mb"]
        print(f"cluster client peak / one rank's: {ratio:.2f}")
    if not args.keep:
        from tracegraph.db.connect import open_graph
        from tracegraph.errors import UserError

        graph = open_graph(args.db)
        for run in runs:
            try:
                graph.drop_trace(f"bench-cluster-job-{run}")
            except UserError as e:
                print(f"warning: trace bench-cluster-job-{run} not dropped: {e}")
        graph.close()
    if "one" in runs and "cluster" in runs:
        counts = [runs["one"]["counts"], runs["cluster"]["counts"]]
        print("same counts" if counts[0] == counts[1] else f"COUNTS DIFFER: {counts}")
        return 0 if counts[0] == counts[1] else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
