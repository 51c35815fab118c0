"""Type and attribute syntax: cuda_tile types (short/long, nested), their parse diagnostics,
builtin and cuda_tile attributes, debug-info attributes and alias printing."""

from __future__ import annotations

import pytest

from tilegen.runtime.asm import parse_module, print_module
from tilegen.runtime.asm.type_syntax import format_type
from tilegen.runtime.attributes import (
    ArrayAttr,
    BoundedAttr,
    DenseArrayAttr,
    DictAttr,
    DivByAttr,
    EnumAttr,
    FloatAttr,
    IntegerAttr,
    OpaqueAttr,
    SameElementsAttr,
    StringAttr,
    SymbolRefAttr,
    UnitAttr,
)
from tilegen.runtime.diagnostics import DiagnosticError
from tilegen.runtime.types import (
    DYNAMIC,
    F32,
    I32,
    OpaqueType,
    PartitionViewType,
    PointerType,
    TensorViewType,
    TileType,
)


def result_type(spelling: str):
    m = parse_module(f'"u.op"() : () -> {spelling}', "t.mlir", allow_unregistered=True)
    return m.regions[0].block.ops[0].results[0].type


def attr(spelling: str):
    m = parse_module(f'"u.op"() {{a = {spelling}}} : () -> ()', "t.mlir", allow_unregistered=True)
    return m.regions[0].block.ops[0].attributes["a"]


def printed_attr(spelling: str) -> str:
    m = parse_module(f'"u.op"() {{a = {spelling}}} : () -> ()', "t.mlir", allow_unregistered=True)
    line = print_module(m).splitlines()[1].strip()
    return line[len('"u.op"() {a = ') : -len("} : () -> ()")]


@pytest.mark.parametrize(
    "spelling",
    [
        "!cuda_tile.tile<2x4xf32>",
        "!cuda_tile.tile<f32>",
        "!cuda_tile.tile<8xptr<f16>>",
        "!cuda_tile.tile<64xi4>",
        "!cuda_tile.token",
        "!cuda_tile.tensor_view<f32>",
        "!cuda_tile.tensor_view<?x32xf32, strides=[?,1]>",
        "!cuda_tile.partition_view<tile=(2x2), padding_value = zero, tensor_view<16x16xf32, strides=[16,1]>, dim_map=[1, 0]>",
        "!cuda_tile.strided_view<tile=(8x4), traversal_strides=[512,1], tensor_view<?x?xf32, strides=[?,1]>>",
        "!cuda_tile.gather_scatter_view<tile=(8x4), padding_value = nan, tensor_view<?x?xf32, strides=[?,1]>, sparse_dim=0>",
        # 13.4 ptr_attr
        "!cuda_tile.tile<ptr<f32, <none>>>",
        "!cuda_tile.tensor_view<16xf32, strides=[1], #cuda_tile.ptr_attr<none>>",
        "!cuda_tile.partition_view<tile=(4x4), tensor_view<16x16xf16, strides=[16,1], #cuda_tile.ptr_attr<multicast>>>",
        "tensor<2xi16>",
        '!foo.bar<"x", [1]>',
        "f8E4M3FN",
        "bf16",
    ],
)
def test_types_print_back_exactly(spelling):
    t = result_type(spelling)
    assert format_type(t) == spelling
    assert format_type(t, short=True) == spelling.replace("!cuda_tile.", "")


def test_type_structure_and_nesting():
    assert result_type("!cuda_tile.tile<2x!cuda_tile.ptr<i32>>") == TileType((2,), PointerType(I32))
    tv = result_type("!cuda_tile.tensor_view<?x4xf32, strides=[4,1]>")
    assert tv == TensorViewType(F32, (DYNAMIC, 4), (4, 1))
    pv = result_type("!cuda_tile.partition_view<tile=(4), tensor_view<8xf32, strides=[1]>>")
    assert isinstance(pv, PartitionViewType) and pv.dim_map == (0,)
    explicit = result_type(
        "!cuda_tile.partition_view<tile=(4), tensor_view<8xf32, strides=[1]>, dim_map=[0]>"
    )
    assert explicit == pv
    assert result_type("memref<2xf32>") == OpaqueType("memref<2xf32>")


