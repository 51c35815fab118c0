"""The expression vocabulary of `semantics:` in spec/ptx/instructions.yaml.

Transcendental `.approx` forms (ex2, lg2, sin, cos, rsqrt, tanh) are simulated with NumPy's
accurately rounded functions, not the hardware's approximations."""

from __future__ import annotations

import numpy as np


def _bits(a: np.ndarray) -> int:
    return a.dtype.itemsize * 8


def widen(a: np.ndarray) -> np.ndarray:
    return a.astype(
        {1: np.int16, 2: np.int32, 4: np.int64, 8: np.int64}[a.dtype.itemsize]
        if a.dtype.kind == "i"
        else {1: np.uint16, 2: np.uint32, 4: np.uint64, 8: np.uint64}[a.dtype.itemsize]
    )


def mulhi(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    w = _bits(a)
    if w < 64:
        return ((widen(a) * widen(b)) >> w).astype(a.dtype)
    # 64 x 64 -> high 64 bits from 32-bit halves (unsigned), then the signed correction
    ua, ub = np.asarray(a).view(np.uint64), np.asarray(b).view(np.uint64)
    m, s = np.uint64(0xFFFFFFFF), np.uint64(32)
    alo, ahi, blo, bhi = ua & m, ua >> s, ub & m, ub >> s
    p0, p1, p2, p3 = alo * blo, alo * bhi, ahi * blo, ahi * bhi
    carry = ((p0 >> s) + (p1 & m) + (p2 & m)) >> s
    hi = p3 + (p1 >> s) + (p2 >> s) + carry
    if a.dtype.kind == "i":
        hi = hi - np.where(a < 0, ub, np.uint64(0)) - np.where(b < 0, ua, np.uint64(0))
    return hi.view(a.dtype)


def idiv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    safe = np.where(b == 0, 1, b).astype(a.dtype)
    q = (a - np.fmod(a, safe)) // safe
    return np.where(b == 0, np.array(-1).astype(a.dtype), q).astype(a.dtype)


def irem(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    safe = np.where(b == 0, 1, b).astype(a.dtype)
    return np.where(b == 0, a, np.fmod(a, safe)).astype(a.dtype)


def _round_fraction(fr, dt):
    """The value of rational ``fr`` rounded to nearest-even in float type ``dt``."""
    import math
    from fractions import Fraction

    try:
        cand = dt(float(fr))
    except OverflowError:
        return dt(math.copysign(math.inf, fr))
    if not np.isfinite(cand) or Fraction(float(cand)) == fr:
        return cand
    other = np.nextafter(cand, dt(np.inf) if Fraction(float(cand)) < fr else dt(-np.inf))
    if not np.isfinite(other):
        return cand
    dc, do = abs(Fraction(float(cand)) - fr), abs(Fraction(float(other)) - fr)
    if dc != do:
        return cand if dc < do else other
    bits = np.dtype(f"u{np.dtype(dt).itemsize}")
    return cand if int(np.asarray(cand).view(bits)) % 2 == 0 else other


def _fused_f32(a, b, c):
    """f32 fma, exactly and vectorised: a*b is exact in f64, a TwoSum makes a*b + c = s + e
    exactly; s rounds to f32 like the exact value unless s is a midpoint of the f32 grid (f32
    midpoints are f64 numbers, so rounding to f64 cannot cross one), where e breaks the tie."""
    with np.errstate(all="ignore"):
        a, b, c = np.broadcast_arrays(
            np.asarray(a, np.float64), np.asarray(b, np.float64), np.asarray(c, np.float64)
        )
        p = a * b
        s = p + c
        bb = s - p
        e = (p - (s - bb)) + (c - bb)
        r = s.astype(np.float32)
        r64 = r.astype(np.float64)
        away = np.nextafter(r, np.where(s > r64, np.float32(np.inf), np.float32(-np.inf)))
        tie = np.isfinite(s) & (s != r64) & (s == (r64 + away.astype(np.float64)) / 2)
        if tie.any():  # the exact value lies beyond the midpoint on e's side
            up = np.sign(away.astype(np.float64) - r64) == np.sign(e)
            r = np.where(tie & (e != 0) & up, away, r)
    return r


def fused(a, b, c):
    """fma with a single rounding: f32 exactly (`_fused_f32`); f64 in longdouble, elements
    whose wide result lies too close to a rounding midpoint for the wide type's own rounding
    errors to be ruled out redone in exact rationals."""
    if a.dtype == np.float32:
        return _fused_f32(a, b, c)
    if a.dtype not in (np.float32, np.float64):
        return a * b + c
    dt = a.dtype.type
    wide = np.float64 if dt is np.float32 else np.longdouble
    with np.errstate(all="ignore"):
        a, b, c = np.broadcast_arrays(np.asarray(a), np.asarray(b, dt), np.asarray(c, dt))
        prod = a.astype(wide) * b
        v = prod + c
        r = v.astype(dt)
        ulp = np.spacing(np.abs(r)).astype(wide)
        dist = np.abs(v - r.astype(wide))
        bound = 4 * np.finfo(wide).eps * (np.abs(prod) + np.abs(v))
        hard = (ulp / 2 - dist <= bound) | (np.abs(ulp / 4 - dist) <= bound)
        hard &= np.isfinite(a) & np.isfinite(b) & np.isfinite(c) & np.isfinite(r)
    if hard.any():
        from fractions import Fraction

        r = np.array(r)
        for idx in zip(*np.nonzero(hard)):
            fr = Fraction(float(a[idx])) * Fraction(float(b[idx])) + Fraction(float(c[idx]))
            if fr != 0:
                r[idx] = _round_fraction(fr, dt)
    return r


def fmin(a, b, nan=None):
    return np.minimum(a, b) if nan else np.fmin(a, b)


def fmax(a, b, nan=None):
    return np.maximum(a, b) if nan else np.fmax(a, b)


def compare(cmp: str, a, b):
    unordered = np.isnan(a) | np.isnan(b) if a.dtype.kind == "f" else np.zeros(a.shape, bool)
    base = cmp[:-1] if cmp.endswith("u") and cmp not in ("num", "nan") else cmp
    if cmp == "num":
        return ~unordered
    if cmp == "nan":
        return unordered
    if base in ("lo", "ls", "hi", "hs"):
        u = a.view(np.dtype(f"u{a.dtype.itemsize}"))
        v = b.view(np.dtype(f"u{b.dtype.itemsize}"))
        return {"lo": u < v, "ls": u <= v, "hi": u > v, "hs": u >= v}[base]
    res = {"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b}[base]
    return (res | unordered) if base != cmp else (res & ~unordered)


def shift_left(a, b):
    w = _bits(a)
    amt = np.minimum(b, w - 1).astype(a.dtype)
    return np.where(b >= w, np.zeros_like(a), a << amt)


def shift_right(a, b):
    w = _bits(a)
    amt = np.minimum(b, w - 1).astype(a.dtype)
    out = a >> amt
    if a.dtype.kind == "u":
        out = np.where(b >= w, np.zeros_like(a), out)
    return out


def funnel(direction: str, mode: str, a, b, c):
    n = (c & 31) if mode == "wrap" else np.minimum(c, 32)
    both = (b.astype(np.uint64) << np.uint64(32)) | a.astype(np.uint64)
    n = n.astype(np.uint64)
    if direction == "l":
        return ((both << n) >> np.uint64(32)).astype(np.uint32)
    return (both >> n).astype(np.uint32)


def popcount(a):
    return np.bitwise_count(np.asarray(a).view(f"u{a.dtype.itemsize}")).astype(np.uint32)


def count_leading_zeros(a):
    w = _bits(a)
    u = np.asarray(a).view(f"u{a.dtype.itemsize}").astype(np.uint64)
    n = np.zeros(u.shape, np.uint32)  # bit length by binary search
    for k in (32, 16, 8, 4, 2, 1):
        big = u >= (np.uint64(1) << np.uint64(k))
        n += np.where(big, k, 0).astype(np.uint32)
        u = np.where(big, u >> np.uint64(k), u)
    n += (u > 0).astype(np.uint32)
    return (w - n).astype(np.uint32)


_BREV8 = np.array([int(f"{i:08b}"[::-1], 2) for i in range(256)], np.uint8)


def bit_reverse(a):
    u = np.ascontiguousarray(a).view(f"u{a.dtype.itemsize}")
    rev = _BREV8[u.view(np.uint8)].view(u.dtype).byteswap()
    return rev.view(a.dtype)


def to_f32(a):
    """Half-precision values as f32 (exact)."""
    return np.asarray(a, np.float32)


VOCABULARY = {
    "to_f32": to_f32,
    "widen": widen,
    "mulhi": mulhi,
    "idiv": idiv,
    "irem": irem,
    "fused": fused,
    "fmin": fmin,
    "fmax": fmax,
    "compare": compare,
    "shift_left": shift_left,
    "shift_right": shift_right,
    "funnel": funnel,
    "popcount": popcount,
    "count_leading_zeros": count_leading_zeros,
    "bit_reverse": bit_reverse,
    "absolute": np.abs,
    "minimum": np.minimum,
    "maximum": np.maximum,
    "copysign": np.copysign,
    "sqrt": np.sqrt,
    "exp2": np.exp2,
    "log2": np.log2,
    "sin": np.sin,
    "cos": np.cos,
    "tanh": np.tanh,
    "where": np.where,
}
