"""Global memory: memrefs (make_memref, tiled_load / tiled_store with bounds masks, padding
values and vector accesses), pointers (addptr, int_to_ptr / ptr_to_int) and element-wise
accesses through pointers or memref coordinates (load / store / gather_load / scatter_store).

Tiled addresses: per thread one base address ``ptr + sum_d (index_d + base_d(tid)) * stride_d``
is computed once per access; each register adds its constant offset ``raw_d * stride_d`` as an
immediate (``[addr+imm]``) where strides are static, or one cached product per distinct offset
where they are not. Registers whose coordinates can wrap (replicated layouts) take the general
path. Vector width: the layout's contiguous elements per thread along the unit-stride dim,
capped by what the layout stage proved about alignment and mask uniformity
(``nv_tileas.vector_width``, recorded by the analysis that chose the layout); a bounds predicate then covers a whole vector. 8 x 16-bit
vectors travel as 4 packed b32 registers (``ld.v4.b32`` + ``mov.b32 {lo, hi}``).

Element-wise accesses compute one address (and bounds predicate, for memref coordinates) per
register. Scalars (rank-0 values) are loaded by every thread; scalar stores are issued by thread
0 only; replicated tile layouts store each element from its canonical copy only.

Memory semantics and hints: ``mem_semantic``/``mem_scope`` select ``ld.relaxed.gpu``,
``ld.acquire.cta``, ``st.release.sys`` ... (sm_70+ forms; ``cluster`` scope falls back to ``gpu``
before sm_90, a legal strengthening); ``volatile`` selects ``ld.volatile``. Weak accesses take
the cache operator of ``cache_modifier`` (loads: .ca/.cg/.cs/.lu/.cv; stores: .cg/.cs, the load-
only operators are ignored) or else the L1 eviction priority of ``eviction_policy``
(``L1::evict_first/last/normal``, sm_70+); PTX allows no cache operator on ordered accesses, so
those keep only the eviction priority. Pointers into address space 0 use generic addressing
without hints.
"""

from __future__ import annotations

import contextlib
import copy

from typing import Optional

from tilegen.runtime.codegen import affine
from tilegen.runtime.codegen.core import (
    ELEMENTS,
    Emitter,
    Memref,
    elem_key,
    fail,
    handles,
    is_tile,
)
from tilegen.runtime.codegen.smem_fields import fields_emit, fields_static
from tilegen.runtime.layouts.access import element_bytes
from tilegen.runtime.layouts.decisions import cp_async_width, vector_width
from tilegen.runtime.layouts.staging import chain_to_dot
from tilegen.runtime.types import DYNAMIC, MemTokenType, NvMemRefType, NvPointerType, TileType

# ----------------------------------------------------------------------------- elements


def mem_types(op, key: Optional[str]) -> tuple[str, int, str, str]:
    """(register class, bytes, ld type, st type) of an element key in memory (i1 as a u8)."""
    if key not in ELEMENTS:
        fail(op, f"PTX backend does not support '{op.name}' on elements of type {key} yet")
    if key in ("i4", "f4E2M1FN"):  # two a byte in memory; in registers one a b16
        what = f"'{op.name}' on 4-bit elements ({key})"
        fail(op, f"PTX backend does not support {what} yet: pack them to bytes")
    cls, size, t = ELEMENTS[key]
    return cls, size, t, "b8" if size == 1 and cls != "pred" else t


def pointee_key(t) -> Optional[str]:
    """Element key of a pointer (or pointer tile) type's pointee."""
    if isinstance(t, TileType):
        t = t.element
    return elem_key(t.pointee) if isinstance(t, NvPointerType) else None


def _space(t) -> Optional[str]:
    if isinstance(t, TileType):
        t = t.element
    space = getattr(t, "address_space", 1)
    return {0: None, 1: "global", 3: "shared"}.get(space, "unsupported")


def _zero(cls: str) -> str:
    return {"f32": "0f00000000", "f64": "0d0000000000000000"}.get(cls, "0")


def _and(em: Emitter, p, q):
    if p is None or p == "1":
        return q
    if q is None or q == "1":
        return p
    if p == "0" or q == "0":
        return "0"
    n = em.new("pred")
    em.ins(f"and.pred {n}, {p}, {q}")
    return n


def _group(op, name: str) -> list:
    return list(op.opdef.operand_group(op, name))


def reg(em: Emitter, cls: str, x) -> str:
    """``x`` as a register of class ``cls`` (immediates are moved in)."""
    return x if isinstance(x, str) and x.startswith("%") else em.mov(cls, x)


def leader(em: Emitter) -> str:
    """A predicate true in thread 0 only (the one thread that performs scalar side effects)."""
    tid = em.tid()[0]
    p = em.new("pred")
    em.ins(f"setp.eq.u32 {p}, {tid}, 0")
    return p


# ----------------------------------------------------------------------------- hints

SEMANTICS = ("weak", "relaxed", "acquire", "release", "acq_rel")
SCOPES = ("cta", "cluster", "gpu", "sys")
LD_CACHE = {1: ".ca", 2: ".cg", 3: ".cs", 4: ".lu", 5: ".cv"}
ST_CACHE = {2: ".cg", 3: ".cs"}  # .ca/.lu/.cv are load-only cache operators
EVICTION = {1: ".L1::evict_first", 2: ".L1::evict_last", 3: ".L1::evict_normal"}


def _enum(op, name: str, default: int = 0) -> int:
    a = op.attributes.get(name)
    return default if a is None else a.value


def sem_scope(em: Emitter, op) -> str:
    """``.acquire.gpu`` ... for an ordered access, '' for a weak one."""
    sem = SEMANTICS[_enum(op, "mem_semantic")]
    if sem == "weak":
        return ""
    scope = SCOPES[_enum(op, "mem_scope", 2)]
    if scope == "cluster" and em.sm < 90:
        scope = "gpu"  # no clusters before sm_90: .gpu is the next wider scope
    return f".{sem}.{scope}"


def ld_opcode(em: Emitter, op, space: Optional[str]) -> str:
    """``ld`` with semantics, state space and hints (vector and type still to add)."""
    ordered = sem_scope(em, op)
    ss = f".{space}" if space else ""
    hints = space == "global"
    evict = EVICTION.get(_enum(op, "eviction_policy"), "") if hints else ""
    if ordered:
        return f"ld{ordered}{ss}{evict}"
    if "volatile" in op.attributes:
        return f"ld.volatile{ss}"
    cop = LD_CACHE.get(_enum(op, "cache_modifier"), "") if hints else ""
    return f"ld{ss}{cop or evict}"


def st_opcode(em: Emitter, op, space: Optional[str]) -> str:
    ordered = sem_scope(em, op)
    ss = f".{space}" if space else ""
    hints = space == "global"
    evict = EVICTION.get(_enum(op, "eviction_policy"), "") if hints else ""
    if ordered:
        return f"st{ordered}{ss}{evict}"
    cop = ST_CACHE.get(_enum(op, "cache_modifier"), "") if hints else ""
    return f"st{ss}{cop or evict}"


def _check_space(op, space) -> None:
    if space == "unsupported":
        fail(op, f"PTX backend does not support '{op.name}' in this address space yet")


