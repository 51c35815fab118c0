"""The SIMT simulator on hand-written PTX: divergence and reconvergence, loops, shuffles,
barriers with shared memory, atomics, declared semantics and located errors."""

from __future__ import annotations

import numpy as np
import pytest

from tilegen.runtime.ptx.launch import PtxSimError, run_ptx
from tilegen.runtime.ptx.sim.declared import evaluate, match


def kernel(
    body: str, ntid: int = 64, shared: str = "", version: str = "8.0", target: str = "sm_90"
) -> str:
    """One-entry module: param 0 is an i32 output array (pointer, shape, stride)."""
    return f"""
.version {version}
.target {target}
.address_size 64
.visible .entry k(.param .u64 k_out, .param .u32 k_n, .param .u32 k_s)
.reqntid {ntid}
{{
    .reg .pred %p<8>;
    .reg .b32 %r<32>;
    .reg .b64 %rd<8>;
    {shared}
    ld.param.b64 %rd1, [k_out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
{body}
    st.global.b32 [%rd3], %r2;
    ret;
}}
"""


def run(body: str, ntid: int = 64, shared: str = "", grid=(1, 1, 1), **target) -> np.ndarray:
    return run_ptx(kernel(body, ntid, shared, **target), [np.zeros(ntid, np.int32)], grid)[0]


TID = np.arange(64)


def test_divergent_if_else_reconverges() -> None:
    out = run("""
    and.b32 %r3, %r1, 1;
    setp.eq.b32 %p1, %r3, 0;
    @%p1 bra $EVEN;
    shl.b32 %r2, %r1, 1;
    bra.uni $JOIN;
$EVEN:
    add.s32 %r2, %r1, 100;
$JOIN:
    add.s32 %r2, %r2, 1;
""")
    np.testing.assert_array_equal(out, np.where(TID % 2 == 0, TID + 101, 2 * TID + 1))


