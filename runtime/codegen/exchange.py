"""Moving tile elements between layouts: in registers when every thread already holds what it
needs, by warp shuffles when a fixed source lane pattern does, else through shared memory.

An exchange has *writes* (source tiles, each with a :class:`Form` mapping its element
coordinates to a flat index of a scratch array) and one *read* (the destination layout with its
own form). Destination register ``k`` takes the source element whose write index equals its read
index. Broadcast, reshape, permute, extract_slice, cat and layout conversion are all such forms
(``tilegen.runtime.codegen.shape``).

Plans are decided at compile time from every thread's coordinates (numpy over the CTA):

* registers: each destination register is a source register of the same thread, for every thread
  (no instruction);
* shuffles: each destination register is one source register ``j`` of a lane of the same warp,
  the lane being a constant or ``lane ^ c`` (``shfl.sync.idx`` / ``shfl.sync.bfly``);
* shared memory: stores, a barrier, loads. The barrier is ``bar.warp.sync`` when every element
  is read by a warp that also wrote it. The leading barrier (against earlier readers of the
  scratch) is left out when the kernel's top level gets a region nobody used before
  (:func:`claim_scratch`). Rows of 128 bytes get padding (one element, or a vector's width)
  when that lowers the bank conflicts of warp 0's accesses (:func:`_padding`).
"""

from __future__ import annotations

from tilegen.runtime.records import dataclass
from functools import lru_cache
from operator import add
from typing import Optional

from tilegen.runtime.codegen.core import WARP, Emitter, load_reg, store_reg
from tilegen.runtime.codegen.dist import Dist
from tilegen.runtime.smem_banks import warp_wavefronts


class _LazyNumpy:
    """``np`` until first used: numpy's import (~100 ms) is paid only by kernels whose plans
    need it, not by every process that imports the code generator."""

    def __getattr__(self, name):
        import numpy

        globals()["np"] = numpy
        return getattr(numpy, name)


np = _LazyNumpy()

#: the most scratch bytes handed out as fresh (barrier-free) regions per kernel
FRESH_LIMIT = 16384


@dataclass(frozen=True)
class Form:
    """``flat = const + sum(mults[i] * coord[i])`` over a tile's result dims."""

    const: int
    mults: tuple[int, ...]

    def at(self, coord) -> int:
        return self.const + sum(m * c for m, c in zip(self.mults, coord))

    def emit(self, em: Emitter, d: Dist, k: int):
        return em.lincomb(self.const, [(m, em.coord(d, k, i)) for i, m in enumerate(self.mults)])

    def shifted(self, by: int) -> "Form":
        return Form(self.const + by, self.mults)


def row_major(shape, const: int = 0, shift=None) -> Form:
    """Row-major flattening over ``shape``; ``shift`` adds a per-dim constant to coordinates."""
    mults, s = [0] * len(shape), 1
    for i in reversed(range(len(shape))):
        mults[i] = s
        s *= shape[i]
    if shift:
        const += sum(m * o for m, o in zip(mults, shift))
    return Form(const, tuple(mults))


# ----------------------------------------------------------------------------- static analysis
@lru_cache(maxsize=1024)
def _coords(d: Dist) -> np.ndarray:
    """(threads, nregs, result rank) coordinates of every register of every thread."""
    bases = np.array([d.base(t) for t in range(d.num_threads)], dtype=np.int64)
    raw = np.array(d.raw, dtype=np.int64).reshape(d.nregs, d.root.rank)
    kept = list(d.kept)
    ps = np.array(d.pshape, dtype=np.int64)[kept]
    return (bases[:, None, kept] + raw[None, :, kept]) % ps


def flats(d: Dist, form: Form) -> np.ndarray:
    """(threads, nregs) flat index of every register of every thread under ``form``."""
    c = _coords(d)
    m = np.array(form.mults, dtype=np.int64)
    return form.const + (c * m).sum(axis=2) if len(form.mults) else np.full(c.shape[:2], form.const)


def _canonical(d: Dist) -> np.ndarray:
    """(threads, nregs) whether a register is its element's canonical copy."""
    bases = np.array([d.base(t) for t in range(d.num_threads)], dtype=np.int64)
    raw = np.array(d.raw, dtype=np.int64).reshape(d.nregs, d.root.rank)
    return ((bases[:, None, :] + raw[None, :, :]) < np.array(d.pshape)).all(axis=2)


@lru_cache(maxsize=1024)
def _bases(d: Dist) -> tuple:
    return tuple(d.base(t) for t in range(d.num_threads))


