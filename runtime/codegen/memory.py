"""Global memory through memrefs: make_memref, tiled_load / tiled_store with bounds masks,
padding values and vector accesses.

Addresses: per thread one base address ``ptr + sum_d (index_d + base_d(tid)) * stride_d`` is
computed once per access; each register adds its constant offset ``raw_d * stride_d`` as an
immediate (``[addr+imm]``) where strides are static, or one cached product per distinct offset
where they are not. Registers whose coordinates can wrap (replicated layouts) take the general
path. Vector width: the layout's contiguous elements per thread along the unit-stride dim, which
the layout pass only widens where alignment and mask uniformity are proven.
"""

from __future__ import annotations

from tilegen.runtime.codegen.core import (
    ELEMENTS,
    Emitter,
    Memref,
    elem_key,
    fail,
    handles,
    is_tile,
)
from tilegen.runtime.types import DYNAMIC, MemTokenType, NvMemRefType


@handles("nv_tileaa.make_memref")
def make_memref(em: Emitter, op) -> None:
    t = op.results[0].type
    elem = elem_key(t.element) if isinstance(t, NvMemRefType) else None
    if elem not in ELEMENTS:
        fail(op, f"PTX backend does not support memrefs of {getattr(t, 'element', t)} yet")
    base = em.get(op.operands[0])
    ints = [em.scalar(op, v) for v in op.operands[1:]]
    dyn_sizes = sum(1 for s in t.shape if s == DYNAMIC)
    dyn_strides = sum(1 for s in t.stride_values if s == DYNAMIC)
    if not isinstance(base, str) or len(ints) != dyn_sizes + dyn_strides:
        fail(op, "PTX backend does not support this 'nv_tileaa.make_memref' form yet")
    it = iter(ints)
    sizes = [next(it) if s == DYNAMIC else s for s in t.shape]
    strides = [next(it) if s == DYNAMIC else s for s in t.stride_values]
    em.set(op.results[0], Memref(base, sizes, strides, elem, t.address_space, t))


def _group(op, name: str) -> list:
    return list(op.opdef.operand_group(op, name))


def _check_plain(op, mem: Memref) -> None:
    sem = op.attributes.get("mem_semantic")
    if sem is not None and sem.value != 0:
        fail(op, f"PTX backend supports only weak '{op.name}' yet")
    if mem.address_space != 1:
        fail(op, f"PTX backend supports '{op.name}' only on global memory yet")


