"""Elementwise ops (scalars and tiles alike) by instruction selection, and constants.

The per-(op, element type) choice is a row of spec/ptx/selection.yaml (see
:mod:`tilegen.runtime.codegen.selection`); multi-instruction math lives in
:mod:`tilegen.runtime.codegen.mathlib`. A tile op applies the selection register by register:
operands of an elementwise op share the result's layout (the layout pass guarantees it).
"""

from __future__ import annotations

import math
import struct

from tilegen.runtime.attributes import BoolAttr, FloatAttr, IntegerAttr, fastmath_flags
from tilegen.runtime.codegen import mathlib
from tilegen.runtime.codegen import affine
from tilegen.runtime.codegen.core import (
    ELEMENTS,
    Emitter,
    elem_info,
    elem_key,
    fail,
    handles,
    handles_family,
    is_tile,
)
from tilegen.runtime.codegen.epilogue import done
from tilegen.runtime.codegen.selection import (
    attr_keyword,
    has_rows,
    keys,
    render,
    select,
    select_pair,
)

_HALF = ("f16", "bf16")
_FLOATS = ("f16", "bf16", "f32", "f64")


def _f16_bits(v: float) -> int:
    """IEEE half bits of ``v`` rounded to nearest even (== numpy's float64 -> float16)."""
    if math.isfinite(v):
        try:
            return struct.unpack("<H", struct.pack("<e", v))[0]
        except OverflowError:
            pass
    import numpy as np  # inf, nan (payload) and overflow to inf: numpy's exact behaviour

    return int(np.array(v, np.float16).view(np.uint16))


def _f32_bits(v: float) -> int:
    """IEEE single bits of ``v`` (== numpy's float64 -> float32)."""
    if math.isfinite(v):
        try:
            return struct.unpack("<I", struct.pack("<f", v))[0]
        except OverflowError:
            pass
    import numpy as np

    return int(np.array(v, np.float32).view(np.uint32))


def literal(op, t, value, bits=None) -> str:
    """PTX immediate text for a scalar constant ``value`` of element type ``t``."""
    key = elem_key(t)
    if key in ("f32", "f64", "f16", "bf16"):
        if bits is not None and key != "bf16":
            return ("0f%08X" if key == "f32" else "0d%016X" if key == "f64" else "0x%04X") % bits
        v = float(value)
        if key == "f32":
            return "0f%08X" % struct.unpack("<I", struct.pack("<f", v))[0]
        if key == "f64":
            return "0d%016X" % struct.unpack("<Q", struct.pack("<d", v))[0]
        if key == "f16":
            return "0x%04X" % _f16_bits(v)
        if bits is not None:
            return "0x%04X" % bits
        b = _f32_bits(v)
        b = (b + 0x7FFF + ((b >> 16) & 1)) >> 16 if v == v else 0x7FC0  # round to nearest even
        return "0x%04X" % (b & 0xFFFF)
    if key in ("f8E4M3FN", "f8E5M2", "tf32"):
        from tilegen.runtime.floats import encode

        if bits is None:
            import numpy as np  # lazy: numpy costs ~100 ms of start-up, rarely needed here

            bits = int(np.asarray(encode(np.array([float(value)]), key)).reshape(-1)[0])
        return ("0x%08X" if key == "tf32" else "0x%04X") % bits
    if key in ("i1", "i8", "i16", "i32", "i64", "ptr"):
        v = int(value)
        if key == "i1":
            return "1" if v & 1 else "0"
        w = {"i8": 8, "i16": 16, "i32": 32}.get(key, 64)
        v &= (1 << w) - 1
        return str(v - (1 << w) if v >> (w - 1) else v)  # signed, i8 sign-extended
    fail(op, f"PTX backend does not support constants of type {t} yet")


def _scalar_const(em: Emitter, cls: str, text: str) -> str:
    if cls == "pred":
        r = em.new("pred")
        em.ins(f"setp.ne.u32 {r}, {text}, 0")
        return r
    return em.mov(cls, text)


