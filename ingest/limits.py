"""The input limits, in one place: what a trace file may not exceed.

A file past a limit cannot be a trace tracegraph can hold (or it is not a
trace at all: 200 MB on one line, a sparse file of NUL bytes), and reading it
anyway costs gigabytes before anything fails. So every reader checks these
first (:mod:`tracegraph.ingest.source`) and refuses with a one-line
:class:`~tracegraph.errors.TooLarge` naming the file and the limit. The
README's input section lists the same values; tests/test_input_limits.py
checks that the two agree.

Sizes are bytes on disk, except for gzipped Kineto traces and XPlane
captures, whose limit is on the decompressed content (a small gzip file can
hold gigabytes).
"""

from __future__ import annotations

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB

# How much of a file format detection reads (each format's ``sniff`` sees at
# most this many bytes), and how much of a text format's start is checked
# for binary content (a NUL byte) before the rest is read.
SNIFF_BYTES = 64 * KiB

# The longest line a line-based format accepts (tf-opnames, tf-oplist,
# chainer-graph), in bytes, its newline not counted. The longest line of the bundled
# samples is 242 bytes; a TF op listing's line grows with its inputs and
# ``^control`` inputs, a Chainer line with its JSON attributes, and a
# megabyte is thousands of those. A longer line is refused after reading
# this much of it, so memory stays bounded whatever the file holds.
MAX_LINE_BYTES = 1 * MiB

# The largest file per format. The text StepStats of a 100k-op GPU step is
# 162 MB (49 MB binary) and ingests in under 1 GB of memory (bench/RESULTS.md);
# readers of whole documents (StepStats, MegEngine JSON) need several times
# the file in memory, streamed formats only what they keep per op.
MAX_FILE_BYTES: dict[str, int] = {
    "pytorch-kineto": 4 * GiB,  # streamed event by event; decompressed size for .gz
    "pytorch-et": 2 * GiB,  # one JSON document, read whole; decompressed size for .gz
    "chrome-trace": 1 * GiB,  # one JSON document, read whole; decompressed size for .gz
    "nsys-sqlite": 4 * GiB,  # an SQLite database, queried in place; a .gz one is decompressed into memory
    "rocprofv3-json": 2 * GiB,  # one JSON document, decoded whole into typed records; decompressed size for .gz
    "rocpd-sqlite": 4 * GiB,  # an SQLite database, queried in place; a .gz one is decompressed into memory
    "xplane": 2 * GiB,  # read whole (protobuf's own limit); decompressed size for .gz
    "tf-stepstats": 1 * GiB,  # read whole; protobuf cannot parse a binary message over 2 GiB anyway
    "megengine-profile": 512 * MiB,  # one JSON document, read whole
    "chainer-graph": 256 * MiB,  # streamed by line
    "tf-oplist": 256 * MiB,  # streamed by line
    "tf-opnames": 256 * MiB,  # streamed by line
}


def human(n: int) -> str:
    """``268435456`` -> ``256 MiB``: limits and sizes as people read them."""
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n} bytes"
