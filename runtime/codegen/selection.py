"""Instruction selection for elementwise ops: the rows of spec/ptx/selection.yaml (rendered to
generated/ptx/selection.py) matched against an op, and the rendering of a row's PTX template
for one element (one scalar or one layout register of a tile).

:func:`select` returns the first row matching the op name, the element types and the ``when:``
attribute conditions; :func:`emit_row` emits it for one element and returns the result register.
"""

from __future__ import annotations

import re
from typing import Optional

from tilegen.generated.ptx.instructions import INSTRUCTIONS
from tilegen.generated.ptx.selection import ROWS
from tilegen.runtime.attributes import (
    FLUSH_TO_ZERO,
    BoolAttr,
    EnumAttr,
    IntegerAttr,
    StringAttr,
    UnitAttr,
    fastmath_flags,
)
from tilegen.runtime.codegen.core import ELEMENTS, elem_key, fail

#: rounding_mode keyword -> PTX rounding modifier of float instructions
RND = {
    None: "rn",
    "nearest_even": "rn",
    "zero": "rz",
    "negative_inf": "rm",
    "positive_inf": "rp",
    "approx": "approx",
    "full": "full",
}

#: arith.cmpi / arith.cmpf predicate keyword -> PTX setp comparison
CMP = {
    "eq": "eq",
    "ne": "ne",
    "slt": "lt",
    "sle": "le",
    "sgt": "gt",
    "sge": "ge",
    "ult": "lo",
    "ule": "ls",
    "ugt": "hi",
    "uge": "hs",
    "oeq": "eq",
    "one": "ne",
    "olt": "lt",
    "ole": "le",
    "ogt": "gt",
    "oge": "ge",
    "ueq": "equ",
    "une": "neu",
    "ord": "num",
    "uno": "nan",
}
#: arith.cmpf's unordered predicates whose keywords collide with cmpi's unsigned ones
CMPF = dict(CMP, ult="ltu", ule="leu", ugt="gtu", uge="geu")

#: element key -> register width in bits (i8 lives in a b16 register)
WIDTH = {"i8": 16, "i16": 16, "i32": 32, "i64": 64, "ptr": 64, "f16": 16, "bf16": 16}
WIDTH.update({"f32": 32, "f64": 64, "i1": 1, "f8E4M3FN": 16, "f8E5M2": 16})
WIDTH.update({"i4": 16, "f4E2M1FN": 16})  # a 4-bit element: the low nibble of a b16
#: 8-bit float element key -> its name in cvt's .e4m3x2 / .e5m2x2 types
F8 = {"f8E4M3FN": "e4m3", "f8E5M2": "e5m2"}

_BY_OP: dict[str, list[dict]] = {}
for _row in ROWS:
    for _name in [_row["op"]] if isinstance(_row["op"], str) else _row["op"]:
        _BY_OP.setdefault(_name, []).append(_row)
    for _ins in (
        [_row.get("instruction", [])]
        if isinstance(_row.get("instruction"), str)
        else (_row.get("instruction") or [])
    ):
        assert _ins in INSTRUCTIONS, f"selection names unknown PTX instruction row {_ins!r}"


def attr_keyword(op, name: str) -> Optional[str]:
    """The keyword of enum attribute ``name`` of ``op`` (None when absent)."""
    a = op.attributes.get(name)
    if a is None:
        return None
    if isinstance(a, StringAttr):
        return a.value
    if isinstance(a, (IntegerAttr, EnumAttr)):
        from tilegen.runtime.opdef import lookup_enum, lookup_opdef

        od = lookup_opdef(op.name)
        enum = lookup_enum(od.attr(name).enum) if od is not None and od.attr(name) else None
        kw = enum.keyword(a.value) if enum is not None else None
        if kw is not None:
            return kw
    return str(getattr(a, "value", a))


def _flag(op, name: str) -> bool:
    a = op.attributes.get(name)
    return isinstance(a, UnitAttr) or (isinstance(a, BoolAttr) and a.value)


def flush_to_zero(op) -> bool:
    """``.ftz`` requested: cuda_tile's ``flush_to_zero`` or, past the conversion, the
    discardable ``nv_tileaa.flush_to_zero`` (nv_tileaa/arith/math ops have no attribute of
    their own for it)."""
    return _flag(op, "flush_to_zero") or _flag(op, FLUSH_TO_ZERO)


def _when_ok(op, attr: str, allowed) -> bool:
    """A row's ``when:`` condition on ``attr``. ``fastmath`` is a flag set: it matches when any
    of its flags (``fast`` = all) is listed, ``absent`` when it has none."""
    if attr == "fastmath":
        flags = fastmath_flags(op.attributes.get("fastmath"))
        return bool(flags & set(allowed)) or (not flags and "absent" in allowed)
    kw = attr_keyword(op, attr)
    return (kw is None and "absent" in allowed) or (kw is not None and kw in allowed)


def keys(op) -> tuple[str, str]:
    """(element of the last operand, element of the result) of an elementwise op."""
    src = elem_key(op.operands[-1].type) if op.operands else None
    return src or "", elem_key(op.results[0].type) or ""


