"""``convert-cuda-tile-to-nv-tileaa{compute-capability=90}`` in the pass registry."""

from __future__ import annotations

from tilegen.runtime.conversion.driver import ConversionError, convert_module
from tilegen.runtime.diagnostics import Diagnostic
from tilegen.runtime.ir import Operation
from tilegen.runtime.passes.registry import PassFailure, register


def _cc(text: str) -> str:
    return text  # validated by the pass itself (seed 003: its own diagnostic)


@register(
    "convert-cuda-tile-to-nv-tileaa",
    anchors=("builtin.module", "cuda_tile.module"),
    options={"compute-capability": (_cc, None)},
    summary="lower cuda_tile to nv_tileaa (spec/lowerings/cuda_tile_to_nv_tileaa.yaml)",
)
def convert_pass(op: Operation, options: dict) -> None:
    if op.name != "builtin.module":  # a bare cuda_tile.module is converted through a wrapper
        raise PassFailure([_diag(op, "the conversion runs on the builtin.module")])
    try:
        convert_module(op, options["compute-capability"])
    except ConversionError as e:
        raise PassFailure(e.diagnostics) from None


def _diag(op: Operation, message: str):
    return Diagnostic("error", message, op.loc)
