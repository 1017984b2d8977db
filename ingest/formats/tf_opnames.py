"""TensorFlow node-name listing (``tf-opnames``): one graph node name per line.

The seed is the node list of a TF2 + Horovod ResNet-50 training graph. It has
no shapes, devices, edges or times, so the name is all there is: this parser
turns every non-empty line into an op and derives from the name what it can.

* ``uid`` is ``op:<name>``; a name seen again gets ``op:<name>#2``, ``#3`` ...
  (``#`` cannot occur in a TF node name, so these never collide).
* ``seq`` is the op's index in file order (0-based, blank lines skipped);
  ``attrs`` keeps the physical ``line`` and the name scopes:
  ``{"scope": "resnet50/conv2_block1_1_conv", "scopes": ["resnet50",
  "resnet50/conv2_block1_1_conv"], "line": 12}`` (scope ``""`` at top level).
* ``type`` comes from :func:`op_type_from_name`, ``phase`` from
  :func:`phase_from_name`; both are guesses from naming conventions.
* The file says nothing about placement: every op is on one device
  ``dev:unknown`` (kind ``unknown``).
* ``executed`` is None: a graph listing does not say whether a node ran.
* ``time_unit`` is ``none``: nothing says the line order is an execution
  order, so it is kept as ``seq`` but not turned into steps.
* Times are NaN (float columns), no deps, no tensors.

The name helpers (:func:`op_type_from_name`, :func:`phase_from_name`,
``NODE_NAME``) and the file helpers are shared with ``tf_oplist``, whose node
names follow the same conventions (TF1 spelling).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from tracegraph.errors import InputError
from tracegraph.ingest.frames import DEVICE_COLUMNS, OP_COLUMNS, TraceFrames, frame

NAME = "tf-opnames"

# TensorFlow's node-name rule ([A-Za-z0-9.][A-Za-z0-9_.\-/>]*) plus a leading
# underscore, which the runtime uses for its own nodes (_SOURCE, _retval_*),
# and no empty scope ("a//b", "a/"): a line cut after a "/" is not a name.
NODE_NAME = re.compile(r"[A-Za-z0-9._>][A-Za-z0-9_.\->]*(?:/[A-Za-z0-9_.\->]+)*\Z")

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

_COMM_PREFIXES = ("DistributedGradientTape_Allreduce", "HorovodBroadcast", "HorovodAllreduce",
                  "HorovodAllgather", "HorovodAlltoall")
_OPTIMIZER_SCOPES = {"SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "Nadam",
                     "Ftrl", "Momentum", "GradientDescent"}
_BACKWARD_SCOPES = {"gradient_tape", "gradients"}  # TF2 and TF1 spellings


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


def phase_from_name(name: str) -> str:
    """forward / backward / optimizer / communication, from the name scopes.

    Horovod scopes (``DistributedGradientTape_Allreduce``, ``HorovodBroadcast.*``,
    also under ``Func/``) win over everything, because an allreduce of a
    gradient is communication, not backward work. Then a top-level optimizer
    scope (``SGD/``...), then any ``gradient_tape``/``gradients`` scope
    (including ``ConstantFolding/gradient_tape/...``). Everything else is
    forward -- which also catches a few nodes that are not (the top-level
    ``AssignVariableOp_N`` writes after a broadcast, the ``AddN_N`` gradient
    sums): names do not say more.
    """
    parts = name.split("/")
    if any(p.startswith(_COMM_PREFIXES) for p in parts):
        return "communication"
    if parts[0] in _OPTIMIZER_SCOPES and len(parts) > 1:
        return "optimizer"
    if any(p in _BACKWARD_SCOPES for p in parts[:-1]):
        return "backward"
    return "forward"


def scopes_of(name: str) -> list[str]:
    """The enclosing name scopes, outermost first (``a/b/c`` -> ``a``, ``a/b``)."""
    parts = name.split("/")[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def read_text(path: Path) -> str:
    """The file as UTF-8 text, or InputError naming the line that is not."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(path, f"cannot read file: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(path, "not UTF-8 text (binary file?)", f"line {line}") from None


def float_times(df: pd.DataFrame) -> pd.DataFrame:
    """Time columns as float (NaN when unknown) rather than all-None objects,
    so that numeric code downstream (sorting, cummax) works on untimed traces."""
    cols = [c for c in ("start_us", "end_us", "dur_us") if c in df.columns]
    df[cols] = df[cols].astype("float64")
    return df


def snippet(text: str, limit: int = 60) -> str:
    """A short, single-line quotation of bad input for an error message."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


def head_lines(head: bytes) -> list[str] | None:
    """Complete, non-empty lines of a sniffed head, or None if it is not text.

    The head may stop mid-line (and mid-character) at 64 KiB, so the last
    line is dropped unless the head ends with a newline or is short.
    """
    if len(head) >= 65536 and b"\n" in head:
        head = head[: head.rindex(b"\n")]
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return [line.strip() for line in text.splitlines() if line.strip()]


def sniff(head: bytes) -> bool:
    """True when every line is a bare TF node name and at least one has a scope.

    Requiring one ``/`` keeps a generic one-word-per-line text from looking
    like a graph; spaces, commas, parentheses and braces (the other formats)
    never pass the name rule.
    """
    lines = head_lines(head)
    if not lines:
        return False
    return all(NODE_NAME.match(line) for line in lines) and any("/" in line for line in lines)


def parse(path: Path) -> TraceFrames:
    """Every non-empty line becomes one op on ``dev:unknown``; see module doc."""
    text = read_text(path)
    rows: list[dict] = []
    seen: dict[str, int] = {}
    for lineno, raw in enumerate(text.split("\n"), start=1):
        name = raw.strip()
        if not name:
            continue
        if not NODE_NAME.match(name):
            raise InputError(path, f"not a TensorFlow node name: {snippet(name)}", f"line {lineno}")
        seen[name] = seen.get(name, 0) + 1
        uid = f"op:{name}" if seen[name] == 1 else f"op:{name}#{seen[name]}"
        scopes = scopes_of(name)
        attrs = {"scope": scopes[-1] if scopes else "", "scopes": scopes, "line": lineno}
        rows.append({
            "uid": uid, "name": name, "type": op_type_from_name(name), "device": "dev:unknown",
            "seq": len(rows), "start_us": None, "end_us": None, "dur_us": None,
            "phase": phase_from_name(name), "executed": None, "attrs": json.dumps(attrs),
        })
    if not rows:
        raise InputError(path, "no node names (empty file)", "line 1")
    trace = TraceFrames(
        framework="tensorflow", sources=[str(path)], time_unit="none",
        ops=float_times(frame(rows, OP_COLUMNS)),
        devices=frame([{"uid": "dev:unknown", "name": "unknown", "kind": "unknown"}], DEVICE_COLUMNS),
    )
    trace.check()
    return trace
