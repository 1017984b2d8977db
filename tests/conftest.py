"""Shared fixtures: real databases, never mocks.

Database-level tests take the ``graph`` (or ``session_graph``) fixture and
run once per engine: the embedded FalkorDB (in a private data directory,
one server for the session) and, when ``TRACEGRAPH_TEST_NEO4J`` names a
bolt URI, that Neo4j server. Without it the Neo4j runs are skipped, with
the reason in the summary. The Neo4j server must be a scratch server: the
session starts by deleting every tracegraph node in it.

Each test gets its own trace names; ``graph`` drops the traces a test
added, so tests do not see each other's traces.

Parallel runs (pytest-xdist, ``-n 2`` in tests/run.sh, ``--dist
loadgroup`` in pyproject.toml): every worker has its own data directory
and embedded server (``tg_home``, under the worker's own temporary
directory). Neo4j is one server for everyone, so every test that reaches
it runs on one worker (the group ``neo4j``: the ``db_uri`` fixture's
``neo4j`` runs, tests or fixtures that name ``NEO4J_URI``, and tests
marked ``neo4j``); only that worker wipes it and the tests there see no
one else's traces. Tests that share a module-scoped fixture run on one
worker, so that it is set up once. Tests marked ``slow`` start first.
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "traces"
SEED_STEPSTATS = EXAMPLES / "tf1-alexnet-stepstats.pbtxt"
SEED_OPLIST = EXAMPLES / "tf1-alexnet-oplist.txt"
SEED_OPNAMES = EXAMPLES / "tf2-resnet50-opnames.txt"
SEED_CHAINER = EXAMPLES / "chainer-vgg19-graph.txt"
SEED_MEGENGINE = EXAMPLES / "megengine-resnet50-profile.json"

NEO4J_URI = os.environ.get("TRACEGRAPH_TEST_NEO4J") or None
# Embedded servers the tests start stop a second after their last user
# (the default, minutes, would leave one per test directory running).
os.environ.setdefault("TRACEGRAPH_IDLE_S", "1")
NO_NEO4J = (
    "TRACEGRAPH_TEST_NEO4J is not set (a bolt URI of a scratch Neo4j 5 server; tests/run.sh "
    "starts one assembled by ../shared/neo4j-local when it finds it)"
)


@pytest.fixture(scope="session")
def tg_home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("tracegraph-home")
    os.environ["TRACEGRAPH_HOME"] = str(home)
    os.environ.pop("TRACEGRAPH_DB", None)
    return home


@pytest.fixture(scope="session", params=["embedded", "neo4j"])
def db_uri(request, tg_home) -> str:
    """The engine under test, as a ``--db`` URI (``embedded`` for the default)."""
    if request.param == "neo4j":
        if not NEO4J_URI:
            pytest.skip(NO_NEO4J)
        return NEO4J_URI
    return "embedded"


@pytest.fixture(scope="session")
def session_graph(db_uri):
    from tracegraph.db.connect import open_graph

    g = open_graph(db_uri)
    if g.backend == "neo4j":
        wipe_neo4j(g)
    yield g
    g.close()
    if g.backend == "embedded":
        # A crash of the session's server shows as a cascade of connection
        # errors; this names its cause once.
        log = Path(os.environ["TRACEGRAPH_HOME"]) / "falkordb" / "server.log"
        assert "BUG REPORT START" not in log.read_text(errors="replace"), f"the embedded server crashed: see {log}"


def wipe_neo4j(g) -> None:
    from tracegraph.db.base import LABELS

    # Trace last: a trace stored before 2026-11-28 holds a HAS_OP edge to every op, too many
    # to detach in one transaction.
    for label in [*LABELS[1:], LABELS[0], "IngestJob"]:
        while g.run(f"MATCH (n:{label}) WITH n LIMIT 5000 DETACH DELETE n RETURN count(*)", write=True).rows[0][0]:
            pass


def ready_traces(graph) -> set[str]:
    return {r[0] for r in graph.run("MATCH (t:Trace) WHERE t.status = 'ready' RETURN t.trace").rows}


@pytest.fixture
def graph(session_graph):
    """The session's database; traces a test adds are dropped after it."""
    before = ready_traces(session_graph)
    yield session_graph
    for trace in ready_traces(session_graph) - before:
        session_graph.drop_trace(trace)
    session_graph.sweep()


