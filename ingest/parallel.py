"""The files of one run read at once, one worker process per file, up to the
machine's cores.

A distributed job is one file per rank, and each file is read and
assembled on its own; only joining them needs them all. So a format's
``parse_many`` hands each file to :func:`map_files`, which runs the reading
function in worker processes and returns what each sends back, in file
order. What comes back must pickle cheaply (numeric arrays and frames, not
millions of small lists: unpickling those costs more than reading the
file did, bench/RESULTS.md).

A worker is a fresh ``python -m tracegraph.ingest.parallel`` that reads its
calls from stdin and writes each result to stdout as soon as it has it. Not
:mod:`multiprocessing`: its spawn and forkserver methods import the
caller's main script again in every worker (a user's script without an
``if __name__ == "__main__"`` guard would run twice, or fail), and fork
copies the caller's threads and locks (an API server's). A worker ends
when its stdin does, so none outlives a parent that was killed or
interrupted.

Workers are worth their start (a process importing pandas, ~0.5 s) only
for a large run: below :data:`MIN_PARALLEL_BYTES` of files, or with one
file or one core, everything runs in this process. The environment
variable ``TRACEGRAPH_PARSE_WORKERS`` sets the number of processes (1: none).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import pickle
import struct
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, TypeVar

from tracegraph.db.base import checkpoint
from tracegraph.errors import UserError
from tracegraph.ingest import source
from tracegraph.ingest.limits import MiB

WORKERS_ENV = "TRACEGRAPH_PARSE_WORKERS"
# A run whose files hold less than this (on disk) is read in this process.
MIN_PARALLEL_BYTES = 8 * MiB

T = TypeVar("T")


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def worker_count(paths: Sequence[Path], requested: int | None = None) -> int:
    """How many processes read ``paths``: ``requested``, else the
    environment's, else one per file up to the cores for a large run."""
    if requested is None:
        text = os.environ.get(WORKERS_ENV, "").strip()
        if text:
            if not text.isdigit() or int(text) < 1:
                raise UserError(f"{WORKERS_ENV} must be a whole number of processes (1 or more), not {text!r}")
            requested = int(text)
    if requested is not None:
        return max(1, min(requested, len(paths)))
    if len(paths) < 2 or sum(source.size(p) for p in paths) < MIN_PARALLEL_BYTES:
        return 1
    return min(len(paths), cores())


def map_files(
    fn: Callable[..., T], calls: Sequence[tuple[Any, ...]], paths: Sequence[Path], workers: int | None = None
) -> list[T]:
    """``[fn(*call) for call in calls]``, each call reading ``paths[i]``,
    computed in :func:`worker_count` processes (``fn`` a module-level
    function; its calls and results pickled). The files are dealt to the
    workers largest first, each to the least loaded. Once a call fails
    every worker is stopped, and the error of the first file (in file
    order) among those that failed is raised."""
    n = worker_count(paths, workers)
    if n <= 1:
        return [fn(*call) for call in calls]
    shares: list[list[int]] = [[] for _ in range(n)]
    loads = [0] * n
    for i in sorted(range(len(calls)), key=lambda i: -source.size(paths[i])):
        w = min(range(n), key=lambda w: (loads[w], len(shares[w])))  # fewest files among the least loaded
        shares[w].append(i)
        loads[w] += source.size(paths[i])
    results: dict[int, T] = {}
    errors: dict[int, BaseException] = {}  # file index -> its error
    ended: dict[int, int] = {}  # worker -> the file it was on when its answers stopped
    stopping = threading.Event()
    procs: list[subprocess.Popen[bytes]] = []
    threads: list[threading.Thread] = []

    def stop() -> None:
        stopping.set()
        for p in procs:
            p.kill()

    def run(w: int) -> None:
        proc, share = procs[w], shares[w]
        assert proc.stdin is not None and proc.stdout is not None
        i = share[0]
        try:
            # stdin stays open until the worker is done: its end tells the worker this process died
            proc.stdin.write(pickle.dumps((fn.__module__, fn.__qualname__, [calls[i] for i in share])))
            proc.stdin.flush()
            for i in share:
                status, value = _receive(proc.stdout)
                if status == "error":
                    errors[i] = value
                    stop()
                    return
                results[i] = value
        except (EOFError, BrokenPipeError, OSError):
            ended[w] = i  # the worker died (or was stopped): why, from its exit and stderr below
        except BaseException as e:
            errors[i] = e
            stop()

    with contextlib.ExitStack() as stack:
        logs = [stack.enter_context(tempfile.TemporaryFile()) for _ in range(n)]  # a worker's stderr
        try:
            for log in logs:
                procs.append(
                    subprocess.Popen(
                        # -P: not the working directory first on sys.path (a json.py there would be imported)
                        [sys.executable, "-P", "-m", "tracegraph.ingest.parallel"],
                        stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE,
                        stderr=log,
                    )
                )
                checkpoint("worker-started")
            for w in range(n):
                thread = threading.Thread(target=run, args=(w,), daemon=True)
                thread.start()
                threads.append(thread)
            for thread in threads:
                thread.join()
        except BaseException:
            # Interrupted (Ctrl-C) or failed, in whatever phase: while the
            # workers start, read or are waited for. They go now, not after
            # their files.
            stop()
            raise
        finally:
            _reap(procs, threads)
        for w, i in ended.items():
            code = procs[w].wait()
            if stopping.is_set() and code == -9:
                continue  # stopped because another file failed
            logs[w].seek(0)
            errors[i] = RuntimeError(
                f"the worker reading {paths[i]} ended without an answer "
                f"(exit code {code}): {_last_line(logs[w].read())}"
            )
            stop()
    if errors:
        first = min(errors)
        error = errors[first]
        if not isinstance(error, UserError):  # (a UserError names its file already)
            error.add_note(f"while reading {paths[first]}")
        raise error
    return [results[i] for i in range(len(calls))]