@handles("arith.constant")
def constant(em: Emitter, op) -> None:
    if done(em, op):  # emitted by a fused dot epilogue
        return
    res = op.results[0]
    attr = op.attributes["value"]
    cls, _, _ = elem_info(op, res.type)
    if is_tile(res.type):
        vals = getattr(attr, "values", None)
        bits = getattr(attr, "bits", None)
        if vals is None:
            vals, bits = (attr.value,), (getattr(attr, "bits", None),)
        if len(set(map(repr, vals))) != 1:
            fail(op, "PTX backend does not support non-splat tile constants yet")
        text = literal(op, res.type, vals[0], bits[0] if bits else None)
        d = em.dist_of(op, res.type)
        em.set(res, [_scalar_const(em, cls, text) for _ in range(d.nregs)])
        return
    if isinstance(attr, BoolAttr):
        value, bits = int(attr.value), None
    elif isinstance(attr, (FloatAttr, IntegerAttr)):
        value, bits = attr.value, getattr(attr, "bits", None)
    else:
        fail(op, f"PTX backend does not support the constant {attr} yet")
    em.set(res, _scalar_const(em, cls, literal(op, res.type, value, bits)))


# ----------------------------------------------------------------------------- elementwise
def widen(em: Emitter, reg: str, key: str, to: str) -> str:
    """A half/f32 value converted exactly to ``to`` (f32 or f64)."""
    if key == to or key not in _HALF + ("f32",):
        return reg
    if key == "f16" and to == "f64":
        return widen(em, widen(em, reg, key, "f32"), "f32", to)
    if key == "bf16":
        u = em.new("b32")
        em.ins(f"cvt.u32.u16 {u}, {reg}")
        em.ins(f"shl.b32 {u}, {u}, 16")
        r = em.new("f32")
        em.ins(f"mov.b32 {r}, {u}")
        return widen(em, r, "f32", to)
    r = em.new(to)
    em.ins(f"cvt.{to}.{key} {r}, {reg}")
    return r


def narrow(em: Emitter, reg: str, key: str, to: str) -> str:
    """Round an f32/f64 value to the narrower float type ``to`` (nearest even)."""
    r = em.new(ELEMENTS[to][0])
    em.ins(f"cvt.rn.{to}.{key} {r}, {reg}")
    return r


def apply(em: Emitter, op, row: dict, src: str, res: str, args: list[str], akeys) -> str:
    """Emit selection ``row`` for one element; returns the result register."""
    if "via" in row:
        via = row["via"]
        up = {"f16": 0, "bf16": 0, "f32": 1, "f64": 2}
        lift = lambda k: via if up.get(k, 9) < up[via] else k  # noqa: E731
        wide = [widen(em, a, k, via) for a, k in zip(args, akeys)]
        wkeys = [lift(k) for k in akeys]
        s2, r2 = lift(src), lift(res)
        if op.name == "nv_tileaa.fp_to_fp" and s2 == r2:  # f16 <-> bf16: widening was exact
            return narrow(em, wide[0], r2, res) if r2 != res else wide[0]
        sub = select(op, s2, r2, em.sm)
        if sub is None or sub is row:
            fail(op, f"PTX backend does not support '{op.name}' on {src} (via {via}) yet")
        r = apply(em, op, sub, s2, r2, wide, wkeys)
        return narrow(em, r, r2, res) if r2 != res and res in up else r
    if row.get("sm", 0) > em.sm:
        fail(op, f"PTX backend does not support '{op.name}' on {src} for sm_{em.sm} yet")
    if "ptx_isa" in row:
        em.need_isa(row["ptx_isa"])
    if "target_suffix" in row:  # e.g. cvt .e2m1x2: sm_100a / sm_120a only
        em.need_target_suffix(row["target_suffix"])
    if row.get("unsigned"):
        zext = []
        for a, k in zip(args, akeys):
            if k == "i8":
                z = em.new("b16")
                em.ins(f"and.b16 {z}, {a}, 255")
                a = z
            zext.append(a)
        args = zext
    if "sequence" in row:
        fn = mathlib.SEQUENCES.get(row["sequence"])
        if fn is None:
            fail(op, f"PTX backend: unknown math sequence {row['sequence']!r}")
        return fn(em, op, src if src in _FLOATS else res, args)
    d = em.new(ELEMENTS[res][0])
    render(em, op, row, src, res, d, args)
    if res == "i8" and not row.get("in_range"):
        em.ins(f"cvt.s16.s8 {d}, {d}")
    return d


