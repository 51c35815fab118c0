"""Tensor-core and operand-staging instructions: `mma.sync`, `wgmma.*`, non-bulk `cp.async`
(with `commit_group`/`wait_group`/`wait_all`), and the byte shuffles `prmt`/`bfi` compilers use
to pack 8-bit fragments.

Fragment layouts are the PTX ISA's ("Matrix Fragments for mma.m16n8k16" etc.): with
`g = laneid >> 2` and `t = laneid % 4`, `fragment(shape, operand, bits)` gives, for each lane,
register and packed element (lowest bits first), the (row, col) of the operand matrix it holds.
`A` is M x K (row major), `B` is K x N, `C`/`D` are M x N.

Results are computed exactly in float64 (int64 for integers) and rounded once to the
accumulator type; hardware accumulates with its own internal precision, so simulated f32
results may differ from a GPU's in the last bits."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from tilegen.runtime.ptx.parser import Addr, Instr, Reg, Vec
from tilegen.runtime.ptx.sim.values import f32_to_bf16_bits, to_bits

if TYPE_CHECKING:
    from tilegen.runtime.ptx.sim.cta import CtaState


def _err(msg: str) -> Exception:
    from tilegen.runtime.ptx.sim.cta import PtxSimError

    return PtxSimError(msg)


# -- element types -------------------------------------------------------------------------------
BITS = {
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


@lru_cache(maxsize=None)
def fp8_table(kind: str) -> np.ndarray:
    """float64 value of every byte of an 8-bit float (`e4m3` = OCP E4M3FN, `e5m2`)."""
    ebits, bias = (4, 7) if kind == "e4m3" else (5, 15)
    mbits = 7 - ebits
    out = np.zeros(256)
    for b in range(256):
        s, e, m = b >> 7, (b >> mbits) & ((1 << ebits) - 1), b & ((1 << mbits) - 1)
        if kind == "e4m3" and e == 15 and m == 7:
            v = np.nan
        elif kind == "e5m2" and e == 31:
            v = np.inf if m == 0 else np.nan
        elif e == 0:
            v = m / (1 << mbits) * 2.0 ** (1 - bias)
        else:
            v = (1 + m / (1 << mbits)) * 2.0 ** (e - bias)
        out[b] = -v if s else v
    return out


def decode(raw: np.ndarray, t: str) -> np.ndarray:
    """Element values (float64 or int64) of raw element bits (uint64) of type `t`."""
    raw = raw.astype(np.uint64)
    if t == "f16":
        return raw.astype(np.uint16).view(np.float16).astype(np.float64)
    if t == "bf16":
        return (raw.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)
    if t == "tf32":  # the tensor core ignores the low 13 mantissa bits
        return (raw.astype(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    if t == "f32":
        return raw.astype(np.uint32).view(np.float32).astype(np.float64)
    if t == "f64":
        return raw.view(np.float64).copy()
    if t in ("e4m3", "e5m2"):
        return fp8_table(t)[raw.astype(np.int64)]
    if t == "s8":
        return raw.astype(np.uint8).view(np.int8).astype(np.int64)
    if t == "u8":
        return raw.astype(np.int64)
    if t == "s32":
        return raw.astype(np.uint32).view(np.int32).astype(np.int64)
    raise _err(f"unsupported matrix element type .{t}")


def encode(vals: np.ndarray, t: str) -> np.ndarray:
    """Raw element bits (uint64) of values rounded to accumulator type `t`."""
    with np.errstate(all="ignore"):
        if t == "f32":
            return vals.astype(np.float32).view(np.uint32).astype(np.uint64)
        if t == "f16":
            h = np.asarray(vals).astype(np.float16)
            return to_bits(h.reshape(-1), "f16", h.size).reshape(h.shape)  # NaN: 0x7FFF
        if t == "bf16":
            return f32_to_bf16_bits(vals.astype(np.float32))
        if t == "f64":
            return vals.astype(np.float64).view(np.uint64)
        if t == "s32":
            return (vals.astype(np.int64) & 0xFFFFFFFF).astype(np.uint64)
    raise _err(f"unsupported accumulator type .{t}")


# -- fragment layouts ----------------------------------------------------------------------------
def _frag_a(m: int, k: int, bits: int, g: int, t: int) -> list[list[tuple[int, int]]]:
    if m == 8:  # m8n8k4 f64: one element per lane
        return [[(g, t)]]
    per = 32 // bits  # elements per 32-bit register
    if bits == 32:  # tf32: a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4)
        return [[(g + 8 * (r & 1), t + 4 * (r >> 1))] for r in range(k // 2)]
    # 16/8-bit: registers alternate rows g / g+8, then step K by 4*per... in halves of K
    nregs = k * 16 // (32 * per)
    return [
        [(g + 8 * (r & 1), per * t + (r >> 1) * 4 * per + i) for i in range(per)]
        for r in range(nregs)
    ]


def _frag_b(k: int, bits: int, g: int, t: int) -> list[list[tuple[int, int]]]:
    if bits == 64:
        return [[(t, g)]]
    per = 32 // bits
    if bits == 32:
        return [[(t + 4 * r, g)] for r in range(k // 4)]
    return [[(per * t + r * 4 * per + i, g) for i in range(per)] for r in range(k // (4 * per))]


def _frag_c(m: int, bits: int, g: int, t: int) -> list[list[tuple[int, int]]]:
    if m == 8:  # f64 accumulator: (g, 2t), (g, 2t+1)
        return [[(g, 2 * t)], [(g, 2 * t + 1)]]
    if bits == 16:  # f16x2: (g, 2t..2t+1), (g+8, 2t..2t+1)
        return [[(g + 8 * r, 2 * t + i) for i in range(2)] for r in range(2)]
    return [[(g + 8 * (r >> 1), 2 * t + (r & 1))] for r in range(4)]


SHAPES = {  # (shape, A/B element type) -> accumulator types
    ("m16n8k16", "f16"): ("f32", "f16"),
    ("m16n8k8", "f16"): ("f32", "f16"),
    ("m16n8k16", "bf16"): ("f32",),
    ("m16n8k8", "bf16"): ("f32",),
    ("m16n8k8", "tf32"): ("f32",),
    ("m16n8k4", "tf32"): ("f32",),
    ("m16n8k32", "s8"): ("s32",),
    ("m16n8k32", "u8"): ("s32",),
    ("m16n8k16", "s8"): ("s32",),
    ("m16n8k16", "u8"): ("s32",),
    ("m8n8k4", "f64"): ("f64",),
    ("m16n8k32", "e4m3"): ("f32", "f16"),
    ("m16n8k32", "e5m2"): ("f32", "f16"),
    ("m16n8k16", "e4m3"): ("f32", "f16"),
    ("m16n8k16", "e5m2"): ("f32", "f16"),
}


def parse_shape(shape: str) -> tuple[int, int, int]:
    m, rest = shape[1:].split("n")
    n, k = rest.split("k")
    return int(m), int(n), int(k)


@lru_cache(maxsize=None)
def fragment(shape: str, operand: str, elem: str) -> np.ndarray:
    """int array [32 lanes, regs, elements per register, 2] of (row, col) per fragment slot.

    `operand` is "a", "b" or "c" (C and D share a layout); `elem` the operand's element type."""
    m, _n, k = parse_shape(shape)
    bits = BITS[elem]
    out = []
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        if operand == "a":
            out.append(_frag_a(m, k, bits, g, t))
        elif operand == "b":
            out.append(_frag_b(k, bits, g, t))
        else:
            out.append(_frag_c(m, bits, g, t))
    return np.array(out, dtype=np.int64)


