"""A job's ranks worked by a Dask cluster (``--cluster``).

:mod:`.job` runs a job in rounds whose per-rank work is plain functions of
picklable values; :class:`Cluster` is the place those rounds run when a
cluster does the work (the :class:`~.job.Ranks` of the job): each rank's
survey, write and injection is a Dask task. A task writes its rank's part
straight into Neo4j through a shared part of the client's load
(:meth:`~tracegraph.db.base.Load.share`); the client gathers the small
summaries, runs the job-level pass and publishes, as on one machine.

All or nothing, as on one machine: when a task fails (or its worker
dies), the tasks not yet started are stopped (a Dask event they check
first), the client waits until no task of the round is running, and only
then raises; the job's load is then aborted, so no part is being written
while the abort deletes. A worker that died is not tried again on a local
cluster (``allowed-failures`` 0); on a cluster of one's own a retried write
meets the first attempt's nodes and fails, so the job fails the same way.

Files, two ways (``files``: ``--cluster-files``):

* ``shared``: the workers read the rank files where the client names
  them, and keep the ranks' spill files in the client's scratch directory
  (``--cluster-scratch``): a path they all share (a local cluster, a
  shared volume). Checked on every worker before the first task, one line
  if not.
* ``send``: the client sends each rank file's bytes to one worker (in
  chunks of :data:`CHUNK_BYTES`, a few files in flight at a time, so the
  client holds a few chunks, not the job), which keeps it and its rank's
  spill files on its own disk and runs every task of that rank; the few
  spill files the client reads (the ranks' order keys, the path's
  segments) come back when needed. A worker that leaves the cluster
  takes its ranks with it: the job fails in one line.
* ``auto`` (the default): ``shared`` when every worker sees every path,
  else ``send``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from tracegraph.db.base import Load, PartWriter
from tracegraph.errors import UserError, first_line
from tracegraph.ingest.job import Placed, clear_spills

if TYPE_CHECKING:
    import distributed

T = TypeVar("T")

LOCAL = "local"
FILES = ("auto", "shared", "send")
# Bytes of a rank file per message when files are sent, and messages in flight per worker.
CHUNK_BYTES = int(os.environ.get("TRACEGRAPH_CLUSTER_CHUNK_BYTES", str(32 << 20)))
CHUNKS_IN_FLIGHT = 2
# Seconds between looks at a round's tasks while waiting for them to end after a failure.
SETTLE_POLL_S = 2.0
# What each round's task does, for the one-line error when its worker dies.
ROUNDS = {"survey_rank": "reading", "write_rank": "writing", "inject_rank": "walking"}


class Stopped(Exception):
    """A task not started because another task of its round failed."""


class Cluster:
    """The job's ranks on a Dask cluster, through ``client``; ``own``: the
    local cluster this started (closed with it)."""

    def __init__(
        self, client: distributed.Client, own: Any = None, scratch: Path | None = None, files: str = "auto"
    ) -> None:
        self.client = client
        self.own = own
        self.scratch = scratch
        self.files = files

    @property
    def dashboard(self) -> str | None:
        """The Dask dashboard's address (None when the scheduler has none)."""
        link = self.client.dashboard_link
        return str(link) if link else None

    def place(self, paths: list[Path], spill_dir: Path) -> Placed:
        """The rank files and spill files where the workers can use them (see the module docstring)."""
        workers = sorted(self._workers())
        if not workers:
            raise UserError(f"the Dask cluster at {self.client.scheduler.address} has no workers")
        if self.files != "send":
            missing = self._missing([*paths, spill_dir])
            if not missing:
                return Placed(paths, spill_dir)
            if self.files == "shared":
                worker, lost = missing
                raise UserError(
                    f"cluster worker {worker} cannot see {lost}: with --cluster-files shared the rank files and "
                    "the scratch directory must be on a path the workers share with this machine "
                    "(--cluster-scratch DIR), or send the files (--cluster-files send)"
                )
        return self._send(paths, spill_dir, workers)

    def _missing(self, paths: list[Path]) -> tuple[str, str] | None:
        """A worker and a path it cannot see, if any."""
        wanted = [str(Path(p).resolve()) for p in paths]
        missing: dict[str, list[str]] = self.client.run(_missing, wanted)
        for worker, lost in sorted(missing.items()):
            if lost:
                return worker, lost[0]
        return None

    def _send(self, paths: list[Path], here: Path, workers: list[str]) -> Placed:
        """Each rank file to a worker (the largest first, each to the one
        given the fewest bytes so far), into a directory of the job's own
        under every worker's temporary directory; what comes back goes
        into ``here`` (this process's spill directory)."""

        bases: dict[str, str] = self.client.run(_worker_dir, here.name)
        if len(set(bases.values())) != 1:
            raise UserError(
                "--cluster-files send: the cluster's workers have different temporary directories "
                f"({', '.join(sorted(set(bases.values())))}); give them one TMPDIR"
            )
        spill_dir = Path(next(iter(bases.values())))
        sizes = [p.stat().st_size for p in paths]
        given = dict.fromkeys(workers, 0)
        homes = [""] * len(paths)
        for k in sorted(range(len(paths)), key=lambda k: -sizes[k]):
            homes[k] = min(workers, key=lambda w: (given[w], w))
            given[homes[k]] += sizes[k]
        placed = Placed(
            [spill_dir / "in" / f"{k}-{p.name}" for k, p in enumerate(paths)], spill_dir, homes, here / "fetched"
        )
        flight: set[Any] = set()
        try:
            for k, p in enumerate(paths):
                for offset, chunk in _chunks(p):
                    flight = self._drain(flight, CHUNKS_IN_FLIGHT * len(workers) - 1, homes)
                    # straight to the worker (not through the scheduler), then written there
                    data = self.client.scatter(chunk, workers=[homes[k]], direct=True, hash=False)
                    flight.add(
                        self.client.submit(
                            _receive,
                            str(placed.paths[k]),
                            offset,
                            data,
                            workers=[homes[k]],
                            allow_other_workers=False,
                            pure=False,
                        )
                    )
                    del data, chunk
            self._drain(flight, 0, homes)
        except BaseException as e:
            with contextlib.suppress(Exception):
                self.discard(placed)
            if isinstance(e, Exception) and not isinstance(e, UserError):
                raise UserError(
                    f"could not send the rank files to the Dask cluster: {type(e).__name__}: {first_line(e)}"
                ) from None
            raise
        return placed

    def _drain(self, flight: set[Any], keep: int, homes: list[str]) -> set[Any]:
        """Wait until at most ``keep`` of the chunks in flight are not yet
        written (raising a chunk's error, or one line when a worker left)."""
        from distributed import wait

        while len(flight) > keep:
            try:
                done, flight = wait(flight, timeout=SETTLE_POLL_S, return_when="FIRST_COMPLETED")
            except TimeoutError:
                gone = sorted(set(homes) - self._workers())
                if gone:
                    raise UserError(
                        f"cluster worker {gone[0]} left the cluster while the rank files were sent to it"
                    ) from None
                continue
            for f in done:
                f.result()
        return flight

    def map(
        self,
        fn: Callable[..., T],
        calls: list[tuple[Any, ...]],
        done: Callable[[int], None],
        homes: list[str] | None = None,
        at_once: int | None = None,
    ) -> list[T]:
        """``fn(*call)`` of every call as a task (call ``k`` on ``homes[k]``
        when given); ``done(k)`` as task ``k`` ends. On a failure: the rest
        stopped, waited for, then one line. ``at_once`` bounds a process's
        threads, not the cluster's tasks: each runs on a worker (the one
        holding its file, when placed), writing through a connection of its
        own (a load that takes one part at a time is not shared with a
        cluster)."""
        from distributed import Event, wait

        run = uuid.uuid4().hex
        stop = f"tracegraph-stop-{run}"
        where: list[dict[str, Any]] = (
            [{"workers": [h], "allow_other_workers": False} for h in homes] if homes else [{} for _ in calls]
        )
        futures = [
            self.client.submit(
                _task, fn, stop, *call, key=f"tracegraph-{fn.__name__}-{k}-{run}", pure=False, **where[k]
            )
            for k, call in enumerate(calls)
        ]
        index = {f.key: k for k, f in enumerate(futures)}
        event = Event(stop, self.client)
        broke: Any = None
        lost: tuple[int, str] | None = None
        try:
            pending = set(futures)
            while pending and broke is None and lost is None:
                try:
                    finished, pending = wait(pending, timeout=SETTLE_POLL_S, return_when="FIRST_COMPLETED")
                except TimeoutError:
                    finished = set()
                for f in sorted(finished, key=lambda f: index[f.key]):
                    if f.status != "finished":
                        broke = f
                        break
                    done(index[f.key])
                if homes and broke is None:
                    lost = self._gone(homes, [index[f.key] for f in pending])
            if broke is None and lost is None:
                results: list[T] = self.client.gather(futures)
                return results
        finally:  # a failure (or Ctrl-C): the rest stopped, and none of them running on return
            if any(f.status != "finished" for f in futures):
                event.set()
                self._settle(futures, homes)
                with contextlib.suppress(Exception):
                    event.clear()
        what = ROUNDS.get(fn.__name__, fn.__name__)
        if broke is None and lost is not None:
            raise UserError(
                f"the Dask cluster failed {what} rank file #{lost[0] + 1} of {len(calls)} (its worker "
                f"{lost[1]}, which held the file sent to it, left the cluster); nothing was published"
            )
        errors = [f for f in futures if f.status == "error" and not isinstance(f.exception(), Stopped)]
        failed = min(errors, key=lambda f: index[f.key], default=broke)
        error = failed.exception() if failed.status == "error" else None
        if isinstance(error, UserError):
            raise error
        why = f"{type(error).__name__}: {first_line(error)}" if error is not None else failed.status
        raise UserError(
            f"the Dask cluster failed {what} rank file #{index[failed.key] + 1} of {len(calls)} "
            f"({why}); nothing was published"
        )

    def _gone(self, homes: list[str], pending: list[int]) -> tuple[int, str] | None:
        """The first pending call whose worker has left the cluster (its task would wait for ever)."""
        if not pending:
            return None
        alive = self._workers()
        for k in sorted(pending):
            if homes[k] not in alive:
                return k, homes[k]
        return None

    def fetch(self, placed: Placed, path: Path, index: int) -> Path:
        """A spill file of rank file ``index``'s, copied here from its worker when files are sent."""
        if placed.homes is None:
            return path
        local = placed.fetched / path.name
        if not local.exists():
            home = placed.homes[index]
            if home not in self._workers():
                raise UserError(
                    f"the Dask cluster lost worker {home}, which held rank file #{index + 1}; nothing was published"
                )
            future = self.client.submit(_read, str(path), workers=[home], allow_other_workers=False, pure=False)
            data = future.result()
            local.parent.mkdir(parents=True, exist_ok=True)
            part = local.with_suffix(".part")
            part.write_bytes(data)
            part.replace(local)
        return local

    def clear(self, placed: Placed, patterns: list[str]) -> None:
        if placed.homes is None:  # the client's own spill directory, which the workers share
            clear_spills(placed.spill_dir, patterns)
            return
        clear_spills(placed.fetched, patterns)
        with contextlib.suppress(Exception):
            self.client.run(clear_spills, str(placed.spill_dir), patterns)

    def discard(self, placed: Placed) -> None:
        if placed.homes is None:
            return
        shutil.rmtree(placed.fetched, ignore_errors=True)
        with contextlib.suppress(Exception):
            self.client.run(shutil.rmtree, str(placed.spill_dir), True)

    def _workers(self) -> set[str]:
        """The addresses of the workers the scheduler has now."""
        return set(self.client.scheduler_info().get("workers", {}))

    def _settle(self, futures: list[Any], homes: list[str] | None = None) -> None:
        """Wait until no task of the round runs (or no worker is left to
        run one; a task bound to a worker that left is cancelled)."""
        from distributed import wait

        while True:
            try:
                wait(futures, timeout=SETTLE_POLL_S)
                return
            except TimeoutError:
                alive = self._workers()
                if not alive:
                    return
                if homes:
                    orphans = [f for k, f in enumerate(futures) if homes[k] not in alive and not f.done()]
                    if orphans:
                        self.client.cancel(orphans)
                        futures = [f for f in futures if f not in orphans]

    def writers(self, load: Load, count: int) -> list[PartWriter]:
        return load.share(count)

    def close(self) -> None:
        try:
            self.client.close()
        finally:
            if self.own is not None:
                self.own.close()


