"""``custom<X>(...)`` directives of cuda_tile's declarative formats: (parse, print) pairs.

Each parse function gets the format engine's parse context and the directive's argument refs;
each print function gets the printer, the op and the same refs. Messages are cuda_tile's
(types_attrs.md section 3); they go through ``OpParser.error`` so they carry the
``custom op 'cuda_tile.X' `` prefix as in MLIR.
"""

from __future__ import annotations

from tilegen.runtime.attributes import BoundedAttr, DivByAttr, EnumAttr, SameElementsAttr, UnitAttr
from tilegen.runtime.ir import Block, Operation, Region
from tilegen.runtime.opdef import lookup_enum

_IEEE = ("nearest_even", "zero", "negative_inf", "positive_inf")


def _attr_name(args) -> str:
    return next(a[1] for a in args if a[0] == "attr")


def _region_name(args) -> str:
    return next(a[1] for a in args if a[0] == "region")


def _type_ref(args):
    return next(a[1] for a in args if a[0] == "type")


def _enum(name: str):
    return lookup_enum(name)


def _quoted(kws) -> str:
    return ", ".join(f"'{k}'" for k in kws)


# ---------------------------------------------------------------------------- types


def _parse_cuda_tile_type(ctx, args) -> None:
    from tilegen.runtime.asm.format import _parse_types_for

    ref = args[0][1] if len(args) == 1 and args[0][0] == "type" else _type_ref(args)
    ctx.types[ref] = _parse_types_for(ctx, ref, cuda_tile=True)


#: directive args -> their type ref (the same few argument tuples recur for every op)
_TYPE_REFS: dict = {}


def _print_cuda_tile_type(pr, op, args) -> None:
    from tilegen.runtime.asm.format import _ref_types

    ref = _TYPE_REFS.get(args)
    if ref is None:
        ref = _TYPE_REFS[args] = _type_ref(args)
    pr.print_types(_ref_types(op, ref))


# ---------------------------------------------------------------------------- rounding modes


def _rounding(allowed, default: str, with_got: bool, listed=None):
    """A ``[rounding<KW>]`` directive accepting ``allowed`` (None: any RoundingMode keyword)."""
    listed = listed or allowed

    def parse(ctx, args) -> None:
        p = ctx.p
        enum = _enum("RoundingMode")
        name = _attr_name(args)
        if p.parse_optional_keyword("rounding") is None:
            ctx.attrs[name] = EnumAttr(enum.name, enum.value(default))
            return
        p.expect_punct("<")
        at = p.loc()
        kw = p.parse_keyword()
        ok = kw in allowed if allowed is not None else enum.value(kw) is not None
        if not ok:
            msg = f"expected rounding mode to be one of: {_quoted(listed)}"
            if with_got:
                msg += f", got: '{kw}'"
            p.error(msg, at)
        p.expect_punct(">")
        ctx.attrs[name] = EnumAttr(enum.name, enum.value(kw))

    def print_(pr, op, args) -> None:
        a = op.attributes.get(_attr_name(args))
        if not isinstance(a, EnumAttr):
            return
        kw = _enum(a.enum).keyword(a.value)
        if kw != default:
            pr.write(f"rounding<{kw}>")

    return parse, print_


# ---------------------------------------------------------------------------- keyword enums


def _keyword_enum(enum_name: str, what: str, order):
    def parse(ctx, args) -> None:
        p = ctx.p
        enum = _enum(enum_name)
        at = p.loc()
        message = f"expected {what} to be one of: {{{_quoted(order)}}}"
        kw = p.parse_optional_keyword()
        if kw is None:
            # MLIR reports parseKeyword's own failure first, then the directive's message.
            p.error_after(["expected valid keyword"], message, at)
        if enum.value(kw) is None:
            p.error(message, at)
        ctx.attrs[_attr_name(args)] = EnumAttr(enum.name, enum.value(kw))

    def print_(pr, op, args) -> None:
        a = op.attributes.get(_attr_name(args))
        if isinstance(a, EnumAttr):
            pr.write(_enum(a.enum).keyword(a.value))

    return parse, print_


# ---------------------------------------------------------------------------- regions


def _ensure_terminator(region: Region, name: str) -> None:
    if not region.blocks:
        region.append(Block())
    block = region.blocks[-1]
    term = block.ops[-1] if block.ops else None
    if term is None or term.opdef is None or not term.opdef.has_trait("Terminator"):
        block.append(Operation(name))


def _parse_if_region(ctx, args) -> None:
    region = Region()
    ctx.p.parse_region(region)
    _ensure_terminator(region, "cuda_tile.yield")
    ctx.regions[_region_name(args)] = region


def _op_region(op, name) -> Region:
    for i, r in enumerate(op.opdef.regions):
        if r.name == name:
            return op.regions[i]
    raise KeyError(name)


def _print_if_region(pr, op, args) -> None:
    region = _op_region(op, _region_name(args))
    term = region.blocks[-1].ops[-1] if region.blocks and region.blocks[-1].ops else None
    keep = term is None or term.name != "cuda_tile.yield" or bool(term.operands)
    pr.print_region(region, print_entry_block_args=False, print_block_terminators=keep)