@pytest.mark.parametrize(
    "spelling,message",
    [
        ("!cuda_tile.tensor_view<f32, strides=[1]>", "strides must not be provided for 0-d tiles"),
        (
            "!cuda_tile.tensor_view<f32, 3>",
            "unexpected token after element type in 0-d tensor_view",
        ),
        ("!cuda_tile.tensor_view<4xf32>", "expected 'strides'"),
        ("!cuda_tile.tensor_view<4xf32, strides=[0]>", "expected strictly positive integer, got 0"),
        (
            "!cuda_tile.tensor_view<4xf32, strides=[x]>",
            "expected either 64-bit integer or question mark",
        ),
        ("!cuda_tile.tile<?xf32>", "expected static shape"),
        ("!cuda_tile.tile<1x-1xf32>", "expected valid keyword"),
        (
            "!cuda_tile.partition_view<tile=(1099511627776), tensor_view<4xf32, strides=[1]>>",
            "tile dimension 0 exceeds i32 limitations (got 1099511627776, expected strictly "
            "positive and less than or equal to 2147483647)",
        ),
        (
            "!cuda_tile.partition_view<tile=(4), padding_value = foo, tensor_view<4xf32, strides=[1]>>",
            'invalid padding_value attribute specification. Got "foo" but expect one of: zero, '
            "neg_zero, nan, pos_inf, neg_inf",
        ),
        (
            "!cuda_tile.partition_view<tile=(4), !cuda_tile.tile<4xf32>>",
            "expected 'tensor_view' type, but got '!cuda_tile.tile<4xf32>'",
        ),
        ("!cuda_tile.bogus<1>", "unknown type: bogus"),
        ("!undefined_alias", "undefined symbol alias id 'undefined_alias'"),
    ],
)
def test_type_diagnostics(spelling, message):
    with pytest.raises(DiagnosticError) as info:
        result_type(spelling)
    assert info.value.diag.message == message
    assert info.value.diag.loc.line == 1


def test_type_verifier_runs_at_the_type():
    try:
        import tilegen.runtime.verify.types  # noqa: F401
    except ImportError:
        pytest.skip("type verifier not present")
    with pytest.raises(DiagnosticError) as info:
        result_type("!cuda_tile.tile<3xf32>")
    assert "powers of two" in info.value.diag.message
    assert info.value.diag.loc.col == len('"u.op"() : () -> ') + 1


@pytest.mark.parametrize(
    "spelling,value",
    [
        ("42", IntegerAttr(42, __import__("tilegen.runtime.types", fromlist=["I64"]).I64)),
        ("-7 : i32", IntegerAttr(-7, I32)),
        ("true", __import__("tilegen.runtime.attributes", fromlist=["BoolAttr"]).BoolAttr(True)),
        ('"s"', StringAttr("s")),
        ("unit", UnitAttr()),
        ("@a::@b", SymbolRefAttr("a", ("b",))),
        ("array<i32: 1, 0>", DenseArrayAttr(I32, (1, 0))),
        ('[1 : i32, "x"]', ArrayAttr((IntegerAttr(1, I32), StringAttr("x")))),
        ("{b = 1 : i32, a}", DictAttr((("b", IntegerAttr(1, I32)), ("a", UnitAttr())))),
        ("#cuda_tile.rounding<zero>", EnumAttr("RoundingMode", 1)),
        ("#cuda_tile.div_by<16, every 4 along 0>", DivByAttr(16, 4, 0)),
        ("#cuda_tile.same_elements<[1, 4]>", SameElementsAttr((1, 4))),
        ("#cuda_tile.bounded<?, 42>", BoundedAttr(None, 42)),
        ("#foo.thing<[1, 2]>", OpaqueAttr("#foo.thing<[1, 2]>")),
    ],
)
def test_attribute_values(spelling, value):
    assert attr(spelling) == value


@pytest.mark.parametrize(
    "spelling,printed",
    [
        ("42", "42 : i64"),  # MLIR never elides the type of an attr-dict value
        ("42 : i32", "42 : i32"),
        ("1.0 : f32", "1.000000e+00 : f32"),
        ("0.1 : f64", "1.000000e-01 : f64"),
        ("[1, 2 : i32, 0.5]", "[1, 2 : i32, 5.000000e-01]"),  # array elements: i64/f64 elided
        ("{x = 7, y = [7]}", "{x = 7 : i64, y = [7]}"),
        ("0x7F800000 : f32", "0x7F800000 : f32"),
        ("{b = 1 : i32, a}", "{a, b = 1 : i32}"),
        ("array<i32>", "array<i32>"),
        (
            "#cuda_tile.optimization_hints<sm_100 = {num_cta_in_cga = 2}>",
            "#cuda_tile.optimization_hints<sm_100 = {num_cta_in_cga = 2}>",
        ),
        ("#cuda_tile.bounded<-4, ?>", "#cuda_tile.bounded<-4, ?>"),
        ("!cuda_tile.tile<2xf32>", "!cuda_tile.tile<2xf32>"),
        ('"a\\0Ab"', '"a\\0Ab"'),
    ],
)
def test_attribute_printing(spelling, printed):
    assert printed_attr(spelling) == printed


@pytest.mark.parametrize(
    "spelling,message",
    [
        (
            "#cuda_tile.optimization_hints<sm_100 = 3>",
            "expected dictionary attribute for optimization_hints entry `sm_100` got value=3",
        ),
        ("#cuda_tile.optimization_hints<a = {}, a = {}>", "duplicate optimization_hints key `a`"),
        (
            "#cuda_tile.div_by<x>",
            "failed to parse parameter 'divisor' which is expected to be an integer",
        ),
        ("#cuda_tile.di_compile_unit<>", "expected a parameter name in struct"),
        (
            '#cuda_tile.di_subprogram<line = 1, name = "n">',
            "struct is missing required parameter: file",
        ),
        ("#nope", "undefined symbol alias id 'nope'"),
        ("{b, b}", "duplicate key 'b' in dictionary attribute"),
    ],
)
def test_attribute_diagnostics(spelling, message):
    with pytest.raises(DiagnosticError) as info:
        attr(spelling)
    assert info.value.diag.message == message


