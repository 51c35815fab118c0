"""C, the K loop's initial value, loaded straight in the async accumulator's register order
(runtime/codegen/fragment_load.py, layouts/async_forms.init_chain; docs/pipelines.md section
37): sm_90a's wgmma fragment, sm_100a's TMEM rows (a chunk at a time past 128 values a thread)
and sm_120's mma.sync fragment, with no exchange through shared memory and no scratch beside
the stage ring."""

import re
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "bench"))

from tilegen.runtime.ptxas import find_ptxas  # noqa: E402

pytestmark = pytest.mark.skipif(
    not Path(find_ptxas() or "/nonexistent").exists(), reason="ptxas is not installed"
)

#: C scaled by two on its way to the loop: a uniform operand beside the chain
SCALED = (
    "  %two = constant <f32: 2.0> : tile<{m}x{n}xf32>\n"
    "  %w = mulf %w0, %two : tile<{m}x{n}xf32>\n"
)


def _text(m: int, n: int, scaled: bool) -> str:
    """tests/test_tmem_chunks.py's K loop starting from C as loaded (f16 x f16 -> f32), C times
    two where ``scaled``; doubled braces kept for test_codegen_pipeline's template."""
    import test_tmem_chunks as tc

    src = tc._source("f16", "f32", m, None, n)
    if scaled:
        line = next(ln for ln in src.splitlines() if "%w, %t3 = load_view_tko" in ln)
        src = src.replace(
            line, line.replace("%w, %t3", "%w0, %t3") + "\n" + SCALED.format(m=m, n=n)
        )
    return src


def _ptx(target: str, m: int, n: int, warps=None, scaled: bool = False) -> str:
    import test_tmem_chunks as tc

    from tilegen.runtime.asm import parse_module
    from tilegen.runtime.options import CompileOptions
    from tilegen.runtime.ptxsim import compile_to_ptx

    module = parse_module(_text(m, n, scaled), "mm.mlir")
    ptx = compile_to_ptx(module, target, options=CompileOptions(use_tma=True, num_warps=warps))
    return tc.assembled(ptx, int(re.sub(r"\D", "", target)))


def _before_loop(ptx: str, target: str) -> str:
    """The consumers' PTX from their branch to the first MMA (C's load and its way in)."""
    mma = {"sm_90a": "wgmma.mma_async", "sm_100a": "tcgen05.mma"}.get(target, "mma.sync")
    consumers = re.split(r"\$L__async_consumer_\d+:", ptx)[1]
    return consumers.split(mma)[0]


@pytest.mark.parametrize(
    "target,m,n,warps,scaled",
    [
        ("sm_90a", 128, 128, None, False),  # the wgmma fragment: rows 64 q + 16 w + 8 h + g
        ("sm_90a", 128, 128, None, True),
        ("sm_90a", 256, 128, 8, False),  # two consumer warp groups
        ("sm_100a", 128, 128, None, True),  # a TMEM row a thread, 128 values
        ("sm_100a", 256, 256, 8, False),  # 256 values a thread: written a chunk at a time
        ("sm_100a", 64, 128, None, False),  # half a row a thread (16x32bx2)
        ("sm_120a", 128, 128, None, True),  # the mma.sync fragment: the dot's own layout
    ],
)
@pytest.mark.parametrize("nk", [0, 1, 3])
def test_c_is_loaded_in_the_accumulators_order(target, m, n, warps, scaled, nk):
    import test_codegen_pipeline as tp

    ptx = _ptx(target, m, n, warps, scaled)
    head = _before_loop(ptx, target)
    # each thread loads its own elements: no shared memory between C and the first MMA
    assert "st.shared" not in head and "ld.shared.f32" not in head, head[-2000:]
    threads = 32 * (warps or 4)
    # (the kernel proves no alignment of C's rows: one element a load)
    assert len(re.findall(r"ld\.global\.f32", head)) == m * n // threads
    if target == "sm_100a":  # written into TMEM before the loop, 32 columns a tcgen05.st
        shape = "16x32bx2" if m == 64 else "32x32b"
        assert head.count(f"tcgen05.st.sync.aligned.{shape}.x32.b32") == m * n // threads // 32
    a, b, c = tp._operands("f16", "f32", m, n, max(64 * nk, 16), 3 * nk + 2)
    out = tp._launch(ptx, a, b, c, nk, 64 * nk, strict_async=True)
    c = c.astype(np.float64) * (2 if scaled else 1)
    want = tp._ref(a, b, c, 64 * nk) if nk else c
    np.testing.assert_array_equal(out.astype(np.float64), want)


