"""The arith and scf ops nv_tileaa builds on whose meaning the spec cannot declare.

The arith, math and scf ops the cuda_tile -> nv_tileaa conversion emits are specified in
spec/ops/{arith,math,scf}; every one whose ``semantics`` has an ``expr`` (arithmetic, shifts,
min/max, division, remainders, casts, select, all of math) runs from its spec in
:mod:`tilegen.runtime.interp.elementwise`. What stays here is declared ``kind: interpreter``:
comparisons (the predicate picks the signedness and NaN handling), constants, scf control flow,
plus ``arith.index_cast[ui]`` (not emitted by the conversion, so not specified, but used by
hand-written nv_tileaa IR).
"""

from __future__ import annotations


import numpy as np

from tilegen.runtime.attributes import IntegerAttr, StringAttr
from tilegen.runtime.interp import semlib
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
from tilegen.runtime.opdef import lookup_enum, lookup_opdef

# --------------------------------------------------------------------------- custom-made ops


def std(*names: str):
    def deco(fn):
        for n in names:
            HANDLERS[n] = fn
        return fn

    return deco


def _predicate(op) -> str:
    """An arith predicate attribute as its keyword: MLIR's integer numbering, from the enum the
    op's spec names (spec/types/arith_enums.yaml), or a keyword string."""
    a = op.attributes.get("predicate")
    enum = lookup_enum(lookup_opdef(op.name).attr("predicate").enum)
    if isinstance(a, IntegerAttr) and enum.keyword(a.value) is not None:
        return enum.keyword(a.value)
    if isinstance(a, StringAttr) and enum.value(a.value) is not None:
        return a.value
    raise InterpError(f"unknown predicate {a}")


@std("arith.cmpi")
def _cmpi(f: Frame, op):
    pred = _predicate(op)
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
    pred = _predicate(op)
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
