"""Compute reference.json for the XPlane captures beside this script.

Independent of tracegraph: it uses neither tracegraph nor TensorFlow nor
JAX. Not run by the tests. To regenerate, in a throwaway virtual
environment:

    python3 -m venv /work/venvs/xprof && /work/venvs/xprof/bin/pip install xprof
    /work/venvs/xprof/bin/python tests/data/xplane/make_reference.py

(reference.json was made with xprof 2.24.2 and protobuf 7.36.2.)

Two independent readings of each ``*.xplane.pb.gz`` are made and must
agree, or the script fails:

1. The protobuf: decoded with the official protobuf runtime against a
   subset of the published schemas (tsl/profiler/protobuf/xplane.proto,
   package tensorflow.profiler; xla/service/hlo.proto, package xla), built
   at run time below from their field numbers; unknown fields are skipped
   by the runtime. This gives integer picoseconds and is what
   reference.json records.
2. XProf's own converter, ``xprof.convert.raw_to_tool_data.
   xspace_to_tool_data([path], "trace_viewer", {})``, run on a temporary
   copy of the decompressed file: trace-viewer JSON whose ts and dur are
   microseconds with 3 decimals (nanosecond resolution). The same ops are
   selected from it (see OP DEFINITIONS) and their thread, name, type,
   start and duration must equal the protobuf's, to the nanosecond.

OP DEFINITIONS (also in README.md):

- TensorFlow: an op is an event on a line of the ``/host:CPU`` plane whose
  name starts with ``tf_Compute`` and whose event metadata has a non-empty
  display_name D and a name of the form ``<node name>:D``; the op name is
  the part before that last ``:``, the op type is D. (In the trace-viewer
  JSON: the event's name is D and args.long_name is ``<node name>:D``.)
- JAX: an op is an event on a line of the ``/host:CPU`` plane whose name
  starts with ``tf_XLAPjRtCpuClient`` and that carries an ``hlo_op`` stat;
  the op name is that stat's value (always equal to the event metadata's
  name here), the op type is the ``opcode`` of the instruction of that
  name in the HLO module named by the ``hlo_module`` stat, whose HloProto
  is on the ``/host:metadata`` plane. The ``end: <op>`` events that follow
  each op on the same line carry no ``hlo_op`` stat and are not ops.

Times: an event starts at ``line.timestamp_ns * 1000 + event.offset_ps``
picoseconds after the capture start (the saved files are normalised: line
timestamps are a few microseconds, the epoch start is the
``profile_start_time`` stat of the ``Task Environment`` plane) and lasts
``event.duration_ps``. Durations are kept as integer picoseconds; the
``*_us`` numbers are those divided by 10**6 (exact decimals, as every
value here is a whole number of nanoseconds, which is checked).
"""

import collections
import gzip
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

HERE = os.path.dirname(os.path.abspath(__file__))
FILES = {
    "keras_cnn_train.xplane.pb.gz": "tensorflow",
    "tf_while_loop.xplane.pb.gz": "tensorflow",
    "jax_train_step.xplane.pb.gz": "jax",
    "jax_scan.xplane.pb.gz": "jax",
}

# ---------------------------------------------------------------- schemas

_T = descriptor_pb2.FieldDescriptorProto
_TYPES = {
    "int64": _T.TYPE_INT64,
    "uint64": _T.TYPE_UINT64,
    "int32": _T.TYPE_INT32,
    "double": _T.TYPE_DOUBLE,
    "string": _T.TYPE_STRING,
    "bytes": _T.TYPE_BYTES,
}

