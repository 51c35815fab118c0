"""``nv-tileas-pipeline-k-loops`` (runtime/passes/k_loop_pipelining.py, docs/pipelines.md).

Every corpus kernel with ``mmaf``/``mmai`` and the kernels of tests/cutile_kernels_async.py are
lowered to nv_tileaa for sm_90, pipelined, verified, and interpreted: the producer/consumer
form computes the same outputs as the kernel. The rule that decides when the pass applies is
checked case by case (target, alignment, padding, memory writes, shared memory), and so is the
shape of what it builds.
"""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tilegen.runtime.asm import parse_module, print_module
from tilegen.runtime.interp.api import load_module, run_module, verify_or_raise
from tilegen.runtime.interp.lowered import lower_module
from tilegen.runtime.passes.k_loop_pipelining import (
    LoopPlan,
    explain_loops,
    pipeline_k_loops,
    tma_describable,
)

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("TILEGEN_SHARED", ROOT.parent / "shared"))
CORPUS = SHARED / "corpus" / "cutile"
MMA_KERNELS = (
    "matmul_f16",
    "matmul_tf32",
    "matmul_int8",
    "matmul_fp8",
    "matmul_f64",
    "batched_matmul",
    "flash_attention",
)
P = "nv_tileas.async.pipeline."

needs_corpus = pytest.mark.skipif(
    not (CORPUS / "manifest.json").exists(), reason=f"cuTile corpus not found under {SHARED}"
)


def _manifest() -> dict:
    return {k["name"]: k for k in json.loads((CORPUS / "manifest.json").read_text())["kernels"]}


def _lowered(path, gpu="sm_90"):
    return lower_module(load_module(path), gpu_name=gpu)


def _args(npz: Path):
    d = np.load(npz)
    args = [(k[len("arg__") :], d[k]) for k in d.files if k.startswith("arg__")]
    expected = {k[len("expected__") :]: d[k] for k in d.files if k.startswith("expected__")}
    return args, expected, tuple(int(x) for x in d["grid"])


def _check(out: dict, expected: dict, rtol: float, atol: float) -> None:
    for name, exp in expected.items():
        got = out[name]
        assert got.shape == exp.shape and got.dtype == exp.dtype, name
        if exp.dtype.kind == "f":
            np.testing.assert_allclose(got, exp, rtol=rtol, atol=atol, err_msg=name)
        else:
            np.testing.assert_array_equal(got, exp, err_msg=name)


def _ops(m, name):
    return [o for o in m.walk() if o.name == name]


# --------------------------------------------------------------------------- corpus


@needs_corpus
@pytest.mark.parametrize("name", MMA_KERNELS)
def test_corpus_kernel_pipelines_and_computes_the_same(name):
    kernel = _manifest()[name]
    m = _lowered(CORPUS / "out" / f"{name}.tileirbc")
    plans = [p for _, p in explain_loops(m)]
    assert len(plans) == 1 and isinstance(plans[0], LoopPlan), plans
    made = pipeline_k_loops(m)
    assert len(made) == 1
    verify_or_raise(m)
    assert not _ops(m, "scf.for") or all(
        o.parent_op.name == P + "agent" for o in _ops(m, "scf.for")
    )
    args, expected, grid = _args(CORPUS / "out" / f"{name}.npz")
    out = run_module(m, args, grid=grid)
    _check(out, expected, *kernel["tolerance_rtol_atol"])


