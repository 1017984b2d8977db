"""Independent reference for PyTorch Execution Trace (ET) + Kineto pairs.

Walks the raw JSON of tests/data/pytorch_et/*.{et,kineto}.json.gz with plain
Python (json, gzip): no tracegraph, no pandas.  Run it to print what it finds:

    python tests/et_reference.py

ET facts this relies on (torch 2.13, schema "1.1.1-chakra.0.0.4"):
- node ids come from one counter, taken when an op *starts* (under a global
  lock), so sorting by id is start order; nodes are written when they *end*
  (children before parents).  Tensor and storage ids come from the same
  counter.
- a tensor value is [tensor_id, storage_id, offset, numel, itemsize, device];
  storage_id is keyed by the storage's data pointer, so a freed address that
  is allocated again gets the old storage id back.  storage_id 0 is an
  undefined tensor; every zero-size storage (null data pointer) shares one id.
- the autograd Node ops (``XBackward0``, ``AccumulateGrad``) record their
  incoming gradients as inputs and *no outputs*: the gradients they produce
  are only visible as outputs of their children.
"""

import gzip
import json
import os
import sys

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "pytorch_et")
PAIRS = ("two_branch", "mlp_train", "cnn")
ROOT_PREFIX = "[pytorch|profiler|execution_trace|"  # ...process] and ...thread]


def load(et_path, kineto_path):
    with gzip.open(et_path, "rt") as f:
        et = json.load(f)
    with gzip.open(kineto_path, "rt") as f:
        kineto = json.load(f)
    return et, kineto


def attr(node, name, default=None):
    for a in node.get("attrs", ()):
        if a["name"] == name:
            return a["value"]
    return default


def is_root(node):
    return node["name"].startswith(ROOT_PREFIX)


def _is_tensor_value(v):
    return (
        isinstance(v, list)
        and len(v) == 6
        and isinstance(v[5], str)
        and all(isinstance(x, int) and not isinstance(x, bool) for x in v[:5])
    )


def _tensors(value, type_):
    """Tensor values in one input/output slot, looking inside lists
    (type 'GenericList[Tensor(float),Tensor(float)]' for a Tensor[])."""
    if "Tensor(" not in type_:
        return []
    if _is_tensor_value(value):
        return [value]
    if isinstance(value, list):
        return [t for v in value for t in _tensors(v, type_)]
    return []


def slot_storages(side):
    """[(slot index, storage id)] of the tensors of node['inputs'] or ['outputs'].

    Undefined tensors (storage 0) and zero-size tensors (no data; they all
    share the null pointer's storage id) are left out."""
    out = []
    for i, (value, type_) in enumerate(zip(side["values"], side["types"])):
        for t in _tensors(value, type_):
            if t[1] != 0 and t[3] > 0:
                out.append((i, t[1]))
    return out


def _split_top(s):
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def schema_marks(schema):
    """(per-argument '!' flags, per-return '!' flags) of an op_schema string,
    e.g. 'aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1)
    -> Tensor(a!)' gives ([True, False, False], [True])."""
    head, _, ret = schema.rpartition(" -> ")
    args = head[head.index("(") + 1 : head.rindex(")")]
    arg_marks = ["!" in a for a in _split_top(args) if a != "*"]
    ret = ret.strip()
    if ret.startswith("(") and ret.endswith(")"):
        ret = ret[1:-1]
    return arg_marks, ["!" in r for r in _split_top(ret)]


def node_effects(node):
    """(read storages, written storages) of one node, by the rule: every
    input storage is read; an output storage is written if it is new (not
    among the inputs) or mutated ('!' on that argument or return in
    op_schema; without a schema, a name ending in '_').  Inputs marked '!'
    are written too even when the op does not return them.  A view (output
    storage among the inputs, no '!') writes nothing.  (torch 2.13's
    native_batch_norm schema marks no '!' on the running stats it updates:
    those writes are invisible.)"""
    ins = slot_storages(node["inputs"])
    outs = slot_storages(node["outputs"])
    in_set = {s for _, s in ins}
    schema = attr(node, "op_schema", "")
    if schema:
        arg_marks, ret_marks = schema_marks(schema)
        mut_in = {s for i, s in ins if i < len(arg_marks) and arg_marks[i]}
        mut_out = {s for i, s in outs if i < len(ret_marks) and ret_marks[i]}
    else:
        base = node["name"].split("::")[-1].split(".")[0]
        mutating = base.endswith("_") and not base.endswith("__")
        mut_in = set()
        mut_out = {s for _, s in outs} if mutating else set()
    writes = {s for _, s in outs if s not in in_set} | mut_out | mut_in
    return [s for _, s in ins], writes


