"""Where each register of a laid-out tile lives: a closed form of a distributed layout.

Every layout codegen meets is a :class:`BlockedLayout` *root*, possibly under one or more
:class:`SliceLayout`\\ s. For the root over its (parent) shape ``pshape`` the element a thread
holds in register ``r`` is, per dim ``d``::

    coord_d(tid, r) = (base_d(tid) + raw_d(r)) mod pshape_d
    base_d(tid)     = (warp_d * tpw_d + lane_d) * spt_d        (lane_d / warp_d: digits of the
                                                              lane / warp id over ``order``)
    raw_d(r)        = rep * cta_d + within                     (rep, within = divmod(r_d, spt_d))

``base`` and ``raw`` occupy disjoint bit fields, so ``+`` is ``|`` and every coordinate bit is a
tid bit, a register bit or zero: the map is linear over GF(2). A thread's copy of an element is
*canonical* (the one that stores or prints it) when no dim wrapped (``base_d + raw_d <
pshape_d``). A slice keeps the root registers whose projection is new, in register order, like
:meth:`SliceLayout.element_of`. ``tests/test_codegen_dist.py`` checks this form against
``element_of`` exhaustively.
"""

from __future__ import annotations

from functools import lru_cache

from tilegen.runtime.layouts.attrs import WARP_SIZE, BlockedLayout, SliceLayout


def _digits(x: int, radices, order) -> list[int]:
    out = [0] * len(radices)
    for d in order:
        out[d] = x % radices[d]
        x //= radices[d]
    return out


class Dist:
    """A layout applied to a tile shape, in closed form."""

    def __init__(self, layout, shape: tuple[int, ...]):
        dropped: list[int] = []  # root dims sliced away, innermost slice first
        lay, pshape = layout, tuple(shape)
        while isinstance(lay, SliceLayout):
            pshape = pshape[: lay.dim] + (1,) + pshape[lay.dim :]
            dropped.append(lay.dim)
            lay = lay.parent
        if not isinstance(lay, BlockedLayout) or len(pshape) != lay.rank:
            raise ValueError(f"no closed form for layout {layout} over {shape}")
        self.layout, self.shape, self.root, self.pshape = layout, tuple(shape), lay, pshape
        # kept (result) dims in root numbering: replay the slices from the root outwards
        dims = list(range(lay.rank))
        for d in reversed(dropped):
            dims.pop(d)
        self.kept = tuple(dims)
        self.sliced = tuple(d for d in range(lay.rank) if d not in self.kept)
        self.num_threads = lay.num_threads()
        self.cta = lay.cta_tile()
        regs_dim = lay.regs_per_dim(pshape)
        nroot = 1
        for n in regs_dim:
            nroot *= n
        raws: list[tuple[int, ...]] = []
        seen: dict = {}
        self.pregs: list[int] = []
        for r in range(nroot):
            digits = _digits(r, regs_dim, lay.order)
            raw = []
            for d in range(lay.rank):
                rep, within = divmod(digits[d], lay.size_per_thread[d])
                raw.append(rep * self.cta[d] + within)
            coord = tuple(raw[d] % pshape[d] for d in self.kept)
            if coord in seen:
                continue
            seen[coord] = len(self.pregs)
            self.pregs.append(r)
            raws.append(tuple(raw))
        self.raw = raws
        self.nregs = len(raws)
        # the largest base per dim, to know where coordinates can wrap
        self.max_base = tuple(c - s for c, s in zip(self.cta, lay.size_per_thread))

    # ----- static (Python) evaluation, for compile-time decisions and tests
    def base(self, tid: int) -> tuple[int, ...]:
        lay = self.root
        lane = _digits(tid % WARP_SIZE, lay.threads_per_warp, lay.order)
        warp = _digits(tid // WARP_SIZE, lay.warps_per_cta, lay.order)
        return tuple(
            (warp[d] * lay.threads_per_warp[d] + lane[d]) * lay.size_per_thread[d]
            for d in range(lay.rank)
        )

    def coord(self, tid: int, k: int, base=None) -> tuple[int, ...]:
        b = base if base is not None else self.base(tid)
        raw = self.raw[k]
        return tuple((b[d] + raw[d]) % self.pshape[d] for d in self.kept)

    def canonical(self, tid: int, k: int) -> bool:
        b = self.base(tid)
        raw = self.raw[k]
        return all(b[d] + raw[d] < self.pshape[d] for d in range(self.root.rank))

    def wraps(self, d: int, k: int) -> bool:
        """Whether root dim ``d`` of register ``k`` can leave [0, pshape_d) before the mod."""
        return self.max_base[d] + self.raw[k][d] >= self.pshape[d]

    def check_tids(self) -> list[int]:
        """Thread ids whose images determine the GF(2)-linear map: 0 and each single bit."""
        out, t = [0], 1
        while t < self.num_threads:
            out.append(t)
            t <<= 1
        return out


@lru_cache(maxsize=4096)
def dist(layout, shape: tuple[int, ...]) -> Dist:
    return Dist(layout, tuple(shape))
