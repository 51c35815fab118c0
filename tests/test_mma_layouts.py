"""MmaLayout / DotOperandLayout: element_of/owners consistency, agreement with the simulator's
PTX fragment tables, and whole tile dots: registers laid out by element_of, fed to mma.sync
instruction by instruction (instr_regs), compute A @ B + C. Plus the ldmatrix staging layout."""

from __future__ import annotations

import numpy as np
import pytest

from tilegen.runtime.layouts.attrs import LayoutError
from tilegen.runtime.layouts.mma import (
    DotOperandLayout,
    MmaLayout,
    k_width_for,
    ldmatrix_shared_layout,
)
from tilegen.runtime.ptx.launch import run_ptx
from tilegen.runtime.ptx.sim.tensor_ops import BITS, fp8_table, fragment

RNG = np.random.default_rng(11)

CONFIGS = [  # (instr, warps, k_width, (M, N, K))
    ((16, 8), (1, 1), 2, (16, 8, 16)),
    ((16, 8), (2, 2), 2, (64, 32, 32)),
    ((16, 8), (4, 1), 1, (64, 16, 16)),
    ((16, 8), (1, 2), 4, (32, 32, 64)),
    ((16, 8), (2, 2), 2, (16, 8, 16)),  # smaller than the CTA tile: replicated
    ((8, 8), (2, 1), 1, (16, 16, 8)),
]


def layouts(instr, warps, kw):
    acc = MmaLayout(2, warps, instr)
    return acc, DotOperandLayout(0, acc, kw), DotOperandLayout(1, acc, kw)


@pytest.mark.parametrize("instr,warps,kw,mnk", CONFIGS)
def test_element_of_and_owners_agree(instr, warps, kw, mnk) -> None:
    M, N, K = mnk
    acc, a, b = layouts(instr, warps, kw)
    for lay, shape in ((acc, (M, N)), (a, (M, K)), (b, (K, N))):
        seen = {}
        for tid in range(lay.num_threads()):
            for reg in range(lay.regs_per_thread(shape)):
                c = lay.element_of(tid, reg, shape)
                assert all(0 <= x < s for x, s in zip(c, shape))
                assert (tid, reg) in lay.owners(c, shape)
                seen.setdefault(c, set()).add((tid, reg))
        assert len(seen) == shape[0] * shape[1]  # covers the whole tile
        for c, who in seen.items():
            assert sorted(who) == lay.owners(c, shape)
        # replication: A over warps along N, B over warps along M, accumulator only by wrap
        counts = {len(w) for w in seen.values()}
        cta = acc.cta_tile()
        if lay is acc and M >= cta[0] and N >= cta[1]:
            assert counts == {1}
        if lay is a and M >= cta[0]:
            assert counts == {warps[1]}
        if lay is b and N >= cta[1]:
            assert counts == {warps[0]}


@pytest.mark.parametrize(
    "instr,kw,t,shape",
    [
        ((16, 8), 2, "f16", "m16n8k16"),
        ((16, 8), 1, "tf32", "m16n8k8"),
        ((16, 8), 4, "s8", "m16n8k32"),
        ((16, 8), 4, "e4m3", "m16n8k32"),
        ((8, 8), 1, "f64", "m8n8k4"),
    ],
)
def test_single_instruction_matches_simulator_fragments(instr, kw, t, shape) -> None:
    acc, a, b = layouts(instr, (1, 1), kw)
    m, n = instr
    k = a.instr_k
    assert shape == f"m{m}n{n}k{k}"
    ct = "f64" if t == "f64" else "f32"
    for lay, op, et, sh in ((acc, "c", ct, (m, n)), (a, "a", t, (m, k)), (b, "b", t, (k, n))):
        frag = fragment(shape, op, et).reshape(32, -1, 2)
        assert lay.regs_per_thread(sh) == frag.shape[1]
        for lane in range(32):
            got = [lay.element_of(lane, r, sh) for r in range(frag.shape[1])]
            assert got == [tuple(x) for x in frag[lane].tolist()]


def _raw_values(t: str, shape):
    if t == "f16":
        v = RNG.standard_normal(shape).astype(np.float16)
        return v.view(np.uint16).astype(np.uint64), v.astype(np.float64)
    if t == "tf32":
        v = (RNG.integers(-64, 64, shape) / 8).astype(np.float32)  # exact in tf32
        return v.view(np.uint32).astype(np.uint64), v.astype(np.float64)
    if t == "s8":
        v = RNG.integers(-128, 128, shape)
        return (v & 0xFF).astype(np.uint64), v.astype(np.float64)
    if t == "e4m3":
        table = fp8_table("e4m3")
        bits = RNG.choice(np.nonzero(np.abs(table) < 8)[0], shape).astype(np.uint64)
        return bits, table[bits.astype(np.int64)]
    v = RNG.standard_normal(shape)
    return v.view(np.uint64), v


