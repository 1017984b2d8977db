"""The time limit on a whole statement (``Deadline`` in tracegraph/db/base.py),
with statements injected: the caller's answer comes when the limit passes,
not when the statement ends, and ``close`` waits for statements given up
on. No test here depends on how fast or busy the machine is: each
statement waits on an event the test sets, and every wait is bounded by a
minute.
"""

from __future__ import annotations

import threading
import time

import pytest

from tracegraph.db.base import Deadline
from tracegraph.errors import QueryTimeout


def test_a_statement_within_its_limit_answers():
    d = Deadline()
    try:
        assert d.run(60_000, lambda x, y=0: x + y, 40, y=2) == 42

        def fails() -> None:
            raise ValueError("its own error")

        with pytest.raises(ValueError, match="its own error"):
            d.run(60_000, fails)
    finally:
        d.close()


def test_the_answer_comes_at_the_limit_while_the_statement_still_runs():
    started, release, finished = threading.Event(), threading.Event(), threading.Event()

    def endless() -> str:
        started.set()
        release.wait(60)
        finished.set()
        return "too late"

    d = Deadline()
    try:
        t0 = time.monotonic()
        with pytest.raises(QueryTimeout, match=r"time limit of 300 ms"):
            d.run(300, endless)
        assert time.monotonic() - t0 >= 0.29  # not before the limit
        assert started.is_set() and not finished.is_set()  # the statement still runs: nobody waited for it
    finally:
        release.set()
        d.close()
    assert finished.is_set()


def test_close_waits_for_statements_given_up_on():
    """They hold pooled connections: a driver closed under one breaks."""
    release, finished = threading.Event(), threading.Event()

    def slow() -> None:
        release.wait(60)
        finished.set()

    d = Deadline()
    with pytest.raises(QueryTimeout):
        d.run(100, slow)
    timer = threading.Timer(0.5, release.set)
    timer.start()
    d.close()
    assert finished.is_set()
    timer.join()


def test_close_waits_a_bounded_while(monkeypatch):
    """A statement that never ends does not hold close() up for longer
    than CLOSE_WAIT_S."""
    monkeypatch.setattr(Deadline, "CLOSE_WAIT_S", 0.2)
    release = threading.Event()
    d = Deadline()
    try:
        with pytest.raises(QueryTimeout):
            d.run(100, release.wait, 60)
        t0 = time.monotonic()
        d.close()
        assert time.monotonic() - t0 < 30  # 0.2 s, with room for a busy machine; the statement runs 60 s
    finally:
        release.set()
