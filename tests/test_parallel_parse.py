"""Rank files read in worker processes (ingest/parallel.py) make the same
trace as read one after the other in this process, and a Kineto file
streamed event by event the same as one decoded whole
(ingest/formats/kineto/read.py): the faster ways of reading change no row.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import kineto_builder as kb
import pandas.testing as pdt
import pytest
from conftest import process_state

from tracegraph.errors import InputError, UserError
from tracegraph.ingest import parallel
from tracegraph.ingest.formats.kineto import events as kineto_events
from tracegraph.ingest.formats.kineto import read as kineto_read
from tracegraph.ingest.formats.kineto import trace as kineto
from tracegraph.ingest.frames import TraceFrames

DATA = Path(__file__).parent / "data"
DLRM = sorted((DATA / "nccl_dlrm").glob("*.pt.trace.json.gz"))
GLOO = sorted((DATA / "pytorch_dist").glob("straggler.rank*.json.gz"))
TABLES = ("ops", "kernels", "allocations", "syncs", "devices", "streams", "allocators")
# Single Kineto files of every kind at hand (CPU only, GPU, AMD, one DLRM rank).
KINETO_FILES = [*sorted((DATA / "kineto").glob("*.json.gz")), *sorted((DATA / "hta").glob("*.json.gz")), DLRM[0]]


def assert_same_trace(a: TraceFrames, b: TraceFrames) -> None:
    for table in TABLES:
        pdt.assert_frame_equal(getattr(a, table), getattr(b, table), obj=table)
    assert a.meta == b.meta
    assert a.sources == b.sources


@pytest.mark.parametrize("files", [DLRM, GLOO], ids=["nccl-8-ranks", "gloo-4-ranks"])
@pytest.mark.parametrize("workers", [2, 3])
def test_workers_make_the_same_trace_as_one_process(files, workers):
    # 3 workers for 8 files: shares of 3, 3 and 2 files, results back in file order.
    alone = kineto.parse_many(files, workers=1)
    together = kineto.parse_many(files, workers=workers)
    assert_same_trace(alone, together)
    # Not vacuous: every rank's rows are there, under its own prefix.
    ranks = json.loads(together.meta["ranks"])
    assert ranks == list(range(len(files)))
    assert {t.split("/")[0] for t in together.ops["thread"].dropna()} == {f"rank{r}" for r in ranks}


def test_a_workers_error_names_its_file_and_stops_the_job(tmp_path):
    files = [shutil.copy(p, tmp_path / p.name) for p in DLRM[:4]]
    bad = Path(files[2])
    bad.write_bytes(gzip.compress(gzip.decompress(bad.read_bytes())[:20_000]))
    with pytest.raises(InputError) as e:
        kineto.parse_many([Path(f) for f in files], workers=2)
    assert str(e.value) == f"{bad}: truncated JSON (the file ends inside the trace)"


def test_a_rank_named_after_the_events_is_numbered_as_in_one_process(tmp_path):
    # distributedInfo after traceEvents: unknown when the files are dealt to
    # the workers, so the file without a rank is numbered again (rank 1, not 0).
    plain = kb.write(tmp_path / "plain.json.gz", kb.document())
    doc = kb.document()
    doc["distributedInfo"] = {"backend": "nccl", "rank": 0, "world_size": 2}  # last key: after the events
    assert list(doc)[-1] == "distributedInfo"
    late = kb.write(tmp_path / "late.json.gz", doc)
    alone = kineto.parse_many([plain, late], workers=1)
    together = kineto.parse_many([plain, late], workers=2)
    assert_same_trace(alone, together)
    plain_devices = {d for d, s in zip(together.devices["name"], together.devices["uid"], strict=True) if "rank1/" in d}
    assert plain_devices == {"rank1/cpu", "rank1/cuda:0"}
    assert json.loads(together.meta["distributed_infos"])["0"]["rank"] == 0


@pytest.mark.parametrize("path", KINETO_FILES, ids=lambda p: p.name)
def test_streamed_and_whole_reads_make_the_same_trace(path, monkeypatch):
    whole = kineto.parse(path)
    monkeypatch.setattr(kineto_read, "IN_MEMORY_JSON_BYTES", 0)  # every file streamed
    streamed = kineto.parse(path)
    assert_same_trace(whole, streamed)
    assert len(whole.ops) > 0


@pytest.mark.parametrize("path", KINETO_FILES, ids=lambda p: p.name)
def test_a_file_scanned_in_many_small_pieces_makes_the_same_trace(path, monkeypatch):
    one_piece = kineto.parse(path)
    # 4 KB pieces: the tables are reserved from the first piece's rows (at
    # most 64 times them), then grown again where the file holds more
    monkeypatch.setattr(kineto_events, "PIECE_BYTES", 4096)
    assert_same_trace(one_piece, kineto.parse(path))
    assert len(one_piece.ops) > 0


_READ_PEAK = """
import sys, threading, time
from pathlib import Path
from tracegraph.ingest.formats.kineto import events

