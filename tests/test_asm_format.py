"""Declarative assembly formats: compilation, the generated table, ODS spacing, directives."""

from __future__ import annotations

import pytest

from tilegen.runtime.asm import parse_module, print_module
from tilegen.runtime.asm.format import compile_format, compile_opdef, program_for
from tilegen.runtime.diagnostics import DiagnosticError
from tilegen.runtime.opdef import all_ops, lookup_opdef


def test_every_declarative_format_compiles_and_matches_generated_table():
    import importlib

    declarative = [o for o in all_ops() if o.format]
    assert len([o for o in declarative if o.dialect == "cuda_tile"]) >= 90
    for op in declarative:
        formats = importlib.import_module(f"tilegen.generated.{op.dialect}.formats")
        assert formats.FORMAT_SOURCES[op.mnemonic] == op.format, op.name
        assert formats.FORMATS[op.mnemonic] == compile_opdef(op), op.name
        assert program_for(op) == formats.FORMATS[op.mnemonic]


def test_compile_shapes():
    prog = compile_format(
        "$lhs `,` $rhs (`overflow` `` $overflow^)? attr-dict `:` custom<CudaTileType>(type($result))",
        ["lhs", "rhs"],
        ["result"],
        ["overflow"],
    )
    assert prog == (
        ("operand", "lhs"),
        ("lit", ","),
        ("operand", "rhs"),
        (
            "optional",
            ("attr", "overflow"),
            (("lit", "overflow"), ("space", ""), ("attr", "overflow")),
            (),
        ),
        ("attr_dict", False),
        ("lit", ":"),
        ("custom", "CudaTileType", (("type", ("result", "result")),)),
    )


def test_compile_rejects_unknown_variable():
    with pytest.raises(ValueError):
        compile_format("$nope attr-dict", ["x"])


def body(ops: str, args: str = "%a: tile<2xf32>, %b: tile<2xf32>") -> str:
    return f"cuda_tile.module @m {{\n  testing$func @f({args}) {{\n{ops}\n  }}\n}}\n"


def round_trip(ops: str, args: str = "%a: tile<2xf32>, %b: tile<2xf32>") -> list[str]:
    text = print_module(parse_module(body(ops, args), "t.mlir"))
    lines = [line.strip() for line in text.splitlines()]
    return lines[3:-4]  # the ops inside the function (return elided)


@pytest.mark.parametrize(
    "src,printed",
    [
        # the default rounding prints nothing but its space stays (ODS's static spacing)
        ("%0 = addf %a, %b : tile<2xf32>", "%0 = addf %arg0, %arg1  : tile<2xf32>"),
        (
            "%0 = addf %a, %b rounding<zero> flush_to_zero : tile<2xf32>",
            "%0 = addf %arg0, %arg1 rounding<zero> flush_to_zero : tile<2xf32>",
        ),
        (
            "%0 = maxf %a, %b propagate_nan flush_to_zero : tile<2xf32>",
            "%0 = maxf %arg0, %arg1 flush_to_zero propagate_nan : tile<2xf32>",
        ),
        (
            "%0 = cmpf less_than ordered %a, %b : tile<2xf32> -> tile<2xi1>",
            "%0 = cmpf less_than ordered %arg0, %arg1 : tile<2xf32> -> tile<2xi1>",
        ),
        ("%0 = exp %a rounding<full> : tile<2xf32>", "%0 = exp %arg0  : tile<2xf32>"),
        (
            "%0 = exp %a rounding<approx> : tile<2xf32>",
            "%0 = exp %arg0 rounding<approx> : tile<2xf32>",
        ),
        (
            "%0 = addf %a, %b {foo = 1 : i32} : tile<2xf32>",
            "%0 = addf %arg0, %arg1  {foo = 1 : i32} : tile<2xf32>",
        ),
    ],
)
def test_float_op_printing(src, printed):
    assert round_trip(src) == [printed]


def test_integer_ops_overflow_and_signedness():
    args = "%a: tile<4xi32>, %b: tile<4xi32>"
    assert round_trip(
        "%0 = addi %a, %b overflow<no_wrap> : tile<4xi32>\n"
        "%1 = addi %a, %b overflow<none> : tile<4xi32>\n"
        "%2 = divi %a, %b unsigned rounding<zero> : tile<4xi32>\n"
        "%3 = divi %a, %b signed rounding<positive_inf> : tile<4xi32>\n"
        "%4 = cmpi less_than %a, %b, signed : tile<4xi32> -> tile<4xi1>",
        args,
    ) == [
        "%0 = addi %arg0, %arg1 overflow<no_wrap> : tile<4xi32>",
        "%1 = addi %arg0, %arg1 : tile<4xi32>",
        "%2 = divi %arg0, %arg1 unsigned : tile<4xi32>",
        "%3 = divi %arg0, %arg1 signed rounding<positive_inf> : tile<4xi32>",
        "%4 = cmpi less_than %arg0, %arg1, signed : tile<4xi32> -> tile<4xi1>",
    ]


def test_attr_dict_entry_overrides_what_the_format_set():
    """MLIR stores format-parsed inherent attributes in properties, then applies the attr-dict
    on top (Operation::create -> setAttrs -> setInherentAttr): no duplicate error, and the
    attr-dict's value is the one kept (even over a directive's default)."""
    assert round_trip(
        "%0 = addf %a, %b rounding<zero> {rounding_mode = #cuda_tile.rounding<positive_inf>}"
        " : tile<2xf32>\n"
        "%1 = addf %a, %b {rounding_mode = #cuda_tile.rounding<negative_inf>} : tile<2xf32>\n"
        "%2 = addf %a, %b flush_to_zero {flush_to_zero, foo = 1 : i32} : tile<2xf32>"
    ) == [
        "%0 = addf %arg0, %arg1 rounding<positive_inf> : tile<2xf32>",
        "%1 = addf %arg0, %arg1 rounding<negative_inf> : tile<2xf32>",
        "%2 = addf %arg0, %arg1  flush_to_zero {foo = 1 : i32} : tile<2xf32>",
    ]


