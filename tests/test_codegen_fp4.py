"""fp4 (``f4E2M1FN``, cuTile's ``float4_e2m1fn``) through the PTX backend.

* ``ftof`` to e2m1: ``cvt.rn.satfinite.e2m1x2.f32`` (sm_100a / sm_120a; ties to even, |x| > 6
  and infinities saturate to +-6, NaN -> +-0 with its sign like the interpreter); back through
  ``cvt.rn.f16x2.e2m1x2`` (exact). Checked bit for bit against the interpreter and against a
  table of the 16 codes, in the PTX simulator, and assembled with ptxas.
* ``pack`` / ``unpack`` (cuTile's ``pack_to_bytes`` / ``unpack_from_bytes``): two codes a byte,
  element 2i in the low nibble (i4 lanes, runtime/conversion/custom_patterns.py ``pack_bits``).
* below sm_100 f4E2M1FN is refused with tileiras's message.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from tilegen.runtime.asm import parse_module
from tilegen.runtime.codegen.driver import find_ptxas

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_codegen_families import tileiras_capture  # noqa: E402,F401  (the tileiras oracle)

PTXAS = find_ptxas()
ct = None  # cuda.tile, imported by the cuTile test

#: the value of each e2m1 code
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], np.float32)

HEAD = """
cuda_tile.module @m {{
entry @k(%x: tile<ptr<{s}>>, %xn: tile<i32>, %xs: tile<i32>, %y: tile<ptr<{d}>>, %yn: tile<i32>, %ys: tile<i32>) {{
  %0 = make_token : token
  %tx = make_tensor_view %x, shape = [%xn], strides = [1] : tile<i32> -> tensor_view<?x{s}, strides=[1]>
  %ty = make_tensor_view %y, shape = [%yn], strides = [1] : tile<i32> -> tensor_view<?x{d}, strides=[1]>
  %b, %b1, %b2 = get_tile_block_id : tile<i32>
  %px = make_partition_view %tx : partition_view<tile=({t}), tensor_view<?x{s}, strides=[1]>>
  %py = make_partition_view %ty : partition_view<tile=({u}), tensor_view<?x{d}, strides=[1]>>
  %v, %t1 = load_view_tko weak %px[%b] token = %0 : partition_view<tile=({t}), tensor_view<?x{s}, strides=[1]>>, tile<i32> -> tile<{t}x{s}>, token
{body}
  %t2 = store_view_tko weak %r, %py[%b] token = %0 : tile<{u}x{d}>, partition_view<tile=({u}), tensor_view<?x{d}, strides=[1]>>, tile<i32> -> token
  return
}}
}}
"""

STORE = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16, "f64": np.float64}
STORE.update({"i8": np.int8})


def _round_trip_src(s: str, d: str, t: int) -> str:
    body = (
        f"  %w = ftof %v : tile<{t}x{s}> -> tile<{t}xf4E2M1FN>\n"
        f"  %r = ftof %w : tile<{t}xf4E2M1FN> -> tile<{t}x{d}>"
    )
    return HEAD.format(s=s, d=d, t=t, u=t, body=body)


def _pack_src(t: int) -> str:
    body = (
        f"  %w = ftof %v : tile<{t}xf32> -> tile<{t}xf4E2M1FN>\n"
        f"  %r = pack %w : tile<{t}xf4E2M1FN> -> tile<{t // 2}xi8>"
    )
    return HEAD.format(s="f32", d="i8", t=t, u=t // 2, body=body)


def _unpack_src(t: int) -> str:
    """t bytes -> 2t e2m1 codes -> f32."""
    body = (
        f"  %w = unpack %v : tile<{t}xi8> -> tile<{2 * t}xf4E2M1FN>\n"
        f"  %r = ftof %w : tile<{2 * t}xf4E2M1FN> -> tile<{2 * t}xf32>"
    )
    return HEAD.format(s="i8", d="f32", t=t, u=2 * t, body=body)


def _i4_src(t: int) -> str:
    """t bytes -> 2t i4 -> t bytes (the identity)."""
    body = (
        f"  %w = unpack %v : tile<{t}xi8> -> tile<{2 * t}xi4>\n"
        f"  %r = pack %w : tile<{2 * t}xi4> -> tile<{t}xi8>"
    )
    return HEAD.format(s="i8", d="i8", t=t, u=t, body=body)


def _run_both(src: str, x: np.ndarray, y: np.ndarray, sm: str = "sm_100") -> tuple:
    """(interpreter, PTX simulator) results of the one-tile kernel."""
    from tilegen.runtime.interp.api import run_module
    from tilegen.runtime.ptxsim import run_ptxsim

    args = [("x", x), ("y", y)]
    interp = run_module(parse_module(src, "k.mlir"), [(k, v.copy()) for k, v in args], (1, 1, 1))
    ptx = run_ptxsim(parse_module(src, "k.mlir"), [(k, v.copy()) for k, v in args], (1, 1, 1), sm)
    return interp["y"], ptx["y"]


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.itemsize])


def _ptxas_ok(src: str, sm: str, needs: tuple) -> None:
    from tilegen.runtime.codegen.driver import assemble
    from tilegen.runtime.ptxsim import compile_to_ptx

    ptx = compile_to_ptx(parse_module(src, "k.mlir"), sm)
    assert f".target {sm}a" in ptx  # the e2m1 cvts are arch-specific (sm_100a, sm_120a)
    for n in needs:
        assert n in ptx, n
    if PTXAS is not None:
        assemble(ptx, int(sm[3:]), verbose=True)  # raises on a ptxas error


def _f32_inputs() -> tuple[np.ndarray, np.ndarray]:
    """Interesting f32 inputs and the e2m1 value each rounds to (RNE, satfinite)."""
    up = lambda v: np.nextafter(np.float32(v), np.float32(np.inf))  # noqa: E731
    dn = lambda v: np.nextafter(np.float32(v), np.float32(-np.inf))  # noqa: E731
    cases = [(float(v), float(v)) for v in E2M1]  # every value exactly (+-0 too)
    # ties between neighbours go to the even code; one ulp off goes to the nearer one
    for tie, lo, hi, even in [
        (0.25, 0.0, 0.5, 0.0),
        (0.75, 0.5, 1.0, 1.0),
        (1.25, 1.0, 1.5, 1.0),
        (1.75, 1.5, 2.0, 2.0),
        (2.5, 2.0, 3.0, 2.0),
        (3.5, 3.0, 4.0, 4.0),
        (5.0, 4.0, 6.0, 4.0),
    ]:
        cases += [(tie, even), (float(dn(tie)), lo), (float(up(tie)), hi)]
    cases += [(0.3, 0.5), (1.2, 1.0), (2.6, 3.0), (6.0001, 6.0), (7.0, 6.0), (1e30, 6.0)]
    cases += [(np.inf, 6.0), (1e-30, 0.0), (1e-45, 0.0), (0.1, 0.0)]  # 1e-45: f32 denormal
    x = np.array([c[0] for c in cases], np.float32)
    want = np.array([c[1] for c in cases], np.float32)
    x = np.concatenate([x, -x])
    want = np.concatenate([want, -want])  # symmetric: -0.1 -> -0, -inf -> -6
    x = np.concatenate([x, np.array([np.nan, -np.nan], np.float32)])
    want = np.concatenate([want, np.array([0.0, -0.0], np.float32)])  # as the interpreter
    return x, want


def _pad(x: np.ndarray, n: int) -> np.ndarray:
    return np.concatenate([x, np.zeros(n - len(x), x.dtype)])


def test_f32_round_trip_exact():
    """f32 -> e2m1 -> f32 on sm_100: every code, every tie (to even) and one ulp either side,
    the subnormal 0.5, saturation (> 6, inf) to +-6, -0, NaN -> +-0: bit for bit the table and
    the interpreter."""
    x, want = _f32_inputs()
    t = 128
    assert len(x) <= t
    x, want = _pad(x, t), _pad(want, t)
    interp, ptx = _run_both(_round_trip_src("f32", "f32", t), x, np.zeros(t, np.float32))
    assert np.array_equal(_bits(interp), _bits(want)), x[_bits(interp) != _bits(want)]
    assert np.array_equal(_bits(ptx), _bits(want)), x[_bits(ptx) != _bits(want)]


@pytest.mark.parametrize("sm", ["sm_100", "sm_120"])
def test_f32_round_trip_ptxas(sm):
    _ptxas_ok(
        _round_trip_src("f32", "f32", 64),
        sm,
        ("cvt.rn.satfinite.e2m1x2.f32", "cvt.rn.f16x2.e2m1x2", ".reg .b8"),
    )


PAIRS = [("f16", "f16"), ("bf16", "bf16"), ("f32", "f64"), ("f16", "bf16"), ("bf16", "f32")]


@pytest.mark.parametrize("s,d", PAIRS, ids=[f"{s}-{d}" for s, d in PAIRS])
def test_other_widths_round_trip(s, d):
    """f16 / bf16 sources (exactly through f32) and f16 / bf16 / f64 results: the interpreter's
    bits over every 64th 16-bit pattern (f32: as its top half), NaN and inf included."""
    t = 1024
    if s == "f16":
        codes = np.arange(0, 1 << 16, 64, dtype=np.uint32).astype(np.uint16)
        codes[:16] = _bits(E2M1.astype(np.float16))
        x = codes.view(np.float16)
    else:  # bf16 codes; f32: the same as the top halves
        codes = np.arange(0, 1 << 16, 64, dtype=np.uint32).astype(np.uint16)
        codes[:16] = (_bits(E2M1) >> 16).astype(np.uint16)
        x = codes if s == "bf16" else (codes.astype(np.uint32) << 16).view(np.float32)
    interp, ptx = _run_both(_round_trip_src(s, d, t), x, np.zeros(t, STORE[d]))
    bad = np.nonzero(_bits(interp) != _bits(ptx))[0]
    assert not bad.size, f"{bad.size} differ; first input bits {int(_bits(x)[bad[0]]):#x}"
    # the e2m1 values themselves come back exactly
    exact = {"f16": E2M1.astype(np.float16), "f64": E2M1.astype(np.float64)}
    exact["f32"] = E2M1
    exact["bf16"] = (_bits(E2M1) >> 16).astype(np.uint16)
    assert np.array_equal(_bits(ptx[:16]), _bits(exact[d]))


def test_pack_bytes():
    """pack of e2m1 codes: element 2i in the low nibble of byte i (sm_100, ptxsim = interp)."""
    t = 64
    x = np.tile(E2M1, t // 16)
    codes = np.tile(np.arange(16, dtype=np.uint8), t // 16)
    want = (codes[0::2] | (codes[1::2] << 4)).astype(np.uint8).view(np.int8)
    interp, ptx = _run_both(_pack_src(t), x, np.zeros(t // 2, np.int8))
    assert np.array_equal(interp, want)
    assert np.array_equal(ptx, want)
    _ptxas_ok(_pack_src(t), "sm_100", ("cvt.rn.satfinite.e2m1x2.f32",))


def test_unpack_every_byte():
    """unpack of all 256 bytes into e2m1 pairs, widened to f32: byte i gives the values of its
    low then its high nibble."""
    t = 256
    x = np.arange(256, dtype=np.uint16).astype(np.uint8).view(np.int8)
    b = np.arange(256)
    want = np.stack([E2M1[b & 15], E2M1[b >> 4]], axis=1).reshape(-1)
    interp, ptx = _run_both(_unpack_src(t), x, np.zeros(2 * t, np.float32))
    assert np.array_equal(_bits(interp), _bits(want))
    assert np.array_equal(_bits(ptx), _bits(want))
    _ptxas_ok(_unpack_src(t), "sm_100", ("cvt.rn.f16x2.e2m1x2",))


@pytest.mark.parametrize("sm", ["sm_80", "sm_90", "sm_100"])
def test_i4_unpack_pack_identity(sm):
    """i8 -> 2 x i4 -> i8 (no fp4: every target) gives the bytes back."""
    t = 128
    x = np.arange(-128, 128, 2, dtype=np.int16).astype(np.int8)
    interp, ptx = _run_both(_i4_src(t), x, np.zeros(t, np.int8), sm)
    assert np.array_equal(interp, x) and np.array_equal(ptx, x)


@pytest.mark.parametrize("sm", ["sm_80", "sm_90"])
def test_refused_below_sm100_like_tileiras(sm):
    """tileiras 13.5 refuses f4E2M1FN below sm_100; so does tilegen, naming the target."""
    from tilegen.runtime.ptxsim import compile_to_ptx

    with pytest.raises(Exception) as e:
        compile_to_ptx(parse_module(_round_trip_src("f32", "f32", 64), "k.mlir"), sm)
    assert f"Incompatibility with architecture '{sm}': unsupported type 'f4E2M1FN'" in str(e.value)


def _cutile_kernel():
    """cuTile's API for the same: astype both ways, pack_to_bytes and unpack_from_bytes (module
    level: cuTile evaluates the ``ct.Constant`` annotation in this module's globals)."""
    global ct
    ct = pytest.importorskip("cuda.tile")
    from cuda.tile._datatype import float4_e2m1fn
    from cuda.tile._stub import pack_to_bytes, unpack_from_bytes

    @ct.kernel
    def fp4(x, out, packed, back, T: ct.Constant[int]):
        v = ct.load(x, index=(0,), shape=(T,))
        q = ct.astype(v, float4_e2m1fn)
        ct.store(out, index=(0,), tile=ct.astype(q, ct.float32))
        p = pack_to_bytes(q)
        ct.store(packed, index=(0,), tile=p)
        ct.store(back, index=(0,), tile=ct.astype(unpack_from_bytes(p, float4_e2m1fn), ct.float16))

    return fp4


