"""Tensor-core instructions in the SIMT simulator: mma.sync per shape/type against NumPy on
random fragments laid out by the PTX ISA fragment tables, ldmatrix, cp.async zero-fill and
group retirement, prmt/bfi, wgmma and TMA, error paths (the simulator's own, behind the ptxas
gate), and the tensor maps read from tileiras's host objects."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import ptx_corpus
from ptx_corpus import tileiras_ptx  # noqa: F401  (fixture)
from tilegen.runtime.ptx.launch import PtxSimError, run_ptx
from tilegen.runtime.ptx.sim.tensor_ops import fp8_table, fragment, parse_shape

RNG = np.random.default_rng(7)


def words_of(mat: np.ndarray, frag: np.ndarray, raw_bits: int) -> np.ndarray:
    """Per-lane packed registers [32, regs] (uint64) of raw element bits `mat` (uint64)."""
    lanes, nregs, per = frag.shape[:3]
    out = np.zeros((lanes, nregs), np.uint64)
    for r in range(nregs):
        for e in range(per):
            v = mat[frag[:, r, e, 0], frag[:, r, e, 1]]
            out[:, r] |= v << np.uint64(e * raw_bits)
    return out


def mma_kernel(opcode: str, na: int, nb: int, nc: int, wide: tuple, nthreads: int) -> str:
    """Each thread loads na+nb+nc registers from in[tid][*] (8-byte slots), runs `opcode`, and
    stores its nc result registers to out[tid][*]. `wide` says which of a/b/c are 64-bit."""
    n = na + nb + nc
    regs = []
    lines = []
    for i in range(n):
        which = 0 if i < na else (1 if i < na + nb else 2)
        kind = "rd" if wide[which] else "r"
        regs.append(f"%{kind}{i + 10}")
        lines.append(f"    ld.global.b{64 if kind == 'rd' else 32} {regs[-1]}, [%rd3+{8 * i}];")
    a, b, c = regs[:na], regs[na : na + nb], regs[na + nb :]
    dkind = "rd" if wide[2] else "r"
    d = [f"%{dkind}{i + 100}" for i in range(nc)]
    lines.append(
        f"    {opcode} {{{', '.join(d)}}}, {{{', '.join(a)}}}, {{{', '.join(b)}}}, "
        f"{{{', '.join(c)}}};"
    )
    for i, r in enumerate(d):
        lines.append(f"    st.global.b{64 if dkind == 'rd' else 32} [%rd5+{8 * i}], {r};")
    body = "\n".join(lines)
    return f"""
.version 8.4
.target sm_90
.address_size 64
.visible .entry k(.param .u64 k_in, .param .u32 k_n, .param .u32 k_s,
                  .param .u64 k_out, .param .u32 k_m, .param .u32 k_t)
