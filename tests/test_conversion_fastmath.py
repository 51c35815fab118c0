"""Rounding ``approx``/``full``, ``flush_to_zero``, ``ptr_attr`` and ``alloca`` end to end:
cuda_tile -> nv_tileaa (what the conversion carries and how), -> PTX (the selection rows of
spec/ptx/selection.yaml that honour it), the PTX simulator's ``.ftz`` and the interpreter."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from test_codegen_elementwise import N, kernel, run  # noqa: E402

from tilegen.runtime.asm import parse_module, print_module  # noqa: E402
from tilegen.runtime.attributes import (  # noqa: E402
    FLUSH_TO_ZERO,
    ArrayAttr,
    DictAttr,
    OpaqueAttr,
    StringAttr,
    fastmath_attr,
    fastmath_flags,
)
from tilegen.runtime.ptxsim import compile_to_ptx  # noqa: E402
from tilegen.runtime.conversion import convert_module  # noqa: E402
from tilegen.runtime.conversion.driver import ConversionError  # noqa: E402
from tilegen.runtime.conversion.declared import (  # noqa: E402
    ConversionContext,
    ConversionSpecError,
    _check_row,
)
from tilegen.runtime.diagnostics import DiagnosticEngine  # noqa: E402
from tilegen.runtime.interp import run_module  # noqa: E402
from tilegen.runtime.targets import Target  # noqa: E402
from tilegen.runtime.ptx.sim.declared import evaluate, match  # noqa: E402
from tilegen.runtime.verify import verify_module  # noqa: E402

#: targets below tilegen's floor (sm_80), built directly to probe the selection rows that name
#: them (a user-facing name such as "sm_70" is refused by the target rule)
SM70, SM75 = Target(70), Target(75)

F32 = f"tile<{N}xf32>"
TINY = np.float32(1e-39)  # an f32 subnormal


def lowered(body: str, nin: int = 1, sm: str = "sm_90"):
    src = kernel(body, ["f32"] * nin, "f32")
    out = convert_module(parse_module(src), sm)
    diag = DiagnosticEngine()
    assert verify_module(out, diag), [d.format() for d in diag.diagnostics]
    return out


def the(module, name: str):
    (op,) = [op for op in module.walk() if op.name == name]
    return op


def ptx_of(body: str, nin: int = 1, sm: str = "sm_90") -> str:
    return compile_to_ptx(parse_module(kernel(body, ["f32"] * nin, "f32")), sm)


# --------------------------------------------------------------------------- approx / full


def test_fastmath_helpers_round_trip_mlir_spelling():
    assert fastmath_attr({"afn"}) == OpaqueAttr("#arith.fastmath<afn>")
    assert fastmath_attr({"contract", "afn"}).text == "#arith.fastmath<contract,afn>"
    assert fastmath_attr(set()) is None
    assert fastmath_flags(OpaqueAttr("#arith.fastmath<none>")) == frozenset()
    assert "afn" in fastmath_flags(OpaqueAttr("#arith.fastmath<fast>"))
    assert fastmath_flags(StringAttr("contract")) == {"contract"}  # seed 003's string form


@pytest.mark.parametrize("op,target", [("exp", "math.exp"), ("tanh", "math.tanh")])
def test_approx_rounding_becomes_fastmath_afn(op, target):
    approx = the(lowered(f"%r = {op} %x0 rounding<approx> : {F32}"), target)
    assert approx.attributes["fastmath"] == OpaqueAttr("#arith.fastmath<afn>")
    assert "rounding_mode" not in approx.attributes
    for body in (f"%r = {op} %x0 rounding<full> : {F32}", f"%r = {op} %x0 : {F32}"):
        assert "fastmath" not in the(lowered(body), target).attributes  # full: the default
    # the custom form prints it and parses back
    text = print_module(lowered(f"%r = {op} %x0 rounding<approx> : {F32}"))
    assert "fastmath = #arith.fastmath<afn>" in text
    assert print_module(parse_module(text, allow_unregistered=True)) == text


def test_divf_and_sqrt_keep_approx_and_full_as_rounding_mode():
    from tilegen.runtime.codegen.selection import attr_keyword

    for mode in ("approx", "full"):
        div = the(lowered(f"%r = divf %x0, %x1 rounding<{mode}> : {F32}", 2), "nv_tileaa.divf")
        assert attr_keyword(div, "rounding_mode") == mode
    sq = the(lowered(f"%r = sqrt %x0 rounding<approx> : {F32}"), "nv_tileaa.sqrt")
    assert attr_keyword(sq, "rounding_mode") == "approx"


def test_fastmath_rows_are_checked():
    from tilegen.generated.lowerings.cuda_tile_to_nv_tileaa import SPEC

    ctx = ConversionContext(SPEC, 90)

    def row(fastmath: dict) -> dict:
        return {
            "root": "exp",
            "drop": ["rounding_mode"],
            "build": {"op": "math.exp", "fastmath": fastmath},
        }

    _check_row(row({"from": "rounding_mode", "cases": {}}), ctx)
    with pytest.raises(ConversionSpecError, match="unknown fastmath flag"):
        _check_row(row({"from": "rounding_mode", "cases": {"approx": "quick"}}), ctx)
    with pytest.raises(ConversionSpecError, match="not an attribute"):
        _check_row(row({"from": "signedness", "cases": {}}), ctx)


def test_ptx_selects_the_approx_instructions():
    exp = ptx_of(f"%r = exp %x0 rounding<approx> : {F32}")
    assert "mul.rn.f32" in exp and "ex2.approx.f32" in exp and "fma" not in exp
    assert "fma.rn.f32" in ptx_of(f"%r = exp %x0 : {F32}")  # full: the accurate sequence
    assert "tanh.approx.f32" in ptx_of(f"%r = tanh %x0 rounding<approx> : {F32}")
    assert "tanh.approx" not in ptx_of(f"%r = tanh %x0 : {F32}")
    # tanh.approx needs sm_75: sm_70 falls back to the accurate row (the same as rounding<full>)
    old = ptx_of(f"%r = tanh %x0 rounding<approx> : {F32}", sm=SM70)
    assert "tanh.approx" not in old
    assert old == ptx_of(f"%r = tanh %x0 : {F32}", sm=SM70)
    assert "div.approx.f32" in ptx_of(f"%r = divf %x0, %x1 rounding<approx> : {F32}", 2)
    assert "div.full.f32" in ptx_of(f"%r = divf %x0, %x1 rounding<full> : {F32}", 2)
    assert "sqrt.approx.f32" in ptx_of(f"%r = sqrt %x0 rounding<approx> : {F32}")


def test_approx_results_in_the_simulator():
    x = np.linspace(-9, 9, N).astype(np.float32)
    want = np.exp(x.astype(np.float64))
    got = run(f"%r = exp %x0 rounding<approx> : {F32}", [x], np.float32)
    assert np.max(np.abs(got / want - 1)) < 2e-6
    for sm in (SM70, "sm_90"):
        got = run(f"%r = tanh %x0 rounding<approx> : {F32}", [x], np.float32, sm)
        assert np.max(np.abs(got - np.tanh(x.astype(np.float64)))) < 2.0**-10.987
    a = np.linspace(-5, 5, N).astype(np.float32)
    b = np.linspace(0.5, 7, N).astype(np.float32)
    for mode in ("approx", "full"):
        got = run(f"%r = divf %x0, %x1 rounding<{mode}> : {F32}", [a, b], np.float32)
        np.testing.assert_allclose(got, a / b, rtol=2.5e-7)


# --------------------------------------------------------------------------- flush_to_zero

FTZ_OPS = {  # cuda_tile body (with FTZ where flush_to_zero goes) -> lowered op
    "%r = addf %x0, %x1 rounding<nearest_even>FTZ : T": "nv_tileaa.addf",
    "%r = subf %x0, %x1 rounding<zero>FTZ : T": "nv_tileaa.subf",
    "%r = mulf %x0, %x1 rounding<nearest_even>FTZ : T": "nv_tileaa.mulf",
    "%r = divf %x0, %x1 rounding<nearest_even>FTZ : T": "nv_tileaa.divf",
    "%r = divf %x0, %x1 rounding<approx>FTZ : T": "nv_tileaa.divf",
    "%r = divf %x0, %x1 rounding<full>FTZ : T": "nv_tileaa.divf",
    "%r = fma %x0, %x1, %x0 rounding<nearest_even>FTZ : T": "nv_tileaa.fma",
    "%r = sqrt %x0 rounding<nearest_even>FTZ : T": "nv_tileaa.sqrt",
    "%r = sqrt %x0 rounding<approx>FTZ : T": "nv_tileaa.sqrt",
    "%r = rsqrt %x0FTZ : T": "nv_tileaa.rsqrt",
    "%r = exp2 %x0FTZ : T": "nv_tileaa.exp2",
    "%r = maxf %x0, %x1FTZ : T": "arith.maxnumf",
    "%r = minf %x0, %x1FTZ : T": "arith.minnumf",
    "%r = maxf %x0, %x1FTZ propagate_nan : T": "arith.maximumf",
    "%r = minf %x0, %x1FTZ propagate_nan : T": "arith.minimumf",
}
_FLOAT_INS = re.compile(r"^\s*(add|sub|mul|fma|div|sqrt|rcp|ex2|lg2|max|min)\.\S*f32\b", re.M)


def _body(template: str, ftz: bool) -> str:
    return template.replace("FTZ", " flush_to_zero" if ftz else "").replace("T", F32)


@pytest.mark.parametrize("template", list(FTZ_OPS))
def test_flush_to_zero_is_carried_and_becomes_ftz_exactly_when_requested(template):
    nin = 2 if "%x1" in template else 1
    for ftz in (True, False):
        op = the(lowered(_body(template, ftz), nin), FTZ_OPS[template])
        assert (FLUSH_TO_ZERO in op.attributes) is ftz
        ptx = ptx_of(_body(template, ftz), nin)
        ins = [m.group(0).strip() for m in _FLOAT_INS.finditer(ptx)]
        assert ins, ptx
        if ftz:
            assert all(".ftz." in i for i in ins), ins
        else:
            assert ".ftz" not in ptx


def test_flush_to_zero_flushes_in_the_simulator_and_the_interpreter():
    a = np.array([TINY, -TINY, 1.5, 3e-39] * (N // 4), np.float32)
    b = np.array([TINY, TINY, 2.0, -1e-39] * (N // 4), np.float32)
    with np.errstate(all="ignore"):
        exact = {
            "addf": a + b,
            "mulf": np.float32(1e-20) * np.ones(N, np.float32) * np.float32(1e-20),
            "maxf": np.maximum(a, b),
        }
    cases = {
        "addf": (f"%r = addf %x0, %x1 rounding<nearest_even>FTZ : {F32}", [a, b]),
        "maxf": (f"%r = maxf %x0, %x1FTZ : {F32}", [a, b]),
    }
    for name, (body, ins) in cases.items():
        with_ftz = run(body.replace("FTZ", " flush_to_zero"), ins, np.float32)
        without = run(body.replace("FTZ", ""), ins, np.float32)
        np.testing.assert_array_equal(without, exact[name])
        flushed = np.where(np.abs(exact[name]) < np.finfo(np.float32).tiny, 0, exact[name])
        if name == "maxf":  # inputs flushed first: max(+-0, +-0) and max(0, -0)
            fa = np.where(np.abs(a) < np.finfo(np.float32).tiny, 0, a)
            fb = np.where(np.abs(b) < np.finfo(np.float32).tiny, 0, b)
            flushed = np.maximum(fa, fb)
        np.testing.assert_array_equal(with_ftz, flushed)
        # the interpreter on the lowered (nv_tileaa) kernel agrees with the simulator
        src = kernel(body.replace("FTZ", " flush_to_zero"), ["f32", "f32"], "f32")
        args = [("x0", ins[0]), ("x1", ins[1]), ("o", np.zeros(N, np.float32))]
        out = run_module(parse_module(src), args, (1, 1, 1), lower_to="nv_tileaa")["o"]
        np.testing.assert_array_equal(out, with_ftz)
    x = np.full(N, np.float32(1e-20))
    got = run(f"%r = mulf %x0, %x0 rounding<nearest_even> flush_to_zero : {F32}", [x], np.float32)
    assert not got.any() and exact["mulf"].all()  # the subnormal product is flushed


def _ev(opcode: str, *args):
    form = match(opcode)
    assert form is not None, opcode
    return evaluate(form, [np.asarray(a, np.float32) for a in args])


def test_simulator_ftz_flushes_subnormal_inputs_and_results():
    t = np.array([TINY, -TINY], np.float32)
    one = np.ones(2, np.float32)
    for opcode, args, want in [
        ("add.rn.ftz.f32", (t, t), [0, 0]),
        ("sub.rn.ftz.f32", (t, -t), [0, 0]),
        ("mul.rn.ftz.f32", (t, one), [0, 0]),
        ("fma.rn.ftz.f32", (t, one, t), [0, 0]),
        ("div.rn.ftz.f32", (t, one), [0, 0]),
        ("div.approx.ftz.f32", (t, one), [0, 0]),
        ("div.full.ftz.f32", (t, one), [0, 0]),
        ("sqrt.rn.ftz.f32", (np.abs(t),), [0, 0]),
        ("sqrt.approx.ftz.f32", (np.abs(t),), [0, 0]),
        ("rcp.rn.ftz.f32", (np.array([1e38, -1e38], np.float32),), [0, 0]),
        ("ex2.approx.ftz.f32", (np.array([-127, -149], np.float32),), [0, 0]),
        ("lg2.approx.ftz.f32", (np.abs(t),), [-np.inf, -np.inf]),
        ("min.ftz.f32", (t, one), [0, 0]),
        ("max.ftz.f32", (t, -one), [0, 0]),
    ]:
        got = _ev(opcode, *args)
        np.testing.assert_array_equal(got, np.asarray(want, np.float32), err_msg=opcode)
        plain = _ev(opcode.replace(".ftz", ""), *args)
        assert not np.array_equal(plain, got), opcode  # without .ftz the subnormals survive
    # setp.ftz compares flushed inputs: TINY == 0
    assert _ev("setp.eq.ftz.f32", t, np.zeros(2, np.float32)).all()
    assert not _ev("setp.eq.f32", t, np.zeros(2, np.float32)).any()


def test_simulator_cvt_ftz_flushes_inputs_and_results():
    from tilegen.runtime.ptx.launch import run_ptx

    def cvt(ins: str, x: np.ndarray) -> np.ndarray:
        ptx = f"""
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 k_in, .param .u32 k_n, .param .u32 k_s, .param .u64 k_out,
                  .param .u32 k_n1, .param .u32 k_s1)
