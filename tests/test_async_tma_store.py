"""The TMA store epilogue of the async path (docs/pipelines.md section 8, "TMA store").

When a kernel's K loop takes the async path and what follows it stores one tile that depends on
the loop's result, through a TMA-describable memref, unmasked and weak
(``async_epilogue.tma_store_plan``), the store becomes: registers -> the idle stage ring (row-major,
generic proxy) -> ``fence.proxy.async.shared::cta`` -> the consumers' barrier -> one
``cp.async.bulk.tensor.2d.global.shared::cta`` (TMA clips the box at the tensor's bounds) ->
``commit_group`` / ``wait_group.read 0`` -> the map slot freed. Everything else keeps the kernel's
own bounded ``st.global`` epilogue. The simulator's strict mode catches each step left out.
"""

from __future__ import annotations

import numpy as np
import pytest

from paths import CORPUS_OUT, needs_shared
from tilegen.runtime import driver
from tilegen.runtime.options import CompileOptions
from tilegen.runtime.ptx.sim.cta import PtxSimError
from test_async_pipeline_e2e import needs_ptxas, run_strict, sass_counts

pytestmark = needs_shared(CORPUS_OUT)

BULK_STORE = "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"
STORE_LINE = "%2 = store_view_tko weak %for, %pview_25[%blockId_x, %blockId_y_20] token = %0 :"


def _text(**repl) -> str:
    text = (CORPUS_OUT / "matmul_f16.mlir").read_text()
    for old, new in repl.items():
        assert old in text
        text = text.replace(old, new)
    return text


def _compile(text: str, target: str):
    return driver.compile_source(text, CompileOptions(target=target), "m.mlir", until="ptx")


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("kernel", ["matmul_f16", "matmul_fp8", "matmul_int8", "matmul_tf32"])
def test_the_corpus_gemms_store_through_tma(kernel, target):
    c = driver.compile_source(
        CORPUS_OUT / f"{kernel}.tileirbc", CompileOptions(target=target), until="async"
    )
    (d,) = c.async_plan
    assert d.taken and d.tma_store and d.store_reason == ""
    assert d.line().endswith("; TMA store")


