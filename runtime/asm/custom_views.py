"""Custom syntax of view ops: ``make_tensor_view`` and ``make_*_view``, ``get_*_shape``, and the
view memory ops (``load/store_view_tko``, ``atomic_red_view_tko``, ``multimem_*``) with their
memory-ordering keywords, ``token = %t``, ``optimization_hints = <..>``, ``inbounds = [..]`` and
the one-type-for-all-indices rule."""

from __future__ import annotations

from typing import Optional

from tilegen.runtime.attributes import DenseArrayAttr, EnumAttr, OptimizationHintsAttr
from tilegen.runtime.ir import Operation
from tilegen.runtime.opdef import lookup_enum
from tilegen.runtime.types import (
    DYNAMIC,
    I1,
    TILE_VIEW_TYPES,
    PointerType,
    TensorViewType,
    TileType,
    TokenType,
    Type,
)
from tilegen.runtime.asm.custom_common import (
    SEGMENTS,
    enum_keyword,
    i32_enum,
    keywords,
    parse_tile_type,
    print_attr_dict_kw,
    print_attr_dict_plain,
    segments,
    type_text,
)
from tilegen.runtime.asm.custom_functions import format_hints_body, parse_hints_body

# ============================================================================ shape queries


def _view_index_rank(t: Type) -> Optional[int]:
    if isinstance(t, TILE_VIEW_TYPES):
        return len(t.tile_shape)
    return None


def parse_shape_query(p, state, *, want_tensor_view: bool) -> None:
    src = p.parse_operand()
    p.parse_optional_attr_dict(state.attributes)
    p.expect_punct(":")
    tloc = p.loc()
    src_type = parse_tile_type(p)
    if want_tensor_view:
        if not isinstance(src_type, TensorViewType):
            p.error(f"'{state.name}' expected tensor_view, got '{type_text(src_type)}'", tloc)
        n = src_type.rank
    else:
        n = _view_index_rank(src_type)
        if n is None:
            p.error(f"'{state.name}' expected tile view, got '{type_text(src_type)}'", tloc)
    p.expect_punct("->")
    elem = parse_tile_type(p)
    p.parse_optional_attr_dict(state.attributes)
    state.operands = p.resolve_operands([src], [src_type])
    state.result_types = [elem] * n


def print_shape_query(pr, op: Operation) -> None:
    pr.write(" ")
    pr.print_operand(op.operands[0])
    print_attr_dict_plain(pr, op, ())
    pr.write(" : ")
    pr.print_type(op.operands[0].type)
    if op.results:
        pr.write(" -> ")
        pr.print_type(op.results[0].type)


# ============================================================================ make_*_view


def parse_make_view(kind: type, kind_name: str):
    def parse(p, state) -> None:
        tv = p.parse_operand()
        p.parse_optional_attr_dict(state.attributes)
        p.expect_punct(":")
        tloc = p.loc()
        t = parse_tile_type(p)
        if not isinstance(t, kind):
            p.error(f"'{state.name}' expected '{kind_name}' type, but got '{type_text(t)}'", tloc)
        state.operands = p.resolve_operands([tv], [t.tensor_view])
        state.result_types = [t]

    return parse


def print_make_view(pr, op: Operation) -> None:
    pr.write(" ")
    pr.print_operand(op.operands[0])
    print_attr_dict_plain(pr, op, ())
    pr.write(" : ")
    pr.print_type(op.results[0].type)


def _parse_shape_entries(p) -> list:
    """``[ (INT | %v),* ]`` -> list of ints / UnresolvedOperands."""
    p.expect_punct("[")
    out: list = []
    if not p.parse_optional_punct("]"):
        while True:
            u = p.parse_optional_operand()
            if u is not None:
                out.append(u)
            else:
                v = p.parse_optional_integer()
                if v is None:
                    p.error("expected either integer or SSA value")
                out.append(v)
            if not p.parse_optional_punct(","):
                break
        p.expect_punct("]")
    return out


def _check_entries(p, what: str, entries: list, expected: tuple, loc) -> None:
    if len(entries) != len(expected):
        p.error(
            f"expected {what} declaration to contain {len(expected)} elements due to tensor_view "
            f"type, but {len(entries)} were provided",
            loc,
        )
    for i, (got, want) in enumerate(zip(entries, expected)):
        got_dyn = not isinstance(got, int)
        want_dyn = want == DYNAMIC
        if got_dyn == want_dyn and (got_dyn or got == want):
            continue
        g = "dynamic" if got_dyn else str(got)
        w = "dynamic" if want_dyn else str(want)
        p.error(
            f"input {what} dimension {i} does not match tensor_view type (expected {w}, got {g})",
            loc,
        )


