"""`tracegraph serve` as a real process on a free port, with its own data
directory: upload the seed over HTTP, compare an analysis with the CLI's
numbers, stop it, and check that the embedded server went with it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from conftest import SEED_STEPSTATS, api_process, run_cli


def redis_servers_for(home: Path) -> list[int]:
    """Live redis-server processes whose command line names this data directory
    (redis shows its socket path as its process title)."""
    from tracegraph.db.embedded import EmbeddedServer

    marks = {str(home).encode(), str(EmbeddedServer(home).socket).encode()}
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
            status = (entry / "status").read_text()
        except OSError:
            continue
        if "State:\tZ" in status:
            continue
        if cmd and b"redis-server" in cmd[0] and any(m in part for part in cmd for m in marks):
            pids.append(int(entry.name))
    return pids


@pytest.fixture
def server(tmp_path):
    home = tmp_path / "home"
    log = tmp_path / "serve.log"
    try:
        with api_process(log, home=home) as (proc, base):
            yield proc, base, home, log
    finally:
        if redis_servers_for(home):  # a killed serve leaves its server to the next user that leaves
            run_cli("traces", home=home)


def test_serve_end_to_end(server):
    proc, base, home, log = server
    with httpx.Client(base_url=base, timeout=120) as http:
        health = http.get("/health").json()
        assert health["backend"] == "embedded" and health["database"] == "reachable"
        assert redis_servers_for(home), "the embedded server runs while serve does"

        with open(SEED_STEPSTATS, "rb") as f:
            r = http.post(
                "/traces",
                data={"trace": "alexnet"},
                files=[("files", (SEED_STEPSTATS.name, f, "application/octet-stream"))],
            )
        assert r.status_code in (201, 202), r.text
        if r.status_code == 202:
            deadline = time.monotonic() + 120
            while (job := http.get(r.headers["location"]).json())["status"] not in ("done", "failed"):
                assert time.monotonic() < deadline
                time.sleep(0.1)
            assert job["status"] == "done", job
        assert [t["trace"] for t in http.get("/traces").json()] == ["alexnet"]

        api = http.get("/traces/alexnet/queries/peak-memory").json()
        assert api["rows"], api

    # The CLI on the same data directory (it shares the running server).
    cli = run_cli("query", "peak-memory", "--trace", "alexnet", "--format", "json", home=home, check=True)
    records = json.loads(cli.stdout)
    assert [dict(zip(api["columns"], row)) for row in api["rows"]] == records

    proc.send_signal(signal.SIGTERM)
    # uvicorn shuts down gracefully, then re-raises the signal: killed by SIGTERM is a clean stop.
    assert proc.wait(60) in (0, -signal.SIGTERM), log.read_text()
    assert "Application shutdown complete" in log.read_text()
    deadline = time.monotonic() + 60
    while redis_servers_for(home) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert redis_servers_for(home) == [], "serve left its embedded FalkorDB running"


def test_serve_binds_loopback_by_default(server):
    _proc, base, _home, log = server
    port = int(base.rsplit(":", 1)[1])
    # Listening on 127.0.0.1 only: this machine's other addresses are refused.
    addrs = {a[4][0] for a in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)} - {"127.0.0.1"}
    addrs = {a for a in addrs if not a.startswith("127.")}
    for addr in addrs:
        with pytest.raises(OSError):
            socket.create_connection((addr, port), timeout=2).close()
    assert "Uvicorn running on http://127.0.0.1:" in log.read_text()


def test_serve_port_in_use_exits_1_and_leaves_nothing(tmp_path):
    home = tmp_path / "home"
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = dict(os.environ, TRACEGRAPH_HOME=str(home))
        env.pop("TRACEGRAPH_DB", None)
        proc = subprocess.run(
            [sys.executable, "-m", "tracegraph.cli", "serve", "--port", str(port)],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert proc.returncode == 1, proc.stderr
    assert "address already in use" in proc.stderr
    # Its embedded server stops once idle (TRACEGRAPH_IDLE_S, a second in the tests).
    deadline = time.monotonic() + 60
    while redis_servers_for(home) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert redis_servers_for(home) == []


def test_serve_beyond_loopback_refuses_to_start_without_a_key(tmp_path, monkeypatch):
    """A port beyond loopback without TRACEGRAPH_API_KEY would hand every
    trace to whoever reaches it: serve exits 1 in one line before it binds
    anything; loopback needs no key, and TRACEGRAPH_ALLOW_NO_KEY=1 (an
    authenticating proxy in front) lets it start."""
    from tracegraph.api.app import check_exposure
    from tracegraph.api.settings import Settings
    from tracegraph.errors import BadRequest

    proc = run_cli("serve", "--host", "0.0.0.0", "--port", "1", home=tmp_path / "home", env={"TRACEGRAPH_API_KEY": ""})
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "tracegraph: error: refusing to serve on 0.0.0.0 without TRACEGRAPH_API_KEY"
    ), proc.stderr
    assert not (tmp_path / "home" / "falkordb").exists()  # nothing started
    monkeypatch.delenv("TRACEGRAPH_ALLOW_NO_KEY", raising=False)
    for host in ("127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"):
        check_exposure(host, Settings())
    for host in ("0.0.0.0", "::", "10.1.2.3", "tracegraph.example.com"):
        with pytest.raises(BadRequest, match="without TRACEGRAPH_API_KEY"):
            check_exposure(host, Settings())
        check_exposure(host, Settings(api_key="k"))
    monkeypatch.setenv("TRACEGRAPH_ALLOW_NO_KEY", "1")
    check_exposure("0.0.0.0", Settings())
