"""The struct/float() fast paths in float_format agree with the exact Fraction reference."""

from __future__ import annotations

import math
import random
import struct

import pytest

from tilegen.runtime.asm.float_format import (
    SEMANTICS,
    _decimal_encodes_to,
    format_float,
    format_float_slow,
    parse_decimal,
)

FAST = ("f16", "bf16", "f32", "f64")


def _double(bits: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


def _random_doubles(n: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        out.append(_double(rng.getrandbits(64)))
    return out


def _edge_doubles() -> list[float]:
    """Values around every boundary of the fast formats: max finite, overflow threshold, min
    normal/subnormal, midpoints, and their neighbouring doubles."""
    xs = [0.0, -0.0, math.inf, -math.inf, math.nan, -math.nan, 5e-324, 2.2250738585072014e-308]
    xs.append(1.7976931348623157e308)
    for sem in (SEMANTICS[n] for n in FAST):
        maxf = float(sem.max_finite)
        ulp_top = 2.0 ** (sem.emax - sem.man_bits)
        tiny = 2.0 ** (sem.emin - sem.man_bits)
        for base in (
            maxf,
            maxf + ulp_top / 2,
            maxf + ulp_top,
            2.0**sem.emin,
            tiny,
            tiny / 2,
            tiny * 1.5,
            tiny / 4,
            1.0 + 2.0**-sem.precision,
            1.0 + 3 * 2.0**-sem.precision,
            2.0**sem.emin - tiny / 2,
        ):
            if not math.isfinite(base):
                continue
            y = base
            for _ in range(3):
                xs.append(y)
                y = math.nextafter(y, math.inf)
            y = base
            for _ in range(3):
                y = math.nextafter(y, -math.inf)
                xs.append(y)
    return xs + [-x for x in xs]


def _near_format(name: str, n: int, seed: int) -> list[float]:
    """Doubles on, next to and halfway between values of ``name`` (where rounding is decided)."""
    sem = SEMANTICS[name]
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        b = rng.getrandbits(sem.bits)
        kind, neg, mag = sem.decode(b)
        if kind != "finite":
            continue
        v = float(mag)
        v2 = float(sem.decode(b + 1 if b + 1 < (1 << sem.bits) else b)[2])
        mid = (v + v2) / 2 if math.isfinite(v2) else v
        for x in (v, mid, math.nextafter(mid, 0), math.nextafter(mid, math.inf)):
            out.append(-x if neg else x)
    return out


def _16bit_patterns(sem, full: bool):
    """Every 16-bit pattern with ``--full-sweeps``; else a fixed sample that keeps every category:
    each exponent field (zero/subnormal, every normal binade, inf/NaN) with both signs and the
    mantissas at its edges (0, 1, 2, middle, max-1, max: zeros, smallest subnormal, infinities,
    signalling/quiet NaN boundaries) plus every 37th mantissa (a stride coprime with 2)."""
    if full:
        return range(1 << 16)
    man = (1 << sem.man_bits) - 1
    mants = sorted({0, 1, 2, man >> 1, (man >> 1) + 1, man - 1, man} | set(range(0, man + 1, 37)))
    exps = range(1 << (15 - sem.man_bits))
    return [sign << 15 | e << sem.man_bits | m for sign in (0, 1) for e in exps for m in mants]


@pytest.mark.parametrize("name", ["f16", "bf16"])
def test_all_16bit_patterns(name, full_sweeps):
    sem = SEMANTICS[name]
    for b in _16bit_patterns(sem, full_sweeps):
        assert format_float(None, name, b) == format_float_slow(None, name, b), hex(b)
        x = sem.to_float(b)
        assert sem.from_float(x) == sem.from_float_slow(x), hex(b)


@pytest.mark.parametrize("name", ["f32", "f64"])
def test_random_and_edge_bit_patterns_format(name, sweep):
    sem = SEMANTICS[name]
    rng = random.Random(name)
    pats = [rng.getrandbits(sem.bits) for _ in range(sweep(100_000))]
    # edges: zeros, subnormal/normal boundaries, max finite, inf, NaNs (quiet/signalling/payload)
    top = (1 << (sem.bits - 1)) - 1
    man = (1 << sem.man_bits) - 1
    for b in (
        0,
        1,
        2,
        man - 1,
        man,
        man + 1,
        man + 2,
        top - man - 1,
        top - man,
        top - man + 1,
        top,
    ):
        pats += [b, b | (1 << (sem.bits - 1))]
    for b in pats:
        assert format_float(None, name, b) == format_float_slow(None, name, b), hex(b)


def test_encode_random_and_edge_doubles(sweep):
    xs = _random_doubles(sweep(100_000), 1) + _edge_doubles()
    # random doubles in the ranges of the narrow formats (the interesting rounding happens there)
    rng = random.Random(2)
    for _ in range(sweep(50_000)):
        xs.append(rng.uniform(-1, 1) * 2.0 ** rng.randint(-160, 140))
    for name in ("f16", "bf16", "f32"):
        xs += _near_format(name, sweep(20_000), name)
    for name in FAST:
        sem = SEMANTICS[name]
        for x in xs:
            assert sem.from_float(x) == sem.from_float_slow(x), (name, x.hex())


def test_format_from_value_matches(sweep):
    xs = _random_doubles(sweep(20_000), 3) + _edge_doubles()
    for name in FAST:
        for x in xs:
            assert format_float(x, name) == format_float_slow(x, name), (name, x.hex())


def test_decimal_midpoints_fall_back(sweep):
    """Decimals that round (as doubles) onto a midpoint of the narrow format must not be decided
    by double rounding."""
    cases = []
    for name in ("f16", "bf16", "f32"):
        sem = SEMANTICS[name]
        for x in _near_format(name, sweep(5_000), "d" + name):
            for text in (repr(x), "%.6e" % x, "%.9e" % x, "%.17e" % x, "%.25e" % x):
                cases.append((name, text))
        # a decimal a hair above an exact midpoint, closer than a double ulp: the double is the
        # midpoint itself and would round to even, the decimal rounds up
        mid = 1.0 + 2.0**-sem.precision
        cases.append((name, "%.60f1" % mid))
        cases.append((name, "-%.60f1" % mid))
    for name, text in cases:
        sem = SEMANTICS[name]
        want = sem.encode(*parse_decimal(text))
        for b in (want, want ^ 1):
            assert _decimal_encodes_to(sem, text, b) == (want == b), (name, text)


def test_is_midpoint():
    from tilegen.runtime.asm.float_format import _is_midpoint

    f16, f32 = SEMANTICS["f16"], SEMANTICS["f32"]
    assert [_is_midpoint(f16, x) for x in (2049.0, 2050.0, 2051.0, 65520.0, 1025.5, 1025.0)] == [
        True,
        False,
        True,
        True,
        True,
        False,
    ]
    assert _is_midpoint(f32, float(2**24 + 1)) and not _is_midpoint(f32, float(2**24 + 2))
    assert _is_midpoint(f32, float(2**25 + 2)) and not _is_midpoint(f32, 1.0)
    assert _is_midpoint(f16, 2.0**-25) and _is_midpoint(f16, 3 * 2.0**-25)


def _same_float(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def test_to_float_matches(sweep, full_sweeps):
    for name in FAST:
        sem = SEMANTICS[name]
        rng = random.Random("to" + name)
        if sem.bits == 16:
            pats = _16bit_patterns(sem, full_sweeps)
        else:
            pats = [rng.getrandbits(sem.bits) for _ in range(sweep(50_000))]
        for b in pats:
            assert _same_float(sem.to_float(b), sem.to_float_slow(b)), (name, hex(b))
        # out-of-range bits are masked the same way
        for b in (1 << sem.bits, (1 << sem.bits) | 0x3C, -1):
            assert _same_float(sem.to_float(b), sem.to_float_slow(b)), (name, hex(b))