@contextlib.contextmanager
def connect(spec: str | distributed.Client, scratch: Path | None = None, files: str = "auto") -> Iterator[Cluster]:
    """The cluster ``spec`` names: ``local`` or ``local:N`` (a LocalCluster
    of N worker processes, one thread each; N: the cores), a scheduler's
    address (``tcp://host:8786``), or a ``distributed.Client`` of one's own
    (left open). ``scratch``: a directory the workers share with this
    machine (default: the system's temporary directory, which a local
    cluster shares). ``files``: how the workers get the rank files (see
    the module docstring)."""
    if files not in FILES:
        raise UserError(f"--cluster-files {files!r}: use one of {', '.join(FILES)}")
    try:
        import dask
        import distributed
    except ImportError:
        raise UserError("--cluster needs Dask: pip install 'tracegraph[cluster]'") from None
    if isinstance(spec, distributed.Client):
        yield Cluster(spec, None, scratch, files)
        return
    own = None
    if spec == LOCAL or spec.startswith(LOCAL + ":"):
        count = spec.partition(":")[2]
        if count and (not count.isdigit() or int(count) < 1):
            raise UserError(f"--cluster {spec!r}: local:N wants N, a number of workers of 1 or more")
        n = int(count) if count else (os.cpu_count() or 1)
        # a worker that dies is not tried again: the job fails at once, in one line
        with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
            own = distributed.LocalCluster(
                n_workers=n, threads_per_worker=1, processes=True, dashboard_address=":0", silence_logs=40
            )
        address = own.scheduler_address
    else:
        address = spec
    try:
        try:
            client = distributed.Client(address, timeout="20s")
        except (OSError, TimeoutError, ValueError) as e:
            raise UserError(f"cannot reach the Dask scheduler at {address}: {first_line(e)}") from None
        cluster = Cluster(client, own, scratch, files)
        own = None
        try:
            yield cluster
        finally:
            cluster.close()
    finally:
        if own is not None:
            own.close()


