"""Numbers people read, and why an answer has no rows.

Every analysis's floats are rounded where the service answers
(``queries/run.py``): times (``*_us``) to 1 ns (3 decimals of a
microsecond, the finest any format records), other numbers to 12
significant digits. The tests run every catalog analysis on real traces
whose raw answers do carry binary noise (checked: the unrounded Cypher
answer has values like ``8782.11799999999``), and look at what each front
end shows: the service's rows, the CLI's JSON, CSV and table, the HTTP
API's JSON and CSV.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import pytest
from conftest import EXAMPLES, cli_here, module_traces, run_cli
from test_every_seed import _params

from tracegraph.output import readable, readable_rows, table
from tracegraph.queries.catalog import catalog
from tracegraph.queries.run import bind, run_analysis

DIST = Path(__file__).resolve().parent / "data" / "pytorch_dist"


def test_readable_by_hand():
    assert readable(8782.11799999999, time=True) == 8782.118
    assert readable(0.1 + 0.2) == 0.3 and readable(0.1 + 0.2, time=True) == 0.3
    assert readable(1 / 3) == 0.333333333333 and readable(1 / 3, time=True) == 0.333
    assert readable(123456789.0004999, time=True) == 123456789.0
    assert readable(2.5e-10, time=True) == 0.0 and readable(2.5e-10) == 2.5e-10
    assert math.isnan(readable(math.nan)) and readable(math.inf) == math.inf
    assert readable(7) == 7 and readable(True) is True and readable("1.00000000001") == "1.00000000001"
    node = {"kind": "node", "properties": {"weight_us": 1.0000000001, "share": 0.30000000000000004, "ids": [1, 2]}}
    assert readable(node) == {"kind": "node", "properties": {"weight_us": 1.0, "share": 0.3, "ids": [1, 2]}}
    assert readable_rows(["t_us", "r"], [[1.23456, 2 / 3], [None, None]]) == [[1.235, 0.666666666667], [None, None]]
    # A table shows a time to its nanosecond, no trailing zeros.
    assert table(["dur_us"], [[8782.118], [12.5], [3.0]]).splitlines()[2:] == ["8,782.118", "     12.5", "        3"]


def noisy(value: object, time: bool) -> bool:
    """Whether a float shows more than a reader should see: a time with more
    than 3 decimals, any other number with more than 12 significant digits."""
    if not isinstance(value, float) or not math.isfinite(value):
        return False
    text = repr(value)
    if "e" in text:
        mantissa = text.split("e")[0].replace("-", "").replace(".", "").lstrip("0")
        return (time and value != 0 and abs(value) < 1e-3) or (not time and len(mantissa) > 12)
    whole, _, frac = text.lstrip("-").partition(".")
    if time:
        return len(frac) > 3
    return len((whole + frac).lstrip("0").rstrip("0")) > 12


def noise_in(columns: list[str], rows: list[list]) -> list:
    out = []

    def walk(value, time):
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, isinstance(k, str) and k.endswith("_us"))
        elif isinstance(value, list):
            for v in value:
                walk(v, time)
        elif noisy(value, time):
            out.append(value)

    for r in rows:
        for c, v in zip(columns, r):
            walk(v, c.endswith("_us"))
    return out


@pytest.fixture(scope="module")
def real_traces(session_graph):
    """The PyTorch ET + Kineto pair and the 4-rank DDP job, ingested once
    for the module (the tests read them)."""
    from tracegraph.ingest.pipeline import ingest

    def load():
        mlp = [EXAMPLES / "pytorch-mlp-train.kineto.json.gz", EXAMPLES / "pytorch-mlp-train.et.json.gz"]
        ingest(session_graph, mlp, "rn-mlp")
        ingest(session_graph, sorted(DIST.glob("ddp.rank*.json.gz")), "rn-ddp")
        return ["rn-mlp", "rn-ddp"]

    yield from module_traces(session_graph, load)


def test_no_analysis_answers_with_float_noise(graph, real_traces):
    raw_noise = 0
    for trace in real_traces:
        for name, analysis in catalog().items():
            params = _params(analysis, graph, trace)
            res = run_analysis(graph, name, trace, params)
            assert noise_in(res.columns, res.rows) == [], (trace, name)
            if res.available:
                raw = graph.run(
                    analysis.text, bind(analysis, trace, params), trace=None if analysis.compares_traces else trace
                )
                raw_noise += len(noise_in(raw.columns, raw.rows))
    # What the engines answer before rounding does carry the noise this removes.
    assert raw_noise > 0


def test_every_front_end_shows_the_rounded_numbers(graph, real_traces, db_uri):
    """The CLI's JSON, CSV and table (its output, so called in this
    process) and the HTTP API's JSON and CSV of straggler-ranks and
    idle-breakdown on the DDP job: the service's rows."""
    from fastapi.testclient import TestClient

    from tracegraph.api.app import create_app

    client = TestClient(create_app(db_uri))
    for name in ("idle-breakdown", "straggler-ranks", "comm-compute-overlap"):
        res = run_analysis(graph, name, "rn-ddp")
        assert res.rows
        expected = [dict(zip(res.columns, r)) for r in res.rows]
        out = cli_here("query", name, "--trace", "rn-ddp", "--format", "json", db=db_uri, check=True)
        assert json.loads(out.stdout) == expected
        out = cli_here("query", name, "--trace", "rn-ddp", "--format", "csv", db=db_uri, check=True)
        text_rows = list(csv.reader(io.StringIO(out.stdout)))[1:]
        assert text_rows == [["" if v is None else str(v) for v in r] for r in res.rows]
        out = cli_here("query", name, "--trace", "rn-ddp", db=db_uri, check=True)
        assert out.stdout.rstrip("\n") == table(res.columns, res.rows)
        http = client.get(f"/traces/rn-ddp/queries/{name}")
        assert http.json()["rows"] == json.loads(json.dumps(res.rows))
        http = client.get(f"/traces/rn-ddp/queries/{name}?format=csv")
        assert list(csv.reader(io.StringIO(http.text)))[1:] == text_rows