.reqntid {nthreads}
{{
    .reg .b32 %r<200>;
    .reg .b64 %rd<200>;
    ld.param.b64 %rd1, [k_in];
    ld.param.b64 %rd4, [k_out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, {8 * n};
    add.s64 %rd3, %rd1, %rd2;
    mul.wide.u32 %rd6, %r1, {8 * nc};
    add.s64 %rd5, %rd4, %rd6;
{body}
    ret;
}}
"""


def _random(t: str, shape) -> tuple[np.ndarray, np.ndarray]:
    """(raw bits as uint64, exact float64/int64 values) of random elements of type t."""
    if t == "f16":
        v = RNG.standard_normal(shape).astype(np.float16)
        return v.view(np.uint16).astype(np.uint64), v.astype(np.float64)
    if t == "bf16":
        bits = (RNG.standard_normal(shape).astype(np.float32).view(np.uint32) >> 16).astype(
            np.uint64
        )
        return bits, (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if t in ("f32", "tf32"):
        v = RNG.standard_normal(shape).astype(np.float32)
        bits = v.view(np.uint32).astype(np.uint64)
        if t == "tf32":  # exact value the tensor core sees: low 13 mantissa bits dropped
            return bits, (v.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(
                np.float64
            )
        return bits, v.astype(np.float64)
    if t == "f64":
        v = RNG.standard_normal(shape)
        return v.view(np.uint64), v
    if t in ("s8", "u8"):
        v = RNG.integers(-128, 128, shape) if t == "s8" else RNG.integers(0, 256, shape)
        return (v & 0xFF).astype(np.uint64), v.astype(np.int64)
    if t == "s32":
        v = RNG.integers(-(2**20), 2**20, shape)
        return (v & 0xFFFFFFFF).astype(np.uint64), v.astype(np.int64)
    if t in ("e4m3", "e5m2"):
        table = fp8_table(t)
        ok = np.nonzero(np.isfinite(table) & (np.abs(table) < 64))[0]
        bits = RNG.choice(ok, shape).astype(np.uint64)
        return bits, table[bits.astype(np.int64)]
    raise AssertionError(t)


_RAW = {
    "f16": 16,
    "bf16": 16,
    "tf32": 32,
    "f32": 32,
    "f64": 64,
    "s8": 8,
    "u8": 8,
    "s32": 32,
    "e4m3": 8,
    "e5m2": 8,
}

CASES = [
    ("m16n8k16", "f32", "f16", "f16", "f32", ""),
    ("m16n8k16", "f16", "f16", "f16", "f16", ""),
    ("m16n8k8", "f32", "f16", "f16", "f32", ""),
    ("m16n8k16", "f32", "bf16", "bf16", "f32", ""),
    ("m16n8k8", "f32", "tf32", "tf32", "f32", ""),
    ("m16n8k4", "f32", "tf32", "tf32", "f32", ""),
    ("m16n8k32", "s32", "s8", "s8", "s32", ""),
    ("m16n8k32", "s32", "u8", "s8", "s32", ".satfinite"),
    ("m16n8k16", "s32", "s8", "u8", "s32", ".satfinite"),
    ("m8n8k4", "f64", "f64", "f64", "f64", ""),
    ("m16n8k32", "f32", "e4m3", "e4m3", "f32", ""),
    ("m16n8k32", "f32", "e5m2", "e4m3", "f32", ""),
]


@pytest.mark.parametrize("shape,dt,at,bt,ct,sat", CASES, ids=lambda x: str(x))
def test_mma_sync_matches_numpy(shape, dt, at, bt, ct, sat) -> None:
    m, n, k = parse_shape(shape)
    warps = 2  # two warps with different data: the instruction is per warp
    fa, fb, fc = fragment(shape, "a", at), fragment(shape, "b", bt), fragment(shape, "c", ct)
    rows, want = [], []
    for _ in range(warps):
        abits, a = _random(at, (m, k))
        bbits, b = _random(bt, (k, n))
        cbits, c = _random(ct, (m, n))
        if ct == "f16":
            c = c.astype(np.float16).astype(np.float64)
        rows.append(
            np.concatenate(
                [
                    words_of(abits, fa, _RAW[at] if fa.shape[2] > 1 else 64),
                    words_of(bbits, fb, _RAW[bt] if fb.shape[2] > 1 else 64),
                    words_of(cbits, fc, _RAW[ct] if fc.shape[2] > 1 else 64),
                ],
                axis=1,
            )
        )
        want.append(a @ b + c)
    words = np.concatenate(rows)
    na, nb, nc = fa.shape[1], fb.shape[1], fc.shape[1]
    wide = (at == "f64", bt == "f64", ct == "f64")
    opcode = f"mma.sync.aligned.{shape}.row.col{sat}.{dt}.{at}.{bt}.{ct}"
    src = mma_kernel(opcode, na, nb, nc, wide, 32 * warps)
    out = np.zeros((32 * warps, nc), np.uint64)
    got_words = run_ptx(src, [words.reshape(-1), out.reshape(-1)], (1, 1, 1))[1].reshape(out.shape)
    for w in range(warps):
        lw = got_words[32 * w : 32 * w + 32]
        per = fc.shape[2]
        bits = _RAW[dt] if per > 1 else 64 if dt == "f64" else 32
        got = np.zeros((m, n))
        for r in range(nc):
            for e in range(per):
                raw = (lw[:, r] >> np.uint64(e * bits)) & np.uint64((1 << bits) - 1)
                if dt == "f32":
                    vals = raw.astype(np.uint32).view(np.float32).astype(np.float64)
                elif dt == "f16":
                    vals = raw.astype(np.uint16).view(np.float16).astype(np.float64)
                elif dt == "f64":
                    vals = raw.view(np.float64)
                else:
                    vals = raw.astype(np.uint32).view(np.int32).astype(np.float64)
                got[fc[:, r, e, 0], fc[:, r, e, 1]] = vals
        if dt == "s32":
            np.testing.assert_array_equal(got, want[w])
        else:
            rtol = {"f16": 2e-3, "f32": 1e-6, "f64": 1e-13}[dt]
            np.testing.assert_allclose(got, want[w], rtol=rtol, atol=rtol)


def test_fragment_tables_match_the_ptx_isa_figures() -> None:
    # spot checks transcribed from the PTX ISA figures (groupID = lane>>2, tig = lane%4)
    a = fragment("m16n8k16", "a", "f16")
    assert a.shape == (32, 4, 2, 2)
    assert a[5, 0].tolist() == [[1, 2], [1, 3]]  # a0,a1: row g, cols 2*tig + (0,1)
    assert a[5, 1].tolist() == [[9, 2], [9, 3]]  # a2,a3: row g+8
    assert a[5, 2].tolist() == [[1, 10], [1, 11]]  # a4,a5: cols +8
    b = fragment("m16n8k16", "b", "f16")
    assert b[6, 1].tolist() == [[12, 1], [13, 1]]  # b2,b3: rows 2*tig+8.., col g
    c = fragment("m16n8k16", "c", "f32")
    assert c[31, :, 0].tolist() == [[7, 6], [7, 7], [15, 6], [15, 7]]
    t = fragment("m16n8k8", "a", "tf32")
    assert t[6, :, 0].tolist() == [[1, 2], [9, 2], [1, 6], [9, 6]]
    i8 = fragment("m16n8k32", "a", "s8")
    assert i8[7, 2].tolist() == [[1, 28], [1, 29], [1, 30], [1, 31]]
    assert fragment("m16n8k32", "b", "s8")[7, 1].tolist() == [[28, 1], [29, 1], [30, 1], [31, 1]]
    d = fragment("m8n8k4", "c", "f64")
    assert d[9, :, 0].tolist() == [[2, 2], [2, 3]]
    # every fragment covers its matrix exactly once per warp
    for shape, op, t in [
        ("m16n8k16", "a", "bf16"),
        ("m16n8k32", "b", "e4m3"),
        ("m16n8k8", "b", "tf32"),
        ("m8n8k4", "a", "f64"),
    ]:
        f = fragment(shape, op, t).reshape(-1, 2)
        assert len({tuple(x) for x in f.tolist()}) == len(f)


def test_fp8_tables() -> None:
    e4, e5 = fp8_table("e4m3"), fp8_table("e5m2")
    assert e4[0x38] == 1.0 and e4[0x7E] == 448.0 and np.isnan(e4[0x7F]) and e4[0x01] == 2.0**-9
    assert e5[0x3C] == 1.0 and e5[0x7C] == np.inf and e5[0x7B] == 57344.0 and np.isnan(e5[0x7D])
    assert e4[0xB8] == -1.0


def _simple(body: str, ntid: int = 32, shared: str = "", nout: int = 32) -> str:
    return f"""
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 k_in, .param .u32 k_n, .param .u32 k_s,
                  .param .u64 k_out, .param .u32 k_m, .param .u32 k_t)
