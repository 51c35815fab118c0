"""Instructions that cannot be declared as expressions: data movement, conversions, control
flow, barriers, shuffles, votes and atomics (rows with `handwritten: true` in spec/ptx)."""

from __future__ import annotations

import re
import struct
from typing import TYPE_CHECKING

import numpy as np

from tilegen.runtime.ptx.parser import Addr, Imm, Instr, Reg, Sym, Vec
from tilegen.runtime.ptx.sim import asyncproxy, tcgen05, tensor_ops
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
    if space == "param":
        cache = st.__dict__.setdefault("_param_bits", {})
        for i, d in enumerate(dests):
            key = (addr.base, addr.offset + i * width, width, t)
            bits = cache.get(key)
            if bits is None:
                raw = _param_load(st, Addr(addr.base, addr.offset + i * width), width)
                bits = np.full(st.n, raw, np.uint64)
                if t[0] == "s":
                    bits = to_bits(from_bits(bits, t).astype(np.int64), "s64", st.n)
                cache[key] = bits
            st.write_bits(d, bits, mask)
        return
    mem, a = _memory(st, space, _address(st, addr, mask), mask)
    if st.bank_stats is not None and mem is st.shared:
        st.bank_stats.access(ins, np.nonzero(mask)[0], a, width * vec)
    if vec > 1:
        a = (a[None, :] + (np.arange(vec) * width)[:, None]).reshape(-1)
    vals = mem.load(a, width).reshape(vec, -1)
    full = mask is st.cur_mask and st.cur_full
    for i, d in enumerate(dests):
        if full:
            bits = vals[i]
        else:
            bits = np.zeros(st.n, np.uint64)
            bits[mask] = vals[i]
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
    mem, a = _memory(st, space, _address(st, addr, mask), mask)
    if st.bank_stats is not None and mem is st.shared:
        st.bank_stats.access(ins, np.nonzero(mask)[0], a, width * len(srcs))
    keep = np.uint64((1 << (8 * width)) - 1) if width < 8 else None
    vals = np.stack([st.bits(x, t)[mask] for x in srcs])  # [element, lane]
    if keep is not None:
        vals = vals & keep
    if len(srcs) > 1:
        a = (a[None, :] + (np.arange(len(srcs)) * width)[:, None]).reshape(-1)
    mem.store(a, width, vals.reshape(-1))


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
    # .shared::cta / .shared::cluster: the simulator's shared addresses name the cluster's CTAs
    # alike (each its own slice), so both convert by the shared window
    space = next(p.split("::")[0] for p in ins.parts if p.split("::")[0] in _SPACES)
    win = {"shared": SHARED_WINDOW, "local": LOCAL_WINDOW}.get(space, 0)
    src = st.bits(ins.operands[1]).astype(np.int64)
    st.write_bits(ins.operands[0], (src - win if to else src + win).astype(np.uint64), mask)


_ROUND_INT = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}


#: 8- and 4-bit float formats of cvt: (exponent bits, mantissa bits, largest finite code)
_F8 = {"e4m3x2": (4, 3, 0x7E), "e5m2x2": (5, 2, 0x7B), "e2m1x2": (2, 1, 0x7)}
#: bits of one lane (the sign is its top bit)
_LANE = {"e4m3x2": 8, "e5m2x2": 8, "e2m1x2": 4}


def _f8_value(code: np.ndarray, kind: str) -> np.ndarray:
    """float64 value of each fp8 / fp4 code (NaN for e4m3 S.1111.111 and e5m2 S.11111.xx != 0;
    e2m1 has none)."""
    eb, mb, _ = _F8[kind]
    lane = _LANE[kind]
    code = code.astype(np.int64) & ((1 << lane) - 1)
    e, m = (code >> mb) & ((1 << eb) - 1), code & ((1 << mb) - 1)
    bias = (1 << (eb - 1)) - 1
    mag = np.where(e == 0, m * 2.0 ** (1 - bias - mb), (1 + m / 2.0**mb) * 2.0 ** (e - bias))
    if kind == "e5m2x2":
        mag = np.where(e == 31, np.where(m == 0, np.inf, np.nan), mag)
    elif kind == "e4m3x2":
        mag = np.where((e == 15) & (m == 7), np.nan, mag)
    return np.where(code & (1 << (lane - 1)), -mag, mag)


