"""megengine-profile parser: seed 004 (MegEngine ResNet-50 inference, batch 10).

Expected numbers come from a small reference walk over the raw JSON written
here (plain dict access, its own lifetime and peak code), not from the
parser's helpers.
"""

from __future__ import annotations

import json
import math
import random
import re
from pathlib import Path

import bad_input
import pytest
from bad_input import garbage

from tracegraph.errors import InputError
from tracegraph.ingest.formats import megengine_profile

TRACES = Path(__file__).resolve().parents[1] / "examples" / "traces"
SEED = TRACES / "megengine-resnet50-profile.json"

# Pinned values (also recomputed from the raw file below).
EXECUTED = 234
OPERATORS = 240
TOTAL_DEVICE_US = 22430.145
SLOWEST = ("802", "conv(FUSE_ADD_RELU[800],const{512,512,3,3}[459])[802]", 580.597)
PEAK_GPU_BYTES = 198_051_840


# --- reference walk over the raw JSON ------------------------------------------------


def raw() -> dict:
    return json.loads(SEED.read_text())


def reference(doc: dict) -> dict:
    g, prof = doc["graph_exec"], doc["profiler"]
    order = g["comp_seq"]
    pos = {oid: i for i, oid in enumerate(order)}
    stamps = [
        t for part in ("host", "device") for recs in prof[part].values() for rec in recs.values() for t in rec.values()
    ]
    origin = min(stamps)
    span = {}
    for oid in order:
        recs = prof["device"].get(oid) or prof["host"][oid]
        span[oid] = (
            (min(r["start"] for r in recs.values()) - origin) * 1e6,
            (max(r["end"] for r in recs.values()) - origin) * 1e6,
        )
    device_us = {oid: sum(r["end"] - r["start"] for r in recs.values()) * 1e6 for oid, recs in prof["device"].items()}
    slowest = max(device_us, key=device_us.get)
    touch: dict[str, set] = {}
    for oid, op in g["operator"].items():
        for v in op["input"] + op["output"]:
            touch.setdefault(v, set()).add(oid)
    # where each var's bytes live: its static chunk, its own dynamic range, or
    # (read-only forward) its source's place
    place = {}
    for vid, v in g["var"].items():
        if v["mem_plan"]:
            place[vid] = v["mem_plan"]["mem_chunk_id"]
        elif v["prev_dev_ptr"] and v.get("prev_dev_ptr_end") is not None and not v["mem_readonly_fwd_src"]:
            place[vid] = "dyn:" + vid
    for vid, v in g["var"].items():
        src = v["mem_readonly_fwd_src"]
        if src and src in place:
            place[vid] = place[src]
    blocks = {}
    for cid, c in g["mem_chunk"].items():
        blocks[cid] = {"bytes": c["size"], "node": g["var"][c["owner_var"]]["comp_node"]}
    for vid, v in g["var"].items():
        if place.get(vid) == "dyn:" + vid:
            blocks["dyn:" + vid] = {"bytes": v["prev_dev_ptr_end"] - v["prev_dev_ptr"], "node": v["comp_node"]}
    for key, b in blocks.items():
        ops = sorted({o for vid, p in place.items() if p == key for o in touch.get(vid, ()) if o in pos}, key=pos.get)
        b["life"] = (span[ops[0]][0], span[ops[-1]][1]) if ops else None
    peaks = {}
    for node in {v["comp_node"] for v in g["var"].values()}:
        mine = [b for b in blocks.values() if b["node"] == node and b["life"]]
        peaks[node] = max(
            [sum(b["bytes"] for b in mine if b["life"][0] <= t < b["life"][1]) for t in {b["life"][0] for b in mine}],
            default=0,
        )
    return {
        "executed": len(order),
        "operators": len(g["operator"]),
        "span": span,
        "total_device_us": sum(device_us[o] for o in order),
        "slowest": slowest,
        "slowest_us": device_us[slowest],
        "blocks": blocks,
        "peaks": peaks,
    }


def parser_peaks(frames) -> dict[str, int]:
    """Peak of live bytes per allocator over the allocation start times."""
    out = {}
    a = frames.allocations.dropna(subset=["alloc_us"])
    for alloc in frames.allocators["uid"]:
        mine = a[a["allocator"] == alloc]
        out[alloc[4:]] = max(
            [int(mine.loc[(mine["alloc_us"] <= t) & (mine["free_us"] > t), "bytes"].sum()) for t in mine["alloc_us"]],
            default=0,
        )
    return out


