"""``tilegen compile``: emit stages, target diagnostics, residual ops, IR dumps and timings."""

from __future__ import annotations

from pathlib import Path

import pytest

from tilegen.cli import main
from tilegen.runtime.asm import parse_module
from tilegen.runtime.conversion import ConversionError, convert_module

KERNEL = """
module attributes {tt.num_warps = 8 : i32} {
  cuda_tile.module @m {
    cuda_tile.entry @k(%p: !cuda_tile.tile<!cuda_tile.ptr<f32>>) {
      %t = cuda_tile.make_token : !cuda_tile.token
      %a = cuda_tile.constant <f32: 1.0> : !cuda_tile.tile<8xf32>
      %t2 = cuda_tile.join_tokens %t, %t : !cuda_tile.token
      cuda_tile.return
    }
  }
}
"""


def _module():
    return parse_module(KERNEL, "k.mlir")


def test_kernel_spec_folds_launch_attributes_with_defaults():
    out = convert_module(_module(), "sm_90")
    func = next(op for op in out.walk() if op.name == "nv_tileaa.func")
    spec = func.attributes["nv_tileaa.kernel_spec"].as_dict()
    assert spec["num_warps"].value == 8  # from the module
    assert spec["num_ctas"].value == 1  # default
    assert spec["cluster_dim"].values == (1, 1, 1)
    assert spec["compute_capability"].value == 90
    assert "num_stages" not in spec
    assert not [op.name for op in out.walk() if op.dialect == "cuda_tile"]


def test_bad_or_missing_target():
    for target in (None, "sm_x"):
        with pytest.raises(ConversionError) as e:
            convert_module(_module(), target)
        assert e.value.diagnostics[0].message == "invalid or missing --compute-capability option"


def test_residual_op_fails_with_note(monkeypatch):
    from tilegen.runtime.conversion import driver

    spec = driver.load_spec()
    spec = dict(spec, groups=[g for g in spec["groups"] if g["name"] != "part_b"])
    monkeypatch.setattr(driver, "load_spec", lambda name=None: spec)
    with pytest.raises(ConversionError) as e:
        convert_module(_module(), "sm_90")
    diag = e.value.diagnostics[0]
    assert diag.message == "failed to convert cuda_tile to nv_tileaa"
    assert any("'cuda_tile.entry'" in n.message for n in diag.notes)
    assert diag.format().startswith("k.mlir:")


def test_compile_command(tmp_path: Path, capsys):
    src = tmp_path / "k.mlir"
    src.write_text(KERNEL)
    out = tmp_path / "k.nv.mlir"
    rc = main(
        [
            "compile",
            str(src),
            "--gpu-name=sm_100",
            "-o",
            str(out),
            "--time-passes",
            "--print-ir-after-all",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 0, err
    text = out.read_text()
    assert "nv_tileaa.func @k" in text and "cuda_tile." not in text.replace("#cuda_tile", "")
    assert "IR Dump After convert-cuda-tile-to-nv-tileaa" in err
    assert "Execution time report" in err
    parse_module(text, "k.nv.mlir", allow_unregistered=True)  # the output parses back
    assert main(["compile", str(src), "--emit=cuda_tile"]) == 0
    assert "entry @k" in capsys.readouterr().out
    assert main(["compile", str(src), "--gpu-name=sm_x"]) == 2  # the one target rule
    assert "GPU architecture 'sm_x' is not supported by tilegen" in capsys.readouterr().err


def test_module_target_short_circuits_the_option():
    text = KERNEL.replace("{tt.num_warps = 8 : i32}", '{nv_tileaa.target_spec = "sm_100"}')
    out = convert_module(parse_module(text, "k.mlir"), None)
    func = next(op for op in out.walk() if op.name == "nv_tileaa.func")
    assert func.attributes["nv_tileaa.kernel_spec"].as_dict()["compute_capability"].value == 100
    assert func.attributes["nv_tileaa.kernel_spec"].as_dict()["num_warps"].value == 4
    with pytest.raises(ConversionError):
        convert_module(parse_module(text, "k.mlir"), "sm_9x")


def test_optimization_hints_of_the_target_fold_into_kernel_spec():
    text = (
        "cuda_tile.module @m {\n entry @k() optimization_hints=<sm_90 = {num_cta_in_cga = 2}, "
        "sm_100 = {occupancy = 3}> {\n return\n }\n}"
    )
    for target, key, value in (("sm_90", "num_cta_in_cga", 2), ("sm_100", "occupancy", 3)):
        out = convert_module(parse_module(text, "h.mlir"), target)
        func = next(op for op in out.walk() if op.name == "nv_tileaa.func")
        spec = func.attributes["nv_tileaa.kernel_spec"].as_dict()
        assert spec[key].value == value
        assert {"num_cta_in_cga", "occupancy"} - {key} & set(spec) == set()