def _index(et):
    by_id = {n["id"]: n for n in et["nodes"]}
    children = {}
    for n in et["nodes"]:
        if n["ctrl_deps"] != n["id"]:
            children.setdefault(n["ctrl_deps"], []).append(n["id"])
    return by_id, children


def carriers(et):
    """Outermost tensor-bearing ops, in id (= start) order."""
    by_id, _ = _index(et)

    def bears(n):
        return bool(slot_storages(n["inputs"]) or slot_storages(n["outputs"]))

    out = []
    for n in sorted(et["nodes"], key=lambda n: n["id"]):
        if is_root(n) or not bears(n):
            continue
        p, outer = n["ctrl_deps"], False
        while p in by_id and not is_root(by_id[p]):
            if bears(by_id[p]):
                outer = True
                break
            p = by_id[p]["ctrl_deps"]
        if not outer:
            out.append(n)
    return out


def _subtree(nid, children):
    out, stack = [], [nid]
    while stack:
        x = stack.pop()
        out.append(x)
        stack.extend(children.get(x, ()))
    return sorted(out)


def carrier_effects(et, subtree=True):
    """{carrier id: (reads, writes)}.  subtree=False: the carrier's own
    inputs/outputs only (the literal rule; it cannot see what an autograd
    Node writes).  subtree=True: the carrier and its descendants in id order,
    a read counting only if the storage was not already written inside the
    subtree (by an earlier node or by an enclosing one: ops that fill their
    own output buffer, like copy_ inside addmm)."""
    by_id, children = _index(et)
    effects = {}
    for c in carriers(et):
        if not subtree:
            effects[c["id"]] = node_effects(c)
            continue
        reads, local = [], set()
        for nid in _subtree(c["id"], children):
            r, w = node_effects(by_id[nid])
            reads.extend(s for s in r if s not in local)
            local |= w
        effects[c["id"]] = (reads, local)
    return effects


def data_edges(et, kineto=None, subtree=True):
    """{(writer id, reader id)} over carriers in id order, last writer per
    storage.  With the Kineto trace, an edge is left out when the allocation
    the writer wrote (the last one at the storage's address before the writer
    ended) was freed before the reader started: the reader then sees a new
    allocation that reuses the address, hence the storage id (a wrapped
    Python scalar, a temporary), not what was written."""

    def reused(s, w, c):
        return False

    if kineto is not None:
        addr = storage_addresses(et, kineto)
        allocs, frees = {}, {}
        for e in memory_events(kineto):
            (allocs if e["args"]["Bytes"] > 0 else frees).setdefault(e["args"]["Addr"], []).append(e["ts"])
        span = {rf: (e["ts"], e["ts"] + e["dur"]) for rf, e in kineto_ops(kineto).items()}
        by_id, _ = _index(et)

        def reused(s, w, c):
            # the allocation the writer saw is the last one of the address
            # before the writer ended; was it freed before the reader began?
            sw, sc = span.get(attr(by_id[w], "rf_id")), span.get(attr(by_id[c], "rf_id"))
            if s not in addr or sw is None or sc is None:
                return False
            born = max((t for t in allocs.get(addr[s], ()) if t <= sw[1]), default=float("-inf"))
            return any(born < t < sc[0] for t in frees.get(addr[s], ()))

    last_writer, edges = {}, set()
    for cid, (reads, writes) in sorted(carrier_effects(et, subtree).items()):
        for s in reads:
            w = last_writer.get(s)
            if w is not None and w != cid and not reused(s, w, cid):
                edges.add((w, cid))
        for s in writes:
            last_writer[s] = cid
    return edges


def memory_events(kineto):
    return [e for e in kineto["traceEvents"] if e.get("name") == "[memory]" and "Addr" in e.get("args", {})]


def storage_addresses(et, kineto):
    """{storage id: data address} for the storages created inside the trace.
    The ET keeps no addresses; a storage is created by the node that outputs
    it while neither its inputs nor a child's new outputs hold it, and its
    address is the one Kineto [memory] allocation of its size (numel *
    itemsize) inside that node's Kineto interval and outside its children's.
    Ambiguous (several candidates) or unseen storages are left out."""
    by_id, children = _index(et)
    ops = kineto_ops(kineto)
    allocs = [e for e in memory_events(kineto) if e["args"]["Bytes"] > 0]

    def interval(node):
        e = ops.get(attr(node, "rf_id"))
        return (e["ts"], e["ts"] + e["dur"]) if e is not None else None

    out = {}
    for n in et["nodes"]:
        span = interval(n)
        if is_root(n) or span is None:
            continue
        held = {s for _, s in slot_storages(n["inputs"])}
        inner = []
        for c in children.get(n["id"], ()):
            r, w = node_effects(by_id[c])
            held |= w - set(r)
            if interval(by_id[c]):
                inner.append(interval(by_id[c]))
        mine = [e for e in allocs if span[0] <= e["ts"] <= span[1] and not any(a <= e["ts"] <= b for a, b in inner)]
        for value, type_ in zip(n["outputs"]["values"], n["outputs"]["types"]):
            for t in _tensors(value, type_):
                if t[1] == 0 or t[3] == 0 or t[1] in held:
                    continue
                cands = [e for e in mine if e["args"]["Bytes"] == t[3] * t[4]]
                if len(cands) == 1:
                    out[t[1]] = cands[0]["args"]["Addr"]
    return out


