"""Side vectors beside the async loop's registers: a GEMM's bias row (1 x N) and scale per row
(M x 1) on the TMA store path (runtime/codegen/fragment_sides.py, docs/pipelines.md section
36).

Before, an epilogue that loaded a bias was "not exactly one tiled_store": the accumulator went
through shared memory into the layout stage's layout and out by `st.global`; on sm_100a at
256 x 256 the kernel fell to today's path and spilled. Now the vector is read in the
accumulator's own register order (wgmma fragment, TMEM rows, TMEM column chunks) and the tile
goes out by TMA. Checked in the strict simulator against NumPy (cuTile kernels of
bench/fuzz_async.py: EPI 2 is ``acc + bias``, EPI 4 ``(acc + bias) * scale``), with ptxas
reporting 0 bytes of spills; and a planted missing barrier after the vectors' writes is caught
by the strict simulator's check of reads between warps.
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


def _check(tmp_path, target, ab, out, epi, tm, tn, tk=64, init=0, compile_options=None, **options):
    pytest.importorskip(
        "cuda.tile", reason="cuda-tile is not installed (pip install -e '.[cutile]')"
    )
    import fuzz_async as fa

    params = dict(ab=ab, out=out, TM=tm, TN=tn, TK=tk, BT=0, INIT=init, EPI=epi)
    sizes = dict(M=tm + 44, N=tn + 64, K=3 * tk)  # partial tiles in M and N
    cfg = fa.Config(0, "gemm", target, params, options, sizes)
    o = fa.check(cfg, str(tmp_path), **(compile_options or {}))
    assert o.status == "ok", f"{o.status}: {o.detail}\n{o.plan}"  # (0 spills included)
    return cfg, o


@pytest.mark.parametrize(
    "target,ab,out,epi,tm,tn,tk,init,stages,read",
    [
        # the wgmma fragment: a thread's columns 2 t + 8 j (+1): 16 ld.shared.v2 of the bias
        ("sm_90a", "f16", "f16", 2, 128, 128, 64, 0, 7, "ld.shared.v2.f32"),
        ("sm_90a", "f16", "f16", 4, 128, 128, 64, 0, 7, "ld.shared.v2.f32"),
        ("sm_90a", "bf16", "bf16", 2, 128, 256, 64, 0, 4, "ld.shared.v2.f32"),
        ("sm_90a", "e4m3", "f16", 2, 128, 128, 128, 0, 5, "ld.shared.v2.f32"),
        # TMEM rows: a thread's row, 128 columns by ld.shared.v4
        ("sm_100a", "f16", "f16", 2, 128, 128, 64, 0, 7, "ld.shared.v4.f32"),
        ("sm_100a", "f16", "f16", 4, 128, 128, 64, 0, 7, "ld.shared.v4.f32"),
        # C into TMEM, loaded in the rows' order (fragment_load.py): no scratch either
        ("sm_100a", "f16", "f16", 4, 128, 128, 64, 1, 7, "ld.shared.v4.f32"),
        ("sm_90a", "f16", "f16", 4, 128, 128, 64, 1, 7, "ld.shared.v2.f32"),  # C in fragment
        ("sm_100a", "i8", "i32", 4, 128, 128, 128, 0, 7, "ld.shared.v4.b32"),
        # 256 x 256 on one CTA: the bias read by 32-column chunks beside the TMEM chunks;
        # f32 out streams box by box through the ring's slots, the vectors after them
        ("sm_100a", "f16", "f16", 2, 256, 256, 64, 0, 3, "ld.shared.v4.f32"),
        ("sm_100a", "f16", "f32", 4, 256, 256, 64, 0, 3, "ld.shared.v4.f32"),
    ],
)
def test_side_vectors_take_the_tma_store(
    tmp_path, target, ab, out, epi, tm, tn, tk, init, stages, read
):
    _, o = _check(tmp_path, target, ab, out, epi, tm, tn, tk, init)
    assert o.path == "async" and o.plan.endswith("TMA store"), o.plan
    # the stage count of the kernel without the epilogue: no accumulator scratch reserved
    assert f" {stages} stages x" in o.plan, o.plan
    assert "cp.async.bulk.tensor.2d.global.shared::cta" in o.ptx
    assert read in o.ptx


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_the_epilogue_costs_the_vectors_only(tmp_path, target):
    # beside the same GEMM without an epilogue, the bias row adds its own loads and
    # conversion, one write a thread, a barrier and each thread's reads - no exchange of the
    # accumulator through shared memory (which the epilogue took before)
    def shared(ptx):
        return len(re.findall(r"\b(ld|st)\.shared\.", ptx)), ptx.count("bar.sync 1,")

    (tmp_path / "plain").mkdir()
    (tmp_path / "bias").mkdir()
    _, plain = _check(tmp_path / "plain", target, "f16", "f16", 0, 128, 128)
    _, bias = _check(tmp_path / "bias", target, "f16", "f16", 2, 128, 128)
    (n0, b0), (n1, b1) = shared(plain.ptx), shared(bias.ptx)
    reads = 16 if target == "sm_90a" else 32  # the thread's columns: v2 / v4 loads
    assert n1 - n0 <= reads + 2 and b1 - b0 == 1, (n0, n1, b0, b1)


@pytest.mark.parametrize(
    "target,tm,tn",
    [("sm_100a", 256, 256), ("sm_90a", 256, 128), ("sm_100a", 128, 128)],
)
def test_side_vectors_on_a_cta_pair(tmp_path, target, tm, tn):
    # each CTA reads the scale of its own rows (rank * M on); the bias row is shared (sm_90's
    # 256 x 128 fits one CTA, which the rule prefers: cta_pair=True asks for the pair)
    pair = {"cta_pair": True}
    _, o = _check(tmp_path, target, "f16", "f16", 4, tm, tn, compile_options=pair, num_ctas=2)
    assert o.path == "async" and "a CTA pair" in o.plan, o.plan
    assert "%cluster_ctarank" in o.ptx


def test_bias_on_sm_120_goes_out_by_tma(tmp_path):
    # sm_120's mma.sync consumers keep the layout stage's layout; the bias load no longer
    # keeps the store off TMA
    _, o = _check(tmp_path, "sm_120", "f16", "f16", 4, 128, 128)
    assert o.path == "async" and o.plan.endswith("TMA store"), o.plan


def test_the_vectors_path_is_compact(tmp_path):
    # the async stage gives the vector's path from its load to the broadcast a layout without
    # copies (element i in thread i) and drops its conversions: the layout stage had given
    # the TMEM rows' slice, the whole vector in every thread (128 predicated loads each)
    from tilegen.runtime.driver import compile_source, options_for
    from tilegen.runtime.layouts.attrs import BlockedLayout

    cfg, _ = _check(tmp_path, "sm_100a", "f16", "f16", 4, 128, 128)
    c = compile_source(tmp_path / "k0.tileirbc", options_for("sm_100a"), until="async")
    ops = list(c.module.walk())
    sides = [
        o
        for o in ops
        if o.name == "nv_tileaa.broadcast" and getattr(o.operands[0].type, "rank", 0) == 2
    ]
    assert len(sides) == 2, [str(o.operands[0].type) for o in sides]
    for b in sides:
        v = b.operands[0]
        while v.op.name != "nv_tileaa.tiled_load":
            assert v.op.name != "nv_tileas.convert_layout"
            v = next(x for x in v.op.operands if getattr(x.type, "rank", 0))
        lay = v.type.encoding
        assert isinstance(lay, BlockedLayout)
        assert np.prod(lay.size_per_thread) == 1 and np.prod(lay.warps_per_cta) == 4, lay


def test_a_missing_barrier_after_the_vectors_is_caught(tmp_path):
    # the strict simulator orders reads between warps: without the consumers' barrier after
    # the vectors' writes, a warp reads an element another warp wrote
    import fuzz_async as fa
    from tilegen.runtime.ptx.launch import run_ptx

    cfg, o = _check(tmp_path, "sm_90a", "f16", "f16", 4, 128, 128)
    args, grid, idx, ref, rtol, atol = fa.problem(cfg, np.random.default_rng(cfg.seed))
    m = re.search(r"st\.shared[^\n]*\+2\d{5}\][^\n]*\n(\s*bar\.sync 1, 128;\n)", o.ptx)
    assert m is not None
    planted = o.ptx[: m.start(1)] + o.ptx[m.end(1) :]
    with pytest.raises(Exception, match="with no barrier between them"):
        run_ptx(planted, args, grid, strict_async=True, max_steps=50_000_000)
