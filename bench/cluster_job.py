"""A job's rank files into Neo4j in one process and through a Dask cluster.

``python -m bench.cluster_job OUTDIR --db bolt://HOST:7687 --mb 16`` makes
the job of ``bench.rank_parse`` (PARAM's 8 DLRM rank files, each
replicated in time to about ``--mb`` MB of JSON) and ingests it into the
Neo4j at ``--db``, each run in a fresh process: in that process alone
(its ranks on threads), and with ``--cluster local:N`` (``--workers``, a
LocalCluster of N worker processes). It prints the seconds (parse, write,
the job's pass), the client's peak memory and the largest peak of the
processes it waited for (with a cluster: the workers and their nannies),
and checks that both runs stored the same counts. ``--files RANK...`` takes
a job's rank files as they are instead (what its test runs: a small job,
the script's workings rather than its figures). The traces are dropped
afterwards (a warning when the server refuses: on a 1 GB heap the drop of
the 16 MB job's 405k nodes runs out of transaction memory).
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
db, trace, spec, *paths = sys.argv[1:]
graph = open_graph(db)
t0 = time.perf_counter()
if spec == "-":
    report = ingest(graph, [Path(p) for p in paths], trace, replace=True)
else:
    with cluster.connect(spec) as ranks:
        t0 = time.perf_counter()  # (the cluster's start not counted)
        report = ingest(graph, [Path(p) for p in paths], trace, replace=True, ranks=ranks)
s = time.perf_counter() - t0
graph.close()
print(json.dumps({"s": s, **report.timings, "counts": report.counts,
    "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "children_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""


def timed(db: str, trace: str, spec: str, paths: list[Path]) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _ONE, db, trace, spec, *map(str, paths)],
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
    p.add_argument("--files", nargs="+", type=Path, help="a job's rank files, as they are (instead of DLRM's)")
    args = p.parse_args(argv)
    from bench.rank_parse import dlrm_job

    paths = args.files or dlrm_job(args.out, args.mb)
    print(f"{len(paths)} rank files, {sum(q.stat().st_size for q in paths) / 1e6:.0f} MB gzipped, into {args.db}")
    runs = {}
    for what, spec in (("one process", "-"), (f"local:{args.workers}", f"local:{args.workers}")):
        r = timed(args.db, f"bench-cluster-job-{len(runs)}", spec, paths)
        runs[what] = r
        print(
            f"{what:12s} {r['s']:7.2f} s (parse {r['parse_s']:6.2f}, write {r.get('write_s', 0):6.2f}, "
            f"job {r.get('job_s', 0):5.2f})  client peak {r['rss_mb']:5.0f} MB "
            f"(largest child {r['children_mb']:4.0f} MB)"
        )
    from tracegraph.db.connect import open_graph
    from tracegraph.errors import UserError

    graph = open_graph(args.db)
    for k in range(len(runs)):
        try:
            graph.drop_trace(f"bench-cluster-job-{k}")
        except UserError as e:
            print(f"warning: trace bench-cluster-job-{k} not dropped: {e}")
    graph.close()
    counts = [r["counts"] for r in runs.values()]
    print("same counts" if counts[0] == counts[1] else f"COUNTS DIFFER: {counts}")
    return 0 if counts[0] == counts[1] else 1


if __name__ == "__main__":
    sys.exit(main())
