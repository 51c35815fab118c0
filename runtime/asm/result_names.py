"""SSA name suggestions (MLIR's getAsmResultNames / getAsmBlockArgumentNames).

Three sources, most specific first:

* computed names in Python: constants (``%cst_42_i32``, ``%true``, ``%cst_NaN_f32``, ``%cst_f32``)
  and assumes named after their operand (``%assume_cst_i8``, ``%assume_assume``, ``%assume``);
* the spec's ``result_names:`` key (``{result: bcast}``): a fixed name for the first value of each
  listed ODS result group;
* MLIR's ODS default: an op with two or more declared results and no naming interface of its own
  names each group after its ODS result (``%tile, %result_token = load_view_tko``).

``RESULT_NAMES[op_name](op)`` gives one entry per result (None = numbered); ``BLOCK_ARG_NAMES
[op_name](op, region_index)`` gives entry-block argument names.
"""

from __future__ import annotations

import math
from typing import Callable, Optional

from tilegen.runtime.attributes import DenseElementsAttr
from tilegen.runtime.ir import Operation, OpResult
from tilegen.runtime.opdef import OpDef, all_ops
from tilegen.runtime.types import FloatType, IntegerType, TileType

NameFn = Callable[[Operation], list]


def _group_names(op: Operation, names: dict[str, str]) -> list[Optional[str]]:
    """Names for the first value of each named ODS result group."""
    out: list[Optional[str]] = [None] * len(op.results)
    opdef = op.opdef
    for rdef, (start, n) in zip(opdef.results, opdef.result_segments(op)):
        name = names.get(rdef.name)
        if name and n:
            out[start] = name
    return out


def _spec_names(op: Operation) -> list[Optional[str]]:
    return _group_names(op, op.opdef.extra.get("result_names") or {})


def _ods_default_names(op: Operation) -> list[Optional[str]]:
    return _group_names(op, {r.name: r.name for r in op.opdef.results})


def constant_name(attr: Optional[DenseElementsAttr]) -> str:
    """``cst_<value>_<type>`` for splats with a natural value, else ``cst_<type>``/true/false."""
    if not isinstance(attr, DenseElementsAttr) or not isinstance(attr.type, TileType):
        return "cst"
    elem = attr.type.element
    if isinstance(elem, IntegerType):
        if elem.width == 1:
            if attr.is_splat:
                return "true" if attr.values[0] else "false"
            return "cst_i1"
        if attr.is_splat:
            return f"cst_{int(attr.values[0])}_{elem.name}"
        return f"cst_{elem.name}"
    if isinstance(elem, FloatType) and attr.is_splat:
        v = attr.values[0]
        if math.isnan(v):
            return f"cst_NaN_{elem.name}"
        # An exact conversion to an unsigned integer (so not -1.0, -0.0 or inf).
        if math.isfinite(v) and v >= 0 and math.copysign(1.0, v) > 0 and v == int(v) and v < 2**64:
            return f"cst_{int(v)}_{elem.name}"
    return f"cst_{getattr(elem, 'name', 'cst')}"


def _constant(op: Operation) -> list[Optional[str]]:
    return [constant_name(op.attributes.get("value"))]


def suggested_name(v) -> Optional[str]:
    """The name ``v``'s defining op suggests for it (before uniquing), if any."""
    if not isinstance(v, OpResult):
        return None
    fn = RESULT_NAMES.get(v.op.name)
    if fn is None:
        return None
    names = fn(v.op) or []
    return names[v.index] if v.index < len(names) else None


def _assume(op: Operation) -> list[Optional[str]]:
    """``assume_<name>`` when the constrained value comes from an op with a naming interface
    (``%assume_cst_i8``, ``%assume_assume``; ``%assume_`` when that op names other results
    only, e.g. ``%for#1`` or an ``if`` result), else ``assume`` -- as tileirdisasm prints them."""
    src = op.operands[0] if op.operands else None
    if isinstance(src, OpResult) and src.op.opdef is not None and _names_results(src.op.opdef):
        return [f"assume_{suggested_name(src) or ''}"]
    return ["assume"]


#: Names computed from attributes/operands (everything else comes from the spec).
COMPUTED: dict[str, NameFn] = {
    "cuda_tile.constant": _constant,
    "cuda_tile.assume": _assume,
}


def _for_args(op: Operation, region_index: int) -> list[str]:
    n_iter = (
        len(op.regions[region_index].blocks[0].args) - 1 if op.regions[region_index].blocks else 0
    )
    return ["loopIdx"] + [f"iterArg{i}" for i in range(max(n_iter, 0))]


def _reduce_args(op: Operation, region_index: int) -> list[str]:
    n = len(op.operands)
    if n == 1:
        return ["reduce_lhs", "reduce_rhs"]
    out = []
    for i in range(n):
        out += [f"reduce_lhs{i}", f"reduce_rhs{i}"]
    return out


BLOCK_ARG_NAMES: dict[str, Callable[[Operation, int], list[str]]] = {
    "cuda_tile.for": _for_args,
    "cuda_tile.reduce": _reduce_args,
}


def _has_naming_interface(opdef: OpDef) -> bool:
    return any(t.startswith("OpAsmOpInterface") for t in opdef.traits)


def _names_results(opdef: OpDef) -> bool:
    """Whether the op implements OpAsmOpInterface (declared, or ODS-generated for ops with
    several declared results)."""
    return _has_naming_interface(opdef) or len(opdef.results) > 1


def _build() -> dict[str, NameFn]:
    table: dict[str, NameFn] = {}
    for opdef in all_ops():
        if opdef.name in COMPUTED:
            table[opdef.name] = COMPUTED[opdef.name]
        elif opdef.extra.get("result_names"):
            table[opdef.name] = _spec_names
        elif len(opdef.results) > 1 and not _has_naming_interface(opdef):
            table[opdef.name] = _ods_default_names
    return table


RESULT_NAMES: dict[str, NameFn] = _build()


def result_names(op: Operation) -> list[Optional[str]]:
    """Suggested names for ``op``'s results (None entries are numbered)."""
    fn = RESULT_NAMES.get(op.name)
    return fn(op) if fn is not None else [None] * len(op.results)