# (message, [(field name, number, type or message name, repeated, oneof)])
XPLANE_SCHEMA = [
    (
        "XSpace",
        [
            ("planes", 1, ".tensorflow.profiler.XPlane", True, None),
            ("errors", 2, "string", True, None),
            ("warnings", 3, "string", True, None),
            ("hostnames", 4, "string", True, None),
        ],
    ),
    (
        "XPlane",
        [
            ("id", 1, "int64", False, None),
            ("name", 2, "string", False, None),
            ("lines", 3, ".tensorflow.profiler.XLine", True, None),
            ("event_metadata", 4, ".tensorflow.profiler.XPlane.EventMetadataEntry", True, None),
            ("stat_metadata", 5, ".tensorflow.profiler.XPlane.StatMetadataEntry", True, None),
            ("stats", 6, ".tensorflow.profiler.XStat", True, None),
        ],
    ),
    (
        "XLine",
        [
            ("id", 1, "int64", False, None),
            ("display_id", 10, "int64", False, None),
            ("name", 2, "string", False, None),
            ("display_name", 11, "string", False, None),
            ("timestamp_ns", 3, "int64", False, None),
            ("duration_ps", 9, "int64", False, None),
            ("events", 4, ".tensorflow.profiler.XEvent", True, None),
        ],
    ),
    (
        "XEvent",
        [
            ("metadata_id", 1, "int64", False, None),
            ("offset_ps", 2, "int64", False, "data"),
            ("num_occurrences", 5, "int64", False, "data"),
            ("duration_ps", 3, "int64", False, None),
            ("stats", 4, ".tensorflow.profiler.XStat", True, None),
        ],
    ),
    (
        "XStat",
        [
            ("metadata_id", 1, "int64", False, None),
            ("double_value", 2, "double", False, "value"),
            ("uint64_value", 3, "uint64", False, "value"),
            ("int64_value", 4, "int64", False, "value"),
            ("str_value", 5, "string", False, "value"),
            ("bytes_value", 6, "bytes", False, "value"),
            ("ref_value", 7, "uint64", False, "value"),
        ],
    ),
    (
        "XEventMetadata",
        [
            ("id", 1, "int64", False, None),
            ("name", 2, "string", False, None),
            ("display_name", 4, "string", False, None),
            ("metadata", 3, "bytes", False, None),
            ("stats", 5, ".tensorflow.profiler.XStat", True, None),
            ("child_id", 6, "int64", True, None),
        ],
    ),
    (
        "XStatMetadata",
        [
            ("id", 1, "int64", False, None),
            ("name", 2, "string", False, None),
            ("description", 3, "string", False, None),
        ],
    ),
]
XPLANE_MAPS = {  # XPlane map fields: entry name -> value message
    "EventMetadataEntry": ".tensorflow.profiler.XEventMetadata",
    "StatMetadataEntry": ".tensorflow.profiler.XStatMetadata",
}
HLO_SCHEMA = [
    ("HloProto", [("hlo_module", 1, ".xla.HloModuleProto", False, None)]),
    (
        "HloModuleProto",
        [
            ("name", 1, "string", False, None),
            ("entry_computation_name", 2, "string", False, None),
            ("computations", 3, ".xla.HloComputationProto", True, None),
            ("id", 5, "int64", False, None),
            ("entry_computation_id", 6, "int64", False, None),
        ],
    ),
    (
        "HloComputationProto",
        [
            ("name", 1, "string", False, None),
            ("instructions", 2, ".xla.HloInstructionProto", True, None),
            ("id", 5, "int64", False, None),
            ("root_id", 6, "int64", False, None),
        ],
    ),
    (
        "HloInstructionProto",
        [
            ("name", 1, "string", False, None),
            ("opcode", 2, "string", False, None),
            ("fusion_kind", 11, "string", False, None),
            ("id", 35, "int64", False, None),
            ("operand_ids", 36, "int64", True, None),
            ("control_predecessor_ids", 37, "int64", True, None),
            ("called_computation_ids", 38, "int64", True, None),
        ],
    ),
]


def _add_fields(msg, fields):
    oneofs = []
    for name, number, typ, repeated, oneof in fields:
        f = msg.field.add(name=name, number=number)
        f.label = _T.LABEL_REPEATED if repeated else _T.LABEL_OPTIONAL
        if typ in _TYPES:
            f.type = _TYPES[typ]
        else:
            f.type = _T.TYPE_MESSAGE
            f.type_name = typ
        if oneof:
            if oneof not in oneofs:
                oneofs.append(oneof)
                msg.oneof_decl.add(name=oneof)
            f.oneof_index = oneofs.index(oneof)


def _build(pool, filename, package, schema, maps=None):
    fd = descriptor_pb2.FileDescriptorProto(name=filename, package=package, syntax="proto3")
    for msg_name, fields in schema:
        msg = fd.message_type.add(name=msg_name)
        _add_fields(msg, fields)
        if msg_name == "XPlane":
            for entry, value in (maps or {}).items():
                e = msg.nested_type.add(name=entry)
                e.options.map_entry = True
                _add_fields(e, [("key", 1, "int64", False, None), ("value", 2, value, False, None)])
    pool.Add(fd)


