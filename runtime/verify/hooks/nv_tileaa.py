"""Custom verifiers of the nv_tileaa dialect (seed 000's verification invariants).

Each hook implements one slice of a seed-000 verifier (``verify_elementwise_arithmetic``,
``verify_dot``, ``verify_memory_op_common``, ``infer_shape`` ...); the declarative parts (ordering
vs scope, RMW mode vs element type, view element count) live in spec/ops/nv_tileaa/*.yaml.
Values are tiles (``tile<4x8xf32>``), builtin scalars or nv_tileaa pointers/memrefs; a scalar
has shape ``()`` and is its own element type.
"""

from __future__ import annotations

from typing import Optional

from tilegen.runtime.attributes import DenseArrayAttr, IntegerAttr, StringAttr, SymbolRefAttr
from tilegen.runtime.ir import Operation, nearest_symbol_table
from tilegen.runtime.types import (
    FloatType,
    IntegerType,
    NvMemRefType,
    NvPointerType,
    TileType,
    Type,
    DYNAMIC,
)
from tilegen.runtime.verify.context import VerifyContext
from tilegen.runtime.verify.hooks import hook
from tilegen.runtime.verify.types import format_type

# --------------------------------------------------------------------------- helpers


def shape_of(t: Type) -> tuple[int, ...]:
    return t.shape if isinstance(t, TileType) else ()


def elem_of(t: Type) -> Type:
    return t.element if isinstance(t, TileType) else t


def _s(shape) -> str:
    return "[" + ", ".join("?" if d == DYNAMIC else str(d) for d in shape) + "]"


def _t(t: Type) -> str:
    return format_type(t)


def _ts(types) -> str:
    return ", ".join(_t(t) for t in types)


def broadcast_shape(shapes: list[tuple[int, ...]]) -> Optional[tuple[int, ...]]:
    """The common shape of ``shapes`` (rank-0 values broadcast to anything; tiles must agree in
    rank and each dimension must match or be 1), or None when they do not broadcast."""
    ranked = [s for s in shapes if s]
    if not ranked:
        return ()
    rank = len(ranked[0])
    if any(len(s) != rank for s in ranked):
        return None
    out = []
    for dims in zip(*ranked):
        big = {d for d in dims if d != 1}
        if len(big) > 1:
            return None
        out.append(big.pop() if big else 1)
    return tuple(out)


def _ints(attr) -> Optional[list[int]]:
    if isinstance(attr, DenseArrayAttr):
        return [int(v) for v in attr.values]
    return None


def _int(attr) -> Optional[int]:
    return attr.value if isinstance(attr, IntegerAttr) else None


# --------------------------------------------------------------------------- arithmetic


@hook("nv_tileaa_elementwise")
def _elementwise(op: Operation, ctx: VerifyContext) -> None:
    """``verify_elementwise_arithmetic``: common element type, broadcastable shapes, and a result
    of exactly that type and shape (only fp_to_fp changes floating width)."""
    types = [v.type for v in op.operands]
    elems = [elem_of(t) for t in types]
    for e in elems[1:]:
        if e != elems[0]:
            ctx.error(
                f"operands must have the same element type, but got '{_t(elems[0])}' and '{_t(e)}'"
            )
            return
    common = broadcast_shape([shape_of(t) for t in types])
    if common is None:
        shapes = " and ".join(_s(shape_of(t)) for t in types)
        ctx.error(f"operand shapes {shapes} are not broadcast-compatible")
        return
    res = op.results[0].type
    if elem_of(res) != elems[0]:
        hint = "; use nv_tileaa.fp_to_fp to change floating-point width"
        floats = isinstance(elem_of(res), FloatType) and isinstance(elems[0], FloatType)
        ctx.error(
            f"result element type '{_t(elem_of(res))}' must match the operand element type "
            f"'{_t(elems[0])}'" + (hint if floats else "")
        )
        return
    if shape_of(res) != common:
        ctx.error(
            f"result shape {_s(shape_of(res))} does not match the broadcast operand shape "
            f"{_s(common)}"
        )