def parse_make_tensor_view(p, state) -> None:
    base = p.parse_operand()
    p.expect_punct(",")
    p.parse_keyword("shape")
    p.expect_punct("=")
    shape = _parse_shape_entries(p)
    p.expect_punct(",")
    p.parse_keyword("strides")
    p.expect_punct("=")
    strides = _parse_shape_entries(p)
    p.parse_optional_attr_dict(state.attributes)
    loc = p.loc()
    p.expect_punct(":")
    first_loc = p.loc()
    leading = [parse_tile_type(p)]
    while p.parse_optional_punct(","):
        leading.append(parse_tile_type(p))
    t, base_type, dyn_type = leading.pop(), None, None
    if p.parse_optional_punct("->"):
        first_loc = p.loc()
        leading.append(t)
        t = parse_tile_type(p)
    elif len(leading) > 0:
        p.error("expected '->'")
    if not isinstance(t, TensorViewType):
        p.error("invalid kind of type specified", first_loc)
    # 13.4: with a ptr_attr the base type is printed first (``: BASE_T [, DYN_T] -> TV_T``)
    if leading and (len(leading) == 2 or t.ptr_attr is not None):
        base_type = leading.pop(0)
    if len(leading) > 1:
        p.error("expected at most one dynamic shape/stride type before '->'", first_loc)
    dyn_type = leading[0] if leading else None
    _check_entries(p, "shape", shape, t.shape, loc)
    _check_entries(p, "stride", strides, t.strides, loc)
    dyn_shape = [u for u in shape if not isinstance(u, int)]
    dyn_strides = [u for u in strides if not isinstance(u, int)]
    if (dyn_shape or dyn_strides) and dyn_type is None:
        p.error("expected type of the dynamic shape/stride operands before '->'", first_loc)
    if base_type is None:
        base_type = TileType((), PointerType(t.element, t.ptr_attr))
    operands = p.resolve_operands([base], [base_type])
    operands += p.resolve_operands(dyn_shape + dyn_strides, dyn_type) if dyn_type else []
    state.operands = operands
    state.result_types = [t]
    state.attributes[SEGMENTS] = segments(1, len(dyn_shape), len(dyn_strides))


def print_make_tensor_view(pr, op: Operation) -> None:
    t = op.results[0].type
    dyn = iter(op.operands[1:])

    def entries(values) -> str:
        return ", ".join(pr.value_name(next(dyn)) if v == DYNAMIC else str(v) for v in values)

    pr.write(" ")
    pr.print_operand(op.operands[0])
    shape, strides = list(t.shape), list(t.strides)  # AttributeError: not a tensor_view
    if (shape + strides).count(DYNAMIC) != len(op.operands) - 1:
        raise ValueError("dynamic operands do not match the tensor_view's '?' entries")
    pr.write(f", shape = [{entries(shape)}], strides = [{entries(strides)}]")
    print_attr_dict_plain(pr, op, ())
    pr.write(" : ")
    if t.ptr_attr is not None:  # 13.4: a ptr_attr makes the base type explicit
        pr.print_type(op.operands[0].type)
        pr.write(", " if len(op.operands) > 1 else " -> ")
    if len(op.operands) > 1:
        pr.print_type(op.operands[1].type)
        pr.write(" -> ")
    pr.print_type(t)


# ============================================================================ view memory ops


_WEAK = "weak"


