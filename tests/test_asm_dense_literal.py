"""Dense constant literals ``<E: lit> : tile<..>`` and ``dense<..>`` bodies (runtime/asm/dense.py)."""

import math

import pytest

from tilegen.runtime.asm import parse_module, print_module
from tilegen.runtime.asm.dense import dense_from_bits, expand, format_dense_body, make_dense
from tilegen.runtime.attributes import DenseElementsAttr
from tilegen.runtime.diagnostics import DiagnosticError
from tilegen.runtime.types import F32, I1, I16, TileType


def _constant(literal: str) -> tuple[DenseElementsAttr, str]:
    """Parse ``%c = constant LITERAL`` inside an entry; return the attr and its printed line."""
    text = f"cuda_tile.module @m {{\n  entry @k() {{\n    %c = constant {literal}\n  }}\n}}\n"
    module = parse_module(text, "t.mlir")
    ops = list(module.walk())
    const = next(op for op in ops if op.name == "cuda_tile.constant")
    printed = print_module(module)
    line = next(ln.strip() for ln in printed.splitlines() if " = constant " in ln)
    return const.attributes["value"], line.split(" = ", 1)[1]


@pytest.mark.parametrize(
    "literal,printed",
    [
        ("<i16: 0xFFFF> : tile<i16>", "constant <i16: -1> : tile<i16>"),
        ("<i16: 0xCDEF> : tile<i16>", "constant <i16: -12817> : tile<i16>"),
        (
            "<i64: 0x123456789ABCDEF0> : tile<i64>",
            "constant <i64: 1311768467463790320> : tile<i64>",
        ),
        (
            "<i64: -9223372036854775808> : tile<i64>",
            "constant <i64: -9223372036854775808> : tile<i64>",
        ),
        ("<i32: 42> : tile<4x4xi32>", "constant <i32: 42> : tile<4x4xi32>"),
        ("<i32: [42]> : !cuda_tile.tile<1xi32>", "constant <i32: 42> : tile<1xi32>"),
        ("<f32: [1.0, 1.0]> : tile<2xf32>", "constant <f32: 1.000000e+00> : tile<2xf32>"),
        ("<f32: 1.5> : tile<2x4x4xf32>", "constant <f32: 1.500000e+00> : tile<2x4x4xf32>"),
        ("<i1: true> : tile<8xi1>", "constant <i1: true> : tile<8xi1>"),
        (
            "<i1: [[[true, false]], [[false, true]]]> : tile<2x1x2xi1>",
            "constant <i1: [[[true, false]], [[false, true]]]> : tile<2x1x2xi1>",
        ),
        (
            "<f32: [[1.0, 2.0], [4.0, 5.0]]> : tile<2x2xf32>",
            "constant <f32: [[1.000000e+00, 2.000000e+00], [4.000000e+00, 5.000000e+00]]> : "
            "tile<2x2xf32>",
        ),
        ("<f16: 0x3C00> : tile<f16>", "constant <f16: 1.000000e+00> : tile<f16>"),
        (
            "<f4E2M1FN: [0x2, 0x4]> : tile<2xf4E2M1FN>",
            "constant <f4E2M1FN: [1.000000e+00, 2.000000e+00]> : tile<2xf4E2M1FN>",
        ),
        (
            "<f32: 10000000000000000000000000000000000000000.0> : tile<f32>",
            "constant <f32: 0x7F800000> : tile<f32>",
        ),
        (
            "<f32: [0.0, -0.0]> : tile<2xf32>",
            "constant <f32: [0.000000e+00, -0.000000e+00]> : tile<2xf32>",
        ),
        (
            "<f32: [0x00000000, 0x7FC00000]> : tile<2xf32>",
            "constant <f32: [0.000000e+00, 0x7FC00000]> : tile<2xf32>",
        ),
    ],
)
def test_literal_prints_like_cuda_tile_opt(literal, printed):
    _, line = _constant(literal)
    assert line == printed


