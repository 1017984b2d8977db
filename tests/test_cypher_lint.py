"""Lint every ``cypher/*.cypher`` file with Neo4j's official Cypher linter.

The linter is the npm package ``@neo4j-cypher/language-support``
(``lintCypherQuery``), driven by ``tests/cypherlint/lint.mjs`` as Cypher 5 and
without a database. Only diagnostics of severity ``error`` fail; deprecations
and performance hints come back as ``warning`` and are allowed.

Setup: ``npm ci --prefix tests/cypherlint``. Without it these tests are
skipped locally, but fail when the ``CI`` environment variable is set.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT_DIR = ROOT / "tests" / "cypherlint"
LINT_SCRIPT = LINT_DIR / "lint.mjs"
LIBRARY = LINT_DIR / "node_modules" / "@neo4j-cypher" / "language-support"
CYPHER_DIR = ROOT / "cypher"
INSTALL_HINT = "npm ci --prefix tests/cypherlint"


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _unavailable(reason: str) -> None:
    """Skip locally; under CI a missing linter is a failure, not a skip."""
    if _in_ci():
        pytest.fail(f"{reason} (CI is set, so this is a failure, not a skip)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def node() -> str:
    if not LIBRARY.is_dir():
        _unavailable(f"Cypher linter not installed: {LIBRARY.relative_to(ROOT)} is missing; run `{INSTALL_HINT}`")
    exe = shutil.which("node")
    if exe is None:
        _unavailable("`node` is not on PATH; the Cypher linter needs Node.js")
    return exe


def run_lint(node: str, paths: list[Path]) -> dict[str, list[dict]]:
    """Run lint.mjs on ``paths``; return {path: diagnostics}."""
    proc = subprocess.run(
        [node, str(LINT_SCRIPT), *map(str, paths)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"lint.mjs exited {proc.returncode}\nstderr:\n{proc.stderr}\nstdout:\n{proc.stdout}"
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError as exc:
        raise AssertionError(f"lint.mjs did not print JSON ({exc}):\n{proc.stdout}\nstderr:\n{proc.stderr}") from None
    result = {f["path"]: f["diagnostics"] for f in report["files"]}
    assert sorted(result) == sorted(map(str, paths)), "lint.mjs must report every file it was given"
    return result


def errors(diagnostics: list[dict]) -> list[dict]:
    return [d for d in diagnostics if d["severity"] == "error"]


def describe(result: dict[str, list[dict]]) -> str:
    lines = []
    for path, diags in result.items():
        for d in diags:
            lines.append(f"{path}:{d['line']}:{d['column']}: {d['severity']}: {d['message']}")
    return "\n".join(lines) or "(no diagnostics)"


# ---------------------------------------------------------------- the project's files


@pytest.mark.slow
def test_project_cypher_files_have_no_lint_errors(linted):
    files = sorted(CYPHER_DIR.glob("*.cypher"))
    if not files:
        _unavailable(f"no {CYPHER_DIR.relative_to(ROOT)}/*.cypher files to lint")
    result = {str(path): linted[str(path)] for path in files}
    bad = {path: diags for path, diags in result.items() if errors(diags)}
    # Print everything (warnings too) so a failure shows the full picture.
    assert not bad, (
        f"Cypher 5 lint errors in {len(bad)} of {len(files)} file(s):\n{describe(bad)}\n\n"
        f"All diagnostics:\n{describe(result)}"
    )


# ---------------------------------------------------------------- the linter itself

SAMPLES = {
    # Same shape as the project's files: `//` header, `$param`s, several statements.
    "valid": (
        "// tracegraph sample: upsert spans\n"
        "// params: $trace, $rows\n"
        "UNWIND $rows AS row\n"
        "MERGE (s:Span {trace: $trace, id: row.id})\n"
        "  ON CREATE SET s += row.props\n"
        "WITH s, row\n"
        "MATCH (p:Span {trace: $trace, id: row.parent})\n"
        "MERGE (p)-[:CHILD_OF]->(s);\n"
        "/* block comment */\n"
        "MATCH (t:Trace {trace: $trace})-[:HAS_SPAN]->(s:Span)\n"
        "WHERE s.duration >= $minDuration\n"
        "RETURN s.name AS name, count(*) AS n ORDER BY n DESC LIMIT $limit;\n"
    ),
    "broken": "// broken on purpose\nMATCH (n RETURN n\n",
    "undefined_variable": "// header\nMATCH (n) RETURN m\n",
    # Deprecated in Neo4j 5: still valid Cypher 5, reported as warnings.
    "deprecated_id": "// header\nMATCH (n) RETURN id(n) AS i\n",
    "deprecated_call_with": "// header\nMATCH (n) CALL { WITH n RETURN n.x AS x } RETURN x\n",
    "deprecated_colon_reltypes": "// header\nMATCH ()-[:A|:B]->() RETURN 1 AS one\n",
    # Removed before Neo4j 5: errors.
    "removed_exists_property": "// header\nMATCH (n) WHERE exists(n.prop) RETURN n\n",
    "removed_curly_param": "// header\nMATCH (n) WHERE n.x = {param} RETURN n\n",
    # Cypher 25-only clause: an error proves the dialect is Cypher 5.
    "cypher25_let": "// header\nLET x = 1 RETURN x\n",
    # No schema is passed, so unknown labels/types/properties are not reported at all.
    "unknown_schema": "// header\nMATCH (n:NoSuchLabel)-[:NO_SUCH_TYPE]->(m) WHERE n.noSuchProp = $p RETURN m\n",
}


@pytest.fixture(scope="module")
def sample_paths(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("cypherlint")
    paths = {}
    for name, text in SAMPLES.items():
        paths[name] = tmp / f"{name}.cypher"
        paths[name].write_text(text, encoding="utf-8")
    return paths


@pytest.fixture(scope="module")
def linted(node, sample_paths) -> dict[str, list[dict]]:
    """The project's files and the samples, linted in one node process
    (its startup costs seconds): {path: diagnostics}."""
    return run_lint(node, [*sorted(CYPHER_DIR.glob("*.cypher")), *sample_paths.values()])


@pytest.fixture(scope="module")
def samples(linted, sample_paths) -> dict[str, list[dict]]:
    return {name: linted[str(path)] for name, path in sample_paths.items()}


def test_valid_query_with_comments_and_params_is_clean(samples):
    assert samples["valid"] == [], describe({"valid": samples["valid"]})


@pytest.mark.parametrize(
    "name", ["broken", "undefined_variable", "removed_exists_property", "removed_curly_param", "cypher25_let"]
)
def test_linter_reports_errors(samples, name):
    errs = errors(samples[name])
    assert errs, f"{name}: expected an error, got:\n{describe({name: samples[name]})}"
    # Positions are 1-based and count the `//` header line.
    assert errs[0]["line"] == 2 and errs[0]["column"] >= 1, errs


def test_broken_query_error_points_at_the_bad_token(samples):
    (err,) = errors(samples["broken"])
    assert err["line"] == 2 and err["column"] == len("MATCH (n ") + 1
    assert "Invalid input 'RETURN'" in err["message"]


@pytest.mark.parametrize("name", ["deprecated_id", "deprecated_call_with", "deprecated_colon_reltypes"])
def test_neo4j5_deprecations_are_warnings_not_errors(samples, name):
    diags = samples[name]
    assert not errors(diags), describe({name: diags})
    assert [d["severity"] for d in diags] == ["warning"], describe({name: diags})
    assert "deprecated" in diags[0]["message"] or "will change" in diags[0]["message"], diags


def test_unknown_labels_properties_and_params_are_not_reported(samples):
    assert samples["unknown_schema"] == [], describe({"unknown_schema": samples["unknown_schema"]})