@pytest.fixture(scope="module")
def ref() -> dict:
    return reference(raw())


@pytest.fixture(scope="module")
def trace():
    return megengine_profile.parse(SEED)


# --- the seed --------------------------------------------------------------------


def test_counts_and_contract(trace, ref):
    trace.check()
    assert trace.framework == "megengine" and trace.time_unit == "us"
    assert ref["executed"] == EXECUTED and ref["operators"] == OPERATORS
    assert len(trace.ops) == OPERATORS
    assert int(trace.ops["executed"].sum()) == EXECUTED
    executed = trace.ops[trace.ops["executed"]]
    assert sorted(executed["seq"].astype(int)) == list(range(EXECUTED))
    assert trace.ops.loc[~trace.ops["executed"], ["seq", "start_us", "end_us"]].isna().all().all()
    assert set(trace.devices["uid"]) == {"dev:gpu0:0", "dev:cpu0:0"}
    assert set(trace.allocators["uid"]) == {"mem:gpu0:0", "mem:cpu0:0"}
    assert list(trace.streams["uid"]) == ["s:gpu0:0"]
    assert len(trace.tensors) == len(raw()["graph_exec"]["var"])


def test_times_are_device_times_from_the_earliest_stamp(trace, ref):
    ops = trace.ops.set_index("uid")
    for oid, (start, end) in ref["span"].items():
        assert ops.loc[f"op:{oid}", "start_us"] == pytest.approx(start, abs=1e-6)
        assert ops.loc[f"op:{oid}", "end_us"] == pytest.approx(end, abs=1e-6)
    assert trace.ops["start_us"].min() == pytest.approx(0.0, abs=1e-6)


def test_total_device_time_and_slowest_op(trace, ref):
    assert ref["total_device_us"] == pytest.approx(TOTAL_DEVICE_US, abs=1e-3)
    assert trace.ops["dur_us"].sum() == pytest.approx(ref["total_device_us"], rel=1e-9)
    assert trace.kernels["dur_us"].sum() == pytest.approx(ref["total_device_us"], rel=1e-9)
    assert len(trace.kernels) == EXECUTED
    slow = trace.ops.loc[trace.ops["dur_us"].idxmax()]
    assert (slow["uid"], slow["name"]) == (f"op:{ref['slowest']}", SLOWEST[1])
    assert ref["slowest"] == SLOWEST[0]
    assert slow["dur_us"] == pytest.approx(ref["slowest_us"], rel=1e-9)
    assert slow["dur_us"] == pytest.approx(SLOWEST[2], abs=1e-3)
    assert slow["type"] == "ConvolutionForward"


def test_attrs_keep_host_kern_and_footprint(trace):
    doc = raw()
    attrs = json.loads(trace.ops.set_index("uid").loc["op:621", "attrs"])
    fp = doc["profiler"]["opr_footprint"]["621"]
    assert attrs["flops"] == fp["computation"] and attrs["memory_bytes"] == fp["memory"]
    assert attrs["in_shapes"] == fp["in_shapes"] and attrs["params"] == fp["param"]
    assert set(attrs["host"]["interpreter"]) == {"start_us", "kern_us", "end_us"}
    assert set(attrs["device"]["gpu0:0"]) == {"start_us", "kern_us", "end_us"}
    assert attrs["extra"] == doc["graph_exec"]["operator"]["621"]["extra"]


def test_tensors_and_dataflow(trace):
    doc = raw()
    g = doc["graph_exec"]
    t = trace.tensors.set_index("uid")
    assert t.loc["t:494", "bytes"] == g["mem_chunk"]["chk494"]["size"]
    assert t.loc["t:494", "dtype"] == "Float32"
    v = g["var"]["630"]
    assert t.loc["t:630", "bytes"] == v["prev_dev_ptr_end"] - v["prev_dev_ptr"]
    assert t.loc["t:630", "shape"] == "x".join(map(str, v["static_infer_tags"]["SHAPE"]["inferred_result"]))
    n_inputs = sum(len(op["input"]) for op in g["operator"].values())
    assert len(trace.consumes) == n_inputs
    producer = {v: oid for oid, op in g["operator"].items() for v in op["output"]}
    edges = {(f"op:{producer[v]}", f"op:{oid}") for oid, op in g["operator"].items() for v in op["input"]}
    assert set(zip(trace.deps["src"], trace.deps["dst"])) == edges
    assert len(trace.deps) == len(edges)


