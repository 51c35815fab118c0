// y[b] = sum over i < nt of x[b * nt + i] (128-element tiles): an i64 loop (induction variable,
// bounds and step i64) whose body computes the i64 tile index; nt is an i64 scalar in front.
cuda_tile.module @kernels {
  entry @tilesum_loop_i64(%nt: tile<i64>, %x: tile<ptr<i32>>, %xn: tile<i32>, %xs: tile<i32>, %y: tile<ptr<i32>>, %yn: tile<i32>, %ys: tile<i32>) {
    %tok = make_token : token
    %tx = make_tensor_view %x, shape = [%xn], strides = [1] : tile<i32> -> tensor_view<?xi32, strides=[1]>
    %ty = make_tensor_view %y, shape = [%yn], strides = [1] : tile<i32> -> tensor_view<?xi32, strides=[1]>
    %px = make_partition_view %tx : partition_view<tile=(128), tensor_view<?xi32, strides=[1]>>
    %py = make_partition_view %ty : partition_view<tile=(128), tensor_view<?xi32, strides=[1]>>
    %bx, %by, %bz = get_tile_block_id : tile<i32>
    %b64 = exti %bx signed : tile<i32> -> tile<i64>
    %first = muli %b64, %nt : tile<i64>
    %c0 = constant <i64: 0> : tile<i64>
    %c1 = constant <i64: 1> : tile<i64>
    %z = constant <i32: 0> : tile<128xi32>
    %acc = for %i in (%c0 to %nt, step %c1) : tile<i64> iter_values(%s = %z) -> (tile<128xi32>) {
      %t = addi %first, %i : tile<i64>
      %v, %k = load_view_tko weak %px[%t] token = %tok : partition_view<tile=(128), tensor_view<?xi32, strides=[1]>>, tile<i64> -> tile<128xi32>, token
      %n = addi %s, %v : tile<128xi32>
      continue %n : tile<128xi32>
    }
    %u = store_view_tko weak %acc, %py[%b64] token = %tok : tile<128xi32>, partition_view<tile=(128), tensor_view<?xi32, strides=[1]>>, tile<i64> -> token
    return
  }
}
