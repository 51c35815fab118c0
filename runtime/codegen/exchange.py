"""Moving tile elements between layouts: in registers when every thread already holds what it
needs, else through shared memory.

An exchange has *writes* (source tiles, each with a :class:`Form` mapping its element
coordinates to a flat index of a scratch array) and one *read* (the destination layout with its
own form). Destination register ``k`` takes the source element whose write index equals its read
index. Broadcast, reshape, permute, extract_slice, cat and layout conversion are all such forms
(``tilegen.runtime.codegen.shape``).

Register path: if for every destination register some source register of the *same thread*
holds the element, for every thread, the destination simply reuses those register names (no
instruction). The maps are GF(2)-linear in the thread id bits (see ``dist``), so checking thread
0 and each single-bit thread id decides it; small CTAs are checked exhaustively anyway.

Shared path: ``bar.sync``; each source register stores to ``scratch[index]``; ``bar.sync``;
each destination register loads ``scratch[index]``.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilegen.runtime.codegen.core import Emitter, load_reg, store_reg
from tilegen.runtime.codegen.dist import Dist


@dataclass(frozen=True)
class Form:
    """``flat = const + sum(mults[i] * coord[i])`` over a tile's result dims."""

    const: int
    mults: tuple[int, ...]

    def at(self, coord) -> int:
        return self.const + sum(m * c for m, c in zip(self.mults, coord))

    def emit(self, em: Emitter, d: Dist, k: int):
        return em.lincomb(self.const, [(m, em.coord(d, k, i)) for i, m in enumerate(self.mults)])


def row_major(shape, const: int = 0, shift=None) -> Form:
    """Row-major flattening over ``shape``; ``shift`` adds a per-dim constant to coordinates."""
    mults, s = [0] * len(shape), 1
    for i in reversed(range(len(shape))):
        mults[i] = s
        s *= shape[i]
    if shift:
        const += sum(m * o for m, o in zip(mults, shift))
    return Form(const, tuple(mults))


def _tids(dists) -> list[int]:
    n = dists[0].num_threads
    work = n * sum(d.nregs for d in dists)
    if work <= 65536:
        return list(range(n))
    return dists[0].check_tids()


def register_plan(writes, read_dist: Dist, read_form: Form):
    """Per destination register, the (write number, source register) holding its element in the
    same thread, or None when some element must cross threads."""
    dists = [read_dist] + [w[1] for w in writes]
    if len({d.num_threads for d in dists}) != 1:
        return None
    plan = None
    for tid in _tids(dists):
        where: dict = {}
        for w, (_, d, form) in enumerate(writes):
            base = d.base(tid)
            for j in range(d.nregs):
                where.setdefault(form.at(d.coord(tid, j, base)), (w, j))
        rbase = read_dist.base(tid)
        got = [
            where.get(read_form.at(read_dist.coord(tid, k, rbase))) for k in range(read_dist.nregs)
        ]
        if plan is None:
            if any(g is None for g in got):
                return None
            plan = got
        elif got != plan:
            return None
    return plan


def exchange(
    em: Emitter, cls: str, esize: int, writes, read_dist: Dist, read_form: Form, size: int
):
    """Destination registers for ``read_dist``; ``writes`` are (registers, Dist, Form) triples;
    ``size`` is the scratch array's element count (for the shared path)."""
    plan = register_plan(writes, read_dist, read_form)
    if plan is not None:
        return [writes[w][0][j] for w, j in plan]
    isize = 1 if cls == "pred" else esize
    em.need_smem(size * isize)
    em.barrier()
    for regs, d, form in writes:
        for j in range(d.nregs):
            idx = form.emit(em, d, j)
            r, st = store_reg(em, cls, regs[j])
            em.ins(f"st.shared.{st} [{em.smem_addr(idx, isize)}], {r}")
    em.barrier()
    out = []
    for k in range(read_dist.nregs):
        idx = read_form.emit(em, read_dist, k)
        out.append(load_reg(em, cls, "shared", em.smem_addr(idx, isize)))
    return out


def read_scalar(em: Emitter, cls: str, esize: int, writes, index, size: int) -> str:
    """Every thread reads element ``index`` (int or b32 register) of the scratch array."""
    isize = 1 if cls == "pred" else esize
    em.need_smem(size * isize)
    em.barrier()
    for regs, d, form in writes:
        for j in range(d.nregs):
            p = em.canonical(d, j)
            if p == "0":
                continue
            idx = form.emit(em, d, j)
            r, st = store_reg(em, cls, regs[j])
            guard = f"@{p} " if p else ""
            em.ins(f"{guard}st.shared.{st} [{em.smem_addr(idx, isize)}], {r}")
    em.barrier()
    return load_reg(em, cls, "shared", em.smem_addr(index, isize))
