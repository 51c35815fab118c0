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
wavefronts, no bank conflicts. The unit-per-thread copy it replaces
(:func:`async_convert.transpose_b`: four ``ld.shared.b32``, eight ``prmt``, four
``st.shared.b32`` per 16 bytes) took 24 wavefronts (2-way conflicts on the loads, 4-way on the
stores).

The addresses: a lane's address for the warp's first atom is computed once, before the loop
(:func:`setup`). Every later atom of the warp differs from it by an XOR of the in-row bits
(a multiple of 32 columns or 16 K bytes inside a swizzle span, the same for every lane) and an
add of whole rows and boxes. Each stage, one register per distinct XOR takes the lane's
address with that XOR applied (two instructions), and each atom's add is the instruction's
immediate offset; across the loop a thread keeps four registers (two offsets, two selectors).

Today's path (:func:`raw_copy`, cp.async staging, sm_80 on) uses the same atoms on B's raw,
unswizzled K x N copy into whatever B^T layout its MMA reads (``mma_staging.transpose_bytes``'s
bit-field sums): ``stmatrix`` from sm_90 on where B^T's rows hold 16 contiguous K bytes, four
``st.shared.b32`` a lane before. The upper lanes' row swap is taken where the bank rule
(runtime/smem_banks.py) says it clears conflicts. It replaces a copy of one ``st.shared.b8`` a
byte (docs/pipelines.md section 54).
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
        kd, nd = _atom_offset(j, warps, ka)
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


def _reg(em: Emitter, fmt: str, *args) -> str:
    r = em.new("b32")
    em.ins(fmt.format(r, *args))
    return r


def _first_atom(em: Emitter, warps: int, ka: int) -> tuple:
    """(kw, nw): the K row and column of the warp's first atom (atom w, K atoms fastest); nw
    is 0 where every warp's atoms start in the first column."""
    _, _, warp = em.tid()
    if warps <= ka:
        return _reg(em, "shl.b32 {}, {}, 4", warp), 0
    kw = _reg(em, "and.b32 {}, {}, {}", warp, ka - 1)
    em.ins(f"shl.b32 {kw}, {kw}, 4")
    nw = _reg(em, "shr.u32 {}, {}, {}", warp, (ka - 1).bit_length())
    em.ins(f"shl.b32 {nw}, {nw}, 5")
    return kw, nw


def _load_lane(em: Emitter, kw, nw) -> tuple:
    """(i, j, q, k, n) of the lane's ldmatrix row: matrix ``i``, its row ``j``, ``q = (i % 2) ^
    (j / 4)``, and the K row ``k = kw + 4 (j / 2) + 2 q + j % 2`` and first column ``n = nw +
    16 (i / 2)`` it addresses (the module docstring)."""
    _, lane, _ = em.tid()
    i = _reg(em, "shr.u32 {}, {}, 3", lane)
    j = _reg(em, "and.b32 {}, {}, 7", lane)
    q = _reg(em, "shr.u32 {}, {}, 2", j)
    t = _reg(em, "and.b32 {}, {}, 1", i)
    em.ins(f"xor.b32 {q}, {q}, {t}")
    k = _reg(em, "and.b32 {}, {}, 6", j)
    em.ins(f"shl.b32 {k}, {k}, 1")
    em.ins(f"mad.lo.s32 {k}, {q}, 2, {k}")
    t = _reg(em, "and.b32 {}, {}, 1", j)
    em.ins(f"add.s32 {k}, {k}, {t}")
    em.ins(f"add.s32 {k}, {k}, {kw}")
    n = _reg(em, "shr.u32 {}, {}, 1", i)
    em.ins(f"shl.b32 {n}, {n}, 4")
    if nw:
        em.ins(f"add.s32 {n}, {n}, {nw}")
    return i, j, q, k, n


def _selectors(em: Emitter, swap: bool) -> tuple:
    """The two ``prmt`` selectors of the lane. Lane ``c = lane % 4`` holds K rows 4c, 4c + 1 in
    matrix 0 (1) for c < 2 (c >= 2); row 2r's bytes are (low.b0, low.b2, high.b0, high.b2), row
    2r + 1's the odd bytes; with ``swap``, lanes r = lane / 4 >= 4 put row 2r + 1 first."""
    _, lane, _ = em.tid()
    hi = em.new("pred")
    c = _reg(em, "and.b32 {}, {}, 2", lane)
    em.ins(f"setp.ne.u32 {hi}, {c}, 0")
    even = _reg(em, "selp.b32 {}, 0x2064, 0x6420, {}", hi)
    odd = _reg(em, "selp.b32 {}, 0x3175, 0x7531, {}", hi)
    if not swap:
        return even, odd
    sw = em.new("pred")
    t = _reg(em, "and.b32 {}, {}, 16", lane)
    em.ins(f"setp.ne.u32 {sw}, {t}, 0")
    return _reg(em, "selp.b32 {}, {}, {}, {}", odd, even, sw), _reg(
        em, "selp.b32 {}, {}, {}, {}", even, odd, sw
    )


