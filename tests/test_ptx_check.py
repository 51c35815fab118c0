"""The simulator's load-time operand checks (runtime/ptx/check.py) against ptxas, rule by rule:
each snippet is assembled by ptxas in the test, and the checker must agree with its verdict
(both refuse, or both accept); a refusal must name the PTX line and the rule."""

from __future__ import annotations

import pytest

from tilegen.runtime.ptx.assemble import find_ptxas, verdict
from tilegen.runtime.ptx.check import PtxCheckError, check_module
from tilegen.runtime.ptx.parser import parse_ptx

pytestmark = pytest.mark.skipif(find_ptxas() is None, reason="ptxas (nvidia-cuda-nvcc) missing")

PRELUDE = """.version 8.8
.target sm_90a
.address_size 64
.global .align 8 .b8 gvar[64];
.visible .entry k(.param .u64 k_p, .param .u32 k_q)
.reqntid 128
{
    .reg .pred %p<8>;
    .reg .b16 %h<8>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<24>;
    .reg .f32 %f<8>;
    .reg .u32 %u<8>;
    .shared .align 16 .b8 smem[1024];
$L:
"""
LINE = PRELUDE.count("\n") + 1  # the snippet's line


def kernel(body: str) -> str:
    return f"{PRELUDE}    {body}\n    ret;\n}}\n"


