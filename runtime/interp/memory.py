"""The interpreter's memory: a flat byte-addressed heap, and the tensor/tile views over it.

Pointers are byte addresses (``uint64``), so pointer arithmetic, strided and overlapping views and
aliasing behave as on a GPU. Every access is checked against the live allocations; an access
outside them is an :class:`InterpError`, not silent corruption.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from tilegen.runtime.interp.values import (
    InterpError,
    compute_dtype,
    from_bits,
    storage_bytes,
    to_bits,
    uint_dtype_bytes,
)
from tilegen.runtime.types import FloatType, Type

#: First address handed out; address 0 stays invalid (a null pointer faults).
HEAP_BASE = 0x10000
ALIGN = 256


class Heap:
    """A growable little-endian byte array with allocations at fixed addresses."""

    def __init__(self) -> None:
        self.buf = np.zeros(1 << 16, dtype=np.uint8)
        self.top = 0  # bytes used, relative to HEAP_BASE
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.names: list[str] = []

    def alloc(self, nbytes: int, align: int = ALIGN, name: str = "") -> int:
        off = -(-self.top // align) * align
        end = off + max(int(nbytes), 0)
        if end > len(self.buf):
            size = len(self.buf)
            while size < end:
                size *= 2
            nb = np.zeros(size, dtype=np.uint8)
            nb[: len(self.buf)] = self.buf
            self.buf = nb
        self.top = end
        self.starts.append(HEAP_BASE + off)
        self.ends.append(HEAP_BASE + end)
        self.names.append(name)
        return HEAP_BASE + off

    def alloc_array(self, arr: np.ndarray, t: Type, name: str = "") -> int:
        """Copy ``arr`` (values of element type ``t``, row-major) into a new allocation."""
        n = storage_bytes(t)
        addr = self.alloc(arr.size * n, name=name)
        self.write_bits(
            np.arange(arr.size, dtype=np.uint64) * np.uint64(n) + np.uint64(addr),
            to_bits(arr.reshape(-1), t),
            n,
        )
        return addr

    # ----- checks
    def check(self, addrs: np.ndarray, nbytes: int, what: str) -> None:
        if addrs.size == 0:
            return
        a = addrs.astype(np.uint64).reshape(-1)
        starts = np.array(self.starts, dtype=np.uint64)
        ends = np.array(self.ends, dtype=np.uint64)
        i = np.searchsorted(starts, a, side="right") - 1
        ok = (
            (i >= 0)
            & (a + np.uint64(nbytes) <= ends[np.maximum(i, 0)])
            & (a >= starts[np.maximum(i, 0)])
        )
        if not ok.all():
            bad = int(a[~ok][0])
            raise InterpError(
                f"{what} of {nbytes} byte(s) at address {bad:#x} is outside every allocation"
            )
        if (a % np.uint64(nbytes)).any():
            bad = int(a[(a % np.uint64(nbytes)) != 0][0])
            raise InterpError(f"misaligned {what} of {nbytes} byte(s) at address {bad:#x}")

    # ----- raw access (addresses already checked)
    def _word_view(self, n: int) -> np.ndarray:
        return self.buf.view(uint_dtype_bytes(n))

    def read_bits(self, addrs: np.ndarray, n: int) -> np.ndarray:
        self.check(addrs, n, "load")
        idx = ((addrs.astype(np.uint64) - np.uint64(HEAP_BASE)) // np.uint64(n)).astype(np.int64)
        return self._word_view(n)[idx].astype(np.uint64)

    def write_bits(self, addrs: np.ndarray, bits: np.ndarray, n: int) -> None:
        self.check(addrs, n, "store")
        idx = ((addrs.astype(np.uint64) - np.uint64(HEAP_BASE)) // np.uint64(n)).astype(np.int64)
        self._word_view(n)[idx.reshape(-1)] = bits.reshape(-1).astype(uint_dtype_bytes(n))

    # ----- typed access
    def load(self, addrs: np.ndarray, t: Type) -> np.ndarray:
        n = storage_bytes(t)
        return from_bits(self.read_bits(addrs, n), t).reshape(addrs.shape)

    def store(self, addrs: np.ndarray, values: np.ndarray, t: Type) -> None:
        n = storage_bytes(t)
        self.write_bits(addrs, to_bits(values, t), n)

    def read_array(self, addr: int, shape: tuple, t: Type) -> np.ndarray:
        n = storage_bytes(t)
        count = int(np.prod(shape)) if shape else 1
        addrs = np.uint64(addr) + np.arange(count, dtype=np.uint64) * np.uint64(n)
        return self.load(addrs, t).reshape(shape)


# --------------------------------------------------------------------------- views


@dataclass(frozen=True)
class TensorView:
    base: int
    element: Type
    shape: tuple[int, ...]
    strides: tuple[int, ...]

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclass(frozen=True)
class TileView:
    """A partition, strided or gather/scatter view over a tensor view."""

    kind: str  # "partition" | "strided" | "gather_scatter"
    tensor: TensorView
    tile_shape: tuple[int, ...]
    dim_map: tuple[int, ...] = ()
    traversal_strides: tuple[int, ...] = ()
    sparse_dim: int = -1
    padding: Optional[str] = None

    def mapped(self, i: int) -> int:
        return self.dim_map[i] if self.dim_map else i

    def step(self, i: int) -> int:
        """Elements between consecutive index values along tile dim ``i``.

        Partition views step by whole tiles, strided views by their traversal stride; the dense
        dimensions of a gather/scatter view are addressed by element offset.
        """
        if self.kind == "gather_scatter":
            return 1
        return self.traversal_strides[i] if self.traversal_strides else self.tile_shape[i]

    def index_space_shape(self) -> tuple[int, ...]:
        """Number of tile origins inside the tensor along each tile dimension.

        Partition views: ``ceil(n / tile)`` (partial tiles count); strided views:
        ``ceil(n / traversal_stride)``; gather/scatter views address elements: ``n``.
        """
        out = []
        for i in range(len(self.tile_shape)):
            n = self.tensor.shape[self.mapped(i)]
            out.append(-(-n // self.step(i)))
        return tuple(out)

    def element_coords(self, indices: list[np.ndarray]) -> list[np.ndarray]:
        """Tensor coordinates (one int64 array of the tile shape per tensor dim) of a tile."""
        rank = len(self.tile_shape)
        grids = np.indices(self.tile_shape, dtype=np.int64) if rank else []
        coords: list[Optional[np.ndarray]] = [None] * self.tensor.rank
        for i in range(rank):
            if self.kind == "gather_scatter" and i == self.sparse_dim:
                rows = np.asarray(indices[i]).astype(np.int64).reshape(-1)
                c = rows[grids[i]]
            else:
                c = int(np.asarray(indices[i]).astype(np.int64)) * self.step(i) + grids[i]
            coords[self.mapped(i)] = c
        return coords  # type: ignore[return-value]

    def out_of_bounds_dims(self, indices: list[np.ndarray]) -> list[int]:
        """Tile dimensions along which the tile at ``indices`` leaves the tensor."""
        coords = self.element_coords(indices)
        bad = []
        for i in range(len(self.tile_shape)):
            d = self.mapped(i)
            c = coords[d]
            if ((c < 0) | (c >= self.tensor.shape[d])).any():
                bad.append(i)
        return bad

    def addresses(self, indices: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """(byte addresses, in-bounds mask) of the tile at ``indices``."""
        tv = self.tensor
        coords = self.element_coords(indices)
        n = storage_bytes(tv.element)
        inb = np.ones(self.tile_shape, dtype=bool)
        lin = np.zeros(self.tile_shape, dtype=np.int64)
        for d, c in enumerate(coords):
            inb &= (c >= 0) & (c < tv.shape[d])
            lin = lin + c * tv.strides[d]
        addrs = (np.int64(tv.base) + lin * n).astype(np.uint64)
        return addrs, inb

    def padding_value(self) -> np.ndarray:
        dt = compute_dtype(self.tensor.element)
        special = {
            "zero": 0.0,
            "neg_zero": -0.0,
            "nan": np.nan,
            "pos_inf": np.inf,
            "neg_inf": -np.inf,
        }
        if self.padding is None or not isinstance(self.tensor.element, FloatType):
            return np.zeros((), dtype=dt)
        return np.array(special[self.padding]).astype(dt)


def view_load(heap: Heap, view: TileView, indices: list) -> np.ndarray:
    addrs, inb = view.addresses(indices)
    out = np.broadcast_to(view.padding_value(), view.tile_shape).copy()
    if inb.any():
        out[inb] = heap.load(addrs[inb], view.tensor.element)
    return out


def view_store(heap: Heap, view: TileView, indices: list, tile: np.ndarray) -> None:
    addrs, inb = view.addresses(indices)
    if inb.any():
        heap.store(addrs[inb], np.asarray(tile)[inb], view.tensor.element)


@dataclass
class Globals:
    """Addresses of a module's ``global`` allocations, by symbol name."""

    addrs: dict[str, int] = field(default_factory=dict)