def test_types_of_unprinted_operands_are_inferred():
    m = parse_module(body("%0 = subf %a, %b : tile<2xf32>"), "t.mlir")
    op = next(o for o in m.walk() if o.name == "cuda_tile.subf")
    assert [str(v.type.shape) for v in op.operands] == ["(2,)", "(2,)"]
    assert op.results[0].type == op.operands[0].type


def test_generic_form_properties_merge_into_attributes():
    m = parse_module(
        body(
            '%0 = "cuda_tile.addi"(%a, %b) <{overflow = #cuda_tile.overflow<no_signed_wrap>}> '
            "{x} : (!cuda_tile.tile<4xi32>, !cuda_tile.tile<4xi32>) -> !cuda_tile.tile<4xi32>",
            "%a: tile<4xi32>, %b: tile<4xi32>",
        ),
        "t.mlir",
    )
    op = next(o for o in m.walk() if o.name == "cuda_tile.addi")
    assert set(op.attributes) == {"overflow", "x"} and not op.properties
    generic = print_module(m, generic=True)
    assert "<{overflow = #cuda_tile.overflow<no_signed_wrap>}> {x}" in generic


@pytest.mark.parametrize(
    "src,message,col",
    [
        (
            "%0 = addf %a, %b rounding<approx> : tile<2xf32>",
            "custom op 'cuda_tile.addf' expected rounding mode to be one of: 'nearest_even', 'zero', "
            "'negative_inf', 'positive_inf', got: 'approx'",
            27,
        ),
        (
            "%0 = divf %a, %b rounding<bogus> : tile<2xf32>",
            "custom op 'cuda_tile.divf' expected rounding mode to be one of: 'nearest_even', 'zero', "
            "'negative_inf', 'positive_inf', 'approx', 'full'",
            27,
        ),
        (
            "%0 = cmpf bogus ordered %a, %b : tile<2xf32> -> tile<2xi1>",
            "custom op 'cuda_tile.cmpf' expected 'comparison_predicate' to be one of: {'equal', "
            "'not_equal', 'less_than', 'less_than_or_equal', 'greater_than', 'greater_than_or_equal'}",
            11,
        ),
        (
            "%0 = cmpf equal bogus %a, %b : tile<2xf32> -> tile<2xi1>",
            "custom op 'cuda_tile.cmpf' expected 'comparison_ordering' to be one of: {'ordered', "
            "'unordered'}",
            17,
        ),
        # punctuation errors are never prefixed and point just past the previous token
        ("%0 = addf %a %b : tile<2xf32>", "expected ','", 13),
        ("%0 = addf %a, %b : ", "custom op 'cuda_tile.addf' expected valid keyword", 3),
    ],
)
def test_directive_diagnostics(src, message, col):
    with pytest.raises(DiagnosticError) as info:
        parse_module(body(src), "t.mlir")
    d = info.value.diag
    assert d.message == message
    assert d.loc.col == col


def test_missing_keyword_reports_both_errors_like_mlir():
    with pytest.raises(DiagnosticError) as info:
        parse_module(body("%0 = cmpf equal %a, %b : tile<2xf32> -> tile<2xi1>"), "t.mlir")
    e = info.value
    assert [d.message for d in e.preceding] == ["custom op 'cuda_tile.cmpf' expected valid keyword"]
    assert e.diag.message.startswith("custom op 'cuda_tile.cmpf' expected 'comparison_ordering'")
    assert e.preceding[0].loc == e.diag.loc and e.diag.loc.col == 17


def test_optional_enum_group_does_not_swallow_other_keywords():
    # memory_scope is optional: an unknown keyword is left for the next element to reject
    with pytest.raises(DiagnosticError) as info:
        parse_module(
            body(
                "%0, %t = load_ptr_tko weak blah %p : tile<4xptr<f32>> -> tile<4xf32>, token",
                "%p: tile<4xptr<f32>>",
            ),
            "t.mlir",
        )
    assert info.value.diag.message == "expected SSA operand"


def test_reduce_argument_region_layout():
    lines = print_module(
        parse_module(
            body(
                "%0 = reduce %a dim=0 identities=[0.0 : f32] : tile<2xf32> -> tile<f32>\n"
                "(%x: tile<f32>, %y: tile<f32>) {\n  %s = addf %x, %y : tile<f32>\n  yield %s : tile<f32>\n}",
                "%a: tile<2xf32>",
            ),
            "t.mlir",
        )
    ).splitlines()
    i = next(i for i, line in enumerate(lines) if "= reduce" in line)
    assert lines[i].endswith("identities=[0.000000e+00 : f32] : tile<2xf32> -> tile<f32> ")
    indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
    assert lines[i + 1].startswith(indent + "(%") and lines[i + 1].endswith(": tile<f32>) {")
    assert lines[i + 4] == indent + "}"


def test_if_region_elides_empty_yield_only():
    out = round_trip(
        "%c = constant <i1: true> : tile<i1>\n"
        "if %c {\n  yield\n}\n"
        "%r = if %c -> (tile<2xf32>) {\n  yield %a : tile<2xf32>\n} else {\n  yield %b : tile<2xf32>\n}"
    )
    assert out[1:4] == ["if %true {", "}", "%0 = if %true -> (tile<2xf32>) {"]
    assert "yield %arg0 : tile<2xf32>" in out


def test_opdef_lookup_sanity():
    assert lookup_opdef("cuda_tile.addf").format