def _task(fn: Callable[..., T], stop: str, *args: Any) -> T:
    """A rank's round on a worker, unless its round was stopped."""
    from distributed import Event

    if Event(stop).is_set():
        raise Stopped(stop)
    return fn(*args)


def _missing(paths: list[str]) -> list[str]:
    """The paths this worker cannot see."""
    return [p for p in paths if not os.path.exists(p)]


def _chunks(path: Path) -> Iterator[tuple[int, bytes]]:
    """``path`` in pieces of CHUNK_BYTES with their offsets (an empty file: one empty piece)."""
    with path.open("rb") as f:
        offset = 0
        while True:
            chunk = f.read(CHUNK_BYTES)
            if chunk or not offset:
                yield offset, chunk
            if len(chunk) < CHUNK_BYTES:
                return
            offset += len(chunk)


def _worker_dir(name: str) -> str:
    """This worker's directory for a job sent to it (made here)."""
    path = Path(tempfile.gettempdir()) / f"tracegraph-sent-{name}"
    (path / "in").mkdir(parents=True, exist_ok=True)
    return str(path)


def _receive(path: str, offset: int, data: bytes) -> None:
    """A chunk of a rank file sent to this worker, written at ``offset``."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        os.pwrite(fd, data, offset)
    finally:
        os.close(fd)


def _read(path: str) -> bytes:
    """A spill file of this worker's, for the client."""
    return Path(path).read_bytes()