def _parse_ordering(p, state, *, atomic_texts: bool = False) -> str:
    """``SEM [SCOPE]`` with cuda_tile's custom-parser diagnostics; returns the SEM keyword."""
    loc = p.loc()
    sems = keywords("MemoryOrderingSemantics")
    scopes = keywords("MemoryScope")
    kw = p.parse_optional_keyword() or ""
    if kw not in sems:
        if atomic_texts:
            p.error(
                f"invalid memory_ordering_semantics: '{kw}'; expected one of: {', '.join(sems)}",
                loc,
            )
        p.error(
            f'invalid memory_ordering_semantics attribute specification. Got "{kw}" but expect '
            f"one of: {', '.join(sems)}",
            loc,
        )
    state.attributes["memory_ordering_semantics"] = i32_enum("MemoryOrderingSemantics", kw)
    if p.at_keyword():
        sloc = p.loc()
        scope = p.parse_keyword()
        if kw == _WEAK and not atomic_texts:
            p.error(
                f'operation specifies weak memory ordering semantics, but then provides "{scope}" '
                "scope, expected no memory scope.",
                sloc,
            )
        if scope not in scopes:
            if atomic_texts:
                p.error(
                    f"invalid memory_scope: '{scope}'; expected one of: {', '.join(scopes)}", sloc
                )
            p.error(
                f'invalid memory_scope attribute specification. Got "{scope}" but expect one of: '
                f"{', '.join(scopes)}",
                sloc,
            )
        state.attributes["memory_scope"] = i32_enum("MemoryScope", scope)
    return kw


def _print_ordering(pr, op: Operation) -> None:
    pr.write(
        " "
        + (
            enum_keyword("MemoryOrderingSemantics", op.attributes.get("memory_ordering_semantics"))
            or "weak"
        )
    )
    scope = enum_keyword("MemoryScope", op.attributes.get("memory_scope"))
    if scope is not None:
        pr.write(" " + scope)


def _parse_tail_clauses(p, state, *, hints: bool) -> Optional[object]:
    """``[token = %t] [optimization_hints = <..>] [inbounds = [..]] [attributes {..}]``."""
    token = None
    if p.parse_optional_keyword("token") is not None:
        p.expect_punct("=")
        token = p.parse_operand()
    if hints and p.parse_optional_keyword("optimization_hints") is not None:
        p.expect_punct("=")
        h = parse_hints_body(p)
        if h is not None:
            state.attributes["optimization_hints"] = h
    if p.parse_optional_keyword("inbounds") is not None:
        p.expect_punct("=")
        p.expect_punct("[")
        flags = []
        if not p.parse_optional_punct("]"):
            while True:
                kw = p.parse_optional_keyword()
                if kw not in ("true", "false"):
                    p.error("expected 'true' or 'false'")
                flags.append(kw == "true")
                if not p.parse_optional_punct(","):
                    break
            p.expect_punct("]")
        state.attributes["inbounds"] = DenseArrayAttr(I1, tuple(flags))
    p.parse_optional_attr_dict_with_keyword(state.attributes)
    return token


def _print_tail_clauses(pr, op: Operation, token, elided=()) -> None:
    if token is not None:
        pr.write(" token = ")
        pr.print_operand(token)
    hints = op.attributes.get("optimization_hints")
    if isinstance(hints, OptimizationHintsAttr) and hints.entries:
        pr.write(" optimization_hints = " + format_hints_body(hints, pr.aliases))
    inbounds = op.attributes.get("inbounds")
    if isinstance(inbounds, DenseArrayAttr) and any(inbounds.values):
        pr.write(
            " inbounds = [" + ", ".join("true" if v else "false" for v in inbounds.values) + "]"
        )
    print_attr_dict_kw(
        pr,
        op,
        ("memory_ordering_semantics", "memory_scope", "optimization_hints", "inbounds")
        + tuple(elided),
    )


def _parse_index_types(p, n: int, types: list[Type]) -> list[Type]:
    """The index-type list after the view type: one type for all indices, or one per index."""
    if len(types) == 1 and n != 1:
        return types * n
    if len(types) != n and not (n == 0 and len(types) <= 1):
        p.error(f"{n} operands present, but expected {len(types)}")
    return types[:n]


def _print_index_types(pr, indices) -> None:
    types = [v.type for v in indices]
    if not types:
        return
    if all(t == types[0] for t in types):
        types = types[:1]
    pr.write(", ")
    pr.print_types(types)


def parse_load_view(p, state) -> None:
    _parse_ordering(p, state)
    view = p.parse_operand()
    idx = p.parse_operand_list("square")
    token = _parse_tail_clauses(p, state, hints=True)
    p.expect_punct(":")
    view_type = parse_tile_type(p)
    idx_types = []
    while p.parse_optional_punct(","):
        idx_types.append(parse_tile_type(p))
    idx_types = _parse_index_types(p, len(idx), idx_types)
    p.expect_punct("->")
    tile_type = parse_tile_type(p)
    p.expect_punct(",")
    tok_type = parse_tile_type(p)
    state.operands = p.resolve_operands([view], [view_type]) + p.resolve_operands(idx, idx_types)
    if token is not None:
        state.operands += p.resolve_operands([token], [TokenType()])
    state.result_types = [tile_type, tok_type]
    state.attributes[SEGMENTS] = segments(1, len(idx), 1 if token is not None else 0)


