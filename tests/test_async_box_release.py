"""Each staged load released on its own, and attention at occupancy 2 on sm_100
(docs/pipelines.md section 27; runtime/codegen/async_loop._box_hooks,
async_general._occupancy_stages, layouts/kernel._one_group_in_tmem).

The general form's consumers wait for each staged load's own full barrier where the load
stands in the body, and arrive on its own empty barrier after the last op that reads it: the
producer refills attention's K box while the softmax and the second dot still run. Under an
``occupancy`` hint of 2 a 128-row attention on sm_100 then runs as tileiras builds it: one
consumer warp group (a row a thread, O and P in tensor memory), 256 threads at 128 registers,
one stage, two CTAs an SM. The strict simulator checks every box's barrier phases; a release
moved before the dot that reads the box is caught."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from tilegen.runtime.options import CompileOptions
from tilegen.runtime.ptx.sim.cta import PtxSimError
from tilegen.runtime.ptxas import find_ptxas

ct = pytest.importorskip(
    "cuda.tile", reason="cuda-tile is not installed (pip install -e '.[cutile]')"
)
tc = pytest.importorskip("tilegen.cutile")

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cutile_kernels_async as cka  # noqa: E402

needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found")


def _attention(TM: int, TN: int, D: int, seq: int, occupancy: int = None):
    kernel = cka.kernels()["attention_causal_fwd"].kernel
    if occupancy is not None:
        kernel = kernel.replace_hints(occupancy=occupancy)
    q, kt, v, scale, want = cka.causal_attention_inputs(1, seq, D, seq)
    return kernel, (q, kt, v, np.zeros_like(q), scale, TM, TN, D), want, (seq // TM, 1, 1)


def _run(kernel, ptx: str, args, grid) -> np.ndarray:
    from tilegen.cutile_launch import _prepare
    from tilegen.runtime.ptx.launch import run_ptx

    values = [v for _, v in _prepare(kernel, args).runtime]
    return np.asarray(run_ptx(ptx, values, grid, strict_async=True)[3]).astype(np.float64)


def _ptxas_log(ptx: str, sm: int = 100) -> str:
    from tilegen.runtime.codegen.driver import assemble

    _, log = assemble(ptx, sm, verbose=True)
    return log


def _assembles(ptx: str, sm: int = 100) -> None:
    """ptxas takes the PTX the simulator ran, without spills (where ptxas is installed)."""
    if find_ptxas() is not None:
        log = _ptxas_log(ptx, sm)
        assert " 0 bytes spill stores" in log, log


def _consumer_loop(ptx: str) -> str:
    start = re.search(r"^\$L__async_body_\d+:", ptx, re.M).end()
    return ptx[start : re.search(r"^\$L__async_body_end_\d+:", ptx, re.M).start()]


def test_each_staged_load_waits_and_releases_on_its_own():
    kernel, args, want, grid = _attention(128, 64, 64, 256)
    c = tc.compile_kernel(kernel, args, gpu_name="sm_100")
    (d,) = c.async_plan
    assert d.taken and d.mma == "tcgen05" and d.stages == 2, d.line()
    # two staged loads (K^T, V): a full and an empty barrier each, per stage
    # (+ the MMAs' barrier and Q's, which the producer copies once: section 50)
    assert c.ptx.count("mbarrier.init.shared::cta.b64") == 2 * 2 * 2 + 2
    loop = _consumer_loop(c.ptx)
    waits = [m.start() for m in re.finditer(r"mbarrier\.try_wait\.parity", loop)]
    arrives = [m.start() for m in re.finditer(r"mbarrier\.arrive\.shared::cta\.b64 _", loop)]
    issues = [m.start() for m in re.finditer(r"tcgen05\.mma\.cta_group::1", loop)]
    assert len(arrives) == 2, arrives
    # K^T's box is released after the first dot's MMAs and before the second dot's: the
    # producer copies the next K^T while the softmax runs
    first, second = issues[0], issues[len(issues) // 2]
    assert first < arrives[0] < second < arrives[1]
    # V's full barrier is waited on after the first dot, not at the iteration's top
    v_wait = max(w for w in waits if w < second)
    assert v_wait > arrives[0]
    got = _run(kernel, c.ptx, args, grid)
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)
    _assembles(c.ptx)


def test_a_box_released_before_its_dot_is_caught():
    """The planted bug: K^T's release moved to the top of the iteration, before the MMAs that
    read it. The producer's copy two iterations ahead then lands in a box a running MMA
    reads."""
    kernel, args, want, grid = _attention(128, 64, 64, 384)
    ptx = tc.compile_kernel(kernel, args, gpu_name="sm_100").ptx
    start = re.search(r"^\$L__async_body_\d+:\n", ptx, re.M).end()
    end = re.search(r"^\$L__async_body_end_\d+:", ptx, re.M).start()
    rel = re.search(r"\tmbarrier\.arrive\.shared::cta\.b64 _, \[(%r\d+)\];\n", ptx[start:end])
    # the barrier's address is computed in the loop: recompute it where the release goes
    addr = re.search(rf"\tadd\.s32 {rel.group(1)}, (%r\d+), (\d+);\n", ptx[start:end])
    mad = re.search(rf"\tmad\.lo\.s32 {addr.group(1)}, [^\n]*\n", ptx[start:end])
    wait = re.search(r"\$L__wait_\d+:\n[^\n]*\n[^\n]*\n", ptx[start:end])
    assert rel and addr and mad and wait
    moved = mad.group(0) + addr.group(0) + rel.group(0)
    body = ptx[start:end].replace(rel.group(0), "", 1)
    at = body.index(wait.group(0)) + len(wait.group(0))  # after the K^T box's full wait
    bad = ptx[:start] + body[:at] + moved + body[at:] + ptx[end:]
    assert _run(kernel, ptx, args, grid).shape == want.shape  # the kernel as built runs
    with pytest.raises(PtxSimError, match="a stage refilled before its consumers released it"):
        _run(kernel, bad, args, grid)


@needs_ptxas
def test_occupancy_two_at_128_rows_on_sm100():
    """tileiras 13.5 builds TileGym's causal FMHA 128 x 128 d128 under occupancy=2 as 256
    threads at 128 registers in 115,988 bytes: one softmax warp group at 224 registers after
    setmaxnreg. tilegen now does the same (one stage of K^T and V, Q kept), within the
    hint's share of shared memory."""
    from tilegen.runtime.targets import occupancy_shared

    kernel, args, want, grid = _attention(128, 128, 128, 384, occupancy=2)
    c = tc.compile_kernel(kernel, args, gpu_name="sm_100")
    (d,) = c.async_plan
    assert d.taken and (d.consumer_warps, d.producer_warps, d.stages) == (4, 4, 1), d.line()
    assert ".reqntid 256, 1, 1" in c.ptx and ".maxnreg 128" in c.ptx
    assert "setmaxnreg.inc.sync.aligned.u32 224" in c.ptx
    # O stays in tensor memory (rescaled in place), P goes there: tcgen05.mma reads A from it
    assert re.search(r"tcgen05\.mma\.cta_group::1\.kind::f16 \[%r\d+\], \[%r\d+\], %rd", c.ptx)
    log = _ptxas_log(c.ptx)
    assert " 0 bytes spill stores" in log and "Used 128 registers" in log, log
    smem = int(re.search(r"(\d+) bytes smem", log).group(1))
    assert smem <= occupancy_shared(100, 2), smem
    got = _run(kernel, c.ptx, args, grid)
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)


