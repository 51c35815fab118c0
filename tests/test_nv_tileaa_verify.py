"""Every nv_tileaa verifier rule of seed 000, each tripped by IR that breaks exactly that rule.

Each case is (rule id, IR body, the one diagnostic expected). The body sees the values of
``VALUES`` (defined by an unregistered producer) and, with ``cc``, runs inside a module whose
``nv_tileaa.compute_capability`` is set. ``test_baseline_is_valid`` checks that the same scaffold
without a violation verifies cleanly.
"""

from __future__ import annotations

import pytest

from tilegen.runtime.asm import parse_module
from tilegen.runtime.diagnostics import DiagnosticEngine
from tilegen.runtime.verify.engine import verify_module

PTR = "!nv_tileaa.ptr<f32, 1>"
MR = "!nv_tileaa.memref<?x?xf32, 1>"
TOK = "!nv_tileaa.mem_token"
PT = f"tile<8x{PTR}>"

VALUES = {
    "a": "tile<8xf32>",
    "a4": "tile<4xf32>",
    "h": "tile<8xf16>",
    "s": "f32",
    "n": "i32",
    "i": "index",
    "i64": "i64",
    "p": PTR,
    "pt": PT,
    "mr": MR,
    "t": TOK,
    "m8": "tile<8xi1>",
    "m4": "tile<4xi1>",
    "v": "tile<8x8xf32>",
    "l8": "tile<8xi32>",
    "l4": "tile<4xi32>",
    "a16": "tile<16x32xf16>",
    "b16": "tile<32x8xf16>",
    "bb16": "tile<32x8xbf16>",
    "c32": "tile<16x8xf32>",
    "c16": "tile<16x8xf16>",
    "a8": "tile<16x64xf8E4M3FN>",
    "b8": "tile<64x8xf8E4M3FN>",
    "a4f": "tile<16x64xf4E2M1FN>",
    "b4f": "tile<64x8xf4E2M1FN>",
    "sa": "tile<16x2xf8E8M0FNU>",
    "sb": "tile<2x8xf8E8M0FNU>",
    "ai": "tile<16x32xi8>",
    "bi": "tile<32x8xi8>",
    "bi16": "tile<32x8xi16>",
    "ci": "tile<16x8xi32>",
    "q": "!nv_tileaa.queue<tile<8xf32>>",
}


def errors(body: str, cc: int = 100) -> list[str]:
    decls = "\n".join(f'  %{n} = "test.src"() : () -> {t}' for n, t in VALUES.items())
    src = (
        f"module attributes {{nv_tileaa.compute_capability = {cc} : i32}} {{\n{decls}\n"
        f"{body}\n}}"
    )
    module = parse_module(src, allow_unregistered=True)
    diag = DiagnosticEngine()
    verify_module(module, diag)
    return [d.message for d in diag.diagnostics if d.severity == "error"]


def _dot(operands: str, types: str, result: str, attrs: str = "") -> str:
    return f"%d = nv_tileaa.dot {operands} {attrs} : ({types}) -> {result}"


def _func(ftype: str, args: str, body: str) -> str:
    return f"nv_tileaa.func @f : {ftype} {{\n^bb0({args}):\n{body}\n}}"


