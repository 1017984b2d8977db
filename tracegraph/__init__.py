"""tracegraph: deep-learning execution traces as a queryable graph.

In Python (a notebook)::

    import tracegraph

    with tracegraph.connect() as g:  # the embedded database, or connect(db="neo4j://...")
        g.ingest(["step.kineto.json", "step.et.json"], trace="step")
        g.query("top-ops", "step", n=5)  # a pandas DataFrame
        g.plot.timeline("step")  # a plotly figure (pip install 'tracegraph[notebook]')

``__all__`` is the public surface; it lives in :mod:`tracegraph.notebook`
(a front end, like the CLI) and is loaded on first use, so that ``import
tracegraph`` (which every ``tracegraph`` command does first) loads nothing
but this file. See ARCHITECTURE.md for how the packages fit together.
"""

from importlib import import_module as _import_module
from importlib import metadata as _metadata
from typing import Any as _Any

try:
    __version__ = _metadata.version("tracegraph")
except _metadata.PackageNotFoundError:  # a bare checkout, not installed
    __version__ = "0+unknown"

__all__ = ["Connection", "NoRows", "NotAvailable", "WhatIf", "__version__", "connect"]
# The names above that the notebook front end defines.
_FRONT_END = "tracegraph.notebook"
_LAZY = frozenset(__all__) - {"__version__"}


def __getattr__(name: str) -> _Any:
    """``tracegraph.connect`` and the rest of ``__all__``, from the front end
    on first use (PEP 562)."""
    if name in _LAZY:
        return getattr(_import_module(_FRONT_END), name)
    raise AttributeError(f"module 'tracegraph' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _LAZY)
