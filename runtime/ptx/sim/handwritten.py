"""Instructions that cannot be declared as expressions: data movement, conversions, control
flow, barriers, shuffles, votes and atomics (rows with `handwritten: true` in spec/ptx)."""

from __future__ import annotations

import re
import struct
from typing import TYPE_CHECKING

import numpy as np

from tilegen.runtime.ptx.parser import Addr, Imm, Instr, Reg, Sym, Vec
from tilegen.runtime.ptx.sim import async_ops, tensor_ops
from tilegen.runtime.ptx.sim.memory import LOCAL_WINDOW, SHARED_WINDOW
from tilegen.runtime.ptx.sim.values import WIDTH, f32_to_bf16_bits, from_bits, to_bits

if TYPE_CHECKING:
    from tilegen.runtime.ptx.sim.cta import CtaState

_SPACES = ("param", "global", "shared", "local", "const")


def _err(msg: str) -> Exception:
    from tilegen.runtime.ptx.sim.cta import PtxSimError

    return PtxSimError(msg)


def _vtype(parts: list[str]) -> tuple[str, int, str | None]:
    """(element type, vector length, state space) of an ld/st/atom opcode."""
    vec = next((int(p[1:]) for p in parts if p in ("v2", "v4", "v8")), 1)
    space = next((p.split("::")[0] for p in parts if p.split("::")[0] in _SPACES), None)
    return parts[-1], vec, space


def _address(st: "CtaState", op: Addr, mask: np.ndarray) -> np.ndarray:
    base = np.zeros(st.n, np.uint64) if op.base is None else st.bits(op.base)
    return (base.astype(np.int64) + op.offset)[mask]


def _memory(st: "CtaState", space: str | None, addrs: np.ndarray, mask: np.ndarray):
    """(memory, addresses) for an access; generic addresses are resolved by window."""
    if space is None:
        if addrs.size and addrs.min() >= LOCAL_WINDOW:
            space, addrs = "local", addrs - LOCAL_WINDOW
        elif addrs.size and addrs.min() >= SHARED_WINDOW:
            space, addrs = "shared", addrs - SHARED_WINDOW
        else:
            space = "global"
    if space == "global":
        return st.heap, addrs
    if space == "shared":
        return st.shared, addrs
    if space == "local":
        return st.local, addrs + np.nonzero(mask)[0] * st.local_size
    raise _err(f"state space {space!r} is not supported for this access")


def _param_load(st: "CtaState", op: Addr, width: int) -> int:
    name = op.base.name if isinstance(op.base, Sym) else None
    if name not in st.params:
        raise _err(f"unknown kernel parameter {name!r}")
    raw = st.params[name][1][op.offset : op.offset + width]
    return int.from_bytes(raw.ljust(width, b"\0"), "little")


def _regs(op) -> list:
    return list(op.items) if isinstance(op, Vec) else [op]


def do_ld(st: "CtaState", ins: Instr, mask: np.ndarray) -> None:
    t, vec, space = _vtype(ins.parts)
    width = WIDTH[t] // 8
    dests, addr = _regs(ins.operands[0]), ins.operands[1]
    for i, d in enumerate(dests):
        if space == "param":
            bits = np.full(
                st.n, _param_load(st, Addr(addr.base, addr.offset + i * width), width), np.uint64
            )
        else:
            mem, a = _memory(st, space, _address(st, addr, mask) + i * width, mask)
            bits = np.zeros(st.n, np.uint64)
            bits[mask] = mem.load(a, width)
        if t[0] == "s" and isinstance(d, Reg):  # sign-extend into a wider register
            bits = to_bits(from_bits(bits, t).astype(np.int64), "s64", st.n)
        st.write_bits(d, bits, mask)


def _call_param(st: "CtaState", op) -> str | None:
    if isinstance(op, Addr) and isinstance(op.base, Sym):
        if any(v.name == op.base.name for v in st.entry.call_params):
            return op.base.name
    return None


def do_st(st: "CtaState", ins: Instr, mask: np.ndarray) -> None:
    t, vec, space = _vtype(ins.parts)
    if space == "param" and _call_param(st, ins.operands[0]):  # argument of a call sequence
        st.write_bits(Reg(_call_param(st, ins.operands[0])), st.bits(ins.operands[1], t), mask)
        return
    width = WIDTH[t] // 8
    addr, srcs = ins.operands[0], _regs(ins.operands[1])
    for i, s in enumerate(srcs):
        mem, a = _memory(st, space, _address(st, addr, mask) + i * width, mask)
        mem.store(a, width, st.bits(s, t)[mask] & np.uint64((1 << (8 * width)) - 1))


