"""The async path's operand forms and what bench/fuzz_async.py (random cuTile GEMMs and
attention forwards, strict ptxsim against NumPy, ptxas without spills) found, as fixed kernels.

* **B loaded N x K and transposed** (``x @ W^T``, a Linear layer's weight) reaches wgmma /
  tcgen05 K-major from its stage: no transpose pass, wgmma's ``imm-trans-b`` 0, tcgen05's
  instruction descriptor with B K-major. Before, the async path refused it ("operand B of the
  dot is not a tiled_load of the loop") and the GEMM ran on today's path.
* **Batched operands**: ``(1, M, K)`` loads of 3-d arrays reshaped to the dot's 2-d tiles.
* **sm_100's tcgen05 dots on today's path** read cp.async stages through the async proxy:
  the K loop fences (``fence.proxy.async``) after the copies land; without it the strict
  simulator reports the read (seed 148).
* **An epilogue whose layout conversion would need more shared memory than the SM has** is
  stored in the value's own layout (uncoalesced) instead of refused (sm_120, 99 KB); a load
  whose conversion would not fit is loaded in the layout its user needs.
* **A ``num_ctas=2`` 256-row GEMM the pair refuses** (a bias row loaded after the loop, a 3-d
  store) keeps two consumer warp groups on one CTA instead of one group holding 256 rows of
  accumulators (which spilled on today's path), and sm_100's two-accumulator form takes a
  kernel's own epilogue through the scratch buffer.
* **C as the initial value** (section 29): the consumers load it after the warp groups split,
  and the GEMM takes the async path; a trip count read from memory keeps today's path.
* **Batched epilogues** store the ``(1, TM, TN)`` tile with one 3-d TMA copy per box.
* **256 x 256 tiles with ``num_ctas=2``** (section 30) run on a CTA pair, two warp groups a CTA.
* **sm_120** (section 31): TMA stages and a producer warp group, mma.sync consumers.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

pytest.importorskip("cuda.tile", reason="cuda-tile is not installed (pip install -e '.[cutile]')")

import fuzz_async as fa  # noqa: E402

from tilegen.runtime.ptxas import find_ptxas  # noqa: E402

pytestmark = pytest.mark.skipif(
    not Path(find_ptxas() or "/nonexistent").exists(), reason="ptxas is not installed"
)


def _gemm(target, ab, out, tm, tn, tk, bt=0, epi=0, init=0, options=None, sizes=None):
    params = dict(ab=ab, out=out, TM=tm, TN=tn, TK=tk, BT=bt, INIT=init, EPI=epi)
    sizes = sizes or dict(M=2 * tm if tm < 256 else tm, N=tn, K=3 * tk)
    return fa.Config(0, "gemm", target, params, options or {}, sizes)


def _run(cfg, tmp_path, **options) -> fa.Outcome:
    o = fa.check(cfg, str(tmp_path), **options)
    assert o.status == "ok", f"{o.status}: {o.detail}\n{o.plan}"
    return o


@pytest.mark.parametrize(
    "target,ab,out,tk",
    [
        ("sm_90a", "f16", "f32", 64),
        ("sm_90a", "e4m3", "f16", 128),
        ("sm_100a", "bf16", "bf16", 64),
        ("sm_100a", "i8", "i32", 128),
    ],
)
def test_b_transposed_takes_the_async_path_k_major(target, ab, out, tk, tmp_path):
    o = _run(
        _gemm(target, ab, out, 128, 128, tk, bt=1, sizes=dict(M=200, N=136, K=3 * tk)), tmp_path
    )
    assert o.path == "async", o.plan
    if target == "sm_90a":
        wg = re.findall(
            r"wgmma\.mma_async\.sync\.aligned\.m64n128k\d+\.\S+ \{[^}]*\}, [^;]*;", o.ptx
        )
        assert wg
        if ab == "f16":  # imm-trans-b 0: B K-major as staged
            assert all(w.endswith(", 1, 1, 0, 0;") for w in wg), wg[0]
        # no B^T buffers: the 8-bit B needs no transpose by the consumers when staged N x K
        assert "ld.shared.v4.b32" not in o.ptx
    else:
        from tilegen.runtime.codegen.tcgen05 import instruction_descriptor

        kind = {"bf16": "f16", "i8": "i8"}[ab]
        assert f"tcgen05.mma.cta_group::1.kind::{kind} " in o.ptx
        key = {"bf16": "bf16", "i8": "i8"}[ab]
        d = instruction_descriptor(
            128, 128, key, "s32" if ab == "i8" else "f32", b_mn_major=False, saturate=ab == "i8"
        )
        assert f", {d}, " in o.ptx  # B K-major in the instruction descriptor


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_batched_operands_reshaped_from_3d_loads_take_the_async_path(target, tmp_path):
    for bt in (0, 1):
        params = dict(ab="f16", out="f32", TM=128, TN=128, TK=64, BT=bt)
        cfg = fa.Config(0, "bgemm", target, params, {}, dict(M=200, N=128, K=144, Z=2))
        o = _run(cfg, tmp_path)
        assert o.path == "async", o.plan


def _compiled(cfg, tmp_path, until: str = "async"):
    """``cfg``'s kernel (exported for its problem's arguments) compiled by tilegen ``until``."""
    from tilegen.runtime import driver
    from tilegen.runtime.options import CompileOptions

    path = tmp_path / f"k{len(list(tmp_path.iterdir()))}.tileirbc"
    fa.export(cfg, str(path), fa.problem(cfg, np.random.default_rng(0))[0])
    return driver.compile_source(path, CompileOptions(target=cfg.target), until=until)


def _plan(cfg, tmp_path):
    """The async decision for ``cfg``'s kernel."""
    (d,) = _compiled(cfg, tmp_path).async_plan
    return d