@needs_corpus
def test_structure_of_the_matmul_pipeline():
    m = _lowered(CORPUS / "out" / "matmul_f16.tileirbc")
    pipeline_k_loops(m)
    func = _ops(m, "nv_tileaa.func")[0]
    assert func.attributes["nv_tileas.num_warps"].value == 8  # 4 consumer + 4 producer warps
    (pipe,) = _ops(m, P + "create_pipeline")
    t = pipe.results[0].type
    # 64x32 + 32x64 f16 = 8 KB a stage: 8 stages (the most the pass makes without a hint)
    assert (t.stages, t.space, len(t.payload)) == (8, "shared", 2)
    assert pipe.attributes["consumer_arrivals"].value == 128
    producer, consumer = _ops(m, P + "agent")
    assert producer.attributes["num_warps"].value == 4
    assert producer.attributes["max_regs"].value == 32
    assert consumer.attributes["num_warps"].value == 4
    # both loads are in the producer's write region, none is left in the consumer
    (write,) = _ops(producer, P + "producer_write")
    assert len(_ops(write, "nv_tileaa.tiled_load")) == 2
    assert not _ops(consumer, "nv_tileaa.tiled_load")
    body = _ops(consumer, "scf.for")[0].regions[0].blocks[0]
    names = [o.name for o in body.ops]
    # wait, read, async dot, wait for it, then release the stage
    assert names.index(P + "consumer_wait") < names.index(P + "consumer_read")
    assert names.index("nv_tileas.async.dot") < names.index("nv_tileas.async.wait")
    assert names.index("nv_tileas.async.wait") < names.index(P + "consumer_release")


@needs_corpus
def test_layout_assigned_form_pipelines_too():
    from tilegen.runtime.passes.layout_assignment import assign_layouts

    m = _lowered(CORPUS / "out" / "flash_attention.tileirbc")
    assign_layouts(m)
    assert len(pipeline_k_loops(m)) == 1
    verify_or_raise(m)
    (read,) = _ops(m, P + "consumer_read")
    # the reads keep the loads' layouts; the stage buffers' payload types carry none
    assert all(r.type.encoding is not None for r in read.results)
    assert all(t.encoding is None for t in read.operands[0].type.payload)


@needs_corpus
def test_printed_pipeline_reparses_and_verifies():
    m = _lowered(CORPUS / "out" / "matmul_int8.tileirbc")
    pipeline_k_loops(m)
    text = print_module(m)
    again = parse_module(text, "p.mlir")
    verify_or_raise(again)
    assert print_module(again) == text


# --------------------------------------------------------------------------- the rule


@needs_corpus
@pytest.mark.parametrize("gpu", ["sm_80", "sm_89"])
def test_no_tma_before_sm_90(gpu):
    m = _lowered(CORPUS / "out" / "matmul_f16.tileirbc", gpu)
    (plan,) = [p for _, p in explain_loops(m)]
    assert plan == f"the target (sm_{gpu[3:]}) has no TMA (sm_90 or newer)"
    assert pipeline_k_loops(m) == []


@needs_corpus
def test_unaligned_strides_are_copied_by_threads():
    text = (CORPUS / "out" / "matmul_f16.mlir").read_text()
    # strides of A and B known only to be even (4 bytes): TMA needs 16-byte multiples, so the
    # producer warp group's threads copy both, 2 elements a cp.async (docs/pipelines.md
    # section 43); the rule still says why TMA cannot
    m = lower_module(parse_module(text.replace("div_by<8>", "div_by<2>"), "m.mlir"))
    (plan,) = [p for _, p in explain_loops(m)]
    assert [s.threads for s in plan.loads] == [2, 2]
    assert tma_describable(plan.loads[0].load) == (
        "the stride of dim 0 is not known to be a multiple of 16 bytes"
    )


@needs_corpus
def test_unaligned_base_is_copied_by_threads():
    text = (CORPUS / "out" / "matmul_f16.mlir").read_text()
    m = lower_module(parse_module(text.replace("div_by<16>", "div_by<4>"), "m.mlir"))
    (plan,) = [p for _, p in explain_loops(m)]
    assert [s.threads for s in plan.loads] == [2, 2]  # (4-byte aligned bases)
    why = tma_describable(plan.loads[0].load)
    assert "the base address is not known to be 16-byte aligned" in why


