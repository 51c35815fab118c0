"""Register values: every register is a uint64 NumPy array across lanes holding raw bits;
instructions view them as PTX types."""

from __future__ import annotations

import numpy as np

WIDTH = {
    **{f"{k}{w}": w for k in "bus" for w in (8, 16, 32, 64)},
    **{"pred": 1, "f16": 16, "bf16": 16, "f32": 32, "f64": 64},
    **{"f16x2": 32, "bf16x2": 32, "f32x2": 64},
}
_INT = {
    8: (np.uint8, np.int8),
    16: (np.uint16, np.int16),
    32: (np.uint32, np.int32),
    64: (np.uint64, np.int64),
}
_PACKED = {"f16x2": np.float16, "f32x2": np.float32}
WIDE = {"s16": "s32", "u16": "u32", "s32": "s64", "u32": "u64", "s64": "s64", "u64": "u64"}


def np_dtype(t: str):
    if t == "f32":
        return np.float32
    if t == "f64":
        return np.float64
    if t == "f16":
        return np.float16
    if t == "pred":
        return np.bool_
    if t == "bf16":
        return np.float32
    return _INT[WIDTH[t]][1 if t[0] == "s" else 0]


def from_bits(bits: np.ndarray, t: str) -> np.ndarray:
    """Raw uint64 bits -> values of PTX type `t` (bf16 is widened to float32)."""
    w = WIDTH[t]
    if t in _PACKED:  # (lanes, 2) array: element 0 in the low half
        half = _PACKED[t]
        raw = bits if t == "f32x2" else (bits & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        return raw.view(half).reshape(-1, 2)
    if t == "pred":
        return bits != 0
    if t == "f64":
        return bits.view(np.float64)
    if t == "f32":
        return (bits & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.float32)
    if t == "f16":
        return (bits & np.uint64(0xFFFF)).astype(np.uint16).view(np.float16)
    if t == "bf16":
        return ((bits & np.uint64(0xFFFF)).astype(np.uint32) << np.uint32(16)).view(np.float32)
    u = bits.astype(_INT[w][0]) if w < 64 else bits
    return u.view(_INT[w][1]) if t[0] == "s" else u


#: the NaN the GPU writes to an f16 / bf16 register (cvt.rn.{f16,bf16}.f32, 16-bit arithmetic):
#: 0x7FFF for every NaN, sign dropped (runtime/floats.py CANONICAL_NAN_BITS)
NAN16 = np.uint64(0x7FFF)


def f32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """Round-to-nearest-even float32 -> bf16 bits (every NaN: 0x7FFF)."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    r = (u + np.uint64(0x7FFF) + ((u >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16)
    nan = np.isnan(np.asarray(x, np.float32))
    return np.where(nan, NAN16, r & np.uint64(0xFFFF))


def _f16_bits(h: np.ndarray) -> np.ndarray:
    """float16 values -> their bits as uint64, every NaN 0x7FFF."""
    bits = h.view(np.uint16).astype(np.uint64)
    nan = np.isnan(h)
    return np.where(nan, NAN16, bits) if nan.any() else bits


def to_bits(vals, t: str, n: int) -> np.ndarray:
    """Values -> zero-extended uint64 bits of PTX type `t`."""
    w = WIDTH[t]
    if t in _PACKED:
        with np.errstate(all="ignore"):
            pairs = np.broadcast_to(np.asarray(vals), (n, 2)).astype(_PACKED[t])
        if t == "f16x2":
            halves = _f16_bits(np.ascontiguousarray(pairs))
            return halves[:, 0] | (halves[:, 1] << np.uint64(16))
        raw = np.ascontiguousarray(pairs).view(np.uint64)
        return raw.reshape(n).astype(np.uint64)
    a = np.broadcast_to(np.asarray(vals), (n,))
    if t == "pred":
        return a.astype(bool).astype(np.uint64)
    if t == "bf16":
        return f32_to_bf16_bits(a.astype(np.float32))
    if t in ("f16", "f32", "f64"):
        with np.errstate(all="ignore"):
            f = a.astype(np_dtype(t))
        return _f16_bits(f) if t == "f16" else f.view(_INT[w][0]).astype(np.uint64)
    if a.dtype.kind == "f":
        a = a.astype(np.int64)
    if a.dtype == object:
        a = np.array([int(v) & ((1 << w) - 1) for v in a], dtype=np.uint64)
    return (
        a.astype(_INT[w][1] if a.dtype.kind == "i" else _INT[w][0])
        .view(_INT[w][0])
        .astype(np.uint64)
    )


def imm_values(value, t: str, n: int) -> np.ndarray:
    """An immediate as an array of type `t` (integers wrap to the type's width)."""
    if t in ("f16", "f32", "f64", "bf16"):
        return np.full(n, float(value), dtype=np_dtype(t))
    if t == "pred":
        return np.full(n, bool(value))
    w = WIDTH[t]
    bits = np.full(n, int(value) & ((1 << w) - 1), dtype=np.uint64)
    return from_bits(bits, t)


def to_bits_fast(vals, t: str, n: int) -> np.ndarray:
    """`to_bits` for the common case: an (n,) array already of the type's kind."""
    a = vals if isinstance(vals, np.ndarray) else np.asarray(vals)
    if a.shape != (n,) or t in _PACKED or t == "bf16":
        return to_bits(vals, t, n)
    if t == "f32":
        return a.astype(np.float32).view(np.uint32).astype(np.uint64)
    if t == "f64":
        return a.astype(np.float64).view(np.uint64)
    if t == "pred":
        return a.astype(bool).astype(np.uint64)
    if t == "f16":
        with np.errstate(all="ignore"):
            return _f16_bits(a.astype(np.float16))
    if a.dtype.kind not in "iub":
        return to_bits(vals, t, n)
    w = WIDTH[t]
    return a.astype(_INT[w][0]).astype(np.uint64) if w < 64 else a.astype(np.uint64)


def _from_fn(t: str):
    w = WIDTH[t]
    if t in _PACKED or t in ("bf16", "f16", "f32", "f64", "pred"):
        if t == "f32":
            return lambda b: b.astype(np.uint32).view(np.float32)
        if t == "f64":
            return lambda b: b.view(np.float64)
        if t == "pred":
            return lambda b: b != 0
        return lambda b: from_bits(b, t)
    if w == 64:
        return (lambda b: b.view(np.int64)) if t[0] == "s" else (lambda b: b)
    u = _INT[w][0]
    if t[0] == "s":
        s = _INT[w][1]
        return lambda b: b.astype(u).view(s)
    return lambda b: b.astype(u)


def _to_fn(t: str, n: int):
    w = WIDTH[t]
    if t in _PACKED or t == "bf16":
        return lambda v: to_bits(v, t, n)

    def conv(v, t=t, n=n):
        a = v if isinstance(v, np.ndarray) else np.asarray(v)
        if a.shape != (n,):
            return to_bits(v, t, n)
        return to_bits_fast(a, t, n)

    if t == "f32":

        def conv(v, t=t, n=n):  # noqa: F811
            if isinstance(v, np.ndarray) and v.shape == (n,) and v.dtype == np.float32:
                return v.view(np.uint32).astype(np.uint64)
            return to_bits(v, t, n)

    elif w < 64 and t[0] in "bsu":
        u = _INT[w][0]

        def conv(v, t=t, n=n, u=u):  # noqa: F811
            if isinstance(v, np.ndarray) and v.shape == (n,) and v.dtype.kind in "iu":
                return v.astype(u).astype(np.uint64)
            return to_bits(v, t, n)

    return conv


FROM_BITS: dict = {}
TO_BITS: dict = {}


def from_bits_fn(t: str):
    """A converter raw bits -> values of type `t` (cached per type)."""
    fn = FROM_BITS.get(t)
    if fn is None:
        fn = FROM_BITS[t] = _from_fn(t)
    return fn


def to_bits_fn(t: str, n: int):
    """A converter values of type `t` -> raw bits for `n` lanes (cached)."""
    fn = TO_BITS.get((t, n))
    if fn is None:
        fn = TO_BITS[(t, n)] = _to_fn(t, n)
    return fn
