"""``tilegen.cutile.launch``: cuTile kernels run on the CPU through both backends (issue 15).

Every case of ``cutile_kernels.launch_cases()`` (fifteen launches of twelve kernels) runs with
``backend="interp"`` and ``backend="ptxsim"`` and is checked against NumPy; the tests below add
in-place updates of strided views, bf16 / fp8 through ml_dtypes, scalar typing, constants, the
per-signature cache, torch tensors and the errors (each located at the kernel's source line).
"""

import inspect
import io
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("cuda.tile", reason="cuda-tile is not installed (pip install -e '.[cutile]')")

import cuda.tile as ct  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from cutile_kernels import kernels, launch_cases  # noqa: E402

from tilegen.cutile import LaunchError, cache_info, clear_cache, launch, signature_for  # noqa: E402

KERNELS = kernels()
CASES = {c.name: c for c in launch_cases()}
BACKENDS = ("interp", "ptxsim")

#: (case, backend) pairs that fail today because of a tilegen bug outside tilegen.cutile; each is
#: a strict xfail, so the test fails as soon as the bug is fixed and the entry must go
KNOWN_BUGS: dict = {}


def _line_of(fn, text: str) -> int:
    """The source line of ``fn`` holding ``text``."""
    fn = getattr(getattr(fn, "_annotated_function", None), "pyfunc", fn)  # a @ct.kernel
    lines, start = inspect.getsourcelines(fn)
    for i, line in enumerate(lines):
        if text in line:
            return start + i
    raise AssertionError(f"{text!r} not in {fn.__name__}")


def _run_case(case, backend):
    grid, args = case.make(np.random.default_rng(0))
    before = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    out = io.StringIO()
    launch(grid, KERNELS[case.kernel].kernel, args, backend=backend, stdout=out)
    return args, before, out.getvalue()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_case_matches_numpy(name, backend, request):
    if (name, backend) in KNOWN_BUGS:
        request.applymarker(pytest.mark.xfail(reason=KNOWN_BUGS[name, backend], strict=True))
    case = CASES[name]
    args, before, printed = _run_case(case, backend)
    for index, want in case.expect(before).items():
        got = args[index]
        assert got.shape == want.shape and got.dtype == before[index].dtype
        np.testing.assert_allclose(got, want, rtol=case.rtol, atol=case.atol)
    for text in case.stdout:
        assert text in printed, printed
    # arrays the kernel only reads are left as they were
    for index, a in enumerate(before):
        if isinstance(a, np.ndarray) and index not in case.expect(before):
            assert np.array_equal(args[index], a)