@needs_ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_tma_store_code_is_ptxas_clean_with_utmastg_and_matches(tmp_path, target):
    c = driver.compile_source(CORPUS_OUT / "matmul_f16.tileirbc", CompileOptions(target=target))
    ptx = c.ptx
    # the accumulator's 64 f32 columns go in two 128-byte swizzled boxes, one bulk copy each:
    # sm_90a's wgmma fragment, and sm_100a's M 64 TMEM rows read by 16x32bx2 loads (section
    # 36; before, the tile went through its layout into one unswizzled box)
    boxes = 2
    assert ptx.count(BULK_STORE) == boxes and "cp.async.bulk.wait_group.read 0" in ptx
    # the epilogue's only global writes are the bulk copies; the others are the map slot's
    # words: its free (tma.release_slot) and, where the claim took slots 0 and 1 at once, slot
    # 1 given back
    assert "st.global" not in ptx and ptx.count("st.relaxed.gpu.global.b64") == 1
    words = ptx.count("st.release.gpu.global.b64") + 1
    counts, _ = sass_counts(tmp_path, ptx, target)
    assert counts.get("UTMASTG", 0) == boxes, counts
    assert counts.get("STG", 0) == words, counts
    data = np.load(CORPUS_OUT / "matmul_f16.npz")
    args = [np.array(data[k]) for k in ("arg__A", "arg__B", "arg__C")]
    out = run_strict(ptx, args, [int(x) for x in data["grid"]])
    np.testing.assert_allclose(out[2], data["expected__C"], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_partial_tiles_are_clipped_by_tma(target):
    """100 x 72 output, 64 x 64 tiles: the bulk copy writes only inside the tensor (the
    simulator faults on a write outside the array)."""
    c = _compile(_text(), target)
    assert c.async_plan[0].tma_store
    M, N, K = 100, 72, 40
    rng = np.random.default_rng(4)
    a = rng.uniform(-1, 1, (M, K)).astype(np.float16)
    b = rng.uniform(-1, 1, (K, N)).astype(np.float16)
    out = run_strict(c.ptx, [a, b, np.zeros((M, N), np.float32)], (2, 2))
    np.testing.assert_allclose(out[2], a.astype(np.float32) @ b.astype(np.float32), atol=1e-4)


@pytest.mark.parametrize(
    "repl,reason",
    [
        (  # the output's row stride known only to be even: TMA cannot describe it
            {
                "assume div_by<4>, %arg13 ": "assume div_by<2>, %arg13 ",
                "assume div_by<4>, %assume_assume_16 ": "assume div_by<2>, %assume_assume_16 ",
            },
            "the stride of dim 0 is not known to be a multiple of 16 bytes",
        ),
        (
            {
                STORE_LINE: STORE_LINE[:-2]
                + " optimization_hints = <sm_90 = {allow_tma = false}, sm_100 = "
                "{allow_tma = false}> :"
            },
            "its allow_tma optimization hint is false for this target",
        ),
    ],
)
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_where_tma_cannot_store_the_epilogue_stays_st_global(repl, reason, target):
    c = _compile(_text(**repl), target)
    (d,) = c.async_plan
    assert d.taken and not d.tma_store and d.store_reason == reason
    assert reason in d.line()
    assert BULK_STORE not in c.ptx and "st.global" in c.ptx
    M, N, K = 70, 64, 96
    rng = np.random.default_rng(5)
    a = rng.uniform(-1, 1, (M, K)).astype(np.float16)
    b = rng.uniform(-1, 1, (K, N)).astype(np.float16)
    out = run_strict(c.ptx, [a, b, np.zeros((M, N), np.float32)], (2, 1))
    np.testing.assert_allclose(out[2], a.astype(np.float32) @ b.astype(np.float32), atol=1e-4)


# ----------------------------------------------------------------------------- planted bugs

FENCE = "\tfence.proxy.async.shared::cta;\n"


@pytest.fixture(scope="module")
def f16_sm90():
    c = driver.compile_source(CORPUS_OUT / "matmul_f16.tileirbc", CompileOptions(target="sm_90a"))
    data = np.load(CORPUS_OUT / "matmul_f16.npz")
    assert c.ptx.count(FENCE) == 1  # f16: the epilogue's is the kernel's only proxy fence
    return c.ptx, [np.array(data[k]) for k in ("arg__A", "arg__B", "arg__C")]


def _store_line(ptx: str) -> str:
    """The epilogue's first bulk store (one per 128-byte column box)."""
    return next(x for x in ptx.splitlines(keepends=True) if BULK_STORE in x)


def test_a_store_without_the_proxy_fence_is_caught(f16_sm90):
    ptx, args = f16_sm90
    with pytest.raises(PtxSimError, match="not followed by fence.proxy.async"):
        run_strict(ptx.replace(FENCE, "", 1), args, (2, 2))


def test_a_store_issued_before_the_fence_is_caught(f16_sm90):
    ptx, args = f16_sm90
    line = _store_line(ptx)
    bad = ptx.replace(FENCE, "", 1).replace(line, line + FENCE, 1)
    assert bad.count(FENCE) == 1 and bad.index(BULK_STORE) < bad.index(FENCE)
    with pytest.raises(PtxSimError, match="not followed by fence.proxy.async"):
        run_strict(bad, args, (2, 2))


def test_a_store_before_the_consumers_barrier_is_caught(f16_sm90):
    ptx, args = f16_sm90
    bad = ptx.replace(FENCE + "\tbar.sync 1, 128;\n", FENCE, 1)
    assert bad != ptx
    with pytest.raises(PtxSimError, match="with no barrier in between"):
        run_strict(bad, args, (2, 2))


def test_exiting_before_the_bulk_group_completes_is_caught(f16_sm90):
    ptx, args = f16_sm90
    bad = ptx.replace("\tcp.async.bulk.wait_group.read 0;\n", "", 1)
    assert bad != ptx
    with pytest.raises(PtxSimError, match="missing cp.async.bulk.wait_group"):
        run_strict(bad, args, (2, 2))


# ------------------------------------------------------------- sm_90: fragments straight to TMA


@pytest.mark.parametrize("epilogue", [False, True])
def test_sm90_wgmma_fragments_reach_the_tma_store_without_an_exchange(epilogue):
    """A uniform initial accumulator (a splat: 0 or 1.0) is moved into the wgmma fragment, and
    the fragment, through elementwise ops with splat operands (x 2, rounded through f16), is
    written into the stage ring by fragment position: no scratch buffer, no shared-memory
    exchange into the layout stage's layout (async_forms.fragment_chain)."""
    from test_async_pipeline_e2e import EPILOGUE

    c = _compile(_text(**(EPILOGUE if epilogue else {})), "sm_90a")
    assert c.async_plan[0].tma_store
    ptx = c.ptx
    assert "__tilegen_smem[" not in ptx and "ld.shared.f32" not in ptx
    # 64 x 64 f32 over 128 consumer threads: 32 a thread, column pairs in v2 stores
    assert ptx.count("st.shared.v2.f32") == 16 and "st.shared.f32" not in ptx
    M, N, K = 100, 72, 40
    rng = np.random.default_rng(6)
    a = rng.uniform(-1, 1, (M, K)).astype(np.float16)
    b = rng.uniform(-1, 1, (K, N)).astype(np.float16)
    out = run_strict(ptx, [a, b, np.zeros((M, N), np.float32)], (2, 2))
    want = a.astype(np.float32) @ b.astype(np.float32)
    if epilogue:
        want = (2 * (want + 1.0)).astype(np.float16).astype(np.float32)
    np.testing.assert_allclose(out[2], want, rtol=2e-3, atol=2e-3)


def test_a_loop_result_read_twice_keeps_the_exchange():
    """The loop's result squared (read twice, so not a single-use chain): the fragment goes
    through the scratch into the layout stage's layout as before - the scratch now in the idle
    stage ring (no ``__tilegen_smem`` of its own), before the TMA store stages the output in
    that ring too - and still matches in the strict simulator."""
    repl = {
        "%2 = store_view_tko weak %for,": (
            "%e1 = mulf %for, %for : tile<64x64xf32>\n  %2 = store_view_tko weak %e1,"
        )
    }
    c = _compile(_text(**repl), "sm_90a")
    assert c.async_plan[0].tma_store and "%tgring" in c.ptx and "__tilegen_smem[" not in c.ptx
    M, N, K = 64, 64, 32
    rng = np.random.default_rng(7)
    a = rng.uniform(-1, 1, (M, K)).astype(np.float16)
    b = rng.uniform(-1, 1, (K, N)).astype(np.float16)
    out = run_strict(c.ptx, [a, b, np.zeros((M, N), np.float32)], (1, 1))
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(out[2], want * want, rtol=1e-3, atol=1e-4)


# ------------------------------------------------- the store's map before the loop (section 47)


def _consumers(ptx: str) -> int:
    """Where the consumers' code starts (after the prologue and the producer's)."""
    import re

    return re.search(r"^\$L__async_consumer_\d+:", ptx, re.M).start()


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a", "sm_120a"])
def test_the_store_map_is_built_published_and_acquired_before_the_loop(target):
    """The prologue builds the output's map with the operands' (while the slot's claim is on its
    way), warp 0 publishes all three, and thread 0 acquires and prefetches the store's; the
    epilogue only copies the tile out and waits for the copies to read it."""
    ptx = _compile(_text(), target).ptx
    start = _consumers(ptx)
    builds = [i for i in range(len(ptx)) if ptx.startswith("tensormap.replace.tile.global_a", i)]
    assert len(builds) == 3 and builds[-1] < start
    assert ptx.count("tensormap.cp_fenceproxy") == 3 and ptx.rindex("cp_fenceproxy") < start
    acquires = ptx.count("fence.proxy.tensormap::generic.acquire.gpu")
    assert acquires == 3 and ptx.rindex("fence.proxy.tensormap::generic.acquire") < start
    assert ptx.index("atom.acquire.gpu.global.cas") < builds[0]  # the claim's first exchange first
    assert "cp.async.bulk.wait_group.read 0;" in ptx and "cp.async.bulk.wait_group 0;" not in ptx


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a", "sm_120a"])
def test_a_store_map_the_prologue_did_not_foresee_is_built_in_the_epilogue(target, monkeypatch):
    """Where the epilogue's box differs from the prologue's guess, the epilogue builds, publishes
    and acquires its own map over the guessed one, and the kernel still matches NumPy."""
    from tilegen.runtime.codegen import async_store

    monkeypatch.setattr(async_store, "store_guess", lambda *a: ((64, 8), 128))
    c = _compile(_text(), target)
    ptx = c.ptx
    start = _consumers(ptx)
    late = ptx.rindex("tensormap.replace.tile.global_address")
    assert ptx.count("tensormap.replace.tile.global_address") == 4 and late > start
    assert ptx.rindex("fence.proxy.tensormap::generic.acquire") > late
    M, N, K = 100, 72, 40
    rng = np.random.default_rng(5)
    a = rng.uniform(-1, 1, (M, K)).astype(np.float16)
    b = rng.uniform(-1, 1, (K, N)).astype(np.float16)
    out = run_strict(ptx, [a, b, np.zeros((M, N), np.float32)], (2, 2))
    np.testing.assert_allclose(out[2], a.astype(np.float32) @ b.astype(np.float32), atol=1e-4)