def do_mov(st: "CtaState", ins: Instr, mask: np.ndarray) -> None:
    t = ins.parts[-1]
    d, a = ins.operands[0], ins.operands[1]
    if isinstance(d, Vec):  # unpack: mov.b64 {lo, hi}, %rd
        w = WIDTH[t] // len(d.items)
        src = st.bits(a, t)
        for i, r in enumerate(d.items):
            st.write_bits(r, (src >> np.uint64(i * w)) & np.uint64((1 << w) - 1), mask)
        return
    if isinstance(a, Vec):  # pack: first item in the low bits
        w = WIDTH[t] // len(a.items)
        out = np.zeros(st.n, np.uint64)
        for i, r in enumerate(a.items):
            out |= (st.bits(r, f"b{w}") & np.uint64((1 << w) - 1)) << np.uint64(i * w)
        st.write_bits(d, out, mask)
        return
    if isinstance(a, Imm):
        st.write(d, st.read(a, t), t, mask)
        return
    st.write_bits(d, st.bits(a, t), mask)


def do_cvta(st: "CtaState", ins: Instr, mask: np.ndarray) -> None:
    to = "to" in ins.parts
    space = next(p for p in ins.parts if p in _SPACES)
    win = {"shared": SHARED_WINDOW, "local": LOCAL_WINDOW}.get(space, 0)
    src = st.bits(ins.operands[1]).astype(np.int64)
    st.write_bits(ins.operands[0], (src - win if to else src + win).astype(np.uint64), mask)


_ROUND_INT = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}


#: 8-bit float formats of cvt: (exponent bits, mantissa bits, largest finite code)
_F8 = {"e4m3x2": (4, 3, 0x7E), "e5m2x2": (5, 2, 0x7B)}


def _f8_value(code: np.ndarray, kind: str) -> np.ndarray:
    """float64 value of each fp8 code (NaN for e4m3 S.1111.111 and e5m2 S.11111.xx != 0)."""
    eb, mb, _ = _F8[kind]
    code = code.astype(np.int64) & 0xFF
    e, m = (code >> mb) & ((1 << eb) - 1), code & ((1 << mb) - 1)
    bias = (1 << (eb - 1)) - 1
    mag = np.where(e == 0, m * 2.0 ** (1 - bias - mb), (1 + m / 2.0**mb) * 2.0 ** (e - bias))
    if kind == "e5m2x2":
        mag = np.where(e == 31, np.where(m == 0, np.inf, np.nan), mag)
    else:
        mag = np.where((e == 15) & (m == 7), np.nan, mag)
    return np.where(code & 0x80, -mag, mag)


def _f8_code(x: np.ndarray, kind: str) -> np.ndarray:
    """cvt.rn.satfinite to an fp8 code: round to nearest even on the format's grid; magnitudes
    above the largest finite value (infinities too) give it with their sign; NaN gives 0x7F."""
    eb, mb, top = _F8[kind]
    bias = (1 << (eb - 1)) - 1
    x = x.astype(np.float64)
    ax = np.where(np.isfinite(x), np.abs(x), 0.0)
    emin = 1 - bias
    e = np.maximum(np.frexp(np.where(ax > 0, ax, 1.0))[1] - 1, emin).astype(np.float64)
    q = np.rint(ax / 2.0 ** (e - mb))  # exact: a power-of-two scaling; rint ties to even
    biased = np.where(q >= 2.0 ** (mb + 1), e + 1 + bias, np.where(q >= 2.0**mb, e + bias, 0))
    q = np.where(q >= 2.0 ** (mb + 1), q / 2, q)  # rounded up into the next binade
    code = np.where(biased > 0, biased * 2**mb + (q - 2**mb), q).astype(np.int64)
    code = np.where((code > top) | np.isinf(x), top, code)
    code = code | np.where(np.signbit(x), 0x80, 0)
    return np.where(np.isnan(x), 0x7F, code).astype(np.uint64)


