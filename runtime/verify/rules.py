"""Declarative verifier rule kinds (the ``verify:`` list of an op's spec entry).

Each rule is a one-key mapping ``{KIND: ARGS}``; spec/schema/ops.schema.json (``$defs/verify_rule``)
holds one branch per kind. Rules run in spec order within their phase:

* ``invariants`` - ODS predicate traits, checked right after the type constraints:
  ``same_type`` / ``same_shape`` / ``same_rank`` / ``same_element_type`` (``[names]``) and
  ``types_match_with`` (``{from, to, transform, summary}``); message
  ``failed to verify that ...``.
* ``verify`` - the op's own verifier (after native traits): ``attr_in``, ``requires_element``,
  ``width_relation``, ``rank``, ``require``, ``forbid`` and ``custom`` (a named hook).
* ``regions`` - ``{custom: NAME}`` hooks registered with ``regions=True``.

A ``{custom: NAME, ...}`` rule may carry extra keys; the hook reads them from ``ctx.rule``.

Conditions (``when`` / ``if`` / ``then`` of ``requires_element``, ``require``, ``forbid``) are
one mapping or a list (all must hold) of:
``{attr: A}`` (present), ``{attr: A, in: [keywords]}``, ``{element: V, in: [names or groups]}``,
``{rank: V, in: [ints]}``, ``{same_type: [V, W]}``, ``{not: COND}``.

Messages are ``str.format`` templates over ``element[V]`` (element type name of value V),
``type[V]`` (its long type text), ``rank[V]``, ``width[V]`` (element bit width, tf32 = 19),
``attr[A]`` (the keyword or value of attribute A, defaults included) and ``bytes[V]`` (tile size
in bytes).

More verify-phase kinds: ``same_num_elements`` / ``same_size_in_bits`` (``{values, message}``),
``size_in_bits_multiple`` (``{value, of, message}``).
A rule with ``fatal: false`` reports its error but lets verification go on (MLIR code that emits
an error without returning failure).
"""

from __future__ import annotations

import re
from typing import Any, Callable, Optional

from tilegen.runtime import records
from tilegen.runtime.attributes import EnumAttr, IntegerAttr
from tilegen.runtime.opdef import lookup_enum
from tilegen.runtime.types import (
    STORAGE_WIDTHS,
    FloatType,
    IntegerType,
    PointerType,
    TileType,
    Type,
)
from tilegen.runtime.verify.constraints import element_in
from tilegen.runtime.verify.context import VerifyContext
from tilegen.runtime.verify.types import format_type

RuleFn = Callable[[VerifyContext, Any], None]
#: kind -> (phase, function)
RULE_KINDS: dict[str, tuple[str, RuleFn]] = {}
#: Kinds whose verdict depends only on the op's operand/result types, attributes and counts
#: (not on its location, parent, uses or regions): the verifier may memoise such ops.
LOCAL_RULE_KINDS: set[str] = set()


def rule(kind: str, phase: str = "verify", local: bool = True) -> Callable[[RuleFn], RuleFn]:
    """Register a rule kind. Pass ``local=False`` for a rule that reads anything beyond the
    op's types, attributes and counts through ``ctx.op`` (see ``engine.memoable``)."""

    def register(fn: RuleFn) -> RuleFn:
        RULE_KINDS[kind] = (phase, fn)
        if local:
            LOCAL_RULE_KINDS.add(kind)
        else:
            LOCAL_RULE_KINDS.discard(kind)
        return fn

    return register


def run_phase(ctx: VerifyContext, phase: str) -> None:
    """Run the op's rules of ``phase`` in spec order; stop at the first fatal error."""
    for entry in ctx.opdef.verify or ():
        if "custom" in entry:  # {custom: NAME, ...}: extra keys are the hook's arguments
            ctx.rule = entry
            _run_hook(ctx, entry["custom"], phase)
        else:
            ((kind, args),) = entry.items()
            rule_phase, fn = RULE_KINDS[kind]
            if rule_phase != phase:
                continue
            was_failed = ctx.failed
            fn(ctx, args)
            if isinstance(args, dict) and args.get("fatal") is False:
                ctx.failed = was_failed  # MLIR emits the error but lets verification go on
        if ctx.failed:
            return


def _run_hook(ctx: VerifyContext, name: str, phase: str) -> None:
    from tilegen.runtime.verify.hooks import get_hook

    found = get_hook(name)
    if found is None:
        if phase == "verify":
            ctx.error(f"has no verifier hook named '{name}' (tilegen internal error)")
        return
    fn, on_regions = found
    if phase != "invariants" and (phase == "regions") == on_regions:
        fn(ctx.op, ctx)


# --------------------------------------------------------------------------- helpers


def element_of(t: Type) -> Type:
    return getattr(t, "element", t)