DEBUG = """#file = #cuda_tile.di_file<"foo.py" in "/tmp/">
#cu = #cuda_tile.di_compile_unit<file = #file>
#sp = #cuda_tile.di_subprogram<file = #file, line = 1, name = "k", linkageName = "k", compileUnit = #cu, scopeLine = 2>
#lb = #cuda_tile.di_lexical_block<scope = #sp, file = #file, line = 3, column = 4>
cuda_tile.module @kernels {
  entry @k() {
    %c = constant <i32: 1> : tile<i32> loc(#cuda_tile.di_loc<loc("/tmp/foo.py":9:10) in #lb>)
  } loc(#cuda_tile.di_loc<loc("/tmp/foo.py":7:8) in #sp>)
} loc(unknown)
"""


def test_debuginfo_aliases():
    out = print_module(parse_module(DEBUG, "d.mlir"), debuginfo=True)
    # aliases reached only from locations are deferred after the module, as in MLIR
    assert out.startswith("module {\n  cuda_tile.module @kernels {")
    tail = out[out.rindex("} loc(") :].splitlines()[1:]
    di = [line for line in tail if line.startswith("#di_")]
    assert di == [
        '#di_file = #cuda_tile.di_file<"foo.py" in "/tmp/">',
        "#di_compile_unit = #cuda_tile.di_compile_unit<file = #di_file>",
        '#di_subprogram = #cuda_tile.di_subprogram<file = #di_file, line = 1, name = "k", '
        'linkageName = "k", compileUnit = #di_compile_unit, scopeLine = 2>',
        "#di_lexical_block = #cuda_tile.di_lexical_block<scope = #di_subprogram, file = #di_file, "
        "line = 3, column = 4>",
    ]
    assert '#loc = loc("d.mlir":0:0)' in tail
    assert any(line.endswith('= loc("/tmp/foo.py":9:10)') for line in tail)
    assert any(
        "= #cuda_tile.di_loc<#loc" in line and "in #di_lexical_block>" in line for line in tail
    )
    # every alias used is defined, and the output re-parses to the same text
    again = print_module(parse_module(out, "again.mlir"), debuginfo=True)
    assert again == out
    plain = print_module(parse_module(DEBUG, "d.mlir"))
    assert "loc(" not in plain and "#di_" not in plain


def test_debuginfo_alias_used_by_an_attribute_stays_before_the_module():
    """An alias an op attribute reaches (and what it contains) is printed before the module;
    one reached only from locations goes after it (MLIR's deferrable aliases)."""
    src = DEBUG.replace(
        "%c = constant <i32: 1> : tile<i32>",
        "%c = constant <i32: 1> : tile<i32> {note = #cu}",
    )
    out = print_module(parse_module(src, "d.mlir"), debuginfo=True)
    head = out[: out.index("module {")].splitlines()
    assert head == [
        '#di_file = #cuda_tile.di_file<"foo.py" in "/tmp/">',
        "#di_compile_unit = #cuda_tile.di_compile_unit<file = #di_file>",
    ]
    assert "{note = #di_compile_unit}" in out
    tail = out[out.rindex("} loc(") :].splitlines()[1:]
    assert [line.split(" =")[0] for line in tail if line.startswith("#di_")] == [
        "#di_subprogram",
        "#di_lexical_block",
    ]
    assert print_module(parse_module(out, "again.mlir"), debuginfo=True) == out


def test_float_attr_keeps_hex_bits():
    a = attr("0x7FC00001 : f32")
    assert isinstance(a, FloatAttr) and a.bits == 0x7FC00001


INT_ATTRS = (
    '"x.y"() {a = 5, b = 5 : i32, c = [1, 2], d = 3 : index, e = {f = 7}, g = -1 : i64, '
    "h = [3 : i32, 4 : i64], k = true, l = 1 : i1, n = 255 : ui8, o = -3 : si16, p = 2.5, "
    "q = [1.5]} : () -> ()"
)


def test_integer_attribute_types_print_as_mlir_does():
    """Generic and custom print of attr-dict values match mlir-opt's (``5 : i64``, ``[1, 2]``)."""
    m = parse_module(INT_ATTRS, "t.mlir", allow_unregistered=True)
    generic = print_module(m, generic=True)
    assert "a = 5 : i64" in generic and "e = {f = 7 : i64}" in generic and "c = [1, 2]" in generic
    assert "h = [3 : i32, 4]" in generic and "p = 2.500000e+00 : f64" in generic
    assert print_module(parse_module(generic, allow_unregistered=True), generic=True) == generic
    try:
        from mlir import ir
    except Exception:  # noqa: BLE001 - the bindings are an optional extra
        pytest.skip("MLIR Python bindings unavailable")
    with ir.Context() as ctx:
        ctx.allow_unregistered_dialects = True
        want = ir.Module.parse(INT_ATTRS).operation.get_asm(print_generic_op_form=True)
    assert generic.strip() == want.strip()
