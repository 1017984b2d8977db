"""A Neo4j database of many traces: does anything slow down as it fills?

    python -m bench.neo4j_many_traces --db bolt://127.0.0.1:7687 [--traces 50] [--ops 10000] [--big 100000]

On a scratch server (it drops every trace there first): stores ``--traces``
generated steps of ``--ops`` ops (bench/generate.py, one seed each, so
no two are alike), timing each store, then one step of ``--big`` ops;
then times, warm (median of ``--repeat`` runs after one warm-up), the
``traces`` listing and every catalog analysis on the big step; then
drops one of the small traces and times the big step's analyses and one
more store again. Printed as it goes, and as JSON at the end
(``--json PATH``). Stores are timed from the parsed, enriched tables:
what the database does, not the parser.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import generate
from bench.neo4j_reference import empty
from bench.run import analysis_calls


def tables_for(ops: int, seed: int) -> Any:
    from tracegraph.ingest.pipeline import parse_files, tables_of

    with tempfile.TemporaryDirectory() as tmp:
        files = generate.write(generate.generate(ops, seed=seed), Path(tmp))
        tf = parse_files([files["binary"]])
        return tables_of(tf)


def warm(fn: Any, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def analyses(graph: Any, trace: str, base: str, repeat: int, timeout_ms: int) -> dict[str, Any]:
    from tracegraph.errors import UserError
    from tracegraph.queries.run import run_analysis

    out: dict[str, Any] = {}
    for name, params, skipped in analysis_calls(graph, trace, base):
        if skipped:
            out[name] = skipped
            continue
        try:
            took = warm(lambda n=name, p=params: run_analysis(graph, n, trace, p, timeout_ms=timeout_ms), repeat)
        except UserError as e:
            out[name] = f"error: {e}"
        else:
            out[name] = round(took, 4)
        print(f"    {name:26s} {out[name]}", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--db", required=True, help="a scratch Neo4j server's URI: every trace there is dropped")
    p.add_argument("--traces", type=int, default=50)
    p.add_argument("--ops", type=int, default=10_000)
    p.add_argument("--big", type=int, default=100_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--timeout-ms", type=int, default=60_000)
    p.add_argument("--json", type=Path)
    p.add_argument("--keep", action="store_true", help="leave the traces stored (default: empty the server again)")
    args = p.parse_args(argv)

    from tracegraph.db.connect import open_graph
    from tracegraph.queries.traces import list_traces

    graph = open_graph(args.db)
    assert graph.backend == "neo4j", "--db must name a Neo4j server"
    empty(graph)
    report: dict[str, Any] = {"traces": args.traces, "ops": args.ops, "big": args.big, "stores_s": []}

    small = [tables_for(args.ops, seed) for seed in range(min(args.traces, 5))]
    elements = small[0].elements()
    for i in range(args.traces):
        t0 = time.perf_counter()
        graph.store_trace(f"many-{i:03d}", small[i % len(small)])
        took = time.perf_counter() - t0
        report["stores_s"].append(round(took, 3))
        print(f"store {i + 1:3d}/{args.traces}: {took:6.2f} s  ({elements / took:,.0f} elements/s)", flush=True)

    big = tables_for(args.big, 100)
    t0 = time.perf_counter()
    graph.store_trace("many-big", big)
    report["big_store_s"] = round(time.perf_counter() - t0, 2)
    print(f"store {args.big:,}-op step: {report['big_store_s']} s ({big.elements():,} elements)", flush=True)
    report["elements_stored"] = args.traces * elements + big.elements()

    report["traces_listing_s"] = round(warm(lambda: list_traces(graph), args.repeat), 4)
    print(f"traces listing ({args.traces + 1} traces): {report['traces_listing_s']} s warm", flush=True)
    print(f"analyses on the {args.big:,}-op step, warm:", flush=True)
    report["analyses_s"] = analyses(graph, "many-big", "many-000", args.repeat, args.timeout_ms)

    t0 = time.perf_counter()
    graph.drop_trace("many-001")
    report["drop_s"] = round(time.perf_counter() - t0, 2)
    print(f"drop one {args.ops:,}-op trace: {report['drop_s']} s; the big step's analyses again:", flush=True)
    report["analyses_after_drop_s"] = analyses(graph, "many-big", "many-000", args.repeat, args.timeout_ms)
    t0 = time.perf_counter()
    graph.store_trace("many-after", small[0])
    report["store_after_drop_s"] = round(time.perf_counter() - t0, 2)
    print(f"store one more {args.ops:,}-op step: {report['store_after_drop_s']} s", flush=True)

    numbers = [v for v in report["analyses_s"].values() if isinstance(v, float)]
    slow = {k: v for k, v in report["analyses_s"].items() if isinstance(v, float) and v >= 1.0}
    print(
        f"\nstores: first {report['stores_s'][0]} s, median {statistics.median(report['stores_s'])} s, "
        f"last {report['stores_s'][-1]} s; analyses on the big step: {len(numbers)} timed, "
        f"slowest {max(numbers, default=0):.3f} s; at or over 1 s: {slow or 'none'}"
    )
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    if not args.keep:
        # Millions of elements left in a test server make its next start
        # (and every wipe of the test suite) slow.
        empty(graph)
    graph.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