def test_allocations_and_peak_per_comp_node(trace, ref):
    a = trace.allocations.set_index("uid")
    assert len(a) == len(ref["blocks"])
    for key, b in ref["blocks"].items():
        row = a.loc[f"a:{key}"]
        assert row["bytes"] == b["bytes"]
        assert (row["alloc_us"], row["free_us"]) == pytest.approx(b["life"], abs=1e-6)
    assert ref["peaks"] == {"gpu0:0": PEAK_GPU_BYTES, "cpu0:0": 0}
    assert parser_peaks(trace) == ref["peaks"]
    kinds = trace.allocations["kind"].value_counts().to_dict()
    assert kinds == {"output": 128, "persistent": 104, "temp": 53}
    # the reshape of the pooling output reads its source's memory: no block of its own
    assert "a:dyn:841" not in a.index
    assert a.loc["a:dyn:832", "free_us"] == trace.ops.set_index("uid").loc["op:842", "end_us"]


# --- sniffing --------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(TRACES.iterdir()), ids=lambda p: p.name)
def test_sniff(path):
    with path.open("rb") as fh:
        head = fh.read(65536)
    assert megengine_profile.sniff(head) == (path == SEED)


def test_sniff_rejects_other_json():
    assert not megengine_profile.sniff(b'{"traceEvents": [{"name": "aten::conv2d", "ph": "X"}]}')


# --- bad and unusual input -----------------------------------------------------------


def parse_or_error(path: Path):
    """The frames (checked), or None after checking the InputError is one line naming a place."""
    return bad_input.parse_or_error(
        megengine_profile.parse, path, r"\((line \d+|[a-z_]+[.\[(].*|graph_exec|profiler)\)", or_empty=True
    )


