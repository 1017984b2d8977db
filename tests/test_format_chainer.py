"""chainer-graph parser: seed 003 (Chainer VGG-19 training step with block sizes).

The expected numbers are worked out here from the raw lines by a small
reference walk (plain ``split``, its own ordering and lifetime code), not by
the parser's helpers, so a parser bug cannot hide in both places.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import bad_input
import pandas as pd
import pytest
from bad_input import EDITS, garbage, mutate

from tracegraph.errors import InputError
from tracegraph.ingest.formats import chainer_graph

TRACES = Path(__file__).resolve().parents[1] / "examples" / "traces"
SEED = TRACES / "chainer-vgg19-graph.txt"

# Pinned so a change in the reference walk is noticed too; both are recomputed below.
PEAK_BYTES = 3_258_544_192
PEAK_STEP = 65


# --- reference walk over the raw lines -------------------------------------------


def reference(path: Path) -> dict:
    """Order, lifetimes and the per-step memory curve, straight from the text."""
    lines = path.read_text().splitlines()
    n_blocks, n_funcs = (int(x) for x in lines[0].split())
    size, name = {}, {}
    for line in lines[1 : 1 + n_blocks]:
        bid, nbytes, bname = line.split(" ", 2)
        size[bid], name[bid] = int(nbytes), bname
    funcs, i = [], 1 + n_blocks
    for k in range(n_funcs):
        phase = lines[i]
        n_in, n_out = (int(x) for x in lines[i + 1].split())
        ins = [lines[i + 2 + j].split() for j in range(n_in)]
        outs = lines[i + 2 + n_in : i + 2 + n_in + n_out]
        fname = lines[i + 2 + n_in + n_out]
        rank = json.loads(lines[i + 3 + n_in + n_out])["rank"]
        funcs.append({"k": k, "phase": phase, "ins": ins, "outs": outs, "fname": fname, "rank": rank})
        i += 4 + n_in + n_out
    fwd = sorted([f for f in funcs if f["phase"] == "forward"], key=lambda f: (f["rank"], f["k"]))
    bwd = sorted([f for f in funcs if f["phase"] == "backward"], key=lambda f: (-f["rank"], f["k"]))
    order = fwd + bwd
    n = len(order)
    made, used = {}, {}
    for step, f in enumerate(order):
        g = "grad" if f["phase"] == "backward" else ""
        for o in f["outs"]:
            made[(o, g)] = step
        for bid, role in f["ins"]:
            used.setdefault((bid, "grad" if role == "gradient" else ""), []).append(step)
    keys = {(b, "") for b in size} | set(made) | set(used)
    live = {}
    for key in keys:
        is_param = name[key[0]].startswith("/")
        lo = made.get(key, 0)
        hi = n if is_param else (max(used[key]) + 1 if key in used else lo + 1)
        live[key] = (lo, hi)
    curve = [sum(size[b] for (b, g), (lo, hi) in live.items() if lo <= s < hi) for s in range(n)]
    peak = max(curve)
    return {
        "n": n,
        "order": order,
        "live": live,
        "curve": curve,
        "peak": peak,
        "peak_step": curve.index(peak),
        "size": size,
        "name": name,
    }


def uid(key: tuple[str, str]) -> str:
    return f"t:{key[0]}:grad" if key[1] else f"t:{key[0]}"


def parser_curve(frames) -> list[int]:
    a = frames.allocations
    return [int(a.loc[(a["alloc_us"] <= s) & (a["free_us"] > s), "bytes"].sum()) for s in range(len(frames.ops))]


@pytest.fixture(scope="module")
def ref() -> dict:
    return reference(SEED)


@pytest.fixture(scope="module")
def trace():
    return chainer_graph.parse(SEED)


# --- the seed --------------------------------------------------------------------


def test_counts_and_contract(trace, ref):
    trace.check()
    assert trace.framework == "chainer" and trace.time_unit == "step"
    assert len(trace.ops) == 92 == ref["n"]
    assert sorted(trace.ops["seq"]) == list(range(92))
    assert trace.ops["phase"].value_counts().to_dict() == {"forward": 46, "backward": 46}
    assert trace.ops["uid"].str.startswith("op:").all()
    assert trace.ops["dur_us"].isna().all()
    assert (trace.ops["end_us"] - trace.ops["start_us"] == 1).all()
    # every block is a tensor; gradients appear as their own tensors
    assert len(ref["live"]) == len(trace.tensors)
    assert set(trace.tensors["uid"]) == {uid(k) for k in ref["live"]}
    assert list(trace.devices["uid"]) == ["dev:chainer"]
    assert list(trace.allocators["uid"]) == ["mem:chainer"]


def test_execution_order_follows_rank(trace, ref):
    ops = trace.ops.sort_values("seq")
    expected = [(f["phase"], f["fname"], f["rank"]) for f in ref["order"]]
    got = [(p, t, json.loads(a)["rank"]) for p, t, a in zip(ops["phase"], ops["type"], ops["attrs"])]
    assert got == expected
    assert list(ops["uid"]) == [f"op:{f['k']}" for f in ref["order"]]


def test_gradients_are_their_own_tensors(trace, ref):
    t = trace.tensors.set_index("uid")
    # block 62 is the loss: its gradient seeds backward and has no producer
    assert t.loc["t:62:grad", "bytes"] == ref["size"]["62"]
    assert t.loc["t:62:grad", "name"] == "grad(block 62)"
    assert pd.isna(t.loc["t:62:grad", "producer"])
    assert t.loc["t:5", "param"] == "/predictor/fc6/W" and t.loc["t:5", "name"] == "/predictor/fc6/W"
    assert t.loc["t:5:grad", "name"] == "grad(/predictor/fc6/W)"
    assert t.loc["t:79", "name"] == "input 0" and t.loc["t:80", "name"] == "input 1"
    assert t.loc["t:17", "name"] == "block 17"
    # the last backward conv (rank 0) reads grad(7) and the retained input/W/b, makes their grads
    last = trace.ops.sort_values("seq").iloc[-1]["uid"]
    c = trace.consumes[trace.consumes["op"] == last].sort_values("input_index")
    assert list(c["tensor"]) == ["t:7:grad", "t:79", "t:75", "t:76"]
    assert set(trace.tensors.loc[trace.tensors["producer"] == last, "uid"]) == {"t:79:grad", "t:75:grad", "t:76:grad"}


def test_data_deps_match_tensor_flow(trace):
    prod = dict(zip(trace.tensors["uid"], trace.tensors["producer"]))
    expected = {
        (prod[t], op) for op, t in zip(trace.consumes["op"], trace.consumes["tensor"]) if isinstance(prod[t], str)
    }
    got = set(zip(trace.deps["src"], trace.deps["dst"]))
    assert got == expected and len(got) == len(trace.deps)
    assert set(trace.deps["kind"]) == {"data"}
    seq = dict(zip(trace.ops["uid"], trace.ops["seq"]))
    assert all(seq[s] < seq[d] for s, d in got)


def test_allocations_match_reference_lifetimes(trace, ref):
    a = trace.allocations.set_index("tensor")
    for key, (lo, hi) in ref["live"].items():
        row = a.loc[uid(key)]
        assert (row["alloc_us"], row["free_us"]) == (lo, hi), key
        assert row["bytes"] == ref["size"][key[0]]
    kinds = trace.allocations["kind"].value_counts().to_dict()
    assert kinds == {"output": 93, "param": 38, "gradient": 38, "input": 3}
    assert set(a.loc[a["kind"] == "input"].index) == {"t:79", "t:80", "t:62:grad"}


def test_memory_peak_in_steps(trace, ref):
    assert ref["peak"] == PEAK_BYTES and ref["peak_step"] == PEAK_STEP
    curve = parser_curve(trace)
    assert curve == ref["curve"]
    assert max(curve) == PEAK_BYTES and curve.index(PEAK_BYTES) == PEAK_STEP
    a = trace.allocations
    live = a[(a["alloc_us"] <= PEAK_STEP) & (a["free_us"] > PEAK_STEP)]
    expected = {uid(k) for k, (lo, hi) in ref["live"].items() if lo <= PEAK_STEP < hi}
    assert set(live["tensor"]) == expected
    # The peak step is the backward ReLU of rank 26 (op:56): 70 blocks are live, the
    # largest four (411 MB each) being fc6/W, its gradient and the two retained
    # conv1_1 activations (blocks 82 and 85) that backward has not reached yet.
    op = trace.ops.set_index("seq").loc[PEAK_STEP]
    assert (op["uid"], op["type"], op["phase"], json.loads(op["attrs"])["rank"]) == ("op:56", "ReLU", "backward", 26)
    assert len(live) == 70
    top = live.sort_values("bytes", ascending=False).head(4)
    assert set(top["tensor"]) == {"t:5", "t:5:grad", "t:82", "t:85"} and set(top["bytes"]) == {411_041_792}
    assert {"t:5", "t:5:grad", "t:82", "t:85"} <= expected


# --- sniffing --------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(TRACES.iterdir()), ids=lambda p: p.name)
def test_sniff(path):
    with path.open("rb") as fh:
        head = fh.read(65536)
    assert chainer_graph.sniff(head) == (path == SEED)


# --- bad and unusual input -----------------------------------------------------------


def parse_or_error(path: Path):
    """The frames (checked), or None after checking the InputError names file and line."""
    return bad_input.parse_or_error(chainer_graph.parse, path, or_empty=True)


def error_line(path: Path) -> int:
    with pytest.raises(InputError) as info:
        chainer_graph.parse(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(str(path))
    return int(re.search(r"\(line (\d+)\)", message).group(1))


def seed_lines() -> list[str]:
    return SEED.read_text().split("\n")


def write(tmp_path: Path, lines: list[str], name: str = "variant.txt") -> Path:
    p = tmp_path / name
    p.write_text("\n".join(lines))
    return p


@pytest.mark.parametrize("keep", [1, 2, 40, 87, 90, 92, 93, 400, 805, 806])
def test_truncated_at_line(tmp_path, keep):
    p = write(tmp_path, seed_lines()[:keep])
    assert error_line(p) == keep + 1


@pytest.mark.parametrize("fraction", [0.001, 0.05, 0.3, 0.5, 0.77, 0.999])
def test_truncated_mid_line(tmp_path, fraction):
    data = SEED.read_bytes()
    p = tmp_path / "cut.txt"
    p.write_bytes(data[: int(len(data) * fraction)])
    assert parse_or_error(p) is None


def test_missing_final_newline_is_fine(tmp_path, ref):
    p = tmp_path / "nonl.txt"
    p.write_bytes(SEED.read_bytes().rstrip(b"\n"))
    assert max(parser_curve(parse_or_error(p))) == ref["peak"]


def split_sections(lines: list[str]) -> tuple[str, list[str], list[list[str]]]:
    n_blocks = int(lines[0].split()[0])
    blocks = lines[1 : 1 + n_blocks]
    funcs, cur = [], []
    for line in lines[1 + n_blocks :]:
        if line in ("forward", "backward") and cur:
            funcs.append(cur)
            cur = []
        if line:
            cur.append(line)
    funcs.append(cur)
    return lines[0], blocks, funcs


def test_reordered_blocks_and_functions_give_same_result(tmp_path, ref):
    header, blocks, funcs = split_sections(seed_lines())
    rng = random.Random(3)
    rng.shuffle(blocks)
    rng.shuffle(funcs)
    p = write(tmp_path, [header, *blocks, *[line for f in funcs for line in f]])
    frames = parse_or_error(p)
    assert frames is not None
    assert parser_curve(frames) == ref["curve"]
    got = [(ph, t) for ph, t in zip(frames.ops.sort_values("seq")["phase"], frames.ops.sort_values("seq")["type"])]
    assert got == [(f["phase"], f["fname"]) for f in ref["order"]]


def test_swapped_name_and_attributes_is_an_error(tmp_path):
    lines = seed_lines()
    lines[91], lines[92] = lines[92], lines[91]  # function name <-> JSON of the first function
    assert error_line(write(tmp_path, lines)) == 93


@pytest.mark.parametrize(
    "line_no, old, new, where",
    [
        (1, "86 92", "86 93", 808),  # one function too many: the file ends early
        (1, "86 92", "85 92", 87),  # one block too few: a block line where 'forward' belongs
        (1, "86 92", "86 x2", 1),
        (2, "12845056", "1284x056", 2),
        (2, "12845056", "-12845056", 2),
        (90, "17 _", "999 _", 90),  # unknown block
        (90, "17 _", "17 gradient", 90),  # backward role in a forward function
        (89, "1 1", "1 2", 92),  # an extra output: the function name is read as a block id
        (93, '"rank": 39', '"rank": "39"', 93),
        (93, '"rank": 39', '"rank": 0', 90),  # ReLU before the conv that makes its input
        (2, "0 12845056 _", "17 12845056 _", 19),  # duplicate block id (17 is on line 19)
    ],
)
def test_corrupted_numbers(tmp_path, line_no, old, new, where):
    lines = seed_lines()
    assert old in lines[line_no - 1]
    lines[line_no - 1] = lines[line_no - 1].replace(old, new, 1)
    assert error_line(write(tmp_path, lines)) == where


@pytest.mark.parametrize("content", [b"", b"\n\n  \n", b"86 92\n"])
def test_empty_or_header_only(tmp_path, content):
    p = tmp_path / "empty.txt"
    p.write_bytes(content)
    with pytest.raises(InputError):
        chainer_graph.parse(p)


@pytest.mark.parametrize("seed", range(4))
def test_binary_garbage(tmp_path, seed):
    p = tmp_path / "garbage.bin"
    p.write_bytes(garbage(seed, 2000))
    assert parse_or_error(p) is None


def test_unknown_function_and_extra_attributes_are_kept(tmp_path, ref):
    lines = seed_lines()
    assert lines[91] == "ReLU"
    lines[91] = "MyFancyActivation"
    attrs = json.loads(lines[92])
    attrs["future_field"] = {"nested": [1, 2]}
    lines[92] = json.dumps(attrs)
    frames = parse_or_error(write(tmp_path, lines))
    op = frames.ops.set_index("uid").loc["op:0"]
    assert op["type"] == "MyFancyActivation" and op["name"] == "MyFancyActivation#0"
    assert json.loads(op["attrs"])["future_field"] == {"nested": [1, 2]}
    assert parser_curve(frames) == ref["curve"]


def test_random_mutations_never_crash(tmp_path):
    """Deleted, duplicated, swapped lines and flipped digits: frames or InputError."""
    base = seed_lines()
    rng = random.Random(11)
    outcomes = {"ok": 0, "error": 0}
    for i in range(150):
        lines = mutate(base, rng, EDITS[i % 4])  # delete, duplicate, swap, digit
        frames = parse_or_error(write(tmp_path, lines, f"m{i}.txt"))
        outcomes["ok" if frames is not None else "error"] += 1
    assert outcomes["error"] > 0