def test_no_rows_say_why_on_every_front_end(graph, real_traces, db_uri, tg_home):
    """No collective of the DDP job held the others up by 1000 s; a trace
    compared with itself has no op that changed."""
    from fastapi.testclient import TestClient

    from tracegraph.api.app import create_app

    cases = [
        (
            "stragglers",
            "rn-ddp",
            {"min_caused_us": "1000000000"},
            "no rows: no collective whose last rank held the others up by 1000000000 us or more",
        ),
        (
            "trace-diff",
            "rn-mlp",
            {"base": "rn-mlp"},
            "no rows: no op's weight differs by more than 0 us from trace rn-mlp, and none was added or removed",
        ),
    ]
    client = TestClient(create_app(db_uri))
    for name, trace, params, note in cases:
        res = run_analysis(graph, name, trace, params)
        assert (res.rows, res.note) == ([], note)
        args = [a for k, v in params.items() for a in ("--param", f"{k}={v}")]
        out = run_cli("query", name, "--trace", trace, *args, home=tg_home, db=db_uri, check=True)
        assert out.stderr.strip() == note
        out = run_cli("query", name, "--trace", trace, *args, "--format", "json", home=tg_home, db=db_uri, check=True)
        assert (json.loads(out.stdout), out.stderr.strip()) == ([], note)
        http = client.get(f"/traces/{trace}/queries/{name}", params=params).json()
        assert (http["rows"], http["note"]) == ([], note)
        http = client.get(f"/traces/{trace}/queries/{name}", params={**params, "format": "csv"})
        assert http.headers["X-Tracegraph-Note"] == note


def test_an_empty_line_names_only_parameters(tmp_path):
    from tracegraph.queries.catalog import parse_header

    text = "// @name x\n// @summary y\n// @param trace TRACE: t\n// @empty no rows above {limit}\nRETURN 1"
    with pytest.raises(ValueError, match="@empty names no parameter limit"):
        parse_header(text, "x.cypher")
    ok = parse_header(text.replace("{limit}", "{trace}"), "x.cypher")
    assert ok.no_rows({"trace": "t1"}) == "no rows: no rows above t1"