# ----------------------------------------------------------------------------- loads / stores


def load_elems(em: Emitter, opcode: str, key_types, guard, dests_other, addr: str) -> list:
    """One (vector) load of len(dests_other) elements at ``[addr]``; ``dests_other`` gives each
    element's padding value (register / immediate, or None for zero) where ``guard`` is false."""
    cls, _, lt, _ = key_types
    n = len(dests_other)
    regs = [em.new("b16" if cls == "pred" else cls) for _ in range(n)]
    if guard == "0":
        return [_fill(em, cls, o) for o in dests_other]
    if guard is not None:
        for r, other in zip(regs, dests_other):
            if cls == "pred":
                src = "0" if other is None else None
                if src is None:
                    em.ins(f"selp.u16 {r}, 1, 0, {other}")
                else:
                    em.ins(f"mov.u16 {r}, 0")
            else:
                em.ins(f"mov.{cls} {r}, {_zero(cls) if other is None else other}")
    g = f"@{guard} " if guard else ""
    vec = f".v{n}" if n > 1 else ""
    dst = f"{{{', '.join(regs)}}}" if n > 1 else regs[0]
    em.ins(f"{g}{opcode}{vec}.{lt} {dst}, {addr}")
    if cls != "pred":
        return regs
    out = []
    for r in regs:
        p = em.new("pred")
        em.ins(f"setp.ne.u16 {p}, {r}, 0")
        out.append(p)
    return out


def _fill(em: Emitter, cls: str, other) -> str:
    if cls == "pred":
        p = em.new("pred")
        em.ins(f"setp.ne.u32 {p}, 0, 0" if other is None else f"mov.pred {p}, {other}")
        return p
    return em.mov(cls, _zero(cls) if other is None else other)


def store_elems(em: Emitter, opcode: str, key_types, guard, values: list, addr: str) -> None:
    cls, _, _, stt = key_types
    if guard == "0":
        return
    vals = []
    for v in values:
        if cls == "pred":
            r = em.new("b16")
            em.ins(f"selp.u16 {r}, 1, 0, {v}")
            v = r
        vals.append(v)
    g = f"@{guard} " if guard else ""
    n = len(vals)
    vec = f".v{n}" if n > 1 else ""
    src = f"{{{', '.join(vals)}}}" if n > 1 else vals[0]
    em.ins(f"{g}{opcode}{vec}.{stt} {addr}, {src}")


# ----------------------------------------------------------------------------- memrefs


@handles("nv_tileaa.make_memref")
def make_memref(em: Emitter, op) -> None:
    t = op.results[0].type
    elem = elem_key(t.element) if isinstance(t, NvMemRefType) else None
    if elem not in ELEMENTS:
        fail(op, f"PTX backend does not support memrefs of {getattr(t, 'element', t)} yet")
    base = em.get(_group(op, "base")[0])
    sizes_in = [em.scalar(op, v) for v in _group(op, "sizes")]
    strides_in = [em.scalar(op, v) for v in _group(op, "strides")]
    offset = _group(op, "offset")
    dyn_sizes = sum(1 for s in t.shape if s == DYNAMIC)
    dyn_strides = sum(1 for s in t.stride_values if s == DYNAMIC)
    if not isinstance(base, str) or (len(sizes_in), len(strides_in)) != (dyn_sizes, dyn_strides):
        fail(op, "PTX backend does not support this 'nv_tileaa.make_memref' form yet")
    if offset:
        ocls = _int_cls(op, offset[0].type)
        base = _offset(em, base, em.scalar(op, offset[0]), ocls, ELEMENTS[elem][1])
    it, st = iter(sizes_in), iter(strides_in)
    sizes = [next(it) if s == DYNAMIC else s for s in t.shape]
    strides = [next(st) if s == DYNAMIC else s for s in t.stride_values]
    em.set(op.results[0], Memref(base, sizes, strides, elem, t.address_space, t))


@handles("nv_tileaa.get_dim_size")
def get_dim_size(em: Emitter, op) -> None:
    src = op.operands[0]
    dim = op.attributes["dim"].value
    x = em.get(src)
    if isinstance(x, Memref):
        size = x.sizes[dim]
    elif is_tile(src.type):
        size = src.type.shape[dim]
    else:
        fail(op, "PTX backend does not support this 'nv_tileaa.get_dim_size' operand yet")
    cls = _int_cls(op, op.results[0].type)
    em.set(op.results[0], reg(em, cls, em.as_index(size, cls)))


def cache_suffix(op) -> str:
    """Kept for older callers: the weak-load cache operator of ``op``."""
    return LD_CACHE.get(_enum(op, "cache_modifier"), "")


