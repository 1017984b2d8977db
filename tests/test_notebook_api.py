"""``import tracegraph``: the notebook front end against the CLI on a real
database (each engine). Its DataFrames must hold exactly the CLI's JSON
rows, its parameter checks and errors be the CLI's (one binding place,
``queries/run.py``), and every catalog analysis be reachable. (The CLI is
called in this process, ``cli_here``: what it answers is the point here.)"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import pandas as pd
import pytest
from conftest import EXAMPLES, cli_here
from test_every_seed import _params

import tracegraph
from tracegraph.errors import BadRequest, NotFound, ReadOnlyViolation
from tracegraph.queries.catalog import catalog

DIST = Path(__file__).resolve().parent / "data" / "pytorch_dist"
MLP = [EXAMPLES / "pytorch-mlp-train.kineto.json.gz", EXAMPLES / "pytorch-mlp-train.et.json.gz"]


@pytest.fixture(scope="module")
def nb(session_graph, db_uri):
    """A connection of the notebook API to the engine under test, with the
    ET + Kineto pair (``nb-mlp``) and the gloo straggler job (``nb-job``),
    ingested once for the module (the tests only read them)."""
    with tracegraph.connect(None if db_uri == "embedded" else db_uri) as conn:
        conn.ingest(MLP, "nb-mlp", replace=True)
        conn.ingest(sorted(DIST.glob("straggler.rank*.json.gz")), "nb-job", replace=True)
        yield conn
        for trace in ("nb-mlp", "nb-job"):
            conn.drop(trace)


@pytest.fixture
def g(nb, graph):
    """The module's connection; a trace a test adds is dropped after it (``graph``)."""
    return nb


def plain(value):
    """A DataFrame cell as JSON has it (pandas' missing values as null)."""
    if value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    if hasattr(value, "item"):
        return value.item()
    return value


def records(df: pd.DataFrame) -> list[dict]:
    return [{c: plain(v) for c, v in zip(df.columns, row)} for row in df.itertuples(index=False)]


def cli_json(db_uri, *args) -> list:
    return json.loads(cli_here(*args, "--format", "json", db=db_uri, check=True).stdout)


@pytest.mark.parametrize(
    "name, trace, params",
    [
        ("top-ops", "nb-mlp", {"n": 5}),
        ("critical-path", "nb-mlp", {}),
        ("peak-memory", "nb-mlp", {}),
        ("memory-timeline", "nb-mlp", {"max_points": 50}),
        ("observed-critical-path-summary", "nb-mlp", {}),
        ("straggler-ranks", "nb-job", {}),
        ("stragglers", "nb-job", {"min_caused_us": 5000}),
        ("idle-breakdown", "nb-job", {}),
        ("comm-compute-overlap", "nb-job", {}),
    ],
)
def test_dataframes_equal_the_cli_json_rows(g, db_uri, name, trace, params):
    df = g.query(name, trace, **params)
    assert list(df.columns) == [c.name for c in catalog()[name].columns]
    args = [a for k, v in params.items() for a in ("--param", f"{k}={v}")]
    expected = cli_json(db_uri, "query", name, "--trace", trace, *args)
    assert expected, "an analysis with rows"
    assert records(df) == expected
    assert df.attrs == {"analysis": name, "trace": trace, "params": params, "note": None}


def test_columns_are_typed(g):
    df = g.query("stragglers", "nb-job")
    assert {c: str(t) for c, t in df.dtypes.items()} == {
        "seq": "Int64",
        "collective": "string",
        "straggler_rank": "Int64",
        "caused_us": "float64",
        "rank": "Int64",
        "wait_us": "float64",
        "process_group": "object",  # null on gloo jobs
    }
    assert str(g.query("observed-critical-path", "nb-mlp")["counted"].dtype) == "boolean"
    traces = g.traces().set_index("trace")
    assert traces.loc["nb-mlp", "has_deps"] and str(traces["ops"].dtype) == "Int64"
    assert traces.loc["nb-job", "span_us"] == g.trace("nb-job").span_us


def test_every_analysis_is_reachable_with_the_cli_checks(g, graph, db_uri):
    for name, analysis in catalog().items():
        params = _params(analysis, graph, "nb-mlp")
        answer = g.query(name, "nb-mlp", **params)
        if isinstance(answer, tracegraph.NotAvailable):
            args = [a for k, v in params.items() for a in ("--param", f"{k}={v}")]
            out = cli_here("query", name, "--trace", "nb-mlp", *args, db=db_uri, check=True)
            assert str(answer) == f"{name} on trace nb-mlp: {out.stderr.strip()}"
            assert not answer and answer._repr_html_().startswith("<p><em>")
        else:
            assert list(answer.columns) == [c.name for c in analysis.columns], name


