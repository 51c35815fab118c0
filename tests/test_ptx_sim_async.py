"""Asynchronous PTX in the simulator: a TMA producer/consumer pipeline (two stages, full and
empty mbarriers, a TMA store of the result) runs to the right answer in both completion modes,
and the strict async mode catches each hazard planted in it with an exact message: a consumer
that reads a stage before its phase completes, a missing fence.proxy.async before an
async-proxy read, a wrong expected byte count (too few and too many), and a producer that
refills a stage its consumers still read. Also tcgen05 (tensor memory, mma, ld/st, commit),
bulk copies and mbarrier bookkeeping on hand-written PTX."""

from __future__ import annotations

import numpy as np
import pytest

from tilegen.runtime.ptx.launch import PtxSimError, run_ptx

PIPELINE = """.version 8.8
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 k_in, .param .u32 k_n, .param .u32 k_s,
                  .param .u64 k_out, .param .u32 k_m, .param .u32 k_t,
                  .hidden .param .align 64 .b8 k_min[128], .hidden .param .align 64 .b8 k_mout[128])
.reqntid 64
{
    .reg .pred %p<8>;
    .reg .b32 %r<32>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<8>;
    .shared .align 128 .b8 smem[512];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, smem;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra $READY;
    mbarrier.init.shared.b64 [smem+256], 1;
    mbarrier.init.shared.b64 [smem+264], 1;
    mbarrier.init.shared.b64 [smem+272], 32;
    mbarrier.init.shared.b64 [smem+280], 32;
$READY:
    bar.sync 0;
    setp.lt.u32 %p2, %r1, 32;
    @%p2 bra $CONSUMER;
    setp.ne.u32 %p3, %r1, 32;
    @%p3 bra $DONE;
    mov.b64 %rd1, k_min;
    cvta.param.u64 %rd2, %rd1;
    mov.u32 %r10, 0;
$PRODUCE:
    and.b32 %r11, %r10, 1;
    shr.u32 %r12, %r10, 1;
    and.b32 %r12, %r12, 1;
    xor.b32 %r12, %r12, 1;
    shl.b32 %r13, %r11, 3;
    add.s32 %r14, %r2, %r13;
    add.s32 %r15, %r14, 256;
    add.s32 %r16, %r14, 272;
    shl.b32 %r17, %r11, 7;
    add.s32 %r18, %r2, %r17;
    shl.b32 %r19, %r10, 5;
$EMPTY:
    mbarrier.try_wait.parity.shared.b64 %p4, [%r16], %r12;
    @!%p4 bra $EMPTY;
    mbarrier.arrive.expect_tx.shared.b64 _, [%r15], 128;
    cp.async.bulk.tensor.1d.shared::cta.global.tile.mbarrier::complete_tx::bytes [%r18], [%rd2, {%r19}], [%r15];
    add.s32 %r10, %r10, 1;
    setp.lt.u32 %p5, %r10, 4;
    @%p5 bra $PRODUCE;
    bra.uni $DONE;
$CONSUMER:
    mov.f32 %f1, 0f00000000;
    shl.b32 %r20, %r1, 2;
    mov.u32 %r10, 0;
$CONSUME:
    and.b32 %r11, %r10, 1;
    shr.u32 %r12, %r10, 1;
    and.b32 %r12, %r12, 1;
    shl.b32 %r13, %r11, 3;
    add.s32 %r14, %r2, %r13;
    add.s32 %r15, %r14, 256;
    add.s32 %r16, %r14, 272;
    shl.b32 %r17, %r11, 7;
    add.s32 %r18, %r2, %r17;
    add.s32 %r21, %r18, %r20;
$FULL:
    mbarrier.try_wait.parity.shared.b64 %p4, [%r15], %r12;
    @!%p4 bra $FULL;
    ld.shared.f32 %f2, [%r21];
    mbarrier.arrive.shared.b64 _, [%r16];
    add.f32 %f1, %f1, %f2;
    add.s32 %r10, %r10, 1;
    setp.lt.u32 %p5, %r10, 4;
    @%p5 bra $CONSUME;
    add.s32 %r22, %r2, 384;
    add.s32 %r23, %r22, %r20;
    st.shared.f32 [%r23], %f1;
    fence.proxy.async.shared::cta;
    bar.sync 1, 32;
    setp.ne.u32 %p6, %r1, 0;
    @%p6 bra $DONE;
    mov.b64 %rd3, k_mout;
    cvta.param.u64 %rd4, %rd3;
    mov.u32 %r24, 0;
    cp.async.bulk.tensor.1d.global.shared::cta.tile.bulk_group [%rd4, {%r24}], [%r22];
    cp.async.bulk.commit_group;
    cp.async.bulk.wait_group.read 0;
$DONE:
    ret;
}
"""
DATA = np.arange(128, dtype=np.float32)
WANT = DATA.reshape(4, 32).sum(axis=0)
MAPS = [{"array": 0, "box": [32], "swizzle": 0}, {"array": 1, "box": [32], "swizzle": 0}]