@needs_corpus
def test_stage_count_option_and_shared_memory_limit():
    m = _lowered(CORPUS / "out" / "matmul_f16.tileirbc")
    pipeline_k_loops(m, num_stages=3)
    assert _ops(m, P + "create_pipeline")[0].results[0].type.stages == 3
    # sm_120: 99 KB of shared memory a CTA, 16 KB reserved: 10 stages of 8 KB fit, 8 made
    m = _lowered(CORPUS / "out" / "matmul_f16.tileirbc", "sm_120")
    pipeline_k_loops(m, num_stages=20)
    assert _ops(m, P + "create_pipeline")[0].results[0].type.stages == 10


@needs_corpus
def test_pass_runs_from_the_textual_pipeline(tmp_path):
    m = _lowered(CORPUS / "out" / "matmul_fp8.tileirbc")
    src = tmp_path / "m.mlir"
    src.write_text(print_module(m))
    exe = Path(sys.executable).parent / "tilegen-opt"
    r = subprocess.run(
        [
            str(exe),
            str(src),
            "--pass-pipeline=builtin.module(nv-tileas-pipeline-k-loops{num-stages=4})",
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert "!nv_tileas.async.pipeline<stages = 4, shared, tile<64x64xf8E4M3FN>" in r.stdout
    assert "nv_tileas.async.pipeline.agent warps(4) regs(32)" in r.stdout


def test_loop_that_writes_memory_is_left_alone():
    src = """
module attributes {nv_tileaa.compute_capability = 90 : i32} {
  nv_tileaa.func @k : (!nv_tileaa.ptr<f16, 1>, i32) -> () attributes {kernel} {
  ^bb0(%a: !nv_tileaa.ptr<f16, 1>, %n: i32):
    %t = nv_tileaa.create_mem_token : !nv_tileaa.mem_token
    %p = nv_tileaa.assume #cuda_tile.div_by<16>, %a : !nv_tileaa.ptr<f16, 1>
    %c64 = arith.constant 64 : i32
    %m = nv_tileaa.make_memref %p sizes[%c64, %c64] strides[%c64] : (!nv_tileaa.ptr<f16, 1>, i32, i32, i32) -> !nv_tileaa.memref<?x?xf16, 1, strides=[?,1]>
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %z = arith.constant 0.000000e+00 : f32
    %acc0 = nv_tileaa.splat %z : (f32) -> tile<64x64xf32>
    %r = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %acc0) -> (tile<64x64xf32>)  : i32 {
      %v, %vt = nv_tileaa.tiled_load %m[%c0, %c0] token %t : (!nv_tileaa.memref<?x?xf16, 1, strides=[?,1]>, i32, i32, !nv_tileaa.mem_token) -> (tile<64x64xf16>, !nv_tileaa.mem_token)
      %d = nv_tileaa.dot %v, %v, %acc : (tile<64x64xf16>, tile<64x64xf16>, tile<64x64xf32>) -> tile<64x64xf32>
      %h = nv_tileaa.fp_to_fp %d rounding<nearest_even> : (tile<64x64xf32>) -> tile<64x64xf16>
      %s = nv_tileaa.tiled_store %m[%c0, %c0], %h token %t : (!nv_tileaa.memref<?x?xf16, 1, strides=[?,1]>, tile<64x64xf16>, i32, i32, !nv_tileaa.mem_token) -> !nv_tileaa.mem_token
      scf.yield %d : tile<64x64xf32>
    }
    nv_tileaa.return
  }
}
"""
    m = parse_module(src, "w.mlir")
    verify_or_raise(m)
    (plan,) = [p for _, p in explain_loops(m)]
    assert plan == "the loop writes memory ('nv_tileaa.tiled_store')"
    # without the store the same loop is pipelined
    m2 = parse_module(
        src.replace("      %s = nv_tileaa.tiled_store", "      // ").replace(
            "      %h = nv_tileaa.fp_to_fp", "      //"
        ),
        "w.mlir",
    )
    (plan,) = [p for _, p in explain_loops(m2)]
    assert isinstance(plan, LoopPlan) and len(plan.loads) == 1


# --------------------------------------------------------------------------- new cuTile kernels


@pytest.fixture(scope="module")
def async_kernels(tmp_path_factory):
    pytest.importorskip(
        "cuda.tile", reason="cuda-tile is not installed (pip install -e '.[cutile]')"
    )
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import cutile_kernels_async as cka

    out = tmp_path_factory.mktemp("async_kernels")
    return cka, cka.export_bytecode(str(out))


@pytest.mark.parametrize(
    "name,staged,stages",
    [
        # 128x64 + 64x128 f16 = 32 KB a stage: 6 fit beside the 16 KB reserve on sm_90
        ("gemm_f16_128x128x64", 2, 6),
        # the per-block scales (128 x 1 and 1 x 128 f32 tiles) are no TMA boxes: they stay in
        # the consumer as ordinary loads; A and B (16 KB each) are staged
        ("gemm_fp8_blockscaled", 2, 6),
        # K^T and V tiles (8 KB each); Q is loaded once before the loop
        ("attention_causal_fwd", 2, 8),
    ],
)
def test_cutile_kernel_pipelines_and_matches_numpy(async_kernels, name, staged, stages):
    cka, paths = async_kernels
    m = lower_module(load_module(paths[name]), gpu_name="sm_90")
    plans = [p for _, p in explain_loops(m)]
    assert len(plans) == 1 and isinstance(plans[0], LoopPlan), plans
    assert (len(plans[0].loads), plans[0].stages) == (staged, stages)
    pipeline_k_loops(m)
    verify_or_raise(m)
    pr = cka.problems()[name]
    out = run_module(m, list(pr.args.items()), grid=pr.grid)
    for key, exp in pr.expected.items():
        np.testing.assert_allclose(
            out[key].astype(np.float64), exp.astype(np.float64), rtol=pr.rtol, atol=pr.atol
        )


@pytest.mark.parametrize("name", ["attention_causal_fwd", "gemm_fp8_blockscaled"])
def test_non_async_128_row_kernels_on_sm_90(async_kernels, name):
    """The attention forward and the block-scaled GEMM on today's path (the async path does not
    take attention's loop; the GEMM's takes it unless warp specialization is off, as here:
    tests/test_async_scaled.py has its async form): two consumer warp groups (8 warps, runtime/layouts/kernel.default_num_warps), their B
    tiles (K^T and V; B of the GEMM's fp8 dot) reach shared memory by cp.async as loaded and
    are prefetched one iteration ahead, the softmax / scaling runs in the wgmma accumulator's
    layout (nothing is converted in the loop), ptxas spills nothing, and ptxsim matches
    NumPy."""
    from tilegen.runtime.driver import compile_source
    from tilegen.runtime.options import CompileOptions
    from tilegen.runtime.ptxsim import run_ptxsim

    cka, paths = async_kernels
    options = CompileOptions(target="sm_90", warp_specialize=False)
    c = compile_source(Path(paths[name]), options, until="ptx")
    assert not c.async_plan[0].taken
    func = next(op for op in c.module.walk() if op.name == "nv_tileaa.func")
    assert func.attributes["nv_tileas.num_warps"].value == 8
    loop = next(op for op in func.regions[0].blocks[0].ops if op.name == "scf.for")
    converts = [op for op in loop.walk() if op.name == "nv_tileas.convert_layout"]
    # nothing moves: the elementwise work takes the accumulator's layout, attention's column
    # indices are computed in it, the GEMM's scales (one element per access at this size) are
    # loaded in it
    assert converts == []
    ptx = c.ptx
    assert ".reqntid 256, 1, 1" in ptx and "__tilegen_pipe" in ptx and ".target sm_90a" in ptx
    lines = ptx.splitlines()
    top = next(i for i, line in enumerate(lines) if line.startswith("$L__for_body"))
    end = next(i for i, line in enumerate(lines) if line.startswith("$L__for_end"))
    body = "\n".join(lines[top:end])
    assert body.count("cp.async.cg.shared.global") >= 2
    if name.startswith("attention"):  # both dots read their B N-major
        wg = [line.strip() for line in lines if "wgmma.mma_async" in line]
        from_smem = [line for line in wg if line.endswith(", 1, 1, 0, 1;")]  # Q K^T
        from_regs = [
            line for line in wg if re.search(r"\}, \{%r\d+(, %r\d+){3}\}, .*, 1, 1, 1;$", line)
        ]
        assert from_smem and from_regs and len(from_smem) + len(from_regs) == len(wg)
        assert "ld.global" not in body
        # Q (A of QK^T, loop-invariant) is written once, before the loop, into an array of
        # its own; P (A of PV) goes to wgmma in registers, in the accumulator's layout: the
        # loop stores nothing to shared memory and its one CTA barrier is the stage wait
        assert "__tilegen_keep0" in ptx
        assert body.count("bar.sync") == 1 and "st.shared" not in body
    from tilegen.runtime.ptxas import assemble

    _, log = assemble(ptx, 90, verbose=True)
    assert "0 bytes spill stores" in log, log
    pr = cka.problems()[name]
    module = load_module(paths[name])
    out = run_ptxsim(module, list(pr.args.items()), pr.grid, "sm_90", options=options)
    for key, exp in pr.expected.items():
        np.testing.assert_allclose(
            out[key].astype(np.float64), exp.astype(np.float64), rtol=pr.rtol, atol=pr.atol
        )


def test_a_num_warps_hint_is_kept(async_kernels):
    """A producer's ``num_warps`` (here 4 for sm_90) wins over the CTA-size rule."""
    from tilegen.runtime.bytecode import read_bytecode
    from tilegen.runtime.driver import compile_source
    from tilegen.runtime.options import CompileOptions

    _, paths = async_kernels
    text = print_module(read_bytecode(Path(paths["attention_causal_fwd"]).read_bytes()))
    assert "optimization_hints=<default = {}>" in text
    hinted = text.replace(
        "optimization_hints=<default = {}>", "optimization_hints=<sm_90 = {num_warps = 4}>"
    )
    for src, warps in ((text, 8), (hinted, 4)):
        c = compile_source(src, CompileOptions(target="sm_90"), "att.mlir", until="layouts")
        func = next(op for op in c.module.walk() if op.name == "nv_tileaa.func")
        assert func.attributes["nv_tileas.num_warps"].value == warps
        assert ("nv_tileaa.num_warps_default" in func.attributes) == (warps == 8)


@pytest.mark.parametrize("target", ["sm_90"])
def test_num_warps_8_gives_the_async_gemm_two_consumer_warp_groups(async_kernels, target):
    """``CompileOptions(num_warps=8)`` on the 128x128x64 GEMM on sm_90: two consumer warp
    groups of 64 rows beside the producer group, 384 threads at 168 registers or fewer
    (tileiras's block-scaled GEMM's shape; its f16 GEMM keeps one group) against 256 threads
    at 255 by default, no spills either way. (sm_100's
    tcgen05 consumers are one warp group: there the option leaves the async path.)"""
    from tilegen.runtime.driver import compile_source
    from tilegen.runtime.options import CompileOptions
    from tilegen.runtime.ptxas import assemble

    _, paths = async_kernels
    src = Path(paths["gemm_f16_128x128x64"])
    for warps, threads in ((None, 256), (8, 384)):
        c = compile_source(src, CompileOptions(target=target, num_warps=warps), until="ptx")
        assert c.async_plan[0].taken and f".reqntid {threads}, 1, 1" in c.ptx
        _, log = assemble(c.ptx, int(target[3:]), verbose=True)
        assert "0 bytes spill stores" in log, log
        regs = int(re.search(r"Used (\d+) registers", log).group(1))
        assert regs <= (168 if warps else 255), regs