def test_values_and_bits_are_stored():
    attr, _ = _constant("<i16: [0xFFFF, 7]> : tile<2xi16>")
    assert attr.values == (-1, 7) and attr.bits is None
    attr, _ = _constant("<f32: 0x7FC00001> : tile<4xf32>")
    assert attr.is_splat and math.isnan(attr.values[0]) and attr.bits == (0x7FC00001,)
    assert expand(attr) == [attr.values[0]] * 4 or all(math.isnan(v) for v in expand(attr))


def test_builders_collapse_splats_and_compare_equal():
    t = TileType((2,), F32)
    assert make_dense(t, [1.0, 1.0]) == make_dense(t, [1]) == dense_from_bits(t, [0x3F800000] * 2)
    assert make_dense(TileType((3,), I16), [65535, 1, 2]).values == (-1, 1, 2)
    assert make_dense(TileType((2,), I1), [1, 0]).values == (1, 0)
    assert format_dense_body(make_dense(TileType((2, 2), F32), [1, 2, 3, 4])) == (
        "[[1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]"
    )


# (literal, message, the text the error points at)
DIAGNOSTICS = [
    (
        "<i1: [[true, true], [true, true]]> : !cuda_tile.tile<4x2xi1>",
        "inferred shape of elements literal ([2, 2]) does not match type ([4, 2])",
        "[[true",
    ),
    (
        "<i32: [1, 2, 3]> : !cuda_tile.tile<8xi32>",
        "inferred shape of elements literal ([3]) does not match type ([8])",
        "[1,",
    ),
    (
        "<i32: [1]> : tile<i32>",
        "inferred shape of elements literal ([1]) does not match type ([])",
        "[1]",
    ),
    (
        "<i1: [[true, true], [true]]> : !cuda_tile.tile<2x2xi1>",
        "tensor literal is invalid; ranks are not consistent between elements",
        "]>",
    ),
    (
        "<f32: [0.0, 2]> : tile<2xf32>",
        "unexpected decimal integer literal for a floating point value",
        "2]",
    ),
    ("<i16: ABC> : tile<i16>", "expected integer value", "ABC"),
    ("<i8: true> : tile<i8>", "expected integer value", "true"),
    ("<i8: 0x10AB> : tile<i8>", "integer constant out of range for type", "0x10AB"),
    ("<i8: 256> : tile<i8>", "integer constant out of range for type", "256"),
    ("<i16: -32769> : tile<i16>", "integer constant out of range for type", "-32769"),
    ("<f16: 0x12345678> : tile<f16>", "float constant out of range for type", "0x1234"),
    ("<f16: -0x1> : tile<f16>", "hexadecimal float literal should not have a leading minus", "0x1"),
    (
        "<f16: 42.0> : tile<f32>",
        "mismatch between the element type: 'f16' and the tile element type 'f32'",
        "tile<",
    ),
    (
        "<tensor<i32> : 42.0> : tensor<i32>",
        "expect element type to be one of i1 or i8 or i16 or i32 or i64 or f16 or bf16 or f32 or f64 "
        "or tf32 or f8E4M3FN or f8E5M2 or f8E8M0FNU or f4E2M1FN values, but got 'tensor<i32>'",
        "tensor<i32> :",
    ),
    ("<f32: 10.0> : tensor<f32>", "result #0 must be tile of i1 or i8", "tensor"),
]


@pytest.mark.parametrize("literal,message,marker", DIAGNOSTICS)
def test_literal_diagnostics_are_located(literal, message, marker):
    with pytest.raises(DiagnosticError) as info:
        _constant(literal)
    diag = info.value.diag
    assert message in diag.message
    assert diag.message.startswith("custom op 'cuda_tile.constant' ")
    col = len("    %c = constant ") + literal.index(marker) + 1
    assert (diag.loc.file, diag.loc.line, diag.loc.col) == ("t.mlir", 3, col)


def test_decimal_integer_for_float_has_note():
    with pytest.raises(DiagnosticError) as info:
        _constant("<f32: [1.0, 7]> : tile<2xf32>")
    notes = info.value.diag.notes
    assert [n.message for n in notes] == ["add a trailing dot to make the literal a float"]


def test_unknown_element_type_reports_two_errors():
    with pytest.raises(DiagnosticError) as info:
        _constant("<pluto : 42.0> : tile<f32>")
    assert "but got '<<NULL TYPE>>'" in info.value.diag.message
    assert [d.message for d in info.value.preceding] == ["'cuda_tile.constant' unknown type: pluto"]


