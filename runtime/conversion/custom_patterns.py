"""Hand-written conversion patterns, named by ``custom:`` rows of
spec/lowerings/cuda_tile_to_nv_tileaa.yaml.

Each is ``fn(op, rw, ctx) -> bool`` (True when it rewrote ``op``). New values take converted
types (runtime/conversion/types.py); operands may still be cuda_tile values whose producers are
converted later (every op is converted, so the final IR is consistent).
"""

from __future__ import annotations

from typing import Optional

from tilegen.runtime.attributes import (
    ArrayAttr,
    Attribute,
    BoolAttr,
    DenseArrayAttr,
    DenseElementsAttr,
    DictAttr,
    FloatAttr,
    IntegerAttr,
    OptimizationHintsAttr,
    StringAttr,
    TypeAttr,
    UnitAttr,
)
from tilegen.runtime.conversion.declared import (
    ConversionContext,
    build,
    carried_attributes,
    enum_attr,
    enum_keyword,
)
from tilegen.runtime.conversion.types import convert_type, convert_types, tile_shape_of_view
from tilegen.runtime.ir import Block, Operation, Region, Value
from tilegen.runtime.opdef import lookup_enum, lookup_opdef
from tilegen.runtime.rewrite import PatternRewriter
from tilegen.runtime.rewrite.ir_utils import clone_op
from tilegen.runtime.types import (
    DYNAMIC,
    FloatType,
    FunctionType,
    GatherScatterViewType,
    IndexType,
    IntegerType,
    MemTokenType,
    NvMemRefType,
    TileType,
    TILE_VIEW_TYPES,
    Type,
)

NV = "nv_tileaa."
I1, I32 = IntegerType(1), IntegerType(32)


# --------------------------------------------------------------------------- helpers


def _replace(rw: PatternRewriter, op: Operation, name: str, groups, attrs=None, types=None):
    new = build(rw, op, name, groups, attrs, types)
    rw.replace_op(op, new.results)
    return new


def _group(op: Operation, name: str) -> list[Value]:
    return list(op.opdef.operand_group(op, name))


def _scalar_constant(rw: PatternRewriter, t: Type, value, loc) -> Value:
    attr: Attribute = (
        FloatAttr(float(value), t) if isinstance(t, FloatType) else IntegerAttr(int(value), t)
    )
    return rw.create("arith.constant", [], [t], {"value": attr}, loc).results[0]


def _kw(op: Operation, name: str) -> Optional[str]:
    attr = op.attributes.get(name)
    return None if attr is None else enum_keyword(attr, op.opdef.attr(name))


def _i32_array(values) -> DenseArrayAttr:
    return DenseArrayAttr(I32, tuple(int(v) for v in values))


def _bool_array(values) -> DenseArrayAttr:
    return DenseArrayAttr(I1, tuple(bool(v) for v in values))


def _convert_region_types(region: Region, ctx: ConversionContext) -> None:
    """Block arguments of ``region`` take their converted types (seed 003 convertRegionTypes);
    the view type of a view argument is remembered for the accesses through it."""
    for block in region.blocks:
        for arg in block.args:
            if isinstance(arg.type, TILE_VIEW_TYPES):
                ctx.view_types[id(arg)] = arg.type
            arg.type = convert_type(arg.type)


def _move_regions(
    rw: PatternRewriter, src: Operation, dst: Operation, ctx: ConversionContext
) -> None:
    for old, new in zip(src.regions, dst.regions):
        rw.take_region(old, new)
        _convert_region_types(new, ctx)


# --------------------------------------------------------------------------- arithmetic

_CMPI = {
    "equal": ("eq", "eq"),
    "not_equal": ("ne", "ne"),
    "less_than": ("slt", "ult"),
    "less_than_or_equal": ("sle", "ule"),
    "greater_than": ("sgt", "ugt"),
    "greater_than_or_equal": ("sge", "uge"),
}
_CMPF = {
    "equal": "eq",
    "not_equal": "ne",
    "less_than": "lt",
    "less_than_or_equal": "le",
    "greater_than": "gt",
    "greater_than_or_equal": "ge",
}


def _predicate(enum_name: str, keyword: str) -> Attribute:
    """An arith comparison predicate as MLIR stores it: the arith spec's enum value
    (spec/types/arith_enums.yaml) as an i64 IntegerAttr."""
    enum = lookup_enum(enum_name)
    value = enum.value(keyword) if enum is not None else None
    if value is None:
        raise KeyError(f"arith enum {enum_name} has no case '{keyword}'")
    return IntegerAttr(value, IntegerType(64))


def cmpi_to_arith(op: Operation, rw: PatternRewriter, ctx: ConversionContext) -> bool:
    """cmpi P, signedness -> arith.cmpi with the signed or unsigned predicate."""
    pred = _CMPI.get(_kw(op, "comparison_predicate") or "")
    if pred is None:
        return False
    chosen = pred[1] if _kw(op, "signedness") == "unsigned" else pred[0]
    attrs = {"predicate": _predicate("Arith_CmpIPredicate", chosen)}
    _replace(rw, op, "arith.cmpi", [op.operands], attrs)
    return True


def cmpf_to_arith(op: Operation, rw: PatternRewriter, ctx: ConversionContext) -> bool:
    """cmpf P, ordering -> arith.cmpf o<P> / u<P>."""
    pred = _CMPF.get(_kw(op, "comparison_predicate") or "")
    if pred is None:
        return False
    prefix = "u" if _kw(op, "comparison_ordering") == "unordered" else "o"
    attrs = {"predicate": _predicate("Arith_CmpFPredicate", prefix + pred)}
    _replace(rw, op, "arith.cmpf", [op.operands], attrs)
    return True


def negi_to_sub(op: Operation, rw: PatternRewriter, ctx: ConversionContext) -> bool:
    """negi x -> arith.subi 0, x."""
    t = convert_type(op.results[0].type)
    rw.set_insertion_point(op)
    zero = _zero_like(rw, t, op.loc)
    _replace(rw, op, "arith.subi", [[zero], op.operands])
    return True


def _zero_like(rw: PatternRewriter, t: Type, loc) -> Value:
    if isinstance(t, TileType):
        scalar = _scalar_constant(rw, t.element, 0, loc)
        return rw.create(NV + "splat", [scalar], [t], {}, loc).results[0]
    return _scalar_constant(rw, t, 0, loc)


_DIVI = {
    ("signed", "zero"): "arith.divsi",
    ("signed", "negative_inf"): "arith.floordivsi",
    ("signed", "positive_inf"): "arith.ceildivsi",
    ("unsigned", "zero"): "arith.divui",
    ("unsigned", "negative_inf"): "arith.divui",
    ("unsigned", "positive_inf"): "arith.ceildivui",
}


def divi_to_arith(op: Operation, rw: PatternRewriter, ctx: ConversionContext) -> bool:
    """divi (signedness, rounding) -> arith.divsi / divui / floordivsi / ceildivsi / ceildivui."""
    key = (_kw(op, "signedness") or "signed", _kw(op, "rounding") or "zero")
    name = _DIVI.get(key)
    if name is None:
        return False
    _replace(rw, op, name, [op.operands])
    return True


