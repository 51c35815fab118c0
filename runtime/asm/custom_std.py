"""Custom syntax of the upstream MLIR ops the cuda_tile -> nv_tileaa conversion emits
(``format: {custom: NAME}`` in spec/ops/{arith,scf}): ``arith.constant``, ``scf.for``,
``scf.if`` and ``scf.while``, as mlir-opt prints them (mlir/lib/Dialect/SCF/IR/SCF.cpp
ForOp/IfOp/WhileOp::print and ::parse; arith.constant's ``attr-dict $value``).

``PARSERS`` / ``PRINTERS`` are merged into ``custom_ops``'s tables.
"""

from __future__ import annotations

from tilegen.runtime.attributes import BoolAttr, FloatAttr, IntegerAttr, UnitAttr
from tilegen.runtime.ir import Operation
from tilegen.runtime.types import F64, I1, I64, FunctionType, IndexType
from tilegen.runtime.asm.custom_common import ParseFn, PrintFn, ensure_terminator, type_text

YIELD = "scf.yield"

# ============================================================================ helpers


def _parse_assignment_list(p) -> tuple[list, list]:
    """``(%a = %init, ...)`` (the ``(`` already consumed): (region args, init operands)."""
    args, inits = [], []
    if not p.parse_optional_punct(")"):
        while True:
            args.append(p.parse_operand(allow_result_number=False))
            p.expect_punct("=")
            inits.append(p.parse_operand())
            if not p.parse_optional_punct(","):
                break
        p.expect_punct(")")
    return args, inits


def _print_assignment_list(pr, args, inits) -> None:
    pairs = [f"{pr.value_name(a)} = {pr.value_name(v)}" for a, v in zip(args, inits)]
    pr.write("(" + ", ".join(pairs) + ")")


def _yield_is_empty(region) -> bool:
    if not region.blocks or not region.blocks[-1].ops:
        return True
    last = region.blocks[-1].ops[-1]
    return last.name == YIELD and not last.operands and not last.attributes


# ============================================================================ arith.constant


def _value_type(a):
    if isinstance(a, BoolAttr):
        return I1
    if isinstance(a, IntegerAttr):
        return a.type or I64
    if isinstance(a, FloatAttr):
        return a.type or F64
    t = getattr(a, "type", None)
    if t is None:
        raise ValueError("arith.constant value has no type")
    return t


def parse_arith_constant(p, state) -> None:
    p.parse_optional_attr_dict(state.attributes)
    at = p.loc()
    value = p.parse_attribute()
    try:
        t = _value_type(value)
    except ValueError:
        p.error("expected a typed attribute for arith.constant", at)
    state.attributes["value"] = value
    state.result_types = [t]


def print_arith_constant(pr, op: Operation) -> None:
    value = op.attributes["value"]
    pr.print_optional_attr_dict(op, elided=("value",))
    pr.write(" ")
    if isinstance(value, IntegerAttr) and (value.type or op.results[0].type) == I1:
        pr.write("true" if value.value else "false")
    elif isinstance(value, (IntegerAttr, FloatAttr)):
        # MLIR prints the type of every scalar constant (``1 : i64`` too), i1 aside (BoolAttr)
        pr.print_attribute_without_type(value)
        pr.write(" : " + type_text(value.type or op.results[0].type))
    else:
        pr.print_attribute(value)


# ============================================================================ scf.for


def parse_scf_for(p, state) -> None:
    if p.parse_optional_keyword("unsigned") is not None:
        state.attributes["unsignedCmp"] = UnitAttr()
    iv = p.parse_operand(allow_result_number=False)
    p.expect_punct("=")
    lb = p.parse_operand()
    p.parse_keyword("to")
    ub = p.parse_operand()
    p.parse_keyword("step")
    step = p.parse_operand()
    args, inits, types = [], [], []
    if p.parse_optional_keyword("iter_args") is not None:
        p.expect_punct("(")
        args, inits = _parse_assignment_list(p)
        types = p.parse_arrow_type_list()
        if len(types) != len(args):
            p.error("mismatch in number of loop-carried values and defined values")
    iv_type = p.parse_type() if p.parse_optional_punct(":") else IndexType()
    state.operands = p.resolve_operands([lb, ub, step], iv_type) + p.resolve_operands(inits, types)
    state.result_types = list(types)
    region = state.add_region()
    p.parse_region(region, [(iv, iv_type, None)] + [(a, t, None) for a, t in zip(args, types)])
    ensure_terminator(region, YIELD, state.loc)
    p.parse_optional_attr_dict(state.attributes)


