"""``tilegen-opt`` runs the compile driver's stage passes as the driver's stages: the same IR as
``tilegen compile --emit``, the same target rule and diagnostics, the same ``CompileOptions``
active while they run; other passes (the lit suite's fuse-fma, loop-split ...) run as before."""

from __future__ import annotations

import sys

import pytest

from tilegen.runtime.asm import print_module
from tilegen.runtime.driver import compile_source
from tilegen.runtime.options import CompileOptions
from tilegen.tools import opt

#: a kernel with a dot (the layout stage records its MMA family) and a tile load
KERNEL = """\
cuda_tile.module @m {
  entry @k(%a: tile<ptr<f16>>, %c: tile<ptr<f32>>) {
    %t = make_token : token
    %ta = make_tensor_view %a, shape = [64, 64], strides = [64, 1] : tensor_view<64x64xf16, strides=[64,1]>
    %tc = make_tensor_view %c, shape = [64, 64], strides = [64, 1] : tensor_view<64x64xf32, strides=[64,1]>
    %pa = make_partition_view %ta : partition_view<tile=(64x64), tensor_view<64x64xf16, strides=[64,1]>>
    %pc = make_partition_view %tc : partition_view<tile=(64x64), tensor_view<64x64xf32, strides=[64,1]>>
    %z = constant <i32: 0> : tile<i32>
    %x, %t1 = load_view_tko weak %pa[%z, %z] token = %t : partition_view<tile=(64x64), tensor_view<64x64xf16, strides=[64,1]>>, tile<i32> -> tile<64x64xf16>, token
    %acc = constant <f32: 0.0> : tile<64x64xf32>
    %d = mmaf %x, %x, %acc : tile<64x64xf16>, tile<64x64xf16>, tile<64x64xf32>
    %t2 = store_view_tko weak %d, %pc[%z, %z] token = %t : tile<64x64xf32>, partition_view<tile=(64x64), tensor_view<64x64xf32, strides=[64,1]>>, tile<i32> -> token
    return
  }
}
"""

STAGES = "tile-optimize-O3,convert-cuda-tile-to-nv-tileaa{compute-capability=90}"


def _opt(tmp_path, capsys, *flags: str) -> tuple[int, str, str]:
    path = tmp_path / "k.mlir"
    path.write_text(KERNEL)
    code = opt.main([str(path), *flags])
    out, err = capsys.readouterr()
    return code, out, err


def _compile(tmp_path, until: str, **fields) -> str:
    c = compile_source(tmp_path / "k.mlir", CompileOptions(target="sm_90", **fields), until=until)
    text = print_module(c.module)
    return text if text.endswith("\n") else text + "\n"


@pytest.mark.parametrize(
    "pipeline,until",
    [
        (STAGES, "convert"),
        (f"builtin.module({STAGES})", "convert"),
        (f"{STAGES},nv-tileas-assign-layouts", "layouts"),
    ],
)
def test_stage_passes_print_what_tilegen_compile_emits(tmp_path, capsys, pipeline, until):
    code, out, err = _opt(tmp_path, capsys, f"--pass-pipeline={pipeline}")
    assert code == 0, err
    assert out == _compile(tmp_path, until)


def test_layout_pass_options_are_the_compile_options(tmp_path, capsys):
    """``nv-tileas-assign-layouts{wgmma=false}`` is ``CompileOptions(use_wgmma=False)``: the same
    decisions as ``tilegen compile --no-wgmma --emit=nv_tileas`` (mma.sync, not wgmma)."""
    code, out, err = _opt(
        tmp_path, capsys, f"--pass-pipeline={STAGES},nv-tileas-assign-layouts{{wgmma=false}}"
    )
    assert code == 0, err
    assert out == _compile(tmp_path, "layouts", use_wgmma=False)
    assert out != _compile(tmp_path, "layouts")  # wgmma by default on sm_90
    assert 'nv_tileas.mma = "mma.sync"' in out


def test_bad_target_is_the_drivers_diagnostic(tmp_path, capsys):
    code, out, err = _opt(
        tmp_path, capsys, "--pass-pipeline=convert-cuda-tile-to-nv-tileaa{compute-capability=75}"
    )
    assert code == 1 and out == ""
    assert err.startswith("error: GPU architecture 'sm_75' is not supported by tilegen")
    assert "Traceback" not in err


def test_stage_options_are_active_while_it_runs(tmp_path, capsys, monkeypatch):
    """The driver makes the stage's CompileOptions current (runtime/options.current) while the
    pass runs: the layout pass sees the target and the options tilegen-opt was given."""
    from tilegen.runtime.options import current
    from tilegen.runtime.passes import layout_assignment

    seen = []
    real = layout_assignment.assign_layouts

    def spy(root, num_warps=0, options=None):
        seen.append(current())
        return real(root, num_warps, options)

    monkeypatch.setattr(layout_assignment, "assign_layouts", spy)
    code, _, err = _opt(
        tmp_path, capsys, f"--pass-pipeline={STAGES},nv-tileas-assign-layouts{{cp-async=false}}"
    )
    assert code == 0, err
    [o] = seen
    assert o.target.name == "sm_90" and o.use_cp_async is False and o.use_wgmma is True


def test_other_passes_run_as_passes(tmp_path, capsys):
    """A pipeline mixing a stage with ordinary passes runs them in order; without a target the
    conversion is the pass's own (its diagnostic, as before)."""
    code, out, err = _opt(tmp_path, capsys, f"--pass-pipeline=canonicalize,{STAGES},cse")
    assert code == 0, err
    assert "nv_tileaa.func" in out
    code, out, err = _opt(tmp_path, capsys, "--pass-pipeline=convert-cuda-tile-to-nv-tileaa")
    assert code == 1 and "invalid or missing --compute-capability option" in err


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
