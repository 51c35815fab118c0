"""Loop-carried tcgen05 accumulators kept in tensor memory, and tcgen05 dots of 256 rows
(docs/pipelines.md section 25; runtime/codegen/tmem_resident.py, tcgen05_dot.py).

A 256-row tcgen05 dot runs as two M 128 MMAs a K step (8 warps, a row a thread). A loop whose
tcgen05 dots' results would take more than 128 registers a thread keeps each accumulator it
yields from a dot in tensor memory: stored once before the loop, rescaled in place, accumulated
into by the MMAs, read once after the loop; P (the second dot's A, in registers) goes to tensor
memory too. The strict simulator checks every tensor-memory access against its MMA's commit."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

ct = pytest.importorskip(
    "cuda.tile", reason="cuda-tile is not installed (pip install -e '.[cutile]')"
)
tc = pytest.importorskip("tilegen.cutile")

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cutile_kernels_async as cka  # noqa: E402

f16, f32 = ct.float16, ct.float32


def _strict(kernel, c, args, grid, index: int) -> np.ndarray:
    from tilegen.cutile_launch import _prepare
    from tilegen.runtime.ptx.launch import run_ptx

    values = [v for _, v in _prepare(kernel, args).runtime]
    return np.asarray(run_ptx(c.ptx, values, grid, strict_async=True)[index]).astype(np.float64)


def _no_spills(ptx: str) -> None:
    from tilegen.runtime.ptxas import find_ptxas

    if find_ptxas() is None:
        return
    from tilegen.runtime.codegen.driver import assemble

    _, log = assemble(ptx, 100, verbose=True)
    assert " 0 bytes spill stores" in log, log


def _attention(name: str, TM: int, TN: int, D: int, seq: int = None):
    case = cka.kernels()[name]
    seq = seq or 2 * TM
    q, kt, v, scale, want = cka.causal_attention_inputs(1, seq, D, 0)
    args = (q, kt, v, np.zeros_like(q), scale, TM, TN, D)
    return case.kernel, args, want, (seq // TM, 1, 1)


def _tmem_stores(ptx: str) -> int:
    return len(re.findall(r"^\s*tcgen05\.st\.", ptx, re.M))


@pytest.mark.parametrize("name", ["attention_causal_fwd", "attention_causal_split"])
def test_256_row_attention_keeps_o_in_tensor_memory(name):
    kernel, args, want, grid = _attention(name, 256, 128, 128)
    c = tc.compile_kernel(kernel, args, gpu_name="sm_100")
    (d,) = c.async_plan
    assert d.taken and "tcgen05 256x128x128" in d.line(), d.line()
    # P comes from tensor memory: an MMA with two bracketed TMEM operands
    assert re.search(r"tcgen05\.mma\.cta_group::1\.kind::f16 \[%r\d+\], \[%r\d+\], %rd", c.ptx)
    # the init, each loop's rescale (4 chunks of 32 columns) and P (2 chunks) are stores; no
    # store between the loops of the chain: they share the columns
    loops = 2 if name == "attention_causal_split" else 1
    assert _tmem_stores(c.ptx) == 4 + loops * (4 + 2)
    got = _strict(kernel, c, args, grid, 3)
    np.testing.assert_allclose(got, want, atol=2e-3)
    _no_spills(c.ptx)


def _plan(kernel, args, warps: int = 8):
    """tmem_resident.plan_of for ``kernel``'s sm_100 build (``warps`` warps)."""
    from tilegen.runtime.codegen import tmem_resident
    from tilegen.runtime.codegen.core import Emitter

    c = tc.compile_kernel(kernel, args, gpu_name="sm_100", emit="nv_tileas")
    (func,) = [o for o in c.module.walk() if o.name == "nv_tileaa.func"]
    return tmem_resident.plan_of(Emitter(func, warps, 100))


def test_the_plan_shares_columns_along_a_chain():
    kernel, args, _, _ = _attention("attention_causal_split", 256, 128, 128)
    p = _plan(kernel, args)
    assert p.scratch == 256  # the 256 x 128 Q K^T: both blocks
    assert sorted(set(p.residents.values())) == [256]  # one 256-column O for both loops
    assert len(p.residents) == 2 and len(p.rescales) == 2 and p.columns == 512