# (snippet, rule the checker names, or None when both accept)
REFUSED = {
    # the examples
    "issue_add_s32_with_b64": ("add.s32 %r2, %r1, %rd20;", "operand-width"),
    "issue_setp_u32_with_b64": ("setp.lt.u32 %p0, %r2, %rd3;", "operand-width"),
    "issue_mov_u32_from_b64": ("mov.u32 %r2, %rd3;", "operand-width"),
    "issue_mul_wide_of_b64": ("mul.wide.s32 %rd4, %rd3, 4;", "operand-width"),
    "issue_undeclared_register": ("add.s32 %r2, %r1, %r9;", "undeclared-register"),
    # one per rule
    "int_instruction_float_register": ("add.s32 %r2, %r1, %f3;", "operand-type"),
    "float_instruction_unsigned_register": ("add.f32 %f2, %f1, %u3;", "operand-type"),
    "predicate_destination": ("setp.lt.u32 %r0, %r2, %r3;", "operand-type"),
    "wide_result_narrow_register": ("mul.wide.u32 %r4, %r3, 4;", "operand-width"),
    "mad_wide_narrow_addend": ("mad.wide.s32 %rd4, %r3, 4, %r1;", "operand-width"),
    "shift_amount_b64": ("shl.b32 %r1, %r2, %rd3;", "operand-width"),
    "selp_condition_not_pred": ("selp.b32 %r1, %r2, %r3, %r4;", "operand-type"),
    "integer_immediate_for_float": ("add.f32 %f2, %f1, 1;", "immediate"),
    "float_immediate_for_integer": ("mov.u32 %r1, 1.0;", "immediate"),
    "immediate_for_half": ("add.f16 %h1, %h2, 0f3F800000;", "immediate"),
    "immediate_destination": ("add.s32 1, %r1, 2;", "immediate"),
    "vector_arity": ("ld.global.v4.u32 {%r1, %r2, %r3}, [%rd1];", "vector-arity"),
    "pack_arity": ("mov.b32 %r1, {%h1, %h2, %h3};", "vector-arity"),
    "vector_mixed_widths": ("ld.global.v2.u32 {%r1, %rd2}, [%rd1];", "vector-elements"),
    "shared_access_to_global_variable": ("ld.shared.u32 %r1, [gvar];", "state-space"),
    "global_access_to_shared_variable": ("ld.global.u32 %r1, [smem];", "state-space"),
    "kernel_param_outside_param_space": ("ld.shared.u32 %r1, [k_q];", "state-space"),
    "immediate_address_outside_local": ("ld.global.u32 %r1, [100];", "state-space"),
    "32_bit_global_address": ("ld.global.u32 %r1, [%r1];", "address-register"),
    "float_address_register": ("ld.global.u32 %r1, [%f1];", "address-register"),
    "narrow_load_into_float": ("ld.global.u8 %f1, [%rd1];", "operand-type"),
    "store_from_narrow_register": ("st.global.u32 [%rd1], %h1;", "operand-width"),
    "cvt_source_narrower": ("cvt.u32.u64 %r1, %r1;", "operand-width"),
    "packed_fp8_destination_b32": ("cvt.rn.satfinite.e4m3x2.f32 %r1, %f1, %f2;", "operand-width"),
    "guard_not_pred": ("@%r1 bra $L;", "predicate-guard"),
    "special_register_outside_mov": ("add.u32 %r1, %tid.x, 1;", "special-register"),
    "special_register_width": ("mov.u64 %rd2, %tid.x;", "operand-width"),
    "unjoined_predicate_output": ("elect.sync %r1, %p1, -1;", "operand-count"),
    "operand_count": (
        "mbarrier.arrive.expect_tx.shared.b64 %rd1, [smem], %r2, 1;",
        "operand-count",
    ),
    "mbarrier_state_width": ("mbarrier.arrive.shared.b64 %r1, [smem];", "operand-width"),
    "setmaxnreg_range": ("setmaxnreg.dec.sync.aligned.u32 20;", "immediate-range"),
    "branch_to_register": ("bra %r1;", "operand-kind"),
    "unknown_symbol": ("ld.shared.u32 %r1, [nosuch];", "unknown-symbol"),
    "unknown_instruction": ("frob.b32 %r1, %r2;", "unknown-instruction"),
}
ACCEPTED = {
    "relaxed_narrow_load": "ld.global.u8 %r1, [%rd1];",
    "relaxed_wide_store": "st.global.u8 [%rd1], %rd1;",
    "relaxed_cvt_destination": "cvt.u32.u64 %rd1, %rd1;",
    "bit_type_float_register": "add.f32 %f2, %f1, %r3;",
    "hex_float_for_b32": "mov.b32 %f1, 0f3F800000;",
    "signed_unsigned_mix": "add.u32 %r2, %r1, %u3;",
    "shared_symbol_address": "mov.u32 %r2, smem;",
    "setp_f16": "setp.eq.f16 %p0, %h1, %h2;",
    "packed_fp8_from_f32": "cvt.rn.satfinite.e4m3x2.f32 %h1, %f1, %f2;",
    "packed_fp8_to_f16x2": "cvt.rn.f16x2.e4m3x2 %r1, %h1;",
    "cp_async_mbarrier_arrive_noinc": "cp.async.mbarrier.arrive.noinc.shared.b64 [smem];",
    "elect_sink": "elect.sync _|%p1, -1;",
    "try_wait_with_suspend_hint": "mbarrier.try_wait.parity.shared.b64 %p1, [smem], %r2, %r3;",
    "vector_with_sink": "ld.global.v4.u32 {%r1, _, %r3, %r4}, [%rd1];",
    "unpack_to_sink": "mov.b64 {%r1, _}, %rd1;",
    # tileiras's f16 scans and reductions (sm_90)
    "max_f16": "max.f16 %h1, %h2, %h3;",
    "min_nan_f16x2": "min.NaN.f16x2 %r1, %r2, %r3;",
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_by_both(name: str) -> None:
    body, rule = REFUSED[name]
    ptx = kernel(body)
    assert verdict(ptx) is not None, f"ptxas accepts {body!r}"
    with pytest.raises(PtxCheckError) as exc:
        check_module(parse_ptx(ptx), "k.ptx")
    msg = str(exc.value)
    assert msg.startswith(f"k.ptx:{LINE}: error: ") and msg.endswith(f"[{rule}]"), msg


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_accepted_by_both(name: str) -> None:
    ptx = kernel(ACCEPTED[name])
    assert verdict(ptx) is None, f"ptxas refuses {ACCEPTED[name]!r}: {verdict(ptx)}"
    check_module(parse_ptx(ptx), "k.ptx")


def test_messages_name_operand_and_types() -> None:
    with pytest.raises(PtxCheckError) as exc:
        check_module(parse_ptx(kernel("add.s32 %r2, %r1, %rd20;")), "k.ptx")
    assert str(exc.value) == (
        f"k.ptx:{LINE}: error: add.s32: operand 3 (%rd20): .b64 register where the .s32 "
        "operand needs 32 bits [operand-width]"
    )


def test_nested_scopes_shadow_registers() -> None:
    # inline-asm scopes declare registers of their own; outside them the name is undeclared
    inner = "{\n    .reg .b64 %q<2>;\n    mov.u64 %q1, 7;\n    }"
    check_module(parse_ptx(kernel(inner)), "k.ptx")
    with pytest.raises(PtxCheckError, match="undeclared register %q1"):
        check_module(parse_ptx(kernel(inner + "\n    mov.u64 %q1, 7;")), "k.ptx")


def test_every_row_declares_or_derives_its_forms() -> None:
    from tilegen.generated.ptx.instructions import INSTRUCTIONS
    from tilegen.runtime.ptx.check import parse_class

    for row in INSTRUCTIONS.values():
        if row.get("handwritten"):
            assert row.get("forms"), f"hand-written row {row['name']} declares no operand forms"
        for form in row.get("forms", ()):
            for cls in form["operands"]:
                assert parse_class(cls).kinds, (row["name"], cls)
