"""The PTX parser on hand-written snippets: structure, operands and located errors."""

from __future__ import annotations

import pytest

from tilegen.runtime.ptx.parser import Addr, Imm, PtxSyntaxError, Reg, Sym, Vec, parse_ptx

SRC = """
.version 8.0
.target sm_90a
.address_size 64
.visible .global .align 8 .b8 META[64];
.visible .entry k(
    .param .u64 .ptr .global .align 1 k_param_0,
    .param .u32 k_param_1
)
.reqntid 64, 1, 1
{
    .reg .pred %p<3>;
    .reg .b32 %r<9>;
    .shared .align 128 .b8 smem[256];
    ld.param.b64 %rd1, [k_param_0];
$L__BB0_1:
    @!%p1 bra $L__BB0_1;
    ld.shared.v2.b32 {%r1, %r2}, [%rd1+16];
    mov.b32 %r3, 0f3F800000;
    shfl.sync.bfly.b32 %r4|%p2, %r3, 1, 31, -1;
    ret;
}
"""


def test_module_structure() -> None:
    mod = parse_ptx(SRC)
    assert (mod.version, mod.target, mod.address_size) == ("8.0", "sm_90a", 64)
    assert [g.name for g in mod.globals] == ["META"]
    entry = mod.entries["k"]
    assert [(p.name, p.type) for p in entry.params] == [("k_param_0", "u64"), ("k_param_1", "u32")]
    assert entry.directives["reqntid"] == [64, 1, 1]
    assert entry.regs == {"%p": "pred", "%r": "b32"}
    assert [(v.name, v.size, v.align) for v in entry.shared] == [("smem", 256, 128)]
    assert entry.labels == {"$L__BB0_1": 1}
    assert [i.opcode for i in entry.body] == [
        "ld.param.b64",
        "bra",
        "ld.shared.v2.b32",
        "mov.b32",
        "shfl.sync.bfly.b32",
        "ret",
    ]


def test_operands() -> None:
    body = parse_ptx(SRC).entries["k"].body
    assert body[0].operands == [Reg("%rd1"), Addr(Sym("k_param_0"), 0)]
    assert body[1].pred == ("%p1", True) and body[1].operands == [Sym("$L__BB0_1")]
    assert body[2].operands[0] == Vec((Reg("%r1"), Reg("%r2")))
    assert body[2].operands[1] == Addr(Reg("%rd1"), 16)
    imm = body[3].operands[1]
    assert isinstance(imm, Imm) and imm.value == 1.0 and imm.bits == 0x3F800000
    assert body[4].operands[:2] == [Reg("%r4"), Reg("%p2")]
    assert body[4].operands[5] == Imm(-1)
    assert body[4].line == 20


@pytest.mark.parametrize(
    "text,where,msg",
    [
        (
            ".version 8.0\n.entry k(\n .param .u32 a\n) {\n  add.s32 %r1, %r2 %r3;\n}",
            "5:20",
            "expected ',' or ';'",
        ),
        (".version 8.0\n.entry k() {\n  mov.b32 %r1, #;\n}", "3:16", "unexpected character"),
        (".version 8.0\n.bogus\n", "2:1", "unexpected '.bogus' at module level"),
        (".version 8.0\n.entry k() {\n  mov.b32 %r1, 1;\n", "3:17", "unexpected end of input"),
    ],
)
def test_located_errors(text: str, where: str, msg: str) -> None:
    with pytest.raises(PtxSyntaxError) as exc:
        parse_ptx(text, "bad.ptx")
    assert str(exc.value).startswith(f"bad.ptx:{where}: error:")
    assert msg in str(exc.value)
