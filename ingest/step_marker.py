"""The ops that mark steps: the default pattern, a user's checked, and a
search of op names that cannot run for ever (:mod:`.steps` reads steps
from the ops this finds).

A user's pattern (``--step-marker REGEX``, the upload form's
``step_marker``) comes from whoever ingests and runs on every op name, so
it is checked before anything is read (:func:`check_marker`: no repeat
inside a repeat, no backreference) and run in a child process that is
killed past :data:`MARKER_TIME_LIMIT_S` (:func:`search`): no check of a
pattern rules out every slow one. This module imports nothing heavy: the
API checks a form's pattern with it.
"""

from __future__ import annotations

import re
from re import _parser as _sre_parser  # type: ignore[attr-defined]  # re's own parser (3.11+)
from typing import Any

from tracegraph.errors import BadRequest

DEFAULT_MARKER = r"^(?:ProfilerStep|ProfileStep)#(\d+)$"
# The longest pattern ``--step-marker`` takes.
MAX_MARKER_CHARS = 200


def check_marker(pattern: str) -> str:
    """``pattern`` when it is a step marker tracegraph runs (BadRequest in
    one line otherwise): a Python regular expression of at most
    :data:`MAX_MARKER_CHARS` characters, without a repeat inside a repeat
    (``(a+)+``) or a backreference, the two ways a pattern takes time
    exponential in a name's length: the pattern comes from whoever
    ingests, the server runs it on every op name."""
    if not pattern:
        raise BadRequest("step marker: an empty pattern marks every op")
    if len(pattern) > MAX_MARKER_CHARS:
        raise BadRequest(f"step marker: longer than {MAX_MARKER_CHARS} characters")
    try:
        parsed = _sre_parser.parse(pattern)
    except re.error as e:
        raise BadRequest(f"step marker: not a regular expression: {e}") from None
    if _risky(parsed, False):
        raise BadRequest(
            "step marker: a repeat inside a repeat, or a backreference, is not allowed (it can run for ever)"
        )
    return pattern


def _risky(items: object, in_repeat: bool) -> bool:
    """Whether a parsed pattern nests a repeat in a repeat or refers back to a group."""
    for op, arg in items:  # type: ignore[attr-defined]
        name = str(op)
        if name in ("GROUPREF", "GROUPREF_EXISTS"):
            return True
        if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            _, high, sub = arg
            if (in_repeat and high != 1) or _risky(sub, in_repeat or high != 1):
                return True
        elif name == "SUBPATTERN":
            if _risky(arg[-1], in_repeat):
                return True
        elif name == "BRANCH":
            if any(_risky(branch, in_repeat) for branch in arg[1]):
                return True
        elif name in ("ASSERT", "ASSERT_NOT") and _risky(arg[1], in_repeat):
            return True
    return False


# How long a user's marker may take over a trace's op names (seconds).
MARKER_TIME_LIMIT_S = 30.0


def search(pattern: str, names: list[str]) -> dict[int, int | None]:
    """The positions of the names ``pattern`` finds, each with the number
    it captures (:func:`_number`). The default marker runs here; a user's
    runs in a child process killed after :data:`MARKER_TIME_LIMIT_S`
    (BadRequest), since no check of a pattern rules out every slow one."""
    if pattern == DEFAULT_MARKER:
        return _search(pattern, names)
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    try:
        child = ctx.Process(target=_search_into, args=(pattern, names, send), daemon=True)
        child.start()
    except (AssertionError, OSError):  # a daemonic process (a cluster's worker) has no children: run here
        return _search(pattern, names)
    send.close()
    try:
        if not receive.poll(MARKER_TIME_LIMIT_S):
            raise BadRequest(
                f"step marker: still matching op names after {MARKER_TIME_LIMIT_S:.0f} s (a pattern that backtracks)"
            )
        found: dict[int, int | None] = receive.recv()
        return found
    except EOFError:
        raise BadRequest("step marker: the pattern could not be run on the op names") from None
    finally:
        if child.is_alive():
            child.kill()
        child.join(5)
        receive.close()


def _search(pattern: str, names: list[str]) -> dict[int, int | None]:
    rx = re.compile(pattern)
    out: dict[int, int | None] = {}
    for i, name in enumerate(names):
        m = rx.search(name)
        if m is not None:
            out[i] = _number(m)
    return out


def _search_into(pattern: str, names: list[str], send: Any) -> None:  # pragma: no cover - runs in the child
    send.send(_search(pattern, names))
    send.close()


def _number(m: re.Match[str]) -> int | None:
    """The first group of digits the match captured (None: none)."""
    for g in m.groups():
        if g is not None and g.isdigit():
            return int(g)
    return None