# --------------------------------------------------------------------------- values and shapes


def constant_to_splat_or_dense(op: Operation, rw: PatternRewriter, ctx: ConversionContext) -> bool:
    """A scalar or splat constant -> arith.constant (+ nv_tileaa.splat); a non-uniform one ->
    arith.constant with a dense value of the converted type."""
    attr = op.attributes.get("value")
    if not isinstance(attr, DenseElementsAttr):
        return False
    t = convert_type(op.results[0].type)
    rw.set_insertion_point(op)
    if not isinstance(t, TileType) or attr.is_splat:
        element = t.element if isinstance(t, TileType) else t
        value = attr.values[0]
        if isinstance(element, FloatType):
            bits = attr.bits[0] if attr.bits else None
            scalar_attr: Attribute = FloatAttr(float(value), element, bits)
        else:
            scalar_attr = IntegerAttr(int(value), element)
        scalar = rw.create("arith.constant", [], [element], {"value": scalar_attr}, op.loc)
        if not isinstance(t, TileType):
            rw.replace_op(op, scalar.results)
            return True
        _replace(rw, op, NV + "splat", [scalar.results], types=[t])
        return True
    dense = DenseElementsAttr(t, attr.values, attr.bits)
    _replace(rw, op, "arith.constant", [], {"value": dense}, [t])
    return True


def iota_to_make_range(op: Operation, rw: PatternRewriter, ctx: ConversionContext) -> bool:
    """iota : tile<N x iK> -> nv_tileaa.make_range {start = 0, end = N}."""
    t = convert_type(op.results[0].type)
    if not isinstance(t, TileType) or len(t.shape) != 1:
        return False
    attrs = {"start": IntegerAttr(0, I32), "end": IntegerAttr(t.shape[0], I32)}
    _replace(rw, op, NV + "make_range", [], attrs, [t])
    return True


def broadcast_or_splat(op: Operation, rw: PatternRewriter, ctx: ConversionContext) -> bool:
    """broadcast of a 0-d tile (a scalar after conversion) -> splat; otherwise broadcast."""
    src = op.opdef.operand_group(op, "source")[0]
    scalar = not isinstance(convert_type(src.type), TileType)
    if not isinstance(convert_type(op.results[0].type), TileType):
        rw.replace_op(op, [src])  # 0-d to 0-d: the scalar itself
        return True
    _replace(rw, op, NV + ("splat" if scalar else "broadcast"), [[src]])
    return True


def reshape_to_view(op: Operation, rw: PatternRewriter, ctx: ConversionContext) -> bool:
    """reshape -> view; from a scalar -> splat; to a scalar -> extract at index 0 of each axis."""
    src = op.operands[0]
    src_t, res_t = convert_type(src.type), convert_type(op.results[0].type)
    if not isinstance(src_t, TileType) and not isinstance(res_t, TileType):
        rw.replace_op(op, [src])
    elif not isinstance(src_t, TileType):
        _replace(rw, op, NV + "splat", [[src]])
    elif not isinstance(res_t, TileType):
        rw.set_insertion_point(op)
        zero = _scalar_constant(rw, I32, 0, op.loc)
        _replace(rw, op, NV + "extract", [[src], [zero] * len(src_t.shape)])
    else:
        _replace(rw, op, NV + "view", [[src]])
    return True


def extract_to_slice(op: Operation, rw: PatternRewriter, ctx: ConversionContext) -> bool:
    """extract src[i...] (indices in units of the result tile) -> extract_slice at element
    offsets i * size."""
    src = _group(op, "source")[0]
    res_t = op.results[0].type
    rw.set_insertion_point(op)
    offsets = [_scale(rw, v, n, op.loc) for v, n in zip(_group(op, "indices"), res_t.shape)]
    _replace(rw, op, NV + "extract_slice", [[src], offsets], {"sizes": _i32_array(res_t.shape)})
    return True


def _scale(rw: PatternRewriter, v: Value, n: int, loc) -> Value:
    if n == 1:
        return v
    t = convert_type(v.type)
    k = _scalar_constant(rw, t, n, loc)
    return rw.create("arith.muli", [v, k], [t], {}, loc).results[0]


def insert_to_select(op: Operation, rw: PatternRewriter, ctx: ConversionContext) -> bool:
    """insert src into dst[i...] -> select between dst and src broadcast into place: a mask of
    the positions [i*s, (i+1)*s) per axis (make_range, compare, and), then arith.select."""
    src, dst = _group(op, "source")[0], _group(op, "destination")[0]
    s_t, d_t = src.type, op.results[0].type
    if not isinstance(d_t, TileType) or not isinstance(s_t, TileType) or s_t.shape == d_t.shape:
        if isinstance(s_t, TileType) and s_t.shape == getattr(d_t, "shape", None):
            rw.replace_op(op, [src])
            return True
        return False
    if any(d % s for s, d in zip(s_t.shape, d_t.shape)):
        return False
    loc = op.loc
    rw.set_insertion_point(op)
    mask_t = TileType(d_t.shape, I1)
    mask: Optional[Value] = None
    for axis, (idx, s, d) in enumerate(zip(_group(op, "indices"), s_t.shape, d_t.shape)):
        lane_t = TileType((d,), I32)
        lanes = rw.create(
            NV + "make_range",
            [],
            [lane_t],
            {"start": IntegerAttr(0, I32), "end": IntegerAttr(d, I32)},
            loc,
        ).results[0]
        lo = _scale(rw, idx, s, loc)
        lo_t = rw.create(NV + "splat", [lo], [lane_t], {}, loc).results[0]
        rel = rw.create("arith.subi", [lanes, lo_t], [lane_t], {}, loc).results[0]
        s_t1 = rw.create(NV + "splat", [_scalar_constant(rw, I32, s, loc)], [lane_t], {}, loc)
        in_axis = rw.create(
            "arith.cmpi",
            [rel, s_t1.results[0]],
            [TileType((d,), I1)],
            {"predicate": _predicate("Arith_CmpIPredicate", "ult")},
            loc,
        ).results[0]
        shape = tuple(d if a == axis else 1 for a in range(len(d_t.shape)))
        row = rw.create(NV + "view", [in_axis], [TileType(shape, I1)], {}, loc).results[0]
        full = rw.create(NV + "broadcast", [row], [mask_t], {}, loc).results[0]
        mask = (
            full
            if mask is None
            else rw.create("arith.andi", [mask, full], [mask_t], {}, loc).results[0]
        )
    tiled = src
    for axis, d in enumerate(d_t.shape):  # repeat src along each axis by doubling (powers of 2)
        while tiled.type.shape[axis] < d:
            shape = tuple(n * 2 if a == axis else n for a, n in enumerate(tiled.type.shape))
            attrs = {"dim": IntegerAttr(axis, I32)}
            tiled = rw.create(
                NV + "cat", [tiled, tiled], [TileType(shape, s_t.element)], attrs, loc
            ).results[0]
    _replace(rw, op, "arith.select", [[mask, tiled, dst]])
    return True


