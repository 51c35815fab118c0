"""f32 math sequences (runtime/codegen/mathlib.py): accuracy over dense samples and cost.

Accuracy: each function is compiled from a cuda_tile kernel through the normal pipeline and run
in the PTX simulator over random + edge inputs; the max error is measured in ulp of the f32
result against a float64 NumPy reference (a correctly rounded result is within 0.5 ulp). The
simulator evaluates .approx instructions exactly, so these are lower bounds; the hardware error
adds the PTX ISA bound of each .approx instruction used (see the sequence docstrings).
Special values (NaN, +-inf, +-0, subnormals, huge trig arguments) must match exactly.

Cost: the sequences use no f64 arithmetic on the fast path (f32 hyperbolics/atan/atan2 used to
run the f64 sequence), and their instruction counts stay within a budget.

``python tests/test_codegen_math_perf.py [log2(n)]`` prints the table (default 2^20 samples).
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

from tilegen.runtime.asm import parse_module
from tilegen.runtime.codegen import mathlib
from tilegen.runtime.ptxsim import compile_to_ptx, run_ptxsim

TILE = 4096
SAMPLES = int(os.environ.get("TILEGEN_MATH_SAMPLES", 1 << 16))

F32_EDGES = np.array(
    [
        0.0,
        -0.0,
        np.inf,
        -np.inf,
        np.nan,
        1.0,
        -1.0,
        0.5,
        2.0,
        1e-45,
        -1e-45,
        1.1754942e-38,
        1.1754944e-38,
        -1.1754944e-38,
        3.4028235e38,
        -3.4028235e38,
        1e-30,
        1e30,
        0.6,
        -0.6,
        1.5707964,
        3.1415927,
        0.7853982,
        9.0,
        10.0,
        88.72,
        88.73,
        89.4,
        89.5,
        -87.3,
        -103.9,
        -104.0,
        105614.0,
        105616.0,
        1e5,
        -1e5,
        1e7,
        16777216.0,
        1e20,
        1e38,
        0.25,
        1e-8,
        -1e-8,
        0.99999994,
        1.0000001,
    ],
    np.float32,
)


def _bits(rng, n, lo_exp, hi_exp, signed=True):
    """Random f32 with uniformly distributed exponent bits in [lo_exp, hi_exp] (biased)."""
    e = rng.integers(lo_exp, hi_exp + 1, n, dtype=np.uint32)
    m = rng.integers(0, 1 << 23, n, dtype=np.uint32)
    s = (rng.integers(0, 2, n, dtype=np.uint32) << 31) if signed else 0
    return ((e << 23) | m | s).view(np.float32)


def _mix(n, *parts):
    """Concatenate sample generators (each gets an equal share) and the edge values."""
    rng = np.random.default_rng(12345)
    k = (n - len(F32_EDGES)) // len(parts)
    xs = [np.asarray(p(rng, k), np.float32) for p in parts]
    return np.concatenate([F32_EDGES] + xs)


def inputs(name: str, n: int) -> list[np.ndarray]:
    u = lambda lo, hi: lambda rng, k: rng.uniform(lo, hi, k)  # noqa: E731
    allf = lambda rng, k: _bits(rng, k, 0, 254)  # noqa: E731
    if name == "exp":
        return [_mix(n, u(-104, 89), u(-1, 1), allf)]
    if name in ("log", "log2", "log10"):
        return [_mix(n, lambda r, k: _bits(r, k, 0, 254, False), u(0.5, 2), u(0, 1e-37))]
    if name in ("sin", "cos", "tan"):
        return [_mix(n, u(-4, 4), u(-105615, 105615), allf, lambda r, k: _bits(r, k, 140, 254))]
    if name in ("sinh", "cosh"):
        return [_mix(n, u(-90, 90), u(-1.5, 1.5), allf)]
    if name == "tanh":
        return [_mix(n, u(-10, 10), u(-1, 1), allf)]
    if name == "atan":
        return [_mix(n, u(-2, 2), allf)]
    if name == "atan2":
        a = _mix(n, u(-2, 2), allf, u(-1e-38, 1e-38))
        b = np.random.default_rng(99).permutation(_mix(n, u(-2, 2), allf, u(-1e-38, 1e-38)))
        return [a, b[: len(a)]]
    if name == "pow":
        x = _mix(n, u(0, 4), lambda r, k: _bits(r, k, 0, 254, False), u(-3, 3))
        rng = np.random.default_rng(5)
        y = np.concatenate([F32_EDGES[::-1], rng.uniform(-30, 30, len(x) // 2)])
        y = np.concatenate([y, np.round(rng.uniform(-40, 40, len(x) - len(y)))]).astype(np.float32)
        return [x, rng.permutation(y)]
    raise KeyError(name)


REF = {
    "exp": np.exp,
    "log": np.log,
    "log2": np.log2,
    "log10": np.log10,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "sinh": np.sinh,
    "cosh": np.cosh,
    "tanh": np.tanh,
    "atan": np.arctan,
    "atan2": np.arctan2,
    "pow": np.power,
}


def _kernel(name: str, nin: int, ty: str = "f32") -> str:
    params = ", ".join(
        f"%p{i}: tile<ptr<{ty}>>, %s{i}: tile<i32>, %t{i}: tile<i32>" for i in range(nin + 1)
    )
    tv = f"tensor_view<?x{ty}, strides=[1]>"
    pv = f"partition_view<tile=({TILE}), {tv}>"
    lines = ["%tok = make_token : token", "%bx, %by, %bz = get_tile_block_id : tile<i32>"]
    for i in range(nin + 1):
        lines.append(
            f"%tv{i} = make_tensor_view %p{i}, shape = [%s{i}], strides = [1] : tile<i32> -> {tv}"
        )
        lines.append(f"%pv{i} = make_partition_view %tv{i} : {pv}")
    for i in range(nin):
        lines.append(
            f"%x{i}, %rt{i} = load_view_tko weak %pv{i}[%bx] token = %tok : {pv}, tile<i32> "
            f"-> tile<{TILE}x{ty}>, token"
        )
    ops = ", ".join(f"%x{i}" for i in range(nin))
    lines.append(f"%r = {name} {ops} : tile<{TILE}x{ty}>")
    lines.append(
        f"%st = store_view_tko weak %r, %pv{nin}[%bx] token = %tok : tile<{TILE}x{ty}>, {pv}, "
        "tile<i32> -> token"
    )
    lines.append("return")
    return (
        "cuda_tile.module @m {\n entry @k(" + params + ") {\n  " + "\n  ".join(lines) + "\n }\n}\n"
    )


#: sequences with no cuda_tile op (reached from MLIR math): measured through a stand-in op
STANDIN = {"atan": ("atan2", 2), "log10": ("log", 1)}


def run_f32(name: str, args: list[np.ndarray]) -> np.ndarray:
    """``name`` over the arrays ``args`` (f32, or f64 for ops without a stand-in)."""
    n = len(args[0])
    pad = (-n) % TILE
    dt = args[0].dtype
    args = [np.concatenate([a, np.ones(pad, dt)]) for a in args]
    kargs = [(f"x{i}", a) for i, a in enumerate(args)]
    out = np.zeros(len(args[0]), dt)
    kargs.append(("o", out))
    if name in STANDIN:  # not a cuda_tile op: run the sequence in place of another op's
        host, nhost = STANDIN[name]
        mod = parse_module(_kernel(host, nhost))
        kargs[1:1] = [(f"x{i}", args[0]) for i in range(1, nhost)]
        seqs = mathlib.SEQUENCES
        saved = seqs[host]
        seqs[host] = lambda em, op, t, a: seqs[name](em, op, t, a[:1])
        try:
            res = run_ptxsim(mod, kargs, (len(out) // TILE, 1, 1), "sm_90")["o"]
        finally:
            seqs[host] = saved
        return res[:n]
    mod = parse_module(_kernel(name, len(args), "f64" if dt == np.float64 else "f32"))
    res = run_ptxsim(mod, kargs, (len(out) // TILE, 1, 1), "sm_90")["o"]
    return res[:n]


def ulp_error(got: np.ndarray, x: list[np.ndarray], name: str):
    """(max ulp error over finite f32 results, indices where specials mismatch)."""
    with np.errstate(all="ignore"):
        ref = REF[name](*[a.astype(np.float64) for a in x])
        want = ref.astype(np.float32)
    fin = np.isfinite(want)
    bad = ~fin & ~((got == want) | (np.isnan(got) & np.isnan(want)))
    g, r, w = got[fin].astype(np.float64), ref[fin], want[fin]
    sp = np.maximum(np.spacing(np.abs(w)).astype(np.float64), 2.0**-149)
    err = np.abs(g - r) / sp
    err[~np.isfinite(g)] = np.inf
    # the sign of a zero result must match too
    zero = (w == 0) & (np.signbit(g) != np.signbit(w)) & (g == 0)
    bad_idx = np.concatenate([np.flatnonzero(bad), np.flatnonzero(fin)[zero]])
    return float(err.max()), bad_idx, int(np.argmax(err))


def measure(name: str, n: int):
    """(max ulp, special-value mismatch indices, worst argument(s), inputs, results)."""
    x = inputs(name, n)
    got = run_f32(name, x)
    e, bad, worst = ulp_error(got, x, name)
    with np.errstate(all="ignore"):
        want = REF[name](*[a.astype(np.float64) for a in x]).astype(np.float32)
    fin = np.flatnonzero(np.isfinite(want))
    return e, bad, [a[fin[worst]] for a in x], x, got


# max error measured in the simulator (exact .approx) over 2^20 samples, rounded up; the
# pytest run uses TILEGEN_MATH_SAMPLES (2^16 by default; 1/8 of it without --full-sweeps)
BOUND = {
    "exp": 1.5,
    "log": 1.0,
    "log2": 1.0,
    "log10": 1.0,
    "sin": 1.5,
    "cos": 1.5,
    "tan": 2.75,
    "sinh": 2.5,
    "cosh": 1.75,
    "tanh": 1.75,
    "atan": 1.5,
    "atan2": 1.6,
    "pow": 1.0,
}


@pytest.mark.parametrize("name", sorted(BOUND))
def test_f32_accuracy_dense(name, sweep):
    e, bad, arg, x, got = measure(name, sweep(SAMPLES))  # 1/8 unless --full-sweeps
    assert len(bad) == 0, [(tuple(a[i] for a in x), got[i]) for i in bad[:8]]
    assert e <= BOUND[name], (e, arg)


def _ptx_body(name: str, nin: int) -> list[str]:
    src = _kernel(name, nin).replace(f"({TILE})", "(128)").replace(f"<{TILE}x", "<128x")
    ptx = compile_to_ptx(parse_module(src), "sm_90")
    return [ln.strip() for ln in ptx.splitlines() if ln.startswith("\t") and "//" not in ln]


#: PTX instructions of one f32 sequence (kernel minus the same kernel with absf / addf);
#: the old f64-based sinh/cosh/tanh/atan2/pow took 150-400
BUDGET = {
    "exp": 14,
    "log": 32,
    "log2": 34,
    "sin": 95,
    "cos": 95,
    "tan": 95,
    "tanh": 18,
    "sinh": 30,
    "cosh": 20,
    "atan2": 50,
    "pow": 120,
}


@pytest.mark.parametrize("name", sorted(BUDGET))
def test_f32_sequence_cost(name):
    """Bounded instruction count, and no f64 arithmetic outside sin/cos/tan's Payne-Hanek
    slow path (4 instructions, only for |x| >= 105615)."""
    nin = 2 if name in ("atan2", "pow") else 1
    body = _ptx_body(name, nin)
    base = _ptx_body("addf" if nin == 2 else "absf", nin)
    assert len(body) - len(base) <= BUDGET[name], len(body) - len(base)
    f64 = [ln for ln in body if ".f64" in ln]
    assert len(f64) == (4 if name in ("sin", "cos", "tan") else 0), f64


POW_SPECIALS = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    -0.5,
    2.0,
    -2.0,
    3.0,
    -3.0,
    2.5,
    -2.5,
    np.inf,
    -np.inf,
    np.nan,
    1e-45,
    3.4028235e38,
    -1e30,
]


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_pow_special_value_grid(dt):
    """C99 pow on every pair of special operands (NaN sign ignored)."""
    x, y = (a.ravel().astype(dt) for a in np.meshgrid(POW_SPECIALS, POW_SPECIALS))
    got = run_f32("pow", [x, y])
    with np.errstate(all="ignore"):
        want = np.power(x.astype(np.float64), y.astype(np.float64)).astype(dt)
    same = (got == want) & (np.signbit(got) == np.signbit(want)) | (np.isnan(got) & np.isnan(want))
    exact = np.isin(x, [0, 1, -1, np.inf, -np.inf, 2, -2, 0.5, -0.5]) & np.isin(
        y, [0, 2, -2, 3, -3, np.inf, -np.inf]
    )
    if dt == np.float64:  # exp(y log x) in plain f64: ~|y log x| * 2^-53 relative
        exact[:] = False
        close = np.isclose(got, want, rtol=1e-13, atol=0)
        assert close[np.isfinite(want)].all()
    bad = ~same & (exact | ~np.isfinite(want) | (want == 0))
    assert not bad.any(), list(zip(x[bad], y[bad], got[bad], want[bad]))[:8]


def _exact_reduction(x: float) -> tuple[int, float]:
    """(quadrant mod 4, r) with x = k pi/2 + r, |r| <= pi/4, from 2/pi to 1,500 bits."""
    from fractions import Fraction
    from math import floor

    words = mathlib._two_over_pi_words(24)
    two_opi = Fraction(int("".join(f"{w:064b}" for w in words), 2), 1 << (64 * 23))
    y = Fraction(x) * two_opi
    k = floor(y + Fraction(1, 2))
    pi = 2 / two_opi
    return k % 4, float((y - k) * pi / 2)


@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
def test_f64_trig_of_huge_arguments_reduces_exactly(name):
    """f64 sin/cos/tan at |x| >= 2^20 take the Payne-Hanek reduction (mathlib._payne_hanek_f64):
    the quadrant no longer saturates at 2^31 (sin(4e9) was wrong: bench/fuzz_codegen seed
    921810), and arguments next to a multiple of pi/2 keep their digits (5.319372648326541e255
    lies 4.7e-19 from one; cos there is -4.687165924254628e-19). Checked against an exact
    reduction with a 1,500-bit 2/pi, to 2 ulp."""
    rng = np.random.default_rng(5)
    x = np.concatenate(
        [
            rng.uniform(-4e9, 4e9, 64),
            10.0 ** rng.uniform(6, 308, 64) * rng.choice([-1, 1], 64),
            [2.0**20, -(2.0**20), 2**31 * np.pi / 2, 5.319372648326541e255, 1e300, 1e22],
            [np.finfo(np.float64).max, 1.5 * 2.0**1023],
        ]
    )
    got = run_f32(name, [x])
    want = []
    for v in x:
        q, r = _exact_reduction(float(v))
        s, c = np.sin(r), np.cos(r)  # |r| <= pi/4: numpy is exact to 1 ulp here
        want.append({"sin": (s, c, -s, -c)[q], "cos": (c, -s, -c, s)[q]}.get(name, 0.0))
        if name == "tan":
            want[-1] = s / c if q % 2 == 0 else -c / s
    want = np.array(want)
    ulp = np.abs(got - want) / np.spacing(np.abs(want))
    assert ulp.max() <= 2.0, (x[ulp.argmax()], got[ulp.argmax()], want[ulp.argmax()])
    specials = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0] + [0.0] * 3)
    out = run_f32(name, [specials])
    assert np.isnan(out[:3]).all()
    if name == "cos":
        assert out[3] == 1 and out[4] == 1
    else:  # sin(-0) = tan(-0) = -0
        assert out[3] == 0 and out[4] == 0 and not np.signbit(out[3]) and np.signbit(out[4])


if __name__ == "__main__":
    n = 1 << int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 20
    names = sys.argv[2:] or sorted(BOUND)
    for nm in names:
        e, bad, arg, x, got = measure(nm, n)
        print(
            f"{nm:6s} max {e:6.3f} ulp at {[float(a) for a in arg]}  special mismatches {len(bad)}"
            + (
                f" e.g. {[(tuple(float(a[i]) for a in x), float(got[i])) for i in bad[:3]]}"
                if len(bad)
                else ""
            )
        )
