cuda_tile.module @kernels {
  entry @k(%n: tile<i32>, %c: tile<i1>) {
    %b = constant <i32: [1, 2, 3, 4]> : tile<4xi32>
    %q = scan %b dim=0 reverse=false identities=[0 : i32] : tile<4xi32> -> tile<4xi32>
    (%x3: tile<i32>, %y3: tile<i32>) {
      %t = addi %x3, %y3 : tile<i32>
      yield %t : tile<i32>
    }
    %qa = assume bounded<0, ?>, %q : tile<4xi32>
    %i = if %c -> (tile<i32>) { yield %n : tile<i32> } else { yield %n : tile<i32> }
    %ia = assume bounded<0, ?>, %i : tile<i32>
    %l = loop : tile<i32> { break %n : tile<i32> }
    %la = assume bounded<0, ?>, %l : tile<i32>
    %f:2 = for %iv in (%n to %n, step %n) : tile<i32> iter_values(%u = %n, %w = %n) -> (tile<i32>, tile<i32>) {
      continue %u, %w : tile<i32>, tile<i32>
    }
    %fa = assume bounded<0, ?>, %f#1 : tile<i32>
    %x = addi %n, %n : tile<i32>
    %xa = assume bounded<0, ?>, %x : tile<i32>
    %r = reshape %n : tile<i32> -> tile<1xi32>
    %ra = assume bounded<0, ?>, %r : tile<1xi32>
  }
}
