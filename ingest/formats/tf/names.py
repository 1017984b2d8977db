"""TensorFlow naming rules, one copy each, for every TF format.

StepStats, op listings and node-name lists all name nodes the TF way, so
what a name says (its training phase, its op type when nothing else says
it, its scopes) and what a dtype weighs are decided here, once: the same
node gets the same answer whichever file it came from.
"""

from __future__ import annotations

import re

from tensorboard.compat.proto import types_pb2

# ---------------------------------------------------------------- dtypes

# Bytes per element by dtype name: TF's own names (``DT_HALF`` -> ``half``)
# and the numpy spellings op listings print (``float16``, ``float32``);
# None for types whose elements have no fixed size.
DTYPE_BYTES: dict[str, int | None] = {
    "half": 2,
    "float16": 2,
    "bfloat16": 2,
    "float": 4,
    "float32": 4,
    "double": 8,
    "float64": 8,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "int32": 4,
    "uint32": 4,
    "int64": 8,
    "uint64": 8,
    "bool": 1,
    "complex64": 8,
    "complex128": 16,
    "qint8": 1,
    "quint8": 1,
    "qint16": 2,
    "quint16": 2,
    "qint32": 4,
    "string": None,
    "resource": None,
    "variant": None,
}


def dtype_name(dtype: int) -> str:
    """``DT_FLOAT`` (enum 1) -> ``float``; unknown enums keep their number."""
    try:
        name: str = types_pb2.DataType.Name(dtype)  # tensorboard's protos are untyped
        return name.removeprefix("DT_").lower()
    except ValueError:
        return f"dtype{dtype}"


def known_dtype(name: str) -> bool:
    """Whether ``name`` (lower case, ``_ref`` forms included) is a dtype of the table."""
    return name.lower().removesuffix("_ref") in DTYPE_BYTES


def dtype_size(dtype: int | str) -> int | None:
    """Bytes per element (a DataType enum or a name), or None for
    variable-size and unknown types."""
    name = dtype_name(dtype) if isinstance(dtype, int) else dtype.lower()
    return DTYPE_BYTES.get(name.removesuffix("_ref"))


# ---------------------------------------------------------------- names

# TensorFlow's node-name rule ([A-Za-z0-9.][A-Za-z0-9_.\-/>]*) plus a leading
# underscore, which the runtime uses for its own nodes (_SOURCE, _retval_*),
# and no empty scope ("a//b", "a/"): a line cut after a "/" is not a name.
NODE_NAME = re.compile(r"[A-Za-z0-9._>][A-Za-z0-9_.\->]*(?:/[A-Za-z0-9_.\->]+)*\Z")


