"""Custom op syntax hooks (runtime/asm/custom_ops.py): exact printed form, fixpoint, diagnostics."""

from pathlib import Path

import pytest

from tilegen.runtime.asm import parse_module, print_module
from tilegen.runtime.attributes import UnitAttr
from tilegen.runtime.diagnostics import DiagnosticError

DATA = Path(__file__).parent / "data" / "asm_custom"


def _roundtrip(text: str) -> str:
    out = print_module(parse_module(text, "t.mlir"))
    assert print_module(parse_module(out, "t2.mlir")) == out, "printer output is not a fixpoint"
    return out


@pytest.mark.parametrize("name", ["views_and_loops", "multimem_and_testing"])
def test_custom_ops_print_exactly_and_reach_fixpoint(name):
    text = (DATA / f"{name}.mlir").read_text()
    assert _roundtrip(text) == (DATA / f"{name}.expected").read_text()


def _ops(name: str) -> dict:
    out: dict = {}
    for op in parse_module((DATA / f"{name}.mlir").read_text(), "t.mlir").walk():
        out.setdefault(op.name, []).append(op)
    return out


def test_parsed_structure():
    ops = _ops("views_and_loops")
    entry = ops["cuda_tile.entry"][0]
    assert [k for k, _ in entry.attributes["optimization_hints"].entries] == ["sm_100", "sm_120"]
    assert entry.attributes["arg_attrs"].values[0].get("cuda_tile.foo").value == 1
    assert entry.regions[0].blocks[0].ops[-1].name == "cuda_tile.return"  # implicit return
    assert len(entry.attributes["function_type"].value.inputs) == 2
    tv = ops["cuda_tile.make_tensor_view"][0]
    assert tv.attributes["operandSegmentSizes"].values == (1, 1, 0)
    load = ops["cuda_tile.load_view_tko"][0]
    assert load.attributes["memory_ordering_semantics"].value == 1  # relaxed
    assert load.attributes["memory_scope"].value == 1  # device
    assert load.attributes["operandSegmentSizes"].values == (1, 2, 1)
    first, second = ops["cuda_tile.for"]
    assert isinstance(first.attributes["unsignedCmp"], UnitAttr)
    assert "unsignedCmp" not in second.attributes
    # the empty body got its implicit continue (which the printer elides again)
    assert [o.name for o in second.regions[0].blocks[0].ops] == ["cuda_tile.continue"]
    assert len(ops["cuda_tile.get_index_space_shape"][0].results) == 2
    assert ops["cuda_tile.atomic_red_view_tko"][0].attributes["mode"].value == 4  # addf
    mm = _ops("multimem_and_testing")
    load_reduce = mm["cuda_tile.multimem_load_reduce_view_tko"][0]
    assert load_reduce.attributes["inbounds"].values == (True, False)
    assert load_reduce.attributes["reduction"].value == 0  # add, the default


def test_loop_elides_only_operand_free_continue():
    text = (
        "cuda_tile.module @m {\n  testing$func @f(%c: tile<i1>, %x: tile<i32>) {\n"
        "    loop iter_values(%a = %x) : tile<i32> {\n"
        "      if %c {\n        break\n      }\n      continue %a : tile<i32>\n    }\n"
        "    loop {\n      continue\n    }\n  }\n}\n"
    )
    out = _roundtrip(text)
    assert (
        "        if %arg0 {\n          break\n        }\n        continue %arg2 : tile<i32>\n"
        in out
    )
    assert "      loop {\n      }\n" in out


VIEW = "partition_view<tile=(8), tensor_view<128xf32, strides=[1]>>"


def _func(body: str) -> str:
    return (
        "cuda_tile.module @m {\n"
        f"  testing$func @f(%t: tile<8xf32>, %v: {VIEW}, %i: tile<i32>) {{\n"
        f"    {body}\n"
        "  }\n}\n"
    )


def _mod(body: str) -> str:
    return "cuda_tile.module @m {\n  " + body + "\n}\n"


TV = "tensor_view<32xf32, strides=[1]>"

