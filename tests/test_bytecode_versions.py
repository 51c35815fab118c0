"""Version gating and NVIDIA's reader/writer diagnostics (fixtures from NVIDIA's test/Bytecode)."""

import struct

import pytest

from bytecode_helpers import BYTECODE_TESTS, CORPUS_FILES
from tilegen.runtime import types as ty
from tilegen.runtime.attributes import (
    DenseElementsAttr,
    EnumAttr,
    IntegerAttr,
    StringAttr,
    UnitAttr,
)
from tilegen.runtime.bytecode import (
    BytecodeError,
    BytecodeWriteError,
    read_bytecode,
    write_bytecode,
)
from tilegen.runtime.bytecode.reader import decode_dense
from tilegen.runtime.bytecode.writer import encode_dense
from tilegen.runtime.ir import Operation

INPUTS = BYTECODE_TESTS / "versioning" / "Inputs" / "13.1"
INVALID = BYTECODE_TESTS / "invalid"
pytestmark = pytest.mark.skipif(not BYTECODE_TESTS.exists(), reason="NVIDIA fixtures not available")


def _read(path):
    return read_bytecode(path.read_bytes(), str(path))


def _error(data: bytes) -> list[str]:
    with pytest.raises(BytecodeError) as e:
        read_bytecode(data, "t")
    return e.value.messages


@pytest.mark.parametrize(
    "name,message",
    [
        ("invalid_magic_number.tileirbc", "invalid magic number"),
        (
            "unsupported_version.tileirbc",
            "unsupported Tile version 18.0.0, this reader supports versions",
        ),
        ("invalid_section_id.tileirbc", "unknown section ID: 127"),
        ("excessive_section_length.tileirbc", "end section is not the last section"),
        ("invalid_dense_map_value.bc", "array contains unsupported value -2147483648"),
        ("invalid_attribute_name.bc", "invalid empty attribute name for DictionaryAttr element 0"),
    ],
)
def test_invalid_fixtures_rejected_with_nvidia_message(name, message):
    messages = _error((INVALID / name).read_bytes())
    assert message in messages[0]


def test_new_type_in_old_file_is_rejected():
    messages = _error((INPUTS / "f4e2m1fn-in-13.1.tileirbc").read_bytes())
    assert (
        "type 'Float4E2M1FN' requires bytecode version 13.3+, file version is 13.1" in messages[0]
    )


def _negi_module():
    return _read(INPUTS / "negi-op-13.1.tileirbc")


def test_attribute_missing_from_old_file_gets_its_default():
    negis = [op for op in _negi_module().walk() if op.name == "cuda_tile.negi"]
    assert len(negis) == 2
    assert all(op.attributes["overflow"] == EnumAttr("IntegerOverflow", 0) for op in negis)


def test_newer_attribute_with_non_default_value_is_refused():
    m = _negi_module()
    negi = next(op for op in m.walk() if op.name == "cuda_tile.negi")
    negi.set_attr("overflow", EnumAttr("IntegerOverflow", 1))
    with pytest.raises(
        BytecodeWriteError,
        match=r"attribute 'overflow' requires bytecode version 13\.2\+, but targeting 13\.1",
    ):
        write_bytecode(m, "13.1")
    again = read_bytecode(write_bytecode(m, "13.2"))
    kinds = [op.attributes["overflow"].value for op in again.walk() if op.name == "cuda_tile.negi"]
    assert kinds == [1, 0]


def test_default_attribute_is_omitted_in_old_versions():
    m = _negi_module()
    old, new = write_bytecode(m, "13.1"), write_bytecode(m, "13.2")
    # negi = opcode 0x50, result type#2, [overflow enum 13.2+], operand val#0
    assert b"\x50\x02\x00\x00" in new and b"\x50\x02\x00\x00" not in old
    assert (
        old == (INPUTS / "negi-op-13.1.tileirbc").read_bytes()
    )  # byte-identical to NVIDIA's writer


def test_print_tko_token_is_synthesized_for_13_1_and_not_numbered():
    m = _read(INPUTS / "print-op-13.1.tileirbc")
    prints = [op for op in m.walk() if op.name == "cuda_tile.print_tko"]
    assert len(prints) == 1 and prints[0].results[0].type == ty.TOKEN
    mmaf = next(op for op in m.walk() if op.name == "cuda_tile.mmaf")
    assert all(isinstance(v.type, ty.TileType) for v in mmaf.operands)
    assert write_bytecode(m, "13.1") == (INPUTS / "print-op-13.1.tileirbc").read_bytes()