.reqntid {ntid}
{{
    .reg .pred %p<8>;
    .reg .b32 %r<64>;
    .reg .b64 %rd<32>;
    {shared}
    ld.param.b64 %rd1, [k_in];
    ld.param.b64 %rd4, [k_out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd5, %rd4, %rd2;
{body}
    ret;
}}
"""


def test_cp_async_zero_fill_and_group_retirement() -> None:
    # thread t copies 8 bytes of in[2t..2t+1] with src-size t%9 (bytes past it are zero);
    # before wait_group the destination still holds its old contents
    body = """
    mov.u32 %r2, buf;
    shl.b32 %r3, %r1, 3;
    add.s32 %r4, %r2, %r3;
    mov.b32 %r9, 0x55555555;
    st.shared.b32 [%r4], %r9;
    st.shared.b32 [%r4+4], %r9;
    mul.wide.u32 %rd6, %r1, 8;
    add.s64 %rd7, %rd1, %rd6;
    rem.u32 %r5, %r1, 9;
    cp.async.ca.shared.global [%r4], [%rd7], 8, %r5;
    cp.async.commit_group;
    ld.shared.b32 %r10, [%r4];
    cp.async.wait_group 0;
    ld.shared.b32 %r11, [%r4];
    ld.shared.b32 %r12, [%r4+4];
    mul.wide.u32 %rd8, %r1, 12;
    add.s64 %rd9, %rd4, %rd8;
    st.global.b32 [%rd9], %r10;
    st.global.b32 [%rd9+4], %r11;
    st.global.b32 [%rd9+8], %r12;
"""
    src = _simple(body, shared=".shared .align 16 .b8 buf[256];")
    data = np.arange(1, 65, dtype=np.uint32) * 0x01010101
    out = run_ptx(src, [data, np.zeros(96, np.uint32)], (1, 1, 1))[1].reshape(32, 3)
    assert (out[:, 0] == 0x55555555).all()  # not landed before the wait
    raw = data.view(np.uint8).reshape(32, 8)
    for t in range(32):
        keep = t % 9
        want = np.where(np.arange(8) < keep, raw[t], 0).astype(np.uint8).view(np.uint32)
        assert out[t, 1:].tolist() == want.tolist(), t


def test_cp_async_wait_group_keeps_newest_groups_pending() -> None:
    body = """
    mov.u32 %r2, buf;
    shl.b32 %r3, %r1, 4;
    add.s32 %r4, %r2, %r3;
    mul.wide.u32 %rd6, %r1, 16;
    add.s64 %rd7, %rd1, %rd6;
    cp.async.cg.shared.global [%r4], [%rd7], 16;
    cp.async.commit_group;
    cp.async.cg.shared.global [%r4+512], [%rd7], 16, 4;
    cp.async.commit_group;
    cp.async.wait_group 1;
    ld.shared.b32 %r10, [%r4];
    ld.shared.b32 %r11, [%r4+516];
    cp.async.wait_all;
    ld.shared.b32 %r12, [%r4+512];
    ld.shared.b32 %r13, [%r4+516];
    mul.wide.u32 %rd8, %r1, 16;
    add.s64 %rd9, %rd4, %rd8;
    st.global.v4.b32 [%rd9], {%r10, %r11, %r12, %r13};
"""
    src = _simple(body, shared=".shared .align 16 .b8 buf[1024];")
    data = np.arange(1, 129, dtype=np.uint32)
    out = run_ptx(src, [data, np.zeros(128, np.uint32)], (1, 1, 1))[1].reshape(32, 4)
    first = data.reshape(32, 4)[:, 0]
    np.testing.assert_array_equal(out[:, 0], first)  # oldest group retired
    np.testing.assert_array_equal(out[:, 1], 0)  # newest still pending (zero shared)
    np.testing.assert_array_equal(out[:, 2], first)
    np.testing.assert_array_equal(out[:, 3], 0)  # src-size 4: zero filled


def test_cp_async_bad_size_is_an_error() -> None:
    body = """
    mov.u32 %r2, buf;
    cp.async.cg.shared.global [%r2], [%rd1], 8;
"""
    src = _simple(body, shared=".shared .align 16 .b8 buf[16];")
    args = [np.zeros(4, np.uint32), np.zeros(32, np.uint32)]
    with pytest.raises(PtxSimError, match="ptxas refuses .* expected to be 16"):
        run_ptx(src, args, (1, 1, 1))
    # the simulator's own rule, should a form slip past the gate
    with pytest.raises(PtxSimError, match="cp-size 8 is not allowed"):
        run_ptx(src, args, (1, 1, 1), assemble=False)


def _prmt_ref(a: int, b: int, c: int) -> int:
    src = (b << 32) | a
    out = 0
    for i in range(4):
        nib = (c >> (4 * i)) & 0xF
        byte = (src >> (8 * (nib & 7))) & 0xFF
        if nib & 8:
            byte = 0xFF if byte & 0x80 else 0
        out |= byte << (8 * i)
    return out


def test_prmt_and_bfi_against_python() -> None:
    body = """
    mul.wide.u32 %rd6, %r1, 12;
    add.s64 %rd7, %rd1, %rd6;
    ld.global.b32 %r2, [%rd7];
    ld.global.b32 %r3, [%rd7+4];
    ld.global.b32 %r4, [%rd7+8];
    prmt.b32 %r5, %r2, %r3, %r4;
    and.b32 %r6, %r4, 31;
    shr.u32 %r7, %r4, 8;
    and.b32 %r7, %r7, 31;
    bfi.b32 %r8, %r2, %r3, %r6, %r7;
    prmt.b32.f4e %r9, %r2, %r3, %r4;
    mul.wide.u32 %rd8, %r1, 12;
    add.s64 %rd9, %rd4, %rd8;
    st.global.b32 [%rd9], %r5;
    st.global.b32 [%rd9+4], %r8;
    st.global.b32 [%rd9+8], %r9;
"""
    data = RNG.integers(0, 2**32, (32, 3), dtype=np.uint64).astype(np.uint32)
    out = run_ptx(_simple(body), [data.reshape(-1), np.zeros(96, np.uint32)], (1, 1, 1))[1]
    out = out.reshape(32, 3)
    for t in range(32):
        a, b, c = (int(x) for x in data[t])
        assert int(out[t, 0]) == _prmt_ref(a, b, c)
        pos, ln = c & 31, (c >> 8) & 31
        ln = min(ln, 32 - pos)
        fm = ((1 << ln) - 1) << pos
        assert int(out[t, 1]) == (b & ~fm) | ((a << pos) & fm) & 0xFFFFFFFF
        src, s = (b << 32) | a, c & 3
        want = sum((((src >> (8 * ((s + i) & 7))) & 0xFF) << (8 * i)) for i in range(4))
        assert int(out[t, 2]) == want


def test_ldmatrix_x4_trans_feeds_mma_b_fragment() -> None:
    # a 16x8 (k x n) f16 B tile stored row-major (n contiguous) in shared; ldmatrix.x2.trans
    # must produce exactly the mma B fragment: reg j of lane l = B[2t+8j .. +1, g]
    body = """
    mul.wide.u32 %rd6, %r1, 8;
    add.s64 %rd7, %rd1, %rd6;
    ld.global.b64 %rd8, [%rd7];
    mov.u32 %r2, buf;
    shl.b32 %r3, %r1, 3;
    add.s32 %r4, %r2, %r3;
    st.shared.b64 [%r4], %rd8;
    bar.sync 0;
    and.b32 %r5, %r1, 15;
    shl.b32 %r6, %r5, 4;
    add.s32 %r7, %r2, %r6;
    ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%r10, %r11}, [%r7];
    mul.wide.u32 %rd9, %r1, 8;
    add.s64 %rd10, %rd4, %rd9;
    st.global.v2.b32 [%rd10], {%r10, %r11};
