"""Functions the worker processes of tests/test_parallel_parse.py run (a
worker imports a function by its module's name, so these live in a module
of their own; the tests put this folder on the workers' PYTHONPATH)."""

from __future__ import annotations

import os
import sys


class OddError(Exception):
    """An exception whose own arguments do not rebuild it (pickle calls
    ``OddError(message)``, which has no ``code``)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def chatty(x: str) -> str:
    """Prints to stdout and from C (file descriptor 1) before answering."""
    print("hello from a worker", x)
    sys.stdout.flush()
    os.write(1, b"raw bytes on fd 1\n")
    return x.upper()


def dies(x: str) -> str:
    if x == "die":
        sys.stderr.write("about to leave\n")
        sys.stderr.flush()
        os._exit(3)
    return x


def odd(x: str) -> str:
    if x == "odd":
        raise OddError("an odd failure", 7)
    return x


def sleepy(x: str, pids: str) -> str:
    """Says which process it is (a file named ``x`` in ``pids``), then sleeps
    far longer than any test waits."""
    import time

    with open(os.path.join(pids, x), "w") as f:
        f.write(str(os.getpid()))
    time.sleep(600)
    return x


def as_json(x: str) -> str:
    import json

    return json.dumps(x)
