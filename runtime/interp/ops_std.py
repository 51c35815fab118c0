"""The arith, math and scf ops that nv_tileaa builds on (they have no spec in tilegen).

arith and math ops run with the declared ``semantics`` of the cuda_tile op they were converted
from: the table is read backwards from the conversion spec's declared rows
(spec/lowerings/cuda_tile_to_nv_tileaa.yaml), so ``arith.shrui`` is ``cuda_tile.shri`` with
``signedness = unsigned``, ``arith.maximumf`` is ``cuda_tile.maxf`` with ``propagate_nan`` and
so on (the conversion carries every attribute it does not drop). The few ops made by custom
patterns (comparisons, division, constants) and scf control flow are hand-written here.
"""

from __future__ import annotations

import functools
from typing import Optional

import numpy as np

from tilegen.runtime.attributes import EnumAttr, IntegerAttr, StringAttr, UnitAttr
from tilegen.runtime.interp import semlib
from tilegen.runtime.interp.elementwise import evaluate, semantics_of
from tilegen.runtime.interp.executor import HANDLERS, Frame, Signal
from tilegen.runtime.interp.values import (
    InterpError,
    as_signed,
    as_unsigned,
    element_of,
    from_bits,
    from_literal,
    wrap_int,
)
from tilegen.runtime.opdef import OpDef, lookup_enum, lookup_opdef


class _Borrowed:
    """``op`` seen as its cuda_tile source op: fixed attributes added, operands reordered."""

    def __init__(self, op, attrs: dict, order: Optional[list]):
        self.op = op
        self.attributes = {**op.attributes, **attrs}
        self.operands = [op.operands[i] for i in order] if order else op.operands
        self.results = op.results
        self.name = op.name

    def __getattr__(self, name):
        return getattr(self.op, name)


def _case_attr(opdef: OpDef, name: str, key: str):
    """The attribute a ``{by: name, cases: {key: ...}}`` row selected on."""
    ad = opdef.attr(name)
    if ad is None:
        return None
    if ad.kind == "unit":
        return UnitAttr() if key == "present" else None
    enum = lookup_enum(ad.enum) if ad.enum else None
    if enum is None or enum.value(key) is None:
        return None
    return EnumAttr(ad.enum, enum.value(key))


@functools.lru_cache(maxsize=1)
def borrowed_table() -> dict[str, tuple[OpDef, dict, Optional[list]]]:
    """foreign op name -> (cuda_tile opdef, attributes its row implies, operand order)."""
    from tilegen.generated.lowerings.cuda_tile_to_nv_tileaa import SPEC

    table: dict = {}
    for group in SPEC["groups"]:
        for row in group["patterns"]:
            to = row.get("to")
            src = lookup_opdef(f"cuda_tile.{row['op']}")
            if to is None or src is None or semantics_of(src) is None:
                continue
            pairs = [(to, {})] if isinstance(to, str) else []
            if isinstance(to, dict):
                for key, name in to["cases"].items():
                    a = _case_attr(src, to["by"], key)
                    pairs.append((name, {to["by"]: a} if a is not None else {}))
            order = None
            if row.get("operands"):
                names = [o.name for o in src.operands]
                order = [row["operands"].index(n) for n in names]
            for name, attrs in pairs:
                if name.split(".")[0] in ("arith", "math"):
                    table[name] = (src, attrs, order)
    table.update(_fixed_entries())
    return table


#: ops made by custom patterns (or whose row drops an attribute the arith op fixes): the cuda_tile
#: op they mean and the attribute keywords that pin it (arith.fptosi truncates, ...)
FIXED: dict[str, tuple[str, dict]] = {
    "arith.divsi": ("divi", {"signedness": "signed", "rounding": "zero"}),
    "arith.floordivsi": ("divi", {"signedness": "signed", "rounding": "negative_inf"}),
    "arith.ceildivsi": ("divi", {"signedness": "signed", "rounding": "positive_inf"}),
    "arith.divui": ("divi", {"signedness": "unsigned", "rounding": "zero"}),
    "arith.ceildivui": ("divi", {"signedness": "unsigned", "rounding": "positive_inf"}),
    "arith.fptosi": ("ftoi", {"signedness": "signed", "rounding_mode": "zero"}),
    "arith.fptoui": ("ftoi", {"signedness": "unsigned", "rounding_mode": "zero"}),
}


def _fixed_entries() -> dict:
    out = {}
    for name, (src_name, kws) in FIXED.items():
        src = lookup_opdef(f"cuda_tile.{src_name}")
        attrs = {k: _case_attr(src, k, v) for k, v in kws.items()}
        out[name] = (src, {k: a for k, a in attrs.items() if a is not None}, None)
    return out


def _borrowed(f: Frame, op):
    src, attrs, order = borrowed_table()[op.name]
    view = _Borrowed(op, attrs, order) if attrs or order else op
    return evaluate(view, src, semantics_of(src), [f.get(v) for v in view.operands])


def register_borrowed() -> None:
    for name in borrowed_table():
        HANDLERS.setdefault(name, _borrowed)


# --------------------------------------------------------------------------- custom-made ops


def std(*names: str):
    def deco(fn):
        for n in names:
            HANDLERS[n] = fn
        return fn

    return deco


