"""Verifier engine: MLIR's check order, type constraints, declarative rules and hooks.

IR is built directly (no parser) so these tests pin the engine's own behaviour.
"""

from __future__ import annotations

from typing import Optional

import pytest

from tilegen.runtime.attributes import (
    DenseArrayAttr,
    DenseElementsAttr,
    EnumAttr,
    FileLineColLoc,
    IntegerAttr,
    UnitAttr,
)
from tilegen.runtime.diagnostics import DiagnosticEngine
from tilegen.runtime.ir import Block, Operation, Region
from tilegen.runtime.opdef import lookup_enum
from tilegen.runtime.types import (
    F16,
    F32,
    I1,
    I8,
    I16,
    I32,
    I64,
    FloatType,
    IntegerType,
    PointerType,
    TileType,
)
from tilegen.runtime.verify import VerifyOptions, verify_module


def tile(*dims_and_elem):
    *dims, elem = dims_and_elem
    return TileType(tuple(dims), elem)


def enum(name: str, keyword: str) -> EnumAttr:
    return EnumAttr(name, lookup_enum(name).value(keyword))


def make(name: str, operand_types, result_types, attrs=None, line: int = 1) -> Operation:
    block = Block(list(operand_types))
    op = Operation(
        name,
        list(block.args),
        list(result_types),
        attrs or {},
        loc=FileLineColLoc("t.mlir", line, 3),
    )
    block.append(op)
    return op


def errors(op: Operation, options: Optional[VerifyOptions] = None) -> list[str]:
    diag = DiagnosticEngine()
    ok = verify_module(op, diag, options)
    msgs = [d.message for d in diag.diagnostics if d.severity == "error"]
    assert ok == (not msgs)
    return msgs


def one_error(op: Operation) -> str:
    msgs = errors(op)
    assert len(msgs) == 1, msgs
    return msgs[0]


RNE = {"rounding_mode": enum("RoundingMode", "nearest_even")}


# --------------------------------------------------------------------------- type constraints


def test_operand_constraint_message_uses_long_type_form():
    t = tile(2, 4, 8, I32)
    assert one_error(make("cuda_tile.addf", [t, t], [t], RNE)) == (
        "'cuda_tile.addf' op operand #0 must be tile of f16 or bf16 or f32 or f64 values, "
        "but got '!cuda_tile.tile<2x4x8xi32>'"
    )


def test_result_constraint_checked_after_operands():
    t = tile(2, F16)
    msg = one_error(
        make(
            "cuda_tile.cmpf",
            [t, t],
            [tile(2, F16)],
            {
                "comparison_predicate": enum("ComparisonPredicate", "equal"),
                "comparison_ordering": enum("ComparisonOrdering", "ordered"),
            },
        )
    )
    assert msg == (
        "'cuda_tile.cmpf' op result #0 must be tile of i1 values, but got '!cuda_tile.tile<2xf16>'"
    )


def test_variadic_result_summary_is_prefixed():
    from tilegen.runtime.verify import constraints

    assert constraints.summary("CudaTile_ScalarTileOf<CudaTile_AnyInt>") == (
        "0D tile of i1 or i8 or i16 or i32 or i64 values"
    )
    assert constraints.check_type("CudaTile_ScalarTileOf<CudaTile_AnyInt>", tile(I32))
    assert not constraints.check_type("CudaTile_ScalarTileOf<CudaTile_AnyInt>", tile(1, I32))
    assert not constraints.check_type("CudaTile_IntTileType", tile(4, IntegerType(4)))
    assert constraints.check_type("ExtIOp_IntegerType", tile(4, IntegerType(4)))
    assert constraints.check_type("CudaTile_PointerTileType", tile(4, PointerType(F32)))


def test_every_operand_and_result_constraint_is_defined():
    from tilegen.runtime.opdef import all_ops
    from tilegen.runtime.verify.constraints import known_type_constraints

    known = known_type_constraints()
    missing = {
        (o.name, v.type)
        for o in all_ops()
        for v in (*o.operands, *o.results)
        if o.dialect == "cuda_tile" and v.type not in known
    }
    assert not missing


def test_every_attribute_constraint_is_defined():
    from tilegen.runtime.opdef import all_ops
    from tilegen.runtime.verify.constraints import attr_constraint

    missing = {
        (o.name, a.name, a.constraint)
        for o in all_ops()
        for a in o.attributes
        if o.dialect == "cuda_tile" and a.constraint and attr_constraint(a.constraint) is None
    }
    # Hand-checked remainder: interface/attrdef constraints the op hooks verify themselves.
    assert {c for _, _, c in missing} <= {
        "CudaTile_AssumePredicateAttrInterface",
        "OptionalAttr<CudaTile_OptimizationHintsAttr>",
        "OptionalAttr<DictArrayAttr>",
    }, missing


