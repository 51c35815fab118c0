"""Side vectors beside the async loop's registers at the TMA store (docs/pipelines.md
section 36).

When the K loop's result reaches the TMA store by a fragment chain (layouts/async_forms.py
``fragment_chain``), the consumers keep the accumulator in its own register order - the wgmma
fragment (sm_90a) or the TMEM rows (sm_100a) - and the chain's elementwise ops run register by
register. A *side vector* (``async_forms.side_vector``: a 1 x N row such as a bias, or an M x 1
column, broadcast to M x N) is then needed in that order too: register k of the broadcast must
be the vector's element at register k's column (or row). Here the vector, computed as the
layout stage laid it out, is written to its place at the end of the idle stage ring
(``Emitter.async_store["sides"]``: the store stages its tile in the rest), and after the
consumers' barrier each thread reads the elements of its own columns (rows), right before the
op that uses them (``Emitter.op_hooks``: a whole TMEM row beside its 128 accumulators would
otherwise be live across the next vector's barrier, and spill). Where the TMA
store reads the accumulator from tensor memory by column chunks (codegen/tmem_chunks.py), the
elements are read chunk by chunk (:func:`chunk`).
"""

from __future__ import annotations

from tilegen.runtime.codegen.core import Emitter, elem_info, load_reg, store_reg
from tilegen.runtime.codegen.exchange import _runs, row_major, scratch_size
from tilegen.runtime.codegen.wgmma_fragment import row_thread


def _order(em: Emitter, kind: tuple, row: bool) -> tuple:
    """(this thread's first index, [index offset of each distinct register], its alignment in
    elements, expand) for a row vector (``row``: by column) or a column vector (by row) in the
    fragment ``kind`` (``Emitter.fragment_order``'s values); ``expand`` maps the distinct
    registers to the M x N tile's register order."""
    from tilegen.runtime.codegen.async_scaled import WgmmaOrder

    if kind[0] == "wgmma":
        _, M, N = kind
        o = WgmmaOrder(em, M, N)
        first, offs = o.cols() if row else o.rows()
        shape = (1, N) if row else (M, 1)
        return first, offs, 2 if row else 1, lambda regs: o.expand(shape, regs)
    _, M, N, groups = kind[:4]
    r, c, per = row_thread(em, N, groups, M, "x2" in kind[4:])
    if row:
        return c, list(range(per)), per, list
    return r, [0], 1, lambda regs: regs * per


def _pair_rows(em: Emitter, first: str, M: int) -> str:
    """A CTA pair's rows: this CTA's first row of the pair's tile (``rank * M`` on)."""
    from tilegen.runtime.codegen import cta_pair

    r = em.new("b32")
    em.ins(f"mad.lo.s32 {r}, {cta_pair.rank(em)}, {M}, {first}")
    return r


def read_elements(
    em: Emitter, cls: str, isize: int, at: str, first, offs: list, align: int
) -> list:
    """The registers of elements ``first + offs`` of the vector at shared address ``at``: runs
    of consecutive 4- or 8-byte elements as ``ld.shared.v2`` / ``.v4``."""
    a = em.new("b32")
    if isinstance(first, int):
        em.ins(f"add.s32 {a}, {at}, {first * isize}")
    else:
        em.ins(f"mad.lo.s32 {a}, {first}, {isize}, {at}")
    out, k = [], 0
    while k < len(offs):
        n = 1
        if cls in ("b32", "f32", "b64", "f64") and isize in (4, 8):
            n = 16 // isize
            while n > 1 and not (
                offs[k] % n == 0
                and align % n == 0
                and offs[k : k + n] == list(range(offs[k], offs[k] + n))
            ):
                n //= 2
        if n == 1:
            out.append(load_reg(em, cls, "shared", f"{a}+{offs[k] * isize}"))
        else:
            regs = [em.new(cls) for _ in range(n)]
            em.ins(f"ld.shared.v{n}.{cls} {{{', '.join(regs)}}}, [{a}+{offs[k] * isize}]")
            out += regs
        k += n
    return out


def broadcast(em: Emitter, op, kind: tuple) -> None:
    """Emit side vector broadcast ``op`` in fragment ``kind``'s register order: the vector to
    its ring place, the consumers' barrier, then each thread's elements (or, where the store
    reads the accumulator by chunks, nothing yet: :func:`chunk`)."""
    src, res = op.operands[0], op.results[0]
    M, N = tuple(res.type.shape)
    row = tuple(src.type.shape) == (1, N)
    from tilegen.runtime.codegen.async_store import ring_idle

    st = em.async_store
    base, off = st["base"], st["sides"][op]
    ring_idle(em)  # (the ring's end was the last stage's)
    cls, isize = write(em, op, src, base, off)
    em.barrier()
    at = em.new("b32")
    em.ins(f"add.s32 {at}, {base}, {off}")
    first, offs, align, expand = _order(em, kind, row)
    if not row and st.get("pair"):
        first = _pair_rows(em, first, kind[1])
    em.set(res, [])  # (no registers until they are read)
    pending = em.tmem_rows
    if row and pending is not None and kind[0] == "rows":  # read chunk by chunk
        pending.sides[res] = (cls, isize, at, first)
        return

    def read() -> None:  # right before the one op that uses the vector, past every barrier
        em.set(res, expand(read_elements(em, cls, isize, at, first, offs, align)))

    (user,) = res.users
    before, after = em.op_hooks.get(user, (None, None))
    em.op_hooks = {**em.op_hooks, user: (_then(before, read), after or (lambda: None))}


def write(em: Emitter, op, src, base: str, off: int) -> tuple:
    """Write vector ``src`` (as ``op``'s operand, in its layout) to shared memory at ``base +
    off`` in row-major order, its elements at their scratch size; (register class, that
    size)."""
    cls, esize, _ = elem_info(op, src.type)
    isize = scratch_size(cls, esize)
    d, regs = em.dist_of(op, src.type), em.tile(op, src)
    form = row_major(tuple(src.type.shape))
    for j, n in _runs(d, form, cls, isize):  # (copies of an element write the same value)
        idx = em.as_index(form.emit(em, d, j), "b32")
        if isinstance(idx, int):
            addr = f"{base}+{off + idx * isize}"
        else:
            r = em.new("b32")
            em.ins(f"mad.lo.s32 {r}, {idx}, {isize}, {base}")
            addr = f"{r}+{off}"
        if n == 1:
            v, ty = store_reg(em, cls, regs[j])
            em.ins(f"st.shared.{ty} [{addr}], {v}")
        else:
            em.ins(f"st.shared.v{n}.{cls} [{addr}], {{{', '.join(regs[j : j + n])}}}")
    return cls, isize


def _then(first, second):
    """``second`` after ``first`` (None: nothing)."""
    if first is None:
        return second
    return lambda: (first(), second())


def chunk(em: Emitter, pending, c0: int, n: int) -> None:
    """The row vectors' registers for columns ``c0 .. c0 + n`` of the thread's chunk (column
    vectors keep their one register a row)."""
    for res, (cls, isize, at, first) in pending.sides.items():
        em.set(res, read_elements(em, cls, isize, at, first, list(range(c0, c0 + n)), 32))


def offsets(sides: list, ring_bytes: int) -> dict:
    """Each side vector broadcast's byte offset in the stage ring: the last bytes, in order
    (``async_epilogue.sides_reserve`` keeps the store's tile out of them)."""
    from tilegen.runtime.layouts.async_forms import side_bytes

    out, at = {}, ring_bytes - sum(side_bytes(o) for o in sides)
    for o in sides:
        out[o] = at
        at += side_bytes(o)
    return out