def _f8_code(x: np.ndarray, kind: str) -> np.ndarray:
    """cvt.rn.satfinite to an fp8 / fp4 code: round to nearest even on the format's grid;
    magnitudes above the largest finite value (infinities too) give it with their sign; NaN
    gives 0x7F (fp8) or, e2m1 having no NaN, +MAX_NORM 0x7 (the PTX ISA's rule for the f4/f6
    types as we read it; not checked on hardware: tilegen's own PTX never converts a NaN)."""
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
    sign = 1 << (_LANE[kind] - 1)
    code = code | np.where(np.signbit(x), sign, 0)
    return np.where(np.isnan(x), sign - 1, code).astype(np.uint64)


def _cvt_f8(st: "CtaState", ins: Instr, mask: np.ndarray, dt: str, at: str) -> None:
    """``cvt.rn.satfinite.{e4m3x2,e5m2x2}.{f32,f16x2}`` and ``cvt.rn.f16x2.{e4m3x2,e5m2x2}``
    (sm_89+), ``cvt.rn.satfinite.e2m1x2.f32`` and ``cvt.rn.f16x2.e2m1x2`` (sm_100a+): two
    elements a register (b16; b8 for e2m1x2); f32 operands ``a``, ``b`` give the high and low
    lane."""
    mods = set(ins.parts[1:-2])
    if "rn" not in mods:
        raise _err(f"{ins.opcode}: only .rn conversions are simulated")
    relu = "relu" in mods  # negative values clamp to +0; NaN stays NaN
    if dt in _F8:
        if "satfinite" not in mods:
            raise _err(f"{ins.opcode}: .satfinite is required for {dt} results")
        if at == "f32":
            hi, lo = (st.read(op, "f32").astype(np.float64) for op in ins.operands[1:3])
        elif dt == "e2m1x2":
            raise _err(f"{ins.opcode}: .e2m1x2 is converted from .f32 operands only")
        elif at == "f16x2":
            w = st.bits(ins.operands[1], "b32")
            lo, hi = (from_bits((w >> np.uint64(s)) & np.uint64(0xFFFF), "f16") for s in (0, 16))
        else:
            raise _err(f"{ins.opcode}: unsupported source type {at}")
        if relu:
            hi, lo = (np.where(v < 0, 0.0, v) for v in (hi, lo))
        lane = _LANE[dt]
        out = (_f8_code(hi, dt) << np.uint64(lane)) | _f8_code(lo, dt)
        st.write_bits(ins.operands[0], out, mask)
        return
    if dt != "f16x2":
        raise _err(f"{ins.opcode}: unsupported conversion")
    lane = _LANE[at]
    b = st.bits(ins.operands[1], "b16" if lane == 8 else "b8")
    halves = []
    for s in (0, lane):
        v = _f8_value((b >> np.uint64(s)) & np.uint64((1 << lane) - 1), at)
        if relu:
            v = np.where(v < 0, 0.0, v)
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


_PRECISION = {"f16": 11, "f32": 24, "f64": 53}
_MAX_FINITE = {
    "f16": 65504.0,
    "f32": float(np.finfo(np.float32).max),
    "f64": float(np.finfo(np.float64).max),
}