def _atom_offset(t: int, warps: int, ka: int) -> tuple:
    """(K rows, columns) of a warp's atom ``t`` (atom w + warps t) past its first."""
    if warps <= ka:
        return ATOM_K * (warps * t % ka), ATOM_N * (warps * t // ka)
    return 0, ATOM_N * (warps // ka) * t


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
    ka = K // ATOM_K
    kw, nw = _first_atom(em, warps, ka)
    i, j, q, k, n = _load_lane(em, kw, nw)
    src = _boxed(em, k, n, b.span, b.box_bytes)
    # destination: B^T row 16 (i / 2) + 2 j + q (the source's first column + 2 j + q), K bytes
    # kw ..
    rn = _reg(em, "mad.lo.s32 {}, {}, 2, {}", j, n)
    em.ins(f"add.s32 {rn}, {rn}, {q}")
    dst = _boxed(em, rn, kw, bt.span, bt.box_bytes)
    if b.offset:
        em.ins(f"add.s32 {src}, {src}, {b.offset}")  # (1024-aligned: the XORs stay in the row)
    s0, s1 = _selectors(em, True)
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


# ----------------------------------------------------------------------------- today's path
def _raw_fits(pitch: int, R: int, C: int, fr, fc, row_off: int, sm: int, warps: int):
    """Whether :func:`raw_copy` applies, and with which stores ("stmatrix" or "b32"): whole
    atoms, a power-of-two number of warps, 16-byte rows in the source, and B^T rows whose K
    bytes are contiguous (16 at a time for ``stmatrix``, 4 for ``st.shared.b32``)."""
    from tilegen.runtime.codegen.smem_fields import fields_static as F

    if R % ATOM_K or C % ATOM_N or pitch % 16 or warps & (warps - 1) or sm < 75:
        return None
    ka, na = R // ATOM_K, C // ATOM_N
    if (warps > ka and warps % ka) or (warps <= ka and ka % warps):
        return None
    if any(F(n, fc) % 4 for n in range(C)):
        return None
    ks = [F(k + row_off, fr) for k in range(R)]
    if any(ks[k] % 4 or any(ks[k + i] != ks[k] + i for i in range(1, 4)) for k in range(0, R, 4)):
        return None
    rows16 = all(F(n, fc) % 16 == 0 for n in range(C)) and all(
        ks[k] % 16 == 0 and all(ks[k + i] == ks[k] + i for i in range(16)) for k in range(0, R, 16)
    )
    return "stmatrix" if sm >= 90 and rows16 else "b32"


def _store_rows(swap: bool) -> list:
    """B^T row (within the atom's 32) of each lane's four registers after the ``prmt``:
    ``rows[lane][m]``; lanes ``r = lane / 4 >= 4`` put row ``2 r + 1`` first when ``swap``."""
    out = []
    for lane in range(32):
        r = lane // 4
        s = int(swap and r >= 4)
        out.append([16 * (m // 2) + 2 * r + ((m % 2) ^ s) for m in range(4)])
    return out


def _raw_dst_cost(kind: str, swap: bool, fr, fc, row_off: int) -> int:
    """Shared-memory wavefronts of one atom's stores (runtime/smem_banks.py's rule)."""
    from tilegen.runtime.codegen.smem_fields import fields_static as F
    from tilegen.runtime.smem_banks import phase_wavefronts, warp_wavefronts

    rows = _store_rows(swap)
    if kind == "stmatrix":  # matrix m's row j: lanes r = j's register m, K bytes 0..15
        return sum(
            phase_wavefronts([F(rows[4 * j][m], fc) + F(row_off, fr) for j in range(8)], 16)
            for m in range(4)
        )
    return sum(
        warp_wavefronts([F(rows[ln][m], fc) + F(4 * (ln % 4) + row_off, fr) for ln in range(32)], 4)
        for m in range(4)
    )


def raw_copy(
    em: Emitter, src: str, pitch: int, R: int, C: int, fr, fc, dst: str, row_off: int, acc: int
) -> bool:
    """Today's path (cp.async staging): the R x C byte matrix at shared ``src`` (rows ``pitch``
    bytes apart, unswizzled) into B^T at shared ``dst``, element (r, c) at ``dst + F_c(c) +
    F_r(r + row_off)`` (``mma_staging.transpose_bytes``'s bit-field sums), a warp an atom at a time:
    ``ldmatrix .trans``, ``prmt`` and ``stmatrix`` (sm_90 on, B^T rows of 16 contiguous K
    bytes) or four ``st.shared.b32``. ``acc``: the thread's accumulator registers (the batch
    is sized to what is left). False where it does not apply (the caller copies bytes)."""
    from tilegen.runtime.codegen.smem_fields import fields_emit, fields_static as F
    from tilegen.runtime.layouts.kernel import register_budget

    warps = em.num_threads // 32
    kind = _raw_fits(pitch, R, C, fr, fc, row_off, em.sm, warps)
    if kind is None:
        return False
    swap = _raw_dst_cost(kind, True, fr, fc, row_off) < _raw_dst_cost(kind, False, fr, fc, row_off)
    ka, na = R // ATOM_K, C // ATOM_N
    total = ka * na
    batch = batch_for(register_budget(em.func, em.num_threads), acc)
    _, lane, warp = em.tid()
    key = ("b8-raw", pitch, R, C, fr, fc, row_off, kind, swap)
    if key not in em._smem_refs:
        with em.hoisted():
            kw, nw = _first_atom(em, warps, ka)
            i, j, _, k, n = _load_lane(em, kw, nw)
            s_lane = _reg(em, "mad.lo.s32 {}, {}, {}, {}", k, pitch, n)
            warp_part = em.lincomb(
                0, [(1, fields_emit(em, kw, fr, R)), (1, fields_emit(em, nw, fc, C))]
            )
            if kind == "stmatrix":  # lane = matrix m (i), row j: B^T row 16 (m / 2) + 2 j + q'
                rn = _reg(em, "mad.lo.s32 {}, {}, 2, {}", j, n)
                if nw:
                    em.ins(f"sub.s32 {rn}, {rn}, {nw}")
                par = _reg(em, "and.b32 {}, {}, 1", i)
                if swap:
                    em.ins(f"xor.b32 {par}, {par}, {_reg(em, 'shr.u32 {}, {}, 2', j)}")
                em.ins(f"add.s32 {rn}, {rn}, {par}")
                d_lanes = [em.lincomb(0, [(1, fields_emit(em, rn, fc, 32)), (1, warp_part)])]
            else:  # two addresses: the lane's rows of parity 0 and 1, K bytes 4 (lane % 4)
                rr = _reg(em, "shr.u32 {}, {}, 2", lane)
                c4 = _reg(em, "and.b32 {}, {}, 3", lane)
                em.ins(f"shl.b32 {c4}, {c4}, 2")
                kpart = fields_emit(em, c4, fr, 16)
                d_lanes = []
                for p in (0, 1):
                    rn = _reg(em, "shl.b32 {}, {}, 1", rr)
                    if swap:
                        s = _reg(em, "shr.u32 {}, {}, 2", rr)
                        em.ins(f"xor.b32 {s}, {s}, {p}")
                        em.ins(f"add.s32 {rn}, {rn}, {s}")
                    elif p:
                        em.ins(f"add.s32 {rn}, {rn}, 1")
                    d_lanes.append(
                        em.lincomb(
                            0,
                            [(1, fields_emit(em, rn, fc, 16)), (1, kpart), (1, warp_part)],
                        )
                    )
            em._smem_refs[key] = (s_lane, d_lanes) + _selectors(em, swap)
    s_lane, d_lanes, s0, s1 = em._smem_refs[key]
    sa = _reg(em, "add.s32 {}, {}, {}", src, s_lane)
    das = [_reg(em, "add.s32 {}, {}, {}", dst, d) for d in d_lanes]
    rounds = -(-total // warps)
    const_r = F(row_off, fr)
    for b0 in range(0, rounds, batch):
        group = list(range(b0, min(rounds, b0 + batch)))
        loaded = []
        for t in group:
            guard = ""
            if warps * (t + 1) > total:
                p = em.new("pred")
                em.ins(f"setp.lt.u32 {p}, {warp}, {total - warps * t}")
                guard = f"@{p} "
            kd, nd = _atom_offset(t, warps, ka)
            m = [em.new("b32") for _ in range(4)]
            em.ins(
                f"{guard}ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {{{', '.join(m)}}}, "
                f"[{sa}+{kd * pitch + nd}]"
            )
            loaded.append((guard, kd, nd, m))
        for guard, kd, nd, m in loaded:
            rows = [em.new("b32") for _ in range(4)]
            em.ins(f"prmt.b32 {rows[0]}, {m[0]}, {m[1]}, {s0}")
            em.ins(f"prmt.b32 {rows[1]}, {m[0]}, {m[1]}, {s1}")
            em.ins(f"prmt.b32 {rows[2]}, {m[2]}, {m[3]}, {s0}")
            em.ins(f"prmt.b32 {rows[3]}, {m[2]}, {m[3]}, {s1}")
            imm = F(nd, fc) + F(kd, fr) + const_r
            if kind == "stmatrix":
                em.ins(
                    f"{guard}stmatrix.sync.aligned.m8n8.x4.shared.b16 [{das[0]}+{imm}], "
                    f"{{{', '.join(rows)}}}"
                )
                continue
            for mi, r in enumerate(rows):
                off = imm + F(16 * (mi // 2), fc)
                em.ins(f"{guard}st.shared.b32 [{das[mi % 2]}+{off}], {r}")
    return True