def test_the_store_map_is_foreseen_for_unswizzled_tmem_rows(tmp_path):
    """sm_100a: a pair's 64-row halves of a 128 x 64 bf16 tile from C (seed 910274's kernel)
    store one unswizzled box, since each of the rows' two column groups is 64 bytes. The
    prologue builds that map (docs/pipelines.md section 47), and the epilogue builds none."""
    cfg = _gemm(
        "sm_100a",
        "bf16",
        "bf16",
        128,
        64,
        128,
        bt=1,
        init=1,
        options={"num_ctas": 2},
        sizes=dict(M=44, N=64, K=512),
    )
    c = _compiled(cfg, tmp_path, "ptx")
    assert c.async_plan[0].tma_store and "CTA pair" in c.async_plan[0].line()
    start = re.search(r"^\$L__async_consumer_\d+:", c.ptx, re.M).start()
    assert c.ptx.count("tensormap.replace.tile.global_address") == 3
    assert "tensormap.replace" not in c.ptx[start:]
    swizzles = re.findall(r"swizzle_mode\.shared::cta\.b1024\.b32 \[%r\d+\], (\d);", c.ptx)
    assert swizzles == ["3", "3", "0"], swizzles  # A, B; the store's: none


def test_8bit_b_staged_k_major_reserves_no_transpose_buffers(tmp_path):
    """sm_90a: the K-major B^T buffers the consumers transpose 8-bit B into exist only for B
    loaded K x N. Staged N x K (a cuBLASLt-layout B^T), the ring keeps their bytes: as many
    stages as an f16 tile of the same stage size (it reserved 48 KB for buffers it never had)."""
    f16 = _plan(_gemm("sm_90a", "f16", "f16", 128, 128, 64), tmp_path)
    bt = _plan(_gemm("sm_90a", "e4m3", "f16", 128, 128, 128, bt=1), tmp_path)
    kn = _plan(_gemm("sm_90a", "e4m3", "f16", 128, 128, 128), tmp_path)
    assert bt.taken and kn.taken and f16.taken
    assert bt.stage_bytes == kn.stage_bytes == f16.stage_bytes, (bt.line(), f16.line())
    assert bt.stages == f16.stages > kn.stages, (bt.line(), kn.line(), f16.line())


@pytest.mark.parametrize(
    "target,ab,out,tm,tn,bt",
    [
        ("sm_90a", "f16", "f16", 128, 128, 0),
        ("sm_90a", "bf16", "f32", 64, 256, 1),
        ("sm_100a", "f16", "f32", 128, 128, 1),
        ("sm_100a", "i8", "i32", 128, 256, 0),
    ],
)
def test_batched_epilogue_is_a_3d_tma_store(target, ab, out, tm, tn, bt, tmp_path):
    # the (1, TM, TN) view of the accumulator a 3-d store writes: the registers go out in the
    # loop's own order through the idle ring, one 3-d TMA copy per box (before: st.global,
    # "the stored tile is not a 2-d tile of its memref's rank"); the last tile is partial
    tk = 128 if ab == "i8" else 64
    params = dict(ab=ab, out=out, TM=tm, TN=tn, TK=tk, BT=bt)
    sizes = dict(M=tm + 40, N=tn + 32, K=2 * tk, Z=2)
    o = _run(fa.Config(0, "bgemm", target, params, {}, sizes), tmp_path)
    assert o.path == "async" and "TMA store" in o.plan, o.plan
    assert "cp.async.bulk.tensor.3d.global.shared::cta" in o.ptx
    assert "st.global" not in o.ptx.split("$L__async_consumer")[2]


@pytest.mark.parametrize(
    "target,ab,out,tm,tn",
    [
        ("sm_90a", "f16", "f32", 128, 128),
        ("sm_100a", "bf16", "bf16", 128, 128),
        ("sm_100a", "f16", "f32", 64, 128),
        ("sm_120", "f16", "f32", 128, 128),
    ],
)
def test_batched_gemm_from_c(target, ab, out, tm, tn, tmp_path):
    # C's (1, TM, TN) tile of a 3-d array, reshaped: the chain of async_forms.init_chain runs
    # through the view, and each thread loads its elements of batch z in the accumulator's
    # order (codegen/fragment_load.py); the batch past the array's end reads zeros
    params = dict(ab=ab, out=out, TM=tm, TN=tn, TK=64, BT=0, INIT=1)
    sizes = dict(M=tm + 40, N=tn + 32, K=128, Z=2)
    o = _run(fa.Config(0, "bgemm", target, params, {}, sizes), tmp_path)
    assert o.path == "async", o.plan
    consumers = re.split(r"\$L__async_consumer_\d+:", o.ptx)[1]
    mma = {"sm_90a": "wgmma.fence", "sm_100a": "tcgen05.mma"}.get(target, "mma.sync")
    assert "st.shared" not in consumers.split(mma)[0]  # (no exchange of C)


def test_tcgen05_dot_on_todays_pipelined_path_fences_the_cp_async_stages(tmp_path):
    # seed 148 of the fuzzer (the C tile as the initial value kept it on today's path then;
    # here TMA is off): cp.async stages, tcgen05 dots of their own; the MMAs read the stages
    # through the async proxy, so the loop fences after each stage lands
    cfg = _gemm("sm_100a", "f16", "f32", 256, 128, 64, bt=1, init=1)
    o = _run(cfg, tmp_path, use_tma=False)
    assert o.path == "today"
    body = o.ptx.split("$L__for_body", 1)[1]
    wait = body.index("cp.async.wait_group")
    assert body.index("fence.proxy.async.shared::cta") > wait
    assert body.index("fence.proxy.async.shared::cta") < body.index("tcgen05.mma")