# (source, message, text the error points at)
DIAGNOSTICS = [
    (
        _func(f"%x = store_view_tko invalid %t, %v[%i] : tile<8xf32>, {VIEW}, tile<i32> -> token"),
        'invalid memory_ordering_semantics attribute specification. Got "invalid" but expect one '
        "of: weak, relaxed, acquire, release, acq_rel",
        "invalid",
    ),
    (
        _func(
            f"%x = store_view_tko relaxed bogus %t, %v[%i] : tile<8xf32>, {VIEW}, tile<i32> -> token"
        ),
        'invalid memory_scope attribute specification. Got "bogus" but expect one of: tl_blk, '
        "device, sys",
        "bogus",
    ),
    (
        _func(
            f"%x, %y = load_view_tko weak device %v[%i] : {VIEW}, tile<i32> -> tile<8xf32>, token"
        ),
        'operation specifies weak memory ordering semantics, but then provides "device" scope, '
        "expected no memory scope.",
        "device",
    ),
    (
        _func(
            f"%x = atomic_red_view_tko relaxed device %v[%i], nand, %t : tile<8xf32>, {VIEW}, "
            "tile<i32> -> token"
        ),
        "unknown atomic RMW mode: 'nand'; expected one of: and, or, xor, add, addf, max, min, "
        "umax, umin",
        "nand",
    ),
    (
        _func(
            f"%x = atomic_red_view_tko foo device %v[%i], add, %t : tile<8xf32>, {VIEW}, "
            "tile<i32> -> token"
        ),
        "invalid memory_ordering_semantics: 'foo'; expected one of: weak, relaxed, acquire, "
        "release, acq_rel",
        "foo",
    ),
    (
        _func("%x = make_partition_view %v : tensor_view<128xf32, strides=[1]>"),
        "'cuda_tile.make_partition_view' expected 'partition_view' type, but got "
        "'!cuda_tile.tensor_view<128xf32, strides=[1]>'",
        "tensor_view<128",
    ),
    (
        _func("%x:1 = get_tensor_shape %t : tile<8xf32> -> tile<i32>"),
        "'cuda_tile.get_tensor_shape' expected tensor_view, got '!cuda_tile.tile<8xf32>'",
        "tile<8xf32> ->",
    ),
    (
        _func("loop iter_values(%a = %i) : tile<i32>, tile<i32> { }"),
        "found different number of iter_values and types",
        "{ }",
    ),
    (_func("loop : { }"), "expected valid keyword", "{ }"),
    (
        _func(f"%p = make_tensor_view %t, shape = [32, x], strides = [1] : {TV}"),
        "expected either integer or SSA value",
        "x]",
    ),
    (
        _func(f"%p = make_tensor_view %t, shape = [], strides = [1] : {TV}"),
        "expected shape declaration to contain 1 elements due to tensor_view type, but 0 were "
        "provided",
        ": tensor_view",
    ),
    (
        _func(f"%p = make_tensor_view %t, shape = [64], strides = [1] : {TV}"),
        "input shape dimension 0 does not match tensor_view type (expected 32, got 64)",
        ": tensor_view",
    ),
    (
        _func(f"%p = make_tensor_view %t, shape = [%i], strides = [1] : tile<i32> -> {TV}"),
        "input shape dimension 0 does not match tensor_view type (expected 32, got dynamic)",
        ": tile<i32>",
    ),
    (
        _func(
            "%p = make_tensor_view %t, shape = [32], strides = [2] : tensor_view<?xf32, strides=[1]>"
        ),
        "input shape dimension 0 does not match tensor_view type (expected dynamic, got 32)",
        ": tensor_view",
    ),
    (
        _mod("entry @k() optimization_hints=<sm_100=2> { }"),
        "custom op 'cuda_tile.entry' expected dictionary attribute for optimization_hints entry "
        "`sm_100` got value=2 : i64",
        "2>",
    ),
    (_mod("entry @k() optimization_hints=<2> { }"), "expected valid keyword or string", "2>"),
    (_mod("entry pluto @k() { }"), "expected valid '@'-identifier for symbol name", "pluto"),
    (
        _mod("testing$func @k(%a: tile<i32>, tile<i32>) { }"),
        "expected SSA identifier",
        "tile<i32>)",
    ),
    (
        _mod("testing$func @k(tile<i32>, %a: tile<i32>) { }"),
        "expected type instead of SSA identifier",
        "%a",
    ),
]


