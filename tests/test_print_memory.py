"""Printing and verifying large modules in bounded memory, with unchanged output.

* The printer numbers values as it prints and drops a number once its uses are printed
  (``printer.SSANames`` with ``lazy=True``); the names must stay those of MLIR's up-front
  numbering, nested regions, later blocks and forward references included.
* ``printer.print_spooled`` (``tilegen-translate -cudatilebc-to-mlir``) holds the finished text
  compressed; its text is ``print_module``'s, also when a hook takes back spooled text.
* The verifier's dominance check keeps only the ops whose results still have uses to check.
* An op with one result keeps the result itself, not a one-element tuple.
"""

from __future__ import annotations

import tracemalloc

import pytest

from tilegen.runtime.asm import parse_module, print_module
from tilegen.runtime.asm import custom_ops, printer
from tilegen.runtime.asm.printer import OpPrinter, SSANames, print_spooled
from tilegen.runtime.bytecode import read_bytecode, write_bytecode
from tilegen.runtime.diagnostics import DiagnosticEngine
from tilegen.runtime.ir import Operation, OpResult
from tilegen.runtime.types import I32
from tilegen.runtime.verify import VerifyOptions, verify_module
from tilegen.tools import translate

# Uses before definitions: an earlier block, the same block, and a nested region; result groups.
FORWARD = """\
"test.func"() ({
^bb0(%a: tile<i32>):
  "test.br"(%x)[^bb2] : (tile<i32>) -> ()
^bb1:
  %x = "test.def"() : () -> tile<i32>
  %p:2 = "test.pair"(%x) : (tile<i32>) -> (tile<i32>, tile<i32>)
  "test.br"(%p#1)[^bb2] : (tile<i32>) -> ()
^bb2(%b: tile<i32>):
  %y = "test.use"(%b, %x, %z, %p#0) : (tile<i32>, tile<i32>, tile<i32>, tile<i32>) -> tile<i32>
  %z = "test.late"() : () -> tile<i32>
  "test.inner"() ({
    %w = "test.use"(%y, %q, %a) : (tile<i32>, tile<i32>, tile<i32>) -> tile<i32>
    "test.yield"(%w) : (tile<i32>) -> ()
  }) : () -> ()
  %q = "test.def"() : () -> tile<i32>
  "test.ret"(%y, %z) : (tile<i32>, tile<i32>) -> ()
}) : () -> ()
"""

# As printed before the printer numbered values lazily (tilegen 3778a81).
FORWARD_PRINTED = """\
module {
  "test.func"() ({
  ^bb0(%arg0: !cuda_tile.tile<i32>):
    "test.br"(%0)[^bb2] : (!cuda_tile.tile<i32>) -> ()
  ^bb1:
    %0 = "test.def"() : () -> !cuda_tile.tile<i32>
    %1:2 = "test.pair"(%0) : (!cuda_tile.tile<i32>) -> (!cuda_tile.tile<i32>, !cuda_tile.tile<i32>)
    "test.br"(%1#1)[^bb2] : (!cuda_tile.tile<i32>) -> ()
  ^bb2(%2: !cuda_tile.tile<i32>):
    %3 = "test.use"(%2, %0, %4, %1#0) : (!cuda_tile.tile<i32>, !cuda_tile.tile<i32>, \
!cuda_tile.tile<i32>, !cuda_tile.tile<i32>) -> !cuda_tile.tile<i32>
    %4 = "test.late"() : () -> !cuda_tile.tile<i32>
    "test.inner"() ({
      %6 = "test.use"(%3, %5, %arg0) : (!cuda_tile.tile<i32>, !cuda_tile.tile<i32>, \
!cuda_tile.tile<i32>) -> !cuda_tile.tile<i32>
      "test.yield"(%6) : (!cuda_tile.tile<i32>) -> ()
    }) : () -> ()
    %5 = "test.def"() : () -> !cuda_tile.tile<i32>
    "test.ret"(%3, %4) : (!cuda_tile.tile<i32>, !cuda_tile.tile<i32>) -> ()
  }) : () -> ()
}
"""