def line_of(src: str, text: str) -> int:
    return next(i for i, ln in enumerate(src.splitlines(), 1) if text in ln)


def run(src: str, strict: bool = True) -> np.ndarray:
    args = [DATA, np.zeros(32, np.float32)]
    return run_ptx(src, args, (1, 1, 1), file="p.ptx", tensor_maps=MAPS, strict_async=strict)[1]


@pytest.mark.parametrize("strict", [False, True])
def test_pipeline_runs_in_both_modes(strict) -> None:
    np.testing.assert_array_equal(run(PIPELINE, strict), WANT)


def test_read_before_the_phase_completes() -> None:
    src = PIPELINE.replace(
        "$FULL:\n    mbarrier.try_wait.parity.shared.b64 %p4, [%r15], %r12;\n    @!%p4 bra $FULL;\n",
        "",
    )
    ld, tma = line_of(src, "ld.shared.f32"), line_of(src, "cp.async.bulk.tensor.1d.shared")
    with pytest.raises(PtxSimError) as e:
        run(src)
    assert str(e.value) == (
        f"p.ptx:{ld}: error: ld.shared.f32: warp 0 reads shared byte 0x0 while "
        f"cp.async.bulk.tensor (line {tma}) is still writing it: the mbarrier phase that "
        "completes the copy has not completed (a read before the wait?)"
    )


def test_missing_fence_proxy_async() -> None:
    src = PIPELINE.replace("    fence.proxy.async.shared::cta;\n", "")
    store, st = line_of(src, "cp.async.bulk.tensor.1d.global"), line_of(src, "st.shared.f32")
    with pytest.raises(PtxSimError) as e:
        run(src)
    assert str(e.value) == (
        f"p.ptx:{store}: error: cp.async.bulk.tensor.1d.global.shared::cta.tile.bulk_group: "
        "warp 0 reads shared byte 0x180 through the async proxy, but the generic write at "
        f"line {st} (warp 0) was not followed by fence.proxy.async"
    )


def test_expected_bytes_fewer_than_delivered() -> None:
    src = PIPELINE.replace("[%r15], 128;", "[%r15], 64;")
    init, exp = line_of(src, "[smem+256], 1;"), line_of(src, "expect_tx")
    tma, wait = line_of(src, "cp.async.bulk.tensor.1d.shared"), line_of(src, "[%r15], %r12;")
    with pytest.raises(PtxSimError) as e:
        run(src)
    assert str(e.value) == (
        f"p.ptx:{wait}: error: mbarrier.try_wait.parity.shared.b64: mbarrier at shared 0x100 "
        f"(init at line {init}, count 1) in phase 0: 0 of 1 arrivals pending, expect-tx 64 "
        f"bytes (line {exp}) but 128 delivered (line {tma}): the copies deliver more bytes "
        "than expected"
    )


def test_expected_bytes_more_than_delivered() -> None:
    src = PIPELINE.replace("[%r15], 128;", "[%r15], 256;")
    init, exp = line_of(src, "[smem+256], 1;"), line_of(src, "expect_tx")
    tma = line_of(src, "cp.async.bulk.tensor.1d.shared")
    stuck = (
        "mbarrier at shared 0x{:x} (init at line {}, count 1) in phase 0: 0 of 1 arrivals "
        f"pending, expect-tx 256 bytes (line {exp}) but 128 delivered (line {tma})"
    )
    for strict in (True, False):  # the phases never complete in either mode
        with pytest.raises(PtxSimError) as e:
            run(src, strict)
        assert str(e.value) == (
            "p.ptx: error: deadlock: mbarrier waits can never complete: "
            + stuck.format(0x100, init)
            + "; "
            + stuck.format(0x108, init + 1)
        )


def test_stage_refilled_while_still_read() -> None:
    # the consumers release the stage (arrive on `empty`) before reading it
    src = PIPELINE.replace(
        "    ld.shared.f32 %f2, [%r21];\n    mbarrier.arrive.shared.b64 _, [%r16];\n",
        "    mbarrier.arrive.shared.b64 _, [%r16];\n    ld.shared.f32 %f2, [%r21];\n",
    )
    tma, ld = line_of(src, "cp.async.bulk.tensor.1d.shared"), line_of(src, "ld.shared.f32")
    with pytest.raises(PtxSimError) as e:
        run(src)
    assert str(e.value) == (
        f"p.ptx:{tma}: error: "
        "cp.async.bulk.tensor.1d.shared::cta.global.tile.mbarrier::complete_tx::bytes: the "
        f"copy overwrites shared byte 0x0, which warp 0 read at line {ld}, but nothing orders "
        "that read before the copy (a stage refilled before its consumers released it)"
    )


