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
    out = [(int(x) * int(y)) >> 64 for x, y in zip(a, b)]
    return np.array([v & ((1 << 64) - 1) for v in out], np.uint64).view(a.dtype)


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


def fused(a, b, c):
    """fma with a single rounding: computed in a wider type (f64 for f32, longdouble for f64);
    elements whose wide result lies too close to a rounding midpoint of the result type for
    the wide type's own rounding errors to be ruled out are redone in exact rationals."""
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
    return np.array([bin(int(v)).count("1") for v in a.view(f"u{a.dtype.itemsize}")], np.uint32)


def count_leading_zeros(a):
    w = _bits(a)
    return np.array([w - int(v).bit_length() for v in a.view(f"u{a.dtype.itemsize}")], np.uint32)


def bit_reverse(a):
    w = _bits(a)
    vals = [int(format(int(v), f"0{w}b")[::-1], 2) for v in a.view(f"u{a.dtype.itemsize}")]
    return np.array(vals, dtype=a.dtype.str.replace("i", "u")).view(a.dtype)


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
