"""The compact IR core (issue 17): use lists, shared attribute maps, slotted locations, and the
verifier's memo of op-local checks."""

from __future__ import annotations

import copy
import pickle

from tilegen.runtime.asm import parse_module, print_module
from tilegen.runtime.attributes import EnumAttr, FileLineColLoc, UnitAttr
from tilegen.runtime.bytecode.reader import read_bytecode
from tilegen.runtime.bytecode.writer import write_bytecode
from tilegen.runtime.diagnostics import DiagnosticEngine
from tilegen.runtime.opdef import lookup_opdef
from tilegen.runtime.types import IntegerType, TileType
from tilegen.runtime.verify import verify_module
from tilegen.runtime.verify.engine import memoable

KERNEL = """cuda_tile.module @kernels {
  entry @k(%a: tile<i32>, %b: tile<i32>) {
    %0 = addi %a, %a : tile<i32>
    %1 = addi %0, %b : tile<i32>
    %2 = addi %1, %b overflow<no_signed_wrap> : tile<i32>
    %3 = addi %2, %b overflow<no_signed_wrap> : tile<i32>
    return
  }
}
"""


def _ops(module, name):
    return [o for o in module.walk() if o.name == name]


def test_uses_are_rebuilt_from_users_in_order_with_repeated_operands():
    m = parse_module(KERNEL)
    entry = _ops(m, "cuda_tile.entry")[0]
    a, b = entry.regions[0].blocks[0].args
    add0, add1, add2, add3 = _ops(m, "cuda_tile.addi")
    assert a.uses == [(add0, 0), (add0, 1)] and a.num_uses == 2
    assert b.uses == [(add1, 1), (add2, 1), (add3, 1)]
    add2.set_operand(1, a)
    assert b.uses == [(add1, 1), (add3, 1)] and a.uses[-1] == (add2, 1)
    b.replace_all_uses_with(a)
    assert not b.has_uses and b.uses == [] and a.num_uses == 5
    add3.erase()
    assert a.num_uses == 4 and not add3.results[0].has_uses


def test_ops_without_attributes_share_one_read_only_map_until_written():
    m = parse_module(KERNEL)
    add0, add1, add2, _ = _ops(m, "cuda_tile.addi")
    assert add0.attributes is add1.attributes and not add0.attributes
    add0.set_attr("flag", UnitAttr())
    assert dict(add0.attributes) == {"flag": UnitAttr()} and not add1.attributes
    assert add0.remove_attr("flag") == UnitAttr() and add0.remove_attr("flag") is None
    assert add2.set_default_attr("x", UnitAttr()) == UnitAttr()
    assert "overflow" in add2.attributes


def test_bytecode_reader_shares_small_enum_maps_and_copies_on_write():
    m = read_bytecode(write_bytecode(parse_module(KERNEL)))
    adds = _ops(m, "cuda_tile.addi")
    assert adds[2].attributes is adds[3].attributes  # both no_signed_wrap
    assert isinstance(adds[2].attributes["overflow"], EnumAttr)
    adds[2].set_attr("overflow", adds[0].attributes["overflow"])
    assert adds[2].attributes is not adds[3].attributes
    assert adds[3].attributes["overflow"] != adds[2].attributes["overflow"]
    assert print_module(read_bytecode(write_bytecode(m))) == print_module(m)


def test_file_line_col_loc_is_slotted_frozen_and_copyable():
    loc = FileLineColLoc("k.py", 70000, 3)
    assert not hasattr(loc, "__dict__")
    assert copy.copy(loc) == loc and copy.deepcopy(loc) == loc
    assert pickle.loads(pickle.dumps(loc)) == loc and hash(copy.copy(loc)) == hash(loc)
    try:
        loc.line = 1  # type: ignore[misc]
    except Exception as e:  # noqa: BLE001
        assert type(e).__name__ == "FrozenInstanceError"
    else:
        raise AssertionError("FileLineColLoc accepted an assignment")


