"""``--sanitize=memcheck``: bounds checks on global accesses through pointer tiles.

An access through a pointer (``nv_tileaa.load``/``store``/``gather_load``/``scatter_store``) is
traced back to the kernel parameter its pointers derive from (through ``assume``, ``splat``,
``broadcast``, ``addptr``, reshapes and layout conversions). The array that parameter points to
is known from

1. a ``make_memref`` (cuTile's ``make_tensor_view``) on the same parameter: its sizes and strides;
2. else cuTile's calling convention, read from the kernel's mangled name (``..._K..._A<rank>...``:
   one ``A<rank>`` per array parameter, each passed as pointer, ``rank`` sizes, ``rank`` strides).

Its extent is ``1 + sum((size_i - 1) * stride_i)`` elements (0 when a size is 0). Every active
element (mask and bounds predicates true; for atomics also `atomic_rmw`/`atomic_cas`) whose byte offset from the parameter is outside
``[0, extent * element size)`` traps; the first such thread of the launch (a global flag,
``atom.exch``) first prints::

    kernels.py:12:8: memcheck: out-of-bounds global load in 'K': tile block [0, 0, 0],
    thread 5: element 257 of parameter 0 (256 elements)

and ``trap``. Accesses through views (``tiled_load``/``tiled_store``, memref element accesses)
are masked against the view's shape by construction; under memcheck the ``in_bounds`` hints
that drop those masks are ignored (runtime/codegen/memory.py), so a view access cannot leave its
view. Accesses whose pointer cannot be traced to a parameter with a known extent (pointers
carried by loops, selected, or from ``int_to_ptr``) are not checked.
"""

from __future__ import annotations

import re
from typing import Optional

from tilegen.runtime.attributes import CallSiteLoc, NameLoc
from tilegen.runtime.codegen.core import Emitter, Memref
from tilegen.runtime.diagnostics import format_location

#: ops whose first operand is the pointer (tile) their result is derived from
_THROUGH = frozenset(
    {
        "nv_tileaa.assume",
        "nv_tileaa.splat",
        "nv_tileaa.broadcast",
        "nv_tileaa.addptr",
        "nv_tileaa.reshape",
        "nv_tileaa.expand_dims",
        "nv_tileaa.view",
        "nv_tileaa.permute",
        "nv_tileaa.transpose",
        "nv_tileas.convert_layout",
        "nv_tileaa.convert_layout",
    }
)


#: set by the first thread that reports an out-of-bounds access (one message per launch)
ONCE_SYMBOL = "__tg_memcheck_reported"
ONCE_DECL = f".global .align 4 .b32 {ONCE_SYMBOL};"


def active() -> bool:
    from tilegen.runtime.options import current

    return current().sanitize == "memcheck"


def root_param(v):
    """The entry-block argument pointer value ``v`` derives from, or None."""
    for _ in range(256):
        op = getattr(v, "op", None)
        if op is None:
            block = getattr(v, "block", None)
            parent = getattr(block, "parent", None)
            owner = getattr(parent, "parent", None)
            return v if getattr(owner, "name", "") == "nv_tileaa.func" else None
        if op.name not in _THROUGH or not op.operands:
            return None
        v = op.operands[0]
    return None


def _array_ranks(symbol: str) -> Optional[list[int]]:
    """Ranks of the array parameters from cuTile's mangled kernel name, or None."""
    m = re.search(r"_K[a-z0-9]*((?:_[A-Za-z0-9]+)*)$", symbol)
    if m is None:
        return None
    return [int(t) for t in re.findall(r"_A(\d+)", m.group(1))] or None


def _is_pointer(t) -> bool:
    return "Pointer" in type(t).__name__


def _extent_from_convention(em: Emitter, arg) -> Optional[tuple]:
    """(sizes, strides) registers of array parameter ``arg`` by cuTile's calling convention."""
    ranks = _array_ranks(em.symbol)
    block = arg.block
    ptrs = [a for a in block.args if _is_pointer(a.type)]
    if ranks is None or len(ranks) != len(ptrs) or arg not in ptrs:
        return None
    rank = ranks[ptrs.index(arg)]
    i = arg.index
    ints = block.args[i + 1 : i + 1 + 2 * rank]
    if len(ints) != 2 * rank or any(_is_pointer(a.type) for a in ints):
        return None
    regs = [em.values.get(a) for a in ints]
    if any(not isinstance(r, (str, int)) for r in regs):
        return None
    return regs[:rank], regs[rank:]


def array_of(em: Emitter, arg):
    """(base pointer register, sizes, strides) of the array parameter ``arg`` points to."""
    cache = em.__dict__.setdefault("_memcheck_arrays", {})
    if arg in cache:
        return cache[arg]
    found = None
    for op in em.func.walk():
        if op.name == "nv_tileaa.make_memref" and root_param(op.operands[0]) is arg:
            mem = em.values.get(op.results[0])
            if isinstance(mem, Memref):
                found = (mem.ptr, list(mem.sizes), list(mem.strides))
                break
    if found is None:
        conv = _extent_from_convention(em, arg)
        base = em.values.get(arg)
        if conv is not None and isinstance(base, str):
            found = (base, conv[0], conv[1])
    cache[arg] = found
    return found


