"""The simulator's own 128-byte tensor map (NOT NVIDIA's opaque CUtensorMap): what the launcher
writes into a hidden `.param .b8 [128]` so `cp.async.bulk.tensor` can find its global tensor.

Layout (little-endian): b"TGTM", rank u32, element size u32, swizzle u32 (bytes: 0, 32, 64 or
128), address u64, dims[5] u64 (innermost first, in elements), strides[5] u64 (bytes), box[5]
u32 (innermost first; all 0 when the box is unknown: 1-D copies then take the mbarrier's
expected bytes), flags u32 (bit 0: out-of-bounds elements read as NaN instead of zero, the
CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA fill; bit 1: the 128-byte swizzle moves
32-byte atoms, CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B). The box and swizzle are what NVIDIA's host code puts into the real
CUtensorMap (tileiras compiles them into its --nv-host object); callers pass them to
`launch.run_ptx(tensor_maps=...)`."""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

MAGIC = b"TGTM"
_FMT = "<4sIII Q 5Q 5Q 5I I"
SWIZZLES = (0, 32, 64, 128)


@dataclass(frozen=True)
class TensorMap:
    address: int
    elem_size: int
    dims: tuple[int, ...]  # innermost first
    strides: tuple[int, ...]  # bytes, innermost first
    box: tuple[int, ...] = ()  # elements per dim, innermost first; () when unknown
    swizzle: int = 0  # bytes of the shared-memory swizzle span (0: none)
    oob_nan: bool = False  # out-of-bounds elements read as NaN (else zero)
    swizzle_atom: int = 16  # bytes the swizzle moves as a unit (32: 128B_ATOM_32B)


def encode(
    address: int,
    array: np.ndarray,
    box=None,
    swizzle: int = 0,
    oob_nan: bool = False,
    swizzle_atom: int = 16,
) -> bytes:
    """The map of `array` at `address`; `box` is outermost-first like the array's shape."""
    dims = list(array.shape[::-1]) + [1] * (5 - array.ndim)
    strides = list(array.strides[::-1]) + [0] * (5 - array.ndim)
    if swizzle not in SWIZZLES:
        raise ValueError(f"tensor map swizzle must be one of {SWIZZLES} bytes, got {swizzle}")
    if swizzle_atom not in (16, 32) or (swizzle_atom == 32 and swizzle != 128):
        raise ValueError("32-byte swizzle atoms exist for the 128-byte swizzle only")
    boxes = [0] * 5
    if box is not None:
        if len(box) != array.ndim or any(int(b) < 1 or int(b) > 256 for b in box):
            raise ValueError(
                f"tensor map box {list(box)} must give 1..256 per dim of {array.shape}"
            )
        boxes = [int(b) for b in box[::-1]] + [0] * (5 - array.ndim)
    raw = struct.pack(
        _FMT,
        MAGIC,
        array.ndim,
        array.itemsize,
        swizzle,
        address,
        *dims,
        *strides,
        *boxes,
        int(bool(oob_nan)) | (2 if swizzle_atom == 32 else 0),
    )
    return raw.ljust(128, b"\0")


def decode(raw: bytes) -> TensorMap | None:
    if len(raw) < struct.calcsize(_FMT) or raw[:4] != MAGIC:
        return None
    magic, rank, esize, swz, addr, *rest = struct.unpack(_FMT, raw[: struct.calcsize(_FMT)])
    box = tuple(rest[10 : 10 + rank]) if rest[10] else ()
    flags = rest[15]
    return TensorMap(
        addr,
        esize,
        tuple(rest[:rank]),
        tuple(rest[5 : 5 + rank]),
        box,
        swz,
        bool(flags & 1),
        32 if flags & 2 else 16,
    )