def select(
    op, src: Optional[str] = None, res: Optional[str] = None, sm: Optional[int] = None
) -> Optional[dict]:
    """The first selection row for ``op`` (with element keys overridable, for `via:`). With
    ``sm``, a row marked ``sm_fallback: true`` whose ``sm`` is newer is skipped, so the next
    row (an exact sequence) serves older targets."""
    rows = _BY_OP.get(op.name)
    if not rows:
        return None
    s, r = keys(op)
    src, res = src or s, res or r
    for row in rows:
        if "pair" in row or src not in row["element"]:
            continue  # (paired rows: select_pair)
        if "result" in row and res not in row["result"]:
            continue
        if sm is not None and row.get("sm_fallback") and row.get("sm", 0) > sm:
            continue
        if all(_when_ok(op, attr, allowed) for attr, allowed in row.get("when", {}).items()):
            return row
    return None


def select_pair(op, sm: int) -> Optional[dict]:
    """The paired row for tile ``op`` on ``sm`` (``pair:`` lists it), or None: it computes two
    neighbouring registers at once (spec/ptx/selection.yaml)."""
    s, r = keys(op)
    for row in _BY_OP.get(op.name, ()):
        if "pair" not in row or sm not in row["pair"] or s not in row["element"]:
            continue
        if "result" in row and r not in row["result"]:
            continue
        if any(elem_key(v.type) != s for v in op.operands):
            continue
        if all(_when_ok(op, attr, allowed) for attr, allowed in row.get("when", {}).items()):
            return row
    return None


def conversion_ptx(op, sm: int) -> str:
    """The instruction of conversion ``op`` on ``sm`` with no operands: an f32 -> tf32
    ``fp_to_fp`` folded into a tensor-core operand's staging (``cvt.rn.tf32.f32`` from sm_90,
    ``cvt.rna.tf32.f32`` before), applied to staged values or fragments as the op would apply
    it to registers."""
    row = select(op, sm=sm)
    if row is None or "{" in row["ptx"]:
        fail(op, "PTX backend: no selection row for a conversion folded into a dot operand")
    return row["ptx"]


def has_rows(op_name: str) -> bool:
    return op_name in _BY_OP


def ptx_types(key: str) -> dict[str, str]:
    """Template type spellings for an element key."""
    w = WIDTH.get(key, 32)
    out = {"w": str(w), "st": f"s{w}", "ut": f"u{w}", "bt": f"b{w}"}
    out["ft"] = key if key in ("f16", "bf16", "f32", "f64") else f"f{w}"
    if key == "i1":
        out.update(st="pred", ut="pred", bt="pred")
    if key in F8:
        out["e8"] = F8[key]
    return out


_TEMP = re.compile(r"\{([ptsufc])(\d)\}")


def render(em, op, row: dict, src: str, res: str, d: str, args: list[str]) -> None:
    """Emit ``row``'s PTX for one element: result register ``d``, operand registers ``args``."""
    texts = [row["ptx"]] if isinstance(row["ptx"], str) else list(row["ptx"])
    subst = dict(ptx_types(src))
    subst.update({"r" + k: v for k, v in ptx_types(res).items()})
    rnd = attr_keyword(op, "rounding_mode")
    subst["rnd"] = RND.get(rnd, "rn")
    subst["ftz"] = ".ftz" if flush_to_zero(op) else ""
    pred = attr_keyword(op, "predicate")
    if pred is not None:
        subst["cmp"] = (CMPF if op.name == "arith.cmpf" else CMP).get(pred, pred)
    subst["d"] = d
    for name, reg in zip("abc", args):
        subst[name] = reg
    src_cls = ELEMENTS[src][0] if src in ELEMENTS else "b32"
    res_cls = ELEMENTS[res][0] if res in ELEMENTS else "b32"
    classes = {"p": "pred", "t": res_cls, "s": src_cls, "u": "b32", "f": "f32", "c": "b8"}
    temps: dict[str, str] = {}
    for t in texts:
        for kind, n in _TEMP.findall(t):
            name = kind + n
            if name not in temps:
                temps[name] = em.new(classes[kind])
    subst.update(temps)
    explicit = any("{d}" in t for t in texts)
    for t in texts:
        if not explicit:
            t = t + " {d}, " + ", ".join("{" + n + "}" for n in "abc"[: len(args)])
        try:
            em.ins(t.format(**subst))
        except KeyError as e:
            fail(op, f"PTX backend: selection row for '{op.name}' names unknown {e}")


def _element_names(t, depth: int = 0):
    """Names of the float element types inside type ``t`` (tile, pointer, memref, view)."""
    from tilegen.runtime.types import FloatType

    if isinstance(t, FloatType):
        yield t.name
        return
    if depth > 4:
        return
    for attr in ("element", "pointee", "tensor_view"):
        inner = getattr(t, attr, None)
        if inner is not None:
            yield from _element_names(inner, depth + 1)


def check_target_types(func, sm: int) -> None:
    """tileiras's refusal of element types the target lacks (spec/ptx/mma.yaml
    ``type_min_sm``: the 8-bit floats below sm_89), reported like tileiras at the first op, in
    program order, whose operands or results carry such a type: ``Incompatibility with
    architecture 'sm_80': unsupported type 'f8E4M3FN'``."""
    from tilegen.runtime.layouts.mma_select import table

    t = table()
    need = {ty: m for ty, m in t.type_min_sm.items() if sm < m}
    if not need:
        return
    for op in func.walk():
        if op is func:
            continue
        for v in list(op.results) + list(op.operands):
            for name in _element_names(v.type):
                if name in need:
                    fail(op, t.diagnostics["unsupported_type"].format(sm=sm, type=name))