def _reap(procs: list[subprocess.Popen[bytes]], threads: list[threading.Thread]) -> None:
    """Nothing left behind: the threads talking to the workers ended (they
    end with their worker's answers, or its end), the pipes closed and
    every worker waited for. A worker whose work is done ends when its
    stdin closes; one that was stopped has been killed."""
    for thread in threads:
        thread.join()
    for p in procs:
        for pipe in (p.stdin, p.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):  # a killed worker's stdin: its unsent bytes go nowhere
                    pipe.close()
        p.wait()


def _receive(stream: IO[bytes]) -> tuple[str, Any]:
    """One (status, value) a worker wrote: its length (8 bytes), then its pickle."""
    head = stream.read(8)
    if len(head) < 8:
        raise EOFError("worker ended")
    (size,) = struct.unpack("<Q", head)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("worker ended")
    status, value = pickle.loads(data)
    return str(status), value


def _send(stream: IO[bytes], status: str, value: Any) -> None:
    data = pickle.dumps((status, value), protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(struct.pack("<Q", len(data)))
    stream.write(data)
    stream.flush()


def _last_line(err: bytes) -> str:
    lines = err.decode("utf-8", "replace").strip().splitlines()
    return lines[-1] if lines else "no message"


def _portable(e: BaseException) -> BaseException:
    """``e`` if it survives a pickle round trip (some exceptions' own
    arguments do not rebuild them), else a RuntimeError that says what it was."""
    try:
        pickle.loads(pickle.dumps(e))
    except Exception:
        return RuntimeError(f"{type(e).__name__}: {e}")
    return e


def _serve() -> None:
    """A worker: the calls from stdin, each result to stdout when done; the
    first error is sent back and ends the worker. The results travel on a
    private copy of stdout; the worker's own stdout is its stderr, so that
    nothing a library prints can break the framing."""
    gc.disable()  # what a parse builds holds no cycles (see pipeline.collector_paused)
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    module, name, calls = pickle.load(sys.stdin.buffer)
    threading.Thread(target=_exit_with_parent, daemon=True).start()
    fn = getattr(importlib.import_module(module), name)
    for call in calls:
        try:
            value = fn(*call)
        except Exception as e:  # sent to the parent, which raises it
            _send(out, "error", _portable(e))
            return
        _send(out, "ok", value)


def _exit_with_parent() -> None:
    """End this worker when stdin ends: the parent closes it once it has
    every answer, and the system closes it when the parent dies (killed,
    interrupted), so that no worker goes on reading for nobody."""
    sys.stdin.buffer.read()
    os._exit(1)


if __name__ == "__main__":
    _serve()
