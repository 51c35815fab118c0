"""tcgen05: tensor memory and the sm_100 tensor core (PTX ISA "TensorCore 5th Generation").

Tensor memory (TMEM) is 128 lanes x 512 columns of 32-bit cells per CTA, addressed as
`lane << 16 | column`. `tcgen05.alloc` (one warp, `.sync.aligned`) allocates a power-of-two
number of columns (32..512) and writes the address to shared memory; `dealloc` frees them,
`relinquish_alloc_permit` forbids further allocations; everything must be freed before the CTA
exits. Warp w of a warpgroup may access lanes 32 (w % 4) .. 32 (w % 4) + 31 only.

`tcgen05.mma.cta_group::1.kind::{f16,tf32,f8f6f4,i8}` [d], a, b, idesc, {disable-output-lane},
enable-input-d: one thread issues it; D (M x N, in TMEM) = A (M x K) B (K x N) (+ D). A comes
from a shared-memory descriptor or from TMEM, B from a descriptor; the 32-bit instruction
descriptor gives the types, M, N, negation and transposition (MN-major) of A and B. D row r
lives in TMEM lane r (M = 128) or lane 32 (r / 16) + r % 16 (M = 64), column j at d's column
+ j. It completes asynchronously: `tcgen05.commit` makes an mbarrier arrive once all prior
tcgen05 operations of the thread complete (runtime/ptx/sim/asyncproxy.py's engine).

`tcgen05.ld` / `tcgen05.st` `.sync.aligned.<shape>.<num>.b32` move data between a warp's
registers and its TMEM lanes; per repetition (num = x1 .. x128) thread t holds:

    32x32b    lane t, 1 column                16x64b    lane t/2, column t%2
    16x128b   reg h: lane 8h + t/4, column t%4
    16x256b   reg j: lane t/4 + 8 (j/2), column 2 (t%4) + j%2
    16x32bx2  lane t%16, column (t < 16 ? 0 : the immediate half-split offset)

(16-lane shapes access the 16 lanes from the address's lane.) Results are computed exactly in
float64 (int64) and rounded once to the accumulator type, as for mma.sync."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tilegen.runtime.ptx.parser import Addr, Instr, Reg, Vec
from tilegen.runtime.ptx.sim.asyncproxy import AsyncOp, shared_addrs
from tilegen.runtime.ptx.sim.tensor_ops import canonical_addresses, decode, encode, matmul

if TYPE_CHECKING:
    from tilegen.runtime.ptx.sim.cta import CtaState

LANES, COLUMNS = 128, 512


def _err(msg: str) -> Exception:
    from tilegen.runtime.ptx.sim.cta import PtxSimError

    return PtxSimError(msg)


class Tmem:
    def __init__(self) -> None:
        self.data = np.zeros((LANES, COLUMNS), np.uint32)
        self.allocs: dict[int, int] = {}  # first column -> columns
        self.relinquished = False

    def alloc(self, ncols: int) -> int:
        if ncols < 32 or ncols > COLUMNS or ncols & (ncols - 1):
            raise _err(f"tcgen05.alloc of {ncols} columns: a power of two in [32, 512]")
        if self.relinquished:
            raise _err("tcgen05.alloc after tcgen05.relinquish_alloc_permit")
        for col in range(0, COLUMNS, ncols):
            if all(c + n <= col or col + ncols <= c for c, n in self.allocs.items()):
                self.allocs[col] = ncols
                return col
        raise _err(f"tcgen05.alloc of {ncols} columns: tensor memory is exhausted")

    def dealloc(self, addr: int, ncols: int) -> None:
        col = addr & 0xFFFF
        if addr >> 16 or self.allocs.get(col) != ncols:
            raise _err(f"tcgen05.dealloc of {ncols} columns at 0x{addr:x}: no such allocation")
        del self.allocs[col]

    def check_columns(self, c0: int, c1: int, what: str) -> None:
        if not any(c <= c0 and c1 <= c + n for c, n in self.allocs.items()):
            raise _err(f"{what} uses tensor memory columns [{c0}, {c1}) outside any allocation")


def tmem(st: "CtaState", lane: int) -> Tmem:
    """The tensor memory of the CTA `lane` belongs to (CTAs may be simulated side by side)."""
    if st.tmem is None:
        st.tmem = {}
    cta = int(lane) // st.threads
    if cta not in st.tmem:
        st.tmem[cta] = Tmem()
    return st.tmem[cta]


def _warps_full(mask: np.ndarray, what: str) -> np.ndarray:
    warps = np.unique(np.nonzero(mask)[0] // 32)
    for w in warps:
        if not mask[w * 32 : w * 32 + 32].all():
            raise _err(f"{what} is .sync.aligned: all 32 lanes of warp {w} must execute it")
    return warps


def _uniform(vals: np.ndarray, what: str) -> int:
    if len(set(vals.tolist())) != 1:
        raise _err(f"{what}: the lanes of a warp give different values")
    return int(vals[0])


def _tmem_addr(st: "CtaState", op, mask: np.ndarray) -> np.ndarray:
    if not isinstance(op, Addr):
        raise _err("expected a [tensor-memory address] operand")
    base = st.bits(op.base).astype(np.int64) if op.base is not None else np.zeros(st.n, np.int64)
    return (base + op.offset)[mask] & 0xFFFFFFFF


# -- alloc / dealloc ------------------------------------------------------------------------------
def do_alloc(st: "CtaState", ins: Instr, mask: np.ndarray, line: int = 0) -> None:
    """alloc / dealloc / relinquish_alloc_permit. ``.cta_group::2``: one warp of each CTA of
    the pair executes it, for its own tensor memory (both pick the same columns: the pair's
    allocations go together)."""
    parts = ins.parts
    if "cta_group::2" in parts and st.csize < 2:
        raise _err(f"{ins.opcode}: cta_group::2 needs a cluster of at least 2 CTAs")
    if parts[1] == "relinquish_alloc_permit":
        for w in _warps_full(mask, ins.opcode):
            tmem(st, w * 32).relinquished = True
        return
    if parts[1] == "alloc":
        for w in _warps_full(mask, ins.opcode):
            sel = np.zeros(st.n, bool)
            sel[w * 32 : w * 32 + 32] = True
            ncols = _uniform(st.read(ins.operands[1], "u32")[sel], ins.opcode)
            dst = _uniform(shared_addrs(st, ins.operands[0], sel), ins.opcode)
            col = tmem(st, w * 32).alloc(ncols)
            lanes, st.cur_mask = st.cur_mask, sel  # (the strict mode's writer: warp w)
            try:
                st.shared.store(np.array([dst]), 4, np.array([col], np.uint64))
            finally:
                st.cur_mask = lanes
        return
    if parts[1] == "dealloc":
        for w in _warps_full(mask, ins.opcode):
            sel = np.zeros(st.n, bool)
            sel[w * 32 : w * 32 + 32] = True
            addr = _uniform(st.read(ins.operands[0], "u32")[sel], ins.opcode)
            ncols = _uniform(st.read(ins.operands[1], "u32")[sel], ins.opcode)
            tmem(st, w * 32).dealloc(addr, ncols)
            if st.engine.hazards is not None:  # (every access ordered before it)
                col = addr & 0xFFFF
                cta = int(w) * 32 // st.threads
                st.engine.hazards.tmem_dealloc(int(w), cta, col, col + ncols, line)
        return
    raise _err(f"unsupported {ins.opcode!r}")


# -- mma ----------------------------------------------------------------------------------------
_KINDS = {  # kind -> (K, {code: element type}) of A and B
    "f16": (16, {0: "f16", 1: "bf16"}),
    "tf32": (8, {2: "tf32"}),
    "f8f6f4": (32, {0: "e4m3", 1: "e5m2"}),
    "i8": (32, {0: "u8", 1: "s8"}),
}
_DTYPES = {1: "f32", 2: "s32", 0: "f16"}
_SWIZZLE = {0: (0, 16), 1: (128, 32), 2: (128, 16), 4: (64, 16), 6: (32, 16)}


def decode_idesc(idesc: int, kind: str, pair: bool = False) -> dict:
    """Fields of a kind::f16/tf32/f8f6f4/i8 instruction descriptor (PTX ISA, "Instruction
    descriptor"); ``pair``: a cta_group::2 MMA (M 256: 128 rows in each CTA of the pair)."""
    k, types = _KINDS[kind]
    f = {
        "sparse": (idesc >> 2) & 1,
        "saturate": (idesc >> 3) & 1,
        "dtype": _DTYPES.get((idesc >> 4) & 3),
        "atype": types.get((idesc >> 7) & 7),
        "btype": types.get((idesc >> 10) & 7),
        "neg_a": (idesc >> 13) & 1,
        "neg_b": (idesc >> 14) & 1,
        "trans_a": (idesc >> 15) & 1,
        "trans_b": (idesc >> 16) & 1,
        "n": ((idesc >> 17) & 0x3F) << 3,
        "m": ((idesc >> 24) & 0x1F) << 4,
        "k": k,
    }
    if f["sparse"]:
        raise _err("sparse tcgen05.mma is not simulated")
    if f["atype"] is None or f["btype"] is None or f["dtype"] is None:
        raise _err(f"instruction descriptor 0x{idesc:08x}: unknown types for kind::{kind}")
    if f["dtype"] == "f16":
        raise _err("tcgen05.mma with an f16 accumulator is not simulated")
    m, n = f["m"], f["n"]
    if pair:
        if m not in (128, 256) or not (32 <= n <= 256) or n % 32:
            raise _err(
                f"instruction descriptor 0x{idesc:08x}: M={m}, N={n} is not a cta_group::2 shape"
            )
        return f
    if m not in (64, 128) or not (8 <= n <= 256) or n % (8 if m == 64 else 16):
        raise _err(
            f"instruction descriptor 0x{idesc:08x}: M={m}, N={n} is not a cta_group::1 shape"
        )
    return f


def decode_smem_descriptor(desc: int) -> dict:
    """Fields of a tcgen05 shared-memory matrix descriptor."""
    if (desc >> 46) & 7 != 1:
        raise _err(f"shared-memory descriptor 0x{desc:016x}: bits 46-48 must be 0b001")
    code = (desc >> 61) & 7
    if code not in _SWIZZLE:
        raise _err(f"shared-memory descriptor 0x{desc:016x}: swizzle mode {code} is not simulated")
    if (desc >> 52) & 1:
        raise _err("absolute leading-dimension addressing (bit 52) is not simulated")
    span, atom = _SWIZZLE[code]
    return {
        "start": (desc & 0x3FFF) << 4,
        "lbo": ((desc >> 16) & 0x3FFF) << 4,
        "sbo": ((desc >> 32) & 0x3FFF) << 4,
        "base_offset": (desc >> 49) & 7,
        "swizzle": span,
        "atom": atom,
    }


def row_lanes(m: int, lane0: int = 0) -> np.ndarray:
    """TMEM lane of each row of an M-row matrix at an address whose lane field is `lane0`
    (cta_group::1): M = 128 fills lanes 0..127; M = 64 takes 16 lanes of each warp's quarter
    (lane0 0 or 16 picks which half)."""
    r = np.arange(m)
    if m == 128:
        if lane0:
            raise _err(f"an M=128 matrix in tensor memory must start at lane 0, not {lane0}")
        return r
    if lane0 not in (0, 16):
        raise _err(f"an M=64 matrix in tensor memory must start at lane 0 or 16, not {lane0}")
    return lane0 + 32 * (r // 16) + r % 16


_BITS = {"f16": 16, "bf16": 16, "tf32": 32, "e4m3": 8, "e5m2": 8, "u8": 8, "s8": 8}


def _pair(st: "CtaState", lane: int) -> tuple[int, int]:
    """The batch indices of the CTA pair (even rank first) of the CTA ``lane`` belongs to."""
    if st.csize < 2 or st.csize % 2:
        raise _err("cta_group::2 needs a cluster of an even number of CTAs")
    cta = int(lane) // st.threads
    even = cta - int(st.rank[lane]) % 2
    return even, even + 1


def do_mma(st: "CtaState", ins: Instr, mask: np.ndarray, line: int) -> None:
    """tcgen05.mma. ``.cta_group::2`` (M 256): one thread of the pair issues it; the even CTA
    holds rows 0..127 of A and D, the odd CTA rows 128..255, and B's N columns are split the
    same way (the first N/2 in the even CTA's shared memory); the descriptors and the TMEM
    address apply in each CTA alike."""
    parts = ins.parts
    pair = "cta_group::2" in parts
    if any(p.startswith("block_scale") or p == "ws" or p == "sp" for p in parts):
        raise _err(f"{ins.opcode}: block-scaled, .ws and sparse forms are not simulated")
    kind = next((p.split("::")[1] for p in parts if p.startswith("kind::")), None)
    if kind not in _KINDS:
        raise _err(f"{ins.opcode}: kind::{kind} is not simulated")
    ops = ins.operands
    eng = st.engine
    d_addr = _tmem_addr(st, ops[0], mask)
    a_tmem = isinstance(ops[1], Addr)
    if a_tmem and pair:
        raise _err(f"{ins.opcode}: A from tensor memory with cta_group::2 is not simulated")
    a_vals = _tmem_addr(st, ops[1], mask) if a_tmem else st.bits(ops[1], "b64")[mask]
    b_vals = st.bits(ops[2], "b64")[mask]
    idescs = st.read(ops[3], "u32")[mask]
    rest = ops[4:]
    disable = None
    if rest and isinstance(rest[0], Vec):
        disable = np.stack([st.bits(r, "b32") for r in rest[0].items])[:, mask]
        rest = rest[1:]
    enable = st.read(rest[0], "pred")[mask]
    if len(rest) > 1:
        raise _err(f"{ins.opcode}: scale-input-d is not simulated")
    for k, lane in enumerate(np.nonzero(mask)[0]):
        f = decode_idesc(int(idescs[k]), kind, pair)
        m, n, kk = f["m"], f["n"], f["k"]
        at, bt = f["atype"], f["btype"]
        es_a, es_b = _BITS[at] // 8 or 1, _BITS[bt] // 8 or 1
        dcol = int(d_addr[k]) & 0xFFFF
        # the CTAs taking part: (tensor memory, shared base, first TMEM row of the hazard map)
        ctas = _pair(st, lane) if pair else (int(lane) // st.threads,)
        share = [(tmem(st, c * st.threads), c * int(st.shared_stride), 128 * c) for c in ctas]
        mc, nc = m // len(ctas), n // len(ctas)  # rows of A / D and columns of B per CTA
        lane0 = int(d_addr[k]) >> 16
        if pair and m == 128:
            # 64 rows per CTA: row r's columns 0 .. N/2 in lane r, N/2 .. N in lane 64 + r (as
            # tileiras's 16x32bx2 epilogue reads them; its sm_100 GEMM checks this exactly)
            if lane0:
                raise _err(f"an M=128 cta_group::2 accumulator must start at lane 0, not {lane0}")
            r64 = np.arange(64)
            dmap = [(r64, 0, n // 2), (64 + r64, n // 2, n // 2)]
        else:
            dmap = [(row_lanes(mc, lane0), 0, n)]
        rows = np.concatenate([r for r, _, _ in dmap])
        width = max(w for _, _, w in dmap)
        reads, a_srcs, b_addrs, a_cells = [], [], [], None
        for tm, base, r0 in share:
            tm.check_columns(dcol, dcol + width, ins.opcode)
            if a_tmem:
                acol = int(a_vals[k]) & 0xFFFF
                per = 32 // _BITS[at]
                tm.check_columns(acol, acol + kk // per, ins.opcode)
                arows = row_lanes(mc, int(a_vals[k]) >> 16)
                a_srcs.append(("tmem", tm, acol, per, arows))
                a_cells = (arows + r0, acol, acol + kk // per)
            else:
                fa = decode_smem_descriptor(int(a_vals[k]))
                a_addr = base + canonical_addresses(fa, mc, kk, es_a, bool(f["trans_a"]))
                reads.append(np.unique(a_addr))
                a_srcs.append(("smem", a_addr))
            fb = decode_smem_descriptor(int(b_vals[k]))
            b_addr = base + canonical_addresses(fb, nc, kk, es_b, bool(f["trans_b"]))
            reads.append(np.unique(b_addr))
            b_addrs.append(b_addr)
        keep = np.ones(LANES, bool)
        if disable is not None:
            bits = disable[:, k].astype(np.uint64)
            for i in range(LANES):
                if (int(bits[i // 32]) >> (i % 32)) & 1:
                    keep[i] = False
        acc = bool(enable[k])

        def land(
            a_srcs=a_srcs,
            b_addrs=b_addrs,
            f=f,
            dcol=dcol,
            dmap=dmap,
            keep=keep,
            acc=acc,
            share=share,
            mc=mc,
            nc=nc,
        ) -> None:
            kk = f["k"]
            at, bt, dt = f["atype"], f["btype"], f["dtype"]
            a_parts = []
            for src in a_srcs:
                if src[0] == "smem":
                    raw = st.shared.raw_load(src[1].reshape(-1), _BITS[at] // 8)
                    a_parts.append(decode(raw, at).reshape(mc, kk))
                    continue
                _, tm_a, acol, per, arows = src
                cells = tm_a.data[arows][:, acol : acol + kk // per].astype(np.uint64)
                w = _BITS[at]
                parts_ = [(cells >> np.uint64(w * i)) & np.uint64((1 << w) - 1) for i in range(per)]
                a_parts.append(decode(np.stack(parts_, axis=-1).reshape(mc, kk), at))
            a = np.concatenate(a_parts)
            b = np.concatenate(
                [
                    decode(st.shared.raw_load(x.reshape(-1), _BITS[bt] // 8), bt).reshape(nc, kk)
                    for x in b_addrs
                ]
            )
            if f["neg_a"]:
                a = -a
            if f["neg_b"]:
                b = -b
            for j, (tm, _, _) in enumerate(share):
                aj = a[j * mc : (j + 1) * mc]
                for rows, c0, w in dmap:  # each block of D's columns in its TMEM lanes
                    old = tm.data[rows, dcol : dcol + w].astype(np.uint64)
                    c = decode(old, dt) if acc else np.zeros((mc, w))
                    if dt == "s32":
                        c = c.astype(np.int64)
                    bj = b[c0 : c0 + w]
                    d = matmul(aj[None], bj.T[None], c[None], dt, bool(f["saturate"]))[0]
                    new = encode(d.reshape(-1), dt).reshape(mc, w).astype(np.uint32)
                    sel = keep[rows]
                    cur = tm.data[rows, dcol : dcol + w]
                    tm.data[rows, dcol : dcol + w] = np.where(sel[:, None], new, cur)

        hz_rows = np.concatenate([rows + r0 for _, _, r0 in share])
        op = AsyncOp(
            "tcgen05.mma",
            line,
            int(lane),
            land,
            reads=reads,
            tmem=(hz_rows, dcol, dcol + width),
            tmem_reads=a_cells,
        )
        eng.tc_ops.setdefault(int(lane), []).append(op)
        eng.issue(op)
        if eng.hazards is not None:
            eng.hazards.tmem_write_issue(op)


def do_commit(st: "CtaState", ins: Instr, mask: np.ndarray, line: int) -> None:
    """The mbarrier arrives once the thread's prior tcgen05 operations complete; with
    ``.multicast::cluster`` the barrier at the same offset in every CTA of the 16-bit CTA mask
    arrives (the pair's MMAs wrote both CTAs' tensor memory)."""
    eng = st.engine
    multicast = "multicast::cluster" in ins.parts
    cmask = st.read(ins.operands[1], "u16") if multicast else None
    for lane, a in zip(np.nonzero(mask)[0], shared_addrs(st, ins.operands[0], mask)):
        targets = [int(a)]
        if multicast:
            bits = int(cmask[lane])
            if bits >> st.csize:
                raise _err(f"{ins.opcode}: CTA mask 0x{bits:x} names CTAs outside the cluster")
            own = int(st.rank[lane])
            targets = [
                int(a) + (r - own) * int(st.shared_stride) for r in range(st.csize) if bits >> r & 1
            ]
        # every prior operation of the thread: in flight, or (strict mode) still the last
        # writer of some tensor memory, whose readers may observe this commit instead
        deps = [
            op for op in eng.tc_ops.get(int(lane), []) if not op.done or getattr(op, "owned", 0) > 0
        ]
        # (a copy: the MMAs issued after this commit must not join its deps)
        eng.tc_ops[int(lane)] = list(deps)
        for t in targets:
            bar = eng.barrier(t)
            eng.issue(
                AsyncOp(
                    "tcgen05.commit",
                    line,
                    int(lane),
                    lambda: None,
                    bar.addr,
                    arrive=True,
                    deps=deps,
                )
            )


# -- ld / st ------------------------------------------------------------------------------------
_SHAPES = {"32x32b": (32, 1, 1), "16x64b": (16, 2, 1), "16x128b": (16, 4, 2)}
_SHAPES.update({"16x256b": (16, 8, 4), "16x32bx2": (16, 1, 1)})


def fragment(shape: str, num: int, half: int = 0) -> np.ndarray:
    """[32 threads, registers, 2] (lane offset, column offset) of a tcgen05.ld/st fragment."""
    lanes, cols, regs = _SHAPES[shape]
    t = np.arange(32)
    out = np.zeros((32, regs * num, 2), np.int64)
    for rep in range(num):
        for j in range(regs):
            r = rep * regs + j
            if shape == "32x32b":
                out[:, r] = np.stack([t, np.full(32, rep)], 1)
            elif shape == "16x64b":
                out[:, r] = np.stack([t // 2, 2 * rep + t % 2], 1)
            elif shape == "16x128b":
                out[:, r] = np.stack([8 * j + t // 4, 4 * rep + t % 4], 1)
            elif shape == "16x256b":
                out[:, r] = np.stack([t // 4 + 8 * (j // 2), 8 * rep + 2 * (t % 4) + j % 2], 1)
            else:  # 16x32bx2
                out[:, r] = np.stack([t % 16, rep + np.where(t < 16, 0, half)], 1)
    return out


def do_ld_st(st: "CtaState", ins: Instr, mask: np.ndarray, line: int = 0) -> None:
    parts = ins.parts
    load = parts[1] == "ld"
    shape = next((p for p in parts if p in _SHAPES), None)
    num = next((int(p[1:]) for p in parts if p[0] == "x" and p[1:].isdigit()), None)
    if shape is None or num is None or parts[-1] != "b32":
        raise _err(f"{ins.opcode}: expected .<shape>.<num>.b32")
    if any(p.startswith("pack::") or p.startswith("unpack::") for p in parts):
        raise _err(f"{ins.opcode}: .pack::16b / .unpack::16b are not simulated")
    ops = ins.operands
    if load:
        regs_op, addr_op = ops[0], ops[1]
        imm = ops[2] if len(ops) > 2 else None
    else:
        addr_op = ops[0]
        imm, regs_op = (ops[1], ops[2]) if len(ops) > 2 else (None, ops[1])
    regs = list(regs_op.items) if isinstance(regs_op, Vec) else [regs_op]
    half = int(st.read(imm, "u32")[0]) if imm is not None else 0
    frag = fragment(shape, num, half)
    if len(regs) != frag.shape[1]:
        raise _err(f"{ins.opcode}: {len(regs)} registers where {frag.shape[1]} are needed")
    hz = st.engine.hazards
    addrs = _tmem_addr(st, addr_op, mask)
    lanes_active = np.nonzero(mask)[0]
    for w in _warps_full(mask, ins.opcode):
        tm = tmem(st, w * 32)
        sel = (lanes_active // 32) == w
        taddr = _uniform(addrs[sel], ins.opcode)
        lane0, col0 = taddr >> 16, taddr & 0xFFFF
        quarter = 32 * (((w * 32) % st.threads) // 32 % 4)
        nl = _SHAPES[shape][0]
        if not (quarter <= lane0 and lane0 + nl <= quarter + 32):
            raise _err(
                f"{ins.opcode}: warp {w} may access tensor-memory lanes {quarter}..{quarter + 31} "
                f"only, not {lane0}..{lane0 + nl - 1}"
            )
        cmax = col0 + int(frag[:, :, 1].max()) + 1
        tm.check_columns(col0, cmax, ins.opcode)
        rows = lane0 + frag[:, :, 0]
        cols = col0 + frag[:, :, 1]
        if hz is not None:
            cta_row = 128 * (int(w) * 32 // st.threads)  # the hazard map's rows of this CTA
            hz.tmem_access(int(w), np.unique(rows) + cta_row, col0, cmax, not load, line)
        threads = np.arange(32) + 32 * w
        for r, reg in enumerate(regs):
            if load:
                full = st.bits(reg, "b32").copy() if isinstance(reg, Reg) else None
                vals = tm.data[rows[:, r], cols[:, r]].astype(np.uint64)
                if full is None:
                    continue
                full[threads] = vals
                st.write_bits(reg, full, mask)
            else:
                vals = st.bits(reg, "b32")[threads] & np.uint64(0xFFFFFFFF)
                tm.data[rows[:, r], cols[:, r]] = vals.astype(np.uint32)


def execute(st: "CtaState", ins: Instr, mask: np.ndarray, line: int) -> None:
    op = ins.parts[1].split("::")[0]
    if op in ("alloc", "dealloc", "relinquish_alloc_permit"):
        do_alloc(st, ins, mask, line)
    elif op == "mma":
        do_mma(st, ins, mask, line)
    elif op == "commit":
        do_commit(st, ins, mask, line)
    elif op in ("ld", "st"):
        do_ld_st(st, ins, mask, line)
    elif op in ("wait", "fence"):
        return
    else:
        raise _err(f"{ins.opcode}: not simulated")


def at_exit(st: "CtaState") -> None:
    for tm in (st.tmem or {}).values():
        if tm.allocs:
            cols = ", ".join(f"{n} at column {c}" for c, n in sorted(tm.allocs.items()))
            raise _err(
                f"the CTA exits with tensor memory still allocated ({cols}): tcgen05.dealloc"
            )
