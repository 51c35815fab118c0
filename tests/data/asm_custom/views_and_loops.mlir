cuda_tile.module @m {
  entry @k(%a: !cuda_tile.tile<ptr<f32>> {cuda_tile.foo = 1 : i32}, %n: tile<i32>) optimization_hints=<sm_120 = {occupancy = 2}, sm_100 = {num_cta_in_cga = 2}> {
    %c0 = constant <i32: 0> : tile<i32>
    %c1 = constant <i32: 1> : tile<i32>
    %tv = make_tensor_view %a, shape = [%n, 32], strides = [32, 1] : tile<i32> -> tensor_view<?x32xf32, strides=[32,1]>
    %pv = make_partition_view %tv : partition_view<tile=(4x8), tensor_view<?x32xf32, strides=[32,1]>>
    %s:2 = get_index_space_shape %pv : partition_view<tile=(4x8), tensor_view<?x32xf32, strides=[32,1]>> -> tile<i32>
    %d:2 = get_tensor_shape %tv : tensor_view<?x32xf32, strides=[32,1]> -> tile<i64>
    %t0 = make_token : token
    %x, %tk = load_view_tko relaxed device %pv[%c0, %c1] token = %t0 optimization_hints = <sm_100 = {allow_tma = true, latency = 3}> : partition_view<tile=(4x8), tensor_view<?x32xf32, strides=[32,1]>>, tile<i32> -> tile<4x8xf32>, token
    %r = for unsigned %i in (%c0 to %c1, step %c1) : tile<i32> iter_values(%acc = %x) -> (tile<4x8xf32>) {
      continue %acc : tile<4x8xf32>
    }
    for %j in (%c0 to %c1, step %c1) : tile<i32> {
    }
    %l:2 = loop iter_values(%p = %c0) : tile<i32> -> tile<i32>, tile<4x8xf32> {
      break %p, %r : tile<i32>, tile<4x8xf32>
    }
    %st = store_view_tko weak %r, %pv[%c0, %c1] : tile<4x8xf32>, partition_view<tile=(4x8), tensor_view<?x32xf32, strides=[32,1]>>, tile<i32> -> token
    %st2 = atomic_red_view_tko relaxed device %pv[%c0, %c1], addf, %r token = %st : tile<4x8xf32>, partition_view<tile=(4x8), tensor_view<?x32xf32, strides=[32,1]>>, tile<i32> -> token
  }
}
