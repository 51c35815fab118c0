"""``nv_tileaa.print`` and ``nv_tileaa.assert``: device-side ``vprintf`` and ``trap``.

Print: the format is cut at its conversions the way the reference interpreter formats it
(``runtime/interp/ops_core.format_printf``): a scalar argument is one conversion, a tile argument
prints as ``[e0, e1, ...]`` in row-major order. Tile elements are first gathered through shared
memory (canonical copies only); thread 0 then packs the arguments into a ``.local`` buffer with C
vararg promotion (ints to 32 bits, or 64 with an ``ll`` length, floats to double) and calls
``vprintf`` once per :data:`MAX_ARGS` conversions, so one print is one line of output.

Assert: every thread checks its (canonical) elements; a failing one prints
``FILE:LINE: tile block: [x, y, z], position: [i, j]: MESSAGE`` like tileiras and traps.
"""

from __future__ import annotations

import re
import zlib

from tilegen.runtime.attributes import FileLineColLoc, FusedLoc
from tilegen.runtime.codegen.core import (
    ELEMENTS,
    Emitter,
    elem_key,
    fail,
    handles,
    is_tile,
    load_reg,
    store_reg,
)
from tilegen.runtime.codegen.exchange import claim_scratch, flats, row_major, scratch_size

#: conversions per vprintf call (CUDA's printf takes at most 32 arguments)
MAX_ARGS = 32
VPRINTF = (
    ".extern .func (.param .b32 func_retval0) vprintf\n"
    "(\n\t.param .b64 vprintf_param_0,\n\t.param .b64 vprintf_param_1\n)\n;"
)
#: the interpreter's conversion syntax (runtime/interp/ops_core._CONV)
_CONV = re.compile(r"%([-+ #0]*\d*(?:\.\d+)?)(hh|h|ll|l|j|z|t|L)?([diuoxXeEfFgGaAcsSpn%])")
_INT = "diuoxXc"
_FLOAT = "eEfFgG"


def _fmt_symbol(em: Emitter, text: str) -> str:
    """A ``.global`` NUL-terminated string holding ``text``; returns its symbol."""
    data = text.encode("latin-1", errors="replace") + b"\0"
    name = f"$str_{zlib.crc32(data):08x}_{len(data)}"
    decl = f".global .align 1 .b8 {name}[{len(data)}] = {{{', '.join(str(b) for b in data)}}};"
    if decl not in em.globals:
        em.globals.append(decl)
    return name


def _declare_vprintf(em: Emitter) -> None:
    if VPRINTF not in em.globals:
        em.globals.insert(0, VPRINTF)


def _vararg(em: Emitter, key: str, conv: str, reg: str) -> tuple[str, str, int]:
    """(register, st type, bytes) of one value promoted as a C vararg for ``conv`` (the
    combinations were checked by :func:`_pieces`)."""
    if conv in _FLOAT:
        if key == "f64":
            return reg, "f64", 8
        d = em.new("f64")
        if key == "bf16":
            w = em.new("b32")
            em.ins(f"cvt.u32.u16 {w}, {reg}")
            em.ins(f"shl.b32 {w}, {w}, 16")
            f = em.new("f32")
            em.ins(f"mov.b32 {f}, {w}")
            em.ins(f"cvt.f64.f32 {d}, {f}")
        elif key in ("f32", "f16"):
            em.ins(f"cvt.f64.{key} {d}, {reg}")
        else:  # integers (i8 sits sign-extended in a b16 register)
            width = {"i8": 16, "i16": 16}.get(key, int(key[1:]))
            em.ins(f"cvt.rn.f64.s{width} {d}, {reg}")
        return d, "f64", 8
    signed = conv in "di"
    if key == "i64":
        return reg, "b64", 8
    if key == "i32":
        return reg, "b32", 4
    r = em.new("b32")
    if key == "i1":
        em.ins(f"selp.b32 {r}, {-1 if signed else 1}, 0, {reg}")
    elif key == "i8":
        em.ins(f"cvt.s32.s16 {r}, {reg}" if signed else f"cvt.u32.u16 {r}, {reg}")
        if not signed:
            em.ins(f"and.b32 {r}, {r}, 255")
    else:  # i16
        em.ins(f"cvt.{'s32.s16' if signed else 'u32.u16'} {r}, {reg}")
    return r, "b32", 4


