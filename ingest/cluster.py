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

The rank files and the scratch directory (the ranks' spill files) are
read and written by the workers and the client alike: they must share a
path (checked on every worker before the first task, one line if not).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from tracegraph.db.base import Load, PartWriter
from tracegraph.errors import UserError, first_line

if TYPE_CHECKING:
    import distributed

T = TypeVar("T")

LOCAL = "local"
# Seconds between looks at a round's tasks while waiting for them to end after a failure.
SETTLE_POLL_S = 2.0
# What each round's task does, for the one-line error when its worker dies.
ROUNDS = {"survey_rank": "reading", "write_rank": "writing", "inject_rank": "walking"}


class Stopped(Exception):
    """A task not started because another task of its round failed."""


class Cluster:
    """The job's ranks on a Dask cluster, through ``client``; ``own``: the
    local cluster this started (closed with it)."""

    def __init__(self, client: distributed.Client, own: Any = None, scratch: Path | None = None) -> None:
        self.client = client
        self.own = own
        self.scratch = scratch

    @property
    def dashboard(self) -> str | None:
        """The Dask dashboard's address (None when the scheduler has none)."""
        link = self.client.dashboard_link
        return str(link) if link else None

    def reach(self, paths: list[Path]) -> None:
        """One line unless every worker sees every path (the rank files and the scratch directory)."""
        wanted = [str(Path(p).resolve()) for p in paths]
        missing: dict[str, list[str]] = self.client.run(_missing, wanted)
        for worker, lost in sorted(missing.items()):
            if lost:
                raise UserError(
                    f"cluster worker {worker} cannot see {lost[0]}: the rank files and the scratch directory "
                    "must be on a path the workers share with this machine (--cluster-scratch DIR)"
                )
        if not missing:
            raise UserError(f"the Dask cluster at {self.client.scheduler.address} has no workers")

    def map(self, fn: Callable[..., T], calls: list[tuple[Any, ...]], done: Callable[[int], None]) -> list[T]:
        """``fn(*call)`` of every call as a task; ``done(k)`` as task ``k``
        ends. On a failure: the rest stopped, waited for, then one line."""
        from distributed import Event, as_completed

        run = uuid.uuid4().hex
        stop = f"tracegraph-stop-{run}"
        futures = [
            self.client.submit(_task, fn, stop, *call, key=f"tracegraph-{fn.__name__}-{k}-{run}", pure=False)
            for k, call in enumerate(calls)
        ]
        index = {f.key: k for k, f in enumerate(futures)}
        event = Event(stop, self.client)
        try:
            broke = None
            for f in as_completed(futures):
                if f.status != "finished":
                    broke = f
                    break
                done(index[f.key])
            if broke is None:
                results: list[T] = self.client.gather(futures)
                return results
        finally:  # a failure (or Ctrl-C): the rest stopped, and none of them running on return
            if any(f.status != "finished" for f in futures):
                event.set()
                self._settle(futures)
                with contextlib.suppress(Exception):
                    event.clear()
        errors = [f for f in futures if f.status == "error" and not isinstance(f.exception(), Stopped)]
        failed = min(errors, key=lambda f: index[f.key], default=broke)
        error = failed.exception() if failed.status == "error" else None
        if isinstance(error, UserError):
            raise error
        what = ROUNDS.get(fn.__name__, fn.__name__)
        why = f"{type(error).__name__}: {first_line(error)}" if error is not None else failed.status
        raise UserError(
            f"the Dask cluster failed {what} rank file #{index[failed.key] + 1} of {len(calls)} "
            f"({why}); nothing was published"
        )

    def _settle(self, futures: list[Any]) -> None:
        """Wait until no task of the round runs (or no worker is left to run one)."""
        from distributed import wait

        while True:
            try:
                wait(futures, timeout=SETTLE_POLL_S)
                return
            except TimeoutError:
                if not self.client.scheduler_info().get("workers"):
                    return

    def writers(self, load: Load, count: int) -> list[PartWriter]:
        return load.share(count)

    def close(self) -> None:
        try:
            self.client.close()
        finally:
            if self.own is not None:
                self.own.close()


@contextlib.contextmanager
def connect(spec: str | distributed.Client, scratch: Path | None = None) -> Iterator[Cluster]:
    """The cluster ``spec`` names: ``local`` or ``local:N`` (a LocalCluster
    of N worker processes, one thread each; N: the cores), a scheduler's
    address (``tcp://host:8786``), or a ``distributed.Client`` of one's own
    (left open). ``scratch``: a directory the workers share with this
    machine (default: the system's temporary directory, which a local
    cluster shares)."""
    try:
        import dask
        import distributed
    except ImportError:
        raise UserError("--cluster needs Dask: pip install 'tracegraph[cluster]'") from None
    if isinstance(spec, distributed.Client):
        yield Cluster(spec, None, scratch)
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
        cluster = Cluster(client, own, scratch)
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
