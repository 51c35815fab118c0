"""The nv_tileaa spec is complete: seed 000's roster, defined constraints, known hooks."""

from __future__ import annotations

from collections import Counter

from tilegen.runtime.opdef import all_ops
from tilegen.runtime.verify.constraints import known_type_constraints
from tilegen.runtime.verify.hooks import get_hook
from tilegen.runtime.verify.rules import RULE_KINDS

#: Seed 000's semantic families, verbatim.
ROSTER = {
    "math": "addf subf mulf divf fma sqrt rsqrt exp2 clampf mulhiui",
    "dot": "dot conv_dot reduce scan histogram",
    "shape": "splat broadcast expand_dims extract extract_slice view cat permute make_range "
    "generate block_tile conv_tile get_dim_size",
    "pointer": "addptr int_to_ptr ptr_to_int make_memref bitcast fp_to_fp extern_elementwise "
    "elementwise_inline_asm call_elementwise_intrinsic",
    "memory": "get_global load store tiled_load tiled_store gather_load scatter_store atomic_cas "
    "atomic_rmw tiled_atomic_rmw",
    "tokens": "create_mem_token join_mem_token mark_for_reuse assert assume optimization_barrier "
    "pragma message print",
    "structure": "func call return yield global launch_func execute plugin inject_ir",
    "grid": "get_program_id get_num_programs is_valid_program_id cancel_next_program_id "
    "create_queue queue.get queue.put queue.yield",
}


def _ops():
    return [o for o in all_ops() if o.dialect == "nv_tileaa"]


def test_roster_matches_seed_000_by_family() -> None:
    got: dict[str, set[str]] = {}
    for o in _ops():
        got.setdefault(o.family, set()).add(o.mnemonic)
    assert got == {f: set(names.split()) for f, names in ROSTER.items()}
    assert Counter(o.family for o in _ops()) == {f: len(n.split()) for f, n in ROSTER.items()}


def test_every_value_constraint_is_defined() -> None:
    known = known_type_constraints()
    missing = {(o.name, v.type) for o in _ops() for v in (*o.operands, *o.results)}
    assert not {m for m in missing if m[1] not in known}


def test_every_rule_kind_and_hook_exists() -> None:
    for o in _ops():
        assert o.opcode is None, o.name
        for rule in o.verify:
            if "custom" in rule:
                assert get_hook(rule["custom"]) is not None, (o.name, rule)
            else:
                assert set(rule) <= set(RULE_KINDS), (o.name, rule)


def test_memory_ops_count_token_outside_segments() -> None:
    mem = [o for o in _ops() if o.has_trait("TrailingTokenOperand")]
    assert {o.mnemonic for o in mem} == set(ROSTER["memory"].split()) - {"get_global"}
    for o in mem:
        assert o.operands[-1].name == "token" and o.operands[-1].kind == "optional"
        assert len(o.segmented_operands) == len(o.operands) - 1