def _spec(flags: str, conv: str, key: str) -> str:
    """The C conversion for one promoted value (length from the element type)."""
    length = "ll" if key == "i64" and conv in _INT and conv != "c" else ""
    return f"%{flags}{length}{conv}"


def _vsize(key: str, conv: str) -> int:
    return 8 if conv in _FLOAT or key == "i64" else 4


def _gather(em: Emitter, op, v) -> list:
    """Per element of tile ``v`` (row-major): a register holding it in thread 0, or a thunk that
    loads it (emitted inside thread 0's branch, so a big tile never lives in registers)."""
    t = v.type
    cls, esize, _ = ELEMENTS[elem_key(t)]
    d = em.dist_of(op, t)
    form = row_major(t.shape)
    n = 1
    for s in t.shape:
        n *= s
    regs = em.tile(op, v)
    have = {int(f): j for j, f in reversed(list(enumerate(flats(d, form)[0])))}
    if all(i in have for i in range(n)):  # thread 0 holds the whole tile
        return [regs[have[i]] for i in range(n)]
    isize = scratch_size(cls, esize)
    base = claim_scratch(em, op, n * isize) // isize
    form = form.shifted(base)
    for j in range(d.nregs):
        p = em.canonical(d, j)
        if p == "0":
            continue
        r, st = store_reg(em, cls, regs[j])
        idx = form.emit(em, d, j)
        guard = f"@{p} " if p else ""
        em.ins(f"{guard}st.shared.{st} [{em.smem_addr(idx, isize)}], {r}")
    em.barrier()
    return [
        (lambda i=i: load_reg(em, cls, "shared", em.smem_addr(base + i, isize))) for i in range(n)
    ]


def _pieces(em: Emitter, op, fmt: str, args) -> list:
    """Literal text and (spec, value, element key, conversion, bytes) pieces in output order;
    a value is a register or a thunk emitting its load."""
    out: list = []
    it = iter(args)
    pos = 0
    for m in _CONV.finditer(fmt):
        out.append(fmt[pos : m.start()])
        pos = m.end()
        flags, _, conv = m.groups()
        if conv == "%":
            out.append("%%")
            continue
        if conv not in _INT + _FLOAT:
            fail(op, f"PTX backend does not support '%{conv}' in print yet")
        try:
            v = next(it)
        except StopIteration:
            fail(op, "print has fewer arguments than conversions")
        key = elem_key(v.type)
        if key not in ELEMENTS or key == "ptr" or (key == "i1" and conv in _FLOAT):
            fail(op, f"PTX backend does not support printing {v.type} with '%{conv}' yet")
        if conv not in _FLOAT and (key.startswith("f") or key == "bf16"):
            fail(op, f"PTX backend does not support printing {key} with '%{conv}' yet")
        spec, size = _spec(flags, conv, key), _vsize(key, conv)
        if is_tile(v.type):
            out.append("[")
            for i, r in enumerate(_gather(em, op, v)):
                if i:
                    out.append(", ")
                out.append((spec, r, key, conv, size))
            out.append("]")
        else:
            r = em.scalar(op, v)
            if not str(r).startswith("%"):  # an immediate
                r = em.mov(ELEMENTS[key][0], r)
            out.append((spec, r, key, conv, size))
    out.append(fmt[pos:].replace("%", "%%"))
    return out


def _calls(pieces) -> list[tuple[str, list]]:
    """Group pieces into (format, [(value, key, conversion, offset, bytes)]) vprintf calls."""
    calls: list = []
    text, args, off = "", [], 0
    for p in pieces:
        if isinstance(p, str):
            text += p
            continue
        if len(args) == MAX_ARGS:
            calls.append((text, args))
            text, args, off = "", [], 0
        spec, value, key, conv, size = p
        off = (off + size - 1) // size * size
        args.append((value, key, conv, off, size))
        off += size
        text += spec
    if text or args:
        calls.append((text, args))
    return calls


