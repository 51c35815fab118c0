"""Bit-exact float semantics and MLIR's float printing.

Every cuda_tile float element type (f16, bf16, f32, tf32, f64, the f8 and f4 types) is described by
one :class:`FloatSemantics`; values convert between bit patterns and exact fractions with IEEE
round-to-nearest-even. :func:`format_float` prints a value the way MLIR's ``printFloatValue`` does:
``1.000000e+00`` when six significant digits round-trip, else APFloat's default (shortest-ish)
form such as ``2.7182818284590451`` or ``9.99999974E-6``, else the bit pattern ``0x7FC00000``.
"""

from __future__ import annotations

import math
import struct
from fractions import Fraction
from typing import Optional

from tilegen.runtime.records import dataclass
from tilegen.runtime.types import FloatType, Type

FINITE, INF, NAN = "finite", "inf", "nan"


@dataclass(frozen=True)
class FloatSemantics:
    """An APFloat-style binary format.

    ``nonfinite`` is ``ieee`` (inf + NaN), ``nan_only`` (no inf; the all-ones pattern below the sign
    is NaN) or ``finite_only`` (no inf, no NaN; overflow saturates).
    """

    name: str
    bits: int
    exp_bits: int
    man_bits: int
    bias: int
    nonfinite: str = "ieee"
    signed: bool = True
    subnormals: bool = True

    @property
    def precision(self) -> int:
        return self.man_bits + 1

    @property
    def emin(self) -> int:
        return 1 - self.bias if self.subnormals else -self.bias

    @property
    def emax(self) -> int:
        top = (1 << self.exp_bits) - 1
        if self.nonfinite == "ieee" or (self.nonfinite == "nan_only" and self.man_bits == 0):
            top -= 1
        return top - self.bias

    @property
    def max_finite(self) -> Fraction:
        mant = (1 << self.precision) - 1
        if self.nonfinite == "nan_only" and self.man_bits > 0:
            mant -= 1  # the all-ones mantissa at the top exponent is NaN
        return Fraction(mant) * Fraction(2) ** (self.emax - self.man_bits)

    @property
    def sign_bit(self) -> int:
        return 1 << (self.bits - 1) if self.signed else 0

    # ----------------------------------------------------------------- bits -> value
    def decode(self, bits: int) -> tuple[str, bool, Fraction]:
        """``(kind, negative, magnitude)`` of a bit pattern (magnitude 0 for inf/NaN)."""
        bits &= (1 << self.bits) - 1
        neg = bool(bits & self.sign_bit) if self.signed else False
        body = bits & ~self.sign_bit if self.signed else bits
        exp_field = body >> self.man_bits
        mant = body & ((1 << self.man_bits) - 1)
        top = (1 << self.exp_bits) - 1
        if self.nonfinite == "ieee" and exp_field == top:
            return (NAN if mant else INF), neg, Fraction(0)
        if self.nonfinite == "nan_only" and exp_field == top and mant == (1 << self.man_bits) - 1:
            return NAN, neg, Fraction(0)
        if exp_field == 0 and self.subnormals:
            return FINITE, neg, Fraction(mant) * Fraction(2) ** (self.emin - self.man_bits)
        e = exp_field - self.bias
        return (
            FINITE,
            neg,
            Fraction(mant + (1 << self.man_bits)) * Fraction(2) ** (e - self.man_bits),
        )

    def to_float(self, bits: int) -> float:
        fast = _FAST_DECODE.get(self)
        if fast is not None:
            x = fast(bits & ((1 << self.bits) - 1))
            return math.nan if x != x else x
        return self.to_float_slow(bits)

    def to_float_slow(self, bits: int) -> float:
        """The exact (Fraction-based) reference for :meth:`to_float`."""
        kind, neg, mag = self.decode(bits)
        if kind == NAN:
            return math.nan
        if kind == INF:
            return -math.inf if neg else math.inf
        v = float(mag)
        return -v if neg else v

    # ----------------------------------------------------------------- value -> bits
    def nan_bits(self, negative: bool = False) -> int:
        """The canonical quiet NaN."""
        sign = self.sign_bit if negative else 0
        if self.nonfinite == "nan_only":
            return sign | ((1 << (self.bits - (1 if self.signed else 0))) - 1)
        if self.nonfinite == "finite_only":
            return self.encode(negative, self.max_finite)
        return sign | (((1 << self.exp_bits) - 1) << self.man_bits) | (1 << (self.man_bits - 1))

    def inf_bits(self, negative: bool) -> int:
        if self.nonfinite == "ieee":
            return (self.sign_bit if negative else 0) | (
                ((1 << self.exp_bits) - 1) << self.man_bits
            )
        if self.nonfinite == "nan_only":
            return self.nan_bits(negative)
        return self.encode(negative, self.max_finite)

    def encode(self, negative: bool, mag: Fraction) -> int:
        """Round ``(-1)**negative * mag`` to this format (nearest-even, MLIR overflow rules)."""
        if negative and not self.signed:
            return self.nan_bits()
        sign = self.sign_bit if negative else 0
        if mag == 0:
            return sign
        e = _floor_log2(mag)
        e_eff = max(e, self.emin)
        quantum = Fraction(2) ** (e_eff - self.man_bits)
        n = _round_half_even(mag / quantum)
        value = n * quantum
        if value > self.max_finite:
            return self.inf_bits(negative)
        if n == 0:
            return sign
        if value < Fraction(2) ** self.emin:  # subnormal
            return sign | n
        e2 = _floor_log2(value)
        mant = int(value / Fraction(2) ** (e2 - self.man_bits)) - (1 << self.man_bits)
        return sign | ((e2 + self.bias) << self.man_bits) | mant

    def from_float(self, x: float) -> int:
        """Convert a Python float (a double) as APFloat::convert does."""
        fast = _FAST_ENCODE.get(self)
        if fast is not None and math.isfinite(x):
            bits = fast(x)
            if bits is not None:
                return bits
        return self.from_float_slow(x)

    def from_float_slow(self, x: float) -> int:
        """The exact (Fraction-based) reference for :meth:`from_float`."""
        if math.isnan(x):
            return self.nan_bits(math.copysign(1.0, x) < 0)
        if math.isinf(x):
            return self.inf_bits(x < 0)
        return self.encode(math.copysign(1.0, x) < 0, abs(Fraction(x)))


