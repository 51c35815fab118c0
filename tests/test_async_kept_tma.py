"""Attention's Q copied by TMA once (docs/pipelines.md section 50; runtime/codegen/async_kept.py,
async_general.kept_loads).

The general form's loop-invariant A operand (Q) was loaded into registers by every consumer
thread and written into a kept array. Now the producer's elected thread copies it by TMA ahead
of the ring's first stage, and the consumers wait for its barrier once. On sm_90a the copies
are 8-row boxes placed in the row order wgmma_dot's accumulator layout needs; on sm_100a the
rows stay in order, in one box. Strict ptxsim checks the barrier; a consumer that does not
wait is caught."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from tilegen.runtime.codegen.async_kept import physical_block
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
COPY = "cp.async.bulk.tensor.3d.shared::cluster"


def _attention(TM: int, TN: int, D: int, seq: int, heads: int = 1):
    kernel = cka.kernels()["attention_causal_fwd"].kernel
    q, kt, v, scale, want = cka.causal_attention_inputs(heads, seq, D, seq)
    args = (q, kt, v, np.zeros_like(q), scale, TM, TN, D)
    return kernel, args, want, (-(-seq // TM), heads, 1)


def _run(kernel, ptx: str, args, grid) -> np.ndarray:
    from tilegen.cutile_launch import _prepare
    from tilegen.runtime.ptx.launch import run_ptx

    values = [v for _, v in _prepare(kernel, args).runtime]
    return np.asarray(run_ptx(ptx, values, grid, strict_async=True)[3]).astype(np.float64)


def _before_the_loop(ptx: str) -> str:
    """The PTX before the producer's (first) loop."""
    return ptx[: re.search(r"^\$L__async_produce_\d+:", ptx, re.M).start()]


def _assembles(ptx: str, sm: int) -> None:
    from tilegen.runtime.codegen.driver import assemble

    _, log = assemble(ptx, sm, verbose=True)
    assert " 0 bytes spill stores" in log, log