.reqntid 2
{{
    .reg .b32 %r<4>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<8>;
    ld.param.b64 %rd1, [k_in];
    ld.param.b64 %rd4, [k_out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    add.s64 %rd5, %rd4, %rd2;
    ld.global.f32 %f1, [%rd3];
    {ins} %f2, %f1;
    st.global.f32 [%rd5], %f2;
    ret;
}}
"""
        return run_ptx(ptx, [x, np.zeros(2, np.float32)], (1, 1, 1))[1]

    t = np.array([-TINY, TINY], np.float32)
    np.testing.assert_array_equal(cvt("cvt.rmi.f32.f32", t), [-1, 0])
    got = cvt("cvt.rmi.ftz.f32.f32", t)
    np.testing.assert_array_equal(got, [0, 0])  # -TINY flushed to -0 before the floor
    assert np.signbit(got[0])
    np.testing.assert_array_equal(cvt("cvt.rpi.ftz.f32.f32", t), [0, 0])


# --------------------------------------------------------------------------- ptr_attr

PTR_ATTR_KERNEL = """cuda_tile.module @m {
entry @k(%arg0: tile<ptr<f32, <none>>>, %n0: tile<i32>, %s0: tile<i32>, %arg2: tile<ptr<f32>>, %n2: tile<i32>, %s2: tile<i32>, %arg1: tile<i32>) {
  %tv = make_tensor_view %arg0, shape = [16], strides = [1] : tile<ptr<f32, <none>>> -> tensor_view<16xf32, strides=[1], #cuda_tile.ptr_attr<none>>
  %pv = make_partition_view %tv : partition_view<tile=(16), tensor_view<16xf32, strides=[1], #cuda_tile.ptr_attr<none>>>
  %ov = make_tensor_view %arg2, shape = [16], strides = [1] : tile<i32> -> tensor_view<16xf32, strides=[1]>
  %po = make_partition_view %ov : partition_view<tile=(16), tensor_view<16xf32, strides=[1]>>
  %t, %tok = load_view_tko weak %pv[%arg1] : partition_view<tile=(16), tensor_view<16xf32, strides=[1], #cuda_tile.ptr_attr<none>>>, tile<i32> -> tile<16xf32>, token
  %s = store_view_tko weak %t, %po[%arg1] : tile<16xf32>, partition_view<tile=(16), tensor_view<16xf32, strides=[1]>>, tile<i32> -> token
  return
}
}"""


def test_ptr_attr_is_carried_on_arguments_and_memrefs():
    out = convert_module(parse_module(PTR_ATTR_KERNEL), "sm_90")
    diag = DiagnosticEngine()
    assert verify_module(out, diag), [d.format() for d in diag.diagnostics]
    fn = the(out, "nv_tileaa.func")
    arg_attrs = fn.attributes["arg_attrs"]
    assert isinstance(arg_attrs, ArrayAttr)
    assert [d.get("nv_tileaa.ptr_attr") for d in arg_attrs.values] == [StringAttr("none")] + [
        None
    ] * 6
    assert all(isinstance(d, DictAttr) for d in arg_attrs.values)
    memrefs = [op for op in out.walk() if op.name == "nv_tileaa.make_memref"]
    assert [m.attributes.get("nv_tileaa.ptr_attr") for m in memrefs] == [StringAttr("none"), None]
    text = print_module(out)
    assert print_module(parse_module(text, allow_unregistered=True)) == text
    # the PTX backend ignores the (discardable) facts and runs the kernel
    x = np.arange(16, dtype=np.float32)
    from tilegen.runtime.ptxsim import run_ptxsim

    args = [("a", x), ("o", np.zeros(16, np.float32)), ("i", np.int32(0))]
    np.testing.assert_array_equal(
        run_ptxsim(parse_module(PTR_ATTR_KERNEL), args, (1, 1, 1), "sm_90")["o"], x
    )


# --------------------------------------------------------------------------- alloca

ALLOCA_KERNEL = """cuda_tile.module @m {
  entry @k(%out: tile<ptr<f32>>, %n: tile<i32>, %s: tile<i32>) {
    %p = alloca num_elem = 64, alignment = 16 : tile<ptr<f32>>
    %c = constant <f32: 2.5> : tile<f32>
    %t = store_ptr_tko weak %p, %c : tile<ptr<f32>>, tile<f32> -> token
    %v, %t2 = load_ptr_tko weak %p token = %t : tile<ptr<f32>> -> tile<f32>, token
    %t3 = store_ptr_tko weak %out, %v token = %t2 : tile<ptr<f32>>, tile<f32> -> token
    return
  }
}
"""


def test_alloca_runs_on_the_interpreter_and_is_refused_by_the_conversion(tmp_path):
    out = run_module(parse_module(ALLOCA_KERNEL), [("out", np.zeros(1, np.float32))])["out"]
    assert out[0] == 2.5
    with pytest.raises(ConversionError) as e:
        convert_module(parse_module(ALLOCA_KERNEL, "k.mlir"), "sm_90")
    text = "\n".join(d.format() for d in e.value.diagnostics)
    assert "k.mlir:3:" in text and "'cuda_tile.alloca'" in text
    assert "nv_tileaa has no allocation op" in text
    path = tmp_path / "k.mlir"
    path.write_text(ALLOCA_KERNEL)
    np.savez(tmp_path / "in.npz", arg__out=np.zeros(1, np.float32))
    cli = [sys.executable, "-c", "import sys; from tilegen.cli import main; sys.exit(main())"]
    cli += ["run", str(path), "--args", str(tmp_path / "in.npz")]
    ok = subprocess.run(cli + ["--out", str(tmp_path / "o.npz")], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert np.load(tmp_path / "o.npz")["arg__out"][0] == 2.5
    bad = subprocess.run(cli + ["--backend", "ptxsim"], capture_output=True, text=True)
    assert bad.returncode != 0
    assert "k.mlir:3:" in bad.stderr and "nv_tileaa has no allocation op" in bad.stderr


def test_seed_mentions_no_alloca_lowering():
    """The refusal rests on the seeds: no tileiras lowering of alloca is described."""
    from paths import SEEDS as seeds  # ../shared or $TILEGEN_SHARED

    if not seeds.exists():
        pytest.skip("seeds not available")
    for f in seeds.glob("*.txt"):
        assert "cuda_tile.alloca" not in f.read_text()


def test_ptxas_accepts_the_approx_and_ftz_forms():
    from tilegen.runtime.codegen.driver import PtxasError, assemble, find_ptxas

    if find_ptxas() is None:
        pytest.skip("ptxas not installed")
    bodies = [
        (f"%r = exp %x0 rounding<approx> : {F32}", 1),
        (f"%r = tanh %x0 rounding<approx> : {F32}", 1),
        (f"%r = divf %x0, %x1 rounding<full> flush_to_zero : {F32}", 2),
        (f"%r = divf %x0, %x1 rounding<approx> flush_to_zero : {F32}", 2),
        (f"%r = sqrt %x0 rounding<approx> flush_to_zero : {F32}", 1),
        (f"%r = rsqrt %x0 flush_to_zero : {F32}", 1),
        (f"%r = exp2 %x0 flush_to_zero : {F32}", 1),
        (f"%r = minf %x0, %x1 flush_to_zero propagate_nan : {F32}", 2),
        (f"%r = fma %x0, %x1, %x0 rounding<zero> flush_to_zero : {F32}", 2),
    ]
    for sm in (75, 90):
        for body, nin in bodies:
            if "propagate_nan" in body and sm < 80:
                continue  # min.NaN needs sm_80
            try:
                assemble(ptx_of(body, nin, Target(sm)), sm)
            except PtxasError as e:  # pragma: no cover - the failure message is the point
                pytest.fail(f"sm_{sm}: {body}: {e}")
