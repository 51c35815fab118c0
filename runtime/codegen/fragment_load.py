"""C, the K loop's initial value, loaded straight in the async accumulator's register order
(docs/pipelines.md section 37).

A GEMM that starts from C (``acc = ct.astype(ct.load(C, ...), ct.float32)``) reaches its loop
by ``layouts/async_forms.init_chain``: a ``tiled_load`` and single-use conversions and
elementwise ops. The layout stage lays C out as a blocked layout - coalesced, or the MMA
accumulator's where that reads whole sectors - but sm_90's wgmma fragment is not one (its rows
64 q + 16 w + 8 h + g are a row permutation of any blocked layout's), so C went through a
scratch buffer the size of the tile to reach the fragment, 64 KB beside the stage ring for a
128 x 128 f32 C. Here each thread loads its own fragment elements from global memory instead
(:func:`load`), in the order the consumers keep the accumulator in (the ``kind``\\ s of
``Emitter.fragment_order``), and the chain's ops run register by register, a
``convert_layout`` passing its registers through: the accumulator starts in its registers
and the scratch is gone.
"""

from __future__ import annotations

from typing import Optional

from tilegen.runtime.codegen.core import Emitter, fail
from tilegen.runtime.codegen.wgmma_fragment import fragment_thread, row_thread
from tilegen.runtime.types import TileType
from tilegen.runtime.layouts.async_forms import init_chain


def mark(em: Emitter, loop, kind: tuple) -> bool:
    """Put ``loop``'s initial value chain (``async_forms.init_chain``) in register order
    ``kind``, before the consumers emit it; whether there is one."""
    chain = init_chain(loop)
    if chain is None:
        return False
    em.fragment_order = {**getattr(em, "fragment_order", {}), **dict.fromkeys(chain, kind)}
    return True


def by_chunks(em: Emitter, loop, per: int) -> Optional[list]:
    """The chain of ``loop``'s initial value when sm_100's consumers write it into tensor memory
    by column chunks (a thread's row of more than ``TMEM_ROWS_AT_ONCE`` values: a 256 x 256
    tile on 8 warps); the deferred prologue then skips its ops (:func:`into_tmem` emits them
    a chunk at a time). Else None."""
    from tilegen.runtime.layouts.async_forms import TMEM_ROWS_AT_ONCE

    if per <= TMEM_ROWS_AT_ONCE:
        return None
    return init_chain(loop)


def into_tmem(em: Emitter, loop, kind: tuple, lane_base: str, per: int) -> None:
    """Write ``loop``'s initial value into this thread's TMEM row at ``lane_base`` a chunk of
    ``tmem_chunks.CHUNK`` columns at a time: each chunk loaded in the rows' order, run through
    the chain's own handlers and stored by ``tcgen05.st``, so only a chunk is live at once."""
    from tilegen.runtime.codegen.tmem_chunks import CHUNK

    chain = init_chain(loop)
    for c0 in range(0, per, CHUNK):
        load(em, chain[0].op, kind, (c0, CHUNK))
        for v in chain[1:]:
            em.emit_op(v.op)
        regs = em.tile(loop, loop.operands[3])
        dst = em.new("b32")
        em.ins(f"add.s32 {dst}, {lane_base}, {c0}")
        em.ins(f"tcgen05.st.sync.aligned.32x32b.x{len(regs)}.b32 [{dst}], {{{', '.join(regs)}}}")
    em.ins("tcgen05.wait::st.sync.aligned")
    em.ins("tcgen05.fence::before_thread_sync")


