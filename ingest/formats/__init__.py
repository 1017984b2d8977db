"""Trace file formats. Each format module exposes the same things:

* ``FORMAT``: its :class:`~tracegraph.ingest.formats.kit.FormatInfo`: the
  ``--format`` value (e.g. ``tf-stepstats``), its framework, and how its
  files combine with others into one trace (``joins``: a file alone, the
  parts of one run, or detail added to another format's trace);
* ``sniff(head: bytes) -> bool``: True when the first ``SNIFF_BYTES``
  (64 KiB, :mod:`tracegraph.ingest.limits`) of a file look like this format
  (content, never the file name); line formats see the head's complete
  lines through :func:`tracegraph.ingest.source.head_lines`;
* ``parse(path: pathlib.Path) -> TraceFrames``: the whole file as canonical
  frames (built with :class:`~tracegraph.ingest.formats.kit.FramesBuilder`),
  or :class:`tracegraph.errors.InputError` naming the file and the
  line/field where it is wrong. Parsers read files only through
  :mod:`tracegraph.ingest.source`, under their format's limits (the name
  is the key of :data:`tracegraph.ingest.limits.MAX_FILE_BYTES`), and never
  touch the database.

``Joins.RUN`` formats also expose ``parse_many(paths) -> TraceFrames``:
several files of the format given at once are read as one run (PyTorch
rank files). ``Joins.DETAIL`` formats also expose ``merge(base, extra)
-> TraceFrames``: they add detail to the trace of a primary format (the TF
op listing adds shapes and control inputs to StepStats; an Execution Trace
adds tensors and dependencies to a Kineto trace).

A format with helpers of its own is a subpackage (``tf/``, ``kineto/``,
``xplane/``, ``chrome/``, ``nsys/``, ``rocprof/``).
"""

from __future__ import annotations

from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, cast

from tracegraph.ingest.formats.kit import FormatInfo, Joins

if TYPE_CHECKING:
    from tracegraph.ingest.frames import TraceFrames


class Format(Protocol):
    """What every format module exposes (see above)."""

    FORMAT: FormatInfo

    def sniff(self, head: bytes) -> bool: ...

    def parse(self, path: Path) -> TraceFrames: ...


class RunFormat(Format, Protocol):
    """A format whose files are parts of one run, read together."""

    def parse_many(self, paths: list[Path]) -> TraceFrames: ...


class DetailFormat(Format, Protocol):
    """A format that adds detail to another format's trace."""

    def merge(self, base: TraceFrames, extra: TraceFrames) -> TraceFrames: ...


# ``--format`` name -> module, in sniffing order: the most specific formats first.
_MODULES = {
    "pytorch-kineto": "kineto.trace",
    "pytorch-et": "kineto.et",
    "chrome-trace": "chrome.trace",
    "nsys-sqlite": "nsys.trace",
    "rocprofv3-json": "rocprof.trace",
    "rocpd-sqlite": "rocprof.rocpd",
    "xplane": "xplane.trace",
    "tf-stepstats": "tf.stepstats",
    "megengine-profile": "megengine_profile",
    "chainer-graph": "chainer_graph",
    "tf-oplist": "tf.oplist",
    "tf-opnames": "tf.opnames",
}


def names() -> list[str]:
    """All ``--format`` values, in sniffing order."""
    return list(_MODULES)


def get(name: str) -> Format:
    """The module implementing format ``name`` (KeyError if unknown)."""
    return cast(Format, import_module(f"{__name__}.{_MODULES[name]}"))


def info(name: str) -> FormatInfo:
    """Format ``name``'s declaration."""
    return get(name).FORMAT


def joins(name: str) -> Joins:
    return info(name).joins


if TYPE_CHECKING:
    # The modules are imported on demand (above); here mypy checks that
    # each one implements its protocol.
    from tracegraph.ingest.formats import chainer_graph, megengine_profile
    from tracegraph.ingest.formats.chrome import trace as chrome_trace
    from tracegraph.ingest.formats.kineto import et as kineto_et
    from tracegraph.ingest.formats.kineto import trace as kineto_trace
    from tracegraph.ingest.formats.nsys import trace as nsys_trace
    from tracegraph.ingest.formats.rocprof import rocpd
    from tracegraph.ingest.formats.rocprof import trace as rocprof_trace
    from tracegraph.ingest.formats.tf import oplist, opnames, stepstats
    from tracegraph.ingest.formats.xplane import trace as xplane_trace

    _CHECKED: tuple[Format, ...] = (
        chainer_graph,
        chrome_trace,
        megengine_profile,
        nsys_trace,
        opnames,
        rocpd,
        rocprof_trace,
        stepstats,
        xplane_trace,
    )
    _CHECKED_RUN: RunFormat = kineto_trace
    _CHECKED_DETAIL: tuple[DetailFormat, ...] = (oplist, kineto_et)
