"""Control flow, structure, reduce/scan, mma, atomics, token and debug verifiers on built IR."""

from __future__ import annotations

from tilegen.runtime.attributes import (
    ArrayAttr,
    BoundedAttr,
    DenseArrayAttr,
    DenseElementsAttr,
    DictAttr,
    DivByAttr,
    FileLineColLoc,
    FloatAttr,
    IntegerAttr,
    OptimizationHintsAttr,
    SameElementsAttr,
    StringAttr,
    SymbolRefAttr,
    TypeAttr,
)
from tilegen.runtime.diagnostics import DiagnosticEngine
from tilegen.runtime.ir import Block, Operation, Region
from tilegen.runtime.types import (
    F16,
    F32,
    F64,
    I1,
    I8,
    I32,
    I64,
    TOKEN,
    FloatType,
    FunctionType,
    PartitionViewType,
    PointerType,
    TensorViewType,
    TileType,
)
from tilegen.runtime.verify import VerifyOptions, verify_module, verify_op

LOC = FileLineColLoc("t.mlir", 7, 3)
S32, SF32 = TileType((), I32), TileType((), F32)


def values(*types):
    return Block(list(types)).args


def op(name, operands=(), results=(), attrs=None, regions=0, loc=LOC):
    return Operation(f"cuda_tile.{name}", list(operands), list(results), attrs or {}, regions, loc)


def region(block: Block) -> Region:
    return Region([block])


def errors(o, options=None, module=False) -> list[str]:
    diag = DiagnosticEngine()
    (verify_module if module else verify_op)(o, diag, options)
    return [f"{d.severity}: {d.message}" for d in diag.diagnostics]


def func(body_ops, arg_types=(), result_types=(), name="f", kind="testing$func", attrs=None):
    block = Block(list(arg_types))
    for o in body_ops(block) if callable(body_ops) else body_ops:
        block.append(o)
    a = {
        "sym_name": StringAttr(name),
        "function_type": TypeAttr(FunctionType(tuple(arg_types), tuple(result_types))),
    }
    a.update(attrs or {})
    return op(kind, attrs=a, regions=[region(block)])


def module(*ops):
    block = Block()
    for o in ops:
        block.append(o)
    return op("module", attrs={"sym_name": StringAttr("m")}, regions=[region(block)])


# --------------------------------------------------------------------------- control flow


def _if(cond, result_types, then_yield, else_yield=None):
    then_b = Block()
    then_b.append(op("yield", then_yield))
    regions = [region(then_b)]
    if else_yield is not None:
        else_b = Block()
        else_b.append(op("yield", else_yield))
        regions.append(region(else_b))
    else:
        regions.append(Region())
    return op("if", [cond], result_types, regions=regions)


def test_if_yield_rules():
    cond, a, b = values(TileType((), I1), S32, TileType((), I64))
    assert errors(_if(cond, [TileType((), I64)], [a], [b])) == [
        "error: 'cuda_tile.if' op type does not match yield type, then branch yields "
        "'!cuda_tile.tile<i32>' but op result type is '!cuda_tile.tile<i64>'"
    ]
    assert errors(_if(cond, [S32], [a])) == [
        "error: 'cuda_tile.if' op has non-empty return type, must define else branch"
    ]
    assert errors(_if(cond, [], [], [a])) == [
        "error: 'cuda_tile.if' op does not return a value, but else branch yields "
        "'!cuda_tile.tile<i32>'"
    ]
    assert errors(_if(cond, [S32], [a], [])) == [
        "error: 'cuda_tile.if' op has return type of '!cuda_tile.tile<i32>' but else branch "
        "does not yield anything"
    ]
    tv = TensorViewType(F32, (8,), (1,))
    (v,) = values(tv)
    assert errors(_if(cond, [tv], [v], [v])) == [
        "error: 'cuda_tile.if' op result type 0 is a tensor_view, which is not supported"
    ]
    assert errors(_if(cond, [S32], [a], [a])) == []


def _for(bound_t, iv_t, inits, iter_types, result_types, body=()):
    lb, ub, st = values(bound_t, bound_t, bound_t)
    block = Block([iv_t, *iter_types])
    for o in body:
        block.append(o)
    block.append(op("continue", list(inits)))
    return op("for", [lb, ub, st, *inits], result_types, regions=[region(block)])


