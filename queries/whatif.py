"""What-if: scale the weights of some ops and recompute the critical path.

Not a catalog analysis because it recomputes: it reads one trace's ops and
dependency edges back from the graph and runs the very forward/backward
pass the loader ran (:func:`tracegraph.dag.dag_passes`) with the
matched ops' weights multiplied by ``factor``. The baseline is the same pass
on the stored weights, so it equals the trace's ``critical_path_us`` and a
factor of 1 returns it exactly.

Matching (``--match``, repeatable; an op matched by any is scaled):

* ``type=REGEX``: the op type matches REGEX in full (``type=Conv2D`` is
  Conv2D only, not Conv2DBackpropInput; ``type=Conv2D.*`` is all three);
* ``name=REGEX``: the op name contains a match of REGEX (``re.search``).

Only the dependency DAG's ops take part, as in the critical path, with
their stored path weights (``path_weight_us``: kernel time when the op
launched kernels; in a joined PyTorch trace an op's weight with the ops
nested in it).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from tracegraph.dag import dag_passes, dependency_dag
from tracegraph.db.base import Graph
from tracegraph.errors import BadRequest
from tracegraph.facts import Fact
from tracegraph.output import readable
from tracegraph.queries.run import check_layout, lacks, trace_facts
from tracegraph.queries.types import WhatIfOp, WhatIfResult

# The DAG's ops are those with a path weight (enrichment's rule: executed,
# and carrying dependencies where the format says which do).
_OPS = (
    "MATCH (o:Op {trace: $trace}) "
    "RETURN o.uid AS uid, o.name AS name, o.type AS type, o.seq AS seq, o.path_weight_us AS weight_us"
)
_EDGES = "MATCH (a:Op {trace: $trace})-[:DATA|CONTROL]->(b:Op) RETURN a.uid AS src, b.uid AS dst"
# The largest factor: a million times slower is past any question worth asking,
# and every scaled weight (and path length) stays a finite number.
MAX_FACTOR = 1e6


@dataclass(frozen=True)
class Matcher:
    """One ``field=REGEX`` criterion."""

    field: str
    pattern: re.Pattern[str]
    text: str

    def __call__(self, name: str | None, op_type: str | None) -> bool:
        if self.field == "type":
            return op_type is not None and self.pattern.fullmatch(op_type) is not None
        return name is not None and self.pattern.search(name) is not None


# What REGEX may not start with.
QUANTIFIERS = ("*", "+", "?", "{")


def parse_match(spec: str) -> Matcher:
    """``type=REGEX`` or ``name=REGEX``; UserError otherwise."""
    field, sep, pattern = spec.partition("=")
    field = field.strip()
    if not sep or field not in ("type", "name") or not pattern:
        raise BadRequest(f"--match wants type=REGEX or name=REGEX, got {spec!r}")
    if pattern[0] in QUANTIFIERS:  # it would read as repeating the '=' of the whole text (the HTTP API's schema)
        raise BadRequest(
            f"--match {spec!r}: REGEX may not start with {', '.join(QUANTIFIERS)} (escape it: \\{pattern[0]})"
        )
    try:
        return Matcher(field, re.compile(pattern), spec)
    except re.error as e:
        raise BadRequest(f"--match {spec!r}: bad regular expression: {e}") from None


def what_if(graph: Graph, trace: str, match: list[str] | str, factor: float) -> WhatIfResult:
    """Scale the matched ops' weights by ``factor``; the new critical path
    (``unavailable`` set when the trace has no dependencies). BadRequest for
    a bad pattern or factor. When no executed op matches, nothing changes:
    ``matched_ops`` is 0 and the path is the stored one."""
    specs = [match] if isinstance(match, str) else list(match)
    if not specs:
        raise BadRequest("what-if needs at least one --match")
    matchers = [parse_match(s) for s in specs]
    try:
        factor = float(factor)
    except (TypeError, ValueError):
        raise BadRequest(f"--factor wants a number, got {factor!r}") from None
    if not math.isfinite(factor) or not 0 <= factor <= MAX_FACTOR:
        raise BadRequest(f"--factor must be a number from 0 to {MAX_FACTOR:g}, got {factor!r}")
    facts = trace_facts(graph, trace)  # NotFound for an unknown trace
    check_layout(trace, facts)
    missing = lacks((Fact.DEPS,), trace, facts)
    if missing is not None:
        return WhatIfResult(trace, specs, factor, unavailable=missing)

    ops = graph.run(_OPS, trace=trace).rows
    edges = graph.run(_EDGES, trace=trace).rows
    uids = [r[0] for r in ops]
    names = [r[1] for r in ops]
    types = [r[2] for r in ops]
    seqs = [r[3] for r in ops]
    executed = np.array([r[4] is not None for r in ops], dtype=bool)
    weight = np.array([float(r[4]) if r[4] is not None else 0.0 for r in ops], dtype=float)
    scaled = np.array(
        [executed[i] and any(m(names[i], types[i]) for m in matchers) for i in range(len(ops))], dtype=bool
    )
    dag = dependency_dag(uids, seqs, executed, ((s, d) for s, d in edges))
    base = dag_passes(dag, weight)
    new_weight = np.where(scaled, weight * factor, weight)
    new = dag_passes(dag, new_weight)
    return WhatIfResult(
        trace=trace,
        match=specs,
        factor=factor,
        matched_ops=int(scaled.sum()),
        baseline_us=readable(float(base.length), time=True),
        critical_path_us=readable(float(new.length), time=True),
        speedup=readable(float(base.length / new.length)) if new.length > 0 else None,
        saved_us=readable(float(base.length - new.length), time=True),
        path=[
            WhatIfOp(
                step,
                names[i],
                types[i],
                readable(float(new_weight[i]), time=True),
                readable(float(weight[i]), time=True),
                bool(scaled[i]),
            )
            for step, i in enumerate(new.path)
        ],
    )