def _int_to_float(x: np.ndarray, dt: str, mode: str) -> np.ndarray:
    """Integers rounded once to ``dt`` (f16/f32/f64) in ``mode`` (rn, rz, rm, rp), as float64.
    Values within 2^53 are exact in float64 and take the vectorised narrowing; wider 64-bit
    ones are rounded from the integer itself (a float64 step first would round twice)."""
    wide = (x > (1 << 53)) | (x < -(1 << 53)) if x.dtype.kind == "i" else x > (1 << 53)
    out = x.astype(np.float64)
    if dt != "f64":
        np_dt = np.float32 if dt == "f32" else np.float16
        if mode == "rn":
            out = out.astype(np_dt).astype(np.float64)
        else:
            out = _round_directed(out, np_dt, mode)
            if dt == "f16":  # toward zero / away from the sign's infinity: no overflow to inf
                big = np.isinf(out) & (
                    (mode == "rz") | ((mode == "rm") & (out > 0)) | ((mode == "rp") & (out < 0))
                )
                out = np.where(big, np.sign(out) * _MAX_FINITE["f16"], out)
    if wide.any():
        p = _PRECISION[dt]
        for i in np.nonzero(wide)[0]:
            v = int(x[i])
            neg, a = v < 0, abs(v)
            shift = a.bit_length() - p
            q, rem = a >> shift, a & ((1 << shift) - 1)
            half = 1 << (shift - 1)
            up = (
                (mode == "rn" and (rem > half or (rem == half and q & 1)))
                or (mode == "rm" and neg and rem)
                or (mode == "rp" and not neg and rem)
            )
            r = float((q + bool(up)) << shift)
            if r > _MAX_FINITE[dt]:
                away = mode == "rn" or (mode == "rm" and neg) or (mode == "rp" and not neg)
                r = float("inf") if away else _MAX_FINITE[dt]
            out[i] = -r if neg else r
    return out


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
    if dt == "tf32":  # cvt.{rna,rn}[.satfinite].tf32.f32: round the low 13 mantissa bits away
        b = st.bits(ins.operands[1], "b32").astype(np.uint64) & np.uint64(0xFFFFFFFF)
        finite = (b & np.uint64(0x7F800000)) != np.uint64(0x7F800000)
        if "rna" in mods:  # ties away from zero
            up = np.uint64(0x1000)
        elif "rn" in mods:  # ties to even: half an ulp, less one unless the kept lsb is odd
            up = np.uint64(0xFFF) + ((b >> np.uint64(13)) & np.uint64(1))
        else:
            raise _err(f"{ins.opcode}: only the .rna and .rn roundings of tf32 are simulated")
        r = np.where(finite, (b + up) & np.uint64(0xFFFFE000), b)
        st.write_bits(ins.operands[0], r & np.uint64(0xFFFFFFFF), mask)
        return
    x = st.read(ins.operands[1], at)
    if "ftz" in mods and at == "f32":  # .ftz flushes subnormal f32 inputs (sign kept) too
        x = np.where(np.abs(x) < np.finfo(np.float32).tiny, x * np.float32(0), x)
    rnd = next((m for m in mods if m in _ROUND_INT), None)
    with np.errstate(all="ignore"):
        if x.dtype.kind in "iu" and dt in _PRECISION:  # integers: one rounding, any mode
            mode = next((m for m in mods if m in ("rn", "rz", "rm", "rp")), "rn")
            st.write(ins.operands[0], _int_to_float(x, dt, mode), dt, mask)
            return
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


def _shfl_plan(mode: str, bval: np.ndarray, cval: np.ndarray, n: int):
    """(source lane of each lane, the predicate) of a shuffle."""
    lane = np.arange(n) % 32
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
    warp_base = np.arange(n) - lane
    return np.minimum(warp_base + j, n - 1), ok.astype(np.uint64)


_SHFL_CONST: dict = {}


def do_shfl(st: "CtaState", ins: Instr, mask: np.ndarray) -> None:
    mode = next(p for p in ins.parts if p in ("up", "down", "bfly", "idx"))
    ops = ins.operands
    dp = ops[1] if len(ops) == 6 else None  # d|p form
    a, b, c = ops[2:5] if dp is not None else ops[1:4]
    src = st.bits(a, "b32")
    if isinstance(b, Imm) and isinstance(c, Imm):  # the common case: one plan per (b, c)
        key = (mode, b.value, c.value, st.n)
        plan = _SHFL_CONST.get(key)
        if plan is None:
            bval = np.full(st.n, int(b.value) & 31, np.int64)
            cval = np.full(st.n, int(c.value) & 0xFFFFFFFF, np.int64)
            plan = _SHFL_CONST[key] = _shfl_plan(mode, bval, cval, st.n)
    else:
        bval = st.read(b, "u32").astype(np.int64) & 31
        cval = st.read(c, "u32").astype(np.int64)
        plan = _shfl_plan(mode, bval, cval, st.n)
    idx, ok = plan
    st.write_bits(ops[0], src[idx], mask)
    if dp is not None:
        st.write_bits(dp, ok, mask)


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
    fn = _ATOM_VEC[op]
    uniq, inverse, counts = np.unique(addrs, return_inverse=True, return_counts=True)
    if op in _ATOM_SCAN and len(uniq) <= counts.max():  # contended: one scan per address
        for k, a in enumerate(uniq):
            sel = np.nonzero(inverse == k)[0]  # in lane order
            ln = lanes[sel]
            cur_bits = mem.load(np.array([a]), width)
            cur = from_bits(cur_bits, t)
            seq = np.concatenate([cur, bvals[ln].astype(cur.dtype)])
            run = _ATOM_SCAN[op](seq)  # the value after each lane's update, in lane order
            olds = run[:-1]
            mem.store(np.array([a]), width, to_bits(run[-1:], t, 1))
            old_out[ln] = to_bits(olds, t, len(ln))
        if isinstance(d, Reg):
            st.write_bits(d, old_out, mask)
        return
    todo = np.arange(len(lanes))
    while todo.size:  # rounds: the first remaining lane of each address, in lane order
        first = np.unique(addrs[todo], return_index=True)[1]
        now = todo[np.sort(first)]
        a = addrs[now]
        old_bits = mem.load(a, width)
        old = from_bits(old_bits, t)
        ln = lanes[now]
        new = fn(old, bvals[ln], cvals[ln])
        mem.store(a, width, to_bits(np.asarray(new).astype(old.dtype), t, len(now)))
        old_out[ln] = old_bits
        todo = np.setdiff1d(todo, now, assume_unique=True)
    if isinstance(d, Reg):
        st.write_bits(d, old_out, mask)


