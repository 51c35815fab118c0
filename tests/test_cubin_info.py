"""bench/cubin_info.py (the cubin ELF reader behind bench/codegen_vs_tileiras.py) agrees with
ptxas -v and cuobjdump on a cubin ptxas builds here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import cubin_info  # noqa: E402

from tilegen.runtime.codegen.driver import assemble, find_ptxas  # noqa: E402

_PTX = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry twice(.param .u64 p, .param .u32 n)
.reqntid 64, 1, 1
{
  .reg .b32 %r<4>;
  .reg .b64 %rd<4>;
  .reg .f32 %f<3>;
  .reg .pred %q;
  ld.param.u64 %rd1, [p];
  ld.param.u32 %r1, [n];
  mov.u32 %r2, %tid.x;
  setp.ge.u32 %q, %r2, %r1;
  @%q bra DONE;
  cvta.to.global.u64 %rd2, %rd1;
  mul.wide.u32 %rd3, %r2, 4;
  add.s64 %rd2, %rd2, %rd3;
  ld.global.f32 %f1, [%rd2];
  add.f32 %f2, %f1, %f1;
  st.global.f32 [%rd2], %f2;
DONE:
  ret;
}
"""


@pytest.fixture(scope="module")
def built():
    if find_ptxas() is None:
        pytest.skip("ptxas not installed")
    return assemble(_PTX, 90, verbose=True)


def test_reads_kernel_attributes(built) -> None:
    cubin, log = built
    k = cubin_info.only_kernel(cubin)
    assert k.name == "twice"
    assert k.threads == 64 and k.reqntid == (64, 1, 1)
    assert f"Used {k.registers} registers" in log
    assert k.instruction_words > 4


def test_sass_count_matches_text_words(built, tmp_path: Path) -> None:
    cubin, _ = built
    tool = next(Path(sys.prefix).glob("lib/python3*/site-packages/nvidia/cu13/bin/cuobjdump"), None)
    if tool is None:
        pytest.skip("cuobjdump not installed (nvidia-cuda-cuobjdump)")
    path = tmp_path / "k.cubin"
    path.write_bytes(cubin)
    text = subprocess.run([str(tool), "-sass", str(path)], capture_output=True, text=True).stdout
    total, non_nop = cubin_info.count_sass(text)
    assert total == cubin_info.only_kernel(cubin).instruction_words
    assert 0 < non_nop <= total


def test_rejects_non_elf() -> None:
    with pytest.raises(ValueError):
        cubin_info.read_cubin(b"not an elf file at all, really")