def test_required_attribute_missing():
    t = tile(2, F32)
    assert one_error(make("cuda_tile.addf", [t, t], [t])) == (
        "'cuda_tile.addf' op requires attribute 'rounding_mode'"
    )


def test_attribute_of_wrong_enum_fails_constraint():
    t = tile(2, F32)
    msg = one_error(
        make("cuda_tile.addf", [t, t], [t], {"rounding_mode": enum("Signedness", "signed")})
    )
    assert msg.startswith(
        "'cuda_tile.addf' op attribute 'rounding_mode' failed to satisfy constraint"
    )


def test_count_traits_precede_type_constraints():
    t = tile(2, I32)
    assert one_error(make("cuda_tile.addf", [t], [t], RNE)) == (
        "'cuda_tile.addf' op expected 2 operands, but found 1"
    )
    assert (
        one_error(make("cuda_tile.absf", [t], [], {})) == "'cuda_tile.absf' op requires one result"
    )


# --------------------------------------------------------------------------- rules


@pytest.mark.parametrize("mode", ["full", "approx", "nearest_int_to_zero"])
def test_addf_rounding_restricted_to_ieee(mode):
    t = tile(2, F32)
    assert one_error(
        make("cuda_tile.addf", [t, t], [t], {"rounding_mode": enum("RoundingMode", mode)})
    ) == (
        "'cuda_tile.addf' op invalid rounding mode specified, expect one of "
        "[nearest_even, zero, negative_inf, positive_inf]"
    )


@pytest.mark.parametrize("name", ["addf", "subf", "mulf", "divf"])
def test_flush_to_zero_needs_f32(name):
    t = tile(2, FloatType("bf16"))
    attrs = {**RNE, "flush_to_zero": UnitAttr()}
    assert one_error(make(f"cuda_tile.{name}", [t, t], [t], attrs)) == (
        f"'cuda_tile.{name}' op flush_to_zero modifier only supported for f32 data type, "
        "but got: 'bf16'"
    )


def test_divf_ftz_is_checked_before_approx():
    t = tile(4, F16)
    attrs = {"rounding_mode": enum("RoundingMode", "approx"), "flush_to_zero": UnitAttr()}
    assert "flush_to_zero modifier" in one_error(make("cuda_tile.divf", [t, t], [t], attrs))
    del attrs["flush_to_zero"]
    assert one_error(make("cuda_tile.divf", [t, t], [t], attrs)).endswith(
        "approx modifier only supported for f32 data type, but got: 'f16'"
    )


def test_same_type_rule_text():
    a, b = tile(2, F32), tile(4, F32)
    assert one_error(make("cuda_tile.addf", [a, b], [a], RNE)) == (
        "'cuda_tile.addf' op failed to verify that all of {lhs, rhs, result} have same type"
    )


def test_cmpi_types_match_with_after_same_type():
    attrs = {
        "comparison_predicate": enum("ComparisonPredicate", "equal"),
        "signedness": enum("Signedness", "signed"),
    }
    a = tile(2, I32)
    assert one_error(make("cuda_tile.cmpi", [a, a], [tile(4, I1)], attrs)) == (
        "'cuda_tile.cmpi' op failed to verify that Result type has i1 element type and same "
        "shape as operands"
    )
    assert "have same type" in one_error(
        make("cuda_tile.cmpi", [a, tile(2, I16)], [tile(4, I1)], attrs)
    )
    assert errors(make("cuda_tile.cmpi", [a, a], [tile(2, I1)], attrs)) == []


def test_divi_negative_inf_unsigned():
    t = tile(I1)
    attrs = {
        "signedness": enum("Signedness", "unsigned"),
        "rounding": enum("RoundingMode", "negative_inf"),
    }
    assert one_error(make("cuda_tile.divi", [t, t], [t], attrs)) == (
        "'cuda_tile.divi' op rounding mode 'negative_inf' is not allowed with 'unsigned' flag"
    )
    attrs["signedness"] = enum("Signedness", "signed")
    assert errors(make("cuda_tile.divi", [t, t], [t], attrs)) == []


