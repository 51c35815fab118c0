"""Flat byte-addressed memories: the global heap (shared by all CTAs), per-CTA shared memory
and per-thread local memory. Generic addresses put shared/local in windows above the heap."""

from __future__ import annotations

import numpy as np

HEAP_BASE = 0x1000_0000
SHARED_WINDOW = 0x7E00_0000_0000
LOCAL_WINDOW = 0x7F00_0000_0000
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


class MemoryFault(Exception):
    """An out-of-bounds or misaligned access."""


class Flat:
    """A byte array addressed from `base`; loads/stores gather across lanes."""

    def __init__(self, size: int, base: int = 0, name: str = "global") -> None:
        self.data = np.zeros(max(size, 8), np.uint8)
        self.base, self.name = base, name

    def _offsets(self, addrs: np.ndarray, width: int) -> np.ndarray:
        """Checked byte offsets of `width`-byte accesses at `addrs` (bounds and alignment)."""
        off = addrs.astype(np.int64) - self.base
        if off.size:
            lo, hi = off.min(), off.max()
            if lo < 0 or hi + width > self.data.size:
                bad = int(addrs[(off < 0) | (off + width > self.data.size)][0])
                raise MemoryFault(
                    f"{self.name} access of {width} bytes at 0x{bad:x} is out of bounds"
                )
            if width > 1 and (off & (width - 1)).any():
                bad = int(addrs[(off & (width - 1)) != 0][0])
                raise MemoryFault(f"{self.name} access of {width} bytes at 0x{bad:x} is misaligned")
        return off

    def _index(self, addrs: np.ndarray, width: int) -> np.ndarray:
        return self._offsets(addrs, width)[:, None] + np.arange(width)

    def load(self, addrs: np.ndarray, width: int) -> np.ndarray:
        """uint64 bits of `width`-byte little-endian values at `addrs`."""
        off = self._offsets(addrs, width)
        if width == 1:
            return self.data[off].astype(np.uint64)
        raw = self.data[off[:, None] + np.arange(width)]
        return np.ascontiguousarray(raw).view(_UINT[width]).reshape(-1).astype(np.uint64)

    def store(self, addrs: np.ndarray, width: int, bits: np.ndarray) -> None:
        """Store in lane order: where lanes collide, the later one wins (one serialisation)."""
        off = self._offsets(addrs, width)
        vals = np.asarray(bits).astype(_UINT[width]).view(np.uint8).reshape(-1, width)
        if off.size > 1 and not (off[1:] > off[:-1]).all():
            last = np.unique(off[::-1], return_index=True)[1]
            if last.size < off.size:  # colliding lanes: keep each address's last writer
                keep = off.size - 1 - last
                off, vals = off[keep], vals[keep]
        idx = (off[:, None] + np.arange(width)).reshape(-1)
        self.data[idx] = vals.reshape(-1)


class Heap(Flat):
    """Global memory: a bump allocator over a growing byte array."""

    def __init__(self) -> None:
        super().__init__(0, HEAP_BASE)
        self.top = 0

    def alloc(self, nbytes: int, align: int = 256) -> int:
        """``nbytes`` at an ``align``-aligned address; the bytes up to the next 256-byte
        boundary are readable too, as cudaMalloc's granularity makes them (an aligned word that
        holds a valid byte is never out of bounds)."""
        self.top = (self.top + align - 1) // align * align
        addr = self.base + self.top
        self.top += max(nbytes, 1)
        if -(-self.top // 256) * 256 > self.data.size:
            grown = np.zeros(max(-(-self.top // 256) * 256, 2 * self.data.size), np.uint8)
            grown[: self.data.size] = self.data
            self.data = grown
        return addr

    def write(self, addr: int, raw: bytes) -> None:
        off = addr - self.base
        if off < 0 or off + len(raw) > self.top:
            raise MemoryFault(f"global write of {len(raw)} bytes at 0x{addr:x} is out of bounds")
        self.data[off : off + len(raw)] = np.frombuffer(raw, np.uint8)

    def read(self, addr: int, nbytes: int) -> bytes:
        return self.data[addr - self.base : addr - self.base + nbytes].tobytes()


class Shared(Flat):
    """A CTA's shared memory. `load`/`store` are generic-proxy accesses, reported to the strict
    async mode's checker (`hooks`, runtime/ptx/sim/hazards.py) when it is on; async-proxy
    operations (copies, tensor cores) use `raw_load`/`raw_store`."""

    def __init__(self, size: int) -> None:
        super().__init__(size, 0, "shared")
        self.hooks = None

    def load(self, addrs: np.ndarray, width: int) -> np.ndarray:
        if self.hooks is not None:
            self.hooks.generic_load(np.asarray(addrs), width)
        return Flat.load(self, addrs, width)

    def store(self, addrs: np.ndarray, width: int, bits: np.ndarray) -> None:
        if self.hooks is None:
            Flat.store(self, addrs, width, bits)
            return
        addrs = np.asarray(addrs)
        self.hooks.generic_store(addrs, width)
        idx = self._offsets(addrs, width)[:, None] + np.arange(width)
        old = self.data[idx]
        Flat.store(self, addrs, width, bits)
        # which bytes changed, and which lanes' bytes are the ones now there: a write of the
        # value already there (copies of an element written by several warps) does not
        # conflict, a lane whose byte another lane overwrote did not write the value
        mine = np.asarray(bits).astype(_UINT[width]).view(np.uint8).reshape(-1, width)
        self.hooks.values_written(idx, old, self.data[idx], mine)

    def raw_load(self, addrs: np.ndarray, width: int) -> np.ndarray:
        return Flat.load(self, addrs, width)

    def raw_store(self, addrs: np.ndarray, width: int, bits: np.ndarray) -> None:
        Flat.store(self, addrs, width, bits)