@hook("nv_tileaa_same_shape")
def _same_shape(op: Operation, ctx: VerifyContext) -> None:
    values = [*op.operands, *op.results]
    shapes = [shape_of(v.type) for v in values]
    for s in shapes[1:]:
        if s != shapes[0]:
            ctx.error(
                "operands and results must have the same shape, but got "
                f"{_s(shapes[0])} and {_s(s)}"
            )
            return


@hook("nv_tileaa_passthrough")
def _passthrough(op: Operation, ctx: VerifyContext) -> None:
    ins, outs = [v.type for v in op.operands], [v.type for v in op.results]
    if ins != outs:
        ctx.error(f"result types ({_ts(outs)}) must match the operand types ({_ts(ins)})")


# --------------------------------------------------------------------------- dot

_F8 = ("f8E4M3FN", "f8E5M2")
#: (A element, B element) -> legal accumulator elements, for non-scaled MMA.
_DOT_PAIRS: dict[tuple[str, str], tuple[str, ...]] = {
    ("f16", "f16"): ("f16", "f32"),
    ("bf16", "bf16"): ("f32",),
    ("tf32", "tf32"): ("f32",),
    ("f32", "f32"): ("f32",),
    ("f64", "f64"): ("f64",),
    ("i8", "i8"): ("i32",),
    **{(a, b): ("f32",) for a in _F8 for b in _F8},
}
#: Element types of block-scaled (MX-FP / NV-FP4) operands; the accumulator must be f32.
_SCALED_ELEMS = ("f8E4M3FN", "f8E5M2", "f4E2M1FN")
_SCALE_ELEMS = ("f8E8M0FNU", "f8E4M3FN")
#: The first compute capability with block-scaled MMA (Blackwell, sm_100).
BLOCK_SCALED_MIN_CC = 100
#: The first compute capability with tensor memory (tcgen05, sm_100).
TENSOR_MEMORY_MIN_CC = 100


def _name(t: Type) -> str:
    return getattr(t, "name", _t(t))


def target_compute_capability(op: Operation) -> Optional[int]:
    """``nv_tileaa.compute_capability`` (``major*10+minor``) of the nearest enclosing op that
    carries it, else ``nv_tileaa.target_spec = "sm_XX"`` (seed 002), else None."""
    cur: Optional[Operation] = op.parent_op
    while cur is not None:
        cc = cur.attributes.get("nv_tileaa.compute_capability")
        if isinstance(cc, IntegerAttr):
            return cc.value
        spec = cur.attributes.get("nv_tileaa.target_spec")
        if isinstance(spec, StringAttr) and spec.value.startswith("sm_"):
            digits = "".join(c for c in spec.value[3:] if c.isdigit())
            if digits:
                return int(digits)
        cur = cur.parent_op
    return None


