"""Type-check the `tracegraph` package with mypy, as it is installed.

Usage: ``.venv/bin/python tests/typecheck.py [extra mypy arguments]``
(needs ``pip install mypy pandas-stubs types-protobuf`` in that environment).

The import package `tracegraph` is assembled from several top-level folders
(pyproject.toml's ``[tool.setuptools] package-dir``: tracegraph.ingest lives
in ingest/, tracegraph.api in api/, ...). mypy resolves modules from the file
tree and cannot follow that mapping (nor the editable install's import hook),
so this script builds the installed layout as a tree of symlinks in a
temporary directory, runs ``python -m mypy --config-file pyproject.toml -p
tracegraph`` there with the repository's configuration, prints mypy's output
and exits with mypy's exit code.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE = "tracegraph"


def stage(root: Path) -> Path:
    """Build ``root/tracegraph`` as symlinks to the repository's files; return it.

    The folder mapped to `tracegraph` itself contributes its entries (modules
    and subpackage folders such as db/); every other mapping ``tracegraph.X =
    folder`` becomes a symlink ``tracegraph/X -> folder``.
    """
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    package_dir: dict[str, str] = config["tool"]["setuptools"]["package-dir"]
    target = root / PACKAGE
    target.mkdir()
    for entry in sorted((REPO / package_dir[PACKAGE]).iterdir()):
        if entry.name == "__pycache__" or not (entry.suffix == ".py" or (entry / "__init__.py").is_file()):
            continue
        (target / entry.name).symlink_to(entry)
    for name, folder in sorted(package_dir.items()):
        parent, _, child = name.rpartition(".")
        if parent != PACKAGE:
            continue  # the package itself, or a deeper mapping (none today)
        link = target / child
        if link.exists():
            raise SystemExit(
                f"typecheck.py: {name} is both a folder of {package_dir[PACKAGE]}/ and mapped to {folder}/"
            )
        link.symlink_to(REPO / folder)
    return target


def main(argv: list[str]) -> int:
    """Stage the package, run mypy on it, relay its output and exit code."""
    with tempfile.TemporaryDirectory(prefix="tracegraph-typecheck-") as tmp:
        stage(Path(tmp))
        command = [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(REPO / "pyproject.toml"),
            "--cache-dir",
            str(Path(tmp) / ".mypy_cache"),
            "-p",
            PACKAGE,
            *argv,
        ]
        done = subprocess.run(command, cwd=tmp, capture_output=True, text=True, check=False)
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