def _width(t: Type) -> int:
    return t.width if isinstance(t, (IntegerType, FloatType)) else 0


def _as_int(rw: PatternRewriter, v: Value, loc) -> Value:
    """``v`` (a 1-d tile) bitcast to the integer type of its width (unchanged when integer)."""
    t = convert_type(v.type)
    if isinstance(t.element, IntegerType):
        return v
    it = TileType(t.shape, IntegerType(_width(t.element)))
    return rw.create(NV + "bitcast", [v], [it], {}, loc).results[0]


def pack_bits(op: Operation, rw: PatternRewriter, ctx: ConversionContext) -> bool:
    """pack / unpack (same bits, elements of another width; little-endian lanes) -> integer
    lanes split by shift + trunci and interleaved with cat (wide -> narrow), or extended,
    shifted and or-ed together (narrow -> wide); then a bitcast to the result element."""
    src = op.operands[0]
    s_t, r_t = convert_type(src.type), convert_type(op.results[0].type)
    if not (isinstance(s_t, TileType) and isinstance(r_t, TileType) and len(s_t.shape) == 1):
        return False
    ws, wr = _width(s_t.element), _width(r_t.element)
    if not ws or not wr or ws * s_t.shape[0] != wr * r_t.shape[0]:
        return False
    loc = op.loc
    rw.set_insertion_point(op)
    v = _as_int(rw, src, loc)
    if ws > wr:
        n, k = s_t.shape[0], ws // wr
        wide_t, narrow_t = TileType((n,), IntegerType(ws)), TileType((n,), IntegerType(wr))
        lanes = []
        for j in range(k):
            part = v
            if j:
                sh = _splat_int(rw, wide_t, j * wr, loc)
                part = rw.create("arith.shrui", [v, sh], [wide_t], {}, loc).results[0]
            part = rw.create("arith.trunci", [part], [narrow_t], {}, loc).results[0]
            col_t = TileType((n, 1), IntegerType(wr))
            lanes.append(rw.create(NV + "view", [part], [col_t], {}, loc).results[0])
        grid = _cat_all(rw, lanes, loc)
        out = rw.create(NV + "view", [grid], [TileType(r_t.shape, IntegerType(wr))], {}, loc)
    else:
        n, k = r_t.shape[0], wr // ws
        grid_t = TileType((n, k), IntegerType(ws))
        grid = rw.create(NV + "view", [v], [grid_t], {}, loc).results[0]
        wide_t = TileType((n,), IntegerType(wr))
        acc: Optional[Value] = None
        for j in range(k):
            off = [_scalar_constant(rw, I32, 0, loc), _scalar_constant(rw, I32, j, loc)]
            col_t = TileType((n, 1), IntegerType(ws))
            attrs = {"sizes": _i32_array((n, 1))}
            col = rw.create(NV + "extract_slice", [grid] + off, [col_t], attrs, loc).results[0]
            col = rw.create(NV + "view", [col], [TileType((n,), IntegerType(ws))], {}, loc)
            part = rw.create("arith.extui", [col.results[0]], [wide_t], {}, loc).results[0]
            if j:
                sh = _splat_int(rw, wide_t, j * ws, loc)
                part = rw.create("arith.shli", [part, sh], [wide_t], {}, loc).results[0]
            acc = (
                part
                if acc is None
                else rw.create("arith.ori", [acc, part], [wide_t], {}, loc).results[0]
            )
        out = acc.owner
    value = out.results[0]
    if value.type != r_t:
        value = rw.create(NV + "bitcast", [value], [r_t], {}, loc).results[0]
    rw.replace_op(op, [value])
    return True


def _splat_int(rw: PatternRewriter, t: TileType, value: int, loc) -> Value:
    scalar = _scalar_constant(rw, t.element, value, loc)
    return rw.create(NV + "splat", [scalar], [t], {}, loc).results[0]


def _cat_all(rw: PatternRewriter, cols: list[Value], loc) -> Value:
    """Concatenate ``cols`` (n x 1 each) along dim 1, pairwise (tile sizes stay powers of 2)."""
    while len(cols) > 1:
        nxt = []
        for a, b in zip(cols[0::2], cols[1::2]):
            t = a.type
            shape = (t.shape[0], t.shape[1] * 2)
            attrs = {"dim": IntegerAttr(1, I32)}
            nxt.append(
                rw.create(NV + "cat", [a, b], [TileType(shape, t.element)], attrs, loc).results[0]
            )
        cols = nxt
    return cols[0]


# --------------------------------------------------------------------------- grid


def block_id_to_program_id(op: Operation, rw: PatternRewriter, ctx: ConversionContext) -> bool:
    """get_tile_block_id -> one get_program_id per axis."""
    return _per_axis(op, rw, NV + "get_program_id")


def num_blocks_to_num_programs(op: Operation, rw: PatternRewriter, ctx: ConversionContext) -> bool:
    return _per_axis(op, rw, NV + "get_num_programs")


def _per_axis(op: Operation, rw: PatternRewriter, name: str) -> bool:
    rw.set_insertion_point(op)
    values = []
    for dim, res in enumerate(op.results):
        new = rw.create(name, [], [convert_type(res.type)], {"dim": IntegerAttr(dim, I32)}, op.loc)
        values.append(new.results[0])
    rw.replace_op(op, values)
    return True


# --------------------------------------------------------------------------- control flow

_YIELDS_TO_SCF = (
    "cuda_tile.for",
    "cuda_tile.if",
    "cuda_tile.loop",
    "scf.for",
    "scf.if",
    "scf.while",
)


def _hoist_tail(rw: PatternRewriter, block: Block, exit: str = "cuda_tile.continue") -> None:
    """Make early exits structured in ``block`` (which ends in ``exit``: a for body's
    ``continue``, a function's ``return``): the first result-less ``if`` with a branch ending in
    ``exit`` takes a copy of the ops after it in each branch that falls through, yields the exit
    values and the block exits with the if's results (recursively, so later and nested early
    exits are handled too). An if with results passes each branch's yielded values to its copy
    of the tail."""
    for i, op in enumerate(block.ops):
        if op.name != "cuda_tile.if":
            continue
        if not any(_has_exit(r, (exit,)) for r in op.regions):
            continue
        tail = block.ops[i + 1 :]
        types = [v.type for v in tail[-1].operands]
        for region in op.regions:
            if not region.blocks:
                region.append(Block())
            b = region.blocks[0]
            if _exit_kind(b) != exit:
                mapping: dict = {}
                if b.ops and b.ops[-1].name == "cuda_tile.yield":  # its values stand for the if's
                    for res, v in zip(op.results, b.ops[-1].operands):
                        mapping[id(res)] = v
                    rw.erase_op(b.ops[-1])
                for t in tail:
                    b.append(clone_op(t, mapping))
            _hoist_tail(rw, b, exit)
            end = b.ops[-1]
            b.ops.remove(end)
            b.append(Operation("cuda_tile.yield", list(end.operands), [], {}, 0, end.loc))
            end.drop_all_uses_of_operands()
        new = Operation("cuda_tile.if", [op.operands[0]], types, {}, 2, op.loc)
        for old, new_r in zip(op.regions, new.regions):
            rw.take_region(old, new_r)
        for t in reversed(tail):
            rw.erase_op(t)
        rw.set_insertion_point(op)
        rw.insert(new)
        rw.erase_op(op)
        rw.set_insertion_point_to_end(block)
        rw.create(exit, list(new.results), [], {}, new.loc)
        return


