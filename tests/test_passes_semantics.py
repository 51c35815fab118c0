"""The passes preserve meaning: every cuTile corpus kernel, rewritten by canonicalize, cse,
loop-split and fuse-fma, still produces its expected outputs under the interpreter."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from tilegen.runtime.passes.pipeline import parse_pipeline, run_pipeline

from paths import CORPUS  # ../shared or $TILEGEN_SHARED

MANIFEST = CORPUS / "manifest.json"
PIPELINE = "canonicalize,cse,loop-split,canonicalize,fuse-fma"

pytestmark = pytest.mark.skipif(not MANIFEST.exists(), reason="cuTile corpus not available")


def _kernels():
    if not MANIFEST.exists():
        return []
    return [
        pytest.param(k, id=k["name"])
        for k in json.loads(MANIFEST.read_text())["kernels"]
        if not k.get("expect_tileiras_fail") and (CORPUS / "out" / f"{k['name']}.mlir").exists()
    ]


@pytest.mark.parametrize("kernel", _kernels())
def test_kernel_outputs_survive_the_passes(kernel):
    from tilegen.runtime.interp.api import load_module, load_npz_args, run_module

    module = load_module(CORPUS / "out" / f"{kernel['name']}.mlir")
    run_pipeline(module, parse_pipeline(PIPELINE))
    args, grid = load_npz_args(CORPUS / "out" / f"{kernel['name']}.npz")
    result = run_module(module, args, grid, stdout=io.StringIO())
    rtol, atol = kernel["tolerance_rtol_atol"]
    with np.load(CORPUS / "out" / f"{kernel['name']}.npz") as d:
        for key in (k for k in d.files if k.startswith("expected__")):
            exp, got = d[key], result[key[len("expected__") :]]
            if exp.dtype.kind == "f":
                np.testing.assert_allclose(got, exp, rtol=rtol, atol=atol, equal_nan=True)
            else:
                np.testing.assert_array_equal(got, exp)
