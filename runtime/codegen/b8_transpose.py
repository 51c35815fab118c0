"""8-bit B^T by ``ldmatrix.trans`` / ``prmt`` / ``stmatrix``: the consumers' copy of a stage's
B (K x N, N contiguous, TMA column boxes) into a K-major B^T buffer (sm_90a's wgmma and sm_120's
mma.sync read 8-bit B K-major only; docs/pipelines.md section 51).

A warp moves one *atom* at a time: 16 K rows x 32 columns (512 bytes).

* ``ldmatrix.m8n8.x4.trans.b16`` reads it as four 8 x 8 matrices of 16-bit pairs. Matrices 0
  and 1 hold columns 0-15, matrices 2 and 3 columns 16-31. Matrix ``i``'s row ``j`` is K row
  ``4 (j / 2) + 2 ((i % 2) ^ (j / 4)) + j % 2``, so a lane (``r = lane / 4``, ``c = lane % 4``)
  gets K rows ``4 c .. 4 c + 3`` of columns ``2 r`` and ``2 r + 1`` in two registers.
* Two ``prmt`` turn those into B^T rows ``2 r`` and ``2 r + 1``, 4 K bytes each; the same two
  selectors serve the other 16 columns.
* ``stmatrix.m8n8.x4.b16`` writes the four registers as four 8 x 8 matrices of B^T rows.
  Lanes ``r >= 4`` swap their two rows, so each matrix's 8 rows fall on 8 different 16-byte
  bank groups under every swizzle (32, 64, 128 bytes); so do the loads' 8 K rows.

Per 512 bytes a warp issues one ``ldmatrix``, four ``prmt`` and one ``stmatrix``: 8 shared
wavefronts, no bank conflicts. The unit-per-thread copy it replaces (:func:`async_loop.
_transpose_b`: four ``ld.shared.b32``, eight ``prmt``, four ``st.shared.b32`` per 16 bytes)
took 24 wavefronts (2-way conflicts on the loads, 4-way on the stores).

The addresses: a lane's address for the warp's first atom is computed once, before the loop
(:func:`setup`). Every later atom of the warp differs from it by an XOR of the in-row bits
(a multiple of 32 columns or 16 K bytes inside a swizzle span, the same for every lane) and an
add of whole rows and boxes. Each stage, one register per distinct XOR takes the lane's
address with that XOR applied (two instructions), and each atom's add is the instruction's
immediate offset; across the loop a thread keeps four registers (two offsets, two selectors).
"""

from __future__ import annotations

from dataclasses import dataclass

from tilegen.runtime.codegen.core import Emitter
from tilegen.runtime.codegen.tma import swizzled_reg as _swizzled

#: K rows x columns (bytes) of one atom
ATOM_K, ATOM_N = 16, 32
SPANS = (32, 64, 128)
#: atoms whose loads are issued together, at most (:func:`batch_for`)
BATCH = 4
#: registers a consumer thread keeps for other values than its accumulators and the batch
SLACK = 32


@dataclass(frozen=True)
class Atom:
    """One atom of a warp, relative to the warp's first: (add, xor) of its source address
    (the stage's B) and of its destination (B^T)."""

    src_add: int
    src_xor: int
    dst_add: int
    dst_xor: int