def test_cutile_astype_pack_unpack():
    """The cuTile kernel through tilegen.cutile.launch, interpreter and ptxsim on sm_100."""
    fp4 = _cutile_kernel()
    import tilegen.cutile as tc

    t = 32
    x = np.array([0, 0.3, 1.2, 1.8, 2.4, 2.6, 5, 7, -0.0, -0.7, -1, -1.5, -2, -3, -4, -9] * 2)
    x = x.astype(np.float32)
    want = np.array([0, 0.5, 1, 2, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6] * 2)
    want = want.astype(np.float32)
    codes = np.array([0, 1, 2, 4, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] * 2, np.uint8)
    want_p = (codes[0::2] | (codes[1::2] << 4)).astype(np.uint8)
    for be in ("interp", "ptxsim"):
        out, packed = np.zeros(t, np.float32), np.zeros(t // 2, np.uint8)
        back = np.zeros(t, np.float16)
        tc.launch((1,), fp4, (x, out, packed, back, t), backend=be, gpu_name="sm_100")
        assert np.array_equal(_bits(out), _bits(want)), (be, out)
        assert np.array_equal(packed, want_p), (be, packed)
        assert np.array_equal(_bits(back), _bits(want.astype(np.float16))), (be, back)


def test_tileiras_ptx_agrees(tileiras_capture):
    """tileiras's own PTX for f32 -> e2m1 -> f32 (sm_100: its scoped .b8 cvt blocks), run in
    the simulator: the same bits as tilegen's for every non-NaN input."""
    from tilegen.runtime.ptx.launch import run_ptx

    x, want = _f32_inputs()
    keep = ~np.isnan(x)
    t = 128
    x, want = _pad(x[keep], t), _pad(want[keep], t)
    theirs = run_ptx(
        tileiras_capture(_round_trip_src("f32", "f32", t), "sm_100"),
        [x.copy(), np.zeros(t, np.float32)],
        (1, 1, 1),
    )[1]
    assert np.array_equal(_bits(theirs), _bits(want)), x[_bits(theirs) != _bits(want)]