_POOL = descriptor_pool.DescriptorPool()
_build(_POOL, "reference_xplane.proto", "tensorflow.profiler", XPLANE_SCHEMA, XPLANE_MAPS)
_build(_POOL, "reference_hlo.proto", "xla", HLO_SCHEMA)
XSpace = message_factory.GetMessageClass(_POOL.FindMessageTypeByName("tensorflow.profiler.XSpace"))
HloProto = message_factory.GetMessageClass(_POOL.FindMessageTypeByName("xla.HloProto"))

# ---------------------------------------------------------------- helpers


def us(ps):
    """Picoseconds (int) -> microseconds (float, exact to the ps)."""
    return round(ps / 1e6, 6)


def stat_value(plane, stat):
    kind = stat.WhichOneof("value")
    if kind is None:
        return None
    value = getattr(stat, kind)
    if kind == "ref_value":
        return plane.stat_metadata[value].name
    if kind == "bytes_value":
        return f"<{len(value)} bytes>"
    return value


def stats_dict(plane, stats):
    """Stat name -> value; a name repeated on one event keeps a list."""
    out = {}
    for s in stats:
        name = plane.stat_metadata[s.metadata_id].name
        value = stat_value(plane, s)
        if name in out:
            prev = out[name]
            out[name] = (prev if isinstance(prev, list) else [prev]) + [value]
        else:
            out[name] = value
    return out


def check_ns(ps, what):
    if ps % 1000:
        raise SystemExit(f"{what} is not a whole number of ns: {ps} ps")


TF_OP = re.compile(r"^(.+):([^:]+)$")


def select_ops(space, framework):
    """Ops per the definitions in the docstring, from the protobuf."""
    ops = []
    for plane in space.planes:
        if plane.name != "/host:CPU":
            continue
        for line in plane.lines:
            prefix = "tf_Compute" if framework == "tensorflow" else "tf_XLAPjRtCpuClient"
            if not line.name.startswith(prefix):
                continue
            base = line.timestamp_ns * 1000
            for ev in line.events:
                md = plane.event_metadata[ev.metadata_id]
                if framework == "tensorflow":
                    m = TF_OP.match(md.name)
                    if not (md.display_name and m and m.group(2) == md.display_name):
                        continue
                    name, typ, module = m.group(1), md.display_name, None
                else:
                    st = stats_dict(plane, ev.stats)
                    if "hlo_op" not in st:
                        continue
                    name, typ, module = st["hlo_op"], None, st["hlo_module"]
                    if name != md.name:
                        raise SystemExit(f"hlo_op {name!r} != event name {md.name!r}")
                start = base + ev.offset_ps
                check_ns(start, "op start")
                check_ns(ev.duration_ps, "op duration")
                ops.append(
                    {
                        "line": line.name,
                        "name": name,
                        "type": typ,
                        "module": module,
                        "start_ps": start,
                        "duration_ps": ev.duration_ps,
                        "event_name": md.name,
                    }
                )
    return ops


def name_type_events_elsewhere(space):
    """TF-op-shaped events (name ``x:D``, display_name D) not on tf_Compute."""
    found = collections.Counter()
    for plane in space.planes:
        for line in plane.lines:
            if plane.name == "/host:CPU" and line.name.startswith("tf_Compute"):
                continue
            for ev in line.events:
                md = plane.event_metadata[ev.metadata_id]
                m = TF_OP.match(md.name)
                if md.display_name and m and m.group(2) == md.display_name:
                    found[f"{plane.name} | {line.name}"] += 1
    return dict(sorted(found.items()))