def _emit_calls(em: Emitter, calls) -> None:
    """The vprintf call sequences (in the current thread)."""
    _declare_vprintf(em)
    nbytes = max([a[3] + a[4] for _, args in calls for a in args] + [8])
    em._tg_bufs = getattr(em, "_tg_bufs", 0) + 1
    buf = f"__tg_pbuf{em._tg_bufs}"
    em.body.append("\t{")
    em.body.append(f"\t.local .align 8 .b8 \t{buf}[{(nbytes + 7) // 8 * 8}];")
    gbuf = em.new("b64")
    em.ins(f"mov.u64 {gbuf}, {buf}")
    em.ins(f"cvta.local.u64 {gbuf}, {gbuf}")
    for text, args in calls:
        for value, key, conv, off, _ in args:
            reg = value() if callable(value) else value
            reg, st, _ = _vararg(em, key, conv, reg)
            em.ins(f"st.local.{st} [{buf}+{off}], {reg}")
        sym = _fmt_symbol(em, text)
        fmt = em.new("b64")
        em.ins(f"mov.u64 {fmt}, {sym}")
        em.ins(f"cvta.global.u64 {fmt}, {fmt}")
        em.body.append("\t{")
        em.body.append("\t.param .b64 \tparam0;")
        em.body.append("\t.param .b64 \tparam1;")
        em.body.append("\t.param .b32 \tretval0;")
        em.ins(f"st.param.b64 [param0], {fmt}")
        em.ins(f"st.param.b64 [param1], {gbuf if args else 0}")
        em.ins("call.uni (retval0), vprintf, (param0, param1)")
        em.body.append("\t}")
    em.body.append("\t}")


@handles("nv_tileaa.print")
def print_(em: Emitter, op) -> None:
    fmt = op.attributes["format"].value
    args = [v for v in op.operands if not _is_token(v)]
    pieces = _pieces(em, op, fmt, args)
    tid, _, _ = em.tid()
    p = em.new("pred")
    em.ins(f"setp.ne.u32 {p}, {tid}, 0")
    skip = em.new_label("print")
    em.ins(f"@{p} bra {skip}")
    _emit_calls(em, _calls(pieces))
    em.label(skip)
    for r in op.results:
        em.set(r, None)


def _is_token(v) -> bool:
    return "token" in str(v.type)


def _where(loc) -> str:
    """``FILE:LINE`` of a location, as tileiras prefixes assertion messages."""
    for _ in range(16):
        if isinstance(loc, FileLineColLoc):
            return f"{loc.file}:{loc.line}"
        if isinstance(loc, FusedLoc):
            loc = loc.locations[0] if loc.locations else None
        else:  # NameLoc.child, CallSiteLoc.callee, DILocAttr.source
            loc = next(
                (getattr(loc, a) for a in ("source", "child", "callee") if hasattr(loc, a)), None
            )
    return "<unknown>"


@handles("nv_tileaa.assert")
def assert_(em: Emitter, op) -> None:
    cond = op.operands[0]
    msg = op.attributes["message"].value
    head = f"{_where(op.loc)}: tile block: ["
    ctaid = []
    for a in "xyz":
        r = em.new("b32")
        em.ins(f"mov.u32 {r}, %ctaid.{a}")
        ctaid.append(r)
    tid, _, _ = em.tid()
    if not is_tile(cond.type):
        # every thread traps; thread 0 alone prints (tileiras does the same)
        c = em.scalar(op, cond)
        if not str(c).startswith("%"):  # a constant condition
            if str(c) not in ("0", "false"):
                return
            c = em.mov("pred", 0)
        checks = [(c, "tid0", [])]
    else:
        d = em.dist_of(op, cond.type)
        regs = em.tile(op, cond)
        checks = []
        for k in range(d.nregs):
            canon = em.canonical(d, k)
            if canon != "0":
                checks.append((regs[k], canon, em.coords(d, k)))
    for reg, canon, coords in checks:
        ok = em.new_label("assert")
        em.ins(f"@{reg} bra {ok}")
        skip = None
        if canon == "tid0":
            skip = em.new_label("assert")
            p = em.new("pred")
            em.ins(f"setp.ne.u32 {p}, {tid}, 0")
            em.ins(f"@{p} bra {skip}")
        elif canon:  # a replicated copy: fails silently in the canonical thread's stead
            em.ins(f"@!{canon} bra {ok}")
        pos = [c if isinstance(c, str) else em.mov("b32", c) for c in coords]
        pieces: list = [head]
        for i, r in enumerate(ctaid):
            pieces += [", "] if i else []
            pieces.append(("%d", r, "i32", "d", 4))
        pieces.append("], position: [")
        for i, r in enumerate(pos):
            pieces += [", "] if i else []
            pieces.append(("%d", r, "i32", "d", 4))
        pieces.append("]: " + msg.replace("%", "%%") + "\n")
        _emit_calls(em, _calls(pieces))
        if skip:
            em.label(skip)
        em.ins("trap")
        em.label(ok)
    for r in op.results:
        em.set(r, None)