def for_to_scf(op: Operation, rw: PatternRewriter, ctx: ConversionContext) -> bool:
    """for lb to ub step s iter_values(...) -> scf.for with the body moved over (early
    ``continue`` made structured first, see :func:`_hoist_tail`)."""
    body = op.regions[0].blocks[0] if op.regions[0].blocks else None
    if body is not None and _exit_kind(body) == "cuda_tile.continue":
        _hoist_tail(rw, body)
    attrs = {"unsignedCmp": UnitAttr()} if "unsignedCmp" in op.attributes else {}
    new = build(rw, op, "scf.for", [op.operands], attrs, regions=1)
    _move_regions(rw, op, new, ctx)
    rw.replace_op(op, new.results)
    return True


_FUNCTIONS = ("cuda_tile.entry", "cuda_tile.testing$func")


def if_to_scf(op: Operation, rw: PatternRewriter, ctx: ConversionContext) -> bool:
    """if -> scf.if; an empty else region stays empty. An early ``return`` in a branch of an if
    in a function body is made structured first (:func:`_hoist_tail`)."""
    parent = op.parent_op
    exits = any(_has_exit(r, ("cuda_tile.return",)) for r in op.regions)
    if parent is not None and parent.name in _FUNCTIONS and exits:
        if _exit_kind(op.parent) != "cuda_tile.return":
            return False
        _hoist_tail(rw, op.parent, "cuda_tile.return")
        return True
    new = build(rw, op, "scf.if", [op.operands], regions=2)
    _move_regions(rw, op, new, ctx)
    rw.replace_op(op, new.results)
    return True


def _parent_kind(op: Operation) -> str:
    parent = op.parent_op
    return parent.name if parent is not None else ""


def yield_to_parent(op: Operation, rw: PatternRewriter, ctx: ConversionContext) -> bool:
    """yield -> scf.yield in for/if bodies, nv_tileaa.yield in reduce/scan combiners."""
    parent = _parent_kind(op)
    name = "scf.yield" if parent in _YIELDS_TO_SCF else NV + "yield"
    _replace(rw, op, name, [op.operands], types=[])
    return True


def continue_to_parent(op: Operation, rw: PatternRewriter, ctx: ConversionContext) -> bool:
    """continue ends a for body: scf.yield of the next iteration values (loops: see
    :func:`loop_to_scf_while`)."""
    if _parent_kind(op) not in ("cuda_tile.for", "scf.for"):
        return False
    _replace(rw, op, "scf.yield", [op.operands], types=[])
    return True


def break_to_parent(op: Operation, rw: PatternRewriter, ctx: ConversionContext) -> bool:
    """break is rewritten by its loop (:func:`loop_to_scf_while`)."""
    return False


def _has_exit(region: Region, exits: tuple) -> bool:
    """Whether ``region`` ends in one of ``exits``, directly or through nested ifs."""
    block = region.blocks[0] if region.blocks else None
    if block is None:
        return False
    if _exit_kind(block) in exits:
        return True
    return any(
        op.name == "cuda_tile.if" and any(_has_exit(r, exits) for r in op.regions)
        for op in block.ops
    )


def _exit_kind(block: Optional[Block]) -> Optional[str]:
    t = block.ops[-1] if block is not None and block.ops else None
    return t.name if t is not None else None


_EXITS = ("cuda_tile.break", "cuda_tile.continue")


def loop_to_scf_while(op: Operation, rw: PatternRewriter, ctx: ConversionContext) -> bool:
    """loop -> scf.while whose before-region runs the body and ends in ``scf.condition(go)
    values``; the after-region forwards the values to the next iteration.

    Exits may end the body or the branches of ifs nested in it (:func:`_flatten_exits`):
    ``continue v`` goes on with ``v`` (go = true), ``break v`` stops with ``v`` (go = false).
    When the results are not the iteration values, the condition carries both (the side an
    exit does not set is ``ub.poison``) and the loop's results are the trailing ones.
    """
    if not op.regions[0].blocks:
        return False
    body = op.regions[0].blocks[0]
    iter_types = convert_types(a.type for a in body.args)
    res_types = convert_types(r.type for r in op.results)
    split = bool(res_types) and res_types != iter_types
    carried = iter_types + res_types if split else iter_types
    for inner in op.walk():
        if inner.name in _EXITS and _owning_loop(inner) is op:
            cur = inner.parent_op
            while cur is not op:
                if cur.name != "cuda_tile.if":
                    return False
                cur = cur.parent_op
            if inner is not inner.parent.ops[-1]:
                return False
    if _exit_kind(body) not in _EXITS:
        return False
    loc = op.loc
    _flatten_exits(rw, body, list(body.args), res_types if split else None)
    new = Operation("scf.while", list(op.operands), carried, {}, 2, loc)
    rw.set_insertion_point(op)
    rw.insert(new)
    rw.take_region(op.regions[0], new.regions[0])
    _convert_region_types(new.regions[0], ctx)
    after = new.regions[1].append(Block(carried))
    rw.set_insertion_point_to_end(after)
    rw.create("scf.yield", list(after.args[: len(iter_types)]), [], {}, loc)
    results = new.results[len(iter_types) :] if split else new.results[: len(op.results)]
    rw.replace_op(op, list(results))
    return True


def _flatten_exits(
    rw: PatternRewriter, block: Block, current: list[Value], res_types: Optional[list] = None
) -> None:
    """Rewrite ``block`` (ending in break / continue, or in an if holding them) to end in
    ``scf.condition(go) values``: the first if with an exiting branch takes a copy of the ops
    after it in each branch that falls through, each branch is flattened recursively and yields
    (go, values), and the block ends with the condition on the if's results."""
    for i, op in enumerate(block.ops):
        if op.name != "cuda_tile.if":
            continue
        if not any(_has_exit(r, _EXITS) for r in op.regions):
            continue
        tail = block.ops[i + 1 :]
        loc = op.loc
        for region in op.regions:
            if not region.blocks:
                region.append(Block())
            b = region.blocks[0]
            if _exit_kind(b) not in _EXITS:
                mapping: dict = {}
                if b.ops and b.ops[-1].name == "cuda_tile.yield":
                    for res, v in zip(op.results, b.ops[-1].operands):
                        mapping[id(res)] = v
                    rw.erase_op(b.ops[-1])
                for t in tail:
                    b.append(clone_op(t, mapping))
            _flatten_exits(rw, b, current, res_types)
            cond = b.ops[-1]
            b.ops.remove(cond)
            b.append(Operation("cuda_tile.yield", list(cond.operands), [], {}, 0, cond.loc))
            cond.drop_all_uses_of_operands()
        types = [I1] + [convert_type(v.type) for v in current] + list(res_types or [])
        new = Operation("cuda_tile.if", [op.operands[0]], types, {}, 2, loc)
        for old, new_r in zip(op.regions, new.regions):
            rw.take_region(old, new_r)
        for t in reversed(tail):
            rw.erase_op(t)
        rw.set_insertion_point(op)
        rw.insert(new)
        rw.erase_op(op)
        rw.set_insertion_point_to_end(block)
        rw.create("scf.condition", list(new.results), [], {}, loc)
        return
    term = block.ops[-1]
    go_on = term.name == "cuda_tile.continue"
    rw.set_insertion_point(term)
    if res_types is not None:  # (iteration values, results): poison on the side not set
        poison = [rw.create("ub.poison", [], [t], {}, term.loc).results[0] for t in res_types]
        values = list(term.operands) + poison if go_on else list(current) + list(term.operands)
    else:
        values = list(term.operands) if len(term.operands) == len(current) else list(current)
    go = _scalar_constant(rw, I1, go_on, term.loc)
    rw.create("scf.condition", [go] + values, [], {}, term.loc)
    rw.erase_op(term)