def hlo_modules(space):
    """HloProtos on /host:metadata: module name -> summary and opcodes."""
    modules = {}
    for plane in space.planes:
        if plane.name != "/host:metadata":
            continue
        for md in plane.event_metadata.values():
            st = {plane.stat_metadata[s.metadata_id].name: s for s in md.stats}
            if "Hlo Proto" not in st:
                continue
            hp = HloProto()
            hp.ParseFromString(st["Hlo Proto"].bytes_value)
            mod = hp.hlo_module
            instr = {}
            n_operands = 0
            for comp in mod.computations:
                for i in comp.instructions:
                    if i.name in instr:
                        raise SystemExit(f"duplicate HLO name {i.name!r}")
                    instr[i.name] = {"opcode": i.opcode, "computation": comp.name, "operands": len(i.operand_ids)}
                    n_operands += len(i.operand_ids)
            modules[mod.name] = {
                "event_metadata_name": md.name,
                "program_id": st["program_id"].uint64_value if "program_id" in st else None,
                "hlo_proto_bytes": len(st["Hlo Proto"].bytes_value),
                "module_id": mod.id,
                "entry_computation_name": mod.entry_computation_name,
                "computations": len(mod.computations),
                "instructions": len(instr),
                "operand_edges": n_operands,
                "_instr": instr,
            }
    return modules


def nesting(ops):
    """Per op, the innermost op on the same line whose interval holds it."""
    by_line = collections.defaultdict(list)
    for op in ops:
        by_line[op["line"]].append(op)
    partial = 0
    for line_ops in by_line.values():
        line_ops.sort(key=lambda o: (o["start_ps"], -o["duration_ps"]))
        stack = []
        for op in line_ops:
            end = op["start_ps"] + op["duration_ps"]
            while stack and stack[-1]["start_ps"] + stack[-1]["duration_ps"] <= op["start_ps"]:
                stack.pop()
            if stack:
                parent = stack[-1]
                if end > parent["start_ps"] + parent["duration_ps"]:
                    partial += 1
                op["parent"] = parent["name"]
            else:
                op["parent"] = None
            stack.append(op)
    return partial


def cross_line_overlaps(ops):
    """Pairs of ops on different lines whose intervals intersect."""
    n = 0
    srt = sorted(ops, key=lambda o: o["start_ps"])
    for i, a in enumerate(srt):
        a_end = a["start_ps"] + a["duration_ps"]
        for b in srt[i + 1 :]:
            if b["start_ps"] >= a_end:
                break
            if b["line"] != a["line"]:
                n += 1
    return n


# ---------------------------------------------------------------- structure


def describe(space):
    planes = []
    env = {}
    for plane in space.planes:
        if plane.name == "Task Environment":
            env = stats_dict(plane, plane.stats)
        lines = []
        for line in plane.lines:
            lines.append(
                {
                    "id": line.id,
                    "display_id": line.display_id,
                    "name": line.name,
                    "display_name": line.display_name,
                    "timestamp_ns": line.timestamp_ns,
                    "duration_ps": line.duration_ps,
                    "events": len(line.events),
                    "events_with_num_occurrences": sum(
                        1 for e in line.events if e.WhichOneof("data") == "num_occurrences"
                    ),
                }
            )
        planes.append(
            {
                "id": plane.id,
                "name": plane.name,
                "stats": {k: v for k, v in stats_dict(plane, plane.stats).items()},
                "event_metadata": len(plane.event_metadata),
                "event_metadata_with_metadata_bytes": sum(1 for m in plane.event_metadata.values() if m.metadata),
                "event_metadata_with_stats": sum(1 for m in plane.event_metadata.values() if m.stats),
                "event_metadata_with_child_id": sum(1 for m in plane.event_metadata.values() if m.child_id),
                "stat_metadata_names": sorted(m.name for m in plane.stat_metadata.values()),
                "lines": lines,
            }
        )
    return planes, env


def events_span(space):
    lo, hi = None, None
    for plane in space.planes:
        for line in plane.lines:
            for ev in line.events:
                s = line.timestamp_ns * 1000 + ev.offset_ps
                e = s + ev.duration_ps
                lo = s if lo is None else min(lo, s)
                hi = e if hi is None else max(hi, e)
    return lo, hi


def step_markers(space):
    steps = []
    for plane in space.planes:
        for line in plane.lines:
            for ev in line.events:
                st = stats_dict(plane, ev.stats)
                if "step_num" in st:
                    md = plane.event_metadata[ev.metadata_id]
                    steps.append(
                        {
                            "plane": plane.name,
                            "line": line.name,
                            "event_name": md.name,
                            "stats": st,
                            "start_ps": line.timestamp_ns * 1000 + ev.offset_ps,
                            "duration_ps": ev.duration_ps,
                            "duration_us": us(ev.duration_ps),
                        }
                    )
    return sorted(steps, key=lambda s: s["start_ps"])


