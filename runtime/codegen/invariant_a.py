"""Loop-invariant A operands (attention's Q) written once, before their loop, into a
``.shared`` array of their own in the layout their dot reads: wgmma's K-major rows, tcgen05's,
or mma.sync's padded rows for ``ldmatrix``.
"""

from __future__ import annotations

from tilegen.runtime.codegen.core import ELEMENTS, CodegenError, Emitter, elem_key
from tilegen.runtime.codegen.mma_rows import select_row
from tilegen.runtime.codegen.mma_staging import padded_pitch, staged_of
from tilegen.runtime.codegen.smem_fields import write_fields
from tilegen.runtime.codegen.tcgen05_dot import keep_fields, tcgen05_plan
from tilegen.runtime.codegen.wgmma_layout import wgmma_a_fields, wgmma_plan
from tilegen.runtime.layouts.mma_choice import wgmma_sbo


def _outside(v, loop) -> bool:
    """``v`` is defined outside ``loop`` (not by an op or block nested in it)."""
    block = v.op.parent if hasattr(v, "op") else getattr(v, "block", None)
    while block is not None:
        owner = block.parent_op if hasattr(block, "parent_op") else None
        if owner is loop:
            return False
        block = owner.parent if owner is not None else None
    return True


def _before(v, op) -> bool:
    """``v`` is defined before ``op`` in program order (in ``op``'s block ahead of it, or in a
    block enclosing it): its registers exist where ``op`` starts."""
    block = v.op.parent if hasattr(v, "op") else getattr(v, "block", None)
    at = v.op if hasattr(v, "op") else None
    while block is not None and block is not op.parent:
        at = block.parent_op if hasattr(block, "parent_op") else None
        block = at.parent if at is not None else None
    if block is None:  # not nested in op's block: an enclosing scope's value
        return True
    return at is None or block.ops.index(at) < block.ops.index(op)


def keep_invariant_a(
    em: Emitter, loop, sync: bool = True, start=None, written=None, rows: bool = False
) -> None:
    """Before ``loop``: the A operand of each wgmma dot of its body that is defined outside it
    and held in registers (attention's Q tile) is written once into a ``.shared`` array of its
    own, in the layout wgmma_dot reads (:func:`wgmma_a_fields`), instead of into the scratch in
    every iteration; the dot then reads it there (``Emitter.resident_a``), and a dot that
    writes nothing to shared memory needs no barrier either. ``start``: write only the A
    operands defined before that op (the first loop of an async chain, written before the
    warp groups split, section 24); ``sync=False``: the caller's barrier orders the writes
    (they end with the proxy fence); ``written``: the regions this straight-line run wrote
    already (a chain's loops share Q's: one write); ``rows``: mma.sync dots' A operands too,
    kept row-major at :func:`padded_pitch` for ``ldmatrix`` (sm_120's general async form, whose dots
    read B from the stage: ``mma._mma_sync_staged``)."""
    body = loop.regions[0].blocks[0] if loop.regions and loop.regions[0].blocks else None
    kept = proxied = 0
    for op in body.ops if body is not None else ():
        if op.name != "nv_tileaa.dot" or op in em.resident_a:
            continue
        plan = wgmma_plan(op, em.num_warps, em.sm)
        tc = tcgen05_plan(op, em.num_warps, em.sm) if plan is None else None
        a = op.operands[0]
        sync_rows = rows and plan is None and tc is None and _kept_rows(em, op)
        if (plan is None and tc is None and not sync_rows) or not _outside(a, loop):
            continue
        if staged_of(em, a) is not None or (start is not None and not _before(a, start)):
            continue
        M, K = a.type.shape
        if sync_rows:  # row-major, the pitch ldmatrix reads (_mma_sync_staged)
            nbytes, fields, esz = sync_rows
        elif tc is not None:  # rows in order (TMEM lane = row)
            nbytes, fields = keep_fields(tc)
            esz = tc.esz
        else:
            nbytes, fields = M // 8 * wgmma_sbo(K, plan.esz), wgmma_a_fields(
                K, plan.esz, plan.groups
            )
            esz = plan.esz
        d = em.dist_of(op, a.type)
        # one array per kept value and layout: the loops loop_split makes of one loop (each
        # with its own dot) share it; each still writes it (the copies may sit on paths that
        # do not all pass the first), after the earlier loop's dots have waited
        key = (a, d.layout, nbytes, esz, repr(fields))
        region = em.resident_by_value.get(key)
        if region is None:
            region = em.resident_by_value[key] = em.resident_region(nbytes)
        em.resident_a[op] = region
        if written is not None:
            if region in written:
                continue
            written.add(region)
        write_fields(em, em.tile(op, a), d, fields, 1, 0, esz, base=region)
        kept += 1
        proxied += not sync_rows  # (wgmma / tcgen05 read it through the async proxy)
    if proxied:
        em.ins("fence.proxy.async.shared::cta")
    if kept and sync:
        em.barrier()


def _kept_rows(em: Emitter, op):
    """(bytes, fields, element size) of mma.sync dot ``op``'s A kept row-major at
    :func:`padded_pitch` (its rows padded to the instruction's M), or None where the dot does not
    read A by ``ldmatrix`` (``mma._mma_sync_staged``'s ``use_ldm``)."""
    a, b, c = op.operands[:3]
    if a.type.rank != 2 or len(op.operands) != 3:
        return None
    try:
        row = select_row(op, elem_key(a.type), elem_key(b.type), elem_key(c.type), em.sm)
    except CodegenError:
        return None
    esz = ELEMENTS[elem_key(a.type)][1]
    if row is None or row.frag_cls != "b32" or row.shape[2] * esz != 32:
        return None
    M, K = a.type.shape
    pa = padded_pitch(K, esz)
    return -(-M // row.shape[0]) * row.shape[0] * pa, (((0, None, pa),), ((0, None, esz),)), esz