@pytest.mark.parametrize("text,message,marker", DIAGNOSTICS)
def test_custom_syntax_diagnostics(text, message, marker):
    with pytest.raises(DiagnosticError) as info:
        parse_module(text, "d.mlir")
    diag = info.value.diag
    assert message in diag.message
    lines = list(enumerate(text.splitlines(), 1))
    line_no, line = next((i, ln) for i, ln in reversed(lines) if marker in ln)
    assert (diag.loc.file, diag.loc.line, diag.loc.col) == (
        "d.mlir",
        line_no,
        line.index(marker) + 1,
    )


def test_operands_defined_inside_the_body_are_undeclared():
    text = _mod(
        "testing$func @f() {\n"
        "    %r = loop iter_values(%a = %foo) : tile<i32> -> tile<i32> {\n"
        "      %foo = constant <i32: 1> : tile<i32>\n"
        "      break %foo : tile<i32>\n"
        "    }\n  }"
    )
    with pytest.raises(DiagnosticError) as info:
        parse_module(text, "u.mlir")
    assert info.value.diag.message == "use of undeclared SSA value name"
    assert info.value.diag.loc.line == 3


@pytest.mark.parametrize(
    "generic",
    [
        '"cuda_tile.entry"() ({}) : () -> ()',
        '"cuda_tile.for"() : () -> ()',
        '%0:2 = "cuda_tile.load_view_tko"() : () -> (!cuda_tile.tile<i32>, !cuda_tile.token)',
        '%a = "cuda_tile.make_token"() : () -> !cuda_tile.token\n'
        '%0 = "cuda_tile.make_tensor_view"(%a, %a) <{operandSegmentSizes = array<i32: 1, 1, 0>}> '
        ": (!cuda_tile.token, !cuda_tile.token) -> !cuda_tile.tensor_view<32xf32, strides=[1]>",
    ],
)
def test_malformed_ops_print_in_generic_form(generic):
    out = print_module(parse_module(generic, "g.mlir"))
    name = generic.split('"')[-2] if "make_tensor_view" in generic else generic.split('"')[1]
    assert f'"{name}"(' in out
    # and what was printed parses back
    parse_module(out, "g2.mlir")


DISCARDABLE = """cuda_tile.module @m {
  entry @k(%a: tile<ptr<f32>>, %n: tile<i32>) {
    %tv = make_tensor_view %a, shape = [%n], strides = [1] {x.a = 1 : i32} : tile<i32> -> tensor_view<?xf32, strides=[1]>
    %pv = make_partition_view %tv {x.b} : partition_view<tile=(4), tensor_view<?xf32, strides=[1]>>
    %s = get_tensor_shape %tv {x.c} : tensor_view<?xf32, strides=[1]> -> tile<i32>
    %q = get_index_space_shape %pv {x.d} : partition_view<tile=(4), tensor_view<?xf32, strides=[1]>> -> tile<i32>
    %t, %k = load_view_tko weak %pv[%n] attributes {x.e} : partition_view<tile=(4), tensor_view<?xf32, strides=[1]>>, tile<i32> -> tile<4xf32>, token
    %k2 = store_view_tko weak %t, %pv[%n] attributes {x.f} : tile<4xf32>, partition_view<tile=(4), tensor_view<?xf32, strides=[1]>>, tile<i32> -> token
    for %i in (%n to %n, step %n) : tile<i32> {
    } {x.g}
    loop {
      break
    } {x.h}
  } {x.i}
}
"""


def test_discardable_attributes_survive_round_trip():
    out = _roundtrip(DISCARDABLE)
    for name in "abcdefghi":
        assert f"x.{name}" in out
    ops = {op.name: op for op in parse_module(out, "r.mlir").walk()}
    assert "x.i" in ops["cuda_tile.entry"].attributes
    assert "x.e" in ops["cuda_tile.load_view_tko"].attributes
    assert "operandSegmentSizes" not in out