@pytest.mark.parametrize(
    "args, params",
    [
        (["top-ops", "nb-mlp", "--param", "n=-1"], ("top-ops", "nb-mlp", {"n": -1})),
        (["top-ops", "nb-mlp", "--param", "m=1"], ("top-ops", "nb-mlp", {"m": 1})),
        (["top-ops", "nb-mlp", "--param", "n=many"], ("top-ops", "nb-mlp", {"n": "many"})),
        (
            ["stragglers", "nb-job", "--param", "min_caused_us=inf"],
            ("stragglers", "nb-job", {"min_caused_us": math.inf}),
        ),
        (["memory-at", "nb-mlp"], ("memory-at", "nb-mlp", {})),
        (["no-such-analysis", "nb-mlp"], ("no-such-analysis", "nb-mlp", {})),
        (["top-ops", "no-such-trace"], ("top-ops", "no-such-trace", {})),
    ],
)
def test_errors_are_the_cli_ones(g, db_uri, args, params):
    name, trace, kw = params
    cli = cli_here("query", args[0], "--trace", *args[1:], db=db_uri)
    assert cli.returncode == 1
    with pytest.raises((BadRequest, NotFound)) as e:
        g.query(name, trace, **kw)
    # The same check and words; a value the CLI got as text is quoted there ('-1' against -1).
    assert cli.stderr.replace("'", "").startswith(f"tracegraph: error: {e.value}".replace("'", ""))


def test_no_rows_warn_with_the_reason(g):
    with pytest.warns(tracegraph.NoRows, match="no collective whose last rank held the others up by 1000000000 us"):
        df = g.query("stragglers", "nb-job", min_caused_us=1e9)
    assert df.empty and list(df.columns) == [c.name for c in catalog()["stragglers"].columns]
    assert df.attrs["note"] == "no rows: no collective whose last rank held the others up by 1000000000 us or more"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g.query("top-ops", "nb-mlp", n=1)  # rows: no warning


def test_cypher_is_read_only_and_typed(g):
    df = g.cypher(
        "MATCH (o:Op {trace: $trace}) WHERE o.weight_us IS NOT NULL "
        "RETURN o.name AS name, o.weight_us AS weight_us ORDER BY weight_us DESC, name LIMIT 3",
        trace="nb-mlp",
    )
    top = g.query("top-ops", "nb-mlp", n=3)
    assert list(df["weight_us"]) == list(top["dur_us"]) and str(df["name"].dtype) == "string"
    assert g.cypher("RETURN $x + 1 AS y", x=41)["y"].tolist() == [42]
    with pytest.raises(ReadOnlyViolation):
        g.cypher("CREATE (:Op {trace: 'x', uid: 'y'})", trace="nb-mlp")


def test_whatif_is_the_cli_answer(g, db_uri):
    w = g.whatif("nb-mlp", "type=aten::linear", 0.5)
    args = ["whatif", "--trace", "nb-mlp", "--match", "type=aten::linear", "--factor", "0.5", "--format", "json"]
    cli = json.loads(cli_here(*args, db=db_uri, check=True).stdout)
    for name in ("matched_ops", "baseline_us", "critical_path_us", "speedup", "saved_us"):
        assert getattr(w, name) == cli[name], name
    assert records(w.path) == cli["path"] and w.matched_ops > 0 and w.saved_us > 0
    assert str(w).startswith(f"trace nb-mlp: {w.matched_ops} ops matching type=aten::linear scaled by 0.5")
    job = g.whatif("nb-job", "type=.*", 2)
    assert isinstance(job, tracegraph.NotAvailable) and job.fact == "deps"


def test_ingest_names_and_refuses_like_the_cli(g):
    report = g.ingest(EXAMPLES / "pytorch-cnn-cpu.pt.trace.json.gz")
    assert report.trace == "pytorch-cnn-cpu" and report.nodes["Op"] > 0 and report.summary.warnings == []
    with pytest.raises(tracegraph.errors.Conflict):
        g.ingest(EXAMPLES / "pytorch-cnn-cpu.pt.trace.json.gz")
    assert (
        g.ingest([EXAMPLES / "pytorch-cnn-cpu.pt.trace.json.gz"], "pytorch-cnn-cpu", replace=True).trace
        == "pytorch-cnn-cpu"
    )
    assert g.drop("pytorch-cnn-cpu") > 0 and "pytorch-cnn-cpu" not in set(g.traces()["trace"])