@pytest.mark.parametrize(
    "target,ab,out,tm,tn,tk,bt,epi",
    [
        ("sm_90a", "f16", "f32", 128, 128, 64, 0, 0),
        ("sm_90a", "e4m3", "f16", 128, 128, 128, 1, 0),
        ("sm_90a", "f16", "f32", 256, 128, 64, 0, 3),
        ("sm_100a", "bf16", "bf16", 128, 128, 64, 1, 1),
        ("sm_100a", "i8", "i32", 128, 256, 128, 0, 0),
        ("sm_100a", "f16", "f32", 256, 128, 64, 0, 2),
    ],
)
def test_c_as_the_initial_value_takes_the_async_path(
    target, ab, out, tm, tn, tk, bt, epi, tmp_path
):
    # C loaded before the K loop: the consumers load it after the warp groups split (the
    # producer neither repeats the read nor runs its layout exchange); before, the kernel
    # kept today's path ("'nv_tileaa.tiled_load' runs before the K loop")
    sizes = dict(M=2 * tm - 8 if tm < 256 else tm, N=tn + 16, K=3 * tk)
    o = _run(_gemm(target, ab, out, tm, tn, tk, bt=bt, epi=epi, init=1, sizes=sizes), tmp_path)
    assert o.path == "async", o.plan
    head, consumers = o.ptx.split("$L__async_consumer", 1)[0], o.ptx.split("$L__async_consumer")[2]
    assert "ld.global" not in head  # nothing reads C before the split
    assert "ld.global" in consumers


@pytest.mark.parametrize(
    "target,ab,out,tk,bt,epi",
    [
        ("sm_100a", "f16", "f32", 64, 0, 0),
        ("sm_100a", "e4m3", "f16", 128, 1, 3),
        ("sm_90a", "bf16", "bf16", 64, 1, 1),
    ],
)
def test_256x256_pair_takes_two_warp_groups_a_cta(target, ab, out, tk, bt, epi, tmp_path):
    # the balanced tile, 256 x 256 with num_ctas=2 (section 30): each CTA's 128 rows x 256
    # columns on two warp groups (sm_100: column halves of the CTA's TMEM rows; sm_90: 64 rows
    # each, B multicast); before, the pair took N up to 128 and the kernel fell to today's path.
    # The epilogue's TMA store takes each CTA's 128 rows (a 128 KB half of the f32 tile)
    cfg = _gemm(target, ab, out, 256, 256, tk, bt=bt, epi=epi, options={"num_ctas": 2})
    cfg.sizes = dict(M=512, N=448, K=3 * tk)
    o = _run(cfg, tmp_path)
    assert o.path == "async", o.plan
    assert "CTA pair" in o.plan and "8 consumer" in o.plan and "TMA store" in o.plan, o.plan
    if target == "sm_100a":
        assert "tcgen05.mma.cta_group::2" in o.ptx
        assert "tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32" in o.ptx
    else:
        assert ".multicast::cluster" in o.ptx
        assert "wgmma.mma_async.sync.aligned.m64n256k16" in o.ptx


@pytest.mark.parametrize(
    "ab,out,tm,tn,tk,bt,init",
    [
        ("f16", "f32", 128, 128, 64, 0, 0),  # 128-byte swizzle boxes
        ("bf16", "bf16", 128, 128, 64, 1, 0),  # B^T, read K-major as A
        ("f16", "f32", 64, 64, 32, 0, 1),  # 64-byte boxes, C as the initial value
        ("f16", "f32", 128, 32, 32, 1, 0),  # B^T of 32 rows
        ("bf16", "bf16", 128, 256, 64, 1, 0),  # 8 warps, two 48 KB stages in 99 KB
        ("e4m3", "f16", 128, 128, 128, 1, 0),  # fp8: mma.sync m16n8k32 e4m3, B^T
        ("i8", "i32", 64, 64, 64, 1, 1),  # i8 into i32, C as the initial value
    ],
)
def test_sm120_gemm_takes_tma_stages_and_mma_sync(ab, out, tm, tn, tk, bt, init, tmp_path):
    # sm_120 (section 31): the producer warp group copies A and B by TMA into swizzled
    # stages; the consumers read them with ldmatrix and run mma.sync (before: cp.async by
    # every warp). The copies name the CTA's own window (.shared::cta): with .shared::cluster
    # ptxas guarded each with an out-of-line call and a stack frame
    cfg = _gemm("sm_120", ab, out, tm, tn, tk, bt=bt, init=init)
    cfg.sizes = dict(M=2 * tm - 8, N=2 * tn, K=3 * tk)
    o = _run(cfg, tmp_path)
    assert o.path == "async" and "mma.sync" in o.plan, o.plan
    assert "cp.async.bulk.tensor.2d.shared::cta.global" in o.ptx
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in o.ptx and "cp.async.ca" not in o.ptx
    src = tmp_path / "k.ptx"
    src.write_text(o.ptx)
    log = subprocess.run(
        [find_ptxas(), "-v", "-arch=sm_120a", str(src), "-o", os.devnull],
        capture_output=True,
        text=True,
    ).stderr
    assert " 0 bytes stack frame" in log, log