def _owning_loop(op: Operation) -> Optional[Operation]:
    cur = op.parent_op
    while cur is not None and cur.name not in ("cuda_tile.loop", "cuda_tile.for", "scf.while"):
        cur = cur.parent_op
    return cur


# --------------------------------------------------------------------------- module and entry


def module_to_builtin(op: Operation, rw: PatternRewriter, ctx: ConversionContext) -> bool:
    """cuda_tile.module -> its symbols move into the enclosing builtin.module."""
    parent = op.parent_op
    if parent is None or parent.name != "builtin.module":
        return False
    body = op.regions[0].blocks[0] if op.regions[0].blocks else None
    if body is not None:
        rw.inline_block_before(body, op)
    rw.erase_op(op)
    return True


def _module_attr(op: Operation, name: str) -> Optional[Attribute]:
    cur = op.parent_op
    while cur is not None:
        if name in cur.attributes:
            return cur.attributes[name]
        cur = cur.parent_op
    return None


def kernel_spec(op: Operation, ctx: ConversionContext) -> DictAttr:
    """``nv_tileaa.kernel_spec``: the tt.* launch attributes (defaults from the spec), the
    compute capability and the entry's optimization_hints for this target (seed 002)."""
    items: dict[str, Attribute] = {"compute_capability": IntegerAttr(ctx.compute_capability, I32)}
    for name, default in ctx.spec.get("kernel_launch", {}).items():
        key = name.split(".", 1)[1]
        attr = op.attributes.get(name) or _module_attr(op, name)
        if attr is None and default is None:
            continue
        if attr is None:
            attr = _i32_array(default) if isinstance(default, list) else IntegerAttr(default, I32)
        items[key] = attr
    hints = op.attributes.get("optimization_hints")
    if isinstance(hints, OptimizationHintsAttr):
        # the ``default`` entry applies to every target; an entry for this target overrides it
        for wanted in ("default", "target"):
            for arch, entry in hints.entries:
                match = (
                    arch == "default"
                    if wanted == "default"
                    else (_arch_cc(arch) == ctx.compute_capability)
                )
                if match and isinstance(entry, DictAttr):
                    for k, v in entry.items:
                        items[k] = v
    return DictAttr(tuple(sorted(items.items())))


#: on a kernel whose ``num_warps`` is the spec's default, not the producer's (runtime/layouts/
#: kernel.default_num_warps may then size the CTA itself, as tileiras does)
NUM_WARPS_DEFAULT = "nv_tileaa.num_warps_default"


def _num_warps_given(op: Operation, ctx: ConversionContext) -> bool:
    """Whether the producer set ``num_warps``: ``tt.num_warps`` on the entry or around it, or
    an optimization hint for this target (or ``default``)."""
    if op.attributes.get("tt.num_warps") or _module_attr(op, "tt.num_warps"):
        return True
    hints = op.attributes.get("optimization_hints")
    if isinstance(hints, OptimizationHintsAttr):
        for arch, entry in hints.entries:
            if arch == "default" or _arch_cc(arch) == ctx.compute_capability:
                if isinstance(entry, DictAttr) and any(
                    k in ("num_warps", "num_worker_warps_per_cta") for k, _ in entry.items
                ):
                    return True
    return False


def _arch_cc(arch: str) -> Optional[int]:
    digits = arch[3:] if arch.startswith("sm_") else ""
    digits = digits.rstrip("abf")
    return int(digits) if digits.isdigit() else None


def entry_to_func(op: Operation, rw: PatternRewriter, ctx: ConversionContext) -> bool:
    """entry -> nv_tileaa.func {kernel} with converted signature and block arguments and the
    folded ``nv_tileaa.kernel_spec``; nvvm.* hints and arg_attrs travel unchanged."""
    ftype = op.attributes.get("function_type")
    if not isinstance(ftype, TypeAttr) or not isinstance(ftype.value, FunctionType):
        return False
    attrs: dict[str, Attribute] = {
        "sym_name": op.attributes["sym_name"],
        "function_type": TypeAttr(convert_type(ftype.value)),
    }
    if op.name == "cuda_tile.entry":
        attrs["kernel"] = UnitAttr()
        attrs["nv_tileaa.kernel_spec"] = kernel_spec(op, ctx)
        if not _num_warps_given(op, ctx):  # the spec's default: the layout stage may choose
            attrs[NUM_WARPS_DEFAULT] = UnitAttr()
    for k, v in op.attributes.items():
        if k.startswith("nvvm.") or k in ("arg_attrs", "res_attrs"):
            attrs[k] = v
    arg_attrs = _ptr_attr_arg_attrs(ftype.value.inputs, attrs.get("arg_attrs"))
    if arg_attrs is not None:
        attrs["arg_attrs"] = arg_attrs
    body = op.regions[0].blocks[0] if op.regions[0].blocks else None
    if body is not None and _exit_kind(body) == "cuda_tile.return":
        _hoist_tail(rw, body, "cuda_tile.return")
    rw.set_insertion_point(op)
    new = rw.create(NV + "func", [], [], attrs, op.loc, regions=1)
    _move_regions(rw, op, new, ctx)
    rw.erase_op(op)
    return True


#: discardable attribute carrying a 13.4+/13.5 ``ptr_attr`` (none / unicast / multicast) past the
#: conversion, whose pointer and memref types have no place for it (docs/conversion.md)
PTR_ATTR = NV + "ptr_attr"


def _ptr_attr_of(t: Type) -> Optional[str]:
    """The ptr_attr keyword of a pointer, a tile of pointers or a tensor view type."""
    if isinstance(t, TileType):
        t = t.element
    if isinstance(t, TILE_VIEW_TYPES):
        t = t.tensor_view
    return getattr(t, "ptr_attr", None)


