"""Parser: module structure, SSA scoping and its diagnostics, generic form, aliases, locations,
and bad input (always a located DiagnosticError, never another exception)."""

from __future__ import annotations

import random

import pytest

from tilegen.runtime.asm import parse_module, print_module
from tilegen.runtime.attributes import (
    CallSiteLoc,
    FileLineColLoc,
    FusedLoc,
    NameLoc,
    UnknownLoc,
)
from tilegen.runtime.diagnostics import DiagnosticError

FUNC = "cuda_tile.module @m {{\n  testing$func @f({args}) {{\n{ops}\n  }}\n}}\n"


def func(ops: str, args: str = "%a: tile<2xf32>") -> str:
    return FUNC.format(args=args, ops=ops)


def error_of(text: str, **kw):
    with pytest.raises(DiagnosticError) as info:
        parse_module(text, "t.mlir", **kw)
    return info.value.diag


def ops_of(module, name):
    return [o for o in module.walk() if o.name == name]


def test_implicit_module_and_bare_names():
    m = parse_module(func("%0 = absf %a : tile<2xf32>"), "t.mlir")
    assert m.name == "builtin.module" and m.loc == FileLineColLoc("t.mlir", 0, 0)
    (inner,) = m.regions[0].block.ops
    assert inner.name == "cuda_tile.module"
    assert len(ops_of(m, "cuda_tile.absf")) == 1


def test_single_builtin_module_is_not_wrapped_and_no_implicit_module():
    m = parse_module('module {\n  "x.y"() : () -> ()\n}', allow_unregistered=True)
    assert m.name == "builtin.module" and m.regions[0].block.ops[0].name == "x.y"
    op = parse_module(func(""), no_implicit_module=True)
    assert op.name == "cuda_tile.module"
    d = error_of(
        '"a"() : () -> ()\n"b"() : () -> ()', allow_unregistered=True, no_implicit_module=True
    )
    assert d.message == "source must contain a single top-level operation, found: 2"


def test_text_alias_resolves():
    m = parse_module(func("%0 = fpowf %a, %a : tile<2xf32>"), "t.mlir")
    assert len(ops_of(m, "cuda_tile.pow")) == 1


def test_forward_reference_within_block_is_resolved():
    m = parse_module(
        '"a"() ({\n  "use"(%v) : (i32) -> ()\n  %v = "def"() : () -> i32\n}) : () -> ()',
        allow_unregistered=True,
    )
    use, define = m.regions[0].block.ops[0].regions[0].block.ops
    assert use.operands[0] is define.results[0]
    assert define.results[0].uses == [(use, 0)]


def test_use_with_different_type_reports_prior_use():
    d = error_of(func("%0 = addf %a, %a : tile<4xf32>"))
    assert d.message == (
        "use of value '%a' expects different type than prior uses: "
        "'!cuda_tile.tile<4xf32>' vs '!cuda_tile.tile<2xf32>'"
    )
    assert (d.loc.line, d.loc.col) == (3, 11)
    assert [(n.message, n.loc.line) for n in d.notes] == [("prior use here", 2)]


def test_undeclared_redefined_and_result_count():
    d = error_of(func("%0 = absf %nope : tile<2xf32>"))
    assert d.message == "use of undeclared SSA value name" and d.loc.col == 11
    d = error_of(func("%0 = absf %a : tile<2xf32>\n%0 = absf %a : tile<2xf32>"))
    assert d.message == "redefinition of SSA value '%0'" and d.loc.line == 4
    assert d.notes[0].message == "previously defined here"
    d = error_of(func("%0:2 = absf %a : tile<2xf32>"))
    assert d.message == "operation defines 1 results but was provided 2 to bind"
    d = error_of(func('%0 = "cuda_tile.return"() : () -> ()'))
    assert d.message == "cannot name an operation with no results"


def test_values_of_a_region_are_not_visible_after_it():
    d = error_of(
        func(
            "%c = constant <i1: true> : tile<i1>\nif %c {\n  %in = absf %a : tile<2xf32>\n}\n"
            "%1 = absf %in : tile<2xf32>"
        )
    )
    assert d.message == "use of undeclared SSA value name" and d.loc.line == 7


def test_outer_values_stay_visible_in_nested_regions_as_in_mlir():
    # MLIR's parser does not isolate IsolatedFromAbove regions; its verifier rejects the use.
    text = (
        '%x = "outer"() : () -> !cuda_tile.tile<2xf32>\n'
        "cuda_tile.module @m {\n  testing$func @f() {\n    %0 = absf %x : tile<2xf32>\n  }\n}\n"
    )
    m = parse_module(text, allow_unregistered=True)
    outer = m.regions[0].block.ops[0]
    (absf,) = ops_of(m, "cuda_tile.absf")
    assert absf.operands[0] is outer.results[0]
    text = text.replace("@f()", "@f(%x: tile<2xf32>)").replace("absf %x", "absf %x")
    d = error_of(text, allow_unregistered=True)
    assert d.message == "region entry argument '%x' is already in use"
    assert d.notes[0].message == "previously referenced here" and d.notes[0].loc.line == 1