def test_negi_rejects_no_unsigned_wrap():
    t = tile(4, I32)
    op = make("cuda_tile.negi", [t], [t], {"overflow": enum("IntegerOverflow", "no_unsigned_wrap")})
    assert one_error(op) == "'cuda_tile.negi' op 'no_unsigned_wrap' overflow flag is not supported"


def test_tanh_rounding_error_is_not_fatal():
    """NVIDIA's tanh verifier emits the rounding error without failing: the walk goes on."""
    t = tile(4, F32)
    block = Block([t])
    region = Region([block])
    parent = Operation("test.container", [], [], {}, regions=[region])
    bad = Operation(
        "cuda_tile.tanh",
        [block.args[0]],
        [t],
        {"rounding_mode": enum("RoundingMode", "nearest_even")},
    )
    block.append(bad)
    worse = Operation("cuda_tile.absf", [block.args[0]], [tile(4, I32)], {})
    block.append(worse)
    msgs = errors(parent)
    assert msgs == [
        "'cuda_tile.tanh' op invalid rounding mode specified, expect one of [approx, full]",
        "'cuda_tile.absf' op result #0 must be tile of f16 or bf16 or f32 or f64 values, but got "
        "'!cuda_tile.tile<4xi32>'",
    ]


def test_first_failing_op_stops_the_walk():
    t = tile(4, F32)
    block = Block([t])
    parent = Operation("test.container", [], [], {}, regions=[Region([block])])
    for _ in range(2):
        block.append(Operation("cuda_tile.absf", [block.args[0]], [tile(4, I32)], {}))
    assert len(errors(parent)) == 1


@pytest.mark.parametrize(
    "name,src,dst,msg",
    [
        ("exti", tile(2, I16), tile(2, I8), "extending to smaller or identical integer"),
        ("exti", tile(I8), tile(I8), "extending to smaller or identical integer"),
        ("trunci", tile(2, I8), tile(2, I16), "truncating to larger or identical integer"),
        (
            "bitcast",
            tile(I32),
            tile(I16),
            "types must be equal width, cannot convert "
            "'!cuda_tile.tile<i32>' of width 32 to type '!cuda_tile.tile<i16>' of width 16",
        ),
        (
            "bitcast",
            tile(4, I16),
            tile(2, I32),
            "failed to verify that all of {source, result} have same shape",
        ),
        ("exti", tile(2, I8), tile(I16), "failed to verify that all of {from, to} have same shape"),
    ],
)
def test_conversion_widths(name, src, dst, msg):
    attrs = {"signedness": enum("Signedness", "signed")} if name == "exti" else {}
    assert (
        one_error(make(f"cuda_tile.{name}", [src], [dst], attrs)) == f"'cuda_tile.{name}' op {msg}"
    )


def test_ftof_rules_use_default_rounding():
    assert one_error(make("cuda_tile.ftof", [tile(2, F16)], [tile(2, F16)])).endswith(
        "converting tiles must not be a no-op"
    )
    e8 = FloatType("f8E8M0FNU")
    assert one_error(make("cuda_tile.ftof", [tile(2, F32)], [tile(2, e8)])).endswith(
        "invalid rounding mode specified for conversion to f8E8M0FNU. Only 'zero' and "
        "'positive_inf' are supported"
    )
    ok = {"rounding_mode": enum("RoundingMode", "zero")}
    assert errors(make("cuda_tile.ftof", [tile(2, F32)], [tile(2, e8)], ok)) == []
    bad = {"rounding_mode": enum("RoundingMode", "negative_inf")}
    assert one_error(
        make("cuda_tile.ftof", [tile(2, F32)], [tile(2, FloatType("f64"))], bad)
    ).endswith("invalid rounding mode specified. Only 'nearest_even' is supported")


def test_itof_f8e8m0fnu():
    attrs = {"signedness": enum("Signedness", "signed"), **RNE}
    op = make("cuda_tile.itof", [tile(2, I8)], [tile(2, FloatType("f8E8M0FNU"))], attrs)
    assert one_error(op) == (
        "'cuda_tile.itof' op integer to f8E8M0FNU conversion is not supported, please first "
        "convert to another float type"
    )


def test_pack_sizes_in_bytes():
    assert one_error(make("cuda_tile.pack", [tile(32, F16)], [tile(32, I8)])) == (
        "'cuda_tile.pack' op expects source and result to have the same size in bytes, but got "
        "source tile size 64 bytes and result tile size 32 bytes"
    )
    assert one_error(
        make("cuda_tile.pack", [tile(32, FloatType("f8E5M2"))], [tile(32, I8)])
    ).endswith("expects source and result to have different element type widths")
    assert one_error(make("cuda_tile.unpack", [tile(64, 64, I8)], [tile(64, 32, F16)])).endswith(
        "expects source and result to be rank-1 tiles"
    )
    assert errors(make("cuda_tile.pack", [tile(32, F16)], [tile(64, I8)])) == []