def _ptr_attr_arg_attrs(inputs, existing: Optional[Attribute]) -> Optional[ArrayAttr]:
    """``arg_attrs`` with ``nv_tileaa.ptr_attr = "KW"`` added to every argument whose cuda_tile
    type carries a ptr_attr (None when no argument does)."""
    kws = [_ptr_attr_of(t) for t in inputs]
    if not any(k is not None for k in kws):
        return None
    old = list(existing.values) if isinstance(existing, ArrayAttr) else []
    out = []
    for i, kw in enumerate(kws):
        entry = old[i] if i < len(old) and isinstance(old[i], DictAttr) else DictAttr(())
        if kw is not None:
            items = [(k, v) for k, v in entry.items if k != PTR_ATTR] + [(PTR_ATTR, StringAttr(kw))]
            entry = DictAttr(tuple(items))
        out.append(entry)
    return ArrayAttr(tuple(out))


def global_to_nv_global(op: Operation, rw: PatternRewriter, ctx: ConversionContext) -> bool:
    """global @g <value> -> nv_tileaa.global @g {type, initial_value[, constant]}."""
    value = op.attributes.get("value")
    if not isinstance(value, DenseElementsAttr):
        return False
    t = convert_type(value.type)
    attrs: dict[str, Attribute] = {"sym_name": op.attributes["sym_name"], "type": TypeAttr(t)}
    attrs["initial_value"] = (
        DenseElementsAttr(t, value.values, value.bits) if isinstance(t, TileType) else value
    )
    if "constant" in op.attributes:
        attrs["constant"] = UnitAttr()
    _replace(rw, op, NV + "global", [], attrs, [])
    return True


# --------------------------------------------------------------------------- tokens


def join_tokens(op: Operation, rw: PatternRewriter, ctx: ConversionContext) -> bool:
    """join_tokens: one token passes through, none -> create_mem_token, more -> join_mem_token."""
    tokens = list(op.operands)
    if len(tokens) == 1:
        rw.replace_op(op, tokens)
    elif not tokens:
        _replace(rw, op, NV + "create_mem_token", [])
    else:
        _replace(rw, op, NV + "join_mem_token", [tokens])
    return True


def print_to_nv_print(op: Operation, rw: PatternRewriter, ctx: ConversionContext) -> bool:
    """print_tko "fmt", args, token -> nv_tileaa.print; the result token joins the input one."""
    rw.set_insertion_point(op)
    rw.create(NV + "print", _group(op, "args"), [], {"format": op.attributes["str"]}, op.loc)
    _token_after(op, rw)
    return True


def gdc_to_pragma(op: Operation, rw: PatternRewriter, ctx: ConversionContext) -> bool:
    """gdc_wait / gdc_launch_dependents -> nv_tileaa.pragma "<op>" ordered by the token chain."""
    rw.set_insertion_point(op)
    rw.create(NV + "pragma", [], [], {"name": StringAttr(op.mnemonic.removesuffix("_tko"))}, op.loc)
    _token_after(op, rw)
    return True


def _token_after(op: Operation, rw: PatternRewriter) -> None:
    tokens = _group(op, "token")
    if tokens:
        rw.replace_op(op, tokens)
    else:
        _replace(rw, op, NV + "create_mem_token", [])


# --------------------------------------------------------------------------- views and memory


def tensor_view_to_memref(op: Operation, rw: PatternRewriter, ctx: ConversionContext) -> bool:
    """make_tensor_view base, shape, strides -> make_memref base, sizes, strides (dynamic ones)."""
    t = convert_type(op.results[0].type)
    if not isinstance(t, NvMemRefType):
        return False
    groups = [_group(op, "base"), [], _group(op, "dynamicShape"), _group(op, "dynamicStrides")]
    kw = _ptr_attr_of(op.results[0].type)
    attrs = {PTR_ATTR: StringAttr(kw)} if kw is not None else None
    _replace(rw, op, NV + "make_memref", groups, attrs, types=[t])
    return True


def view_to_memref(op: Operation, rw: PatternRewriter, ctx: ConversionContext) -> bool:
    """A partition / strided / gather-scatter view is its tensor view's memref; the tile shape
    and the in-bounds facts travel on each access, so it waits until its cuda_tile users (which
    read its type) are converted."""
    if any(user.dialect == "cuda_tile" for r in op.results for user, _ in r.uses):
        return False
    rw.replace_op(op, [op.operands[0]])
    return True


def tensor_shape_to_dim_size(op: Operation, rw: PatternRewriter, ctx: ConversionContext) -> bool:
    """get_tensor_shape v -> get_dim_size v {dim = i} per result."""
    return _dim_sizes(op, rw, None)


def index_space_to_dim_size(op: Operation, rw: PatternRewriter, ctx: ConversionContext) -> bool:
    """get_index_space_shape v -> ceildiv(get_dim_size v {dim}, step) per axis (the step of
    :func:`_steps`)."""
    vt = _view_type(op.operands[0], ctx)
    if vt is None:
        return False
    return _dim_sizes(op, rw, _steps(vt), vt)


def _dim_sizes(op: Operation, rw: PatternRewriter, tiles, vt=None) -> bool:
    view = op.operands[0]
    dim_map = getattr(vt, "dim_map", ()) or tuple(range(len(op.results)))
    rw.set_insertion_point(op)
    values = []
    for i, res in enumerate(op.results):
        t = convert_type(res.type)
        axis = dim_map[i] if i < len(dim_map) else i
        v = rw.create(NV + "get_dim_size", [view], [t], {"dim": IntegerAttr(axis, I32)}, op.loc)
        value = v.results[0]
        if tiles is not None and tiles[i] != 1:
            k = _scalar_constant(rw, t, tiles[i], op.loc)
            value = rw.create("arith.ceildivui", [value, k], [t], {}, op.loc).results[0]
        values.append(value)
    rw.replace_op(op, values)
    return True


def _memory_attrs(op: Operation, tgt_name: str) -> dict:
    row = {
        "attributes": {
            "mem_semantic": {"from": "memory_ordering_semantics"},
            "mem_scope": {"from": "memory_scope", "cases": {"device": "gpu"}},
            "rmw_mode": "mode",
        },
        "drop": ["optimization_hints", "inbounds"],
    }
    attrs = carried_attributes(op, lookup_opdef(tgt_name), row)
    if _kw(op, "memory_ordering_semantics") == "weak":
        attrs.pop("mem_scope", None)
    return attrs


#: a ``false`` allow_tma hint on nv_tileaa ops, whose own ``allow_tma`` is a unit attribute
#: (present: the hint said true); runtime/passes/k_loop_pipelining.py honors it
NO_TMA_ATTR = "nv_tileaa.allow_tma"


def _tma_hint(op: Operation, ctx: ConversionContext, attrs: dict) -> None:
    """Carry the op's ``allow_tma`` optimization hint for this target (the ``default`` entry,
    overridden by the target's): true -> the ``allow_tma`` unit attribute, false ->
    :data:`NO_TMA_ATTR` = false."""
    hints = op.attributes.get("optimization_hints")
    if not isinstance(hints, OptimizationHintsAttr):
        return
    value = None
    for wanted in ("default", "target"):
        for arch, entry in hints.entries:
            hit = (
                arch == "default"
                if wanted == "default"
                else _arch_cc(arch) == ctx.compute_capability
            )
            if hit and isinstance(entry, DictAttr):
                for k, v in entry.items:
                    if k == "allow_tma" and isinstance(v, BoolAttr):
                        value = v.value
    if value is True:
        attrs["allow_tma"] = UnitAttr()
    elif value is False:
        attrs[NO_TMA_ATTR] = BoolAttr(False)


