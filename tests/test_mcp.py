"""``tracegraph mcp`` (issue 49, slice 1): the MCP SDK's own client, over
stdio, talking to a real ``tracegraph mcp`` process on the engine under
test. It lists the tools (the catalog's, generated), ingests a bundled
sample, runs every analysis and a Cypher statement and gets the CLI's JSON
rows; writes, LOAD CSV, procedures and paths outside the allowed root are
refused in one line; a missing fact is the typed ``not_available``."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
from conftest import EXAMPLES, cli_here
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from test_every_seed import _params

from tracegraph.api.mcp_server import ANSWER_ROWS, SERVICE_TOOLS
from tracegraph.queries.catalog import catalog

SAMPLE = "tf1-alexnet-stepstats.pbtxt"  # dependencies, kernels, memory: most analyses answer


def with_session(db_uri: str, root: Path, work: Callable[[ClientSession], Awaitable[Any]]) -> Any:
    """Run ``work`` on a session of a ``tracegraph mcp`` process (on this
    session's data directory and the engine under test), ingesting under ``root``."""
    args = ["-m", "tracegraph.cli", "mcp", "--root", str(root)]
    if db_uri != "embedded":
        args[3:3] = ["--db", db_uri]
    params = StdioServerParameters(command=sys.executable, args=args, env=dict(os.environ))

    async def run() -> Any:
        with anyio.fail_after(300):
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                return await work(session)

    return anyio.run(run)


def answer(result) -> Any:
    assert not result.is_error, result.content[0].text
    body = result.structured_content
    assert json.loads(result.content[0].text) == body  # the text is the same answer
    return body


def cli_json(db_uri: str, *args: str) -> list[dict]:
    out = cli_here(*args, "--format", "json", db=db_uri, check=True).stdout
    return json.loads(out) if out.strip() else []


def test_tools_ingest_every_analysis_and_cypher_equal_the_cli(graph, db_uri):
    trace = "mcp-alexnet"
    analyses = catalog()

    async def work(s: ClientSession) -> dict[str, Any]:
        listed = (await s.list_tools()).tools
        out: dict[str, Any] = {"tools": {t.name: t for t in listed}}
        out["ingest"] = answer(await s.call_tool("ingest", {"path": SAMPLE, "trace": trace, "replace": True}))
        out["traces"] = answer(await s.call_tool("traces", {}))
        out["cypher"] = answer(
            await s.call_tool(
                "cypher",
                {
                    "query": "MATCH (o:Op {trace: $trace}) RETURN o.type AS type, count(*) AS ops "
                    "ORDER BY ops DESC, type LIMIT 5",
                    "trace": trace,
                },
            )
        )
        out["analyses"] = {}
        for name, analysis in analyses.items():
            params = {"trace": trace, **_params(analysis, graph, trace)}
            out["analyses"][name] = (params, answer(await s.call_tool(name, params)))
        return out

    got = with_session(db_uri, EXAMPLES, work)
    # the tools: the service's and one per analysis, each with its parameters' schema
    tools = got["tools"]
    assert set(tools) == {*SERVICE_TOOLS, *analyses}
    for name, analysis in analyses.items():
        schema = tools[name].input_schema
        assert schema["type"] == "object" and "trace" in schema["required"]
        assert set(schema["properties"]) == {p.name for p in analysis.params}
        for p in analysis.params:
            if p.type == "INTEGER":
                assert schema["properties"][p.name]["type"] == "integer"
            if p.choices:
                assert schema["properties"][p.name]["enum"] == list(p.choices)
    assert got["ingest"]["trace"] == trace and got["ingest"]["nodes"]["Op"] > 0
    listed = {t["trace"]: t for t in got["traces"]["traces"]}
    assert listed[trace]["framework"] == "tensorflow" and listed[trace]["has_kernels"]
    # every analysis: the CLI's rows (at most ANSWER_ROWS of them, the rest counted)
    for name, (params, body) in got["analyses"].items():
        args = [a for k, v in params.items() if k != "trace" for a in ("--param", f"{k}={v}")]
        rows = cli_json(db_uri, "query", name, "--trace", trace, *args)
        if "not_available" in body:
            assert rows == [], name
            continue
        assert body["rows"] == rows[:ANSWER_ROWS], name
        assert body.get("rows_cut", 0) == max(0, len(rows) - ANSWER_ROWS), name
    cypher = cli_json(
        db_uri,
        "cypher",
        "MATCH (o:Op {trace: $trace}) RETURN o.type AS type, count(*) AS ops ORDER BY ops DESC, type LIMIT 5",
        "--trace",
        trace,
    )
    assert got["cypher"]["rows"] == cypher and len(cypher) == 5


def test_refusals_are_one_line_and_missing_facts_typed(graph, db_uri, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / SAMPLE).write_bytes((EXAMPLES / SAMPLE).read_bytes())
    (root / "escape").symlink_to(EXAMPLES)  # a link out of the root
    names = EXAMPLES / "tf2-resnet50-opnames.txt"  # no times: timed analyses are not available
    (root / names.name).write_bytes(names.read_bytes())
    job = root / "job"  # a directory: a job's rank files, one trace
    job.mkdir()
    for rank_file in sorted((Path(__file__).parent / "data" / "pytorch_dist").glob("straggler.rank*.json.gz")):
        (job / rank_file.name).write_bytes(rank_file.read_bytes())

    async def work(s: ClientSession) -> dict[str, Any]:
        calls = {
            "write": ("cypher", {"query": "CREATE (n:Op {trace: 'x'}) RETURN n"}),
            "load_csv": ("cypher", {"query": "LOAD CSV FROM 'file:///etc/passwd' AS row RETURN row"}),
            # a procedure that reads beyond the trace graph (each engine's own)
            "procedure": (
                "cypher",
                {"query": "CALL dbms.procedures()" if db_uri == "embedded" else "CALL dbms.listConfig()"},
            ),
            "outside": ("ingest", {"path": str(EXAMPLES / SAMPLE)}),
            "dotdot": ("ingest", {"path": f"../{tmp_path.name}/../../etc/passwd"}),
            "link": ("ingest", {"path": f"escape/{SAMPLE}"}),
            "missing": ("ingest", {"path": "nothing-here.json"}),
            "no_trace": ("top-ops", {"trace": "mcp-no-such-trace"}),
            "bad_param": ("top-ops", {"trace": "mcp-no-such-trace", "n": -5}),
        }
        out = {k: await s.call_tool(tool, args) for k, (tool, args) in calls.items()}
        out["ingest"] = answer(await s.call_tool("ingest", {"path": names.name, "trace": "mcp-names"}))
        out["unavailable"] = answer(await s.call_tool("top-ops", {"trace": "mcp-names"}))
        out["job"] = answer(await s.call_tool("ingest", {"path": "job", "trace": "mcp-job"}))
        out["stragglers"] = answer(await s.call_tool("straggler-ranks", {"trace": "mcp-job"}))
        return out

    got = with_session(db_uri, root, work)
    for key in ("write", "load_csv", "procedure", "outside", "dotdot", "link", "missing", "no_trace", "bad_param"):
        result = got[key]
        text = result.content[0].text
        assert result.is_error and "\n" not in text and text, (key, text)
    assert "is not allowed" in got["procedure"].content[0].text
    assert "outside the directory this server may ingest from" in got["outside"].content[0].text
    assert "outside the directory" in got["link"].content[0].text
    assert "no such file or directory" in got["missing"].content[0].text
    assert "mcp-no-such-trace" in got["no_trace"].content[0].text
    assert "parameter n" in got["bad_param"].content[0].text
    # nothing was written by the refused statements
    assert graph.run("MATCH (n:Op {trace: 'x'}) RETURN count(n)", {}, trace=None).rows[0][0] == 0
    assert got["unavailable"]["not_available"]["fact"] == "times"
    # a directory is one trace: the job of its rank files
    assert got["job"]["trace"] == "mcp-job" and got["job"]["nodes"]["Rank"] == 4
    assert got["stragglers"]["rows"] == cli_json(db_uri, "query", "straggler-ranks", "--trace", "mcp-job")
    assert got["unavailable"]["note"].startswith("not available: ")


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def mcp_http_process(db_uri: str, root: Path, key: str | None):
    """``tracegraph mcp --http`` on a free port; its /mcp URL once it answers."""
    port = free_port()
    env = dict(os.environ)
    env.pop("TRACEGRAPH_API_KEY", None)
    if key:
        env["TRACEGRAPH_API_KEY"] = key
    args = [sys.executable, "-m", "tracegraph.cli", "mcp", "--http", "--port", str(port), "--root", str(root)]
    if db_uri != "embedded":
        args[3:3] = ["--db", db_uri]
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            try:
                httpx.get(url, timeout=5)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "tracegraph mcp --http did not answer"
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)


