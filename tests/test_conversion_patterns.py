"""The hand-written and declared conversion patterns on small kernels (tileirdisasm syntax)."""

from __future__ import annotations

from tilegen.runtime.asm import parse_module
from tilegen.runtime.attributes import IntegerAttr
from tilegen.runtime.types import IntegerType
from tilegen.runtime.conversion import convert_module
from tilegen.runtime.diagnostics import DiagnosticEngine
from tilegen.runtime.verify import verify_module

COMBINER = (
    "(%a: tile<f32>, %b: tile<f32>) {\n %s = addf %a, %b : tile<f32>\n yield %s : tile<f32>\n}\n"
)


def show(values: str, types: str) -> str:
    """A print_tko keeping ``values`` alive (dead pure ops are erased by the driver)."""
    fmt = " ".join(["%d"] * len(values.split(",")))
    return f'print_tko "{fmt}", {values} : {types} -> token'


def lower(body: str, args: str = ""):
    """Lower one entry with ``body`` (the cuda_tile input must verify; so must the output)."""
    text = f"cuda_tile.module @m {{\n entry @k({args}) {{\n{body}\n return\n }}\n}}"
    module = parse_module(text, "t.mlir")
    diag = DiagnosticEngine()
    assert verify_module(module, diag), [d.format() for d in diag.diagnostics]
    out = convert_module(module, "sm_90")
    diag = DiagnosticEngine()
    assert verify_module(out, diag), [d.format() for d in diag.diagnostics]
    assert not [op.name for op in out.walk() if op.dialect == "cuda_tile"]
    return out


def ops(module, name: str):
    return [op for op in module.walk() if op.name == name]


def test_block_ids_become_program_ids_per_axis():
    out = lower(
        "%x, %y, %z = get_tile_block_id : tile<i32>\n"
        "%a, %b, %c = get_num_tile_blocks : tile<i32>\n"
        + show("%z", "tile<i32>")
        + "\n"
        + show("%b", "tile<i32>")
    )
    assert [o.attributes["dim"].value for o in ops(out, "nv_tileaa.get_program_id")] == [2]
    assert [o.attributes["dim"].value for o in ops(out, "nv_tileaa.get_num_programs")] == [1]
    assert ops(out, "nv_tileaa.print")[0].operands[0].type.__class__.__name__ == "IntegerType"


def test_constants_splat_scalar_and_iota():
    out = lower(
        "%c = constant <f32: 2.0> : tile<8xf32>\n"
        "%s = constant <i32: 3> : tile<i32>\n"
        "%r = iota : tile<8xi32>\n" + show("%c, %s, %r", "tile<8xf32>, tile<i32>, tile<8xi32>")
    )
    (splat,) = ops(out, "nv_tileaa.splat")
    assert splat.operands[0].owner.name == "arith.constant"
    assert splat.operands[0].owner.attributes["value"].value == 2.0
    (rng,) = ops(out, "nv_tileaa.make_range")
    assert (rng.attributes["start"].value, rng.attributes["end"].value) == (0, 8)


def test_compare_predicates_follow_signedness_and_ordering():
    out = lower(
        "%a = cmpi less_than %x, %y, unsigned : tile<i32> -> tile<i1>\n"
        "%b = cmpf less_than unordered %f, %f : tile<f32> -> tile<i1>\n"
        "%m = maxi %x, %y signed : tile<i32>\n"
        + show("%a, %b, %m", "tile<i1>, tile<i1>, tile<i32>"),
        "%x: tile<i32>, %y: tile<i32>, %f: tile<f32>",
    )
    # the arith spec's enum value as an i64 IntegerAttr (cmpi ult = 6, cmpf ult = 11), as MLIR
    for name, value in (("arith.cmpi", 6), ("arith.cmpf", 11)):
        pred = ops(out, name)[0].attributes["predicate"]
        assert isinstance(pred, IntegerAttr) and pred.type == IntegerType(64)
        assert pred.value == value
    assert len(ops(out, "arith.maxsi")) == 1


