"""The committed web UI bundle (api/static/) is what ui/ builds, and needs
nothing from the network at run time.

The rebuild copies ui/'s sources and lock file to a temporary folder, runs
``npm ci`` and ``node build.mjs --out`` there, and compares every file
byte for byte. (When ui/node_modules is already what ``npm ci`` makes
from the lock file, as tests/run.sh leaves it, the rebuild uses it instead
of installing the same packages again.) It needs Node.js and npm (tests/run.sh has them already for
the Cypher linter); without them it is skipped.
"""

from __future__ import annotations

import filecmp
import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
UI = ROOT / "ui"
STATIC = ROOT / "api" / "static"
BUILT = ("index.html", "app.js", "app.css", "THIRD_PARTY_LICENSES.txt")


def test_bundle_files_are_there():
    assert sorted(p.name for p in STATIC.iterdir()) == sorted(BUILT)


def test_no_network_at_run_time():
    """No CDN or other remote URL is loaded by the page or its bundle."""
    page = (STATIC / "index.html").read_text()
    assert not re.search(r"(src|href)=\"(https?:)?//", page)
    assert re.findall(r"(?:src|href)=\"([^\"]+)\"", page) == ["data:,", "/static/app.css", "#/traces", "/static/app.js"]
    assert "url(http" not in (STATIC / "app.css").read_text()
    js = (STATIC / "app.js").read_text()
    for host in ("cdn.", "unpkg", "jsdelivr", "cdnjs", "googleapis"):
        assert host not in js


def test_wheel_ships_the_bundle(tmp_path):
    """pip install alone serves the UI: the wheel carries api/static/."""
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0 and re.search(
        r"No matching distribution|Could not find a version|NewConnectionError", proc.stderr
    ):
        pytest.skip("pip cannot fetch the build backend (setuptools) for the wheel: no package index")
    assert proc.returncode == 0, proc.stderr
    (wheel,) = tmp_path.glob("tracegraph-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    assert {f"tracegraph/api/static/{name}" for name in BUILT} <= names
    assert {"tracegraph/api/ui.py", "tracegraph/queries/timeline.py", "tracegraph/cypher/memory-at.cypher"} <= names


def _node_modules_is_the_lock() -> bool:
    """Is ui/node_modules what ``npm ci`` installs from ui/package-lock.json?
    npm's own record of what it installed (node_modules/.package-lock.json)
    has every package of the lock with the same entry, less the optional
    ones for other platforms."""
    try:
        lock = json.loads((UI / "package-lock.json").read_text())["packages"]
        installed = json.loads((UI / "node_modules" / ".package-lock.json").read_text())["packages"]
    except (OSError, ValueError, KeyError):
        return False
    lock = {name: entry for name, entry in lock.items() if name}  # "" is ui itself
    return all(lock.get(name) == entry for name, entry in installed.items()) and all(
        name in installed or entry.get("optional") for name, entry in lock.items()
    )


def test_committed_bundle_is_up_to_date(tmp_path):
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        pytest.skip("Node.js and npm are needed to rebuild the web UI")
    work = tmp_path / "ui"
    work.mkdir()
    for name in ("package.json", "package-lock.json", "build.mjs"):
        shutil.copy2(UI / name, work / name)
    shutil.copytree(UI / "src", work / "src")
    (tmp_path / "cypher").mkdir()
    shutil.copy2(ROOT / "cypher" / "tracegraph.grass", tmp_path / "cypher" / "tracegraph.grass")
    if _node_modules_is_the_lock():
        (work / "node_modules").symlink_to(UI / "node_modules", target_is_directory=True)
    else:
        proc = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=work,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if proc.returncode != 0:
            pytest.skip(f"npm ci failed (no registry?): {proc.stderr.strip().splitlines()[-1:]}")
    out = tmp_path / "out"
    proc = subprocess.run([node, "build.mjs", "--out", str(out)], cwd=work, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(BUILT)
    stale = [name for name in BUILT if not filecmp.cmp(out / name, STATIC / name, shallow=False)]
    assert not stale, (
        f"api/static is out of date with ui/ ({', '.join(stale)}): run `npm ci --prefix ui && npm run build --prefix ui`"
    )
