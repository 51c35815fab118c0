"""Custom syntax of ``for`` and ``loop``: ``iter_values(...)``, implicit ``continue`` (added when
parsing, elided when printing), operands resolved after the body as MLIR's scf.for does."""

from __future__ import annotations


from tilegen.runtime.attributes import UnitAttr
from tilegen.runtime.ir import Operation
from tilegen.runtime.asm.custom_common import (
    ensure_terminator,
    elides_terminator,
    parse_tile_type,
    parse_type_list,
    print_attr_dict_plain,
)

# ============================================================================ for / loop


def _parse_iter_values(p) -> tuple[list, list]:
    """``iter_values(%a = %init, ...)`` after the keyword: (region args, init operands)."""
    p.expect_punct("(")
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


def parse_for(p, state) -> None:
    if p.parse_optional_keyword("unsigned") is not None:
        state.attributes["unsignedCmp"] = UnitAttr()
    iv = p.parse_operand(allow_result_number=False)
    p.parse_keyword("in")
    p.expect_punct("(")
    lb = p.parse_operand()
    p.parse_keyword("to")
    ub = p.parse_operand()
    p.expect_punct(",")
    p.parse_keyword("step")
    step = p.parse_operand()
    p.expect_punct(")")
    p.expect_punct(":")
    iv_type = parse_tile_type(p)
    args, inits, types = [], [], []
    if p.parse_optional_keyword("iter_values") is not None:
        args, inits = _parse_iter_values(p)
        p.expect_punct("->")
        if p.parse_optional_punct("("):
            types = parse_type_list(p)
            p.expect_punct(")")
        else:
            types = [parse_tile_type(p)]
        if len(types) != len(args):
            p.error("found different number of iter_values and types")
    state.result_types = list(types)
    region = state.add_region()
    p.parse_region(region, [(iv, iv_type, None)] + [(a, t, None) for a, t in zip(args, types)])
    ensure_terminator(region, "cuda_tile.continue", state.loc)
    # Operands resolve after the body, so values defined only inside it are undeclared here.
    state.operands = p.resolve_operands([lb, ub, step], iv_type) + p.resolve_operands(inits, types)
    p.parse_optional_attr_dict(state.attributes)


def print_for(pr, op: Operation) -> None:
    region = op.regions[0]
    block = region.blocks[0] if region.blocks else None
    if "unsignedCmp" in op.attributes:
        pr.write(" unsigned")
    lb, ub, step = op.operands[:3]
    iv = pr.value_name(block.args[0]) if block is not None and block.args else "%<<no iv>>"
    pr.write(f" {iv} in (")
    pr.print_operand(lb)
    pr.write(" to ")
    pr.print_operand(ub)
    pr.write(", step ")
    pr.print_operand(step)
    pr.write(") : ")
    pr.print_type(lb.type)
    inits = op.operands[3:]
    if inits:
        args = block.args[1:] if block is not None else []
        pairs = [f"{pr.value_name(a)} = {pr.value_name(v)}" for a, v in zip(args, inits)]
        pr.write(" iter_values(" + ", ".join(pairs) + ") -> (")
        pr.print_types([r.type for r in op.results])
        pr.write(")")
    pr.write(" ")
    pr.print_region(
        region,
        print_entry_block_args=False,
        print_block_terminators=not elides_terminator(region, "cuda_tile.continue"),
    )
    print_attr_dict_plain(pr, op, ("unsignedCmp",))


def parse_loop(p, state) -> None:
    args, inits, init_types, result_types = [], [], [], []
    if p.parse_optional_keyword("iter_values") is not None:
        args, inits = _parse_iter_values(p)
        p.expect_punct(":")
        init_types = parse_type_list(p)
        if len(init_types) != len(args):
            p.error("found different number of iter_values and types")
        if p.parse_optional_punct("->"):
            result_types = parse_type_list(p)
    elif p.parse_optional_punct(":"):
        result_types = parse_type_list(p)
    state.result_types = result_types
    region = state.add_region()
    p.parse_region(region, [(a, t, None) for a, t in zip(args, init_types)])
    ensure_terminator(region, "cuda_tile.continue", state.loc)
    state.operands = p.resolve_operands(inits, init_types)
    p.parse_optional_attr_dict(state.attributes)


def print_loop(pr, op: Operation) -> None:
    region = op.regions[0]
    block = region.blocks[0] if region.blocks else None
    if op.operands:
        args = block.args if block is not None else []
        pairs = [f"{pr.value_name(a)} = {pr.value_name(v)}" for a, v in zip(args, op.operands)]
        pr.write(" iter_values(" + ", ".join(pairs) + ") : ")
        pr.print_types([v.type for v in op.operands])
        if op.results:
            pr.write(" -> ")
            pr.print_types([r.type for r in op.results])
    elif op.results:
        pr.write(" : ")
        pr.print_types([r.type for r in op.results])
    pr.write(" ")
    pr.print_region(
        region,
        print_entry_block_args=False,
        print_block_terminators=not elides_terminator(region, "cuda_tile.continue"),
    )
    print_attr_dict_plain(pr, op, ())