def test_loop_with_per_thread_trip_count() -> None:
    out = run("""
    rem.u32 %r4, %r1, 5;
    mov.b32 %r2, 0;
    mov.b32 %r5, 0;
$LOOP:
    setp.ge.u32 %p1, %r5, %r4;
    @%p1 bra $DONE;
    add.s32 %r2, %r2, %r5;
    add.s32 %r5, %r5, 1;
    bra.uni $LOOP;
$DONE:
""")
    k = TID % 5
    np.testing.assert_array_equal(out, k * (k - 1) // 2)


def test_shfl_bfly_reduction_per_warp() -> None:
    body = "    mov.b32 %r2, %r1;\n" + "".join(
        f"    shfl.sync.bfly.b32 %r6, %r2, {m}, 31, -1;\n    add.s32 %r2, %r2, %r6;\n"
        for m in (16, 8, 4, 2, 1)
    )
    out = run(body)
    np.testing.assert_array_equal(out, np.repeat([sum(range(32)), sum(range(32, 64))], 32))


def test_shfl_up_scan_and_idx_broadcast() -> None:
    body = "    mov.b32 %r2, 1;\n" + "".join(
        f"    shfl.sync.up.b32 %r6|%p2, %r2, {d}, 0, -1;\n" f"    @%p2 add.s32 %r2, %r2, %r6;\n"
        for d in (1, 2, 4, 8, 16)
    )
    out = run(body)
    np.testing.assert_array_equal(out, TID % 32 + 1)
    out = run("    shfl.sync.idx.b32 %r2, %r1, 5, 31, -1;")
    np.testing.assert_array_equal(out, np.repeat([5, 37], 32))


def test_barrier_orders_shared_memory() -> None:
    out = run(
        """
    mov.u32 %r7, buf;
    shl.b32 %r8, %r1, 2;
    add.s32 %r9, %r7, %r8;
    mul.lo.s32 %r10, %r1, 3;
    st.shared.b32 [%r9], %r10;
    bar.sync 0;
    add.s32 %r11, %r1, 1;
    rem.u32 %r11, %r11, 64;
    shl.b32 %r11, %r11, 2;
    add.s32 %r11, %r7, %r11;
    ld.shared.b32 %r2, [%r11];
""",
        shared=".shared .align 4 .b8 buf[256];",
    )
    np.testing.assert_array_equal(out, 3 * ((TID + 1) % 64))


def test_barrier_holds_readers_until_the_writer_warp_arrives() -> None:
    # the reading warp sits at lower PCs than the writing warp, so the scheduler would run
    # its load first; only the barrier (at a different PC per warp) makes the store visible
    body = """
    mov.u32 %r7, buf;
    mov.b32 %r2, 0;
    setp.lt.u32 %p1, %r1, 32;
    @%p1 bra $READER;
    bra.uni $WRITER;
$READER:
    {bar}
    ld.shared.b32 %r2, [%r7];
    bra.uni $END;
$WRITER:
    mov.b32 %r12, 77;
    st.shared.b32 [%r7], %r12;
    {bar}
$END:
"""
    shared = ".shared .align 4 .b8 buf[4];"
    out = run(body.replace("{bar}", "bar.sync 0;"), shared=shared)
    np.testing.assert_array_equal(out, np.where(TID < 32, 77, 0))
    racy = run(body.replace("{bar}", ""), shared=shared)
    np.testing.assert_array_equal(racy, np.zeros(64))  # without it the read comes first


def test_atomic_add_serialises() -> None:
    out = run(
        """
    mov.u32 %r7, ctr;
    atom.shared.add.u32 %r2, [%r7], 1;
""",
        shared=".shared .align 4 .b8 ctr[4];",
    )
    assert sorted(out.tolist()) == list(range(64))


def test_ctaid_over_grid() -> None:
    src = kernel("    mov.u32 %r2, %ctaid.x;", ntid=32).replace(
        "mul.wide.u32 %rd2, %r1, 4;",
        "mov.u32 %r20, %ctaid.x;\n    mad.lo.s32 %r21, %r20, 32, %r1;\n"
        "    mul.wide.u32 %rd2, %r21, 4;",
    )
    out = run_ptx(src, [np.zeros(96, np.int32)], (3, 1, 1))[0]
    np.testing.assert_array_equal(out, np.repeat([0, 1, 2], 32))


def test_step_budget_stops_runaway_loop() -> None:
    src = kernel("$L:\n    bra.uni $L;")
    with pytest.raises(PtxSimError, match="step budget"):
        run_ptx(src, [np.zeros(64, np.int32)], (1, 1, 1), max_steps=1000)


def test_errors_are_located() -> None:
    with pytest.raises(PtxSimError, match=r"<ptx>:16: error: frob.b32: unknown instruction"):
        run("    frob.b32 %r2, %r1;")
    with pytest.raises(PtxSimError, match=r"error: ld.global.b32: global access .* out of bounds"):
        run("    ld.global.b32 %r2, [%rd3+4096];")
    with pytest.raises(PtxSimError, match="trap executed"):
        run("    trap;")


def _eval(opcode: str, *args):
    form = match(opcode)
    assert form is not None and not form.handwritten
    return evaluate(form, [np.asarray(a) for a in args])


def test_declared_semantics() -> None:
    nan = np.float32("nan")
    a, b = np.array([1.0, nan, -0.5], np.float32), np.array([2.0, 3.0, nan], np.float32)
    np.testing.assert_array_equal(_eval("min.f32", a, b), [1.0, 3.0, -0.5])
    assert np.isnan(_eval("min.NaN.f32", a, b)[1:]).all()
    np.testing.assert_array_equal(_eval("setp.nan.f32", a, b), [False, True, True])
    np.testing.assert_array_equal(_eval("setp.neu.f32", a, b), [True, True, True])
    np.testing.assert_array_equal(_eval("setp.ne.f32", a, b), [True, False, False])
    u = np.array([0xFFFFFFFF, 7], np.uint32)
    np.testing.assert_array_equal(_eval("mul.hi.u32", u, u), [0xFFFFFFFE, 0])
    np.testing.assert_array_equal(_eval("mul.wide.u32", u, u), [0xFFFFFFFE00000001, 49])
    s = np.array([-7, 7], np.int32)
    np.testing.assert_array_equal(_eval("div.s32", s, np.int32(2)), [-3, 3])
    np.testing.assert_array_equal(_eval("rem.s32", s, np.int32(2)), [-1, 1])
    np.testing.assert_array_equal(_eval("shr.s32", s, np.uint32(40)), [-1, 0])
    np.testing.assert_array_equal(_eval("shl.b32", u, np.uint32(32)), [0, 0])
    hi, lo = np.array([0x12345678], np.uint32), np.array([0x9ABCDEF0], np.uint32)
    np.testing.assert_array_equal(_eval("shf.l.wrap.b32", lo, hi, np.uint32(36)), [0x23456789])
    one, third = np.float32(1.0), np.float32(3.0)
    down = _eval("fma.rm.f32", np.array([one]), np.array([1 / third], np.float32), np.float32(0))
    up = _eval("fma.rp.f32", np.array([one]), np.array([1 / third], np.float32), np.float32(0))
    assert down[0] == np.float32(1 / third) == up[0]  # exact products are not moved
    d = _eval("div.rz.f32", np.array([one]), np.array([third]))
    u2 = _eval("div.rp.f32", np.array([one]), np.array([third]))
    assert np.nextafter(d[0], np.float32(1)) == u2[0]
    assert match("add.rn.f32").row["ptx_isa"] == "1.0"
    assert match("add.rn.f33") is None and match("frob.b32") is None


def test_packed_pairs_compute_each_half() -> None:
    a = np.array([[1.5, -2.0]], np.float32)
    b = np.array([[0.25, 8.0]], np.float32)
    np.testing.assert_array_equal(_eval("add.rn.f32x2", a, b), [[1.75, 6.0]])
    h = np.array([[1.0, 65504.0]], np.float16)
    np.testing.assert_array_equal(_eval("add.rn.f16x2", h, h), [[2.0, np.inf]])
    assert match("add.rn.f32x2").row["sm"] == 100 and match("add.rn.f16x2").row["sm"] == 53


def test_packed_registers_round_trip_through_the_simulator() -> None:
    out = run(
        """
    cvt.rn.f32.u32 %r3, %r1;
    mov.b64 %rd5, {%r3, %r3};
    add.rn.f32x2 %rd6, %rd5, %rd5;
    mov.b64 {%r4, %r5}, %rd6;
    add.rn.f32 %r6, %r4, %r5;
    cvt.rzi.s32.f32 %r2, %r6;
""",
        version="8.6",
        target="sm_100",
    )
    np.testing.assert_array_equal(out, 4 * TID)


def test_redux_sync_reduces_each_warp() -> None:
    out = run("    redux.sync.add.u32 %r2, %r1, -1;")
    np.testing.assert_array_equal(out, np.repeat([sum(range(32)), sum(range(32, 64))], 32))
    out = run(
        """
    cvt.rn.f32.u32 %r3, %r1;
    neg.f32 %r3, %r3;
    redux.sync.max.abs.f32 %r4, %r3, -1;
    cvt.rzi.s32.f32 %r2, %r4;
""",
        version="8.6",
        target="sm_100a",
    )
    np.testing.assert_array_equal(out, np.repeat([31, 63], 32))


PRODUCER_CONSUMER = """
    mov.u32 %r7, buf;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra $INIT_DONE;
    mbarrier.init.shared.b64 [buf+256], 1;
$INIT_DONE:
    bar.sync 0;
    setp.ge.u32 %p2, %r1, 32;
    @%p2 bra $PRODUCER;
$WAIT:
    mbarrier.try_wait.parity.shared.b64 %p3, [buf+256], {parity};
    @!%p3 bra $WAIT;
    shl.b32 %r8, %r1, 2;
    add.s32 %r9, %r7, %r8;
    ld.shared.b32 %r2, [%r9];
    add.s32 %r2, %r2, 1;
    bra.uni $END;
$PRODUCER:
    elect.sync %r10|%p4, -1;
    @!%p4 bra $ARRIVED;
    cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [buf], [%rd1], 128, [buf+256];
    mbarrier.arrive.expect_tx.shared.b64 _, [buf+256], 128;
$ARRIVED:
    ld.global.b32 %r2, [%rd3];
$END:
"""


def test_mbarrier_producer_consumer_with_bulk_copy() -> None:
    # consumers spin at lower PCs than the producer warp; parked waits let the producer run
    src = kernel(
        PRODUCER_CONSUMER.replace("{parity}", "0"), shared=".shared .align 8 .b8 buf[264];"
    )
    data = (1000 + TID).astype(np.int32)
    out = run_ptx(src, [data], (1, 1, 1))[0]
    np.testing.assert_array_equal(out, np.where(TID < 32, data + 1, data))


def test_mbarrier_parity_of_the_preceding_phase_counts_as_complete() -> None:
    body = PRODUCER_CONSUMER.replace("{parity}", "1").replace(
        "b64 [buf+256], 1;", "b64 [buf+256], 2;"
    )
    src = kernel(body, shared=".shared .align 8 .b8 buf[264];")
    out = run_ptx(src, [np.zeros(64, np.int32)], (1, 1, 1))[0]
    np.testing.assert_array_equal(out[:32], 1)  # did not wait: read shared memory as found


def test_mbarrier_wait_that_never_completes_is_a_deadlock() -> None:
    # the barrier expects two arrivals but only the producer's leader arrives
    body = PRODUCER_CONSUMER.replace("{parity}", "0").replace(
        "b64 [buf+256], 1;", "b64 [buf+256], 2;"
    )
    src = kernel(body, shared=".shared .align 8 .b8 buf[264];")
    with pytest.raises(PtxSimError, match="deadlock"):
        run_ptx(src, [np.zeros(64, np.int32)], (1, 1, 1))


TMA_KERNEL = """
.version 8.8
.target sm_90
.address_size 64
.visible .entry k(.param .u64 k_in, .param .u32 k_n, .param .u32 k_s,
                  .param .u64 k_out, .param .u32 k_m, .param .u32 k_t,
                  .hidden .param .align 64 .b8 k_map[128])
.reqntid 32
{
    .reg .pred %p<4>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<8>;
    .shared .align 128 .b8 buf[136];
    mov.u32 %r1, %tid.x;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra $READY;
    mbarrier.init.shared.b64 [buf+128], 1;
    mov.b64 %rd1, k_map;
    cvta.param.u64 %rd2, %rd1;
    mov.u32 %r2, %ctaid.x;
    shl.b32 %r3, %r2, 5;
    add.s32 %r3, %r3, -4;
    cp.async.bulk.tensor.1d.shared::cta.global.tile.mbarrier::complete_tx::bytes [buf], [%rd2, {%r3}], [buf+128];
    mbarrier.arrive.expect_tx.shared.b64 _, [buf+128], 128;
$READY:
    bar.sync 0;
$WAIT:
    mbarrier.try_wait.parity.shared.b64 %p2, [buf+128], 0;
    @!%p2 bra $WAIT;
    mov.u32 %r4, buf;
    shl.b32 %r5, %r1, 2;
    add.s32 %r6, %r4, %r5;
    ld.shared.b32 %r7, [%r6];
    ld.param.b64 %rd3, [k_out];
    mov.u32 %r2, %ctaid.x;
    mad.lo.s32 %r8, %r2, 32, %r1;
    mul.wide.u32 %rd4, %r8, 4;
    add.s64 %rd5, %rd3, %rd4;
    st.global.b32 [%rd5], %r7;
    ret;
}
"""


def test_1d_tensor_copy_through_the_simulators_tensor_map() -> None:
    # the hidden map describes `k_in` (the array whose pointer the kernel never loads); the box
    # is the 128 expected bytes, and elements before the tensor start are zero-filled
    data = np.arange(1, 65, dtype=np.int32)
    out = run_ptx(TMA_KERNEL, [data, np.zeros(64, np.int32)], (2, 1, 1))[1]
    want = np.concatenate([[0] * 4, data[:60]])
    np.testing.assert_array_equal(out, want)


def test_vprintf_formats_per_lane(capsys) -> None:
    src = """
.version 8.0
.target sm_90
.address_size 64
.extern .func (.param .b32 func_retval0) vprintf(.param .b64 a, .param .b64 b);
.global .align 1 .b8 fmt[12] = {116, 61, 37, 100, 32, 120, 61, 37, 46, 49, 102, 10};
.visible .entry k(.param .u64 k_out, .param .u32 k_n, .param .u32 k_s)
.reqntid 2
{
    .local .align 8 .b8 __local_depot0[16];
    .reg .b32 %r<4>;
    .reg .b64 %rd<8>;
    .reg .b64 %SP;
    .reg .b64 %SPL;
    mov.u64 %SPL, __local_depot0;
    cvta.local.u64 %SP, %SPL;
    mov.u32 %r1, %tid.x;
    st.local.b32 [%SPL], %r1;
    cvt.rn.f64.u32 %rd1, %r1;
    st.local.b64 [%SPL+8], %rd1;
    {
    .param .b64 param0;
    .param .b64 param1;
    .param .b32 retval0;
    mov.b64 %rd2, fmt;
    cvta.global.u64 %rd3, %rd2;
    st.param.b64 [param0], %rd3;
    st.param.b64 [param1], %SP;
    call.uni (retval0), vprintf, (param0, param1);
    }
    ret;
}
"""
    run_ptx(src, [np.zeros(2, np.int32)], (1, 1, 1))
    assert capsys.readouterr().out == "t=0 x=0.0\nt=1 x=1.0\n"


FP8_KERNEL = """
.version 8.6
.target sm_90
.address_size 64
.visible .entry k(.param .u64 k_in, .param .u32 k_n, .param .u32 k_s,
                  .param .u64 k_out, .param .u32 k_m, .param .u32 k_t)
.reqntid 8
{
    .reg .pred %p<4>;
    .reg .b16 %h<8>;
    .reg .b32 %r<16>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<8>;
    ld.param.b64 %rd1, [k_in];
    ld.param.b64 %rd2, [k_out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 8;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.v2.f32 {%f1, %f2}, [%rd4];
    cvt.rn.satfinite.e4m3x2.f32 %h1, %f1, %f2;
    cvt.rn.satfinite.e5m2x2.f32 %h2, %f1, %f2;
    cvt.rn.f16x2.e4m3x2 %r3, %h1;
    mov.b32 {%h3, %h4}, %r3;
    setp.eq.f16 %p1, %h3, %h4;
    selp.b32 %r4, 1, 0, %p1;
    mul.wide.u32 %rd5, %r1, 16;
    add.s64 %rd6, %rd2, %rd5;
    cvt.u32.u16 %r5, %h1;
    cvt.u32.u16 %r6, %h2;
    st.global.v4.b32 [%rd6], {%r5, %r6, %r3, %r4};
    ret;
}
"""


def test_packed_fp8_conversions_and_half_compare() -> None:
    # the instructions: cvt.rn.satfinite.e4m3x2/e5m2x2.f32 (a in the high byte, round to
    # nearest even, saturate), cvt.rn.f16x2.e4m3x2 back, setp.eq.f16 on the halves
    pairs = np.array(
        [
            [1.0, 1.0],  # e4m3 0x38, e5m2 0x3C
            [1.0625, 1.1875],  # ties to even: e4m3 0x38 / 0x3A
            [448.0, 500.0],  # e4m3 max 0x7E, saturated 0x7E
            [-np.inf, np.nan],  # e4m3 -max 0xFE; NaN 0x7F
            [2.0**-9, -(2.0**-9)],  # e4m3's smallest subnormal 0x01 / 0x81
            [0.0, -0.0],
            [57344.0, 1e6],  # e5m2 max 0x7B, saturated
            [3.0, 3.0],
        ],
        np.float32,
    )
    args = [pairs.reshape(-1), np.zeros(32, np.uint32)]
    out = run_ptx(FP8_KERNEL, args, (1, 1, 1))[1].reshape(8, 4)
    e4m3 = [(0x38, 0x38), (0x38, 0x3A), (0x7E, 0x7E), (0xFE, 0x7F), (0x01, 0x81), (0, 0x80)]
    e4m3 += [(0x7E, 0x7E), (0x44, 0x44)]
    e5m2 = [(0x3C, 0x3C), (0x3C, 0x3D), (0x5F, 0x60), (0xFB, 0x7F), (0x18, 0x98), (0, 0x80)]
    e5m2 += [(0x7B, 0x7B), (0x42, 0x42)]
    assert [(int(v) >> 8, int(v) & 0xFF) for v in out[:, 0]] == e4m3
    assert [(int(v) >> 8, int(v) & 0xFF) for v in out[:, 1]] == e5m2
    halves = np.ascontiguousarray(out[:, 2]).view(np.float16).reshape(8, 2)  # (b, a)
    np.testing.assert_array_equal(halves[0], [1.0, 1.0])
    np.testing.assert_array_equal(halves[2], [448.0, 448.0])
    assert np.isnan(halves[3, 0]) and halves[3, 1] == -448.0
    np.testing.assert_array_equal(out[:, 3], [1, 0, 1, 0, 0, 1, 1, 1])  # -0 == 0, NaN != x


CP_ASYNC_ARRIVE = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 k_in, .param .u32 k_n, .param .u32 k_s,
                  .param .u64 k_out, .param .u32 k_m, .param .u32 k_t)