def size_in_bits(t: Type) -> int:
    """Total storage size of a tile in bits (tf32 is stored in 32 bits, i1 counts 1 bit)."""
    n = 1
    for d in getattr(t, "shape", ()):
        n *= d
    e = element_of(t)
    width = STORAGE_WIDTHS[e.name] if isinstance(e, FloatType) else element_width(t)
    return n * (width or 0)


def element_width(t: Type) -> Optional[int]:
    """MLIR's ``getIntOrFloatBitWidth`` of ``t``'s element (tf32 is 19; pointers are 64)."""
    e = element_of(t)
    if isinstance(e, (IntegerType, FloatType)):
        return e.width
    if isinstance(e, PointerType):
        return 64
    return None


def attr_keyword(ctx: VerifyContext, name: str) -> Optional[str]:
    """The keyword of an enum attribute (EnumAttr or i32 IntegerAttr), else its text."""
    value = ctx.attr(name)
    a = ctx.opdef.attr(name)
    if value is None:
        return default_keyword(a) if a is not None else None
    enum_name = value.enum if isinstance(value, EnumAttr) else (a.enum if a else None)
    if enum_name and isinstance(value, (EnumAttr, IntegerAttr)):
        enum = lookup_enum(enum_name)
        if enum is not None:
            kw = enum.keyword(value.value)
            if kw is not None:
                return kw
    return str(getattr(value, "value", value))


def default_keyword(a) -> Optional[str]:
    """The keyword of a ``DefaultValuedAttr<X, "...::NEAREST_EVEN">`` default (``nearest_even``)."""
    m = re.match(r'DefaultValuedAttr<.*,\s*"(.*)">$', a.constraint or "")
    if not m:
        return None
    return m.group(1).rsplit("::", 1)[-1].lower()


class _Lookup:
    def __init__(self, fn: Callable[[str], Any]):
        self.fn = fn

    def __getitem__(self, key: str) -> Any:
        return self.fn(key)


