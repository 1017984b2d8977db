"""Input that cannot be a trace is refused early, in bounded memory.

Every case runs the real CLI in a subprocess whose address space is capped
(RLIMIT_AS, 1.5 GiB: a refusal that first reads a 200 MB line or a 1 GiB
file does not fit) and checks the outcome a user sees: exit 1, one line on
stderr naming the file (and the line or limit), nothing on stdout, and
nothing written (the data directory was never even opened). The bad files
are made here, in tmp: big ones are sparse (they cost no disk).
"""

from __future__ import annotations

import gzip
import os
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT
from fastapi.testclient import TestClient

from tracegraph.errors import TooLarge
from tracegraph.ingest import limits
from tracegraph.ingest.formats.kineto import read as kineto_read
from tracegraph.ingest.formats.kineto import trace as pytorch_kineto
from tracegraph.ingest.limits import GiB, MiB

AS_LIMIT = 1536 * MiB


def ingest_capped(*args: str, home: Path) -> subprocess.CompletedProcess:
    """``tracegraph ingest ARGS`` with its address space capped at AS_LIMIT."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))

    env = dict(os.environ, TRACEGRAPH_HOME=str(home))
    env.pop("TRACEGRAPH_DB", None)
    return subprocess.run(
        [sys.executable, "-m", "tracegraph.cli", "ingest", *args],
        capture_output=True,
        text=True,
        env=env,
        preexec_fn=cap,
        timeout=300,
    )


def assert_refused(proc: subprocess.CompletedProcess, path: Path, pattern: str, home: Path) -> None:
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"tracegraph: error: {path}"), lines[0]
    assert re.search(pattern, lines[0]), lines[0]
    assert proc.stdout == ""
    assert not (home / "falkordb").exists()  # the database was never opened: nothing written


def sparse(path: Path, size: int) -> Path:
    with open(path, "wb") as f:
        f.truncate(size)
    return path


def test_200_mb_line_forced_as_opnames(tmp_path):
    # The issue: 3.4 GB and 31 s, then "Broken pipe". The line is a valid node name.
    p = tmp_path / "one-line.txt"
    with open(p, "wb") as f:
        for _ in range(200):
            f.write(b"a" * 1_000_000)
    home = tmp_path / "home"
    assert_refused(
        ingest_capped(str(p), "--format", "tf-opnames", home=home),
        p,
        r"\(line 1\): line longer than the limit of 1 MiB$",
        home,
    )


def test_long_line_after_good_ones_is_refused_at_its_line(tmp_path):
    # Auto-detected as an op listing from its first complete lines; line 3 never ends.
    p = tmp_path / "listing.txt"
    with open(p, "wb") as f:
        f.write(b"a/b, (1), (float32 2x2), GPU, 0\nc/d, ^a/b, (no output), GPU, 0\n")
        f.write(b"x" * (5 * MiB))
    home = tmp_path / "home"
    assert_refused(ingest_capped(str(p), home=home), p, r"\(line 3\): line longer than the limit", home)


@pytest.mark.parametrize(
    "fmt, pattern",
    [
        ("auto", r": binary content of no supported format \(supported: "),
        ("tf-stepstats", r": not a StepStats or RunMetadata protobuf"),
        ("megengine-profile", r": 1,073,741,824 bytes is over the megengine-profile size limit of 512 MiB$"),
        ("chainer-graph", r": 1,073,741,824 bytes is over the chainer-graph size limit of 256 MiB$"),
        ("tf-oplist", r": 1,073,741,824 bytes is over the tf-oplist size limit of 256 MiB$"),
        ("tf-opnames", r": 1,073,741,824 bytes is over the tf-opnames size limit of 256 MiB$"),
        ("pytorch-kineto", r": malformed JSON"),
        ("pytorch-et", r": binary content that is not a JSON object \(not a PyTorch Execution Trace\)$"),
        ("xplane", r": not an XPlane capture: an XSpace protobuf starts with byte 0x0a \(its planes\), not 0x00$"),
    ],
)
def test_sparse_gigabyte(tmp_path, fmt, pattern):
    p = sparse(tmp_path / "sparse.bin", 1 * GiB)
    home = tmp_path / "home"
    assert_refused(ingest_capped(str(p), "--format", fmt, home=home), p, pattern, home)


@pytest.mark.parametrize("fmt", sorted(limits.MAX_FILE_BYTES))
def test_one_byte_over_each_format_limit(tmp_path, fmt):
    limit = limits.MAX_FILE_BYTES[fmt]
    p = sparse(tmp_path / "big.trace", limit + 1)
    home = tmp_path / "home"
    assert_refused(
        ingest_capped(str(p), "--format", fmt, home=home),
        p,
        rf": {limit + 1:,} bytes is over the {fmt} size limit of {re.escape(limits.human(limit))}$",
        home,
    )


@pytest.mark.parametrize("fmt", ["megengine-profile", "chainer-graph", "tf-oplist", "tf-opnames"])
def test_binary_content_under_the_limit_is_refused_unread(tmp_path, fmt):
    # 200 MiB of NUL bytes: within every text format's limit, refused at its head.
    p = sparse(tmp_path / "zeros.txt", 200 * MiB)
    home = tmp_path / "home"
    assert_refused(
        ingest_capped(str(p), "--format", fmt, home=home),
        p,
        rf"\(line 1\): binary content \(a NUL byte\), not a {fmt} text file$",
        home,
    )


def test_refusal_writes_nothing_to_an_existing_database(tmp_path):
    from conftest import SEED_OPNAMES, run_cli

    home = tmp_path / "home"
    run_cli("ingest", str(SEED_OPNAMES), "--trace", "keep", home=home, check=True)
    before = run_cli("traces", "--format", "json", home=home, check=True).stdout
    p = tmp_path / "names.txt"
    p.write_bytes(b"a/b\n" + b"c" * (2 * MiB) + b"\n")
    proc = ingest_capped(str(p), "--trace", "bad", home=home)
    assert proc.returncode == 1 and "(line 2): line longer than" in proc.stderr
    assert run_cli("traces", "--format", "json", home=home, check=True).stdout == before


def test_gzip_kineto_past_its_decompressed_limit(tmp_path, monkeypatch):
    # A small gzip file that inflates past the limit is refused while it
    # streams. The limit is lowered here (4 GiB of JSON would take minutes).
    monkeypatch.setattr(kineto_read, "MAX_JSON_BYTES", 1 * MiB)
    p = tmp_path / "bomb.pt.trace.json.gz"
    with gzip.open(p, "wb") as f:
        f.write(b'{"schemaVersion": 1, "traceEvents": [' + b" " * (3 * MiB) + b"]}")
    assert p.stat().st_size < 64 * 1024
    with pytest.raises(TooLarge) as e:
        pytorch_kineto.parse(p)
    assert str(e.value) == f"{p}: more than the pytorch-kineto size limit of 1 MiB of JSON (decompressed)"


def test_http_upload_past_a_limit_is_413_naming_the_upload(graph, db_uri):
    from tracegraph.api.app import create_app
    from tracegraph.api.settings import Settings

    body = b"a/b\n" + b"x" * (MiB + 1) + b"\n"
    with TestClient(create_app(db_uri, Settings(api_key=None))) as client:
        r = client.post(
            "/traces", data={"trace": "too-long", "format": "tf-opnames"}, files=[("files", ("names.txt", body))]
        )
        assert r.status_code == 413, r.text
        assert r.json()["detail"] == "names.txt (line 2): line longer than the limit of 1 MiB"
        assert client.get("/traces/too-long").status_code == 404


# ---------------------------------------------------------------- the documented values


def readme_limits() -> dict[str, str]:
    """The README's limits table: first column -> second column."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("### Input limits") :]
    section = section[: section.index("\n\n", section.index("|"))]
    rows = [line.strip("|").split("|") for line in section.splitlines() if line.startswith("|")]
    return {cells[0].strip().strip("`"): cells[1].strip() for cells in rows[2:]}


def test_readme_lists_the_limits_the_code_applies():
    table = readme_limits()
    expected = {fmt: limits.human(n) for fmt, n in limits.MAX_FILE_BYTES.items()}
    expected["line (tf-oplist, tf-opnames, chainer-graph)"] = limits.human(limits.MAX_LINE_BYTES)
    expected["format detection reads"] = limits.human(limits.SNIFF_BYTES)
    assert table == expected
