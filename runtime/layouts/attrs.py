"""Layout attributes of the nv_tileas stage: how a tile's elements are distributed over a CTA.

A *distributed* layout maps (thread id, register index) to tile element coordinates:

* :class:`BlockedLayout` -- each thread owns ``size_per_thread`` contiguous elements per dim, a
  warp is a ``threads_per_warp`` grid of such blocks, a CTA a ``warps_per_cta`` grid of warps;
  ``order`` lists dims fastest-varying first (for lanes, warps and registers alike). The CTA
  tile (``size*threads*warps`` per dim) wraps around a larger tile (more registers per thread)
  and is replicated over a smaller one (several threads own one element).
* :class:`SliceLayout` -- the layout of a rank-(n-1) tile obtained by dropping ``dim`` from a
  rank-n ``parent`` (reduction results): a thread owns the projections of its parent elements.

:class:`SharedLayout` is not distributed: it maps element coordinates to a (swizzled) offset in
shared memory (``vec``/``per_phase``/``max_phase`` as in the usual XOR swizzle).

All layout parameters are powers of two; tile dims the layouts apply to are powers of two too.
"""

from __future__ import annotations

from itertools import product
from typing import Optional

from tilegen.runtime.attributes import Attribute
from tilegen.runtime.records import dataclass

WARP_SIZE = 32


class LayoutError(ValueError):
    """A layout is malformed or does not apply to a shape."""


def _pow2(n: int) -> bool:
    return n >= 1 and (n & (n - 1)) == 0


def _prod(xs) -> int:
    n = 1
    for x in xs:
        n *= x
    return n


def _split(index: int, sizes: tuple[int, ...], order: tuple[int, ...]) -> list[int]:
    """Linear ``index`` -> per-dim coordinates, ``order[0]`` varying fastest."""
    out = [0] * len(sizes)
    for d in order:
        out[d] = index % sizes[d]
        index //= sizes[d]
    return out


def _join(coords, sizes: tuple[int, ...], order: tuple[int, ...]) -> int:
    index, scale = 0, 1
    for d in order:
        index += coords[d] * scale
        scale *= sizes[d]
    return index


class Layout(Attribute):
    """Base class of the nv_tileas layout attributes."""

    def format_asm(self) -> str:  # pragma: no cover - overridden
        raise NotImplementedError


class DistributedLayout(Layout):
    """A layout that assigns tile elements to (thread, register) pairs."""

    rank: int

    def num_threads(self) -> int:  # pragma: no cover - overridden
        raise NotImplementedError

    def regs_per_thread(self, shape: tuple[int, ...]) -> int:  # pragma: no cover
        raise NotImplementedError

    def element_of(self, tid: int, reg: int, shape: tuple[int, ...]) -> tuple[int, ...]:
        raise NotImplementedError  # pragma: no cover

    def owners(self, coord: tuple[int, ...], shape: tuple[int, ...]) -> list[tuple[int, int]]:
        raise NotImplementedError  # pragma: no cover

    def check_shape(self, shape: tuple[int, ...]) -> Optional[str]:
        """Why the layout cannot describe a tile of ``shape``, or None."""
        if len(shape) != self.rank:
            return f"layout of rank {self.rank} does not apply to a rank-{len(shape)} tile"
        bad = [d for d in shape if not _pow2(d)]
        if bad:
            return f"tile dimension {bad[0]} is not a power of two"
        return None

    def elements_of_thread(self, tid: int, shape: tuple[int, ...]) -> list[tuple[int, ...]]:
        return [self.element_of(tid, r, shape) for r in range(self.regs_per_thread(shape))]