@pytest.mark.parametrize(
    "ab,out,tm,tn,tk,init",
    [
        ("i8", "i32", 128, 64, 128, 0),
        ("e4m3", "f16", 128, 128, 128, 0),
        ("e4m3", "f32", 64, 128, 64, 1),  # C as the initial value too
    ],
)
def test_sm120_8bit_b_loaded_k_by_n_is_transposed_by_the_consumers(
    ab, out, tm, tn, tk, init, tmp_path
):
    # the consumers copy each stage's B (K x N) into one of two B^T buffers (a warp an atom
    # at a time: ldmatrix .trans, prmt, stmatrix; docs/pipelines.md section 51), meet, and
    # read it K-major as they read B loaded N x K (before: today's path, "8-bit B loaded K x N")
    cfg = _gemm("sm_120", ab, out, tm, tn, tk, init=init)
    cfg.sizes = dict(M=2 * tm - 8, N=2 * tn, K=3 * tk)
    o = _run(cfg, tmp_path)
    assert o.path == "async" and "mma.sync" in o.plan, o.plan
    assert "prmt.b32" in o.ptx and "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in o.ptx
    assert "ldmatrix.sync.aligned.m8n8.x4.trans" in o.ptx and "stmatrix.sync" in o.ptx
    assert "ldmatrix.sync.aligned.m8n8.x2" not in o.ptx  # (B read by .x4)
    if init:
        return
    # the consumers' barrier between the transpose and the reads, planted away: a warp reads
    # B^T bytes another warp wrote, unordered (the strict simulator's check)
    from tilegen.runtime.ptx.launch import run_ptx

    m = re.search(r"prmt\.b32(?:(?!bar\.sync).)*?\n(\s*bar\.sync 1, 128;\n)", o.ptx, re.S)
    assert m is not None
    from tilegen.runtime.ptxas import assemble

    planted = o.ptx[: m.start(1)] + o.ptx[m.end(1) :]
    assert assemble(planted, 120)[0][:4] == b"\x7fELF"  # (legal PTX, only wrong)
    args, grid, *_ = fa.problem(cfg, np.random.default_rng(cfg.seed))
    with pytest.raises(Exception, match="with no barrier between them"):
        run_ptx(planted, args, grid, strict_async=True, max_steps=50_000_000)


def test_sm120_transposing_consumers_leave_their_buffers_to_the_epilogue(tmp_path):
    # an i32 64 x 256 tile stored by st.global (it does not fit the ring), its bias and scale
    # exchanged through the idle ring: with the two B^T buffers in it too (they follow the
    # stages) the 64 KB fit; counted without them the kernel asked 160 KB of a 99 KB SM (a
    # located refusal where today's path built it: fuzzer seed 140210 on sm_120)
    cfg = _gemm("sm_120", "i8", "i32", 64, 256, 64, epi=4, sizes=dict(M=64, N=256, K=224))
    o = _run(cfg, tmp_path)
    assert o.path == "async" and "st.global epilogue" in o.plan, o.plan


def test_a_pair_refused_keeps_two_warp_groups(tmp_path):
    # num_ctas=2 where an operand TMA cannot copy (rows of no 16-byte multiple: the pair's
    # halves and multicast are TMA's): no pair, so the 256-row tile takes two consumer warp
    # groups on one CTA, not one group of 256 rows, and the producer's threads copy A. (A
    # batch's (1, M, N) tiles no longer refuse the pair, below; nor does a bias row, each CTA
    # reading its columns as a side vector, tests/test_fragment_sides.py; nor C.)
    cfg = _gemm("sm_100a", "f16", "f32", 256, 128, 64, options={"num_ctas": 2})
    cfg.sizes = dict(M=300, N=128, K=100)  # (K 100: A's rows 200 bytes)
    o = _run(cfg, tmp_path)
    assert o.path == "async", o.plan
    assert "8 consumer + 4 producer warps" in o.plan and "A copied by the producer" in o.plan
    assert "not a pair: the pair stages its operands by TMA" in o.plan, o.plan


@pytest.mark.parametrize(
    "target, tm, tn, init, hints",
    [
        ("sm_100a", 256, 128, 0, {"num_ctas": 2}),  # cta_group::2 on a batch's tiles
        ("sm_100a", 256, 256, 1, {"num_ctas": 2}),  # from C, each CTA its rows
        ("sm_90a", 256, 256, 0, {}),  # no CTA holds it: paired unasked (was today's path,
        # 2,900 B of spills; tileiras 6,392 B)
    ],
)
def test_a_batch_runs_on_a_pair(target, tm, tn, init, hints, tmp_path):
    # a batched GEMM's (1, M, N) tiles (3-d loads viewed 2-d, a 3-d TMA store): each CTA's
    # boxes keep the batch's unit dim; B's halves multicast (sm_90) or split (sm_100) as in 2-d
    params = dict(ab="f16", out="f32", TM=tm, TN=tn, TK=64, BT=0, INIT=init)
    sizes = dict(M=2 * tm - 44, N=tn, K=192, Z=2)
    o = _run(fa.Config(0, "bgemm", target, params, hints, sizes), tmp_path)
    assert o.path == "async" and "a CTA pair" in o.plan and "TMA store" in o.plan, o.plan
    assert "cp.async.bulk.tensor.3d" in o.ptx


@pytest.mark.parametrize("ab,out,tn,epi", [("f16", "f32", 128, 0), ("bf16", "bf16", 256, 1)])
def test_sm90_pair_from_c(ab, out, tn, epi, tmp_path):
    # sm_90's pair runs each CTA's wgmmas on its own 128 rows: each loads its rows of C
    # straight in its fragment's order (rank 128 on; codegen/fragment_load.py) - a 300-row
    # problem, so the second pair's odd CTA reads rows past the end (zero-filled)
    sizes = dict(M=300, N=tn, K=192)
    cfg = _gemm("sm_90a", ab, out, 256, tn, 64, init=1, epi=epi, options={"num_ctas": 2})
    cfg.sizes = sizes
    o = _run(cfg, tmp_path, cta_pair=True)  # (one CTA holds these tiles: the rule's choice)
    assert "CTA pair" in o.plan and "TMA store" in o.plan, o.plan
    consumers = re.split(r"\$L__async_consumer_\d+:", o.ptx)[1].split("wgmma.fence")[0]
    assert "ld.global" in consumers and "st.shared" not in consumers  # (no exchange of C)


