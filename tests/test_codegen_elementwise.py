"""runtime/codegen elementwise ops: the selection table (spec/ptx/selection.yaml), the math
sequences (runtime/codegen/mathlib.py) and casts, compiled from small cuda_tile kernels through
the normal pipeline and run in the PTX simulator against NumPy; plus ptxas acceptance."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from tilegen.generated.ptx.instructions import INSTRUCTIONS
from tilegen.generated.ptx.selection import ROWS
from tilegen.runtime.asm import parse_module
from tilegen.runtime.codegen import mathlib
from tilegen.runtime.codegen.driver import find_ptxas
from tilegen.runtime.ptxsim import compile_to_ptx, run_ptxsim

N = 128
PTXAS = find_ptxas()


def kernel(body: str, ins: list[str], out: str) -> str:
    """A cuda_tile kernel loading tile<N x T> %x0.. from each input, running ``body`` (which
    defines %r) and storing %r."""
    ts = ins + [out]
    params = ", ".join(
        f"%p{i}: tile<ptr<{t}>>, %s{i}: tile<i32>, %t{i}: tile<i32>" for i, t in enumerate(ts)
    )
    lines = ["%tok = make_token : token", "%bx, %by, %bz = get_tile_block_id : tile<i32>"]
    for i, t in enumerate(ts):
        tv = f"tensor_view<?x{t}, strides=[1]>"
        lines.append(
            f"%tv{i} = make_tensor_view %p{i}, shape = [%s{i}], strides = [1] : tile<i32> -> {tv}"
        )
        lines.append(f"%pv{i} = make_partition_view %tv{i} : partition_view<tile=({N}), {tv}>")
    for i, t in enumerate(ins):
        pv = f"partition_view<tile=({N}), tensor_view<?x{t}, strides=[1]>>"
        lines.append(
            f"%x{i}, %rt{i} = load_view_tko weak %pv{i}[%bx] token = %tok : {pv}, tile<i32> "
            f"-> tile<{N}x{t}>, token"
        )
    lines += [ln.strip() for ln in body.strip().splitlines()]
    pv = f"partition_view<tile=({N}), tensor_view<?x{out}, strides=[1]>>"
    lines.append(
        f"%st = store_view_tko weak %r, %pv{len(ins)}[%bx] token = %tok : tile<{N}x{out}>, "
        f"{pv}, tile<i32> -> token"
    )
    lines.append("return")
    return (
        "cuda_tile.module @m {\n entry @k(" + params + ") {\n  " + "\n  ".join(lines) + "\n }\n}\n"
    )


def run(body: str, inputs: list[np.ndarray], out_dtype, sm: str = "sm_90") -> np.ndarray:
    ins = [_tname(a.dtype) for a in inputs]
    src = kernel(body, ins, _tname(np.dtype(out_dtype)))
    args = [(f"x{i}", a) for i, a in enumerate(inputs)] + [("o", np.zeros(N, out_dtype))]
    return run_ptxsim(parse_module(src), args, (1, 1, 1), sm)["o"]


def _tname(dt) -> str:
    dt = np.dtype(dt)
    if dt == np.bool_:
        return "i1"
    return {"f": "f", "i": "i", "u": "i"}[dt.kind] + str(dt.itemsize * 8)


def ulp_err(got, want) -> float:
    """Max error in units of the last place of ``want`` (finite entries)."""
    got, want = np.asarray(got), np.asarray(want)
    fin = np.isfinite(want)
    spacing = np.spacing(np.abs(want[fin]).astype(want.dtype))
    tiny = np.finfo(want.dtype).tiny
    return float(np.max(np.abs(got[fin] - want[fin]) / np.maximum(spacing, tiny)))


# ----------------------------------------------------------------------------- table
def test_selection_rows_name_real_instructions_and_sequences():
    for row in ROWS:
        names = row.get("instruction", [])
        for n in [names] if isinstance(names, str) else names:
            assert n in INSTRUCTIONS, row
        if "sequence" in row:
            assert row["sequence"] in mathlib.SEQUENCES, row


def test_generator_rejects_unknown_instruction(tmp_path):
    import shutil

    from tilegen.generator.generate import REPO, render_all
    from tilegen.generator.spec_loader import SpecError, load_spec

    spec_dir = tmp_path / "spec"
    shutil.copytree(REPO / "spec", spec_dir)
    sel = spec_dir / "ptx" / "selection.yaml"
    sel.write_text(
        sel.read_text().replace("instruction: add.float,", "instruction: add.floaty,", 1)
    )
    with pytest.raises(SpecError, match="add.floaty"):
        render_all(load_spec(spec_dir))


# ----------------------------------------------------------------------------- f64 sequences
RNG = np.random.default_rng(7)


def _f64(lo, hi):
    return RNG.uniform(lo, hi, N)


F64_UNARY = [
    ("exp", np.exp, _f64(-700, 700), 2),
    ("exp", np.exp, _f64(-2, 2), 2),
    ("exp2", np.exp2, _f64(-1000, 1000), 2),
    ("log", np.log, np.exp(_f64(-700, 700)), 2),
    ("log", np.log, _f64(0.5, 2.0), 2),
    ("log2", np.log2, np.exp(_f64(-700, 700)), 2),
    ("sin", np.sin, _f64(-100, 100), 2),
    ("cos", np.cos, _f64(-100, 100), 2),
    ("tan", np.tan, _f64(-10, 10), 4),
    ("sinh", np.sinh, _f64(-700, 700), 3),
    ("sinh", np.sinh, _f64(-1, 1), 3),
    ("cosh", np.cosh, _f64(-700, 700), 3),
    ("tanh", np.tanh, _f64(-20, 20), 3),
    ("tanh", np.tanh, _f64(-0.6, 0.6), 3),
]


@pytest.mark.parametrize(
    "name,ref,x,bound", F64_UNARY, ids=[f"{u[0]}{i}" for i, u in enumerate(F64_UNARY)]
)
def test_f64_sequences_accuracy(name, ref, x, bound):
    got = run(f"%r = {name} %x0 : tile<{N}xf64>", [x], np.float64)
    assert ulp_err(got, ref(x)) <= bound


def test_f64_special_values():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, 1e-310, 5e-324] * (N // 8))
    with np.errstate(all="ignore"):
        for name, ref in (("exp", np.exp), ("log", np.log)):
            got = run(f"%r = {name} %x0 : tile<{N}xf64>", [x], np.float64)
            np.testing.assert_allclose(got, ref(x), rtol=1e-15, equal_nan=True)


def test_f64_pow_atan2_remf():
    x, y = _f64(0.01, 50), _f64(-8, 8)
    got = run(f"%r = pow %x0, %x1 : tile<{N}xf64>", [x, y], np.float64)
    np.testing.assert_allclose(got, np.power(x, y), rtol=1e-14)
    a, b = _f64(-5, 5), _f64(-5, 5)
    got = run(f"%r = atan2 %x0, %x1 : tile<{N}xf64>", [a, b], np.float64)
    np.testing.assert_allclose(got, np.arctan2(a, b), rtol=1e-14, atol=1e-300)
    got = run(f"%r = remf %x0, %x1 : tile<{N}xf64>", [a * 100, b], np.float64)
    np.testing.assert_array_equal(got, np.fmod(a * 100, b))


# ----------------------------------------------------------------------------- f32
F32 = [
    ("exp", np.exp, RNG.uniform(-87, 88, N), 1e-6),
    ("log", np.log, np.exp(RNG.uniform(-80, 80, N)), 1e-6),
    ("sin", np.sin, RNG.uniform(-1000, 1000, N), 1e-6),
    ("cos", np.cos, RNG.uniform(-1000, 1000, N), 1e-6),
    ("tanh", np.tanh, RNG.uniform(-10, 10, N), 1e-6),
    ("sinh", np.sinh, RNG.uniform(-80, 80, N), 1e-6),
    ("log2", np.log2, np.exp(RNG.uniform(-80, 80, N)), 1e-6),
]


@pytest.mark.parametrize("name,ref,x,rtol", F32, ids=[f[0] for f in F32])
def test_f32_math(name, ref, x, rtol):
    x = x.astype(np.float32)
    got = run(f"%r = {name} %x0 : tile<{N}xf32>", [x], np.float32)
    want = ref(x.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-7 if name in ("sin", "cos") else 0)


def test_f32_rounding_modes_and_div_sqrt():
    a = RNG.uniform(-10, 10, N).astype(np.float32)
    b = RNG.uniform(0.5, 10, N).astype(np.float32)
    got = run(f"%r = divf %x0, %x1 : tile<{N}xf32>", [a, b], np.float32)
    np.testing.assert_array_equal(got, a / b)  # div.rn is correctly rounded
    got = run(f"%r = rsqrt %x0 : tile<{N}xf32>", [b], np.float32)
    np.testing.assert_allclose(got, 1 / np.sqrt(b.astype(np.float64)), rtol=1.2e-7)


# ----------------------------------------------------------------------------- f16 / bf16
def test_f16_arith_via_f32():
    a = RNG.uniform(-4, 4, N).astype(np.float16)
    b = RNG.uniform(0.5, 4, N).astype(np.float16)
    body = f"%q = divf %x0, %x1 : tile<{N}xf16>\n%r = addf %q, %x0 : tile<{N}xf16>"
    got = run(body, [a, b], np.float16)
    np.testing.assert_array_equal(got, (a / b) + a)


# ----------------------------------------------------------------------------- integers
def test_i8_wraps_and_unsigned_ops():
    a = RNG.integers(-128, 128, N).astype(np.int8)
    b = RNG.integers(1, 128, N).astype(np.int8)
    with np.errstate(over="ignore"):
        got = run(f"%r = addi %x0, %x1 : tile<{N}xi8>", [a, b], np.int8)
        np.testing.assert_array_equal(got, a + b)
        got = run(f"%r = muli %x0, %x1 : tile<{N}xi8>", [a, b], np.int8)
        np.testing.assert_array_equal(got, a * b)
    got = run(f"%r = divi %x0, %x1 unsigned : tile<{N}xi8>", [a, b], np.int8)
    np.testing.assert_array_equal(got, (a.view(np.uint8) // b.view(np.uint8)).view(np.int8))
    got = run(f"%r = shri %x0, %x1 unsigned : tile<{N}xi8>", [a, (b % 8).astype(np.int8)], np.int8)
    np.testing.assert_array_equal(got, (a.view(np.uint8) >> (b % 8).view(np.uint8)).view(np.int8))


def test_i32_floor_division_and_compare_select():
    a = RNG.integers(-1000, 1000, N).astype(np.int32)
    b = RNG.integers(1, 50, N).astype(np.int32) * np.where(RNG.random(N) < 0.5, -1, 1).astype(
        np.int32
    )
    body = f"%r = divi %x0, %x1 signed rounding<negative_inf> : tile<{N}xi32>"
    got = run(body, [a, b], np.int32)
    np.testing.assert_array_equal(got, a // b)
    body = (
        f"%c = cmpi less_than %x0, %x1, unsigned : tile<{N}xi32> -> tile<{N}xi1>\n"
        f"%r = select %c, %x0, %x1 : tile<{N}xi1>, tile<{N}xi32>"
    )
    got = run(body, [a, b], np.int32)
    au, bu = a.view(np.uint32), b.view(np.uint32)
    np.testing.assert_array_equal(got, np.where(au < bu, a, b))


def test_casts_f32_i8_i64():
    x = RNG.uniform(-100, 100, N).astype(np.float32)
    got = run(f"%r = ftoi %x0 signed : tile<{N}xf32> -> tile<{N}xi8>", [x], np.int8)
    np.testing.assert_array_equal(got, np.trunc(x).astype(np.int8))
    i = RNG.integers(-(2**31), 2**31, N).astype(np.int32)
    got = run(f"%r = exti %x0 signed : tile<{N}xi32> -> tile<{N}xi64>", [i], np.int64)
    np.testing.assert_array_equal(got, i.astype(np.int64))
    got = run(f"%r = itof %x0 signed : tile<{N}xi32> -> tile<{N}xf32>", [i], np.float32)
    np.testing.assert_array_equal(got, i.astype(np.float32))


# ----------------------------------------------------------------------------- ptxas
@pytest.mark.skipif(PTXAS is None, reason="ptxas not found")
@pytest.mark.parametrize("sm", ["sm_80", "sm_120"])
def test_sequences_ptxas_clean(tmp_path, sm):
    body = "\n".join(
        f"%y{i} = {n} %x0 : tile<{N}xf64>"
        for i, n in enumerate(["exp", "log", "sin", "tanh", "cosh", "exp2", "log2", "tan"])
    )
    body += "\n%r0 = addf %y0, %y1 : tile<128xf64>"
    for i in range(2, 8):
        body += f"\n%r{i - 1} = addf %r{i - 2}, %y{i} : tile<128xf64>"
    body += "\n%r = addf %r6, %r6 : tile<128xf64>"
    ptx = compile_to_ptx(parse_module(kernel(body, ["f64"], "f64")), sm)
    (tmp_path / "k.ptx").write_text(ptx)
    p = subprocess.run(
        [PTXAS, "-v", f"-arch={sm}", str(tmp_path / "k.ptx"), "-o", str(tmp_path / "k.cubin")],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stderr
    assert "0 bytes spill stores, 0 bytes spill loads" in p.stderr, p.stderr


# ----------------------------------------------------------------------------- fuzzer finds
def test_exti_signed_i8_to_i16_sign_extends():
    """bench/fuzz_codegen.py seed 167: the unsigned i8 -> i16 row also matched extsi, so
    negative i8 values were zero-extended (-4 -> 252)."""
    a = np.arange(-64, 64, dtype=np.int8)
    got = run("%r = exti %x0 signed : tile<128xi8> -> tile<128xi16>", [a], np.int16)
    np.testing.assert_array_equal(got, a.astype(np.int16))
    got = run("%r = exti %x0 unsigned : tile<128xi8> -> tile<128xi16>", [a], np.int16)
    np.testing.assert_array_equal(got, a.view(np.uint8).astype(np.int16))


@pytest.mark.skipif(PTXAS is None, reason="no ptxas")
@pytest.mark.parametrize("src,dst", [("f16", "bf16"), ("bf16", "f16")])
def test_fp_to_fp_f16_bf16_no_same_type_rounding_cvt(src, dst):
    """Seeds 325/431: f16 <-> bf16 went via f32 and emitted `cvt.rn.f32.f32`, which ptxas
    rejects ("Illegal rounding modifier"); the widened value is exact, so it is only narrowed."""
    a = (np.arange(N, dtype=np.float32) * 0.37 - 20).astype(np.float16)
    if src == "f16":  # f16 -> bf16 -> f32
        body = f"""
        %m = ftof %x0 : tile<{N}xf16> -> tile<{N}xbf16>
        %r = ftof %m : tile<{N}xbf16> -> tile<{N}xf32>
        """
    else:  # f16 -> f32 -> bf16 -> f16 -> f32
        body = f"""
        %w = ftof %x0 : tile<{N}xf16> -> tile<{N}xf32>
        %h = ftof %w : tile<{N}xf32> -> tile<{N}xbf16>
        %m = ftof %h : tile<{N}xbf16> -> tile<{N}xf16>
        %r = ftof %m : tile<{N}xf16> -> tile<{N}xf32>
        """
    src_text = kernel(body, ["f16"], "f32")
    ptx = compile_to_ptx(parse_module(src_text), "sm_90")
    assert "cvt.rn.f32.f32" not in ptx
    with __import__("tempfile").TemporaryDirectory() as d:
        p = subprocess.run(
            [PTXAS, "-arch=sm_90", "-", "-o", f"{d}/k.cubin"],
            input=ptx,
            text=True,
            capture_output=True,
        )
    assert p.returncode == 0, p.stderr
    got = run(body, [a], np.float32)
    # f16 -> bf16 -> f32 (bf16 keeps 8 bits): round the f32 value to bf16 by hand
    f = a.astype(np.float32)
    if src == "bf16":
        f = _bf16(f)
        want = f.astype(np.float16).astype(np.float32)
    else:
        want = _bf16(f)
    np.testing.assert_array_equal(got, want)


def _bf16(f: np.ndarray) -> np.ndarray:
    """Round f32 to bf16 (nearest even), as f32."""
    u = f.astype(np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


@pytest.mark.parametrize("t,dt", [("f32", np.float32), ("f64", np.float64)])
@pytest.mark.parametrize("rnd", ["zero", "negative_inf", "positive_inf"])
def test_directed_rounding_exact_in_simulator(t, dt, rnd):
    """Seeds 104/827/1368: the simulator rounded f64 directed modes to nearest and gave x - x
    = +0 under rm (IEEE: -0); results are checked against exact rationals."""
    from fractions import Fraction

    rng = np.random.RandomState(3)
    a, b, c = (rng.randn(N).astype(dt) for _ in range(3))
    b[:8] = a[:8]  # exact zero differences
    ops = {
        "addf": lambda x, y, z: x + y,
        "subf": lambda x, y, z: x - y,
        "mulf": lambda x, y, z: x * y,
        "divf": lambda x, y, z: x / y,
        "fma": lambda x, y, z: x * y + z,
    }
    for op, f in ops.items():
        args = "%x0, %x1, %x2" if op == "fma" else "%x0, %x1"
        got = run(f"%r = {op} {args} rounding<{rnd}> : tile<{N}x{t}>", [a, b, c], dt)
        for i in range(N):
            ex = f(Fraction(float(a[i])), Fraction(float(b[i])), Fraction(float(c[i])))
            near = dt(float(ex))
            if Fraction(float(near)) != ex:
                lo, hi = sorted(
                    [
                        near,
                        np.nextafter(
                            near, dt(np.inf) if Fraction(float(near)) < ex else dt(-np.inf)
                        ),
                    ]
                )
                want = {"zero": lo if ex > 0 else hi, "negative_inf": lo, "positive_inf": hi}[rnd]
            else:
                want = near
            if ex == 0 and op == "subf":
                want = dt(-0.0) if rnd == "negative_inf" else dt(0.0)
            assert got[i] == want and np.signbit(got[i]) == np.signbit(want), (op, i, got[i], want)


@pytest.mark.parametrize("t,dt", [("f32", np.float32), ("f64", np.float64)])
def test_fma_single_rounding_in_simulator(t, dt):
    """Seed 100528: the simulator's f64 fma went through longdouble (a 64-bit product of two
    53-bit significands is not exact) and rounded twice: 6.154734206475335 * itself + itself
    gave 44.03548735883291 instead of 44.0354873588329."""
    from fractions import Fraction

    from tilegen.runtime.ptx.sim.semlib import _round_fraction

    rng = np.random.RandomState(5)
    a, b, c = (rng.randn(N).astype(dt) for _ in range(3))
    a[0] = b[0] = c[0] = 6.154734206475335
    c[1:32] = -(a[1:32].astype(np.float64) * b[1:32]).astype(dt)  # cancellation
    got = run(f"%r = fma %x0, %x1, %x2 : tile<{N}x{t}>", [a, b, c], dt)
    for i in range(N):
        fr = Fraction(float(a[i])) * Fraction(float(b[i])) + Fraction(float(c[i]))
        assert got[i] == _round_fraction(fr, dt), (i, got[i])