def test_used_newer_result_is_refused():
    m = _read(INPUTS / "print-op-13.1.tileirbc")
    pr = next(op for op in m.walk() if op.name == "cuda_tile.print_tko")
    join = Operation("cuda_tile.join_tokens", [pr.results[0], pr.results[0]], [ty.TOKEN])
    pr.parent.insert(pr.parent.ops.index(pr) + 1, join)
    with pytest.raises(
        BytecodeWriteError,
        match=r"result 'result_token' requires bytecode version 13\.2 but is being used and targeting 13\.1\. Cannot serialize",
    ):
        write_bytecode(m, "13.1")


def test_op_newer_than_target_is_refused():
    newer = [p for p in CORPUS_FILES if p.endswith("newer_ops.tileirbc")]
    if not newer:
        pytest.skip("newer_ops kernel not in corpus")
    m = read_bytecode(open(newer[0], "rb").read())
    with pytest.raises(
        BytecodeWriteError,
        match=r"operation 'cuda_tile\.\w+' is not available in bytecode version 13\.3",
    ):
        write_bytecode(m, "13.3")


def test_opcode_beyond_version_ceiling_and_holes():
    data = bytearray((INPUTS / "negi-op-13.1.tileirbc").read_bytes())
    assert data[0x19] == 0x50  # the first negi (bytecode.md worked example)
    data[0x19] = 0x6E  # atan2, a 13.2 op
    assert "unsupported opcode 110 for bytecode version 13.1" in _error(bytes(data))[0]
    data[0x19] = 0x19  # a hole in the opcode space
    assert "unknown or unimplemented opcode: 25" in _error(bytes(data))[0]


def test_header_version_and_tag_checks():
    data = bytearray((INPUTS / "negi-op-13.1.tileirbc").read_bytes())
    data[9] = 6
    assert (
        "unsupported Tile version 13.6.0, this reader supports versions [13.1 - 13.5]"
        in _error(bytes(data))[0]
    )
    data[9] = 1
    data[10:12] = struct.pack("<H", 3)
    assert "header has unrecognized version tag bits (0x2);" in _error(bytes(data))[0]


def test_writer_rejects_unknown_version():
    with pytest.raises(
        BytecodeWriteError,
        match=r"unsupported version requested 12\.0, must be in range \[13\.1, 13\.4\]",
    ):
        write_bytecode(_negi_module(), "12.0")


def _module_with_global(**attrs):
    m = _negi_module()
    value = DenseElementsAttr(ty.TileType((2,), ty.F32), (1.0, 2.0))
    g = Operation(
        "cuda_tile.global",
        attributes={
            "sym_name": StringAttr("g"),
            "value": value,
            "alignment": IntegerAttr(0, ty.I64),
            **attrs,
        },
    )
    m.regions[0].blocks[0].insert(0, g)
    return m


def test_global_fields_are_version_gated():
    with pytest.raises(
        BytecodeWriteError,
        match=r"constant global `g` cannot be encoded in bytecode version 13\.1 \(the `constant` attribute requires bytecode 13\.3\+\)",
    ):
        write_bytecode(_module_with_global(constant=UnitAttr()), "13.1")
    private = {"symbol_visibility": EnumAttr("SymbolVisibility", 1)}
    with pytest.raises(
        BytecodeWriteError,
        match=r"global `g` uses non-public symbol visibility, which cannot be encoded in bytecode version 13\.2",
    ):
        write_bytecode(_module_with_global(**private), "13.2")
    back = read_bytecode(
        write_bytecode(_module_with_global(constant=UnitAttr(), **private), "13.3")
    )
    g = next(op for op in back.walk() if op.name == "cuda_tile.global")
    assert "constant" in g.attributes and g.attributes["symbol_visibility"].value == 1
    assert g.attributes["value"].values == (1.0, 2.0)


def test_producer_section_only_from_13_3():
    m = _negi_module()
    m.set_attr("producer", StringAttr("tilegen test"))
    assert read_bytecode(write_bytecode(m, "13.3")).attributes["producer"] == StringAttr(
        "tilegen test"
    )
    assert "producer" not in read_bytecode(write_bytecode(m, "13.2")).attributes


def test_newer_element_type_is_refused_by_writer():
    m = _negi_module()
    const = next(op for op in m.walk() if op.name == "cuda_tile.constant")
    const.results[0].type = ty.TileType((2,), ty.FloatType("f8E8M0FNU"))
    with pytest.raises(
        BytecodeWriteError,
        match=r"type 'Float8E8M0FNU' requires bytecode version 13\.2\+, targeting 13\.1",
    ):
        write_bytecode(m, "13.1")


