"""Shared-memory layouts given as sums of bit fields: a coordinate ``x`` lands at
``sum(mult * bits(x)[lo:lo+width])`` per ``(lo, width, mult)`` field (K-major core matrices,
padded rows, permuted rows). Offsets computed statically or emitted, and a register tile
stored into such a layout.
"""

from __future__ import annotations

from tilegen.runtime.codegen.core import Emitter


def fields_static(x: int, fields) -> int:
    """``sum(mult * bits(x)[lo:lo+width])`` for a known ``x``."""
    out = 0
    for lo, width, mult in fields:
        v = x >> lo
        if width is not None:
            v &= (1 << width) - 1
        out += v * mult
    return out


def fields_emit(em: Emitter, x, fields, limit: int):
    """``sum(mult * bits(x)[lo:lo+width])`` for a b32 register (or int) ``x`` < ``limit``."""
    if isinstance(x, int):
        return fields_static(x, fields)
    terms = []
    for lo, width, mult in fields:
        if width == 0 or (limit - 1) >> lo == 0:
            continue
        if lo == 0 and (width is None or (limit - 1) >> width == 0):
            terms.append((mult, x))
            continue
        r = x
        if lo:
            r = em.new("b32")
            em.ins(f"shr.u32 {r}, {x}, {lo}")
        if width is not None and (limit - 1) >> (lo + width):
            m = em.new("b32")
            em.ins(f"and.b32 {m}, {r}, {(1 << width) - 1}")
            r = m
        terms.append((mult, r))
    return em.lincomb(0, terms)


def _pack_words(em: Emitter, regs, esz: int) -> list:
    """32-bit words of consecutive elements (``esz`` bytes each, first in the low bits)."""
    if esz == 4:
        return list(regs)
    words = []
    if esz == 2:
        for i in range(0, len(regs), 2):
            w = em.new("b32")
            em.ins(f"mov.b32 {w}, {{{regs[i]}, {regs[i + 1]}}}")
            words.append(w)
        return words
    for i in range(0, len(regs), 4):  # bytes held in the low half of b16 registers
        lo, hi, w = em.new("b32"), em.new("b32"), em.new("b32")
        em.ins(f"mov.b32 {lo}, {{{regs[i]}, {regs[i + 1]}}}")
        em.ins(f"mov.b32 {hi}, {{{regs[i + 2]}, {regs[i + 3]}}}")
        em.ins(f"prmt.b32 {w}, {lo}, {hi}, 0x6420")
        words.append(w)
    return words


def write_fields(
    em: Emitter, regs, d, dim_fields, kdim: int, byte_off: int, esz: int, base=None
) -> None:
    """Store every register of a tile with layout ``d`` at the shared byte address
    ``byte_off + sum_i F_i(coord_i)``, each ``F_i`` a sum of bit fields times constants (so
    ``F(base + raw) = F(base) + F(raw)``: the thread part is computed once, each register's
    part is an immediate; registers whose coordinates wrap are addressed at run time). Runs of
    registers consecutive along result dim ``kdim`` (K, contiguous within a 16-byte core-matrix
    row) are packed into 32-bit words and stored with one ``st.shared[.v2/.v4].b32`` (f64:
    one ``st.shared.f64`` a register)."""
    st = {1: "b8", 2: "b16", 4: "b32", 8: "f64"}[esz]
    key = ("wg-fields", d.layout, d.shape, dim_fields)
    if key not in em._smem_refs:  # the thread's byte offset, computed once
        with em.hoisted():
            bases = em.base(d)
            parts = []
            for i, fields in enumerate(dim_fields):
                rd = d.kept[i]
                lim = d.max_base[rd] + 1
                parts.append((1, fields_emit(em, bases[rd], fields, lim)))
            em._smem_refs[key] = em.as_index(em.lincomb(0, parts), "b32")
    off = em._smem_refs[key]
    thr = em.new("b32")  # in the scratch, or another shared array (``base``)
    start = em.smem_base() if base is None else base
    em.ins(f"add.s32 {thr}, {start}, {off}")
    rk = d.kept[kdim]
    spt = d.root.size_per_thread[rk]
    vec = 1
    while vec * 2 <= min(spt, 16 // esz):
        vec *= 2
    if vec * esz < 4 or esz == 8:
        vec = 1
    k = 0
    while k < d.nregs:
        if any(d.wraps(rd, k) for rd in d.kept):
            parts = []
            for i, fields in enumerate(dim_fields):
                x = em.coord(d, k, i)
                parts.append((1, fields_emit(em, x, fields, d.shape[i])))
            rel = em.as_index(em.lincomb(0, parts), "b32")
            if isinstance(rel, int):  # (from ``start``: the scratch, or the ``base`` array)
                em.ins(f"st.shared.{st} [{start}+{rel + byte_off}], {regs[k]}")
            else:
                addr = em.new("b32")
                em.ins(f"add.s32 {addr}, {start}, {rel}")
                em.ins(f"st.shared.{st} [{addr}+{byte_off}], {regs[k]}")
            k += 1
            continue
        static = sum(fields_static(d.raw[k][rd], fields) for rd, fields in zip(d.kept, dim_fields))
        run = 1
        if vec > 1 and d.raw[k][rk] % vec == 0 and k + vec <= d.nregs:
            want = list(d.raw[k])
            ok = True
            for i in range(1, vec):
                want[rk] += 1
                if tuple(d.raw[k + i]) != tuple(want) or any(d.wraps(rd, k + i) for rd in d.kept):
                    ok = False
                    break
            run = vec if ok else 1
        if run == 1:
            em.ins(f"st.shared.{st} [{thr}+{static + byte_off}], {regs[k]}")
        else:
            words = _pack_words(em, regs[k : k + run], esz)
            v = f".v{len(words)}" if len(words) > 1 else ""
            src = f"{{{', '.join(words)}}}" if len(words) > 1 else words[0]
            em.ins(f"st.shared{v}.b32 [{thr}+{static + byte_off}], {src}")
        k += run
