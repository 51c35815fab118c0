"""View types and view/memory op verifiers, on IR built directly (NVIDIA's diagnostic texts)."""

from __future__ import annotations

from tilegen.runtime.attributes import (
    DenseArrayAttr,
    FileLineColLoc,
    IntegerAttr,
)
from tilegen.runtime.diagnostics import DiagnosticEngine
from tilegen.runtime.ir import Block, Operation
from tilegen.runtime.types import (
    DYNAMIC,
    F32,
    F64,
    I1,
    I32,
    I64,
    TOKEN,
    GatherScatterViewType,
    IntegerType,
    PartitionViewType,
    PointerType,
    StridedViewType,
    TensorViewType,
    TileType,
)
from tilegen.runtime.verify import VerifyOptions, verify_op
from tilegen.runtime.verify.view_types import verify_view_indices, verify_view_type

LOC = FileLineColLoc("t.mlir", 3, 5)
TV2 = TensorViewType(F32, (4096, 4096), (4096, 1))


def values(*types):
    return Block(list(types)).args


def op(name, operands=(), results=(), attrs=None, regions=0):
    return Operation(f"cuda_tile.{name}", list(operands), list(results), attrs or {}, regions, LOC)


def segs(*sizes):
    return DenseArrayAttr(I32, tuple(sizes))


def i32(v):
    return IntegerAttr(v, I32)


def errors(o, options=None) -> list[str]:
    diag = DiagnosticEngine()
    verify_op(o, diag, options)
    return [f"{d.severity}: {d.message}" for d in diag.diagnostics]


# --------------------------------------------------------------------------- view types


def test_tensor_view_type_rules():
    assert verify_view_type(TensorViewType(F32, (0,), (1,))) == (
        "dimensions must have strictly positive constant sizes but got [0]"
    )
    assert verify_view_type(TensorViewType(F32, (DYNAMIC,), (4, 1))) == (
        "expected shape and stride to be of same rank but got shape of rank 1 and stride of rank 2"
    )
    bad_elem = TensorViewType(PointerType(F32), (32,), (1,))
    assert verify_view_type(bad_elem).startswith("failed to verify 'elementType': f16 or bf16")
    assert verify_view_type(TensorViewType(F32, (DYNAMIC, 4), (DYNAMIC, 1))) is None


def test_partition_view_rules_in_order():
    pv = lambda tile, dim_map=(), tv=TV2, pad=None: PartitionViewType(tile, tv, dim_map, pad)
    assert verify_view_type(pv((1024, 1024), (0,))) == (
        "expected dim_map to map exactly all 2 dimensions of the tile, got 1 mappings"
    )
    assert verify_view_type(pv((1024, 1024), (2, 1))) == (
        "target dimension is outside of tensor view dimensions, expected strictly less than 2, "
        "got 2"
    )
    assert verify_view_type(pv((1024, 1024), (0, 0))) == (
        "target dimension 0 mapped at least twice (for tile dimensions 0 and 1)"
    )
    assert verify_view_type(pv((1024, 1024), (-1, 1))) == (
        "target dimension must not be negative, got -1"
    )
    assert verify_view_type(pv((5, 1024))) == (
        "tile shape dimensions must have power of two length but got [5, 1024]"
    )
    tv3 = TensorViewType(F32, (8192, 8192, 64), (524288, 64, 1))
    assert verify_view_type(pv((1, 1), tv=tv3)) == (
        "expected tensor_view rank and tile rank to match, got tensor_view of rank 3 and tiles "
        "of rank 2"
    )
    assert verify_view_type(pv((), tv=TensorViewType(F32, (), ()))) == (
        "0-dimension tile shape is not supported"
    )
    itv = TensorViewType(I32, (16,), (1,))
    assert verify_view_type(pv((4,), tv=itv, pad="nan")) == (
        "padding_value nan can only be used with floating point element types, got 'i32'"
    )
    assert verify_view_type(pv((4,), tv=itv, pad="zero")) is None
    assert (
        verify_view_type(pv((4096, 8192))) == "tile would exceed the maximum of 16777216 elements"
    )


def test_strided_and_gather_scatter_view_rules():
    sv = StridedViewType((1024, 1024), (1,), TV2)
    assert verify_view_type(sv) == "expected 2 traversal strides, got 1"
    sv = StridedViewType((1024, 1024), (1, 0), TV2)
    assert verify_view_type(sv) == "traversal strides must be strictly positive but got [1, 0]"
    gv = GatherScatterViewType((128, 128), TV2, 2)
    assert verify_view_type(gv) == (
        "gather dimension is outside of tensor view dimensions, expected strictly less than 2, "
        "got 2"
    )


