"""The async path's general form (docs/pipelines.md section 13): a K loop with several dots -
flash attention - on sm_90a. A producer warp group copies each iteration's dot B operands (K^T
and V tiles, 3-d boxes) by TMA into a stage ring; the consumer warps run the loop body as
today's path emits it (softmax, reductions, P to wgmma in registers, Q kept in shared memory),
each dot reading its B from the stage through swizzled descriptors, waiting for the stage's
full barrier and releasing it after the body. ptxas-clean, in SASS, and within tolerance of
NumPy in strict ptxsim; what the rule refuses says why."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from paths import CORPUS_OUT, needs_shared
from tilegen.runtime import driver
from tilegen.runtime.options import CompileOptions
from tilegen.runtime.ptx.launch import run_ptx
from tilegen.runtime.ptx.sim.cta import PtxSimError
from tilegen.runtime.ptxas import find_ptxas

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_async_pipeline_e2e import sass_counts  # noqa: E402

PTXAS = find_ptxas()
needs_ptxas = pytest.mark.skipif(PTXAS is None, reason="ptxas not found")


@pytest.fixture(scope="module")
def attention(tmp_path_factory):
    pytest.importorskip(
        "cuda.tile", reason="cuda-tile is not installed (pip install -e '.[cutile]')"
    )
    import cutile_kernels_async as cka

    out = tmp_path_factory.mktemp("async_general")
    return Path(cka.export_bytecode(str(out), ["attention_causal_fwd"])["attention_causal_fwd"])


def _attention_problem(heads: int, seq: int, d: int = 64, seed: int = 7):
    import cutile_kernels_async as cka

    q, kt, v, scale, o = cka.causal_attention_inputs(heads, seq, d, seed)
    return [q, kt, v, np.zeros_like(q), scale], o, (-(-seq // 128), heads, 1)


@needs_ptxas
def test_causal_attention_takes_the_general_async_path(tmp_path, attention):
    # (the overlap is off by default since section 46; asked for here, as section 16 built it)
    c = driver.compile_source(attention, CompileOptions(target="sm_90a", overlap_mma=True))
    (d,) = c.async_plan
    assert d.taken, d.line()
    assert d.elements == "f16 x f16 -> f32 ; f16 x f16 -> f32" and d.tile == (128, 64, 64)
    # two consumer warp groups (the layout stage's 8 warps) and a producer warp group; a third
    # stage for the overlap (section 16: a stage is held until its P V is done)
    assert (d.consumer_warps, d.producer_warps, d.stages) == (8, 4, 3) and d.overlap
    ptx = c.ptx
    assert ".reqntid 384, 1, 1" in ptx and "setmaxnreg.dec.sync.aligned.u32 32" in ptx
    # K^T and V: one 3-d box each (1 x 64 x 64 f16, 128-byte rows, swizzled), nothing by
    # cp.async any more; both dots read B through swizzled (128B) descriptors
    assert ptx.count("cp.async.bulk.tensor.3d.shared::cluster") == 2
    assert "cp.async.cg" not in ptx and "cp.async.ca" not in ptx
    counts, _ = sass_counts(tmp_path, ptx, "sm_90a")  # asserts 0 spills
    for op, least in (("UTMALDG", 2), ("SYNCS", 4), ("HGMMA", 2), ("USETMAXREG", 1)):
        assert counts.get(op, 0) >= least, (op, counts)
    assert "LDGSTS" not in counts
    for heads, seq in ((1, 256), (2, 384), (2, 200)):  # 200: partial Q, K and V tiles
        args, ref, grid = _attention_problem(heads, seq)
        out = run_ptx(ptx, args, grid, strict_async=True)
        np.testing.assert_allclose(out[3].astype(np.float64), ref, rtol=2e-2, atol=2e-2)


@needs_ptxas
def test_causal_attention_on_sm100_takes_the_general_form_with_tcgen05(tmp_path, attention):
    """sm_100a (docs/pipelines.md section 15): the same producer warp group and TMA ring; the
    consumers' two dots are tcgen05.mma into tensor memory, Q kept in shared memory, P written
    there per iteration, B read from the stage (K^T and V N-major, MN-major descriptors), and
    each row of S and O read back into one thread (the softmax's reductions in-thread)."""
    c = driver.compile_source(attention, CompileOptions(target="sm_100a"))
    (d,) = c.async_plan
    assert d.taken and d.mma == "tcgen05", d.line()
    assert (d.consumer_warps, d.producer_warps, d.stages) == (8, 4, 2)
    ptx = c.ptx
    # K and V each iteration; Q once, in one box, its rows in order (section 50)
    assert ptx.count("cp.async.bulk.tensor.3d.shared::cluster") == 3
    assert "ld.global" not in ptx
    assert "mma.sync" not in ptx and "wgmma" not in ptx
    # K 64 in steps of 16, two dots; one TMEM allocation for both (64 columns)
    assert len(re.findall(r"tcgen05\.mma\.cta_group::1\.kind::f16 ", ptx)) == 8
    assert ptx.count("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32") == 1
    assert "tcgen05.ld.sync.aligned.32x32b.x32.b32" in ptx
    counts, _ = sass_counts(tmp_path, ptx, "sm_100a")  # asserts 0 spills
    for op, least in (("UTMALDG", 2), ("UTCHMMA", 8), ("LDTM", 2), ("USETMAXREG", 1)):
        assert counts.get(op, 0) >= least, (op, counts)
    assert "HMMA" not in counts and "LDGSTS" not in counts
    for heads, seq in ((1, 256), (2, 200)):
        args, ref, grid = _attention_problem(heads, seq)
        out = run_ptx(ptx, args, grid, strict_async=True)
        np.testing.assert_allclose(out[3].astype(np.float64), ref, rtol=2e-2, atol=2e-2)


def test_causal_attention_on_sm100_todays_path_runs_tcgen05_dots(attention):
    """Without warp specialization the body's dots are still tcgen05 (Q, K^T and V through
    registers into shared memory), and match in strict ptxsim."""
    opts = CompileOptions(target="sm_100a", warp_specialize=False)
    c = driver.compile_source(attention, opts)
    (d,) = c.async_plan
    assert not d.taken
    assert "tcgen05.mma" in c.ptx and "mma.sync" not in c.ptx
    args, ref, grid = _attention_problem(1, 256)
    out = run_ptx(c.ptx, args, grid, strict_async=True)
    np.testing.assert_allclose(out[3].astype(np.float64), ref, rtol=2e-2, atol=2e-2)


@needs_ptxas
@needs_shared(CORPUS_OUT)
@pytest.mark.parametrize(
    "name,target", [("flash_attention", "sm_90a"), ("flash_attention", "sm_100a")]
)
def test_corpus_flash_attention_with_a_transposed_b(tmp_path, name, target):
    """The corpus's flash attention loads K as 64 x 64 and transposes it for QK^T: the stage
    holds it as loaded, read as a K-major B (no transpose bit). On sm_100a its 64-row dots
    run on tcgen05 with M 64 (rows in lanes 0-15 of each warp's quarter, read 16x32bx2)."""
    asked = CompileOptions(target=target, overlap_mma=True)
    c = driver.compile_source(CORPUS_OUT / f"{name}.tileirbc", asked)
    (d,) = c.async_plan
    # no overlap even asked for: two accumulators and two P tiles do not fit its 128
    # registers (occupancy 2)
    assert d.taken and (d.consumer_warps, d.stages) == (4, 2) and not d.overlap, d.line()
    # K and V a box each, and Q, copied once by the producer (section 50): on sm_90a in eight
    # 8-row boxes (wgmma_dot's row order), on sm_100a in one; no thread loads anything
    boxes = 2 + (8 if target == "sm_90a" else 1)
    assert c.ptx.count("cp.async.bulk.tensor.3d.shared::cluster") == boxes
    assert "ld.global" not in c.ptx
    counts, _ = sass_counts(tmp_path, c.ptx, target)  # ptxas accepts it, 0 spills
    mma = "HGMMA" if target == "sm_90a" else "UTCHMMA"
    assert counts.get("UTMALDG", 0) >= 2 and counts.get(mma, 0) >= 2, counts
    if target == "sm_100a":
        assert "tcgen05.ld.sync.aligned.16x32bx2" in c.ptx and "mma.sync" not in c.ptx
    data = np.load(CORPUS_OUT / f"{name}.npz")
    keys = [k for k in data.files if k.startswith("arg__")]
    out = run_ptx(
        c.ptx,
        [np.array(data[k]) for k in keys],
        tuple(int(x) for x in data["grid"]),
        strict_async=True,
    )
    for i, k in enumerate(keys):
        if "expected__" + k[5:] in data.files:
            np.testing.assert_allclose(out[i], data["expected__" + k[5:]], rtol=1e-3, atol=1e-3)


@needs_ptxas
def test_overlap_issues_pv_beside_the_next_qk(tmp_path, attention):
    """Section 16: iteration j issues its QK^T, then the previous iteration's P V, waits for
    the QK^T alone and runs the softmax while P V runs; strict ptxsim (a wgmma's registers
    land at the wait that retires it) matches NumPy for one, two and many iterations."""
    c = driver.compile_source(attention, CompileOptions(target="sm_90a", overlap_mma=True))
    ptx = c.ptx
    start = re.search(r"^\$L__async_body_\d+:", ptx, re.M).end()
    loop = ptx[start : re.search(r"^\$L__async_body_end_\d+:", ptx, re.M).start()]
    assert loop.count("wgmma.wait_group.sync.aligned 1") == 1
    i_qk = loop.index("wgmma.mma_async")
    i_pv = loop.index("wgmma.mma_async", loop.index("@!%p", i_qk))
    assert i_qk < i_pv < loop.index("wgmma.wait_group.sync.aligned 1") < loop.index("ex2.approx")
    counts, log = sass_counts(tmp_path, ptx, "sm_90a")  # 0 spills
    assert "serialized" not in log, log
    assert counts.get("HGMMA", 0) == 12  # QK^T and P V in the loop, P V once after it
    for heads, seq in ((1, 64), (1, 128), (2, 1000)):
        args, ref, grid = _attention_problem(heads, seq, seed=seq)
        out = run_ptx(ptx, args, grid, strict_async=True)
        np.testing.assert_allclose(out[3].astype(np.float64), ref, rtol=2e-2, atol=2e-2)
    # the ping-pong of the two warp groups: each waits for its turn before issuing (named
    # barriers 2 and 3) and hands it over after; group 1's first arrival starts group 0
    assert loop.index("bar.sync 2, 256") < i_qk < i_pv < loop.index("bar.arrive 3, 256")
    first = re.search(r"\t@!%p\d+ bar.arrive 2, 256;\n", ptx)
    assert first and first.start() < start
    args, ref, grid = _attention_problem(1, 256)
    with pytest.raises(PtxSimError, match=r"deadlock: barrier \[2, 3\] never fills"):
        run_ptx(ptx[: first.start()] + ptx[first.end() :], args, grid, strict_async=True)


@needs_ptxas
def test_causal_mask_skipped_where_it_is_all_true(tmp_path, attention):
    """Section 17: the softmax is emitted twice behind a per-iteration predicate - every
    element of the causal mask ``rows >= cols`` holds (min row >= max column, bounds in 64
    bits that must fit i32) - once as written, once without the ``select``. Forcing the fast
    copy everywhere breaks the diagonal blocks, which the strict run must notice."""
    c = driver.compile_source(attention, CompileOptions(target="sm_90a", overlap_mma=True))
    ptx = c.ptx
    # the copy without the mask falls through; the masked one is branched to
    branch = re.search(r"\t@!(%p\d+) bra (\$L__mask_kept_\d+);\n", ptx)
    assert branch, "no mask-free copy"
    start = ptx.index(branch.group(2) + ":")
    end = start + re.search(r"^\$L__mask_join_\d+:", ptx[start:], re.M).start()
    fast, slow = ptx[branch.end() : start], ptx[start:end]
    assert "ex2.approx" in fast and "ex2.approx" in slow  # both copies hold the softmax
    assert slow.count("selp") >= 32 and "selp" not in fast
    # the registers the two copies share are the fast copy's: the moves are the masked one's
    moves = lambda t: sum(line.startswith("\tmov") for line in t.splitlines())  # noqa: E731
    assert moves(fast) < 8 <= moves(slow)
    counts, _ = sass_counts(tmp_path, ptx, "sm_90a")  # 0 spills with both copies
    assert counts.get("HGMMA", 0) == 12
    args, ref, grid = _attention_problem(2, 700, seed=3)
    out = run_ptx(ptx, args, grid, strict_async=True)
    np.testing.assert_allclose(out[3].astype(np.float64), ref, rtol=2e-2, atol=2e-2)
    forced = ptx.replace(branch.group(0), "")  # never the masked copy
    out = run_ptx(forced, args, grid, strict_async=True)
    assert np.abs(out[3].astype(np.float64) - ref).max() > 0.05


@pytest.mark.parametrize(
    "target,options",
    [
        ("sm_100a", {}),
        ("sm_90a", {"overlap_mma": False}),
        ("sm_90a", {"warp_specialize": False}),  # today's path: control.loop_body
        ("sm_120", {}),  # today's path with mma.sync, 8 warps
    ],
    ids=str,
)
def test_causal_mask_skipped_without_the_overlap(attention, target, options):
    """The general form without the overlap (sm_100a's tcgen05 dots, ``overlap_mma=False``)
    and today's path (cp.async, mma.sync on sm_80) unswitch the body between the dots the
    same way (the loads after the mask stay out of the copies)."""
    c = driver.compile_source(attention, CompileOptions(target=target, **options))
    assert not c.async_plan[0].overlap
    branch = re.search(r"\t@!(%p\d+) bra (\$L__mask_kept_\d+);\n", c.ptx)
    assert branch, "no mask-free copy"
    for heads, seq in ((1, 128), (2, 700)):
        args, ref, grid = _attention_problem(heads, seq, seed=seq)
        out = run_ptx(c.ptx, args, grid, strict_async=True)
        np.testing.assert_allclose(out[3].astype(np.float64), ref, rtol=2e-2, atol=2e-2)
    forced = c.ptx.replace(branch.group(0), "")  # never the masked copy
    out = run_ptx(forced, args, grid, strict_async=True)
    assert np.abs(out[3].astype(np.float64) - ref).max() > 0.05


def test_mask_unswitching_needs_the_registers(attention):
    """On sm_80 the layout stage gives attention 4 warps: twice its dots' 2 x 64 registers
    per thread and the slack exceed 255 (unswitched, ptxas spilled 140 bytes), so the loop
    keeps one masked body."""
    c = driver.compile_source(attention, CompileOptions(target="sm_80"))
    assert "mask_kept" not in c.ptx and "selp" in c.ptx
    args, ref, grid = _attention_problem(1, 256)
    out = run_ptx(c.ptx, args, grid)
    np.testing.assert_allclose(out[3].astype(np.float64), ref, rtol=2e-2, atol=2e-2)


def test_overlap_needs_the_registers(attention):
    """With 4 consumer warps each thread holds twice the rows: two accumulators and two P
    tiles would not fit 255 registers (ptxas spilled 436 bytes), so the overlap is off."""
    asked = CompileOptions(target="sm_90a", num_warps=4, overlap_mma=True)
    c = driver.compile_source(attention, asked, until="async")
    (d,) = c.async_plan
    assert d.taken and d.consumer_warps == 4 and not d.overlap and d.stages == 2


def test_overlap_off_keeps_one_wait_per_dot(attention):
    c = driver.compile_source(attention, CompileOptions(target="sm_90a", overlap_mma=False))
    (d,) = c.async_plan
    assert d.taken and not d.overlap and d.stages == 2
    assert "wgmma.wait_group.sync.aligned 1" not in c.ptx
    from tilegen.runtime.asm import print_module

    laid = driver.compile_source(
        attention, CompileOptions(target="sm_90a", overlap_mma=False), until="async"
    )
    assert "nv_tileas.async_overlap" not in print_module(laid.module)
    laid = driver.compile_source(attention, CompileOptions(target="sm_90a"), until="async")
    assert "nv_tileas.async_overlap" not in print_module(laid.module)  # (the default: off)
    asked = CompileOptions(target="sm_90a", overlap_mma=True)
    laid = driver.compile_source(attention, asked, until="async")
    assert "nv_tileas.async_overlap" in print_module(laid.module)


@pytest.mark.parametrize(
    "target,options,reason",
    [
        (
            "sm_100a",
            {"use_tcgen05": False},
            "the layout stage did not lay every dot of the loop out for tcgen05",
        ),
        ("sm_90a", {"warp_specialize": False}, "warp_specialize is off"),
        ("sm_90a", {"use_wgmma": False}, "use_wgmma is off"),
    ],
)
def test_what_keeps_todays_path(attention, target, options, reason):
    c = driver.compile_source(attention, CompileOptions(target=target, **options), until="async")
    (d,) = c.async_plan
    assert not d.taken and reason in d.reason, d.reason


def test_the_async_stage_decides_alone(attention, tmp_path):
    """Async-path attributes written into the input IR by hand are dropped: the `async` stage's
    rule decides (here sm_100a without tcgen05, where attention keeps today's path)."""
    from tilegen.runtime.asm import print_module

    opts = CompileOptions(target="sm_100a", use_tcgen05=False)
    laid = driver.compile_source(attention, opts, until="layouts")
    text = print_module(laid.module)
    old = "} {nv_tileas.num_stages = 4 : i32}"
    assert old in text
    forged = text.replace(
        old,
        "} {nv_tileas.async_general, nv_tileas.async_stages = 2 : i32, "
        "nv_tileas.num_stages = 4 : i32}",
    )
    c = driver.compile_source(forged, opts, "forged.mlir", until="ptx")
    (d,) = c.async_plan
    assert not d.taken
    assert "cp.async.bulk.tensor" not in c.ptx and "mma.sync" in c.ptx