def test_i1_constants_are_bit_packed():
    t16 = ty.TileType((16,), ty.I1)
    alternating = DenseElementsAttr(t16, tuple(i % 2 for i in range(16)))
    assert encode_dense(alternating) == b"\x02\xaa\xaa"
    assert encode_dense(DenseElementsAttr(t16, (1,))) == b"\x01\xff"
    assert decode_dense(t16, b"\xaa\xaa").values == alternating.values
    assert decode_dense(t16, b"\xff").values == (1,)
    with pytest.raises(
        BytecodeError,
        match="i1 dense attribute payload size 16 is not a recognized encoding for 16 elements",
    ):
        decode_dense(t16, bytes(16))


def _fnv8_module():
    """The negi fixture cut down to ``constant : tile<4xfnv8E5M3FNU>`` + return."""
    from tilegen.runtime.asm.dense import dense_from_bits

    m = _negi_module()
    block = m.regions[0].blocks[0].ops[0].regions[0].blocks[0]
    for op in block.ops[1:3]:
        op.erase()
    const = block.ops[0]
    t = ty.TileType((4,), ty.FloatType("fnv8E5M3FNU"))
    const.results[0].type = t
    const.set_attr("value", dense_from_bits(t, [0x38, 0x40, 0xFE, 0xFF]))
    return m


def test_fnv8_type_is_13_4_only():
    m = _fnv8_module()
    data = write_bytecode(m, "13.4")
    assert b"\x82\x01" in data  # tag 130 is a two-byte varint
    back = next(op for op in read_bytecode(data).walk() if op.name == "cuda_tile.constant")
    assert back.attributes["value"].bits == (0x38, 0x40, 0xFE, 0xFF)
    assert back.attributes["value"].values[:3] == (0.00390625, 0.0078125, 114688.0)
    with pytest.raises(
        BytecodeWriteError,
        match=r"type 'FloatNV8E5M3FNU' requires bytecode version 13\.4\+, targeting 13\.3",
    ):
        write_bytecode(m, "13.3")
    old = data.replace(b"\x0d\x04\x00\x00", b"\x0d\x03\x00\x00", 1)
    messages = _error(old)
    assert (
        messages[0]
        == "type 'FloatNV8E5M3FNU' requires bytecode version 13.4+, file version is 13.3"
    )
    assert "failed to get result type 0 for ConstantOp" in messages[2]


@pytest.mark.parametrize(
    "tag, element",
    [(b"\x82\x03", "fnv8E5M3FNU"), (b"\x8a\x02", "f8E4M3FN"), (b"\x8a\x82\x00", None)],
)
def test_type_tag_dispatch_uses_low_8_bits(tag, element):
    """tileirdisasm reads a type tag as a varint but keeps only its low 8 bits: 386 is tag 130
    (fnv8E5M3FNU), 266 is tag 10 (f8E4M3FN). A longer varint shifts every later section
    (offset as tileirdisasm reports it)."""
    data = write_bytecode(_fnv8_module(), "13.4")
    assert data.count(b"\x82\x01") == 1
    mutated = data.replace(b"\x82\x01", tag, 1)
    if element is None:
        assert _error(mutated) == ["error at offset 97: end section is not the last section"]
        return
    const = next(op for op in read_bytecode(mutated).walk() if op.name == "cuda_tile.constant")
    assert const.results[0].type == ty.TileType((4,), ty.FloatType(element))


def test_unknown_type_tag_reports_low_8_bits_and_nvidia_offsets():
    data = write_bytecode(_fnv8_module(), "13.4")
    mutated = data.replace(b"\x82\x01", b"\x9f\x03", 1)  # 415: low 8 bits 159, no such tag
    # tileirdisasm 13.5's lines for this file, less its final "failed to read ... bytecode"
    assert _error(mutated) == [
        "unknown type tag: 159",
        "error at offset 1: failed to get elementType type",
        "error at offset 2: failed to get result type 0 for ConstantOp",
        f"error at offset {len(data)}: failed to parse function body for function 'basic'",
        f"error at offset {len(data)}: failed to create function from bytecode",
    ]


def test_test_build_versions_gate_testing_ops():
    m = _negi_module()
    block = m.regions[0].blocks[0].ops[0].regions[0].blocks[0]
    op = Operation(
        "cuda_tile.testing$bytecode_test_new_attribute",
        attributes={"new_flag": UnitAttr(), "new_param": IntegerAttr(123, ty.I32)},
    )
    block.insert(0, op)
    with pytest.raises(
        BytecodeWriteError,
        match=r"operation 'cuda_tile\.testing\$bytecode_test_new_attribute' is not available in bytecode version 13\.4",
    ):
        write_bytecode(m, "13.4")
    with pytest.raises(
        BytecodeWriteError,
        match=r"optional attribute 'new_flag' is provided but requires bytecode version 250\.1, targeting 250\.0",
    ):
        write_bytecode(m, "250.0")
    back = read_bytecode(write_bytecode(m, "250.1"))
    got = next(o for o in back.walk() if o.name == op.name)
    assert got.attributes == {"new_flag": UnitAttr(), "new_param": IntegerAttr(123, ty.I32)}
    op.remove_attr("new_flag")
    op.set_attr("new_param", IntegerAttr(42, ty.I32))  # the default: omitted at 250.0
    back = read_bytecode(write_bytecode(m, "250.0"))
    assert next(o for o in back.walk() if o.name == op.name).attributes["new_param"].value == 42


