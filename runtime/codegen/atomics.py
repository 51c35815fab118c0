"""Atomics: ``atomic_rmw`` / ``atomic_cas`` through pointers, pointer tiles or memref coordinates,
and ``tiled_atomic_rmw`` on memref tiles.

Each element's atomic is issued exactly once: scalars by thread 0, tiles by the canonical copy
of each element (replicated layouts hold several). Masked-off and out-of-bounds elements issue
nothing and return 0 (like the reference interpreter). Where the old values are used, the
issuing thread's result reaches the replicas through shared memory (scalars: every thread;
replicated tiles: every copy). Unused results still take ``atom`` (ptxas turns an ``atom`` whose
result is dead into RED itself). Semantics and scope: ``atom.acq_rel.gpu`` ... (weak:
the plain, relaxed ``atom``).

Modes: integer add (u32/u64), and/or/xor (b32/b64), min/max (s32/s64), umin/umax (u32/u64),
xchg (b32/b64, any 32/64-bit element), addf (f32; f64 from sm_60; f16 with .noftz from sm_70;
bf16 from sm_90), cas (b32/b64; b16 from sm_70).
"""

from __future__ import annotations

from tilegen.runtime.codegen.core import Emitter, fail, handles, is_tile, load_reg, store_reg
from tilegen.runtime.codegen.exchange import row_major
from tilegen.runtime.codegen.memory import (
    Access,
    Elements,
    _memcheck,
    _and,
    _group,
    _per_reg,
    _space,
    _tiled_operands,
    _zero,
    leader,
    mem_types,
    sem_scope,
)

RMW_MODES = ("add", "and", "or", "xor", "xchg", "min", "max", "umin", "umax", "addf")


def atom_kind(em: Emitter, op, mode: str, key: str) -> tuple[str, str]:
    """(PTX operation, PTX type) of an atomic ``mode`` on elements ``key``."""
    bits = {"i32": 32, "i64": 64, "f32": 32, "f64": 64, "ptr": 64}.get(key)
    if mode == "cas":
        if key in ("i16", "f16", "bf16"):
            return "cas", "b16"
        if bits:
            return "cas", f"b{bits}"
    elif mode == "xchg":
        if bits:
            return "exch", f"b{bits}"
    elif mode == "addf":
        if key in ("f32", "f64"):
            return "add", key
        if key == "f16":
            return "add.noftz", "f16"
        if key == "bf16" and em.sm >= 90:
            return "add.noftz", "bf16"
    elif key in ("i32", "i64"):
        if mode == "add":
            return "add", f"u{bits}"
        if mode in ("and", "or", "xor"):
            return mode, f"b{bits}"
        if mode in ("min", "max"):
            return mode, f"s{bits}"
        if mode in ("umin", "umax"):
            return mode[1:], f"u{bits}"
    fail(op, f"PTX backend does not support '{mode}' atomics on {key} for sm_{em.sm} yet")


def _sites(em: Emitter, op, t):
    """(addresses, bounds predicates, Dist or None, element types, state space)."""
    if op.name == "nv_tileaa.tiled_atomic_rmw" and is_tile(t):
        mem, indices, in_bounds = _tiled_operands(em, op)
        acc = Access(em, op, mem, indices, t, in_bounds)
        n = acc.d.nregs
        addrs = [acc.addr(k) for k in range(n)]
        preds = [acc.pred(k) for k in range(n)]
        return addrs, preds, acc.d, mem_types(op, mem.element), _space(mem.type), mem.element, None
    el = Elements(em, op, t)
    return el.addrs, el.preds, el.d, el.kt, el.space, el.key, el


@handles("nv_tileaa.atomic_rmw", "nv_tileaa.tiled_atomic_rmw", "nv_tileaa.atomic_cas")
def atomic(em: Emitter, op) -> None:
    cas = op.name == "nv_tileaa.atomic_cas"
    value = _group(op, "val" if cas else "value")[0]
    t = op.results[0].type
    addrs, preds, d, kt, space, key, el = _sites(em, op, value.type)
    mode = "cas" if cas else RMW_MODES[op.attributes["rmw_mode"].value]
    aop, atype = atom_kind(em, op, mode, key)
    cls = kt[0]
    vals = _per_reg(em, op, value, d)
    cmps = _per_reg(em, op, _group(op, "cmp")[0], d) if cas else None
    mask = _group(op, "mask")
    mregs = _per_reg(em, op, mask[0], d) if mask else [None] * len(addrs)
    used = op.results[0].has_uses
    ordered = sem_scope(em, op)
    ss = f".{space}" if space else ""
    lead = leader(em) if d is None else None
    olds, issuers, guards = [], [], []
    for k in range(len(addrs)):
        c = em.canonical(d, k) if d is not None else lead
        issuers.append(c)
        guards.append(_and(em, _and(em, preds[k], mregs[k]), c))
    if el is not None:
        _memcheck(em, op, el, guards, "atomic")  # --sanitize=memcheck (codegen/sanitize.py)
    for k, addr in enumerate(addrs):
        g = guards[k]
        guard = f"@{g} " if g else ""
        old = em.new(cls)
        if g is not None and used:
            em.ins(f"mov.{cls} {old}, {_zero(cls)}")
        if g != "0":
            srcs = f"{cmps[k]}, {vals[k]}" if cas else vals[k]
            em.ins(f"{guard}atom{ordered}{ss}.{aop}.{atype} {old}, {addr}, {srcs}")
        olds.append(old)
    for r in op.results[1:]:
        em.set(r, None)
    if not used:
        em.set(op.results[0], None)
        return
    if d is None:
        em.set(op.results[0], _broadcast_scalar(em, cls, kt[1], olds[0], lead))
    elif any(c is not None for c in issuers):
        em.set(op.results[0], _broadcast_tile(em, cls, kt[1], olds, issuers, d, t))
    else:
        em.set(op.results[0], olds)


def _broadcast_scalar(em: Emitter, cls: str, esize: int, old: str, lead: str) -> str:
    """Thread 0's ``old`` in every thread, through shared memory."""
    em.need_smem(max(esize, 1))
    em.barrier()
    r, st = store_reg(em, cls, old)
    em.ins(f"@{lead} st.shared.{st} [{em.smem_addr(0, esize)}], {r}")
    em.barrier()
    return load_reg(em, cls, "shared", em.smem_addr(0, esize))


def _broadcast_tile(em: Emitter, cls, esize, olds, issuers, d, t) -> list:
    """Every copy of each element gets its issuing (canonical) copy's ``old``."""
    size = 1
    for s in t.shape:
        size *= s
    isize = {"pred": 1, "b16": 2}.get(cls, esize)  # i8 rides in b16 registers
    form = row_major(tuple(t.shape))
    em.need_smem(size * isize)
    em.barrier()
    for k, (old, c) in enumerate(zip(olds, issuers)):
        if c == "0":
            continue
        r, st = store_reg(em, cls, old)
        guard = f"@{c} " if c else ""
        em.ins(f"{guard}st.shared.{st} [{em.smem_addr(form.emit(em, d, k), isize)}], {r}")
    em.barrier()
    return [
        load_reg(em, cls, "shared", em.smem_addr(form.emit(em, d, k), isize))
        for k in range(d.nregs)
    ]
