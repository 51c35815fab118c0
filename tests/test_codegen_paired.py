"""Paired f32 rows (spec/ptx/selection.yaml ``pair``): on sm_100/sm_103 an f32 tile's add /
sub / mul / fma goes two registers at a time (``add.rn.f32x2`` ... on b64 pairs: SASS FADD2 /
FMUL2 / FFMA2, as tileiras emits), exact against NumPy in the simulator with every rounding
mode; other targets and other element types keep the per-element rows."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tilegen.runtime.asm import parse_module
from tilegen.runtime.ptxas import find_ptxas
from tilegen.runtime.ptxsim import compile_to_ptx, run_ptxsim

sys.path.insert(0, str(Path(__file__).resolve().parent))
import test_codegen_elementwise as te  # noqa: E402

PTXAS = find_ptxas()
N = 1024  # 8 registers a thread at 4 warps: four pairs


def _kernel(body: str, n_in: int, t: str = "f32") -> str:
    saved, te.N = te.N, N
    try:
        return te.kernel(body, [t] * n_in, t)
    finally:
        te.N = saved


BODY = """
%m = mulf %x0, %x1 rounding<zero> : tile<1024xf32>
%s = subf %m, %x2 rounding<positive_inf> : tile<1024xf32>
%f = fma %s, %x1, %x0 rounding<negative_inf> : tile<1024xf32>
%r = addf %f, %x2 : tile<1024xf32>
"""


def _reference(x0, x1, x2):
    """The same chain in exact rational arithmetic per step, rounded as the ops say."""
    from fractions import Fraction

    def rnd(q: Fraction, mode: str) -> np.float32:
        f = np.float32(float(q))  # nearest; then step to the directed neighbour if needed
        fq = Fraction(float(f))
        if mode == "zero" and abs(fq) > abs(q):
            f = np.nextafter(f, np.float32(0))
        elif mode == "up" and fq < q:
            f = np.nextafter(f, np.float32(np.inf))
        elif mode == "down" and fq > q:
            f = np.nextafter(f, np.float32(-np.inf))
        return np.float32(f)

    out = np.empty(N, np.float32)
    for i in range(N):
        a, b, c = (Fraction(float(v[i])) for v in (x0, x1, x2))
        m = rnd(a * b, "zero")
        s = rnd(Fraction(float(m)) - c, "up")
        f = rnd(Fraction(float(s)) * b + a, "down")
        out[i] = rnd(Fraction(float(f)) + c, "nearest")
    return out


@pytest.mark.skipif(PTXAS is None, reason="ptxas not found")
@pytest.mark.parametrize("sm,paired", [("sm_100", True), ("sm_90", False), ("sm_120", False)])
def test_f32_tile_ops_pair_on_sm_100(tmp_path, sm, paired):
    ptx = compile_to_ptx(parse_module(_kernel(BODY, 3)), sm)
    src = tmp_path / "k.ptx"
    src.write_text(ptx)
    p = subprocess.run([PTXAS, f"-arch={sm}", str(src), "-o", str(tmp_path / "k.cubin")])
    assert p.returncode == 0  # what the simulator runs, ptxas accepts
    for ins in ("mul.rz.f32x2", "sub.rp.f32x2", "fma.rm.f32x2", "add.rn.f32x2"):
        assert (ins in ptx) is paired, (ins, sm)
    rng = np.random.default_rng(3)
    xs = [rng.uniform(-4, 4, N).astype(np.float32) for _ in range(3)]
    args = [(f"x{i}", x) for i, x in enumerate(xs)] + [("o", np.zeros(N, np.float32))]
    out = run_ptxsim(parse_module(_kernel(BODY, 3)), args, (1, 1, 1), sm)["o"]
    np.testing.assert_array_equal(out, _reference(*xs))


@pytest.mark.skipif(PTXAS is None, reason="ptxas not found")
def test_paired_rows_become_ffma2_in_sass(tmp_path):
    ptx = compile_to_ptx(parse_module(_kernel(BODY, 3)), "sm_100")
    src, cubin = tmp_path / "k.ptx", tmp_path / "k.cubin"
    src.write_text(ptx)
    p = subprocess.run(
        [PTXAS, "-arch=sm_100a", str(src), "-o", str(cubin)], capture_output=True, text=True
    )
    assert p.returncode == 0, p.stderr
    sass = subprocess.run(
        [str(Path(PTXAS).with_name("cuobjdump")), "-sass", str(cubin)],
        capture_output=True,
        text=True,
    ).stdout
    for op in ("FMUL2", "FFMA2", "FADD2"):
        assert op in sass, op


def test_f64_and_scalars_keep_the_element_rows():
    body = "%r = mulf %x0, %x1 : tile<1024xf64>"
    ptx = compile_to_ptx(parse_module(_kernel(body, 2, "f64")), "sm_100")
    assert "f32x2" not in ptx and "mul.rn.f64" in ptx