def _predicate(op, names: list) -> str:
    """An arith predicate attribute as its keyword (a string, or MLIR's integer numbering)."""
    a = op.attributes.get("predicate")
    if isinstance(a, IntegerAttr) and 0 <= a.value < len(names):
        return names[a.value]
    if isinstance(a, StringAttr) and a.value in names:
        return a.value
    raise InterpError(f"unknown predicate {a}")


#: arith.cmpi predicate numbering (MLIR's arith::CmpIPredicate)
_CMPI = ["eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge"]
#: arith.cmpf predicate numbering (MLIR's arith::CmpFPredicate)
_CMPF = [
    "false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord",
    "ueq", "ugt", "uge", "ult", "ule", "une", "uno", "true",
]  # fmt: skip


@std("arith.cmpi")
def _cmpi(f: Frame, op):
    pred = _predicate(op, _CMPI)
    t = element_of(op.operands[0].type)
    x, y = (np.asarray(f.get(v)) for v in op.operands)
    if pred[0] == "u":
        x, y = as_unsigned(x, t), as_unsigned(y, t)
    elif pred[0] == "s":
        x, y = as_signed(x, t), as_signed(y, t)
    fn = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal}
    fn.update({"gt": np.greater, "ge": np.greater_equal})
    return [np.asarray(fn[pred[-2:]](x, y))]


@std("arith.cmpf")
def _cmpf(f: Frame, op):
    pred = _predicate(op, _CMPF)
    x, y = (np.asarray(f.get(v)).astype(np.float64) for v in op.operands)
    if pred in ("false", "true"):
        return [np.full(np.broadcast_shapes(x.shape, y.shape), pred == "true")]
    if pred in ("ord", "uno"):
        ordered = ~(np.isnan(x) | np.isnan(y))
        return [ordered if pred == "ord" else ~ordered]
    rel = semlib.cmpf(x, y, _REL[pred[1:]], "ordered" if pred[0] == "o" else "unordered")
    return [np.asarray(rel)]


_REL = {
    "eq": "equal",
    "ne": "not_equal",
    "lt": "less_than",
    "le": "less_than_or_equal",
    "gt": "greater_than",
    "ge": "greater_than_or_equal",
}


@std("arith.index_cast", "arith.index_castui")
def _index_cast(f: Frame, op):
    """Integer <-> index: sign- (``index_cast``) or zero-extended, or truncated."""
    x = np.asarray(f.get(op.operands[0]))
    st, rt = element_of(op.operands[0].type), element_of(op.results[0].type)
    wide = as_unsigned(x, st) if op.name.endswith("ui") else as_signed(x, st)
    return [wrap_int(np.asarray(wide), rt)]


@std("arith.constant")
def _constant(f: Frame, op):
    t = op.results[0].type
    value = op.attributes["value"]
    if hasattr(value, "values"):  # dense elements
        return [semlib.constant_tile(value, t)]
    bits = getattr(value, "bits", None)
    if bits is not None:
        return [from_bits(np.array(bits, dtype=np.uint64), element_of(t))]
    return [from_literal([value.value], t, ())]


# --------------------------------------------------------------------------- scf


@std("scf.yield", "scf.condition")
def _scf_terminator(f: Frame, op):
    return Signal("yield", [f.get(v) for v in op.operands])


@std("scf.if")
def _scf_if(f: Frame, op):
    cond = bool(np.asarray(f.get(op.operands[0])).reshape(()))
    region = op.regions[0] if cond else (op.regions[1] if len(op.regions) > 1 else None)
    if region is None or not region.blocks:
        return []
    sig = f.run_region(region, [])
    return sig if sig.kind == "return" else sig.values


@std("scf.for")
def _scf_for(f: Frame, op):
    it_t = op.operands[0].type
    conv = as_unsigned if "unsignedCmp" in op.attributes else as_signed
    lb, ub, step = (int(conv(np.asarray(f.get(v)), it_t)) for v in op.operands[:3])
    if step <= 0:
        raise InterpError(f"scf.for step must be positive, got {step}")
    iters = [f.get(v) for v in op.operands[3:]]
    body = op.regions[0].blocks[0]
    dt = np.asarray(f.get(op.operands[0])).dtype
    for i in range(lb, ub, step):
        iv = wrap_int(np.array(i, dtype=np.uint64 if i >= 0 else np.int64), element_of(it_t))
        sig = f.run_block(body, [np.asarray(iv, dtype=dt)] + iters)
        if sig.kind == "return":
            return sig
        iters = sig.values
    return iters


@std("scf.while")
def _scf_while(f: Frame, op):
    """``before`` ends in ``scf.condition(%c) args``: run ``after`` on args while %c holds."""
    vals = [f.get(v) for v in op.operands]
    before, after = op.regions[0], op.regions[1]
    cond_op = before.blocks[0].ops[-1]
    while True:
        sig = f.run_region(before, vals)
        if sig.kind == "return":
            return sig
        if cond_op.name != "scf.condition":
            raise InterpError("scf.while 'before' region must end in scf.condition")
        cond, args = sig.values[0], sig.values[1:]
        if not bool(np.asarray(cond).reshape(())):
            return args
        sig = f.run_region(after, args)
        if sig.kind == "return":
            return sig
        vals = sig.values


register_borrowed()
