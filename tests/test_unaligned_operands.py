"""Dot operands whose rows are not 4-byte aligned (an odd K of an 8-bit or 16-bit array, a
row TMA and cp.async cannot copy): the dot copies them into its shared-memory operand buffer
itself, through registers, one 16-byte chunk a thread at a time (``memory.cp_async_tile``,
``_copy_through_registers``): the five aligned words that cover the chunk loaded (each where
it holds an in-bounds byte), funnel-shifted into place by the address's misalignment, bytes
past the row's end masked to 0, and one ``st.shared.v4.b32``.

Before, such a load stayed a whole tile in registers until the dot wrote it out: seed 200046
(sm_90a, i8 256 x 64 at occupancy 2) held 81 bytes a thread at once beside 64 accumulators
and spilled 228 B. Each kernel here runs in the strict simulator against NumPy (exact), and
ptxas assembles it with no spill."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

pytest.importorskip("cuda.tile", reason="cuda-tile is not installed (pip install -e '.[cutile]')")

import fuzz_async as fa  # noqa: E402

from tilegen.runtime.ptxas import find_ptxas  # noqa: E402

pytestmark = pytest.mark.skipif(
    not Path(find_ptxas() or "/nonexistent").exists(), reason="ptxas is not installed"
)


def _gemm(target, ab, out, tm, tn, tk, bt, sizes, epi=0, init=0, options=None):
    params = dict(ab=ab, out=out, TM=tm, TN=tn, TK=tk, BT=bt, INIT=init, EPI=epi)
    return fa.Config(0, "gemm", target, params, options or {}, sizes, aligned=False)


@pytest.mark.parametrize(
    "target,ab,out,tm,tn,tk,bt,sizes,options",
    [
        # seed 200046's kernel: B loaded N x K and transposed, a bias row and a row scale
        ("sm_90a", "i8", "i32", 256, 64, 64, 1, dict(M=256, N=64, K=119), {"occupancy": 2}),
        ("sm_90a", "bf16", "f32", 128, 128, 64, 0, dict(M=128, N=130, K=197), {}),
        ("sm_80", "f16", "f32", 128, 64, 64, 1, dict(M=100, N=64, K=71), {}),
        ("sm_100a", "e4m3", "f32", 128, 128, 128, 0, dict(M=128, N=131, K=257), {}),
        ("sm_120", "i8", "i32", 128, 128, 64, 0, dict(M=128, N=77, K=129), {}),
    ],
)
def test_unaligned_operands_are_copied_through_registers_a_chunk_at_a_time(
    target, ab, out, tm, tn, tk, bt, sizes, options, tmp_path
):
    cfg = _gemm(
        target, ab, out, tm, tn, tk, bt, sizes, epi=4 if out == "i32" else 0, options=options
    )
    o = fa.check(cfg, str(tmp_path))
    assert o.status == "ok", f"{o.status}: {o.detail}\n{o.plan}"
    assert o.path == "today", o.plan  # (no TMA on these rows)
    ptx = o.ptx
    assert "cp.async.ca" not in ptx and "cp.async.cg" not in ptx
    # aligned words, funnel-shifted into place, a 16-byte chunk a store; no element loads (the
    # register path's ld.global.s8 / b16, a whole tile of them live at once)
    assert "shf.r.clamp.b32" in ptx and "st.shared.v4.b32" in ptx
    assert not re.search(r"ld\.global\.[sub](8|16) ", ptx)
    # a synchronous copy is not prefetched into stage buffers: its warp stalls on the loads
    # either way, and the stages would only cost shared memory and code
    assert "cp.async.wait" not in ptx
