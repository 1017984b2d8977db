"""Every format reads its files gzipped too (issue 47: a gzipped ``.pbtxt``
was refused as "gzip-compressed data of no supported format"): detected
by the content, read as the content, within the format's limit on what it
expands to, and a truncated or broken gzip refused in one line naming the
file, the database left as it was.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from conftest import SEED_CHAINER, SEED_MEGENGINE, SEED_OPLIST, SEED_OPNAMES, SEED_STEPSTATS, run_cli

from tracegraph.errors import InputError, TooLarge
from tracegraph.ingest.limits import MAX_FILE_BYTES
from tracegraph.ingest.pipeline import detect, parse_files

TEXT_SEEDS = {
    "tf-stepstats": SEED_STEPSTATS,
    "tf-oplist": SEED_OPLIST,
    "tf-opnames": SEED_OPNAMES,
    "chainer-graph": SEED_CHAINER,
    "megengine-profile": SEED_MEGENGINE,
}


def _gzipped(seed: Path, where: Path, data: bytes | None = None) -> Path:
    out = where / (seed.name + ".gz")
    out.write_bytes(gzip.compress(seed.read_bytes() if data is None else data))
    return out


@pytest.mark.parametrize("fmt", sorted(TEXT_SEEDS))
def test_a_gzipped_file_reads_as_its_content(tmp_path, fmt):
    seed = TEXT_SEEDS[fmt]
    packed = _gzipped(seed, tmp_path)
    assert detect(packed) == fmt == detect(seed)
    plain, unpacked = parse_files([seed]), parse_files([packed])
    for name in ("ops", "deps", "tensors", "allocations", "kernels"):
        a, b = getattr(plain, name), getattr(unpacked, name)
        assert a.equals(b), name


def test_gzip_members_one_after_the_other_read_as_one_file(tmp_path):
    """``cat a.gz b.gz`` is one gzip file of two members (and some writers pad with NULs)."""
    text = SEED_OPNAMES.read_bytes()
    cut = text.index(b"\n", len(text) // 2) + 1
    packed = tmp_path / "names.txt.gz"
    packed.write_bytes(gzip.compress(text[:cut]) + gzip.compress(text[cut:]) + b"\0" * 16)
    assert parse_files([packed]).ops.equals(parse_files([SEED_OPNAMES]).ops)


def test_binary_stepstats_gzipped(tmp_path):
    from tracegraph.ingest.formats.tf import stepstats

    binary = tmp_path / "run.pb"
    binary.write_bytes(stepstats.read_step_stats(SEED_STEPSTATS, fast=False).SerializeToString())
    packed = _gzipped(binary, tmp_path)
    assert detect(packed) == "tf-stepstats"
    assert parse_files([packed]).ops.equals(parse_files([binary]).ops)


@pytest.mark.parametrize("fmt", ["tf-stepstats", "tf-opnames"])
def test_a_gzip_that_expands_past_the_limit_is_refused(tmp_path, monkeypatch, fmt):
    """Streamed (opnames) or whole (stepstats): refused once the content
    passes the limit, which the file itself is far under."""
    seed = TEXT_SEEDS[fmt]
    padding = b"\n" * (4 << 20) if fmt == "tf-opnames" else b" " * (4 << 20)
    packed = _gzipped(seed, tmp_path, seed.read_bytes() + padding)
    limit = 1 << 20
    assert packed.stat().st_size < limit
    monkeypatch.setitem(MAX_FILE_BYTES, fmt, limit)
    with pytest.raises(TooLarge) as e:
        parse_files([packed])
    assert str(e.value) == f"{packed}: more than the {fmt} size limit of 1 MiB (decompressed)"


@pytest.mark.parametrize("fmt", sorted(TEXT_SEEDS))
def test_a_truncated_gzip_is_one_line_naming_the_file(tmp_path, fmt):
    packed = _gzipped(TEXT_SEEDS[fmt], tmp_path)
    data = packed.read_bytes()
    packed.write_bytes(data[: len(data) * 2 // 3])
    with pytest.raises(InputError) as e:
        parse_files([packed], fmt)
    message = str(e.value)
    assert message.startswith(str(packed)) and "\n" not in message
    assert "gzip stream ends early (truncated file)" in message or "not a valid gzip file" in message


def test_a_gzipped_pbtxt_ingests_from_the_command_line_and_a_bad_one_changes_nothing(tmp_path):
    home = tmp_path / "home"
    packed = _gzipped(SEED_STEPSTATS, tmp_path)
    run_cli("ingest", str(packed), "--trace", "alexnet-gz", "--quiet", home=home, check=True)
    run_cli("ingest", str(SEED_STEPSTATS), "--trace", "alexnet", "--quiet", home=home, check=True)
    traces = {t["trace"]: t for t in json.loads(run_cli("traces", "--format", "json", home=home, check=True).stdout)}
    for key in ("ops", "span_us", "critical_path_us", "memory_peak_bytes"):
        assert traces["alexnet-gz"][key] == traces["alexnet"][key], key
    before = run_cli("traces", "--format", "json", home=home, check=True).stdout
    broken = tmp_path / "broken.pbtxt.gz"
    broken.write_bytes(packed.read_bytes()[:-40])
    proc = run_cli("ingest", str(broken), "--trace", "broken", home=home)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        f"tracegraph: error: {broken}: gzip stream ends early (truncated file)"
    ], proc.stderr
    assert run_cli("traces", "--format", "json", home=home, check=True).stdout == before