def _floor_log2(x: Fraction) -> int:
    e = x.numerator.bit_length() - x.denominator.bit_length()
    if Fraction(2) ** e > x:
        e -= 1
    elif Fraction(2) ** (e + 1) <= x:
        e += 1
    return e


def _round_half_even(x: Fraction) -> int:
    q, r = divmod(x.numerator, x.denominator)
    twice = 2 * r
    if twice > x.denominator or (twice == x.denominator and q & 1):
        q += 1
    return q


SEMANTICS: dict[str, FloatSemantics] = {
    s.name: s
    for s in (
        FloatSemantics("f16", 16, 5, 10, 15),
        FloatSemantics("bf16", 16, 8, 7, 127),
        FloatSemantics("f32", 32, 8, 23, 127),
        FloatSemantics("tf32", 19, 8, 10, 127),
        FloatSemantics("f64", 64, 11, 52, 1023),
        FloatSemantics("f8E4M3FN", 8, 4, 3, 7, "nan_only"),
        FloatSemantics("f8E5M2", 8, 5, 2, 15),
        FloatSemantics("f8E8M0FNU", 8, 8, 0, 127, "nan_only", signed=False, subnormals=False),
        FloatSemantics("f4E2M1FN", 4, 2, 1, 1, "finite_only"),
        FloatSemantics("fnv8E5M3FNU", 8, 5, 3, 15, "nan_only", signed=False),
    )
}


def _encode_f16(x: float) -> Optional[int]:
    try:
        return _U16.unpack(_PACK_E.pack(x))[0]
    except OverflowError:  # rounds past the largest finite value: the slow path knows the rules
        return None