def test_view_indices():
    pv = PartitionViewType((8, 8), TV2)
    s32, s64 = TileType((), I32), TileType((), I64)
    assert verify_view_indices(pv, [s32, s64]) == (
        "expected index type 1 to be the same as other index types ('!cuda_tile.tile<i32>'), "
        "got '!cuda_tile.tile<i64>'"
    )
    assert verify_view_indices(pv, [TileType((1,), I32)] * 2) == (
        "expected index type to be a scalar tile, got '!cuda_tile.tile<1xi32>'"
    )
    gv = GatherScatterViewType((128, 128), TV2, 0)
    assert verify_view_indices(gv, [TileType((64,), I32), s32]) == (
        "expected gather/scatter index size (64) to match tile shape at gather/scatter dimension "
        "0 (128)"
    )
    assert verify_view_indices(gv, [TileType((128,), I32), s32]) is None
    assert verify_view_indices(gv, [s32]) == (
        "expected index at sparse_dim position 0 to be a 1D tensor for GatherScatterView, got rank 0"
    )


# --------------------------------------------------------------------------- view ops


def test_make_tensor_view():
    base, dyn = values(TileType((), PointerType(F32)), TileType((), I64))
    o = op(
        "make_tensor_view",
        [base, dyn],
        [TensorViewType(F32, (32,), (1,))],
        {"operandSegmentSizes": segs(1, 1, 0)},
    )
    assert errors(o) == [
        "error: 'cuda_tile.make_tensor_view' op expected 0 dynamic shape operands, got 1"
    ]
    o = op(
        "make_tensor_view",
        [base],
        [TensorViewType(F64, (), ())],
        {"operandSegmentSizes": segs(1, 0, 0)},
    )
    assert errors(o) == [
        "error: 'cuda_tile.make_tensor_view' op expected pointer to 'f64' to build tensor_view "
        "of this type, got 'f32'"
    ]
    o = op(
        "make_tensor_view",
        [base],
        [TensorViewType(F32, (32,), (DYNAMIC,))],
        {"operandSegmentSizes": segs(1, 0, 0)},
    )
    assert errors(o) == [
        "error: 'cuda_tile.make_tensor_view' op expected 1 dynamic stride operands, got 0"
    ]
    o = op(
        "make_tensor_view",
        [base, dyn],
        [TensorViewType(F32, (DYNAMIC,), (1,))],
        {"operandSegmentSizes": segs(1, 1, 0)},
    )
    assert errors(o) == []


def test_make_partition_view_operand_type():
    (tv,) = values(TensorViewType(F64, (4096, 4096), (4096, 1)))
    o = op("make_partition_view", [tv], [PartitionViewType((1024, 1024), TV2)])
    (msg,) = errors(o)
    assert "expected the type of the provided tensor_view value (" in msg
    assert "to be the same as the view's tensor_view type (" in msg


def test_get_shape_result_counts():
    (tv,) = values(TensorViewType(F32, (64, 64), (1, 1)))
    o = op("get_tensor_shape", [tv], [TileType((), I32)] * 3)
    assert errors(o) == [
        "error: 'cuda_tile.get_tensor_shape' op expected 2 results due to tensor rank, but got 3"
    ]
    (pv,) = values(PartitionViewType((4, 4), TensorViewType(F32, (DYNAMIC, DYNAMIC), (1, 1))))
    o = op("get_index_space_shape", [pv], [TileType((), I32)])
    assert errors(o) == [
        "error: 'cuda_tile.get_index_space_shape' op expected 2 results due to view index space "
        "rank, but got 1"
    ]


def _load_view(view_t, index_types, tile_t, ordering=0, scope=None, extra=None):
    vals = values(view_t, *index_types)
    attrs = {
        "memory_ordering_semantics": i32(ordering),
        "operandSegmentSizes": segs(1, len(index_types), 0),
    }
    if scope is not None:
        attrs["memory_scope"] = i32(scope)
    attrs.update(extra or {})
    return op("load_view_tko", list(vals), [tile_t, TOKEN], attrs)


