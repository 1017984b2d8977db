"""Sweep PyTorch Execution Trace (ET) + Kineto pairs through the CLI.

    python -m bench.et_sweep DIR... [--markdown] [--keep-home]

Finds the pairs under each DIR (recursively), then for each: ``tracegraph
ingest`` in a subprocess (one private TRACEGRAPH_HOME for the sweep, the
embedded database), and, when it ingested, every catalog analysis through
``tracegraph query`` and a ``tracegraph whatif``. The rule checked is the
issue's: each pair ingests or is refused in one line (exit 1), and every
analysis exits 0. Anything else is a crash: an exit code other than 0/1 for
ingest (other than 0 for an analysis), a Python traceback on stderr, or a
refusal longer than one line. The script fetches nothing: it reads what it
is pointed at. It exits 1 when it saw a crash.

What makes a unit (one trace):

* ``X.kineto.json[.gz]`` beside ``X.et.json[.gz]`` in one directory: the
  pair ``X`` (either alone: an ET alone, or a Kineto trace alone);
  Other ``.json[.gz]`` files beside such pairs are units alone;
* any other directory with files in it: the directory itself, given to
  ``ingest`` as a directory (it stands for the files directly in it: a
  pair whose files are named otherwise, the rank files of one job, or an
  ET alone).

For each unit it prints: ingest result (``ok`` / ``refused: <the line>``
/ ``CRASH``), the dependency carriers (``Op.carries_deps``), ``DATA``
edges, the dependency critical path, the observed critical path and the
span (us), and from the Trace node's meta the ET ops matched to Kineto
events, the ET carriers without a Kineto event and the Kineto ops without
an ET node, then how many analyses exited 0 and the slowest (process
start included).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PAIR = re.compile(r"^(?P<stem>.+)\.(?P<kind>kineto|et)\.json(\.gz)?$")
TRACE_FILE = re.compile(r"\.(json|json\.gz|et)$")  # files beside the pairs that are swept alone
TIMEOUT_S = 600  # per command


@dataclass
class Unit:
    name: str
    paths: list[Path]


@dataclass
class Result:
    unit: Unit
    ingest: str = ""  # ok / refused: ... / CRASH: ...
    seconds: float = 0.0
    facts: dict[str, Any] = field(default_factory=dict)
    carriers: int | None = None
    data_edges: int | None = None
    analyses_ok: int = 0
    analyses: int = 0
    crashes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # analyses that said "not available"
    slowest: tuple[str, float] = ("", 0.0)  # the analysis that took longest, and its seconds


def find_units(roots: list[Path]) -> list[Unit]:
    """The units under the roots (see the module docstring), in path order."""
    units: list[Unit] = []
    for root in roots:
        if root.is_file():
            units.append(Unit(root.name, [root]))
            continue
        for d, subdirs, names in os.walk(root):
            subdirs[:] = sorted(s for s in subdirs if not s.startswith("."))
            files = sorted(n for n in names if not n.startswith("."))
            if not files:
                continue
            here = Path(d)
            label = str(here.relative_to(root.parent)) if here != root else root.name
            stems: dict[str, dict[str, Path]] = {}
            for n in files:
                m = PAIR.match(n)
                if m:
                    stems.setdefault(m["stem"], {})[m["kind"]] = here / n
            pairs = {s: k for s, k in stems.items() if len(k) == 2}
            if pairs:
                for stem, kinds in sorted(stems.items()):
                    # Kineto first: the trace the ET joins
                    units.append(Unit(f"{label}/{stem}", [kinds[k] for k in ("kineto", "et") if k in kinds]))
                for n in files:
                    if not PAIR.match(n) and TRACE_FILE.search(n):
                        units.append(Unit(f"{label}/{n}", [here / n]))
            else:
                units.append(Unit(label, [here]))
    return units


class Cli:
    """``tracegraph`` subprocesses on one private data directory."""

    def __init__(self, home: Path, timeout_s: float = TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        self.env = dict(os.environ, TRACEGRAPH_HOME=str(home), TRACEGRAPH_IDLE_S="30")
        self.env.pop("TRACEGRAPH_DB", None)

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        """The command's result; one that runs past the timeout is killed and
        answers exit code -9 with ``timed out`` on stderr."""
        try:
            return subprocess.run(
                [sys.executable, "-m", "tracegraph.cli", *args],
                env=self.env,
                capture_output=True,
                text=True,
                timeout=self.timeout_s,
            )
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(args, -9, "", f"timed out after {self.timeout_s:g} s")

    def cypher(self, query: str, trace: str) -> list[list[Any]]:
        p = self.run("cypher", query, "--trace", trace, "--format", "json")
        if p.returncode != 0:
            raise RuntimeError(f"cypher exited {p.returncode}: {p.stderr.strip()}")
        rows = json.loads(p.stdout or "[]")
        return [list(r.values()) for r in rows]


def crash_reason(p: subprocess.CompletedProcess[str], ok_codes: tuple[int, ...]) -> str | None:
    err = p.stderr.strip()
    if "Traceback (most recent call last)" in err:
        return f"traceback, exit {p.returncode}: {err.splitlines()[-1]}"
    if p.returncode not in ok_codes:
        return f"exit {p.returncode}: {(err.splitlines() or [''])[-1]}"
    if p.returncode == 1 and len(err.splitlines()) != 1:
        return f"refusal in {len(err.splitlines())} lines: {err[:300]!r}"
    return None


def params_for(cli: Cli, analysis: dict[str, Any], trace: str) -> list[str]:
    """``--param`` arguments for an analysis's required parameters."""
    out: list[str] = []
    for p in analysis.get("params") or []:
        if not p.get("required"):
            continue
        name = p["name"]
        if name == "op":
            rows = cli.cypher(
                "MATCH (o:Op {trace: $trace})-[:DATA|CONTROL]-() RETURN o.name ORDER BY o.seq LIMIT 1", trace
            ) or cli.cypher("MATCH (o:Op {trace: $trace}) RETURN o.name ORDER BY o.seq LIMIT 1", trace)
            value = rows[0][0] if rows else "none"
        elif name == "base":
            value = trace
        elif name == "at_us":
            rows = cli.cypher(
                "MATCH (m:Allocator {trace: $trace}) WHERE m.peak_us IS NOT NULL "
                "RETURN m.peak_us ORDER BY m.peak_us LIMIT 1",
                trace,
            )
            value = rows[0][0] if rows else 0.0
        else:
            raise SystemExit(f"et_sweep: no value for required parameter {name} of {analysis['name']}")
        out += ["--param", f"{name}={value}"]
    return out


