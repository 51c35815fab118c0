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


def fused(a, b, c):
    """fma: exact for f32 (the f64 product of two f32 is exact); f64 via longdouble."""
    if a.dtype == np.float32:
        return (a.astype(np.float64) * b + c).astype(np.float32)
    if a.dtype == np.float64:
        return (a.astype(np.longdouble) * b + c).astype(a.dtype)
    return a * b + c


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


VOCABULARY = {
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