def _encode_f32(x: float) -> Optional[int]:
    try:
        return _U32.unpack(_PACK_F.pack(x))[0]
    except OverflowError:
        return None


def _encode_f64(x: float) -> Optional[int]:
    return _U64.unpack(_PACK_D.pack(x))[0]


def _encode_bf16(x: float) -> Optional[int]:
    """bf16 via the f32 bits, only when ``x`` is exactly an f32 (so there is a single rounding)."""
    try:
        packed = _PACK_F.pack(x)
    except OverflowError:
        return None
    if _PACK_F.unpack(packed)[0] != x:
        return None
    b = _U32.unpack(packed)[0]
    return (b + 0x7FFF + ((b >> 16) & 1)) >> 16  # round to nearest even on the top 16 bits


_PACK_E, _PACK_F, _PACK_D = struct.Struct("<e"), struct.Struct("<f"), struct.Struct("<d")
_U16, _U32, _U64 = struct.Struct("<H"), struct.Struct("<I"), struct.Struct("<Q")

# Fast double -> bits conversions; each returns None where it cannot be sure (the caller then takes
# the exact Fraction path).  NaN and inf never reach them.
_FAST_ENCODE = {
    SEMANTICS["f16"]: _encode_f16,
    SEMANTICS["bf16"]: _encode_bf16,
    SEMANTICS["f32"]: _encode_f32,
    SEMANTICS["f64"]: _encode_f64,
}

_FAST_DECODE = {
    SEMANTICS["f16"]: lambda b: _PACK_E.unpack(_U16.pack(b))[0],
    SEMANTICS["bf16"]: lambda b: _PACK_F.unpack(_U32.pack(b << 16))[0],
    SEMANTICS["f32"]: lambda b: _PACK_F.unpack(_U32.pack(b))[0],
    SEMANTICS["f64"]: lambda b: _PACK_D.unpack(_U64.pack(b))[0],
}


def _is_midpoint(sem: FloatSemantics, x: float) -> bool:
    """Whether finite nonzero ``x`` lies exactly halfway between two neighbours in ``sem``."""
    num, den = abs(x).as_integer_ratio()
    k = den.bit_length() - 1  # den == 2**k
    e = num.bit_length() - 1 - k  # floor(log2|x|), exact because den is a power of two
    t = k + max(e, sem.emin) - sem.man_bits - 1  # |x| * 2**(1 - quantum_exp) == num / 2**t
    # A midpoint iff num / 2**t is an odd integer (t < 0 gives an even integer: never).
    return (num & -num).bit_length() - 1 == t


def _decimal_encodes_to(sem: FloatSemantics, text: str, bits: int) -> bool:
    """``sem.encode(*parse_decimal(text)) == bits``, fast where provably the same."""
    fast = _FAST_ENCODE.get(sem)
    if fast is not None:
        # float() rounds the decimal correctly to a double.  Every value of sem and every midpoint
        # between neighbours of sem is a double, so rounding to a double cannot move the value
        # across a midpoint; the double then rounds to sem as the decimal would, unless the double
        # *is* a midpoint (the decimal may sit just off it) or it overflowed.
        x = float(text)
        if (
            math.isfinite(x)
            and x != 0
            and not (sem is not SEMANTICS["f64"] and _is_midpoint(sem, x))
        ):
            got = fast(x)
            if got is not None:
                return got == bits
    return sem.encode(*parse_decimal(text)) == bits


def semantics_of(t: Type | str) -> FloatSemantics:
    name = t if isinstance(t, str) else t.name
    return SEMANTICS[name]


# --------------------------------------------------------------------------- printing


def parse_decimal(text: str) -> tuple[bool, Fraction]:
    """``'-1.5e+00'`` -> ``(True, Fraction(3, 2))`` (sign kept separately so -0 survives)."""
    neg = text.startswith("-")
    return neg, Fraction(text.lstrip("+-"))