@hook("nv_tileaa_dot")
def _dot(op: Operation, ctx: VerifyContext) -> None:
    """``verify_dot``: contracting dims, accumulator shape, block-scale gating and scale types,
    the legal (A, B, C) element tuple, and signedness only (and always) on integer MMA."""
    a, b, c = ctx.type("a"), ctx.type("b"), ctx.type("c")
    if not (a.rank == b.rank == c.rank):
        ctx.error(
            f"A, B and C must have the same rank, but have ranks {a.rank}, {b.rank}, {c.rank}"
        )
        return
    batch = a.shape[:-2]
    m, k = a.shape[-2:]
    kb, n = b.shape[-2:]
    if k != kb:
        ctx.error(f"contracting dimensions do not agree: A has K = {k} but B has K = {kb}")
        return
    if b.shape[:-2] != batch or c.shape != (*batch, m, n):
        ctx.error(
            f"accumulator shape {_s(c.shape)} does not match the A x B shape "
            f"{_s((*batch, m, n))}"
        )
        return
    sfa, sfb = ctx.operand("sfa"), ctx.operand("sfb")
    ea, eb, ec = _name(a.element), _name(b.element), _name(c.element)
    if sfa is not None or sfb is not None:
        if sfa is None or sfb is None:
            ctx.error("block-scaled dot requires both 'sfa' and 'sfb' scale factors")
            return
        cc = target_compute_capability(op)
        if cc is None or cc < BLOCK_SCALED_MIN_CC:
            target = f"sm_{cc}" if cc is not None else "unknown"
            ctx.error(
                f"block-scaled dot requires a target with block-scaled MMA support (sm_100 or "
                f"newer), but the target is {target}"
            )
            return
        _dot_scales(ctx, a, b, sfa.type, sfb.type)
        if ctx.failed:
            return
        if ea not in _SCALED_ELEMS or eb not in _SCALED_ELEMS:
            ctx.error(f"illegal block-scaled MMA element pair ('{ea}', '{eb}')")
            return
        if ec != "f32":
            ctx.error(
                f"accumulator element type '{ec}' is not legal for ('{ea}', '{eb}') MMA; "
                "expected 'f32'"
            )
            return
    else:
        ints = isinstance(a.element, IntegerType), isinstance(b.element, IntegerType)
        if all(ints) and a.element.width != b.element.width:
            ctx.error(
                f"integer MMA operands must have the same bit width, but got '{ea}' and '{eb}'"
            )
            return
        if ea == "f4E2M1FN" or eb == "f4E2M1FN":
            ctx.error("'f4E2M1FN' MMA operands require block scale factors ('sfa' and 'sfb')")
            return
        accs = _DOT_PAIRS.get((ea, eb))
        if accs is None:
            ctx.error(f"illegal MMA element pair ('{ea}', '{eb}')")
            return
        if ec not in accs:
            ctx.error(
                f"accumulator element type '{ec}' is not legal for ('{ea}', '{eb}') MMA; "
                f"expected {' or '.join(repr(x) for x in accs)}"
            )
            return
    integer = isinstance(a.element, IntegerType)
    signed = [n for n in ("signedness_a", "signedness_b") if ctx.attr(n) is not None]
    if integer and len(signed) != 2:
        ctx.error("integer MMA requires 'signedness_a' and 'signedness_b'")
    elif not integer and signed:
        ctx.error(f"'{signed[0]}' is only valid on integer MMA")
    elif integer and ctx.attr("propagate_nan") is not None:
        ctx.error("'propagate_nan' is only valid on floating-point MMA")


def _dot_scales(ctx: VerifyContext, a: TileType, b: TileType, sfa: Type, sfb: Type) -> None:
    """Scale factors: E8M0 (MX) or E4M3 (NV-FP4) tiles, sfa [.., M, K/blk], sfb [.., K/blk, N]."""
    for name, t in (("sfa", sfa), ("sfb", sfb)):
        if _name(elem_of(t)) not in _SCALE_ELEMS:
            ctx.error(
                f"'{name}' must be a tile of f8E8M0FNU or f8E4M3FN scale factors, but got '{_t(t)}'"
            )
            return
    m, k = a.shape[-2:]
    n = b.shape[-1]
    sa, sb = shape_of(sfa), shape_of(sfb)
    kb_a = sa[-1] if sa else 0
    kb_b = sb[-2] if len(sb) >= 2 else 0
    for name, shape, kb, want in (
        ("sfa", sa, kb_a, (*a.shape[:-2], m, kb_a)),
        ("sfb", sb, kb_b, (*b.shape[:-2], kb_b, n)),
    ):
        if not kb or k % kb or k // kb not in (16, 32) or shape != want:
            ctx.error(
                f"'{name}' shape {_s(shape)} does not match the operands: expected one scale per "
                "16 or 32 elements of K"
            )
            return


@hook("nv_tileaa_conv_attrs")
def _conv_attrs(op: Operation, ctx: VerifyContext) -> None:
    """Convolution geometry: strides, dilations and filter sizes positive, padding non-negative."""
    for name, least in (("strides", 1), ("dilations", 1), ("filter_shape", 1), ("padding", 0)):
        vals = _ints(ctx.attr(name))
        if vals and min(vals) < least:
            what = "positive" if least else "non-negative"
            ctx.error(f"'{name}' entries must be {what}, but got {_s(vals)}")
            return


# --------------------------------------------------------------------------- reduce / scan


