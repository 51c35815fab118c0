"""The interpreter runs hand-written nv_tileaa IR: declared semantics and the hand-written ops
(memrefs, tiled and pointer memory with masks and in_bounds facts, atomics, dot, reduce, scan,
grid queries, the arith/math/scf ops of spec/ops/{arith,math,scf})."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest

from tilegen.runtime.asm import parse_module
from tilegen.runtime.diagnostics import DiagnosticEngine
from tilegen.runtime.interp import RunError, run_module
from tilegen.runtime.interp.elementwise import semantics_of
from tilegen.runtime.interp.executor import HANDLERS
from tilegen.runtime.opdef import all_ops
from tilegen.runtime.verify.engine import verify_module

PTR = "!nv_tileaa.ptr<f32, 1>"
MR = "!nv_tileaa.memref<?x?xf32, 1>"


def _kernel(params: str, body: str, verify: bool = True):
    """A module with one kernel function ``@k`` over ``params`` (``%name: type, ...``)."""
    types = ", ".join(p.split(":", 1)[1].strip() for p in re.split(r", (?=%)", params))
    text = (
        f"module {{\n  nv_tileaa.func @k : ({types}) -> () attributes {{kernel}} {{\n"
        f"  ^bb0({params}):\n{body}\n    nv_tileaa.return\n  }}\n}}\n"
    )
    module = parse_module(text, allow_unregistered=True)
    if verify:
        diag = DiagnosticEngine()
        assert verify_module(module, diag), [d.format() for d in diag.diagnostics]
    return module


def _matrix_args(a: np.ndarray, out: np.ndarray) -> list:
    return [("a", a), ("out", out)]


# a 2-d array parameter is (ptr, size0, size1, stride0, stride1); these make memrefs of both
_TWO_ARRAYS = (
    f"%pa: {PTR}, %m: i32, %n: i32, %sm: i32, %sn: i32, "
    f"%po: {PTR}, %m2: i32, %n2: i32, %sm2: i32, %sn2: i32"
)
_MEMREFS = f"""
    %mi = "arith.index_cast"(%m) : (i32) -> index
    %ni = "arith.index_cast"(%n) : (i32) -> index
    %smi = "arith.index_cast"(%sm) : (i32) -> index
    %sni = "arith.index_cast"(%sn) : (i32) -> index
    %a = nv_tileaa.make_memref %pa sizes [%mi, %ni] strides [%smi, %sni] : ({PTR}, index, index, index, index) -> {MR}
    %o = nv_tileaa.make_memref %po sizes [%mi, %ni] strides [%smi, %sni] : ({PTR}, index, index, index, index) -> {MR}
    %t0 = nv_tileaa.create_mem_token : !nv_tileaa.mem_token