def sweep_unit(cli: Cli, unit: Unit, trace: str, catalog: list[dict[str, Any]]) -> Result:
    res = Result(unit)
    t = time.perf_counter()
    p = cli.run("ingest", *map(str, unit.paths), "--trace", trace, "--quiet")
    res.seconds = time.perf_counter() - t
    bad = crash_reason(p, (0, 1))
    if bad:
        res.ingest = "CRASH"
        res.crashes.append(f"ingest: {bad}")
        return res
    if p.returncode == 1:
        res.ingest = f"refused: {p.stderr.strip()}"
        return res
    res.ingest = "ok"
    listed = json.loads(cli.run("traces", "--format", "json").stdout)
    res.facts = next(x for x in listed if x["trace"] == trace)
    res.carriers = cli.cypher("MATCH (o:Op {trace: $trace}) WHERE o.carries_deps RETURN count(o)", trace)[0][0]
    res.data_edges = res.facts["counts"]["relationships"].get("DATA")
    for a in catalog:
        res.analyses += 1
        args = params_for(cli, a, trace)
        t = time.perf_counter()
        q = cli.run("query", a["name"], "--trace", trace, "--format", "json", *args)
        if time.perf_counter() - t > res.slowest[1]:
            res.slowest = (a["name"], time.perf_counter() - t)
        bad = crash_reason(q, (0,))
        if bad:
            res.crashes.append(f"{a['name']}: {bad}")
            continue
        res.analyses_ok += 1
        if q.stderr.startswith("not available"):
            res.notes.append(a["name"])
    # What-if on the type of the heaviest critical-path op, when there is a critical path.
    rows = cli.cypher(
        "MATCH (o:Op {trace: $trace}) WHERE o.cp_step IS NOT NULL RETURN o.type ORDER BY o.weight_us DESC, o.uid LIMIT 1",
        trace,
    )
    if rows and rows[0][0]:
        res.analyses += 1
        w = cli.run("whatif", "--trace", trace, "--match", f"type={rows[0][0]}", "--factor", "0.5", "--format", "json")
        bad = crash_reason(w, (0,))
        if bad:
            res.crashes.append(f"whatif: {bad}")
        else:
            res.analyses_ok += 1
    return res


def _us(v: float | None, unit: str | None) -> str:
    """A length in us; a trace without times (an ET alone) counts its ops (each weighs 1)."""
    if v is None:
        return ""
    return f"{v:,.0f}" if unit == "us" else f"{v:,.0f} ops"