@dataclass(frozen=True)
class BlockedLayout(DistributedLayout):
    size_per_thread: tuple[int, ...]
    threads_per_warp: tuple[int, ...]
    warps_per_cta: tuple[int, ...]
    order: tuple[int, ...]

    def __post_init__(self):
        err = self.validate()
        if err:
            raise LayoutError(err)

    def validate(self) -> Optional[str]:
        n = len(self.order)
        fields = ("size_per_thread", "threads_per_warp", "warps_per_cta")
        for name in fields:
            if len(getattr(self, name)) != n:
                return (
                    f"blocked layout '{name}' has {len(getattr(self, name))} entries, expected {n}"
                )
        if sorted(self.order) != list(range(n)):
            return f"blocked layout 'order' must be a permutation of 0..{n - 1}, got {list(self.order)}"
        for name in fields:
            vals = getattr(self, name)
            if not all(_pow2(v) for v in vals):
                return f"blocked layout '{name}' entries must be powers of two, got {list(vals)}"
        if _prod(self.threads_per_warp) != WARP_SIZE:
            return (
                f"blocked layout 'threads_per_warp' must multiply to {WARP_SIZE}, got "
                f"{_prod(self.threads_per_warp)}"
            )
        return None

    @property
    def rank(self) -> int:
        return len(self.order)

    @property
    def num_warps(self) -> int:
        return _prod(self.warps_per_cta)

    def num_threads(self) -> int:
        return WARP_SIZE * self.num_warps

    def cta_tile(self) -> tuple[int, ...]:
        """Elements per dim covered once by the whole CTA."""
        return tuple(
            s * t * w
            for s, t, w in zip(self.size_per_thread, self.threads_per_warp, self.warps_per_cta)
        )

    def regs_per_dim(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(
            s * max(1, d // c) for s, d, c in zip(self.size_per_thread, shape, self.cta_tile())
        )

    def regs_per_thread(self, shape: tuple[int, ...]) -> int:
        return _prod(self.regs_per_dim(shape))

    def element_of(self, tid: int, reg: int, shape: tuple[int, ...]) -> tuple[int, ...]:
        if not 0 <= tid < self.num_threads():
            raise LayoutError(f"thread id {tid} out of range [0, {self.num_threads()})")
        regs = self.regs_per_dim(shape)
        if not 0 <= reg < _prod(regs):
            raise LayoutError(f"register index {reg} out of range [0, {_prod(regs)})")
        lane = _split(tid % WARP_SIZE, self.threads_per_warp, self.order)
        warp = _split(tid // WARP_SIZE, self.warps_per_cta, self.order)
        r = _split(reg, regs, self.order)
        cta = self.cta_tile()
        out = []
        for d in range(self.rank):
            spt, tpw = self.size_per_thread[d], self.threads_per_warp[d]
            rep, within = divmod(r[d], spt)
            c = rep * cta[d] + (warp[d] * tpw + lane[d]) * spt + within
            out.append(c % shape[d])
        return tuple(out)

    def owners(self, coord: tuple[int, ...], shape: tuple[int, ...]) -> list[tuple[int, int]]:
        """Every (thread id, register) holding element ``coord`` (several when replicated)."""
        cta = self.cta_tile()
        regs = self.regs_per_dim(shape)
        per_dim = []
        for d in range(self.rank):
            spt, tpw = self.size_per_thread[d], self.threads_per_warp[d]
            cands = []
            # positions p of the (possibly wrapped) register space that land on coord[d]
            span = max(cta[d], shape[d])
            for p in range(coord[d], span, shape[d]):
                rep, rem = divmod(p, cta[d])
                th, within = divmod(rem, spt)
                lane_d, warp_d = th % tpw, th // tpw
                cands.append((lane_d, warp_d, rep * spt + within))
            per_dim.append(cands)
        out = []
        for combo in product(*per_dim):
            lane = _join([c[0] for c in combo], self.threads_per_warp, self.order)
            warp = _join([c[1] for c in combo], self.warps_per_cta, self.order)
            reg = _join([c[2] for c in combo], regs, self.order)
            out.append((warp * WARP_SIZE + lane, reg))
        return sorted(out)

    def contiguous_per_thread(self) -> int:
        """Elements each thread holds contiguously along the fastest dim (the vector width)."""
        return self.size_per_thread[self.order[0]]

    def format_asm(self) -> str:
        def arr(xs):
            return "[" + ", ".join(str(x) for x in xs) + "]"

        return (
            f"#nv_tileas.blocked<{{sizePerThread = {arr(self.size_per_thread)}, "
            f"threadsPerWarp = {arr(self.threads_per_warp)}, "
            f"warpsPerCTA = {arr(self.warps_per_cta)}, order = {arr(self.order)}}}>"
        )


@dataclass(frozen=True)
class SliceLayout(DistributedLayout):
    dim: int
    parent: DistributedLayout

    def __post_init__(self):
        if not isinstance(self.parent, DistributedLayout):
            raise LayoutError("slice layout parent must be a distributed layout")
        if not 0 <= self.dim < self.parent.rank:
            raise LayoutError(
                f"slice dim {self.dim} out of range for a rank-{self.parent.rank} parent"
            )

    @property
    def rank(self) -> int:
        return self.parent.rank - 1

    def num_threads(self) -> int:
        return self.parent.num_threads()

    def parent_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(shape[: self.dim]) + (1,) + tuple(shape[self.dim :])

    def _elements(self, tid: int, shape: tuple[int, ...]) -> list[tuple[int, ...]]:
        pshape = self.parent_shape(shape)
        seen: dict = {}
        for r in range(self.parent.regs_per_thread(pshape)):
            c = self.parent.element_of(tid, r, pshape)
            seen.setdefault(c[: self.dim] + c[self.dim + 1 :], None)
        return list(seen)

    def regs_per_thread(self, shape: tuple[int, ...]) -> int:
        return len(self._elements(0, shape))

    def element_of(self, tid: int, reg: int, shape: tuple[int, ...]) -> tuple[int, ...]:
        if not 0 <= tid < self.num_threads():
            raise LayoutError(f"thread id {tid} out of range [0, {self.num_threads()})")
        elems = self._elements(tid, shape)
        if not 0 <= reg < len(elems):
            raise LayoutError(f"register index {reg} out of range [0, {len(elems)})")
        return elems[reg]

    def owners(self, coord: tuple[int, ...], shape: tuple[int, ...]) -> list[tuple[int, int]]:
        pshape = self.parent_shape(shape)
        pcoord = tuple(coord[: self.dim]) + (0,) + tuple(coord[self.dim :])
        tids = sorted({t for t, _ in self.parent.owners(pcoord, pshape)})
        return [(t, self._elements(t, shape).index(tuple(coord))) for t in tids]

    def format_asm(self) -> str:
        return f"#nv_tileas.slice<{{dim = {self.dim}, parent = {self.parent.format_asm()}}}>"


@dataclass(frozen=True)
class SharedLayout(Layout):
    """Swizzled shared-memory layout: ``offset(coord)``; rows of the two fastest dims are XOR
    swizzled in units of ``vec`` elements, the phase advancing every ``per_phase`` rows and
    wrapping at ``max_phase``."""

    vec: int
    per_phase: int
    max_phase: int
    order: tuple[int, ...]

    def __post_init__(self):
        for name in ("vec", "per_phase", "max_phase"):
            if not _pow2(getattr(self, name)):
                raise LayoutError(f"shared layout '{name}' must be a power of two")
        if sorted(self.order) != list(range(len(self.order))):
            raise LayoutError(
                f"shared layout 'order' must be a permutation, got {list(self.order)}"
            )

    @property
    def rank(self) -> int:
        return len(self.order)

    def offset(self, coord: tuple[int, ...], shape: tuple[int, ...]) -> int:
        if len(coord) != self.rank or len(shape) != self.rank:
            raise LayoutError(f"shared layout of rank {self.rank} applied to rank {len(shape)}")
        c = list(coord)
        if self.rank >= 2:
            inner, outer = self.order[0], self.order[1]
            phase = (c[outer] // self.per_phase) % self.max_phase
            groups = max(1, shape[inner] // self.vec)
            g, w = divmod(c[inner], self.vec)
            c[inner] = ((g ^ phase) % groups) * self.vec + w
        return _join(c, shape, self.order)

    def coord_of(self, offset: int, shape: tuple[int, ...]) -> tuple[int, ...]:
        c = _split(offset, shape, self.order)
        if self.rank >= 2:
            inner, outer = self.order[0], self.order[1]
            phase = (c[outer] // self.per_phase) % self.max_phase
            groups = max(1, shape[inner] // self.vec)
            g, w = divmod(c[inner], self.vec)
            c[inner] = ((g ^ phase) % groups) * self.vec + w
        return tuple(c)

    def format_asm(self) -> str:
        o = ", ".join(str(x) for x in self.order)
        return (
            f"#nv_tileas.shared<{{vec = {self.vec}, perPhase = {self.per_phase}, "
            f"maxPhase = {self.max_phase}, order = [{o}]}}>"
        )


def default_blocked(
    shape: tuple[int, ...], num_warps: int, vec: int = 1, order: Optional[tuple[int, ...]] = None
) -> BlockedLayout:
    """The blocked layout for a tile of ``shape`` over ``num_warps`` warps with ``vec``
    contiguous elements per thread along ``order[0]`` (Triton's construction: lanes, then warps,
    fill dims fastest first as far as the shape allows; the rest goes to the slowest dim)."""
    rank = len(shape)
    order = tuple(order) if order is not None else tuple(reversed(range(rank)))
    if rank == 0:
        raise LayoutError("a rank-0 tile has no blocked layout")
    spt = [1] * rank
    spt[order[0]] = max(1, min(vec, shape[order[0]]))
    tpw, wpc = [1] * rank, [1] * rank
    lanes, warps, threads = WARP_SIZE, num_warps, WARP_SIZE * num_warps
    for d in order[:-1]:
        per_cta = max(1, min(threads, shape[d] // spt[d]))
        tpw[d] = max(1, min(per_cta, lanes))
        wpc[d] = max(1, min(per_cta // tpw[d], warps))
        lanes //= tpw[d]
        warps //= wpc[d]
        threads //= per_cta
    tpw[order[-1]] = lanes
    wpc[order[-1]] = warps
    return BlockedLayout(tuple(spt), tuple(tpw), tuple(wpc), order)


def unit_dims_view(
    layout: BlockedLayout, src: tuple[int, ...], out: tuple[int, ...]
) -> Optional[BlockedLayout]:
    """The layout of a ``view`` from ``src`` to ``out`` that only drops or inserts unit dims (a
    4-d ``load`` viewed as the 2-d tile a dot reads) when ``x`` has ``layout``: the same
    registers, so the view costs nothing. None when the non-unit dims differ or a dropped unit
    dim holds more than one thread or register (its copies would not survive the view)."""
    keep = [i for i, n in enumerate(src) if n != 1]
    if [src[i] for i in keep] != [n for n in out if n != 1]:
        return None
    for i, n in enumerate(src):
        if n == 1 and (
            layout.size_per_thread[i],
            layout.threads_per_warp[i],
            layout.warps_per_cta[i],
        ) != (1, 1, 1):
            return None
    new = {j: i for j, i in zip([j for j, n in enumerate(out) if n != 1], keep)}
    spt, tpw, wpc = [1] * len(out), [1] * len(out), [1] * len(out)
    for j, i in new.items():
        spt[j] = layout.size_per_thread[i]
        tpw[j] = layout.threads_per_warp[i]
        wpc[j] = layout.warps_per_cta[i]
    back = {i: j for j, i in new.items()}
    order = [back[o] for o in layout.order if o in back]
    order += [j for j in reversed(range(len(out))) if j not in new]  # unit dims: slowest
    return BlockedLayout(tuple(spt), tuple(tpw), tuple(wpc), tuple(order))