def test_select_sub_byte():
    f4 = FloatType("f4E2M1FN")
    op = make("cuda_tile.select", [tile(4, I1), tile(4, f4), tile(4, f4)], [tile(4, f4)])
    assert one_error(op) == "'cuda_tile.select' op cannot operate on sub-byte type F4E2M1FN"


# --------------------------------------------------------------------------- shape hooks


def test_reshape_native_trait_before_element_count():
    assert one_error(make("cuda_tile.reshape", [tile(1, F32)], [tile(I32)])).endswith(
        "requires the same element type for all operands and results"
    )
    assert one_error(make("cuda_tile.reshape", [tile(2, 2, F32)], [tile(8, F32)])).endswith(
        "expected source tile and result tile to have the same number of elements"
    )


def test_broadcast_compatibility():
    assert one_error(make("cuda_tile.broadcast", [tile(4, 4, F32)], [tile(2, 4, F32)])).endswith(
        "expects the shape of source tile to be compatible with that of the result tile, "
        "but got: 4, 4 and 2, 4"
    )
    assert errors(make("cuda_tile.broadcast", [tile(1, 4, F32)], [tile(8, 4, F32)])) == []


@pytest.mark.parametrize(
    "dim,result,msg",
    [
        (-1, tile(2, 4, F32), "expect dim to be [0, 2), but got: -1"),
        (1, tile(2, 16, F32), "invalid concat at position 1, expected: 4 but got: 16"),
        (
            1,
            tile(4, 4, F32),
            "expect lhs and result shapes to match at non-concat position 0, "
            "expected: 2 but got: 4",
        ),
    ],
)
def test_cat(dim, result, msg):
    t = tile(2, 2, F32)
    op = make("cuda_tile.cat", [t, t], [result], {"dim": IntegerAttr(dim, I64)})
    assert one_error(op) == f"'cuda_tile.cat' op {msg}"


@pytest.mark.parametrize(
    "src,perm,dst,msg",
    [
        (tile(2, F32), [0], tile(2, F32), "expects at least rank 2, but got: 1"),
        (
            tile(1, 2, F32),
            [0, 1, 100],
            tile(1, 2, F32),
            "expect permutation size (3) to equal the rank of the source (2)",
        ),
        (
            tile(1, 2, F32),
            [-1, 1],
            tile(1, 2, F32),
            "permutation element at index 0 (-1) is out of bound [0, 2)",
        ),
        (tile(1, 2, F32), [0, 0], tile(1, 2, F32), "expect permutation elements to be unique"),
        (
            tile(1, 2, F32),
            [1, 0],
            tile(1, 1, F32),
            "result shape invalid at index 0, expected: 2, but got: 1",
        ),
        (
            tile(1, 2, F32),
            [0, 1],
            tile(1, 2, F16),
            "failed to verify that all of {source, result} have the same element type",
        ),
    ],
)
def test_permute(src, perm, dst, msg):
    op = make("cuda_tile.permute", [src], [dst], {"permutation": DenseArrayAttr(I32, tuple(perm))})
    assert one_error(op) == f"'cuda_tile.permute' op {msg}"


def test_extract_order():
    idx = tile(I32)
    op = make("cuda_tile.extract", [tile(8, F32), idx], [tile(2, I32)])
    assert one_error(op).endswith("source and result element type do not match")
    op = make("cuda_tile.extract", [tile(4, 8, F32), idx], [tile(2, 4, F32)])
    assert one_error(op).endswith("expected 2 indices, but got 1")
    op = make("cuda_tile.extract", [tile(8, 4, F32), idx, idx], [tile(4, 8, F32)])
    assert one_error(op).endswith(
        "source dimension 1 size (4) must be evenly divisible by result dimension 1 size (8)"
    )


def test_iota():
    assert one_error(make("cuda_tile.iota", [], [tile(I64)])).endswith(
        "expects result type to be 1-d tile"
    )
    assert one_error(make("cuda_tile.iota", [], [tile(512, I8)])).endswith(
        "the number of elements 512 exceeds the maximum value of element type 'i8'"
    )
    assert errors(make("cuda_tile.iota", [], [tile(256, I8)])) == []