# (rule id, body, expected diagnostic without the "'nv_tileaa.X' op " prefix, op name)
CASES = [
    # ----- elementwise arithmetic (verify_elementwise_arithmetic)
    (
        "ew-common-element-type",
        "%r = nv_tileaa.addf %a, %h : (tile<8xf32>, tile<8xf16>) -> tile<8xf32>",
        "addf",
        "operands must have the same element type, but got 'f32' and 'f16'",
    ),
    (
        "ew-broadcast-shapes",
        "%r = nv_tileaa.mulf %a, %a4 : (tile<8xf32>, tile<4xf32>) -> tile<8xf32>",
        "mulf",
        "operand shapes [8] and [4] are not broadcast-compatible",
    ),
    (
        "ew-result-element-fp_to_fp-only",
        "%r = nv_tileaa.fma %a, %a, %a : (tile<8xf32>, tile<8xf32>, tile<8xf32>) -> tile<8xf16>",
        "fma",
        "result element type 'f16' must match the operand element type 'f32'; use nv_tileaa.fp_to_fp to change floating-point width",
    ),
    (
        "ew-result-shape",
        "%r = nv_tileaa.subf %a, %s : (tile<8xf32>, f32) -> tile<4xf32>",
        "subf",
        "result shape [4] does not match the broadcast operand shape [8]",
    ),
    (
        "rounding-required",
        '%r = "nv_tileaa.divf"(%a, %a) : (tile<8xf32>, tile<8xf32>) -> tile<8xf32>',
        "divf",
        "requires attribute 'rounding_mode'",
    ),
    (
        "rounding-supported",
        "%r = nv_tileaa.addf %a, %a rounding<approx> : (tile<8xf32>, tile<8xf32>) -> tile<8xf32>",
        "addf",
        "rounding mode 'approx' is not supported; expected nearest_even, zero, negative_inf or positive_inf",
    ),
    (
        "rounding-approx-f32-only",
        "%r = nv_tileaa.sqrt %h rounding<approx> : (tile<8xf16>) -> tile<8xf16>",
        "sqrt",
        "rounding mode 'approx' is only supported for f32, but got 'f16'",
    ),
    (
        "mulhiui-unsigned-integer",
        "%r = nv_tileaa.mulhiui %s, %s : (f32, f32) -> f32",
        "mulhiui",
        "operand #0 must be integer scalar or tile of integer values, but got 'f32'",
    ),
    (
        "mulhiui-width",
        '%b = "test.src"() : () -> i1\n%r = nv_tileaa.mulhiui %b, %b : (i1, i1) -> i1',
        "mulhiui",
        "expects integer operands of width 8, 16, 32 or 64, but got 'i1'",
    ),
    # ----- dot (verify_dot)
    (
        "dot-segments",
        '%d = "nv_tileaa.dot"(%a16, %b16, %c32) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> : (tile<16x32xf16>, tile<32x8xf16>, tile<16x8xf32>) -> tile<16x8xf32>',
        "dot",
        "'operandSegmentSizes' attribute for specifying operand segments must have 5 elements, but got 4",
    ),
    (
        "dot-rank-2-or-3",
        '%x = "test.src"() : () -> tile<32xf16>\n'
        + _dot("%x, %b16, %c32", "tile<32xf16>, tile<32x8xf16>, tile<16x8xf32>", "tile<16x8xf32>"),
        "dot",
        "operand A must have rank 2 or 3 (batched), but has rank 1",
    ),
    (
        "dot-same-rank",
        '%x = "test.src"() : () -> tile<2x16x32xf16>\n'
        + _dot(
            "%x, %b16, %c32", "tile<2x16x32xf16>, tile<32x8xf16>, tile<16x8xf32>", "tile<16x8xf32>"
        ),
        "dot",
        "A, B and C must have the same rank, but have ranks 3, 2, 2",
    ),
    (
        "dot-contracting-dims",
        _dot(
            "%a16, %a16, %c32", "tile<16x32xf16>, tile<16x32xf16>, tile<16x8xf32>", "tile<16x8xf32>"
        ),
        "dot",
        "contracting dimensions do not agree: A has K = 32 but B has K = 16",
    ),
    (
        "dot-accumulator-shape",
        '%x = "test.src"() : () -> tile<16x16xf32>\n'
        + _dot(
            "%a16, %b16, %x", "tile<16x32xf16>, tile<32x8xf16>, tile<16x16xf32>", "tile<16x16xf32>"
        ),
        "dot",
        "accumulator shape [16, 16] does not match the A x B shape [16, 8]",
    ),
    (
        "dot-result-same-as-accumulator",
        _dot(
            "%a16, %b16, %c32", "tile<16x32xf16>, tile<32x8xf16>, tile<16x8xf32>", "tile<16x8xf16>"
        ),
        "dot",
        "failed to verify that all of {c, d} have same type",
    ),
    (
        "dot-element-pair",
        _dot(
            "%a16, %bb16, %c32",
            "tile<16x32xf16>, tile<32x8xbf16>, tile<16x8xf32>",
            "tile<16x8xf32>",
        ),
        "dot",
        "illegal MMA element pair ('f16', 'bf16')",
    ),
    (
        "dot-accumulator-for-pair",
        _dot(
            "%a8, %b8, %c16",
            "tile<16x64xf8E4M3FN>, tile<64x8xf8E4M3FN>, tile<16x8xf16>",
            "tile<16x8xf16>",
        ),
        "dot",
        "accumulator element type 'f16' is not legal for ('f8E4M3FN', 'f8E4M3FN') MMA; expected 'f32'",
    ),
    (
        "dot-integer-width",
        _dot("%ai, %bi16, %ci", "tile<16x32xi8>, tile<32x8xi16>, tile<16x8xi32>", "tile<16x8xi32>"),
        "dot",
        "integer MMA operands must have the same bit width, but got 'i8' and 'i16'",
    ),
    (
        "dot-integer-signedness-required",
        _dot("%ai, %bi, %ci", "tile<16x32xi8>, tile<32x8xi8>, tile<16x8xi32>", "tile<16x8xi32>"),
        "dot",
        "integer MMA requires 'signedness_a' and 'signedness_b'",
    ),
    (
        "dot-signedness-integer-only",
        _dot(
            "%a16, %b16, %c32",
            "tile<16x32xf16>, tile<32x8xf16>, tile<16x8xf32>",
            "tile<16x8xf32>",
            "{signedness_a = 0 : i32}",
        ),
        "dot",
        "'signedness_a' is only valid on integer MMA",
    ),
    (
        "dot-propagate-nan-float-only",
        _dot(
            "%ai, %bi, %ci",
            "tile<16x32xi8>, tile<32x8xi8>, tile<16x8xi32>",
            "tile<16x8xi32>",
            "{propagate_nan, signedness_a = 0 : i32, signedness_b = 0 : i32}",
        ),
        "dot",
        "'propagate_nan' is only valid on floating-point MMA",
    ),
    (
        "dot-f4-requires-scales",
        _dot(
            "%a4f, %b4f, %c32",
            "tile<16x64xf4E2M1FN>, tile<64x8xf4E2M1FN>, tile<16x8xf32>",
            "tile<16x8xf32>",
        ),
        "dot",
        "'f4E2M1FN' MMA operands require block scale factors ('sfa' and 'sfb')",
    ),
    (
        "dot-block-scaled-target",
        _dot(
            "%a8, %b8, %c32 sfa %sa sfb %sb",
            "tile<16x64xf8E4M3FN>, tile<64x8xf8E4M3FN>, tile<16x8xf32>, tile<16x2xf8E8M0FNU>, tile<2x8xf8E8M0FNU>",
            "tile<16x8xf32>",
        ),
        "dot",
        "block-scaled dot requires a target with block-scaled MMA support (sm_100 or newer), but the target is sm_90",
    ),
    (
        "dot-block-scaled-both-scales",
        _dot(
            "%a8, %b8, %c32 sfa %sa",
            "tile<16x64xf8E4M3FN>, tile<64x8xf8E4M3FN>, tile<16x8xf32>, tile<16x2xf8E8M0FNU>",
            "tile<16x8xf32>",
        ),
        "dot",
        "block-scaled dot requires both 'sfa' and 'sfb' scale factors",
    ),
    (
        "dot-scale-element-type",
        '%x = "test.src"() : () -> tile<16x2xf16>\n'
        + _dot(
            "%a8, %b8, %c32 sfa %x sfb %sb",
            "tile<16x64xf8E4M3FN>, tile<64x8xf8E4M3FN>, tile<16x8xf32>, tile<16x2xf16>, tile<2x8xf8E8M0FNU>",
            "tile<16x8xf32>",
        ),
        "dot",
        "'sfa' must be a tile of f8E8M0FNU or f8E4M3FN scale factors, but got '!cuda_tile.tile<16x2xf16>'",
    ),
    (
        "dot-scale-shape",
        '%x = "test.src"() : () -> tile<16x8xf8E8M0FNU>\n'
        + _dot(
            "%a8, %b8, %c32 sfa %x sfb %sb",
            "tile<16x64xf8E4M3FN>, tile<64x8xf8E4M3FN>, tile<16x8xf32>, tile<16x8xf8E8M0FNU>, tile<2x8xf8E8M0FNU>",
            "tile<16x8xf32>",
        ),
        "dot",
        "'sfa' shape [16, 8] does not match the operands: expected one scale per 16 or 32 elements of K",
    ),
    (
        "dot-block-scaled-elements",
        '%x = "test.src"() : () -> tile<16x64xf16>\n%y = "test.src"() : () -> tile<64x8xf16>\n'
        + _dot(
            "%x, %y, %c32 sfa %sa sfb %sb",
            "tile<16x64xf16>, tile<64x8xf16>, tile<16x8xf32>, tile<16x2xf8E8M0FNU>, tile<2x8xf8E8M0FNU>",
            "tile<16x8xf32>",
        ),
        "dot",
        "illegal block-scaled MMA element pair ('f16', 'f16')",
    ),
    (
        "dot-block-scaled-f32-accumulator",
        _dot(
            "%a8, %b8, %c16 sfa %sa sfb %sb",
            "tile<16x64xf8E4M3FN>, tile<64x8xf8E4M3FN>, tile<16x8xf16>, tile<16x2xf8E8M0FNU>, tile<2x8xf8E8M0FNU>",
            "tile<16x8xf16>",
        ),
        "dot",
        "accumulator element type 'f16' is not legal for ('f8E4M3FN', 'f8E4M3FN') MMA; expected 'f32'",
    ),
    (
        "conv-geometry",
        '%act = "test.src"() : () -> tile<1x8x8x4xf16>\n%ct = nv_tileaa.conv_tile %act filter = [3, 0] : (tile<1x8x8x4xf16>) -> tile<64x4xf16>',
        "conv_tile",
        "'filter_shape' entries must be positive, but got [3, 0]",
    ),
    (
        "histogram-bins-rank-1",
        "%hh = nv_tileaa.histogram %l8 : (tile<8xi32>) -> tile<4x4xi32>",
        "histogram",
        "expects a rank-1 result of bin counts, but got rank 2",
    ),
    # ----- reduce / scan
    (
        "reduce-axis-range",
        "%r = nv_tileaa.reduce %v {axis = 2 : i32} : (tile<8x8xf32>) -> tile<8xf32> {\n^bb0(%x: f32, %y: f32):\n  nv_tileaa.yield %x : f32\n}",
        "reduce",
        "axis 2 is out of range for rank-2 inputs",
    ),
    (
        "reduce-result-type",
        "%r = nv_tileaa.reduce %v {axis = 1 : i32} : (tile<8x8xf32>) -> tile<8x8xf32> {\n^bb0(%x: f32, %y: f32):\n  nv_tileaa.yield %x : f32\n}",
        "reduce",
        "result #0 type '!cuda_tile.tile<8x8xf32>' does not match the expected type '!cuda_tile.tile<8xf32>'",
    ),
    (
        "scan-result-type",
        "%r = nv_tileaa.scan %v {axis = 1 : i32} : (tile<8x8xf32>) -> tile<8xf32> {\n^bb0(%x: f32, %y: f32):\n  nv_tileaa.yield %x : f32\n}",
        "scan",
        "result #0 type '!cuda_tile.tile<8xf32>' does not match the expected type '!cuda_tile.tile<8x8xf32>'",
    ),
    (
        "combiner-arguments",
        "%r = nv_tileaa.reduce %v {axis = 1 : i32} : (tile<8x8xf32>) -> tile<8xf32> {\n^bb0(%x: f32):\n  nv_tileaa.yield %x : f32\n}",
        "reduce",
        "combiner region must take arguments (f32, f32), but takes (f32)",
    ),
    # ----- shape construction (infer_shape)
    (
        "splat-element",
        "%r = nv_tileaa.splat %s : (f32) -> tile<8xf16>",
        "splat",
        "result element type 'f16' does not match the splatted value type 'f32'",
    ),
    (
        "broadcast-compatible",
        "%r = nv_tileaa.broadcast %a : (tile<8xf32>) -> tile<4x8xf32>",
        "broadcast",
        "operand shape [8] cannot be broadcast to result shape [4, 8]",
    ),
    (
        "expand_dims-inserted-axes",
        "%r = nv_tileaa.expand_dims %a axes = [0] : (tile<8xf32>) -> tile<8x1xf32>",
        "expand_dims",
        "result shape [8, 1] does not match operand shape [8] with size-one axes inserted at [0]",
    ),
    (
        "extract-removes-indexed-axes",
        "%r = nv_tileaa.extract %v[%i] : (tile<8x8xf32>, index) -> tile<8x8xf32>",
        "extract",
        "result type '!cuda_tile.tile<8x8xf32>' does not match '!cuda_tile.tile<8xf32>' (the operand with its 1 leading indexed axes removed)",
    ),
    (
        "extract_slice-shape",
        "%r = nv_tileaa.extract_slice %v[%i, %i] sizes = [4, 8] : (tile<8x8xf32>, index, index) -> tile<4x4xf32>",
        "extract_slice",
        "result shape [4, 4] does not match the slice sizes [4, 8]",
    ),
    (
        "view-element-count",
        "%r = nv_tileaa.view %v : (tile<8x8xf32>) -> tile<32xf32>",
        "view",
        "view must preserve the element count, but maps '!cuda_tile.tile<8x8xf32>' to '!cuda_tile.tile<32xf32>'",
    ),
    (
        "cat-shape",
        "%r = nv_tileaa.cat %a, %a dim = 0 : (tile<8xf32>, tile<8xf32>) -> tile<8xf32>",
        "cat",
        "result shape [8] is not the concatenation of [8] and [8] along dimension 0",
    ),
    (
        "permute-shape",
        '%x = "test.src"() : () -> tile<4x8xf32>\n%r = nv_tileaa.permute %x [1, 0] : (tile<4x8xf32>) -> tile<4x8xf32>',
        "permute",
        "result shape [4, 8] does not match the permuted operand shape [8, 4]",
    ),
    (
        "make_range-length",
        "%r = nv_tileaa.make_range 0 to 16 : tile<8xi32>",
        "make_range",
        "result shape [8] does not match the range length 16",
    ),
    (
        "block_tile-element-count",
        "%r = nv_tileaa.block_tile %v block = [4, 4] : (tile<8x8xf32>) -> tile<4x4x2x2xf32>",
        "block_tile",
        "result shape [4, 4, 2, 2] does not match the blocked shape [2, 2, 4, 4]",
    ),
    (
        "generate-index-arguments",
        "%r = nv_tileaa.generate : () -> tile<4x4xf32> {\n^bb0(%x: index):\n  nv_tileaa.yield %s : f32\n}",
        "generate",
        "body region must take one index argument per result dimension (2), but takes 1",
    ),
    (
        "get_dim_size-range",
        f"%r = nv_tileaa.get_dim_size %mr dim = 2 : ({MR}) -> index",
        "get_dim_size",
        "dimension 2 is out of range for a rank-2 operand",
    ),
    # ----- pointers and memrefs
    (
        "addptr-element-type",
        f"%r = nv_tileaa.addptr %p, %i : ({PTR}, index) -> !nv_tileaa.ptr<f16, 1>",
        "addptr",
        f"result type '!nv_tileaa.ptr<f16, 1>' must be '{PTR}': addptr keeps the base element type and address space",
    ),
    (
        "addptr-address-space",
        f"%r = nv_tileaa.addptr %p, %i : ({PTR}, index) -> !nv_tileaa.ptr<f32, 3>",
        "addptr",
        f"result type '!nv_tileaa.ptr<f32, 3>' must be '{PTR}': addptr keeps the base element type and address space",
    ),
    (
        "addptr-offset-broadcast",
        f"%r = nv_tileaa.addptr %pt, %l4 : ({PT}, tile<4xi32>) -> {PT}",
        "addptr",
        "offset shape [4] does not broadcast against base shape [8]",
    ),
    (
        "make_memref-segments",
        f'%r = "nv_tileaa.make_memref"(%p, %i, %i) <{{operandSegmentSizes = array<i32: 1, 1, 1>}}> : ({PTR}, index, index) -> {MR}',
        "make_memref",
        "'operandSegmentSizes' attribute for specifying operand segments must have 4 elements, but got 3",
    ),
    (
        "make_memref-dynamic-sizes",
        f"%r = nv_tileaa.make_memref %p sizes [%i] strides [%i, %i] : ({PTR}, index, index, index) -> {MR}",
        "make_memref",
        f"expects 2 size operands for the dynamic dimensions of '{MR}', but got 1",
    ),
    (
        "make_memref-dynamic-strides",
        f"%r = nv_tileaa.make_memref %p sizes [%i, %i] strides [%i] : ({PTR}, index, index, index) -> {MR}",
        "make_memref",
        f"expects 2 stride operands for the dynamic strides of '{MR}', but got 1",
    ),
    (
        "make_memref-element-type",
        f"%r = nv_tileaa.make_memref %p sizes [%i, %i] strides [%i, %i] : ({PTR}, index, index, index, index) -> !nv_tileaa.memref<?x?xf16, 1>",
        "make_memref",
        "memref element type 'f16' does not match the base pointee type 'f32'",
    ),
    (
        "make_memref-address-space",
        f"%r = nv_tileaa.make_memref %p sizes [%i, %i] strides [%i, %i] : ({PTR}, index, index, index, index) -> !nv_tileaa.memref<?x?xf32, 3>",
        "make_memref",
        "memref address space 3 does not match the base pointer address space 1",
    ),
    (
        "make_memref-alias_scope-u32",
        f"%r = nv_tileaa.make_memref %p sizes [%i, %i] strides [%i, %i] {{alias_scope = -1 : i32}} : ({PTR}, index, index, index, index) -> {MR}",
        "make_memref",
        "attribute 'alias_scope' failed to satisfy constraint: 32-bit unsigned integer attribute",
    ),
    (
        "int_to_ptr-i64",
        f"%r = nv_tileaa.int_to_ptr %n : (i32) -> {PTR}",
        "int_to_ptr",
        "expects 64-bit integers, but got 'i32'",
    ),
    (
        "ptr_to_int-i64",
        f"%r = nv_tileaa.ptr_to_int %p : ({PTR}) -> i32",
        "ptr_to_int",
        "expects 64-bit integer results, but got 'i32'",
    ),
    (
        "bitcast-width",
        "%r = nv_tileaa.bitcast %a : (tile<8xf32>) -> tile<8xf16>",
        "bitcast",
        "expects operand and result element types of the same bit width, but got 'f32' and 'f16'",
    ),
    (
        "elementwise-escape-shape",
        '%r = nv_tileaa.extern_elementwise "__nv_expf"(%a) : (tile<8xf32>) -> tile<4xf32>',
        "extern_elementwise",
        "operands and results must have the same shape, but got [8] and [4]",
    ),
    # ----- memory effects (verify_memory_op_common)
    (
        "mem-operand-segments",
        f'%r = "nv_tileaa.load"(%p) <{{operandSegmentSizes = array<i32: 1, 0, 0, 0, 0>}}> : ({PTR}) -> f32',
        "load",
        "'operandSegmentSizes' attribute for specifying operand segments must have 4 elements, but got 5",
    ),
    (
        "mem-token-arity",
        f'%r:2 = "nv_tileaa.load"(%p, %t, %t) <{{operandSegmentSizes = array<i32: 1, 0, 0, 0>}}> : ({PTR}, {TOK}, {TOK}) -> (f32, {TOK})',
        "load",
        "operand group starting at #1 requires 0 or 1 element, but found 2",
    ),
    (
        "mem-segment-total",
        f'%r = "nv_tileaa.load"(%p) <{{operandSegmentSizes = array<i32: 1, 1, 0, 0>}}> : ({PTR}) -> f32',
        "load",
        "operand count (1) does not match with the total size (2) specified in attribute 'operandSegmentSizes'",
    ),
    (
        "mem-token-result-mirrors-operand",
        f"nv_tileaa.store %p[], %s token %t : ({PTR}, f32, {TOK}) -> ()",
        "store",
        "result token count (0) must mirror the token operand count (1)",
    ),
    (
        "mem-indices-match-base-rank",
        f"%r = nv_tileaa.tiled_load %mr[%i] : ({MR}, index) -> tile<8x8xf32>",
        "tiled_load",
        "expects 2 indices for a base of rank 2, but got 1",
    ),
    (
        "mem-element-matches-pointee",
        f"%r = nv_tileaa.load %pt[] : ({PT}) -> tile<8xf16>",
        "load",
        "result element type 'f16' does not match the base element type 'f32'",
    ),
    (
        "mem-stored-element-matches-pointee",
        f"nv_tileaa.store %pt[], %h : ({PT}, tile<8xf16>) -> ()",
        "store",
        "stored value element type 'f16' does not match the base element type 'f32'",
    ),
    (
        "mem-mask-shape",
        f"%r = nv_tileaa.load %pt[] mask %m4 : ({PT}, tile<4xi1>) -> tile<8xf32>",
        "load",
        "mask shape [4] does not match the result shape [8]",
    ),
    (
        "mem-other-type",
        f"%r = nv_tileaa.load %pt[] other %h : ({PT}, tile<8xf16>) -> tile<8xf32>",
        "load",
        "'other' type '!cuda_tile.tile<8xf16>' must match the result type '!cuda_tile.tile<8xf32>'",
    ),
    (
        "mem-in_bounds-per-axis",
        f"%r = nv_tileaa.tiled_load %mr[%i, %i] {{in_bounds = array<i1: true>}} : ({MR}, index, index) -> tile<8x8xf32>",
        "tiled_load",
        "'in_bounds' must have one entry per base dimension (2), but has 1",
    ),
    (
        "mem-non-weak-requires-scope",
        f"%r = nv_tileaa.load %p[] sem acquire : ({PTR}) -> f32",
        "load",
        "non-weak memory ordering requires explicit scope",
    ),
    (
        "mem-weak-forbids-scope",
        f"%r = nv_tileaa.atomic_rmw add %p[], %s scope gpu : ({PTR}, f32) -> f32",
        "atomic_rmw",
        "weak memory ordering must not carry a scope",
    ),
    (
        "mem-explicit-weak-forbids-scope",
        f"%r = nv_tileaa.atomic_cas %p[], %s, %s sem weak scope gpu : ({PTR}, f32, f32) -> f32",
        "atomic_cas",
        "weak memory ordering must not carry a scope",
    ),
    (
        "store-rejects-acquire",
        f"nv_tileaa.store %p[], %s sem acquire scope gpu : ({PTR}, f32) -> ()",
        "store",
        "'acquire' memory ordering is not valid for store",
    ),
    (
        "store-rejects-acq_rel",
        f"nv_tileaa.tiled_store %mr[%i, %i], %v sem acq_rel scope gpu : ({MR}, tile<8x8xf32>, index, index) -> ()",
        "tiled_store",
        "'acq_rel' memory ordering is not valid for tiled_store",
    ),
    (
        "load-rejects-release",
        f"%r = nv_tileaa.load %p[] sem release scope gpu : ({PTR}) -> f32",
        "load",
        "'release' memory ordering is not valid for load",
    ),
    (
        "rmw-mode-required",
        f'%r = "nv_tileaa.atomic_rmw"(%p, %s) <{{operandSegmentSizes = array<i32: 1, 1, 0, 0>}}> : ({PTR}, f32) -> f32',
        "atomic_rmw",
        "requires attribute 'rmw_mode'",
    ),
    (
        "rmw-addf-float",
        '%pi = "test.src"() : () -> !nv_tileaa.ptr<i32, 1>\n%r = nv_tileaa.atomic_rmw addf %pi[], %n : (!nv_tileaa.ptr<i32, 1>, i32) -> i32',
        "atomic_rmw",
        "'addf' atomic mode requires a floating-point value, but got 'i32'",
    ),
    (
        "rmw-integer-modes",
        f"%r = nv_tileaa.tiled_atomic_rmw and %mr[%i, %i], %v : ({MR}, tile<8x8xf32>, index, index) -> tile<8x8xf32>",
        "tiled_atomic_rmw",
        "'and' atomic mode requires an integer value, but got 'f32'",
    ),
    (
        "rmw-result-type",
        f"%r = nv_tileaa.atomic_rmw add %p[], %s : ({PTR}, f32) -> f16",
        "atomic_rmw",
        "result type 'f16' must match the value type 'f32'",
    ),
    (
        "cas-types",
        f"%r = nv_tileaa.atomic_cas %pt[], %a, %s : ({PT}, tile<8xf32>, f32) -> tile<8xf32>",
        "atomic_cas",
        "compare, replacement and result types must match, but got !cuda_tile.tile<8xf32>, f32, !cuda_tile.tile<8xf32>",
    ),
    (
        "token-chain-dominance",
        f"%x, %t2 = nv_tileaa.load %p[] token %t3 : ({PTR}, {TOK}) -> (f32, {TOK})\n%y, %t3 = nv_tileaa.load %p[] token %t2 : ({PTR}, {TOK}) -> (f32, {TOK})",
        None,
        "operand #1 does not dominate this use",
    ),
    (
        "get_global-symbol",
        "%r = nv_tileaa.get_global @nope : !nv_tileaa.ptr<f32, 1>",
        "get_global",
        "'@nope' does not reference a valid nv_tileaa.global",
    ),
    # ----- tokens and hints
    (
        "join-tokens-only",
        f'%r = "nv_tileaa.join_mem_token"(%t, %n) : ({TOK}, i32) -> {TOK}',
        "join_mem_token",
        "operand #1 must be variadic of nv_tileaa memory token, but got 'i32'",
    ),
    (
        "optimization_barrier-passthrough",
        "%r = nv_tileaa.optimization_barrier %a : (tile<8xf32>) -> tile<8xf16>",
        "optimization_barrier",
        "result types (!cuda_tile.tile<8xf16>) must match the operand types (!cuda_tile.tile<8xf32>)",
    ),
    # ----- functions, plugins, launch
    (
        "no-cuda_tile-ops",
        _func(
            "() -> ()",
            "",
            '%x = "test.src"() : () -> !cuda_tile.tile<8xi32>\n%y = cuda_tile.addi %x, %x : tile<8xi32>\nnv_tileaa.return',
        ),
        None,
        "'cuda_tile.addi' op is illegal in a TileAA module: every cuda_tile operation must be converted to nv_tileaa",
    ),
    (
        "func-entry-block",
        _func("(f32) -> ()", "%x: i32", "nv_tileaa.return"),
        "func",
        "type of entry block argument #0('i32') must match the type of the corresponding argument in function signature('f32')",
    ),
    (
        "return-count",
        _func("(f32) -> f32", "%x: f32", "nv_tileaa.return"),
        "return",
        "has 0 operands, but enclosing function (@f) returns 1",
    ),
    (
        "return-types",
        _func("(f32) -> i32", "%x: f32", "nv_tileaa.return %x : f32"),
        "return",
        "type of return operand 0 ('f32') doesn't match function result type ('i32') in function @f",
    ),
    (
        "yield-matches-parent",
        "%r = nv_tileaa.reduce %v {axis = 1 : i32} : (tile<8x8xf32>) -> tile<8xf32> {\n^bb0(%x: f32, %y: f32):\n  nv_tileaa.yield %n : i32\n}",
        "yield",
        "operand types (i32) do not match the contract of the parent 'nv_tileaa.reduce' (f32)",
    ),
    (
        "queue.yield-matches-parent",
        "%r = nv_tileaa.execute (%a) : (tile<8xf32>) -> tile<8xf32> {\n^bb0(%x: tile<8xf32>):\n  nv_tileaa.queue.yield %s : f32\n}",
        "queue.yield",
        "operand types (f32) do not match the contract of the parent 'nv_tileaa.execute' (!cuda_tile.tile<8xf32>)",
    ),
    (
        "yield-parent",
        _func("() -> ()", "", "nv_tileaa.yield"),
        "yield",
        "expects parent op to be one of 'nv_tileaa.reduce, nv_tileaa.scan, nv_tileaa.generate, nv_tileaa.execute'",
    ),
    (
        "call-symbol-resolves",
        "%r = nv_tileaa.call @nope(%s) : (f32) -> f32",
        "call",
        "'@nope' does not reference a valid nv_tileaa.func",
    ),
    (
        "call-signature",
        _func("(f32) -> ()", "%x: f32", "nv_tileaa.return")
        + "\nnv_tileaa.call @f(%n) : (i32) -> ()",
        "call",
        "operand type mismatch: expected operand type 'f32', but provided 'i32' for operand number 0",
    ),
    (
        "execute-plugin-resolves",
        "%r = nv_tileaa.execute plugin @nope (%a) : (tile<8xf32>) -> tile<8xf32> {\n^bb0(%x: tile<8xf32>):\n  nv_tileaa.yield %x : tile<8xf32>\n}",
        "execute",
        "'@nope' does not reference a valid nv_tileaa.plugin",
    ),
    (
        "execute-body-arguments",
        "%r = nv_tileaa.execute (%a) : (tile<8xf32>) -> tile<8xf32> {\n^bb0(%x: f32):\n  nv_tileaa.yield %a : tile<8xf32>\n}",
        "execute",
        "body region arguments (f32) must match the operand types (!cuda_tile.tile<8xf32>)",
    ),
    (
        "plugin-resources",
        "nv_tileaa.plugin @frag : () -> () {registers = -8 : i32}",
        "plugin",
        "resource 'registers' must be non-negative, but is -8",
    ),
    (
        "launch-kernel-resolves",
        "nv_tileaa.launch_func @nope grid [%i] () : (index) -> ()",
        "launch_func",
        "'@nope' does not reference a valid nv_tileaa.func",
    ),
    (
        "launch-grid-rank",
        _func("() -> ()", "", "nv_tileaa.return")
        + "\nnv_tileaa.launch_func @f grid [%i, %i, %i, %i] () : (index, index, index, index) -> ()",
        "launch_func",
        "grid must have 1 to 3 dimensions, but has 4",
    ),
    (
        "plugin-tensor-memory-target",
        "nv_tileaa.plugin @frag : () -> () {tensor_memory = 128 : i32}",
        "plugin",
        "tensor memory requires a target with tensor memory (sm_100 or newer), but the target is sm_90",
    ),
    # ----- grid and queues
    (
        "program-id-dim",
        "%r = nv_tileaa.get_program_id 3 : i32",
        "get_program_id",
        "grid dimension 3 is out of range; expected 0, 1 or 2",
    ),
    (
        "queue-depth",
        "%r = nv_tileaa.create_queue 0 : !nv_tileaa.queue<f32>",
        "create_queue",
        "queue depth must be at least 1, but got 0",
    ),
    (
        "queue.get-payload",
        "%r = nv_tileaa.queue.get %q : (!nv_tileaa.queue<tile<8xf32>>) -> f32",
        "queue.get",
        "result types (f32) do not match the queue payload types (!cuda_tile.tile<8xf32>)",
    ),
    (
        "queue.put-payload",
        "nv_tileaa.queue.put %q, %h : (!nv_tileaa.queue<tile<8xf32>>, tile<8xf16>) -> ()",
        "queue.put",
        "value types (!cuda_tile.tile<8xf16>) do not match the queue payload types (!cuda_tile.tile<8xf32>)",
    ),
]


