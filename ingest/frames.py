"""The canonical, framework-neutral form of one trace: a handful of tables.

Every parser turns its file(s) into a :class:`TraceFrames`; enrichment adds
derived columns to it; the loader writes it to the graph. Keeping this one
shape in the middle is what lets four frameworks share one schema and one
set of Cypher analyses.

Conventions every parser must follow:

* ``uid`` columns are strings unique within their table *and* prefixed by the
  kind (``op:``, ``t:``, ``k:``, ``a:``, ``dev:``, ``s:``, ``mem:``) so that
  they are unique within the whole trace.
* Times are float microseconds since the first event of the trace (parsers
  subtract the origin). A trace without wall-clock times but with an
  execution order uses *steps* instead: ``time_unit = "step"``, and an op's
  ``start_us``/``end_us`` are its step index and index + 1.
* Missing values are ``None``/``NaN``; never a sentinel like ``-1``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tracegraph import schema
from tracegraph.dag import Dag

if TYPE_CHECKING:  # pandas is imported where frames are made: the columnar (Kineto) path never needs it
    import pandas as pd

# The columns each parser fills, in order: the contract between parsers,
# enrichment and the loader (every column, with its type and meaning, is
# declared in :mod:`tracegraph.schema`).
OP_COLUMNS = schema.TABLE["ops"].names(schema.PARSER)
KERNEL_COLUMNS = schema.TABLE["kernels"].names(schema.PARSER)
TENSOR_COLUMNS = schema.TABLE["tensors"].names(schema.PARSER)
CONSUME_COLUMNS = schema.TABLE["consumes"].names(schema.PARSER)
DEP_COLUMNS = schema.TABLE["deps"].names(schema.PARSER)
ALLOCATION_COLUMNS = schema.TABLE["allocations"].names(schema.PARSER)
SYNC_COLUMNS = schema.TABLE["syncs"].names(schema.PARSER)
DEVICE_COLUMNS = schema.TABLE["devices"].names(schema.PARSER)
STREAM_COLUMNS = schema.TABLE["streams"].names(schema.PARSER)
ALLOCATOR_COLUMNS = schema.TABLE["allocators"].names(schema.PARSER)
SYNC_KINDS = ("host_wait", "stream_wait")

FRAMEWORKS = ("tensorflow", "chainer", "megengine", "pytorch", "jax", "paddle", "chrome", "cuda", "rocm")
TIME_UNITS = ("us", "step", "none")

# One row of a frame as the parsers build it: column name -> value (the
# columns and their types are those :mod:`schema` declares for the table).
Row = dict[str, Any]


def empty(columns: list[str]) -> pd.DataFrame:
    """A zero-row frame with the given columns (object dtype)."""
    import pandas as pd

    return pd.DataFrame({c: pd.Series(dtype=object) for c in columns})


def frame(rows: list[Row], columns: list[str]) -> pd.DataFrame:
    """Build a frame from dict rows, keeping exactly ``columns`` in order.

    Keys a row lacks become None; extra keys are an error in the parser, so
    they raise instead of silently vanishing.
    """
    import pandas as pd

    if not rows:
        return empty(columns)
    df = pd.DataFrame.from_records(rows)
    extra = set(df.columns) - set(columns)
    if extra:
        raise ValueError(f"unexpected columns {sorted(extra)}")
    for c in columns:
        if c not in df.columns:
            df[c] = None
    return df[columns]


@dataclass
class TraceFrames:
    """One parsed trace. Frames hold the columns named in ``*_COLUMNS``.

    ``ops.attrs`` is a JSON text of whatever else the format had for that op
    (kept, never fatal); ``ops.phase`` is forward / backward / optimizer /
    communication / other, or None when unknown; ``kernels.kind`` is
    ``compute``, ``memcpy``, ``memset`` or ``communication``; ``allocations.kind`` is output / temp /
    persistent / param / input / gradient (``param``..``gradient`` for
    formats that know the role of a block but not when it was allocated).
    """

    framework: str
    sources: list[str]
    time_unit: str = "us"
    ops: pd.DataFrame = field(default_factory=lambda: empty(OP_COLUMNS))
    kernels: pd.DataFrame = field(default_factory=lambda: empty(KERNEL_COLUMNS))
    tensors: pd.DataFrame = field(default_factory=lambda: empty(TENSOR_COLUMNS))
    consumes: pd.DataFrame = field(default_factory=lambda: empty(CONSUME_COLUMNS))
    deps: pd.DataFrame = field(default_factory=lambda: empty(DEP_COLUMNS))
    allocations: pd.DataFrame = field(default_factory=lambda: empty(ALLOCATION_COLUMNS))
    devices: pd.DataFrame = field(default_factory=lambda: empty(DEVICE_COLUMNS))
    streams: pd.DataFrame = field(default_factory=lambda: empty(STREAM_COLUMNS))
    allocators: pd.DataFrame = field(default_factory=lambda: empty(ALLOCATOR_COLUMNS))
    syncs: pd.DataFrame = field(default_factory=lambda: empty(SYNC_COLUMNS))
    # Free-form facts about the trace (e.g. {"model": "alexnet"}), stored on
    # the Trace node as ``meta_<key>`` properties.
    meta: dict[str, Any] = field(default_factory=dict)
    # The order elements ran in along the observed critical path: set by
    # enrichment (:mod:`observed_path`), None before; enrichment's output,
    # so no constructor argument and not part of repr or equality.
    observed_next: pd.DataFrame | None = field(default=None, init=False, repr=False, compare=False)
    # Collectives joined across ranks and each rank's call of them: set by
    # enrichment (:mod:`collectives`), None before.
    collectives: pd.DataFrame | None = field(default=None, init=False, repr=False, compare=False)
    joins: pd.DataFrame | None = field(default=None, init=False, repr=False, compare=False)
    # Per rank, communication against computation (:mod:`ranks`), None before.
    ranks: pd.DataFrame | None = field(default=None, init=False, repr=False, compare=False)
    # The dependency DAG over every op, kept by the cycle check for
    # enrichment (which reuses it when its ops are the DAG's).
    dag: Dag | None = field(default=None, init=False, repr=False, compare=False)

    def frames(self) -> dict[str, pd.DataFrame]:
        """Every table of :mod:`schema` that the frames hold, by name."""
        import pandas as pd

        return {
            t.name: getattr(self, t.name)
            for t in schema.TABLES
            if isinstance(getattr(self, t.name, None), pd.DataFrame)
        }

    def stream_labels(self) -> dict[str, str]:
        """``device name/stream name`` of every stream (``rank0/cuda:0/stream:7``):
        how the observed path and the idle lanes name a stream."""
        devices = dict(zip(self.devices["uid"].tolist(), self.devices["name"].tolist()))
        return {
            uid: f"{devices.get(device, '')}/{name}"
            for uid, device, name in zip(
                self.streams["uid"].tolist(), self.streams["device"].tolist(), self.streams["name"].tolist()
            )
        }

    def check_enriched(self) -> None:
        """ValueError unless enrichment added every column schema says it adds."""
        for name, df in self.frames().items():
            lacking = [c for c in schema.TABLE[name].names(schema.ENRICH) if c not in df.columns]
            if lacking:
                raise ValueError(f"enrichment left {name} without columns {lacking}")

    def check(self) -> None:
        """Raise ValueError when the frames break the invariants above.

        Parsers call this last so that a broken parser fails before any
        write, with a message about the trace rather than a database error.
        """
        import pandas as pd

        if self.framework not in FRAMEWORKS:
            raise ValueError(f"unknown framework {self.framework!r}")
        if self.time_unit not in TIME_UNITS:
            raise ValueError(f"unknown time unit {self.time_unit!r}")
        tables = {
            "ops": (self.ops, OP_COLUMNS),
            "kernels": (self.kernels, KERNEL_COLUMNS),
            "tensors": (self.tensors, TENSOR_COLUMNS),
            "consumes": (self.consumes, CONSUME_COLUMNS),
            "deps": (self.deps, DEP_COLUMNS),
            "allocations": (self.allocations, ALLOCATION_COLUMNS),
            "devices": (self.devices, DEVICE_COLUMNS),
            "streams": (self.streams, STREAM_COLUMNS),
            "allocators": (self.allocators, ALLOCATOR_COLUMNS),
            "syncs": (self.syncs, SYNC_COLUMNS),
        }
        for name, (df, cols) in tables.items():
            missing = [c for c in cols if c not in df.columns]
            if missing:
                raise ValueError(f"{name} lacks columns {missing}")
            if "uid" in cols and df["uid"].duplicated().any():
                dup = df.loc[df["uid"].duplicated(), "uid"].iloc[0]
                raise ValueError(f"{name} has duplicate uid {dup!r}")
        all_uids = pd.concat([df["uid"] for df, cols in tables.values() if "uid" in cols])
        if all_uids.duplicated().any():
            raise ValueError(f"uid {all_uids[all_uids.duplicated()].iloc[0]!r} used twice")
        op_uids = self.ops["uid"]
        _refs(self.kernels["op"], op_uids, "kernels.op")
        _refs(self.kernels["launch"].dropna(), op_uids, "kernels.launch")
        _refs(self.ops["parent"].dropna(), op_uids, "ops.parent")
        kernel_uids = self.kernels["uid"]
        _refs(self.syncs["src"], kernel_uids, "syncs.src")
        for kind, known in (("host_wait", op_uids), ("stream_wait", kernel_uids)):
            _refs(self.syncs.loc[self.syncs["kind"] == kind, "dst"], known, f"syncs.dst ({kind})")
        bad_kind = set(self.syncs["kind"]) - set(SYNC_KINDS)
        if bad_kind:
            raise ValueError(f"syncs has unknown kind {sorted(bad_kind)[0]!r}")
        _refs(self.consumes["op"], op_uids, "consumes.op")
        _refs(self.deps["src"], op_uids, "deps.src")
        _refs(self.deps["dst"], op_uids, "deps.dst")
        _refs(self.tensors["producer"].dropna(), op_uids, "tensors.producer")
        _refs(self.allocations["op"].dropna(), op_uids, "allocations.op")
        tensor_uids = self.tensors["uid"]
        _refs(self.consumes["tensor"], tensor_uids, "consumes.tensor")
        _refs(self.allocations["tensor"].dropna(), tensor_uids, "allocations.tensor")
        _refs(self.kernels["stream"], self.streams["uid"], "kernels.stream")
        device_uids = self.devices["uid"]
        _refs(self.ops["device"].dropna(), device_uids, "ops.device")
        _refs(self.streams["device"], device_uids, "streams.device")
        _refs(self.allocators["device"].dropna(), device_uids, "allocators.device")
        _refs(self.allocations["allocator"], self.allocators["uid"], "allocations.allocator")


def _refs(values: pd.Series, known: pd.Series, what: str) -> None:
    """ValueError naming the first of ``values`` that is not in ``known``
    (hashed by pandas: a Python loop over 100k-row columns cost ~1 s)."""
    bad = values[~values.isin(known)]
    if len(bad):
        raise ValueError(f"{what} refers to unknown {bad.iloc[0]!r}")
