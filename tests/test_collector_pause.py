"""The ingest pauses Python's garbage collector while it prepares a trace
(ingest.pipeline.collector_paused) and leaves it as it found it, also
when preparations overlap in threads or one fails."""

from __future__ import annotations

import gc
import threading

import pytest

from tracegraph.errors import InputError
from tracegraph.ingest import pipeline


@pytest.fixture(autouse=True)
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_paused_inside_and_on_again_after(tmp_path):
    with pipeline.collector_paused():
        assert not gc.isenabled()
        with pipeline.collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer one still runs
    assert gc.isenabled()
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [')
    with pytest.raises(InputError):
        pipeline.prepare([bad], "bad")
    assert gc.isenabled()


def test_overlapping_preparations_in_threads():
    """The first to begin is the last to end, and the other way round: the
    collector stays off until both are done."""
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def a():
        with pipeline.collector_paused():
            a_in.set()
            b_in.wait(10)
        a_out.set()

    def b():
        a_in.wait(10)
        with pipeline.collector_paused():
            b_in.set()
            a_out.wait(10)
            seen["after a ended"] = gc.isenabled()
        seen["after both"] = gc.isenabled()

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert seen == {"after a ended": False, "after both": True}


def test_a_collector_off_before_stays_off():
    gc.disable()
    with pipeline.collector_paused():
        pass
    assert not gc.isenabled()