@pytest.mark.parametrize(
    "TM,TN,D,resident",
    [
        (128, 128, 128, False),  # 64 + 64 registers a thread: in registers
        (128, 64, 256, True),  # 32 + 128: O in tensor memory
        (64, 64, 256, True),  # M 64, 4 warps: 32 + 128, O read and written 16x32bx2
    ],
)
def test_the_register_rule(TM, TN, D, resident):
    kernel, args, want, grid = _attention("attention_causal_gemma_form", TM, TN, D)
    c = tc.compile_kernel(kernel, args, gpu_name="sm_100")
    assert c.async_plan[0].taken
    assert bool(_plan(kernel, args, 8 if TM == 128 else 4).residents) == resident
    if TM == 128:  # P (the second dot's A) in tensor memory: the region of its own
        assert re.search(r"tcgen05\.mma\.cta_group::1\.kind::f16 \[%r\d+\], \[%r\d+\], %rd", c.ptx)
    else:  # M 64: O's init and rescales as thread pairs' halves
        assert re.search(r"tcgen05\.st\.sync\.aligned\.16x32bx2\.x\d+\.b32 \[%r\d+\], \d+,", c.ptx)
    got = _strict(kernel, c, args, grid, 3)
    np.testing.assert_allclose(got, want, atol=2e-3)


@ct.kernel
def gemm_into(
    A, B, Out, c0: float, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]
):
    i, j = ct.bid(0), ct.bid(1)
    acc = ct.full((TM, TN), 0.0, f32) + c0  # registers, stored before the loop
    for k in range(ct.num_tiles(A, axis=1, shape=(TM, TK))):
        a = ct.load(A, index=(i, k), shape=(TM, TK))
        b = ct.load(B, index=(k, j), shape=(TK, TN))
        acc = ct.mma(a, b, acc)
    ct.store(Out, index=(i, j), tile=acc + 1.0)


def test_todays_path_gemm_keeps_a_256_column_accumulator_in_tensor_memory():
    """Today's path (no warp specialization): a 256 x 256 tile on 8 warps, 256 accumulators a
    thread, accumulates in tensor memory from a computed init; exact in the strict
    simulator."""
    from tilegen.runtime.options import CompileOptions

    rng = np.random.default_rng(3)
    m, n, k = 256, 256, 192
    a = rng.integers(-3, 4, size=(m, k)).astype(np.float16)
    b = rng.integers(-3, 4, size=(k, n)).astype(np.float16)
    args = (a, b, np.zeros((m, n), np.float32), np.float32(5.0), 256, 256, 64)
    opts = CompileOptions(warp_specialize=False, num_warps=8)
    c = tc.compile_kernel(gemm_into, args, gpu_name="sm_100", options=opts)
    assert _tmem_stores(c.ptx) == 8  # the init: 256 columns a thread, 32 at a time
    assert "tcgen05.mma.cta_group::1.kind::f16" in c.ptx
    got = _strict(gemm_into, c, args, (1, 1, 1), 2)
    want = a.astype(np.float64) @ b.astype(np.float64) + 6.0
    np.testing.assert_array_equal(got, want)


@ct.kernel
def gemm_bias_scale(
    A, B, Bias, Scale, Out, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]
):
    i, j = ct.bid(0), ct.bid(1)
    acc = ct.full((TM, TN), 0.0, f32)
    for k in range(ct.num_tiles(A, axis=1, shape=(TM, TK))):
        a = ct.load(A, index=(i, k), shape=(TM, TK))
        acc = ct.mma(a, ct.load(B, index=(k, j), shape=(TK, TN)), acc)
    bias = ct.load(Bias, index=(0, j), shape=(1, TN))
    scale = ct.load(Scale, index=(i, 0), shape=(TM, 1))
    ct.store(Out, index=(i, j), tile=ct.astype((acc + bias) * scale, Out.dtype))


