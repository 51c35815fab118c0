"""Exact narrow float emulation: every bit pattern, rounding of every mode, against references
built independently (NumPy float16, bit tricks, exact rationals)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from tilegen.runtime import floats as F


def test_f16_all_patterns_round_trip_like_numpy():
    bits = np.arange(1 << 16, dtype=np.uint16)
    ref = bits.view(np.float16)
    got = F.decode(bits, "f16")
    assert np.array_equal(got.view(np.uint16), bits)
    finite = ~np.isnan(ref)
    assert np.array_equal(F.encode(got, "f16")[finite], bits[finite])


def test_f8e5m2_is_the_top_byte_of_f16():
    codes = np.arange(256, dtype=np.uint16)
    ref = (codes << 8).astype(np.uint16).view(np.float16).astype(np.float32)
    got = F.decode(codes.astype(np.uint8), "f8E5M2")
    assert np.array_equal(np.isnan(got), np.isnan(ref))
    assert np.array_equal(got[~np.isnan(ref)], ref[~np.isnan(ref)])
    # RNE from f16 values: round the low byte like an integer with ties to even
    h = np.arange(1 << 16, dtype=np.uint16)
    hv = h.view(np.float16)
    ok = np.isfinite(hv) & (np.abs(hv.astype(np.float32)) <= 57344)
    low, high = h & 0xFF, h >> 8
    up = (low > 0x80) | ((low == 0x80) & ((high & 1) == 1))
    ref_code = (high + up).astype(np.uint16)
    ref_val = (ref_code << 8).astype(np.uint16).view(np.float16).astype(np.float64)
    got_val = F.round_to_format(hv.astype(np.float64), "f8E5M2")
    assert np.array_equal(got_val[ok], ref_val[ok])


def test_f8e4m3fn_table():
    t = F.decode(np.arange(256, dtype=np.uint8), "f8E4M3FN")
    assert t[0x7E] == 448 and t[0x01] == 2.0**-9 and t[0x08] == 2.0**-6
    assert np.isnan(t[0x7F]) and np.isnan(t[0xFF]) and np.isnan(t).sum() == 2
    assert np.signbit(t[0x80]) and t[0x80] == 0
    fin = ~np.isnan(t)
    assert np.array_equal(F.encode(t[fin], "f8E4M3FN"), np.arange(256)[fin])
    # no inf: overflow saturates to the largest finite value
    assert F.round_to_format(np.array([1e6, -np.inf]), "f8E4M3FN").tolist() == [448.0, -448.0]


def test_f4e2m1_and_e8m0_tables():
    t = F.decode(np.arange(16, dtype=np.uint8), "f4E2M1FN")
    assert t[:8].tolist() == [0, 0.5, 1, 1.5, 2, 3, 4, 6]
    assert np.array_equal(t[8:], -t[:8])
    e = F.decode(np.array([0, 126, 127, 128, 254, 255], dtype=np.uint8), "f8E8M0FNU")
    assert e[:5].tolist() == [2.0**-127, 0.5, 1.0, 2.0, 2.0**127] and np.isnan(e[5])


def _rne_bits(x: np.ndarray, drop: int) -> np.ndarray:
    b = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    half = (1 << (drop - 1)) - 1
    r = ((b + half + ((b >> drop) & 1)) >> drop) << drop
    return r.astype(np.uint32).view(np.float32)


@pytest.mark.parametrize("name,drop", [("bf16", 16), ("tf32", 13)])
def test_bf16_tf32_round_nearest_even(name, drop):
    rng = np.random.default_rng(7)
    x = rng.standard_normal(20000).astype(np.float32) * np.float32(1e3)
    x = np.concatenate([x, np.array([1.00390625, 1.01171875, -0.0, 1e-40, 3e38], np.float32)])
    got = F.to_compute(x.astype(np.float64), name)
    ref = _rne_bits(x, drop)
    assert np.array_equal(got.view(np.uint32), ref.view(np.uint32))
    if name == "bf16":
        assert np.array_equal(F.decode(F.encode(got, "bf16"), "bf16"), got)


@pytest.mark.parametrize("name", ["f16", "bf16", "f8E4M3FN", "f8E5M2", "f32"])
@pytest.mark.parametrize(
    "mode", ["nearest_even", "zero", "negative_inf", "positive_inf", "nearest_away"]
)
def test_vector_rounding_matches_exact_rational_rounding(name, mode):
    rng = np.random.default_rng(11)
    x = np.concatenate(
        [
            rng.standard_normal(300) * 10.0 ** rng.integers(-8, 8, 300),
            [0.1, -0.1, 2.5, 3.5, -2.5, 1e-7, 65519.0, 65520.0],
        ]
    )
    got = F.round_to_format(x, name, mode)
    fmt = F.FORMATS[name]
    for v, g in zip(x.tolist(), got.tolist()):
        ref = F.round_fraction(Fraction(v), fmt, mode)
        if not fmt.has_inf and abs(ref) == float("inf"):
            ref = fmt.max_finite if ref > 0 else -fmt.max_finite
        assert g == ref, (name, mode, v, g, ref)


def test_round_fraction_overflow_and_directions():
    assert F.round_fraction(Fraction(10**6), "f16", "nearest_even") == float("inf")
    assert F.round_fraction(Fraction(10**6), "f16", "zero") == 65504.0
    assert F.round_fraction(Fraction(-(10**6)), "f16", "positive_inf") == -65504.0
    assert (
        F.round_fraction(Fraction(1, 3), "f32", "negative_inf")
        < 1 / 3
        < F.round_fraction(Fraction(1, 3), "f32", "positive_inf")
    )


def test_f8_conversions_saturate_like_satfinite():
    x = np.array([1e6, -1e6, np.inf, -np.inf, np.nan, 60000.0])
    e5 = F.round_to_format(x, "f8E5M2")
    assert e5[:4].tolist() == [57344.0, -57344.0, 57344.0, -57344.0] and np.isnan(e5[4])
    assert e5[5] == 57344.0
    assert np.isinf(F.decode(np.array([0x7C], np.uint8), "f8E5M2"))[0]  # inf is still decodable
    assert F.round_to_format(np.array([np.inf]), "f16").tolist() == [np.inf]  # f16 has no satfinite
