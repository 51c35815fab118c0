"""Every public cuTile corpus kernel lowered to nv_tileaa (no cuda_tile op left, the module
verifies) and interpreted matches the same expected outputs as its cuda_tile run.

Kernels the conversion does not handle yet are strict xfails naming why, so progress shows.
"""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from tilegen.runtime.interp.api import RunError, load_module, load_npz_args, run_module

from paths import CORPUS  # ../shared or $TILEGEN_SHARED

MANIFEST = CORPUS / "manifest.json"

pytestmark = pytest.mark.skipif(not MANIFEST.exists(), reason="cuTile corpus not available")

#: kernel file -> why it does not match through --lower-to nv_tileaa yet (conversion gaps)
PENDING: dict[str, str] = {}  # dim_map, traversal strides and gather offsets: lowered


def _kernels() -> list[dict]:
    return json.loads(MANIFEST.read_text())["kernels"] if MANIFEST.exists() else []


def _cases():
    out = []
    for k in _kernels():
        for suffix in (".tileirbc", ".v13_1.tileirbc"):
            f = CORPUS / "out" / (k["name"] + suffix)
            if not f.exists() or k.get("expect_tileiras_fail"):
                continue
            marks = []
            if f.name in PENDING:
                marks.append(pytest.mark.xfail(strict=True, reason=PENDING[f.name]))
            out.append(pytest.param(k, f, id=f.name, marks=marks))
    return out


def _check(kernel: dict, result: dict) -> None:
    """The same comparison as the cuda_tile corpus run (the kernel's rtol/atol for floats)."""
    rtol, atol = kernel["tolerance_rtol_atol"]
    with np.load(CORPUS / "out" / (kernel["name"] + ".npz")) as d:
        keys = [k for k in d.files if k.startswith("expected__")]
        assert keys
        for key in keys:
            name = key[len("expected__") :]
            exp, got = d[key], result[name]
            assert got.dtype == exp.dtype and got.shape == exp.shape, name
            if exp.dtype.kind == "f":
                np.testing.assert_allclose(got, exp, rtol=rtol, atol=atol, equal_nan=True)
            else:
                np.testing.assert_array_equal(got, exp, err_msg=name)


@pytest.mark.parametrize("kernel,path", _cases())
def test_corpus_kernel_through_nv_tileaa(kernel, path):
    from tilegen.runtime.interp.lowered import lower_module

    lowered = lower_module(load_module(path), "nv_tileaa", "sm_90")
    left = [op.name for op in lowered.walk() if op.name.startswith("cuda_tile.")]
    assert not left, left
    args, grid = load_npz_args(CORPUS / "out" / (kernel["name"] + ".npz"))
    out = io.StringIO()
    result = run_module(lowered, args, grid, stdout=out)
    _check(kernel, result)
    if kernel["name"] == "print_kernel":
        assert out.getvalue() == "sum=9\nfirst=3 last=1\n"


def test_pending_list_names_real_files():
    assert all((CORPUS / "out" / name).exists() for name in PENDING)


def test_rejected_kernel_is_still_rejected():
    """uint_floordiv_bug never reaches the conversion: the cuda_tile verifier refuses it."""
    bad = [k for k in _kernels() if k.get("expect_tileiras_fail")]
    assert bad
    for k in bad:
        with pytest.raises(RunError, match="not allowed with 'unsigned'"):
            run_module(CORPUS / "out" / (k["name"] + ".tileirbc"), [], lower_to="nv_tileaa")


def test_cli_lower_to_nv_tileaa_checks_expected(tmp_path, capsys):
    from tilegen.cli import main

    argv = ["run", str(CORPUS / "out" / "vec_add.tileirbc"), "--args"]
    argv += [str(CORPUS / "out" / "vec_add.npz"), "--check", "--lower-to", "nv_tileaa"]
    argv += ["--gpu-name", "sm_100", "--out", str(tmp_path / "o.npz")]
    assert main(argv) == 0, capsys.readouterr().err
    assert "expected array(s) match" in capsys.readouterr().out
    assert (tmp_path / "o.npz").exists()


def test_cli_bad_gpu_name_is_a_diagnostic(capsys):
    from tilegen.cli import main

    argv = ["run", str(CORPUS / "out" / "vec_add.tileirbc"), "--args"]
    argv += [str(CORPUS / "out" / "vec_add.npz"), "--lower-to", "nv_tileaa", "--gpu-name", "sm_xx"]
    assert main(argv) == 2  # an unusable configuration (tileiras's class)
    err = capsys.readouterr().err
    assert err.startswith("error: GPU architecture 'sm_xx' is not supported by tilegen")


@pytest.mark.parametrize(
    "name", ["vec_add", "layernorm", "reduce_rows", "scan_cumsum", "matmul_f16", "atomics"]
)
def test_nv_tileaa_run_is_bit_identical_to_cuda_tile_run(name):
    """Same rounding, reduction order and atomics order: not just within tolerance, identical."""
    path = CORPUS / "out" / (name + ".tileirbc")
    args, grid = load_npz_args(CORPUS / "out" / (name + ".npz"))
    direct = run_module(load_module(path), args, grid, stdout=io.StringIO())
    lowered = run_module(load_module(path), args, grid, stdout=io.StringIO(), lower_to="nv_tileaa")
    for key, value in direct.items():
        np.testing.assert_array_equal(lowered[key], value, err_msg=key)
