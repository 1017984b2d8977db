"""examples/notebook.ipynb runs top to bottom (nbclient, on a kernel of
this environment: ipykernel's python3, the interpreter running the tests)
against the engine under test, and the DataFrames it shows are the CLI's
JSON rows for the same analyses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli

nbclient = pytest.importorskip("nbclient")
nbformat = pytest.importorskip("nbformat")

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "examples" / "notebook.ipynb"
# The notebook's DataFrames: variable -> the CLI command that answers the same.
ANSWERS = {
    "top": ("top-ops", "nb-cnn", ["n=8"]),
    "path": ("critical-path", "nb-cnn", []),
    "peak": ("peak-memory", "nb-cnn", []),
    "ranks": ("straggler-ranks", "nb-straggler", []),
    "stragglers": ("stragglers", "nb-straggler", []),
    "overlap": ("comm-compute-overlap", "nb-dlrm", []),
    "idle": ("idle-breakdown", "nb-dlrm", []),
}
# Run in the notebook's kernel once it has run: its DataFrames as JSON rows.
DUMP = """
import json
import pandas as pd

def _rows(df):
    def plain(v):
        if v is None or (not isinstance(v, (list, dict)) and pd.isna(v)):
            return None
        return v.item() if hasattr(v, "item") else v
    return [{c: plain(v) for c, v in zip(df.columns, row)} for row in df.itertuples(index=False)]

print(json.dumps({name: _rows(globals()[name]) for name in NAMES}))
"""


def test_the_example_notebook_runs_and_answers_as_the_cli(graph, db_uri, tg_home, monkeypatch):
    if db_uri != "embedded":
        monkeypatch.setenv("TRACEGRAPH_DB", db_uri)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), "commit the notebook without outputs"
    nb.cells.insert(-1, nbformat.v4.new_code_cell(f"NAMES = {sorted(ANSWERS)!r}\n" + DUMP))
    client = nbclient.NotebookClient(
        nb, kernel_name="python3", timeout=600, resources={"metadata": {"path": str(NOTEBOOK.parent)}}
    )
    client.execute()
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert errors == []
    dumped = json.loads("".join(o["text"] for o in nb.cells[-2]["outputs"] if o.get("name") == "stdout"))
    for variable, (analysis, trace, params) in ANSWERS.items():
        args = [a for p in params for a in ("--param", p)]
        cli = run_cli(
            "query", analysis, "--trace", trace, *args, "--format", "json", home=tg_home, db=db_uri, check=True
        )
        assert dumped[variable] == json.loads(cli.stdout), variable
        assert dumped[variable], f"{analysis} on {trace} answers rows"
    # The figures are drawn; the answers that are no table say why.
    outputs = {i: c.get("outputs", []) for i, c in enumerate(nb.cells) if c.cell_type == "code"}
    figures = [
        i for i, out in outputs.items() if any("application/vnd.plotly.v1+json" in o.get("data", {}) for o in out)
    ]
    assert len(figures) == 5
    texts = [o.get("data", {}).get("text/plain", "") + o.get("text", "") for out in outputs.values() for o in out]
    assert any(
        "comm-compute-overlap on trace nb-cnn: not available: the trace has no communication" in t for t in texts
    )
    assert any("NoRows: stragglers on trace nb-straggler: no rows: no collective" in t for t in texts)
