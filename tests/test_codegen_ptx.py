"""runtime/codegen: the first PTX emission (vec_add), checked with ptxas and the SIMT simulator."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tilegen.cli import main
from tilegen.runtime.codegen.addressing import split_layout
from tilegen.runtime.codegen.driver import find_ptxas
from tilegen.generated.ptx.selection import ROWS
from tilegen.runtime.layouts.attrs import BlockedLayout

from paths import CORPUS  # ../shared or $TILEGEN_SHARED

OUT = CORPUS / "out"
needs_corpus = pytest.mark.skipif(not OUT.exists(), reason="cuTile corpus not present")
PTXAS = find_ptxas()


def _manifest(name: str) -> dict:
    manifest = json.loads((CORPUS / "manifest.json").read_text())
    kernels = manifest["kernels"] if isinstance(manifest, dict) else manifest
    return next(k for k in kernels if k["name"] == name)


def _compile(tmp_path, src: Path, sm: str, emit: str = "ptx") -> Path:
    out = tmp_path / f"{src.stem}.{sm}.{emit}"
    assert main(["compile", str(src), f"--gpu-name={sm}", f"--emit={emit}", "-o", str(out)]) == 0
    return out


@needs_corpus
@pytest.mark.parametrize("variant", ["vec_add.tileirbc", "vec_add.v13_1.tileirbc"])
@pytest.mark.parametrize("sm", ["sm_80", "sm_90"])
def test_vec_add_ptxas_clean(tmp_path, variant, sm):
    if PTXAS is None:
        pytest.skip("ptxas not found")
    ptx = _compile(tmp_path, OUT / variant, sm)
    text = ptx.read_text()
    assert f".target {sm}" in text and ".reqntid 128, 1, 1" in text
    p = subprocess.run(
        [PTXAS, "-v", f"-arch={sm}", str(ptx), "-o", str(tmp_path / "k.cubin")],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stderr
    assert "0 bytes spill stores, 0 bytes spill loads" in p.stderr, p.stderr
    regs = int(re.search(r"Used (\d+) registers", p.stderr).group(1))
    assert regs <= 32, p.stderr


@needs_corpus
def test_vec_add_params_match_cutile_flat_signature(tmp_path):
    kernel = _manifest("vec_add")
    entry = kernel["variants"]["default"]["entry"]
    text = _compile(tmp_path, OUT / "vec_add.tileirbc", "sm_90").read_text()
    params = re.findall(r"\.param \.(\w+) (\w+)", text)
    want = ["u64" if "ptr<" in p else "u32" for p in entry["flat_params"]]
    assert [t for t, _ in params] == want
    assert all(n.startswith(entry["symbol"] + "_param_") for _, n in params)
    assert f".entry {entry['symbol']}(" in text


@needs_corpus
def test_vec_add_cubin(tmp_path):
    if PTXAS is None:
        pytest.skip("ptxas not found")
    cubin = _compile(tmp_path, OUT / "vec_add.tileirbc", "sm_90", "cubin")
    assert cubin.read_bytes()[:4] == b"\x7fELF"


@needs_corpus
@pytest.mark.parametrize("variant", ["vec_add.tileirbc", "vec_add.v13_1.tileirbc"])
@pytest.mark.parametrize("sm", ["sm_80", "sm_90"])
def test_vec_add_runs_in_ptxsim(capsys, variant, sm):
    rc = main(
        [
            "run",
            str(OUT / variant),
            "--args",
            str(OUT / "vec_add.npz"),
            "--backend",
            "ptxsim",
            "--gpu-name",
            sm,
            "--check",
            "--rtol",
            "1e-5",
            "--atol",
            "1e-6",
        ]
    )
    assert rc == 0, capsys.readouterr().err
    assert "1 expected array(s) match" in capsys.readouterr().out


@needs_corpus
@pytest.mark.parametrize("n,grid", [(1000, 4), (700, 3), (256, 1), (1, 1)])
def test_vec_add_ptxsim_exact(n, grid):
    from tilegen.runtime.ptxsim import run_ptxsim
    from tilegen.runtime.interp.api import load_module

    module = load_module(OUT / "vec_add.tileirbc")
    a = np.arange(n, dtype=np.float32) * 0.25
    b = np.full(n, 0.5, dtype=np.float32)
    c = np.full(n, -7.0, dtype=np.float32)
    out = run_ptxsim(module, [("a", a), ("b", b), ("c", c)], (grid, 1, 1), "sm_90")
    np.testing.assert_array_equal(out["c"], a + b)


ADD2D = """
cuda_tile.module @m {
entry @add2d(%arg0: tile<ptr<f32>>, %arg1: tile<i32>, %arg2: tile<i32>, %arg3: tile<i32>,
             %arg4: tile<i32>, %arg5: tile<ptr<f32>>, %arg6: tile<i32>, %arg7: tile<i32>,
             %arg8: tile<i32>, %arg9: tile<i32>) {
  %0 = make_token : token
  %tv = make_tensor_view %arg0, shape = [%arg1, %arg2], strides = [%arg3, 1] : tile<i32> -> tensor_view<?x?xf32, strides=[?,1]>
  %tvo = make_tensor_view %arg5, shape = [%arg6, %arg7], strides = [%arg8, 1] : tile<i32> -> tensor_view<?x?xf32, strides=[?,1]>
  %bx, %by, %bz = get_tile_block_id : tile<i32>
  %pv = make_partition_view %tv : partition_view<tile=(16x64), tensor_view<?x?xf32, strides=[?,1]>>
  %t, %tok = load_view_tko weak %pv[%bx, %by] token = %0 : partition_view<tile=(16x64), tensor_view<?x?xf32, strides=[?,1]>>, tile<i32> -> tile<16x64xf32>, token
  %s = addf %t, %t : tile<16x64xf32>
  %m = mulf %s, %t : tile<16x64xf32>
  %po = make_partition_view %tvo : partition_view<tile=(16x64), tensor_view<?x?xf32, strides=[?,1]>>
  %2 = store_view_tko weak %m, %po[%bx, %by] token = %0 : tile<16x64xf32>, partition_view<tile=(16x64), tensor_view<?x?xf32, strides=[?,1]>>, tile<i32> -> token
  return
}
}
"""


@pytest.mark.parametrize("sm", ["sm_80", "sm_90"])
def test_2d_tile_with_tails_ptxas_and_ptxsim(tmp_path, sm):
    """A rank-2 blocked layout (warps split over both dims), dynamic row stride, masked tails."""
    from tilegen.runtime.asm import parse_module
    from tilegen.runtime.ptxsim import compile_to_ptx, run_ptxsim

    module = parse_module(ADD2D, "add2d.mlir")
    x = np.random.RandomState(0).randn(37, 100).astype(np.float32)
    y = np.zeros((37, 100), np.float32)
    out = run_ptxsim(module, [("x", x), ("y", y)], (3, 2, 1), sm)
    np.testing.assert_array_equal(out["y"], (x + x) * x)
    if PTXAS is None:
        pytest.skip("ptxas not found")
    ptx = tmp_path / "add2d.ptx"
    ptx.write_text(compile_to_ptx(parse_module(ADD2D, "add2d.mlir"), sm))
    p = subprocess.run(
        [PTXAS, "-v", f"-arch={sm}", str(ptx), "-o", str(tmp_path / "k.cubin")],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stderr
    assert "0 bytes spill stores, 0 bytes spill loads" in p.stderr, p.stderr


def _unsupported_kernel(tmp_path) -> Path:
    """A kernel the PTX backend refuses: a dot with an f16 accumulator (packed f16x2 fragments)."""
    from test_codegen_mma import _src

    f = tmp_path / "f32dot.mlir"
    f.write_text(_src("f16", "f16", 16, 8, 16))
    return f


def test_unsupported_op_is_a_located_diagnostic(tmp_path, capsys):
    src = _unsupported_kernel(tmp_path)
    out = tmp_path / "m.ptx"
    rc = main(["compile", str(src), "--gpu-name=sm_90", "--emit=ptx", "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == 5  # a valid module tilegen cannot compile (tileiras's class)
    assert re.fullmatch(
        r".*f32dot\.mlir:\d+:\d+: error: PTX backend does not support dot of f16 x f16 -> f16 \(mma\.sync\) yet\n",
        err,
    ), err
    assert "Traceback" not in err
    assert not out.exists()


def test_unsupported_op_under_ptxsim_backend(tmp_path, capsys):
    src = _unsupported_kernel(tmp_path)
    args = tmp_path / "a.npz"
    np.savez(
        args,
        a=np.zeros((16, 16), np.float32),
        b=np.zeros((16, 8), np.float32),
        c=np.zeros((16, 8), np.float32),
    )
    rc = main(
        [
            "run",
            str(src),
            "--args",
            str(args),
            "--backend",
            "ptxsim",
            "--out",
            str(tmp_path / "o.npz"),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 5  # a valid module tilegen cannot compile (tileiras's class)
    assert "error: PTX backend does not support dot of f16 x f16 -> f16 (mma.sync) yet" in err
    assert "Traceback" not in err


def test_split_layout_matches_element_of():
    layout = BlockedLayout((1, 4), (4, 8), (2, 2), (1, 0))
    for shape in [(8, 64), (32, 128)]:
        offsets = split_layout(layout, shape)
        assert offsets is not None
        assert len(offsets) == layout.regs_per_thread(shape)
    # replicated (the CTA tile is larger than the tile): not expressible as base + offset
    assert split_layout(layout, (4, 64)) is None


def test_selection_rows_exist_in_ptx_spec():
    from tilegen.generated.ptx.instructions import INSTRUCTIONS

    for row in ROWS:
        if "ptx" not in row:
            continue
        names = [row["instruction"]] if isinstance(row["instruction"], str) else row["instruction"]
        opcodes = {INSTRUCTIONS[n]["opcode"] for n in names}
        for text in [row["ptx"]] if isinstance(row["ptx"], str) else row["ptx"]:
            assert re.split(r"[.{ ]", text)[0] in opcodes, (row, text)
