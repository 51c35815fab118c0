"""MLIR's structural and native op traits, checked from the trait names in each OpDef.

Texts are MLIR's (``OpDefinition.cpp``). Traits whose argument names a C++ op class
(``ParentOneOf(IfOp,LoopOp)``, ``SingleBlockImplicitTerminator(YieldOp)``) are resolved through
the generated op classes; an argument that names no op class (``impl::IfOpImplicitTerminatorType``)
leaves the check to the op's custom hook.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Optional

from tilegen.runtime.attributes import StringAttr
from tilegen.runtime.ir import BlockArgument, OpResult
from tilegen.runtime.opdef import DIALECT_MODULES, OpDef, load_dialects
from tilegen.runtime.types import TensorViewType, TileType, Type
from tilegen.runtime.verify.context import VerifyContext

TERMINATOR_TRAITS = ("Terminator", "IsTerminator")
#: Native traits whose check reads only the op's own types and attributes. An op whose checked
#: native traits are all here may be memoised (engine.memoable); a trait :func:`verify_native_traits`
#: learns to check stays unmemoised until it is added here.
LOCAL_TRAITS = frozenset(
    (
        "SameOperandsAndResultShape",
        "SameOperandsAndResultElementType",
        "SameOperandsShape",
        "SameOperandsElementType",
        "SameTypeOperands",
        "SameOperandsAndResultType",
        "Symbol",
    )
)


def local_traits_only(opdef: OpDef) -> bool:
    """Whether every native trait of ``opdef`` that is checked is in :data:`LOCAL_TRAITS`."""
    return all(name in LOCAL_TRAITS for name, _ in _native_traits(opdef.traits))


def is_terminator(opdef: OpDef) -> bool:
    return any(opdef.has_trait(t) for t in TERMINATOR_TRAITS)


def no_terminator(opdef: OpDef) -> bool:
    return opdef.has_trait("NoTerminator") or opdef.has_trait("GraphRegionNoTerminator")


@lru_cache(maxsize=None)
def _class_to_op() -> dict[str, str]:
    """C++ class name (``IfOp``) -> op name (``cuda_tile.if``), from the generated op classes."""
    import importlib

    load_dialects()
    out: dict[str, str] = {}
    for mod_name in DIALECT_MODULES:
        try:
            mod = importlib.import_module(mod_name + ".ops")
        except ModuleNotFoundError:
            continue
        for op_name, cls in mod.OP_CLASS_NAMES.items():
            out.setdefault(cls, op_name)  # cuda_tile first: its class names win
    return out


def _op_names(arg: Optional[str]) -> Optional[list[str]]:
    """``'IfOp,LoopOp'`` -> ``['cuda_tile.if', 'cuda_tile.loop']``; None if any is unknown."""
    if not arg:
        return None
    names = []
    for part in arg.split(","):
        part = re.sub(r"\(.*\)", "", part).strip()
        op_name = _class_to_op().get(part)
        if op_name is None and part.startswith("Test_"):  # NVIDIA's Test_FuncOp = TestingFuncOp
            op_name = _class_to_op().get("Testing" + part[len("Test_") :])
        if op_name is None:
            if "test builds only" in arg:
                continue
            return None
        names.append(op_name)
    return names


# --------------------------------------------------------------------------- counts


def verify_counts(ctx: VerifyContext) -> None:
    """Region, result, successor and operand count traits, in ODS order."""
    op, opdef = ctx.op, ctx.opdef
    n = len(opdef.regions)
    if len(op.regions) != n:
        ctx.error(
            {0: "requires zero regions", 1: "requires one region"}.get(n, f"expected {n} regions")
        )
        return
    info = ctx.info
    _count(ctx, info.fixed_results, info.variadic_results, len(op.results), "results")
    if ctx.failed:
        return
    if op.successors and not opdef.has_trait("Successors"):
        ctx.error(f"requires 0 successors but found {len(op.successors)}")
        return
    _count(ctx, info.fixed_operands, info.variadic_operands, len(op.operands), "operands")
    if ctx.failed:
        return
    if opdef.has_trait("AttrSizedOperandSegments"):
        _check_segment_sizes(
            ctx, opdef.segmented_operands, len(op.operands), "operandSegmentSizes", "operand"
        )


def _count(ctx: VerifyContext, fixed: int, variadic: bool, actual: int, what: str) -> None:
    """``fixed``: the number of single groups; ``variadic``: whether any group is not single."""
    if variadic:
        if fixed and actual < fixed:
            found = f", but found {actual}" if what == "operands" else ""
            ctx.error(f"expected {fixed} or more {what}{found}")
        return
    if actual == fixed:
        return
    if what == "results":
        ctx.error(
            {0: "requires zero results", 1: "requires one result"}.get(
                fixed, f"expected {fixed} results"
            )
        )
    elif fixed == 0:
        ctx.error("requires zero operands")
    elif fixed == 1:
        ctx.error("requires a single operand")
    else:
        ctx.error(f"expected {fixed} operands, but found {actual}")


def _check_segment_sizes(ctx: VerifyContext, defs, actual: int, attr: str, what: str) -> None:
    if not ctx.opdef.has_trait("AttrSizedOperandSegments"):
        return
    sizes = ctx.attr(attr)
    values = getattr(sizes, "values", None)
    if values is None:
        return
    if len(values) != len(defs):
        ctx.error(
            f"'{attr}' attribute for specifying {what} segments must have {len(defs)} "
            f"elements, but got {len(values)}"
        )
    elif any(v < 0 for v in values):
        ctx.error(f"'{attr}' attribute cannot have negative elements")
    elif ctx.opdef.has_trait("TrailingTokenOperand"):
        return  # the token slot after the segments: checked by the op's own verifier
    elif sum(values) != actual:
        ctx.error(
            f"{what} count ({actual}) does not match with the total size ({sum(values)}) "
            f"specified in attribute '{attr}'"
        )


# --------------------------------------------------------------------------- native traits


def _shape(t: Type) -> Optional[tuple]:
    if isinstance(t, (TileType, TensorViewType)):
        return t.shape
    return None


def _element(t: Type) -> Type:
    return getattr(t, "element", t) if isinstance(t, (TileType, TensorViewType)) else t


def _same_shape(types: list[Type]) -> bool:
    shapes = [_shape(t) for t in types]
    ranked = [s for s in shapes if s is not None]
    return all(s == ranked[0] for s in ranked)


#: The trait names verify_native_traits checks: the local ones, and those that look at the op's
#: block, parent or regions.
_NATIVE = LOCAL_TRAITS | frozenset((*TERMINATOR_TRAITS, "ParentOneOf", "HasParent", "SingleBlock"))


@lru_cache(maxsize=None)
def _native_traits(traits: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """(name, argument) of each trait in ``traits`` that verify_native_traits checks."""
    out = []
    for trait in traits:
        name, _, arg = trait.partition("(")
        arg = arg[:-1] if arg.endswith(")") else arg
        if name in _NATIVE:
            out.append((name, arg))
    return tuple(out)


def verify_native_traits(ctx: VerifyContext) -> None:
    """Traits MLIR checks after ``verifyInvariantsImpl``, in the op's trait order."""
    op, opdef = ctx.op, ctx.opdef
    checked = _native_traits(opdef.traits)
    if not checked:
        return
    operand_types = [v.type for v in op.operands]
    result_types = [v.type for v in op.results]
    for name, arg in checked:
        if name in ("SameOperandsAndResultShape", "SameOperandsAndResultElementType"):
            if not operand_types:
                ctx.error("expected 1 or more operands")
            elif not result_types:
                ctx.error("expected 1 or more results")
            elif name == "SameOperandsAndResultShape":
                if not _same_shape(operand_types + result_types):
                    ctx.error("requires the same shape for all operands and results")
            elif len({_element(t) for t in operand_types + result_types}) != 1:
                ctx.error("requires the same element type for all operands and results")
        elif name == "SameOperandsShape":
            if operand_types and not _same_shape(operand_types):
                ctx.error("requires the same shape for all operands")
        elif name == "SameOperandsElementType":
            if len({_element(t) for t in operand_types}) > 1:
                ctx.error("requires the same element type for all operands")
        elif name == "SameTypeOperands":
            if len(set(operand_types)) > 1:
                ctx.error("requires all operands to have the same type")
        elif name == "SameOperandsAndResultType":
            if len(set(operand_types + result_types)) > 1:
                ctx.error("requires the same type for all operands and results")
        elif name in TERMINATOR_TRAITS:
            block = op.parent
            if block is None or not block.ops or block.ops[-1] is not op:
                ctx.error("must be the last operation in the parent block")
        elif name in ("ParentOneOf", "HasParent"):
            _verify_parent(ctx, arg)
        elif name == "Symbol":
            if not isinstance(ctx.attr("sym_name"), StringAttr):
                ctx.error("requires string attribute 'sym_name'")
        elif name == "SingleBlock":
            _verify_single_block(ctx)
        if ctx.failed:
            return