@hook("nv_tileaa_reduce_scan")
def _reduce_scan(op: Operation, ctx: VerifyContext) -> None:
    scan = bool(ctx.rule.get("scan"))
    inputs = [v.type for v in op.operands]
    outs = [v.type for v in op.results]
    if not inputs:
        ctx.error("expects at least one input")
        return
    if any(shape_of(t) != shape_of(inputs[0]) for t in inputs):
        ctx.error("all inputs must have the same shape")
        return
    if len(outs) != len(inputs):
        ctx.error(f"expects one result per input ({len(inputs)}), but got {len(outs)}")
        return
    rank = len(shape_of(inputs[0]))
    axis = _int(ctx.attr("axis"))
    if axis is None or not 0 <= axis < rank:
        ctx.error(f"axis {axis} is out of range for rank-{rank} inputs")
        return
    for i, (t, r) in enumerate(zip(inputs, outs)):
        if scan:
            want = t
        else:
            shape = shape_of(t)[:axis] + shape_of(t)[axis + 1 :]
            # the result's layout (nv_tileas encoding) is the layout pass's choice
            enc = getattr(r, "encoding", None)
            want = TileType(shape, elem_of(t), enc) if shape else elem_of(t)
        if r != want and not (not scan and r == TileType((), elem_of(t)) and not shape_of(want)):
            ctx.error(f"result #{i} type '{_t(r)}' does not match the expected type '{_t(want)}'")
            return
    body = op.regions[0].blocks[0] if op.regions and op.regions[0].blocks else None
    want_args = [elem_of(t) for t in inputs] * 2
    got = [a.type for a in body.args] if body is not None else []
    if got != want_args:
        ctx.error(f"combiner region must take arguments ({_ts(want_args)}), but takes ({_ts(got)})")


# --------------------------------------------------------------------------- shape ops