.reqntid 64
{
    .reg .pred %p<4>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<8>;
    .shared .align 16 .b8 buf[264];
    ld.param.b64 %rd1, [k_in];
    ld.param.b64 %rd2, [k_out];
    mov.u32 %r1, %tid.x;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra $INIT;
    mbarrier.init.shared.b64 [buf+256], {count};
$INIT:
    bar.sync 0;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd1, %rd3;
    mov.u32 %r2, buf;
    shl.b32 %r3, %r1, 2;
    add.s32 %r4, %r2, %r3;
    cp.async.ca.shared.global [%r4], [%rd4], 4;
    cp.async.mbarrier.arrive{noinc}.shared.b64 [buf+256];
{extra}$WAIT:
    mbarrier.try_wait.parity.shared.b64 %p2, [buf+256], 0;
    @!%p2 bra $WAIT;
    xor.b32 %r5, %r3, 4;
    add.s32 %r6, %r2, %r5;
    ld.shared.b32 %r7, [%r6];
    add.s64 %rd5, %rd2, %rd3;
    st.global.b32 [%rd5], %r7;
    ret;
}
"""


@pytest.mark.parametrize("noinc", [True, False])
def test_cp_async_mbarrier_arrive(noinc) -> None:
    # every thread copies its word and arrives once its copies land; a neighbour's word is read
    # after the phase completes. With .noinc the 64 arrivals are the init count; without it the
    # arrivals do not count, so the count is met by plain arrives instead
    src = CP_ASYNC_ARRIVE.replace("{noinc}", ".noinc" if noinc else "").replace("{count}", "64")
    extra = "" if noinc else "    mbarrier.arrive.shared.b64 _, [buf+256];\n"
    src = src.replace("{extra}", extra)
    data = np.arange(100, 164, dtype=np.int32)
    for strict in (False, True):
        out = run_ptx(src, [data, np.zeros(64, np.int32)], (1, 1, 1), strict_async=strict)[1]
        np.testing.assert_array_equal(out, data[np.arange(64) ^ 1])


def _rounded(v: int, p: int, mode: str, max_finite: float) -> float:
    """``v`` correctly rounded to a ``p``-bit significand in ``mode`` (the reference)."""
    from fractions import Fraction

    if v == 0:
        return 0.0
    neg, a = v < 0, abs(v)
    shift = max(a.bit_length() - p, 0)
    q, rem = a >> shift, Fraction(a - ((a >> shift) << shift), 1 << shift) if shift else 0
    up = {
        "rn": rem > Fraction(1, 2) or (rem == Fraction(1, 2) and q & 1),
        "rz": False,
        "rm": neg and rem > 0,
        "rp": not neg and rem > 0,
    }[mode]
    r = float((q + int(bool(up))) << shift)
    if r > max_finite:
        away = mode == "rn" or (mode == "rm" and neg) or (mode == "rp" and not neg)
        r = float("inf") if away else max_finite
    return -r if neg else r


@pytest.mark.parametrize("mode", ["rn", "rz", "rm", "rp"])
@pytest.mark.parametrize("dst", ["f16", "f32", "f64"])
@pytest.mark.parametrize("src", ["s32", "u32", "s64", "u64"])
def test_cvt_integer_to_float_rounds_once_in_every_mode(src, dst, mode):
    """cvt.<mode>.<float>.<int>: one correct rounding, whatever the widths (the simulator went
    through float64 first, which rounded 64-bit integers twice, and ignored rz/rm/rp where the
    integer was as wide as the float). Ties, ties one off, the extremes, 2^53 + 1."""
    bits, signed = int(src[1:]), src[0] == "s"
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    rng = np.random.default_rng(bits + len(dst) + len(mode))
    vals = [lo, hi, 0, 1, (1 << 53) + 1, (1 << 24) + 1, 65520, 65519, 2049]
    p = {"f16": 11, "f32": 24, "f64": 53}[dst]
    top = bits - (1 if signed else 0)
    for _ in range(48 if p + 1 < top else 0):  # (every 32-bit integer is an f64)
        e = int(rng.integers(p + 1, top))
        tie = (1 << e) + (int(rng.integers(0, 1 << 8)) << (e - p)) + (1 << (e - p - 1))
        vals += [tie - 1, tie, tie + 1]
    vals = [v for v in vals if lo <= v <= hi]
    vals += [-v for v in vals if signed and lo <= -v <= hi]
    n = len(vals)
    dtype = {"s32": np.int32, "u32": np.uint32, "s64": np.int64, "u64": np.uint64}[src]
    fdt = {"f16": np.float16, "f32": np.float32, "f64": np.float64}[dst]
    ptx = f"""
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 x, .param .u32 xn, .param .u32 xs,
                  .param .u64 y, .param .u32 yn, .param .u32 ys)
