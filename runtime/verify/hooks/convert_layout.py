"""Verifier hook of ``nv_tileas.convert_layout`` (its layouts: runtime/layouts/)."""

from __future__ import annotations

from tilegen.runtime.layouts.attrs import DistributedLayout
from tilegen.runtime.verify.hooks import hook


@hook("nv_tileas_convert_layout")
def _convert_layout(op, ctx) -> None:
    src, res = op.operands[0].type, op.results[0].type
    if src.shape != res.shape:
        ctx.error(f"convert_layout must preserve the shape, but maps {src.shape} to {res.shape}")
        return
    for what, t in (("source", src), ("result", res)):
        enc = t.encoding
        if enc is None:
            ctx.error(f"{what} tile type must carry a layout encoding")
            return
        if not isinstance(enc, DistributedLayout):
            ctx.error(f"{what} encoding must be a distributed (blocked or slice) layout")
            return
        why = enc.check_shape(t.shape)
        if why:
            ctx.error(f"{what} encoding: {why}")
            return
