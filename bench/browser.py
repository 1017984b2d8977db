"""Headless Chromium and a real ``tracegraph serve`` for the web UI's
browser tests (tests/test_ui_browser.py) and benchmark (bench/ui_timeline.py).

The browser is the system's Chromium (Debian's ``chromium`` package),
driven by Playwright for Python: ``playwright install`` downloads browser
builds of its own, which this project never does.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def find_chromium() -> str | None:
    """The system Chromium: $TRACEGRAPH_CHROMIUM, else the usual paths, else PATH."""
    env = os.environ.get("TRACEGRAPH_CHROMIUM")
    if env:
        return env if os.access(env, os.X_OK) else None
    for path in CHROMIUM_CANDIDATES:
        if os.access(path, os.X_OK):
            return path
    return shutil.which("chromium") or shutil.which("chromium-browser")


def why_no_browser() -> str | None:
    """None when a browser test can run, else the reason it cannot."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright for Python is not installed (pip install -e '.[test]')"
    if find_chromium() is None:
        return "no Chromium found (apt-get install chromium, or set TRACEGRAPH_CHROMIUM)"
    return None


@contextlib.contextmanager
def browser_context(playwright, *, width: int = 1400, height: int = 900, **kwargs):
    """A Chromium context with a fresh profile (--user-data-dir) that is removed after."""
    profile = tempfile.mkdtemp(prefix="tracegraph-chromium-")
    try:
        ctx = playwright.chromium.launch_persistent_context(
            profile,
            executable_path=find_chromium(),
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": width, "height": height},
            accept_downloads=True,
            **kwargs,
        )
        try:
            yield ctx
        finally:
            ctx.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(home: Path, *, env: dict | None = None, log: Path | None = None, timeout_s: float = 180):
    """``tracegraph serve`` on a free loopback port with data directory ``home``; yields its base URL."""
    with serve_process(home, env=env, log=log, timeout_s=timeout_s) as (_proc, base):
        yield base


@contextlib.contextmanager
def serve_process(
    home: Path, *, env: dict | None = None, log: Path | None = None, args: tuple = (), timeout_s: float = 180
):
    """:func:`serve` with more ``args`` for it, yielding ``(process, base URL)``
    once ``/health`` answers. ``TRACEGRAPH_DB`` and ``TRACEGRAPH_API_KEY``
    are unset unless ``env`` sets them. On the way out the process is
    stopped (SIGTERM), unless it has exited already (a test may have
    paused it, so it gets SIGCONT first)."""
    port = free_port()
    full = dict(os.environ, TRACEGRAPH_HOME=str(home))
    for var in ("TRACEGRAPH_DB", "TRACEGRAPH_API_KEY"):
        full.pop(var, None)
    full.update(env or {})
    out = open(log, "wb") if log else subprocess.DEVNULL  # noqa: SIM115 - the server's log while it runs
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracegraph.cli", "serve", "--port", str(port), *args],
        env=full,
        stdout=out,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"tracegraph serve exited {proc.returncode}" + (f"; see {log}" if log else ""))
            try:
                with urllib.request.urlopen(f"{base}/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("tracegraph serve did not answer /health")
            time.sleep(0.2)
        yield proc, base
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(30)
        if log:
            out.close()
