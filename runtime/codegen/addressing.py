"""Thread -> element coordinates of a distributed layout, split as ``base(tid) + offset(reg)``.

For a blocked layout whose CTA tile fits in the tile (no replication) the element a thread holds
in register ``reg`` is ``base(tid) + offset(reg)`` per dim: ``base`` is affine in the lane/warp
digits, ``offset`` a constant. :func:`split_layout` derives both from ``element_of`` and checks
the split exhaustively, so codegen never disagrees with the layout's own map.
"""

from __future__ import annotations

from tilegen.runtime.layouts.attrs import WARP_SIZE, BlockedLayout


def _split(x: int, radices, order) -> list[int]:
    out = [0] * len(radices)
    for d in order:
        out[d] = x % radices[d]
        x //= radices[d]
    return out


def split_layout(layout, shape: tuple[int, ...]):
    """(per-dim digit terms of base, per-register offsets) or None when not expressible.

    base_d(tid) = (warp_d * tpw_d + lane_d) * spt_d, with lane_d/warp_d the mixed-radix digits of
    tid % 32 and tid // 32 over ``order``."""
    if not isinstance(layout, BlockedLayout) or len(shape) != layout.rank:
        return None
    cta = layout.cta_tile()
    if any(d < c for d, c in zip(shape, cta)):
        return None  # replicated: several threads own an element (not supported yet)
    nregs = layout.regs_per_thread(shape)
    offsets = [layout.element_of(0, r, shape) for r in range(nregs)]
    for tid in range(layout.num_threads()):
        lane = _split(tid % WARP_SIZE, layout.threads_per_warp, layout.order)
        warp = _split(tid // WARP_SIZE, layout.warps_per_cta, layout.order)
        base = [
            (warp[d] * layout.threads_per_warp[d] + lane[d]) * layout.size_per_thread[d]
            for d in range(layout.rank)
        ]
        for r in range(nregs):
            want = layout.element_of(tid, r, shape)
            if tuple(b + o for b, o in zip(base, offsets[r])) != want:
                return None
    return offsets