def _verify_parent(ctx: VerifyContext, arg: str) -> None:
    names = _op_names(arg)
    if names is None:
        return
    parent = ctx.op.parent_op
    if parent is not None and parent.name in names:
        return
    if len(names) == 1:
        ctx.error(f"expects parent op '{names[0]}'")
    else:
        ctx.error(f"expects parent op to be one of '{', '.join(names)}'")


def _verify_single_block(ctx: VerifyContext) -> None:
    for i, region in enumerate(ctx.op.regions):
        if not region.blocks:
            continue
        if len(region.blocks) != 1:
            ctx.error(f"expects region #{i} to have 0 or 1 blocks")
            return
        if not no_terminator(ctx.opdef) and not region.blocks[0].ops:
            ctx.error("expects a non-empty block")
            return


# --------------------------------------------------------------------------- region traits


def verify_region_traits(ctx: VerifyContext) -> None:
    """Traits MLIR checks after the op's regions verified (``verifyRegionTrait``)."""
    for trait in ctx.opdef.traits:
        name, _, arg = trait.partition("(")
        arg = arg[:-1] if arg.endswith(")") else arg
        if name == "SingleBlockImplicitTerminator":
            _verify_implicit_terminator(ctx, arg)
        elif name == "IsolatedFromAbove":
            _verify_isolated(ctx)
        if ctx.failed:
            return


