"""TensorFlow naming facts shared by the TF formats: dtypes and phases."""

from __future__ import annotations

import re

from tensorboard.compat.proto import types_pb2

_SIZES = {
    "float": 4, "double": 8, "int32": 4, "uint8": 1, "int16": 2, "int8": 1,
    "string": None, "complex64": 8, "int64": 8, "bool": 1, "qint8": 1,
    "quint8": 1, "qint32": 4, "bfloat16": 2, "qint16": 2, "quint16": 2,
    "uint16": 2, "complex128": 16, "half": 2, "resource": None, "variant": None,
    "uint32": 4, "uint64": 8,
}


def dtype_name(dtype: int) -> str:
    """``DT_FLOAT`` (enum 1) -> ``float``; unknown enums keep their number."""
    try:
        return types_pb2.DataType.Name(dtype).removeprefix("DT_").lower()
    except ValueError:
        return f"dtype{dtype}"


def dtype_size(dtype: int | str) -> int | None:
    """Bytes per element, or None for variable-size types."""
    name = dtype_name(dtype) if isinstance(dtype, int) else dtype.lower()
    return _SIZES.get(name.removesuffix("_ref"))


_OPTIMIZER_TYPES = re.compile(r"^(Resource)?Apply\w+$|^AssignSub|^AssignAdd")
_OPTIMIZER_SCOPES = ("SGD/", "GradientDescent/", "Momentum/", "Adam/", "RMSProp/", "train/", "Adagrad/")
_COMMUNICATION = ("Allreduce", "Allgather", "Broadcast", "NcclAllReduce", "CollectiveReduce", "Horovod")


def phase_of(name: str, op_type: str | None = None) -> str:
    """forward / backward / optimizer / communication / other, from names.

    Communication wins (a Horovod all-reduce inside the gradient tape is
    communication), then optimizer scopes and Apply* ops, then gradient
    scopes (``gradients/``, ``gradient_tape/``) as backward; runtime
    plumbing (``_SOURCE``, ``_retval...``, ``_arg...``) is other; the rest
    is forward.
    """
    first = name.split("/", 1)[0]
    if any(c in first for c in _COMMUNICATION) or (op_type and any(c in op_type for c in _COMMUNICATION)):
        return "communication"
    if name.startswith(_OPTIMIZER_SCOPES) or (op_type and _OPTIMIZER_TYPES.match(op_type)):
        return "optimizer"
    if first in ("gradients", "gradient_tape") or first.startswith("gradients_"):
        return "backward"
    if name.startswith("_") or first.startswith("_"):
        return "other"
    return "forward"