def _cvt_f8(st: "CtaState", ins: Instr, mask: np.ndarray, dt: str, at: str) -> None:
    """``cvt.rn.satfinite.{e4m3x2,e5m2x2}.{f32,f16x2}`` and ``cvt.rn.f16x2.{e4m3x2,e5m2x2}``
    (sm_89+): two elements a register; f32 operands ``a``, ``b`` give the high and low byte."""
    mods = set(ins.parts[1:-2])
    if "relu" in mods or "rn" not in mods:
        raise _err(f"{ins.opcode}: only .rn conversions without .relu are simulated")
    if dt in _F8:
        if "satfinite" not in mods:
            raise _err(f"{ins.opcode}: .satfinite is required for {dt} results")
        if at == "f32":
            hi, lo = (st.read(op, "f32").astype(np.float64) for op in ins.operands[1:3])
        elif at == "f16x2":
            w = st.bits(ins.operands[1], "b32")
            lo, hi = (from_bits((w >> np.uint64(s)) & np.uint64(0xFFFF), "f16") for s in (0, 16))
        else:
            raise _err(f"{ins.opcode}: unsupported source type {at}")
        out = (_f8_code(hi, dt) << np.uint64(8)) | _f8_code(lo, dt)
        st.write_bits(ins.operands[0], out, mask)
        return
    if dt != "f16x2":
        raise _err(f"{ins.opcode}: unsupported conversion")
    b = st.bits(ins.operands[1], "b16")
    halves = []
    for s in (0, 8):
        v = _f8_value((b >> np.uint64(s)) & np.uint64(0xFF), at)
        h = to_bits(v.astype(np.float16), "f16", st.n)  # exact: every fp8 value is an f16
        halves.append(np.where(np.isnan(v), np.uint64(0x7FFF), h))  # canonical NaN, no sign
    st.write_bits(ins.operands[0], halves[0] | (halves[1] << np.uint64(16)), mask)


def _round_directed(x: np.ndarray, dtype, mode: str) -> np.ndarray:
    """float64 values narrowed to ``dtype`` toward zero (rz), -inf (rm) or +inf (rp): the
    nearest-even result stepped back one ulp where it lies on the wrong side of ``x``
    (returned as float64, exactly representable in ``dtype``)."""
    with np.errstate(all="ignore"):
        r = x.astype(dtype)
        r64 = r.astype(np.float64)
        if mode == "rz":
            back = np.abs(r64) > np.abs(x)
            toward = np.zeros_like(r)
        elif mode == "rm":
            back, toward = r64 > x, np.full_like(r, -np.inf)
        else:
            back, toward = r64 < x, np.full_like(r, np.inf)
        back &= np.isfinite(x)
        r = np.where(back, np.nextafter(r, toward), r)
    return r.astype(np.float64)


def do_cvt(st: "CtaState", ins: Instr, mask: np.ndarray) -> None:
    parts = ins.parts
    dt, at = parts[-2], parts[-1]
    if dt in _F8 or at in _F8:
        return _cvt_f8(st, ins, mask, dt, at)
    mods = set(parts[1:-2])
    if dt in ("f16x2", "bf16x2"):  # d = {cvt(a) in the high half, cvt(b) in the low half}
        hi, lo = (st.read(op, at).astype(np.float32) for op in ins.operands[1:3])
        conv = (lambda x: to_bits(x, "f16", st.n)) if dt == "f16x2" else f32_to_bf16_bits
        if "relu" in mods:
            hi, lo = np.maximum(hi, 0), np.maximum(lo, 0)
        st.write_bits(ins.operands[0], (conv(hi) << np.uint64(16)) | conv(lo), mask)
        return
    if dt == "tf32":  # cvt.rna[.satfinite].tf32.f32: round the low 13 mantissa bits away
        b = st.bits(ins.operands[1], "b32").astype(np.uint64) & np.uint64(0xFFFFFFFF)
        finite = (b & np.uint64(0x7F800000)) != np.uint64(0x7F800000)
        if "rna" not in mods:
            raise _err(f"{ins.opcode}: only the .rna rounding of tf32 is simulated")
        r = np.where(finite, (b + np.uint64(0x1000)) & np.uint64(0xFFFFE000), b)
        st.write_bits(ins.operands[0], r & np.uint64(0xFFFFFFFF), mask)
        return
    x = st.read(ins.operands[1], at)
    if "ftz" in mods and at == "f32":  # .ftz flushes subnormal f32 inputs (sign kept) too
        x = np.where(np.abs(x) < np.finfo(np.float32).tiny, x * np.float32(0), x)
    rnd = next((m for m in mods if m in _ROUND_INT), None)
    with np.errstate(all="ignore"):
        if dt[0] == "f" or dt == "bf16":
            if x.dtype.kind == "f":
                x = x.astype(np.float64) if rnd else x
                if rnd:
                    x = _ROUND_INT[rnd](x)
            out = x.astype(np.float64)
            directed = next((m for m in mods if m in ("rz", "rm", "rp")), None)
            if directed and dt in ("f32", "f16") and x.dtype.itemsize > WIDTH[dt] // 8:
                out = _round_directed(out, np.float32 if dt == "f32" else np.float16, directed)
            if "sat" in mods:
                out = np.where(np.isnan(out), 0.0, np.clip(out, 0.0, 1.0))
            if "ftz" in mods and dt == "f32":
                out = np.where(np.abs(out) < np.finfo(np.float32).tiny, 0.0 * out, out)
            st.write(ins.operands[0], out, dt, mask)
            return
        lo, hi = _int_range(dt)
        if x.dtype.kind == "f":
            v = _ROUND_INT[rnd or "rzi"](x.astype(np.float64))
            v = np.where(np.isnan(v), 0, np.clip(v, lo, hi))
            vals = np.array([int(e) for e in v], dtype=object)
        else:
            vals = x.astype(np.int64) if x.dtype.kind == "i" else x.astype(np.uint64)
            if "sat" in mods:
                vals = np.array([min(max(int(e), lo), hi) for e in vals], dtype=object)
        if dt[0] == "s" and WIDTH[dt] < 64:  # sign-extend the result into the register
            bits = to_bits(vals, dt, st.n)
            st.write_bits(
                ins.operands[0], to_bits(from_bits(bits, dt).astype(np.int64), "s64", st.n), mask
            )
            return
        st.write(ins.operands[0], vals, dt, mask)