"""


def test_every_elementwise_and_shape_op_is_declared_or_handled() -> None:
    """Each nv_tileaa op the conversion can produce runs: spec semantics or a handler."""
    missing = [
        o.name
        for o in all_ops()
        if o.dialect == "nv_tileaa"
        and o.name not in HANDLERS
        and (semantics_of(o) is None or semantics_of(o).expr is None)
    ]
    # queue/plugin/launch structure and escape hatches have no CPU meaning (no lowering emits them)
    assert set(missing) <= {
        "nv_tileaa.func", "nv_tileaa.global", "nv_tileaa.plugin", "nv_tileaa.launch_func",
        "nv_tileaa.execute", "nv_tileaa.inject_ir", "nv_tileaa.call", "nv_tileaa.create_queue",
        "nv_tileaa.queue.get", "nv_tileaa.queue.put", "nv_tileaa.queue.yield",
        "nv_tileaa.cancel_next_program_id", "nv_tileaa.is_valid_program_id",
        "nv_tileaa.extern_elementwise", "nv_tileaa.elementwise_inline_asm",
        "nv_tileaa.call_elementwise_intrinsic", "nv_tileaa.conv_dot", "nv_tileaa.conv_tile",
        "nv_tileaa.block_tile", "nv_tileaa.generate", "nv_tileaa.histogram",
    }, missing  # fmt: skip


def test_tiled_load_pads_out_of_bounds_and_tiled_store_clips() -> None:
    """A 4x4 tile at element origin (2, 2) of a 5x6 array: outside reads ``other``, writes drop."""
    body = (
        _MEMREFS
        + f"""
    %c2 = "arith.constant"() {{value = 2 : index}} : () -> index
    %nine = "arith.constant"() {{value = 9.0 : f32}} : () -> f32
    %pad = nv_tileaa.splat %nine : (f32) -> tile<4x4xf32>
    %v, %t1 = nv_tileaa.tiled_load %a[%c2, %c2] other %pad token %t0 : ({MR}, index, index, tile<4x4xf32>, !nv_tileaa.mem_token) -> (tile<4x4xf32>, !nv_tileaa.mem_token)
    %t2 = nv_tileaa.tiled_store %o[%c2, %c2], %v token %t1 : ({MR}, tile<4x4xf32>, index, index, !nv_tileaa.mem_token) -> !nv_tileaa.mem_token"""
    )
    a = np.arange(30, dtype=np.float32).reshape(5, 6)
    out = run_module(_kernel(_TWO_ARRAYS, body, verify=False), _matrix_args(a, np.zeros_like(a)))
    want = np.zeros_like(a)
    want[2:, 2:] = a[2:, 2:]
    np.testing.assert_array_equal(out["out"], want)


def test_tiled_load_in_bounds_fact_is_checked() -> None:
    body = (
        _MEMREFS
        + f"""
    %c4 = "arith.constant"() {{value = 4 : index}} : () -> index
    %v, %t1 = nv_tileaa.tiled_load %a[%c4, %c4] token %t0 {{in_bounds = array<i1: true, false>}} : ({MR}, index, index, !nv_tileaa.mem_token) -> (tile<2x2xf32>, !nv_tileaa.mem_token)"""
    )
    a = np.zeros((5, 6), dtype=np.float32)
    with pytest.raises(RunError, match=r"dimension\(s\) \[0\] marked in_bounds"):
        run_module(_kernel(_TWO_ARRAYS, body, verify=False), _matrix_args(a, a.copy()))


def test_pointer_load_store_with_mask_other_and_addptr() -> None:
    params = f"%p: {PTR}, %n: i32, %s: i32, %q: {PTR}, %n2: i32, %s2: i32"
    body = f"""
    %lanes = nv_tileaa.make_range 0 to 8 : tile<8xi32>
    %pid = nv_tileaa.get_program_id 0 : i32
    %eight = "arith.constant"() {{value = 8 : i32}} : () -> i32
    %base = "arith.muli"(%pid, %eight) : (i32, i32) -> i32
    %bs = nv_tileaa.splat %base : (i32) -> tile<8xi32>
    %idx = "arith.addi"(%bs, %lanes) : (tile<8xi32>, tile<8xi32>) -> tile<8xi32>
    %ns = nv_tileaa.splat %n : (i32) -> tile<8xi32>
    %mask = "arith.cmpi"(%idx, %ns) {{predicate = 2 : i64}} : (tile<8xi32>, tile<8xi32>) -> tile<8xi1>
    %ptrs = nv_tileaa.addptr %p, %idx : ({PTR}, tile<8xi32>) -> tile<8x{PTR}>
    %m1 = "arith.constant"() {{value = -1.0 : f32}} : () -> f32
    %other = nv_tileaa.splat %m1 : (f32) -> tile<8xf32>
    %x = nv_tileaa.load %ptrs[] mask %mask other %other : (tile<8x{PTR}>, tile<8xi1>, tile<8xf32>) -> tile<8xf32>
    %y = nv_tileaa.fma %x, %x, %x : (tile<8xf32>, tile<8xf32>, tile<8xf32>) -> tile<8xf32>
    %qs = nv_tileaa.addptr %q, %idx : ({PTR}, tile<8xi32>) -> tile<8x{PTR}>
    nv_tileaa.store %qs[], %y mask %mask : (tile<8x{PTR}>, tile<8xf32>, tile<8xi1>) -> ()"""
    x = np.linspace(-2, 2, 13).astype(np.float32)
    out = run_module(_kernel(params, body, verify=False), [("x", x), ("y", np.zeros_like(x))], (2,))
    np.testing.assert_array_equal(out["y"], (x.astype(np.float64) ** 2 + x).astype(np.float32))


def test_masked_off_pointer_lanes_read_other() -> None:
    params = f"%p: {PTR}, %n: i32, %s: i32, %q: {PTR}, %n2: i32, %s2: i32"
    body = f"""
    %lanes = nv_tileaa.make_range 0 to 4 : tile<4xi32>
    %two = "arith.constant"() {{value = 2 : i32}} : () -> i32
    %ts = nv_tileaa.splat %two : (i32) -> tile<4xi32>
    %mask = "arith.cmpi"(%lanes, %ts) {{predicate = 2 : i64}} : (tile<4xi32>, tile<4xi32>) -> tile<4xi1>
    %ptrs = nv_tileaa.addptr %p, %lanes : ({PTR}, tile<4xi32>) -> tile<4x{PTR}>
    %x = nv_tileaa.load %ptrs[] mask %mask : (tile<4x{PTR}>, tile<4xi1>) -> tile<4xf32>
    %qs = nv_tileaa.addptr %q, %lanes : ({PTR}, tile<4xi32>) -> tile<4x{PTR}>
    nv_tileaa.store %qs[], %x : (tile<4x{PTR}>, tile<4xf32>) -> ()"""
    x = np.array([5, 6, 7, 8], dtype=np.float32)
    out = run_module(_kernel(params, body, verify=False), [("x", x), ("y", np.ones_like(x))])
    np.testing.assert_array_equal(out["y"], [5, 6, 0, 0])


def test_atomic_rmw_and_cas_return_old_values() -> None:
    params = "%p: !nv_tileaa.ptr<i32, 1>, %n: i32, %s: i32"
    body = """
    %zero = "arith.constant"() {value = 0 : i32} : () -> i32
    %zs = nv_tileaa.splat %zero : (i32) -> tile<4xi32>
    %ptrs = nv_tileaa.addptr %p, %zs : (!nv_tileaa.ptr<i32, 1>, tile<4xi32>) -> tile<4x!nv_tileaa.ptr<i32, 1>>
    %lanes = nv_tileaa.make_range 1 to 5 : tile<4xi32>
    %old = nv_tileaa.atomic_rmw add %ptrs[], %lanes : (tile<4x!nv_tileaa.ptr<i32, 1>>, tile<4xi32>) -> tile<4xi32>
    %one = "arith.constant"() {value = 1 : i32} : () -> i32
    %p1 = nv_tileaa.addptr %p, %one : (!nv_tileaa.ptr<i32, 1>, i32) -> !nv_tileaa.ptr<i32, 1>
    %seven = "arith.constant"() {value = 7 : i32} : () -> i32
    %c = nv_tileaa.atomic_cas %p1[], %zero, %seven : (!nv_tileaa.ptr<i32, 1>, i32, i32) -> i32
    %two = "arith.constant"() {value = 2 : i32} : () -> i32
    %p2 = nv_tileaa.addptr %p, %two : (!nv_tileaa.ptr<i32, 1>, i32) -> !nv_tileaa.ptr<i32, 1>
    %olds = nv_tileaa.reduce %old {axis = 0 : i32} : (tile<4xi32>) -> i32 {
    ^bb0(%u: i32, %v: i32):
      %r = "arith.addi"(%u, %v) : (i32, i32) -> i32
      nv_tileaa.yield %r : i32
    }
    %sum = "arith.addi"(%olds, %c) : (i32, i32) -> i32
    nv_tileaa.store %p2[], %sum : (!nv_tileaa.ptr<i32, 1>, i32) -> ()"""
    out = run_module(_kernel(params, body, verify=False), [("x", np.array([0, 0, 0], np.int32))])
    # old values 0, 1, 3, 6 (row-major order); cas saw 0
    np.testing.assert_array_equal(out["x"], [10, 7, 10])


def test_dot_reduce_scan_on_memref_tiles() -> None:
    body = (
        _MEMREFS
        + f"""
    %c0 = "arith.constant"() {{value = 0 : index}} : () -> index
    %x, %t1 = nv_tileaa.tiled_load %a[%c0, %c0] token %t0 : ({MR}, index, index, !nv_tileaa.mem_token) -> (tile<4x4xf32>, !nv_tileaa.mem_token)
    %z = "arith.constant"() {{value = 0.5 : f32}} : () -> f32
    %acc = nv_tileaa.splat %z : (f32) -> tile<4x4xf32>
    %d = nv_tileaa.dot %x, %x, %acc : (tile<4x4xf32>, tile<4x4xf32>, tile<4x4xf32>) -> tile<4x4xf32>
    %s = nv_tileaa.scan %d {{axis = 1 : i32, inclusive = true}} : (tile<4x4xf32>) -> tile<4x4xf32> {{
    ^bb0(%u: f32, %v: f32):
      %r = nv_tileaa.addf %u, %v : (f32, f32) -> f32
      nv_tileaa.yield %r : f32
    }}
    %mx = nv_tileaa.reduce %s {{axis = 1 : i32}} : (tile<4x4xf32>) -> tile<4xf32> {{
    ^bb0(%u: f32, %v: f32):
      %r = "arith.maximumf"(%u, %v) : (f32, f32) -> f32
      nv_tileaa.yield %r : f32
    }}
    %mx2 = nv_tileaa.expand_dims %mx axes = [1] : (tile<4xf32>) -> tile<4x1xf32>
    %mb = nv_tileaa.broadcast %mx2 : (tile<4x1xf32>) -> tile<4x4xf32>
    %t2 = nv_tileaa.tiled_store %o[%c0, %c0], %mb token %t1 : ({MR}, tile<4x4xf32>, index, index, !nv_tileaa.mem_token) -> !nv_tileaa.mem_token"""
    )
    a = (np.arange(16, dtype=np.float32).reshape(4, 4) - 5) / 4
    out = run_module(_kernel(_TWO_ARRAYS, body, verify=False), _matrix_args(a, np.zeros_like(a)))
    d = a.astype(np.float64) @ a + 0.5
    want = np.cumsum(d.astype(np.float32), axis=1).max(axis=1)
    np.testing.assert_allclose(out["out"], np.repeat(want[:, None], 4, axis=1), rtol=1e-6)


def test_reduce_is_a_pairwise_tree() -> None:
    """Lane k combines with lane k + n/2 (the cuda_tile.reduce order), visible in f32 sums."""
    params = f"%p: {PTR}, %n: i32, %s: i32"
    body = f"""
    %lanes = nv_tileaa.make_range 0 to 4 : tile<4xi32>
    %ptrs = nv_tileaa.addptr %p, %lanes : ({PTR}, tile<4xi32>) -> tile<4x{PTR}>
    %x = nv_tileaa.load %ptrs[] : (tile<4x{PTR}>) -> tile<4xf32>
    %r = nv_tileaa.reduce %x {{axis = 0 : i32}} : (tile<4xf32>) -> f32 {{
    ^bb0(%u: f32, %v: f32):
      %q = nv_tileaa.addf %u, %v : (f32, f32) -> f32
      nv_tileaa.yield %q : f32
    }}
    nv_tileaa.store %p[], %r : ({PTR}, f32) -> ()"""
    x = np.array([1e8, 1, -1e8, 1], dtype=np.float32)
    out = run_module(_kernel(params, body, verify=False), [("x", x.copy())])
    # (x0 + x2) + (x1 + x3) = 2; left to right, 1e8 + 1 rounds to 1e8 and the sum is 1
    assert out["x"][0] == 2


def test_scf_for_and_if_carry_values() -> None:
    params = "%p: !nv_tileaa.ptr<i32, 1>, %n: i32, %s: i32"
    body = """
    %c0 = "arith.constant"() {value = 0 : i32} : () -> i32
    %c1 = "arith.constant"() {value = 1 : i32} : () -> i32
    %c10 = "arith.constant"() {value = 10 : i32} : () -> i32
    %sum = "scf.for"(%c0, %c10, %c1, %c0) ({
    ^bb0(%i: i32, %acc: i32):
      %odd = "arith.andi"(%i, %c1) : (i32, i32) -> i32
      %isodd = "arith.cmpi"(%odd, %c0) {predicate = 1 : i64} : (i32, i32) -> i1
      %next = "scf.if"(%isodd) ({
        %a = "arith.addi"(%acc, %i) : (i32, i32) -> i32
        "scf.yield"(%a) : (i32) -> ()
      }, {
        "scf.yield"(%acc) : (i32) -> ()
      }) : (i1) -> i32
      "scf.yield"(%next) : (i32) -> ()
    }) : (i32, i32, i32, i32) -> i32
    nv_tileaa.store %p[], %sum : (!nv_tileaa.ptr<i32, 1>, i32) -> ()"""
    out = run_module(_kernel(params, body, verify=False), [("x", np.zeros(1, np.int32))])
    assert out["x"][0] == 1 + 3 + 5 + 7 + 9


def test_declared_rounding_mode_is_honoured() -> None:
    params = f"%p: {PTR}, %n: i32, %s: i32"
    body = f"""
    %lanes = nv_tileaa.make_range 0 to 2 : tile<2xi32>
    %ptrs = nv_tileaa.addptr %p, %lanes : ({PTR}, tile<2xi32>) -> tile<2x{PTR}>
    %x = nv_tileaa.load %ptrs[] : (tile<2x{PTR}>) -> tile<2xf32>
    %one = "arith.constant"() {{value = 1.0 : f32}} : () -> f32
    %third = nv_tileaa.splat %one : (f32) -> tile<2xf32>
    %three = "arith.constant"() {{value = 3.0 : f32}} : () -> f32
    %t3 = nv_tileaa.splat %three : (f32) -> tile<2xf32>
    %down = nv_tileaa.divf %third, %t3 rounding<zero> : (tile<2xf32>, tile<2xf32>) -> tile<2xf32>
    %up = nv_tileaa.divf %third, %t3 rounding<positive_inf> : (tile<2xf32>, tile<2xf32>) -> tile<2xf32>
    %d = nv_tileaa.subf %up, %down : (tile<2xf32>, tile<2xf32>) -> tile<2xf32>
    nv_tileaa.store %ptrs[], %d : (tile<2x{PTR}>, tile<2xf32>) -> ()"""
    out = run_module(_kernel(params, body, verify=False), [("x", np.zeros(2, np.float32))])
    assert out["x"][0] == np.spacing(np.float32(1 / 3))


def _dot_kernel(el: str, acc: str, attrs: str) -> object:
    params = f"%p: !nv_tileaa.ptr<{el}, 1>, %n: i32, %s: i32, %q: !nv_tileaa.ptr<{acc}, 1>, %n2: i32, %s2: i32"
    body = f"""
    %lanes = nv_tileaa.make_range 0 to 4 : tile<4xi32>
    %ptrs = nv_tileaa.addptr %p, %lanes : (!nv_tileaa.ptr<{el}, 1>, tile<4xi32>) -> tile<4x!nv_tileaa.ptr<{el}, 1>>
    %x = nv_tileaa.load %ptrs[] : (tile<4x!nv_tileaa.ptr<{el}, 1>>) -> tile<4x{el}>
    %a = nv_tileaa.view %x : (tile<4x{el}>) -> tile<2x2x{el}>
    %z = "arith.constant"() {{value = 0 : {acc}}} : () -> {acc}
    %c = nv_tileaa.splat %z : ({acc}) -> tile<2x2x{acc}>
    %d = nv_tileaa.dot %a, %a, %c {attrs} : (tile<2x2x{el}>, tile<2x2x{el}>, tile<2x2x{acc}>) -> tile<2x2x{acc}>
    %dv = nv_tileaa.view %d : (tile<2x2x{acc}>) -> tile<4x{acc}>
    %qs = nv_tileaa.addptr %q, %lanes : (!nv_tileaa.ptr<{acc}, 1>, tile<4xi32>) -> tile<4x!nv_tileaa.ptr<{acc}, 1>>
    nv_tileaa.store %qs[], %dv : (tile<4x!nv_tileaa.ptr<{acc}, 1>>, tile<4x{acc}>) -> ()"""
    return _kernel(params, body.replace("{value = 0 : f32}", "{value = 0.0 : f32}"), verify=False)


def test_dot_input_precision_tf32_rounds_f32_inputs() -> None:
    x = np.array([1 + 2.0**-12, 0, 0, 1], dtype=np.float32)
    plain = run_module(_dot_kernel("f32", "f32", ""), [("x", x), ("y", np.zeros(4, np.float32))])
    tf32 = run_module(
        _dot_kernel("f32", "f32", '{input_precision = "tf32"}'),
        [("x", x), ("y", np.zeros(4, np.float32))],
    )
    assert plain["y"][0] == np.float32((1 + 2.0**-12) ** 2)
    assert tf32["y"][0] == 1.0  # 1 + 2^-12 is below tf32's 10-bit mantissa


def test_dot_integer_signedness() -> None:
    x = np.array([-1, 0, 0, 1], dtype=np.int8)  # 0xFF: -1 signed, 255 unsigned
    signed = run_module(_dot_kernel("i8", "i32", ""), [("x", x), ("y", np.zeros(4, np.int32))])
    unsigned = run_module(
        _dot_kernel("i8", "i32", "{signedness_a = 1 : i32, signedness_b = 1 : i32}"),
        [("x", x), ("y", np.zeros(4, np.int32))],
    )
    assert signed["y"][0] == 1 and unsigned["y"][0] == 255 * 255


def test_arith_ops_borrow_cuda_tile_semantics_with_the_row_case() -> None:
    """arith.shrui / shrsi are cuda_tile.shri with signedness unsigned / signed (from the
    conversion spec's case rows); arith.cmpf takes string predicates as the conversion emits."""
    params = "%p: !nv_tileaa.ptr<i32, 1>, %n: i32, %s: i32"
    body = """
    %x = nv_tileaa.load %p[] : (!nv_tileaa.ptr<i32, 1>) -> i32
    %one = "arith.constant"() {value = 1 : i32} : () -> i32
    %u = "arith.shrui"(%x, %one) : (i32, i32) -> i32
    %s1 = "arith.shrsi"(%x, %one) : (i32, i32) -> i32
    %p1 = nv_tileaa.addptr %p, %one : (!nv_tileaa.ptr<i32, 1>, i32) -> !nv_tileaa.ptr<i32, 1>
    nv_tileaa.store %p1[], %u : (!nv_tileaa.ptr<i32, 1>, i32) -> ()
    %two = "arith.constant"() {value = 2 : i32} : () -> i32
    %p2 = nv_tileaa.addptr %p, %two : (!nv_tileaa.ptr<i32, 1>, i32) -> !nv_tileaa.ptr<i32, 1>
    nv_tileaa.store %p2[], %s1 : (!nv_tileaa.ptr<i32, 1>, i32) -> ()
    %nan = "arith.constant"() {value = 0x7FC00000 : f32} : () -> f32
    %uno = "arith.cmpf"(%nan, %nan) {predicate = "une"} : (f32, f32) -> i1
    %ord = "arith.cmpf"(%nan, %nan) {predicate = "oeq"} : (f32, f32) -> i1
    %b = "arith.extui"(%uno) : (i1) -> i32
    %c = "arith.extui"(%ord) : (i1) -> i32
    %bc = "arith.addi"(%b, %c) : (i32, i32) -> i32
    %three = "arith.constant"() {value = 3 : i32} : () -> i32
    %p3 = nv_tileaa.addptr %p, %three : (!nv_tileaa.ptr<i32, 1>, i32) -> !nv_tileaa.ptr<i32, 1>
    nv_tileaa.store %p3[], %bc : (!nv_tileaa.ptr<i32, 1>, i32) -> ()"""
    x = np.array([-8, 0, 0, 0], dtype=np.int32)
    out = run_module(_kernel(params, body, verify=False), [("x", x)])
    np.testing.assert_array_equal(out["x"], [-8, 0x7FFFFFFC, -4, 1])


def test_unknown_predicate_is_a_located_diagnostic() -> None:
    params = "%p: !nv_tileaa.ptr<i32, 1>, %n: i32, %s: i32"
    body = """
    %x = nv_tileaa.load %p[] : (!nv_tileaa.ptr<i32, 1>) -> i32
    %c = "arith.cmpi"(%x, %x) {predicate = "bogus"} : (i32, i32) -> i1"""
    with pytest.raises(RunError) as e:
        run_module(_kernel(params, body, verify=False), [("x", np.zeros(1, np.int32))])
    assert "arith.cmpi" in str(e.value) and "unknown predicate" in str(e.value)
    assert e.value.diagnostics[0].loc is not None


def test_gather_scatter_through_a_memref_pad_and_drop_outside_lanes() -> None:
    """Per-lane memref indices: lanes outside the memref read ``other`` and are not written."""
    body = (
        _MEMREFS
        + f"""
    %lanes = nv_tileaa.make_range 0 to 8 : tile<8xi32>
    %three = "arith.constant"() {{value = 3 : i32}} : () -> i32
    %t3 = nv_tileaa.splat %three : (i32) -> tile<8xi32>
    %rows = "arith.subi"(%lanes, %t3) : (tile<8xi32>, tile<8xi32>) -> tile<8xi32>
    %one = "arith.constant"() {{value = 1 : i32}} : () -> i32
    %cols = nv_tileaa.splat %one : (i32) -> tile<8xi32>
    %m1 = "arith.constant"() {{value = -1.0 : f32}} : () -> f32
    %other = nv_tileaa.splat %m1 : (f32) -> tile<8xf32>
    %g = nv_tileaa.gather_load %a[%rows, %cols] other %other : ({MR}, tile<8xi32>, tile<8xi32>, tile<8xf32>) -> tile<8xf32>
    %zero = "arith.constant"() {{value = 0 : i32}} : () -> i32
    %c0 = nv_tileaa.splat %zero : (i32) -> tile<8xi32>
    nv_tileaa.scatter_store %o[%lanes, %c0], %g : ({MR}, tile<8xf32>, tile<8xi32>, tile<8xi32>) -> ()"""
    )
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    out = run_module(_kernel(_TWO_ARRAYS, body, verify=False), _matrix_args(a, np.zeros_like(a)))
    # rows -3..4 of column 1: rows 0..3 exist; lanes 0..3 of out (rows -3..0) are -1, -1, -1, 1
    np.testing.assert_array_equal(out["out"][:, 0], [-1, -1, -1, 1])


def test_tiled_atomic_rmw_grid_queries_scf_while_print_and_assert() -> None:
    params = f"%pa: {PTR}, %m: i32, %n: i32, %sm: i32, %sn: i32"
    body = f"""
    %mi = "arith.index_cast"(%m) : (i32) -> index
    %ni = "arith.index_cast"(%n) : (i32) -> index
    %smi = "arith.index_cast"(%sm) : (i32) -> index
    %sni = "arith.index_cast"(%sn) : (i32) -> index
    %a = nv_tileaa.make_memref %pa sizes [%mi, %ni] strides [%smi, %sni] : ({PTR}, index, index, index, index) -> {MR}
    %np = nv_tileaa.get_num_programs 0 : i32
    %pid = nv_tileaa.get_program_id 0 : i32
    %zero = "arith.constant"() {{value = 0 : i32}} : () -> i32
    %one = "arith.constant"() {{value = 1 : i32}} : () -> i32
    %k = "scf.while"(%zero) ({{
    ^bb0(%i: i32):
      %go = "arith.cmpi"(%i, %np) {{predicate = "slt"}} : (i32, i32) -> i1
      "scf.condition"(%go, %i) : (i1, i32) -> ()
    }}, {{
    ^bb0(%i: i32):
      %next = "arith.addi"(%i, %one) : (i32, i32) -> i32
      "scf.yield"(%next) : (i32) -> ()
    }}) : (i32) -> i32
    %ok = "arith.cmpi"(%k, %np) {{predicate = "eq"}} : (i32, i32) -> i1
    nv_tileaa.assert %ok, "loop ran once per program" : i1
    %kf = "arith.sitofp"(%k) : (i32) -> f32
    %v = nv_tileaa.splat %kf : (f32) -> tile<2x2xf32>
    %c0 = "arith.constant"() {{value = 0 : index}} : () -> index
    %old = nv_tileaa.tiled_atomic_rmw addf %a[%c0, %c0], %v : ({MR}, tile<2x2xf32>, index, index) -> tile<2x2xf32>
    nv_tileaa.print "pid=%d k=%d\\0A", %pid, %k : (i32, i32) -> ()"""
    a = np.zeros((2, 3), dtype=np.float32)
    out_text = io.StringIO()
    out = run_module(_kernel(params, body, verify=False), [("a", a)], (3,), stdout=out_text)
    np.testing.assert_array_equal(out["a"], [[9, 9, 0], [9, 9, 0]])  # 3 programs add 3 each
    assert out_text.getvalue() == "pid=0 k=3\npid=1 k=3\npid=2 k=3\n"
    bad = body.replace('{predicate = "eq"}', '{predicate = "ne"}')
    with pytest.raises(RunError, match="assertion failed: loop ran once per program"):
        run_module(_kernel(params, bad, verify=False), [("a", a)], (1,))