def scopes_of(name: str) -> list[str]:
    """The enclosing name scopes, outermost first (``a/b/c`` -> ``a``, ``a/b``)."""
    parts = name.split("/")[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


_SUFFIX = re.compile(r"(?:_\d+)+\Z")
# Grappler's layout optimizer names the nodes it inserts
# ``<node>-<port>[-<n>]-<Kind><From>To<To>-LayoutOptimizer``.
_LAYOUT = re.compile(
    r"(?:\A|-)(Transpose|PermConst|DataFormatVecPermute|DataFormatDimMap)"
    r"(?:NHWC|NCHW)To(?:NHWC|NCHW)-LayoutOptimizer\Z"
)
# Grappler's arithmetic optimizer: ReorderCastLikeAndValuePreserving_<dtype>_<Op>.
_REORDER = re.compile(r"\AReorderCastLikeAndValuePreserving_[A-Za-z0-9]+_([A-Za-z0-9]+?)(?:_\d+)*\Z")
# Names the Python API gives to the constant inputs it creates.
_CONST_INPUTS = {"Const", "shape", "paddings", "reduction_indices", "multiples", "perm", "axis"}
# Python-API spellings of a few op types (``x + y`` is named ``add``).
_PY_NAMES = {"add": "AddV2", "sub": "Sub", "mul": "Mul", "truediv": "RealDiv", "read": "Identity"}
_RUNTIME = {"_SOURCE": "NoOp", "_SINK": "NoOp"}


def op_type_from_name(name: str) -> str:
    """Best guess of a node's op type from its name alone.

    Rules, first match wins (the reason each holds is a TF naming habit):

    * under ``ConstantFolding/`` -> ``Const`` (grappler folds into constants);
    * ``...-<Kind>NHWCToNCHW-LayoutOptimizer`` -> ``Transpose``,
      ``DataFormatVecPermute``, ``DataFormatDimMap``, or ``Const`` for
      ``PermConst``; any other ``-LayoutOptimizer`` node -> ``Const`` (TF1's
      rewritten size inputs);
    * ``_retval_*``/``_arg_*``/``_SOURCE``/``_SINK`` -> ``_Retval``/``_Arg``/``NoOp``;
    * last component only ``_N`` (``Func/.../input/_3421``) -> ``Identity``
      (function-inlining boundary nodes);
    * ``clone_N`` -> the type of its parent node (grappler's constant clones);
    * ``ReorderCastLikeAndValuePreserving_<dtype>_<Op>`` -> ``<Op>``;
    * ``shape``/``paddings``/``reduction_indices``/... -> ``Const``;
    * ``add``/``mul``/``truediv``/``sub``/``read`` -> ``AddV2``/``Mul``/
      ``RealDiv``/``Sub``/``Identity``;
    * otherwise the last component without ``_N`` suffixes
      (``ReadVariableOp_1`` -> ``ReadVariableOp``).
    """
    parts = name.split("/")
    last = parts[-1]
    if parts[0] == "ConstantFolding" and len(parts) > 1:
        return "Const"
    layout = _LAYOUT.search(last)
    if layout:
        return "Const" if layout.group(1) == "PermConst" else layout.group(1)
    if last.endswith("-LayoutOptimizer"):
        return "Const"
    if name.startswith("_retval_"):
        return "_Retval"
    if name.startswith("_arg_"):
        return "_Arg"
    if name in _RUNTIME:
        return _RUNTIME[name]
    base = _SUFFIX.sub("", last)
    if not base:
        return "Identity"
    if base == "clone" and len(parts) > 1:
        return op_type_from_name("/".join(parts[:-1]))
    reorder = _REORDER.match(last)
    if reorder:
        return reorder.group(1)
    if base in _CONST_INPUTS:
        return "Const"
    return _PY_NAMES.get(base, base)


# ---------------------------------------------------------------- phases

# A copy of a node's output between devices: ``edge_<N>_<node>`` (with a
# ``:MEMCPY<dir>`` suffix on kernel records).
_COPY = re.compile(r"\Aedge_\d+_(.+?)(?::MEMCPY\w*)?\Z")
# Collectives, in an op type or in any name component: Horovod's ops and
# scopes (``HorovodAllreduce``, ``HorovodBroadcast.<var>``,
# ``DistributedGradientTape_Allreduce/...``), NCCL and TF's collective ops.
# A plain "Broadcast" is not one (``BroadcastTo``, ``BroadcastGradientArgs``).
_COLLECTIVE = re.compile(
    r"Horovod|Allreduce|AllReduce|Allgather|AllGather|Alltoall|AllToAll|ReduceScatter"
    r"|\ANccl|\ACollective"
)
# Top-level scopes of optimizers: Keras (TF2) names and tf.compat.v1.train
# names, plus ``train`` (the usual ``minimize(name=...)`` of TF1 scripts).
OPTIMIZER_SCOPES = frozenset(
    {
        "SGD",
        "GradientDescent",
        "Momentum",
        "Adam",
        "AdamW",
        "RMSprop",
        "RMSProp",
        "Adagrad",
        "Adadelta",
        "Adamax",
        "Nadam",
        "Ftrl",
        "train",
    }
)
_OPTIMIZER_TYPES = re.compile(r"^(Resource)?Apply\w+$|^AssignSub|^AssignAdd")
_BACKWARD_SCOPES = ("gradients", "gradient_tape")  # TF1 (also gradients_1, ...) and TF2 spellings


def phase_of(name: str, op_type: str | None = None) -> str:
    """forward / backward / optimizer / communication / other, from a node
    name and, when the trace records it, its op type (pass None for a type
    guessed from the name: it would only repeat the name).

    First match wins:

    1. a copy ``edge_<N>_<node>`` has the phase of ``<node>``;
    2. communication: the op type, or any component of the name, names a
       collective (Horovod, all-reduce / all-gather / all-to-all /
       reduce-scatter, NCCL, TF collective ops) -- an all-reduce of a
       gradient is communication, not backward work;
    3. optimizer: the first component is an optimizer scope
       (:data:`OPTIMIZER_SCOPES`, e.g. ``SGD/...``, ``RMSprop/...``,
       ``train/...``), or the op type is ``Apply*``, ``ResourceApply*``,
       ``AssignSub*`` or ``AssignAdd*``;
    4. backward: a scope (any component but the last) is ``gradients``,
       ``gradients_<N>`` or ``gradient_tape`` (so also
       ``ConstantFolding/gradient_tape/...`` and ``tower_0/gradients/...``);
    5. other: runtime plumbing, a first component starting with ``_``
       (``_SOURCE``, ``_SINK``, ``_retval_*``, ``_arg_*``);
    6. forward: everything else -- which also catches a few nodes that are
       not (the ``AddN`` gradient sums of TF2 graphs are top-level): names
       do not say more.
    """
    copy = _COPY.match(name)
    if copy:
        return phase_of(copy.group(1))
    parts = name.split("/")
    if (op_type and _COLLECTIVE.search(op_type)) or any(_COLLECTIVE.search(p) for p in parts):
        return "communication"
    if (parts[0] in OPTIMIZER_SCOPES and len(parts) > 1) or (op_type and _OPTIMIZER_TYPES.match(op_type)):
        return "optimizer"
    if any(p in _BACKWARD_SCOPES or p.startswith("gradients_") for p in parts[:-1]):
        return "backward"
    if parts[0].startswith("_"):
        return "other"
    return "forward"