# Nested loops (hook-named block arguments, conflict suffixes), outer values used inside,
# result groups, if/else, and numbering restarting in sibling regions.
NESTED = """\
cuda_tile.module @m {
  entry @k(%arg0: tile<i32>, %arg1: tile<ptr<f32>>) {
    %c0 = constant <i32: 0> : tile<i32>
    %c1 = constant <i32: 1> : tile<i32>
    %c8 = constant <i32: 8> : tile<i32>
    %f = constant <f32: 0.0> : tile<f32>
    %r:2 = for %i in (%c0 to %c8, step %c1) : tile<i32> iter_values(%a = %arg0, %b = %f) \
-> (tile<i32>, tile<f32>) {
      %s = addi %a, %i : tile<i32>
      %t = addi %s, %arg0 : tile<i32>
      %u = for %j in (%c0 to %c8, step %c1) : tile<i32> iter_values(%x = %t) -> (tile<i32>) {
        %v = addi %x, %j : tile<i32>
        %w = addi %v, %s : tile<i32>
        continue %w : tile<i32>
      }
      %cst = constant <f32: 1.0> : tile<f32>
      %g = addf %b, %cst : tile<f32>
      continue %u, %g : tile<i32>, tile<f32>
    }
    %z = addi %r#0, %arg0 : tile<i32>
    %cond = cmpi equal %z, %c0, signed : tile<i32> -> tile<i1>
    %y = if %cond -> (tile<i32>) {
      %e = addi %z, %z : tile<i32>
      yield %e : tile<i32>
    } else {
      yield %z : tile<i32>
    }
    %q = addi %y, %r#0 : tile<i32>
    print_tko "%d", %q : tile<i32> -> token
    return
  }
}
"""

# tileirdisasm's layout (body_only, default dialect cuda_tile), as printed before (3778a81).
NESTED_PRINTED = """\
module @m {
  entry @k(%arg0: tile<i32>, %arg1: tile<ptr<f32>>) {
    %cst_0_i32 = constant <i32: 0> : tile<i32>
    %cst_1_i32 = constant <i32: 1> : tile<i32>
    %cst_8_i32 = constant <i32: 8> : tile<i32>
    %cst_0_f32 = constant <f32: 0.000000e+00> : tile<f32>
    %for:2 = for %loopIdx in (%cst_0_i32 to %cst_8_i32, step %cst_1_i32) : tile<i32> \
iter_values(%iterArg0 = %arg0, %iterArg1 = %cst_0_f32) -> (tile<i32>, tile<f32>) {
      %5 = addi %iterArg0, %loopIdx : tile<i32>
      %6 = addi %5, %arg0 : tile<i32>
      %for_0 = for %loopIdx_1 in (%cst_0_i32 to %cst_8_i32, step %cst_1_i32) : tile<i32> \
iter_values(%iterArg0_2 = %6) -> (tile<i32>) {
        %8 = addi %iterArg0_2, %loopIdx_1 : tile<i32>
        %9 = addi %8, %5 : tile<i32>
        continue %9 : tile<i32>
      }
      %cst_1_f32 = constant <f32: 1.000000e+00> : tile<f32>
      %7 = addf %iterArg1, %cst_1_f32  : tile<f32>
      continue %for_0, %7 : tile<i32>, tile<f32>
    }
    %0 = addi %for#0, %arg0 : tile<i32>
    %1 = cmpi equal %0, %cst_0_i32, signed : tile<i32> -> tile<i1>
    %2 = if %1 -> (tile<i32>) {
      %5 = addi %0, %0 : tile<i32>
      yield %5 : tile<i32>
    } else {
      yield %0 : tile<i32>
    }
    %3 = addi %2, %for#0 : tile<i32>
    %4 = print_tko "%d", %3 : tile<i32> -> token
    return
  }
}
"""

MODES = [
    {},
    {"generic": True},
    {"debuginfo": True},
    {"body_only": True, "default_dialect": "cuda_tile"},
]


def many_ops(n: int) -> str:
    """An entry with a chain of ``n`` addi ops (bench/hostile_input.py's many_ops)."""
    lines = ["cuda_tile.module @kernels {\n  entry @k(%arg0: tile<i32>) {\n"]
    prev = "%arg0"
    for i in range(n):
        lines.append(f"    %v{i} = addi {prev}, %arg0 : tile<i32>\n")
        prev = f"%v{i}"
    lines.append("    return\n  }\n}\n")
    return "".join(lines)


@pytest.fixture
def eager_names(monkeypatch):
    """Make the printer number everything up front, as it did before printing lazily."""

    class Eager(SSANames):
        def __init__(self, top, generic, lazy=False):
            super().__init__(top, generic, lazy=False)

    def use():
        monkeypatch.setattr(printer, "SSANames", Eager)

    return use


def test_lazy_numbering_prints_what_it_printed_before():
    forward = parse_module(FORWARD, "f.mlir", allow_unregistered=True)
    assert print_module(forward) == FORWARD_PRINTED
    nested = parse_module(NESTED, "n.mlir")
    assert print_module(nested, body_only=True, default_dialect="cuda_tile") == NESTED_PRINTED


@pytest.mark.parametrize("text", [FORWARD, NESTED, many_ops(300)], ids=["fwd", "nested", "flat"])
def test_lazy_numbering_equals_up_front_numbering(text, eager_names):
    m = parse_module(text, "t.mlir", allow_unregistered=True)
    lazy = [print_module(m, **kw) for kw in MODES]
    eager_names()
    assert [print_module(m, **kw) for kw in MODES] == lazy