def _index_const(block: Block, value: int):
    c = Operation(
        "cuda_tile.constant", [], [tile(I32)], {"value": DenseElementsAttr(tile(I32), (value,))}
    )
    block.append(c)
    return c.results[0]


@pytest.mark.parametrize(
    "name,value,msg",
    [
        (
            "extract",
            -1,
            "extract index 0 has negative value -1, which may cause undefined behavior",
        ),
        ("extract", 2, "extract index 0 value 2 may be out of bounds (max valid index: 1)"),
        ("insert", 1000, "insert index 0 value 1000 may be out of bounds (max valid index: 1)"),
    ],
)
def test_constant_index_warnings(name, value, msg):
    """Texts read back from tileiras 13.5 (warnings only: the op still verifies)."""
    block = Block([tile(64, F32), tile(32, F32)])
    idx = _index_const(block, value)
    if name == "extract":
        op = Operation("cuda_tile.extract", [block.args[0], idx], [tile(32, F32)])
    else:
        op = Operation("cuda_tile.insert", [block.args[1], block.args[0], idx], [tile(64, F32)])
    block.append(op)
    diag = DiagnosticEngine()
    assert verify_module(op, diag)
    assert [(d.severity, d.message) for d in diag.diagnostics] == [("warning", msg)]


def test_bitcast_tf32_is_19_bits_wide():
    """tileiras 13.5: bitcast compares getIntOrFloatBitWidth, which is 19 for tf32."""
    msg = one_error(make("cuda_tile.bitcast", [tile(128, FloatType("tf32"))], [tile(128, I32)]))
    assert msg == (
        "'cuda_tile.bitcast' op types must be equal width, cannot convert "
        "'!cuda_tile.tile<128xtf32>' of width 19 to type '!cuda_tile.tile<128xi32>' of width 32"
    )


def test_use_before_definition_does_not_dominate():
    t = tile(4, F32)
    block = Block([t])
    parent = Operation("test.container", [], [], {}, regions=[Region([block])])
    late = Operation("cuda_tile.negf", [block.args[0]], [t], {}, loc=FileLineColLoc("t.mlir", 3, 1))
    user = Operation(
        "cuda_tile.absf", [late.results[0]], [t], {}, loc=FileLineColLoc("t.mlir", 2, 1)
    )
    block.append(user)
    block.append(late)
    diag = DiagnosticEngine()
    assert not verify_module(parent, diag)
    (d,) = diag.diagnostics
    assert d.format() == (
        "t.mlir:2:1: error: operand #0 does not dominate this use\n"
        "t.mlir:3:1: note: operand defined here (op in the same block)"
    )


def test_permute_checks_uniqueness_before_bounds():
    op = make(
        "cuda_tile.permute",
        [tile(1, 2, F32)],
        [tile(1, 2, F32)],
        {"permutation": DenseArrayAttr(I32, (5, 5))},
    )
    assert one_error(op).endswith("expect permutation elements to be unique")


def test_cat_compares_lhs_with_rhs_first():
    op = make(
        "cuda_tile.cat",
        [tile(2, 2, F32), tile(4, 2, F32)],
        [tile(2, 4, F32)],
        {"dim": IntegerAttr(1, I64)},
    )
    assert one_error(op).endswith(
        "expect lhs and rhs shapes to match at non-concat position 0, expected: 2 but got: 4"
    )


def test_pack_byte_alignment():
    i4 = IntegerType(4)
    assert one_error(make("cuda_tile.pack", [tile(1, i4)], [tile(1, I8)])).endswith(
        "expects source tile to be byte-aligned"
    )


def test_block_without_terminator():
    from tilegen.runtime.attributes import StringAttr, TypeAttr
    from tilegen.runtime.types import FunctionType

    t = tile(4, F32)
    body = Block([t])
    func = Operation(
        "cuda_tile.testing$func",
        [],
        [],
        {"sym_name": StringAttr("f"), "function_type": TypeAttr(FunctionType((t,), ()))},
        regions=[Region([body])],
    )
    body.append(
        Operation("cuda_tile.absf", [body.args[0]], [t], {}, loc=FileLineColLoc("t.mlir", 5, 7))
    )
    diag = DiagnosticEngine()
    assert not verify_module(func, diag)
    (d,) = diag.diagnostics
    assert d.format().startswith("t.mlir:5:7: error: block with no terminator, has ")
    assert '"cuda_tile.absf"' in d.message