def test_without_the_hint_two_warp_groups_stay():
    kernel, args, _, _ = _attention(128, 128, 128, 256)
    (d,) = tc.compile_kernel(kernel, args, gpu_name="sm_100").async_plan
    assert (d.consumer_warps, d.stages) == (8, 2), d.line()
    # a 256-column output would be read back whole after the loop: two groups keep it
    kernel, args, _, _ = _attention(128, 64, 256, 256, occupancy=2)
    (d,) = tc.compile_kernel(kernel, args, gpu_name="sm_100").async_plan
    assert d.consumer_warps == 8, d.line()


def test_a_ring_that_does_not_fit_loses_stages_before_todays_path(monkeypatch):
    """The async stage's shared-memory estimate is rough (64 KB for the body). A general-form
    ring that outgrows shared memory once emitted is emitted again with a stage fewer, down to
    one, before the kernel falls back to today's path (TileGym's MLA prefill 256 x 128 on
    sm_100a: 274,960 B with two stages, async at one). Here the estimate is forced open and
    four stages asked for: the 256 x 128 attention lands at two (128 KB of stages beside Q)."""
    from tilegen.runtime.options import CompileOptions
    from tilegen.runtime.passes import async_general

    monkeypatch.setattr(async_general, "shared_budget", lambda *a, **k: 1 << 30)
    kernel, args, want, grid = _attention(256, 128, 128, 512)
    opts = CompileOptions(num_stages=4)
    (chosen,) = tc.compile_kernel(
        kernel, args, gpu_name="sm_100", options=opts, emit="async-plan"
    ).async_plan
    assert chosen.taken and chosen.stages == 4  # what the async stage chose
    c = tc.compile_kernel(kernel, args, gpu_name="sm_100", options=opts)
    (d,) = c.async_plan
    assert d.taken and d.stages == 2, d.line()
    # two stages of two staged loads: eight barriers, the MMAs' own and Q's (section 50)
    assert c.ptx.count("mbarrier.init.shared::cta.b64") == 2 * 2 * 2 + 2
    got = _run(kernel, c.ptx, args, grid)
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)
    _assembles(c.ptx)