@pytest.fixture(scope="session")
def alexnet(session_graph):
    """Seed 001 ingested once as trace ``alexnet-seed`` (read-only for tests)."""
    from tracegraph.ingest.pipeline import ingest

    ingest(session_graph, [SEED_STEPSTATS], "alexnet-seed", replace=True)
    return "alexnet-seed"


def module_traces(graph, load) -> Iterator:
    """The body of a module-scoped fixture for traces its module's tests
    only read: ``load()`` stores them once (not once per test) and
    returns what the fixture gives; they are dropped after the module.
    (Each test's ``graph`` still drops what the test itself adds.)"""
    before = ready_traces(graph)
    value = load()
    mine = ready_traces(graph) - before  # (not a session fixture's trace made meanwhile)
    yield value
    for trace in mine:
        graph.drop_trace(trace)


@pytest.fixture(scope="module")
def gpu(session_graph) -> Iterator[str]:
    """tests/analysis_traces.py's ``small_gpu`` (answers worked out by hand
    there), stored once per module as trace ``small-gpu``: the tests only
    read it. (A module with a trace of its own by this name defines it.)"""
    from analysis_traces import small_gpu, store

    yield from module_traces(session_graph, lambda: store(session_graph, small_gpu(), "small-gpu"))


def everything(graph) -> list:
    """Every node the database holds, by where it is and its trace: what
    the atomicity tests compare before and after."""
    if graph.backend == "neo4j":
        return graph.run(
            "MATCH (n) RETURN n.trace AS t, labels(n)[0] AS l, n.status AS s, count(n) ORDER BY t, l, s"
        ).rows
    out = []
    for key in sorted(graph._redis.scan_iter(match=graph.prefix + "*")):
        kind = graph._redis.type(key)
        if kind == "string":
            out.append((key, graph._redis.get(key)))
        elif kind == "hash":  # P:jobs
            out.append((key, sorted(graph._redis.hgetall(key).items())))
        else:
            rows = graph._query(
                key,
                "MATCH (n) RETURN n.trace AS t, labels(n)[0] AS l, n.status AS s, count(n) ORDER BY t, l, s",
                None,
                write=False,
            ).rows
            out.append((key, rows))
    return out


def trace_nodes(graph, trace: str) -> int:
    """How many nodes trace ``trace`` has stored (0 when there is no such trace)."""
    from tracegraph.errors import NotFound

    try:
        return graph.run("MATCH (n) WHERE n.trace = $t RETURN count(n)", {"t": trace}, trace=trace).rows[0][0]
    except NotFound:
        return 0