def groups(op: Operation) -> dict:
    return {d.name: op.opdef.operand_group(op, d.name) for d in op.opdef.operands}


def single(groups: dict, name: str):
    g = groups.get(name) or []
    return g[0] if g else None


def print_load_view(pr, op: Operation) -> None:
    g = groups(op)
    _print_ordering(pr, op)
    pr.write(" ")
    pr.print_operand(g["view"][0])
    pr.write("[")
    pr.print_operands(g["index"])
    pr.write("]")
    _print_tail_clauses(pr, op, single(g, "token"))
    pr.write(" : ")
    pr.print_type(g["view"][0].type)
    _print_index_types(pr, g["index"])
    pr.write(" -> ")
    pr.print_types([r.type for r in op.results])


def parse_store_view(p, state) -> None:
    _parse_ordering(p, state)
    tile = p.parse_operand()
    p.expect_punct(",")
    view = p.parse_operand()
    idx = p.parse_operand_list("square")
    token = _parse_tail_clauses(p, state, hints=True)
    p.expect_punct(":")
    tile_type = parse_tile_type(p)
    p.expect_punct(",")
    view_type = parse_tile_type(p)
    idx_types = []
    while p.parse_optional_punct(","):
        idx_types.append(parse_tile_type(p))
    idx_types = _parse_index_types(p, len(idx), idx_types)
    p.expect_punct("->")
    tok_type = parse_tile_type(p)
    state.operands = p.resolve_operands([tile, view], [tile_type, view_type])
    state.operands += p.resolve_operands(idx, idx_types)
    if token is not None:
        state.operands += p.resolve_operands([token], [TokenType()])
    state.result_types = [tok_type]
    state.attributes[SEGMENTS] = segments(1, 1, len(idx), 1 if token is not None else 0)


def print_store_view(pr, op: Operation) -> None:
    g = groups(op)
    _print_ordering(pr, op)
    pr.write(" ")
    pr.print_operand(g["tile"][0])
    pr.write(", ")
    pr.print_operand(g["view"][0])
    pr.write("[")
    pr.print_operands(g["index"])
    pr.write("]")
    _print_tail_clauses(pr, op, single(g, "token"))
    pr.write(" : ")
    pr.print_type(g["tile"][0].type)
    pr.write(", ")
    pr.print_type(g["view"][0].type)
    _print_index_types(pr, g["index"])
    pr.write(" -> ")
    pr.print_type(op.results[0].type)


#: The RMW modes atomic_red_view_tko accepts (the spec's spec_only_variants: all but xchg).
def _red_modes() -> list[str]:
    return [k for k in keywords("AtomicRMWMode") if k != "xchg"]


def parse_atomic_red_view(p, state) -> None:
    _parse_ordering(p, state, atomic_texts=True)
    view = p.parse_operand()
    idx = p.parse_operand_list("square")
    p.expect_punct(",")
    mloc = p.loc()
    mode = p.parse_optional_keyword() or p.tok.text
    if mode not in keywords("AtomicRMWMode"):  # xchg parses; the verifier rejects it
        p.error(
            f"unknown atomic RMW mode: '{mode}'; expected one of: {', '.join(_red_modes())}", mloc
        )
    state.attributes["mode"] = i32_enum("AtomicRMWMode", mode)
    p.expect_punct(",")
    value = p.parse_operand()
    token = _parse_tail_clauses(p, state, hints=False)
    p.expect_punct(":")
    value_type = parse_tile_type(p)
    p.expect_punct(",")
    view_type = parse_tile_type(p)
    idx_types = []
    while p.parse_optional_punct(","):
        idx_types.append(parse_tile_type(p))
    idx_types = _parse_index_types(p, len(idx), idx_types)
    p.expect_punct("->")
    tok_type = parse_tile_type(p)
    state.operands = p.resolve_operands([view], [view_type]) + p.resolve_operands(idx, idx_types)
    state.operands += p.resolve_operands([value], [value_type])
    if token is not None:
        state.operands += p.resolve_operands([token], [TokenType()])
    state.result_types = [tok_type]
    state.attributes[SEGMENTS] = segments(1, len(idx), 1, 1 if token is not None else 0)