def resident_mb():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 // 2**20

events.read(Path(sys.argv[2]))  # the kernels loaded first
before, top, reading = resident_mb(), [0], [True]

def watch():  # the resident size while the file is read, every 2 ms
    while reading[0]:
        top[0] = max(top[0], resident_mb())
        time.sleep(0.002)

watcher = threading.Thread(target=watch)
watcher.start()
ev = events.read(Path(sys.argv[1]))
reading[0] = False
watcher.join()
print(len(ev.ops), top[0] - before)
"""


def test_room_reserved_from_a_first_piece_unlike_the_rest_costs_no_memory(tmp_path):
    # 4 MB of small host spans, then 60 MB of spans of a category tracegraph
    # does not read: the tables are reserved for 18 times the first piece's
    # rows, of which the rest of the file fills none
    events = [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": i, "dur": 1} for i in range(60000)]
    pad = "x" * 100_000
    events += [
        {"ph": "X", "cat": "other", "name": "b", "pid": 1, "tid": 1, "ts": 10**6 + i, "dur": 1, "args": {"s": pad}}
        for i in range(600)
    ]
    path = tmp_path / "skewed.json.gz"
    path.write_bytes(gzip.compress(json.dumps({"traceEvents": events}).encode(), 1))
    del events
    done = subprocess.run(
        [sys.executable, "-c", _READ_PEAK, str(path), str(DATA / "kineto" / "cnn-cpu.pt.trace.json.gz")],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    ops, grown_mb = map(int, done.stdout.split())
    assert ops == 60000
    # measured: 37-38 MB (the pieces and the tables the file fills); 140 MB with the room zeroed up front
    assert grown_mb < 70, f"reading the file took {grown_mb} MB more"


def test_a_gzip_files_word_on_its_size_is_taken_only_as_far_as_deflate_goes(tmp_path):
    plain = json.dumps(kb.document(rank=0)).encode()
    honest = tmp_path / "honest.json.gz"
    honest.write_bytes(gzip.compress(plain))
    assert kineto_events._text_bytes(honest) == len(plain)
    lying = tmp_path / "lying.json.gz"  # its trailer says 4 GB - 1: no 1 KB file inflates to that
    lying.write_bytes(gzip.compress(plain)[:-4] + (2**32 - 1).to_bytes(4, "little"))
    assert kineto_events._text_bytes(lying) == 1032 * lying.stat().st_size


def test_keys_after_the_events_are_read_either_way(tmp_path, monkeypatch):
    doc = kb.document(rank=3)
    info = doc.pop("distributedInfo")
    base = doc.pop("baseTimeNanoseconds")
    doc["distributedInfo"], doc["baseTimeNanoseconds"] = info, base  # both after traceEvents
    path = kb.write(tmp_path / "tail.json", doc, gz=False)
    expected = kineto.parse(kb.write(tmp_path / "head.json", kb.document(rank=3), gz=False))
    for in_memory in (1 << 30, 0):
        monkeypatch.setattr(kineto_read, "IN_MEMORY_JSON_BYTES", in_memory)
        got = kineto.parse(path)
        assert json.loads(got.meta["distributed_info"])["rank"] == 3
        pdt.assert_frame_equal(got.ops, expected.ops)


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d["traceEvents"].__setitem__(4, 17), "traceEvents[4]): an event is not a JSON object"),
        (lambda d: d["traceEvents"][6].__setitem__("args", [1, 2]), "traceEvents[6]): args is not an object"),
        (lambda d: d.__setitem__("traceEvents", {"a": 1}), "traceEvents): traceEvents is not a list"),
    ],
)
def test_bad_shapes_are_the_same_one_line_error_either_way(tmp_path, monkeypatch, mutate, message):
    doc = kb.document()
    mutate(doc)
    path = kb.write(tmp_path / "bad.json", doc, gz=False)
    for in_memory in (1 << 30, 0):
        monkeypatch.setattr(kineto_read, "IN_MEMORY_JSON_BYTES", in_memory)
        with pytest.raises(InputError) as e:
            kineto.parse(path)
        assert str(e.value) == f"{path} ({message}", in_memory


def test_args_of_other_types_are_read_as_before_either_way(tmp_path, monkeypatch):
    """Empty args of another type (``[]``, ``false``, ``""``) are no args;
    a metadata event's args may be anything, and so may those of an event
    the graph does not keep; args nested past a thousand levels (where the
    C decoder gives up) are read by the stream. Either reader, the same
    trace as the document without them."""
    plain = kb.document()
    odd = kb.document()
    odd["traceEvents"][0]["args"] = "main"  # metadata
    odd["traceEvents"][5]["args"] = []  # aten::add, no args
    odd["traceEvents"][8]["args"] = False  # aten::copy_, no args
    skipped = {"ph": "X", "cat": "overhead", "pid": 1, "tid": 1, "ts": 0, "dur": 1}  # a category not read
    odd["traceEvents"].append({**skipped, "name": "f", "args": [1]})
    odd["traceEvents"].append({**skipped, "name": "g", "args": {"x": "DEEP"}})
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(odd).replace('"DEEP"', "[" * 1100 + "1" + "]" * 1100))
    expected = kineto.parse(kb.write(tmp_path / "plain.json", plain, gz=False))
    for in_memory in (1 << 30, 0):
        monkeypatch.setattr(kineto_read, "IN_MEMORY_JSON_BYTES", in_memory)
        got = kineto.parse(path)
        pdt.assert_frame_equal(got.ops, expected.ops)
        pdt.assert_frame_equal(got.kernels, expected.kernels)


def test_text_the_c_decoder_refuses_is_read_or_refused_as_the_stream_does(tmp_path, monkeypatch):
    """Bytes that are not UTF-8 are one line either way; a lone surrogate
    escape (which yajl takes and msgspec does not) is read either way."""
    bad = tmp_path / "bad-utf8.json"
    bad.write_bytes(json.dumps(kb.document()).encode().replace(b'"aten::mm"', b'"aten::mm\xff"'))
    odd = kb.document()
    odd["traceEvents"][1]["name"] = "aten::mm \ud800"
    lone = kb.write(tmp_path / "lone.json", odd, gz=False)
    names = []
    for in_memory in (1 << 30, 0):
        monkeypatch.setattr(kineto_read, "IN_MEMORY_JSON_BYTES", in_memory)
        with pytest.raises(InputError) as e:
            kineto.parse(bad)
        assert str(e.value) == f"{bad}: malformed JSON: lexical error: invalid bytes in UTF8 string."
        names.append(sorted(kineto.parse(lone).ops["name"]))
    # read, the same way both times (yajl writes the lone surrogate as "?")
    assert names[0] == names[1] and "aten::mm ?" in names[0]


def test_how_many_workers(tmp_path, monkeypatch):
    monkeypatch.delenv(parallel.WORKERS_ENV, raising=False)
    small = [tmp_path / f"r{i}.json" for i in range(4)]
    for p in small:
        p.write_bytes(b"{}")
    assert parallel.worker_count(small) == 1  # a small job: not worth a process
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(parallel.MIN_PARALLEL_BYTES)
    assert parallel.worker_count([*small, big]) == min(5, parallel.cores())
    assert parallel.worker_count([big]) == 1  # one file
    assert parallel.worker_count(small, 8) == 4  # never more than the files
    monkeypatch.setenv(parallel.WORKERS_ENV, "3")
    assert parallel.worker_count(small) == 3
    monkeypatch.setenv(parallel.WORKERS_ENV, "many")
    with pytest.raises(UserError, match="TRACEGRAPH_PARSE_WORKERS must be a whole number"):
        parallel.worker_count(small)


# --- the worker processes themselves (tests/parallel_helpers.py) -------------------------------


@pytest.fixture
def helpers(monkeypatch):
    import parallel_helpers

    here = str(Path(__file__).parent)
    # (no empty entry: that one would be the working directory)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p))
    return parallel_helpers


def _files(tmp_path, names):
    paths = []
    for name in names:
        p = tmp_path / name
        p.write_bytes(b"")  # empty: every file weighs the same, and each worker still gets some
        paths.append(p)
    return paths


def test_what_a_worker_prints_does_not_break_its_answers(helpers, tmp_path):
    names = ["a", "b", "c"]
    out = parallel.map_files(helpers.chatty, [(n,) for n in names], _files(tmp_path, names), workers=2)
    assert out == ["A", "B", "C"]


def test_a_worker_that_dies_is_named_with_its_last_words(helpers, tmp_path):
    names = ["a", "die", "c", "d"]
    paths = _files(tmp_path, names)
    with pytest.raises(RuntimeError) as e:
        parallel.map_files(helpers.dies, [(n,) for n in names], paths, workers=2)
    assert str(e.value) == f"the worker reading {paths[1]} ended without an answer (exit code 3): about to leave"


def test_an_error_that_does_not_rebuild_still_says_what_it_was(helpers, tmp_path):
    names = ["a", "odd"]
    with pytest.raises(RuntimeError) as e:
        parallel.map_files(helpers.odd, [(n,) for n in names], _files(tmp_path, names), workers=2)
    assert str(e.value) == "OddError: an odd failure"


def test_an_error_from_a_worker_says_which_file_it_was_reading(helpers, tmp_path):
    names = ["a", "odd"]
    paths = _files(tmp_path, names)
    with pytest.raises(RuntimeError) as e:
        parallel.map_files(helpers.odd, [(n,) for n in names], paths, workers=2)
    assert e.value.__notes__ == [f"while reading {paths[1]}"]


def test_a_module_in_the_working_directory_does_not_replace_the_workers_own(helpers, tmp_path, monkeypatch):
    """Workers do not put the working directory first on their path: a
    user's json.py there is not the json module they import."""
    here = tmp_path / "project"
    here.mkdir()
    (here / "json.py").write_text("raise ImportError('the json.py of the working directory')\n")
    monkeypatch.chdir(here)
    names = ["a", "b"]
    assert parallel.map_files(helpers.as_json, [(n,) for n in names], _files(tmp_path, names), workers=2) == [
        '"a"',
        '"b"',
    ]