@pytest.mark.skipif(not CORPUS_FILES, reason="corpus not available")
def test_13_5_function_records_are_read():
    """13.5 records (hints always, argument dictionaries, DISubprogram flags), produced by the
    writer's internal 13.5 path, read back to the same IR (tileirdisasm 13.5 accepts them too:
    see test_bytecode_corpus)."""
    from tilegen.runtime.bytecode.writer import _Writer

    path = next(p for p in CORPUS_FILES if p.endswith("/vec_add.tileirbc"))
    m = read_bytecode(open(path, "rb").read())
    data = _Writer("13.5").write(m)
    assert data[8:12] == b"\x0d\x05\x00\x00" and b"\x06\x00" in data
    back = read_bytecode(data)
    assert [o.name for o in back.walk()] == [o.name for o in m.walk()]
    entry = next(o for o in back.walk() if o.name == "cuda_tile.entry")
    assert entry.loc.scope.flags == 0 and entry.attributes["optimization_hints"].entries


def test_self_contained_integer_and_float_attrs_roundtrip():
    """i8 values >= 128 need a two-byte varint (only i1 is a raw byte); floats are APInt bits."""
    from tilegen.runtime.attributes import ArrayAttr, FloatAttr
    from tilegen.runtime.bytecode.reader import _Reader
    from tilegen.runtime.bytecode.varint import Cursor, Writer
    from tilegen.runtime.bytecode.writer import _Writer

    attrs = [
        IntegerAttr(-1, ty.I8),
        IntegerAttr(200 - 256, ty.I8),
        IntegerAttr(1, ty.I1),
        IntegerAttr(-(2**63), ty.I64),
        FloatAttr(1.0, ty.F16, 0x3C00),
        FloatAttr(-0.0, ty.F32, 0x80000000),
    ]
    wr = _Writer("13.4")
    w = Writer()
    wr._sc_attr(w, ArrayAttr(tuple(attrs)), None, "identities")
    payload = w.getvalue()
    assert payload[:4] == b"\x06\x06\x01\x00" and payload[4:6] == b"\xff\x01"  # i8 -1 = varint 255
    rd = _Reader(b"", "t")
    rd.types = _type_table(wr.types)
    back = rd.sc_attr(Cursor(payload))
    assert back.values == tuple(attrs)


def _type_table(interner):
    """The writer's interned type entries as the reader's lazily decoded type table."""
    from tilegen.runtime.bytecode.reader import _Table

    offsets, pos = [], 0
    for e in interner.entries:
        offsets.append(pos)
        pos += len(e)
    return _Table(len(offsets), offsets, memoryview(b"".join(interner.entries)), "types")


def test_ptr_attr_type_parameter_is_13_4():
    from tilegen.runtime.bytecode.reader import _Reader
    from tilegen.runtime.bytecode.varint import Cursor
    from tilegen.runtime.bytecode.writer import _Writer

    tv = ty.TensorViewType(ty.F32, (16,), (1,), ptr_attr="none")
    w = _Writer("13.4")
    idx = w.type(tv)
    one = (1).to_bytes(8, "little")
    # tag 14, optFlags bit0, elem type#0 (f32), shape [16], strides [1], ptr_attr none
    assert (
        w.types.entries[idx]
        == b"\x0e\x01\x00\x01" + (16).to_bytes(8, "little") + b"\x01" + one + b"\x00"
    )
    rd = _Reader(b"", "t")
    rd.version, rd.vt = "13.4", (13, 4)
    rd.types = _type_table(w.types)
    assert rd.type(idx) == tv
    with pytest.raises(
        BytecodeWriteError,
        match=r"parameter 'ptr_attr' requires bytecode version 13\.4\+, but targeting 13\.3",
    ):
        _Writer("13.3").type(tv)
    with pytest.raises(
        BytecodeWriteError,
        match=r"enum value for parameter 'ptr_attr' is not available in bytecode version 13\.4",
    ):
        _Writer("13.4").type(ty.PointerType(ty.F32, ptr_attr="multicast"))
    bad = _type_table(w.types)
    bad.data = memoryview(bytes(bad.data).replace(b"\x0e\x01", b"\x0e\x03"))
    rd.types = bad
    with pytest.raises(BytecodeError, match="unused bits set in optional parameter flags"):
        rd.type(idx)
    assert Cursor(b"\x00").varint() == 0
