"""sm_100's plain store written straight from the accumulator's TMEM rows, 32 columns at a time
(async_epilogue.tmem_store_plan, tmem_chunks.store_rounds; docs/pipelines.md section 44).

Where TMA cannot store the result (its row stride is not known to be a 16-byte multiple: an LM
head's 32,001 columns), the async path's consumers used to add the TMEM rows into a scratch
buffer the size of the tile (the initial value waiting there through the loop), read it back in
the result's layout and store that: 64 KB of shared memory beside the stage ring at 128 x 128
f32, and a whole row of registers a thread. Now the store reads the rows a chunk at a time, runs
the epilogue on the chunk (a bias row read from shared memory by columns) and stores it, as the
TMA store's chunked path does; the columns are freed after the consumers' barrier.

The rows then go out coalesced: each chunk is written into the idle stage ring (rows padded
against bank conflicts), the consumers meet, and a warp's 32 lanes store 32 consecutive columns
of a row (tmem_store.py); a tile the ring cannot hold is stored as its rows are.

Checked in the strict simulator (exact results, a loop of no iteration included; the sectors
each warp's stores touch), with ptxas on every PTX simulated (0 spills), against NumPy.
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

PLAN = "stored from the TMEM rows 32 columns at a time"


def _source(et: str, ct: str, m: int, n: int, init) -> str:
    """tests/test_codegen_pipeline.py's K loop with a uniform initial value ``init`` (None: C,
    as loaded): C's row stride is a runtime value, so TMA cannot store it."""
    import test_codegen_pipeline as tp

    text = tp.SRC
    if init is not None:
        line = next(ln for ln in text.splitlines() if "%w, %t3 = load_view_tko" in ln)
        text = text.replace(line, f"  %w = constant <{{ct}}: {init}> : tile<{{m}}x{{n}}x{{ct}}>")
    return tp._source(et, ct, m, n, 64, text=text)


def _compile(et: str, ct: str, m: int, n: int, init, warps=None, target="sm_100a"):
    """(PTX, the async decision's line), the PTX assembled by ptxas with 0 spills."""
    from tilegen.runtime import driver
    from tilegen.runtime.options import CompileOptions
    from tilegen.runtime.ptxas import assemble

    options = CompileOptions(target=target, num_warps=warps)
    c = driver.compile_source(_source(et, ct, m, n, init), options, "mm.mlir", until="ptx")
    ptx, plan = c.ptx, c.async_plan
    cubin, log = assemble(ptx, int(target[3:6].rstrip("a")), verbose=True)
    assert cubin[:4] == b"\x7fELF"
    assert "0 bytes spill stores" in log, log
    return ptx, " | ".join(d.line() for d in plan or ())