def render(ctx: VerifyContext, template: str, **extra) -> str:
    def elem(name: str) -> str:
        e = element_of(ctx.type(name))
        return format_type(e)

    return template.format(
        element=_Lookup(elem),
        type=_Lookup(lambda n: format_type(ctx.type(n))),
        rank=_Lookup(lambda n: getattr(ctx.type(n), "rank", 0)),
        width=_Lookup(lambda n: element_width(ctx.type(n))),
        attr=_Lookup(lambda n: attr_keyword(ctx, n)),
        bytes=_Lookup(lambda n: size_in_bits(ctx.type(n)) // 8),
        **extra,
    )


def holds(ctx: VerifyContext, cond) -> bool:
    """Evaluate a condition (see the module docstring)."""
    if isinstance(cond, list):
        return all(holds(ctx, c) for c in cond)
    if "not" in cond:
        return not holds(ctx, cond["not"])
    if "attr" in cond:
        kw = attr_keyword(ctx, cond["attr"])
        if kw is None:
            return False
        return "in" not in cond or kw in cond["in"]
    if "element" in cond:
        t = ctx.type(cond["element"])
        return t is not None and element_in(element_of(t), cond["in"])
    if "rank" in cond:
        t = ctx.type(cond["rank"])
        return getattr(t, "rank", None) in cond["in"]
    if "same_type" in cond:
        types = [ctx.type(n) for n in cond["same_type"]]
        return len(set(types)) == 1
    raise ValueError(f"unknown verifier condition {cond!r}")


# --------------------------------------------------------------------------- invariants phase


def _group_values(ctx: VerifyContext, names: list[str]) -> list[tuple]:
    """One entry per named group that is present: the tuple of its types."""
    out = []
    info = ctx.info
    for n in names:
        if n in info.attr_names:  # a typed attribute (constant's `value`)
            attr = ctx.attr(n)
            t = getattr(attr, "type", None)
            if t is not None:
                out.append((t,))
            continue
        types = tuple([v.type for v in ctx.values(n)])
        if types or n in info.variadic:
            out.append(types)
    return out


def _all_match(
    ctx: VerifyContext, names: list[str], key: Optional[Callable[[Type], Any]], what: str
) -> None:
    """Error unless every present group has the same ``key`` tuple (None: the types)."""
    groups = _group_values(ctx, names)
    if len(groups) < 2:
        return
    keys = groups if key is None else [tuple([key(t) for t in g]) for g in groups]
    first = keys[0]
    if any(k != first for k in keys):
        ctx.error(f"failed to verify that all of {{{', '.join(names)}}} have {what}")


@rule("same_type", "invariants")
def _same_type(ctx: VerifyContext, names: list[str]) -> None:
    _all_match(ctx, names, None, "same type")


@rule("same_shape", "invariants")
def _same_shape(ctx: VerifyContext, names: list[str]) -> None:
    _all_match(ctx, names, lambda t: getattr(t, "shape", None), "same shape")


@rule("same_rank", "invariants")
def _same_rank(ctx: VerifyContext, names: list[str]) -> None:
    _all_match(ctx, names, lambda t: getattr(t, "rank", None), "same rank")


@rule("same_element_type", "invariants")
def _same_element_type(ctx: VerifyContext, names: list[str]) -> None:
    _all_match(ctx, names, element_of, "the same element type")


#: TypesMatchWith transforms: the type ``to`` must equal ``TRANSFORM(type of from)``.
TRANSFORMS: dict[str, Callable[[Type], Optional[Type]]] = {}


def transform(name: str):
    def register(fn):
        TRANSFORMS[name] = fn
        return fn

    return register


@transform("i1_same_shape")
def _i1_same_shape(t: Type) -> Optional[Type]:
    # like MLIR's getI1SameShape, the (nv_tileas layout) encoding is kept
    return TileType(t.shape, IntegerType(1), t.encoding) if isinstance(t, TileType) else None


@transform("pointer_tile")
def _pointer_tile(t: Type) -> Optional[Type]:
    """``tile<SxE>`` -> ``tile<Sxptr<E>>`` (load/store pointer operands)."""
    return TileType(t.shape, PointerType(t.element)) if isinstance(t, TileType) else None


@transform("identity")
def _identity(t: Type) -> Optional[Type]:
    return t


@transform("identity")
def _identity(t: Type) -> Optional[Type]:
    return t


@transform("pointer_tile")
def _pointer_tile(t: Type) -> Optional[Type]:
    return TileType(t.shape, PointerType(t.element)) if isinstance(t, TileType) else None


@rule("types_match_with", "invariants")
def _types_match_with(ctx: VerifyContext, args: dict) -> None:
    src, dst = ctx.values(args["from"]), ctx.values(args["to"])
    if not src or not dst:
        return
    got = dst[0].type
    if args["transform"] == "pointer_tile" and isinstance(
        getattr(got, "element", None), PointerType
    ):
        # 13.4: the pointer operand may carry a ptr_attr; the rule is about shape and pointee
        got = records.replace(got, element=records.replace(got.element, ptr_attr=None))
    if TRANSFORMS[args["transform"]](src[0].type) != got:
        ctx.error(f"failed to verify that {args['summary']}")


# --------------------------------------------------------------------------- verify phase


@rule("attr_in")
def _attr_in(ctx: VerifyContext, args: dict) -> None:
    kw = attr_keyword(ctx, args["attr"])
    if kw is not None and kw not in args["in"]:
        ctx.error(render(ctx, args["message"]))


@rule("requires_element")
def _requires_element(ctx: VerifyContext, args: dict) -> None:
    if not holds(ctx, args.get("when", [])):
        return
    t = ctx.type(args["value"])
    if t is not None and not element_in(element_of(t), args["elements"]):
        ctx.error(render(ctx, args["message"]))


_RELATIONS = {
    "<": lambda a, b: a < b,
    ">": lambda a, b: a > b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}


@rule("width_relation")
def _width_relation(ctx: VerifyContext, args: dict) -> None:
    a, b = element_width(ctx.type(args["lhs"])), element_width(ctx.type(args["rhs"]))
    if a is not None and b is not None and not _RELATIONS[args["relation"]](a, b):
        ctx.error(render(ctx, args["message"]))


@rule("rank")
def _rank(ctx: VerifyContext, args: dict) -> None:
    r = getattr(ctx.type(args["value"]), "rank", None)
    if r is None:
        return
    if ("eq" in args and r != args["eq"]) or ("min" in args and r < args["min"]):
        ctx.error(render(ctx, args["message"]))


@rule("require")
def _require(ctx: VerifyContext, args: dict) -> None:
    if holds(ctx, args.get("if", [])) and not holds(ctx, args["then"]):
        ctx.error(render(ctx, args["message"]))


@rule("forbid")
def _forbid(ctx: VerifyContext, args: dict) -> None:
    if holds(ctx, args["when"]):
        ctx.error(render(ctx, args["message"]))


@rule("same_num_elements")
def _same_num_elements(ctx: VerifyContext, args: dict) -> None:
    counts = set()
    for n in args["values"]:
        count = 1
        for d in getattr(ctx.type(n), "shape", ()):
            count *= d
        counts.add(count)
    if len(counts) > 1:
        ctx.error(render(ctx, args["message"]))


@rule("same_size_in_bits")
def _same_size_in_bits(ctx: VerifyContext, args: dict) -> None:
    if len({size_in_bits(ctx.type(n)) for n in args["values"]}) > 1:
        ctx.error(render(ctx, args["message"]))


@rule("size_in_bits_multiple")
def _size_in_bits_multiple(ctx: VerifyContext, args: dict) -> None:
    if size_in_bits(ctx.type(args["value"])) % args["of"]:
        ctx.error(render(ctx, args["message"]))
