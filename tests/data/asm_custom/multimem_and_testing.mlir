cuda_tile.module @m {
  testing$func @mm(%pv: partition_view<tile=(4x4), tensor_view<16x16xf16, strides=[16,1]>>, %v: tile<4x4xf16>, %i: tile<i32>, %t: token) -> token {
    %a, %b = multimem_load_reduce_view_tko relaxed sys %pv[%i, %i] token = %t inbounds = [true, false] : partition_view<tile=(4x4), tensor_view<16x16xf16, strides=[16,1]>>, tile<i32>, token -> tile<4x4xf16>, token
    %c = multimem_reduce_view_tko relaxed sys %pv, %v[%i, %i] attributes {reduction = #cuda_tile.multimem_reduction_kind<max>} : partition_view<tile=(4x4), tensor_view<16x16xf16, strides=[16,1]>>, tile<4x4xf16>, tile<i32> -> token
    %d = multimem_store_view_tko relaxed device %pv, %v[%i, %i] token = %c : partition_view<tile=(4x4), tensor_view<16x16xf16, strides=[16,1]>>, tile<4x4xf16>, tile<i32>, token -> token
    %e = testing$bytecode_test_evolution (%v, %i : !cuda_tile.tile<4x4xf16>, tile<i32>) token = %d : !cuda_tile.token -> !cuda_tile.token
    return %e : token
  }
  global private constant @g alignment = 16 <i32: [1, 2]> : tile<2xi32>
}