def test_c_written_into_tmem_without_the_consumers_barrier_is_caught():
    # sm_100a: the consumers' bar.sync between their tcgen05.st of C and thread 0's first MMA,
    # planted away: the strict simulator reports the MMA accumulating into TMEM rows warps
    # 1 .. 3 wrote, unordered before its issue (a race on hardware)
    import test_codegen_pipeline as tp
    import test_tmem_chunks as tc

    ptx = _ptx("sm_100a", 128, 128)
    head = _before_loop(ptx, "sm_100a")
    m = re.search(
        r"tcgen05\.wait::st[^\n]*\n(?:(?!bar\.sync).)*?\n(\s*bar\.sync 1, 128;\n)", head, re.S
    )
    assert m is not None, head[-1500:]
    planted = ptx.replace(head, head[: m.start(1)] + head[m.end(1) :])
    tc.assembled(planted, 100)  # (legal PTX, only wrong)
    a, b, c = tp._operands("f16", "f32", 128, 128, 64, 5)
    with pytest.raises(Exception, match="nothing orders that store before the MMA's issue"):
        tp._launch(planted, a, b, c, 1, 64, strict_async=True)


def _loop(tmp_path, text: str, target: str):
    from tilegen.runtime.driver import compile_source, options_for

    src = tmp_path / "mm.mlir"
    src.write_text(text)
    c = compile_source(src, options_for(target), until="layouts")
    return next(x for x in c.module.walk() if x.name == "scf.for")


def test_init_chain_is_the_load_and_its_conversions(tmp_path):
    from tilegen.runtime.layouts.async_forms import init_chain

    loop = _loop(tmp_path, _text(128, 128, True), "sm_90a")
    chain = init_chain(loop)
    assert chain is not None and chain[-1] is loop.operands[3]
    assert chain[0].op.name == "nv_tileaa.tiled_load"
    assert {v.op.name for v in chain[1:]} <= {"nv_tileaa.mulf", "nv_tileas.convert_layout"}


@pytest.mark.parametrize(
    "line,why",
    [
        ("  %w = addf %w0, %w0 : tile<{m}x{n}xf32>\n", "C twice in one op"),
    ],
)
def test_init_chain_refuses_other_tiles(tmp_path, line, why):
    from tilegen.runtime.layouts.async_forms import init_chain

    text = _text(128, 128, True).replace(SCALED.format(m=128, n=128), line.format(m=128, n=128))
    loop = _loop(tmp_path, text, "sm_90a")
    assert init_chain(loop) is None, why


@pytest.mark.parametrize(
    "target,ab,out,epi,tm,tn,tk,bt,stages",
    [
        ("sm_90a", "f16", "f16", 0, 128, 128, 64, 0, 7),  # f16 C: its conversion passed through
        ("sm_100a", "e4m3", "f16", 1, 256, 256, 128, 1, 3),  # seed 70225: spilled on today's path
        ("sm_120", "f16", "f16", 1, 128, 128, 64, 1, 3),  # today's path before (64 KB scratch)
    ],
)
def test_cutile_gemms_from_c_take_the_async_path(
    tmp_path, target, ab, out, epi, tm, tn, tk, bt, stages
):
    pytest.importorskip(
        "cuda.tile", reason="cuda-tile is not installed (pip install -e '.[cutile]')"
    )
    import fuzz_async as fa

    params = dict(ab=ab, out=out, TM=tm, TN=tn, TK=tk, BT=bt, INIT=1, EPI=epi)
    cfg = fa.Config(0, "gemm", target, params, {}, dict(M=tm + 44, N=tn + 64, K=3 * tk))
    o = fa.check(cfg, str(tmp_path))  # ptxas (0 spills), strict ptxsim against NumPy
    assert o.status == "ok", f"{o.status}: {o.detail}\n{o.plan}"
    assert o.path == "async" and f" {stages} stages x" in o.plan, o.plan