def _cells(em: Emitter, kind: tuple, op) -> tuple:
    """(this thread's first row, first column, [(row, column) offset of each register], the
    first column's alignment in elements) in register order ``kind`` for ``op``'s tile."""
    if kind[0] == "layout":  # a blocked layout (sm_120's mma.sync fragment): its closed form
        t = op.results[0].type
        d = em.dist_of(op, TileType(tuple(t.shape[-2:]), t.element, kind[1]))
        if (
            d.layout is not d.root
            or d.root.order[0] != 1
            or any(d.wraps(i, k) for k in range(d.nregs) for i in range(2))
        ):
            fail(op, f"PTX backend: C cannot be loaded in the layout {kind[1]}")
        r0, c0 = em.base(d)[:2]
        return r0, c0, [tuple(d.raw[k][:2]) for k in range(d.nregs)], d.root.size_per_thread[1]

    if kind[0] == "wgmma":  # register ((q N/8 + j) 2 + h) 2 + s: row 64 q + 8 h, column 8 j + s
        M, N = kind[1:3]
        r0, _, t = fragment_thread(em, M)
        if "pair" in kind[3:]:  # one CTA of a pair (sm_90): its rows of the pair's tile
            from tilegen.runtime.codegen.fragment_sides import _pair_rows

            r0 = _pair_rows(em, r0, M)
        c0 = em.new("b32")
        em.ins(f"shl.b32 {c0}, {t}, 1")
        cells = [
            (64 * q + 8 * h, 8 * j + s)
            for q in range(M // (16 * em.num_warps))
            for j in range(N // 8)
            for h in range(2)
            for s in range(2)
        ]
        return r0, c0, cells, 2
    _, M, N, groups = kind[:4]  # tcgen05 rows: a thread's row, its columns in order
    r, c, per = row_thread(em, N, groups, M, "x2" in kind[4:])
    if "pair" in kind[4:]:  # one CTA of an sm_100 pair: its rows of the pair's tile
        from tilegen.runtime.codegen.fragment_sides import _pair_rows

        r = _pair_rows(em, r, M)
    return r, c, [(0, k) for k in range(per)], per


def load(em: Emitter, op, kind: tuple, cols: Optional[tuple] = None) -> None:
    """Emit ``tiled_load`` ``op`` (2-d, unmasked, a uniform padding) in register order
    ``kind``: each thread's elements, runs of neighbouring columns as vector loads as wide as
    the layout stage proved the access aligned and uniformly masked. ``cols``: (first, count)
    of the thread's columns only (a chunk of a TMEM row: :func:`into_tmem`)."""
    from tilegen.runtime.codegen.memory import (
        _proven_width,
        _space,
        _tiled_operands,
        ld_opcode,
        load_group,
        mem_types,
        scaled_offset,
        uniform_padding,
    )

    mem, indices, in_bounds = _tiled_operands(em, op)
    kt = mem_types(op, mem.element)
    esize = kt[1]
    opcode = ld_opcode(em, op, _space(mem.type))
    pad = uniform_padding(em, op)
    r0, c0, cells, align = _cells(em, kind, op)
    if cols is not None:
        cells = [(dr, dc) for dr, dc in cells if cols[0] <= dc < cols[0] + cols[1]]
    starts = [em.scalar(op, v) for v in indices]
    lead = len(starts) - 2  # (a batched array's (1, M, N) tile: the batch index as it is)
    first = [em.lincomb(0, [(1, s), (1, b)]) for s, b in zip(starts[lead:], (r0, c0))]
    addr = mem.ptr
    for x, stride in zip(starts[:lead] + first, mem.strides):
        if isinstance(x, int) and x == 0:
            continue
        n = em.new("b64")
        em.ins(f"add.s64 {n}, {addr}, {scaled_offset(em, x, None, stride, esize)}")
        addr = n
    batch = None  # the leading indices within bounds (one predicate)
    for d in range(lead):
        if not in_bounds[d]:
            p = em.lt_u(starts[d], mem.sizes[d])
            if batch is not None:
                both = em.new("pred")
                em.ins(f"and.pred {both}, {batch}, {p}")
                p = both
            batch = p
    sizes, strides, in_bounds = mem.sizes[lead:], mem.strides[lead:], in_bounds[lead:]
    width = 1
    if strides[1] == 1:
        width = max(1, min(_proven_width(op), 16 // esize, align))
    stride = strides[0]
    # a few rows (the wgmma fragment's, visited in turn): an address each; many (a blocked
    # layout's, in order): one running address, advanced row by row, so that the addresses
    # and predicates of 32 rows are not all live beside the loaded values
    few = len({dr for dr, _ in cells}) <= 8 or isinstance(stride, int)
    rows: dict = {}  # row offset -> (address register, immediate bytes)
    preds: dict = {}
    step = None if few else scaled_offset(em, 1, None, stride, esize)  # bytes a row (b64)

    def row_at(dr: int) -> tuple:
        if dr in rows:
            return rows[dr]
        if isinstance(stride, int):
            rows[dr] = (addr, dr * stride * esize)
        elif few:
            a = em.new("b64")
            em.ins(f"add.s64 {a}, {addr}, {scaled_offset(em, dr, None, stride, esize)}")
            rows[dr] = (a, 0)
        else:
            prev, (at, _) = next(iter(rows.items()), (0, (addr, 0)))
            a = em.new("b64")
            em.ins(f"mad.lo.s64 {a}, {step}, {dr - prev}, {at}")
            rows.clear()
            rows[dr] = (a, 0)
        return rows[dr]

    def bound(axis: int, off: int):
        if in_bounds[axis]:
            return batch if axis == 1 else None  # (the batch's bound goes with the columns')
        if (axis, off) not in preds:
            if axis == 0 and not few:  # (the current row's only)
                for key in [key for key in preds if key[0] != 1]:
                    del preds[key]
            p = em.lt_u(em.lincomb(off, [(1, first[axis])]), sizes[axis])
            if axis == 1 and batch is not None:
                both = em.new("pred")
                em.ins(f"and.pred {both}, {batch}, {p}")
                p = both
            preds[axis, off] = p
        return preds[axis, off]

    def guard(dr: int, dc: int):
        p, q = bound(0, dr), bound(1, dc)
        if p is None or q is None:
            return p if q is None else q
        if ("and", dr, dc) not in preds:
            both = em.new("pred")
            em.ins(f"and.pred {both}, {p}, {q}")
            preds["and", dr, dc] = both
        return preds["and", dr, dc]

    out, k = [], 0
    while k < len(cells):
        dr, dc = cells[k]
        n = width
        while n > 1 and not (dc % n == 0 and cells[k : k + n] == [(dr, dc + i) for i in range(n)]):
            n //= 2
        a, imm = row_at(dr)
        col = dc * strides[1] * esize if isinstance(strides[1], int) else None
        if col is None:  # (a column stride known only at run time: one element at a time)
            b = em.new("b64")
            em.ins(f"add.s64 {b}, {a}, {scaled_offset(em, dc, None, strides[1], esize)}")
            a, col = b, 0
        off = imm + col
        ref = f"[{a}+{off}]" if off else f"[{a}]"
        out += load_group(em, opcode, kt, guard(dr, dc), [pad] * n, ref, n)
        k += n
    em.set(op.results[0], out)
    for r in op.results[1:]:
        em.set(r, None)
