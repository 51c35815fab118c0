"""Where the async loop's TMA store stages its tile in the idle stage ring (docs/pipelines.md
section 8): each register's (address register, offset) for the wgmma fragment, the TMEM rows
or the value's own layout - row-major, or in 128-byte-swizzled column boxes - and the shared
stores that write them there (async_store.py issues the copies).
"""

from __future__ import annotations

from tilegen.runtime.codegen.core import Emitter
from tilegen.runtime.codegen.wgmma_fragment import fragment_thread, row_thread, warp_row


def swizzle_fits(d, esz: int) -> list | None:
    """The 16-byte chunk steps of a 2-d tile's registers where it can be written into
    128-byte-swizzled column boxes with one address register a step (:func:`
    layout_swizzled_refs`), or None: 16- or 32-bit elements, rows of whole 128-byte columns,
    every register's row offset a multiple of 8 (its rows' swizzle key is its thread's) and
    no register wrapping; no thread's element straddles a 16-byte chunk."""
    if esz not in (2, 4) or len(d.kept) != 2 or (d.shape[1] * esz) % 128:
        return None
    rk, ck = d.kept
    if any(d.raw[k][rk] % 8 or d.wraps(rk, k) or d.wraps(ck, k) for k in range(d.nregs)):
        return None
    inner = max(d.base(t)[ck] * esz % 16 for t in range(d.root.num_threads()))
    if any(inner + d.raw[k][ck] * esz % 16 + esz > 16 for k in range(d.nregs)):
        return None
    return sorted({d.raw[k][ck] * esz // 16 for k in range(d.nregs)})


def layout_swizzled_refs(em: Emitter, d, M: int, esz: int, base: str) -> list:
    """(address register, offset) of each register of ``d`` (:func:`swizzle_fits`) in
    ``N * esz / 128`` boxes of M 128-byte rows at ``base``, chunk ``c`` of row ``r`` at chunk
    ``c ^ (r % 8)`` (the TMA store's 128-byte swizzle): the thread's byte column T and row
    base are registers; for each chunk step v of its registers, chunk T / 16 + v's box and
    swizzled place is one register, each register's row offset and bytes in its chunk an
    immediate. Rows 8 apart share the key, so a warp's stores spread over the banks."""
    rk, ck = d.kept
    bases = em.base(d)
    rb, cb = bases[rk], bases[ck]
    t = em.new("b32")  # the thread's byte column
    em.ins(f"mul.lo.s32 {t}, {cb}, {esz}" if not isinstance(cb, int) else f"mov.b32 {t}, 0")
    key, t16, rowbase = em.new("b32"), em.new("b32"), em.new("b32")
    if isinstance(rb, int):
        em.ins(f"mov.b32 {key}, 0")
        em.ins(f"mov.b32 {rowbase}, {base}")
    else:
        em.ins(f"and.b32 {key}, {rb}, 7")
        em.ins(f"mad.lo.s32 {rowbase}, {rb}, 128, {base}")
    inner = em.new("b32")
    em.ins(f"and.b32 {inner}, {t}, 15")
    em.ins(f"add.s32 {rowbase}, {rowbase}, {inner}")
    em.ins(f"shr.u32 {t16}, {t}, 4")
    addr = {}
    for v in swizzle_fits(d, esz):
        c, x, a = em.new("b32"), em.new("b32"), em.new("b32")
        em.ins(f"add.s32 {c}, {t16}, {v}")
        em.ins(f"and.b32 {x}, {c}, 7")
        em.ins(f"xor.b32 {x}, {x}, {key}")
        em.ins(f"shr.u32 {c}, {c}, 3")
        em.ins(f"mul.lo.s32 {a}, {c}, {M * 128}")
        em.ins(f"mad.lo.s32 {a}, {x}, 16, {a}")
        em.ins(f"add.s32 {a}, {a}, {rowbase}")
        addr[v] = a
    refs = []
    for k in range(d.nregs):
        r, b = d.raw[k][rk], d.raw[k][ck] * esz
        refs.append((addr[b // 16], r * 128 + b % 16))
    return refs


def ring_refs(em: Emitter, d, mults: tuple, esz: int, base: str) -> list:
    """(address register, byte offset) of each register of distribution ``d`` (coordinates that
    do not wrap) in a tile at shared address ``base``, element (c_0, ..) at ``sum(m_i c_i)``:
    one per-thread address, an immediate a register."""
    bases = em.base(d)
    tp = em.lincomb(0, [(m, bases[d.kept[i]]) for i, m in enumerate(mults)])
    at = em.new("b32")
    if isinstance(tp, int):
        em.ins(f"add.s32 {at}, {base}, {tp * esz}")
    else:
        em.ins(f"mad.lo.s32 {at}, {tp}, {esz}, {base}")
    return [
        (at, sum(m * d.raw[k][d.kept[i]] for i, m in enumerate(mults)) * esz)
        for k in range(d.nregs)
    ]


def write_ring(em: Emitter, regs: list, refs: list, esz: int, sfx: str, fragment) -> None:
    """Store ``regs`` at their ring places ``refs`` ((address register, offset) each): two
    16-bit neighbours as one b32, runs of 32-bit neighbours as v2 / v4 stores."""
    k = 0
    while k < len(refs):  # two 16-bit neighbours in a row: one 32-bit store
        (reg, imm), nxt = refs[k], refs[k + 1] if k + 1 < len(refs) else None
        if esz == 2 and imm % 4 == 0 and nxt == (reg, imm + 2):
            both = em.new("b32")
            em.ins(f"mov.b32 {both}, {{{regs[k]}, {regs[k + 1]}}}")
            em.ins(f"st.shared.b32 [{reg}+{imm}], {both}")
            k += 2
            continue
        # 32-bit neighbours (registers in position order: their address registers are 8- or,
        # for TMEM rows, 16-byte aligned) go out as v2 / v4 stores
        n = 1
        while esz == 4 and fragment is not None and n < 4 and k + n < len(refs):
            if refs[k + n] != (reg, imm + 4 * n):
                break
            n += 1
        v = 4 if n == 4 and imm % 16 == 0 and fragment[0] == "rows" else 2 if n >= 2 else 1
        if v > 1 and imm % (4 * v) == 0:
            vals = ", ".join(regs[k : k + v])
            em.ins(f"st.shared.v{v}.{sfx} [{reg}+{imm}], {{{vals}}}")
            k += v
            continue
        em.ins(f"st.shared.{sfx} [{reg}+{imm}], {regs[k]}")
        k += 1


def _swizzled_chunk(em: Emitter, chunk, key, rowbase) -> str:
    """Register: ``rowbase`` plus 16-byte chunk ``chunk`` of a 128-byte row under the 128-byte
    swizzle, ``key`` being the row's index mod 8 (chunk ``chunk ^ key``)."""
    x = em.new("b32")
    em.ins(f"xor.b32 {x}, {chunk}, {key}")
    em.ins(f"shl.b32 {x}, {x}, 4")
    em.ins(f"add.s32 {x}, {x}, {rowbase}")
    return x


def stmatrix_store(em: Emitter, regs: list, M: int, N: int, base) -> None:
    """16-bit wgmma fragment registers -> the 128-byte-swizzled boxes of :func:`swizzled_refs`
    with ``stmatrix.m8n8.x4``: the fragment of rows 8 h .. 8 h + 7 and columns 8 j .. 8 j + 7 of
    an m64 instance is exactly an m8n8 matrix fragment (lane 4 g + t: row g, columns 2 t and
    2 t + 1 in one b32), so one instruction stores four of them, (j, 0), (j, 1), (j + 1, 0),
    (j + 1, 1), with lane 8 m + i giving the address of row i of matrix m."""
    _, lane, _ = em.tid()
    nq = M // (16 * em.num_warps)
    i, m, hh, dj = (em.new("b32") for _ in range(4))
    em.ins(f"and.b32 {i}, {lane}, 7")
    em.ins(f"shr.u32 {m}, {lane}, 3")
    em.ins(f"and.b32 {hh}, {m}, 1")
    em.ins(f"shr.u32 {dj}, {m}, 1")
    row = warp_row(em, M, i)  # + 8 hh: this lane's row of instance 0
    em.ins(f"mad.lo.s32 {row}, {hh}, 8, {row}")
    rowaddr = em.new("b32")
    em.ins(f"mad.lo.s32 {rowaddr}, {row}, 128, {base}")
    chunk = {}
    for c0 in range(0, min(8, N // 8), 2):  # chunk (c0 + dj) of the row, swizzled by row % 8 = i
        c = em.new("b32")
        em.ins(f"add.s32 {c}, {dj}, {c0}")
        chunk[c0] = _swizzled_chunk(em, c, i, rowaddr)

    def packed(q: int, j: int, h: int) -> str:
        k = ((q * (N // 8) + j) * 2 + h) * 2
        r = em.new("b32")
        em.ins(f"mov.b32 {r}, {{{regs[k]}, {regs[k + 1]}}}")
        return r

    for q in range(nq):
        for j0 in range(0, N // 8, 2):
            four = [packed(q, j0 + dj_, h) for dj_ in range(2) for h in range(2)]
            imm = j0 // 8 * M * 128 + 64 * q * 128
            em.ins(
                f"stmatrix.sync.aligned.m8n8.x4.shared.b16 [{chunk[j0 % 8]}+{imm}], "
                f"{{{', '.join(four)}}}"
            )


def swizzled_refs(em: Emitter, fragment: tuple, esz: int, base) -> list | None:
    """(address register, offset) of each accumulator register in the stage ring laid out as
    ``N * esz / 128`` TMA boxes of 128-byte rows with the 128-byte swizzle (box b at
    ``base + b * M * 128``; in it, 16-byte chunk c of row r sits at chunk ``c ^ (r % 8)``):
    the warp's stores then spread over all banks, where unswizzled rows 256 bytes apart hit
    the same ones. None where the layout does not fit: rows not a multiple of 128 bytes, or a
    wgmma fragment of other than 16- or 32-bit elements (whose pairs never straddle a chunk)."""
    kind, M, N = fragment[:3]
    groups = fragment[3] if kind == "rows" else 1
    if (N * esz) % 128 or (kind == "wgmma" and esz not in (2, 4)) or (N // groups * esz) % 128:
        return None
    refs, cache = [], {}

    def chunk_addr(chunk: int, key, rowbase):
        if chunk not in cache:
            cache[chunk] = _swizzled_chunk(em, key, chunk, rowbase)
        return cache[chunk]

    rowbase = em.new("b32")
    if kind == "wgmma" and esz == 4:
        # row r0 + 64 q + 8 h (r % 8 = g); column 8 j + 2 t + s is byte 32 (j % 4) + 8 t + 4 s
        # of box j / 4's row: chunk 2 (j % 4) + t / 2 (swizzled: ^ g), byte 8 (t % 2) + 4 s in it
        r0, g, t = fragment_thread(em, M)
        th, tl = em.new("b32"), em.new("b32")
        em.ins(f"shr.u32 {th}, {t}, 1")
        em.ins(f"and.b32 {tl}, {t}, 1")
        em.ins(f"mad.lo.s32 {rowbase}, {r0}, 128, {base}")
        em.ins(f"mad.lo.s32 {rowbase}, {tl}, 8, {rowbase}")
        chunks = []
        for jj in range(4):
            c = em.new("b32")
            em.ins(f"add.s32 {c}, {th}, {2 * jj}")
            chunks.append(_swizzled_chunk(em, c, g, rowbase))
        for q in range(M // (16 * em.num_warps)):
            for j in range(N // 8):
                for h in range(2):
                    for s in range(2):
                        off = j // 4 * M * 128 + (64 * q + 8 * h) * 128 + 4 * s
                        refs.append((chunks[j % 4], off))
        return refs
    if kind == "wgmma":  # row r0 + 64 q + 8 h (r % 8 = g), bytes 16 j + 4 t + 2 s
        r0, g, t = fragment_thread(em, M)
        em.ins(f"mad.lo.s32 {rowbase}, {r0}, 128, {base}")
        em.ins(f"mad.lo.s32 {rowbase}, {t}, 4, {rowbase}")
        for q in range(M // (16 * em.num_warps)):
            for j in range(N // 8):
                for h in range(2):
                    for s in range(2):
                        off = j // 8 * M * 128 + (64 * q + 8 * h) * 128 + 2 * s
                        refs.append((chunk_addr(j % 8, g, rowbase), off))
        return refs
    # tcgen05 rows: thread 32 (w % 4) + lane holds that row, columns (w / 4) N / G .. in order
    # (whole 128-byte boxes: box (w / 4) N esz / 128 G ..)
    _, lane, _ = em.tid()
    row, col, per = row_thread(em, N, groups, M, "x2" in fragment[4:])
    key = em.new("b32")
    em.ins(f"and.b32 {key}, {lane}, 7")
    em.ins(f"mad.lo.s32 {rowbase}, {row}, 128, {base}")
    box = em.new("b32")
    em.ins(f"mul.lo.s32 {box}, {col}, {esz * M}")  # (col esz / 128) boxes of M 128 bytes
    em.ins(f"add.s32 {rowbase}, {rowbase}, {box}")
    for c in range(per):
        x = c * esz
        refs.append((chunk_addr(x % 128 >> 4, key, rowbase), x // 128 * M * 128 + (x & 15)))
    return refs
