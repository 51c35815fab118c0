"""Tensor maps shared by the CTAs of a launch (docs/pipelines.md section 57).

An async kernel builds its TMA maps on the device into a per-SM slot (``tma.claim_slot``). A
slot's word names the launch (``%gridid``) whose CTA built the maps inside; a CTA that claims a
free slot naming its own launch uses the maps as they are, and only the first CTA of a launch
on each slot builds and publishes them. That holds only where every map is the same in every
tile block (``ir_utils.launch_uniform``); the simulator keeps one context's globals from one
launch to the next (``launch.Context``), so a second launch with other arrays must rebuild.
"""

from __future__ import annotations

import numpy as np
import pytest

from paths import CORPUS_OUT, needs_shared
from tilegen.runtime import driver
from tilegen.runtime.options import CompileOptions
from tilegen.runtime.ptx.launch import Context, run_ptx
from tilegen.runtime.ptx.sim import tensormap

pytestmark = needs_shared(CORPUS_OUT)

#: the corpus GEMM's maps: A, B and the TMA store's (built in the prologue)
MAPS = 3


def _ptx(target: str, text: str | None = None, **fields) -> str:
    options = CompileOptions(target=target, **fields)
    if text is None:
        return driver.compile_source(CORPUS_OUT / "matmul_f16.tileirbc", options).ptx
    return driver.compile_source(text, options, "m.mlir").ptx


@pytest.fixture
def publications(monkeypatch):
    """How many ``tensormap.cp_fenceproxy`` (a warp's publication of one map) ran."""
    count = [0]
    copy = tensormap.copy_to_global

    def counting(st, ins, mask):
        count[0] += 1
        return copy(st, ins, mask)

    monkeypatch.setattr(tensormap, "copy_to_global", counting)
    return count


def _problem(m: int, n: int, k: int, seed: int):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    want = a.astype(np.float32) @ b.astype(np.float32)
    return [a, b, np.zeros((m, n), np.float32)], want, ((m + 63) // 64, (n + 63) // 64, 1)


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_the_ctas_of_a_launch_share_the_maps_one_cta_built(target, publications):
    ptx = _ptx(target)
    assert "%gridid" in ptx and "fence.acq_rel.gpu" in ptx
    args, want, grid = _problem(128, 128, 96, 1)
    ctx = Context()
    out = run_ptx(ptx, args, grid, strict_async=True, context=ctx)[2]
    np.testing.assert_allclose(out, want, rtol=1e-3, atol=1e-3)
    # four CTAs one after the other on "SM 0" (strict mode): the first built the three maps
    assert publications[0] == MAPS
    off = run_ptx(_ptx(target, share_maps=False), args, grid, strict_async=True)[2]
    np.testing.assert_allclose(off, want, rtol=1e-3, atol=1e-3)
    assert publications[0] == MAPS + 4 * MAPS


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_a_later_launch_with_other_arrays_builds_its_own(target, publications):
    """Two launches in one context (the slot words and maps outlive the first): the second,
    with other arrays and sizes, finds words naming the first launch and rebuilds. Planted: the
    second launch given the first's %gridid uses the first's maps and computes with its arrays."""
    ptx = _ptx(target)
    first, want1, grid1 = _problem(128, 128, 96, 2)
    second, want2, grid2 = _problem(192, 64, 160, 3)
    ctx = Context()
    out = run_ptx(ptx, first, grid1, strict_async=True, context=ctx)[2]
    np.testing.assert_allclose(out, want1, rtol=1e-3, atol=1e-3)
    out = run_ptx(ptx, second, grid2, strict_async=True, context=ctx)[2]
    np.testing.assert_allclose(out, want2, rtol=1e-3, atol=1e-3)
    assert publications[0] == 2 * MAPS

    ctx = Context()
    run_ptx(ptx, first, grid1, strict_async=True, context=ctx, gridid=7)
    stale = run_ptx(ptx, second, grid2, strict_async=True, context=ctx, gridid=7)[2]
    assert not np.allclose(stale, want2, rtol=1e-3, atol=1e-3)


def test_maps_the_block_id_reaches_are_built_by_every_cta(publications):
    """A's row count plus the block's z index (0 here, so the same kernel): the map's fields
    may differ between tile blocks, so no CTA takes another's."""
    text = (CORPUS_OUT / "matmul_f16.mlir").read_text()
    view = "  %tview = make_tensor_view %assume, shape = [%assume_7, %assume_8]"
    assert view in text
    text = text.replace(
        view,
        "  %bx, %by, %bz = get_tile_block_id : tile<i32>\n"
        "  %rows = addi %assume_7, %bz : tile<i32>\n"
        "  %tview = make_tensor_view %assume, shape = [%rows, %assume_8]",
    )
    ptx = _ptx("sm_90a", text)
    assert "cp.async.bulk.tensor" in ptx and "%gridid" not in ptx
    args, want, grid = _problem(128, 128, 96, 4)
    out = run_ptx(ptx, args, grid, strict_async=True)[2]
    np.testing.assert_allclose(out, want, rtol=1e-3, atol=1e-3)
    assert publications[0] == 4 * MAPS


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_a_copy_through_a_map_its_thread_never_acquired_is_caught(target):
    """The strict mode checks that a copy's thread acquired a global map
    (``fence.proxy.tensormap::generic.acquire``) since its bytes were written: planted, the
    acquires removed, on a CTA that published the maps and on those that found them."""
    from tilegen.runtime.ptx.sim.cta import PtxSimError

    ptx = _ptx(target)
    line = "fence.proxy.tensormap::generic.acquire"
    assert ptx.count(line) == MAPS
    bad = "\n".join(ln for ln in ptx.splitlines() if line not in ln) + "\n"
    args, want, grid = _problem(64, 64, 96, 5)
    with pytest.raises(PtxSimError, match="has not acquired"):
        run_ptx(bad, args, grid, strict_async=True)
    out = run_ptx(bad, args, grid)[2]  # (outside the strict mode a copy reads what is there)
    np.testing.assert_allclose(out, want, rtol=1e-3, atol=1e-3)