def test_unknown_and_unregistered_ops():
    assert error_of(func("%0 = frobnicate %a : tile<2xf32>")).message == (
        "custom op 'frobnicate' is unknown (tried 'cuda_tile.frobnicate' as well)"
    )
    d = error_of('"foo.bar"() : () -> ()')
    assert d.message.startswith("operation being parsed with an unregistered dialect")
    d = error_of('"cuda_tile.nope"() : () -> ()')
    assert d.message == (
        "unregistered operation 'cuda_tile.nope' found in dialect ('cuda_tile') that does not "
        "allow unknown operations"
    )


def test_generic_unregistered_op_keeps_properties_regions_successors():
    text = (
        '"t.op"() ({\n^bb0(%arg0: i32):\n  "t.br"()[^bb1] : () -> ()\n^bb1:\n'
        '  "t.end"() : () -> ()\n}) <{p = 1 : i32}> : () -> ()'
    )
    text = text.replace(" <{p = 1 : i32}>", "")
    text = text.replace('"t.op"()', '"t.op"() <{p = 1 : i32}>')
    m = parse_module(text, allow_unregistered=True)
    op = m.regions[0].block.ops[0]
    assert set(op.properties) == {"p"} and not op.attributes
    br = op.regions[0].blocks[0].ops[0]
    assert br.successors == [op.regions[0].blocks[1]]
    printed = print_module(m)
    assert '"t.br"()[^bb1] : () -> ()' in printed
    assert print_module(parse_module(printed, allow_unregistered=True)) == printed


def test_alias_definitions_and_deferred_location_aliases():
    text = (
        "!t = !cuda_tile.tile<2xf32>\n#one = 1 : i32\n"
        '"u.op"() {v = #one} : () -> !t loc(#later)\n'
        '#later = loc("src.py":7:9)\n'
    )
    m = parse_module(text, allow_unregistered=True)
    op = m.regions[0].block.ops[0]
    assert op.loc == FileLineColLoc("src.py", 7, 9)
    assert "v = 1 : i32" in print_module(m)
    d = error_of('"u.op"() : () -> () loc(#missing)', allow_unregistered=True)
    assert d.message == "operation location alias was never defined"


def test_location_forms():
    text = (
        '"a"() : () -> () loc("n"("f":1:2))\n'
        '"b"() : () -> () loc(callsite("x":1:1 at "y":2:2))\n'
        '"c"() : () -> () loc(fused<"m">["p":1:1, unknown])\n'
    )
    a, b, c = parse_module(text, allow_unregistered=True).regions[0].block.ops
    assert a.loc == NameLoc("n", FileLineColLoc("f", 1, 2))
    assert b.loc == CallSiteLoc(FileLineColLoc("x", 1, 1), FileLineColLoc("y", 2, 2))
    assert isinstance(c.loc, FusedLoc) and c.loc.locations[1] == UnknownLoc()
    printed = print_module(parse_module(text, allow_unregistered=True), debuginfo=True)
    assert '= loc("n"(#loc' in printed and "loc(callsite(" in printed and "fused<" in printed


BAD = {
    # MLIR reports an unexpected end of file just after the previous token (line 4's `}`)
    "truncated": (func("%0 = absf %a : tile<2xf32>")[:-2], 4),
    "unknown op": (func("%0 = what %a"), 3),
    "unterminated string": ('"a"() {s = "x} : () -> ()', 1),
    "garbage bytes": ("\x00\x01\x02", 1),
    "missing colon": (func("%0 = absf %a tile<2xf32>"), 3),
    "bad type": (func("%0 = absf %a : tile<2x?xf32>"), 3),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input_gives_located_error(name):
    text, line = BAD[name]
    d = error_of(text, allow_unregistered=True)
    assert d.loc.file == "t.mlir" and d.loc.line == line, d.format()
    assert d.format().startswith(f"t.mlir:{line}:")


def test_random_corruption_never_raises_anything_else():
    rng = random.Random(7)
    base = func(
        "%0 = addf %a, %a rounding<zero> : tile<2xf32>\n%c = constant <f32: [1.0, 2.0]> : tile<2xf32>\n"
        "%1 = reduce %0 dim=0 identities=[0.0 : f32] : tile<2xf32> -> tile<f32>\n"
        "(%x: tile<f32>, %y: tile<f32>) {\n  %s = addf %x, %y : tile<f32>\n  yield %s : tile<f32>\n}"
    )
    junk = ["@", '"', "%", "!", "#", "^", "<", ">", "{", "}", ":", "0x", "-", "(", "\x00", "\u00e9"]
    for _ in range(300):
        cut = rng.randrange(len(base))
        text = base[:cut] + rng.choice(junk) + base[cut + rng.randrange(3) :]
        try:
            parse_module(text, "t.mlir", allow_unregistered=True)
        except DiagnosticError as e:
            assert e.diag.loc is not None


def test_deep_nesting_is_a_diagnostic():
    d = error_of('"x"() {a = ' + "[" * 5000 + "} : () -> ()", allow_unregistered=True)
    assert d.message.startswith("nesting exceeds the supported depth of")  # runtime/limits.py
