"""bench/tensormap_probe.py (docs/pipelines.md section 46): the probe kernel that read a
CUtensorMap's bytes on the H200 assembles for sm_90a and builds its map with the same
``tensormap.replace`` fields, in the same order, as ``runtime/codegen/tma.build_tensormap``."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tilegen.runtime.codegen import tma
from tilegen.runtime.codegen.pipeline import PtxBuilder
from tilegen.runtime.ptxas import find_ptxas

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import tensormap_probe  # noqa: E402


def _fields(ptx: str) -> list:
    return re.findall(r"tensormap\.replace\.tile\.(\w+)\.", ptx)


def test_the_probe_builds_the_map_as_the_compiler_does():
    em = PtxBuilder()
    spec = tma.TensorMapSpec(
        elem="f16",
        elem_bytes=2,
        base="%rd2",
        dims=("%r1", "%r2"),
        strides=("%rd3",),
        box=(64, 128),
        swizzle=128,
    )
    tma.build_tensormap(em, "%r7", spec)
    probe = tensormap_probe.ptx()
    assert _fields(probe) == _fields("\n".join(em.lines))
    assert "elemtype.shared::cta.b1024.b32 [%r7], 6" in probe  # f16
    assert "swizzle_mode.shared::cta.b1024.b32 [%r7], 3" in probe  # 128-byte swizzle
    assert "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu" in probe


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed (the nvcc wheel)")
def test_the_probe_assembles(tmp_path):
    (tmp_path / "p.ptx").write_text(tensormap_probe.ptx())
    p = subprocess.run(
        [str(find_ptxas()), "-arch=sm_90a", str(tmp_path / "p.ptx"), "-o", str(tmp_path / "p.o")],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stderr