def test_generic_dense_attribute_round_trips():
    text = (
        '"cuda_tile.module"() <{sym_name = "m"}> ({\n'
        '  "cuda_tile.global"() <{sym_name = "g", value = dense<[1.000000e+00, 0x7FC00000]> : '
        "!cuda_tile.tile<2xf32>}> : () -> ()\n"
        "}) : () -> ()\n"
    )
    module = parse_module(text, "g.mlir")
    glob = next(op for op in module.walk() if op.name == "cuda_tile.global")
    attr = glob.attributes["value"]
    assert attr.bits == (0x3F800000, 0x7FC00000)
    # two spaces: the empty visibility directive still gets its separator (as tileirdisasm prints)
    assert "global  @g <f32: [1.000000e+00, 0x7FC00000]> : tile<2xf32>" in print_module(module)
    generic = print_module(module, generic=True)
    assert "dense<[1.000000e+00, 0x7FC00000]> : !cuda_tile.tile<2xf32>" in generic
    again = parse_module(generic, "g2.mlir")
    assert (
        next(op for op in again.walk() if op.name == "cuda_tile.global").attributes["value"] == attr
    )


def test_large_dense_attributes_use_hex_strings_in_generic_form():
    values = ", ".join(str(i) for i in range(128))
    text = (
        "cuda_tile.module @m {\n  entry @k() {\n"
        f"    %c = constant <i32: [{values}]> : tile<128xi32>\n  }}\n}}\n"
    )
    module = parse_module(text, "h.mlir")
    generic = print_module(module, generic=True)
    assert 'dense<"0x0000000001000000' in generic
    again = parse_module(generic, "h2.mlir")
    assert print_module(again) == print_module(module)
    const = next(op for op in again.walk() if op.name == "cuda_tile.constant")
    assert const.attributes["value"].values == tuple(range(128))


def test_large_constants_print_as_hex_like_tileirdisasm():
    bools = ", ".join("true" if i % 3 else "false" for i in range(128))
    attr, line = _constant(f"<i1: [{bools}]> : tile<128xi1>")
    assert line.startswith('constant <i1: "0x000101000101') and line.endswith('"> : tile<128xi1>')
    again, _ = _constant(line[len("constant ") :])
    assert again == attr
    splat, line = _constant('<f32: "0x0000803F"> : tile<128xf32>')
    assert line == "constant <f32: 1.000000e+00> : tile<128xf32>" and splat.is_splat


@pytest.mark.parametrize(
    "literal,message",
    [
        ('<i32: "0x0102"> : tile<128xi32>', "elements hex data size is invalid for provided type"),
        (
            '<i32: "0x00000000000000000000000000000000"> : tile<128xi32>',
            "elements hex data size is invalid for provided type: got 16 bytes",
        ),
        ('<i32: "12"> : tile<4xi32>', "expected string containing hex digits starting with `0x`"),
    ],
)
def test_hex_literal_diagnostics(literal, message):
    with pytest.raises(DiagnosticError) as info:
        _constant(literal)
    assert message in info.value.diag.message


@pytest.mark.parametrize(
    "body,message",
    [
        # the generic form checks the shape before typing the elements (MLIR's getAttr)
        (
            "dense<[1, 2.5]> : !cuda_tile.tile<4xi32>",
            "inferred shape of elements literal ([2]) does not match type ([4])",
        ),
        ("dense<[1, 2.5]> : !cuda_tile.tile<2xi32>", "expected integer value"),
        ("dense<[1.0, 2]> : !cuda_tile.tile<2xf32>", "unexpected decimal integer literal"),
        ("dense<> : !cuda_tile.tile<2xf32>", "dense attribute cannot be empty"),
    ],
)
def test_generic_dense_diagnostics(body, message):
    text = f'"cuda_tile.global"() <{{sym_name = "g", value = {body}}}> : () -> ()\n'
    with pytest.raises(DiagnosticError) as info:
        parse_module(text, "gd.mlir")
    assert message in info.value.diag.message
    assert info.value.diag.loc.line == 1
