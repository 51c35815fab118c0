"""Named helpers the ``semantics.expr`` strings of the op spec may call (besides ``np``).

Float helpers see float64 arrays; integer helpers see int64 (signed) or uint64 (unsigned) arrays
as the op's declared signedness chooses; results are rounded/wrapped to the result type by the
evaluator. Keep every helper generic: no helper is specific to one op's spelling.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from tilegen.runtime import floats
from tilegen.runtime.interp.values import (
    InterpError,
    from_literal,
    from_literal_bits,
    storage_bytes,
)
from tilegen.runtime.types import FloatType, TileType

# --------------------------------------------------------------------------- floats


def maxnum(a, b):
    """IEEE maxNum: a NaN operand is ignored; +0 is greater than -0."""
    r = np.where(np.isnan(a), b, np.where(np.isnan(b), a, np.maximum(a, b)))
    both0 = (a == 0) & (b == 0)
    return np.where(both0, np.where(np.signbit(a) & np.signbit(b), -0.0, 0.0), r)


def minnum(a, b):
    r = np.where(np.isnan(a), b, np.where(np.isnan(b), a, np.minimum(a, b)))
    both0 = (a == 0) & (b == 0)
    return np.where(both0, np.where(np.signbit(a) | np.signbit(b), -0.0, 0.0), r)


def maximum(a, b):
    """NaN-propagating maximum; +0 is greater than -0."""
    return np.where(np.isnan(a) | np.isnan(b), np.nan, maxnum(a, b))


def minimum(a, b):
    return np.where(np.isnan(a) | np.isnan(b), np.nan, minnum(a, b))


def fma(a, b, c):
    """Fused a * b + c: a finite product plus an infinite addend is that addend."""
    if np.asarray(a).dtype == object:
        return a * b + c
    r = a * b + c
    return np.where(np.isfinite(a) & np.isfinite(b) & np.isinf(c), c, r)


def rsqrt(x):
    with np.errstate(divide="ignore", invalid="ignore"):
        return 1.0 / np.sqrt(x)


_CMP = {
    "equal": np.equal,
    "not_equal": np.not_equal,
    "less_than": np.less,
    "less_than_or_equal": np.less_equal,
    "greater_than": np.greater,
    "greater_than_or_equal": np.greater_equal,
}


def cmpf(a, b, predicate: str, ordering: str):
    """Float comparison: ``ordered`` is false when either side is NaN, ``unordered`` true."""
    nan = np.isnan(a) | np.isnan(b)
    r = _CMP[predicate](a, b)
    return np.where(nan, ordering == "unordered", r)


def cmpi(a, b, predicate: str):
    return _CMP[predicate](a, b)


def powi(x, n, width: int = 64):
    """x ** n with an integer exponent by squaring, as tileiras computes ``fpowi``: in f64 for
    f64 (``width`` 64), else in f32 (f16/bf16 are rounded once afterwards): r = x^(bit 0 of
    |n|), then for each further bit of |n| x = x * x and, where the bit is set, r = r * x;
    finally 1 / r for n < 0. Every product is correctly rounded, so x ** 0 = 1 for every x
    (NaN too), +-0 ** -n = +-inf, +-inf ** -n = +-0, and a square that overflows gives inf
    (0 for n < 0) even when the exact power would be finite."""
    dt = np.float64 if width == 64 else np.float32
    x, n = np.broadcast_arrays(np.asarray(x).astype(dt), np.asarray(n).astype(np.int64))
    k = np.abs(n)
    with np.errstate(all="ignore"):
        r = np.where(k & 1, x, dt(1.0))
        p = x.copy()
        k = k >> 1
        while (k != 0).any():
            live = k != 0
            p = np.where(live, p * p, p)
            r = np.where(live & ((k & 1) == 1), r * p, r)
            k = k >> 1
        return np.where(n < 0, dt(1.0) / r, r)


# --------------------------------------------------------------------------- integers


def _magnitude(a) -> np.ndarray:
    """|a| of int64 values as uint64 (exact for INT64_MIN too)."""
    a = np.asarray(a).astype(np.int64)
    return np.where(a < 0, (-(a + 1)).astype(np.uint64) + np.uint64(1), a.astype(np.uint64))


def _negate_u64(q) -> np.ndarray:
    return (~np.asarray(q, dtype=np.uint64) + np.uint64(1)).astype(np.uint64)


def divide(a, b, rounding: str, signed: bool, width: int):
    """Integer division rounded ``zero``/``negative_inf``/``positive_inf``.

    Division by zero gives all ones (as PTX does); MIN / -1 wraps to MIN.
    """
    zero = np.asarray(b) == 0
    if signed:
        ua, ub = _magnitude(a), _magnitude(np.where(zero, 1, b))
        q = ua // ub
        exact = ua - q * ub == 0
        neg = (np.asarray(a) < 0) != (np.asarray(b) < 0)
        if rounding == "negative_inf":
            q = np.where(neg & ~exact, q + np.uint64(1), q)
        elif rounding == "positive_inf":
            q = np.where(~neg & ~exact, q + np.uint64(1), q)
        q = np.where(neg, _negate_u64(q), q)
    else:
        ua, ub = np.asarray(a, dtype=np.uint64), np.asarray(np.where(zero, 1, b), dtype=np.uint64)
        q = ua // ub
        if rounding == "positive_inf":
            q = np.where(ua % ub != 0, q + np.uint64(1), q)
    return np.where(zero, ~np.zeros_like(q, dtype=np.uint64), q.astype(np.uint64))


def remainder(a, b, signed: bool):
    """Remainder of truncating division (sign of the dividend); x % 0 gives x."""
    zero = np.asarray(b) == 0
    if signed:
        ua, ub = _magnitude(a), _magnitude(np.where(zero, 1, b))
        r = ua % ub
        r = np.where(np.asarray(a) < 0, _negate_u64(r), r)
        return np.where(zero, np.asarray(a).astype(np.int64).astype(np.uint64), r)
    ua, ub = np.asarray(a, dtype=np.uint64), np.asarray(np.where(zero, 1, b), dtype=np.uint64)
    return np.where(zero, ua, ua % ub)


def sqrt(x):
    """Square root; on rationals (exact evaluation) a value strictly inside the rounding interval."""
    x = np.asarray(x)
    if x.dtype != object:
        return np.sqrt(x)

    def one(q):
        if q < 0:
            raise ValueError("sqrt of a negative number")
        k = 200 + q.denominator.bit_length()
        num = q.numerator << (2 * k)
        root = _isqrt(num // q.denominator)
        r = Fraction(root, 1 << k)
        if r * r == q:
            return r
        return r + Fraction(1, 1 << (k + 1))  # strictly between the truncated root and the next

    return np.array([one(v) for v in x.reshape(-1)], dtype=object).reshape(x.shape)


def _isqrt(n: int) -> int:
    import math

    return math.isqrt(n)


def _amount(b, width: int):
    """Shift amounts as unsigned values of ``width`` bits."""
    return np.asarray(b).astype(np.int64).astype(np.uint64) & np.uint64(
        (1 << width) - 1 if width < 64 else ~0 & (2**64 - 1)
    )


def shl(a, b, width: int):
    """Shift left; amounts >= width give 0 (on Python ints: the exact, unwrapped product)."""
    if np.asarray(a).dtype == object:
        f = np.frompyfunc(
            lambda x, y: x << (y % (1 << width)) if y % (1 << width) < width else 0, 2, 1
        )
        return f(a, b)
    amt = _amount(b, width)
    big = amt >= np.uint64(width)
    s = np.where(big, 0, amt).astype(np.uint64)
    r = np.asarray(a).astype(np.int64).astype(np.uint64) << s
    return np.where(big, np.uint64(0), r)


def shr(a, b, width: int, signed: bool):
    """Logical (unsigned) or arithmetic (signed) right shift; amounts >= width saturate."""
    amt = _amount(b, width)
    big = amt >= np.uint64(width)
    s = np.where(big, width - 1 if signed else 0, amt).astype(np.int64)
    if signed:
        r = np.asarray(a).astype(np.int64) >> s
        return np.where(big, np.where(a < 0, -1, 0), r)
    r = np.asarray(a).astype(np.uint64) >> s.astype(np.uint64)
    return np.where(big, np.uint64(0), r)


def mulhi(a, b, width: int, signed: bool):
    """High ``width`` bits of the 2*width-bit product."""
    if width <= 32:
        if signed:
            return (a.astype(np.int64) * b.astype(np.int64)) >> width
        return (a.astype(np.uint64) * b.astype(np.uint64)) >> np.uint64(width)
    f = np.frompyfunc(lambda x, y: (int(x) * int(y)) >> width, 2, 1)
    return f(a, b)


def round_integral(x, rounding: str):
    """Round floats to integral values (the result type's range is applied by the evaluator)."""
    mode = "zero" if rounding in ("nearest_int_to_zero", "zero") else rounding
    return floats.round_int(x, mode)


def absi(a):
    return np.abs(a)


# --------------------------------------------------------------------------- pointers & tiles


def pointee_bytes(t) -> int:
    el = t.element if isinstance(t, TileType) else t
    return storage_bytes(el.pointee)


def ptr_offset(ptr, offset, nbytes: int):
    return (np.asarray(ptr).astype(np.int64) + np.asarray(offset).astype(np.int64) * nbytes).astype(
        np.uint64
    )


def constant_tile(attr, t):
    """The tile a dense-elements attribute denotes."""
    shape = tuple(t.shape) if isinstance(t, TileType) else ()
    bits = getattr(attr, "bits", None)
    if bits is not None and all(b is not None for b in bits) and isinstance(t.element, FloatType):
        return from_literal_bits(bits, t, shape)
    return from_literal(attr.values, t, shape)


def extract_tile(src, indices, shape):
    """The ``indices``-th (in units of ``shape``) subtile of ``src``."""
    sl = []
    for i, n in zip(indices, shape):
        k = int(np.asarray(i).astype(np.int64))
        sl.append(slice(k * n, k * n + n))
    if any(s.start < 0 or s.stop > d for s, d in zip(sl, src.shape)):
        raise InterpError(f"extract slice {[int(np.asarray(i)) for i in indices]} is out of bounds")
    return src[tuple(sl)].copy()


def insert_tile(src, dst, indices):
    """``dst`` with its ``indices``-th subtile (in units of ``src``'s shape) replaced by ``src``."""
    out = dst.copy()
    sl = []
    for i, n in zip(indices, src.shape):
        k = int(np.asarray(i).astype(np.int64))
        sl.append(slice(k * n, k * n + n))
    if any(s.start < 0 or s.stop > d for s, d in zip(sl, dst.shape)):
        raise InterpError("insert slice is out of bounds")
    out[tuple(sl)] = src
    return out


def repack(src, src_type, result_type):
    """Reinterpret a tile's little-endian bytes as elements of ``result_type`` (pack/unpack)."""
    from tilegen.runtime.interp.values import bit_width, from_bits, to_bits

    sw, rw = bit_width(src_type), bit_width(result_type)
    bits = to_bits(np.asarray(src).reshape(-1), src_type.element)
    total = sum(int(b) << (i * sw) for i, b in enumerate(bits))
    n = result_type.num_elements
    out = np.array([(total >> (i * rw)) & ((1 << rw) - 1) for i in range(n)], dtype=np.uint64)
    return from_bits(out, result_type.element).reshape(shape_of(result_type))


def shape_of(t) -> tuple:
    return tuple(t.shape) if isinstance(t, TileType) else ()


NAMESPACE = {
    "np": np,
    "maxnum": maxnum,
    "minnum": minnum,
    "maximum": maximum,
    "minimum": minimum,
    "rsqrt": rsqrt,
    "fma": fma,
    "sqrt": sqrt,
    "cmpf": cmpf,
    "cmpi": cmpi,
    "powi": powi,
    "divide": divide,
    "remainder": remainder,
    "shl": shl,
    "shr": shr,
    "mulhi": mulhi,
    "round_integral": round_integral,
    "absi": absi,
    "pointee_bytes": pointee_bytes,
    "ptr_offset": ptr_offset,
    "constant_tile": constant_tile,
    "extract_tile": extract_tile,
    "insert_tile": insert_tile,
    "shape_of": shape_of,
    "repack": repack,
}