def kineto_ops(kineto):
    """{Record function id: event} of the cpu_op and user_annotation events."""
    out = {}
    for e in kineto["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation"):
            rf = e.get("args", {}).get("Record function id")
            if rf is not None:
                out[rf] = e
    return out


def kineto_durations(kineto, et):
    """{carrier id: duration in us of the Kineto event with its rf_id, or None}."""
    ops = kineto_ops(kineto)
    out = {}
    for c in carriers(et):
        e = ops.get(attr(c, "rf_id"))
        out[c["id"]] = float(e["dur"]) if e is not None else None
    return out


def longest_path(nodes, edges, weight):
    """(length, [node ids]) of the heaviest path of the DAG; nodes in a
    topological order (ids here: edges always go from a smaller id)."""
    preds = {}
    for a, b in edges:
        preds.setdefault(b, []).append(a)
    best, back = {}, {}
    for n in nodes:
        p = max(preds.get(n, ()), key=lambda x: best[x], default=None)
        best[n] = (best[p] if p is not None else 0.0) + (weight.get(n) or 0.0)
        back[n] = p
    if not best:
        return 0.0, []
    end = max(best, key=best.get)
    path = [end]
    while back[path[-1]] is not None:
        path.append(back[path[-1]])
    return best[end], path[::-1]


def all_paths(nodes, edges):
    """Every source-to-sink path (brute force; small graphs only)."""
    succ, has_pred = {}, set()
    for a, b in edges:
        succ.setdefault(a, []).append(b)
        has_pred.add(b)
    paths = []

    def walk(path):
        nxt = succ.get(path[-1], ())
        if not nxt:
            paths.append(path)
        for n in nxt:
            walk([*path, n])

    for n in nodes:
        if n not in has_pred:
            walk([n])
    return paths


def under(et, node, name):
    """Does an ancestor of node carry this name (a record_function scope)?"""
    by_id, _ = _index(et)
    p = node["ctrl_deps"]
    while p in by_id and not is_root(by_id[p]):
        if by_id[p]["name"] == name:
            return True
        p = by_id[p]["ctrl_deps"]
    return False


def main():
    for name in PAIRS:
        et, kineto = load(os.path.join(DATA, name + ".et.json.gz"), os.path.join(DATA, name + ".kineto.json.gz"))
        cs = carriers(et)
        ids = [c["id"] for c in cs]
        names = {c["id"]: c["name"] for c in cs}
        edges = data_edges(et, kineto)
        dur = kineto_durations(kineto, et)
        matched = sum(d is not None for d in dur.values())
        # id order is start order: check against Kineto start times
        ops = kineto_ops(kineto)
        ts = [ops[attr(c, "rf_id")]["ts"] for c in cs if attr(c, "rf_id") in ops]
        length, path = longest_path(ids, edges, dur)
        print(
            f"{name}: {len(cs)} carriers, {matched}/{len(cs)} matched to Kineto by rf_id, "
            f"id order == Kineto start order: {ts == sorted(ts)}"
        )
        et_only = data_edges(et)
        print(
            f"  edges: {len(edges)} (ET only: {len(et_only)}, of which {len(et_only - edges)} dropped "
            f"as address reuse by Kineto; carriers' own tensors only: {len(data_edges(et, subtree=False))})"
        )
        print(f"  longest path {length:.1f} us over {len(path)} ops: " + " -> ".join(names[n] for n in path))
        if name == "two_branch":
            light = [c["id"] for c in cs if under(et, c, "light_branch")]
            heavy = [c["id"] for c in cs if under(et, c, "heavy_branch")]
            paths = all_paths(ids, edges)
            assert not set(light) & set(path), "a light-branch op is on the longest path"
            assert set(heavy) <= set(path), "a heavy-branch op is off the longest path"
            through = max(sum(dur[n] or 0.0 for n in p) for p in paths if set(light) & set(p))
            print(
                f"  heavy branch {sum(dur[n] for n in heavy):.1f} us ({len(heavy)} ops), "
                f"light branch {sum(dur[n] for n in light):.1f} us ("
                + ", ".join(names[n] for n in light)
                + f"); light slack by brute force over {len(paths)} paths: {length - through:.1f} us"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
