"""The OpenAPI document, fuzzed: ``schemathesis run`` over the whole
document with every check (``--checks all``), seed 7, 5 examples per
operation, against a real ``tracegraph serve`` (with an API key) on an
embedded FalkorDB that has a trace stored. Its answer must be: no server
error, no undocumented status, no answer unlike the document, no
schema-violating request accepted, no schema-valid request refused (but
for content no schema can describe, tests/schema_hooks.py), unsupported
methods refused with Allow, and no route but /health answering without the
key or with a wrong one.

The hooks (tests/schema_hooks.py) send real names half the time, so that
requests reach the analyses, the timeline, the ingest and the Cypher
runner as well as the 404s. Every phase runs (examples, coverage,
fuzzing, stateful: uploads followed by reads and deletes of what they
made). ``TRACEGRAPH_SCHEMA_EXAMPLES`` / ``TRACEGRAPH_SCHEMA_SEED`` run a
longer or another hunt: issue 29's acceptance run is seed 7 with 30
examples per operation (``TRACEGRAPH_SCHEMA_EXAMPLES=30``), about four
times this test's time in the suite for the same operations, phases and
checks.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, SEED_STEPSTATS, api_process, run_cli
from schema_hooks import DATA_REFUSALS, SEED_TRACE
from schemathesis.core.warnings import SchemathesisWarning

EXAMPLES = os.environ.get("TRACEGRAPH_SCHEMA_EXAMPLES", "5")
SEED = os.environ.get("TRACEGRAPH_SCHEMA_SEED", "7")
KEY = "schema-test-key"
# Bounded so that a run stays short: small uploads, quick Cypher, few rows.
SERVER_ENV = {
    "TRACEGRAPH_API_KEY": KEY,
    "TRACEGRAPH_MAX_UPLOAD_BYTES": str(1024 * 1024),
    "TRACEGRAPH_CYPHER_TIMEOUT_MS": "2000",
    "TRACEGRAPH_CYPHER_MAX_ROWS": "100",
    "TRACEGRAPH_SYNC_WAIT_S": "30",
}


def config(path: Path) -> Path:
    """The run's configuration: the statuses DATA_REFUSALS adds, per
    operation, to those a schema-valid request may get; and every warning
    but "validation mismatch" (valid requests all refused 400/422 in a
    phase). For an operation outside DATA_REFUSALS the check
    ``positive_data_acceptance`` already fails such a refusal; for the two
    inside, generated Cypher text and file bytes are refused for what they
    say, as documented, and ``refusals_are_about_the_content`` holds every
    such refusal to that."""
    positive = ["2xx", "3xx", "401", "403", "404", "409", "429", "5xx"]  # schemathesis's default
    shown = [w.value for w in SchemathesisWarning if w.value not in ("validation_mismatch", "low_valid_rate")]
    lines = [f"warnings = [{', '.join(repr(w) for w in shown)}]", ""]
    for label, extra in DATA_REFUSALS.items():
        statuses = ", ".join(f'"{s}"' for s in positive + [str(s) for s in extra])
        lines += [
            "[[operations]]",
            f'include-name = "{label}"',  # "METHOD /path" (separate method and path filters would be either-or)
            "[operations.checks.positive_data_acceptance]",
            f"expected-statuses = [{statuses}]",
            "",
        ]
    path.write_text("\n".join(lines))
    return path


@pytest.mark.slow
def test_schemathesis_finds_nothing(tmp_path):
    home = tmp_path / "home"
    run_cli("ingest", str(SEED_STEPSTATS), "--trace", SEED_TRACE, home=home, check=True)
    log = tmp_path / "server.log"
    with api_process(log, home=home, env=SERVER_ENV) as (_proc, base):
        env = dict(
            os.environ,
            SCHEMATHESIS_HOOKS="schema_hooks",
            TRACEGRAPH_SCHEMA_TRACE=SEED_TRACE,
            PYTHONPATH=os.pathsep.join(p for p in (str(ROOT / "tests"), os.environ.get("PYTHONPATH")) if p),
        )
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "schemathesis.cli",
                "--config-file",
                str(config(tmp_path / "schemathesis.toml")),
                "--no-color",
                "run",
                f"{base}/openapi.json",
                "--checks",
                "all",
                "--seed",
                SEED,
                "--max-examples",
                EXAMPLES,
                "--header",
                f"Authorization: Bearer {KEY}",
                "--suppress-health-check",
                "all",
            ],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=1800,
        )
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-20_000:] + f"\n(the server's log: {log})"
    assert "API Operations:" in out and "No issues found" in out, out[-5_000:]