def _s64(em: Emitter, x):
    if isinstance(x, int):
        return x
    if em.regs.class_of(x) == "b64":
        return x
    r = em.new("b64")
    em.ins(f"cvt.s64.s32 {r}, {x}")
    return r


def _extent_bytes(em: Emitter, sizes, strides, esize: int) -> str:
    """A b64 register: the array's extent in bytes (0 when a size is not positive)."""
    ext = em.mov("b64", 1)
    empty = None
    for s, st in zip(sizes, strides):
        s, st = _s64(em, s), _s64(em, st)
        if isinstance(s, int):
            if s <= 0:
                return em.mov("b64", 0)
            sm1 = s - 1
        else:
            p = em.new("pred")
            em.ins(f"setp.le.s64 {p}, {s}, 0")
            if empty is None:
                empty = p
            else:
                em.ins(f"or.pred {empty}, {empty}, {p}")
            sm1 = em.new("b64")
            em.ins(f"add.s64 {sm1}, {s}, -1")
        n = em.new("b64")
        if isinstance(sm1, int) and isinstance(st, int):
            em.ins(f"add.s64 {n}, {ext}, {sm1 * st}")
        elif isinstance(sm1, int):
            em.ins(f"mad.lo.s64 {n}, {st}, {sm1}, {ext}")
        else:
            em.ins(f"mad.lo.s64 {n}, {sm1}, {st}, {ext}")
        ext = n
    out = em.new("b64")
    em.ins(f"mul.lo.s64 {out}, {ext}, {esize}")
    if empty is not None:
        em.ins(f"selp.b64 {out}, 0, {out}, {empty}")
    return out


def check_pointer_access(
    em: Emitter, op, base_value, addrs: list, guards: list, esize: int, kind: str
) -> None:
    """Bounds-check the per-register addresses ``addrs`` (b64 registers) active under ``guards``
    (predicate registers, None: always, "0": never) of one pointer access (module docstring)."""
    arg = root_param(base_value)
    if arg is None:
        return
    array = array_of(em, arg)
    if array is None:
        return
    base, sizes, strides = array
    limit = _extent_bytes(em, sizes, strides, esize)
    bad_off = em.mov("b64", 0)
    anybad = em.new("pred")
    em.ins(f"setp.ne.u32 {anybad}, 0, 0")
    for addr, g in zip(addrs, guards):
        if g == "0":
            continue
        off, bad = em.new("b64"), em.new("pred")
        em.ins(f"sub.s64 {off}, {addr}, {base}")
        em.ins(f"setp.ge.u64 {bad}, {off}, {limit}")
        if g is not None:
            em.ins(f"and.pred {bad}, {bad}, {g}")
        em.ins(f"selp.b64 {bad_off}, {off}, {bad_off}, {bad}")
        em.ins(f"or.pred {anybad}, {anybad}, {bad}")
    ok, quiet = em.new_label("memcheck"), em.new_label("memcheck")
    em.ins(f"@!{anybad} bra {ok}")
    # the first offending thread of the launch reports; every offending thread traps
    if ONCE_DECL not in em.globals:
        em.globals.append(ONCE_DECL)
    flag, old, again = em.new("b64"), em.new("b32"), em.new("pred")
    em.ins(f"mov.u64 {flag}, {ONCE_SYMBOL}")
    em.ins(f"atom.global.exch.b32 {old}, [{flag}], 1")
    em.ins(f"setp.ne.u32 {again}, {old}, 0")
    em.ins(f"@{again} bra {quiet}")
    _report(em, op, arg.index, bad_off, limit, esize, kind)
    em.label(quiet)
    em.ins("trap")
    em.label(ok)


def _user_loc(loc):
    """The kernel-source position of ``loc``: a call site's outermost caller (cuTile inlines
    ``ct.gather`` & co. from its ``_stub.py``)."""
    for _ in range(64):
        if isinstance(loc, CallSiteLoc):
            loc = loc.caller
        elif isinstance(loc, NameLoc) and loc.child is not None:
            loc = loc.child
        else:
            return loc
    return loc


def _report(em: Emitter, op, param: int, bad_off: str, limit: str, esize: int, kind: str):
    from tilegen.runtime.codegen.debug import _calls, _emit_calls

    index, count = em.new("b64"), em.new("b64")
    em.ins(f"div.s64 {index}, {bad_off}, {esize}")
    em.ins(f"div.s64 {count}, {limit}, {esize}")
    ctaid = []
    for a in "xyz":
        r = em.new("b32")
        em.ins(f"mov.u32 {r}, %ctaid.{a}")
        ctaid.append(r)
    tid, _, _ = em.tid()
    where = format_location(_user_loc(op.loc)).replace("%", "%%")
    pieces: list = [f"{where}: memcheck: out-of-bounds global {kind} in '{em.symbol}': "]
    pieces.append("tile block [")
    for i, r in enumerate(ctaid):
        pieces += [", "] if i else []
        pieces.append(("%d", r, "i32", "d", 4))
    pieces += ["], thread ", ("%d", tid, "i32", "d", 4), ": element "]
    pieces += [("%lld", index, "i64", "d", 8), f" of parameter {param} ("]
    pieces += [("%lld", count, "i64", "d", 8), " elements)\n"]
    _emit_calls(em, _calls(pieces))


__all__ = ["active", "array_of", "check_pointer_access", "root_param"]