def test_up_front_numbering_names_every_value():
    m = parse_module(NESTED, "n.mlir")
    names = SSANames(m, False)
    adds = [op for op in m.walk() if op.name == "cuda_tile.addi"]
    assert [names.ids[op.results[0]] for op in adds] == [5, 6, 8, 9, 0, 5, 3]
    assert [names.name(op.results[0]) for op in adds][:2] == ["%5", "%6"]


def test_the_name_table_keeps_only_values_still_to_be_used(monkeypatch):
    m = parse_module(many_ops(6000))
    sizes = []
    spill = OpPrinter._spill

    def watch(self):
        sizes.append(len(self._names.ids) + len(self._names.live))
        spill(self)

    monkeypatch.setattr(OpPrinter, "_spill", watch)
    print_spooled(m)
    assert len(sizes) > 5 and max(sizes) < 10  # 6,001 values: each dropped after its use


@pytest.mark.parametrize("kw", MODES, ids=["plain", "generic", "debuginfo", "body"])
def test_spooled_text_is_print_module_text(kw):
    m = parse_module(many_ops(5000) + NESTED)
    text = print_spooled(m, **kw)
    assert text._spool is not None and len(text._spool._chunks) > 1  # text went to the spool
    assert "".join(text) == "".join(text) == print_module(m, **kw)
    small = parse_module(NESTED)
    assert "".join(print_spooled(small, **kw)) == print_module(small, **kw)


def test_a_hook_taking_back_spooled_text_prints_again_in_memory(monkeypatch):
    def failing_entry(pr, op):
        custom_ops.print_function(pr, op)
        raise KeyError("malformed")  # after the body went to the spool

    monkeypatch.setitem(custom_ops.PRINTERS, "entry", custom_ops._guarded(failing_entry))
    m = parse_module(many_ops(3000))
    expected = print_module(m)
    assert '"cuda_tile.entry"() <{' in expected  # the entry fell back to the generic form
    with pytest.raises(printer._Spooled):
        OpPrinter().print_spooled(m)
    text = print_spooled(m)
    assert text._spool is None and "".join(text) == expected


def test_translate_writes_the_printout(tmp_path):
    m = parse_module(many_ops(3000))
    src, out = tmp_path / "m.tileirbc", tmp_path / "m.mlir"
    src.write_bytes(write_bytecode(m))
    assert translate.main(["-cudatilebc-to-mlir", str(src), "-o", str(out)]) == 0
    assert out.read_text() == print_module(read_bytecode(src.read_bytes()))


def _peak(fn, *args) -> int:
    tracemalloc.start()
    try:
        fn(*args)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_printing_and_verifying_20000_ops_stay_under_a_megabyte():
    # Before: 2.2 MB to print (a number for every value, every piece held) and 2.6 MB to
    # verify (every op of the block in the dominance check's set).
    m = parse_module(many_ops(20_000))
    small = parse_module(many_ops(10))
    print_spooled(small)  # modules imported on first use are not counted
    verify_module(small, DiagnosticEngine(), VerifyOptions())
    assert _peak(print_spooled, m) < 1 << 20
    assert _peak(verify_module, m, DiagnosticEngine(), VerifyOptions()) < 1 << 20


def test_dominance_still_refuses_uses_before_definitions():
    m = parse_module(FORWARD, "f.mlir", allow_unregistered=True)
    diag = DiagnosticEngine()
    assert not verify_module(m, diag)
    assert [d.message for d in diag.diagnostics][:1] == ["operand #0 does not dominate this use"]
    # a value used twice by one op, then again later: every use counted, none refused
    ok = "\n".join(
        [
            "cuda_tile.module @m {",
            "  entry @k(%arg0: tile<i32>) {",
            "    %a = addi %arg0, %arg0 : tile<i32>",
            "    %b = addi %a, %a : tile<i32>",
            "    %c = addi %b, %a : tile<i32>",
            "    %d = addi %c, %a : tile<i32>",
            "    return",
            "  }",
            "}",
        ]
    )
    assert verify_module(parse_module(ok), DiagnosticEngine())


def test_an_op_with_one_result_keeps_the_result_itself():
    one = Operation("test.one", result_types=[I32])
    r = one._results
    assert r.__class__ is OpResult and one.results == (r,) and one.result is r and r.index == 0
    three = Operation("test.three", result_types=[I32, I32, I32])
    assert type(three.results) is tuple and [v.index for v in three.results] == [0, 1, 2]
    assert Operation("test.none").results == () and "index" not in OpResult.__slots__
