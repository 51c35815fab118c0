"""Kernel ABI: the flattened cuTile entry signature, one PTX param per nv_tileaa.func input
(pointer -> .u64, i32 -> .u32, ...), in order, named ``<symbol>_param_<i>`` like nvcc/tileiras."""

from __future__ import annotations

from tilegen.runtime.types import FloatType, IntegerType, NvPointerType


def param_type(t) -> str | None:
    if isinstance(t, NvPointerType):
        return "u64"
    if isinstance(t, IntegerType) and t.width in (8, 16, 32, 64):
        return f"u{t.width}"
    if isinstance(t, FloatType) and t.name in ("f32", "f64"):
        return t.name
    return None


def entry_params(symbol: str, inputs) -> list[tuple[str, str]]:
    """(name, ptx type) per input; raises ValueError naming an unsupported type."""
    out = []
    for i, t in enumerate(inputs):
        pt = param_type(t)
        if pt is None:
            raise ValueError(f"PTX backend does not support kernel parameters of type {t}")
        out.append((f"{symbol}_param_{i}", pt))
    return out