def test_join_tokens_and_mmai_signedness():
    out = lower(
        "%t0 = make_token : token\n%t1 = make_token : token\n"
        "%j = join_tokens %t0, %t1 : token\n"
        "%a = constant <i8: 1> : tile<16x32xi8>\n%b = constant <i8: 2> : tile<32x16xi8>\n"
        "%c = constant <i32: 0> : tile<16x16xi32>\n"
        "%d = mmai %a, %b, %c signed unsigned : tile<16x32xi8>, tile<32x16xi8>, tile<16x16xi32>\n"
        "%pp = reshape %p : tile<ptr<i32>> -> tile<1xptr<i32>>\n"
        "%q = broadcast %pp : tile<1xptr<i32>> -> tile<16xptr<i32>>\n"
        "%row = extract %d[%z, %z] : tile<16x16xi32> -> tile<1x16xi32>\n"
        "%v = reshape %row : tile<1x16xi32> -> tile<16xi32>\n"
        "%t2 = store_ptr_tko weak %q, %v token=%j : tile<16xptr<i32>>, tile<16xi32> -> token",
        "%p: tile<ptr<i32>>, %z: tile<i32>",
    )
    (join,) = ops(out, "nv_tileaa.join_mem_token")
    assert [v.owner.name for v in join.operands] == ["nv_tileaa.create_mem_token"] * 2
    (dot,) = ops(out, "nv_tileaa.dot")
    assert (dot.attributes["signedness_a"].value, dot.attributes["signedness_b"].value) == (0, 1)
    (store,) = ops(out, "nv_tileaa.store")
    assert store.operands[-1] is join.results[0] and len(store.results) == 1
    (sl,) = ops(out, "nv_tileaa.extract_slice")
    assert list(sl.attributes["sizes"].values) == [1, 16]


def test_reduce_and_scan_convert_their_regions():
    out = lower(
        "%v = constant <f32: 1.0> : tile<8x64xf32>\n"
        "%r = reduce %v dim=1 identities=[0.000000e+00 : f32] : tile<8x64xf32> -> tile<8xf32>\n"
        + COMBINER
        + "%q = scan %v dim=1 reverse=true identities=[0.000000e+00 : f32] : tile<8x64xf32> -> "
        "tile<8x64xf32>\n" + COMBINER + show("%r, %q", "tile<8xf32>, tile<8x64xf32>")
    )
    (red,) = ops(out, "nv_tileaa.reduce")
    assert red.attributes["axis"].value == 1
    body = red.regions[0].blocks[0]
    assert all(a.type.__class__.__name__ == "FloatType" for a in body.args)  # 0-d -> scalar
    assert [o.name for o in body.ops] == ["nv_tileaa.addf", "nv_tileaa.yield"]
    (scan,) = ops(out, "nv_tileaa.scan")
    assert "reverse" in scan.attributes and "inclusive" in scan.attributes


def test_loop_with_break_becomes_scf_while():
    out = lower(
        "loop {\n"
        " %c = cmpi equal %x, %x, signed : tile<i32> -> tile<i1>\n"
        f" {show('%x', 'tile<i32>')}\n"
        " if %c {\n  break\n } else {\n }\n"
        "}",
        "%x: tile<i32>",
    )
    (loop,) = ops(out, "scf.while")
    before = loop.regions[0].blocks[0]
    assert [o.name for o in before.ops][-3:] == ["nv_tileaa.print", "scf.if", "scf.condition"]
    flags = [
        b.blocks[0].ops[-1].operands[0].owner.attributes["value"].value
        for b in before.ops[-2].regions
    ]
    assert flags == [0, 1]  # break: stop; fall through to the implicit continue: go on


def test_early_continue_in_for_is_structured():
    out = lower(
        "%r = for %i in (%lb to %ub, step %st) : tile<i32> iter_values(%acc = %lb) -> "
        "(tile<i32>) {\n"
        " %c = cmpi equal %i, %lb, signed : tile<i32> -> tile<i1>\n"
        " if %c {\n  continue %acc : tile<i32>\n } else {\n }\n"
        " %n = addi %acc, %i : tile<i32>\n"
        " continue %n : tile<i32>\n"
        "}\n" + show("%r", "tile<i32>"),
        "%lb: tile<i32>, %ub: tile<i32>, %st: tile<i32>",
    )
    (loop,) = ops(out, "scf.for")
    body = loop.regions[0].blocks[0]
    assert [o.name for o in body.ops][-2:] == ["scf.if", "scf.yield"]
    branch_if = body.ops[-2]
    assert len(branch_if.results) == 1
    else_ops = [o.name for o in branch_if.regions[1].blocks[0].ops]
    assert else_ops == ["arith.addi", "scf.yield"]