def _run(ptx: str, et: str, ct: str, m: int, n: int, nk: int, seed: int, sectors=None, warps=4):
    """(C as stored, A B, C as given); ``sectors``: a list that gets, per warp of each global
    store instruction, the 32-byte sectors its lanes wrote."""
    import test_codegen_pipeline as tp
    from tilegen.runtime.ptx.sim import handwritten

    a, b, c = tp._operands(et, ct, m, n, max(64 * nk, 16), seed)
    memory = handwritten._memory

    def traced(st, space, addrs, mask):
        out = memory(st, space, addrs, mask)
        stored = sys._getframe(1).f_code.co_name == "do_st"  # (not a load's)
        if sectors is not None and stored and out[0] is st.heap and mask.sum() == 32 * warps:
            for w in range(warps):
                sectors.append(len(np.unique(out[1][32 * w : 32 * w + 32] // 32)))
        return out

    handwritten._memory = traced
    try:
        out = tp._launch(ptx, a, b, c, nk, 64 * nk, strict_async=True)
    finally:
        handwritten._memory = memory
    prod = a[:, : 64 * nk].astype(np.float64) @ b[: 64 * nk].astype(np.float64)
    return out, prod, c


def _check_runs(ptx: str, kernel: tuple, init, warps: int, most: int, traced=True) -> None:
    """Run ``ptx`` (kernel ``(et, ct, m, n)``) for 0 and 2 iterations: exact against NumPy,
    a ``-0.0`` initial value kept bit for bit, and (``traced``) every warp's global store
    instruction touching at most ``most`` sectors, ``most`` for some."""
    et, ct, m, n = kernel
    for nk in (0, 2):
        sectors: list = []
        out, prod, c = _run(ptx, et, ct, m, n, nk, 11 + nk, sectors if traced else None, warps)
        want = prod + (c.astype(np.float64) if init is None else float(init))
        np.testing.assert_array_equal(out.astype(np.float64), want)
        if nk == 0 and init == "-0.0":
            assert np.signbit(out).all()  # the initial value itself, bit for bit
        if traced:
            assert len(sectors) == m * n // 32 and max(sectors) == most, sectors[:8]


@pytest.mark.parametrize(
    "et,ct,m,n,warps,init,coalesced",
    [
        ("f16", "f32", 128, 128, None, "1.5", True),  # 4 warps, a row of 128 a thread
        ("f16", "f32", 128, 256, 8, "-0.0", True),  # 8 warps, half a row each
        ("f16", "f32", 256, 128, 8, "0.0", True),  # two accumulators, a row each
        ("f16", "f32", 256, 256, 8, "0.0", False),  # 256 a thread (before: today's path); the
        # padded 266 KB tile passes the ring: stored as the rows are
        ("i8", "i32", 128, 128, None, "3", True),
        ("f16", "f32", 128, 128, None, None, True),  # C, written into TMEM before the loop
        ("f16", "f32", 64, 128, None, "-0.0", True),  # M 64: half a row a thread (16x32bx2)
        ("f16", "f32", 64, 256, None, None, True),
    ],
)
def test_the_plain_store_reads_the_tmem_rows_by_chunks(et, ct, m, n, warps, init, coalesced):
    ptx, plan = _compile(et, ct, m, n, init, warps)
    assert "async path" in plan and "st.global epilogue" in plan and PLAN in plan, plan
    per = m * n // (32 * (warps or 4))
    tail = ptx[ptx.rindex("tcgen05.mma") :]
    shape = "16x32bx2" if m == 64 else "32x32b"
    assert tail.count(f"tcgen05.ld.sync.aligned.{shape}.x32.b32") == per // 32
    assert tail.count("st.global") == per  # (C's stride is unknown: one element a store)
    # no scratch: the result is not read from shared memory while TMEM is read (the values go
    # through the ring once, as stored, where they are coalesced)
    last_read = tail.rindex("tcgen05.ld.sync")
    assert not re.search(r"ld\.shared\.(f32|b32|s32)", tail[:last_read])
    # the columns are freed after the consumers' last read, behind their barrier
    assert tail[last_read:].count("ld.shared") == (per if coalesced else 0)
    dealloc = tail.index("tcgen05.dealloc")
    assert re.search(r"bar(rier)?\.sync[^\n]*\n", tail[last_read:dealloc])
    # (a warp's 32 4-byte stores: 4 sectors coalesced, 32 by rows)
    _check_runs(ptx, (et, ct, m, n), init, warps or 4, 4 if coalesced else 32, m == 128)


@pytest.mark.parametrize(
    "et,ct,m,n,warps,init",
    [
        ("f16", "f32", 128, 128, None, "1.5"),  # two m64 instances a warp group
        ("f16", "f32", 128, 256, 8, "-0.0"),  # two consumer warp groups
        ("f16", "f32", 64, 128, None, None),  # C loaded in the fragment's order
        ("i8", "i32", 128, 128, None, "3"),
    ],
)
def test_sm90_stores_the_wgmma_fragment_coalesced(et, ct, m, n, warps, init):
    # sm_90a (section 45): the fragment's registers go into the idle ring whole (rows padded),
    # and a warp's lanes store 32 consecutive columns of a row; before, the ring exchange went
    # to the layout stage's layout, whose warp stores wrote 8 rows of 4 lanes
    ptx, plan = _compile(et, ct, m, n, init, warps, "sm_90a")
    assert "async path" in plan and "st.global epilogue" in plan, plan
    assert "stored from the wgmma fragment through the ring, coalesced" in plan, plan
    threads = 32 * (warps or 4)
    per = m * n // threads
    tail = ptx[ptx.rindex("wgmma.wait_group.sync.aligned 0") :]
    assert tail.count("st.global") == per
    assert len(re.findall(r"ld\.shared\.(?!u32)", tail)) == per  # (not the map slot's)
    _check_runs(ptx, (et, ct, m, n), init, threads // 32, 4)  # (4-byte stores: 4 sectors)


@pytest.mark.parametrize(
    "m,n,warps",
    [
        (128, 128, None),  # coalesced: the barrier orders the ring's writes before the reads too
        (256, 256, 8),  # the rows stored as they are (the padded tile passes the ring)
    ],
)
def test_without_the_barrier_before_the_dealloc_a_read_is_caught(m, n, warps):
    # warp 0 frees the columns the other warps may still be reading
    ptx, _ = _compile("f16", "f32", m, n, "1.5", warps)
    out, prod, _ = _run(ptx, "f16", "f32", m, n, 2, 5)
    np.testing.assert_array_equal(out.astype(np.float64), prod + 1.5)
    tail = ptx.rindex("tcgen05.dealloc")
    bar = ptx.rindex("bar.sync", 0, tail)
    end = ptx.index("\n", bar)
    planted = ptx[:bar] + "// (planted: no barrier)" + ptx[end:]
    with pytest.raises(Exception, match="frees tensor memory .column .* that warp"):
        _run(planted, "f16", "f32", m, n, 2, 5)


# ---------------------------------------------------------------- cuTile kernels
def _gemm(ab: str, out: str, tn: int, tk: int, bt: int, init: int, epi: int) -> dict:
    """bench/fuzz_async.py's GEMM parameters, 128 rows a tile."""
    return dict(ab=ab, out=out, TM=128, TN=tn, TK=tk, BT=bt, INIT=init, EPI=epi)


@pytest.mark.parametrize(
    "target,params,sizes",
    [
        # an LM head's tile: N = 251 columns of f16 (rows of 502 bytes), B by the producer's
        # threads; before: 5 stages beside the 64 KB scratch, 1,720 SASS
        ("sm_100a", _gemm("f16", "f16", 128, 64, 0, 0, 0), (256, 251, 256)),
        # a bias row beside 128 x 256 on 8 warps (fuzz seed 704626: 128 B spilled before)
        ("sm_100a", _gemm("f16", "f32", 256, 64, 1, 0, 2), (256, 250, 331)),
        ("sm_100a", _gemm("e4m3", "f16", 128, 128, 0, 1, 3), (128, 245, 256)),  # ReLU, from C
        # sm_90a: the LM head's tile, and a bias row
        ("sm_90a", _gemm("f16", "f16", 128, 64, 0, 0, 0), (256, 251, 256)),
        ("sm_90a", _gemm("bf16", "f32", 128, 64, 1, 0, 2), (200, 250, 200)),
    ],
)
def test_cutile_gemms_of_unaligned_rows_store_from_tmem(target, params, sizes, tmp_path):
    pytest.importorskip(
        "cuda.tile", reason="cuda-tile is not installed (pip install -e '.[cutile]')"
    )
    import fuzz_async as fa

    M, N, K = sizes
    cfg = fa.Config(0, "gemm", target, params, {}, dict(M=M, N=N, K=K), aligned=False)
    o = fa.check(cfg, str(tmp_path))
    assert o.status == "ok", f"{o.status}: {o.detail}\n{o.plan}"  # (0 spills, exact)
    if target == "sm_90a":
        assert "stored from the wgmma fragment through the ring, coalesced" in o.plan, o.plan
        return
    assert o.path == "async" and PLAN in o.plan, o.plan
    tail = o.ptx[o.ptx.rindex("tcgen05.mma") : o.ptx.rindex("tcgen05.ld.sync")]
    assert not re.search(r"ld\.shared\.(f32|b32|s32)", tail)  # (no scratch round trip)
    assert "tmem_store_freed" in o.ptx  # (coalesced through the ring)
