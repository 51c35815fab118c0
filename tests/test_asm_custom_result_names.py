"""SSA name suggestions (runtime/asm/result_names.py) as the printer uses them."""

import pytest

from tilegen.runtime.asm import parse_module, print_module
from tilegen.runtime.asm.dense import make_dense
from tilegen.runtime.asm.result_names import RESULT_NAMES, constant_name
from tilegen.runtime.types import F16, F32, I1, I32, I64, TileType


@pytest.mark.parametrize(
    "type_,values,name",
    [
        (TileType((), I32), [42], "cst_42_i32"),
        (TileType((128,), I32), [-1], "cst_-1_i32"),
        (TileType((4,), I64), [4000000000], "cst_4000000000_i64"),
        (TileType((), I1), [1], "true"),
        (TileType((8,), I1), [0], "false"),
        (TileType((2,), I1), [1, 0], "cst_i1"),
        (TileType((2,), I32), [1, 2], "cst_i32"),
        (TileType((), F32), [0.0], "cst_0_f32"),
        (TileType((), F32), [10.0], "cst_10_f32"),
        (TileType((), F32), [1.5], "cst_f32"),
        (TileType((), F32), [-1.0], "cst_f32"),
        (TileType((), F32), [-0.0], "cst_f32"),
        (TileType((64, 1), F32), [float("-inf")], "cst_f32"),
        (TileType((), F32), [float("nan")], "cst_NaN_f32"),
        (TileType((2,), F16), [1.0, 2.0], "cst_f16"),
    ],
)
def test_constant_names(type_, values, name):
    assert constant_name(make_dense(type_, values)) == name


def test_naming_sources():
    # computed, spec `result_names:` and MLIR's ODS default for multi-result ops
    assert RESULT_NAMES["cuda_tile.constant"].__name__ == "_constant"
    for op in ("broadcast", "reshape", "make_tensor_view", "make_partition_view", "for", "reduce"):
        assert f"cuda_tile.{op}" in RESULT_NAMES
    for op in ("load_view_tko", "load_ptr_tko", "atomic_rmw_tko", "get_tile_block_id"):
        assert RESULT_NAMES[f"cuda_tile.{op}"].__name__ == "_ods_default_names"
    assert "cuda_tile.addf" not in RESULT_NAMES
    assert "cuda_tile.get_index_space_shape" not in RESULT_NAMES


TEXT = """cuda_tile.module @m {
  testing$func @f(%p: tile<ptr<f32>>, %n: tile<i32>, %x: tile<8xf32>) {
    %a = assume div_by<16>, %p : tile<ptr<f32>>
    %b = assume bounded<0, ?>, %n : tile<i32>
    %c = assume div_by<4>, %b : tile<i32>
    %r = reshape %n : tile<i32> -> tile<1xi32>
    %bc = broadcast %r : tile<1xi32> -> tile<4xi32>
    %x0, %x1, %x2 = get_tile_block_id : tile<i32>
    %s = reduce %x dim=0 identities=[0.000000e+00 : f32] : tile<8xf32> -> tile<f32>
    (%l: tile<f32>, %q: tile<f32>) {
      %t = addf %l, %q : tile<f32>
      yield %t : tile<f32>
    }
    %z = constant <i32: 0> : tile<i32>
    %f:2 = for %i in (%z to %n, step %n) : tile<i32> iter_values(%u = %n, %w = %z) -> (tile<i32>, tile<i32>) {
      continue %u, %w : tile<i32>, tile<i32>
    }
    %g = addi %f#1, %c : tile<i32>
    %k = constant <i32: 5> : tile<i32>
    %ka = assume div_by<1>, %k : tile<i32>
    %fa = assume div_by<1>, %f#1 : tile<i32>
  }
}
"""


def test_printed_names():
    out = print_module(parse_module(TEXT, "n.mlir"))
    for snippet in [
        "%assume = assume div_by<16>, %arg0",
        "%assume_0 = assume bounded<0, ?>, %arg1",
        "%assume_assume = assume div_by<4>, %assume_0",
        "%reshape = reshape %arg1",
        "%bcast = broadcast %reshape",
        "%blockId_x, %blockId_y, %blockId_z = get_tile_block_id",
        "%reduce = reduce %arg2",
        "(%reduce_lhs: tile<f32>, %reduce_rhs: tile<f32>)",
        "%cst_0_i32 = constant <i32: 0>",
        "%for:2 = for %loopIdx in (%cst_0_i32 to %arg1, step %arg1) : tile<i32> "
        "iter_values(%iterArg0 = %arg1, %iterArg1 = %cst_0_i32)",
        "%0 = addi %for#1, %assume_assume",
        # assume_<the producer's suggested name>, only for values that got one
        "%assume_cst_5_i32 = assume div_by<1>, %cst_5_i32",
        "%assume_ = assume div_by<1>, %for#1",
    ]:
        assert snippet in out, snippet
