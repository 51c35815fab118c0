"""Dot operands whose rows are not 4-byte aligned (an odd K of an 8-bit or 16-bit array, a
row TMA and cp.async cannot copy): the dot copies them into its shared-memory operand buffer
itself, through registers, one 16-byte chunk a thread at a time (``memory.cp_async_tile``,
``_copy_through_registers``): the five aligned words that cover the chunk loaded (each where
it holds an in-bounds byte), funnel-shifted into place by the address's misalignment, bytes
past the row's end masked to 0, and one ``st.shared.v4.b32``.

Before, such a load stayed a whole tile in registers until the dot wrote it out: seed 200046
(sm_90a, i8 256 x 64 at occupancy 2) held 81 bytes a thread at once beside 64 accumulators
and spilled 228 B. Each kernel here runs in the strict simulator against NumPy (exact), and
ptxas assembles it with no spill."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

pytest.importorskip("cuda.tile", reason="cuda-tile is not installed (pip install -e '.[cutile]')")

import fuzz_async as fa  # noqa: E402

from tilegen.runtime.ptxas import find_ptxas  # noqa: E402

pytestmark = pytest.mark.skipif(
    not Path(find_ptxas() or "/nonexistent").exists(), reason="ptxas is not installed"
)


def _gemm(target, ab, out, tm, tn, tk, bt, sizes, epi=0, init=0, options=None):
    params = dict(ab=ab, out=out, TM=tm, TN=tn, TK=tk, BT=bt, INIT=init, EPI=epi)
    return fa.Config(0, "gemm", target, params, options or {}, sizes, aligned=False)


_UNALIGNED = [
    # seed 200046's kernel: B loaded N x K and transposed, a bias row and a row scale
    ("sm_90a", "i8", "i32", 256, 64, 64, 1, dict(M=256, N=64, K=119), {"occupancy": 2}),
    ("sm_90a", "bf16", "f32", 128, 128, 64, 0, dict(M=128, N=130, K=197), {}),
    ("sm_80", "f16", "f32", 128, 64, 64, 1, dict(M=100, N=64, K=71), {}),
    ("sm_100a", "e4m3", "f32", 128, 128, 128, 0, dict(M=128, N=131, K=257), {}),
    ("sm_120", "i8", "i32", 128, 128, 64, 0, dict(M=128, N=77, K=129), {}),
]


@pytest.mark.parametrize(
    "target,ab,out,tm,tn,tk,bt,sizes,options,path",
    [
        row + (p,)
        for row in _UNALIGNED
        for p in ("async", "today")
        if row[0] != "sm_80" or p == "today"
    ],
)
def test_unaligned_operands_are_copied_through_registers_a_chunk_at_a_time(
    target, ab, out, tm, tn, tk, bt, sizes, options, path, tmp_path
):
    """On sm_90a, sm_100a and sm_120 the async path's producer warp group copies them
    (docs/pipelines.md section 43); with ``use_tma=False`` (and on sm_80), the dot itself."""
    cfg = _gemm(
        target, ab, out, tm, tn, tk, bt, sizes, epi=4 if out == "i32" else 0, options=options
    )
    o = fa.check(cfg, str(tmp_path), **({} if path == "async" else {"use_tma": False}))
    assert o.status == "ok", f"{o.status}: {o.detail}\n{o.plan}"
    assert o.path == path, o.plan
    if path == "async":
        assert "copied by the producer's threads (through registers: no TMA)" in o.plan
    ptx = o.ptx
    assert "cp.async.ca" not in ptx and "cp.async.cg" not in ptx
    # aligned words, funnel-shifted into place, a 16-byte chunk a store; no element loads (the
    # register path's ld.global.s8 / b16, a whole tile of them live at once)
    assert "shf.r.clamp.b32" in ptx and "st.shared.v4.b32" in ptx
    assert not re.search(r"ld\.global\.[sub](8|16) ", ptx)
    # a synchronous copy is not prefetched into stage buffers: its warp stalls on the loads
    # either way, and the stages would only cost shared memory and code
    assert "cp.async.wait" not in ptx


def _producer(ptx: str) -> tuple:
    """(start, end) of the producer warp group's code in an async-path kernel's PTX."""
    top = re.search(r"^\$L__async_acquired_\d+:", ptx, re.M).end()
    end = re.search(r"^\$L__async_producer_done_\d+:", ptx, re.M).start()
    return top, end


def _a_stride_divisible_by(cfg, tmp_path, elements: int):
    """``cfg``'s kernel as cuda_tile text, A's row stride assumed divisible by ``elements``
    (what cuTile, knowing only 16-byte multiples, cannot say: rows of 8 bytes, say), and the
    arguments: (path, args, grid, index of C, reference, rtol, atol)."""
    from tilegen.commands.disasm import disassemble

    args, grid, idx, ref, rtol, atol = fa.problem(cfg, np.random.default_rng(cfg.seed))
    bc = tmp_path / "k.tileirbc"
    fa.export(cfg, str(bc), args)
    text, errors = disassemble(bc.read_bytes(), str(bc))
    assert text is not None, errors
    view = re.search(
        r"^(\s*)%\w+ = make_tensor_view %\w+, shape = \[[^\]]*\], strides = \[(%\w+), 1\]",
        text,
        re.M,
    )
    indent, stride = view.groups()
    line = view.group(0).replace(f"strides = [{stride}, 1]", "strides = [%a_stride, 1]")
    text = (
        text[: view.start()]
        + f"{indent}%a_stride = assume div_by<{elements}>, {stride} : tile<i32>\n"
        + line
        + text[view.end() :]
    )
    src = tmp_path / "k.mlir"
    src.write_text(text)
    return src, args, grid, idx, ref, rtol, atol


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a", "sm_120"])
def test_the_producer_threads_copy_what_tma_cannot(target, tmp_path):
    """An f16 GEMM whose A rows are 200 bytes (K = 100: a multiple of 8 bytes, not of 16): B
    goes by TMA, A by the producer warp group's 128 threads with 8-byte cp.async into TMA's
    swizzled stage layout (docs/pipelines.md section 43). A stage's full barrier counts 129
    arrivals (the TMA issuer's expect_tx and every producer thread); a thread arrives a stage
    late, once ``cp.async.wait_group 1`` saw its copies land and ``fence.proxy.async`` handed
    them to the async proxy. Exact in strict ptxsim (which once read such copies as poison:
    it published a retired cp.async at a bar.sync only, not at its warp's mbarrier arrive);
    planted out, the fence (before the wgmma or tcgen05.mma reads), the wait, and a producer
    warp's arrivals are each an error."""
    from tilegen.runtime import driver
    from tilegen.runtime.options import CompileOptions
    from tilegen.runtime.ptx.launch import run_ptx
    from tilegen.runtime.ptx.sim.cta import PtxSimError
    from tilegen.runtime.ptxas import assemble

    cfg = _gemm(target, "f16", "f32", 128, 128, 64, 0, dict(M=256, N=128, K=100))
    src, args, grid, idx, ref, rtol, atol = _a_stride_divisible_by(cfg, tmp_path, 4)
    c = driver.compile_source(src, CompileOptions(target=target))
    (plan,) = c.async_plan
    assert plan.taken and plan.thread_copied == (("A", 8),), plan.line()
    assert "A copied by the producer's threads (8-byte cp.async: no TMA)" in plan.line()
    if target != "sm_120":  # (the copies' registers: one consumer warp group keeps 256)
        assert "setmaxnreg 96/256" in plan.line(), plan.line()
    ptx = c.ptx
    _, log = assemble(ptx, int(target[3:6].rstrip("a")), verbose=True)
    assert " 0 bytes spill stores" in log, log
    top, end = _producer(ptx)
    prod = ptx[top:end]
    assert "cp.async.ca.shared.global" in prod and "cp.async.bulk.tensor" in prod
    assert prod.count("mbarrier.arrive.expect_tx") == 1  # (B's bytes, by one thread)
    lagged = prod.index("cp.async.wait_group 1;")
    fence = prod.index("fence.proxy.async.shared::cta")
    assert lagged < fence < prod.index("mbarrier.arrive.shared::cta.b64")
    assert re.search(r"mbarrier\.init\.shared::cta\.b64 \[[^\]]+\], 129;", ptx)
    # the producer's loop bound is its own copy, read from the frame after its setmaxnreg
    # (async_loop._split_bounds: live across the split, ptxas spilled it); the consumers'
    # loops never read the producer's copy
    split = ptx.index("bra $L__async_consumer")  # (the producer's branch from here)
    bounds = re.findall(r"ld\.shared\.b32 (%r\d+), \[tg_async\+\d+\];", ptx[split:top])
    assert len(bounds) >= 1, ptx[split:top]
    if target != "sm_120":
        assert ptx.index("setmaxnreg.dec", split) < ptx.index(bounds[0], split)
    for r in bounds:
        assert not re.search(re.escape(r) + r"\b", ptx[end:])

    def run(text):
        got = run_ptx(text, args, grid, strict_async=True)[idx]
        return fa._decode(np.asarray(got), "f32")

    np.testing.assert_allclose(run(ptx), ref, rtol=rtol, atol=atol)
    no_wait = ptx[:top] + prod.replace("\tcp.async.wait_group 1;\n", "") + ptx[end:]
    short = re.sub(r"(mbarrier\.init\.shared::cta\.b64 \[[^\]]+\]), 129;", r"\1, 97;", ptx)
    bugs = [(no_wait, "no barrier"), (short, "arrivals pending")]
    if target != "sm_120":  # (sm_120's consumers read the stages by ldmatrix: no async proxy)
        no_fence = prod.replace("\tfence.proxy.async.shared::cta;\n", "")
        bugs.append((ptx[:top] + no_fence + ptx[end:], "not followed by fence.proxy.async"))
    for bad, msg in bugs:
        with pytest.raises(PtxSimError, match=msg):
            run(bad)