@lru_cache(maxsize=1024)
def _flat_columns(d: Dist, form: Form) -> Optional[tuple]:
    """``flats(d, form)`` in plain Python, transposed: per register, the tuple of its flat index
    in every thread. None where numpy's broadcasting rules would matter (then numpy decides)."""
    ps = d.pshape
    if form.mults and len(form.mults) != len(d.kept) or any(ps[i] <= 0 for i in d.kept):
        return None
    bases = _bases(d)
    const = form.const
    dims = [(i, [b[i] for b in bases], ps[i], m) for i, m in zip(d.kept, form.mults)]
    parts: dict = {}  # (dim, raw offset) -> that dim's term in every thread
    cols = []
    for raw in d.raw:
        col = [const] * len(bases)
        for i, bi, p, m in dims:
            part = parts.get((i, raw[i]))
            if part is None:
                r = raw[i]
                part = parts[(i, raw[i])] = [((x + r) % p) * m for x in bi]
            col = list(map(add, col, part))
        cols.append(tuple(col))
    return tuple(cols)


def register_plan(writes, read_dist: Dist, read_form: Form):
    """Per destination register, the (write number, source register) holding its element in the
    same thread, or None when some element must cross threads."""
    dists = [read_dist] + [w[1] for w in writes]
    if len({d.num_threads for d in dists}) != 1:
        return None
    # plain Python first: most exchanges are register renames, and numpy's import (~100 ms of a
    # CLI process) is then not needed at all
    rcols = _flat_columns(read_dist, read_form)
    wcols = [_flat_columns(d, form) for _, d, form in writes]
    if rcols is not None and all(c is not None for c in wcols):
        where: dict = {}
        for w, cols in enumerate(wcols):
            for j, col in enumerate(cols):
                where.setdefault(col[0], (w, j))
        plan = []
        for col in rcols:
            got = where.get(col[0])
            if got is None or wcols[got[0]][got[1]] != col:
                return None
            plan.append(got)
        return plan
    rf = flats(read_dist, read_form)
    wfs = [flats(d, form) for _, d, form in writes]
    where: dict = {}
    for w, wf in enumerate(wfs):
        for j in range(wf.shape[1]):
            where.setdefault(int(wf[0, j]), (w, j))
    plan = []
    for k in range(rf.shape[1]):
        got = where.get(int(rf[0, k]))
        if got is None or not np.array_equal(wfs[got[0]][:, got[1]], rf[:, k]):
            return None
        plan.append(got)
    return plan


def shuffle_plan(writes, read_dist: Dist, read_form: Form):
    """Per destination register, (write, source register, kind, c) with kind 'idx' (source lane
    ``c``) or 'bfly' (source lane ``lane ^ c``), or None when no such plan exists."""
    n = read_dist.num_threads
    if any(d.num_threads != n for _, d, _ in writes) or n % WARP:
        return None
    rf = flats(read_dist, read_form)
    wfs = [flats(d, form) for _, d, form in writes]
    plan = []
    for k in range(rf.shape[1]):
        want = rf[:, k]
        found = None
        for w, wf in enumerate(wfs):
            for j in range(wf.shape[1]):
                have = wf[:, j].reshape(-1, WARP)  # per warp, per lane
                for kind, c in _lane_patterns(have, want):
                    found = (w, j, kind, c)
                    break
                if found:
                    break
            if found:
                break
        if found is None:
            return None
        plan.append(found)
    return plan


def _lane_patterns(have: np.ndarray, want: np.ndarray):
    """Lane patterns under which every thread reads ``want`` from ``have`` of its warp."""
    want = want.reshape(-1, WARP)
    lanes = np.arange(WARP)
    for src in np.nonzero(have[0] == want[0, 0])[0].tolist():
        if np.array_equal(have[:, lanes ^ src], want):
            yield "bfly", src
            return
        if np.array_equal(np.repeat(have[:, src : src + 1], WARP, axis=1), want):
            yield "idx", src
            return