def error_where(path: Path) -> str:
    with pytest.raises(InputError) as info:
        megengine_profile.parse(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(str(path))
    return info.value.where


def dump(tmp_path: Path, doc: dict, name: str = "variant.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return p


@pytest.mark.parametrize("fraction", [0.0001, 0.1, 0.33, 0.5, 0.9, 0.99999])
def test_truncated(tmp_path, fraction):
    data = SEED.read_bytes()
    p = tmp_path / "cut.json"
    p.write_bytes(data[: int(len(data) * fraction)])
    assert re.fullmatch(r"line 1 column \d+", error_where(p))


@pytest.mark.parametrize("content", [b"", b"  \n", b"[]", b"null", b"{}", b'{"graph_exec": {}}'])
def test_empty_or_hollow(tmp_path, content):
    p = tmp_path / "empty.json"
    p.write_bytes(content)
    with pytest.raises(InputError):
        megengine_profile.parse(p)


@pytest.mark.parametrize("seed", range(3))
def test_binary_garbage(tmp_path, seed):
    p = tmp_path / "garbage.bin"
    p.write_bytes(garbage(seed, 3000))
    assert parse_or_error(p) is None


def _set(doc: dict, dotted: list, value) -> None:
    for key in dotted[:-1]:
        doc = doc[key]
    doc[dotted[-1]] = value


@pytest.mark.parametrize(
    "field, value, where",
    [
        (["graph_exec", "comp_seq", 3], "99999", "graph_exec.comp_seq[3]"),
        (["graph_exec", "comp_seq", 3], "536", "graph_exec.comp_seq[3]"),  # listed twice
        (["graph_exec", "mem_chunk", "chk200", "size"], -512, 'graph_exec.mem_chunk["chk200"].size'),
        (["graph_exec", "mem_chunk", "chk200", "size"], "512", 'graph_exec.mem_chunk["chk200"].size'),
        (["graph_exec", "var", "783", "prev_dev_ptr_end"], 5, 'graph_exec.var["783"].prev_dev_ptr_end'),
        (["graph_exec", "operator", "621", "input", 0], "no-such-var", 'graph_exec.operator["621"].input[0]'),
        (["graph_exec", "operator", "621", "output"], ["518"], 'graph_exec.operator["621"].output[0]'),
        (["profiler", "device", "802", "gpu0:0", "end"], 0.0, 'profiler.device["802"]["gpu0:0"].end'),
        (["profiler", "host", "802", "interpreter", "start"], "soon", 'profiler.host["802"]["interpreter"].start'),
        (["profiler", "device", "802", "gpu0:0", "start"], math.nan, 'profiler.device["802"]["gpu0:0"].start'),
        (
            ["graph_exec", "var", "200", "mem_plan", "mem_chunk_id"],
            "chk0",
            'graph_exec.var["200"].mem_plan.mem_chunk_id',
        ),
        (["graph_exec", "var"], [], "graph_exec.var"),
    ],
)
def test_corrupted_fields(tmp_path, field, value, where):
    doc = raw()
    _set(doc, field, value)
    got = error_where(dump(tmp_path, doc))
    # the operator that first claims var 518 depends on dict order; only check the part
    assert got == where or (field[-1] == "output" and got.endswith(".output[0]"))


def test_missing_graph_exec(tmp_path):
    doc = raw()
    del doc["graph_exec"]
    assert error_where(dump(tmp_path, doc)) == "graph_exec"


def test_reordered_objects_give_same_result(tmp_path, ref):
    doc = raw()
    rng = random.Random(5)
    for part in (doc["graph_exec"], doc["profiler"]):
        for key, value in list(part.items()):
            if isinstance(value, dict):
                items = list(value.items())
                rng.shuffle(items)
                part[key] = dict(items)
    doc = dict(reversed(list(doc.items())))
    frames = parse_or_error(dump(tmp_path, doc))
    assert parser_peaks(frames) == ref["peaks"]
    assert frames.ops["dur_us"].sum() == pytest.approx(ref["total_device_us"], rel=1e-9)
    assert int(frames.ops["executed"].sum()) == EXECUTED


def test_unknown_types_and_extra_fields_are_kept(tmp_path, ref):
    doc = raw()
    doc["graph_exec"]["operator"]["621"]["type"] = "FancyConvolutionV9"
    doc["graph_exec"]["operator"]["621"]["future_field"] = {"x": [1, 2]}
    doc["profiler"]["opr_footprint"]["621"]["energy_mj"] = 3.5
    doc["graph_exec"]["var"]["622"]["new_var_field"] = True
    doc["graph_exec"]["mem_chunk"]["chk200"]["alignment"] = 512
    doc["profiler"]["new_section"] = {"anything": 1}
    doc["version"] = "1.13"
    frames = parse_or_error(dump(tmp_path, doc))
    op = frames.ops.set_index("uid").loc["op:621"]
    attrs = json.loads(op["attrs"])
    assert op["type"] == "FancyConvolutionV9"
    assert attrs["future_field"] == {"x": [1, 2]} and attrs["energy_mj"] == 3.5
    assert parser_peaks(frames) == ref["peaks"]


def test_without_profiler_the_trace_is_in_steps(tmp_path):
    doc = raw()
    del doc["profiler"]
    frames = parse_or_error(dump(tmp_path, doc))
    assert frames.time_unit == "step"
    ex = frames.ops[frames.ops["executed"]]
    assert (ex["start_us"] == ex["seq"]).all() and (ex["end_us"] == ex["seq"] + 1).all()
    assert frames.kernels.empty


def _paths(obj, prefix=()):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield (*prefix, k)
            yield from _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield (*prefix, i)
            yield from _paths(v, (*prefix, i))


@pytest.mark.slow
def test_random_field_mutations_never_crash(tmp_path):
    """Replaced or deleted fields anywhere that matters: frames or InputError, nothing else."""
    text = SEED.read_text()
    base = json.loads(text)
    fields = [p for p in _paths(base) if "static_infer_tags" not in p and "extra" not in p]
    rng = random.Random(17)
    values = [None, -1, "x", [], {}, 1.5, True, "517", 0, 10**30, math.inf, ["1"]]
    errors = 0
    for i in range(120):
        doc = json.loads(text)  # a fresh copy (a fifth of deepcopy's time)
        target = rng.choice(fields)
        parent = doc
        for key in target[:-1]:
            parent = parent[key]
        if isinstance(parent, dict) and rng.random() < 0.3:
            del parent[target[-1]]
        else:
            parent[target[-1]] = rng.choice(values)
        errors += parse_or_error(dump(tmp_path, doc, f"m{i}.json")) is None
    assert errors > 0


def test_ids_with_line_breaks_stay_on_one_line(tmp_path):
    doc = raw()
    doc["profiler"]["host"]["51\n7"] = doc["profiler"]["host"].pop("517")
    p = dump(tmp_path, doc)
    with pytest.raises(InputError) as info:
        megengine_profile.parse(p)
    assert "\n" not in str(info.value) and info.value.where == 'profiler.host["51\\n7"]'