def _int_range(t: str) -> tuple[int, int]:
    w = WIDTH[t]
    return (-(1 << (w - 1)), (1 << (w - 1)) - 1) if t[0] == "s" else (0, (1 << w) - 1)


def do_bra(st: "CtaState", ins: Instr, mask: np.ndarray, pc: np.ndarray) -> None:
    target = ins.operands[0]
    if not isinstance(target, Sym) or target.name not in st.entry.labels:
        raise _err(f"unknown branch target {target!r}")
    pc[mask] = st.entry.labels[target.name]


def do_shfl(st: "CtaState", ins: Instr, mask: np.ndarray) -> None:
    mode = next(p for p in ins.parts if p in ("up", "down", "bfly", "idx"))
    ops = ins.operands
    dp = ops[1] if len(ops) == 6 else None  # d|p form
    a, b, c = ops[2:5] if dp is not None else ops[1:4]
    src = st.bits(a, "b32")
    bval = st.read(b, "u32").astype(np.int64) & 31
    cval = st.read(c, "u32").astype(np.int64)
    lane = np.arange(st.n) % 32
    seg = (cval >> 8) & 31
    max_lane = (lane & seg) | (cval & 31 & ~seg)
    min_lane = lane & seg
    if mode == "up":
        j = lane - bval
        ok = j >= max_lane
    elif mode == "down":
        j, ok = lane + bval, None
    elif mode == "bfly":
        j, ok = lane ^ bval, None
    else:
        j, ok = min_lane | (bval & ~seg), None
    if ok is None:
        ok = j <= max_lane
    j = np.where(ok, j, lane)
    warp_base = np.arange(st.n) - lane
    idx = np.minimum(warp_base + j, st.n - 1)
    st.write_bits(ops[0], src[idx], mask)
    if dp is not None:
        st.write_bits(dp, ok.astype(np.uint64), mask)


def do_vote(st: "CtaState", ins: Instr, mask: np.ndarray) -> None:
    mode = next(p for p in ins.parts if p in ("all", "any", "uni", "ballot"))
    p = st.read(ins.operands[1], "pred") & mask
    warps = np.arange(st.n) // 32
    out = np.zeros(st.n, np.uint64)
    for w in np.unique(warps[mask]):
        sel = (warps == w) & mask
        lanes = np.nonzero(sel)[0] % 32
        if mode == "ballot":
            out[warps == w] = sum(1 << int(l) for l, v in zip(lanes, p[sel]) if v)
        elif mode == "any":
            out[warps == w] = int(p[sel].any())
        elif mode == "all":
            out[warps == w] = int(p[sel].all())
        else:
            out[warps == w] = int(p[sel].all() or not p[sel].any())
    st.write_bits(ins.operands[0], out, mask)


