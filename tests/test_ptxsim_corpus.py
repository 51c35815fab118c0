"""tileiras's own PTX for the cuTile corpus kernels, run in the SIMT simulator, must reproduce
the corpus's expected outputs."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest

from tilegen.runtime.ptx.launch import run_ptx

from paths import CORPUS  # ../shared or $TILEGEN_SHARED

# Hidden CUtensorMap params of the sm_90 PTX: box and swizzle come from tileiras's host object
# (runtime/ptx/nv_host.py), recorded in tests/data/tensor_ptx/sm_90_tensor_maps.json.
MAPS_FILE = Path(__file__).parent / "data" / "tensor_ptx" / "sm_90_tensor_maps.json"
TENSOR_MAPS = json.loads(MAPS_FILE.read_text())["maps"] if MAPS_FILE.exists() else {}
# kernel.arch -> what the simulator still lacks for it
BLOCKED = {
    "matmul_f16.sm_100": "tcgen05 (sm_100 tensor-memory MMA) is not simulated",
}


def _kernels() -> list:
    if not (CORPUS / "manifest.json").exists():
        return []
    manifest = json.loads((CORPUS / "manifest.json").read_text())
    out = []
    for k in manifest["kernels"]:
        name = k["name"]
        for ptx in sorted((CORPUS / "out" / "ptx").glob(f"{name}.sm_*.ptx")):
            arch = ptx.name.split(".")[1]
            marks = []
            if BLOCKED.get(f"{name}.{arch}"):
                marks.append(pytest.mark.skip(reason=BLOCKED[f"{name}.{arch}"]))
            out.append(pytest.param(k, ptx, id=f"{name}.{arch}", marks=marks))
    return out


@pytest.mark.skipif(not CORPUS.exists(), reason="cuTile corpus not present")
@pytest.mark.parametrize("kernel,ptx", _kernels())
def test_tileiras_ptx_matches_expected(kernel: dict, ptx: Path) -> None:
    data = np.load(CORPUS / kernel["samples"])
    names = [p["name"] for p in kernel["params"] if p["kind"] != "constant"]
    args = [data[f"arg__{n}"] for n in names]
    printed = io.StringIO()
    maps = TENSOR_MAPS.get(ptx.name.removesuffix(".ptx"))
    outs = run_ptx(
        ptx.read_text(), args, data["grid"], file=ptx.name, stdout=printed, tensor_maps=maps
    )
    if kernel.get("expected_stdout") is not None:
        assert printed.getvalue() == kernel["expected_stdout"]
    arrays = [n for n, a in zip(names, args) if np.asarray(a).ndim > 0]
    rtol, atol = kernel.get("tolerance_rtol_atol") or (1e-5, 1e-6)
    for name in kernel["outputs"]:
        got = outs[arrays.index(name)]
        want = data[f"expected__{name}"]
        if got.dtype.kind == "f":
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=name)
        else:
            np.testing.assert_array_equal(got, want, err_msg=name)