def _verify_implicit_terminator(ctx: VerifyContext, arg: str) -> None:
    names = _op_names(arg)
    if names is None or len(names) != 1:
        return
    want = names[0]
    for region in ctx.op.regions:
        if not region.blocks or not region.blocks[0].ops:
            continue
        last = region.blocks[0].ops[-1]
        if last.name != want:
            d = ctx.error(f"expects regions to end with '{want}', found '{last.name}'")
            d.attach_note(f"in custom textual format, the absence of terminator implies '{want}'")
            return


def _verify_isolated(ctx: VerifyContext) -> None:
    """No op inside may use a value defined outside (MLIR's verifyIsIsolatedFromAbove).

    Like MLIR, the walk does not enter nested ops that are isolated from above themselves: the
    verifier checked them (and everything they hold) before this region trait runs, so any use
    inside them already refers to a value defined within them.
    """
    root = ctx.op
    inside = _blocks_within(root)
    stack: list = []
    for region in root.regions:
        for block in region.blocks:
            for inner in block.ops:
                stack.append(inner)
                while stack:  # pre-order, as Operation.walk
                    nested = stack.pop()
                    for v in nested.operands:
                        cls = v.__class__
                        if cls is OpResult:
                            if v.op.parent in inside:
                                continue
                        elif cls is BlockArgument:
                            if v.block in inside:
                                continue
                        elif _defined_within(v, root):
                            continue
                        msg = f"'{nested.name}' op using value defined outside the region"
                        d = ctx.error_at(nested.loc, msg, op_prefix=False)
                        d.attach_note("required by region isolation constraints", root.loc)
                        return
                    if nested.regions and not _isolated_from_above(nested):
                        for sub in reversed(nested.regions):
                            for b in reversed(sub.blocks):
                                stack.extend(reversed(b.ops))


def _isolated_from_above(op) -> bool:
    return op.opdef is not None and op.opdef.has_trait("IsolatedFromAbove")


def _blocks_within(root) -> set:
    """Every block nested (at any depth) in ``root``'s regions."""
    out: set = set()
    pending = [root]
    while pending:
        op = pending.pop()
        for region in op.regions:
            for block in region.blocks:
                out.add(block)
                for inner in block.ops:
                    if inner.regions:
                        pending.append(inner)
    return out


def _defined_within(value, root) -> bool:
    if isinstance(value, OpResult):
        op = value.op.parent_op
    elif isinstance(value, BlockArgument):
        region = value.block.parent
        op = region.parent if region is not None else None
    else:
        return True
    while op is not None:
        if op is root:
            return True
        op = op.parent_op
    return False
