"""``tracegraph``: ingest traces, list them, run the catalog, ad-hoc Cypher.

Exit codes: 0 success, 1 a user error (one line on stderr; ``--debug`` adds
the traceback), 2 a usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import tracegraph
from tracegraph.errors import BadRequest, UserError, first_line

if TYPE_CHECKING:  # imported where used: a command loads only what it needs
    from rich.progress import TaskID

    from tracegraph.db.base import Graph
    from tracegraph.queries.ingest import Cluster, PhaseProgress


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    if args.debug:
        import logging

        logging.basicConfig(level=logging.DEBUG, format="%(levelname)s %(name)s: %(message)s")
        # The drivers' own debug output is every packet: warnings are what helps.
        for noisy in ("neo4j", "urllib3", "asyncio"):
            logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        return args.func(args) or 0
    except UserError as e:
        if args.debug:
            raise
        hint = f" ({e.cli_hint})" if e.cli_hint else ""
        print(f"tracegraph: error: {first_line(e)}{hint}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("tracegraph: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `tracegraph query ... | head`
        sys.stderr.close()
        return 0


@contextmanager
def _graph(args: argparse.Namespace) -> Iterator[Graph]:
    from tracegraph.db.connect import open_graph

    graph = open_graph(args.db)
    try:
        yield graph
    finally:
        graph.close()


@contextmanager
def _cluster(args: argparse.Namespace) -> Iterator[Cluster | None]:
    """The Dask cluster of ``--cluster`` (refused before any work for a
    database its workers cannot write into); its dashboard's link on stderr."""
    if not args.cluster:
        yield None
        return
    from tracegraph.db.connect import db_uri, parse
    from tracegraph.queries.ingest import cluster

    backend = parse(db_uri(args.db)).backend
    scratch = Path(args.cluster_scratch) if args.cluster_scratch else None
    with cluster(args.cluster, backend, scratch, args.cluster_files) as ranks:
        if ranks.dashboard:
            print(f"Dask dashboard: {ranks.dashboard}", file=sys.stderr)
        yield ranks


