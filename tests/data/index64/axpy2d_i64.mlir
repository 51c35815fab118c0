// y[r, c] = alpha * x[r, c] over 8 x 64 tiles of 2-D arrays whose shapes and row strides are
// i64 parameters (bounds and strides in 64-bit registers): tile row 2 bx + off (i64 math, through
// 2^33 and back), tile column by; alpha between the arrays, the i64 scalar `off` last.
cuda_tile.module @kernels {
  entry @axpy2d_i64(%x: tile<ptr<f32>>, %xm: tile<i64>, %xn: tile<i64>, %xs: tile<i64>, %xt: tile<i64>, %alpha: tile<f32>, %y: tile<ptr<f32>>, %ym: tile<i64>, %yn: tile<i64>, %ys: tile<i64>, %yt: tile<i64>, %off: tile<i64>) {
    %tok = make_token : token
    %xa = assume div_by<16>, %x : tile<ptr<f32>>
    %tx = make_tensor_view %xa, shape = [%xm, %xn], strides = [%xs, 1] : tile<i64> -> tensor_view<?x?xf32, strides=[?,1]>
    %ty = make_tensor_view %y, shape = [%ym, %yn], strides = [%ys, 1] : tile<i64> -> tensor_view<?x?xf32, strides=[?,1]>
    %px = make_partition_view %tx : partition_view<tile=(8x64), tensor_view<?x?xf32, strides=[?,1]>>
    %py = make_partition_view %ty : partition_view<tile=(8x64), tensor_view<?x?xf32, strides=[?,1]>>
    %bx, %by, %bz = get_tile_block_id : tile<i32>
    %bx64 = exti %bx signed : tile<i32> -> tile<i64>
    %by64 = exti %by signed : tile<i32> -> tile<i64>
    %c2 = constant <i64: 2> : tile<i64>
    %big = constant <i64: 8589934592> : tile<i64>
    %r0 = muli %bx64, %c2 : tile<i64>
    %r1 = addi %r0, %off : tile<i64>
    %r2 = addi %r1, %big : tile<i64>
    %row = subi %r2, %big : tile<i64>
    %v, %t1 = load_view_tko weak %px[%row, %by64] token = %tok : partition_view<tile=(8x64), tensor_view<?x?xf32, strides=[?,1]>>, tile<i64> -> tile<8x64xf32>, token
    %a1 = reshape %alpha : tile<f32> -> tile<1x1xf32>
    %ab = broadcast %a1 : tile<1x1xf32> -> tile<8x64xf32>
    %w = mulf %v, %ab rounding<nearest_even> : tile<8x64xf32>
    %t2 = store_view_tko weak %w, %py[%row, %by64] token = %tok : tile<8x64xf32>, partition_view<tile=(8x64), tensor_view<?x?xf32, strides=[?,1]>>, tile<i64> -> token
    return
  }
}