def cache_suffix(op) -> str:
    """ld/st cache operator from the op's hints (none yet: the default .ca/.wb)."""
    return ""


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
        """b64 register x * stride * esize (x: int or b32 register; stride: int or register)."""
        em = self.em
        t = em.new("b64")
        if isinstance(stride, int):
            if isinstance(x, int):
                em.ins(f"mov.u64 {t}, {x * stride * self.esize}")
            else:
                em.ins(f"mul.wide.s32 {t}, {x}, {stride * self.esize}")
        else:
            m = em.new("b32")
            em.ins(f"mul.lo.s32 {m}, {x}, {stride}")
            em.ins(f"mul.wide.s32 {t}, {m}, {self.esize}")
        return t

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
                x = self.index(i, k)
                p = em.new("pred")
                if isinstance(x, int):
                    x = em.mov("b32", x)
                em.ins(f"setp.lt.u32 {p}, {x}, {self.mem.sizes[i]}")
                self._pred[key] = p
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

    def vector_groups(self) -> list[list[int]]:
        """Registers grouped into vector accesses (consecutive along the unit-stride dim)."""
        d = self.d
        n = d.nregs
        lay = d.root
        fast = lay.order[0]
        v = lay.size_per_thread[fast]
        if (
            d.layout is not lay
            or self.mem.strides[fast] != 1
            or v < 2
            or any(d.wraps(r, k) for k in range(n) for r in range(lay.rank))
        ):
            return [[k] for k in range(n)]
        v = min(v, 4, 16 // self.esize)
        if v < 2:
            return [[k] for k in range(n)]
        groups = []
        for k0 in range(0, n, v):
            g = list(range(k0, min(n, k0 + v)))
            ok = len(g) == v and all(
                d.raw[g[j]][fast] == d.raw[g[0]][fast] + j
                and all(d.raw[g[j]][r] == d.raw[g[0]][r] for r in range(lay.rank) if r != fast)
                for j in range(v)
            )
            groups.append(g if ok else None)
        if any(g is None for g in groups):
            return [[k] for k in range(n)]
        return groups


def _tiled_operands(em: Emitter, op, has_value: bool):
    base = _group(op, "base")[0]
    mem = em.get(base)
    if not isinstance(mem, Memref):
        fail(op, f"PTX backend supports '{op.name}' only through a make_memref")
    _check_plain(op, mem)
    indices = _group(op, "indices")
    ib = op.attributes.get("in_bounds")
    in_bounds = list(ib.values) if ib is not None else [False] * len(mem.sizes)
    return mem, indices, in_bounds


def _ldst_type(mem: Memref) -> str:
    return ELEMENTS[mem.element][2]


@handles("nv_tileaa.tiled_load")
def tiled_load(em: Emitter, op) -> None:
    mem, indices, in_bounds = _tiled_operands(em, op, False)
    res = op.results[0]
    if not is_tile(res.type):
        fail(op, "PTX backend does not support rank-0 'nv_tileaa.tiled_load' yet")
    mask = _group(op, "mask")
    other = _group(op, "other")
    cls = ELEMENTS[mem.element][0]
    if cls == "pred":
        fail(op, "PTX backend does not support loads of i1 memrefs yet")
    lst = _ldst_type(mem)
    acc = Access(em, op, mem, indices, res.type, in_bounds)
    mregs = em.tile(op, mask[0]) if mask else None
    oregs = em.tile(op, other[0]) if other else None
    out = [None] * acc.d.nregs
    for g in acc.vector_groups():
        p = acc.pred(g[0])
        if mregs is not None:
            p = _and(em, p, mregs[g[0]]) if len(g) == 1 else fail(op, "masked vector load")
        regs = [em.new(cls) for _ in g]
        if p is not None:
            for r, k in zip(regs, g):
                src = oregs[k] if oregs is not None else _zero(cls)
                em.ins(f"mov.{cls} {r}, {src}")
        guard = f"@{p} " if p else ""
        if len(g) == 1:
            em.ins(f"{guard}ld.global.{lst} {regs[0]}, {acc.addr(g[0])}")
        else:
            em.ins(f"{guard}ld.global.v{len(g)}.{lst} {{{', '.join(regs)}}}, {acc.addr(g[0])}")
        for r, k in zip(regs, g):
            out[k] = r
    em.set(res, out)
    for r in op.results[1:]:
        em.set(r, None)


@handles("nv_tileaa.tiled_store")
def tiled_store(em: Emitter, op) -> None:
    mem, indices, in_bounds = _tiled_operands(em, op, True)
    value = _group(op, "value")[0]
    mask = _group(op, "mask")
    regs = em.tile(op, value)
    lst = _ldst_type(mem)
    cls = ELEMENTS[mem.element][0]
    if cls == "pred":
        fail(op, "PTX backend does not support stores to i1 memrefs yet")
    acc = Access(em, op, mem, indices, value.type, in_bounds)
    mregs = em.tile(op, mask[0]) if mask else None
    for g in acc.vector_groups():
        p = acc.pred(g[0])
        if mregs is not None:
            p = _and(em, p, mregs[g[0]]) if len(g) == 1 else fail(op, "masked vector store")
        c = em.canonical(acc.d, g[0])
        if c == "0":
            continue
        p = _and(em, p, c)
        guard = f"@{p} " if p else ""
        if len(g) == 1:
            em.ins(f"{guard}st.global.{lst} {acc.addr(g[0])}, {regs[g[0]]}")
        else:
            vals = ", ".join(regs[k] for k in g)
            em.ins(f"{guard}st.global.v{len(g)}.{lst} {acc.addr(g[0])}, {{{vals}}}")
    for r in op.results:
        em.set(r, None)


def _and(em: Emitter, p, q):
    if p is None:
        return q
    if q is None:
        return p
    n = em.new("pred")
    em.ins(f"and.pred {n}, {p}, {q}")
    return n


def _zero(cls: str) -> str:
    return {"f32": "0f00000000", "f64": "0d0000000000000000"}.get(cls, "0")


__all__ = ["Access", "cache_suffix", "MemTokenType"]
