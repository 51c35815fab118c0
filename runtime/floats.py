"""Exact emulation of the Tile IR float element types on NumPy.

Every float format is described by :class:`FloatFormat` (exponent and mantissa widths, bias, which
special values it has). :func:`round_to_format` rounds float64 values to a format with any Tile IR
rounding mode; :func:`encode` / :func:`decode` convert between values and storage bit patterns.

Inside the interpreter a float tile is a NumPy array of its *compute dtype*: ``float16``,
``float32`` and ``float64`` for the native types, ``float32`` for bf16, tf32, f8 and f4 (whose
values are always exactly representable in float32, so the array holds the narrow value exactly).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Optional

import numpy as np


@dataclass(frozen=True)
class FloatFormat:
    name: str
    ebits: int
    mbits: int
    bias: int
    has_inf: bool = True
    #: "ieee" (all-ones exponent with non-zero mantissa), "fn" (only all-ones pattern), "fnu" (0xFF)
    nan: str = "ieee"
    signed: bool = True
    has_zero: bool = True
    storage_bits: int = 0
    #: conversions saturate (NVIDIA's SATFINITE): out-of-range values and infinities become
    #: the largest finite value of their sign; NaN stays NaN
    satfinite: bool = False

    @property
    def emin(self) -> int:
        """Exponent of the smallest normal number."""
        return 1 - self.bias

    @property
    def max_finite(self) -> float:
        if self.nan == "ieee":
            emax = (1 << self.ebits) - 2 - self.bias
            return float((2 - 2.0**-self.mbits) * 2.0**emax)
        emax = (1 << self.ebits) - 1 - self.bias
        if self.nan == "fn":  # the all-ones mantissa of the top binade is NaN
            if self.mbits == 0:
                return float(2.0**emax)
            return float((2 - 2.0 ** (1 - self.mbits)) * 2.0**emax)
        if self.nan == "fnu":  # e8m0: top code is NaN
            return float(2.0 ** (emax - 1))
        return float((2 - 2.0**-self.mbits) * 2.0**emax)  # "none": no NaN (f4)

    @property
    def min_subnormal(self) -> float:
        return float(2.0 ** (self.emin - self.mbits))


FORMATS: dict[str, FloatFormat] = {
    "f16": FloatFormat("f16", 5, 10, 15, storage_bits=16),
    "bf16": FloatFormat("bf16", 8, 7, 127, storage_bits=16),
    "tf32": FloatFormat("tf32", 8, 10, 127, storage_bits=32),
    "f32": FloatFormat("f32", 8, 23, 127, storage_bits=32),
    "f64": FloatFormat("f64", 11, 52, 1023, storage_bits=64),
    "f8E4M3FN": FloatFormat(
        "f8E4M3FN", 4, 3, 7, has_inf=False, nan="fn", storage_bits=8, satfinite=True
    ),
    "f8E5M2": FloatFormat("f8E5M2", 5, 2, 15, storage_bits=8, satfinite=True),
    "f8E8M0FNU": FloatFormat(
        "f8E8M0FNU",
        8,
        0,
        127,
        has_inf=False,
        nan="fnu",
        signed=False,
        has_zero=False,
        storage_bits=8,
        satfinite=True,
    ),
    "f4E2M1FN": FloatFormat(
        "f4E2M1FN", 2, 1, 1, has_inf=False, nan="none", storage_bits=4, satfinite=True
    ),
}

#: NumPy dtype a tile of each float type is held in.
COMPUTE_DTYPES = {
    "f16": np.float16,
    "f32": np.float32,
    "f64": np.float64,
    "bf16": np.float32,
    "tf32": np.float32,
    "f8E4M3FN": np.float32,
    "f8E5M2": np.float32,
    "f8E8M0FNU": np.float32,
    "f4E2M1FN": np.float32,
}

DIRECTED = ("zero", "negative_inf", "positive_inf")


def round_int(v: np.ndarray, mode: str) -> np.ndarray:
    """Round float64 values to integers with a Tile IR rounding mode."""
    if mode in ("nearest_even", "approx", "full"):
        return np.rint(v)
    if mode in ("zero", "nearest_int_to_zero"):
        return np.trunc(v)
    if mode == "negative_inf":
        return np.floor(v)
    if mode == "positive_inf":
        return np.ceil(v)
    if mode == "nearest_away":
        return np.copysign(np.floor(np.abs(v) + 0.5), v)
    raise ValueError(f"unknown rounding mode {mode!r}")


def round_to_format(
    x, fmt: FloatFormat | str, mode: str = "nearest_even", saturate: Optional[bool] = None
) -> np.ndarray:
    """Round float64 values to the nearest representable value of ``fmt`` (as float64).

    Overflow gives inf where the format has one (and the mode rounds away from zero), else the
    largest finite value. ``satfinite`` formats (f8, f4) saturate overflow and infinities unless
    ``saturate`` is False (then: inf where the format has one, else NaN).
    """
    if isinstance(fmt, str):
        fmt = FORMATS[fmt]
    x = np.asarray(x, dtype=np.float64)
    if fmt.name == "f64":
        return x.copy()
    if fmt.name in ("f32", "f16") and mode in ("nearest_even", "approx", "full"):
        with np.errstate(over="ignore"):
            return x.astype(np.float32 if fmt.name == "f32" else np.float16).astype(np.float64)
    with np.errstate(all="ignore"):
        finite = np.isfinite(x)
        ax = np.where(finite, np.abs(x), 1.0)
        _, e2 = np.frexp(ax)  # ax = m * 2**e2, m in [0.5, 1)
        e = np.maximum(e2.astype(np.int64) - 1, fmt.emin)
        quantum = np.ldexp(1.0, (e - fmt.mbits).astype(np.int32))
        r = round_int(np.where(finite, x, 0.0) / quantum, mode) * quantum
        mx = fmt.max_finite
        sat = fmt.satfinite if saturate is None else saturate
        over = np.abs(r) > mx
        if over.any():
            if fmt.has_inf and not sat:
                # RNE/away overflow to inf; directed modes clamp toward zero side
                pos = x > 0
                to_inf = np.where(
                    pos,
                    np.isin(
                        mode, ("nearest_even", "nearest_away", "positive_inf", "approx", "full")
                    ),
                    np.isin(
                        mode, ("nearest_even", "nearest_away", "negative_inf", "approx", "full")
                    ),
                )
                big = np.where(to_inf, np.inf, mx)
            else:
                big = np.full(x.shape, mx if sat else np.nan)
            r = np.where(over, np.copysign(big, x), r)
        r = np.where(finite, r, x)
        inf = np.isinf(x)
        if inf.any() and (sat or not fmt.has_inf):
            r = np.where(inf, np.copysign(mx, x) if sat else np.nan, r)
        if fmt.nan == "none":
            r = np.where(np.isnan(r), 0.0, r)  # f4 has no NaN
        r = np.copysign(r, x) if fmt.signed else r
        if not fmt.signed:
            r = np.where(x < 0, np.nan, r)
        if not fmt.has_zero:
            r = np.where(r == 0, fmt.min_subnormal if fmt.mbits == 0 else 0.0, r)
            r = np.where(np.abs(r) < 2.0**fmt.emin, 2.0**fmt.emin, r)
        if fmt.storage_bits == 8:  # the one NaN an 8-bit float code decodes to
            r = np.where(np.isnan(r), F8_NAN_VALUE, r)
        return r


def to_compute(x, name: str, mode: str = "nearest_even") -> np.ndarray:
    """Round float64 values to type ``name`` and return them in its compute dtype."""
    return round_to_format(x, name, mode).astype(COMPUTE_DTYPES[name])


# --------------------------------------------------------------------------- storage bits


@lru_cache(maxsize=None)
def _table(name: str) -> np.ndarray:
    """float64 value of every bit pattern of a <= 8-bit format."""
    fmt = FORMATS[name]
    n = 1 << fmt.storage_bits
    codes = np.arange(n, dtype=np.int64)
    mbits, ebits = fmt.mbits, fmt.ebits
    sign_shift = ebits + mbits
    if fmt.signed:
        sign = np.where((codes >> sign_shift) & 1, -1.0, 1.0)
    else:
        sign = np.ones(n)
    exp = (codes >> mbits) & ((1 << ebits) - 1)
    man = codes & ((1 << mbits) - 1)
    frac = man / float(1 << mbits) if mbits else np.zeros(n)
    normal = np.ldexp(1.0 + frac, (exp - fmt.bias).astype(np.int32))
    sub = np.ldexp(frac, fmt.emin)
    val = (
        sign * np.where(exp == 0, sub, normal)
        if fmt.has_zero
        else np.ldexp(1.0, (exp - fmt.bias).astype(np.int32))
    )
    if fmt.nan == "ieee":
        top = exp == (1 << ebits) - 1
        val = np.where(top & (man == 0), sign * np.inf, val)
        val = np.where(top & (man != 0), np.nan, val)
    elif fmt.nan == "fn":
        val = np.where((exp == (1 << ebits) - 1) & (man == (1 << mbits) - 1), np.nan, val)
    elif fmt.nan == "fnu":
        val = np.where(codes == n - 1, np.nan, val)
    return np.where(np.isnan(val), F8_NAN_VALUE, val)


#: the NaN NVIDIA GPUs give in the 16-bit float formats: ``cvt.rn.f16.f32`` /
#: ``cvt.rn.bf16.f32`` (and 16-bit arithmetic) turn every NaN into 0x7FFF, sign dropped
#: (``CUDART_NAN_FP16`` / ``CUDART_NAN_BF16``, "canonical NaN"; cuda_fp16.hpp's and
#: cuda_bf16.hpp's host emulation of those conversions returns 0x7FFF for every NaN input).
#: As float64 values whose narrowing gives those bits (NumPy keeps the top payload bits): f16
#: 0x7FFF is 0x7FFFFC0000000000, bf16 0x7FFF (f32 0x7FFF0000) is 0x7FFFE00000000000.
CANONICAL_NAN_BITS = {"f16": 0x7FFF, "bf16": 0x7FFF}
_CANONICAL_NAN = {
    "f16": np.array(0x7FFFFC0000000000, dtype=np.uint64).view(np.float64),
    "bf16": np.array(0x7FFFE00000000000, dtype=np.uint64).view(np.float64),
}


def canonical_nan(a: np.ndarray, name: str) -> np.ndarray:
    """``a`` (values of float type ``name`` in any float dtype) with every NaN replaced by the NaN
    the GPU computes in that type (f16, bf16: 0x7FFF; other types unchanged). For the result of
    an operation -- a conversion, arithmetic -- not for values moved through memory, which keep
    their bits."""
    nan = _CANONICAL_NAN.get(name)
    a = np.asarray(a)
    if nan is None or a.dtype.kind != "f":
        return a
    isnan = np.isnan(a)
    return np.where(isnan, nan.astype(a.dtype), a) if isnan.any() else a


#: the NaN an 8-bit float NaN widens to on the GPU: ``cvt.rn.f16x2.e4m3x2`` / ``.e5m2x2`` give
#: the canonical f16 NaN 0x7FFF for every NaN code (sign dropped), which widens to f32
#: 0x7FFFE000 and f64 0x7FFFFC0000000000; decoding to it keeps the interpreter's conversions of
#: fp8 NaNs bit-identical to the PTX path's
F8_NAN_VALUE = np.array(0x7FFFFC0000000000, dtype=np.uint64).view(np.float64)


def nan_code(name: str) -> int:
    """The code a NaN encodes to in a <= 8-bit format: the positive all-ones pattern (0x7F for
    f8E4M3FN and f8E5M2, as ``cvt.rn.satfinite.e4m3x2/e5m2x2`` produce; 0xFF for the unsigned
    f8E8M0FNU)."""
    fmt = FORMATS[name]
    return (1 << fmt.storage_bits) - 1 if not fmt.signed else (1 << (fmt.storage_bits - 1)) - 1


def decode(bits, name: str) -> np.ndarray:
    """Bit patterns (unsigned ints) of type ``name`` -> values in its compute dtype."""
    bits = np.asarray(bits)
    if name == "f16":
        return bits.astype(np.uint16).view(np.float16)
    if name in ("f32", "tf32"):
        v = bits.astype(np.uint32).view(np.float32)
        return (
            v
            if name == "f32"
            else (bits.astype(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
        )
    if name == "f64":
        return bits.astype(np.uint64).view(np.float64)
    if name == "bf16":
        return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)
    return _table(name)[bits.astype(np.int64)].astype(np.float32)


def encode(values, name: str) -> np.ndarray:
    """Values exactly representable in ``name`` (any float dtype) -> unsigned bit patterns."""
    v = np.asarray(values)
    if name == "f16":
        return v.astype(np.float16).view(np.uint16)
    if name == "f32":
        return v.astype(np.float32).view(np.uint32)
    if name == "tf32":
        return to_compute(v.astype(np.float64), "tf32").view(np.uint32)
    if name == "f64":
        return v.astype(np.float64).view(np.uint64)
    if name == "bf16":
        r = to_compute(v.astype(np.float64), "bf16")
        if v.dtype == np.float32:  # a NaN held in float32 keeps its bits (the float64 round trip
            r = np.where(np.isnan(v), v, r)  # would quiet a signalling one)
        return (r.view(np.uint32) >> np.uint32(16)).astype(np.uint16)
    fmt = FORMATS[name]
    table = _table(name)
    v64 = round_to_format(v.astype(np.float64), fmt)
    out = np.zeros(v64.shape, dtype=np.uint8)
    codes = np.arange(len(table))
    ok = ~np.isnan(table)
    order = np.argsort(table[ok], kind="stable")
    sorted_vals = table[ok][order]
    sorted_codes = codes[ok][order]
    fin = ~np.isnan(v64)
    idx = np.clip(np.searchsorted(sorted_vals, v64[fin]), 0, len(sorted_vals) - 1)
    got = sorted_codes[idx]
    # +0 and -0 compare equal: pick the code whose sign matches
    if fmt.signed and fmt.has_zero:
        zero = v64[fin] == 0
        neg = np.signbit(v64[fin])
        sign_bit = 1 << (fmt.ebits + fmt.mbits)
        got = np.where(zero, np.where(neg, sign_bit, 0), got)
    out[fin] = got
    if (~ok).any():
        out[~fin] = nan_code(name)
    return out


# --------------------------------------------------------------------------- exact rational rounding


def round_fraction(q: Fraction, fmt: FloatFormat | str, mode: str) -> float:
    """Round an exact rational to ``fmt`` with ``mode``; returns a Python float."""
    if isinstance(fmt, str):
        fmt = FORMATS[fmt]
    if q == 0:
        return 0.0
    neg = q < 0
    a = -q if neg else q
    # exponent e with 2**e <= a < 2**(e+1)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    e = max(e, fmt.emin)
    scale = Fraction(2) ** (fmt.mbits - e)
    m = a * scale
    fl = m.numerator // m.denominator
    rem = m - fl
    if mode in ("nearest_even", "approx", "full"):
        up = rem > Fraction(1, 2) or (rem == Fraction(1, 2) and fl % 2 == 1)
    elif mode == "nearest_away":
        up = rem >= Fraction(1, 2)
    elif mode in ("zero", "nearest_int_to_zero"):
        up = False
    elif mode == "positive_inf":
        up = rem > 0 and not neg
    elif mode == "negative_inf":
        up = rem > 0 and neg
    else:
        raise ValueError(mode)
    mag = Fraction(fl + (1 if up else 0)) / scale
    if mag > Fraction(fmt.max_finite):
        towards_inf = mode in ("nearest_even", "nearest_away", "approx", "full") or (
            (mode == "positive_inf" and not neg) or (mode == "negative_inf" and neg)
        )
        val = (
            float("inf") if (towards_inf and fmt.has_inf and not fmt.satfinite) else fmt.max_finite
        )
    else:
        val = float(mag)
    return -val if neg else val