def test_for_region_rules():
    (init,) = values(SF32)
    f = _for(S32, S32, [init], [TileType((), F64)], [SF32])
    msg, *_ = errors(module(func([f])), module=True)
    assert msg == (
        "error: 'cuda_tile.for' op init value 0 and region iter_value 0 have different type: "
        "'!cuda_tile.tile<f32>' != '!cuda_tile.tile<f64>'"
    )
    f = _for(S32, TileType((), I64), [], [], [])
    assert errors(module(func([f])), module=True) == [
        "error: 'cuda_tile.for' op expected induction variable to be same type as bounds and "
        "step: '!cuda_tile.tile<i64>' vs '!cuda_tile.tile<i32>'"
    ]
    pv = PartitionViewType((8,), TensorViewType(F32, (64,), (1,)))
    (view,) = values(pv)
    f = _for(S32, S32, [view], [pv], [pv])
    assert errors(module(func([f])), module=True) == [
        "error: 'cuda_tile.for' op loop-carried value 0 is a tile view, which is not supported"
    ]


def test_continue_types_and_break_placement():
    (a,) = values(S32)
    lb, ub, st = values(S32, S32, S32)
    block = Block([S32])
    block.append(op("continue", [a]))
    f = op("for", [lb, ub, st], [], regions=[region(block)])
    assert errors(module(func([f])), module=True) == [
        "error: `for` is missing a valid terminator. `continue` op should have operand types "
        "that match the parent loop return types: (), but found: ('!cuda_tile.tile<i32>')"
    ]
    # break inside a for (not a loop): the ancestor chain rule, with a note at the for
    block = Block([S32])
    then_b = Block()
    then_b.append(op("break"))
    cond = values(TileType((), I1))[0]
    block.append(op("if", [cond], [], regions=[region(then_b), Region()]))
    block.append(op("continue"))
    f = op("for", [lb, ub, st], [], regions=[region(block)], loc=FileLineColLoc("t.mlir", 2, 1))
    diag = DiagnosticEngine()
    verify_module(module(func([f])), diag)
    (err,) = diag.diagnostics
    assert err.message == (
        "'cuda_tile.break' op can only be nested within a ancestor chain of 'cuda_tile.loop', "
        "'cuda_tile.if' operations"
    )
    assert err.notes[0].message == "see unexpected ancestor operation"
    assert err.notes[0].loc == FileLineColLoc("t.mlir", 2, 1)


def test_return_checks():
    (v,) = values(TileType((2,), F32))
    f = func([op("return", [v])], result_types=[TileType((2,), I8)], name="kernel")
    assert errors(module(f), module=True) == [
        "error: type of return operand 0 ('!cuda_tile.tile<2xf32>') doesn't match function "
        "result type ('!cuda_tile.tile<2xi8>') in function @kernel"
    ]
    f = func([op("return")], result_types=[S32], name="kernel")
    assert errors(module(f), module=True) == [
        "error: 'cuda_tile.return' op has 0 operands, but enclosing function (@kernel) returns 1"
    ]


# --------------------------------------------------------------------------- structure


def test_entry_and_globals():
    e = func([op("return")], arg_types=[TileType((4,), F32)], kind="entry")
    assert errors(e) == [
        "error: 'cuda_tile.entry' op entry op must have scalar types (rank 0 !cuda_tile.tile)"
    ]
    e = func([op("return")], result_types=[S32], kind="entry")
    assert errors(e) == ["error: 'cuda_tile.entry' op entry op must not return values"]
    g = op(
        "global",
        attrs={"sym_name": StringAttr("g1"), "value": DenseElementsAt(TileType((2,), F16))},
    )
    getter = op("get_global", [], [TileType((), PointerType(F32))], {"name": SymbolRefAttr("g1")})
    m = module(g, func([getter, op("return")]))
    assert errors(m, module=True) == [
        "error: 'cuda_tile.get_global' op pointee type of result type '!cuda_tile.ptr<f32>' "
        "does not match type 'f16' of the global @g1"
    ]
    getter = op("get_global", [], [TileType((), PointerType(F32))], {"name": SymbolRefAttr("g2")})
    assert errors(module(g, func([getter, op("return")])), module=True) == [
        "error: 'cuda_tile.get_global' op 'g2' does not reference a valid global"
    ]
    g2 = op(
        "global",
        attrs={"sym_name": StringAttr("g"), "value": DenseElementsAt(TileType((2, 2), F16))},
    )
    assert errors(g2) == ["error: 'cuda_tile.global' op type must have rank 1"]