"""
    b = RNG.standard_normal((16, 8)).astype(np.float16)
    src = _simple(body, shared=".shared .align 16 .b8 buf[256];")
    out = run_ptx(src, [b.view(np.uint16).reshape(-1), np.zeros(64, np.uint32)], (1, 1, 1))[1]
    out = out.reshape(32, 2)
    fb = fragment("m16n8k16", "b", "f16")
    bits = b.view(np.uint16).astype(np.uint64)
    np.testing.assert_array_equal(out.astype(np.uint64), words_of(bits, fb, 16))


def test_mma_errors_are_sim_errors() -> None:
    partial = (
        mma_kernel(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", 4, 2, 4, (False, False, False), 32
        )
        .replace("    ld.global.b32 %r10", "    setp.lt.u32 %p1, %r1, 16;\n    ld.global.b32 %r10")
        .replace("    mma.sync", "    @%p1 mma.sync")
        .replace(".reg .b32 %r<200>;", ".reg .b32 %r<200>;\n.reg .pred %p<2>;")
    )
    args = [np.zeros(320, np.uint64), np.zeros(128, np.uint64)]
    with pytest.raises(PtxSimError, match="needs all 32 lanes"):
        run_ptx(partial, args, (1, 1, 1))
    bad = mma_kernel(
        "mma.sync.aligned.m16n8k16.row.col.f32.tf32.tf32.f32", 4, 2, 4, (False, False, False), 32
    )
    # ptxas refuses both; the simulator's own checks say why, should one slip past the gate
    with pytest.raises(PtxSimError, match="ptxas refuses .* vector size mismatch"):
        run_ptx(bad, args, (1, 1, 1))
    with pytest.raises(PtxSimError, match="not a PTX mma.sync form"):
        run_ptx(bad, args, (1, 1, 1), assemble=False)
    wrong = mma_kernel(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", 3, 2, 4, (False, False, False), 32
    )
    wargs = [np.zeros(288, np.uint64), np.zeros(128, np.uint64)]
    with pytest.raises(PtxSimError, match="ptxas refuses .* vector size mismatch"):
        run_ptx(wrong, wargs, (1, 1, 1))
    with pytest.raises(PtxSimError, match="expected 4 registers"):
        run_ptx(wrong, wargs, (1, 1, 1), assemble=False)


WGMMA_KERNEL = """
.version 8.8
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 k_a, .param .u32 k_a0, .param .u32 k_a1, .param .u32 k_a2,
                  .param .u32 k_a3,
                  .param .u64 k_b, .param .u32 k_b0, .param .u32 k_b1, .param .u32 k_b2,
                  .param .u32 k_b3,
                  .param .u64 k_out, .param .u32 k_n, .param .u32 k_s,
                  .hidden .param .align 64 .b8 k_ma[128], .hidden .param .align 64 .b8 k_mb[128])