# -- mma.sync ------------------------------------------------------------------------------------
def _items(op) -> list:
    return list(op.items) if isinstance(op, Vec) else [op]


def _warps(st: "CtaState", mask: np.ndarray, what: str) -> np.ndarray:
    """Warp indices active at a `.sync.aligned` instruction; partial warps are an error."""
    warps = np.unique(np.nonzero(mask)[0] // 32)
    for w in warps:
        lanes = mask[w * 32 : w * 32 + 32]
        if not lanes.all():
            raise _err(f"{what} needs all 32 lanes of warp {w} (only {int(lanes.sum())} active)")
    return warps


def _gather(st, regs: list, frag: np.ndarray, t: str, shape: tuple, warps) -> np.ndarray:
    """Matrix per warp [warps, rows, cols] from the lanes' fragment registers."""
    nregs, per = frag.shape[1], frag.shape[2]
    if len(regs) != nregs:
        raise _err(f"expected {nregs} registers for a fragment, got {len(regs)}")
    bits = BITS[t] if per > 1 else (64 if t == "f64" else 32)
    nw = len(warps)
    lanes = (warps[:, None] * 32 + np.arange(32)[None, :]).reshape(-1)
    words = np.stack([st.bits(op, "b64")[lanes] for op in regs]).reshape(nregs, nw, 32)
    if per > 1:
        shifts = (np.arange(per, dtype=np.uint64) * np.uint64(bits))[:, None, None, None]
        raw = (words[None] >> shifts) & np.uint64((1 << bits) - 1)  # [per, regs, w, lane]
    else:
        raw = (words & np.uint64((1 << bits) - 1) if bits < 64 else words)[None]
    vals = decode(raw.reshape(-1), t).reshape(per, nregs, nw, 32)
    out = np.zeros((nw,) + shape, np.int64 if t in ("s8", "u8", "s32") else np.float64)
    out[:, frag[..., 0], frag[..., 1]] = vals.transpose(2, 3, 1, 0)  # [w, lane, reg, per]
    return out


def _scatter(st, regs: list, frag, t: str, mat: np.ndarray, warps, mask) -> None:
    nregs, per = frag.shape[1], frag.shape[2]
    if len(regs) != nregs:
        raise _err(f"expected {nregs} destination registers, got {len(regs)}")
    bits = 32 // per if per > 1 else (64 if t == "f64" else 32)
    nw = len(warps)
    lanes = (warps[:, None] * 32 + np.arange(32)[None, :]).reshape(-1)
    vals = mat[:, frag[..., 0], frag[..., 1]]  # [w, lane, reg, per]
    enc = encode(vals.reshape(-1), t).reshape(nw, 32, nregs, per)
    shifts = np.arange(per, dtype=np.uint64) * np.uint64(bits)
    words = np.bitwise_or.reduce(enc << shifts, axis=3)  # [w, lane, reg]
    for r, op in enumerate(regs):
        full = np.zeros(st.n, np.uint64)
        full[lanes] = words[:, :, r].reshape(-1)
        st.write_bits(op, full, mask)


def matmul(a: np.ndarray, b: np.ndarray, c: np.ndarray, dtype: str, satfinite: bool):
    """D = A @ B + C per warp, rounded once to `dtype`."""
    if dtype == "s32":
        d = np.einsum("wmk,wkn->wmn", a.astype(np.int64), b.astype(np.int64)) + c
        if satfinite:
            return np.clip(d, -(2**31), 2**31 - 1)
        return d
    with np.errstate(all="ignore"):
        d = np.einsum("wmk,wkn->wmn", a, b) + c
    if satfinite:
        big = np.finfo(np.float16 if dtype == "f16" else np.float32).max
        d = np.where(np.isnan(d), d, np.clip(d, -big, big))
    return d


def do_mma(st: "CtaState", ins: Instr, mask: np.ndarray) -> None:
    """mma.sync.aligned.<shape>.row.col[.satfinite].<d>.<a>.<b>.<c> d, a, b, c."""
    parts = ins.parts
    if parts[1:3] != ["sync", "aligned"] or len(parts) < 9:
        raise _err(f"malformed mma opcode {ins.opcode!r}")
    shape = parts[3]
    rest = [p for p in parts[4:] if p not in ("row", "col", "satfinite")]
    if parts[4:6] != ["row", "col"]:
        raise _err(f"{ins.opcode}: only the .row.col operand layout is simulated")
    if len(rest) != 4:
        raise _err(f"{ins.opcode}: expected .dtype.atype.btype.ctype")
    dt, at, bt, ct = rest
    if (shape, at) not in SHAPES or dt not in SHAPES[(shape, at)] or ct != dt:
        raise _err(f"{ins.opcode}: shape/type combination is not a PTX mma.sync form")
    if at != bt and not ({at, bt} <= {"s8", "u8"} or {at, bt} <= {"e4m3", "e5m2"}):
        raise _err(f"{ins.opcode}: A and B element types are incompatible")
    if len(ins.operands) != 4:
        raise _err(f"{ins.opcode}: expected 4 operands d, a, b, c")
    m, n, k = parse_shape(shape)
    warps = _warps(st, mask, "mma.sync.aligned")
    d_op, a_op, b_op, c_op = (_items(o) for o in ins.operands)
    a = _gather(st, a_op, fragment(shape, "a", at), at, (m, k), warps)
    b = _gather(st, b_op, fragment(shape, "b", bt), bt, (k, n), warps)
    frag_c = fragment(shape, "c", ct)
    c = _gather(st, c_op, frag_c, ct, (m, n), warps)
    d = matmul(a, b, c, dt, "satfinite" in parts)
    _scatter(st, d_op, frag_c, dt, d, warps, mask)


# -- cp.async (non-bulk) -------------------------------------------------------------------------
class _CpAsync:
    """Per-CTA cp.async state: commit_group counts per lane and issued copies. A copy issued
    while a lane had made g commits belongs to its group g; `wait_group N` completes groups
    g < commits - N, `wait_all` every copy."""

    def __init__(self, n: int) -> None:
        self.commits = np.zeros(n, np.int64)
        self.records: list = []  # [lanes, group per row, dsts [rows, n], raw, landed rows]


def _pending(st: "CtaState") -> _CpAsync:
    if not hasattr(st, "cp_async"):
        st.cp_async = _CpAsync(st.n)
    return st.cp_async


def _is_pred(st: "CtaState", op) -> bool:
    if not isinstance(op, Reg):
        return False
    name = op.name
    for key in (name, name.rstrip("0123456789")):
        if key in st.entry.regs:
            return st.entry.regs[key] == "pred"
    return False


#: strict cp.async checking (part of ``run_ptx(strict_async=True)``, or set this flag): a copy's
#: destination reads as poison (0xFF bytes) from issue until the first ``bar.sync`` after the
#: ``wait_group`` that retired it, or its warp's next ``mbarrier.arrive`` (a release: hardware
#: makes it visible to *other* threads only then; the strict checker orders the readers), and
#: a copy into shared bytes some thread read since the last ``bar.sync`` is an error (a prefetch
#: overwriting a buffer still being read). The lock-step scheduler would hide both otherwise.
STRICT_CP_ASYNC = False


class _Strict:
    """Per-CTA bookkeeping of the strict mode: barrier epochs (``st.barrier`` is a new tuple at
    every bar.sync), the epoch of each shared byte's last read, retired copies not yet
    published."""

    def __init__(self, st: "CtaState") -> None:
        self.st, self.seen, self.epoch = st, st.barrier, 0
        self.read = np.full(st.shared.data.size, -1, np.int64)
        self.retired: list = []  # (epoch of the wait, dst, raw, warps that retired it)
        orig = st.shared.load

        def load(addrs, width, _orig=orig):
            self.tick()
            idx = st.shared._index(addrs, width)
            self.read[idx.reshape(-1)] = self.epoch
            return _orig(addrs, width)

        st.shared.load = load
        raw = st.shared.raw_load

        def raw_load(addrs, width, _raw=raw):
            # an async-proxy read (wgmma, tcgen05.mma, TMA store) after a bar.sync sees the
            # copies that barrier published, as a generic load does (without this, a tcgen05
            # dot reading a cp.async-staged operand read poison in strict mode)
            self.tick()
            return _raw(addrs, width)

        st.shared.raw_load = raw_load

    def tick(self) -> None:
        if self.st.barrier is not self.seen:  # a bar.sync happened: publish retired copies
            self.seen, self.epoch = self.st.barrier, self.epoch + 1
            for ep, dst, raw, _ in self.retired:  # written (for the checker) when retired
                self.st.shared.raw_store(dst, 1, raw)
            self.retired = []

    def released(self, warps) -> None:
        """Warps ``warps`` arrived on an mbarrier (a release): the copies they retired become
        visible to the threads that acquire it (the strict checker orders those reads)."""
        keep = []
        for ep, dst, raw, ws in self.retired:
            if ws <= warps:
                self.st.shared.raw_store(dst, 1, raw)
            else:
                keep.append((ep, dst, raw, ws))
        self.retired = keep


def released(st: "CtaState", lanes) -> None:
    """An ``mbarrier.arrive`` by ``lanes``: publish the cp.async copies their warps retired."""
    strict = getattr(st, "_strict_cp", None)
    if strict is not None and strict.retired:
        strict.released({int(w) for w in np.unique(np.asarray(lanes) // 32)})


def _strict(st: "CtaState"):
    if not (STRICT_CP_ASYNC or st.strict_async):
        return None
    if getattr(st, "_strict_cp", None) is None:
        st._strict_cp = _Strict(st)
    st._strict_cp.tick()
    return st._strict_cp


def do_cp_async(st: "CtaState", ins: Instr, mask: np.ndarray) -> None:
    """cp.async.{ca,cg}.shared{::cta}.global [dst], [src], cp-size{, src-size | ignore-src};
    commit_group / wait_group N / wait_all. Copies land in shared memory when a wait retires
    their group (so a missing wait shows up as stale data, as on hardware)."""
    parts = ins.parts
    pend = _pending(st)
    lanes = np.nonzero(mask)[0]
    strict = _strict(st)
    if parts[2] == "commit_group":
        pend.commits[lanes] += 1
        return
    if parts[2] in ("wait_group", "wait_all"):
        if parts[2] == "wait_group":
            keep = int(st.read(ins.operands[0], "u32")[lanes[0]])
            limit = pend.commits - keep  # groups below this are complete
        else:  # also retires the uncommitted copies
            limit = pend.commits + 1
        waiting = np.zeros(st.n, bool)
        waiting[lanes] = True
        _land(st, lambda rl, g: waiting[rl] & (g < limit[rl]), strict)
        return
    if parts[2] not in ("ca", "cg") or not parts[3].startswith("shared"):
        raise _err(f"unsupported async copy {ins.opcode!r}")
    if "global" not in parts:
        raise _err(f"{ins.opcode}: the source must be .global")
    dst, src, size = ins.operands[:3]
    if not isinstance(dst, Addr) or not isinstance(src, Addr):
        raise _err(f"{ins.opcode}: expected [dst], [src] address operands")
    ops = ins.operands[:-1] if "L2::cache_hint" in parts else ins.operands  # drop the policy
    extra = ops[3] if len(ops) > 3 else None
    cp_size = st.read(size, "u32")
    fill = None
    if extra is not None:
        if _is_pred(st, extra):  # ignore-src: zero-fill everything when true
            ign = st.bits(extra) != 0
            fill = np.where(ign, 0, cp_size)
        else:
            fill = st.read(extra, "u32")
    dbase = np.zeros(st.n, np.int64) if dst.base is None else st.bits(dst.base).astype(np.int64)
    sbase = np.zeros(st.n, np.int64) if src.base is None else st.bits(src.base).astype(np.int64)
    sizes = cp_size[lanes].astype(np.int64)
    n = int(sizes[0]) if len(sizes) else 0
    if len(sizes) and ((sizes != n).any() or n not in (4, 8, 16) or ("cg" in parts and n != 16)):
        raise _err(f"{ins.opcode}: cp-size {n} is not allowed")
    keep = np.full(len(lanes), n) if fill is None else np.minimum(fill[lanes].astype(np.int64), n)
    col = np.arange(n)
    srcs = (sbase[lanes] + src.offset)[:, None] + col  # [lanes, n] byte addresses
    dsts = (dbase[lanes] + dst.offset)[:, None] + col
    live = col[None, :] < keep[:, None]
    raw = np.zeros((len(lanes), n), np.uint64)
    if live.any():
        raw[live] = st.heap.load(srcs[live], 1)
    if strict is not None:
        span = dsts.T.reshape(-1)  # (element-major, as the access hooks group a vector's lanes)
        if np.any(strict.read[span - st.shared.base] == strict.epoch):
            d = int(span[np.argmax(strict.read[span - st.shared.base] == strict.epoch)])
            raise _err(
                f"{ins.opcode}: overwrites shared bytes at 0x{d:x} that were read since the "
                "last bar.sync (missing barrier before the copy)"
            )
        st.shared.store(span, 1, np.full(span.size, 0xFF, np.uint64))
    pend.records.append([lanes, pend.commits[lanes].copy(), dsts, raw, np.zeros(len(lanes), bool)])


def _land(st: "CtaState", due, strict=None, clock: int | None = None) -> None:
    """Store the copies whose rows `due(lanes, groups)` selects, oldest first; forget records
    whose rows have all landed. `clock` (strict mode, copies of one lane): the issuing warp's
    clock the writes count at (an mbarrier arrival that follows them publishes it)."""
    pend = _pending(st)
    for rec in pend.records:
        rl, groups, dsts, raw, landed = rec
        now = due(rl, groups) & ~landed
        if not now.any():
            continue
        landed |= now
        d, r = dsts[now].reshape(-1), raw[now].reshape(-1)
        if strict is not None:
            # the write happens here, at the wait (what a later fence.proxy.async orders); the
            # bytes become visible to the other threads at the next bar.sync (tick)
            hooks = st.shared.hooks
            if hooks is not None:
                line = st.cur_ins.line if st.cur_ins is not None else 0
                for w in np.unique(rl[now] // 32):
                    rows = now & (rl // 32 == w)
                    hooks.generic_write(int(w), np.unique(dsts[rows].reshape(-1)), line)
            strict.retired.append((strict.epoch, d, r, {int(w) for w in np.unique(rl[now] // 32)}))
        elif clock is not None and st.shared.hooks is not None:
            st.shared.raw_store(d, 1, r)
            line = st.cur_ins.line if st.cur_ins is not None else 0
            w = int(rl[now][0]) // 32
            st.shared.hooks.generic_write(w, np.unique(d.astype(np.int64)), line, clock)
        else:
            st.shared.store(d, 1, r)
    pend.records = [rec for rec in pend.records if not rec[4].all()]


def retire_cp_async(st: "CtaState", lane: int, clock: int | None = None) -> None:
    """Land every cp.async of `lane` still in flight (cp.async.mbarrier.arrive's trigger;
    `clock`: its warp's clock at the arrive's issue, strict mode)."""
    _land(st, lambda rl, g: rl == lane, clock=clock)


# -- byte/bit shuffles ----------------------------------------------------------------------------
def _prmt_byte(mode: str | None, sel: np.ndarray, i: int) -> tuple[np.ndarray, np.ndarray]:
    """(source byte index 0..7, sign-replicate flag) of result byte `i`."""
    c = sel & 3
    if mode is None:
        nib = (sel >> (4 * i)) & 0xF
        return nib & 7, (nib & 8) != 0
    no = np.zeros_like(sel, dtype=bool)
    if mode == "f4e":
        return (c + i) & 7, no
    if mode == "b4e":
        return (c - i) & 7, no
    if mode == "rc8":
        return c, no
    if mode == "ecl":
        return np.maximum(c, i), no
    if mode == "ecr":
        return np.minimum(c, i), no
    if mode == "rc16":
        return 2 * (sel & 1) + (i & 1), no
    raise _err(f"unsupported prmt mode .{mode}")


def do_prmt(st: "CtaState", ins: Instr, mask: np.ndarray) -> None:
    """prmt.b32{.mode} d, a, b, c: pick bytes of {b, a} (a = bytes 0-3) by selector c."""
    mode = ins.parts[2] if len(ins.parts) > 2 and ins.parts[1] == "b32" else None
    if ins.parts[1] != "b32":
        raise _err(f"malformed prmt opcode {ins.opcode!r}")
    d, a, b, c = ins.operands
    src = (st.bits(a, "b32") & np.uint64(0xFFFFFFFF)) | (
        (st.bits(b, "b32") & np.uint64(0xFFFFFFFF)) << np.uint64(32)
    )
    sel = st.read(c, "u32").astype(np.int64)
    out = np.zeros(st.n, np.uint64)
    for i in range(4):
        idx, sign = _prmt_byte(mode, sel, i)
        byte = (src >> (8 * idx).astype(np.uint64)) & np.uint64(0xFF)
        byte = np.where(sign, np.where(byte & np.uint64(0x80), np.uint64(0xFF), 0), byte)
        out |= byte.astype(np.uint64) << np.uint64(8 * i)
    st.write_bits(d, out, mask)


def do_bfi(st: "CtaState", ins: Instr, mask: np.ndarray) -> None:
    """bfi.b32/.b64 f, a, b, c, d: b with bits [c, c+d) replaced by the low bits of a."""
    t = ins.parts[-1]
    if t not in ("b32", "b64"):
        raise _err(f"malformed bfi opcode {ins.opcode!r}")
    w = 32 if t == "b32" else 64
    f, a, b, c, d = ins.operands
    av, bv = st.bits(a, t), st.bits(b, t)
    pos = st.read(c, "u32").astype(np.int64) & 0xFF
    ln = st.read(d, "u32").astype(np.int64) & 0xFF
    n = np.minimum(ln, np.maximum(w - pos, 0))  # bits inserted (0 when pos >= w)
    ones = np.where(
        n >= 64, np.uint64(0xFFFFFFFFFFFFFFFF), (np.uint64(1) << n.astype(np.uint64)) - np.uint64(1)
    )
    p = np.minimum(pos, 63).astype(np.uint64)
    fm = np.where(n > 0, ones << p, np.uint64(0))
    full = np.uint64((1 << w) - 1)
    out = ((bv & ~fm) | ((av << p) & fm)) & full
    st.write_bits(f, out, mask)


# -- shared-memory swizzle, N-D tensor copies (TMA) ------------------------------------------------
def swizzle(addr: np.ndarray, span: int, atom: int = 16) -> np.ndarray:
    """Physical shared address of `addr` under the `span`-byte swizzle (0, 32, 64, 128): the
    16-byte chunk bits [4, 4+b) are XORed with bits [7, 7+b), b = log2(span / 16). With
    32-byte atoms (the 128-byte swizzle tcgen05 calls 128B_BASE32B, TMA 128B_ATOM_32B) the
    32-byte chunk bits [5, 7) are XORed with bits [7, 9) (CuTe's Swizzle<2,5,2>)."""
    if span == 0:
        return addr
    a = np.asarray(addr, np.int64)
    if atom == 32:
        return a ^ (((a >> 7) & 3) << 5)
    bits = {32: 1, 64: 2, 128: 3}[span]
    return a ^ (((a >> 7) & ((1 << bits) - 1)) << 4)


# -- wgmma ------------------------------------------------------------------------------------------
_WG_SWIZZLE = {0: 0, 1: 128, 2: 64, 3: 32}


def decode_descriptor(desc: int) -> dict:
    """Fields of a wgmma shared-memory matrix descriptor (64-bit)."""
    return {
        "start": (desc & 0x3FFF) << 4,
        "lbo": ((desc >> 16) & 0x3FFF) << 4,
        "sbo": ((desc >> 32) & 0x3FFF) << 4,
        "base_offset": (desc >> 49) & 7,
        "swizzle": _WG_SWIZZLE[(desc >> 62) & 3],
    }


def descriptor_addresses(desc: int, rows: int, cols: int, elem_bytes: int, mn_major: bool):
    """Shared byte address [rows (M or N), cols (K)] of each element a wgmma descriptor
    describes."""
    return canonical_addresses(decode_descriptor(desc), rows, cols, elem_bytes, mn_major)


def canonical_addresses(f: dict, rows: int, cols: int, elem_bytes: int, mn_major: bool):
    """Shared byte address [rows (M or N), cols (K)] of each element of a matrix whose
    descriptor fields (start, lbo, sbo, swizzle) are `f` (canonical layouts of the PTX ISA /
    CUTLASS GMMA and UMMA: K-major or MN-major, swizzle 0/32/64/128)."""
    mn = np.arange(rows)[:, None]
    k = np.arange(cols)[None, :]
    s, lbo, sbo, start = f["swizzle"], f["lbo"], f["sbo"], f["start"]
    atom = f.get("atom", 16)
    krows = 8 if atom == 16 else 4  # K rows per MN-major swizzle atom
    t = 16 // elem_bytes  # elements per 16 bytes
    if not mn_major:
        if s == 0:  # 8x16B core matrices: along MN at SBO, along K at LBO
            addr = (mn // 8) * sbo + (k // t) * lbo + (mn % 8) * 16 + (k % t) * elem_bytes
        else:  # 8 rows of `s` bytes per atom, atoms along MN at SBO
            addr = (mn // 8) * sbo + (mn % 8) * s + k * elem_bytes
    else:
        if s == 0:  # core matrices 8 (K) x 16B (MN): along MN at SBO, along K at LBO
            addr = (mn // t) * sbo + (k // 8) * lbo + (k % 8) * 16 + (mn % t) * elem_bytes
        else:  # atoms of 8 (K) rows x `s` bytes (MN): along MN at LBO, along K at SBO
            w = s // elem_bytes
            addr = (mn // w) * lbo + (k // krows) * sbo + (k % krows) * s + (mn % w) * elem_bytes
    return swizzle(start + addr, s, atom)


_WG_K = {"f16": 16, "bf16": 16, "tf32": 8, "e4m3": 32, "e5m2": 32, "s8": 32, "u8": 32}


@lru_cache(maxsize=None)
def _wg_acc_coords(n: int, per: int) -> np.ndarray:
    """[128 threads, regs, per, 2] (row, col) of the m64nN accumulator fragment."""
    out = np.zeros((128, n // 8 * 4 // per, per, 2), np.int64)
    for tid in range(128):
        w, lane = divmod(tid, 32)
        g, t = lane >> 2, lane & 3
        for e in range(n // 2):  # element index in the 32-bit view: chunk j, slot 0..3
            j, slot = divmod(e, 4)
            row = 16 * w + g + 8 * (slot >> 1)
            col = 8 * j + 2 * t + (slot & 1)
            out[tid, e // per, e % per] = (row, col)
    return out


def _load_shared(st, addr: np.ndarray, t: str) -> np.ndarray:
    """Operand elements read through the async proxy (no generic-access hooks)."""
    es = 8 if t == "f64" else max(1, BITS[t] // 8)
    raw = st.shared.raw_load(addr.reshape(-1), es).reshape(addr.shape)
    return decode(raw, t)


def _wgmma_reads(st, lead: int, addrs: list, line: int, land=None) -> None:
    """Record wgmma's shared-memory operand reads as an async-proxy operation of the warp,
    in flight until the warp's wgmma.wait_group retires its group; ``land`` (writing the
    accumulator registers) runs then."""
    from tilegen.runtime.ptx.sim.asyncproxy import AsyncOp

    eng = st.engine
    reads = [np.unique(a.reshape(-1)) for a in addrs]
    op = AsyncOp("wgmma.mma_async", line, lead, land or (lambda: None), reads=reads)
    groups = getattr(eng, "wgmma_groups", None)
    if groups is None:
        groups = eng.wgmma_groups = {}
    for w in range(lead // 32, lead // 32 + 4):
        groups.setdefault(w, [[]])[0].append(op)
    eng.issue(op)


def do_wgmma(st: "CtaState", ins: Instr, mask: np.ndarray) -> None:
    """wgmma.fence / commit_group / wait_group (results land when wait_group retires them) and
    wgmma.mma_async.sync.aligned.m64nNkK[.satfinite].dtype.atype.btype with A from a shared
    descriptor or registers and B from a descriptor; scale-d, imm-scale-a/b, imm-trans-a/b."""
    parts = ins.parts
    if parts[1] in ("commit_group", "wait_group"):
        _wgmma_groups(st, ins, mask)
        return
    if parts[1] == "fence":
        return
    if parts[1] != "mma_async" or parts[2:4] != ["sync", "aligned"]:
        raise _err(f"unsupported wgmma form {ins.opcode!r}")
    shape = parts[4]
    rest = [p for p in parts[5:] if p != "satfinite"]
    if len(rest) != 3:
        raise _err(f"{ins.opcode}: expected .dtype.atype.btype")
    dt, at, bt = rest
    m, n, k = parse_shape(shape)
    if m != 64 or n % 8 or not 8 <= n <= 256 or _WG_K.get(at) != k:
        raise _err(f"{ins.opcode}: not a wgmma shape for .{at}")
    ops = ins.operands
    a_regs = isinstance(ops[1], Vec)
    floats = at in ("f16", "bf16")
    nimm = (2 if floats else 0) + (2 if at not in ("s8", "u8") else 0)
    if floats and a_regs:
        nimm -= 1  # no imm-trans-a with A in registers
    want = 4 + nimm
    if len(ops) != want:
        raise _err(f"{ins.opcode}: expected {want} operands, got {len(ops)}")
    imms = [int(st.read(o, "s32")[0]) for o in ops[4:]]
    scale_a = scale_b = 1
    trans_a = trans_b = 0
    if at not in ("s8", "u8"):
        scale_a, scale_b = imms[0], imms[1]
        if floats:
            trans_b = imms[-1]
            trans_a = 0 if a_regs else imms[2]
    warps = _warps(st, mask, "wgmma.mma_async")
    groups = np.unique(warps // 4)
    for grp in groups:
        if not all(w in warps for w in range(4 * grp, 4 * grp + 4)):
            raise _err(f"wgmma.mma_async needs all 4 warps of warpgroup {grp}")
    per_d = 2 if dt == "f16" else 1
    dcoords = _wg_acc_coords(n, per_d)
    d_ops = _items(ops[0])
    if len(d_ops) != dcoords.shape[1]:
        raise _err(f"expected {dcoords.shape[1]} accumulator registers, got {len(d_ops)}")
    scale_d = st.bits(ops[3], "pred") != 0
    ab_bytes = BITS[at] // 8
    for grp in groups:
        tids = np.arange(128 * grp, 128 * grp + 128)
        lead = int(tids[0])
        smem = []
        base = int(st.shared_base[lead])  # descriptors address the issuing CTA's shared memory
        if a_regs:
            frag = fragment(f"m16n8k{k}", "a", at)
            a = _gather(st, _items(ops[1]), frag, at, (16, k), np.arange(4 * grp, 4 * grp + 4))
            a = a.reshape(64, k)
        else:
            desc = int(st.bits(ops[1], "b64")[lead])
            addr = base + descriptor_addresses(desc, 64, k, ab_bytes, bool(trans_a))
            smem.append(addr)
        bdesc = int(st.bits(ops[2], "b64")[lead])
        baddr = base + descriptor_addresses(bdesc, n, k, ab_bytes, bool(trans_b))
        smem.append(baddr)
        if not a_regs:
            a = _load_shared(st, addr, at)
        b = _load_shared(st, baddr, bt).T  # [k, n]
        a, b = a * scale_a, b * scale_b
        c = np.zeros((1, 64, n))
        bits = 32 // per_d
        # the accumulator lands at the wait_group that retires this wgmma (as on hardware,
        # where reading it earlier reads stale registers); a wgmma chained on one still in
        # flight takes that one's result
        pending = _pending_acc(st)
        for r, op in enumerate(d_ops):
            word = pending.get((op.name, grp), (None, st.bits(op, "b64")[tids]))[1]
            for e in range(per_d):
                raw = (word >> np.uint64(e * bits)) & np.uint64((1 << bits) - 1)
                c[0, dcoords[:, r, e, 0], dcoords[:, r, e, 1]] = decode(raw, dt)
        if not scale_d[lead]:
            c[:] = 0
        d = matmul(
            a[None], b[None], c.astype(np.int64) if dt == "s32" else c, dt, "satfinite" in parts
        )
        words = []
        for r, op in enumerate(d_ops):
            word = np.zeros(128, np.uint64)
            for e in range(per_d):
                vals = d[0, dcoords[:, r, e, 0], dcoords[:, r, e, 1]]
                word |= encode(vals, dt) << np.uint64(e * bits)
            words.append((op, word))
        token = object()
        for op, word in words:
            pending[(op.name, grp)] = (token, word)
        sel = np.zeros(st.n, bool)
        sel[tids] = True
        held = []
        if st.strict_async:  # its A and D registers stay put until a wait_group retires it
            held = [o.name for o in d_ops] + ([o.name for o in _items(ops[1])] if a_regs else [])
            for name in held:
                st.held.setdefault(name, {})[token] = (sel, ins.line)
        land = _landing(st, words, tids, mask & sel, grp, token, held)
        _wgmma_reads(st, lead, smem, ins.line, land)


def do_ldmatrix_m16n16(st: "CtaState", ins: Instr, mask: np.ndarray) -> None:
    """ldmatrix.sync.aligned.m16n16.x1/.x2.trans.shared.b8: lanes 16m..16m+15 give the 16 row
    addresses (16 bytes each) of matrix m; lane (g, t) gets, for matrix m, register 2m + h with
    bytes i = 0..3 = element (row 4t + i, col g + 8h) -- the m16n8k32 B fragment of 8-bit
    operands stored with K along rows."""
    parts = ins.parts
    if parts[-1] != "b8" or "trans" not in parts:
        raise _err(f"{ins.opcode}: only the .trans .b8 form of .m16n16 is simulated")
    count = next((int(p[1:]) for p in parts if p in ("x1", "x2")), None)
    if count is None:
        raise _err(f"{ins.opcode}: .m16n16 takes .x1 or .x2")
    regs = _items(ins.operands[0])
    if len(regs) != 2 * count:
        raise _err(f"{ins.opcode}: expected {2 * count} destination registers")
    warps = _warps(st, mask, "ldmatrix")
    base = ins.operands[1]
    rows = (st.bits(base.base).astype(np.int64) if base.base is not None else 0) + base.offset
    lane = np.arange(32)
    g, t = lane >> 2, lane & 3
    for m in range(count):
        for h in range(2):
            word = np.zeros(st.n, np.uint64)
            for w in warps:
                lanes = 32 * w + lane
                for i in range(4):
                    addr = rows[32 * w + 16 * m + 4 * t + i] + g + 8 * h
                    word[lanes] |= st.shared.load(addr, 1) << np.uint64(8 * i)
            st.write_bits(regs[2 * m + h], word, mask)


def _pending_acc(st) -> dict:
    """(register name, warpgroup) -> (token, 128 words): wgmma results not yet landed."""
    eng = st.engine
    pending = getattr(eng, "wgmma_acc", None)
    if pending is None:
        pending = eng.wgmma_acc = {}
    return pending


def _landing(st, words, tids, mask, grp, token, held=()):
    """Write a wgmma's accumulator registers (when its group is retired), releasing the
    registers it ``held`` first."""

    def land() -> None:
        for name in held:
            holders = st.held.get(name, {})
            holders.pop(token, None)
            if not holders:
                st.held.pop(name, None)
        pending = _pending_acc(st)
        others, st.held = st.held, {}  # (a later wgmma chained on these registers holds them)
        for op, word in words:
            full = st.bits(op, "b64").copy()
            full[tids] = word
            st.write_bits(op, full, mask)
            if pending.get((op.name, grp), (None,))[0] is token:
                del pending[(op.name, grp)]
        st.held = others

    return land


def _wgmma_groups(st, ins: Instr, mask: np.ndarray) -> None:
    """wgmma.commit_group closes each warp's open group of wgmmas; wait_group N completes all
    but the N most recent: their operand reads end and their accumulators land."""
    eng = st.engine
    groups = getattr(eng, "wgmma_groups", None)
    if groups is None:
        groups = eng.wgmma_groups = {}
    for w in np.unique(np.nonzero(mask)[0] // 32):
        g = groups.setdefault(int(w), [[]])
        if ins.parts[1] == "commit_group":
            g.append(g[0])
            g[0] = []
            continue
        keep = int(st.read(ins.operands[0], "u32")[int(w) * 32])
        committed = g[1:]
        done = committed[: max(len(committed) - keep, 0)]
        for group in done:
            for op in group:
                eng.finish(op)
                if eng.hazards is not None:
                    eng.hazards.wgmma_retired(int(w), op)
        groups[int(w)] = [g[0]] + committed[len(done) :]
    eng.pending = [op for op in eng.pending if not op.done]


OPS = {"mma": do_mma, "prmt": do_prmt, "bfi": do_bfi, "wgmma": do_wgmma}


def handles(ins: Instr) -> bool:
    """Whether this module executes `ins` (the dispatcher in handwritten.py asks first)."""
    p = ins.parts
    if p[0] == "cp" and len(p) > 2 and p[1] == "async":
        return "bulk" not in p and p[2] != "mbarrier"
    if p[0] in ("ldmatrix", "stmatrix"):  # m8n8 .b16 stays in handwritten.do_matrix
        return "m8n8" not in p or p[-1] != "b16"
    return p[0] in OPS


def execute(st: "CtaState", ins: Instr, mask: np.ndarray) -> None:
    p = ins.parts
    if getattr(st, "_strict_cp", None) is not None:
        st._strict_cp.tick()
    if p[0] == "cp":
        do_cp_async(st, ins, mask)
    elif p[0] == "ldmatrix" and "m16n16" in p:
        do_ldmatrix_m16n16(st, ins, mask)
    elif p[0] in ("ldmatrix", "stmatrix"):
        raise _err(f"{ins.opcode}: only .m8n8 .b16 and ldmatrix .m16n16 .trans .b8 are simulated")
    else:
        OPS[p[0]](st, ins, mask)