def DenseElementsAt(t):
    return DenseElementsAttr(t, (0,))


def _hinted_entry(hints):
    ohs = OptimizationHintsAttr(tuple((k, DictAttr(tuple(v.items()))) for k, v in hints.items()))
    return func([op("return")], kind="entry", attrs={"optimization_hints": ohs})


def test_entry_hints_warn_and_error():
    e = _hinted_entry({"sm_100a": {"num_cta_in_cga": IntegerAttr(2)}})
    assert errors(e) == []
    assert errors(e, VerifyOptions(unsupported_hints=True)) == ["warning: unknown hint key sm_100a"]
    assert errors(e, VerifyOptions(unsupported_hints=True, err_hints=True)) == [
        "warning: unknown hint key sm_100a",
        "error: 'cuda_tile.entry' op Optimization hints verification failed",
    ]
    e = _hinted_entry(
        {"sm_100": {"num_cta_in_cga": IntegerAttr(3), "num_worker_warps_per_cta": StringAttr("a")}}
    )
    assert errors(e, VerifyOptions(unsupported_hints=True)) == [
        "warning: expected power-of-two ≤ 16 for sm_100.num_cta_in_cga",
        "warning: integer value expected for sm_100.num_worker_warps_per_cta",
    ]
    e = _hinted_entry({"sm_80": {"num_cta_in_cga": IntegerAttr(2)}})
    assert errors(e, VerifyOptions(unsupported_hints=True)) == [
        "warning: expected 1 for sm_80.num_cta_in_cga"
    ]


# --------------------------------------------------------------------------- reduce / scan


def _reduce(name, operand_types, result_types, identities, arg_types, yield_idx, dim=0, body=()):
    vals = values(*operand_types)
    block = Block(list(arg_types))
    for o in body:
        block.append(o)
    block.append(op("yield", [block.args[i] for i in yield_idx]))
    attrs = {"dim": IntegerAttr(dim, I32), "identities": ArrayAttr(tuple(identities))}
    if name == "scan":
        from tilegen.runtime.attributes import BoolAttr

        attrs["reverse"] = BoolAttr(False)
    return op(name, list(vals), list(result_types), attrs, regions=[region(block)])


def test_reduce_verify_and_infer():
    t8f, t8i = TileType((8,), F32), TileType((8,), I32)
    zf, zi = FloatAttr(0.0, F32), IntegerAttr(0, I32)
    r = _reduce("reduce", [t8f, t8i], [SF32, S32], [zf, zf], [SF32] * 2 + [S32] * 2, [0, 2])
    assert errors(r) == [
        "error: 'cuda_tile.reduce' op expect same type for operand at index: 1 and identity at "
        "index: 1 but got: 'i32' and 'f32'"
    ]
    r = _reduce(
        "reduce", [t8f, t8i], [TileType((1,), F32), S32], [zf, zi], [SF32] * 2 + [S32] * 2, [0, 2]
    )
    assert errors(r) == [
        "error: 'cuda_tile.reduce' op inferred type(s) '!cuda_tile.tile<f32>', "
        "'!cuda_tile.tile<i32>' are incompatible with return type(s) of operation "
        "'!cuda_tile.tile<1xf32>', '!cuda_tile.tile<i32>'",
        "error: 'cuda_tile.reduce' op failed to infer returned types",
    ]
    r = _reduce("reduce", [t8f], [SF32], [zf], [SF32, SF32], [0], dim=10)
    assert errors(r) == ["error: 'cuda_tile.reduce' op dimension (10) is out of bound [0, 1)"]
    s = _reduce("scan", [t8f], [TileType((16,), F32)], [zf], [SF32, SF32], [0])
    assert errors(s) == [
        "error: 'cuda_tile.scan' op expect same type for operand at index: 0 and result at "
        "index: 0"
    ]
    # f16/bf16 identities are interchangeable
    t8h = TileType((8,), F16)
    r = _reduce(
        "reduce",
        [t8h],
        [TileType((), F16)],
        [FloatAttr(0.0, FloatType("bf16"))],
        [TileType((), F16)] * 2,
        [0],
    )
    assert errors(r) == []