def process_state(pid: int) -> str | None:
    """Process ``pid``'s state letter (``R``, ``S``, ``T`` stopped, ``Z``
    ended but not reaped, ...); None when there is no such process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return None


def cli_env(home: Path, db: str | None = None, env: dict | None = None) -> dict[str, str]:
    """The environment of a ``tracegraph`` process on data directory
    ``home`` and database ``db`` (a ``db_uri``: the embedded one by default)."""
    full_env = dict(os.environ, TRACEGRAPH_HOME=str(home), **(env or {}))
    if db and db != "embedded":
        full_env["TRACEGRAPH_DB"] = db
    elif not (env or {}).get("TRACEGRAPH_DB"):
        full_env.pop("TRACEGRAPH_DB", None)
    return full_env


def run_cli(
    *args: str,
    home: Path,
    check: bool = False,
    input: str | None = None,
    env: dict | None = None,
    db: str | None = None,
) -> subprocess.CompletedProcess:
    """``tracegraph ARGS`` as a real process on data directory ``home`` (and
    database ``db``, a ``db_uri``: the embedded one by default)."""
    proc = subprocess.run(
        [sys.executable, "-m", "tracegraph.cli", *args],
        capture_output=True,
        text=True,
        env=cli_env(home, db, env),
        input=input,
        timeout=600,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"tracegraph {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
    return proc


def cli_here(*args: str, db: str, check: bool = False) -> subprocess.CompletedProcess:
    """``tracegraph --db DB ARGS`` called in this process
    (``tracegraph.cli.main``, on the session's data directory): the same
    parser, checks, exit code and output as :func:`run_cli`, without a new
    interpreter's start-up and imports (a second or more on a busy
    machine). For tests whose point is what the CLI answers; those about
    the process (signals, servers left behind, what it imports, its
    stderr as a whole) use :func:`run_cli`."""
    import contextlib
    import io

    from tracegraph.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(["--db", db, *args])
        except SystemExit as e:  # argparse's usage errors
            code = e.code if isinstance(e.code, int) else 1
    proc = subprocess.CompletedProcess(["tracegraph", *args], code, out.getvalue(), err.getvalue())
    if check and code != 0:
        raise AssertionError(f"tracegraph {' '.join(args)} exited {code}: {proc.stderr}")
    return proc


def api_process(log: Path, *, home: Path, db: str | None = None, env: dict | None = None, args: tuple = ()):
    """``tracegraph serve`` as a real process on a free port, on database
    ``db`` (a ``db_uri``; the embedded one of ``home`` by default): a
    context manager yielding ``(process, base URL)`` once ``/health``
    answers (bench/browser.py's ``serve_process``). Its output goes to
    ``log``."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from bench.browser import serve_process

    extra = dict(env or {})
    if db and db != "embedded":
        extra["TRACEGRAPH_DB"] = db
    return serve_process(home, env=extra, log=log, args=args)


def _uses_neo4j(item) -> bool:
    """Does ``item`` reach the shared Neo4j server: the ``db_uri``
    fixture's ``neo4j`` run, ``NEO4J_URI`` named by the test function or
    by one of its test module's fixtures, or a ``neo4j`` mark (for a test
    that reaches it some other way)?"""
    if item.get_closest_marker("neo4j"):
        return True
    callspec = getattr(item, "callspec", None)
    if callspec is not None and callspec.params.get("db_uri") == "neo4j":
        return True
    funcs = [getattr(item, "function", None)]
    for defs in _fixture_defs(item):
        funcs.extend(f for f in (inspect.unwrap(d.func) for d in defs) if f.__module__ != __name__)
    return any("NEO4J_URI" in getattr(getattr(f, "__code__", None), "co_names", ()) for f in funcs)


def _fixture_defs(item) -> list:
    info = getattr(item, "_fixtureinfo", None)
    return [defs for defs in info.name2fixturedefs.values() if defs] if info is not None else []


def work_unit(item) -> str | None:
    """The group ``item`` runs in under ``-n`` (see the module docstring):
    ``neo4j`` for every test that reaches Neo4j, its module's name for a
    test that uses a module-scoped fixture, else None (it goes alone)."""
    if _uses_neo4j(item):
        return "neo4j"
    if any(defs[-1].scope == "module" for defs in _fixture_defs(item)):
        return item.module.__name__
    return None


# The work units travel from the workers (which collect) to the controller
# (which schedules) through files in this directory, one per worker:
# pytest-xdist's own xdist_group marks ride on node ids, which pytest 9.2
# no longer lets a plugin change (pytest-xdist issue 1386), so they would
# group nothing.
UNITS_DIR = "TRACEGRAPH_TEST_UNITS_DIR"


def pytest_configure(config) -> None:
    if hasattr(config, "workerinput") or not config.pluginmanager.hasplugin("xdist"):
        return
    if config.getoption("dist", "no") == "loadgroup" and config.getoption("numprocesses", None):
        import tempfile

        os.environ[UNITS_DIR] = tempfile.mkdtemp(prefix="tracegraph-test-units-")  # the workers inherit it


def pytest_unconfigure(config) -> None:
    if not hasattr(config, "workerinput") and os.environ.get(UNITS_DIR):
        import shutil

        shutil.rmtree(os.environ.pop(UNITS_DIR), ignore_errors=True)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items) -> None:
    """On a worker of a ``-n`` run, tell the controller each test's work unit."""
    where = os.environ.get(UNITS_DIR)
    if not where or not hasattr(config, "workerinput"):
        return
    import json

    units = {item.nodeid: unit for item in items if (unit := work_unit(item)) is not None}
    slow = sorted({units.get(item.nodeid, item.nodeid) for item in items if item.get_closest_marker("slow")})
    path = Path(where) / f"{config.workerinput['workerid']}.json"
    path.with_suffix(".tmp").write_text(json.dumps({"units": units, "slow": slow}))
    path.with_suffix(".tmp").replace(path)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup`` with the work units of :func:`work_unit`: each
    unit goes whole to one worker; those with a test marked ``slow`` first,
    then the biggest (so that no long test starts last); the rest one by
    one."""
    where = os.environ.get(UNITS_DIR)
    if config.getoption("dist", "no") != "loadgroup" or not where:
        return None
    import json

    from xdist.scheduler import LoadScopeScheduling

    class WorkUnits(LoadScopeScheduling):
        units: dict[str, str] | None = None
        slow: set[str] = set()  # noqa: RUF012 - replaced, never changed in place
        ordered = False

        def _split_scope(self, nodeid: str) -> str:
            if self.units is None:  # every worker has collected by now
                self.units = {}
                for path in Path(where).glob("*.json"):
                    told = json.loads(path.read_text())
                    self.units.update(told["units"])
                    self.slow = self.slow | set(told["slow"])
            return self.units.get(nodeid, nodeid)

        def _assign_work_unit(self, node) -> None:
            if not self.ordered:  # the queue is complete (biggest first) before the first unit goes
                queue = sorted(self.workqueue.items(), key=lambda unit: unit[0] not in self.slow)
                self.workqueue.clear()
                self.workqueue.update(queue)
                self.ordered = True
            super()._assign_work_unit(node)

        def remove_node(self, node):
            """A worker that died (a segmentation fault, say) had its whole
            unit queued again by pytest-xdist: the test that killed it too,
            so that every replacement worker died on it in turn until none
            was left and the run waited for ever (CI lost its 90 minutes
            so). Queue again only the unit's tests that did not run, without
            the one that was running; xdist reports that one failed."""
            workload = self.assigned_work.get(node, {})
            crashed = next((t for unit in workload.values() for t, done in unit.items() if not done), None)
            if crashed is None:
                return super().remove_node(node)
            del self.assigned_work[node]
            for scope, unit in workload.items():
                rest = {t: False for t, done in unit.items() if not done and t != crashed}
                if rest:
                    self.workqueue[scope] = rest
            for other in self.assigned_work:
                self._reschedule(other)
            return crashed

    return WorkUnits(config, log)


def pytest_terminal_summary(terminalreporter) -> None:
    """One line per reason tests were skipped (the Neo4j runs, say), with counts."""
    reasons: dict[str, int] = {}
    for report in terminalreporter.stats.get("skipped", []):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
        reasons[reason] = reasons.get(reason, 0) + 1
    if reasons:
        terminalreporter.section("skipped")
        for reason, n in sorted(reasons.items(), key=lambda kv: -kv[1]):
            terminalreporter.write_line(f"{n} skipped: {reason}")
