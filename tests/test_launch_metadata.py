"""tileiras's tile-kernel marks in tilegen's PTX and cubins (docs/debugging.md, "Launch
metadata"): ``.language 7`` (ptxas records ``EIATTR_LANGUAGE`` = TILEIR) and the 64-byte
``___NV_TILE_LAUNCH_META_DATA___`` global. cuTile 1.7's ``ct.launch`` passes a block of (1, 1, 1)
to ``cuLaunchKernelEx``; the kernel's own ``.reqntid`` (``EIATTR_REQNTID``) is its block size."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tilegen.runtime.codegen.driver import find_ptxas
from tilegen.runtime.codegen.emit import LAUNCH_METADATA, TILE_LANGUAGE
from tilegen.runtime.driver import compile_source, options_for
from tilegen.runtime.layouts.decisions import num_warps

from paths import CORPUS_OUT, needs_shared

PTXAS = find_ptxas()
CUOBJDUMP = Path(PTXAS).with_name("cuobjdump") if PTXAS else None
needs_cuobjdump = pytest.mark.skipif(
    PTXAS is None or not CUOBJDUMP.is_file(),
    reason="ptxas/cuobjdump not installed (pip install nvidia-cuda-nvcc nvidia-cuda-cuobjdump)",
)
KERNELS = ["vec_add", "softmax", "matmul_f16", "flash_attention"]


def _elf(cubin: bytes, tmp_path) -> str:
    path = tmp_path / "k.cubin"
    path.write_bytes(cubin)
    out = subprocess.run([str(CUOBJDUMP), "-elf", str(path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout


@needs_shared(CORPUS_OUT)
@pytest.mark.parametrize("kernel", KERNELS)
def test_ptx_has_tileiras_marks(kernel):
    ptx = compile_source(CORPUS_OUT / f"{kernel}.tileirbc", options_for("sm_90"), until="ptx").ptx
    ref = (CORPUS_OUT / "ptx" / f"{kernel}.sm_90.ptx").read_text()
    # the same declaration, byte for byte, as tileiras's
    assert LAUNCH_METADATA in ref.splitlines()
    assert ptx.splitlines().count(LAUNCH_METADATA) == 1
    assert ptx.index(LAUNCH_METADATA) < ptx.index(".entry")
    # .language 7 closes the entry's directives, as in tileiras's PTX
    for text in (ptx, ref):
        head = text[text.index(".entry") :]
        head = head[: head.index("\n{")]
        assert head.splitlines()[-1] == TILE_LANGUAGE
    version = re.search(r"^\.version (\d+)\.(\d+)$", ptx, re.M)
    assert (int(version.group(1)), int(version.group(2))) >= (9, 2)  # .language needs ISA 9.2


@needs_cuobjdump
@needs_shared(CORPUS_OUT)
@pytest.mark.parametrize("kernel", KERNELS)
def test_cubin_language_and_block_size(kernel, tmp_path):
    path = CORPUS_OUT / f"{kernel}.tileirbc"
    c = compile_source(path, options_for("sm_90"), until="ptxas")
    elf = _elf(c.cubin, tmp_path)
    assert re.search(r"EIATTR_LANGUAGE\s+Format:\s+EIFMT_SVAL\s+Value:\s+Language:\s+TILEIR", elf)
    m = re.search(r"___NV_TILE_LAUNCH_META_DATA___", elf)
    assert m, "metadata symbol missing"
    sym = re.search(
        r"\s0x40\s+OBJECT\s+GLOBAL\s+DEFAULT\s+-\s+0x[0-9a-f]+\s+___NV_TILE_LAUNCH", elf
    )
    assert sym, "the metadata is not a 64-byte global object"
    # the block size the driver launches: EIATTR_REQNTID = the kernel's warps * 32, plus the
    # producer warp group when the kernel's K loop took the async path (TMA + warp specialization)
    reqntid = re.search(r"EIATTR_REQNTID\s+Format:\s+EIFMT_SVAL\s+Value:\s+(\S+) (\S+) (\S+)", elf)
    block = tuple(int(x, 16) for x in reqntid.groups())
    layouts = compile_source(path, options_for("sm_90"), until="layouts").module
    func = next(op for op in layouts.walk() if op.name == "nv_tileaa.func")
    producer = sum(d.producer_warps for d in c.async_plan if d.taken)
    assert block == ((num_warps(func) + producer) * 32, 1, 1)
    assert f".reqntid {block[0]}, 1, 1" in c.ptx


def test_empty_module_has_no_metadata():
    ptx = compile_source("cuda_tile.module @m {\n}\n", options_for("sm_90"), until="ptx").ptx
    assert LAUNCH_METADATA not in ptx and TILE_LANGUAGE not in ptx
