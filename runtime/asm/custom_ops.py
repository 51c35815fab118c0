"""Hand-written op syntax: the hooks named by the spec's ``format: {custom: NAME}``.

``PARSERS[NAME](p, state)`` fills an :class:`OpState` from the tokens after the op name;
``PRINTERS[NAME](pr, op)`` writes everything after the op name (starting with its space).
(``custom<NAME>`` directives inside declarative formats live in ``directives.py``.)

Syntax and diagnostics follow NVIDIA's cuda_tile parser/printer (reference/ops.md Table C,
tests.md section 5, the conformance tests and tileirdisasm output).
"""

from __future__ import annotations


from tilegen.runtime.attributes import DenseArrayAttr
from tilegen.runtime.ir import Operation
from tilegen.runtime.types import GatherScatterViewType, PartitionViewType, StridedViewType
from tilegen.runtime.asm.custom_common import (
    ParseFn,
    PrintFn,
    SEGMENTS,
    parse_tile_type,
    parse_type_list,
    print_attr_dict_plain,
    segments,
)
from tilegen.runtime.asm.custom_functions import parse_entry, parse_test_func, print_function
from tilegen.runtime.asm.custom_loops import parse_for, parse_loop, print_for, print_loop
from tilegen.runtime.asm import custom_std
from tilegen.runtime.asm.custom_views import (
    groups,
    parse_atomic_red_view,
    parse_load_view,
    parse_make_tensor_view,
    parse_make_view,
    parse_multimem,
    parse_shape_query,
    parse_store_view,
    print_atomic_red_view,
    print_load_view,
    print_make_tensor_view,
    print_make_view,
    print_multimem,
    print_shape_query,
    print_store_view,
    single,
)

# ============================================================================ testing ops


def _parse_test_evolution(p, state) -> None:
    p.expect_punct("(")
    inputs, types = [], []
    if not p.parse_optional_punct(")"):
        inputs = p.parse_operand_list()
        p.expect_punct(":")
        types = parse_type_list(p)
        p.expect_punct(")")
    token = token_type = None
    if p.parse_optional_keyword("token") is not None:
        p.expect_punct("=")
        token = p.parse_operand()
        p.expect_punct(":")
        token_type = parse_tile_type(p)
    p.parse_optional_attr_dict(state.attributes)
    if p.parse_optional_punct("->"):
        state.result_types = [parse_tile_type(p)]
    state.operands = p.resolve_operands(inputs, types)
    if token is not None:
        state.operands += p.resolve_operands([token], [token_type])
    state.attributes[SEGMENTS] = segments(len(inputs), 1 if token is not None else 0)


def _print_test_evolution(pr, op: Operation) -> None:
    g = groups(op)
    inputs = g.get("inputs") or []
    saved = pr.short_types
    pr.short_types = False
    pr.write("(")
    pr.print_operands(inputs)
    if inputs:
        pr.write(" : ")
        pr.print_types([v.type for v in inputs])
    pr.write(")")
    pr.short_types = saved
    token = single(g, "optional_token")
    if token is not None:
        pr.write(" token = ")
        pr.print_operand(token)
        pr.write(" : ")
        pr.print_type(token.type)
    print_attr_dict_plain(pr, op, ())
    if op.results:
        pr.write(" -> ")
        pr.print_type(op.results[0].type)


# ============================================================================ tables


PARSERS: dict[str, ParseFn] = {
    "entry": parse_entry,
    "testing$func": parse_test_func,
    "for": parse_for,
    "loop": parse_loop,
    "get_index_space_shape": lambda p, s: parse_shape_query(p, s, want_tensor_view=False),
    "get_tensor_shape": lambda p, s: parse_shape_query(p, s, want_tensor_view=True),
    "make_partition_view": parse_make_view(PartitionViewType, "partition_view"),
    "make_strided_view": parse_make_view(StridedViewType, "strided_view"),
    "make_gather_scatter_view": parse_make_view(GatherScatterViewType, "gather_scatter_view"),
    "make_tensor_view": parse_make_tensor_view,
    "load_view_tko": parse_load_view,
    "store_view_tko": parse_store_view,
    "atomic_red_view_tko": parse_atomic_red_view,
    "multimem_load_reduce_view_tko": parse_multimem(has_tile=False, has_reduction=True, results=2),
    "multimem_reduce_view_tko": parse_multimem(has_tile=True, has_reduction=True, results=1),
    "multimem_store_view_tko": parse_multimem(has_tile=True, has_reduction=False, results=1),
    "testing$bytecode_test_evolution": _parse_test_evolution,
}


def _well_formed(op: Operation) -> bool:
    """Whether ``op`` has the operands, results, regions and attributes its custom syntax needs."""
    d = op.opdef
    if len(op.regions) != len(d.regions) or any(not r.blocks for r in op.regions):
        return False
    if len(op.operands) < sum(1 for o in d.operands if o.kind == "single"):
        return False
    if len(op.results) < sum(1 for r in d.results if r.kind == "single"):
        return False
    seg = op.attributes.get(SEGMENTS)
    if d.has_attr_sized_segments and not (
        isinstance(seg, DenseArrayAttr)
        and len(seg.values) == len(d.operands)
        and sum(seg.values) == len(op.operands)
    ):
        return False
    return all(a.optional or a.default is not None or a.name in op.attributes for a in d.attributes)


def _print_generic_instead(pr, op: Operation) -> None:
    # drop the op name the printer wrote before calling the hook, as it does for hook-less ops
    pr.unwrite()
    pr.print_generic_op(op)


def _guarded(fn: PrintFn) -> PrintFn:
    """Print malformed ops (unverified IR) in the generic form instead of failing, as MLIR does."""

    def hook(pr, op: Operation) -> None:
        if not _well_formed(op):
            _print_generic_instead(pr, op)
            return
        mark = pr.mark()
        try:
            fn(pr, op)
        except (KeyError, IndexError, ValueError, AttributeError, TypeError, StopIteration):
            pr.rollback(mark)
            _print_generic_instead(pr, op)

    hook.__name__ = fn.__name__
    hook.__doc__ = fn.__doc__
    return hook


PRINTERS: dict[str, PrintFn] = {
    "entry": print_function,
    "testing$func": print_function,
    "for": print_for,
    "loop": print_loop,
    "get_index_space_shape": print_shape_query,
    "get_tensor_shape": print_shape_query,
    "make_partition_view": print_make_view,
    "make_strided_view": print_make_view,
    "make_gather_scatter_view": print_make_view,
    "make_tensor_view": print_make_tensor_view,
    "load_view_tko": print_load_view,
    "store_view_tko": print_store_view,
    "atomic_red_view_tko": print_atomic_red_view,
    "multimem_load_reduce_view_tko": print_multimem,
    "multimem_reduce_view_tko": print_multimem,
    "multimem_store_view_tko": print_multimem,
    "testing$bytecode_test_evolution": _print_test_evolution,
}

PRINTERS = {name: _guarded(fn) for name, fn in PRINTERS.items()}

# upstream arith / scf ops (runtime/asm/custom_std.py; already guarded there)
PARSERS.update(custom_std.PARSERS)
PRINTERS.update(custom_std.PRINTERS)