@pytest.mark.parametrize(
    "ab,out,tm,tn,tk,epi",
    [
        ("f16", "f32", 256, 128, 64, 0),  # 128 rows a CTA
        ("bf16", "bf16", 256, 256, 64, 1),  # 8 warps a CTA, half a row a thread
        ("f16", "f16", 128, 128, 64, 3),  # 64 rows a CTA (lanes 64 + r: the second half)
        ("i8", "i32", 256, 64, 128, 0),
    ],
)
def test_sm100_pair_from_c(ab, out, tm, tn, tk, epi, tmp_path):
    # sm_100's pair from C: each CTA writes its own rows of C into its TMEM (rank M / 2 on),
    # then its thread 0 arrives on the even CTA's barrier, and the issuer waits for both CTAs
    # before its first cta_group::2 MMA (a 300-row problem: the second pair's odd CTA reads
    # zeros). Before, such kernels kept one CTA with two warp groups.
    cfg = _gemm("sm_100a", ab, out, tm, tn, tk, init=1, epi=epi, options={"num_ctas": 2})
    cfg.sizes = dict(M=300, N=tn + 16, K=3 * tk)
    o = _run(cfg, tmp_path)
    assert "CTA pair" in o.plan and "TMA store" in o.plan, o.plan
    consumers = re.split(r"\$L__async_consumer_\d+:", o.ptx)[1]
    first = consumers.split("tcgen05.mma")[0]
    assert "tcgen05.st" in first and "st.shared" not in first  # (no exchange of C)
    assert "mbarrier.arrive.release.cluster.shared::cluster.b64" in first
    assert "mbarrier.try_wait.parity.acquire.cluster" in first


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_a_pair_of_64_rows_a_cta_at_n_256_keeps_one_warp_group(target, tmp_path):
    # 128 x 256 with num_ctas=2: each CTA holds 64 rows x 256 (128 accumulators a thread on
    # one warp group). The layout stage counted the whole tile and gave 8 warps, which neither
    # pair form takes: today's path (sm_100a: fuzzer seeds 160253 and 70029 spilled there)
    cfg = _gemm(target, "f16", "f32", 128, 256, 64, options={"num_ctas": 2})
    cfg.sizes = dict(M=300, N=320, K=192)
    o = _run(cfg, tmp_path, cta_pair=True)  # (sm_90's rule takes one CTA for this tile)
    assert o.path == "async" and "64 rows per CTA" in o.plan, o.plan
    assert "4 consumer + 4 producer warps" in o.plan, o.plan


def test_an_occupancy_cap_that_cannot_hold_todays_accumulators_is_dropped(tmp_path):
    # sm_120, 256 x 128 from C with occupancy 2: today's path (8 warps, 128 f32 accumulators a
    # thread) under the hint's .maxnreg 128 spilled 472 bytes (fuzzer seed 170108, whose
    # num_ctas=2 now divides the rows between two CTAs, as tileiras does: test_pair_rows.py).
    # The cap is dropped, as the async path drops it where its consumers cannot hold their
    # accumulators
    params = dict(ab="f16", out="f16", TM=256, TN=128, TK=32, BT=1, INIT=1, EPI=0)
    opts = {"occupancy": 2}
    o = _run(fa.Config(0, "gemm", "sm_120", params, opts, dict(M=69, N=128, K=96)), tmp_path)
    assert o.path == "today" and "maxnreg dropped" in o.plan, o.plan
    assert ".maxnreg" not in o.ptx


def test_sm100_pair_from_c_without_the_wait_is_caught(tmp_path):
    # the same kernel with the issuer's wait for both CTAs planted away: the strict simulator
    # reports the MMA accumulating into TMEM the other CTA wrote by tcgen05.st, unordered
    from tilegen.runtime.ptx.launch import run_ptx

    cfg = _gemm("sm_100a", "f16", "f32", 256, 128, 64, init=1, options={"num_ctas": 2})
    cfg.sizes = dict(M=256, N=128, K=128)
    o = _run(cfg, tmp_path)
    wait = re.search(
        r"(\$L__pair_wait_\d+):\n\s*mbarrier\.try_wait\.parity\.acquire\.cluster[^\n]*\n"
        r"\s*@!%p\d+ bra \1;\n",
        o.ptx,
    )
    assert wait, "the issuer's wait for both CTAs"
    planted = o.ptx.replace(wait.group(0), "")
    from tilegen.runtime.ptxas import assemble

    assert assemble(planted, 100)[0][:4] == b"\x7fELF"  # (legal PTX, only wrong)
    args, grid, *_ = fa.problem(cfg, np.random.default_rng(cfg.seed))
    with pytest.raises(Exception, match="nothing orders that store before the MMA's issue"):
        run_ptx(planted, args, grid, strict_async=True, max_steps=50_000_000)


@pytest.mark.parametrize("ab,out,tk", [("bf16", "bf16", 64), ("e4m3", "f16", 128)])
def test_sm100_two_accumulators_take_a_bias_row(ab, out, tk, tmp_path):
    # a bias row loaded after the loop: before section 36 the rows went through the scratch
    # buffer to the layout the epilogue's ops were given (an st.global epilogue); now the bias
    # is read in the TMEM rows' order and the tile goes out by TMA
    cfg = _gemm("sm_100a", ab, out, 256, 128, tk, epi=2, sizes=dict(M=300, N=144, K=2 * tk))
    o = _run(cfg, tmp_path)
    assert o.path == "async", o.plan
    assert o.plan.endswith("TMA store") and "8 consumer" in o.plan, o.plan


