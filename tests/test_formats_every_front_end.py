"""The traces beyond the framework profilers go in by every front end
(issue 47's acceptance): the Python API and an HTTP upload store what the
format's reader makes of the file, on both engines. Each front end's own
tests go deeper; here, one real file of each format, counted in the
database against its reader's frames."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import tracegraph
from tracegraph.ingest import pipeline

DATA = Path(__file__).parent / "data"
FILES = {
    "chrome-trace": DATA / "chrome" / "jax_train_step.perfetto_trace.json.gz",
    "nsys-sqlite": DATA / "nsys" / "perlmutter-cloverleaf-cuda.sqlite.gz",
    "rocprofv3-json": DATA / "rocprof" / "rocprof_908_results.json.gz",
}


@pytest.fixture(scope="module")
def rocpd_file(tmp_path_factory) -> Path:
    """The rocprofv3 capture as a rocpd database (built as its tests build it)."""
    from test_format_rocprof import rocpd_of

    real = json.loads(gzip.decompress(FILES["rocprofv3-json"].read_bytes()))
    return rocpd_of(real, tmp_path_factory.mktemp("rocpd") / "908_results.db")


def _stored(graph, trace: str) -> tuple[int, int]:
    """(ops, kernels) of the trace in the database."""
    (ops,) = graph.run("MATCH (o:Op {trace: $t}) RETURN count(o)", {"t": trace}, trace=trace).rows[0]
    (kernels,) = graph.run("MATCH (k:Kernel {trace: $t}) RETURN count(k)", {"t": trace}, trace=trace).rows[0]
    return ops, kernels


@pytest.mark.parametrize("fmt", [*FILES, "rocpd-sqlite"])
def test_python_api_and_http_upload_store_what_the_reader_reads(graph, db_uri, rocpd_file, fmt):
    from fastapi.testclient import TestClient

    from tracegraph.api.app import create_app
    from tracegraph.api.settings import Settings

    path = rocpd_file if fmt == "rocpd-sqlite" else FILES[fmt]
    assert pipeline.detect(path) == fmt
    frames = pipeline.parse_files([path])
    expected = (len(frames.ops), len(frames.kernels))
    with tracegraph.connect(None if db_uri == "embedded" else db_uri) as conn:
        conn.ingest([path], f"py-{fmt}", replace=True)
    assert _stored(graph, f"py-{fmt}") == expected
    with TestClient(create_app(db_uri, Settings(api_key=None))) as client:
        r = client.post("/traces", data={"trace": f"up-{fmt}"}, files=[("files", (path.name, path.read_bytes()))])
        assert r.status_code == 201, r.text
        assert r.json()["ops"] == expected[0]
    assert _stored(graph, f"up-{fmt}") == expected