_ATOM = {
    "add": lambda o, b, c: o + b,
    "min": lambda o, b, c: min(o, b),
    "max": lambda o, b, c: max(o, b),
    "and": lambda o, b, c: o & b,
    "or": lambda o, b, c: o | b,
    "xor": lambda o, b, c: o ^ b,
    "exch": lambda o, b, c: b,
    "cas": lambda o, b, c: c if o == b else o,
    "inc": lambda o, b, c: 0 if o >= b else o + 1,
}


def do_atom(st: "CtaState", ins: Instr, mask: np.ndarray) -> None:
    parts = ins.parts
    t = parts[-1]
    space = next((p.split("::")[0] for p in parts if p.split("::")[0] in _SPACES), None)
    op = next(p for p in parts[1:-1] if p in _ATOM)
    d, addr = ins.operands[0], ins.operands[1]
    bvals = st.read(ins.operands[2], t)
    cvals = st.read(ins.operands[3], t) if len(ins.operands) > 3 else bvals
    width = WIDTH[t] // 8
    lanes = np.nonzero(mask)[0]
    mem, addrs = _memory(st, space, _address(st, addr, mask), mask)
    old_out = np.zeros(st.n, np.uint64)
    for k, lane in enumerate(lanes):  # lane order is one valid serialisation
        a = addrs[k : k + 1]
        old_bits = mem.load(a, width)
        old = from_bits(old_bits, t)[0]
        new = _ATOM[op](old, bvals[lane], cvals[lane])
        mem.store(a, width, to_bits(np.array([new], dtype=old.dtype), t, 1))
        old_out[lane] = old_bits[0]
    if isinstance(d, Reg):
        st.write_bits(d, old_out, mask)


def do_matrix(st: "CtaState", ins: Instr, mask: np.ndarray) -> None:
    """ldmatrix/stmatrix .m8n8 .x1/.x2/.x4 [.trans] .b16: lanes 8m..8m+7 give matrix m's row
    addresses; lane i holds row i/4, columns 2(i%4) and 2(i%4)+1 (transposed with .trans)."""
    load = ins.parts[0] == "ldmatrix"
    count = next(int(p[1:]) for p in ins.parts if p in ("x1", "x2", "x4"))
    trans = "trans" in ins.parts
    regs_op, addr = (ins.operands[0], ins.operands[1]) if load else ins.operands[::-1]
    regs = _regs(regs_op)
    full = np.ones(st.n, bool)
    rows = _address(st, addr, full)
    mem, _ = _memory(st, "shared", rows[:1], full)
    lane = np.arange(st.n) % 32
    warp_base = np.arange(st.n) - lane
    for m in range(count):
        out = st.bits(regs[m], "b32").copy()
        for half in range(2):
            if trans:
                r, c = (lane % 4) * 2 + half, lane // 4
            else:
                r, c = lane // 4, (lane % 4) * 2 + half
            a = rows[warp_base + m * 8 + r] + 2 * c
            sel = mask
            if load:
                val = mem.load(a[sel], 2)
                out[sel] = (out[sel] & ~np.uint64(0xFFFF << (16 * half))) | (
                    val << np.uint64(16 * half)
                )
            else:
                val = (st.bits(regs[m], "b32")[sel] >> np.uint64(16 * half)) & np.uint64(0xFFFF)
                mem.store(a[sel], 2, val)
        if load:
            st.write_bits(regs[m], out, mask)


_REDUX = {
    "add": np.sum,
    "min": np.min,
    "max": np.max,
    "and": np.bitwise_and.reduce,
    "or": np.bitwise_or.reduce,
    "xor": np.bitwise_xor.reduce,
}


def do_redux(st: "CtaState", ins: Instr, mask: np.ndarray) -> None:
    """redux.sync: reduce `a` over the active lanes of each warp; every lane gets the result."""
    t = ins.parts[-1]
    op = next(p for p in ins.parts[1:-1] if p in _REDUX)
    vals = st.read(ins.operands[1], t)
    if "abs" in ins.parts:
        vals = np.abs(vals)
    warps = np.arange(st.n) // 32
    out = np.zeros(st.n, vals.dtype)
    for w in np.unique(warps[mask]):
        sel = (warps == w) & mask
        v = vals[sel]
        if t == "f32" and "NaN" not in ins.parts:
            v = v[~np.isnan(v)] if (~np.isnan(v)).any() else v
        out[sel] = _REDUX[op](v).astype(vals.dtype) if t != "f32" else _REDUX[op](v)
    st.write(ins.operands[0], out, t, mask)


