"""tracegraph: deep-learning execution traces as a queryable graph.

See ARCHITECTURE.md for how the packages fit together.
"""

from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("tracegraph")
except _metadata.PackageNotFoundError:  # a bare checkout, not installed
    __version__ = "0+unknown"