def test_streamable_http_behind_the_api_key(graph, db_uri):
    """Over streamable HTTP, the SDK's client with the key lists the same
    tools, ingests and runs every analysis with the CLI's answers; without
    the key, or with another, 401."""
    key = "mcp-test-key-0123456789"
    with mcp_http_process(db_uri, EXAMPLES, key) as url:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": key}):
            r = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers=headers, timeout=30)
            assert r.status_code == 401 and "API key" in r.json()["detail"], (headers, r.text)

        async def run() -> dict[str, Any]:
            client = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
            with anyio.fail_after(300):
                async with (
                    client,
                    streamable_http_client(url, http_client=client) as (read, write),
                    ClientSession(read, write) as s,
                ):
                    await s.initialize()
                    listed = [t.name for t in (await s.list_tools()).tools]
                    call = await s.call_tool("ingest", {"path": SAMPLE, "trace": "mcp-http", "replace": True})
                    ingested = answer(call)
                    analyses = {}
                    for name, analysis in catalog().items():
                        params = {"trace": "mcp-http", **_params(analysis, graph, "mcp-http")}
                        analyses[name] = (params, answer(await s.call_tool(name, params)))
                    query = {"query": "MATCH (o:Op {trace: $trace}) RETURN count(o) AS ops", "trace": "mcp-http"}
                    counted = answer(await s.call_tool("cypher", query))
                    return {"tools": listed, "ingest": ingested, "analyses": analyses, "cypher": counted}

        got = anyio.run(run)
    assert set(got["tools"]) == {*SERVICE_TOOLS, *catalog()}
    assert got["ingest"]["trace"] == "mcp-http"
    ops = cli_json(db_uri, "cypher", "MATCH (o:Op {trace: $trace}) RETURN count(o) AS ops", "--trace", "mcp-http")
    assert got["cypher"]["rows"] == ops and ops[0]["ops"] > 0
    # every analysis over HTTP: the CLI's rows, as over stdio
    for name, (params, body) in got["analyses"].items():
        args = [a for k, v in params.items() if k != "trace" for a in ("--param", f"{k}={v}")]
        rows = cli_json(db_uri, "query", name, "--trace", "mcp-http", *args)
        assert body.get("rows", []) == rows[:ANSWER_ROWS], name