def test_memo_applies_to_op_local_definitions_only():
    assert memoable(lookup_opdef("cuda_tile.addi"))
    assert not memoable(lookup_opdef("cuda_tile.for"))  # regions
    assert not memoable(lookup_opdef("cuda_tile.return"))  # a terminator looks at its block
    assert not memoable(lookup_opdef("cuda_tile.yield"))  # and at its parent


def test_every_op_with_a_memo_key_still_reports_its_own_error():
    # Two entries (verified independently), each: a good addi, then the same addi with a
    # mismatched result type. Passes are memoised, failures are not: both errors are reported.
    entry = (
        "  entry @e{n}(%a: tile<i32>) {{\n"
        "    %0 = addi %a, %a : tile<i32>\n"
        "    %1 = addi %a, %a : tile<i32>\n"
        "    return\n  }}\n"
    )
    text = "cuda_tile.module @kernels {\n" + entry.format(n=0) + entry.format(n=1) + "}\n"
    m = parse_module(text, filename="k.mlir")
    assert verify_module(m, DiagnosticEngine())
    i16 = TileType((), IntegerType(16))
    bad = [op for op in _ops(m, "cuda_tile.addi")][1::2]
    for op in bad:
        op.results[0].type = i16
    diag = DiagnosticEngine()
    assert not verify_module(m, diag)
    errors = [d for d in diag.diagnostics if d.severity == "error"]
    assert [e.loc for e in errors] == [op.loc for op in bad]
    assert len({e.message for e in errors}) == 1


def test_use_storage_moves_between_none_one_and_many():
    m = parse_module(KERNEL)
    add0, add1, add2, add3 = _ops(m, "cuda_tile.addi")
    v = add0.results[0]  # one use: add1's operand 0
    assert v.num_uses == 1 and v.users == [add1] and v.uses == [(add1, 0)]
    add1.set_operand(0, add1.operands[1])
    assert v.num_uses == 0 and v.users == [] and not v.has_uses
    add2.set_operand(0, v)
    add3.set_operand(1, v)
    add3.set_operand(0, v)
    assert v.num_uses == 3 and v.uses == [(add2, 0), (add3, 0), (add3, 1)]
    add3.set_operands([add1.results[0], add1.results[0]])
    assert v.uses == [(add2, 0)] and v.num_uses == 1
    assert add1.results[0].uses == [(add3, 0), (add3, 1)]


def test_results_are_tuples_and_ops_without_results_share_one():
    m = parse_module(KERNEL)
    adds = _ops(m, "cuda_tile.addi")
    ret = _ops(m, "cuda_tile.return")[0]
    assert all(type(op.results) is tuple and len(op.results) == 1 for op in adds)
    assert (
        ret.results == ()
        and ret.results is _ops(parse_module(KERNEL), "cuda_tile.return")[0].results
    )
    # results carry no location or name-hint slot; block arguments keep their location
    r = adds[0].results[0]
    assert r.loc is None and not hasattr(r, "name_hint") and not hasattr(r, "__dict__")
    arg = _ops(m, "cuda_tile.entry")[0].regions[0].blocks[0].args[0]
    arg.loc = FileLineColLoc("f.py", 3, 4)
    assert arg.loc == FileLineColLoc("f.py", 3, 4)
    assert "__weakref__" not in type(adds[0]).__slots__


def test_printed_pieces_join_to_the_printout_and_number_values_by_int():
    from tilegen.runtime.asm import print_pieces
    from tilegen.runtime.asm.printer import SSANames

    m = parse_module(KERNEL)
    pieces = print_pieces(m)
    assert len(pieces) > 3 and "".join(pieces) == print_module(m)
    names = SSANames(m, False)
    adds = _ops(m, "cuda_tile.addi")
    assert [names.ids[op.results[0]] for op in adds] == [0, 1, 2, 3]
    assert [names.name(op.results[0]) for op in adds] == ["%0", "%1", "%2", "%3"]