def print_scf_for(pr, op: Operation) -> None:
    region = op.regions[0]
    block = region.blocks[0]
    if "unsignedCmp" in op.attributes:
        pr.write(" unsigned")
    lb, ub, step = op.operands[:3]
    inits = op.operands[3:]
    pr.write(f" {pr.value_name(block.args[0])} = ")
    pr.print_operand(lb)
    pr.write(" to ")
    pr.print_operand(ub)
    pr.write(" step ")
    pr.print_operand(step)
    if inits:
        pr.write(" iter_args")
        _print_assignment_list(pr, block.args[1:], inits)
        pr.write(" -> (")
        pr.print_types([v.type for v in inits])
        pr.write(")")
    pr.write(" ")
    iv_type = block.args[0].type
    if not isinstance(iv_type, IndexType):
        pr.write(" : ")
        pr.print_type(iv_type)
        pr.write(" ")
    pr.print_region(
        region,
        print_entry_block_args=False,
        print_block_terminators=bool(inits) or not _yield_is_empty(region),
    )
    pr.print_optional_attr_dict(op, elided=("unsignedCmp",))


# ============================================================================ scf.if


def parse_scf_if(p, state) -> None:
    cond = p.parse_operand()
    state.operands = p.resolve_operands([cond], I1)
    state.result_types = list(p.parse_optional_arrow_type_list() or [])
    then_region = state.add_region()
    else_region = state.add_region()
    p.parse_region(then_region, [])
    ensure_terminator(then_region, YIELD, state.loc)
    if p.parse_optional_keyword("else") is not None:
        p.parse_region(else_region, [])
        ensure_terminator(else_region, YIELD, state.loc)
    p.parse_optional_attr_dict(state.attributes)


def print_scf_if(pr, op: Operation) -> None:
    pr.write(" ")
    pr.print_operand(op.operands[0])
    terminators = bool(op.results)
    if op.results:
        pr.write(" -> (")
        pr.print_types([r.type for r in op.results])
        pr.write(")")
    then_region, else_region = op.regions
    pr.write(" ")
    pr.print_region(
        then_region,
        print_entry_block_args=False,
        print_block_terminators=terminators or not _yield_is_empty(then_region),
    )
    if else_region.blocks:
        pr.write(" else ")
        pr.print_region(
            else_region,
            print_entry_block_args=False,
            print_block_terminators=terminators or not _yield_is_empty(else_region),
        )
    pr.print_optional_attr_dict(op)


# ============================================================================ scf.while


def parse_scf_while(p, state) -> None:
    args, inits = [], []
    if p.parse_optional_punct("("):
        args, inits = _parse_assignment_list(p)
    p.expect_punct(":")
    at = p.loc()
    ftype = p.parse_type()
    if not isinstance(ftype, FunctionType):
        p.error("expected function type", at)
    if len(ftype.inputs) != len(inits):
        p.error("expected as many input types as operands", at)
    state.operands = p.resolve_operands(inits, list(ftype.inputs))
    state.result_types = list(ftype.results)
    before = state.add_region()
    after = state.add_region()
    p.parse_region(before, [(a, t, None) for a, t in zip(args, ftype.inputs)])
    p.parse_keyword("do")
    p.parse_region(after)
    p.parse_optional_attr_dict_with_keyword(state.attributes)


def print_scf_while(pr, op: Operation) -> None:
    before, after = op.regions
    if op.operands:
        pr.write(" ")
        _print_assignment_list(pr, before.blocks[0].args, op.operands)
    pr.write(" : ")
    pr.print_function_type([v.type for v in op.operands], [r.type for r in op.results])
    pr.write(" ")
    pr.print_region(before, print_entry_block_args=False)
    pr.write(" do ")
    pr.print_region(after)
    pr.print_optional_attr_dict_with_keyword(op)


# ============================================================================ tables


def _guarded(fn: PrintFn) -> PrintFn:
    """Print malformed ops (unverified IR) in the generic form instead, as MLIR does."""

    def hook(pr, op: Operation) -> None:
        d = op.opdef
        if d is not None and (
            len(op.regions) != len(d.regions)
            or any(not r.blocks for r in op.regions[:1])
            or (op.name == "scf.while" and not op.regions[1].blocks)
            or len(op.operands) < sum(1 for o in d.operands if o.kind == "single")
            or len(op.results) < sum(1 for r in d.results if r.kind == "single")
        ):
            pr.unwrite()  # the op name the printer wrote before calling the hook
            pr.print_generic_op(op)
            return
        mark = pr.mark()
        try:
            fn(pr, op)
        except (KeyError, IndexError, ValueError, AttributeError, TypeError, StopIteration):
            pr.rollback(mark)
            pr.unwrite()
            pr.print_generic_op(op)

    hook.__name__ = fn.__name__
    hook.__doc__ = fn.__doc__
    return hook


PARSERS: dict[str, ParseFn] = {
    "arith_constant": parse_arith_constant,
    "scf_for": parse_scf_for,
    "scf_if": parse_scf_if,
    "scf_while": parse_scf_while,
}

PRINTERS: dict[str, PrintFn] = {
    name: _guarded(fn)
    for name, fn in {
        "arith_constant": print_arith_constant,
        "scf_for": print_scf_for,
        "scf_if": print_scf_if,
        "scf_while": print_scf_while,
    }.items()
}