def test_http_beyond_loopback_needs_a_key(tmp_path):
    env = dict(os.environ)
    env.pop("TRACEGRAPH_API_KEY", None)
    env.pop("TRACEGRAPH_ALLOW_NO_KEY", None)
    proc = subprocess.run(
        [sys.executable, "-m", "tracegraph.cli", "mcp", "--http", "--host", "0.0.0.0", "--port", str(free_port())],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1 and "refusing to serve on 0.0.0.0 without TRACEGRAPH_API_KEY" in proc.stderr


def test_resources_whatif_and_explain(graph, db_uri):
    """The schema and every analysis's definition are resources, a trace's
    summary a templated one; whatif and explain answer as the CLI does."""
    trace = "mcp-explain"
    cypher_dir = Path(__file__).resolve().parent.parent / "cypher"

    async def work(s: ClientSession) -> dict[str, Any]:
        answer(await s.call_tool("ingest", {"path": SAMPLE, "trace": trace, "replace": True}))
        out: dict[str, Any] = {"listed": [r.uri for r in (await s.list_resources()).resources]}
        out["templates"] = [t.uri_template for t in (await s.list_resource_templates()).resource_templates]
        out["schema"] = (await s.read_resource("tracegraph://schema")).contents[0].text
        out["top-ops"] = (await s.read_resource("tracegraph://analyses/top-ops")).contents[0].text
        out["summary"] = json.loads((await s.read_resource(f"tracegraph://traces/{trace}")).contents[0].text)
        try:
            await s.read_resource("tracegraph://traces/mcp-no-such-trace")
            out["missing"] = None
        except Exception as e:  # the SDK raises the server's error
            out["missing"] = str(e)
        out["whatif"] = answer(await s.call_tool("whatif", {"trace": trace, "match": ["type=Conv2D"], "factor": 0.5}))
        out["explain"] = answer(await s.call_tool("explain", {"trace": trace}))
        return out

    got = with_session(db_uri, EXAMPLES, work)
    assert got["listed"] == ["tracegraph://schema", *(f"tracegraph://analyses/{n}" for n in catalog())]
    assert got["templates"] == ["tracegraph://traces/{trace}"]
    assert got["schema"] == (cypher_dir / "SCHEMA.md").read_text(encoding="utf-8")
    assert got["top-ops"] == (cypher_dir / "top-ops.cypher").read_text(encoding="utf-8")
    assert got["summary"]["trace"] == trace and got["summary"]["framework"] == "tensorflow"
    assert got["missing"] and "mcp-no-such-trace" in got["missing"]
    whatif = json.loads(
        cli_here(
            "whatif", "--trace", trace, "--match", "type=Conv2D", "--factor", "0.5", "--format", "json", db=db_uri
        ).stdout
    )
    assert got["whatif"] == whatif and got["whatif"]["matched_ops"] > 0
    explain = got["explain"]
    assert explain["trace"]["trace"] == trace
    assert explain["top-ops"]["rows"] == cli_json(db_uri, "query", "top-ops", "--trace", trace, "--param", "n=5")
    assert explain["peak-memory"]["rows"] == cli_json(db_uri, "query", "peak-memory", "--trace", trace)[:5]
    ocp = cli_json(db_uri, "query", "observed-critical-path-summary", "--trace", trace)
    assert explain["observed-critical-path-summary"]["rows"] == ocp[:10]
    # a one-rank trace without steps: those sections say why, in the analysis's words
    assert explain["step-breakdown"]["not_available"].startswith("the trace has no steps")


def test_tool_definitions_are_valid_mcp_tools():
    """Every tool, as sent, is a Tool of the MCP specification (the SDK's
    model of its schema); its inputSchema is a JSON Schema (2020-12) for an
    object, and each declared default is valid under its own schema."""
    import mcp_types
    from jsonschema import Draft202012Validator

    from tracegraph.api.mcp_server import tools

    listed = tools()
    assert len({t.name for t in listed}) == len(listed)
    for tool in listed:
        wire = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
        assert set(wire) >= {"name", "description", "inputSchema"}, wire
        assert mcp_types.Tool.model_validate(wire) == tool
        schema = wire["inputSchema"]
        Draft202012Validator.check_schema(schema)
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        for prop in schema["properties"].values():
            if "default" in prop:
                Draft202012Validator(prop).validate(prop["default"])
        validator = Draft202012Validator(schema)
        assert not validator.is_valid({"no_such_argument": 1}), tool.name
    top = Draft202012Validator(next(t for t in listed if t.name == "top-ops").input_schema)
    assert top.is_valid({"trace": "t", "n": 5}) and not top.is_valid({"trace": "t", "n": "five"})
