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
* ``type`` comes from :func:`tf_names.op_type_from_name`, ``phase`` from
  :func:`tf_names.phase_of` (given the name only); both are guesses from
  naming conventions.
* The file says nothing about placement: every op is on one device
  ``dev:unknown`` (kind ``unknown``).
* ``executed`` is None: a graph listing does not say whether a node ran.
* ``time_unit`` is ``none``: nothing says the line order is an execution
  order, so it is kept as ``seq`` but not turned into steps.
* Times are NaN (float columns), no deps, no tensors.
* A name listed more than once stays one op per line (uids ``#2``, ``#3``
  as above): a listing may hold several graphs (functions) that reuse names.

The file is streamed line by line (:func:`tracegraph.ingest.source.lines`);
a line over the line limit, binary content or text that is not UTF-8 is an
InputError naming the line.
"""

from __future__ import annotations

import json
from pathlib import Path

from tracegraph.errors import InputError
from tracegraph.ingest.formats import kit
from tracegraph.ingest.formats.kit import FormatInfo, FramesBuilder, Joins, Kind, snippet
from tracegraph.ingest.formats.tf.names import NODE_NAME, op_type_from_name, phase_of, scopes_of
from tracegraph.ingest.frames import TraceFrames
from tracegraph.ingest.source import head_lines, lines

FORMAT = FormatInfo("tf-opnames", "tensorflow", Joins.ALONE, "TensorFlow node names, one per line")


def sniff(head: bytes) -> bool:
    """True when every line is a bare TF node name and at least one has a scope.

    Requiring one ``/`` keeps a generic one-word-per-line text from looking
    like a graph; spaces, commas, parentheses and braces (the other formats)
    never pass the name rule.
    """
    found = head_lines(head)
    if not found:
        return False
    return all(NODE_NAME.match(line) for line in found) and any("/" in line for line in found)


def parse(path: Path) -> TraceFrames:
    """Every non-empty line becomes one op on device ``unknown``; see module doc."""
    b = FramesBuilder(FORMAT.framework, [str(path)], time_unit="none")
    device = b.device("unknown")
    seen: dict[str, int] = {}
    for lineno, raw in enumerate(lines(path, FORMAT.name), start=1):
        name = raw.strip()
        if not name:
            continue
        if not NODE_NAME.match(name):
            raise InputError(path, f"not a TensorFlow node name: {snippet(name)}", f"line {lineno}")
        seen[name] = seen.get(name, 0) + 1
        scopes = scopes_of(name)
        attrs = {"scope": scopes[-1] if scopes else "", "scopes": scopes, "line": lineno}
        b.op(
            {
                "uid": kit.uid(Kind.OP, name if seen[name] == 1 else f"{name}#{seen[name]}"),
                "name": name,
                "type": op_type_from_name(name),
                "device": device,
                "seq": len(b.ops),
                "phase": phase_of(name),
                "executed": None,
                "attrs": json.dumps(attrs),
            }
        )
    if not b.ops:
        raise InputError(path, "no node names (empty file)", "line 1")
    return b.build()