def _regs(em: Emitter, op, v):
    """A scalar operand as a register (immediates are moved into one)."""
    r = em.scalar(op, v)
    if isinstance(r, str) and r.startswith("%"):
        return r
    cls = ELEMENTS[elem_key(v.type)][0]
    return _scalar_const(em, cls, str(r))


def _paired(em: Emitter, op, row: dict, src: str, res: str, ins: list) -> list:
    """Registers 0 .. 2 m - 1 of a tile op by its paired row (two at once, packed in b64:
    spec/ptx/selection.yaml ``pair``); the caller does an odd last one alone."""
    em.need_isa(row["ptx_isa"])
    packed: dict = {}

    def pack(lo: str, hi: str) -> str:
        if (lo, hi) not in packed:
            r = em.new("b64")
            em.ins(f"mov.b64 {r}, {{{lo}, {hi}}}")
            packed[(lo, hi)] = r
        return packed[(lo, hi)]

    cls = ELEMENTS[res][0]
    out = []
    for k in range(0, len(ins[0]) - 1, 2):
        d = em.new("b64")
        render(em, op, row, src, res, d, [pack(x[k], x[k + 1]) for x in ins])
        lo, hi = em.new(cls), em.new(cls)
        em.ins(f"mov.b64 {{{lo}, {hi}}}, {d}")
        out += [lo, hi]
    return out


def _is_elementwise(op) -> bool:
    return len(op.results) == 1 and not op.regions and bool(op.operands) and has_rows(op.name)


@handles_family(_is_elementwise)
def elementwise(em: Emitter, op) -> None:
    if done(em, op):  # emitted by a fused dot epilogue
        return
    res = op.results[0]
    src, rkey = keys(op)
    row = select(op, sm=em.sm)
    if row is None:
        extra = "".join(
            f" {a}={attr_keyword(op, a)}"
            for a in ("predicate", "rounding_mode")
            if a in op.attributes
        )
        if "fastmath" in op.attributes:
            extra += " fastmath=" + ",".join(sorted(fastmath_flags(op.attributes["fastmath"])))
        what = src if src == rkey else f"{src} -> {rkey}"
        fail(op, f"PTX backend does not support '{op.name}' on {what}{extra} yet")
    akeys = [elem_key(v.type) for v in op.operands]
    if is_tile(res.type):
        ins = [em.tile(op, v) for v in op.operands]
        n = len(ins[0])
        if res not in getattr(em, "fragment_order", {}) and all(len(x) == n for x in ins):
            if n > 1 and all(all(r == x[0] for r in x) for x in ins):
                # every operand the same register throughout (splats, broadcasts): once
                one = apply(em, op, row, src, rkey, [x[0] for x in ins], akeys)
                em.set(res, [one] * n)
                return
            out = affine.elementwise(em, op, ins, akeys, rkey)
            if out is not None:  # registers that differ by constants (codegen/affine.py)
                em.set(res, out)
                return
        if res in getattr(em, "fragment_order", {}):
            # the async loop's registers in their own order (a CTA pair's: half the tile's);
            # fragment_chain and init_chain admit only uniform tiles beside them, whose
            # layouts may hold another count of registers
            varied = [len(x) for x in ins if any(r != x[0] for r in x)]
            n = min(varied or [len(x) for x in ins])
            ins = [x if len(x) >= n else [x[0]] * n for x in ins]
        pair = select_pair(op, em.sm) if n > 1 else None
        out = _paired(em, op, pair, src, rkey, ins) if pair is not None else []
        same: dict = {}  # operand registers -> result: a register repeated (a broadcast row)
        for k in range(len(out), n):
            args = tuple(x[k] for x in ins)
            if args not in same:
                same[args] = apply(em, op, row, src, rkey, list(args), akeys)
            out.append(same[args])
        em.set(res, out)
    else:
        args = [_regs(em, op, v) for v in op.operands]
        em.set(res, apply(em, op, row, src, rkey, args, akeys))