@pytest.mark.parametrize(
    "target,ab,out,tm,tn,tk",
    [
        ("sm_80", "f16", "f32", 128, 256, 64),
        ("sm_80", "bf16", "bf16", 256, 128, 64),
        ("sm_90a", "f32", "f32", 128, 128, 64),
    ],
)
def test_wide_tiles_take_two_warp_groups(target, ab, out, tm, tn, tk, tmp_path):
    """sm_80's mma.sync K loop of a 128 x 256 (or 256 x 128) tile: 4 warps would hold 256 f32
    accumulators a thread (2,228 B of spills; tileiras 13.5 keeps 128 threads and spills
    1,112 B); 8 warps hold 128, without spills. An f32 x f32 dot (no tensor cores) of 128 x 128
    takes 8 warps on every target: its 128 results and the fma dot's vector loads."""
    o = _run(_gemm(target, ab, out, tm, tn, tk), tmp_path)
    assert ".reqntid 256, 1, 1" in o.ptx


#: fuzzer seeds: a GEMM and an attention forward on each async target, and what they found
COVER = [1, 3, 5]
FOUND = {
    148: "sm_100a tcgen05 dot on today's pipelined path read cp.async stages without "
    "fence.proxy.async (strict ptxsim)",
    4: "e4m3 B^T on sm_90a: today's path (the async path refused a transposed B)",
    8012: "batched sm_90a GEMM, num_ctas=2: once the 3-d store took TMA, the pair took the "
    "batch's 3-d boxes and its B multicast never completed (strict ptxsim: deadlock); batches "
    "pair again since docs/pipelines.md section 56 (test_a_batch_runs_on_a_pair)",
}


#: sm_120 async-path findings: a 128 x 128 tile at occupancy 2 spilled 704 B there (its 128
#: accumulator registers fill the occupancy's budget): today's path, without spills
FOUND[30080] = "sm_120 GEMM 128x128, occupancy 2: the async path spilled 704 B; today's path"
FOUND[30114] = (
    "sm_100a 256x256x128 bf16, num_ctas=2: the pipelining pass's gate measured two stages of "
    "the whole tile (256 KB), not a CTA's half; today's path spilled 1,672 B"
)

#: section 37: 256 x 256 tiles on one sm_100a CTA from C took today's path and spilled where
#: tileiras builds them without; C is written into TMEM by column chunks now
FOUND[70225] = "sm_100a e4m3 256x256x128 from C, x alpha: today's path spilled 416 B"
FOUND[100153] = "sm_100a 256x256 from C: today's path spilled"
FOUND[100360] = "sm_100a 256x256 from C: today's path spilled"

#: a pair of 64 rows a CTA with N 256: the layout stage gave the kernel 8 warps, which the
#: pair's forms do not take (today's path spilled 272 / 672 B); 4 warps now, half a row a thread
FOUND[160253] = "sm_100a e4m3 128x256 num_ctas=2: today's path spilled 272 B"
FOUND[70029] = "sm_100a e4m3 128x256 num_ctas=2, occupancy 2: today's path spilled 672 B"
FOUND[180094] = (
    "sm_100a i8 128x256 from C, num_ctas=2, occupancy 2: the rule reserved a scratch for the "
    "64-row pair's accumulator (M 64 was registers-only on 4 warps of one CTA only), so its TMA "
    "store did not fit the ring and 4 warps held the whole tile on today's path (456 B spilled)"
)
#: a bias row beside a TMEM row of 128 accumulators under 8 warps' 168 registers: all 128 of
#: its elements were read before the adds (256 live values); read by column chunks now
FOUND[170014] = "sm_100a f16 -> f32 256x128 + bias row: the async path spilled 16 B"

