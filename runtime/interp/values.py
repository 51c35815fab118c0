"""How the interpreter holds IR values: element type <-> NumPy dtype, storage bits, literals.

* ``iN`` tiles are NumPy arrays of the signed dtype of that width (``i1`` is ``bool``);
* float tiles use :data:`tilegen.runtime.floats.COMPUTE_DTYPES`;
* ``ptr<T>`` tiles are ``uint64`` byte addresses into the interpreter heap;
* a rank-0 tile is a 0-d array; tokens are :data:`TOKEN`; views are objects from ``memory``.
"""

from __future__ import annotations

import numpy as np

from tilegen.runtime import floats
from tilegen.runtime.types import (
    FloatType,
    IndexType,
    IntegerType,
    NvPointerType,
    PointerType,
    TileType,
    Type,
)

#: The value of every ``token``.
TOKEN = "token"

#: i4 (a tile-only element type) is held sign-extended in int8.
_INT_DTYPES = {1: np.bool_, 4: np.int8, 8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}
_UINT_DTYPES = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


class InterpError(Exception):
    """A run-time error of the interpreted program (reported with the op's location)."""

    def __init__(self, message: str, op=None):
        super().__init__(message)
        self.op = op


def element_of(t: Type) -> Type:
    """A tile's element type; nv_tileaa ``!nv_tileaa.ptr<T>`` and ``index`` map to ``ptr<T>``
    and ``i64`` (held alike)."""
    t = t.element if isinstance(t, TileType) else t
    if isinstance(t, NvPointerType):
        return PointerType(t.pointee)
    if isinstance(t, IndexType):
        return IntegerType(64)
    return t


def compute_dtype(t: Type):
    """NumPy dtype a tile with element type ``t`` is held in."""
    t = element_of(t)
    if isinstance(t, IntegerType):
        if t.width not in _INT_DTYPES:
            raise InterpError(f"unsupported integer width i{t.width}")
        return _INT_DTYPES[t.width]
    if isinstance(t, FloatType):
        return floats.COMPUTE_DTYPES[t.name]
    if isinstance(t, PointerType):
        return np.uint64
    raise InterpError(f"no NumPy representation for element type {t}")


def storage_bytes(t: Type) -> int:
    """Bytes one element of ``t`` occupies in memory (i1 takes a byte)."""
    t = element_of(t)
    if isinstance(t, IntegerType):
        return max(1, t.width // 8)
    if isinstance(t, FloatType):
        bits = floats.FORMATS[t.name].storage_bits
        if bits < 8:
            raise InterpError(f"sub-byte element type {t.name} cannot be addressed in memory")
        return bits // 8
    if isinstance(t, PointerType):
        return 8
    raise InterpError(f"element type {t} has no storage size")


def bit_width(t: Type) -> int:
    t = element_of(t)
    if isinstance(t, IntegerType):
        return t.width
    if isinstance(t, FloatType):
        return floats.FORMATS[t.name].storage_bits
    if isinstance(t, PointerType):
        return 64
    raise InterpError(f"element type {t} has no bit width")


def uint_dtype_bytes(n: int):
    return _UINT_DTYPES[n * 8]


def to_bits(arr: np.ndarray, t: Type) -> np.ndarray:
    """Unsigned bit patterns (uint64) of values of element type ``t``."""
    t = element_of(t)
    a = np.asarray(arr)
    if isinstance(t, IntegerType):
        mask = (1 << t.width) - 1
        return a.astype(np.int64).astype(np.uint64) & np.uint64(mask)
    if isinstance(t, PointerType):
        return a.astype(np.uint64)
    return floats.encode(a, t.name).astype(np.uint64)


def from_bits(bits: np.ndarray, t: Type) -> np.ndarray:
    """Values of element type ``t`` from unsigned bit patterns."""
    t = element_of(t)
    b = np.asarray(bits).astype(np.uint64)
    if isinstance(t, IntegerType):
        if t.width == 1:
            return (b & np.uint64(1)).astype(np.bool_)
        if t.width not in _UINT_DTYPES:
            return wrap_int(b, t)
        return b.astype(_UINT_DTYPES[t.width]).view(_INT_DTYPES[t.width])
    if isinstance(t, PointerType):
        return b
    w = floats.FORMATS[t.name].storage_bits
    if w < 8:
        return floats.decode(b.astype(np.uint8), t.name)
    return floats.decode(b.astype(_UINT_DTYPES[w]), t.name)


def wrap_int(values, t: Type) -> np.ndarray:
    """Integer values (any int dtype, Python ints in object arrays) wrapped to ``iN``."""
    t = element_of(t)
    v = np.asarray(values)
    if v.dtype == object:
        mask = (1 << t.width) - 1
        v = np.vectorize(lambda x: int(x) & mask, otypes=[object])(v)
        v = v.astype(np.uint64)
    if v.dtype == np.bool_:
        v = v.astype(np.int64)
    if t.width == 1:
        return (
            (v.astype(np.int64) & 1).astype(np.bool_)
            if v.dtype != np.uint64
            else (v & np.uint64(1)).astype(np.bool_)
        )
    if t.width not in _UINT_DTYPES:  # i4: keep the low bits, sign-extend
        low = v.astype(np.int64).astype(np.uint64) & np.uint64((1 << t.width) - 1)
        sign = np.uint64(1 << (t.width - 1))
        return ((low ^ sign).astype(np.int64) - int(sign)).astype(_INT_DTYPES[t.width])
    return v.astype(_INT_DTYPES[t.width])


def as_signed(arr: np.ndarray, t: Type) -> np.ndarray:
    """int64 view of integer values interpreted as signed (i1 true is -1)."""
    a = np.asarray(arr)
    if a.dtype == np.bool_:
        return -a.astype(np.int64)
    return a.astype(np.int64)


def as_unsigned(arr: np.ndarray, t: Type) -> np.ndarray:
    """uint64 view of integer values interpreted as unsigned."""
    t = element_of(t)
    a = np.asarray(arr)
    if a.dtype == np.bool_:
        return a.astype(np.uint64)
    if isinstance(t, PointerType):
        return a.astype(np.uint64)
    return a.astype(np.int64).astype(np.uint64) & np.uint64((1 << t.width) - 1)


def from_literal(values, t: Type, shape: tuple) -> np.ndarray:
    """A tile from a constant's flat literal values (a single value splats)."""
    et = element_of(t)
    vals = list(values)
    if isinstance(et, IntegerType):
        if et.width == 1:
            arr = np.array(
                [bool(int(v)) if not isinstance(v, bool) else v for v in vals], dtype=np.bool_
            )
        else:
            mask = (1 << et.width) - 1
            arr = np.array([int(v) & mask for v in vals], dtype=np.uint64)
            arr = arr.astype(_UINT_DTYPES[et.width]).view(_INT_DTYPES[et.width])
    elif isinstance(et, FloatType):
        arr = floats.to_compute(np.array([float(v) for v in vals], dtype=np.float64), et.name)
    else:
        raise InterpError(f"cannot build a constant of element type {et}")
    if arr.size == 1:
        return np.broadcast_to(arr.reshape(()), shape).copy()
    return arr.reshape(shape)


def from_literal_bits(bits, t: Type, shape: tuple) -> np.ndarray:
    arr = from_bits(np.array([int(b) for b in bits], dtype=np.uint64), t)
    if arr.size == 1:
        return np.broadcast_to(arr.reshape(()), shape).copy()
    return arr.reshape(shape)