@contextmanager
def _progress(args: argparse.Namespace) -> Iterator[PhaseProgress | None]:
    """Progress bars on stderr while an ingest runs, when stderr is a
    terminal and not ``--quiet``: its phases with counts and rate."""
    if args.quiet or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

    labels = {
        "parse": "parsing (bytes)",
        "enrich": "enriching",
        "write": "writing (graph elements)",
        "write ranks": "writing (ranks)",
    }
    with Progress(
        TextColumn("{task.description:26s}"),
        BarColumn(),
        MofNCompleteColumn(),
        TaskProgressColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bars:
        tasks: dict[str, TaskID] = {}

        def report(phase: str, done: int, total: int | None) -> None:
            if phase not in tasks:
                tasks[phase] = bars.add_task(labels.get(phase, phase), total=total, rate="")
            task = bars.tasks[tasks[phase]]
            rate = f"{done / task.elapsed:,.0f}/s" if phase == "write" and task.elapsed else ""
            bars.update(tasks[phase], completed=done, total=total, rate=rate)

        yield report


def _params(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UserError(f"--param wants key=value, got {pair!r}")
        out[key] = value
    return out


def cmd_ingest(args: argparse.Namespace) -> int:
    from tracegraph.queries.ingest import default_trace_name, prepare, store

    paths = [Path(p) for p in args.paths]
    name = args.trace or default_trace_name(paths[0])
    with _cluster(args) as ranks, _progress(args) as progress:
        # Bad input is refused before the database is opened (or started).
        prepared = prepare(paths, name, fmt=args.format, progress=progress, ranks=ranks, step_marker=args.step_marker)
        with _graph(args) as graph:
            result = store(graph, prepared, replace=args.replace, progress=progress)
    t = result.timings
    print(
        f"trace {result.trace}: {sum(result.nodes.values()) + 1:,} nodes, {sum(result.relationships.values()):,} "
        f"relationships in {t['total_s']:.2f} s "
        f"(parse {t['parse_s']:.2f} s, enrich {t['enrich_s']:.2f} s, load {t['load_s']:.2f} s)"
    )
    for kind, counts in (("nodes", result.nodes), ("relationships", result.relationships)):
        print(f"  {kind}: " + ", ".join(f"{k} {v:,}" for k, v in counts.items() if v))
    print("  " + result.summary.path_summary())
    for warning in result.summary.warnings:
        print(f"  warning: {warning}")
    return 0


def cmd_traces(args: argparse.Namespace) -> int:
    from tracegraph.output import render, terminal_width
    from tracegraph.queries.traces import list_traces
    from tracegraph.queries.types import as_json

    with _graph(args) as graph:
        traces = list_traces(graph)
    if args.format == "json":
        print(json.dumps(as_json(traces), indent=2))
        return 0
    cols = ["trace", "framework", "ops", "span_us", "critical_path_us", "observed_path_us", "memory_peak_bytes"]
    rows = [[getattr(t, c) for c in cols] + [t.ingested_at, t.sources] for t in traces]
    print(render([*cols, "ingested_at", "sources"], rows, args.format, terminal_width()))
    return 0


def cmd_drop(args: argparse.Namespace) -> int:
    from tracegraph.queries.traces import drop_trace

    with _graph(args) as graph:
        dropped = drop_trace(graph, args.trace)
    print(f"dropped trace {dropped.trace} ({dropped.deleted_nodes:,} nodes)")
    return 0


def cmd_queries(args: argparse.Namespace) -> int:
    from tracegraph.output import render, terminal_width
    from tracegraph.queries.catalog import catalog
    from tracegraph.queries.types import as_json

    infos = [a.info() for a in catalog().values()]
    if args.format == "json":
        print(json.dumps(as_json(infos), indent=2))
        return 0
    rows = [
        [a.name, a.summary, ", ".join(p.name + ("" if p.required else f"={p.default}") for p in a.params)]
        for a in infos
    ]
    print(render(["name", "summary", "params"], rows, args.format, terminal_width()))
    return 0


def cmd_query(args: argparse.Namespace) -> int:
    from tracegraph.output import render, terminal_width
    from tracegraph.queries.run import run_analysis

    with _graph(args) as graph:
        result = run_analysis(graph, args.name, args.trace, _params(args.param))
    if result.unavailable is not None:
        print(result.unavailable.note, file=sys.stderr)
        if args.format == "json":
            print("[]")
        return 0
    print(render(result.columns, result.rows, args.format, terminal_width()))
    if result.note:
        print(result.note, file=sys.stderr)
    return 0


def cmd_cypher(args: argparse.Namespace) -> int:
    from tracegraph.output import render, terminal_width
    from tracegraph.queries.cypher import param_from_text, run_cypher

    params = {k: param_from_text(v) for k, v in _params(args.param).items()}
    with _graph(args) as graph:
        res = run_cypher(graph, args.query, params, trace=args.trace, write=args.write)
    if res.columns:
        print(render(res.columns, res.rows, args.format, terminal_width()))
    if args.write:
        print(", ".join(f"{k} {v}" for k, v in res.changes.items()) or "no changes", file=sys.stderr)
    return 0


def cmd_whatif(args: argparse.Namespace) -> int:
    from tracegraph.output import render, terminal_width
    from tracegraph.queries.types import as_json
    from tracegraph.queries.whatif import what_if

    with _graph(args) as graph:
        result = what_if(graph, args.trace, args.match, args.factor)
    if args.format == "json":
        print(json.dumps(as_json(result), indent=2))
    if result.unavailable is not None:
        print(result.unavailable.note, file=sys.stderr)
        return 0
    if args.format == "json":
        return 0
    assert result.critical_path_us is not None and result.baseline_us is not None
    speedup = f"{result.speedup:.4g}x" if result.speedup is not None else "n/a"
    print(
        f"trace {result.trace}: {result.matched_ops:,} ops matching {' or '.join(result.match)} "
        f"scaled by {result.factor:g}"
    )
    print(
        f"critical path {result.critical_path_us:,.1f} us (baseline {result.baseline_us:,.1f} us, "
        f"speedup {speedup}), {len(result.path)} ops:"
    )
    cols = ["step", "op", "type", "weight_us", "base_weight_us", "scaled"]
    print(render(cols, [[getattr(p, c) for c in cols] for p in result.path], "table", terminal_width()))
    if not result.matched_ops:
        print(f"no executed op matches {' or '.join(result.match)}: nothing changed", file=sys.stderr)
    return 0


HEADLINE = [("top-ops", {"n": "5"}), ("critical-path", {}), ("peak-memory", {})]


def cmd_demo(args: argparse.Namespace) -> int:
    from importlib import resources

    from tracegraph.output import render, terminal_width
    from tracegraph.queries.ingest import prepare, store
    from tracegraph.queries.run import run_analysis

    root = resources.files("tracegraph.examples") / "traces"
    samples = [
        ("alexnet", ["tf1-alexnet-stepstats.pbtxt", "tf1-alexnet-oplist.txt"]),
        ("resnet50-opnames", ["tf2-resnet50-opnames.txt"]),
        ("vgg19-chainer", ["chainer-vgg19-graph.txt"]),
        ("resnet50-megengine", ["megengine-resnet50-profile.json"]),
        ("cnn-pytorch", ["pytorch-cnn-cpu.pt.trace.json.gz"]),
        ("mlp-pytorch-et", ["pytorch-mlp-train.kineto.json.gz", "pytorch-mlp-train.et.json.gz"]),
        ("mlp-jax", ["jax-train-step.xplane.pb.gz"]),
        ("ddp-straggler", [f"pytorch-gloo-straggler.rank{r}.json.gz" for r in range(4)]),
    ]
    with _graph(args) as graph:
        for name, files in samples:
            paths = [Path(str(root / f)) for f in files if (root / f).is_file()]
            try:
                result = store(graph, prepare(paths, name), replace=True)
            except UserError as e:
                print(f"== {name}: skipped: {e}")
                continue
            nodes = sum(result.nodes.values()) + 1
            rels = sum(result.relationships.values())
            print(
                f"== ingested {name} from {', '.join(p.name for p in paths)}: {nodes:,} nodes, {rels:,} relationships"
            )
        for analysis, params in HEADLINE:
            print(f"\n== {analysis} --trace alexnet")
            res = run_analysis(graph, analysis, "alexnet", params)
            rows = res.rows if analysis != "critical-path" else res.rows[:12]
            print(res.note if not res.rows else render(res.columns, rows, "table", terminal_width()))
            if analysis == "critical-path" and len(res.rows) > len(rows):
                total = sum(r[3] for r in res.rows)
                print(f"... {len(res.rows)} ops, {total:,.0f} us in all")
        print("\n== straggler-ranks --trace ddp-straggler (4 ranks; rank 2 slept 80 ms before an all-reduce)")
        res = run_analysis(graph, "straggler-ranks", "ddp-straggler")
        print(res.note if not res.rows else render(res.columns, res.rows, "table", terminal_width()))
        from tracegraph.queries.traces import list_traces

        cols = ["trace", "framework", "ops", "span_us", "critical_path_us", "observed_path_us", "memory_peak_bytes"]
        print("\n== traces (span and critical paths in us; steps for vgg19-chainer)")
        traces = list_traces(graph)
        print(render(cols, [[getattr(t, c) for c in cols] for t in traces], "table", terminal_width()))
        for t in traces:
            print(t.path_summary())
        print("\nMore: tracegraph queries; tracegraph query NAME --trace alexnet")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from tracegraph.api.app import serve

    if args.workers < 1:
        raise BadRequest(f"--workers must be at least 1, got {args.workers}")
    return serve(host=args.host, port=args.port, db=args.db, log_level=args.log_level, workers=args.workers)


def cmd_mcp(args: argparse.Namespace) -> int:
    from tracegraph.api.mcp_server import serve_http, serve_stdio

    root = Path(args.root) if args.root else None
    if args.http:
        return serve_http(args.db, root, args.host, args.port)
    return serve_stdio(args.db, root)


def _common_options(*, before_command: bool) -> argparse.ArgumentParser:
    """``--db`` and ``--debug``, accepted before the command and after it.
    After it they default to *absent*: argparse copies a subcommand's
    defaults over what was parsed before the command, so ``tracegraph --db
    URI ingest ...`` would otherwise silently use the default database."""
    c = argparse.ArgumentParser(add_help=False)
    c.add_argument(
        "--db",
        default=None if before_command else argparse.SUPPRESS,
        help="neo4j://host:7687, bolt://..., falkordb://host:port; default: $TRACEGRAPH_DB, else the embedded FalkorDB",
    )
    c.add_argument(
        "--debug", action="store_true", default=False if before_command else argparse.SUPPRESS, help="show tracebacks"
    )
    return c


def _parser() -> argparse.ArgumentParser:
    from tracegraph.queries.ingest import format_names

    top, common = _common_options(before_command=True), _common_options(before_command=False)
    fmt = argparse.ArgumentParser(add_help=False)
    fmt.add_argument("--format", choices=["table", "json", "csv"], default="table")
    params = argparse.ArgumentParser(add_help=False)
    params.add_argument("--param", action="append", metavar="KEY=VALUE", default=[])

    p = argparse.ArgumentParser(
        prog="tracegraph", description="Deep-learning execution traces as a queryable graph.", parents=[top]
    )
    p.add_argument("--version", action="version", version=f"tracegraph {tracegraph.__version__}")
    sub = p.add_subparsers(metavar="COMMAND")

    s = sub.add_parser(
        "ingest",
        parents=[common],
        help="load trace file(s) as one trace",
        description="Load trace files as one trace. A directory stands for the files in it "
        "(sorted by name; hidden files and subdirectories skipped), which must "
        "form one trace as files given one by one would.",
    )
    s.add_argument("paths", nargs="+", metavar="PATH", help="a trace file, or a directory of them")
    s.add_argument("--trace", help="trace name (default: the first file's name without .json, .gz, .pb, ...)")
    s.add_argument("--format", default="auto", choices=["auto", *format_names()])
    s.add_argument("--replace", action="store_true", help="overwrite an existing trace of that name")
    s.add_argument(
        "--step-marker",
        metavar="REGEX",
        help="the ops that mark steps: a Python regular expression searched in op names, its first group of "
        "digits the step's number (default: ProfilerStep#N, ProfileStep#N and JAX/TF step annotations)",
    )
    s.add_argument("--quiet", action="store_true", help="no progress bars (they show only when stderr is a terminal)")
    s.add_argument(
        "--cluster",
        metavar="SCHEDULER",
        help="work a job's rank files on a Dask cluster, writing into Neo4j from its workers: "
        "tcp://HOST:8786, or local[:N] for a cluster of N worker processes on this machine",
    )
    s.add_argument(
        "--cluster-scratch",
        metavar="DIR",
        help="with --cluster: a directory the workers share with this machine for the ranks' spill files "
        "(default: the system's temporary directory, which only a local cluster shares)",
    )
    s.add_argument(
        "--cluster-files",
        choices=["auto", "shared", "send"],
        default="auto",
        help="with --cluster: how the workers get the rank files: shared (they read this machine's paths, "
        "on a volume they share), send (each file's bytes sent to one worker, which keeps its rank's spills "
        "on its own disk), or auto (shared when every worker sees every path, else send)",
    )
    s.set_defaults(func=cmd_ingest)

    s = sub.add_parser("traces", parents=[common, fmt], help="list traces")
    s.set_defaults(func=cmd_traces)

    s = sub.add_parser("drop", parents=[common], help="delete a trace")
    s.add_argument("trace")
    s.set_defaults(func=cmd_drop)

    s = sub.add_parser("queries", parents=[common, fmt], help="the analysis catalog")
    s.set_defaults(func=cmd_queries)

    s = sub.add_parser("query", parents=[common, fmt, params], help="run a catalog analysis on a trace")
    s.add_argument("name")
    s.add_argument("--trace", required=True)
    s.set_defaults(func=cmd_query)

    s = sub.add_parser(
        "cypher",
        parents=[common, fmt, params],
        help="run ad-hoc Cypher (read-only unless --write)",
        description="Run one Cypher statement. --trace T binds $trace to T and, on FalkorDB "
        "(where every trace is a graph of its own), runs it on T's graph; without "
        "--trace it sees the Trace and OpTotals nodes of every trace (on Neo4j: "
        "everything).",
    )
    s.add_argument("query")
    s.add_argument("--trace", help="the trace the query reads (bound as $trace)")
    s.add_argument("--write", action="store_true")
    s.set_defaults(func=cmd_cypher)

    s = sub.add_parser("whatif", parents=[common], help="scale matched ops' weights and recompute the critical path")
    s.add_argument("--trace", required=True)
    s.add_argument(
        "--match",
        action="append",
        required=True,
        metavar="type=REGEX|name=REGEX",
        help="ops to scale: type=REGEX (whole type) or name=REGEX (anywhere in the name); repeatable, any matches",
    )
    s.add_argument("--factor", type=float, required=True, help="multiply the matched ops' weights by this (0 to 1e6)")
    s.add_argument("--format", choices=["table", "json"], default="table")
    s.set_defaults(func=cmd_whatif)

    s = sub.add_parser(
        "demo", parents=[common], help="ingest the bundled sample traces and print the headline analyses"
    )
    s.set_defaults(func=cmd_demo)

    s = sub.add_parser(
        "serve",
        parents=[common],
        help="run the HTTP API (127.0.0.1:8000 unless told otherwise)",
        description="Serve the HTTP API. It binds 127.0.0.1 (this machine only) unless --host says "
        "otherwise; set TRACEGRAPH_API_KEY before exposing it (clients then send "
        "Authorization: Bearer <key>). Docs at http://HOST:PORT/docs.",
    )
    s.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; 0.0.0.0 for all interfaces)"
    )
    s.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    s.add_argument(
        "--workers",
        type=int,
        default=1,
        help="API processes on this port (default 1); they share ingest jobs through the database",
    )
    s.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    s.set_defaults(func=cmd_serve)

    s = sub.add_parser(
        "mcp",
        parents=[common],
        help="serve the Model Context Protocol over stdin/stdout, for AI assistants",
        description="A Model Context Protocol server over stdin/stdout: the traces, ingest, read-only "
        "Cypher and every catalog analysis as tools. It ingests only files under --root.",
    )
    s.add_argument("--root", help="the directory it may ingest from (default: the current directory)")
    s.add_argument("--http", action="store_true", help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio")
    s.add_argument("--host", default="127.0.0.1", help="--http: address to bind (default 127.0.0.1)")
    s.add_argument("--port", type=int, default=8001, help="--http: port (default 8001)")
    s.set_defaults(func=cmd_mcp)
    return p


if __name__ == "__main__":
    sys.exit(main())