#: rows of no 4-byte multiple (no TMA, no cp.async): the register path held whole operand tiles
#: in registers; they are copied through registers a 16-byte chunk at a time now
#: (tests/test_unaligned_operands.py)
FOUND[200046] = "sm_90a i8 256x64, B^T, occupancy 2, unaligned: today's path spilled 228 B"
FOUND[200288] = "sm_90a batched bf16 128x128x128, B^T, unaligned: today's path spilled 88 B"
#: sm_80: a staged copy whose padded layouts passed 48 KB went back to the register path (and
#: spilled) though the target's scratch allows more; and a 128 x 256 f32 accumulator on 4 warps
#: (256 registers a thread; tileiras spills 936 B there) takes 8 warps now
FOUND[221861] = "sm_80 f16 128x64x128, B^T, unaligned: the register path spilled 72 B"
FOUND[220233] = "sm_80 f16 128x256x32 from C, num_ctas=2: 4 warps spilled 732 B"
#: f32 x f32 dots (no tensor-core form, the fma dot): 8 warps from 128 x 128, no CTA pair, and
#: the dot's vector loads within the registers an occupancy hint leaves
FOUND[240999] = (
    "sm_100a f32 256x128 from C, num_ctas=2: the pair's hint kept 4 warps for a dot no pair "
    "takes (no tensor-core form); 1,084 B spilled"
)
FOUND[240318] = "sm_100a f32 128x128, occupancy 2: the fma dot's vectors spilled under .maxnreg"
FOUND[240703] = "sm_90a f32 128x128 from C, occupancy 2: the same"
#: sm_80 attention whose two dots' results pass 128 registers a thread on 4 warps: 8 warps now
#: (tileiras keeps 4 and spills 576 / 416 B)
FOUND[230508] = "sm_80 attention 128x64, d 128: 4 warps spilled 460 B"
FOUND[250385] = "sm_80 bf16 attention 128x128, d 64: 4 warps spilled 232 B"
#: today's path on sm_100a, 256 x 256 on one CTA (the pair refused: the tile passes the ring):
#: its tensor-memory accumulator, stored as it is, is read and stored a chunk of columns at a
#: time (the whole row in registers spilled 36 B, 128 B once its stores were vectors)
FOUND[310032] = "sm_100a bf16 256x256, num_ctas=2, occupancy 2: the stored TMEM row spilled"
#: ... and through an elementwise epilogue, the bias row read from shared memory by chunks
FOUND[220372] = "sm_100a f16 256x256, + bias row, x row scale: the TMEM row spilled 232 B"
FOUND[221133] = "sm_100a bf16 256x256, + bias row, num_ctas=2: the TMEM row spilled 128 B"
#: 8-bit dots on sm_100a's today's path took mma.sync (256 accumulators a thread), C whole
FOUND[342545] = "sm_100a e4m3 256x256, + bias, x row scale: mma.sync spilled 2,240 B (tcgen05)"
FOUND[325621] = "sm_100a i8 256x256 from C: C loaded whole into TMEM spilled 128 B (by chunks)"
#: 256-row tiles one CTA cannot hold: divided between two CTAs (docs/pipelines.md section 40)
FOUND[260005] = "sm_90a attention 256x64, d 128, num_ctas=2: one CTA spilled 480 B"
FOUND[300138] = "sm_90a f16 256x256 from C, no hint: one CTA spilled 2,848 B (the pair now)"
#: strict ptxsim's wgmma reads retired per warp group (docs/pipelines.md section 42): the
#: bias row went into the ring's end, over the last stage, before the other warp group's
#: wgmmas were done with it
FOUND[520094] = "sm_90a f16 128x256, + bias row: side vector written over a stage still read"
#: operands TMA cannot describe, copied by the producer warp group's threads (section 43): the
#: tcgen05 consumers wrote C into the scratch while a slower warp could still read C's exchange
FOUND[602780] = "sm_100a batched e4m3 64x128 from C: C's scratch rewritten without a barrier"
FOUND[600628] = "sm_100a batched f16 256x128, both operands by threads: the producer spilled 52 B"
FOUND[640356] = "sm_90a f16 128x64 at occupancy 2, both by threads: a 32-register producer spilled"
FOUND[668719] = (
    "sm_100a f16 128x256 at occupancy 2 (cap dropped): the producer kept 32, spilled 168 B"
)
#: sm_100a's plain store (no TMA: an unaligned row stride) from the TMEM rows by chunks
#: (section 44): before, the rows went through a scratch buffer the tile's size, and a bias row
#: was loaded whole beside a whole row of accumulators
FOUND[704626] = "sm_100a f16 128x256 on 8 warps, + bias row, st.global: spilled 128 B"
FOUND[641800] = "sm_100a e4m3 128x256 on 8 warps, + bias row, st.global: spilled 124 B"
#: ... and the loop's trip count, live across the roles' split, spilled (4 B) where the
#: producer copied both operands: each role now reloads the bounds from shared memory
FOUND[722894] = "sm_100a bf16 128x256 from C, both operands by threads: the trip count spilled"
FOUND[735031] = "sm_100a batched f16 128x128 from C, st.global from TMEM: the trip count spilled"
#: a producer copying both operands beside tcgen05 consumers gets 96 registers (the consumers'
#: 208 hold a chunk of the accumulator, not a row); at 48 it spilled 16 B
FOUND[725396] = "sm_100a e4m3 256x256 from C, both operands by threads: spilled 16 B"
#: ... and M 64 on 4 warps, half a row a thread by 16x32bx2, the bias row read by chunks
FOUND[736918] = "sm_100a f16 64x256, + bias row, st.global: spilled 40 B"
FOUND[735923] = "sm_100a e4m3 64x256 from C, + bias row, occupancy 2, st.global: spilled 8 B"
#: sm_90a tf32 with A from registers (docs/pipelines.md section 55): the per-step ldmatrix
#: addresses, four registers live across the loop, spilled 4 B beside a bias row's epilogue;
#: one register and an XOR per step now
FOUND[1700166] = "sm_90a tf32 128x128x32, + bias row: spilled 4 B"
FOUND[1701954] = "sm_90a tf32 128x128x32, + bias row, N 4: spilled 4 B"
#: (section 55's follow-ups) a thread-derived row index hoisted to the kernel's entry stayed
#: live across the producer's setmaxnreg.dec; the consumers' set-up is hoisted into their branch
FOUND[1701714] = "sm_100a tf32 64x256x32 from C, bias row + scale per row, occupancy 2: 4 B"
#: a B^T converted to tf32 was counted three B^T buffers it does not need (the permute seen
#: through the conversion now): today's path spilled
FOUND[1701416] = "sm_90a tf32 64x256x64 B^T: two stages and the scratch 'did not fit'; 364 B"
FOUND[1709732] = "sm_90a tf32 64x256x64 B^T, unaligned: the same, 340 B"
#: one warp group's m64n256 beside the consumers' B^T copy keeps A in the stage
FOUND[1712008] = "sm_90a tf32 64x256x32, bias row + scale per row: A from registers, 12 B"
#: two warp groups at the launch's 168 registers: the consumers take the producer's now
FOUND[1705540] = "sm_90a tf32 128x256x32 B^T, num_ctas=2, bias row, unaligned C: 268 B"
#: both operands copied 4 bytes at a time by the producer's threads under occupancy 2: 48
#: registers spilled the copies; the hint's cap is dropped now
FOUND[1714324] = "sm_90a tf32 128x128x64 B^T, unaligned, occupancy 2: the copies spilled 336 B"

#: seeds tilegen refused with a located error where tileiras compiles: they must compile now
COMPILE = {
    4013: "sm_120 GEMM 128x256, f32 out: the epilogue's layout conversion needed 128 KB of "
    "scratch on a 99 KB SM ('the kernel needs 131072 bytes of shared memory'); stored as is",
    5067: "sm_120 GEMM 256x128, f32 out, bias: the same",
    5129: "sm_120 GEMM 256x128 with C as the initial value: C's conversion into the "
    "accumulator's layout needed 128 KB; loaded in that layout now",
    150586: "sm_120 batched GEMM 128x256 from C (a (1, M, N) tile through its view): the same "
    "128 KB conversion; the load takes the layout with the unit dim put back now",
    150687: "sm_120 batched i8 GEMM 256x128 from C: the same",
}