def test_a_resident_result_goes_through_its_epilogue_by_chunks():
    """The 256 x 256 accumulator of today's path reaches its store through a bias row, a row
    scale and a conversion: the store reads it 32 columns at a time, the bias row's elements
    of those columns from shared memory, so neither the accumulator's row nor the bias's
    (256 values a thread each) is ever whole in registers; no spills, exact."""
    from tilegen.runtime.options import CompileOptions

    rng = np.random.default_rng(5)
    m, n, k = 256, 256, 128
    a = rng.integers(-3, 4, size=(m, k)).astype(np.float16)
    b = rng.integers(-3, 4, size=(k, n)).astype(np.float16)
    bias = rng.integers(-8, 9, size=(1, n)).astype(np.float32)
    scale = rng.choice([0.25, 0.5, 1.0, 2.0], size=(m, 1)).astype(np.float32)
    args = (a, b, bias, scale, np.zeros((m, n), np.float16), 256, 256, 64)
    opts = CompileOptions(warp_specialize=False, num_warps=8)
    c = tc.compile_kernel(gemm_bias_scale, args, gpu_name="sm_100", options=opts)
    body = c.ptx[c.ptx.index("tcgen05.commit") :]
    assert len(re.findall(r"tcgen05\.ld\.sync\.aligned\.32x32b\.x32\.", body)) == 8
    assert len(re.findall(r"ld\.shared\.v4\.f32", body)) == 8 * 32 // 4  # the bias, by chunks
    _no_spills(c.ptx)
    got = _strict(gemm_bias_scale, c, args, (1, 1, 1), 4)
    want = (a.astype(np.float64) @ b.astype(np.float64) + bias) * scale
    np.testing.assert_array_equal(got, want.astype(np.float16).astype(np.float64))


@ct.kernel
def gemm_from_c(A, B, C, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
    i, j = ct.bid(0), ct.bid(1)
    acc = ct.astype(ct.load(C, index=(i, j), shape=(TM, TN)), ct.int32) * 2
    for k in range(ct.num_tiles(A, axis=1, shape=(TM, TK))):
        a = ct.load(A, index=(i, k), shape=(TM, TK))
        acc = ct.mma(a, ct.load(B, index=(k, j), shape=(TK, TN)), acc)
    ct.store(C, index=(i, j), tile=ct.astype(acc, C.dtype))


def _i8_from_c(kernel, seed: int, k: int):
    """(A, B, C, the launch's arguments, the compiled kernel) of a 256 x 256 i8 GEMM from an
    i16 C on sm_100's today's path."""
    from tilegen.runtime.options import CompileOptions

    rng = np.random.default_rng(seed)
    a = rng.integers(-3, 4, size=(256, k)).astype(np.int8)
    b = rng.integers(-3, 4, size=(k, 256)).astype(np.int8)
    c = rng.integers(-50, 50, size=(256, 256)).astype(np.int16)
    args = (a, b, c, 256, 256, 64)
    opts = CompileOptions(warp_specialize=False, num_warps=8)
    return a, b, c, args, tc.compile_kernel(kernel, args, gpu_name="sm_100", options=opts)


def test_a_resident_accumulator_starts_from_c_by_chunks():
    """A 256 x 256 i8 GEMM from C on today's path: C (an i16 tile, widened and doubled on the
    way) is loaded, converted and written into tensor memory 32 columns at a time at the
    loop's entry, never whole in registers (it spilled 576 B as fuzz seed 325621); exact."""
    a, b, c, args, cc = _i8_from_c(gemm_from_c, 7, 128)
    assert "tcgen05.mma.cta_group::1.kind::i8" in cc.ptx
    entry = cc.ptx[: cc.ptx.index("tcgen05.mma")]
    stores = [x.start() for x in re.finditer(r"tcgen05\.st\.", entry)]
    loads = [x.start() for x in re.finditer(r"ld\.global", entry)]
    assert len(stores) == 8 and loads[-1] > stores[0]  # C's chunks between the stores
    _no_spills(cc.ptx)
    got = _strict(gemm_from_c, cc, args, (1, 1, 1), 2)
    want = 2 * c.astype(np.int64) + a.astype(np.int64) @ b.astype(np.int64)
    np.testing.assert_array_equal(got, want)


@ct.kernel
def gemm_from_c_then_cleared(
    A, B, C, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]
):
    i, j = ct.bid(0), ct.bid(1)
    acc = ct.astype(ct.load(C, index=(i, j), shape=(TM, TN)), ct.int32)
    ct.store(C, index=(i, j), tile=ct.full((TM, TN), 0, C.dtype))  # C read before this
    for k in range(ct.num_tiles(A, axis=1, shape=(TM, TK))):
        a = ct.load(A, index=(i, k), shape=(TM, TK))
        acc = ct.mma(a, ct.load(B, index=(k, j), shape=(TK, TN)), acc)
    ct.store(C, index=(i, j), tile=ct.astype(acc, C.dtype))


def test_c_written_between_its_load_and_the_loop_is_loaded_where_it_stands():
    """The chunked initial value loads C at the loop's entry, so not where a store to memory
    comes between: C is cleared there, and the sum must start from the C loaded before."""
    a, b, c, args, cc = _i8_from_c(gemm_from_c_then_cleared, 8, 64)
    got = _strict(gemm_from_c_then_cleared, cc, args, (1, 1, 1), 2)
    np.testing.assert_array_equal(got, c.astype(np.int64) + a.astype(np.int64) @ b)