def warp_local(writes, read_dist: Dist, read_form: Form) -> bool:
    """Whether every thread reads only elements that a thread of its own warp writes."""
    rf = flats(read_dist, read_form)
    n = read_dist.num_threads
    nw = max(n // WARP, 1)
    if nw > 63:
        return False
    size = int(max([rf.max()] + [flats(d, f).max() for _, d, f in writes])) + 1
    mask = np.zeros(size, dtype=np.int64)
    for _, d, form in writes:
        wf = flats(d, form)
        bits = (np.int64(1) << (np.arange(d.num_threads) // WARP)).astype(np.int64)
        np.bitwise_or.at(mask, wf.reshape(-1), np.repeat(bits, wf.shape[1]))
    mine = (np.int64(1) << (np.arange(n) // WARP))[:, None]
    return bool(((mask[rf] & mine) != 0).all())


def _bank_cost(forms_dists, cls: str, isize: int) -> int:
    """Shared-memory wavefronts of warp 0's accesses, as :func:`exchange` emits them (vector
    runs included): runtime/smem_banks.py's rule."""
    cost = 0
    for form, d in forms_dists:
        f = flats(d, form)[:WARP]
        for j, n in _runs(d, form, cls, isize):
            cost += warp_wavefronts(f[:, j] * isize, n * isize)
    return cost


def _pad_form(form: Form, shape, row: int, pad: int = 1) -> Optional[Form]:
    """``form`` composed with ``i -> i + pad * (i // row)`` when that is exact, else None."""
    low = form.const % row
    mults = []
    for m, e in zip(form.mults, shape):
        if m % row == 0:
            mults.append(m + pad * (m // row))
        elif 0 <= m < row:
            low += m * (e - 1)
            mults.append(m)
        else:
            return None
    if low >= row:
        return None
    return Form(form.const + pad * (form.const // row), tuple(mults))


def _padding(writes, read_dist: Dist, read_form: Form, cls: str, isize: int, size: int):
    """(write forms, read form, size), padded when that lowers bank conflicts: every row of 128
    bytes followed by ``pad`` elements, ``pad`` one element or a vector's width (so that
    vector runs stay aligned), whichever costs warp 0 the fewest wavefronts."""
    plain = (
        [f for _, _, f in writes],
        read_form,
        size,
    )
    if isize < 4:
        return plain
    row = 128 // isize
    best, best_cost = plain, _bank_cost(
        [(f, d) for _, d, f in writes] + [(read_form, read_dist)], cls, isize
    )
    for pad in (1, 2, 4):
        if pad * isize > 16:
            break
        wpad = [_pad_form(f, d.shape, row, pad) for _, d, f in writes]
        rpad = _pad_form(read_form, read_dist.shape, row, pad)
        if rpad is None or any(f is None for f in wpad):
            continue
        cost = _bank_cost(
            [(f, d) for f, (_, d, _) in zip(wpad, writes)] + [(rpad, read_dist)], cls, isize
        )
        if cost < best_cost:
            best, best_cost = (wpad, rpad, size + pad * (size // row + 1)), cost
    return best


# ----------------------------------------------------------------------------- emission
def scratch_size(cls: str, esize: int) -> int:
    """Bytes of one element in scratch memory: predicates as u8, b16 registers (i8 included)
    whole, else the element size."""
    return {"pred": 1, "b16": 2}.get(cls, esize)


def _top_level(em: Emitter, op) -> bool:
    parent = getattr(op, "parent_op", None)
    return op is None or parent is None or parent is em.func


def claim_scratch(em: Emitter, op, nbytes: int) -> int:
    """Byte offset of a scratch region of ``nbytes`` that no earlier reader still needs: a fresh
    one at the kernel's top level (straight-line code, nothing used it before), else offset 0
    behind a ``bar.sync``."""
    top = (em.scratch_in_use() + 15) // 16 * 16
    if op is not None and _top_level(em, op) and top + nbytes <= FRESH_LIMIT:
        em.need_smem(top + nbytes)
        return top
    em.need_smem(nbytes)
    em.barrier()
    return 0


#: the first named barrier of :class:`GroupExchange`'s groups (0: the CTA's, 1: the consumer
#: warps' (``Emitter.barrier``), 2 and 3: ``async_overlap.PINGPONG``); ids run to 15
GROUP_BARRIER = 4
#: the most bytes (both buffers) a :class:`GroupExchange` takes beside the scratch
GROUP_LIMIT = 4096


class GroupExchange:
    """Shared memory for an exchange repeated in a loop among the warps of each *group*: warps
    that differ only in ``warp_bits`` (a reduction's warps along its axis), no group reading
    what another writes. Its own region of two buffers, used in turn, and a named barrier per
    group (``bar.sync id, threads``): one barrier of the group's warps orders each exchange.
    (The shared scratch needs a CTA-wide barrier before the writes, against earlier readers of
    any exchange, and another after them.)

    Two buffers make the leading barrier unneeded: execution ``i + 2`` writes the buffer that
    execution ``i`` read, and every warp of the group passed execution ``i + 1``'s barrier after
    that read. That holds for any sequence of exchanges of the same groups, so the reductions
    of a kernel with the same warp bits share one (:meth:`of`: a softmax's row max and row
    sum, in each of a loop's two bodies, take one region of 2 KB, not four)."""

    def __init__(self, em: Emitter, nbytes: int, warp_bits: list, warps: int):
        self.em, self.nbytes, self.warp_bits = em, nbytes, warp_bits
        self.threads = WARP << len(warp_bits)
        self.groups = warps >> len(warp_bits)
        self.region = em.resident_region(2 * nbytes, "xchg", 16)
        self.flip = em.new("b32")  # this execution's buffer: 0 or nbytes past the region
        em.pre.append(f"\tmov.u32 {self.flip}, 0;")

    @classmethod
    def of(cls, em: Emitter, op, nbytes: int, warp_bits: list) -> "GroupExchange | None":
        """The kernel's exchange for ``op``'s groups with buffers of ``nbytes`` at least, or
        None where it does not apply: at the kernel's top level (the scratch gives a fresh
        region there), over :data:`GROUP_LIMIT`, or more groups than named barriers."""
        warps = em.num_threads // WARP
        groups = warps >> len(warp_bits)
        if _top_level(em, op) or 2 * nbytes > GROUP_LIMIT or GROUP_BARRIER + groups > 16:
            return None
        mine = em.__dict__.setdefault("_group_exchanges", [])
        for g in mine:
            if g.warp_bits == warp_bits and g.nbytes >= nbytes:
                return g
        g = cls(em, max(nbytes, GROUP_LIMIT // 4), warp_bits, warps)
        mine.append(g)
        return g

    def buffer(self) -> str:
        """This execution's buffer (a b32 register)."""
        r = self.em.new("b32")
        self.em.ins(f"add.s32 {r}, {self.region}, {self.flip}")
        return r

    def sync(self) -> None:
        """The group's barrier (the consumers' one where every warp is one group)."""
        em = self.em
        if self.groups == 1:
            em.barrier()
            return
        _, _, warp = em.tid()
        lo, n = self.warp_bits[0], len(self.warp_bits)
        gid = em.new("b32")
        em.ins(f"shr.u32 {gid}, {warp}, {lo + n}")
        if lo:  # the warp bits below the group's
            em.ins(f"shl.b32 {gid}, {gid}, {lo}")
            low = em.new("b32")
            em.ins(f"and.b32 {low}, {warp}, {(1 << lo) - 1}")
            em.ins(f"or.b32 {gid}, {gid}, {low}")
        em.ins(f"add.s32 {gid}, {gid}, {GROUP_BARRIER}")
        em.ins(f"bar.sync {gid}, {self.threads}")

    def done(self) -> None:
        """After the reads: the next execution takes the other buffer."""
        self.em.ins(f"xor.b32 {self.flip}, {self.flip}, {self.nbytes}")


def shfl(em: Emitter, cls: str, reg: str, mode: str, b, c: int = 31) -> str:
    """``shfl.sync.{mode}`` (idx / bfly / up / down) of a value of any register class, whole
    warp converged: 64-bit values as two words, b16 widened, predicates as 0/1 (``b``: lane
    operand, an int or a b32 register; ``c``: the clamp / segment mask)."""

    def one(x: str) -> str:
        r = em.new("b32")
        em.ins(f"shfl.sync.{mode}.b32 {r}, {x}, {b}, {c}, -1")
        return r

    if cls in ("b32", "f32"):
        r = em.new(cls)
        em.ins(f"shfl.sync.{mode}.b32 {r}, {reg}, {b}, {c}, -1")
        return r
    if cls in ("b64", "f64"):
        lo, hi = em.new("b32"), em.new("b32")
        em.ins(f"mov.b64 {{{lo}, {hi}}}, {reg}")
        lo, hi = one(lo), one(hi)
        out = em.new(cls)
        em.ins(f"mov.b64 {out}, {{{lo}, {hi}}}")
        return out
    if cls == "b16":
        w = em.new("b32")
        em.ins(f"cvt.u32.u16 {w}, {reg}")
        w = one(w)
        out = em.new("b16")
        em.ins(f"cvt.u16.u32 {out}, {w}")
        return out
    w = em.new("b32")  # pred
    em.ins(f"selp.b32 {w}, 1, 0, {reg}")
    w = one(w)
    p = em.new("pred")
    em.ins(f"setp.ne.b32 {p}, {w}, 0")
    return p


def _shfl(em: Emitter, cls: str, reg: str, kind: str, c: int) -> str:
    """``reg`` of source lane ``c`` (idx) or ``lane ^ c`` (bfly)."""
    if kind == "bfly" and c == 0:
        return reg
    return shfl(em, cls, reg, kind, c)


def exchange(
    em: Emitter,
    cls: str,
    esize: int,
    writes,
    read_dist: Dist,
    read_form: Form,
    size: int,
    op=None,
):
    """Destination registers for ``read_dist``; ``writes`` are (registers, Dist, Form) triples;
    ``size`` is the scratch array's element count (for the shared path); ``op`` (the op being
    emitted) lets a top-level exchange skip its leading barrier."""
    plan = register_plan(writes, read_dist, read_form)
    if plan is not None:
        return [writes[w][0][j] for w, j in plan]
    if read_dist.nregs <= 16:
        splan = shuffle_plan(writes, read_dist, read_form)
        if splan is not None:
            return [_shfl(em, cls, writes[w][0][j], kind, c) for w, j, kind, c in splan]
    isize = scratch_size(cls, esize)
    local = warp_local(writes, read_dist, read_form)
    wforms, rform, size = _padding(writes, read_dist, read_form, cls, isize, size)
    base = claim_scratch(em, op, size * isize) // isize
    for (regs, d, _), form in zip(writes, wforms):
        form = form.shifted(base)
        for j, n in _runs(d, form, cls, isize):
            idx = form.emit(em, d, j)
            if n == 1:
                r, st = store_reg(em, cls, regs[j])
                em.ins(f"st.shared.{st} [{em.smem_addr(idx, isize)}], {r}")
            else:
                vals = ", ".join(regs[j : j + n])
                em.ins(f"st.shared.v{n}.{cls} [{em.smem_addr(idx, isize)}], {{{vals}}}")
    em.ins("bar.warp.sync -1") if local else em.barrier()
    out = []
    rform = rform.shifted(base)
    for k, n in _runs(read_dist, rform, cls, isize):
        idx = rform.emit(em, read_dist, k)
        if n == 1:
            out.append(load_reg(em, cls, "shared", em.smem_addr(idx, isize)))
            continue
        regs = [em.new(cls) for _ in range(n)]
        em.ins(f"ld.shared.v{n}.{cls} {{{', '.join(regs)}}}, [{em.smem_addr(idx, isize)}]")
        out += regs
    return out


#: register classes a vector shared access moves as they are (4 or 8 bytes each)
_VECTOR_CLASSES = ("b32", "f32", "b64", "f64")


def _runs(d: Dist, form: Form, cls: str, isize: int) -> list:
    """(first register, count) covering ``d``'s registers in order: ``count`` registers that
    sit at consecutive indices under ``form`` in every thread, the first a multiple of
    ``count`` (so one ``.v2``/``.v4`` access of at most 16 bytes moves them), else 1."""
    if cls not in _VECTOR_CLASSES or isize not in (4, 8) or d.nregs == 1:
        return [(j, 1) for j in range(d.nregs)]
    f = flats(d, form)
    out, j, top = [], 0, 16 // isize
    while j < d.nregs:
        n = top
        while n > 1:
            if j + n <= d.nregs and not (f[:, j] % n).any():
                if (f[:, j : j + n] - f[:, j : j + 1] == np.arange(n)).all():
                    break
            n //= 2
        out.append((j, n))
        j += n
    return out


def read_scalar(em: Emitter, cls: str, esize: int, writes, index, size: int, op=None) -> str:
    """Every thread reads element ``index`` (int or b32 register) of the scratch array."""
    if isinstance(index, int) and len(writes) == 1:
        regs, d, form = writes[0]
        f = flats(d, form)
        hit = np.nonzero((f == index).all(axis=0))[0]
        if len(hit):  # every thread holds it
            return regs[int(hit[0])]
    isize = scratch_size(cls, esize)
    base = claim_scratch(em, op, size * isize) // isize
    for regs, d, form in writes:
        form = form.shifted(base)
        canon = _canonical(d)
        fl = flats(d, form)
        for j in range(d.nregs):
            if isinstance(index, int) and not (fl[:, j] == index + base).any():
                continue  # statically not the element read
            p = em.canonical(d, j)
            if p == "0":
                continue
            if not canon[:, j].any():
                continue
            idx = form.emit(em, d, j)
            r, st = store_reg(em, cls, regs[j])
            guard = f"@{p} " if p else ""
            em.ins(f"{guard}st.shared.{st} [{em.smem_addr(idx, isize)}], {r}")
    em.barrier()
    at = index + base if isinstance(index, int) else em.lincomb(base, [(1, index)])
    return load_reg(em, cls, "shared", em.smem_addr(at, isize))
