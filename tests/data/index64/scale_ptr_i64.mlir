// y = alpha * x through tiles of pointers: i64 offsets bx * 128 + iota (iota extended to i64),
// a bounds mask against the array size extended to i64; alpha is the first parameter.
cuda_tile.module @kernels {
  entry @scale_ptr_i64(%alpha: tile<f32>, %x: tile<ptr<f32>>, %xn: tile<i32>, %xs: tile<i32>, %y: tile<ptr<f32>>, %yn: tile<i32>, %ys: tile<i32>) {
    %tok = make_token : token
    %xa = assume div_by<16>, %x : tile<ptr<f32>>
    %bx, %by, %bz = get_tile_block_id : tile<i32>
    %b64 = exti %bx signed : tile<i32> -> tile<i64>
    %c128 = constant <i64: 128> : tile<i64>
    %base = muli %b64, %c128 : tile<i64>
    %r = iota : tile<128xi32>
    %r64 = exti %r signed : tile<128xi32> -> tile<128xi64>
    %base1 = reshape %base : tile<i64> -> tile<1xi64>
    %baseb = broadcast %base1 : tile<1xi64> -> tile<128xi64>
    %idx = addi %baseb, %r64 : tile<128xi64>
    %n64 = exti %xn signed : tile<i32> -> tile<i64>
    %n1 = reshape %n64 : tile<i64> -> tile<1xi64>
    %nb = broadcast %n1 : tile<1xi64> -> tile<128xi64>
    %m = cmpi less_than %idx, %nb, signed : tile<128xi64> -> tile<128xi1>
    %a1 = reshape %xa : tile<ptr<f32>> -> tile<1xptr<f32>>
    %ab = broadcast %a1 : tile<1xptr<f32>> -> tile<128xptr<f32>>
    %p = offset %ab, %idx : tile<128xptr<f32>>, tile<128xi64> -> tile<128xptr<f32>>
    %z = constant <f32: 0.000000e+00> : tile<128xf32>
    %v, %t = load_ptr_tko weak %p, %m, %z token=%tok : tile<128xptr<f32>>, tile<128xi1>, tile<128xf32> -> tile<128xf32>, token
    %al1 = reshape %alpha : tile<f32> -> tile<1xf32>
    %alb = broadcast %al1 : tile<1xf32> -> tile<128xf32>
    %w = mulf %v, %alb rounding<nearest_even> : tile<128xf32>
    %o1 = reshape %y : tile<ptr<f32>> -> tile<1xptr<f32>>
    %ob = broadcast %o1 : tile<1xptr<f32>> -> tile<128xptr<f32>>
    %q = offset %ob, %idx : tile<128xptr<f32>>, tile<128xi64> -> tile<128xptr<f32>>
    %t2 = store_ptr_tko weak %q, %w, %m token=%tok : tile<128xptr<f32>>, tile<128xf32>, tile<128xi1> -> token
    return
  }
}