@pytest.mark.parametrize("groups", [1, 2])
def test_the_blocks_land_where_wgmma_dots_a_layout_puts_their_rows(groups):
    """``physical_block`` is the 8-row-block form of ``wgmma_layout.wgmma_a_fields``: for every
    logical row of a 256-row A (two or four 64-row instances), the block the copies put it in
    holds it at the row wgmma_dot's own writes would (a permutation of the blocks)."""
    from tilegen.runtime.codegen.wgmma_layout import wgmma_a_fields
    from tilegen.runtime.layouts.mma_choice import wgmma_sbo

    K, esz, M = 64, 2, 256
    rows, _ = wgmma_a_fields(K, esz, groups)
    sbo = wgmma_sbo(K, esz)
    seen = set()
    for m in range(M):
        off = sum(((m >> lo) & (~0 if n is None else (1 << n) - 1)) * st for lo, n, st in rows)
        # the fields' byte offset: 16 bytes a row within a core matrix, sbo an 8-row group
        group, r = divmod(off, sbo)
        assert r == 16 * (m % 8)
        assert group == physical_block(m // 8, groups), m
        seen.add(group)
    assert seen == set(range(M // 8))


@needs_ptxas
@pytest.mark.parametrize("TM,D", [(128, 64), (64, 128)])
def test_sm90_q_by_tma_in_blocks_of_eight_rows(TM, D):
    """sm_90a: the producer copies Q once, 8 rows a box, before the first stage; no thread
    loads anything; the consumers wait for Q's barrier once, before their loop; the result
    holds for whole and partial Q tiles (seq 200: rows past the end are zero-filled)."""
    kernel, args, want, grid = _attention(TM, 64, D, 256)
    c = tc.compile_kernel(kernel, args, gpu_name="sm_90")
    (d,) = c.async_plan
    assert d.taken and d.kept_tma == 1, d.line()
    assert "1 loop-invariant A operand(s) copied by TMA once" in d.line()
    ptx = c.ptx
    assert "ld.global" not in ptx
    per_q = TM // 8 * (D * 2 // 128)  # 8-row boxes of each 128-byte column box
    # thread 0 issues Q's copies before the warp groups split (on their own barrier, one
    # arrival), with the prologue's registers, not the producer's 32
    assert ptx[: ptx.index("setmaxnreg.dec")].count(COPY) == per_q
    kept = re.search(r"\.shared \.align 1024 \.b8 (__tilegen_kept_tma\d+)\[(\d+)\]", ptx)
    assert kept and int(kept.group(2)) == TM * D * 2 + 8
    # the consumers wait for it (parity 0) once, before their loop
    split = re.search(r"^\$L__async_consumer_\d+:", ptx, re.M).start()
    body = re.search(r"^\$L__async_body_\d+:", ptx, re.M).start()
    assert (
        len(re.findall(r"try_wait\.parity\.shared::cta\.b64 %p\d+, \[%r\d+\], 0,", ptx[split:body]))
        == 1
    )
    _assembles(ptx, 90)
    np.testing.assert_allclose(_run(kernel, ptx, args, grid), want, rtol=2e-2, atol=2e-2)
    kernel, args, want, grid = _attention(TM, 64, D, 200, heads=2)
    ptx = tc.compile_kernel(kernel, args, gpu_name="sm_90").ptx
    np.testing.assert_allclose(_run(kernel, ptx, args, grid), want, rtol=2e-2, atol=2e-2)


def test_a_consumer_that_does_not_wait_for_q_is_caught():
    """The planted bug: the consumers' wait for Q's barrier taken out. Their first wgmma then
    reads the kept array while the producer's copies may still be writing it."""
    kernel, args, want, grid = _attention(128, 64, 64, 256)
    ptx = tc.compile_kernel(kernel, args, gpu_name="sm_90").ptx
    split = re.search(r"^\$L__async_consumer_\d+:", ptx, re.M).end()
    wait = re.compile(
        r"(\$L__wait_\d+:\n\tmbarrier\.try_wait\.parity\.shared::cta\.b64 (%p\d+), \[%r\d+\], 0,"
        r" \d+;\n\t@!\2 bra \$L__wait_\d+;\n)"
    )
    m = wait.search(ptx, split)
    assert m, "no wait for Q's barrier in the consumers"
    planted = ptx[: m.start()] + ptx[m.end() :]
    with pytest.raises(PtxSimError, match="still writing it"):
        _run(kernel, planted, args, grid)


@needs_ptxas
def test_sm100_q_by_tma_in_one_box():
    """sm_100a: the rows stay in order (TMEM lane = row), so Q is one box; the tcgen05 dot
    reads A through a 128-byte swizzled descriptor."""
    kernel, args, want, grid = _attention(128, 64, 64, 256)
    c = tc.compile_kernel(kernel, args, gpu_name="sm_100")
    (d,) = c.async_plan
    assert d.taken and d.mma == "tcgen05" and d.kept_tma == 1, d.line()
    assert "ld.global" not in c.ptx and _before_the_loop(c.ptx).count(COPY) == 1
    _assembles(c.ptx, 100)
    np.testing.assert_allclose(_run(kernel, c.ptx, args, grid), want, rtol=2e-2, atol=2e-2)


@needs_ptxas
def test_a_chain_reads_the_one_copy():
    """cuTile's causal attention split at the diagonal: two loops, both QK^T reading Q. It is
    copied once, before the first loop; both loops read it."""
    case, pr = cka.kernels()["attention_causal_split"], cka.problems()["attention_causal_split"]
    args = tuple(pr.args.values()) + (128, 64, 64)
    c = tc.compile_kernel(case.kernel, args, gpu_name="sm_90")
    (d,) = c.async_plan
    assert d.taken and d.chain == 2 and d.kept_tma == 1, d.line()
    assert "ld.global" not in c.ptx and _before_the_loop(c.ptx).count(COPY) == 16
    _assembles(c.ptx, 90)
    from tilegen.cutile_launch import _prepare
    from tilegen.runtime.ptx.launch import run_ptx

    values = [v for _, v in _prepare(case.kernel, args).runtime]
    out = run_ptx(c.ptx, values, pr.grid, strict_async=True)
    want = pr.expected["Out"].astype(np.float64)
    np.testing.assert_allclose(np.asarray(out[3]).astype(np.float64), want, atol=2e-2)


def test_the_overlap_keeps_q_written_by_the_threads():
    """FA3's overlap (section 16, asked for) keeps the thread-written Q: the rule copies Q by
    TMA only where the loops do not overlap their dots."""
    kernel, args, want, grid = _attention(128, 64, 64, 256)
    c = tc.compile_kernel(kernel, args, gpu_name="sm_90", options=CompileOptions(overlap_mma=True))
    (d,) = c.async_plan
    assert d.taken and d.overlap and d.kept_tma == 0, d.line()
    assert "__tilegen_kept_tma" not in c.ptx and "ld.global" in c.ptx


def test_a_marked_load_nothing_copies_is_an_error(monkeypatch):
    """A load marked for the producer's copy that no producer copies (here: the copies taken
    out) is a located codegen error, not a kernel that reads an uninitialized array."""
    from tilegen.cutile_launch import LaunchError
    from tilegen.runtime.codegen import async_kept

    monkeypatch.setattr(async_kept, "issue", lambda em, kept, gmaps: None)
    kernel, args, want, grid = _attention(128, 64, 64, 256)
    with pytest.raises(
        LaunchError, match=r"cutile_kernels_async\.py:\d+:\d+: error: .*no async loop"
    ):
        tc.compile_kernel(kernel, args, gpu_name="sm_90")


@needs_ptxas
@pytest.mark.parametrize("TM,D", [(128, 64), (64, 128)])
def test_sm120_q_by_tma_read_by_ldmatrix_through_the_swizzle(TM, D):
    """sm_120a: Q in one box a 128-byte column box, its rows in order; the mma.sync consumers
    read their A fragments from it by ``ldmatrix.x4`` at swizzled lane addresses (the warps
    stacked along M). No thread loads or writes Q; the result holds for partial tiles too."""
    kernel, args, want, grid = _attention(TM, 64, D, 256)
    c = tc.compile_kernel(kernel, args, gpu_name="sm_120")
    (d,) = c.async_plan
    assert d.taken and d.mma == "mma.sync" and d.kept_tma == 1, d.line()
    ptx = c.ptx
    assert "ld.global" not in ptx
    assert "st.shared.b16" not in ptx[: ptx.index("setmaxnreg.dec")]  # (no thread writes Q)
    copy = "cp.async.bulk.tensor.3d.shared::cta"
    assert _before_the_loop(ptx).count(copy) == D * 2 // 128
    _assembles(ptx, 120)
    np.testing.assert_allclose(_run(kernel, ptx, args, grid), want, rtol=2e-2, atol=2e-2)
    kernel, args, want, grid = _attention(TM, 64, D, 200, heads=2)
    ptx = tc.compile_kernel(kernel, args, gpu_name="sm_120").ptx
    np.testing.assert_allclose(_run(kernel, ptx, args, grid), want, rtol=2e-2, atol=2e-2)


@needs_ptxas
@pytest.mark.parametrize("target", ["sm_120", "sm_90a"])
def test_divided_rows_copy_their_own_q(tmp_path, target):
    """A 256-row attention runs its rows divided between a CTA pair (section 40). Each CTA's
    thread 0 copies its own 128 rows of Q (the load's indices carry the CTA's rank), also on
    sm_90a, whose pair multicasts K and V: there the copies issued by the producer (at its 32
    registers) had spilled 8 B. The fuzzer's check: strict ptxsim against NumPy, ptxas with no
    spills."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import fuzz_async as fa

    params = dict(e="f16", TM=256, TN=128 if target == "sm_120" else 64, D=128, CAUSAL=0)
    cfg = fa.Config(0, "attention", target, params, {}, dict(S=196, T=150, H=1))
    o = fa.check(cfg, str(tmp_path))
    assert o.status == "ok", o.detail
    assert "rows divided between a CTA pair, 128 each" in o.plan
    assert "1 loop-invariant A operand(s) copied by TMA once" in o.plan, o.plan
