"""Printer: MLIR's SSA naming (breadth-first numbering, name hints, conflict suffixes, result
groups), region layout, default-dialect elision and the generic form."""

from __future__ import annotations

from tilegen.runtime.asm import parse_module, print_module
from tilegen.runtime.asm.printer import sanitize_identifier


def show(text: str, **kw) -> list[str]:
    return print_module(parse_module(text, "t.mlir", allow_unregistered=True), **kw).splitlines()


def test_numbering_is_breadth_first_per_region():
    lines = show(
        '"a"() ({\n'
        '  %x = "p"() : () -> i32\n'
        '  "r"() ({\n    %y = "q"() : () -> i32\n  }) : () -> ()\n'
        '  %z = "p"() : () -> i32\n'
        "}) : () -> ()"
    )
    # the nested region's value is numbered after every value of the enclosing region
    assert '    %0 = "p"() : () -> i32' in lines
    assert '      %2 = "q"() : () -> i32' in lines
    assert '    %1 = "p"() : () -> i32' in lines


def test_result_groups_and_uses():
    lines = show(
        '%a:2 = "two"() : () -> (i32, i32)\n'
        '"use"(%a#0, %a#1) : (i32, i32) -> ()\n'
        '%b = "one"() : () -> i32\n'
        '"use"(%b) : (i32) -> ()'
    )
    assert lines[1:5] == [
        '  %0:2 = "two"() : () -> (i32, i32)',
        '  "use"(%0#0, %0#1) : (i32, i32) -> ()',
        '  %1 = "one"() : () -> i32',
        '  "use"(%1) : (i32) -> ()',
    ]


def test_block_arguments_and_blocks():
    lines = show('"f"() ({\n^bb0(%x: i32, %y: i32):\n  "use"(%y) : (i32) -> ()\n}) : () -> ()')
    assert lines[2] == "  ^bb0(%arg0: i32, %arg1: i32):"
    assert lines[3] == '    "use"(%arg1) : (i32) -> ()'


def test_name_hints_conflicts_and_generic_form():
    text = (
        "cuda_tile.module @m {\n  entry @e() {\n"
        "    %a = constant <i32: 1> : tile<i32>\n"
        "    %b = constant <i32: 1> : tile<i32>\n"
        "    %c = addi %a, %b : tile<i32>\n  }\n}"
    )
    custom = [line.strip() for line in show(text)]
    hinted = [line for line in custom if line.startswith("%cst")]
    assert len(hinted) == 2 and hinted[0].split(" ")[0] + "_0" == hinted[1].split(" ")[0]
    assert "%0 = addi" in " ".join(custom)
    generic = "\n".join(show(text, generic=True))
    assert "%cst" not in generic and '%2 = "cuda_tile.addi"(%0, %1)' in generic


def test_default_dialect_prefix_elision():
    lines = show("cuda_tile.module @m {\n  entry @e() {\n  }\n}")
    assert lines[1] == "  cuda_tile.module @m {"
    assert lines[2].startswith("    entry @e()")
    assert lines[3] == "      return"


def test_sanitize_identifier():
    assert sanitize_identifier("cst_1_i32") == "cst_1_i32"
    assert sanitize_identifier("1x") == "_1x"
    assert sanitize_identifier("a b!") == "a_b21"