def atoms(K: int, N: int, span: int, box: int, tspan: int, tbox: int, warps: int):
    """The atoms of each warp, or None where the copy does not apply: a tile of other than
    16 K rows x 32 columns multiples, swizzle spans of other than 32-128 bytes, or a number of
    warps that is no power of two or does not divide the atoms."""
    if K % ATOM_K or N % ATOM_N or span not in SPANS or tspan not in SPANS:
        return None
    ka, na = K // ATOM_K, N // ATOM_N
    total = ka * na
    if warps & (warps - 1) or total % warps or ka & (ka - 1) or na & (na - 1):
        return None
    out = []
    for j in range(total // warps):
        # warp w takes atoms w + warps j (K atoms fastest): the w part is in the lane's address
        if warps <= ka:
            kd, nd = ATOM_K * (warps * j % ka), ATOM_N * (warps * j // ka)
        else:
            kd, nd = 0, ATOM_N * (warps // ka) * j
        out.append(
            Atom(
                (nd // span) * box + kd * span,
                nd % span,
                (kd // tspan) * tbox + nd * tspan,
                kd % tspan,
            )
        )
    return out


@dataclass
class Lanes:
    """A consumer thread's registers for the copy, live across the K loop."""

    atoms: list
    batch: int  # atoms whose loads go out together
    src: str  # the lane's offset in the stage for the warp's first atom
    dst: str  # ... in B^T
    sel: tuple  # the two prmt selectors


def _boxed(em: Emitter, row, byte, span: int, box: int) -> str:
    """The physical offset of byte ``byte`` of row ``row`` (b32 registers) in a buffer of
    ``span``-byte column boxes of ``box`` bytes each, swizzled by ``span``."""
    col, off, within = em.new("b32"), em.new("b32"), em.new("b32")
    em.ins(f"shr.u32 {col}, {byte}, {span.bit_length() - 1}")
    em.ins(f"mul.lo.s32 {off}, {col}, {box}")
    em.ins(f"mad.lo.s32 {off}, {row}, {span}, {off}")
    em.ins(f"and.b32 {within}, {byte}, {span - 1}")
    em.ins(f"add.s32 {off}, {off}, {within}")
    return _swizzled(em, off, span)


def batch_for(budget: int, acc: int) -> int:
    """Atoms a batch where a thread may use ``budget`` registers and holds ``acc``
    accumulators: each atom of a batch keeps 8 more live (sm_120's 8 consumer warps at 128
    accumulators a thread, under 168 registers, spill at 2)."""
    return max(1, min(BATCH, (budget - acc - SLACK) // 8))


def setup(em: Emitter, b, bt, warps: int, batch: int = BATCH) -> Lanes | None:
    """Each lane's addresses and selectors for stage B ``b`` (async_loop._Operand) into B^T
    ``bt`` (async_loop._KMajor) over ``warps`` consumer warps, ``batch`` atoms' loads issued
    together; None where the copy does not apply (the caller keeps the unit-per-thread
    copy)."""
    K, N = b.tile[-2:]
    if b.esz != 1:
        return None
    plan = atoms(K, N, b.span, b.box_bytes, bt.span, bt.box_bytes, warps)
    if plan is None:
        return None
    _, lane, warp = em.tid()
    ka = K // ATOM_K

    def reg(fmt: str, *args) -> str:
        r = em.new("b32")
        em.ins(fmt.format(r, *args))
        return r

    # the warp's first atom: K rows kw.., columns nw..
    if warps <= ka:
        kw, nw = reg("shl.b32 {}, {}, 4", warp), 0
    else:
        kw = reg("and.b32 {}, {}, {}", warp, ka - 1)
        em.ins(f"shl.b32 {kw}, {kw}, 4")
        nw = reg("shr.u32 {}, {}, {}", warp, (ka - 1).bit_length())
        em.ins(f"shl.b32 {nw}, {nw}, 5")
    i = reg("shr.u32 {}, {}, 3", lane)  # the matrix this lane addresses
    j = reg("and.b32 {}, {}, 7", lane)  # its row
    q = reg("shr.u32 {}, {}, 2", j)  # (i % 2) ^ (j / 4): which of its two K pairs / rows
    t = reg("and.b32 {}, {}, 1", i)
    em.ins(f"xor.b32 {q}, {q}, {t}")
    # source: K row 4 (j / 2) + 2 q + j % 2, columns 16 (i / 2) ..
    k = reg("and.b32 {}, {}, 6", j)
    em.ins(f"shl.b32 {k}, {k}, 1")
    em.ins(f"mad.lo.s32 {k}, {q}, 2, {k}")
    t = reg("and.b32 {}, {}, 1", j)
    em.ins(f"add.s32 {k}, {k}, {t}")
    em.ins(f"add.s32 {k}, {k}, {kw}")
    n = reg("shr.u32 {}, {}, 1", i)
    em.ins(f"shl.b32 {n}, {n}, 4")
    if nw:
        em.ins(f"add.s32 {n}, {n}, {nw}")
    src = _boxed(em, k, n, b.span, b.box_bytes)
    # destination: B^T row 16 (i / 2) + 2 j + q (the source's first column + 2 j + q), K bytes
    # kw ..
    rn = reg("mad.lo.s32 {}, {}, 2, {}", j, n)
    em.ins(f"add.s32 {rn}, {rn}, {q}")
    dst = _boxed(em, rn, kw, bt.span, bt.box_bytes)
    if b.offset:
        em.ins(f"add.s32 {src}, {src}, {b.offset}")  # (1024-aligned: the XORs stay in the row)
    # selectors: lane c = lane % 4 holds K rows 4c, 4c + 1 in matrix 0 (1) for c < 2 (c >= 2);
    # row 2r's bytes are (low.b0, low.b2, high.b0, high.b2), row 2r + 1's the odd bytes; lanes
    # r = lane / 4 >= 4 put row 2r + 1 first
    hi = em.new("pred")
    c = reg("and.b32 {}, {}, 2", lane)
    em.ins(f"setp.ne.u32 {hi}, {c}, 0")
    even = reg("selp.b32 {}, 0x2064, 0x6420, {}", hi)
    odd = reg("selp.b32 {}, 0x3175, 0x7531, {}", hi)
    swap = em.new("pred")
    t = reg("and.b32 {}, {}, 16", lane)
    em.ins(f"setp.ne.u32 {swap}, {t}, 0")
    s0 = reg("selp.b32 {}, {}, {}, {}", odd, even, swap)
    s1 = reg("selp.b32 {}, {}, {}, {}", even, odd, swap)
    return Lanes(plan, batch, src, dst, (s0, s1))


def emit(em: Emitter, lanes: Lanes, sbase, dbase) -> None:
    """Copy the stage at ``sbase`` into the B^T buffer at ``dbase`` (both 1024-aligned)."""
    src, dst = {}, {}  # XOR -> this stage's address of the lane with it applied
    for a in lanes.atoms:
        for addrs, x, lane, base in (
            (src, a.src_xor, lanes.src, sbase),
            (dst, a.dst_xor, lanes.dst, dbase),
        ):
            if x not in addrs:
                addrs[x] = em.new("b32")
                em.ins(f"xor.b32 {addrs[x]}, {lane}, {x}")
                em.ins(f"add.s32 {addrs[x]}, {addrs[x]}, {base}")
    s0, s1 = lanes.sel
    # BATCH atoms' loads go out together, then their prmt and stores: one ldmatrix's latency
    # a batch, where ptxas keeps a load-to-store chain one atom at a time
    for b0 in range(0, len(lanes.atoms), lanes.batch):
        batch = lanes.atoms[b0 : b0 + lanes.batch]
        loaded = []
        for a in batch:
            m = [em.new("b32") for _ in range(4)]
            em.ins(
                f"ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {{{', '.join(m)}}}, "
                f"[{src[a.src_xor]}+{a.src_add}]"
            )
            loaded.append(m)
        for a, m in zip(batch, loaded):
            rows = [em.new("b32") for _ in range(4)]
            em.ins(f"prmt.b32 {rows[0]}, {m[0]}, {m[1]}, {s0}")
            em.ins(f"prmt.b32 {rows[1]}, {m[0]}, {m[1]}, {s1}")
            em.ins(f"prmt.b32 {rows[2]}, {m[2]}, {m[3]}, {s0}")
            em.ins(f"prmt.b32 {rows[3]}, {m[2]}, {m[3]}, {s1}")
            em.ins(
                f"stmatrix.sync.aligned.m8n8.x4.shared.b16 [{dst[a.dst_xor]}+{a.dst_add}], "
                f"{{{', '.join(rows)}}}"
            )
