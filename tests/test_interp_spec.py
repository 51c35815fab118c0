"""The spec's ``semantics`` entries and the interpreter agree: every op is covered exactly once."""

from __future__ import annotations

import numpy as np

from tilegen.runtime.interp.elementwise import semantics_of
from tilegen.runtime.interp.executor import HANDLERS, STRUCTURAL
from tilegen.runtime.interp import semlib
from tilegen.runtime.opdef import all_ops


def public_ops():
    return [o for o in all_ops() if not o.test_only and o.dialect == "cuda_tile"]


def test_every_public_op_has_semantics():
    missing = [o.name for o in public_ops() if not o.semantics]
    assert not missing, missing


def test_interpreter_kind_matches_handlers():
    declared = {o.name for o in public_ops() if o.semantics.get("kind") == "interpreter"}
    handled = {n for n in HANDLERS if n.startswith("cuda_tile.") and not n.endswith(".print")}
    handled |= set(STRUCTURAL)
    assert declared == handled, (sorted(declared - handled), sorted(handled - declared))


def test_nv_tileaa_ops_are_declared_or_handled_not_both():
    nv = [o for o in all_ops() if o.dialect == "nv_tileaa"]
    declared = {o.name for o in nv if semantics_of(o) is not None and semantics_of(o).expr}
    handled = {n for n in HANDLERS if n.startswith("nv_tileaa.")}
    assert declared and handled and not declared & handled, sorted(declared & handled)


def test_expressions_compile_and_name_known_things():
    import builtins
    import keyword

    for o in public_ops():
        sem = semantics_of(o)
        if sem is None or sem.code is None:
            continue
        names = set(sem.code.co_names)
        known = set(semlib.NAMESPACE) | {"RESULT", "RESULT_SHAPE", "WIDTH", "SIGNED", "TYPES"}
        known |= {d.name + ("_" if keyword.iskeyword(d.name) else "") for d in o.operands}
        known |= {a.name for a in o.attributes} | set(dir(builtins))
        attrs_of_np = {n for n in names if hasattr(np, n)}
        unknown = names - known - attrs_of_np
        assert not unknown, (o.name, sorted(unknown))


def test_modifier_keys_name_real_attributes():
    for o in public_ops():
        s = o.semantics
        for key in ("rounding", "ftz"):
            if key in s:
                assert o.attr(s[key]) is not None, (o.name, key, s[key])
        sg = s.get("signedness")
        if sg and sg not in ("signed", "unsigned"):
            assert o.attr(sg) is not None and o.attr(sg).enum == "Signedness", (o.name, sg)


def test_evaluate_op_for_constant_folding():
    from tilegen.runtime.attributes import EnumAttr
    from tilegen.runtime.interp.elementwise import evaluate_op
    from tilegen.runtime.ir import Block, Operation
    from tilegen.runtime.types import FloatType, IntegerType, TileType

    t = TileType((2,), FloatType("f32"))
    block = Block([t, t])
    op = Operation(
        "cuda_tile.mulf",
        operands=list(block.args),
        result_types=[t],
        attributes={"rounding_mode": EnumAttr("RoundingMode", 0)},
    )
    (r,) = evaluate_op(op, [np.array([1.5, -2.0], np.float32), np.array([2.0, 0.25], np.float32)])
    assert r.dtype == np.float32 and r.tolist() == [3.0, -0.5]
    i = TileType((), IntegerType(32))
    tok = Operation("cuda_tile.make_token", result_types=[i])
    assert evaluate_op(tok, []) is None  # hand-written ops have no expression