def test_store_source_overwritten_before_wait_group_read() -> None:
    src = PIPELINE.replace(
        "    cp.async.bulk.wait_group.read 0;\n",
        "    st.shared.f32 [%r22], %f1;\n    cp.async.bulk.wait_group.read 0;\n",
    )
    store = line_of(src, "cp.async.bulk.tensor.1d.global")
    st = line_of(src, "st.shared.f32 [%r22]")
    with pytest.raises(PtxSimError) as e:
        run(src)
    assert str(e.value).startswith(
        f"p.ptx:{st}: error: st.shared.f32: warp 0 overwrites shared byte 0x180, which "
        f"cp.async.bulk.tensor (store) (line {store}) may still be reading"
    )


def test_exit_with_a_bulk_store_still_reading() -> None:
    src = PIPELINE.replace("    cp.async.bulk.wait_group.read 0;\n", "")
    store = line_of(src, "cp.async.bulk.tensor.1d.global")
    with pytest.raises(PtxSimError, match=rf"line {store}\) is still reading when its thread"):
        run(src)
    np.testing.assert_array_equal(run(src, strict=False), WANT)


def test_more_arrivals_than_the_count() -> None:
    src = PIPELINE.replace(
        "mbarrier.arrive.shared.b64 _, [%r16];", "mbarrier.arrive.shared.b64 _, [%r16], 48;"
    )
    for strict in (True, False):
        with pytest.raises(PtxSimError, match="count 32.* more arrivals than its count"):
            run(src, strict)


