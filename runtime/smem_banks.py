"""The shared-memory bank rule, for the simulator's counter (runtime/ptx/sim/banks.py) and the
code generator's layout choices (runtime/codegen/exchange.py, reduce.py).

Shared memory has 32 banks of 4-byte words. A warp's access is served in *phases*: all 32 lanes
for accesses of up to 4 bytes a lane, 16 lanes for 8 bytes, 8 lanes for 16 bytes. A phase takes
as many wavefronts as the most distinct words any one bank holds among its lanes' bytes (lanes
reading the same word share it)."""

from __future__ import annotations

BANKS = 32
WORD = 4


def lanes_a_phase(size: int) -> int:
    """Lanes served together for accesses of ``size`` bytes a lane: 32, 16 or 8."""
    return BANKS * WORD // max(size, WORD)


def phase_wavefronts(addrs, size: int) -> int:
    """Wavefronts of one phase: lanes at byte addresses ``addrs``, ``size`` bytes each."""
    import numpy as np

    if not len(addrs):
        return 0
    a = np.asarray(addrs, dtype=np.int64)
    first, last = a // WORD, (a + size - 1) // WORD
    words = first[:, None] + np.arange(int((last - first).max()) + 1)[None, :]
    words = np.unique(words[words <= last[:, None]])
    return int(np.bincount(words % BANKS, minlength=BANKS).max())


def warp_wavefronts(addrs, size: int, lanes=None) -> int:
    """Wavefronts of one warp's access: ``addrs`` the byte address of each lane taking part
    (``lanes`` their lane numbers, 0, 1, ... by default), ``size`` bytes a lane."""
    import numpy as np

    a = np.asarray(addrs, dtype=np.int64)
    lw = np.arange(len(a)) if lanes is None else np.asarray(lanes, dtype=np.int64) % 32
    per = lanes_a_phase(size)
    return sum(phase_wavefronts(a[lw // per == p], size) for p in np.unique(lw // per))
