"""The simulator's shared-memory bank statistics (runtime/ptx/sim/banks.py,
``run_ptx(bank_stats=...)``, bench/smem_banks.py): wavefronts per phase from the documented
bank structure (32 banks of 4 bytes; phases of 32, 16 or 8 lanes by access width, one per
ldmatrix / stmatrix matrix), per PTX line."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from tilegen.runtime.ptx.launch import run_ptx
from tilegen.runtime.ptx.sim.banks import phase_wavefronts, report

ROOT = Path(__file__).resolve().parents[1]


def test_a_phase_takes_the_most_words_any_bank_holds():
    lanes = np.arange(32)
    assert phase_wavefronts(lanes * 4, 4) == 1  # consecutive words
    assert phase_wavefronts(np.zeros(32, np.int64), 4) == 1  # one word: a broadcast
    assert phase_wavefronts(lanes * 128, 4) == 32  # one bank, 32 words
    assert phase_wavefronts(lanes * 8, 4) == 2  # every other word: two rows of banks
    assert phase_wavefronts(lanes[:8] * 16, 16) == 1  # 8 lanes x 16 bytes
    assert phase_wavefronts(lanes[:8] * 256, 16) == 8  # 8 rows 256 bytes apart
    assert phase_wavefronts(lanes * 2, 2) == 1  # 16-bit elements, 2 a word
    assert phase_wavefronts(np.array([2]), 4) == 1 and phase_wavefronts(np.array([2]), 8) == 1


_KERNEL = """.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 out) .reqntid 64, 1, 1
{
    .reg .b32 %r<13>;
    .reg .b64 %rd<4>;
    .shared .align 16 .b8 s[8192];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, s;
    shl.b32 %r3, %r1, 2;
    add.s32 %r4, %r2, %r3;
    st.shared.u32 [%r4], %r1;
    shl.b32 %r5, %r1, 7;
    add.s32 %r6, %r2, %r5;
    st.shared.u32 [%r6], %r1;
    bar.sync 0;
    shl.b32 %r7, %r1, 4;
    and.b32 %r7, %r7, 511;
    add.s32 %r8, %r2, %r7;
    ld.shared.v4.u32 {%r9, %r10, %r11, %r12}, [%r8];
    ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%r9}, [%r6];
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd1, %rd1, %rd2;
    st.global.u32 [%rd1], %r9;
    ret;
}
"""


def test_run_ptx_counts_each_lines_wavefronts():
    lines: dict = {}
    run_ptx(_KERNEL, [np.zeros(64, np.uint32)], (1, 1, 1), bank_stats=lines)
    by_op = {r["op"]: r for r in lines.values()}
    # two warps each: consecutive words one wavefront; a 128-byte stride 32 (one bank)
    plain, strided = (r for n, r in sorted(lines.items()) if r["op"] == "st.shared.u32")
    assert (plain["count"], plain["phases"], plain["wavefronts"]) == (2, 2, 2)
    assert (strided["phases"], strided["wavefronts"]) == (2, 64)
    # 16 bytes a lane: 4 phases of 8 lanes a warp, each 128 contiguous bytes
    v4 = by_op["ld.shared.v4.u32"]
    assert (v4["phases"], v4["wavefronts"]) == (8, 8)
    # ldmatrix .x1: lanes 0-7 give its rows, 128 bytes apart: all in banks 0-3
    ldm = by_op["ldmatrix.sync.aligned.m8n8.x1.shared.b16"]
    assert (ldm["phases"], ldm["wavefronts"]) == (2, 16)
    text = report(lines, _KERNEL, 3)
    assert "90 for 14 phases" in text and "`st.shared.u32 [%r6], %r1;`" in text


def test_bench_compares_tilegen_and_tileiras_on_the_corpus(capsys):
    sys.path.insert(0, str(ROOT / "bench"))
    import ptx_corpus
    import smem_banks

    if ptx_corpus.capture_all() is None:
        pytest.skip("needs the cuTile corpus, the tileiras wheel and a C compiler")
    assert smem_banks.main(["--target", "sm_90", "--only", "matmul_fp8", "--lines", "2"]) == 0
    out = capsys.readouterr().out
    row = next(x for x in out.splitlines() if x.startswith("| matmul_fp8 |"))
    mine, theirs = (c.strip() for c in row.split("|")[2:4])
    assert "excess" in mine and "excess" in theirs, row
    assert "### matmul_fp8 (tilegen)" in out


# ----------------------------------------------------------------------------- layouts chosen by it
#: today's path (cp.async staging, mma.sync): (A, C, M, N, K, target, B^T)
TODAY = [
    ("f16", "f32", 128, 128, 32, "sm_80", False),  # B by ldmatrix.x4.trans, two groups a load
    ("f16", "f32", 64, 128, 32, "sm_80", True),  # B^T by ldmatrix.x4
    ("tf32", "f32", 128, 64, 32, "sm_80", False),  # 32-bit B K x N by ld.shared: 32-byte pad
    ("f64", "f64", 64, 64, 16, "sm_80", False),  # f64 fragments: 32-byte pad
]


@pytest.mark.parametrize("et,ct,m,n,k,sm,bt", TODAY)
def test_todays_path_gemm_is_free_of_bank_conflicts(et, ct, m, n, k, sm, bt):
    """Every shared-memory access of the kernel one wavefront a phase (before: 16-byte row
    padding gave tf32's B K x N and f64's fragments 2-way conflicts), exact over 3 K steps;
    16-bit B read two column groups an ``ldmatrix.x4`` (no ``.x2`` left)."""
    sys.path.insert(0, str(ROOT / "tests"))
    import test_codegen_pipeline as tp
    import test_tmem_chunks as tc

    ptx = tc.assembled(tp._compile(None, et, ct, m, n, k, sm, bt=bt), int(sm[3:5]))
    if et == "f16":
        assert "ldmatrix.sync.aligned.m8n8.x4" in ptx and ".x2" not in ptx
    nk = 3
    a, b, c = tp._operands(et, ct, m, n, k * nk, 5, bt)
    lines: dict = {}
    args = [a, b, c, np.asarray(np.int32(nk)), np.asarray(np.int32(k * nk))]
    out = run_ptx(ptx, args, (1, 1, 1), bank_stats=lines, strict_async=True)[2]
    np.testing.assert_array_equal(out.astype(np.float64), tp._ref(a, b, c, k * nk, bt))
    conflicted = {n: r for n, r in lines.items() if r["wavefronts"] != r["phases"]}
    assert not conflicted, conflicted


def test_scan_totals_take_the_layout_without_conflicts():
    """The corpus scan's cross-warp totals: ``[line][rep][warp]`` stored 8-way (832 excess
    wavefronts on sm_90); the layout the bank rule picks takes none."""
    from tilegen.runtime.codegen.reduce import _totals_layout

    lines = np.arange(32)  # a line per lane, 4 repetitions, 2 warps along the axis
    lst, rst, qst = _totals_layout({0: lines}, list(range(32)), 4, 2, 64, [("f32", 4)])
    assert (lst, rst, qst) == (1, 128, 64)  # [rep][warp][line]
    # the old layout's stores: lanes 8 words apart
    from tilegen.runtime.smem_banks import warp_wavefronts

    assert warp_wavefronts(lines * 8 * 4, 4) == 8
    assert warp_wavefronts(lines * lst * 4, 4) == 1
