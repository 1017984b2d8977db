"""What a trace has: the facts analyses may require.

Enrichment records each as a ``has_*`` flag on the Trace node; a catalog
analysis names the ones it needs in its ``@requires`` header line, and a
trace that lacks one gets ``not available: <missing>`` instead of rows.
This enumeration is the one list of them.
"""

from __future__ import annotations

from enum import Enum


class Fact(Enum):
    """``value`` is the word ``@requires`` uses."""

    TIMES = "times"
    DEPS = "deps"
    MEMORY = "memory"
    KERNELS = "kernels"
    COPIES = "copies"
    COLLECTIVES = "collectives"
    COMMUNICATION = "communication"
    STEPS = "steps"

    @property
    def flag(self) -> str:
        """The Trace node's boolean property."""
        return f"has_{self.value}"

    @property
    def missing(self) -> str:
        """How ``not available`` says that a trace lacks it."""
        return _MISSING[self]


_MISSING = {
    Fact.TIMES: "the trace has no op times",
    Fact.DEPS: "the trace has no dependencies between ops",
    Fact.MEMORY: "the trace has no memory allocation records",
    Fact.KERNELS: "the trace has no device stream (kernel) records",
    Fact.COPIES: "the trace has no memory copies",
    Fact.COLLECTIVES: "the trace has no collectives joined across ranks (it needs two or more ranks' files)",
    Fact.STEPS: "the trace has no steps (no ProfilerStep#N, ProfileStep#N or step annotation; ingest with --step-marker REGEX to name its step ops)",
    Fact.COMMUNICATION: "the trace has no communication (kernels of a communication library: NCCL, RCCL, DeepEP, NVSHMEM, ...; or collective ops)",
}