def _parent_script(pids: Path, tmp_path: Path, names: list[str]) -> str:
    """A parent process that reads ``names`` with two sleepy workers (each
    writes its pid into ``pids`` and sleeps for good).

    Its SIGINT is Python's default (KeyboardInterrupt), as in a program run
    from a terminal, whatever the test runner's is: a process started with
    SIGINT ignored (a background job of a shell without job control, as CI
    runners start commands) keeps ignoring it, and Python then installs no
    handler at all. That, not the parent, is why this test once saw its
    parent still running 120 s after the SIGINT."""
    return (
        "import signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "from pathlib import Path; import parallel_helpers as h; "
        "from tracegraph.ingest import parallel; "
        f"parallel.map_files(h.sleepy, [(n, {str(pids)!r}) for n in {names!r}], "
        f"[Path({str(tmp_path)!r}) / n for n in {names!r}], workers=2)"
    )


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie nobody reaped yet has ended)."""
    return process_state(pid) not in (None, "Z")


def _children(pid: int) -> list[int]:
    """The processes ``pid``'s main thread started (Linux: /proc)."""
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def _wait_until(done, deadline: float) -> None:
    import time

    while not done() and time.monotonic() < deadline:
        time.sleep(0.05)


@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGKILL"])
def test_workers_do_not_outlive_their_parent(helpers, tmp_path, signal_name):
    """The parent interrupted (Ctrl-C to it alone) or killed while it waits
    for its workers' answers: its workers end then, not after the files
    they were reading (here: never)."""
    import signal
    import subprocess
    import sys
    import time

    pids = tmp_path / "pids"
    pids.mkdir()
    names = ["a", "b"]
    _files(tmp_path, names)
    parent = subprocess.Popen([sys.executable, "-c", _parent_script(pids, tmp_path, names)], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        _wait_until(lambda: len(list(pids.iterdir())) == 2, deadline)
        workers = [int(p.read_text()) for p in pids.iterdir()]
        assert len(workers) == 2
        parent.send_signal(getattr(signal, signal_name))
        parent.wait(timeout=120)
        _wait_until(lambda: not any(map(_alive, workers)), deadline)
        assert not any(map(_alive, workers))
        if signal_name == "SIGINT":
            assert b"KeyboardInterrupt" in parent.stderr.read()
    finally:
        parent.kill()
        parent.wait()


def test_ctrl_c_while_the_workers_start(helpers, tmp_path):
    """Ctrl-C between starting one worker and the next (the parent stops
    itself there: TRACEGRAPH_PAUSE_AT): the parent ends at once, and the
    worker it had started with it, before that worker was given a file."""
    import os
    import signal
    import subprocess
    import sys
    import time

    pids = tmp_path / "pids"
    pids.mkdir()
    names = ["a", "b"]
    _files(tmp_path, names)
    env = dict(os.environ, TRACEGRAPH_PAUSE_AT="worker-started")
    parent = subprocess.Popen(
        [sys.executable, "-c", _parent_script(pids, tmp_path, names)], stderr=subprocess.PIPE, env=env
    )
    try:
        deadline = time.monotonic() + 120
        _wait_until(lambda: process_state(parent.pid) == "T", deadline)
        assert process_state(parent.pid) == "T"
        (worker,) = _children(parent.pid)
        parent.send_signal(signal.SIGINT)
        parent.send_signal(signal.SIGCONT)
        parent.wait(timeout=120)
        assert b"KeyboardInterrupt" in parent.stderr.read()
        _wait_until(lambda: not _alive(worker), deadline)
        assert not _alive(worker)
        assert list(pids.iterdir()) == []  # no file was read
    finally:
        parent.kill()
        parent.wait()


@pytest.mark.parametrize("streamed", [False, True])
def test_ctrl_c_stops_an_ingest_and_leaves_nothing_behind(tmp_path, streamed):
    """``tracegraph ingest`` of a run's rank files, Ctrl-C while its
    workers start (the job held whole: worker processes) or once its
    first rank is read (the job streamed rank by rank: threads): it says
    so and exits 130 at once, its worker is gone, its ranks' spill files
    too, and no trace was stored (the database is not even opened before
    the files are read)."""
    import signal
    import subprocess
    import sys
    import time

    from conftest import cli_env

    home = tmp_path / "home"
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    pause = "rank-surveyed" if streamed else "worker-started"
    env = cli_env(
        home,
        env={
            "TRACEGRAPH_PAUSE_AT": pause,
            "TRACEGRAPH_PARSE_WORKERS": "2",
            "TRACEGRAPH_STREAM_JOBS": "1" if streamed else "0",
            "TMPDIR": str(tmp),
        },
    )
    script = "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    script += "from tracegraph.cli import main; sys.exit(main(sys.argv[1:]))"
    args = ["ingest", *map(str, DLRM[:4]), "--trace", "dlrm"]
    cli = subprocess.Popen([sys.executable, "-c", script, *args], env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        _wait_until(lambda: process_state(cli.pid) == "T", deadline)
        workers = _children(cli.pid)
        assert len(workers) == (0 if streamed else 1)  # the streamed job reads its ranks in threads
        cli.send_signal(signal.SIGINT)
        cli.send_signal(signal.SIGCONT)
        assert cli.wait(timeout=120) == 130
        assert cli.stderr.read() == "tracegraph: interrupted\n"
        _wait_until(lambda: not any(map(_alive, workers)), deadline)
        assert not any(map(_alive, workers))
        assert not (home / "falkordb").exists()  # nothing was stored: the database was never started
        assert list(tmp.iterdir()) == []  # nor left in temporary files
    finally:
        cli.kill()
        cli.wait()