@pytest.mark.parametrize("body,op,message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rule(body: str, op, message: str) -> None:
    cc = 90 if "target" in message else 100
    got = errors(body, cc=cc)
    prefix = f"'nv_tileaa.{op}' op " if op else ""
    assert got == [prefix + message]


def test_rule_ids_are_unique() -> None:
    ids = [c[0] for c in CASES]
    assert len(ids) == len(set(ids))


def test_baseline_is_valid() -> None:
    """The scaffold itself, and the block-scaled dot on an sm_100 target, verify cleanly."""
    assert errors("") == []
    scaled = _dot(
        "%a8, %b8, %c32 sfa %sa sfb %sb",
        "tile<16x64xf8E4M3FN>, tile<64x8xf8E4M3FN>, tile<16x8xf32>, tile<16x2xf8E8M0FNU>, "
        "tile<2x8xf8E8M0FNU>",
        "tile<16x8xf32>",
    )
    assert errors(scaled, cc=100) == []
    assert errors(scaled, cc=90) != []


def test_weak_ordering_without_scope_and_scoped_acquire_are_valid() -> None:
    assert errors(f"%r = nv_tileaa.load %p[] sem weak : ({PTR}) -> f32") == []
    assert errors(f"%r = nv_tileaa.load %p[] sem acquire scope gpu : ({PTR}) -> f32") == []
    assert errors(f"%r = nv_tileaa.load %p[] : ({PTR}) -> f32") == []


def test_target_spec_fallback() -> None:
    """``nv_tileaa.target_spec = "sm_100a"`` stands in for compute_capability (seed 002)."""
    scaled = _dot(
        "%a8, %b8, %c32 sfa %sa sfb %sb",
        "tile<16x64xf8E4M3FN>, tile<64x8xf8E4M3FN>, tile<16x8xf32>, tile<16x2xf8E8M0FNU>, "
        "tile<2x8xf8E8M0FNU>",
        "tile<16x8xf32>",
    )
    decls = "\n".join(f'  %{n} = "test.src"() : () -> {t}' for n, t in VALUES.items())
    src = f'module attributes {{nv_tileaa.target_spec = "sm_100a"}} {{\n{decls}\n{scaled}\n}}'
    diag = DiagnosticEngine()
    assert verify_module(parse_module(src, allow_unregistered=True), diag), diag.diagnostics