@ct.kernel
def scale_bf16(x, out, alpha, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    t = ct.astype(ct.load(x, index=(bid,), shape=(TILE,)), ct.float32)
    ct.store(out, index=(bid,), tile=ct.astype(t * alpha, ct.bfloat16))


@pytest.mark.parametrize("backend", BACKENDS)
def test_bf16_arrays_through_ml_dtypes(backend):
    ml = pytest.importorskip("ml_dtypes")
    x = np.random.default_rng(1).standard_normal(300).astype(ml.bfloat16)
    out = np.zeros(300, ml.bfloat16)
    launch((3,), scale_bf16, (x, out, 3.0, 128), backend=backend)
    want = (x.astype(np.float32) * np.float32(3.0)).astype(ml.bfloat16)  # round to nearest even
    assert out.dtype == ml.bfloat16
    assert np.array_equal(out.view(np.uint16), want.view(np.uint16))


@ct.kernel
def dequant_fp8(q, out, scale, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    t = ct.astype(ct.load(q, index=(bid,), shape=(TILE,)), ct.float32)
    ct.store(out, index=(bid,), tile=t * scale)


def test_fp8_arrays_interp():
    ml = pytest.importorskip("ml_dtypes")
    q = np.random.default_rng(2).standard_normal(256).astype(ml.float8_e4m3fn)
    out = np.zeros(256, np.float32)
    launch((2,), dequant_fp8, (q, out, 0.5, 128))
    assert np.array_equal(out, q.astype(np.float32) * np.float32(0.5))


def test_fp8_ptxsim_matches_or_names_the_line():
    """The PTX backend either runs the fp8 -> f32 cast (issue 15) or refuses it with a
    diagnostic located at the astype line (the bytecode's debug info)."""
    ml = pytest.importorskip("ml_dtypes")
    q = np.random.default_rng(2).standard_normal(256).astype(ml.float8_e4m3fn)
    out = np.zeros(256, np.float32)
    try:
        launch((2,), dequant_fp8, (q, out, 0.5, 128), backend="ptxsim")
    except LaunchError as e:
        line = _line_of(dequant_fp8, "ct.astype(ct.load(q")
        assert f"test_cutile_launch.py:{line}:" in str(e), str(e)
        assert "Traceback" not in str(e)
    else:
        assert np.array_equal(out, q.astype(np.float32) * np.float32(0.5))


def test_fp8_refused_on_sm_80_by_cutile():
    ml = pytest.importorskip("ml_dtypes")
    q = np.zeros(128, ml.float8_e4m3fn)
    with pytest.raises(Exception, match="float8_e4m3fn is not supported on sm_80"):
        launch((1,), dequant_fp8, (q, np.zeros(128, np.float32), 1.0, 128), gpu_name="sm_80")


@pytest.mark.parametrize("backend", BACKENDS)
def test_in_place_update_of_a_strided_view(backend):
    """A non-contiguous output view is written through; the elements around it are not."""
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal(300).astype(np.float32), rng.standard_normal(300).astype(np.float32)
    base = np.full(600, -7.0, np.float32)
    c = base[::2]
    launch((2,), KERNELS["vec_add"].kernel, (a, b, c, 256), backend=backend)
    assert np.array_equal(base[::2], a + b)
    assert np.all(base[1::2] == -7.0)


@ct.kernel
def fill_scalars(out_i, out_f, k, x, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    ct.store(out_i, index=(bid,), tile=ct.full((TILE,), 0, out_i.dtype) + k)
    ct.store(out_f, index=(bid,), tile=ct.full((TILE,), 0.0, out_f.dtype) + x)


@ct.kernel
def fill_i64(out, k: ct.ScalarInt64, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    ct.store(out, index=(bid,), tile=ct.full((TILE,), 0, ct.int64) + k)


def test_scalar_types_follow_cutile():
    import cuda.tile as ct
    from cuda.tile.compilation import ScalarConstraint

    oi, of = np.zeros(64, np.int32), np.zeros(64, np.float32)
    sig = signature_for(fill_scalars, (oi, of, 7, 2.5, 64))
    assert sig.parameters[2] == ScalarConstraint(ct.int32)  # Python int: int32
    assert sig.parameters[3] == ScalarConstraint(ct.float32)  # Python float: float32
    sig = signature_for(fill_scalars, (oi, of, np.int64(7), np.float64(2.5), 64))
    assert sig.parameters[2] == ScalarConstraint(ct.int64)  # NumPy scalars keep their dtype
    assert sig.parameters[3] == ScalarConstraint(ct.float32)  # np.float64 is a Python float
    sig = signature_for(fill_i64, (np.zeros(64, np.int64), 5, 64))
    assert sig.parameters[1] == ScalarConstraint(ct.int64)  # ct.ScalarInt64


@pytest.mark.parametrize("backend", BACKENDS)
def test_scalars_reach_the_kernel(backend):
    oi, of = np.zeros(64, np.int32), np.zeros(64, np.float32)
    launch((1,), fill_scalars, (oi, of, -7, 2.5, 64), backend=backend)
    assert np.all(oi == -7) and np.all(of == 2.5)
    big = np.zeros(64, np.int64)
    launch((1,), fill_i64, (big, 2**40 + 3, 64), backend=backend)
    assert np.all(big == 2**40 + 3)


def test_int_scalar_overflow_is_an_error():
    with pytest.raises(LaunchError, match=r"argument 'k': 4294967296 does not fit a int32.*"):
        launch(
            (1,), fill_scalars, (np.zeros(64, np.int32), np.zeros(64, np.float32), 2**32, 1.0, 64)
        )


def test_array_constraints_follow_the_launch_specialisation():
    """cuTile's launcher specialises each array on stride == 1, strides divisible by 16 bytes
    and shapes divisible by 16 (base address 16-byte aligned, elements disjoint)."""
    arrays = tuple(np.zeros((32, 40), np.float32) for _ in range(3))
    sig = signature_for(KERNELS["add2d"].kernel, arrays + (16, 32))
    a = sig.parameters[0]
    assert a.ndim == 2 and a.index_dtype == ct.int32 and a.base_addr_divisible_by == 16
    assert a.stride_constant == (None, 1) and not a.may_alias_internally
    assert a.shape_divisible_by == (16, 1)  # 32 rows, 40 columns
    assert a.stride_divisible_by == (4, 1)  # 40 floats = 160 bytes per row


def test_constants_specialise_the_kernel():
    clear_cache()
    a, b = np.arange(512, dtype=np.float32), np.ones(512, np.float32)
    c = np.zeros(512, np.float32)
    launch((2,), KERNELS["vec_add"].kernel, (a, b, c, 256))
    assert np.array_equal(c, a + b)
    c[:] = 0
    launch((4,), KERNELS["vec_add"].kernel, (a, b, c, 128))  # another constant: another kernel
    assert np.array_equal(c, a + b)
    assert cache_info() == {"hits": 0, "misses": 2, "entries": 2}


def test_cache_per_signature():
    clear_cache()
    k = KERNELS["vec_add"].kernel
    x = [np.ones(512, np.float32) for _ in range(3)]
    launch((2,), k, (*x, 256))
    launch((2,), k, (*x, 256))  # same signature: cached
    assert cache_info()["hits"] == 1 and cache_info()["misses"] == 1
    y = [np.ones(1024, np.float32) for _ in range(3)]
    launch((4,), k, (*y, 256))  # another size of the same divisibility class: cached
    assert cache_info()["hits"] == 2
    z = [np.ones(500, np.float32) for _ in range(3)]
    launch((2,), k, (*z, 256))  # 500 is not divisible by 16: another specialisation
    launch((2,), k, (*x, 256), backend="ptxsim")  # another backend
    launch((2,), k, (*x, 256), backend="ptxsim", gpu_name="sm_80")  # another target
    launch((2,), k, [a.astype(np.float64) for a in x] + [256])  # another dtype
    assert cache_info() == {"hits": 2, "misses": 5, "entries": 5}


@ct.kernel
def checked(x, out, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    t = ct.load(x, index=(bid,), shape=(TILE,))
    ct.assert_(ct.sum(t) < 100.0, "sum too big")
    ct.store(out, index=(bid,), tile=t)


@pytest.mark.parametrize("backend", BACKENDS)
def test_runtime_failure_names_the_source_line(backend):
    line = _line_of(checked, "ct.assert_")
    ok = np.ones(64, np.float32)
    out = np.zeros(64, np.float32)
    launch((1,), checked, (ok, out, 64), backend=backend)
    assert np.array_equal(out, ok)
    with pytest.raises(LaunchError) as e:
        launch((1,), checked, (np.full(64, 5.0, np.float32), out, 64), backend=backend)
    assert f"test_cutile_launch.py:{line}" in str(e.value) and "sum too big" in str(e.value)
    assert e.value.kernel == "checked"


@pytest.mark.parametrize("backend", BACKENDS)
def test_tilegen_verifier_error_names_the_source_line(backend):
    """cuTile writes ``divi unsigned rounding<negative_inf>`` for an unsigned ``//``, which the
    Tile IR verifier rejects: the diagnostic points at the ``//``."""
    k = KERNELS["uint_floordiv_bug"].kernel
    line = _line_of(k, "x // y")
    a = [np.ones(128, np.uint32) for _ in range(3)]
    with pytest.raises(LaunchError) as e:
        launch((1,), k, (*a, 128), backend=backend)
    assert f"cutile_kernels.py:{line}:" in str(e.value)
    assert "rounding mode 'negative_inf' is not allowed with 'unsigned' flag" in str(e.value)
    assert e.value.diagnostics and e.value.diagnostics[0].severity == "error"


@ct.kernel
def mismatched(a, b, TILE: ct.Constant[int]):
    x = ct.load(a, index=(0,), shape=(TILE,))
    ct.store(b, index=(0,), tile=x + ct.full((2 * TILE,), 1.0, ct.float32))


def test_cutile_type_error_names_the_source_line():
    line = _line_of(mismatched, "x + ct.full")
    with pytest.raises(Exception) as e:
        launch((1,), mismatched, (np.zeros(64, np.float32), np.zeros(64, np.float32), 64))
    assert not isinstance(e.value, LaunchError)  # cuTile's own error, unchanged
    assert f"line {line}" in str(e.value) and "test_cutile_launch.py" in str(e.value)


def test_argument_errors():
    k = KERNELS["vec_add"].kernel
    x = np.zeros(256, np.float32)
    with pytest.raises(LaunchError, match=r"takes 4 argument\(s\) \(a, b, c, TILE\), 3 given"):
        launch((1,), k, (x, x.copy(), 256))
    with pytest.raises(LaunchError, match="argument 'b': shares memory with argument 'a'"):
        launch((1,), k, (x, x, x.copy(), 256))
    with pytest.raises(LaunchError, match="argument 'b': unsupported argument type list"):
        launch((1,), k, (x, [1.0] * 256, x.copy(), 256))
    with pytest.raises(LaunchError, match="argument 'a': a 0-d array"):
        launch((1,), k, (np.array(1.0, np.float32), x, x.copy(), 256))
    with pytest.raises(LaunchError, match="backend must be one of interp, ptxsim"):
        launch((1,), k, (x, x.copy(), x.copy(), 256), backend="cuda")
    with pytest.raises(LaunchError, match="gpu_name must be one of"):
        launch((1,), k, (x, x.copy(), x.copy(), 256), gpu_name="sm_75")
    with pytest.raises(LaunchError, match="grid must be 1 to 3 positive integers"):
        launch((0,), k, (x, x.copy(), x.copy(), 256))
    with pytest.raises(LaunchError, match="expected a @ct.kernel"):
        launch((1,), lambda a: a, (x,))


@pytest.mark.parametrize("backend", BACKENDS)
def test_torch_cpu_tensors_in_place(backend):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    a = torch.randn(300)
    b = torch.randn(300)
    c = torch.zeros(300)
    launch((2,), KERNELS["vec_add"].kernel, (a, b, c, 256), backend=backend)
    assert torch.equal(c, a + b)
    x = torch.randn(300).to(torch.bfloat16)
    out = torch.zeros(300, dtype=torch.bfloat16)
    launch((3,), scale_bf16, (x, out, 3.0, 128), backend=backend)
    assert torch.equal(out, (x.float() * 3.0).to(torch.bfloat16))


def test_launch_compiles_through_the_driver():
    """``launch`` / ``compile_kernel`` run the driver's stages with ``CompileOptions``: the
    options are part of the cache key, reach the stages, and give the PTX ``tilegen compile``
    gives for the same bytecode and options."""
    from tilegen.cutile import compile_kernel
    from tilegen.runtime.driver import compile_source
    from tilegen.runtime.options import CompileOptions

    clear_cache()
    k = KERNELS["vec_add"].kernel
    x = [np.arange(512, dtype=np.float32) for _ in range(3)]
    launch((2,), k, (*x, 256), backend="ptxsim")
    o0 = CompileOptions(opt_level=0, use_cp_async=False)
    launch((2,), k, (*x, 256), backend="ptxsim", options=o0)  # other options: other entry
    assert cache_info() == {"hits": 0, "misses": 2, "entries": 2}
    c = compile_kernel(k, (*x, 256), options=o0, emit="cubin")  # the cached entry, assembled
    assert cache_info()["hits"] == 1 and c.stages[-1] == "ptxas" and c.cubin[:4] == b"\x7fELF"
    assert c.options.opt_level == 0 and c.options.target.name == "sm_90"
    want = compile_source(c.data, CompileOptions("sm_90", opt_level=0, use_cp_async=False))
    assert c.ptx == want.ptx
    ir = compile_kernel(k, (*x, 256), emit="nv_tileaa")
    assert ir.stages[-1] == "convert"
    assert any(op.name == "nv_tileaa.func" for op in ir.module.walk())
    with pytest.raises(LaunchError, match="options must be CompileOptions, got dict"):
        launch((2,), k, (*x, 256), options={"opt_level": 0})
    with pytest.raises(LaunchError, match="emit must be one of"):
        compile_kernel(k, (*x, 256), emit="sass")


def test_launch_diagnostics_are_the_drivers():
    """A module tilegen refuses gives the diagnostics ``tilegen compile`` prints for the same
    bytecode (the driver's, located through the bytecode's debug info)."""
    from cuda.tile.compilation import export_kernel

    from tilegen.runtime.diagnostics import CompileError
    from tilegen.runtime.driver import compile_source
    from tilegen.runtime.options import CompileOptions

    k = KERNELS["uint_floordiv_bug"].kernel
    a = [np.ones(128, np.uint32) for _ in range(3)]
    with pytest.raises(LaunchError) as e:
        launch((1,), k, (*a, 128), backend="ptxsim")
    buf = io.BytesIO()
    sig = signature_for(k, (*a, 128)).with_mangled_symbol("uint_floordiv_bug")
    export_kernel(k, [sig], buf, gpu_code="sm_90", output_format="tileir_bytecode")
    with pytest.raises(CompileError) as want:
        compile_source(
            buf.getvalue(), CompileOptions(target="sm_90"), "<uint_floordiv_bug bytecode>"
        )
    assert want.value.stage == "verify" and want.value.exit_code == 3
    assert [d.format() for d in e.value.diagnostics] == [d.format() for d in want.value.diagnostics]