def _parse_argument_region(ctx, args) -> None:
    p = ctx.p
    p.expect_punct("(")
    arguments = []
    if not p.parse_optional_punct(")"):
        while True:
            u, t, _attrs, loc = p.parse_argument()
            arguments.append((u, t, loc))
            if not p.parse_optional_punct(","):
                break
        p.expect_punct(")")
    region = Region()
    p.parse_region(region, arguments)
    if region.blocks:  # `() {}` stays block-less for the verifier to reject
        _ensure_terminator(region, "cuda_tile.yield")
    ctx.regions[_region_name(args)] = region


def _print_argument_region(pr, op, args) -> None:
    region = _op_region(op, _region_name(args))
    pr.newline()
    block = region.blocks[0] if region.blocks else None
    parts = []
    for a in block.args if block is not None else ():
        text = f"{pr.value_name(a)}: {pr.format_type(a.type)}"
        if pr.debuginfo and a.loc is not None:
            text += " " + pr.format_location(a.loc)
        parts.append(text)
    pr.write("(" + ", ".join(parts) + ") ")
    pr.print_region(region, print_entry_block_args=False)


# ---------------------------------------------------------------------------- attributes


def _parse_assume_predicate(ctx, args) -> None:
    from tilegen.runtime.asm import lexer as lx
    from tilegen.runtime.asm.attr_syntax import parse_cuda_tile_attr

    p = ctx.p
    name = _attr_name(args)
    at = p.loc()
    if not p.at_keyword():
        a = p.parse_attribute()
        if not isinstance(a, (DivByAttr, SameElementsAttr, BoundedAttr)):
            p.error("expected assume predicate attribute", at)
        ctx.attrs[name] = a
        return
    kw = p.parse_keyword()
    if kw not in ("div_by", "same_elements", "bounded"):
        p.error(
            f"unknown assume predicate attribute: {kw} (expected 'div_by', 'same_elements', "
            f"or 'bounded')",
            at,
        )
    ctx.attrs[name] = parse_cuda_tile_attr(p, kw, at)


def _print_assume_predicate(pr, op, args) -> None:
    from tilegen.runtime.asm.attr_syntax import format_cuda_tile_attr_body

    a = op.attributes.get(_attr_name(args))
    body = format_cuda_tile_attr_body(a, pr.aliases) if a is not None else None
    pr.write(body if body is not None else pr.format_attribute(a))


def _parse_dense(ctx, args) -> None:
    from tilegen.runtime.asm import dense

    a = dense.parse_dense_literal(ctx.p)
    ctx.attrs[_attr_name(args)] = a
    for arg in args:
        if arg[0] == "type":
            ctx.types[arg[1]] = [a.type]


def _print_dense(pr, op, args) -> None:
    from tilegen.runtime.asm import dense

    a = op.attributes.get(_attr_name(args))
    if a is None:
        return
    pr.write(dense.format_dense_literal(a) + " : " + pr.format_type(a.type))


def _parse_symbol_visibility(ctx, args) -> None:
    p = ctx.p
    enum = _enum("SymbolVisibility")
    name = _attr_name(args)
    for kw in enum.keywords:
        if p.parse_optional_keyword(kw) is not None:
            ctx.attrs[name] = EnumAttr(enum.name, enum.value(kw))
            return


def _print_symbol_visibility(pr, op, args) -> None:
    a = op.attributes.get(_attr_name(args))
    if isinstance(a, EnumAttr):
        kw = _enum(a.enum).keyword(a.value)
        if kw != "public":
            pr.write(kw + " ")  # NVIDIA prints "private " (tileirdisasm: `global private  @g`)


CUSTOM_DIRECTIVES = {
    "CudaTileType": (_parse_cuda_tile_type, _print_cuda_tile_type),
    "IEEERoundingMode": _rounding(_IEEE, "nearest_even", True),
    "IntegerRoundingMode": _rounding(("nearest_int_to_zero",), "nearest_int_to_zero", True),
    "DivFOpRoundingMode": _rounding(None, "nearest_even", False, _IEEE + ("approx", "full")),
    "SqrtOpRoundingMode": _rounding(None, "nearest_even", False, _IEEE + ("approx",)),
    "ExpOpRoundingMode": _rounding(None, "full", False, ("approx", "full")),
    "TanHOpRoundingMode": _rounding(None, "full", False, ("approx", "full")),
    "Signedness": _keyword_enum("Signedness", "signedness", ("signed", "unsigned")),
    "ComparisonPredicate": _keyword_enum(
        "ComparisonPredicate",
        "'comparison_predicate'",
        (
            "equal",
            "not_equal",
            "less_than",
            "less_than_or_equal",
            "greater_than",
            "greater_than_or_equal",
        ),
    ),
    "ComparisonOrdering": _keyword_enum(
        "ComparisonOrdering", "'comparison_ordering'", ("ordered", "unordered")
    ),
    "IfOpRegion": (_parse_if_region, _print_if_region),
    "ArgumentRegion": (_parse_argument_region, _print_argument_region),
    "AssumePredicate": (_parse_assume_predicate, _print_assume_predicate),
    "DenseTypedElementsAttr": (_parse_dense, _print_dense),
    "DenseTypedElementsAttrNoResult": (_parse_dense, _print_dense),
    "SymbolVisibility": (_parse_symbol_visibility, _print_symbol_visibility),
}

__all__ = ["CUSTOM_DIRECTIVES", "UnitAttr"]