def _pack(lay, shape, bits, per, width) -> np.ndarray:
    """[threads, words] packed registers: `per` consecutive layout registers per word."""
    nregs = lay.regs_per_thread(shape)
    out = np.zeros((lay.num_threads(), nregs // per), np.uint64)
    for tid in range(lay.num_threads()):
        for reg in range(nregs):
            c = lay.element_of(tid, reg, shape)
            out[tid, reg // per] |= bits[c] << np.uint64((reg % per) * width)
    return out


@pytest.mark.parametrize(
    "t,instr,warps,mnk",
    [
        ("f16", (16, 8), (2, 2), (32, 32, 32)),
        ("tf32", (16, 8), (2, 1), (32, 16, 16)),
        ("s8", (16, 8), (1, 2), (16, 32, 64)),
        ("e4m3", (16, 8), (2, 2), (32, 16, 32)),
        ("f64", (8, 8), (2, 2), (16, 32, 8)),
        ("f16", (16, 8), (2, 2), (16, 8, 16)),
    ],
)
def test_tile_dot_through_mma_sync(t, instr, warps, mnk) -> None:
    M, N, K = mnk
    kw = 1 if t == "f64" else k_width_for(BITS[t])
    acc, a, b = layouts(instr, warps, kw)
    ct = {"f16": "f32", "tf32": "f32", "e4m3": "f32", "s8": "s32", "f64": "f64"}[t]
    abits, av = _raw_values(t, (M, K))
    bbits, bv = _raw_values(t, (K, N))
    cv = RNG.integers(-1000, 1000, (M, N)).astype(np.float64)
    cbits = (
        cv.view(np.uint64)
        if ct == "f64"
        else (
            cv.astype(np.float32).view(np.uint32).astype(np.uint64)
            if ct == "f32"
            else (cv.astype(np.int64) & 0xFFFFFFFF).astype(np.uint64)
        )
    )
    per = 1 if t == "f64" else kw
    width = 64 if t == "f64" else BITS[t]
    wa, wb = _pack(a, (M, K), abits, per, width), _pack(b, (K, N), bbits, per, width)
    wc = _pack(acc, (M, N), cbits, 1, 64 if ct == "f64" else 32)
    words = np.concatenate([wa, wb, wc], axis=1)
    na, nb, nc = wa.shape[1], wb.shape[1], wc.shape[1]
    wide = t == "f64"
    R = "%rd" if wide else "%r"
    lines = [
        f"    ld.global.b{64 if wide else 32} {R}{100 + i}, [%rd3+{8 * i}];"
        for i in range(na + nb + nc)
    ]
    rm_n, rn_n = acc.reps((M, N))
    _, rk_n = a.reps((M, K))
    m, n = instr
    shape = f"m{m}n{n}k{a.instr_k}"
    opcode = f"mma.sync.aligned.{shape}.row.col.{ct}.{t}.{t}.{ct}"
    for rm in range(rm_n):
        for rn in range(rn_n):
            d = [f"{R}{100 + na + nb + r}" for r in acc.instr_regs(rm, rn, (M, N))]
            for rk in range(rk_n):
                aw = sorted({r // per for r in a.instr_regs(rm, rk, (M, K))})
                bw = sorted({r // per for r in b.instr_regs(rn, rk, (K, N))})
                aregs = ", ".join(f"{R}{100 + w}" for w in aw)
                bregs = ", ".join(f"{R}{100 + na + w}" for w in bw)
                dd = ", ".join(d)
                lines.append(f"    {opcode} {{{dd}}}, {{{aregs}}}, {{{bregs}}}, {{{dd}}};")
    for i in range(nc):
        lines.append(f"    st.global.b{64 if wide else 32} [%rd5+{8 * i}], {R}{100 + na + nb + i};")
    nthreads = acc.num_threads()
    src = f"""
.version 8.4
.target sm_90
.address_size 64
.visible .entry k(.param .u64 k_in, .param .u32 k_n, .param .u32 k_s,
                  .param .u64 k_out, .param .u32 k_m, .param .u32 k_t)
.reqntid {nthreads}
{{
    .reg .b32 %r<600>;
    .reg .b64 %rd<600>;
    ld.param.b64 %rd1, [k_in];
    ld.param.b64 %rd4, [k_out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, {8 * (na + nb + nc)};
    add.s64 %rd3, %rd1, %rd2;
    mul.wide.u32 %rd6, %r1, {8 * nc};
    add.s64 %rd5, %rd4, %rd6;
""" + "\n".join(lines) + "\n    ret;\n}\n"
    out = run_ptx(src, [words.reshape(-1), np.zeros(nthreads * nc, np.uint64)], (1, 1, 1))[1]
    out = out.reshape(nthreads, nc)
    want = av @ bv + cv
    got = np.full((M, N), np.nan)
    for tid in range(nthreads):
        for reg in range(acc.regs_per_thread((M, N))):
            raw = out[tid, reg]
            if ct == "f64":
                val = np.array([raw], np.uint64).view(np.float64)[0]
            elif ct == "f32":
                val = np.array([raw], np.uint64).astype(np.uint32).view(np.float32)[0]
            else:
                val = np.array([raw], np.uint64).astype(np.uint32).view(np.int32)[0]
            r, c = acc.element_of(tid, reg, (M, N))
            if not np.isnan(got[r, c]):
                assert got[r, c] == val  # replicas agree
            got[r, c] = val
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_format_asm_and_bad_parameters() -> None:
    acc = MmaLayout(2, (2, 2))
    assert acc.format_asm() == (
        "#nv_tileas.mma<{versionMajor = 2, warpsPerCTA = [2, 2], instrShape = [16, 8]}>"
    )
    assert DotOperandLayout(1, acc, 2).format_asm() == (
        f"#nv_tileas.dot_op<{{opIdx = 1, parent = {acc.format_asm()}, kWidth = 2}}>"
    )
    with pytest.raises(LayoutError, match="version 3"):
        MmaLayout(3, (1, 1))
    with pytest.raises(LayoutError, match="instrShape"):
        MmaLayout(2, (1, 1), (16, 16))
    with pytest.raises(LayoutError, match="powers of two"):
        MmaLayout(2, (3, 1))
    with pytest.raises(LayoutError, match="kWidth 8"):
        DotOperandLayout(0, acc, 8)
    with pytest.raises(LayoutError, match="kWidth 2"):
        DotOperandLayout(0, MmaLayout(2, (1, 1), (8, 8)), 2)
    with pytest.raises(LayoutError, match="opIdx"):
        DotOperandLayout(2, acc, 2)
    with pytest.raises(LayoutError, match="out of range"):
        acc.element_of(128, 0, (32, 16))
    with pytest.raises(LayoutError, match="outside tile"):
        acc.owners((32, 0), (32, 16))


STAGING = [
    (bits, rows, cols)
    for bits in (8, 16, 32)
    for rows, cols in [(64, 8), (32, 16), (64, 32), (16, 64), (32, 128)]
    if cols * bits // 8 >= 16  # a row holds at least one 16-byte ldmatrix row
]


@pytest.mark.parametrize("bits,rows,cols", STAGING)
def test_ldmatrix_staging_layout_is_bank_conflict_free(bits, rows, cols) -> None:
    shape = (rows, cols)  # row-major: cols contiguous (order (1, 0))
    eb = bits // 8
    lay = ldmatrix_shared_layout(bits, shape)
    vec = 16 // eb
    assert lay.vec == vec
    # each 8x8 (16-byte rows) matrix: 8 consecutive rows at one 16-byte column chunk
    for r0 in range(0, rows, 8):
        for c0 in range(0, cols, vec):
            addrs = [lay.offset((r0 + i, c0), shape) * eb for i in range(8)]
            assert all(a % 16 == 0 for a in addrs)  # a chunk stays contiguous
            groups = {(a // 16) % 8 for a in addrs}
            assert len(groups) == min(8, rows), (r0, c0, addrs)
    # and it is a permutation of the tile
    offs = {lay.offset((r, c), shape) for r in range(rows) for c in range(cols)}
    assert offs == set(range(rows * cols))


def test_staging_layout_rejects_bad_input() -> None:
    with pytest.raises(LayoutError, match="12-bit"):
        ldmatrix_shared_layout(12, (16, 16))
    with pytest.raises(LayoutError, match="powers of two"):
        ldmatrix_shared_layout(16, (24, 16))
    with pytest.raises(LayoutError):
        k_width_for(4)


def test_mma_and_dot_op_syntax_round_trips() -> None:
    from tilegen.runtime.asm import parse_module, print_module
    from tilegen.runtime.diagnostics import DiagnosticError

    acc = MmaLayout(2, (2, 2))
    dot = DotOperandLayout(1, acc, 4)
    t_in, t_out = f"tile<64x32xi8, {dot.format_asm()}>", f"tile<64x32xi8, {acc.format_asm()}>"
    text = (
        f"nv_tileaa.func @k : ({t_in}) -> () {{\n^bb0(%a: {t_in}):\n"
        f"  %0 = nv_tileas.convert_layout %a : ({t_in}) -> {t_out}\n  nv_tileaa.return\n}}\n"
    )
    m = parse_module(text)
    conv = m.regions[0].blocks[0].ops[0].regions[0].blocks[0].ops[0]
    assert conv.operands[0].type.encoding == dot
    assert conv.results[0].type.encoding == acc
    assert (
        parse_module(print_module(m))
        .regions[0]
        .blocks[0]
        .ops[0]
        .regions[0]
        .blocks[0]
        .ops[0]
        .operands[0]
        .type.encoding
        == dot
    )
    bad = text.replace("kWidth = 4", "kWidth = 3")
    with pytest.raises(DiagnosticError, match="kWidth 3 not in"):
        parse_module(bad)
    worse = text.replace("kWidth = 4}", "kWidth = 4, extra = 1}")
    with pytest.raises(DiagnosticError, match="unknown key 'extra'"):
        parse_module(worse)