PATH = re.compile(r"(?<![\w.])/(?:[^\s:;,()]+/)+([^\s:;,()]+)")


def short(text: str) -> str:
    """A refusal in fewer words: no ``tracegraph: error:`` prefix, files by their base names."""
    return PATH.sub(r"\1", text.replace("tracegraph: error: ", "", 1))


def row(r: Result) -> list[str]:
    meta = r.facts.get("meta") or {}
    matched = f"{meta['et_ops_matched']}/{meta['et_ops']}" if "et_ops_matched" in meta else ""
    if not matched and "et_carriers" in meta:
        matched = "(ET alone)"
    ingest = short(r.ingest)
    unit = r.facts.get("time_unit")
    return [
        r.unit.name,
        ingest if len(ingest) <= 240 else ingest[:237] + "...",
        "" if r.carriers is None else str(r.carriers),
        "" if r.data_edges is None else str(r.data_edges),
        _us(r.facts.get("critical_path_us"), unit),
        _us(r.facts.get("observed_path_us"), unit),
        _us(r.facts.get("span_us"), unit),
        matched,
        str(meta.get("et_carriers_without_kineto", "")),
        str(meta.get("kineto_ops_without_et", "")),
        f"{r.analyses_ok}/{r.analyses}" if r.analyses else "",
        f"{r.seconds:.1f}",
        f"{r.slowest[0]} {r.slowest[1]:.1f}" if r.slowest[0] else "",
    ]


HEADER = [
    "pair",
    "ingest",
    "carriers",
    "DATA",
    "critical path us",
    "observed path us",
    "span us",
    "ET ops matched",
    "carriers w/o Kineto",
    "Kineto ops w/o ET",
    "analyses exit 0",
    "ingest s",
    "slowest analysis s",
]


def render(rows: list[list[str]], markdown: bool) -> str:
    if markdown:
        out = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
        out += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
        return "\n".join(out)
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(HEADER)]
    widths[1] = min(widths[1], 60)
    lines = ["  ".join(h.ljust(w) for h, w in zip(HEADER, widths))]
    for r in rows:
        cells = [r[0].ljust(widths[0]), r[1][:60].ljust(widths[1]), *(c.rjust(w) for c, w in zip(r[2:], widths[2:]))]
        lines.append("  ".join(cells))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="+", type=Path, help="directories (or files) to look for pairs in")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    ap.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds per command (default %(default)s)")
    ap.add_argument("--keep-home", action="store_true", help="keep the temporary TRACEGRAPH_HOME (its path is printed)")
    args = ap.parse_args(argv)
    units = find_units(args.dirs)
    if not units:
        print("et_sweep: no pairs found", file=sys.stderr)
        return 1
    home = Path(tempfile.mkdtemp(prefix="tracegraph-et-sweep-"))
    cli = Cli(home, args.timeout)
    catalog = json.loads(cli.run("queries", "--format", "json").stdout)
    results: list[Result] = []
    try:
        for i, unit in enumerate(units):
            r = sweep_unit(cli, unit, f"sweep-{i}", catalog)
            results.append(r)
            print(
                f"[{i + 1}/{len(units)}] {unit.name}: {r.ingest.splitlines()[0][:100]}"
                + (f"; analyses {r.analyses_ok}/{r.analyses}" if r.analyses else "")
                + (f"; CRASHES: {r.crashes}" if r.crashes else ""),
                file=sys.stderr,
                flush=True,
            )
    finally:
        if args.keep_home:
            print(f"et_sweep: data directory kept at {home}", file=sys.stderr)
        else:
            cli.env["TRACEGRAPH_IDLE_S"] = "0"
            cli.run("traces")  # the last user: the embedded server stops at once
            shutil.rmtree(home, ignore_errors=True)
    print(render([row(r) for r in results], args.markdown))
    crashed = [r for r in results if r.crashes]
    print(
        f"\n{len(results)} units: {sum(r.ingest == 'ok' for r in results)} ingested, "
        f"{sum(r.ingest.startswith('refused') for r in results)} refused in one line, {len(crashed)} with a crash"
    )
    for r in crashed:
        for c in r.crashes:
            print(f"CRASH {r.unit.name}: {c}")
    if not args.markdown:
        for r in results:
            if r.ingest.startswith("refused"):
                print(f"{r.unit.name}: {short(r.ingest)}")
    for r in results:
        if r.notes:
            print(f"not available on {r.unit.name}: {', '.join(r.notes)}")
    return 1 if crashed else 0


if __name__ == "__main__":
    sys.exit(main())