# ---------------------------------------------------------------- xprof side


def xprof_ops(raw, framework):
    from xprof.convert import raw_to_tool_data

    tmp = tempfile.mkdtemp(prefix="xplane_ref_")
    try:
        path = os.path.join(tmp, "host.xplane.pb")
        with open(path, "wb") as f:
            f.write(raw)
        out = raw_to_tool_data.xspace_to_tool_data([path], "trace_viewer", {})
        data = out[0] if isinstance(out, tuple) else out
        if isinstance(data, bytes):
            data = data.decode()
        trace = json.loads(data)
    finally:
        shutil.rmtree(tmp)
    procs, threads = {}, {}
    for e in trace["traceEvents"]:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            procs[e["pid"]] = e["args"]["name"]
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            threads[(e["pid"], e["tid"])] = e["args"]["name"]
    ops = []
    prefix = "tf_Compute" if framework == "tensorflow" else "tf_XLAPjRtCpuClient"
    for e in trace["traceEvents"]:
        if e.get("ph") != "X" or procs.get(e["pid"]) != "/host:CPU":
            continue
        thread = threads.get((e["pid"], e["tid"]), "")
        if not thread.startswith(prefix):
            continue
        args = e.get("args", {})
        if framework == "tensorflow":
            m = TF_OP.match(args.get("long_name", ""))
            if not (m and m.group(2) == e["name"]):
                continue
            name, typ = m.group(1), e["name"]
        else:
            if "hlo_op" not in args:
                continue
            name, typ = args["hlo_op"], None
        ops.append((thread, name, typ, round(e["ts"] * 1000), round(e["dur"] * 1000)))
    return sorted(ops)


# ---------------------------------------------------------------- main


def summarize(fname, framework):
    with open(os.path.join(HERE, fname), "rb") as f:
        gz = f.read()
    raw = gzip.decompress(gz)
    space = XSpace()
    space.ParseFromString(raw)
    planes, env = describe(space)
    ops = select_ops(space, framework)
    modules = hlo_modules(space) if framework == "jax" else {}
    for op in ops:
        if framework == "jax":
            instr = modules[op["module"]]["_instr"].get(op["name"])
            if instr is None:
                raise SystemExit("hlo_op {!r} not in module {!r}".format(op["name"], op["module"]))
            op["type"] = instr["opcode"]
            op["computation"] = instr["computation"]
    partial = nesting(ops)

    # cross-check against xprof's trace_viewer conversion
    mine = sorted(
        (
            o["line"],
            o["name"],
            o["type"] if framework == "tensorflow" else None,
            o["start_ps"] // 1000,
            o["duration_ps"] // 1000,
        )
        for o in ops
    )
    theirs = xprof_ops(raw, framework)
    if mine != theirs:
        raise SystemExit(
            f"{fname}: protobuf and xprof disagree:\n{sorted(set(mine) - set(theirs))[:5]!r}\n{sorted(set(theirs) - set(mine))[:5]!r}"
        )

    by_type = collections.defaultdict(lambda: [0, 0])
    by_name = {}
    by_line = collections.Counter()
    for op in ops:
        by_type[op["type"]][0] += 1
        by_type[op["type"]][1] += op["duration_ps"]
        by_line[op["line"]] += 1
        entry = by_name.setdefault(op["name"], {"type": op["type"], "count": 0, "duration_ps": 0})
        if framework == "jax":
            entry["module"] = op["module"]
            entry["computation"] = op["computation"]
        entry["count"] += 1
        entry["duration_ps"] += op["duration_ps"]
        if op["parent"] is not None:
            nested = entry.setdefault("nested_in", {})
            nested[op["parent"]] = nested.get(op["parent"], 0) + 1
    for entry in by_name.values():
        entry["duration_us"] = us(entry["duration_ps"])
    total_ps = sum(o["duration_ps"] for o in ops)
    first = min(o["start_ps"] for o in ops)
    last = max(o["start_ps"] + o["duration_ps"] for o in ops)
    ev_lo, ev_hi = events_span(space)
    steps = step_markers(space)
    for step in steps:  # ops lying wholly inside the step's interval
        a, b = step["start_ps"], step["start_ps"] + step["duration_ps"]
        step["ops_within"] = sum(1 for o in ops if a <= o["start_ps"] and o["start_ps"] + o["duration_ps"] <= b)
    start_ns = env.get("profile_start_time")
    stop_ns = env.get("profile_stop_time")

    result = {
        "framework": framework,
        "gz_bytes": len(gz),
        "gz_sha256": hashlib.sha256(gz).hexdigest(),
        "xplane_bytes": len(raw),
        "hostnames": list(space.hostnames),
        "capture": {
            "profile_start_time_ns": start_ns,
            "profile_stop_time_ns": stop_ns,
            "span_ps": (stop_ns - start_ns) * 1000,
            "span_us": us((stop_ns - start_ns) * 1000),
            "events_first_start_ps": ev_lo,
            "events_last_end_ps": ev_hi,
            "events_span_ps": ev_hi - ev_lo,
        },
        "ops": {
            "count": len(ops),
            "lines": dict(sorted(by_line.items())),
            "total_duration_ps": total_ps,
            "total_duration_us": us(total_ps),
            "first_start_ps": first,
            "last_end_ps": last,
            "span_ps": last - first,
            "nested_in_another_op": sum(1 for o in ops if o["parent"]),
            "partial_overlaps_same_line": partial,
            "overlapping_pairs_across_lines": cross_line_overlaps(ops),
            "by_type": {
                t: {"count": c, "duration_ps": d, "duration_us": us(d)} for t, (c, d) in sorted(by_type.items())
            },
            "by_name": dict(sorted(by_name.items())),
        },
        "steps": steps,
        "planes": planes,
    }
    if framework == "tensorflow":
        result["ops"]["name_type_events_on_other_lines"] = name_type_events_elsewhere(space)
    else:
        result["hlo_modules"] = {
            k: {kk: vv for kk, vv in v.items() if not kk.startswith("_")} for k, v in sorted(modules.items())
        }
    return result


