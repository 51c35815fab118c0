"""The layout stage's decisions on the IR (docs/layouts.md, "The layout stage's decisions"):
``nv-tileas-assign-layouts`` records the CTA size, vector widths, MMA family, cp.async staging
and K-loop pipelining as ``nv_tileas.*`` attributes; the printed IR shows them and round-trips;
code generation does what they say (edit an attribute in the text, the PTX follows), and the
pass options switch them."""

from __future__ import annotations

import re

import pytest

from tilegen.runtime.asm import parse_module, print_module
from tilegen.runtime.codegen import emit_ptx
from tilegen.runtime.conversion import convert_module
from tilegen.runtime.layouts import decisions as D
from tilegen.runtime.passes.pipeline import parse_pipeline, run_pipeline

#: a K loop of C += A[:, i] @ B[i, :] (f16 -> f32), 64 x 64 x 32 tiles, then a 16-byte
#: aligned copy of C's row block (vectorizable: div_by facts on pointers and strides)
MATMUL = """
cuda_tile.module @m {
entry @mm(%a: tile<ptr<f16>>, %a1: tile<i32>, %a2: tile<i32>, %a3: tile<i32>, %a4: tile<i32>,
          %b: tile<ptr<f16>>, %b1: tile<i32>, %b2: tile<i32>, %b3: tile<i32>, %b4: tile<i32>,
          %c: tile<ptr<f32>>, %c1: tile<i32>, %c2: tile<i32>, %c3: tile<i32>, %c4: tile<i32>,
          %nk: tile<i32>) {
  %0 = make_token : token
  %ap = assume div_by<16>, %a : tile<ptr<f16>>
  %bp = assume div_by<16>, %b : tile<ptr<f16>>
  %cp = assume div_by<16>, %c : tile<ptr<f32>>
  %as = assume div_by<16>, %a3 : tile<i32>
  %bs = assume div_by<16>, %b3 : tile<i32>
  %cs = assume div_by<16>, %c3 : tile<i32>
  %ta = make_tensor_view %ap, shape = [%a1, %a2], strides = [%as, 1] : tile<i32> -> tensor_view<?x?xf16, strides=[?,1]>
  %tb = make_tensor_view %bp, shape = [%b1, %b2], strides = [%bs, 1] : tile<i32> -> tensor_view<?x?xf16, strides=[?,1]>
  %tc = make_tensor_view %cp, shape = [%c1, 64], strides = [%cs, 1] : tile<i32> -> tensor_view<?x64xf32, strides=[?,1]>
  %z = constant <i32: 0> : tile<i32>
  %one = constant <i32: 1> : tile<i32>
  %pa = make_partition_view %ta : partition_view<tile=(64x32), tensor_view<?x?xf16, strides=[?,1]>>
  %pb = make_partition_view %tb : partition_view<tile=(32x64), tensor_view<?x?xf16, strides=[?,1]>>
  %pc = make_partition_view %tc : partition_view<tile=(64x64), tensor_view<?x64xf32, strides=[?,1]>>
  %w = constant <f32: 0.000000e+00> : tile<64x64xf32>
  %acc = for %i in (%z to %nk, step %one) : tile<i32> iter_values(%s = %w) -> (tile<64x64xf32>) {
    %x, %t1 = load_view_tko weak %pa[%z, %i] token = %0 : partition_view<tile=(64x32), tensor_view<?x?xf16, strides=[?,1]>>, tile<i32> -> tile<64x32xf16>, token
    %y, %t2 = load_view_tko weak %pb[%i, %z] token = %0 : partition_view<tile=(32x64), tensor_view<?x?xf16, strides=[?,1]>>, tile<i32> -> tile<32x64xf16>, token
    %d = mmaf %x, %y, %s : tile<64x32xf16>, tile<32x64xf16>, tile<64x64xf32>
    continue %d : tile<64x64xf32>
  }
  %st = store_view_tko weak %acc, %pc[%z, %z] token = %0 : tile<64x64xf32>, partition_view<tile=(64x64), tensor_view<?x64xf32, strides=[?,1]>>, tile<i32> -> token
  return
}
}
"""


def _laid_out(cc: int = 90, options: str = ""):
    root = convert_module(parse_module(MATMUL, "mm.mlir"), cc)
    run_pipeline(root, parse_pipeline(f"builtin.module(nv-tileas-assign-layouts{options})"))
    return root


def _ops(root, name):
    return [op for op in root.walk() if op.name == name]


