"""Shared fixtures: a real embedded FalkorDB in a private data directory.

The whole session uses one data directory (one server, started on first
use); each test gets its own trace names, and ``graph`` drops what a test
left behind so tests do not see each other's traces.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "traces"
SEED_STEPSTATS = EXAMPLES / "tf1-alexnet-stepstats.pbtxt"
SEED_OPLIST = EXAMPLES / "tf1-alexnet-oplist.txt"
SEED_OPNAMES = EXAMPLES / "tf2-resnet50-opnames.txt"
SEED_CHAINER = EXAMPLES / "chainer-vgg19-graph.txt"
SEED_MEGENGINE = EXAMPLES / "megengine-resnet50-profile.json"


@pytest.fixture(scope="session")
def tg_home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("tracegraph-home")
    os.environ["TRACEGRAPH_HOME"] = str(home)
    os.environ.pop("TRACEGRAPH_DB", None)
    return home


@pytest.fixture(scope="session")
def session_graph(tg_home):
    from tracegraph.db.connect import open_graph

    g = open_graph()
    g.ensure_schema()
    yield g
    g.close()


@pytest.fixture
def graph(session_graph):
    """The session's embedded database; traces a test adds are dropped after it."""
    from tracegraph.ingest.store import delete_trace

    before = {r[0] for r in session_graph.run("MATCH (t:Trace) RETURN t.trace").rows}
    yield session_graph
    after = {r[0] for r in session_graph.run("MATCH (t:Trace) RETURN t.trace").rows}
    for trace in after - before:
        delete_trace(session_graph, trace)


@pytest.fixture(scope="session")
def alexnet(session_graph):
    """Seed 001 ingested once as trace ``alexnet-seed`` (read-only for tests)."""
    from tracegraph.ingest.pipeline import ingest

    ingest(session_graph, [SEED_STEPSTATS], "alexnet-seed", replace=True)
    return "alexnet-seed"


def run_cli(*args: str, home: Path, check: bool = False, input: str | None = None) -> subprocess.CompletedProcess:
    """``tracegraph ARGS`` as a real process on data directory ``home``."""
    env = dict(os.environ, TRACEGRAPH_HOME=str(home))
    env.pop("TRACEGRAPH_DB", None)
    proc = subprocess.run([sys.executable, "-m", "tracegraph.cli", *args], capture_output=True, text=True,
                          env=env, input=input, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(f"tracegraph {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
    return proc