_PRINTF = re.compile(r"%[-+ #0]*\d*(?:\.\d+)?(hh|h|ll|l|z)?([diouxXfFeEgGcsp%])")


def do_call(st: "CtaState", ins: Instr, mask: np.ndarray) -> None:
    """`call` is supported for vprintf(format, args) only: each active lane formats its line."""
    callee = next((op.name for op in ins.operands if isinstance(op, Sym)), None)
    if callee != "vprintf":
        raise _err(f"calls to {callee!r} are not supported (only vprintf)")
    args = [op for op in ins.operands if isinstance(op, Vec)][-1].items
    fmts, bufs = st.bits(Reg(args[0].name)), st.bits(Reg(args[1].name))
    for lane in np.nonzero(mask)[0]:
        raw = st.heap.read(int(fmts[lane]), 4096)
        fmt = raw[: raw.index(b"\0")].decode("latin-1") if b"\0" in raw else raw.decode("latin-1")
        off, pieces, pos = 0, [], 0
        lane_mask = np.zeros(st.n, bool)
        lane_mask[lane] = True
        for m in _PRINTF.finditer(fmt):
            pieces.append(fmt[pos : m.start()])
            pos = m.end()
            conv = m.group(2)
            if conv == "%":
                pieces.append("%")
                continue
            width = 8 if conv in "fFeEgGsp" or m.group(1) in ("l", "ll", "z") else 4
            off = (off + width - 1) // width * width
            mem, a = _memory(st, None, np.array([int(bufs[lane]) + off]), lane_mask)
            val = int(mem.load(a, width)[0])
            off += width
            if conv in "fFeEgG":
                val = struct.unpack("<d", val.to_bytes(8, "little"))[0]
            elif conv in "di" and val >= 1 << (8 * width - 1):
                val -= 1 << (8 * width)
            spec = m.group(0).replace(m.group(1) or "\0", "") if m.group(1) else m.group(0)
            pieces.append(spec % val if conv not in "sp" else hex(val))
        pieces.append(fmt[pos:])
        st.printed.append("".join(pieces))


_NOOPS = ("fence", "membar", "griddepcontrol", "prefetch", "setmaxnreg", "pmevent")


def execute(st: "CtaState", ins: Instr, mask: np.ndarray, pc: np.ndarray, at: int) -> str | None:
    """Run a hand-written instruction; returns 'exit', 'barrier', 'trap' or None."""
    op = ins.parts[0]
    if tensor_ops.handles(ins):  # mma/wgmma, cp.async (non-bulk), prmt, bfi
        tensor_ops.execute(st, ins, mask)
        return None
    if op in ("ret", "exit"):
        return "exit"
    if op == "trap":
        return "trap"
    if op in ("bar", "barrier"):
        if "warp" in ins.parts:
            return None
        if "arrive" in ins.parts:
            raise _err("bar.arrive (producer/consumer barriers) is not supported")
        ids = st.read(ins.operands[0], "u32")[mask]
        counts = st.read(ins.operands[1], "u32")[mask] if len(ins.operands) > 1 else None
        if len(set(ids.tolist())) != 1:
            raise _err("lanes at one bar.sync name different barriers")
        st.barrier = (int(ids[0]), None if counts is None else int(counts[0]))
        return "barrier"
    if op == "bra":
        do_bra(st, ins, mask, pc)
        return None
    if op in _NOOPS:
        return None
    if op == "mbarrier":
        return async_ops.do_mbarrier(st, ins, mask)
    if op == "elect":
        async_ops.do_elect(st, ins, mask)
        return None
    if op == "cp":
        async_ops.do_cp_async(st, ins, mask)
        return None
    if op == "call":
        do_call(st, ins, mask)
        return None
    handler = {
        "ld": do_ld,
        "st": do_st,
        "mov": do_mov,
        "cvta": do_cvta,
        "cvt": do_cvt,
        "shfl": do_shfl,
        "vote": do_vote,
        "atom": do_atom,
        "ldmatrix": do_matrix,
        "redux": do_redux,
        "stmatrix": do_matrix,
    }.get(op)
    if handler is None:
        raise _err(f"unsupported instruction {ins.opcode!r}")
    handler(st, ins, mask)
    return None