.reqntid 128
{
    .reg .pred %p<4>;
    .reg .b32 %r<64>;
    .reg .f32 %f<40>;
    .reg .b64 %rd<32>;
    .shared .align 1024 .b8 buf[16392];
    mov.u32 %r1, %tid.x;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra $READY;
    mbarrier.init.shared.b64 [buf+16384], 1;
    mov.b64 %rd1, k_ma;
    cvta.param.u64 %rd2, %rd1;
    mov.b64 %rd3, k_mb;
    cvta.param.u64 %rd4, %rd3;
    mov.b32 %r2, 0;
    cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes [buf], [%rd2, {%r2, %r2}], [buf+16384];
    cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes [buf+8192], [%rd4, {%r2, %r2}], [buf+16384];
    mbarrier.arrive.expect_tx.shared.b64 _, [buf+16384], 16384;
$READY:
    bar.sync 0;
$WAIT:
    mbarrier.try_wait.parity.shared.b64 %p2, [buf+16384], 0;
    @!%p2 bra $WAIT;
    setp.ne.u32 %p3, %r1, 999;
    mov.u32 %r3, buf;
    cvt.u64.u32 %rd5, %r3;
    shr.u64 %rd5, %rd5, 4;
    or.b64 %rd5, %rd5, 4611686293305294848;
    add.s64 %rd6, %rd5, 512;
    wgmma.fence.sync.aligned;
{body}
    wgmma.commit_group.sync.aligned;
    wgmma.wait_group.sync.aligned 0;
    ld.param.b64 %rd7, [k_out];
    mul.wide.u32 %rd8, %r1, 128;
    add.s64 %rd9, %rd7, %rd8;
{stores}
    ret;
}
"""


def _wgmma_src(scale_a: int, first_scale_d: str) -> str:
    regs = ", ".join(f"%f{i}" for i in range(32))
    body = []
    for kk in range(4):  # K = 64 in four k16 steps: descriptors advance 32 bytes (2 units)
        pred = first_scale_d if kk == 0 else "%p3"
        body.append(f"    add.s64 %rd10, %rd5, {2 * kk};\n    add.s64 %rd11, %rd6, {2 * kk};")
        body.append(
            f"    wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{{regs}}}, %rd10, %rd11, "
            f"{pred}, {scale_a}, 1, 0, 0;"
        )
    stores = "\n".join(f"    st.global.f32 [%rd9+{4 * i}], %f{i};" for i in range(32))
    return WGMMA_KERNEL.replace("{body}", "\n".join(body)).replace("{stores}", stores)


@pytest.mark.parametrize("scale_a,first", [(1, "%p3"), (-1, "%p3"), (1, "0")])
def test_wgmma_from_tma_swizzled_shared_memory(scale_a, first) -> None:
    # A (64 x 64) and B^T (N x K = 64 x 64) land through 2-D TMA with the 128-byte swizzle; the
    # K-major SW128 descriptors (SBO 1024 B) must read them back; D's fragment: warp w, lane
    # (g, t), register 4j + s holds (16w + g + 8(s >> 1), 8j + 2t + (s & 1)).
    # The first wgmma's scale-d is %p3 (true: accumulate onto the 1.0 init) or 0 (ignore it).
    src = _wgmma_src(scale_a, first).replace(
        "    wgmma.fence.sync.aligned;",
        "".join(f"    mov.f32 %f{i}, 0f3F800000;\n" for i in range(32))
        + "    wgmma.fence.sync.aligned;",
    )
    a = RNG.standard_normal((64, 64)).astype(np.float16)
    bt = RNG.standard_normal((64, 64)).astype(np.float16)
    maps = [
        {"array": 0, "box": [64, 64], "swizzle": 128},
        {"array": 1, "box": [64, 64], "swizzle": 128},
    ]
    out = run_ptx(src, [a, bt, np.zeros(128 * 32, np.float32)], (1, 1, 1), tensor_maps=maps)[2]
    want = scale_a * (a.astype(np.float64) @ bt.astype(np.float64).T)
    if first == "%p3":
        want = want + 1.0
    got = np.full((64, 64), np.nan)
    out = out.reshape(128, 32)
    for tid in range(128):
        w, lane = divmod(tid, 32)
        g, t = lane >> 2, lane & 3
        for i in range(32):
            j, s = divmod(i, 4)
            got[16 * w + g + 8 * (s >> 1), 8 * j + 2 * t + (s & 1)] = out[tid, i]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_tma_2d_box_swizzle_and_zero_fill() -> None:
    # a 16 x 64 f16 box at (row -4, col 8) of a 40 x 100 tensor: rows < 0 read as zero; the
    # 128-byte rows are stored with 16-byte chunk c of row r at chunk c ^ (r % 8)
    src = (
        WGMMA_KERNEL.replace("{body}", "")
        .replace("{stores}", "")
        .replace("mov.b32 %r2, 0;", "mov.b32 %r2, 8;\n    mov.b32 %r20, -4;")
        .replace("[%rd2, {%r2, %r2}]", "[%rd2, {%r2, %r20}]")
        .replace(
            "expect_tx.shared.b64 _, [buf+16384], 16384",
            "expect_tx.shared.b64 _, [buf+16384], 2048",
        )
        .replace(
            "    cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes "
            "[buf+8192], [%rd4, {%r2, %r2}], [buf+16384];\n",
            "",
        )
    )
    dump = """
    shl.b32 %r30, %r1, 5;
    add.s32 %r31, %r3, %r30;
    mul.wide.u32 %rd12, %r1, 32;
    add.s64 %rd13, %rd7, %rd12;
    ld.shared.v4.b32 {%r40, %r41, %r42, %r43}, [%r31];
    st.global.v4.b32 [%rd13], {%r40, %r41, %r42, %r43};
    ld.shared.v4.b32 {%r40, %r41, %r42, %r43}, [%r31+16];
    st.global.v4.b32 [%rd13+16], {%r40, %r41, %r42, %r43};
