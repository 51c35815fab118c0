"""What the async loop's consumers do to a staged operand before their MMAs read it
(docs/pipelines.md): round an f32 stage to tf32 in place where the IR converts it, and copy a
tf32 / 8-bit B (K x N) into a K-major B^T buffer, which wgmma reads (async_loop._KMajor).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilegen.runtime.codegen.core import Emitter, fail
from tilegen.runtime.codegen.selection import conversion_ptx
from tilegen.runtime.codegen.tma import swizzled_reg as _swizzled

if TYPE_CHECKING:
    from tilegen.runtime.codegen.async_loop import _KMajor, _Operand


def converted(em: Emitter, v) -> str | None:
    """The conversion instruction of a dot operand that is an f32 -> tf32 ``fp_to_fp`` of its
    staged load (``selection.conversion_ptx``), else None: the MMA must see the rounded value,
    as today's path converts its fragments, not the f32 bits TMA staged (the tensor core would
    truncate them)."""
    op = getattr(v, "op", None)
    if op is None or op.name != "nv_tileaa.fp_to_fp":
        return None
    return conversion_ptx(op, em.sm)


def round_tf32(em: Emitter, sbase, x: "_Operand", tid, nthreads: int, cvt: str) -> None:
    """Round every f32 of operand ``x``'s stage in place to tf32 by ``cvt`` (16-byte chunks per
    thread; the swizzle permutes whole chunks, so any chunk order covers the tile)."""
    chunks = x.bytes // 16
    for j in range(-(-chunks // nthreads)):
        u = em.new("b32")
        em.ins(f"add.s32 {u}, {tid}, {j * nthreads}")
        skip = None
        if (j + 1) * nthreads > chunks:
            skip = em.new_label("async_rna")
            g = em.new("pred")
            em.ins(f"setp.ge.u32 {g}, {u}, {chunks}")
            em.ins(f"@{g} bra {skip}")
        addr = em.new("b32")
        em.ins(f"mad.lo.s32 {addr}, {u}, 16, {sbase}")
        vals = [em.new("b32") for _ in range(4)]
        em.ins(f"ld.shared.v4.b32 {{{', '.join(vals)}}}, [{addr}+{x.offset}]")
        for r in vals:
            em.ins(f"{cvt} {r}, {r}")
        em.ins(f"st.shared.v4.b32 [{addr}+{x.offset}], {{{', '.join(vals)}}}")
        if skip is not None:
            em.label(skip)


def transpose_b(
    em: Emitter, b: "_Operand", sbase, bt: _KMajor, dbase, tid, nthreads: int, cvt=None
):
    """Every consumer thread copies its share of the stage's B (K x N, N contiguous, TMA
    column boxes) into B^T (``bt``: N x K, K contiguous). 8-bit: units of 4 K rows x 4 columns
    (four ``ld.shared.b32``, a 4 x 4 byte transpose in eight ``prmt``, four ``st.shared.b32``);
    32-bit: units of one K row x 4 columns (``ld.shared.v4.b32``, four ``st.shared.b32``),
    rounded to tf32 on the way by ``cvt`` (an instruction) when given."""
    K, N = b.tile[-2:]
    esz = b.esz
    if esz not in (1, 4):
        fail(b.load, f"PTX backend: no B transpose for {esz}-byte elements")
    rows = 4 if esz == 1 else 1  # K rows per unit
    kunits = K // rows
    units = kunits * (N // 4)
    for j in range(-(-units // nthreads)):
        skip = None
        u = em.new("b32")
        em.ins(f"add.s32 {u}, {tid}, {j * nthreads}")
        if (j + 1) * nthreads > units:
            skip = em.new_label("async_bt")
            g = em.new("pred")
            em.ins(f"setp.ge.u32 {g}, {u}, {units}")
            em.ins(f"@{g} bra {skip}")
        if esz == 1 and kunits % 4 == 0 and (N // 4) % 8 == 0:
            n4, k0 = _bank_spread(em, u, kunits)
        else:
            n4, k0 = _divmod(em, u, kunits)
        # source: K row rows * k0 (+ r), byte 4 esz n4 of B's column boxes
        nb = em.new("b32")
        em.ins(f"shl.b32 {nb}, {n4}, {(4 * esz).bit_length() - 1}")
        col, within = _divmod(em, nb, b.span)
        src0 = em.new("b32")
        em.ins(f"mul.lo.s32 {src0}, {col}, {b.box_bytes}")
        em.ins(f"mad.lo.s32 {src0}, {k0}, {rows * b.span}, {src0}")
        em.ins(f"add.s32 {src0}, {src0}, {within}")
        em.ins(f"add.s32 {src0}, {src0}, {b.offset}")
        if esz == 1:
            vals = []
            for r in range(4):
                o = src0
                if r:
                    o = em.new("b32")
                    em.ins(f"add.s32 {o}, {src0}, {r * b.span}")
                a = em.new("b32")
                em.ins(f"add.s32 {a}, {sbase}, {_swizzled(em, o, b.span)}")
                x = em.new("b32")
                em.ins(f"ld.shared.b32 {x}, [{a}]")
                vals.append(x)
            t = [em.new("b32") for _ in range(4)]
            em.ins(f"prmt.b32 {t[0]}, {vals[0]}, {vals[1]}, 0x5140")
            em.ins(f"prmt.b32 {t[1]}, {vals[0]}, {vals[1]}, 0x7362")
            em.ins(f"prmt.b32 {t[2]}, {vals[2]}, {vals[3]}, 0x5140")
            em.ins(f"prmt.b32 {t[3]}, {vals[2]}, {vals[3]}, 0x7362")
            cols = [em.new("b32") for _ in range(4)]  # column 4 n4 + i: K bytes 4 k0 .. + 3
            em.ins(f"prmt.b32 {cols[0]}, {t[0]}, {t[2]}, 0x5410")
            em.ins(f"prmt.b32 {cols[1]}, {t[0]}, {t[2]}, 0x7632")
            em.ins(f"prmt.b32 {cols[2]}, {t[1]}, {t[3]}, 0x5410")
            em.ins(f"prmt.b32 {cols[3]}, {t[1]}, {t[3]}, 0x7632")
        else:
            a = em.new("b32")
            em.ins(f"add.s32 {a}, {sbase}, {_swizzled(em, src0, b.span)}")
            cols = [em.new("b32") for _ in range(4)]
            em.ins(f"ld.shared.v4.b32 {{{', '.join(cols)}}}, [{a}]")
            if cvt:  # f32 -> tf32 on the way
                for r in cols:
                    em.ins(f"{cvt} {r}, {r}")
        # destination: row 4 n4 + i of B^T at K byte 4 k0 (four 8-bit K values / one f32)
        kb = em.new("b32")
        em.ins(f"shl.b32 {kb}, {k0}, 2")
        kcol, kin = _divmod(em, kb, bt.span)
        dst0 = em.new("b32")
        em.ins(f"mul.lo.s32 {dst0}, {kcol}, {bt.box_bytes}")
        em.ins(f"mad.lo.s32 {dst0}, {n4}, {4 * bt.span}, {dst0}")
        em.ins(f"add.s32 {dst0}, {dst0}, {kin}")
        for i, v in enumerate(cols):
            o = dst0
            if i:
                o = em.new("b32")
                em.ins(f"add.s32 {o}, {dst0}, {i * bt.span}")
            a = em.new("b32")
            em.ins(f"add.s32 {a}, {dbase}, {_swizzled(em, o, bt.span)}")
            em.ins(f"st.shared.b32 [{a}], {v}")
        if skip is not None:
            em.label(skip)


def _bank_spread(em: Emitter, u, kunits: int) -> tuple:
    """(n4, k0) of 8-bit transpose unit ``u``: a warp's 32 units are 4 K-row groups x 8 column
    groups (u's bits 0-1: k0, bits 2-4: n4, the rest both in turn). Under the 128-byte
    swizzle this costs 2-way bank conflicts on the loads and 4-way on the stores, where one
    column group per warp (32 K-row groups) cost 16-way conflicts on the loads."""
    lo, kl = _divmod(em, u, 4)
    rest, nl = _divmod(em, lo, 8)
    nh, kh = _divmod(em, rest, kunits // 4)
    k0, n4 = em.new("b32"), em.new("b32")
    em.ins(f"mad.lo.s32 {k0}, {kh}, 4, {kl}")
    em.ins(f"mad.lo.s32 {n4}, {nh}, 8, {nl}")
    return n4, k0


def _divmod(em: Emitter, x, d: int) -> tuple:
    """(x / d, x % d) in registers (a shift and a mask where ``d`` is a power of two)."""
    q, r = em.new("b32"), em.new("b32")
    if d & (d - 1) == 0:
        em.ins(f"shr.u32 {q}, {x}, {d.bit_length() - 1}")
        em.ins(f"and.b32 {r}, {x}, {d - 1}")
    else:
        em.ins(f"div.u32 {q}, {x}, {d}")
        em.ins(f"rem.u32 {r}, {x}, {d}")
    return q, r
