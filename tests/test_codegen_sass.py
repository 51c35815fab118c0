"""The cubins tilegen builds for the tensor-core corpus kernels really use tensor cores: their SASS
(NVIDIA's cuobjdump) holds HMMA / IMMA / DMMA instructions."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tilegen.runtime.codegen.driver import find_ptxas

from paths import CORPUS_OUT as OUT  # ../shared or $TILEGEN_SHARED

PTXAS = find_ptxas()
CUOBJDUMP = str(Path(PTXAS).with_name("cuobjdump")) if PTXAS else shutil.which("cuobjdump")

pytestmark = [
    pytest.mark.skipif(not OUT.exists(), reason="cuTile corpus not present"),
    pytest.mark.skipif(
        PTXAS is None or not Path(CUOBJDUMP or "").is_file(),
        reason="ptxas/cuobjdump not installed (pip install nvidia-cuda-nvcc nvidia-cuda-cuobjdump)",
    ),
]

#: kernel -> the SASS tensor-core opcode its dot must become
EXPECT = {
    "matmul_f16": "HMMA.16816.F32",
    "matmul_tf32": "HMMA.1688.F32.TF32",
    "matmul_int8": "IMMA.16832",
    "matmul_f64": "DMMA",
    "batched_matmul": "HMMA.16816.F32",
    "flash_attention": "HMMA.16816.F32",
}


#: on sm_90 the dots whose shapes wgmma takes become warpgroup MMAs (runtime/codegen/wgmma_dot.py)
EXPECT_SM90 = {
    "matmul_f16": "HGMMA.64x64x16.F32",
    "matmul_tf32": "HGMMA.64x64x8.F32.TF32",
    "matmul_int8": "IGMMA.64x64x32.S8.S8",
    "matmul_fp8": "QGMMA.64x64x32.F32.E4M3.E4M3",
    "flash_attention": "HGMMA.64x64x16.F32",
}


@pytest.mark.parametrize("sm", ["sm_80", "sm_90"])
@pytest.mark.parametrize("kernel", sorted(EXPECT))
def test_tensor_core_sass(tmp_path, kernel, sm, monkeypatch):
    from tilegen.cli import main

    cubin = tmp_path / "k.cubin"
    args = ["compile", str(OUT / f"{kernel}.tileirbc"), f"--gpu-name={sm}", "--emit=cubin"]
    if sm == "sm_90" and kernel in EXPECT_SM90:
        args.append("--no-wgmma")  # the mma.sync fallback on sm_90
    assert main(args + ["-o", str(cubin)]) == 0
    sass = subprocess.run([CUOBJDUMP, "-sass", str(cubin)], capture_output=True, text=True)
    assert sass.returncode == 0, sass.stderr
    ops = re.findall(r"\b((?:HMMA|IMMA|DMMA|[HIQ]GMMA)[.\w]*)", sass.stdout)
    assert any(o.startswith(EXPECT[kernel]) for o in ops), (kernel, sorted(set(ops)))


@pytest.mark.parametrize("kernel", sorted(EXPECT_SM90))
def test_wgmma_sass_on_sm90(tmp_path, kernel):
    from tilegen.cli import main

    cubin = tmp_path / "k.cubin"
    args = ["compile", str(OUT / f"{kernel}.tileirbc"), "--gpu-name=sm_90", "--emit=cubin"]
    assert main(args + ["-o", str(cubin)]) == 0
    sass = subprocess.run([CUOBJDUMP, "-sass", str(cubin)], capture_output=True, text=True)
    assert sass.returncode == 0, sass.stderr
    ops = re.findall(r"\b((?:HMMA|IMMA|DMMA|QMMA|[HIQ]GMMA)[.\w]*)", sass.stdout)
    assert any(o.startswith(EXPECT_SM90[kernel]) for o in ops), (kernel, sorted(set(ops)))
    assert not any(re.match(r"(HMMA|IMMA|QMMA)\.", o) for o in ops), sorted(set(ops))


def test_fp8_dot_uses_tensor_cores_on_sm90(tmp_path):
    from tilegen.cli import main

    cubin = tmp_path / "k.cubin"
    args = ["compile", str(OUT / "matmul_fp8.tileirbc"), "--gpu-name=sm_90", "--emit=cubin"]
    assert main(args + ["-o", str(cubin)]) == 0
    sass = subprocess.run([CUOBJDUMP, "-sass", str(cubin)], capture_output=True, text=True).stdout
    assert re.search(r"\b(HMMA|QMMA|QGMMA)\.", sass)