def test_the_overlap_form_releases_k_early_and_waits_for_v_late():
    """sm_90a's overlapped attention (FlashAttention-3's form, section 16) with the loads on
    their own barriers, as FA3's own K and V pipelines are: K^T is waited for at the top and
    released once part A (Q K^T, the softmax) is done; V is waited for just before the P V
    that runs in the next iteration, and released with it. Strict ptxsim matches NumPy for
    one, two and many iterations; with V's wait planted out it reports the early read."""
    kernel, args, want, grid = _attention(128, 64, 64, 256)
    overlap = CompileOptions(overlap_mma=True)  # (off by default since section 46)
    c = tc.compile_kernel(kernel, args, gpu_name="sm_90", options=overlap)
    (d,) = c.async_plan
    assert d.taken and d.overlap and d.stages == 3, d.line()
    assert c.ptx.count("mbarrier.init.shared::cta.b64") == 3 * 2 * 2  # full + empty, per load
    loop = _consumer_loop(c.ptx)
    join = re.search(r"^\$L__overlap_join_\d+:", loop, re.M).start()
    released = re.search(r"^\$L__overlap_released_\d+:", loop, re.M).start()
    waits = [m.start() for m in re.finditer(r"mbarrier\.try_wait\.parity", loop)]
    arrives = [m.start() for m in re.finditer(r"mbarrier\.arrive\.shared::cta\.b64 _", loop)]
    assert len(waits) == 2 and len(arrives) == 2
    # K^T: waited first, released after part A (before the previous P V's release)
    assert waits[0] < join < arrives[0] < released
    # V: waited in the branch that runs the previous iteration's P V, before its wgmmas
    wait_v = waits[1]
    assert wait_v < loop.index("wgmma.mma_async", wait_v) < join < arrives[1] < released
    for seq in (128, 256, 640):
        kernel, args, want, grid = _attention(128, 64, 64, seq)
        np.testing.assert_allclose(_run(kernel, c.ptx, args, grid), want, rtol=2e-2, atol=2e-2)
    _assembles(c.ptx, 90)
    kernel, args, want, grid = _attention(128, 64, 64, 384)
    start = re.search(r"^\$L__async_body_\d+:", c.ptx, re.M).end()
    body = c.ptx[start:]
    m = list(re.finditer(r"\$L__wait_\d+:\n\tmbarrier\.try_wait[^\n]*\n[^\n]*\n", body))[1]
    bad = c.ptx[:start] + body[: m.start()] + body[m.end() :]
    with pytest.raises(PtxSimError, match="the mbarrier phase that completes the copy"):
        _run(kernel, bad, args, grid)
