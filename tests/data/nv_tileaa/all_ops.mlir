module attributes {nv_tileaa.compute_capability = 100 : i32} {
  nv_tileaa.global @g {type = f32}
  nv_tileaa.plugin @frag : (tile<8xf32>) -> tile<8xf32> {registers = 64 : i32}
  nv_tileaa.func @callee : (f32) -> f32 {
  ^bb0(%x: f32):
    nv_tileaa.return %x : f32
  }
  nv_tileaa.func @kernel : (!nv_tileaa.ptr<f32, 1>, tile<8xf32>, f32, index, i32) -> () attributes {kernel} {
  ^bb0(%p: !nv_tileaa.ptr<f32, 1>, %a: tile<8xf32>, %s: f32, %i: index, %n: i32):
    %0 = nv_tileaa.addf %a, %a rounding<zero> : (tile<8xf32>, tile<8xf32>) -> tile<8xf32>
    %1 = nv_tileaa.subf %a, %s : (tile<8xf32>, f32) -> tile<8xf32>
    %2 = nv_tileaa.mulf %a, %a : (tile<8xf32>, tile<8xf32>) -> tile<8xf32>
    %3 = nv_tileaa.divf %a, %a rounding<approx> : (tile<8xf32>, tile<8xf32>) -> tile<8xf32>
    %4 = nv_tileaa.fma %a, %a, %a {fastmath = #arith.fastmath<contract>} : (tile<8xf32>, tile<8xf32>, tile<8xf32>) -> tile<8xf32>
    %5 = nv_tileaa.sqrt %a rounding<nearest_even> : (tile<8xf32>) -> tile<8xf32>
    %6 = nv_tileaa.rsqrt %a : (tile<8xf32>) -> tile<8xf32>
    %7 = nv_tileaa.exp2 %s : (f32) -> f32
    %8 = nv_tileaa.clampf %a, %s, %s propagate_nan : (tile<8xf32>, f32, f32) -> tile<8xf32>
    %9 = nv_tileaa.mulhiui %n, %n : (i32, i32) -> i32
    %t0 = nv_tileaa.create_mem_token : !nv_tileaa.mem_token
    %t1 = nv_tileaa.join_mem_token [%t0, %t0] : !nv_tileaa.mem_token
    %mr = nv_tileaa.make_memref %p offset %i sizes [%i, %i] strides [%i, %i] {alias_scope = 7 : i32} : (!nv_tileaa.ptr<f32, 1>, index, index, index, index, index) -> !nv_tileaa.memref<?x?xf32, 1>
    %v, %t2 = nv_tileaa.tiled_load %mr[%i, %i] token %t1 {allow_tma, in_bounds = array<i1: true, true>} : (!nv_tileaa.memref<?x?xf32, 1>, index, index, !nv_tileaa.mem_token) -> (tile<8x8xf32>, !nv_tileaa.mem_token)
    %t3 = nv_tileaa.tiled_store %mr[%i, %i], %v token %t2 sem release scope gpu : (!nv_tileaa.memref<?x?xf32, 1>, tile<8x8xf32>, index, index, !nv_tileaa.mem_token) -> !nv_tileaa.mem_token
    %pp = nv_tileaa.addptr %p, %i : (!nv_tileaa.ptr<f32, 1>, index) -> !nv_tileaa.ptr<f32, 1>
    %lanes = nv_tileaa.make_range 0 to 8 : tile<8xi32>
    %ptrs = nv_tileaa.addptr %p, %lanes : (!nv_tileaa.ptr<f32, 1>, tile<8xi32>) -> tile<8x!nv_tileaa.ptr<f32, 1>>
    %true = "test.src"() : () -> i1
    %mask = nv_tileaa.splat %true : (i1) -> tile<8xi1>
    %l, %t4 = nv_tileaa.load %ptrs[] mask %mask other %a token %t3 sem acquire scope tl_blk : (tile<8x!nv_tileaa.ptr<f32, 1>>, tile<8xi1>, tile<8xf32>, !nv_tileaa.mem_token) -> (tile<8xf32>, !nv_tileaa.mem_token)
    %sl = nv_tileaa.load %pp[] : (!nv_tileaa.ptr<f32, 1>) -> f32
    %g = nv_tileaa.gather_load %ptrs[] : (tile<8x!nv_tileaa.ptr<f32, 1>>) -> tile<8xf32>
    %t5 = nv_tileaa.store %ptrs[], %a mask %mask token %t4 : (tile<8x!nv_tileaa.ptr<f32, 1>>, tile<8xf32>, tile<8xi1>, !nv_tileaa.mem_token) -> !nv_tileaa.mem_token
    nv_tileaa.scatter_store %ptrs[], %a : (tile<8x!nv_tileaa.ptr<f32, 1>>, tile<8xf32>) -> ()
    %old, %t6 = nv_tileaa.atomic_cas %ptrs[], %a, %a token %t5 sem acq_rel scope sys : (tile<8x!nv_tileaa.ptr<f32, 1>>, tile<8xf32>, tile<8xf32>, !nv_tileaa.mem_token) -> (tile<8xf32>, !nv_tileaa.mem_token)
    %r = nv_tileaa.atomic_rmw addf %ptrs[], %a mask %mask : (tile<8x!nv_tileaa.ptr<f32, 1>>, tile<8xf32>, tile<8xi1>) -> tile<8xf32>
    %tr = nv_tileaa.tiled_atomic_rmw addf %mr[%i, %i], %v : (!nv_tileaa.memref<?x?xf32, 1>, tile<8x8xf32>, index, index) -> tile<8x8xf32>
    %gp = nv_tileaa.get_global @g : !nv_tileaa.ptr<f32, 1>
    %a16 = "test.src"() : () -> tile<16x32xf16>
    %b16 = "test.src"() : () -> tile<32x8xf16>
    %c32 = "test.src"() : () -> tile<16x8xf32>
    %d = nv_tileaa.dot %a16, %b16, %c32 {input_precision = "tf32"} : (tile<16x32xf16>, tile<32x8xf16>, tile<16x8xf32>) -> tile<16x8xf32>
    %a8 = "test.src"() : () -> tile<16x64xf8E4M3FN>
    %b8 = "test.src"() : () -> tile<64x8xf8E4M3FN>
    %sa = "test.src"() : () -> tile<16x2xf8E8M0FNU>
    %sb = "test.src"() : () -> tile<2x8xf8E8M0FNU>
    %ds = nv_tileaa.dot %a8, %b8, %c32 sfa %sa sfb %sb : (tile<16x64xf8E4M3FN>, tile<64x8xf8E4M3FN>, tile<16x8xf32>, tile<16x2xf8E8M0FNU>, tile<2x8xf8E8M0FNU>) -> tile<16x8xf32>
    %ai = "test.src"() : () -> tile<16x32xi8>
    %bi = "test.src"() : () -> tile<32x8xi8>
    %ci = "test.src"() : () -> tile<16x8xi32>
    %di = nv_tileaa.dot %ai, %bi, %ci {signedness_a = 0 : i32, signedness_b = 1 : i32} : (tile<16x32xi8>, tile<32x8xi8>, tile<16x8xi32>) -> tile<16x8xi32>
    %act = "test.src"() : () -> tile<1x8x8x4xf16>
    %flt = "test.src"() : () -> tile<4x4xf16>
    %acc = "test.src"() : () -> tile<64x4xf32>
    %cd = nv_tileaa.conv_dot %act, %flt, %acc {strides = array<i32: 1, 1>} : (tile<1x8x8x4xf16>, tile<4x4xf16>, tile<64x4xf32>) -> tile<64x4xf32>
    %ct = nv_tileaa.conv_tile %act filter = [3, 3] {padding = array<i32: 1, 1>} : (tile<1x8x8x4xf16>) -> tile<64x4xf16>
    %red = nv_tileaa.reduce %v {axis = 1 : i32} : (tile<8x8xf32>) -> tile<8xf32> {
    ^bb0(%x: f32, %y: f32):
      %z = nv_tileaa.addf %x, %y : (f32, f32) -> f32
      nv_tileaa.yield %z : f32
    }
    %scn = nv_tileaa.scan %v {axis = 0 : i32, inclusive = true} : (tile<8x8xf32>) -> tile<8x8xf32> {
    ^bb0(%x: f32, %y: f32):
      %z = nv_tileaa.addf %x, %y : (f32, f32) -> f32
      nv_tileaa.yield %z : f32
    }
    %h = nv_tileaa.histogram %lanes : (tile<8xi32>) -> tile<16xi32>
    %bc = nv_tileaa.broadcast %red : (tile<8xf32>) -> tile<8xf32>
    %ex = nv_tileaa.expand_dims %red axes = [1] : (tile<8xf32>) -> tile<8x1xf32>
    %bx = nv_tileaa.broadcast %ex : (tile<8x1xf32>) -> tile<8x8xf32>
    %e1 = nv_tileaa.extract %v[%i] : (tile<8x8xf32>, index) -> tile<8xf32>
    %e0 = nv_tileaa.extract %v[%i, %i] : (tile<8x8xf32>, index, index) -> f32
    %es = nv_tileaa.extract_slice %v[%i, %i] sizes = [4, 8] : (tile<8x8xf32>, index, index) -> tile<4x8xf32>
    %vw = nv_tileaa.view %v : (tile<8x8xf32>) -> tile<64xf32>
    %ca = nv_tileaa.cat %es, %es dim = 0 : (tile<4x8xf32>, tile<4x8xf32>) -> tile<8x8xf32>
    %pm = nv_tileaa.permute %es [1, 0] : (tile<4x8xf32>) -> tile<8x4xf32>
    %gen = nv_tileaa.generate : () -> tile<4x4xf32> {
    ^bb0(%r0: index, %r1: index):
      nv_tileaa.yield %s : f32
    }
    %bt = nv_tileaa.block_tile %v block = [4, 4] : (tile<8x8xf32>) -> tile<2x2x4x4xf32>
    %ds0 = nv_tileaa.get_dim_size %mr dim = 1 : (!nv_tileaa.memref<?x?xf32, 1>) -> index
    %i64 = "test.src"() : () -> i64
    %ip = nv_tileaa.int_to_ptr %i64 : (i64) -> !nv_tileaa.ptr<f32, 1>
    %pi = nv_tileaa.ptr_to_int %p : (!nv_tileaa.ptr<f32, 1>) -> i64
    %bcst = nv_tileaa.bitcast %a : (tile<8xf32>) -> tile<8xi32>
    %ff = nv_tileaa.fp_to_fp %a rounding<nearest_even> : (tile<8xf32>) -> tile<8xf16>
    %ext = nv_tileaa.extern_elementwise "__nv_expf"(%a) {libname = "libdevice"} : (tile<8xf32>) -> tile<8xf32>
    %asm:2 = nv_tileaa.elementwise_inline_asm "mov.b32 $0, $2; mov.b32 $1, $2;"(%a) {constraints = "=r,=r,r", pure} : (tile<8xf32>) -> (tile<8xf32>, tile<8xf32>)
    %cei = nv_tileaa.call_elementwise_intrinsic "llvm.nvvm.ex2.approx.f"(%a) : (tile<8xf32>) -> tile<8xf32>
    %inj = nv_tileaa.inject_ir "%0 = arith.addf %arg0, %arg0 : f32"(%s) : (f32) -> f32
    nv_tileaa.mark_for_reuse %v : tile<8x8xf32>
    nv_tileaa.assert %mask, "lane out of range" : tile<8xi1>
    %as = nv_tileaa.assume #cuda_tile.div_by<16>, %n : i32
    %ob:2 = nv_tileaa.optimization_barrier %a, %s : (tile<8xf32>, f32) -> (tile<8xf32>, f32)
    nv_tileaa.pragma "unroll" {count = 4 : i32}
    nv_tileaa.message "tiles lowered"
    nv_tileaa.print "value %f", %s : (f32) -> ()
    %cl = nv_tileaa.call @callee(%s) : (f32) -> f32
    nv_tileaa.launch_func @callee grid [%i] (%s) : (index, f32) -> ()
    %exr = nv_tileaa.execute plugin @frag (%a) : (tile<8xf32>) -> tile<8xf32> {
    ^bb0(%ea: tile<8xf32>):
      nv_tileaa.queue.yield %ea : tile<8xf32>
    }
    %pid = nv_tileaa.get_program_id 0 : i32
    %np = nv_tileaa.get_num_programs 2 : i32
    %nxt = nv_tileaa.cancel_next_program_id : index
    %ok = nv_tileaa.is_valid_program_id %nxt : (index) -> i1
    %q = nv_tileaa.create_queue 2 : !nv_tileaa.queue<tile<8xf32>, index>
    nv_tileaa.queue.put %q, %a, %i : (!nv_tileaa.queue<tile<8xf32>, index>, tile<8xf32>, index) -> ()
    %qv:2 = nv_tileaa.queue.get %q : (!nv_tileaa.queue<tile<8xf32>, index>) -> (tile<8xf32>, index)
    nv_tileaa.return
  }
}
