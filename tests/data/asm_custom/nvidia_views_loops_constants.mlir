cuda_tile.module @kernels {
  global private @g <f32: [1.0, 2.5]> : tile<2xf32>
  global private constant @g3 <i8: [1]> : tile<1xi8>
  global constant @g2 alignment = 64 <i16: [7, -7, 0, 1]> : tile<4xi16>
  entry @k(%a: tile<ptr<f32>>, %n: tile<i32>, %m: tile<i64>, %c: tile<i1>) optimization_hints=<default = {}> {
    %c0 = constant <i32: 0> : tile<i32>
    %c1 = constant <i32: 1> : tile<i32>
    %i8 = constant <i8: [1, -2, 127, -128]> : tile<4xi8>
    %f16 = constant <f16: [1.5, -3.14063, 65504.0, 0.0001]> : tile<4xf16>
    %bf = constant <bf16: [1.0, 3.0e38, -0.0, 1.0e-3]> : tile<4xbf16>
    %f64 = constant <f64: [2.718281828459045, 1.0e-300, 0x7FF8000000000001, 0xFFF0000000000000]> : tile<4xf64>
    %f8a = constant <f8E4M3FN: [0x1, 0x7E, 0x7F, 0x38]> : tile<4xf8E4M3FN>
    %f8b = constant <f8E5M2: [0x7C, 0x7B, 0x01, 0xFC]> : tile<4xf8E5M2>
    %f8c = constant <f8E8M0FNU: [0x7F, 0xFF, 0x00, 0x80]> : tile<4xf8E8M0FNU>
    %f4 = constant <f4E2M1FN: [0x1, 0x7, 0xF, 0x8]> : tile<4xf4E2M1FN>
    %tf = constant <tf32: [1.0, 0.1]> : tile<2xtf32>
    %bool = constant <i1: [true, false]> : tile<2xi1>
    %nan = constant <f32: 0x7FC00000> : tile<8xf32>
    %big = constant <i64: [9223372036854775807, -9223372036854775808]> : tile<2xi64>
    %g = get_global @g : tile<ptr<f32>>
    %x = assume div_by<16>, %a : tile<ptr<f32>>
    %y = assume bounded<0, ?>, %n : tile<i32>
    %z = assume div_by<8, every 2 along 0>, %i8 : tile<4xi8>
    %w = assume same_elements<[2]>, %i8 : tile<4xi8>
    %tv = make_tensor_view %x, shape = [%y, 64], strides = [64, 1] : tile<i32> -> tensor_view<?x64xf32, strides=[64,1]>
    %tv2 = make_tensor_view %x, shape = [%m, %m], strides = [%m, 1] : tile<i64> -> tensor_view<?x?xf32, strides=[?,1]>
    %sv = make_strided_view %tv : strided_view<tile=(4x8), traversal_strides=[2,4], padding_value = neg_inf, tensor_view<?x64xf32, strides=[64,1]>>
    %gv = make_gather_scatter_view %tv : gather_scatter_view<tile=(4x8), padding_value = zero, tensor_view<?x64xf32, strides=[64,1]>, sparse_dim=0>
    %pv = make_partition_view %tv2 : partition_view<tile=(8x4), tensor_view<?x?xf32, strides=[?,1]>, dim_map=[1, 0]>
    %idx = constant <i32: [0, 1, 2, 3]> : tile<4xi32>
    %tv0 = make_tensor_view %x, shape = [], strides = [] : tensor_view<f32>
    %tv3 = make_tensor_view %x, shape = [32, 16], strides = [1, 32] : tensor_view<32x16xf32, strides=[1,32]>
    %gq:2 = get_index_space_shape %gv : gather_scatter_view<tile=(4x8), padding_value = zero, tensor_view<?x64xf32, strides=[64,1]>, sparse_dim=0> -> tile<i32>
    %sq:2 = get_index_space_shape %sv : strided_view<tile=(4x8), traversal_strides=[2,4], padding_value = neg_inf, tensor_view<?x64xf32, strides=[64,1]>> -> tile<i64>
    %t0 = make_token : token
    %a1, %k1 = load_view_tko weak %sv[%c0, %c1] token = %t0 inbounds = [true, false] : strided_view<tile=(4x8), traversal_strides=[2,4], padding_value = neg_inf, tensor_view<?x64xf32, strides=[64,1]>>, tile<i32> -> tile<4x8xf32>, token
    %a2, %k2 = load_view_tko acquire sys %gv[%idx, %c1] : gather_scatter_view<tile=(4x8), padding_value = zero, tensor_view<?x64xf32, strides=[64,1]>, sparse_dim=0>, tile<4xi32>, tile<i32> -> tile<4x8xf32>, token
    %k3 = store_view_tko release tl_blk %a2, %gv[%idx, %c1] token = %k2 optimization_hints = <sm_90 = {latency = 2}> inbounds = [false, true] : tile<4x8xf32>, gather_scatter_view<tile=(4x8), padding_value = zero, tensor_view<?x64xf32, strides=[64,1]>, sparse_dim=0>, tile<4xi32>, tile<i32> -> token
    %s:2 = get_tensor_shape %tv2 : tensor_view<?x?xf32, strides=[?,1]> -> tile<i64>
    %q:2 = get_index_space_shape %pv : partition_view<tile=(8x4), tensor_view<?x?xf32, strides=[?,1]>, dim_map=[1, 0]> -> tile<i16>
    %r:2 = for %iv in (%c0 to %n, step %c1) : tile<i32> iter_values(%u = %c0, %v = %a1) -> (tile<i32>, tile<4x8xf32>) {
      %f = for unsigned %jv in (%iv to %n, step %c1) : tile<i32> iter_values(%uu = %u) -> (tile<i32>) {
        %e = if %c -> (tile<i32>) {
          yield %jv : tile<i32>
        } else {
          yield %uu : tile<i32>
        }
        continue %e : tile<i32>
      }
      continue %f, %v : tile<i32>, tile<4x8xf32>
    }
    %l = loop : tile<i32> {
      if %c {
        break %c0 : tile<i32>
      }
    }
    loop iter_values(%p = %c0, %p2 = %c1) : tile<i32>, tile<i32> {
      if %c {
        break
      }
      continue %p2, %p : tile<i32>, tile<i32>
    }
    %fa = assume bounded<0, ?>, %r#0 : tile<i32>
    %sa = assume bounded<0, ?>, %s#1 : tile<i64>
    %bx, %by, %bz = get_tile_block_id : tile<i32>
    %ba = assume bounded<0, ?>, %by : tile<i32>
    %z84 = constant <f32: 0.0> : tile<8x4xf32>
    %k4 = atomic_red_view_tko relaxed tl_blk %pv[%c1, %c0], addf, %z84 : tile<8x4xf32>, partition_view<tile=(8x4), tensor_view<?x?xf32, strides=[?,1]>, dim_map=[1, 0]>, tile<i32> -> token
  }
}