class Access:
    """Per-register addresses and bounds predicates of one tiled access."""

    def __init__(self, em: Emitter, op, mem: Memref, indices, tile_type, in_bounds):
        self.em, self.op, self.mem = em, op, mem
        self.d = em.dist_of(op, tile_type)
        self.esize = ELEMENTS[mem.element][1]
        self.rank = len(mem.sizes)
        if len(indices) != self.rank or tuple(self.d.kept) != tuple(range(self.rank)):
            fail(op, f"PTX backend does not support this '{op.name}' form yet")
        self.starts = [em.scalar(op, v) for v in indices]
        self.in_bounds = in_bounds
        self._tb: dict = {}
        self._pred: dict = {}
        self._dyn_off: dict = {}
        self._base_addr = None

    def _thread_index(self, i: int):
        """index_i + base_i(tid) (a register or int)."""
        if i not in self._tb:
            b = self.em.base(self.d)[self.d.kept[i]]
            self._tb[i] = self.em.lincomb(0, [(1, self.starts[i]), (1, b)])
        return self._tb[i]

    def _mul_wide(self, x, stride) -> str:
        """b64 register x * stride * esize (x, stride: ints or index registers)."""
        return scaled_offset(self.em, x, None, stride, self.esize)

    def base_addr(self) -> str:
        if self._base_addr is None:
            em = self.em
            addr = self.mem.ptr
            for i in range(self.rank):
                x = self._thread_index(i)
                if isinstance(x, int) and x == 0:
                    continue
                t = self._mul_wide(x, self.mem.strides[i])
                n = em.new("b64")
                em.ins(f"add.s64 {n}, {addr}, {t}")
                addr = n
            self._base_addr = addr
        return self._base_addr

    def index(self, i: int, k: int):
        """Index along dim i of register k (register or int), wrapping handled."""
        rd = self.d.kept[i]
        if self.d.wraps(rd, k):
            return self.em.lincomb(0, [(1, self.starts[i]), (1, self.em.coord(self.d, k, i))])
        return self.em.lincomb(self.d.raw[k][rd], [(1, self._thread_index(i))])

    def pred(self, k: int):
        em = self.em
        conds = []
        for i in range(self.rank):
            if self.in_bounds[i]:
                continue
            rd = self.d.kept[i]
            key = (i, self.d.raw[k][rd], self.d.wraps(rd, k), k if self.d.wraps(rd, k) else -1)
            if key not in self._pred:
                self._pred[key] = em.lt_u(self.index(i, k), self.mem.sizes[i])
            conds.append(self._pred[key])
        if not conds:
            return None
        if len(conds) == 1:
            return conds[0]
        key = tuple(conds)
        if key not in self._pred:
            p = conds[0]
            for q in conds[1:]:
                n = em.new("pred")
                em.ins(f"and.pred {n}, {p}, {q}")
                p = n
            self._pred[key] = p
        return self._pred[key]

    def addr(self, k: int) -> str:
        """``[...]`` operand text for register k."""
        em = self.em
        if any(self.d.wraps(self.d.kept[i], k) for i in range(self.rank)):
            addr = self.mem.ptr
            for i in range(self.rank):
                t = self._mul_wide(self.index(i, k), self.mem.strides[i])
                n = em.new("b64")
                em.ins(f"add.s64 {n}, {addr}, {t}")
                addr = n
            return f"[{addr}]"
        imm = 0
        dyn = []
        for i in range(self.rank):
            raw = self.d.raw[k][self.d.kept[i]]
            s = self.mem.strides[i]
            if not raw:
                continue
            if isinstance(s, int):
                imm += raw * s * self.esize
            else:
                dyn.append((i, raw))
        addr = self.base_addr()
        if dyn:
            key = tuple(dyn)
            if key not in self._dyn_off:
                a = addr
                for i, raw in dyn:
                    t = self._mul_wide(raw, self.mem.strides[i])
                    n = em.new("b64")
                    em.ins(f"add.s64 {n}, {a}, {t}")
                    a = n
                self._dyn_off[key] = a
            addr = self._dyn_off[key]
        return f"[{addr}+{imm}]" if imm else f"[{addr}]"

    def vector_groups(self, limit: int = 4) -> list[list[int]]:
        """Registers grouped into vector accesses (consecutive along the unit-stride dim), at
        most ``limit`` elements and 16 bytes each, and no wider than the access analysis of the
        layout pass proves aligned and uniformly masked."""
        unit = [i for i in range(self.rank) if self.mem.strides[i] == 1]
        if not unit:
            return [[k] for k in range(self.d.nregs)]
        # along the memory's unit-stride dim (the one the access analysis proved the width
        # for), whatever the layout's thread order: a row per thread stores its row in vectors
        width = min(limit, 16 // self.esize, _proven_width(self.op))
        return vector_runs(self.d, width, fast=unit[-1])


def vector_runs(d, v: int, wrapping: bool = False, fast: Optional[int] = None) -> list[list[int]]:
    """``d``'s registers in groups of ``v`` that hold consecutive elements along dim ``fast``
    (default: the layout's fastest), each starting at a multiple of ``v`` there (one vector
    access each), else one group per register. ``wrapping``: a layout larger than the tile
    (its coordinates taken modulo the shape, as per-element pointers are) is fine where ``v``
    divides the fastest dim's extent, so no run crosses the wrap."""
    n = d.nregs
    lay = d.root
    fast = lay.order[0] if fast is None else fast
    v = min(v, lay.size_per_thread[fast])
    if v < 2 or d.layout is not lay:
        return [[k] for k in range(n)]
    if wrapping:
        if d.pshape[fast] % v:
            return [[k] for k in range(n)]
    elif any(d.wraps(r, k) for k in range(n) for r in range(lay.rank)):
        return [[k] for k in range(n)]
    groups = []
    for k0 in range(0, n, v):
        g = list(range(k0, min(n, k0 + v)))
        ok = (
            len(g) == v
            and d.raw[g[0]][fast] % v == 0
            and all(
                d.raw[g[j]][fast] == d.raw[g[0]][fast] + j
                and all(d.raw[g[j]][r] == d.raw[g[0]][r] for r in range(lay.rank) if r != fast)
                for j in range(v)
            )
        )
        if not ok:
            return [[k] for k in range(n)]
        groups.append(g)
    return groups


def _proven_width(op) -> int:
    """The vector width the layout stage proved for this access (``nv_tileas.vector_width``)."""
    return vector_width(op)


def _tiled_operands(em: Emitter, op):
    base = _group(op, "base")[0]
    mem = em.get(base)
    if not isinstance(mem, Memref):
        fail(op, f"PTX backend supports '{op.name}' only through a make_memref")
    _check_space(op, _space(mem.type))
    indices = _group(op, "indices")
    ib = op.attributes.get("in_bounds")
    in_bounds = list(ib.values) if ib is not None else [False] * len(mem.sizes)
    if _memchecked():  # memcheck: every view access masked against the view's shape
        in_bounds = [False] * len(mem.sizes)
    return mem, indices, in_bounds


def uniform_padding(em: Emitter, op) -> Optional[str]:
    """The padding of ``tiled_load`` ``op`` (its ``other``, a uniform tile) as one register or
    immediate, emitted here if it was not yet; None without one (zero)."""
    (other,) = _group(op, "other") or (None,)
    if other is None:
        return None
    if other not in em.values:
        em.emit_op(other.op)
    pad = em.get(other)
    return pad[0] if isinstance(pad, list) else pad


#: on a loop-invariant dot A operand's load the async producer copies by TMA (async_kept.py)
KEPT_ATTR = "nv_tileas.async_kept"


@handles("nv_tileaa.tiled_load")
def tiled_load(em: Emitter, op, force: bool = False) -> None:
    res = op.results[0]
    kind = getattr(em, "fragment_order", {}).get(res)
    if kind is not None:  # C in the async accumulator's register order (fragment_load.py)
        from tilegen.runtime.codegen import fragment_load

        return fragment_load.load(em, op, kind)
    if not force and KEPT_ATTR in op.attributes:  # copied by the async producer's TMA
        from tilegen.runtime.codegen import async_kept

        return async_kept.stage(em, op)
    mem, indices, in_bounds = _tiled_operands(em, op)
    if not is_tile(res.type):
        return element_access(em, op, load=True)
    plan = None if force else stage_plan(op)
    several = False
    if plan is None and not force:
        plan = _boxed_plan(em, op)  # a TMA stage's tile read by several dots
        several = plan is not None
    if plan is not None:  # staged for its dot (cp.async into the dot's shared layout)
        st = Staged(em, op, plan)
        st.flips = several  # each path's permutes say how its dot reads the tile
        st.pipe_buf = getattr(em, "pipe_bufs", {}).get(op)
        em.set(res, st)
        em.staged_chain.update(plan.chain)  # pass the Staged through (Emitter.emit_op)
        for r in op.results[1:]:
            em.set(r, None)
        return
    (got,) = load_rounds(em, op, [None])
    em.set(res, [got.get(k) for k in range(em.dist_of(op, res.type).nregs)])
    for r in op.results[1:]:
        em.set(r, None)


def load_rounds(em: Emitter, op, rounds: list):
    """An unstaged tiled ``tiled_load`` ``op``'s registers, a round at a time: per round (a
    list of register indices of its layout; None: all), {index: register} of its vector
    loads (a TMEM-resident accumulator's initial value goes in a chunk of columns at a time:
    ``tmem_resident.InitChunks``; a round holds whole vectors)."""
    mem, indices, in_bounds = _tiled_operands(em, op)
    res = op.results[0]
    mask = _group(op, "mask")
    other = _group(op, "other")
    kt = mem_types(op, mem.element)
    opcode = ld_opcode(em, op, _space(mem.type))
    acc = Access(em, op, mem, indices, res.type, in_bounds)
    mregs = _per_reg(em, op, mask[0], acc.d) if mask else None
    oregs = _per_reg(em, op, other[0], acc.d) if other else None
    groups = acc.vector_groups(8 if kt[1] == 2 else 4)
    for ks in rounds:
        want = None if ks is None else set(ks)
        got = {}
        for g in groups:
            if want is not None and g[0] not in want:
                continue
            if want is not None and not want.issuperset(g):
                fail(op, "PTX backend: a load's vector crosses two chunks of tensor memory")
            p = acc.pred(g[0])
            if mregs is not None:
                p = _and(em, p, mregs[g[0]]) if len(g) == 1 else fail(op, "masked vector load")
            others = [oregs[k] if oregs is not None else None for k in g]
            regs = load_group(em, opcode, kt, p, others, acc.addr(g[0]), len(g))
            got.update(zip(g, regs))
        yield got


def load_group(em: Emitter, opcode: str, kt, guard, others: list, addr: str, n: int) -> list:
    """One vector load of ``n`` elements at ``addr`` (2, 4 or 8 16-bit elements as packed b32
    words, split by ``mov.b32``: ptxas reads the halves where they are, where ``ld.v2.b16``
    cost two ``PRMT`` an element), each element ``others[j]`` where ``guard`` is false."""
    if n in (2, 4, 8) and kt[0] == "b16" and kt[1] == 2:
        po = [None] * (n // 2)
        if guard is not None:
            po = [_pack(em, others[2 * j], others[2 * j + 1]) for j in range(n // 2)]
        words = load_elems(em, opcode, ("b32", 4, "b32", "b32"), guard, po, addr)
        regs = []
        for w in words:
            lo, hi = em.new("b16"), em.new("b16")
            em.ins(f"mov.b32 {{{lo}, {hi}}}, {w}")
            regs += [lo, hi]
        return regs
    return load_elems(em, opcode, kt, guard, others, addr)


def store_group(em: Emitter, opcode: str, kt, guard, vals: list, addr: str) -> None:
    """One vector store of ``vals`` at ``addr`` (8 16-bit elements as four packed b32 words)."""
    if len(vals) == 8 and kt[0] == "b16" and kt[1] == 2:
        words = [_pack(em, vals[2 * j], vals[2 * j + 1]) for j in range(4)]
        store_elems(em, opcode, ("b32", 4, "b32", "b32"), guard, words, addr)
    else:
        store_elems(em, opcode, kt, guard, vals, addr)


def _pack(em: Emitter, lo, hi) -> Optional[str]:
    if lo is None and hi is None:
        return None
    r = em.new("b32")
    z = em.mov("b16", 0) if lo is None or hi is None else None
    em.ins(f"mov.b32 {r}, {{{lo or z}, {hi or z}}}")
    return r


@handles("nv_tileaa.tiled_store")
def tiled_store(em: Emitter, op) -> None:
    if "nv_tileas.tma_store" in op.attributes:  # the async path's epilogue (async_store.py)
        from tilegen.runtime.codegen.async_store import tma_store_epilogue

        return tma_store_epilogue(em, op)
    value = _group(op, "value")[0]
    if "nv_tileas.tmem_store" in op.attributes:  # the async path's (async_epilogue.tmem_store_plan)
        from tilegen.runtime.codegen import tmem_store

        if tmem_store.store(em, op, value):  # (else the TMEM rows as they are: _store_rounds)
            for r in op.results:
                em.set(r, None)
            return
    mem, indices, in_bounds = _tiled_operands(em, op)
    if not is_tile(value.type):
        return element_access(em, op, load=False)
    mask = _group(op, "mask")
    kt = mem_types(op, mem.element)
    opcode = st_opcode(em, op, _space(mem.type))
    acc = Access(em, op, mem, indices, value.type, in_bounds)
    mregs = _per_reg(em, op, mask[0], acc.d) if mask else None
    groups = acc.vector_groups(8 if kt[1] == 2 else 4)
    for regs, gs in _store_rounds(em, op, value, groups):
        for g in gs:
            p = acc.pred(g[0])
            if mregs is not None:
                p = _and(em, p, mregs[g[0]]) if len(g) == 1 else fail(op, "masked vector store")
            c = em.canonical(acc.d, g[0])
            if c == "0":
                continue
            p = _and(em, p, c)
            store_group(em, opcode, kt, p, [regs[k] for k in g], acc.addr(g[0]))
    for r in op.results:
        em.set(r, None)


def _store_rounds(em: Emitter, op, value, groups: list):
    """(registers, the groups they complete) in the order a store writes them: the value's
    registers and every group at once; for a loop's result kept in tensor memory
    (``tmem_resident.Epilogue``), a round per chunk of columns as it is read."""
    pending = em.tmem_rows  # the async loop's TMEM rows (async_epilogue.tmem_store_plan)
    if pending is not None and pending.chain[-1] is value:
        from tilegen.runtime.codegen import tmem_chunks

        em.tmem_rows = None
        yield from tmem_chunks.store_rounds(em, pending, op, value, groups)
        return
    ep = em.tmem_epilogues.get(op) if em.tmem_epilogues else None
    if ep is None:
        yield em.tile(op, value), groups
        return
    from tilegen.runtime.codegen import tmem_resident

    yield from tmem_resident.rounds(em, ep, groups)


# ----------------------------------------------------------------------------- pointers


def scaled_offset(em: Emitter, x, xcls, stride, esize: int) -> str:
    """b64 register ``x * stride * esize``; x and stride: ints or index registers (b32: signed
    i32, b64: i64; ``xcls`` is ignored, the registers say their class). Two 32-bit operands
    multiply with ``mul.wide.s32``; where a 64-bit one takes part, both are widened first."""
    t = em.new("b64")
    if isinstance(x, int) and isinstance(stride, int):
        em.ins(f"mov.u64 {t}, {x * stride * esize}")
        return t
    if em.index_class(x, stride) == "b64":
        x, stride = em.as_index(x, "b64"), em.as_index(stride, "b64")
        if isinstance(x, int):
            x, stride = stride, x
        if isinstance(stride, int):
            em.ins(f"mul.lo.s64 {t}, {x}, {stride * esize}")
            return t
        em.ins(f"mul.lo.s64 {t}, {x}, {stride}")
        if esize != 1:
            n = em.new("b64")
            em.ins(f"mul.lo.s64 {n}, {t}, {esize}")
            t = n
        return t
    if isinstance(x, int):
        x = em.mov("b32", x)
    if isinstance(stride, int):
        em.ins(f"mul.wide.s32 {t}, {x}, {stride * esize}")
        return t
    em.ins(f"mul.wide.s32 {t}, {x}, {stride}")
    if esize != 1:
        n = em.new("b64")
        em.ins(f"mul.lo.s64 {n}, {t}, {esize}")
        t = n
    return t


def _int_cls(op, t) -> str:
    key = elem_key(t)
    if key in ("i64",):
        return "b64"
    if key in ("i32", "i16", "i8"):
        if key != "i32":
            fail(op, f"PTX backend does not support {key} offsets in '{op.name}' yet")
        return "b32"
    fail(op, f"PTX backend does not support offsets of type {t} in '{op.name}' yet")


@handles("nv_tileaa.addptr")
def addptr(em: Emitter, op) -> None:
    base, off = op.operands[0], op.operands[1]
    res = op.results[0]
    key = pointee_key(res.type)
    esize = _pointee_bytes(op, res.type)
    if key is None:
        fail(op, "PTX backend: 'nv_tileaa.addptr' on a non-pointer")
    ocls = _int_cls(op, off.type)
    if not is_tile(res.type):
        p, o = em.scalar(op, base), em.scalar(op, off)
        em.set(res, _offset(em, p, o, ocls, esize))
        return
    d = em.dist_of(op, res.type)
    ps, os = _per_reg(em, op, base, d), _per_reg(em, op, off, d)
    out = affine.addptr(em, ps, os, esize) if ocls == "b64" else None
    if out is None:
        out = [_offset(em, p, o, ocls, esize) for p, o in zip(ps, os)]
    em.set(res, out)


def _offset(em: Emitter, p, o, ocls: str, esize: int) -> str:
    p = reg(em, "b64", p)
    n = em.new("b64")
    if isinstance(o, int) or not str(o).startswith("%"):
        em.ins(f"add.s64 {n}, {p}, {int(o) * esize}")
        return n
    if ocls == "b32":
        t = em.new("b64")
        em.ins(f"mul.wide.s32 {t}, {o}, {esize}")
        em.ins(f"add.s64 {n}, {p}, {t}")
    elif esize == 1:
        em.ins(f"add.s64 {n}, {p}, {o}")
    else:
        em.ins(f"mad.lo.s64 {n}, {o}, {esize}, {p}")
    return n


def _pointee_bytes(op, t) -> int:
    key = pointee_key(t)
    if key in ELEMENTS:
        return ELEMENTS[key][1]
    return element_bytes((t.element if isinstance(t, TileType) else t).pointee)


@handles("nv_tileaa.int_to_ptr", "nv_tileaa.ptr_to_int")
def int_ptr_cast(em: Emitter, op) -> None:
    """Pointers and i64 share b64 registers: the value is reused."""
    src, res = op.operands[0], op.results[0]
    em.set(res, em.get(src))


def _per_reg(em: Emitter, op, v, d) -> list:
    """Per-register operand values of ``v`` over the distribution ``d``: a tile's registers
    (its layout must match) or a scalar repeated."""
    x = em.get(v)
    if isinstance(x, list) and d is not None and x and all(r == x[0] for r in x):
        return [x[0]] * d.nregs  # (a uniform tile: any layout will do)
    if isinstance(x, list):
        if d is None or tuple(v.type.shape) != d.shape:
            fail(op, f"PTX backend: an operand of '{op.name}' has another shape")
        src = em.dist_of(op, v.type)
        if src.layout == d.layout:
            return x
        # the layout pass left a mismatch: convert (registers where possible, else shared)
        from tilegen.runtime.codegen.exchange import exchange, row_major

        cls, esize, _ = ELEMENTS[elem_key(v.type)]
        n = 1
        for s in d.shape:
            n *= s
        form = row_major(d.shape)
        return exchange(em, cls, esize, [(x, src, form)], d, form, n)
    if d is None:
        return [x]
    return [x] * d.nregs


class Elements:
    """Per-register addresses (``[...]`` text) and bounds predicates of an element-wise access:
    through a pointer (tile) plus optional element offsets, or through a memref at per-element
    (or scalar) coordinates, where elements outside the memref are masked off."""

    def __init__(self, em: Emitter, op, t):
        self.em, self.op = em, op
        self.d = em.dist_of(op, t) if is_tile(t) else None
        n = self.d.nregs if self.d else 1
        base = _group(op, "base")[0]
        bv = em.get(base)
        idx = _group(op, "indices")
        self.addrs: list = []
        self.preds: list = [None] * n
        self.pointer = None  # the pointer (tile) value of an access through pointers
        if isinstance(bv, Memref):
            self.key = bv.element
            self.space = _space(bv.type)
            _check_space(op, self.space)
            if len(idx) != len(bv.sizes):
                fail(op, f"PTX backend: '{op.name}' needs one index per memref dim")
            esize = ELEMENTS[bv.element][1]
            cols = [(_per_reg(em, op, v, self.d), _int_cls(op, v.type)) for v in idx]
            ib = op.attributes.get("in_bounds")
            inb = list(ib.values) if ib is not None else [False] * len(idx)
            inb = [False] * len(idx) if _memchecked() else inb
            cache: dict = {}
            for k in range(n):
                a, p = reg(em, "b64", bv.ptr), None
                for i, (vals, cls) in enumerate(cols):
                    x = vals[k]
                    key = (i, x)
                    if key not in cache:
                        q = None if inb[i] else self._in_range(x, cls, bv.sizes[i])
                        cache[key] = (scaled_offset(em, x, cls, bv.strides[i], esize), q)
                    off, q = cache[key]
                    m = em.new("b64")
                    em.ins(f"add.s64 {m}, {a}, {off}")
                    a, p = m, _and(em, p, q)
                self.addrs.append(f"[{a}]")
                self.preds[k] = p
        else:
            self.key = pointee_key(base.type)
            self.space = _space(base.type)
            _check_space(op, self.space)
            ptrs = _per_reg(em, op, base, self.d)
            if len(idx) > 1:
                fail(op, f"PTX backend: '{op.name}' through a pointer takes one offset")
            if idx:
                esize = _pointee_bytes(op, base.type)
                offs = _per_reg(em, op, idx[0], self.d)
                cls = _int_cls(op, idx[0].type)
                ptrs = [_offset(em, p, o, cls, esize) for p, o in zip(ptrs, offs)]
            # a pointer with a fact: [base+c], one base register for the whole tile
            self.addrs = [affine.address(em, p) or f"[{reg(em, 'b64', p)}]" for p in ptrs]
            self.pointer = base
        self.kt = mem_types(op, self.key)
        self.esize = ELEMENTS[self.key][1] if self.key in ELEMENTS else 1

    def _in_range(self, x, cls: str, size):
        if isinstance(x, int) and isinstance(size, int):
            return None if 0 <= x < size else "0"
        return self.em.lt_u(x, size)


def _memchecked() -> bool:
    from tilegen.runtime.options import current

    return current().sanitize == "memcheck"


def _memcheck(em: Emitter, op, el: "Elements", guards: list, kind) -> None:
    """``--sanitize=memcheck``: bounds checks on a global access through pointers."""
    from tilegen.runtime.codegen import sanitize

    if el.pointer is None or el.space not in ("global", None) or not sanitize.active():
        return
    addrs = [a[1:-1] for a in el.addrs]
    kind = kind if isinstance(kind, str) else ("load" if kind else "store")
    sanitize.check_pointer_access(em, op, el.pointer, addrs, guards, el.esize, kind)


def element_access(em: Emitter, op, load: bool) -> None:
    """load / gather_load / store / scatter_store (and rank-0 tiled accesses)."""
    if load:
        t = op.results[0].type
    else:
        t = _group(op, "value")[0].type
    el = Elements(em, op, t)
    d = el.d
    n = len(el.addrs)
    # through a pointer tile the layout stage proved runs of contiguous, aligned, uniformly
    # masked elements (layouts/axis_info.py): one vector access a run, its first element's
    # address and mask; the guards of the other elements are then not needed
    groups = [[k] for k in range(n)]
    width = vector_width(op) if el.pointer is not None and d is not None else 1
    if width > 1 and not _memchecked():
        v = min(width, 8 if el.kt[1] == 2 else 4, 16 // el.esize)
        groups = vector_runs(d, v, wrapping=True)
    firsts = [g[0] for g in groups]
    mask = _group(op, "mask")
    mregs = _per_reg(em, op, mask[0], d) if mask else [None] * n
    if load:
        other = _group(op, "other")
        oregs = _per_reg(em, op, other[0], d) if other else [None] * n
        opcode = ld_opcode(em, op, el.space)
        guards = [None] * n
        for k in firsts:
            guards[k] = _and(em, el.preds[k], mregs[k])
        _memcheck(em, op, el, guards, load)
        out = [None] * n
        for g in groups:
            others = [oregs[k] for k in g]
            regs = load_group(em, opcode, el.kt, guards[g[0]], others, el.addrs[g[0]], len(g))
            for r, k in zip(regs, g):
                out[k] = r
        em.set(op.results[0], out if d is not None else out[0])
        for r in op.results[1:]:
            em.set(r, None)
        return
    vregs = _per_reg(em, op, _group(op, "value")[0], d)
    opcode = st_opcode(em, op, el.space)
    lead = leader(em) if d is None else None
    guards = [None] * n
    for k in firsts:
        c = em.canonical(d, k) if d is not None else lead
        guards[k] = _and(em, _and(em, el.preds[k], mregs[k]), c)
    _memcheck(em, op, el, guards, load)
    for g in groups:
        store_group(em, opcode, el.kt, guards[g[0]], [vregs[k] for k in g], el.addrs[g[0]])
    for r in op.results:
        em.set(r, None)


@handles("nv_tileaa.load", "nv_tileaa.gather_load")
def load(em: Emitter, op) -> None:
    element_access(em, op, load=True)


@handles("nv_tileaa.store", "nv_tileaa.scatter_store")
def store(em: Emitter, op) -> None:
    element_access(em, op, load=False)


from tilegen.runtime.codegen import atomics  # noqa: E402,F401  (registers its handlers)

__all__ = [
    "Access",
    "Elements",
    "cache_suffix",
    "ld_opcode",
    "leader",
    "mem_types",
    "sem_scope",
    "st_opcode",
    "MemTokenType",
]


# ----------------------------------------------------------------------------- module globals


def _symbol(a) -> str:
    for attr in ("value", "name", "root"):
        v = getattr(a, attr, None)
        if isinstance(v, str):
            return v.lstrip("@")
    return str(a).lstrip("@")


@handles("nv_tileaa.get_global")
def get_global(em: Emitter, op) -> None:
    """The address of a module ``nv_tileaa.global``, declared once as a PTX ``.global`` byte
    array holding its initial value (row-major, little-endian)."""
    import struct

    name = _symbol(op.attributes["name"])
    top = em.func
    while top.parent_op is not None:
        top = top.parent_op
    g = next(
        (
            o
            for o in top.walk()
            if o.name == "nv_tileaa.global" and _symbol(o.attributes.get("sym_name")) == name
        ),
        None,
    )
    if g is None:
        fail(op, f"PTX backend: no nv_tileaa.global named '{name}'")
    t = g.attributes["type"].value
    key = elem_key(t)
    if key not in ELEMENTS or ELEMENTS[key][0] == "pred":
        fail(op, f"PTX backend does not support globals of type {t} yet")
    esize = ELEMENTS[key][1]
    count = 1
    for s in t.shape if isinstance(t, TileType) else ():
        count *= s
    init = g.attributes.get("initial_value")
    data = b"\0" * (count * esize)
    if init is not None:
        vals = list(init.values) * (count if len(init.values) == 1 else 1)
        fmt = {"f32": "<f", "f64": "<d"}.get(key)
        if fmt is None and key.startswith("f"):
            fail(op, f"PTX backend does not support initial values of type {t} yet")
        data = b"".join(
            struct.pack(fmt, v) if fmt else (int(v) % (1 << 8 * esize)).to_bytes(esize, "little")
            for v in vals
        )
    body = ", ".join(str(b) for b in data)
    decl = f".global .align {esize} .b8 {name}[{len(data)}] = {{{body}}};"
    if decl not in em.globals:
        em.globals.append(decl)
    r = em.new("b64")
    em.ins(f"mov.u64 {r}, {name}")
    em.set(op.results[0], r)


# ----------------------------------------------------------------------------- cp.async staging


class Staged:
    """A ``tiled_load`` whose only use (possibly through a :class:`StagePlan` chain of views /
    permutes / a tf32 conversion) is operand A or B of a ``dot``: nothing is emitted at the load;
    the dot either copies the tile straight into its shared-memory operand buffer with
    ``cp.async`` (:func:`cp_async_tile`) or, where its path has no such layout, loads it into
    registers then (:func:`materialize`; the load only moves later past ops that do not write
    memory). The copied tile is 2-D in memory order: the load's last two dims (rows, cols; the
    leading ones have extent 1); ``plan.transposed``: the dot operand is its transpose."""

    def __init__(self, em: Emitter, op, plan: "StagePlan"):
        self.op, self.plan = op, plan
        #: a tile several dots read (:func:`_boxed_plan`): a permute on the way flips
        #: ``transposed`` for the dots after it (:meth:`flipped`, Emitter.emit_op)
        self.flips = False
        self._flip = False
        self.mem, indices, self.in_bounds = _tiled_operands(em, op)
        self.starts = [em.scalar(op, v) for v in indices]
        self.shape = tuple(op.results[0].type.shape)[-2:]
        self.esz = ELEMENTS[self.mem.element][1]
        self.vec = plan.vec
        self.pipe_buf = None  # set by a pipelined scf.for: the data is already in that buffer

    @property
    def transposed(self) -> bool:
        return self.plan.transposed != self._flip

    @property
    def asynchronous(self) -> bool:
        """Whether the copy is by cp.async (4 or more aligned bytes a chunk), not through
        registers."""
        return self.vec * self.esz >= 4

    def flipped(self) -> "Staged":
        """The same staged tile, read transposed (a permute on one path of several)."""
        out = copy.copy(self)
        out._flip = not self._flip
        return out

    @property
    def convert(self) -> Optional[str]:
        return self.plan.convert


class StagePlan:
    """How a stageable load reaches its dot: cp.async width, the ops in between, the dot and
    operand index, whether the operand is the tile transposed, and the per-fragment conversion
    (an f32 -> tf32 ``fp_to_fp``: its instruction is ``selection.conversion_ptx``)."""

    def __init__(self, vec, chain, dot, idx, transposed, convert):
        self.vec, self.chain, self.dot, self.idx = vec, chain, dot, idx
        self.transposed, self.convert = transposed, convert


def stage_plan(op) -> Optional[StagePlan]:
    """How ``tiled_load`` ``op`` reaches its dot when the layout stage staged it for cp.async
    (``nv_tileas.cp_async``, runtime/layouts/staging.py), else None: the recorded width and the
    ops between the load and the dot (:func:`chain_to_dot`)."""
    vec = cp_async_width(op)
    if not vec:
        return None
    res = op.results[0]
    found = chain_to_dot(res, res.type.rank - 2)
    if found is None:
        fail(op, "PTX backend: a load staged for its dot no longer reaches the dot")
    chain, user, idx, transposed, convert = found
    return StagePlan(vec, chain, user, idx, transposed, convert)


def _boxed_plan(em: Emitter, op) -> Optional[StagePlan]:
    """A plan for a load the async general form staged by TMA (its box in ``em.pipe_bufs``)
    that several dots read, some as loaded and some transposed (the attention backward's K:
    docs/pipelines.md section 24): every view and permute on the way passes the staged tile
    through; each dot reads the one box with its own major-ness."""
    from tilegen.runtime.codegen.mma_staging import StagedBox
    from tilegen.runtime.layouts.staging import dot_paths

    if not isinstance(getattr(em, "pipe_bufs", {}).get(op), StagedBox):
        return None
    res = op.results[0]
    paths = dot_paths(res, res.type.rank - 2)
    if not paths or len(paths) < 2:
        return None
    chain = list(dict.fromkeys(c for p in paths for c in p[0]))
    return StagePlan(0, chain, None, 1, False, None)


def stage_width(op) -> int:
    """Elements per ``cp.async`` if ``op`` can be staged for its dot, else 0."""
    plan = stage_plan(op)
    return plan.vec if plan is not None else 0


def materialize(em: Emitter, st: "Staged") -> list:
    """The staged operand in registers after all (the dot's path cannot take it by cp.async):
    the load, then its chain ops, emitted here."""
    em.set(st.op.results[0], None)
    tiled_load(em, st.op, force=True)
    v = st.op.results[0]
    for c in st.plan.chain:
        em.staged_chain.discard(c)
        em.emit_op(c)
        v = c.results[0]
    return em.get(v)


def _copy_through_registers(
    em: Emitter, gp, imm: int, dst: str, doff: int, n: int, esz: int, active, rp, left
) -> None:
    """One thread's chunk of a synchronous staged copy (where ``active`` holds): ``n`` elements
    of ``esz`` (1 or 2) bytes from ``[gp+imm]``, an address of no known alignment (element
    ``j`` is read where the row is in bounds, ``rp``, and ``j < left``, else 0: the load's
    zero padding), stored at ``[dst+doff]``.

    A chunk of ``4 w`` bytes is read as the ``w + 1`` aligned words that cover it, each loaded
    only where it holds a byte of the chunk's in-bounds part (a word holding one valid byte is
    on that byte's page), and funnel-shifted into place (``shf.r``) by the address's
    misalignment; bytes past ``left`` are masked to 0. One ``st.shared.v4`` stores it."""
    pred = _and(em, active, rp)
    sg = f"@{active} " if active else ""
    nbytes = n * esz
    if nbytes < 4:  # a chunk narrower than a word (a tile of fewer than 4 bytes a row)
        for j in range(n):
            g = pred
            if left is not None:
                q = em.new("pred")
                em.ins(f"setp.gt.s32 {q}, {left}, {j}")
                g = _and(em, g, q)
            r = em.new("b32")
            src = f"[{gp}+{imm + j * esz}]" if imm + j * esz else f"[{gp}]"
            em.ins(f"mov.b32 {r}, 0")
            em.ins(f"{'@' + g + ' ' if g else ''}ld.global.u{8 * esz} {r}, {src}")
            em.ins(f"{sg}st.shared.b{8 * esz} [{dst}+{doff + j * esz}], {r}")
        return
    w = nbytes // 4
    addr = gp
    if imm:
        addr = em.new("b64")
        em.ins(f"add.s64 {addr}, {gp}, {imm}")
    low, sh, bits = em.new("b32"), em.new("b32"), em.new("b32")
    em.ins(f"cvt.u32.u64 {low}, {addr}")
    em.ins(f"and.b32 {sh}, {low}, 3")
    em.ins(f"shl.b32 {bits}, {sh}, 3")
    base = em.new("b64")
    em.ins(f"and.b64 {base}, {addr}, -4")
    # the bytes from the first word's start to the chunk's in-bounds end: word i is read where
    # 4 i is below that
    valid = None
    if left is not None:
        valid = em.new("b32")
        em.ins(
            f"mad.lo.s32 {valid}, {left}, {esz}, {sh}"
            if esz > 1
            else f"add.s32 {valid}, {left}, {sh}"
        )
    words = []
    for i in range(w + 1):
        g = pred
        if valid is not None:
            q = em.new("pred")
            em.ins(f"setp.lt.s32 {q}, {4 * i}, {valid}")
            g = _and(em, g, q)
        elif i == w:  # the word past the chunk: only where the address is misaligned
            q = em.new("pred")
            em.ins(f"setp.ne.s32 {q}, {sh}, 0")
            g = _and(em, g, q)
        r = em.new("b32")
        src = f"[{base}+{4 * i}]" if i else f"[{base}]"
        if g is None:
            em.ins(f"ld.global.b32 {r}, {src}")
        else:
            em.ins(f"mov.b32 {r}, 0")
            em.ins(f"@{g} ld.global.b32 {r}, {src}")
        words.append(r)
    out = []
    for i in range(w):
        r = em.new("b32")
        em.ins(f"shf.r.clamp.b32 {r}, {words[i]}, {words[i + 1]}, {bits}")
        if left is not None:  # keep the chunk's first left * esz bytes
            keep, m = em.new("b32"), em.new("b32")
            em.ins(
                f"mul.lo.s32 {keep}, {left}, {8 * esz}" if esz > 1 else f"shl.b32 {keep}, {left}, 3"
            )
            if i:
                em.ins(f"sub.s32 {keep}, {keep}, {32 * i}")
            em.ins(f"max.s32 {keep}, {keep}, 0")
            em.ins(f"shl.b32 {m}, -1, {keep}")  # (a shift of 32 or more: 0, all kept)
            em.ins(f"not.b32 {m}, {m}")
            em.ins(f"and.b32 {r}, {r}, {m}")
        out.append(r)
    for i in range(0, w, 4):
        part = out[i : i + 4]
        v = {1: "", 2: ".v2", 4: ".v4"}[len(part)]
        src = part[0] if len(part) == 1 else "{" + ", ".join(part) + "}"
        em.ins(f"{sg}st.shared{v}.b32 [{dst}+{doff + 4 * i}], {src}")


def cp_async_tile(
    em: Emitter,
    st: "Staged",
    row_fields,
    col_fields,
    buf: str,
    off: int = 0,
    guard: Optional[str] = None,
    threads: Optional[tuple] = None,
    swizzle: int = 0,
    atom: int = 16,
) -> None:
    """Copy the staged tile global -> shared with ``cp.async`` (no commit): element (r, c) lands
    at shared byte ``buf + off + F_row(r) + F_col(c)``, each ``F`` a sum of bit fields times
    constants (as ``smem_fields.write_fields``; row-major with pitch P: ``((0, None, P),)`` and
    ``((0, None, esz),)``). Thread ``tid`` copies chunk ``tid % cpr`` (``vec`` elements) of rows
    ``tid / cpr + p * T / cpr`` (when a row has more chunks than the CTA has threads, chunks
    ``tid + q * T`` of every row); out-of-bounds chunks are zero-filled (src-size 0), which is
    the load's zero padding. ``guard``: a predicate that must also hold (pipeline prefetch).
    ``threads``: (thread index register, thread count) of the copying threads, when not the
    CTA's (the async path's producer warp group); ``swizzle``: the 16-byte chunks land swizzled
    by that span (TMA's stage layout, ``tma.swizzle_address``; ``buf`` 1024-aligned), or the
    32-byte ones where ``atom`` is 32 (128B_ATOM_32B: bits [5, 7) XOR bits [7, 9))."""
    R, C = st.shape
    vec, esz = st.vec, st.esz
    # fewer than 4 aligned bytes (a row pitch of no 4-byte multiple): no cp.async can copy
    # them; each thread loads a 16-byte chunk element by element, packs it into words and
    # stores those (the register path had held the whole tile in registers at once)
    sync = not st.asynchronous
    if sync:
        vec = min(16 // esz, C)
    cp = vec * esz
    cpr = C // vec
    tid, T = threads or (em.tid()[0], em.num_threads)
    lg = cpr.bit_length() - 1
    rpp = max(1, T // cpr)  # rows per pass
    passes = max(1, R // rpp)
    key = ("cp-async-thr", R, C, vec, row_fields, col_fields, T, tid)
    if threads is not None or key not in em._smem_refs:  # (the producer's: computed in place)
        with em.hoisted() if threads is None else contextlib.nullcontext():
            tr, tc = em.new("b32"), em.new("b32")
            em.ins(f"shr.u32 {tr}, {tid}, {lg}")
            em.ins(f"and.b32 {tc}, {tid}, {cpr - 1}")
            ce = em.new("b32")
            em.ins(f"shl.b32 {ce}, {tc}, {vec.bit_length() - 1}")
            so = em.lincomb(
                0,
                [
                    (1, fields_emit(em, tr, row_fields, min(rpp, R))),
                    (1, fields_emit(em, ce, col_fields, C)),
                ],
            )
            so = em.mov("b32", so) if isinstance(so, int) else so
            em._smem_refs[key] = (tr, ce, so)
    tr, ce, so = em._smem_refs[key]
    mem = st.mem
    lead = len(st.starts) - 2
    active = guard
    if T // cpr > R:  # more threads than chunks
        p = em.new("pred")
        em.ins(f"setp.lt.u32 {p}, {tid}, {R * cpr}")
        active = _and(em, active, p)
    r0 = em.lincomb(0, [(1, st.starts[lead]), (1, tr)])
    c0 = em.lincomb(0, [(1, st.starts[lead + 1]), (1, ce)])
    addr = reg(em, "b64", mem.ptr)
    terms = [(st.starts[i], mem.strides[i]) for i in range(lead)]
    for x, s in terms + [(r0, mem.strides[lead]), (c0, 1)]:
        if isinstance(x, int) and x == 0:
            continue
        t = scaled_offset(em, x, None, s, esz)
        n = em.new("b64")
        em.ins(f"add.s64 {n}, {addr}, {t}")
        addr = n
    for i in range(lead):  # the leading (extent 1) dims: the whole tile is in or out
        if not st.in_bounds[i]:
            active = _and(em, active, em.lt_u(st.starts[i], mem.sizes[i]))
    # chunks a thread copies per row: more than one when a row has more chunks than the CTA
    # has threads (thread tid then copies chunks tid + q T, q < cpt)
    cpt = max(1, cpr // T)

    def chunk_bytes(cq: int):
        """In-bounds bytes of this thread's chunk at column offset ``cq`` (None: all;
        elements when the copy is synchronous)."""
        if st.in_bounds[lead + 1]:
            return None
        size = mem.sizes[lead + 1]
        cls = em.index_class(size, c0)  # the clamped count fits 32 bits: narrowed after
        s = "s64" if cls == "b64" else "s32"
        left = em.new(cls)
        size, col = reg(em, cls, em.as_index(size, cls)), reg(em, cls, em.as_index(c0, cls))
        em.ins(f"sub.{s} {left}, {size}, {col}")
        if cq:
            em.ins(f"sub.{s} {left}, {left}, {cq}")
        em.ins(f"max.{s} {left}, {left}, 0")
        em.ins(f"min.{s} {left}, {left}, {vec}")
        left = em.as_index(left, "b32")
        if esz == 1 or sync:
            return left
        colb = em.new("b32")
        em.ins(f"mul.lo.s32 {colb}, {left}, {esz}")
        return colb

    colbs = [chunk_bytes(q * T * vec) for q in range(cpt)]
    rstride = mem.strides[lead]
    step = None
    if passes > 1 and not isinstance(rstride, int):
        step = scaled_offset(em, rpp, None, rstride, esz)
    dst = em.new("b32")
    em.ins(f"add.s32 {dst}, {buf}, {so}")
    opc = "cp.async.cg.shared.global" if cp == 16 else "cp.async.ca.shared.global"

    def at(so_p: int) -> tuple:
        """(address register, immediate) of the chunk at ``so_p`` bytes past the thread's."""
        if not swizzle:
            return dst, so_p
        from tilegen.runtime.codegen.tma import swizzled_reg as _swizzled

        o = em.new("b32")
        em.ins(f"add.s32 {o}, {so}, {so_p}")
        if atom == 32:
            t, s = em.new("b32"), em.new("b32")
            em.ins(f"shr.u32 {t}, {o}, 2")
            em.ins(f"and.b32 {t}, {t}, 96")
            em.ins(f"xor.b32 {s}, {o}, {t}")
        else:
            s = _swizzled(em, o, swizzle)
        a = em.new("b32")
        em.ins(f"add.s32 {a}, {buf}, {s}")
        return a, 0

    gp = addr
    for p in range(passes):
        imm0 = 0
        if p:
            if step is not None:
                n = em.new("b64")
                em.ins(f"add.s64 {n}, {gp}, {step}")
                gp = n
            else:
                imm0 = p * rpp * rstride * esz
        rp = None
        if not st.in_bounds[lead]:
            rp = em.lt_u(em.lincomb(p * rpp, [(1, r0)]), mem.sizes[lead])
        for q in range(cpt):
            cq = q * T * vec
            imm = imm0 + cq * esz
            so_p = fields_static(p * rpp, row_fields) + fields_static(cq, col_fields) + off
            d, d_imm = at(so_p)
            if sync:
                _copy_through_registers(em, gp, imm, d, d_imm, vec, esz, active, rp, colbs[q])
                continue
            size = colbs[q]
            if rp is not None:
                size = em.new("b32")
                em.ins(f"selp.u32 {size}, {colbs[q] if colbs[q] is not None else cp}, 0, {rp}")
            g = f"@{active} " if active else ""
            src = f"[{gp}+{imm}]" if imm else f"[{gp}]"
            dref = f"[{d}]" if swizzle else f"[{d}+{d_imm}]"
            if size is None:
                em.ins(f"{g}{opc} {dref}, {src}, {cp}")
            else:
                em.ins(f"{g}{opc} {dref}, {src}, {cp}, {size}")
