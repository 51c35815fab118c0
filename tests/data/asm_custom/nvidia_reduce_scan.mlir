cuda_tile.module @kernels {
  entry @k(%n: tile<i32>) {
    %a = constant <f32: [1.0, 2.0, 3.0, 4.0]> : tile<4xf32>
    %b = constant <i32: [1, 2, 3, 4]> : tile<4xi32>
    %r:2 = reduce %a, %b dim=0 identities=[0.000000e+00 : f32, 0 : i32] : tile<4xf32>, tile<4xi32> -> tile<f32>, tile<i32>
    (%x0: tile<f32>, %y0: tile<f32>, %x1: tile<i32>, %y1: tile<i32>) {
      %s = addf %x0, %y0 : tile<f32>
      %t = addi %x1, %y1 : tile<i32>
      yield %s, %t : tile<f32>, tile<i32>
    }
    %q:2 = scan %a, %b dim=0 reverse=false identities=[0.000000e+00 : f32, 0 : i32] : tile<4xf32>, tile<4xi32> -> tile<4xf32>, tile<4xi32>
    (%x2: tile<f32>, %y2: tile<f32>, %x3: tile<i32>, %y3: tile<i32>) {
      %s = addf %x2, %y2 : tile<f32>
      %t = addi %x3, %y3 : tile<i32>
      yield %s, %t : tile<f32>, tile<i32>
    }
    %aa = assume bounded<0, ?>, %r#1 : tile<i32>
  }
}