def test_reduce_body_rules():
    t8f = TileType((8,), F32)
    zf = FloatAttr(0.0, F32)
    r = _reduce("reduce", [t8f], [SF32], [zf], [SF32, S32], [0])
    assert errors(module(func([r, op("return")])), module=True) == [
        "error: 'cuda_tile.reduce' op expect same element type for block argument at index: 0 "
        "and 1 but got: 'f32' and 'i32'"
    ]
    printer = op(
        "print_tko",
        [],
        [TOKEN],
        {"str": StringAttr("step"), "operandSegmentSizes": DenseArrayAttr(I32, (0, 0))},
        loc=FileLineColLoc("t.mlir", 9, 7),
    )
    r = _reduce("reduce", [t8f], [SF32], [zf], [SF32, SF32], [0], body=[printer])
    diag = DiagnosticEngine()
    verify_module(module(func([r, op("return")])), diag)
    (d,) = diag.diagnostics
    assert d.message == (
        "'cuda_tile.print_tko' op only pure operations are allowed inside 'cuda_tile.reduce'"
    )
    assert d.loc == FileLineColLoc("t.mlir", 9, 7)


# --------------------------------------------------------------------------- mma / atomics


def test_mma_shapes_and_types():
    lhs, rhs, acc = values(TileType((4, 16), F16), TileType((8, 16), F16), TileType((4, 16), F32))
    (msg,) = errors(op("mmaf", [lhs, rhs, acc], [acc.type]))
    assert msg.endswith(
        "dim 1 of lhs (16) and dim 0 of rhs (8) must match, but got lhs shape (4, 16) and rhs "
        "shape (8, 16)"
    )
    lhs, rhs, acc = values(TileType((4, 8), F16), TileType((8, 16), F16), TileType((4, 16), F64))
    assert errors(op("mmaf", [lhs, rhs, acc], [acc.type])) == [
        "error: 'cuda_tile.mmaf' op unsupported combination of element types. Input type 'f16' "
        "expects accumulator/result type to be one of {'f16', 'f32'}, but got 'f64'"
    ]
    e4, e5, e8 = FloatType("f8E4M3FN"), FloatType("f8E5M2"), FloatType("f8E8M0FNU")
    lhs, rhs, acc, ls, rs = values(
        TileType((128, 128), e5),
        TileType((128, 128), e5),
        TileType((128, 128), F32),
        TileType((128, 8), e8),
        TileType((8, 128), e8),
    )
    assert errors(op("mmaf_scaled", [lhs, rhs, acc, ls, rs], [acc.type])) == [
        "error: 'cuda_tile.mmaf_scaled' op shape error: f8 element type requires block scale "
        "factor of lhs_scale and rhs_scale to be 32, but got 16"
    ]
    ls2, rs2 = values(TileType((128, 4), e4), TileType((4, 128), e4))
    assert errors(op("mmaf_scaled", [lhs, rhs, acc, ls2, rs2], [acc.type])) == [
        "error: 'cuda_tile.mmaf_scaled' op unsupported combination of element types. Scale type "
        "'f8E4M3FN' expects lhs and rhs element types to be 'f4E2M1FN', but got 'f8E5M2'"
    ]


def _attrs(ordering, scope, mode=None, segs=None):
    a = {
        "memory_ordering_semantics": IntegerAttr(ordering, I32),
        "memory_scope": IntegerAttr(scope, I32),
    }
    if mode is not None:
        a["mode"] = IntegerAttr(mode, I32)
    if segs is not None:
        a["operandSegmentSizes"] = DenseArrayAttr(I32, segs)
    return a


def test_atomics():
    ptrs, arg = values(TileType((8,), PointerType(F32)), TileType((8,), I32))
    o = op("atomic_rmw_tko", [ptrs, arg], [arg.type, TOKEN], _attrs(1, 1, 3, (1, 1, 0, 0)))
    assert errors(o) == [
        "error: 'cuda_tile.atomic_rmw_tko' op expected pointee type ('f32') to match element "
        "type of 'arg' ('i32')"
    ]
    ptrs, arg = values(TileType((8,), PointerType(I32)), TileType((8,), I32))
    o = op("atomic_rmw_tko", [ptrs, arg], [arg.type, TOKEN], _attrs(1, 1, 4, (1, 1, 0, 0)))
    assert errors(o) == [
        "error: 'cuda_tile.atomic_rmw_tko' op 'addf' works only with floats f16, bf16, f32, and "
        "f64"
    ]
    o = op("atomic_rmw_tko", [ptrs, arg], [arg.type, TOKEN], _attrs(0, 1, 3, (1, 1, 0, 0)))
    assert errors(o) == [
        "error: 'cuda_tile.atomic_rmw_tko' op memory ordering semantics must be one of: "
        "relaxed, acquire, release, acq_rel"
    ]
    pv = PartitionViewType((2, 2), TensorViewType(F32, (16, 16), (16, 1)))
    view, i, val = values(pv, S32, TileType((4, 4), F32))
    o = op("atomic_red_view_tko", [view, i, i, val], [TOKEN], _attrs(1, 1, 4, (1, 2, 1, 0)))
    assert errors(o) == [
        "error: 'cuda_tile.atomic_red_view_tko' op view tile shape 2, 2 must match value shape "
        "4, 4 for element-wise atomic operations"
    ]
    view, i, val = values(pv, S32, TileType((2, 2), F32))
    o = op("atomic_red_view_tko", [view, i, val], [TOKEN], _attrs(1, 1, 4, (1, 1, 1, 0)))
    assert errors(o) == [
        "error: 'cuda_tile.atomic_red_view_tko' op expected 2 index operand(s) for view with "
        "tile rank 2, got 1"
    ]


