"""Every public cuTile corpus kernel, run by the interpreter, matches its expected outputs."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest

from tilegen.runtime.interp.api import RunError, load_module, load_npz_args, run_module

from paths import CORPUS  # ../shared or $TILEGEN_SHARED

MANIFEST = CORPUS / "manifest.json"

pytestmark = pytest.mark.skipif(not MANIFEST.exists(), reason="cuTile corpus not available")


def _cases():
    if not MANIFEST.exists():
        return []
    out = []
    for k in json.loads(MANIFEST.read_text())["kernels"]:
        for suffix in (".tileirbc", ".v13_1.tileirbc", ".mlir", ".v13_1.mlir"):
            f = CORPUS / "out" / (k["name"] + suffix)
            if f.exists():
                out.append(pytest.param(k, f, id=f.name))
    return out


def _check(kernel: dict, result: dict, expected_npz: Path) -> None:
    rtol, atol = kernel["tolerance_rtol_atol"]
    with np.load(expected_npz) as d:
        keys = [k for k in d.files if k.startswith("expected__")]
        assert keys
        for key in keys:
            name = key[len("expected__") :]
            exp, got = d[key], result[name]
            assert got.dtype == exp.dtype and got.shape == exp.shape, name
            if exp.dtype.kind == "f":
                np.testing.assert_allclose(
                    got, exp, rtol=rtol, atol=atol, equal_nan=True, err_msg=name
                )
            else:
                np.testing.assert_array_equal(got, exp, err_msg=name)


def _load(f: Path):
    if f.suffix == ".mlir":
        try:
            from tilegen.runtime.asm import parse_module  # noqa: F401

            return load_module(f)
        except RunError as e:
            if "custom format" in str(e) or "no parser" in str(e):
                pytest.skip(f"text parser not complete yet: {e}")
            raise
    return load_module(f)


@pytest.mark.parametrize("kernel,path", _cases())
def test_corpus_kernel(kernel, path):
    if kernel.get("expect_tileiras_fail"):
        with pytest.raises(RunError) as e:
            _load(path)
        assert "not allowed with 'unsigned'" in str(e.value)
        return
    module = _load(path)
    args, grid = load_npz_args(CORPUS / "out" / (kernel["name"] + ".npz"))
    assert tuple(grid) == tuple(kernel["grid"])
    out = io.StringIO()
    result = run_module(module, args, grid, stdout=out)
    _check(kernel, result, CORPUS / "out" / (kernel["name"] + ".npz"))
    if kernel["name"] == "print_kernel":
        assert out.getvalue() == "sum=9\nfirst=3 last=1\n"


def test_flat_params_match_manifest():
    """The calling convention reproduces each kernel's recorded flattened signature."""
    from tilegen.runtime.interp.calling import flatten_args, param_types
    from tilegen.runtime.interp.memory import Heap

    for k in json.loads(MANIFEST.read_text())["kernels"]:
        if "entry" not in k["variants"]["default"]:
            continue  # the negative sample has no recorded signature
        f = CORPUS / "out" / (k["name"] + ".tileirbc")
        module = load_module(f, verify=False)
        entry = next(op for op in module.walk() if op.name == "cuda_tile.entry")
        params = param_types(entry)
        assert len(params) == len(k["variants"]["default"]["entry"]["flat_params"])
        args, _ = load_npz_args(CORPUS / "out" / (k["name"] + ".npz"))
        flat, bindings = flatten_args(params, args, Heap())
        assert len(flat) == len(params)
        arrays = [p["name"] for p in k["params"] if p["kind"] == "array"]
        assert [b.name for b in bindings] == arrays