def _in_bounds(op: Operation, rank: int) -> DenseArrayAttr:
    """Per-axis in-bounds facts: the op's ``inbounds`` flags, else unknown (false)."""
    attr = op.attributes.get("inbounds")
    values = getattr(attr, "values", None)
    if values is not None and len(values) == rank:
        return _bool_array(values)
    return _bool_array([bool(attr is not None and not values)] * rank)


def _steps(view_t) -> tuple[int, ...]:
    """Elements between consecutive index values along each tile dim: the tile size
    (partition views), the traversal stride (strided views), 1 (gather / scatter views)."""
    tile = tile_shape_of_view(view_t) or ()
    if isinstance(view_t, GatherScatterViewType):
        return (1,) * len(tile)
    strides = getattr(view_t, "traversal_strides", ())
    return tuple(strides) if strides else tuple(tile)


def _view_type(v: Value, ctx: ConversionContext):
    """The cuda_tile view type behind ``v`` (also once ``v``, a block argument, is converted)."""
    return v.type if isinstance(v.type, TILE_VIEW_TYPES) else ctx.view_types.get(id(v))


def _view_access(op: Operation, view_t, rw: PatternRewriter):
    """(element offsets along the memref axes, the tile shape in memref axis order, the
    permutation from memref order to the view's tile order or None) of a view access: tile
    dim i reads memref axis ``dim_map[i]`` from ``index[i] * step[i]``."""
    tile = tile_shape_of_view(view_t) or ()
    idx = _group(op, "index")
    dim_map = tuple(getattr(view_t, "dim_map", ()) or range(len(idx)))
    steps = _steps(view_t)
    offsets: list[Optional[Value]] = [None] * len(idx)
    shape = [1] * len(idx)
    for i, v in enumerate(idx):
        offsets[dim_map[i]] = _scale(rw, v, steps[i], op.loc)
        shape[dim_map[i]] = tile[i]
    perm = dim_map if dim_map != tuple(range(len(idx))) else None
    return [v for v in offsets if v is not None], tuple(shape), perm


def _permute(rw: PatternRewriter, v: Value, perm, loc) -> Value:
    t = convert_type(v.type)
    shape = tuple(t.shape[p] for p in perm)
    attrs = {"permutation": _i32_array(perm)}
    return rw.create(NV + "permute", [v], [TileType(shape, t.element)], attrs, loc).results[0]


def _inverse(perm) -> tuple[int, ...]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


_PADDING = {
    "zero": 0.0,
    "neg_zero": -0.0,
    "nan": float("nan"),
    "pos_inf": float("inf"),
    "neg_inf": float("-inf"),
}


def _padding(rw: PatternRewriter, view_t, result_t: Type, loc) -> list[Value]:
    """The ``other`` operand for a view with a padding value: a splat of it."""
    kw = getattr(view_t, "padding_value", None)
    if kw not in _PADDING or not isinstance(result_t, TileType):
        return []
    element = result_t.element
    value = _PADDING[kw] if isinstance(element, FloatType) else 0
    scalar = _scalar_constant(rw, element, value, loc)
    return [rw.create(NV + "splat", [scalar], [result_t], {}, loc).results[0]]


def _gather_coords(op: Operation, view_t, rw: PatternRewriter) -> list[Value]:
    """Per-element coordinates of a gather / scatter view access, one full tile per axis: the
    sparse axis takes the index tile itself, the others ``i * size + range(size)``."""
    tile = view_t.tile_shape
    loc = op.loc
    out = []
    for axis, (v, n) in enumerate(zip(_group(op, "index"), tile)):
        vt = convert_type(v.type)
        el = vt.element if isinstance(vt, TileType) else vt
        line_t = TileType((n,), el)
        if axis == view_t.sparse_dim:
            line = v
        else:
            start = v  # dense dims of a gather / scatter view are element offsets
            attrs = {"start": IntegerAttr(0, I32), "end": IntegerAttr(n, I32)}
            lanes = rw.create(NV + "make_range", [], [line_t], attrs, loc).results[0]
            base = rw.create(NV + "splat", [start], [line_t], {}, loc).results[0]
            line = rw.create("arith.addi", [lanes, base], [line_t], {}, loc).results[0]
        shape = tuple(n if a == axis else 1 for a in range(len(tile)))
        line = rw.create(NV + "view", [line], [TileType(shape, el)], {}, loc).results[0]
        if shape != tuple(tile):
            line = rw.create(
                NV + "broadcast", [line], [TileType(tuple(tile), el)], {}, loc
            ).results[0]
        out.append(line)
    return out


def load_view_to_tiled_load(op: Operation, rw: PatternRewriter, ctx: ConversionContext) -> bool:
    """load_view_tko view[idx], token -> tiled_load memref[offsets], token {in_bounds, semantics}
    (a gather view: gather_load at per-element coordinates); a padding value becomes ``other``."""
    view = _group(op, "view")[0]
    view_t = _view_type(view, ctx)
    if view_t is None:
        return False
    gather = isinstance(view_t, GatherScatterViewType)
    name = NV + ("gather_load" if gather else "tiled_load")
    attrs = _memory_attrs(op, name)
    _tma_hint(op, ctx, attrs)
    rw.set_insertion_point(op)
    res_t = convert_type(op.results[0].type)
    perm = None
    if gather:
        idx = _gather_coords(op, view_t, rw)
    else:
        idx, shape, perm = _view_access(op, view_t, rw)
        attrs["in_bounds"] = _in_bounds(op, len(idx))
    load_t = TileType(shape, res_t.element) if perm else res_t
    other = _padding(rw, view_t, load_t, op.loc)
    groups = [[view], idx, [], other, _group(op, "token")]
    types = [load_t] + _result_types(op, groups[-1])[1:]
    new = build(rw, op, name, groups, attrs, types)
    _replace_with_tokens(rw, op, new)
    if perm:  # memref axis order -> the view's tile order
        value = new.results[0]
        rw.set_insertion_point_after(new)
        out = _permute(rw, value, perm, op.loc)
        for user, i in list(value.uses):
            if user is not out.owner:
                user.set_operand(i, out)
                rw.modify_in_place(user)
    return True


def store_view_to_tiled_store(op: Operation, rw: PatternRewriter, ctx: ConversionContext) -> bool:
    """store_view_tko tile, view[idx], token -> tiled_store memref[offsets], tile, token."""
    view = _group(op, "view")[0]
    view_t = _view_type(view, ctx)
    if view_t is None:
        return False
    gather = isinstance(view_t, GatherScatterViewType)
    name = NV + ("scatter_store" if gather else "tiled_store")
    attrs = _memory_attrs(op, name)
    _tma_hint(op, ctx, attrs)
    rw.set_insertion_point(op)
    tile = _group(op, "tile")
    if gather:
        idx = _gather_coords(op, view_t, rw)
    else:
        idx, _, perm = _view_access(op, view_t, rw)
        attrs["in_bounds"] = _in_bounds(op, len(idx))
        if perm:  # the view's tile order -> memref axis order
            tile = [_permute(rw, tile[0], _inverse(perm), op.loc)]
    groups = [[view], tile, idx, [], _group(op, "token")]
    new = build(rw, op, name, groups, attrs, _result_types(op, groups[-1]))
    _replace_with_tokens(rw, op, new)
    return True


