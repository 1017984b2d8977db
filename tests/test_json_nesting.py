"""JSON nested past what a C decoder survives is refused (or streamed), not
a crash, even in a process whose recursion limit was raised.

CI once lost a worker to a segmentation fault: a test had raised the
recursion limit to 100,000, and msgspec then recursed a hundred thousand
levels into a Chrome trace's ``[[[[...`` on Python 3.11. The readers that
could crash so are run here in a child process with that limit, so that a
crash fails a test instead of killing the worker.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap

import kineto_builder as kb
import pytest

from tracegraph.ingest import json_nesting


def _depth_by_hand(text: str) -> int:
    """Nesting depth read one character at a time (strings and escapes)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def _random_json_ish(rng: random.Random) -> str:
    """Brackets and strings holding brackets, quotes and backslash runs."""
    parts = []
    for _ in range(rng.randint(0, 40)):
        if rng.random() < 0.3:
            parts.append(json.dumps("".join(rng.choice('[]{}"\\a') for _ in range(rng.randint(0, 8)))))
        else:
            parts.append(rng.choice("[]{}a,:"))
    return "".join(parts)


@pytest.mark.parametrize("block", [1, 2, 3, 7, 1 << 24])
def test_depth_is_the_depth_read_by_hand_whatever_the_block(monkeypatch, block):
    monkeypatch.setattr(json_nesting, "_BLOCK", block)
    rng = random.Random(block)
    for _ in range(1500):
        text = _random_json_ish(rng)
        assert json_nesting.deepest(text.encode()) == _depth_by_hand(text), text


def test_depth_of_known_texts():
    cases = {
        "": 0,
        "1": 0,
        "[]": 1,
        '{"a": [1, {"b": [[]]}]}': 5,
        '["[[[[", "\\"[[[", "\\\\", [[]]]': 3,  # brackets in strings, an escaped quote, an escaped backslash
        '["\\\\\\"[[" ]': 1,  # \\\" is a backslash then a quote, still inside the string
        "]]]][": 0,  # invalid: the decoder says so, not this
    }
    for text, depth in cases.items():
        assert json_nesting.deepest(text.encode()) == depth, text


def _run_with_raised_limit(code: str) -> subprocess.CompletedProcess[str]:
    program = "import sys\nsys.setrecursionlimit(1_000_000)\n" + textwrap.dedent(code)
    return subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300)


def test_a_chrome_trace_nested_100k_deep_is_one_line_with_a_raised_recursion_limit(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"traceEvents": [{"ph": "X", "args": ' + "[" * 100_000 + "]" * 100_000 + "}]}")
    done = _run_with_raised_limit(f"""
        from tracegraph.errors import InputError
        from tracegraph.ingest.formats.chrome import trace
        try:
            trace.parse({str(path)!r})
        except InputError as e:
            print(e)
    """)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == f"{path}: JSON nested too deeply (more than 512 levels of arrays and objects)"


def test_an_execution_trace_nested_100k_deep_is_one_line_with_a_raised_recursion_limit(tmp_path):
    path = tmp_path / "et.json"
    path.write_text('{"schema": "1.0.1", "nodes": [{"attrs": ' + "[" * 100_000 + "]" * 100_000 + "}]}")
    done = _run_with_raised_limit(f"""
        from pathlib import Path
        from tracegraph.errors import InputError
        from tracegraph.ingest.formats.kineto import et
        try:
            et._load(Path({str(path)!r}))
        except InputError as e:
            print(e)
    """)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == f"{path}: JSON nested too deeply (more than 512 levels of arrays and objects)"


def test_kineto_args_nested_deep_are_streamed_with_a_raised_recursion_limit(tmp_path):
    """The in-memory reader hands such a file to the stream (which builds
    values without recursing): the trace reads as without them."""
    doc = kb.document()
    names = sorted(e["name"] for e in doc["traceEvents"] if e.get("cat") == "cpu_op")
    skipped = {"ph": "X", "cat": "overhead", "pid": 1, "tid": 1, "ts": 0, "dur": 1, "name": "g"}
    doc["traceEvents"].append({**skipped, "args": {"x": "DEEP"}})
    path = tmp_path / "deep.json"
    path.write_text(json.dumps(doc).replace('"DEEP"', "[" * 5000 + "1" + "]" * 5000))
    done = _run_with_raised_limit(f"""
        from tracegraph.ingest.formats.kineto import trace
        print(sorted(trace.parse({str(path)!r}).ops["name"]))
    """)
    assert done.returncode == 0, done.stderr[-2000:]
    assert set(names) <= set(eval(done.stdout)), done.stdout
