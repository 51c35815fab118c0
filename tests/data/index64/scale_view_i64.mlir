// y[t] = alpha * x[t + off] for the two tiles t = 2 bx + k (k = 0, 1) of each block: view
// indices computed in i64 (block id extended, muli, addi with the i64 scalar `off`, through
// 2^33 and back); alpha first, off between the arrays; masked partial tiles.
cuda_tile.module @kernels {
  entry @scale_view_i64(%alpha: tile<f32>, %x: tile<ptr<f32>>, %xn: tile<i32>, %xs: tile<i32>, %off: tile<i64>, %y: tile<ptr<f32>>, %yn: tile<i32>, %ys: tile<i32>) {
    %tok = make_token : token
    %xa = assume div_by<16>, %x : tile<ptr<f32>>
    %ya = assume div_by<16>, %y : tile<ptr<f32>>
    %tx = make_tensor_view %xa, shape = [%xn], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
    %ty = make_tensor_view %ya, shape = [%yn], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
    %px = make_partition_view %tx : partition_view<tile=(128), tensor_view<?xf32, strides=[1]>>
    %py = make_partition_view %ty : partition_view<tile=(128), tensor_view<?xf32, strides=[1]>>
    %bx, %by, %bz = get_tile_block_id : tile<i32>
    %b64 = exti %bx signed : tile<i32> -> tile<i64>
    %c2 = constant <i64: 2> : tile<i64>
    %c1 = constant <i64: 1> : tile<i64>
    %big = constant <i64: 8589934592> : tile<i64>
    %t0 = muli %b64, %c2 : tile<i64>
    %t1 = addi %t0, %c1 : tile<i64>
    %s0 = addi %t0, %off : tile<i64>
    %s1h = addi %t1, %big : tile<i64>
    %s1o = addi %s1h, %off : tile<i64>
    %s1 = subi %s1o, %big : tile<i64>
    %al1 = reshape %alpha : tile<f32> -> tile<1xf32>
    %alb = broadcast %al1 : tile<1xf32> -> tile<128xf32>
    %v0, %k0 = load_view_tko weak %px[%s0] token = %tok : partition_view<tile=(128), tensor_view<?xf32, strides=[1]>>, tile<i64> -> tile<128xf32>, token
    %w0 = mulf %v0, %alb rounding<nearest_even> : tile<128xf32>
    %u0 = store_view_tko weak %w0, %py[%t0] token = %tok : tile<128xf32>, partition_view<tile=(128), tensor_view<?xf32, strides=[1]>>, tile<i64> -> token
    %v1, %k1 = load_view_tko weak %px[%s1] token = %tok : partition_view<tile=(128), tensor_view<?xf32, strides=[1]>>, tile<i64> -> tile<128xf32>, token
    %w1 = mulf %v1, %alb rounding<nearest_even> : tile<128xf32>
    %u1 = store_view_tko weak %w1, %py[%t1] token = %tok : tile<128xf32>, partition_view<tile=(128), tensor_view<?xf32, strides=[1]>>, tile<i64> -> token
    return
  }
}
