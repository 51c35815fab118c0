"""The simulator's own 128-byte tensor map (NOT NVIDIA's opaque CUtensorMap): what the launcher
writes into a hidden `.param .b8 [128]` so `cp.async.bulk.tensor` can find its global tensor.

Layout (little-endian): b"TGTM", rank u32, element size u32, pad u32, address u64,
dims[5] u64 (innermost first, in elements), strides[5] u64 (bytes)."""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

MAGIC = b"TGTM"
_FMT = "<4sIII Q 5Q 5Q"


@dataclass(frozen=True)
class TensorMap:
    address: int
    elem_size: int
    dims: tuple[int, ...]  # innermost first
    strides: tuple[int, ...]  # bytes, innermost first


def encode(address: int, array: np.ndarray) -> bytes:
    dims = list(array.shape[::-1]) + [1] * (5 - array.ndim)
    strides = list(array.strides[::-1]) + [0] * (5 - array.ndim)
    raw = struct.pack(_FMT, MAGIC, array.ndim, array.itemsize, 0, address, *dims, *strides)
    return raw.ljust(128, b"\0")


def decode(raw: bytes) -> TensorMap | None:
    if len(raw) < struct.calcsize(_FMT) or raw[:4] != MAGIC:
        return None
    magic, rank, esize, _, addr, *rest = struct.unpack(_FMT, raw[: struct.calcsize(_FMT)])
    return TensorMap(addr, esize, tuple(rest[:rank]), tuple(rest[5 : 5 + rank]))