# --------------------------------------------------------------------------- tokens / debug


def test_join_tokens_and_print():
    (t,) = values(TOKEN)
    assert errors(op("join_tokens", [t], [TOKEN])) == [
        "error: 'cuda_tile.join_tokens' op expect two or more tokens"
    ]
    (x,) = values(SF32)
    p = op(
        "print_tko",
        [x],
        [TOKEN],
        {"str": StringAttr("%d %"), "operandSegmentSizes": DenseArrayAttr(I32, (1, 0))},
    )
    assert errors(p) == ["error: 'cuda_tile.print_tko' op found unterminated format expression"]
    p = op(
        "print_tko",
        [x],
        [TOKEN],
        {"str": StringAttr("100%% %f %d"), "operandSegmentSizes": DenseArrayAttr(I32, (1, 0))},
    )
    assert errors(p) == [
        "error: 'cuda_tile.print_tko' op incorrect number of operands: expected 2, found 1"
    ]


def test_assume_predicates():
    def assume(pred, t):
        (v,) = values(t)
        return op("assume", [v], [t], {"predicate": pred})

    t16 = TileType((16,), I32)
    assert errors(assume(DivByAttr(3), t16)) == [
        "error: 'cuda_tile.assume' op 'cuda_tile.div_by' divisor must be a power of 2"
    ]
    assert errors(assume(DivByAttr(4, 4, 1), t16)) == [
        "error: 'cuda_tile.assume' op 'cuda_tile.div_by' every_dim (1) must be >= 0 and < tile "
        "rank (1)"
    ]
    assert errors(assume(SameElementsAttr((1,)), S32)) == [
        "error: 'cuda_tile.assume' op expected number of values in 'cuda_tile.same_elements' (1) "
        "to match rank of constrained tile (0)"
    ]
    assert errors(assume(BoundedAttr(0, 200), TileType((4,), I8))) == [
        "error: 'cuda_tile.assume' op 'cuda_tile.bounded' expects upper bound to be within "
        "[-128, 127]"
    ]
    assert errors(assume(BoundedAttr(None, 5), t16)) == []


def test_module_symbols_are_unique():
    first = func([op("return")], name="k", kind="entry")
    second = func([op("return")], name="k", kind="entry")
    second.loc = FileLineColLoc("t.mlir", 12, 3)
    diag = DiagnosticEngine()
    verify_module(module(first, second), diag)
    (d,) = diag.diagnostics
    assert d.message == "redefinition of symbol named 'k'"
    assert d.loc == FileLineColLoc("t.mlir", 12, 3)
    assert d.notes[0].message == "see existing symbol definition here"


def test_loop_carried_values_and_cas():
    (init,) = values(SF32)
    block = Block([SF32, SF32])
    block.append(op("continue", [init]))
    loop = op("loop", [init], [], regions=[region(block)])
    assert errors(module(func([loop])), module=True) == [
        "error: 'cuda_tile.loop' op mismatch in number of region iterator values and loop "
        "iterator inits: 2 vs 1"
    ]
    ptrs, cmp, val = values(TileType((2,), PointerType(I8)), TileType((2,), I8), TileType((2,), I8))
    cas = op(
        "atomic_cas_tko", [ptrs, cmp, val], [val.type, TOKEN], _attrs(1, 1, None, (1, 1, 1, 0, 0))
    )
    assert errors(cas) == [
        "error: 'cuda_tile.atomic_cas_tko' op expect only float or integer types with 32 or 64 bit"
    ]
