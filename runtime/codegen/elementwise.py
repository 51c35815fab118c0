"""Elementwise ops (scalars and tiles alike) by instruction selection, and constants.

A tile op applies the selected instruction register by register: operands of an elementwise op
share the result's layout (the layout pass guarantees it).
"""

from __future__ import annotations

from tilegen.runtime.attributes import FloatAttr, IntegerAttr
from tilegen.runtime.codegen.core import (
    Emitter,
    elem_info,
    elem_key,
    fail,
    handles,
    handles_family,
    is_tile,
)
from tilegen.runtime.codegen.selection import ROUND_NEAREST_EVEN, select


def _f32_bits(x: float) -> str:
    import struct

    return "0f%08X" % struct.unpack("<I", struct.pack("<f", x))[0]


def _f64_bits(x: float) -> str:
    import struct

    return "0d%016X" % struct.unpack("<Q", struct.pack("<d", x))[0]


def literal(op, t, attr) -> str:
    """PTX immediate text for a scalar constant of element type ``t``."""
    key = elem_key(t)
    if isinstance(attr, FloatAttr):
        if key == "f32":
            return _f32_bits(attr.value)
        if key == "f64":
            return _f64_bits(attr.value)
    if isinstance(attr, IntegerAttr):
        if key == "i1":
            return "1" if attr.value else "0"
        return str(attr.value)
    fail(op, f"PTX backend does not support constants of type {t} yet")


@handles("arith.constant")
def constant(em: Emitter, op) -> None:
    res = op.results[0]
    attr = op.attributes["value"]
    cls, _, _ = elem_info(op, res.type)
    if is_tile(res.type):
        vals = getattr(attr, "values", None)
        if vals is None or len(set(map(repr, vals))) != 1 and len(vals) != 1:
            fail(op, "PTX backend does not support non-splat tile constants yet")
        fail(op, "PTX backend does not support tile constants yet")
    if cls == "pred":
        r = em.new("pred")
        em.ins(f"setp.ne.u32 {r}, {literal(op, res.type, attr)}, 0")
    else:
        r = em.mov(cls, literal(op, res.type, attr))
    em.set(res, r)


def _is_elementwise(op) -> bool:
    return (
        len(op.results) == 1
        and not op.regions
        and select(op.name, elem_key(op.results[0].type) or "") is not None
    )


@handles_family(_is_elementwise)
def elementwise(em: Emitter, op) -> None:
    res = op.results[0]
    row = select(op.name, elem_key(res.type))
    rm = op.attributes.get("rounding_mode")
    if rm is not None and rm.value != ROUND_NEAREST_EVEN:
        fail(op, f"PTX backend does not support rounding mode {rm.value} of '{op.name}' yet")
    _, text, cls = row
    if is_tile(res.type):
        ins = [em.tile(op, v) for v in op.operands]
        out = []
        for k in range(len(ins[0])):
            r = em.new(cls)
            em.ins(f"{text} {r}, {', '.join(x[k] for x in ins)}")
            out.append(r)
        em.set(res, out)
    else:
        r = em.new(cls)
        em.ins(f"{text} {r}, {', '.join(str(em.scalar(op, v)) for v in op.operands)}")
        em.set(res, r)