def kmajor(mat: np.ndarray, lbo: int, sbo: int) -> np.ndarray:
    """`mat` (rows x 16 f16) as bytes in the canonical K-major, no-swizzle tcgen05 layout."""
    rows = mat.shape[0]
    out = np.zeros(rows // 8 * sbo, np.uint8)
    raw = mat.astype(np.float16).view(np.uint8).reshape(rows, 16, 2)
    for r in range(rows):
        for k in range(16):
            a = (r // 8) * sbo + (k // 8) * lbo + (r % 8) * 16 + (k % 8) * 2
            out[a : a + 2] = raw[r, k]
    return out


def tcgen05_kernel(m: int, lines_mma: str, ld_shape: str = "32x32b.x64") -> str:
    regs = ", ".join(f"%r{100 + i}" for i in range(64))
    stores = "\n".join(f"    st.global.b32 [%rd9+{4 * i}], %r{100 + i};" for i in range(64))
    return f""".version 8.8
.target sm_100a
.address_size 64
.visible .entry k(.param .u64 k_a, .param .u32 k_an, .param .u32 k_as,
                  .param .u64 k_out, .param .u32 k_on, .param .u32 k_os)
.reqntid 128
{{
    .reg .pred %p<8>;
    .reg .b32 %r<200>;
    .reg .b64 %rd<32>;
    .shared .align 1024 .b8 smem[8192];
    mov.u32 %r1, %tid.x;
    shr.u32 %r2, %r1, 5;
    mov.u32 %r3, smem;
    setp.ne.u32 %p1, %r2, 0;
    @%p1 bra $NOALLOC;
    tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [smem+6144], 64;
    tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;
$NOALLOC:
    setp.ne.u32 %p2, %r1, 0;
    @%p2 bra $COPY;
    mbarrier.init.shared.b64 [smem+6160], 1;
$COPY:
    ld.param.b64 %rd1, [k_a];
    mul.wide.u32 %rd2, %r1, 48;
    add.s64 %rd3, %rd1, %rd2;
    mul.lo.u32 %r4, %r1, 48;
    add.s32 %r5, %r3, %r4;
    ld.global.v4.b32 {{%r10, %r11, %r12, %r13}}, [%rd3];
    st.shared.v4.b32 [%r5], {{%r10, %r11, %r12, %r13}};
    ld.global.v4.b32 {{%r10, %r11, %r12, %r13}}, [%rd3+16];
    st.shared.v4.b32 [%r5+16], {{%r10, %r11, %r12, %r13}};
    ld.global.v4.b32 {{%r10, %r11, %r12, %r13}}, [%rd3+32];
    st.shared.v4.b32 [%r5+32], {{%r10, %r11, %r12, %r13}};
    fence.proxy.async.shared::cta;
    tcgen05.fence::before_thread_sync;
    bar.sync 0;
    tcgen05.fence::after_thread_sync;
    ld.shared.b32 %r6, [smem+6144];
    @%p2 bra $WAIT;
{lines_mma}
    tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [smem+6160];
$WAIT:
    mbarrier.try_wait.parity.shared.b64 %p3, [smem+6160], 0;
    @!%p3 bra $WAIT;
    tcgen05.fence::after_thread_sync;
    shl.b32 %r7, %r2, 21;
    add.s32 %r8, %r6, %r7;
    tcgen05.ld.sync.aligned.{ld_shape}.b32 {{{regs}}}, [%r8];
    tcgen05.wait::ld.sync.aligned;
    ld.param.b64 %rd7, [k_out];
    mul.wide.u32 %rd8, %r1, 256;
    add.s64 %rd9, %rd7, %rd8;
{stores}
    tcgen05.fence::before_thread_sync;
    bar.sync 0;
    @%p1 bra $END;
    tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r6, 64;
$END:
    ret;
}}
"""


def mma_lines(m: int, n: int, enable: str = "0") -> str:
    # A (M x 16) at smem+0, B (N x 16) at smem+4096: LBO 128, SBO 256, no swizzle, version 1
    idesc = (1 << 4) | ((n >> 3) << 17) | ((m >> 4) << 24)
    desc = (128 >> 4) << 16 | (256 >> 4) << 32 | 1 << 46
    return f"""    mov.b64 %rd20, {desc};
    shr.u32 %r40, %r3, 4;
    cvt.u64.u32 %rd21, %r40;
    or.b64 %rd22, %rd20, %rd21;
    add.s64 %rd23, %rd22, 256;
    mov.b32 %r41, {idesc};
    setp.ne.u32 %p4, {enable}, 0;
    mov.b32 %r42, 0;
    tcgen05.mma.cta_group::1.kind::f16 [%r6], %rd22, %rd23, %r41, {{%r42, %r42, %r42, %r42}}, %p4;"""


RNG = np.random.default_rng(3)


def test_tcgen05_mma_m128_into_tensor_memory() -> None:
    # 128 threads stage A (128 x 16) and B (64 x 16) in shared memory; one thread issues the
    # mma (D = A B^T, f32, in 64 allocated columns), commits it to an mbarrier; each warp
    # loads its 32 lanes x 64 columns with tcgen05.ld.32x32b.x64
    a = RNG.standard_normal((128, 16)).astype(np.float16)
    b = RNG.standard_normal((64, 16)).astype(np.float16)
    raw = np.zeros(6144, np.uint8)
    raw[:4096] = kmajor(a, 128, 256)
    raw[4096:6144] = kmajor(b, 128, 256)
    src = tcgen05_kernel(128, mma_lines(128, 64))
    want = a.astype(np.float64) @ b.astype(np.float64).T
    for strict in (False, True):
        out = run_ptx(src, [raw, np.zeros(128 * 64, np.float32)], (1, 1, 1), strict_async=strict)
        np.testing.assert_allclose(out[1].reshape(128, 64), want, rtol=1e-6, atol=1e-6)


def test_tcgen05_strict_reads_before_commit_and_leaks() -> None:
    a = np.ones((128, 16), np.float16)
    raw = np.zeros(6144, np.uint8)
    raw[:4096] = kmajor(a, 128, 256)
    raw[4096:6144] = kmajor(a[:64], 128, 256)
    args = [raw, np.zeros(128 * 64, np.float32)]
    src = tcgen05_kernel(128, mma_lines(128, 64))
    early = src.replace("    mbarrier.try_wait.parity.shared.b64 %p3, [smem+6160], 0;\n", "")
    early = early.replace("    @!%p3 bra $WAIT;\n", "")
    with pytest.raises(PtxSimError, match="reads tensor memory while tcgen05.mma .* is still"):
        run_ptx(early, args, (1, 1, 1), strict_async=True)
    leak = src.replace("    tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r6, 64;\n", "")
    with pytest.raises(PtxSimError, match="exits with tensor memory still allocated"):
        run_ptx(leak, args, (1, 1, 1))
    quarter = src.replace("shl.b32 %r7, %r2, 21;", "mov.b32 %r7, 0;")
    with pytest.raises(PtxSimError, match="warp 1 may access tensor-memory lanes 32..63 only"):
        run_ptx(quarter, args, (1, 1, 1))
    nofence = src.replace("    fence.proxy.async.shared::cta;\n", "")
    with pytest.raises(PtxSimError, match="was not followed by fence.proxy.async"):
        run_ptx(nofence, args, (1, 1, 1), strict_async=True)


def test_tcgen05_commit_tracks_only_earlier_mmas() -> None:
    """Two MMAs into one D, each committed to its own mbarrier: a wait for the first commit
    does not cover the second MMA (a K loop that waits for step i - 1 while step i runs).
    The simulator once let later MMAs join an earlier commit's tracked set."""
    a = np.ones((128, 16), np.float16)
    raw = np.zeros(6144, np.uint8)
    raw[:4096] = kmajor(a, 128, 256)
    raw[4096:6144] = kmajor(a[:64], 128, 256)
    args = [raw, np.zeros(128 * 64, np.float32)]
    commit = "    tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 "
    src = tcgen05_kernel(
        128, mma_lines(128, 64) + f"\n{commit}[smem+6160];\n" + mma_lines(128, 64, "1")
    )
    head, tail = src.rsplit(f"{commit}[smem+6160];", 1)
    src = head + f"{commit}[smem+6168];" + tail
    init = "    mbarrier.init.shared.b64 [smem+6160], 1;\n"
    src = src.replace(init, init + init.replace("6160", "6168"))
    from tilegen.runtime.codegen.driver import assemble, find_ptxas

    if find_ptxas() is not None:  # legal PTX
        assemble(src, 100)
    with pytest.raises(PtxSimError, match="reads tensor memory (while|written by) tcgen05.mma"):
        run_ptx(src, args, (1, 1, 1), strict_async=True)
    wait = "    @!%p3 bra $WAIT;\n"
    second = "$WAIT2:\n    mbarrier.try_wait.parity.shared.b64 %p5, [smem+6168], 0;\n"
    out = run_ptx(
        src.replace(wait, wait + second + "    @!%p5 bra $WAIT2;\n"),
        args,
        (1, 1, 1),
        strict_async=True,
    )
    np.testing.assert_allclose(out[1].reshape(128, 64), 32.0)  # (16 + 16: both MMAs)


@pytest.mark.parametrize("shape", ["16x64b", "16x128b", "16x256b", "16x32bx2"])
def test_tcgen05_ld_fragments(shape) -> None:
    # tcgen05.st of 32x32b lays known values (lane * 1000 + column) into the warp's lanes;
    # tcgen05.ld of another shape must return the documented (lane, column) per register
    from tilegen.runtime.ptx.sim.tcgen05 import fragment

    num = {"16x64b": 32, "16x128b": 16, "16x256b": 8, "16x32bx2": 32}[shape]
    half = 32 if shape == "16x32bx2" else 0
    nregs = fragment(shape, num, half).shape[1]
    regs = ", ".join(f"%r{100 + i}" for i in range(64))
    ld_regs = ", ".join(f"%r{100 + i}" for i in range(nregs))
    imm = ", 32" if shape == "16x32bx2" else ""
    init = "\n".join(
        f"    mad.lo.u32 %r{100 + i}, %r9, 1000, {i};" for i in range(64)
    )  # lane * 1000 + column
    stores = "\n".join(f"    st.global.b32 [%rd9+{4 * i}], %r{100 + i};" for i in range(nregs))
    src = f""".version 8.8
.target sm_100a
.address_size 64
.visible .entry k(.param .u64 k_out, .param .u32 k_on, .param .u32 k_os)
.reqntid 32
{{
    .reg .b32 %r<200>;
    .reg .b64 %rd<16>;
    .shared .align 16 .b8 smem[16];
    mov.u32 %r9, %tid.x;
    tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [smem], 64;
    ld.shared.b32 %r6, [smem];
{init}
    tcgen05.st.sync.aligned.32x32b.x64.b32 [%r6], {{{regs}}};
    tcgen05.wait::st.sync.aligned;
    tcgen05.ld.sync.aligned.{shape}.x{num}.b32 {{{ld_regs}}}, [%r6]{imm};
    tcgen05.wait::ld.sync.aligned;
    ld.param.b64 %rd7, [k_out];
    mul.wide.u32 %rd8, %r9, {4 * nregs};
    add.s64 %rd9, %rd7, %rd8;
{stores}
    tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r6, 64;
    ret;
}}
"""
    out = run_ptx(src, [np.zeros(32 * nregs, np.uint32)], (1, 1, 1))[0].reshape(32, nregs)
    frag = fragment(shape, num, half)
    np.testing.assert_array_equal(out, frag[:, :, 0] * 1000 + frag[:, :, 1])
    # the documented layouts, spelled out for lane t of register 0 and the last register
    t = np.arange(32)
    first = {
        "16x64b": (t // 2, t % 2),
        "16x128b": (t // 4, t % 4),
        "16x256b": (t // 4, 2 * (t % 4)),
        "16x32bx2": (t % 16, np.where(t < 16, 0, 32)),
    }[shape]
    np.testing.assert_array_equal(out[:, 0], first[0] * 1000 + first[1])


TMA_2D = """.version 8.8
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 k_in, .param .u32 k_r, .param .u32 k_c, .param .u32 k_rs,
                  .param .u32 k_cs,
                  .param .u64 k_out, .param .u32 k_or, .param .u32 k_oc, .param .u32 k_ors,
                  .param .u32 k_ocs,
                  .hidden .param .align 64 .b8 k_min[128], .hidden .param .align 64 .b8 k_mout[128])
.reqntid 32
{
    .reg .pred %p<4>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<8>;
    .shared .align 1024 .b8 smem[1032];
    mov.u32 %r1, %tid.x;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra $DONE;
    mbarrier.init.shared.b64 [smem+1024], 1;
    mov.b64 %rd1, k_min;
    cvta.param.u64 %rd2, %rd1;
    mov.b64 %rd3, k_mout;
    cvta.param.u64 %rd4, %rd3;
    mov.b32 %r2, 16;
    mov.b32 %r3, -2;
    mbarrier.arrive.expect_tx.shared.b64 _, [smem+1024], 1024;
    cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes [smem], [%rd2, {%r2, %r3}], [smem+1024];
$WAIT:
    mbarrier.try_wait.parity.shared.b64 %p2, [smem+1024], 0;
    @!%p2 bra $WAIT;
    mov.b32 %r4, 12;
    mov.b32 %r5, 14;
    cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%rd4, {%r4, %r5}], [smem];
    cp.async.bulk.commit_group;
    cp.async.bulk.wait_group.read 0;
$DONE:
    ret;
}
"""


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("swizzle,atom", [(128, 16), (128, 32), (0, 16)])
def test_tma_2d_load_nan_fill_and_store_clipping(strict, swizzle, atom) -> None:
    # load the 8 x 32 f32 box at (row -2, col 16) of a 20 x 40 tensor (NaN outside it), store
    # it at (row 14, col 12) of another: elements outside the destination are not written
    src = np.arange(20 * 40, dtype=np.float32).reshape(20, 40)
    maps = [
        {"array": 0, "box": [8, 32], "swizzle": swizzle, "swizzle_atom": atom, "oob": "nan"},
        {"array": 1, "box": [8, 32], "swizzle": swizzle, "swizzle_atom": atom},
    ]
    out = run_ptx(
        TMA_2D,
        [src, np.full((20, 40), -1.0, np.float32)],
        (1, 1, 1),
        tensor_maps=maps,
        strict_async=strict,
    )[1]
    box = np.full((8, 32), np.nan, np.float32)
    box[2:, :24] = src[0:6, 16:40]
    want = np.full((20, 40), -1.0, np.float32)
    want[14:20, 12:40] = box[:6, :28]
    np.testing.assert_array_equal(out, want)


def test_swizzle_functions() -> None:
    from tilegen.runtime.ptx.sim.tensor_ops import swizzle

    a = np.arange(0, 1024, 16)
    # 128B: chunk (bits 4-6) ^= row (bits 7-9); 32-byte atoms: bits 5-6 ^= bits 7-8
    np.testing.assert_array_equal(swizzle(a, 128) >> 4 & 7, (a >> 4 & 7) ^ (a >> 7 & 7))
    s32 = swizzle(a, 128, 32)
    np.testing.assert_array_equal(s32 >> 5 & 3, (a >> 5 & 3) ^ (a >> 7 & 3))
    np.testing.assert_array_equal(s32 & 16, a & 16)
    np.testing.assert_array_equal(swizzle(a, 32) >> 4 & 1, (a >> 4 & 1) ^ (a >> 7 & 1))


VECTOR_STORE = """.version 8.8
.target sm_90a
.address_size 64
.visible .entry v(.param .u64 v_out, .param .u32 v_m, .param .u32 v_t,
                  .hidden .param .align 64 .b8 v_map[128])
.reqntid 64
{
    .reg .pred %p<4>;
    .reg .b32 %r<8>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<4>;
    .shared .align 128 .b8 buf[512];
    mov.u32 %r1, %tid.x;
    cvt.rn.f32.u32 %f1, %r1;
    add.f32 %f2, %f1, 0f3F000000;
    mov.u32 %r2, buf;
    mad.lo.s32 %r3, %r1, 8, %r2;
    st.shared.v2.f32 [%r3], {%f1, %f2};
    fence.proxy.async.shared::cta;
    bar.sync 0;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra $DONE;
    mov.b64 %rd1, v_map;
    cvta.param.u64 %rd2, %rd1;
    mov.u32 %r4, 0;
    cp.async.bulk.tensor.1d.global.shared::cta.tile.bulk_group [%rd2, {%r4}], [%r2];
    cp.async.bulk.commit_group;
    cp.async.bulk.wait_group 0;
$DONE:
    ret;
}
"""


def test_vector_stores_of_other_warps_need_the_barrier() -> None:
    """Two warps write a shared buffer with ``st.shared.v2``; thread 0 sends it by TMA. With the
    barrier the copy is right; without it strict mode names the other warp's write - each
    element of a vector access belongs to its own lane's warp (it once all went to the first
    lane's, which hid this)."""
    maps = [{"array": 0, "box": [128], "swizzle": 0}]
    want = np.stack([np.arange(64), np.arange(64) + 0.5], axis=1).reshape(-1).astype(np.float32)
    out = run_ptx(
        VECTOR_STORE, [np.zeros(128, np.float32)], (1, 1, 1), tensor_maps=maps, strict_async=True
    )[0]
    np.testing.assert_array_equal(out, want)
    bad = VECTOR_STORE.replace("    bar.sync 0;\n", "")
    with pytest.raises(PtxSimError, match=r"written at line \d+ by warp 1 with no barrier"):
        run_ptx(bad, [np.zeros(128, np.float32)], (1, 1, 1), tensor_maps=maps, strict_async=True)


ARRIVE = """.version 8.0
.target sm_90
.address_size 64
.visible .entry h(.param .u64 h_out)
.reqntid 64
{
    .reg .pred %p<4>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<4>;
    .shared .align 16 .b8 buf[128];
    ld.param.u64 %rd1, [h_out];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %tid.x;
    and.b32 %r2, %r1, 31;
    mov.u32 %r3, buf;
    mad.lo.s32 %r4, %r2, 4, %r3;
    mov.u32 %r10, 0;
    mov.u32 %r11, 0;
    setp.lt.u32 %p1, %r1, 32;
$LOOP:
    @!%p1 bra $CONSUMER;
    // warp 0: wait until warp 1 read the last round (barrier 2), write, hand over (barrier 1)
    setp.eq.u32 %p2, %r10, 0;
    @!%p2 bar.sync 2, 64;
    mad.lo.s32 %r5, %r10, 100, %r2;
    st.shared.u32 [%r4], %r5;
    bar.arrive 1, 64;
    bra $NEXT;
$CONSUMER:
    // warp 1: wait for the round, read it, release the buffer (barrier 2)
    bar.sync 1, 64;
    ld.shared.u32 %r6, [%r4];
    add.s32 %r11, %r11, %r6;
    setp.lt.u32 %p3, %r10, 2;
    @%p3 bar.arrive 2, 64;
$NEXT:
    add.s32 %r10, %r10, 1;
    setp.lt.u32 %p2, %r10, 3;
    @%p2 bra $LOOP;
    @%p1 bra $DONE;
    mul.wide.u32 %rd2, %r2, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r11;
$DONE:
    ret;
}
"""


def test_bar_arrive_hands_a_buffer_between_warps() -> None:
    """``bar.arrive`` (the producer side of a named barrier: counted, not waited at) against
    ``bar.sync`` on the consumer side, three rounds each way: warp 1 sums what warp 0 wrote in
    each round (FlashAttention-3's ping-pong uses the same pairs)."""
    from tilegen.runtime.codegen.driver import assemble, find_ptxas

    if find_ptxas() is not None:  # legal PTX
        assemble(ARRIVE, 90)
    out = run_ptx(ARRIVE, [np.zeros(32, np.uint32)], (1, 1, 1), strict_async=True)[0]
    np.testing.assert_array_equal(out, 3 * np.arange(32) + 300)
    # one arrival short: the consumer's barrier never fills
    bad = ARRIVE.replace("    bar.arrive 1, 64;\n", "    @%p2 bar.arrive 1, 64;\n")
    with pytest.raises(PtxSimError, match="deadlock"):
        run_ptx(bad, [np.zeros(32, np.uint32)], (1, 1, 1), strict_async=True)


def test_a_read_between_warps_needs_a_barrier() -> None:
    """The strict mode orders generic reads between warps: without the consumer's ``bar.sync``
    warp 1 reads what warp 0 wrote with nothing ordering the write first (section 36 of
    docs/pipelines.md). The default mode, which runs warps in lock step, gives no error."""
    from tilegen.runtime.codegen.driver import assemble, find_ptxas

    bad = ARRIVE.replace("    bar.sync 1, 64;\n", "")
    if find_ptxas() is not None:  # legal PTX, the race and all
        assemble(bad, 90)
    run_ptx(bad, [np.zeros(32, np.uint32)], (1, 1, 1))
    with pytest.raises(
        PtxSimError, match=r"warp 1 reads shared byte 0x\w+ \(line \d+\) that warp 0 wrote"
    ):
        run_ptx(bad, [np.zeros(32, np.uint32)], (1, 1, 1), strict_async=True)


REPLICAS = """.version 8.0
.target sm_90
.address_size 64
.visible .entry r(.param .u64 r_out)
.reqntid 64
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    .shared .align 16 .b8 buf[128];
    ld.param.u64 %rd1, [r_out];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %tid.x;
    and.b32 %r2, %r1, 31;
    mov.u32 %r3, buf;
    mad.lo.s32 %r4, %r2, 4, %r3;
    mul.lo.s32 %r5, %r2, 7;
    // both warps hold lane l's element (a replicated layout): each writes it, each reads its own
    st.shared.u32 [%r4], %r5;
    bar.warp.sync -1;
    ld.shared.u32 %r6, [%r4];
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r6;
    ret;
}
"""


def test_copies_of_an_element_written_by_several_warps_are_not_a_race() -> None:
    # a layout that replicates an element across warps has every copy written with the same
    # value; each warp reading back its own write needs no CTA barrier
    from tilegen.runtime.codegen.driver import assemble, find_ptxas

    bad = REPLICAS.replace("mul.lo.s32 %r5, %r2, 7;", "mul.lo.s32 %r5, %r1, 7;")
    if find_ptxas() is not None:  # legal PTX, both
        assemble(REPLICAS, 90)
        assemble(bad, 90)
    out = run_ptx(REPLICAS, [np.zeros(64, np.uint32)], (1, 1, 1), strict_async=True)[0]
    np.testing.assert_array_equal(out, np.tile(7 * np.arange(32), 2))
    # a different value from the other warp, unordered: a race
    with pytest.raises(PtxSimError, match="with no barrier between them"):
        run_ptx(bad, [np.zeros(64, np.uint32)], (1, 1, 1), strict_async=True)


OVERWRITE = """.version 8.0
.target sm_90
.address_size 64
.visible .entry w(.param .u64 w_out)
.reqntid 64
{
    .reg .pred %p<4>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<4>;
    .shared .align 16 .b8 buf[128];
    ld.param.u64 %rd1, [w_out];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %tid.x;
    and.b32 %r2, %r1, 31;
    shr.u32 %r3, %r1, 5;
    mov.u32 %r4, buf;
    mad.lo.s32 %r5, %r2, 4, %r4;
    setp.ne.u32 %p1, %r3, 0;
    @!%p1 st.shared.u32 [%r5], %r2;
    bar.sync 0;
    @%p1 bra $LATER;
    ld.shared.u32 %r6, [%r5];
    mul.wide.u32 %rd2, %r2, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r6;
$LATER:
    mov.u32 %r7, 0;
$SPIN:
    add.s32 %r7, %r7, 1;
    setp.lt.u32 %p2, %r7, 64;
    @%p2 bra $SPIN;
MEET
    add.s32 %r8, %r2, 100;
    @%p1 st.shared.u32 [%r5], %r8;
    ret;
}
"""


def test_a_write_after_another_warps_read_needs_a_barrier() -> None:
    """Warp 0 reads what it wrote; warp 1 then overwrites it (a stage reused, an epilogue's
    staging over operands another warp still reads): without a barrier between the read and
    the write, a race the strict mode names; with one, fine."""
    from tilegen.runtime.codegen.driver import assemble, find_ptxas

    ok, bad = OVERWRITE.replace("MEET", "    bar.sync 0;"), OVERWRITE.replace("MEET\n", "")
    if find_ptxas() is not None:
        assemble(ok, 90)
        assemble(bad, 90)
    out = run_ptx(ok, [np.zeros(32, np.uint32)], (1, 1, 1), strict_async=True)[0]
    np.testing.assert_array_equal(out, np.arange(32))
    msg = "warp 1 overwrites shared byte 0x0 .*, which warp 0 read .* with no barrier between"
    with pytest.raises(PtxSimError, match=msg):
        run_ptx(bad, [np.zeros(32, np.uint32)], (1, 1, 1), strict_async=True)


#: a cluster of two CTAs: CTA 1 spins, then releases a stage in CTA 0 (a remote arrival on
#: CTA 0's barrier); CTA 0 waits for that arrival before it exits (WAIT) or does not
REMOTE = """.version 8.8
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 k_out)
.reqntid 32
.reqnctapercluster 2, 1, 1
{
    .reg .pred %p<8>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<4>;
    .shared .align 8 .b8 smem[8];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %cluster_ctarank;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra $READY;
    mbarrier.init.shared::cta.b64 [smem], 1;
$READY:
    barrier.cluster.arrive.release.aligned;
    barrier.cluster.wait.acquire.aligned;
    setp.ne.u32 %p2, %r2, 0;
    @%p2 bra $ODD;
WAIT
    ld.param.u64 %rd1, [k_out];
    cvta.to.global.u64 %rd2, %rd1;
    @!%p1 st.global.u32 [%rd2], 7;
    ret;
$ODD:
    mov.u32 %r3, 0;
$SPIN:
    add.s32 %r3, %r3, 1;
    setp.lt.u32 %p3, %r3, 64;
    @%p3 bra $SPIN;
    mov.u32 %r4, smem;
    mapa.shared::cluster.u32 %r5, %r4, 0;
    @!%p1 mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%r5];
    ret;
}
"""

#: CTA 0 waits for phase 0 of its barrier: the other CTA's arrival has landed
TAIL = """$TAIL:
    mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 %p4, [smem], 0;
    @!%p4 bra $TAIL;"""


@pytest.mark.parametrize("strict", [True, False])
def test_a_remote_arrival_after_its_cta_exited(strict) -> None:
    """A cluster's CTA must outlive the accesses the others make to its shared memory (on the
    hardware its memory may hold another CTA's by then): CTA 1 arrives on CTA 0's barrier after
    CTA 0 exited. With CTA 0 waiting for that arrival first (a producer's tail), it runs."""
    from tilegen.runtime.codegen.driver import assemble, find_ptxas

    good = REMOTE.replace("WAIT", TAIL)
    if find_ptxas() is not None:  # legal PTX
        assemble(good, 90)
    out = run_ptx(good, [np.zeros(1, np.uint32)], (2, 1, 1), strict_async=strict)[0]
    assert out[0] == 7
    with pytest.raises(PtxSimError, match=r"an arrival from CTA 1 after every thread of its own"):
        run_ptx(REMOTE.replace("WAIT\n", ""), [np.zeros(1, np.uint32)], (2, 1, 1))
