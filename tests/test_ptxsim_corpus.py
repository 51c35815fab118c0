"""tileiras's own PTX for the cuTile corpus kernels, run in the SIMT simulator, must reproduce
the corpus's expected outputs."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest

from tilegen.runtime.ptx.launch import run_ptx

CORPUS = Path("/work/shared/corpus/cutile")
TENSOR_CORES = {
    "matmul_f16",
    "matmul_f64",
    "matmul_fp8",
    "matmul_int8",
    "matmul_tf32",
    "batched_matmul",
    "flash_attention",
}
# kernel -> what the simulator still lacks for it (xfail strict so progress shows).
_TMA2D = (
    "cp.async.bulk.tensor.2d: the box shape and swizzle mode live only in the host-encoded "
    "CUtensorMap passed as a hidden param; the simulator's own tensor map covers 1-D copies"
)
BLOCKED = {
    "reduce_rows": _TMA2D,
    "reduce_cols_loop": _TMA2D,
    "layernorm": _TMA2D,
    "newer_ops": "3 hidden CUtensorMap params but only 1 array the kernel never addresses "
    "directly: which array each map describes cannot be inferred from the PTX",
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
            if name in TENSOR_CORES:
                marks.append(
                    pytest.mark.skip(reason="needs tensor cores (mma/wgmma), out of scope")
                )
            elif name in BLOCKED and arch == "sm_90":
                marks.append(pytest.mark.xfail(strict=True, reason=BLOCKED[name]))
            out.append(pytest.param(k, ptx, id=f"{name}.{arch}", marks=marks))
    return out


@pytest.mark.skipif(not CORPUS.exists(), reason="cuTile corpus not present")
@pytest.mark.parametrize("kernel,ptx", _kernels())
def test_tileiras_ptx_matches_expected(kernel: dict, ptx: Path) -> None:
    data = np.load(CORPUS / kernel["samples"])
    names = [p["name"] for p in kernel["params"] if p["kind"] != "constant"]
    args = [data[f"arg__{n}"] for n in names]
    printed = io.StringIO()
    outs = run_ptx(ptx.read_text(), args, data["grid"], file=ptx.name, stdout=printed)
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
