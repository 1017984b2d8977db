"""rocprofv3 JSON captures (``rocprofv3-json``): what AMD GPU users have,
``rocprofv3 --kernel-trace --hip-trace --marker-trace ... --output-format
json`` (its ``<pid>_results.json``), plain or gzipped.

Detected by content: a JSON object whose first key is
``rocprofiler-sdk-tool``. Read by :mod:`.json_file` into the records of
:mod:`.capture`; :mod:`.frames` makes frames of them (what becomes what).

Errors (one line naming the file): not a rocprofv3 JSON object, a field of
the wrong type (its path in the document), a record that ends before it
starts, a file with no processes or with no record read at all.
"""

from __future__ import annotations

from pathlib import Path

from tracegraph.ingest.formats.kit import FormatInfo, Joins
from tracegraph.ingest.formats.rocprof import frames, json_file
from tracegraph.ingest.frames import TraceFrames

FORMAT = FormatInfo(json_file.FORMAT_NAME, "rocm", Joins.ALONE, "rocprofv3 JSON")


def sniff(head: bytes) -> bool:
    return json_file.sniff(head)


def parse(path: Path) -> TraceFrames:
    """The file as frames (rules in :mod:`.frames`)."""
    return frames.build(path, json_file.read(path))