"""
    src = src.replace("    ret;\n}", dump + "    ret;\n}")
    a = np.arange(40 * 100, dtype=np.uint16).reshape(40, 100)
    maps = [
        {"array": 0, "box": [16, 64], "swizzle": 128},
        {"array": 1, "box": [16, 64], "swizzle": 128},
    ]
    out = run_ptx(src, [a, a, np.zeros(2048, np.float32)], (1, 1, 1), tensor_maps=maps)[2]
    raw = out.view(np.uint16)[:1024].reshape(16, 8, 8)  # [row, physical chunk, element]
    for r in range(16):
        for c in range(8):
            chunk = raw[r, c ^ (r % 8)]
            row = r - 4
            want = a[row, 8 + 8 * c : 16 + 8 * c] if row >= 0 else np.zeros(8)
            np.testing.assert_array_equal(chunk, want)


def test_wgmma_and_tma_errors() -> None:
    src = _wgmma_src(1, "%p3")
    a = np.zeros((64, 64), np.float16)
    args = [a, a, np.zeros(4096, np.float32)]
    with pytest.raises(PtxSimError, match="carries no box"):
        run_ptx(src, args, (1, 1, 1), tensor_maps=[{"array": 0}, {"array": 1}])
    with pytest.raises(PtxSimError, match="bad tensor map description"):
        run_ptx(src, args, (1, 1, 1), tensor_maps=[{"array": 5}, {"array": 1}])
    with pytest.raises(PtxSimError, match="2 tensor-map params, 1 tensor maps were given"):
        run_ptx(src, args, (1, 1, 1), tensor_maps=[{"array": 0}])
    maps = [{"array": 0, "box": [64, 64], "swizzle": 128}] * 2
    bad = src.replace("m64n64k16.f32.f16.f16", "m64n64k8.f32.f16.f16")
    with pytest.raises(PtxSimError, match="ptxas refuses .* with shape '.m64n64k8'"):
        run_ptx(bad, args, (1, 1, 1), tensor_maps=maps)
    with pytest.raises(PtxSimError, match="not a wgmma shape"):
        run_ptx(bad, args, (1, 1, 1), tensor_maps=maps, assemble=False)
    part = src.replace(".reqntid 128", ".reqntid 160")
    with pytest.raises(PtxSimError, match="all 4 warps of warpgroup 1"):
        run_ptx(part, args, (1, 1, 1), tensor_maps=maps)


DATA = Path(__file__).parent / "data" / "tensor_ptx"


@pytest.mark.parametrize("name", ["matmul_f16.sm_90", "layernorm.sm_90"])
def test_tensor_maps_read_from_tileiras_host_object(tileiras_ptx, name) -> None:
    # the host object comes from tests/ptx_corpus.py's capture; the maps recorded in
    # tests/data/tensor_ptx (box, swizzle per hidden param) must come out of it again
    from tilegen.runtime.ptx.nv_host import tensor_maps

    kernel, arch = name.split(".")
    k = next(k for k in ptx_corpus.kernels() if k["name"] == kernel)
    ptx, _info = ptx_corpus.captured(kernel, arch)
    ranks = [np.asarray(a).ndim for a in ptx_corpus.arguments(k)[0]]
    got = tensor_maps(ptx_corpus.host_object(kernel, arch), ptx.read_text(), ranks)
    want = json.loads((DATA / "sm_90_tensor_maps.json").read_text())["maps"][name]
    assert got == want
    assert got[0]["swizzle"] in (0, 32, 64, 128) and len(got[0]["box"]) == ranks[got[0]["array"]]


def test_unsupported_ldmatrix_forms_are_errors_not_silent() -> None:
    body = """
    mov.u32 %r2, buf;
    ldmatrix.sync.aligned.m8n16.x1.shared.b8x16.b6x16_p32 {%r3}, [%r2];
"""
    sm100a = (".version 8.0\n.target sm_90", ".version 8.6\n.target sm_100a")
    src = _simple(body, shared=".shared .align 16 .b8 buf[512];").replace(*sm100a)
    args = [np.zeros(4, np.uint32), np.zeros(32, np.uint32)]
    with pytest.raises(PtxSimError, match="only .m8n8 .b16 and ldmatrix .m16n16"):
        run_ptx(src, args, (1, 1, 1))
    body = body.replace(
        ".m8n16.x1.shared.b8x16.b6x16_p32", ".m16n16.x1.trans.shared.b8x16.b6x16_p32"
    ).replace("{%r3}", "{%r3, %r4}")
    src = _simple(body, shared=".shared .align 16 .b8 buf[512];").replace(*sm100a)
    with pytest.raises(PtxSimError, match="only the .trans .b8 form"):
        run_ptx(src, args, (1, 1, 1))