def main():
    from importlib import metadata

    import google.protobuf

    out = {
        "about": (
            "Reference numbers for the XPlane captures in this folder, made "
            "by make_reference.py from the protobuf (integer ps) and "
            "cross-checked against xprof's trace_viewer conversion to the "
            "ns. See README.md for the definitions."
        ),
        "made_with": {"xprof": metadata.version("xprof"), "protobuf": google.protobuf.__version__},
        "definitions": {
            "time": "event start_ps = line.timestamp_ns*1000 + "
            "event.offset_ps, relative to the capture start "
            "(Task Environment plane's profile_start_time, epoch "
            "ns); duration_ps = event.duration_ps; *_us = ps/1e6",
            "capture.span_ps": "(profile_stop_time - profile_start_time) * 1000",
            "capture.events_span_ps": "last end - first start over every event of every line of every plane",
            "tensorflow_op": "event on a '/host:CPU' line whose name "
            "starts with 'tf_Compute', whose event metadata "
            "has display_name D != '' and name "
            "'<op name>:D'; type = D",
            "jax_op": "event on a '/host:CPU' line whose name starts with "
            "'tf_XLAPjRtCpuClient' carrying an 'hlo_op' stat; "
            "name = hlo_op (= event metadata name); type = opcode "
            "of the HLO instruction of that name in the HloProto "
            "of the module named by the 'hlo_module' stat "
            "('/host:metadata' plane)",
            "ops.total_duration_ps": "sum of op durations; nested ops "
            "(JAX while body inside the while op) "
            "are counted in both",
            "ops.by_name[].nested_in": "for ops lying inside another op on "
            "the same line: that innermost op's "
            "name -> count",
            "steps": "events anywhere carrying a 'step_num' stat; "
            "ops_within = ops whose interval lies inside the "
            "step event's",
        },
        "files": {},
    }
    for fname, framework in FILES.items():
        out["files"][fname] = summarize(fname, framework)
        o = out["files"][fname]["ops"]
        print(
            f"{fname}: {o['count']} ops, {len(o['by_type'])} types,"
            f" {len(o['by_name'])} names, {o['total_duration_ps']} ps total"
        )
    with open(os.path.join(HERE, "reference.json"), "w") as f:
        json.dump(out, f, indent=1, sort_keys=False)
        f.write("\n")
    print("wrote reference.json")


if __name__ == "__main__":
    sys.exit(main())