def test_load_view_tko_rules():
    pv = PartitionViewType((1024, 1024), TV2)
    s32 = TileType((), I32)
    tile = TileType((1024, 1024), F32)
    assert errors(_load_view(pv, [s32], tile)) == [
        "error: 'cuda_tile.load_view_tko' op expected 2 index operands (based on view type), got 1"
    ]
    assert errors(_load_view(pv, [s32, s32], TileType((8,), F32))) == [
        "error: 'cuda_tile.load_view_tko' op expected tile type to be "
        "'!cuda_tile.tile<1024x1024xf32>' (based on view type), got '!cuda_tile.tile<8xf32>'"
    ]
    assert errors(_load_view(pv, [s32, s32], tile, ordering=3, scope=1)) == [
        "error: 'cuda_tile.load_view_tko' op expect one of: weak, relaxed, or acquire, but got: "
        "release"
    ]
    assert errors(_load_view(pv, [s32, s32], tile, ordering=1)) == [
        "error: 'cuda_tile.load_view_tko' op memory scope is required for relaxed load"
    ]
    assert errors(_load_view(pv, [s32, s32], tile, ordering=0, scope=1)) == [
        "error: 'cuda_tile.load_view_tko' op weak load must not have memory scope"
    ]
    bad = {"inbounds": DenseArrayAttr(I1, (True,))}
    assert errors(_load_view(pv, [s32, s32], tile, extra=bad)) == [
        "error: 'cuda_tile.load_view_tko' op inbounds size (1) must match the number of index "
        "dimensions (2)"
    ]
    assert errors(_load_view(pv, [s32, s32], tile, ordering=2, scope=1)) == []


def test_store_ptr_tko_type_relations_and_ordering():
    ptrs, val, mask = values(
        TileType((16, 32), PointerType(F32)), TileType((16, 64), F32), TileType((16, 64), I1)
    )
    o = op(
        "store_ptr_tko",
        [ptrs, val],
        [TOKEN],
        {"memory_ordering_semantics": i32(0), "operandSegmentSizes": segs(1, 1, 0, 0)},
    )
    assert errors(o) == [
        "error: 'cuda_tile.store_ptr_tko' op failed to verify that `destination` type is "
        "expected a pointer type of `value` type"
    ]
    (good,) = values(TileType((16, 32), F32))
    o = op(
        "store_ptr_tko",
        [ptrs, good, mask],
        [TOKEN],
        {"memory_ordering_semantics": i32(0), "operandSegmentSizes": segs(1, 1, 1, 0)},
    )
    assert errors(o) == [
        "error: 'cuda_tile.store_ptr_tko' op failed to verify that shape of 'destination' must "
        "match the shape of 'mask'"
    ]
    o = op(
        "store_ptr_tko",
        [ptrs, good],
        [TOKEN],
        {"memory_ordering_semantics": i32(3), "operandSegmentSizes": segs(1, 1, 0, 0)},
    )
    assert errors(o) == [
        "error: 'cuda_tile.store_ptr_tko' op memory scope is required for release store"
    ]


def test_alloca_alignment():
    o = op(
        "alloca",
        [],
        [TileType((), PointerType(F32))],
        {"num_elem": IntegerAttr(4, I64), "alignment": IntegerAttr(2, I64)},
    )
    assert errors(o) == [
        "error: 'cuda_tile.alloca' op 'alignment' (2) must be at least the natural size "
        "(4 bytes) for element type 'f32'"
    ]
    o = op(
        "alloca",
        [],
        [TileType((), PointerType(IntegerType(8)))],
        {"num_elem": IntegerAttr(4, I64), "alignment": IntegerAttr(3, I64)},
    )
    assert errors(o) == ["error: 'cuda_tile.alloca' op 'alignment' must be power of two"]


def test_view_hints_respect_flags():
    from tilegen.runtime.attributes import DictAttr, OptimizationHintsAttr

    pv = PartitionViewType((8, 8), TensorViewType(F32, (64, 64), (64, 1)))
    s32 = TileType((), I32)
    hints = OptimizationHintsAttr((("sm_100", DictAttr((("occupancy", IntegerAttr(2)),))),))
    o = _load_view(pv, [s32, s32], TileType((8, 8), F32), extra={"optimization_hints": hints})
    assert errors(o) == []
    assert errors(o, VerifyOptions(unsupported_hints=True)) == [
        "warning: occupancy is not known hint for current Operation"
    ]
    assert errors(o, VerifyOptions(unsupported_hints=True, err_hints=True)) == [
        "warning: occupancy is not known hint for current Operation",
        "error: 'cuda_tile.load_view_tko' op Optimization hints verification failed",
    ]
