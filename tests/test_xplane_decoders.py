"""The protobuf decoders that ingest/formats/xplane/decoders.py writes from
the field table (ingest/formats/xplane/schema.py), against the protobuf
runtime over tests/data/xplane/make_reference.py's own declaration of the
same messages: the real captures field by field (the table's numbers
checked against the reference's), then protobuf's decoding rules on
hand-built messages (packed or not, merging, oneofs, unknown fields, maps)
and where an error says a message broke.
"""

from __future__ import annotations

import gzip

import pytest
from test_format_xplane import CAPTURES, REF, XPLANE, _field, _varint

from tracegraph.ingest.formats.xplane.decoders import messages
from tracegraph.ingest.formats.xplane.hlo import Module
from tracegraph.ingest.formats.xplane.messages import HloModuleProto, HloProto, XSpace, read_hlo_proto, read_space
from tracegraph.ingest.formats.xplane.wire import Malformed

MESSAGES = messages(XSpace, HloProto)


def _same(ours, theirs, message: str) -> int:
    """Assert that our decoding of ``message`` equals the runtime's in every
    field both declare (with the same number); the number of fields compared."""
    declared = theirs.DESCRIPTOR.fields_by_name
    compared = 0
    for number, f in MESSAGES[message].fields.items():
        if f.name not in declared:  # a field the reference does not read
            continue
        assert declared[f.name].number == number, (message, f.name)
        mine, ref = getattr(ours, f.attribute), getattr(theirs, f.name)
        compared += 1
        if f.oneof:
            if theirs.WhichOneof(f.oneof) == f.name:
                assert (getattr(ours, f"{f.oneof}_field"), mine) == (number, ref), (message, f.name)
        elif f.key:
            assert sorted(mine) == sorted(ref), (message, f.name)
            compared += sum(_same(mine[k], ref[k], f.message) for k in ref)
        elif f.message and f.repeated:
            assert len(mine) == len(ref), (message, f.name)
            compared += sum(_same(a, b, f.message) for a, b in zip(mine, ref))
        elif f.message:
            assert (mine is not None) == theirs.HasField(f.name), (message, f.name)
            if mine is not None:
                compared += _same(mine, ref, f.message)
        else:
            assert (list(mine) if f.repeated else mine) == (list(ref) if f.repeated else ref), (message, f.name)
    return compared


def _hlo_protos(space) -> list[bytes]:
    """The ``Hlo Proto`` stats of the runtime-decoded capture's metadata plane."""
    out = []
    for plane in space.planes:
        names = {k: m.name for k, m in plane.stat_metadata.items()}
        for md in plane.event_metadata.values():
            out += [s.bytes_value for s in md.stats if names.get(s.metadata_id) == "Hlo Proto"]
    return out


@pytest.mark.parametrize("name", CAPTURES)
def test_captures_decode_as_the_runtime_decodes_them(name):
    data = gzip.decompress((XPLANE / name).read_bytes())
    theirs = REF.XSpace()
    theirs.ParseFromString(data)
    assert _same(read_space(data), theirs, "XSpace") > 1000
    for proto in _hlo_protos(theirs):
        ref = REF.HloProto()
        ref.ParseFromString(proto)
        module = read_hlo_proto(proto)
        assert _same(module, ref.hlo_module, "HloModuleProto") > 100
        keyed = Module.of(module)
        assert len(keyed.instructions) == sum(len(c.instructions) for c in ref.hlo_module.computations)


def _instruction(*fields: bytes) -> bytes:
    """An HloProto holding one computation (id 1) with one instruction made of ``fields``."""
    computation = _field(5, 1) + _field(2, b"".join(fields))
    return _field(1, _field(1, "m") + _field(3, computation))


def test_repeated_numbers_packed_or_not():
    packed = _instruction(_field(35, 7), _field(36, _varint(3) + _varint(1 << 40) + _varint(-2)))
    one_by_one = _instruction(_field(35, 7), _field(36, 3), _field(36, 1 << 40), _field(36, -2))
    mixed = _instruction(_field(35, 7), _field(36, 3), _field(36, _varint(1 << 40) + _varint(-2)))
    for data in (packed, one_by_one, mixed):
        ins = Module.of(read_hlo_proto(data)).instructions[(1, 7)]
        assert ins.operand_ids == [3, 1 << 40, -2] and ins.control_predecessor_ids == []