def test_the_stage_records_its_decisions():
    root = _laid_out()
    (func,) = _ops(root, "nv_tileaa.func")
    assert D.num_warps(func) == 4 and D.NUM_WARPS in func.attributes
    (dot,) = _ops(root, "nv_tileaa.dot")
    assert D.mma_family(dot) == "wgmma"
    loads = _ops(root, "nv_tileaa.tiled_load")
    assert [D.cp_async_width(ld) for ld in loads] == [8, 8]  # 16-byte f16 chunks
    assert all(D.prefetched(ld) for ld in loads)
    (loop,) = _ops(root, "scf.for")
    assert D.num_stages(loop) == 4  # asked for: codegen takes fewer where they do not fit
    (store,) = _ops(root, "nv_tileaa.tiled_store")
    assert D.vector_width(store) == 4  # 16 bytes of f32: the accumulator layout gives 2


def test_the_printed_ir_shows_them_and_round_trips():
    root = _laid_out()
    text = print_module(root)
    for what in (
        "nv_tileas.num_warps = 4 : i32",
        'nv_tileas.mma = "wgmma"',
        "nv_tileas.cp_async = 8 : i32",
        "nv_tileas.prefetch",
        "nv_tileas.num_stages = 4 : i32",
        "nv_tileas.vector_width = 4 : i32",
    ):
        assert what in text, what
    again = parse_module(text, "laid_out.mlir")
    assert print_module(again) == text
    assert emit_ptx(again, 90) == emit_ptx(root, 90)


def _ptx_of(text: str, cc: int = 90) -> str:
    return emit_ptx(parse_module(text, "laid_out.mlir"), cc)


def test_codegen_reads_the_decisions_from_the_ir():
    text = print_module(_laid_out())
    ptx = _ptx_of(text)
    assert "wgmma.mma_async" in ptx and "cp.async.cg.shared.global" in ptx
    assert "__tilegen_pipe" in ptx  # the pipelined loop's stage buffers
    # no pipelining recorded: the loads are still staged, but per iteration
    unpiped = _ptx_of(text.replace(" {nv_tileas.num_stages = 4 : i32}", ""))
    assert "__tilegen_pipe" not in unpiped and "cp.async.cg.shared.global" in unpiped
    # no staging recorded: the operands come through registers
    unstaged = re.sub(r"nv_tileas\.cp_async = 8 : i32, nv_tileas\.prefetch, ", "", text)
    assert "cp.async" not in _ptx_of(unstaged)
    # mma.sync recorded: the dot runs on mma.sync (the accumulator through shared memory)
    sync = _ptx_of(text.replace('nv_tileas.mma = "wgmma"', 'nv_tileas.mma = "mma.sync"'))
    assert "wgmma" not in sync and "mma.sync.aligned" in sync
    # a narrower recorded width: scalar stores instead of 16-byte vectors
    assert "st.global.v4.f32" in ptx
    narrow = _ptx_of(
        text.replace("nv_tileas.vector_width = 4 : i32", "nv_tileas.vector_width = 1 : i32")
    )
    assert "st.global.v4.f32" not in narrow and "st.global.v2.f32" not in narrow


@pytest.mark.parametrize(
    "options, check",
    [
        ("{wgmma=false}", lambda r: D.mma_family(_ops(r, "nv_tileaa.dot")[0]) == "mma.sync"),
        ("{cp-async=false}", lambda r: not any(D.cp_async_width(op) for op in r.walk())),
        (
            "{pipeline=false}",
            lambda r: not any(D.num_stages(op) for op in r.walk())
            and any(D.cp_async_width(op) for op in r.walk()),
        ),
        ("{num-stages=3}", lambda r: D.num_stages(_ops(r, "scf.for")[0]) == 3),
        ("{num-stages=1}", lambda r: not any(D.num_stages(op) for op in r.walk())),
        ("{num-warps=8}", lambda r: D.num_warps(_ops(r, "nv_tileaa.func")[0]) == 8),
    ],
)
def test_pass_options_switch_the_decisions(options, check):
    assert check(_laid_out(options=options))


def test_targets_decide_the_mma_family():
    assert D.mma_family(_ops(_laid_out(80), "nv_tileaa.dot")[0]) == "mma.sync"
    # sm_100: tcgen05 (M 64 included: docs/pipelines.md section 25), unless switched off
    assert D.mma_family(_ops(_laid_out(100), "nv_tileaa.dot")[0]) == "tcgen05"
    off = _laid_out(100, "{tcgen05=false}")
    assert D.mma_family(_ops(off, "nv_tileaa.dot")[0]) == "mma.sync"


def test_running_the_stage_again_decides_again():
    root = _laid_out()
    run_pipeline(root, parse_pipeline("builtin.module(nv-tileas-assign-layouts{wgmma=false})"))
    assert D.mma_family(_ops(root, "nv_tileaa.dot")[0]) == "mma.sync"