def print_atomic_red_view(pr, op: Operation) -> None:
    g = groups(op)
    _print_ordering(pr, op)
    pr.write(" ")
    pr.print_operand(g["view"][0])
    pr.write("[")
    pr.print_operands(g["index"])
    pr.write("], " + (enum_keyword("AtomicRMWMode", op.attributes.get("mode")) or "add") + ", ")
    pr.print_operand(g["value"][0])
    _print_tail_clauses(pr, op, single(g, "token"), elided=("mode",))
    pr.write(" : ")
    pr.print_type(g["value"][0].type)
    pr.write(", ")
    pr.print_type(g["view"][0].type)
    _print_index_types(pr, g["index"])
    pr.write(" -> ")
    pr.print_type(op.results[0].type)


# ----------------------------------------------------------------------------- multimem (13.5)

_REDUCTION = "reduction"
_REDUCTION_ENUM = "MultimemReductionKind"


def _default_reduction() -> Optional[EnumAttr]:
    e = lookup_enum(_REDUCTION_ENUM)
    v = e.value("add") if e is not None else None
    return None if v is None else EnumAttr(_REDUCTION_ENUM, v)


def _split_trailing_token(types: list[Type], has_token: bool) -> list[Type]:
    if has_token and types and isinstance(types[-1], TokenType):
        return types[:-1]
    return types


def parse_multimem(*, has_tile: bool, has_reduction: bool, results: int):
    """``SEM [SCOPE] %view[, %tile][%idx] [token = %t] [inbounds = [..]] [attributes {..}]
    : VIEW_T[, TILE_T], IDX_T [, token] -> (TILE_T, token | token)``."""

    def parse(p, state) -> None:
        _parse_ordering(p, state)
        view = p.parse_operand()
        tile = None
        if has_tile:
            p.expect_punct(",")
            tile = p.parse_operand()
        idx = p.parse_operand_list("square")
        token = _parse_tail_clauses(p, state, hints=False)
        if has_reduction and _REDUCTION not in state.attributes:
            default = _default_reduction()
            if default is not None:
                state.attributes[_REDUCTION] = default
        p.expect_punct(":")
        view_type = parse_tile_type(p)
        tile_type = None
        if has_tile:
            p.expect_punct(",")
            tile_type = parse_tile_type(p)
        rest = []
        while p.parse_optional_punct(","):
            rest.append(parse_tile_type(p))
        idx_types = _parse_index_types(p, len(idx), _split_trailing_token(rest, token is not None))
        p.expect_punct("->")
        result_types = [parse_tile_type(p)]
        while len(result_types) < results:
            p.expect_punct(",")
            result_types.append(parse_tile_type(p))
        ops = p.resolve_operands([view], [view_type])
        if has_tile:
            ops += p.resolve_operands([tile], [tile_type])
        ops += p.resolve_operands(idx, idx_types)
        if token is not None:
            ops += p.resolve_operands([token], [TokenType()])
        state.operands = ops
        state.result_types = result_types
        sizes = [1] + ([1] if has_tile else []) + [len(idx), 1 if token is not None else 0]
        state.attributes[SEGMENTS] = segments(*sizes)

    return parse


def print_multimem(pr, op: Operation) -> None:
    g = groups(op)
    _print_ordering(pr, op)
    pr.write(" ")
    pr.print_operand(g["view"][0])
    if g.get("tile"):
        pr.write(", ")
        pr.print_operand(g["tile"][0])
    pr.write("[")
    pr.print_operands(g["index"])
    pr.write("]")
    token = single(g, "token")
    elided = ()
    if op.attributes.get(_REDUCTION) == _default_reduction():
        elided = (_REDUCTION,)
    _print_tail_clauses(pr, op, token, elided=elided)
    pr.write(" : ")
    pr.print_type(g["view"][0].type)
    if g.get("tile"):
        pr.write(", ")
        pr.print_type(g["tile"][0].type)
    _print_index_types(pr, g["index"])
    if token is not None:
        pr.write(", ")
        pr.print_type(token.type)
    pr.write(" -> ")
    pr.print_types([r.type for r in op.results])
