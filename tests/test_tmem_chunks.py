"""sm_100's accumulator read from tensor memory by column chunks at the TMA store
(runtime/codegen/tmem_chunks.py, docs/pipelines.md section 32).

A thread whose row of the tcgen05 accumulator holds more than 128 values (a 256 x 256 tile on
one CTA: 256; 128 x 256 on 4 warps) reads it 32 columns at a time at the store, runs each chunk
through the epilogue and writes it into the idle stage ring. A tile larger than the ring (f32 or
i32 out at 256 x 256: 256 KB against 192 KB) goes out box by box through the ring's slots.
Before, these kernels ran on today's path (cp.async by every warp), and spilled where the
epilogue had work to do.

Checked in the strict simulator against NumPy: cuTile kernels (bench/fuzz_async.py), and text
kernels with a trip count argument for the loop that does not run (the result is the initial
value, -0.0 included, bit for bit) and a non-zero initial value. A streamed store without its
``cp.async.bulk.wait_group.read`` overwrites a slot the previous copy may still be reading: the
strict simulator says so.

Also C, the initial value: written into TMEM before the loop on sm_100 (section 33), and loaded
in the MMA accumulator's layout elsewhere (section 34).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from tilegen.runtime.ptxas import find_ptxas  # noqa: E402

pytestmark = pytest.mark.skipif(
    not Path(find_ptxas() or "/nonexistent").exists(), reason="ptxas is not installed"
)


# ---------------------------------------------------------------- cuTile kernels
@pytest.mark.parametrize(
    "ab,out,epi,tk,streamed",
    [
        ("bf16", "bf16", 3, 64, False),  # ReLU; the 128 KB tile in the 192 KB ring
        ("e4m3", "f16", 0, 128, False),
        ("f16", "f32", 1, 64, True),  # x alpha; 256 KB through 6 box slots
        ("i8", "i32", 0, 128, True),
    ],
)
def test_256x256_on_one_cta_reads_tmem_by_chunks(ab, out, epi, tk, streamed, tmp_path):
    pytest.importorskip(
        "cuda.tile", reason="cuda-tile is not installed (pip install -e '.[cutile]')"
    )
    import fuzz_async as fa

    params = dict(ab=ab, out=out, TM=256, TN=256, TK=tk, BT=0, INIT=0, EPI=epi)
    cfg = fa.Config(0, "gemm", "sm_100a", params, {}, dict(M=300, N=448, K=3 * tk))
    o = fa.check(cfg, str(tmp_path))
    assert o.status == "ok", f"{o.status}: {o.detail}\n{o.plan}"  # (0 spills included)
    assert o.path == "async" and "8 consumer" in o.plan and "TMA store" in o.plan, o.plan
    # both accumulators' 256 columns a thread, 32 at a time; no scratch copy of the tile
    assert o.ptx.count("tcgen05.ld.sync.aligned.32x32b.x32.b32") == 8
    assert "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32" in o.ptx
    esz = {"bf16": 2, "f16": 2, "f32": 4, "i32": 4}[out]
    assert o.ptx.count("cp.async.bulk.tensor.2d.global.shared::cta") == 256 * esz // 128
    assert ("cp.async.bulk.wait_group.read 5" in o.ptx) == streamed


# ---------------------------------------------------------------- text kernels
def _source(et: str, ct: str, m: int, init, n: int = 256, k: int = 64) -> str:
    """tests/test_codegen_pipeline.py's K loop (trip count ``%nk``) with a uniform initial
    value ``init`` (None: C, as loaded) and an output TMA can store (aligned base and row
    pitch)."""
    import test_codegen_pipeline as tp

    text = tp.SRC
    line = next(ln for ln in text.splitlines() if "%w, %t3 = load_view_tko" in ln)
    if init is not None:
        text = text.replace(line, f"  %w = constant <{{ct}}: {init}> : tile<{{m}}x{{n}}x{{ct}}>")
    text = text.replace(
        "  %tc = make_tensor_view %c,",
        "  %cs = assume div_by<16>, %c3 : tile<i32>\n"
        "  %cp = assume div_by<16>, %c : tile<ptr<{ct}>>\n"
        "  %tc = make_tensor_view %cp,",
    ).replace("strides = [%c3, 1]", "strides = [%cs, 1]")
    return tp._source(et, ct, m, n, k, text=text)


def _ptx(et: str, ct: str, m: int, init, warps=None, n: int = 256) -> str:
    from tilegen.runtime.asm import parse_module
    from tilegen.runtime.options import CompileOptions
    from tilegen.runtime.ptxsim import compile_to_ptx

    module = parse_module(_source(et, ct, m, init, n), "mm.mlir")
    options = CompileOptions(use_tma=True, num_warps=warps)
    return assembled(compile_to_ptx(module, "sm_100a", options=options), 100)


def assembled(ptx: str, sm: int) -> str:
    """``ptx`` after ptxas accepted it for ``sm`` (every simulated PTX is legal PTX too)."""
    from tilegen.runtime.ptxas import assemble

    cubin, _ = assemble(ptx, sm)
    assert cubin[:4] == b"\x7fELF"
    return ptx


def _run(ptx: str, et: str, ct: str, m: int, nk: int, seed: int = 7):
    import test_codegen_pipeline as tp

    a, b, c = tp._operands(et, ct, m, 256, max(64 * nk, 16), seed)
    out = tp._launch(ptx, a, b, c, nk, 64 * nk, strict_async=True)
    prod = a[:, : 64 * nk].astype(np.float64) @ b[: 64 * nk].astype(np.float64)
    return out, prod


@pytest.mark.parametrize(
    "et,ct,m,warps,init",
    [
        ("f16", "f32", 256, None, "-0.0"),  # streamed (256 KB), 8 warps
        ("f16", "f32", 256, None, "1.5"),
        ("f16", "f32", 128, 4, "-0.0"),  # 128 x 256 on 4 warps: a row of 256, in the ring
        ("i8", "i32", 256, None, "3"),
    ],
)
def test_chunks_give_the_initial_value_when_the_loop_does_not_run(et, ct, m, warps, init):
    ptx = _ptx(et, ct, m, init, warps)
    assert ptx.count("tcgen05.ld.sync.aligned.32x32b.x32.b32") == 8
    # a loop of no iteration leaves TMEM unwritten: the columns get the additive identity
    assert "tcgen05.st.sync.aligned.32x32b.x32.b32" in ptx
    for nk in (0, 2):
        out, prod = _run(ptx, et, ct, m, nk)
        want = prod + float(init)
        np.testing.assert_array_equal(out.astype(np.float64), want)
        if nk == 0 and init == "-0.0":
            assert np.signbit(out).all()  # -0.0 itself, not +0.0


@pytest.mark.parametrize(
    "et,ct,m,n,warps",
    [
        ("f16", "f32", 128, 128, None),  # a TMEM row of 128 a thread
        ("f16", "f32", 64, 128, None),  # half a row a thread (16x32bx2)
        ("f16", "f32", 256, 128, None),  # two accumulators, 8 warps
        ("f16", "f32", 256, 256, None),  # by column chunks
        ("i8", "i32", 128, 128, None),
    ],
)
def test_a_zero_initial_value_is_read_back_as_it_is(et, ct, m, n, warps):
    # +0, as a GEMM from zero starts: the first MMA overwrites D and the rows read back are the
    # result; no register holds 128 zeros through the loop and nothing is added after it.
    # A loop of no iteration writes +0 into TMEM first (not the -0.0 identity of above).
    import test_codegen_pipeline as tp

    init = "0" if ct == "i32" else "0.0"
    ptx = _ptx(et, ct, m, init, warps, n)
    tail = ptx.split("tcgen05.mma")[-1]
    add = "add.s32" if ct == "i32" else "add.rn.f32"
    per = m * n // (32 * (warps or (8 if m == 256 else 4)))
    assert tail.count("tcgen05.ld.sync") and tail.count(add) < per // 4, tail.count(add)
    for nk in (0, 2):
        a, b, c = tp._operands(et, ct, m, n, max(64 * nk, 16), 3 + nk)
        out = tp._launch(ptx, a, b, c, nk, 64 * nk, strict_async=True)
        want = a[:, : 64 * nk].astype(np.float64) @ b[: 64 * nk].astype(np.float64)
        np.testing.assert_array_equal(out.astype(np.float64), want)
        if nk == 0:
            assert not np.signbit(out).any()


def test_streamed_store_without_its_read_wait_is_caught():
    ptx = _ptx("f16", "f32", 256, "0.0")
    assert ptx.count("cp.async.bulk.wait_group.read 5") == 2  # boxes 6 and 7 reuse slots 0, 1
    out, prod = _run(ptx, "f16", "f32", 256, 2)
    np.testing.assert_array_equal(out.astype(np.float64), prod)
    planted = re.sub(r"\n\s*cp\.async\.bulk\.wait_group\.read \d+;", "", ptx)
    with pytest.raises(Exception, match="may still be reading"):
        _run(planted, "f16", "f32", 256, 2)


# ---------------------------------------------------------------- C into tensor memory
@pytest.mark.parametrize(
    "et,ct,m,n,warps",
    [("f16", "f32", 128, 128, None), ("f16", "f32", 128, 256, 8)],
)
@pytest.mark.parametrize("nk", [0, 1, 3])
def test_c_as_the_initial_value_goes_into_tensor_memory(et, ct, m, n, warps, nk):
    # section 33: C, laid out as the accumulator's rows, is written into TMEM before the loop
    # (tcgen05.st), the first MMA adds to it, and the rows read back go to the TMA store as they
    # are; nothing is added after the loop (before: C waited in a scratch buffer, and each
    # result was loaded from it, added and stored back)
    import test_codegen_pipeline as tp

    ptx = _ptx(et, ct, m, None, warps, n)
    assert "tcgen05.mma.cta_group::1" in ptx and "cp.async.bulk.tensor.2d.global" in ptx
    per = m * n // (32 * (warps or 4))
    assert ptx.count("tcgen05.st.sync.aligned.32x32b.x32.b32") == per // 32
    tail = ptx.split("tcgen05.ld.sync")[-1]  # after the last read: no scratch round trip
    assert "add.rn.f32" not in tail and "ld.shared.f32" not in tail and "ld.shared.b32" not in tail
    a, b, c = tp._operands(et, ct, m, n, max(64 * nk, 16), 5 * nk + 1)
    out = tp._launch(ptx, a, b, c, nk, 64 * nk, strict_async=True)
    want = tp._ref(a, b, c, 64 * nk) if nk else c.astype(np.float64)
    np.testing.assert_array_equal(out.astype(np.float64), want)


@pytest.mark.parametrize("target", ["sm_80", "sm_90a", "sm_120"])
def test_c_is_loaded_in_the_accumulators_layout(target, tmp_path):
    # section 34: C, the initial value, is loaded in the MMA accumulator's layout (a quad's
    # two f32 a row: whole 32-byte sectors a warp) instead of coalesced 16-byte vectors then
    # exchanged into it through shared memory; the kernel matches NumPy (strict ptxsim)
    pytest.importorskip(
        "cuda.tile", reason="cuda-tile is not installed (pip install -e '.[cutile]')"
    )
    import fuzz_async as fa
    from tilegen.runtime.driver import compile_source, options_for

    params = dict(ab="f16", out="f32", TM=128, TN=128, TK=64, BT=0, INIT=1, EPI=0)
    cfg = fa.Config(0, "gemm", target, params, {}, dict(M=172, N=192, K=192))
    o = fa.check(cfg, str(tmp_path))
    assert o.status == "ok", f"{o.status}: {o.detail}\n{o.plan}"
    c = compile_source(tmp_path / "k0.tileirbc", options_for(target), until="layouts")
    loop = next(x for x in c.module.walk() if x.name == "scf.for")
    init = loop.operands[3]
    assert init.op.name == "nv_tileaa.tiled_load", init.op.name  # no convert_layout between
    assert init.type.encoding == loop.results[0].type.encoding


# ---------------------------------------------------------------- M 64 on one CTA
@pytest.mark.parametrize(
    "ab,out,epi,tk,tn,init",
    [
        ("f16", "f16", 0, 64, 128, 0),
        ("f16", "f16", 4, 64, 128, 0),  # a bias row and a scale per row (section 36)
        ("f16", "f32", 3, 64, 256, 0),
        ("i8", "i32", 2, 128, 128, 0),
        # C as the initial value: loaded half a row a thread, written by 16x32bx2 stores
        ("f16", "f16", 0, 64, 128, 1),
        ("f16", "f32", 2, 64, 256, 1),
    ],
)
def test_m64_on_one_cta_reads_tmem_by_16x32bx2(ab, out, epi, tk, tn, init, tmp_path):
    # an M 64 tcgen05 accumulator lives in TMEM lanes 32 w .. 32 w + 15 of each warp's
    # quarter; 16x32bx2 loads give lanes 16 .. 31 the second half of those rows' columns (as
    # tileiras reads them), so the registers go to the TMA store in their own order. Before,
    # 32x32b loads left half the lanes idle and the rows went through a scratch exchange
    # (f16 64 x 128: 1,528 SASS instructions, LDS / STS 168 / 204; now 720, 28 / 64;
    # tileiras 560)
    pytest.importorskip(
        "cuda.tile", reason="cuda-tile is not installed (pip install -e '.[cutile]')"
    )
    import fuzz_async as fa

    params = dict(ab=ab, out=out, TM=64, TN=tn, TK=tk, BT=0, INIT=init, EPI=epi)
    cfg = fa.Config(0, "gemm", "sm_100a", params, {}, dict(M=172, N=tn + 64, K=3 * tk))
    o = fa.check(cfg, str(tmp_path))
    assert o.status == "ok", f"{o.status}: {o.detail}\n{o.plan}"
    assert o.path == "async" and o.plan.endswith("TMA store"), o.plan
    x2 = o.ptx.count("tcgen05.ld.sync.aligned.16x32bx2.x32.b32")
    assert x2 == tn // 64  # a thread's tn / 2 columns, 32 a load
    assert "tcgen05.ld.sync.aligned.32x32b" not in o.ptx
    # C (section 37): into TMEM before the loop, in the same order (it went through the
    # scratch before: 32x32b loads of lanes 0 .. 15 and an exchange); a zero initial value
    # only after it, where the loop ran no iteration (section 38)
    st = "tcgen05.st.sync.aligned.16x32bx2.x32.b32"
    assert o.ptx.count(st) == tn // 64
    after = o.ptx.split("tcgen05.mma")[-1]
    assert after.count(st) == (0 if init else tn // 64)