_ATOM_SCAN = {  # sequential updates as an accumulation over [memory, b0, b1, ...]
    "add": lambda x: np.add.accumulate(x, dtype=x.dtype),
    "min": np.minimum.accumulate,
    "max": np.maximum.accumulate,
    "and": np.bitwise_and.accumulate,
    "or": np.bitwise_or.accumulate,
    "xor": np.bitwise_xor.accumulate,
    "exch": lambda x: x,
}
_ATOM_VEC = {
    "add": lambda o, b, c: o + b,
    "min": lambda o, b, c: np.minimum(o, b),
    "max": lambda o, b, c: np.maximum(o, b),
    "and": lambda o, b, c: o & b,
    "or": lambda o, b, c: o | b,
    "xor": lambda o, b, c: o ^ b,
    "exch": lambda o, b, c: b,
    "cas": lambda o, b, c: np.where(o == b, c, o),
    "inc": lambda o, b, c: np.where(o >= b, 0, o + 1),
}


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
    half = np.arange(2)[:, None]
    if trans:
        r, c = (lane % 4) * 2 + half, np.broadcast_to(lane // 4, (2, st.n))
    else:
        r, c = np.broadcast_to(lane // 4, (2, st.n)), (lane % 4) * 2 + half
    if st.bank_stats is not None:
        st.bank_stats.matrices(ins, rows, np.nonzero(mask)[0], count)
    m = np.arange(count)[:, None, None]
    addrs = rows[warp_base + m * 8 + r] + 2 * c  # [matrix, half, lane]
    sel = np.nonzero(mask)[0]
    a = addrs[:, :, sel]
    if load:
        vals = mem.load(a.reshape(-1), 2).reshape(count, 2, len(sel))
        words = vals[:, 0] | (vals[:, 1] << np.uint64(16))
        for k in range(count):
            out = np.zeros(st.n, np.uint64)
            out[sel] = words[k]
            st.write_bits(regs[k], out, mask)
        return
    src = np.stack([st.bits(regs[k], "b32")[sel] for k in range(count)])  # [matrix, lane]
    vals = np.stack([src & np.uint64(0xFFFF), (src >> np.uint64(16)) & np.uint64(0xFFFF)], 1)
    mem.store(a.reshape(-1), 2, vals.reshape(-1))


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


def do_elect(st: "CtaState", ins: Instr, mask: np.ndarray) -> None:
    """elect.sync d|p, membermask: the lowest active lane of each warp is the leader."""
    lane = np.arange(st.n) % 32
    leader = np.zeros(st.n, np.uint64)
    is_leader = np.zeros(st.n, bool)
    warps = np.arange(st.n) // 32
    for w in np.unique(warps[mask]):
        first = int(np.nonzero((warps == w) & mask)[0][0])
        leader[warps == w] = lane[first]
        is_leader[first] = True
    st.write_bits(ins.operands[0], leader, mask)
    if len(ins.operands) > 2:
        st.write_bits(ins.operands[1], is_leader.astype(np.uint64), mask)


def do_fence(st: "CtaState", ins: Instr, mask: np.ndarray) -> None:
    """fence.proxy.async[.shared::cta|.global|...] orders the thread's generic-proxy accesses
    before later async-proxy ones (the strict mode tracks it); other fences are no-ops in a
    sequentially consistent simulator."""
    hz = st.engine.hazards
    if "tensormap::generic" in ins.parts and "acquire" in ins.parts:
        from tilegen.runtime.ptx.sim.asyncproxy import acquire_tmaps

        acquire_tmaps(st, ins, mask)
    if hz is not None and "proxy" in ins.parts and "async" in ins.parts:
        if not any(p.startswith("global") for p in ins.parts):
            hz.fence_proxy_async(np.nonzero(mask)[0])


def do_setmaxnreg(st: "CtaState", ins: Instr, mask: np.ndarray) -> None:
    """setmaxnreg.{inc,dec}.sync.aligned.u32 N: whole warps execute it (warp-specialised code
    reaches it on different paths per warp of a warpgroup); the per-thread register budget is
    recorded per warp: dec must not raise it, inc must not lower it."""
    n = int(st.read(ins.operands[0], "u32")[0])
    inc = "inc" in ins.parts
    budgets = getattr(st, "maxnreg", None)
    if budgets is None:
        budgets = st.maxnreg = {}
    for w in np.unique(np.nonzero(mask)[0] // 32):
        if not mask[w * 32 : w * 32 + 32].all():
            raise _err(f"setmaxnreg is .sync.aligned: all 32 lanes of warp {w} must execute it")
        cur = budgets.get(int(w))
        if cur is not None and ((inc and n < cur) or (not inc and n > cur)):
            raise _err(
                f"setmaxnreg.{'inc' if inc else 'dec'} to {n} from {cur} registers per thread"
            )
        budgets[int(w)] = n


_NOOPS = ("membar", "nanosleep", "griddepcontrol", "prefetch", "pmevent")


def do_mapa(st: "CtaState", ins: Instr, mask: np.ndarray) -> None:
    """mapa[.shared::cluster].u32/u64 d, a, rank: the address of the shared variable at ``a``
    (this CTA's) in the cluster's CTA of that rank. The CTAs of a cluster are simulated side by
    side, their shared memories ``shared_stride`` apart, so this moves ``a`` by the rank
    difference (a generic address stays in the shared window)."""
    from tilegen.runtime.ptx.sim.memory import SHARED_WINDOW

    a = st.bits(ins.operands[1]).astype(np.int64)
    r = st.read(ins.operands[2], "u32").astype(np.int64)
    bad = mask & (r >= st.csize)
    if bad.any():
        raise _err(f"mapa: CTA rank {int(r[bad][0])} is outside the cluster of {st.csize} CTAs")
    if "shared::cluster" not in ins.parts and (a[mask] < SHARED_WINDOW).any():
        raise _err("mapa of a generic address outside shared memory")
    out = a + (r - st.rank.astype(np.int64)) * st.shared_stride
    width = 32 if ins.parts[-1] == "u32" else 64
    st.write_bits(ins.operands[0], out.astype(np.uint64) & np.uint64((1 << width) - 1), mask)


def _cluster_barrier(st: "CtaState", ins: Instr, mask: np.ndarray) -> str | None:
    """barrier.cluster.arrive / wait: a phase completes once every live thread of the cluster
    arrived; ``wait`` parks a thread until the phase it arrived in completed."""
    cl = st.cta_of // st.csize
    state = st.__dict__.setdefault("cluster_bar", {})  # cluster -> [arrivals, completed]
    if "cluster_phase" not in st.__dict__:
        st.cluster_phase = np.full(st.n, -1, np.int64)  # the phase each lane arrived in
    phase = st.cluster_phase

    haz = st.engine.hazards if st.engine is not None else None

    def settle(c: int) -> None:
        cnt, done = state.setdefault(c, [0, 0])
        live = int((~st.exited & (cl == c)).sum())
        if cnt and cnt >= live:
            state[c] = [0, done + 1]
            if haz is not None:
                haz.cluster_complete(c)

    if "arrive" in ins.parts:
        if (phase[mask] >= 0).any():
            raise _err("barrier.cluster.arrive again before barrier.cluster.wait")
        for c in np.unique(cl[mask]):
            sel = mask & (cl == c)
            entry = state.setdefault(int(c), [0, 0])
            phase[sel] = entry[1]
            entry[0] += int(sel.sum())
            if haz is not None:
                haz.cluster_arrive(np.nonzero(sel)[0], int(c))
            settle(int(c))
        return None
    if (phase[mask] < 0).any():
        raise _err("barrier.cluster.wait without a barrier.cluster.arrive before it")
    for c in np.unique(cl[mask]):
        settle(int(c))
    done_of = np.array([state.get(int(c), [0, 0])[1] for c in range(int(cl.max()) + 1)])
    done = mask & (phase < done_of[cl])
    if haz is not None:
        for c in np.unique(cl[done]):
            haz.cluster_acquire(np.nonzero(done & (cl == c))[0], int(c))
    phase[done] = -1
    st.stall = mask & ~done
    return "stall" if st.stall.any() else None


def _bar(st: "CtaState", ins: Instr, mask: np.ndarray, pc, at) -> str | None:
    if "warp" in ins.parts:
        return None
    if "cluster" in ins.parts:
        return _cluster_barrier(st, ins, mask)
    arrive = "arrive" in ins.parts
    if arrive and len(ins.operands) < 2:
        raise _err("bar.arrive needs a thread count")
    every = st.read(ins.operands[0], "u32").astype(np.int64)
    ids = every[mask]
    counts = st.read(ins.operands[1], "u32")[mask] if len(ins.operands) > 1 else None
    # warps may name different barriers (a named barrier per group of warps), the lanes of a
    # warp one
    warps = np.nonzero(mask)[0] // 32
    for w in np.unique(warps):
        if len(set(ids[warps == w].tolist())) != 1:
            raise _err("lanes of one warp at a bar.sync name different barriers")
    if counts is not None and (len(set(counts.tolist())) != 1 or int(counts[0]) % 32):
        raise _err("a barrier's thread count must be one multiple of 32 for all lanes")
    bar_id = int(ids[0]) if len(set(ids.tolist())) == 1 else every
    st.barrier = (bar_id, None if counts is None else int(counts[0]))
    return "arrive" if arrive else "barrier"


def _cp(st: "CtaState", ins: Instr, mask: np.ndarray, pc, at) -> None:
    if ins.parts[1:3] == ["async", "mbarrier"]:
        asyncproxy.do_cp_async_mbarrier_arrive(st, ins, mask, ins.line)
    elif ins.parts[1:3] == ["async", "bulk"] or ins.parts[1] == "reduce":
        asyncproxy.do_bulk(st, ins, mask, ins.line)
    else:
        raise _err(f"unsupported async copy {ins.opcode!r}")
    return None


def _tensormap(st: "CtaState", ins: Instr, mask: np.ndarray, pc, at) -> None:
    from tilegen.runtime.ptx.sim import tensormap

    if "cp_fenceproxy" in ins.parts:
        tensormap.copy_to_global(st, ins, mask)
    else:
        tensormap.replace(st, ins, mask)
    return None


def _simple(fn):
    """A handler (st, ins, mask) as (st, ins, mask, pc, at) -> no action."""

    def run(st, ins, mask, pc, at):
        fn(st, ins, mask)
        return None

    return run


_HANDLERS = {
    "ret": lambda st, ins, mask, pc, at: "exit",
    "exit": lambda st, ins, mask, pc, at: "exit",
    "trap": lambda st, ins, mask, pc, at: "trap",
    "bar": _bar,
    "barrier": _bar,
    "bra": lambda st, ins, mask, pc, at: do_bra(st, ins, mask, pc),
    "fence": _simple(do_fence),
    "setmaxnreg": _simple(do_setmaxnreg),
    "mbarrier": lambda st, ins, mask, pc, at: asyncproxy.do_mbarrier(st, ins, mask, ins.line),
    "elect": _simple(do_elect),
    "tcgen05": lambda st, ins, mask, pc, at: tcgen05.execute(st, ins, mask, ins.line),
    "cp": _cp,
    "tensormap": _tensormap,
    "call": _simple(do_call),
    "ld": _simple(do_ld),
    "st": _simple(do_st),
    "mov": _simple(do_mov),
    "cvta": _simple(do_cvta),
    "mapa": _simple(do_mapa),
    "cvt": _simple(do_cvt),
    "shfl": _simple(do_shfl),
    "vote": _simple(do_vote),
    "atom": _simple(do_atom),
    "ldmatrix": _simple(do_matrix),
    "redux": _simple(do_redux),
    "stmatrix": _simple(do_matrix),
}
for _op in _NOOPS:
    _HANDLERS[_op] = lambda st, ins, mask, pc, at: None


def handler(ins: Instr):
    """The function (st, ins, mask, pc, at) -> action that executes a hand-written
    instruction (looked up once per instruction)."""
    if tensor_ops.handles(ins):  # mma/wgmma, cp.async (non-bulk), prmt, bfi, ldmatrix forms
        return _simple(tensor_ops.execute)
    fn = _HANDLERS.get(ins.parts[0])
    if fn is None:
        raise _err(f"unsupported instruction {ins.opcode!r}")
    return fn


def execute(st: "CtaState", ins: Instr, mask: np.ndarray, pc: np.ndarray, at: int) -> str | None:
    """Run a hand-written instruction; returns 'exit', 'barrier', 'stall', 'trap' or None."""
    return handler(ins)(st, ins, mask, pc, at)
