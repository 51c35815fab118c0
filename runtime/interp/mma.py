"""Matrix multiply-accumulate (mmaf, mmai, mmaf_scaled) with exact input precisions.

Inputs are held exactly in their element types (f16, bf16, tf32, f8 values are exact in the
compute arrays), so every product is exact in float64; products are summed in float64 (far more
precise than a tensor core's accumulator) and rounded once to the accumulator type. f64 inputs
use a float64 matmul. Integer inputs are widened by their signedness and
multiplied exactly in int64, then wrapped to the accumulator width.
"""

from __future__ import annotations

import numpy as np

from tilegen.runtime import floats
from tilegen.runtime.interp.values import InterpError, as_signed, as_unsigned, element_of, wrap_int
from tilegen.runtime.types import FloatType


def _scaled(x: np.ndarray, scale: np.ndarray, k_axis: int) -> np.ndarray:
    """``x`` times its block scale factors repeated along the K axis."""
    k = x.shape[k_axis]
    blocks = scale.shape[k_axis]
    rep = np.repeat(scale.astype(np.float64), k // blocks, axis=k_axis)
    return x.astype(np.float64) * rep


def mma(op, args: list, attr) -> np.ndarray:
    """``acc + lhs @ rhs`` (batched over a leading dim for rank 3)."""
    lhs, rhs, acc = (np.asarray(a) for a in args[:3])
    lt, rt, at = (element_of(v.type) for v in op.operands[:3])
    if op.mnemonic == "mmai":
        sl, sr = attr(op, "signedness_lhs"), attr(op, "signedness_rhs")
        a = as_unsigned(lhs, lt).astype(np.int64) if sl == "unsigned" else as_signed(lhs, lt)
        b = as_unsigned(rhs, rt).astype(np.int64) if sr == "unsigned" else as_signed(rhs, rt)
        return wrap_int(as_signed(acc, at) + np.matmul(a, b), at)
    if not isinstance(at, FloatType):
        raise InterpError(f"mmaf accumulator must be a float tile, got {at}")
    if op.mnemonic == "mmaf_scaled":
        a = _scaled(lhs, np.asarray(args[3]), lhs.ndim - 1)
        b = _scaled(rhs, np.asarray(args[4]), rhs.ndim - 2)
    else:
        a, b = lhs.astype(np.float64), rhs.astype(np.float64)
    # products of the narrow input types are exact in float64; the sum is rounded once
    out = floats.to_compute(acc.astype(np.float64) + np.matmul(a, b), at.name)
    return floats.canonical_nan(out, at.name)  # an f16 accumulator's NaN: 0x7FFF


def dot(a, b, c, types: list, signedness: tuple = (None, None), scales=None) -> np.ndarray:
    """``c + a @ b`` for nv_tileaa.dot: integer when ``c`` is, else float (scales: sfa, sfb)."""
    lt, rt, at = types
    a, b, c = np.asarray(a), np.asarray(b), np.asarray(c)
    if not isinstance(at, FloatType):
        x = as_unsigned(a, lt).astype(np.int64) if signedness[0] == "unsigned" else as_signed(a, lt)
        y = as_unsigned(b, rt).astype(np.int64) if signedness[1] == "unsigned" else as_signed(b, rt)
        return wrap_int(as_signed(c, at) + np.matmul(x, y), at)
    if scales:
        x, y = _scaled(a, np.asarray(scales[0]), a.ndim - 1), _scaled(
            b, np.asarray(scales[1]), b.ndim - 2
        )
    else:
        x, y = a.astype(np.float64), b.astype(np.float64)
    out = floats.to_compute(c.astype(np.float64) + np.matmul(x, y), at.name)
    return floats.canonical_nan(out, at.name)