@ct.kernel
def attention_bf16(Q, K, V, Out, TM: ct.Constant[int], TN: ct.Constant[int], D: ct.Constant[int]):
    """Non-causal attention in bf16: P is packed two bf16 to a tensor-memory column."""
    i = ct.bid(0)
    q = ct.load(Q, index=(i, 0), shape=(TM, D))
    m_i = ct.full((TM, 1), -1.0e30, f32)
    l_i = ct.full((TM, 1), 0.0, f32)
    acc = ct.full((TM, D), 0.0, f32)
    for j in range(ct.num_tiles(K, axis=1, shape=(D, TN))):
        qk = ct.mma(q, ct.load(K, index=(0, j), shape=(D, TN)), ct.full((TM, TN), 0.0, f32))
        m_new = ct.maximum(m_i, ct.max(qk, axis=1, keepdims=True))
        p = ct.exp2(qk - m_new)
        alpha = ct.exp2(m_i - m_new)
        l_i = l_i * alpha + ct.sum(p, axis=1, keepdims=True)
        v = ct.load(V, index=(j, 0), shape=(TN, D))
        acc = ct.mma(ct.astype(p, Q.dtype), v, acc * alpha)
        m_i = m_new
    ct.store(Out, index=(i, 0), tile=ct.astype(acc / l_i, Out.dtype))


@pytest.mark.parametrize("TM", [256, 128])
def test_bf16_p_in_tensor_memory(TM):
    ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes is not installed")
    bf16 = ml_dtypes.bfloat16
    rng = np.random.default_rng(5)
    S, D, TN = 2 * TM, 128, 128
    q = (rng.standard_normal((S, D)) * 0.1).astype(bf16)
    kt = (rng.standard_normal((D, S)) * 0.1).astype(bf16)
    v = rng.standard_normal((S, D)).astype(bf16)
    args = (q, kt, v, np.zeros((S, D), np.float32), TM, TN, D)
    c = tc.compile_kernel(attention_bf16, args, gpu_name="sm_100")
    assert c.async_plan[0].taken
    assert re.search(r"tcgen05\.mma\.cta_group::1\.kind::f16 \[%r\d+\], \[%r\d+\], %rd", c.ptx)
    got = _strict(attention_bf16, c, args, (S // TM, 1, 1), 3)
    s = q.astype(np.float64) @ kt.astype(np.float64)
    p = np.exp2(s - s.max(1, keepdims=True))
    want = (p / p.sum(1, keepdims=True)) @ v.astype(np.float64)
    np.testing.assert_allclose(got, want, atol=2e-2)


def test_a_warp_whose_row_maxima_stay_skips_the_rescale():
    """``acc * alpha`` with every alpha of a warp 1.0 (no row's maximum moved) leaves the
    tensor-memory accumulator as it is: the warp branches around the load, multiply and
    store. Rows 0-127 meet their largest scores in the first K tile (their warps skip every
    later rescale), rows 128-255 in the last one (theirs never skip); both match NumPy."""
    rng = np.random.default_rng(6)
    S, D, TM, TN = 512, 128, 256, 128
    q = np.zeros((S, D), np.float16)
    q[:, 0] = 1.0
    q[128:256, 0] = -1.0
    q[384:, 0] = -1.0
    kt = (rng.standard_normal((D, S)) * 0.05).astype(np.float16)
    kt[0, :] = np.linspace(4.0, -4.0, S).astype(np.float16)  # key scores fall along the keys
    v = rng.standard_normal((S, D)).astype(np.float16)
    args = (q, kt, v, np.zeros((S, D), np.float32), TM, TN, D)
    c = tc.compile_kernel(attention_bf16, args, gpu_name="sm_100")
    assert "vote.sync.any.pred" in c.ptx and re.search(r"^\$L__tmem_rescaled_\d+:", c.ptx, re.M)
    got = _strict(attention_bf16, c, args, (S // TM, 1, 1), 3)
    s = q.astype(np.float64) @ kt.astype(np.float64)
    p = np.exp2(s - s.max(1, keepdims=True))
    want = (p / p.sum(1, keepdims=True)) @ v.astype(np.float64)
    np.testing.assert_allclose(got, want, atol=2e-2)
