"""Trace file formats. Each module here exposes the same three things:

* ``NAME``: the ``--format`` value (e.g. ``tf-stepstats``);
* ``sniff(head: bytes) -> bool``: True when the first ``SNIFF_BYTES``
  (64 KiB, :mod:`tracegraph.ingest.limits`) of a file look like this format
  (content, never the file name); line formats see the head's complete
  lines through :func:`tracegraph.ingest.source.head_lines`;
* ``parse(path: pathlib.Path) -> TraceFrames``: the whole file as canonical
  frames, or :class:`tracegraph.errors.InputError` naming the file and the
  line/field where it is wrong. Parsers read files only through
  :mod:`tracegraph.ingest.source`, under their format's limits (``NAME``
  is the key of :data:`tracegraph.ingest.limits.MAX_FILE_BYTES`), and never
  touch the database.

Formats whose files are parts of one run (PyTorch rank files) also expose
``parse_many(paths: list[pathlib.Path]) -> TraceFrames``; several files of
such a format given at once are read by it as one trace.

Formats that only add detail to another format's trace (the TF op listing
adds shapes and control inputs to StepStats) also expose
``merge(base: TraceFrames, extra: TraceFrames) -> TraceFrames``.
"""

from __future__ import annotations

from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, cast

if TYPE_CHECKING:
    from tracegraph.ingest.frames import TraceFrames


class Format(Protocol):
    """What every format module exposes (see above)."""

    NAME: str

    def sniff(self, head: bytes) -> bool: ...

    def parse(self, path: Path) -> TraceFrames: ...


class RunFormat(Format, Protocol):
    """A format whose files are parts of one run, read together."""

    def parse_many(self, paths: list[Path]) -> TraceFrames: ...


class DetailFormat(Format, Protocol):
    """A format that only adds detail to another format's trace."""

    def merge(self, base: TraceFrames, extra: TraceFrames) -> TraceFrames: ...


# Order matters for sniffing: the most specific formats first.
_MODULES = {
    "pytorch-kineto": "pytorch_kineto",
    "tf-stepstats": "tf_stepstats",
    "megengine-profile": "megengine_profile",
    "chainer-graph": "chainer_graph",
    "tf-oplist": "tf_oplist",
    "tf-opnames": "tf_opnames",
}


def names() -> list[str]:
    """All ``--format`` values, in sniffing order."""
    return list(_MODULES)


def get(name: str) -> Format:
    """The module implementing format ``name`` (KeyError if unknown)."""
    return cast(Format, import_module(f"{__name__}.{_MODULES[name]}"))


if TYPE_CHECKING:
    # The modules are imported on demand (above); here mypy checks that
    # each one implements its protocol.
    from tracegraph.ingest.formats import (
        chainer_graph,
        megengine_profile,
        pytorch_kineto,
        tf_oplist,
        tf_opnames,
        tf_stepstats,
    )

    _CHECKED: tuple[Format, ...] = (chainer_graph, megengine_profile, tf_opnames, tf_stepstats)
    _CHECKED_RUN: RunFormat = pytorch_kineto
    _CHECKED_DETAIL: DetailFormat = tf_oplist