.reqntid {n}
{{
    .reg .b32 %r<4>;
    .reg .b64 %rd<8>;
    .reg .{'b64' if bits == 64 else 'b32'} %a<2>;
    .reg .{'b16' if dst == 'f16' else dst} %f<2>;
    ld.param.b64 %rd1, [x];
    ld.param.b64 %rd4, [y];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, {bits // 8};
    add.s64 %rd3, %rd1, %rd2;
    ld.global.{src} %a1, [%rd3];
    cvt.{mode}.{dst}.{src} %f1, %a1;
    mul.wide.u32 %rd5, %r1, {np.dtype(fdt).itemsize};
    add.s64 %rd6, %rd4, %rd5;
    st.global.{'b16' if dst == 'f16' else dst} [%rd6], %f1;
    ret;
}}
"""
    x = np.array(vals, dtype=object).astype(dtype)
    y = run_ptx(ptx, [x, np.zeros(n, fdt)], (1, 1, 1))[1]
    mx = float(np.finfo(fdt).max)
    want = np.array([_rounded(int(v), p, mode, mx) for v in x], np.float64).astype(fdt)
    bad = np.nonzero(y.astype(np.float64) != want.astype(np.float64))[0]
    assert not bad.size, f"{src} -> {dst} {mode}: {int(x[bad[0]])} gave {y[bad[0]]!r}"