def atomic_red_view_to_tiled_rmw(
    op: Operation, rw: PatternRewriter, ctx: ConversionContext
) -> bool:
    """atomic_red_view_tko -> tiled_atomic_rmw (the old values are unused)."""
    view = _group(op, "view")[0]
    view_t = _view_type(view, ctx)
    if view_t is None:
        return False
    value = _group(op, "value")[0]
    name = NV + "tiled_atomic_rmw"
    attrs = _memory_attrs(op, name)
    rw.set_insertion_point(op)
    idx, _, perm = _view_access(op, view_t, rw)
    attrs["in_bounds"] = _in_bounds(op, len(idx))
    if perm:
        value = _permute(rw, value, _inverse(perm), op.loc)
    tokens = _group(op, "token")
    types = [convert_type(value.type)] + [MemTokenType()] * len(tokens)
    new = build(rw, op, name, [[view], [value], idx, [], tokens], attrs, types)
    _replace_with_tokens(rw, op, new, skip=1)
    return True


_MULTIMEM_RMW = {
    "add": "add",
    "min": "min",
    "max": "max",
    "and": "and",
    "or": "or",
    "xor": "xor",
    "umin": "umin",
    "umax": "umax",
}


def multimem_to_tiled(op: Operation, rw: PatternRewriter, ctx: ConversionContext) -> bool:
    """multimem views -> the tiled access they perform, tagged ``nv_tileaa.multimem``
    (load_reduce -> tiled_load, reduce -> tiled_atomic_rmw, store -> tiled_store)."""
    view = _group(op, "view")[0]
    view_t = _view_type(view, ctx)
    if view_t is None:
        return False
    kind = op.mnemonic.removeprefix("multimem_").removesuffix("_view_tko")
    rw.set_insertion_point(op)
    idx, _, perm = _view_access(op, view_t, rw)
    if perm:
        return False  # multimem views with a dim_map: not lowered yet
    tokens = _group(op, "token")
    tag = {"nv_tileaa.multimem": StringAttr(_kw(op, "reduction") or kind)}
    if kind == "load_reduce":
        name = NV + "tiled_load"
        groups, types = [[view], idx, [], [], tokens], _result_types(op, tokens)
    elif kind == "reduce":
        name = NV + "tiled_atomic_rmw"
        tile = _group(op, "tile")[0]
        tag["rmw_mode"] = enum_attr(
            "NvTileAA_RMWMode", _MULTIMEM_RMW.get(_kw(op, "reduction") or "add", "add")
        )
        groups = [[view], [tile], idx, [], tokens]
        types = [convert_type(tile.type)] + [MemTokenType()] * len(tokens)
    else:
        name = NV + "tiled_store"
        groups, types = [[view], _group(op, "tile"), idx, [], tokens], _result_types(op, tokens)
    attrs = _memory_attrs(op, name)
    attrs.update(tag)
    attrs["in_bounds"] = _in_bounds(op, len(idx))
    new = build(rw, op, name, groups, attrs, types)
    _replace_with_tokens(rw, op, new, skip=1 if kind == "reduce" else 0)
    return True


def _result_types(op: Operation, tokens: list) -> list[Type]:
    data = [
        convert_type(r.type)
        for r in op.results
        if not isinstance(convert_type(r.type), MemTokenType)
    ]
    return data + [MemTokenType()] * len(tokens)


def _replace_with_tokens(rw: PatternRewriter, op: Operation, new: Operation, skip: int = 0) -> None:
    """Replace ``op``'s results by ``new``'s; a result token with no token operand to mirror
    becomes a fresh create_mem_token after the access."""
    values = list(new.results[skip:])
    if len(values) < len(op.results):
        rw.set_insertion_point_after(new)
        tok = rw.create(NV + "create_mem_token", [], [MemTokenType()], {}, op.loc).results[0]
        values.append(tok)
    rw.replace_op(op, values[: len(op.results)])


# --------------------------------------------------------------------------- part C


def mmaf_to_dot(op: Operation, rw: PatternRewriter, ctx: ConversionContext) -> bool:
    """mmaf / mmaf_scaled -> dot (tf32 inputs: input_precision = "tf32")."""
    groups = [[v] for v in op.operands[:3]] + [[v] for v in op.operands[3:5]]
    groups += [[]] * (5 - len(groups))
    attrs: dict[str, Attribute] = {}
    a = op.operands[0].type
    if isinstance(a, TileType) and getattr(a.element, "name", "") == "tf32":
        attrs["input_precision"] = StringAttr("tf32")
    _replace(rw, op, NV + "dot", groups, attrs)
    return True


def mmai_to_dot(op: Operation, rw: PatternRewriter, ctx: ConversionContext) -> bool:
    """mmai -> dot {signedness_a, signedness_b}."""
    attrs = {}
    for src, dst in (("signedness_lhs", "signedness_a"), ("signedness_rhs", "signedness_b")):
        attrs[dst] = enum_attr("NvTileAA_Signedness", _kw(op, src) or "signed")
    groups = [[v] for v in op.operands[:3]] + [[], []]
    _replace(rw, op, NV + "dot", groups, attrs)
    return True


def reduce_with_region(op: Operation, rw: PatternRewriter, ctx: ConversionContext) -> bool:
    """reduce dim -> nv_tileaa.reduce {axis}, the combiner region moved and its block
    arguments converted (0-d tiles become scalars)."""
    return _region_op(op, rw, NV + "reduce", {}, ctx)


def scan_with_region(op: Operation, rw: PatternRewriter, ctx: ConversionContext) -> bool:
    """scan dim reverse -> nv_tileaa.scan {axis, inclusive, reverse}."""
    rev = op.attributes.get("reverse")
    extra = {"inclusive": BoolAttr(True)}
    if isinstance(rev, UnitAttr) or getattr(rev, "value", False):
        extra["reverse"] = UnitAttr()
    return _region_op(op, rw, NV + "scan", extra, ctx)


def _region_op(
    op: Operation, rw: PatternRewriter, name: str, extra: dict, ctx: ConversionContext
) -> bool:
    dim = op.attributes.get("dim")
    attrs = {"axis": IntegerAttr(getattr(dim, "value", 0), I32), **extra}
    new = build(rw, op, name, [op.operands], attrs, regions=1)
    _move_regions(rw, op, new, ctx)
    for block in new.regions[0].blocks:  # (a0, b0, a1, b1) -> (a0, a1, b0, b1)
        args = block.args
        block.args = args[0::2] + args[1::2]
        for i, a in enumerate(block.args):
            a.index = i
    rw.replace_op(op, new.results)
    return True