@pytest.mark.parametrize("seed", COVER + sorted(FOUND) + sorted(COMPILE))
def test_fuzzer_seed(seed, tmp_path):
    o = fa.run_one(seed, str(tmp_path))
    allowed = ("ok",) if seed in COMPILE else ("ok", "refused")
    assert o.status in allowed, f"seed {seed}: {o.status}: {o.detail}"


def test_sm90_b_transposed_by_the_consumers_counts_its_buffers_in_the_k_split(tmp_path):
    # 64 x 256 x 64 tf32, B K x N: two 80 KB stages fit, but not beside three 64 KB B^T
    # buffers; the K tile is staged in two parts (k_tile_split) and the GEMM takes the async
    # path (it fell back to today's path and spilled 360 B)
    o = _run(_gemm("sm_90a", "tf32", "f32", 64, 256, 64, epi=2), tmp_path)
    assert o.path == "async", o.plan
    assert "64x256x32 tf32" in o.plan


@pytest.mark.parametrize(
    "seed, tile",
    [
        # sm_90a 128 x 256 x 128 i8 from C: two 48 KB stages beside 96 KB of B^T buffers left
        # the 128 KB tile neither a scratch buffer nor a ring to wait in (today's path: 40 B)
        (1800281, "128x256x64 i8"),
        # the same on a pair of 256 x 256 (each CTA's 128 KB of rows: 2,960 B)
        (2000950, "256x256x64 i8"),
        # a pair under an occupancy hint of 2 (no SM holds two): the ring of the whole opt-in
        # holds the tile (2,968 B; tileiras spills 3,080)
        (1600603, "256x256x64 f16"),
    ],
)
def test_the_ring_leaves_the_epilogue_its_room(seed, tile, tmp_path):
    # k_tile_split asks the async rule's ring_stages whether a part's ring leaves the
    # epilogue its room (a scratch buffer, or a ring holding the TMA store's tile)
    o = fa.run_one(seed, str(tmp_path))
    assert o.status == "ok", f"seed {seed}: {o.status}: {o.detail}"
    assert o.path == "async", o.plan
    assert tile in o.plan and "TMA store" in o.plan, o.plan


@pytest.mark.parametrize(
    "tm, tk, bt, init, epi",
    [
        (256, 32, 0, 0, 0),  # B K x N: each CTA transposes its multicast B into B^T buffers
        (256, 32, 1, 1, 4),  # B^T: rounded in place in each CTA's multicast stage; from C
        (128, 32, 0, 0, 1),  # 64 rows a CTA (with --cta-pair below)
    ],
)
def test_sm90_tf32_pair_rounds_its_own_stage(tm, tk, bt, init, epi, tmp_path):
    # a tf32 tile no CTA holds (256 x 256: 256 accumulators a thread on one CTA; today's path
    # spilled 1.9-3.3 KB, tileiras 6-11 KB) runs on a pair: each CTA's consumers round A (from
    # registers) and B in their own stage, then wgmma reads it, as on one CTA
    n = 256 if tm == 256 else 128
    cfg = _gemm("sm_90a", "tf32", "f32", tm, n, tk, bt, epi, init, options={"num_ctas": 2})
    cfg.sizes = dict(M=2 * tm, N=256, K=3 * tk)
    o = _run(cfg, tmp_path, **({} if tm == 256 else {"cta_pair": True}))
    assert o.path == "async" and "a CTA pair" in o.plan and "TMA store" in o.plan, o.plan
    assert ".multicast::cluster" in o.ptx and "cvt.rn.tf32.f32" in o.ptx


def test_sm90_tf32_pair_without_the_proxy_fence_is_caught(tmp_path):
    # B^T rounded in place in the stage the other CTA's TMA multicasts into: without the
    # consumers' fence.proxy.async, the wgmmas (the async proxy) read the generic writes
    from tilegen.runtime.ptx.launch import run_ptx
    from tilegen.runtime.ptx.sim.cta import PtxSimError

    cfg = _gemm("sm_90a", "tf32", "f32", 256, 256, 32, bt=1)
    cfg.sizes = dict(M=256, N=256, K=96)
    o = _run(cfg, tmp_path)
    lines = o.ptx.splitlines(keepends=True)
    top = next(i for i, line in enumerate(lines) if "async_consume" in line and ":" in line)
    fences = [i for i, line in enumerate(lines) if i > top and "fence.proxy.async" in line]
    assert fences
    lines[fences[0]] = "\n"
    args, grid, idx, *_ = fa.problem(cfg, np.random.default_rng(0))
    with pytest.raises(PtxSimError, match="proxy"):
        run_ptx("".join(lines), args, grid, strict_async=True, max_steps=50_000_000)


def test_a_loop_bound_read_from_memory_keeps_todays_path(tmp_path):
    # the producer warp group needs the K loop's trip count, but only the consumers read
    # memory before the loop (section 29): the rule refuses, with this reason, and today's
    # path computes the product
    import numpy as np

    from cutile_kernels_prologue import export_gemm_loaded_trips, problem
    from tilegen.runtime import driver
    from tilegen.runtime.options import CompileOptions
    from tilegen.runtime.ptx.launch import run_ptx

    a, b, c, trips, want = problem(np.random.default_rng(3))
    path = tmp_path / "k.tileirbc"
    export_gemm_loaded_trips(str(path), a, b, c, trips)
    out = driver.compile_source(path, CompileOptions(target="sm_90a"), until="ptx")
    (d,) = out.async_plan
    assert not d.taken
    assert d.reason == (
        "the K loop uses a scalar of 'nv_tileaa.load', which reads memory before the loop"
    )
    got = run_ptx(out.ptx, [a, b, c, trips], (2, 2, 1), strict_async=True)[2]
    np.testing.assert_array_equal(np.asarray(got), want)