@hook("nv_tileaa_shape")
def _shape(op: Operation, ctx: VerifyContext) -> None:
    """``infer_shape`` of seed 000, per op kind."""
    kind = ctx.rule["kind"]
    res = op.results[0].type
    rs = shape_of(res)
    src = op.operands[0].type if op.operands else None
    ss = shape_of(src) if src is not None else ()
    if kind == "splat":
        if elem_of(res) != src:
            ctx.error(
                f"result element type '{_t(elem_of(res))}' does not match the splatted value "
                f"type '{_t(src)}'"
            )
    elif kind == "broadcast":
        ok = len(ss) == len(rs) and all(s in (1, r) for s, r in zip(ss, rs))
        if not ok:
            ctx.error(f"operand shape {_s(ss)} cannot be broadcast to result shape {_s(rs)}")
    elif kind == "expand_dims":
        axes = sorted(_ints(ctx.attr("axes")) or [])
        out_rank = len(ss) + len(axes)
        bad = [a for a in axes if not 0 <= a < out_rank]
        if bad or len(set(axes)) != len(axes):
            ctx.error(f"axes {_s(axes)} must be distinct and within [0, {out_rank})")
            return
        want = list(ss)
        for a in axes:
            want.insert(a, 1)
        if rs != tuple(want):
            ctx.error(
                f"result shape {_s(rs)} does not match operand shape {_s(ss)} with size-one axes "
                f"inserted at {_s(axes)}"
            )
    elif kind == "extract":
        n = len(ctx.operands("indices"))
        if n > len(ss):
            ctx.error(
                f"expects at most {len(ss)} indices for a rank-{len(ss)} operand, but got {n}"
            )
            return
        want_shape = ss[n:]
        want = TileType(want_shape, elem_of(src)) if want_shape else elem_of(src)
        if res != want and res != TileType(want_shape, elem_of(src)):
            ctx.error(
                f"result type '{_t(res)}' does not match '{_t(want)}' (the operand with its "
                f"{n} leading indexed axes removed)"
            )
    elif kind == "extract_slice":
        sizes = _ints(ctx.attr("sizes")) or []
        n = len(ctx.operands("offsets"))
        if n != len(ss) or len(sizes) != len(ss):
            ctx.error(
                f"expects {len(ss)} offsets and {len(ss)} sizes for a rank-{len(ss)} operand, "
                f"but got {n} and {len(sizes)}"
            )
        elif any(z > s for z, s in zip(sizes, ss)):
            ctx.error(f"slice sizes {_s(sizes)} exceed the operand shape {_s(ss)}")
        elif rs != tuple(sizes):
            ctx.error(f"result shape {_s(rs)} does not match the slice sizes {_s(sizes)}")
    elif kind == "cat":
        ls, rr = shape_of(op.operands[0].type), shape_of(op.operands[1].type)
        dim = _int(ctx.attr("dim"))
        if len(ls) != len(rr) or dim is None or not 0 <= dim < len(ls):
            ctx.error(f"dim {dim} is out of range or the operand ranks differ")
            return
        want = list(ls)
        want[dim] = ls[dim] + rr[dim]
        same = all(x == y for i, (x, y) in enumerate(zip(ls, rr)) if i != dim)
        if not same or rs != tuple(want):
            ctx.error(
                f"result shape {_s(rs)} is not the concatenation of {_s(ls)} and {_s(rr)} along "
                f"dimension {dim}"
            )
    elif kind == "permute":
        perm = _ints(ctx.attr("permutation")) or []
        if sorted(perm) != list(range(len(ss))):
            ctx.error(f"permutation {_s(perm)} is not a permutation of [0, {len(ss)})")
            return
        want = tuple(ss[p] for p in perm)
        if rs != want:
            ctx.error(f"result shape {_s(rs)} does not match the permuted operand shape {_s(want)}")
    elif kind == "make_range":
        start, end = _int(ctx.attr("start")), _int(ctx.attr("end"))
        if end <= start:
            ctx.error(f"requires end > start, but got start = {start}, end = {end}")
        elif rs != (end - start,):
            ctx.error(f"result shape {_s(rs)} does not match the range length {end - start}")
    elif kind == "generate":
        body = op.regions[0].blocks[0] if op.regions[0].blocks else None
        n = len(body.args) if body is not None else 0
        if n != len(rs):
            ctx.error(
                f"body region must take one index argument per result dimension ({len(rs)}), "
                f"but takes {n}"
            )
    elif kind == "block_tile":
        blk = _ints(ctx.attr("block_shape")) or []
        if len(blk) != len(ss) or any(b <= 0 or s % b for s, b in zip(ss, blk)):
            ctx.error(f"block shape {_s(blk)} must divide the operand shape {_s(ss)}")
            return
        want = tuple(s // b for s, b in zip(ss, blk)) + tuple(blk)
        if rs != want:
            ctx.error(f"result shape {_s(rs)} does not match the blocked shape {_s(want)}")
    elif kind == "get_dim_size":
        rank = len(src.shape) if isinstance(src, (TileType, NvMemRefType)) else 0
        dim = _int(ctx.attr("dim"))
        if dim is None or not 0 <= dim < rank:
            ctx.error(f"dimension {dim} is out of range for a rank-{rank} operand")


# --------------------------------------------------------------------------- pointers


def _pointer_of(t: Type) -> Optional[NvPointerType]:
    e = elem_of(t)
    return e if isinstance(e, NvPointerType) else None


@hook("nv_tileaa_addptr")
def _addptr(op: Operation, ctx: VerifyContext) -> None:
    """The result keeps the base pointee and address space; the offset broadcasts to the base."""
    base, off, res = ctx.type("base"), ctx.type("offset"), ctx.type("result")
    bs, os_ = shape_of(base), shape_of(off)
    if bs and os_ and bs != os_:
        ctx.error(f"offset shape {_s(os_)} does not broadcast against base shape {_s(bs)}")
        return
    ptr = _pointer_of(base)
    shape = bs or os_
    want = TileType(shape, ptr, getattr(res, "encoding", None)) if shape else ptr
    if res != want:
        ctx.error(
            f"result type '{_t(res)}' must be '{_t(want)}': addptr keeps the base element type "
            "and address space"
        )


@hook("nv_tileaa_make_memref")
def _make_memref(op: Operation, ctx: VerifyContext) -> None:
    base, mr = ctx.type("base"), ctx.type("result")
    n_sizes, n_strides = len(ctx.operands("sizes")), len(ctx.operands("strides"))
    dyn = sum(1 for d in mr.shape if d == DYNAMIC)
    dyn_strides = sum(1 for s in mr.stride_values if s == DYNAMIC)
    if n_sizes != dyn:
        ctx.error(
            f"expects {dyn} size operands for the dynamic dimensions of '{_t(mr)}', but got "
            f"{n_sizes}"
        )
    elif n_strides != dyn_strides:
        ctx.error(
            f"expects {dyn_strides} stride operands for the dynamic strides of '{_t(mr)}', but "
            f"got {n_strides}"
        )
    elif mr.element != base.pointee:
        ctx.error(
            f"memref element type '{_t(mr.element)}' does not match the base pointee type "
            f"'{_t(base.pointee)}'"
        )
    elif mr.address_space != base.address_space:
        ctx.error(
            f"memref address space {mr.address_space} does not match the base pointer address "
            f"space {base.address_space}"
        )


# --------------------------------------------------------------------------- memory effects

#: access -> (data-carrying value, its description in diagnostics)
_DATA = {
    "load": ("value", "result"),
    "store": ("value", "stored value"),
    "rmw": ("value", "value"),
    "cas": ("cmp", "compare value"),
}


@hook("nv_tileaa_memory")
def _memory(op: Operation, ctx: VerifyContext) -> None:
    """``verify_memory_op_common``: segments, token arity, indices vs base rank, element types,
    mask shape, the fallback value and per-axis in_bounds (ordering rules are declarative)."""
    access = ctx.rule["access"]
    segs = ctx.opdef.segmented_operands
    sizes = ctx.attr("operandSegmentSizes")
    if not isinstance(sizes, DenseArrayAttr):
        names = ", ".join(d.name for d in segs)
        ctx.error(f"requires attribute 'operandSegmentSizes' with {len(segs)} segments {{{names}}}")
        return
    trailing = len(op.operands) - sum(sizes.values)
    if trailing < 0:
        ctx.error(
            f"operand count ({len(op.operands)}) does not match with the total size "
            f"({sum(sizes.values)}) specified in attribute 'operandSegmentSizes'"
        )
        return
    if trailing > 1:
        ctx.error(
            f"expects at most one mem_token operand after the {len(segs)} operand segments, but "
            f"found {trailing}"
        )
        return
    n_result_tokens = len(ctx.results("result_token"))
    if n_result_tokens != trailing:
        ctx.error(
            f"result token count ({n_result_tokens}) must mirror the token operand count "
            f"({trailing})"
        )
        return
    base = ctx.type("base")
    rank = base.rank if isinstance(base, NvMemRefType) else 0
    n_idx = len(ctx.operands("indices"))
    if n_idx != rank:
        ctx.error(f"expects {rank} indices for a base of rank {rank}, but got {n_idx}")
        return
    pointee = base.element if isinstance(base, NvMemRefType) else _pointer_of(base).pointee
    name, what = _DATA[access]
    data = ctx.type(name)
    if elem_of(data) != pointee:
        ctx.error(
            f"{what} element type '{_t(elem_of(data))}' does not match the base element type "
            f"'{_t(pointee)}'"
        )
        return
    mask = ctx.operand("mask")
    if mask is not None and shape_of(mask.type) != shape_of(data):
        ctx.error(
            f"mask shape {_s(shape_of(mask.type))} does not match the {what} shape "
            f"{_s(shape_of(data))}"
        )
        return
    if access == "load":
        other = ctx.operand("other")
        if other is not None and other.type != data:
            ctx.error(f"'other' type '{_t(other.type)}' must match the result type '{_t(data)}'")
            return
    elif access == "cas":
        types = [ctx.type("cmp"), ctx.type("val"), ctx.type("result")]
        if len(set(types)) != 1:
            ctx.error(f"compare, replacement and result types must match, but got {_ts(types)}")
            return
    elif access == "rmw" and ctx.type("result") != data:
        ctx.error(f"result type '{_t(ctx.type('result'))}' must match the value type '{_t(data)}'")
        return
    in_bounds = ctx.attr("in_bounds")
    if isinstance(in_bounds, DenseArrayAttr) and len(in_bounds.values) != rank:
        ctx.error(
            f"'in_bounds' must have one entry per base dimension ({rank}), but has "
            f"{len(in_bounds.values)}"
        )


# --------------------------------------------------------------------------- symbols, functions


def _lookup(op: Operation, name: str) -> Optional[Operation]:
    table = nearest_symbol_table(op)
    while table is not None:
        for region in table.regions:
            for block in region.blocks:
                for child in block.ops:
                    sym = child.attributes.get("sym_name")
                    if isinstance(sym, StringAttr) and sym.value == name:
                        return child
        table = nearest_symbol_table(table)
    return None


@hook("nv_tileaa_symbol")
def _symbol(op: Operation, ctx: VerifyContext) -> None:
    """Symbol references resolve inside the containing module to the expected op kind; with
    ``signature: true`` the operands/results match the callee's function type."""
    ref = ctx.attr(ctx.rule["ref"])
    if not isinstance(ref, SymbolRefAttr):
        return
    kinds = [f"nv_tileaa.{k}" for k in ctx.rule["expect"]]
    target = _lookup(op, ref.root)
    if target is None or target.name not in kinds:
        ctx.error(f"'@{ref.root}' does not reference a valid {' or '.join(kinds)}")
        return
    if not ctx.rule.get("signature"):
        return
    ftype = getattr(target.attributes.get("function_type"), "value", None)
    if ftype is None:
        return
    skip = ctx.rule.get("skip_operands")
    args = ctx.operands("args") if skip else op.operands
    ins = [v.type for v in args]
    if len(ins) != len(ftype.inputs):
        ctx.error("incorrect number of operands for callee")
        return
    for i, (got, want) in enumerate(zip(ins, ftype.inputs)):
        if got != want:
            ctx.error(
                f"operand type mismatch: expected operand type '{_t(want)}', but provided "
                f"'{_t(got)}' for operand number {i}"
            )
            return
    outs = [v.type for v in op.results]
    if skip:
        return
    if len(outs) != len(ftype.results):
        ctx.error("incorrect number of results for callee")
        return
    for i, (got, want) in enumerate(zip(outs, ftype.results)):
        if got != want:
            ctx.error(f"result type mismatch at index {i}")
            ctx.diag.diagnostics[-1].notes.append(_note(op, f"op result types: {_ts(outs)}"))
            return


def _note(op: Operation, msg: str):
    from tilegen.runtime.diagnostics import Diagnostic

    return Diagnostic("note", msg, op.loc)


@hook("nv_tileaa_func")
def _func(op: Operation, ctx: VerifyContext) -> None:
    ftype = getattr(ctx.attr("function_type"), "value", None)
    region = op.regions[0]
    if ftype is None or not region.blocks:
        return
    args = region.blocks[0].args
    if len(args) != len(ftype.inputs):
        ctx.error(
            f"entry block must have {len(ftype.inputs)} arguments to match function signature"
        )
        return
    for i, (arg, want) in enumerate(zip(args, ftype.inputs)):
        if arg.type != want:
            ctx.error(
                f"type of entry block argument #{i}('{_t(arg.type)}') must match the type of the "
                f"corresponding argument in function signature('{_t(want)}')"
            )
            return


@hook("nv_tileaa_no_cuda_tile", regions=True)
def _no_cuda_tile(op: Operation, ctx: VerifyContext) -> None:
    """A TileAA module contains no remaining cuda_tile operations."""
    for inner in op.walk():
        if inner is not op and inner.name.startswith("cuda_tile."):
            ctx.error_at(
                inner.loc,
                f"'{inner.name}' op is illegal in a TileAA module: every cuda_tile operation must "
                "be converted to nv_tileaa",
                op_prefix=False,
            )
            return


@hook("nv_tileaa_return")
def _return(op: Operation, ctx: VerifyContext) -> None:
    parent = op.parent_op
    if parent is None or parent.name != "nv_tileaa.func":
        ctx.error("expects parent op 'nv_tileaa.func'")
        return
    ftype = getattr(parent.attributes.get("function_type"), "value", None)
    sym = getattr(parent.attributes.get("sym_name"), "value", "?")
    if ftype is None:
        return
    if len(op.operands) != len(ftype.results):
        ctx.error(
            f"has {len(op.operands)} operands, but enclosing function (@{sym}) returns "
            f"{len(ftype.results)}"
        )
        return
    for i, (v, want) in enumerate(zip(op.operands, ftype.results)):
        if v.type != want:
            ctx.error(
                f"type of return operand {i} ('{_t(v.type)}') doesn't match function result type "
                f"('{_t(want)}') in function @{sym}"
            )
            return


_YIELD_PARENTS = ("nv_tileaa.reduce", "nv_tileaa.scan", "nv_tileaa.generate", "nv_tileaa.execute")


@hook("nv_tileaa_yield")
def _yield(op: Operation, ctx: VerifyContext) -> None:
    """yield / queue.yield operands match the parent region's contract."""
    parent = op.parent_op
    if parent is None or parent.name not in _YIELD_PARENTS:
        ctx.error(f"expects parent op to be one of '{', '.join(_YIELD_PARENTS)}'")
        return
    if parent.name in ("nv_tileaa.reduce", "nv_tileaa.scan"):
        want = [elem_of(v.type) for v in parent.operands]
    elif parent.name == "nv_tileaa.generate":
        want = [elem_of(r.type) for r in parent.results]
    else:
        want = [r.type for r in parent.results]
    got = [v.type for v in op.operands]
    if got != want:
        ctx.error(
            f"operand types ({_ts(got)}) do not match the contract of the parent "
            f"'{parent.name}' ({_ts(want)})"
        )


@hook("nv_tileaa_launch")
def _launch(op: Operation, ctx: VerifyContext) -> None:
    n = len(ctx.operands("grid"))
    if not 1 <= n <= 3:
        ctx.error(f"grid must have 1 to 3 dimensions, but has {n}")


@hook("nv_tileaa_execute")
def _execute(op: Operation, ctx: VerifyContext) -> None:
    body = op.regions[0].blocks[0] if op.regions[0].blocks else None
    got = [a.type for a in body.args] if body is not None else []
    want = [v.type for v in op.operands]
    if got != want:
        ctx.error(f"body region arguments ({_ts(got)}) must match the operand types ({_ts(want)})")


@hook("nv_tileaa_plugin")
def _plugin(op: Operation, ctx: VerifyContext) -> None:
    """Resource requirements are non-negative; tensor memory needs a Blackwell (sm_100+) target."""
    for name in ("registers", "shared_memory", "tensor_memory", "named_barriers"):
        v = _int(ctx.attr(name))
        if v is not None and v < 0:
            ctx.error(f"resource '{name}' must be non-negative, but is {v}")
            return
    if (_int(ctx.attr("tensor_memory")) or 0) > 0:
        cc = target_compute_capability(op)
        if cc is None or cc < TENSOR_MEMORY_MIN_CC:
            target = f"sm_{cc}" if cc is not None else "unknown"
            ctx.error(
                "tensor memory requires a target with tensor memory (sm_100 or newer), but the "
                f"target is {target}"
            )


# --------------------------------------------------------------------------- grid and queues


@hook("nv_tileaa_grid_dim")
def _grid_dim(op: Operation, ctx: VerifyContext) -> None:
    dim = _int(ctx.attr("dim"))
    if dim not in (0, 1, 2):
        ctx.error(f"grid dimension {dim} is out of range; expected 0, 1 or 2")


@hook("nv_tileaa_queue")
def _queue(op: Operation, ctx: VerifyContext) -> None:
    if op.name == "nv_tileaa.create_queue":
        depth = _int(ctx.attr("depth"))
        if depth is None or depth < 1:
            ctx.error(f"queue depth must be at least 1, but got {depth}")
        return
    payload = list(op.operands[0].type.payload)
    if op.name == "nv_tileaa.queue.get":
        got, what = [r.type for r in op.results], "result"
    else:
        got, what = [v.type for v in ctx.operands("values")], "value"
    if got != payload:
        ctx.error(
            f"{what} types ({_ts(got)}) do not match the queue payload types ({_ts(payload)})"
        )