def apfloat_to_string(
    negative: bool,
    mag: Fraction,
    precision_bits: int,
    format_precision: int = 0,
    max_padding: int = 3,
    truncate_zero: bool = True,
) -> str:
    """A port of ``IEEEFloat::toString`` for a finite value (digits rounding quirks included)."""
    out = "-" if negative else ""
    if mag == 0:
        if max_padding:
            return out + "0"
        if truncate_zero:
            return out + "0.0E+0"
        return out + "0.0" + "0" * max(format_precision - 1, 0) + "e+00"
    if mag.denominator == 1:
        sig, exp = mag.numerator, 0
        tz = (sig & -sig).bit_length() - 1
        sig >>= tz
        exp += tz
    else:
        sig, exp = mag.numerator, -(mag.denominator.bit_length() - 1)
    if not format_precision:
        format_precision = 2 + precision_bits * 59 // 196
    if exp > 0:
        sig <<= exp
        exp = 0
    elif exp < 0:
        sig *= 5 ** (-exp)
    # AdjustToPrecision on the integer: drop whole powers of ten, truncating.
    bits_required = (format_precision * 196 + 58) // 59
    active = sig.bit_length()
    if active > bits_required:
        tens = (active - bits_required) * 59 // 196
        if tens:
            exp += tens
            sig //= 10**tens
    digits = str(sig)
    stripped = digits.rstrip("0")
    exp += len(digits) - len(stripped)
    digits = stripped
    # AdjustToPrecision on the digit buffer: round half up.
    n = len(digits)
    if n > format_precision:
        if digits[format_precision] < "5":
            kept = digits[:format_precision].rstrip("0")
            exp += n - len(kept)
            digits = kept
        else:
            bumped = str(int(digits[:format_precision]) + 1)
            if len(bumped) > format_precision:
                digits = "1"
                exp += n
            else:
                kept = bumped.rstrip("0")
                exp += n - format_precision + (len(bumped) - len(kept))
                digits = kept
    nd = len(digits)
    if not max_padding:
        scientific = True
    elif exp >= 0:
        scientific = exp > max_padding or nd + exp > format_precision
    else:
        msd = exp + nd - 1
        scientific = False if msd >= 0 else -msd > max_padding
    if scientific:
        exp += nd - 1
        out += digits[0] + "."
        if nd == 1 and truncate_zero:
            out += "0"
        else:
            out += digits[1:]
        if not truncate_zero and format_precision > nd - 1:
            out += "0" * (format_precision - nd + 1)
        out += "E" if truncate_zero else "e"
        out += "+" if exp >= 0 else "-"
        e = str(abs(exp))
        if not truncate_zero and len(e) < 2:
            e = "0" + e
        return out + e
    if exp >= 0:
        return out + digits + "0" * exp
    whole = exp + nd
    if whole > 0:
        return out + digits[:whole] + "." + digits[whole:]
    return out + "0." + "0" * (-whole) + digits


def format_float(value: Optional[float], type: Type | str, bits: Optional[int] = None) -> str:
    """Print a float element as MLIR does; ``bits`` (if given) wins over ``value``."""
    sem = semantics_of(type)
    if bits is None:
        bits = sem.from_float(float(value))
    kind, neg, mag = sem.decode(bits)
    if kind == FINITE:
        text = apfloat_to_string(neg, mag, sem.precision, 6, 0, False)
        if _decimal_encodes_to(sem, text, bits):
            return text
        text = apfloat_to_string(neg, mag, sem.precision)
        if "." in text:
            return text
    return "0x%X" % bits


def format_float_slow(value: Optional[float], type: Type | str, bits: Optional[int] = None) -> str:
    """The exact (Fraction-only) reference for :func:`format_float`."""
    sem = semantics_of(type)
    if bits is None:
        bits = sem.from_float_slow(float(value))
    kind, neg, mag = sem.decode(bits)
    if kind == FINITE:
        text = apfloat_to_string(neg, mag, sem.precision, 6, 0, False)
        if sem.encode(*parse_decimal(text)) == bits:
            return text
        text = apfloat_to_string(neg, mag, sem.precision)
        if "." in text:
            return text
    return "0x%X" % bits


def is_float_type(t: Type) -> bool:
    return isinstance(t, FloatType) and t.name in SEMANTICS
