"""``nv-tileaa-split-k-tiles`` (runtime/passes/k_tile_split.py, docs/pipelines.md section 35):
a GEMM loop whose K tile is too deep to stage twice iterates over parts of it.

* The IR: bounds times S, the tile index ``kk / S``, each load at the original index plus
  ``(kk % S) TK / S`` with the part's K extent, the zero fill a splat of the part.
* What it buys, as the fuzzer found it: 256 x 256 x 128 tiles on sm_100a and 128 x 128 x 128
  on sm_120 take the async path (two stages of the whole tile did not fit); 128 x 128 x 128 on
  sm_80 no longer spills.
* Exactness: text kernels with a trip-count argument (0 to 3 tiles, a K extent that leaves a
  whole part of the last tile out of bounds) against NumPy in the strict simulator.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from tilegen.runtime.ptxas import find_ptxas  # noqa: E402

needs_ptxas = pytest.mark.skipif(
    not Path(find_ptxas() or "/nonexistent").exists(), reason="ptxas is not installed"
)


def _text_module(m: int, n: int, k: int):
    from test_tmem_chunks import _source  # the C-initial K loop with a trip-count argument

    from tilegen.runtime.asm import parse_module

    return parse_module(_source("f16", "f32", m, None, n, k), "mm.mlir")


def _loop(module):
    return next(o for o in module.walk() if o.name == "scf.for")


def test_the_loop_iterates_over_parts_of_the_k_tile():
    from tilegen.runtime.driver import compile_module, options_for

    # 128 x 128 x 128 f16 on sm_120: two 64 KB stages do not fit in 99 KB; three of 32 do
    c = compile_module(_text_module(128, 128, 128), options_for("sm_120"), until="layouts")
    loop = _loop(c.module)
    body = loop.regions[0].blocks[0]
    names = [o.name for o in body.ops]
    assert "arith.divui" in names and "arith.remui" in names  # k = kk / 2, r = kk % 2
    loads = [o for o in body.ops if o.name == "nv_tileaa.tiled_load"]
    assert [tuple(x.results[0].type.shape) for x in loads] == [(128, 64), (64, 128)]
    dot = next(o for o in body.ops if o.name == "nv_tileaa.dot")
    assert tuple(dot.operands[0].type.shape) == (128, 64)
    ub = loop.operands[1].op
    assert ub.name == "arith.muli"  # the trip count argument times 2


def test_tiles_that_fit_twice_are_left_alone():
    from tilegen.runtime.driver import compile_module, options_for

    c = compile_module(_text_module(128, 128, 64), options_for("sm_90a"), until="layouts")
    names = [o.name for o in _loop(c.module).regions[0].blocks[0].ops]
    assert "arith.divui" not in names


@needs_ptxas
@pytest.mark.parametrize("sm", ["sm_120", "sm_100a", "sm_80"])
@pytest.mark.parametrize("nk,ktot", [(0, 0), (1, 128), (3, 384), (2, 200)])
def test_split_kernels_match_numpy(sm, nk, ktot):
    # (2, 200): the second tile's second part (columns 192 ..) lies wholly out of bounds
    import test_codegen_pipeline as tp

    from tilegen.runtime.options import CompileOptions
    from tilegen.runtime.ptxsim import compile_to_ptx

    m, n = (256, 256) if sm == "sm_100a" else (128, 128)
    from test_tmem_chunks import assembled

    ptx = compile_to_ptx(_text_module(m, n, 128), sm, options=CompileOptions())
    assembled(ptx, int(sm[3:].rstrip("a")))
    a, b, c = tp._operands("f16", "f32", m, n, max(ktot, 16), nk + ktot)
    out = tp._launch(ptx, a, b, c, nk, ktot, strict_async=True)
    np.testing.assert_array_equal(out.astype(np.float64), tp._ref(a, b, c, ktot))


@needs_ptxas
@pytest.mark.parametrize(
    "target,ab,out,tm,tn,options",
    [
        ("sm_100a", "bf16", "bf16", 256, 256, {}),
        ("sm_100a", "f16", "f32", 256, 256, {"num_ctas": 2}),
        ("sm_120", "f16", "f16", 128, 128, {}),
        ("sm_80", "f16", "f32", 128, 128, {}),
    ],
)
def test_k_tiles_of_128_take_the_async_path_or_stop_spilling(
    target, ab, out, tm, tn, options, tmp_path
):
    pytest.importorskip(
        "cuda.tile", reason="cuda-tile is not installed (pip install -e '.[cutile]')"
    )
    import fuzz_async as fa

    params = dict(ab=ab, out=out, TM=tm, TN=tn, TK=128, BT=0, INIT=0, EPI=0)
    cfg = fa.Config(0, "gemm", target, params, options, dict(M=tm + 44, N=tn, K=200))
    o = fa.check(cfg, str(tmp_path))
    assert o.status == "ok", f"{o.status}: {o.detail}\n{o.plan}"  # exact, 0 spills
    if target != "sm_80":
        assert o.path == "async" and "x64 " in o.plan, o.plan  # the loop's K tile: 64


#: fuzzer seeds (bench/fuzz_async.py) with K tiles of 128 whose operands TMA cannot copy (rows
#: that are not 16-byte multiples): today's path spilled 40-336 bytes where tileiras did not
NO_TMA_SEEDS = {
    81056: "sm_90a bf16 128x128x128, 56 B",
    80015: "sm_100a e4m3 batched 128x128x128, 40 B",
    90769: "sm_90a i8 batched 128x256x128, num_ctas=2, 336 B",
}


@needs_ptxas
@pytest.mark.parametrize("seed", sorted(NO_TMA_SEEDS))
def test_deep_k_tiles_without_tma_stop_spilling(seed, tmp_path):
    pytest.importorskip(
        "cuda.tile", reason="cuda-tile is not installed (pip install -e '.[cutile]')"
    )
    import fuzz_async as fa

    o = fa.run_one(seed, str(tmp_path))
    assert o.status == "ok", f"seed {seed} ({NO_TMA_SEEDS[seed]}): {o.status}: {o.detail}"