def test_a_singular_message_given_twice_is_merged():
    first = REF.HloProto()
    first.hlo_module.name = "first"
    first.hlo_module.computations.add(name="a", id=1, root_id=3)
    second = REF.HloProto()
    second.hlo_module.computations.add(name="b", id=2)
    data = first.SerializeToString() + second.SerializeToString()
    theirs = REF.HloProto()
    theirs.ParseFromString(data)
    module = read_hlo_proto(data)
    _same(module, theirs.hlo_module, "HloModuleProto")
    # worked out: the earlier name (the later module leaves it unset), both computations
    assert (module.name, [(c.name, c.root_id) for c in module.computations]) == ("first", [("a", 3), ("b", 0)])
    # OpMetadata (which the reference does not declare): op_type from the first, op_name from the second
    module = read_hlo_proto(
        _instruction(_field(35, 1), _field(7, _field(1, "dot")), _field(7, _field(2, "jit(f)/dot")))
    )
    ins = module.computations[0].instructions[0]
    assert (ins.op_type, ins.op_name) == ("dot", "jit(f)/dot")


def _plane_with_line(*events: bytes) -> bytes:
    line = _field(1, 3) + b"".join(_field(4, e) for e in events)
    return _field(1, _field(2, "/host:CPU") + _field(3, line))


def test_oneofs_keep_the_member_given_last():
    stat_int_then_text = _field(1, 1) + _field(4, -5) + _field(5, "x")
    stat_text_then_ref = _field(1, 1) + _field(5, "x") + _field(7, 9)
    timed_after_aggregated = _field(1, 1) + _field(5, 3) + _field(2, 40)
    aggregated_after_timed = _field(1, 1) + _field(2, 40) + _field(5, 3)
    data = _plane_with_line(
        _field(4, stat_int_then_text) + _field(4, stat_text_then_ref),
        timed_after_aggregated,
        aggregated_after_timed,
    )
    theirs = REF.XSpace()
    theirs.ParseFromString(data)
    ours = read_space(data)
    _same(ours, theirs, "XSpace")
    events = ours.planes[0].lines[0].events
    assert [(s.value, s.ref) for s in events[0].stats] == [("x", False), (9, True)]
    assert [(e.aggregated, e.offset_ps) for e in events] == [(False, 0), (False, 40), (True, 0)]


def test_unknown_fields_of_every_wire_type_are_skipped():
    unknown = _field(20, 1 << 50) + _field(21, 2.5) + _field(22, b"\xff" * 300) + _varint(23 << 3 | 5) + b"abcd"
    plain = _plane_with_line(_field(1, 2) + _field(2, 1000) + _field(3, 5))
    noisy = _plane_with_line(unknown + _field(1, 2) + unknown + _field(2, 1000) + _field(3, 5) + unknown)
    assert read_space(noisy) == read_space(plain)
    assert read_space(noisy).planes[0].lines[0].events[0].duration_ps == 5


def test_a_map_entry_without_a_value_is_the_empty_message():
    data = _field(1, _field(2, "/host:CPU") + _field(4, _field(1, 12)) + _field(5, _field(2, _field(2, "x"))))
    theirs = REF.XSpace()
    theirs.ParseFromString(data)
    ours = read_space(data)
    _same(ours, theirs, "XSpace")
    plane = ours.planes[0]
    assert (plane.event_metadata[12].name, plane.stat_metadata[0].name) == ("", "x")


# Byte offsets worked out from the encodings: the plane's name field takes
# bytes 2-12, its line starts at 15.
@pytest.mark.parametrize(
    "data, what, path, offset",
    [
        # a double given as a varint (a wrong type has no byte of its own)
        (
            _plane_with_line(_field(4, _field(2, 7))),
            "XStat.double_value (field 2) is varint, not 64-bit",
            ["planes[0]", "lines[0]", "events[0]", "stats[0]"],
            None,
        ),
        # text that is not UTF-8 (the payload at byte 25), in the second event's first stat
        (
            _plane_with_line(b"", _field(4, _field(5, b"\xff"))),
            "XStat.str_value is not UTF-8 text",
            ["planes[0]", "lines[0]", "events[1]", "stats[0]"],
            25,
        ),
        # the second plane's length (its tag at byte 13) runs past the end: the error is that plane's
        (
            _field(1, _field(2, "/host:CPU")) + _varint(1 << 3 | 2) + _varint(50) + b"x",
            "truncated: field 1 is 50 bytes long but its message has 1 left",
            ["planes[1]"],
            13,
        ),
        # a packed list cut inside a number (which starts at byte 14)
        (
            _instruction(_field(36, b"\x80")),
            "truncated: the message ends inside a number",
            ["hlo_module", "computations[0]", "instructions[0]"],
            14,
        ),
    ],
)
def test_errors_say_what_and_where(data, what, path, offset):
    read = read_hlo_proto if path[0] == "hlo_module" else read_space
    with pytest.raises(Malformed) as exc:
        read(data)
    assert (exc.value.what, exc.value.path, exc.value.offset) == (what, path, offset)


def test_an_empty_buffer_is_the_empty_message():
    assert read_space(b"") == XSpace()
    assert read_hlo_proto(b"") == HloModuleProto()
