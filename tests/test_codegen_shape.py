"""runtime/codegen shape ops (shape.py over exchange.py): small generated kernels for several
shapes, element types and CTA sizes, run through the PTX simulator and compared with the
reference interpreter; plus the exchange planner's choices (registers, shuffles, shared memory
with or without padding and barriers)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from kernelgen import PTXAS, inputs, kernel, ptx_of, ptxas, run_both, ty


def _permute(shape, perm, e="f32"):
    out = tuple(shape[p] for p in perm)
    body = [f"%r = permute %t [{', '.join(map(str, perm))}] : {ty(shape, e)} -> {ty(out, e)}"]
    return shape, out, body


def _reshape(shape, out, e="f32"):
    return shape, out, [f"%r = reshape %t : {ty(shape, e)} -> {ty(out, e)}"]


def _broadcast(shape, out, e="f32"):
    return shape, out, [f"%r = broadcast %t : {ty(shape, e)} -> {ty(out, e)}"]


def _extract(shape, out, index, e="f32"):
    """cuda_tile extract: ``index`` counts ``out``-sized chunks per dim."""
    idx = []
    body = []
    for i, v in enumerate(index):
        if isinstance(v, str):  # dynamic: block id + constant (block id is 0 here)
            body.append(f"%k{i} = constant <i32: {int(v)}> : tile<i32>")
            body.append(f"%i{i} = addi %bx, %k{i} : tile<i32>")
        else:
            body.append(f"%i{i} = constant <i32: {v}> : tile<i32>")
        idx.append(f"%i{i}")
    body.append(f"%r = extract %t[{', '.join(idx)}] : {ty(shape, e)} -> {ty(out, e)}")
    return shape, out, body


def _cat(shape, dim, e="f32"):
    half = list(shape)
    half[dim] //= 2
    half = tuple(half)
    z = ", ".join(["%z"] * len(shape))
    body = [
        f"%z = constant <i32: 0> : tile<i32>",
        f"%a = extract %t[{z}] : {ty(shape, e)} -> {ty(shape, e)}",
        f"%r = cat %t, %a dim = {dim} : {ty(shape, e)}, {ty(shape, e)} -> "
        f"{ty(tuple(s * (2 if d == dim else 1) for d, s in enumerate(shape)), e)}",
    ]
    out = tuple(s * (2 if d == dim else 1) for d, s in enumerate(shape))
    return shape, out, body


def _chain(e="f32"):
    """reshape -> permute -> reshape (reshape_expand's pattern) and a broadcast back."""
    body = [
        f"%a = reshape %t : {ty((128,), e)} -> {ty((8, 16), e)}",
        f"%b = permute %a [1, 0] : {ty((8, 16), e)} -> {ty((16, 8), e)}",
        f"%c = extract %b[%c0, %c0] : {ty((16, 8), e)} -> {ty((1, 8), e)}",
        f"%d = broadcast %c : {ty((1, 8), e)} -> {ty((16, 8), e)}",
        f"%r = reshape %d : {ty((16, 8), e)} -> {ty((128,), e)}",
    ]
    return (128,), (128,), body


def _scalar_bcast(e="f32"):
    """extract one element (a 0-d tile), reshape to 1 element, broadcast."""
    body = [
        f"%i = constant <i32: 5> : tile<i32>",
        f"%j = constant <i32: 3> : tile<i32>",
        f"%a = extract %t[%i, %j] : {ty((8, 16), e)} -> {ty((1, 1), e)}",
        f"%s = reshape %a : {ty((1, 1), e)} -> {ty((), e)}",
        f"%b = reshape %s : {ty((), e)} -> {ty((1, 1), e)}",
        f"%r = broadcast %b : {ty((1, 1), e)} -> {ty((8, 16), e)}",
    ]
    return (8, 16), (8, 16), body


def _iota(n, e):
    body = [
        f"%a = iota : {ty((n,), e)}",
        f"%b = reshape %a : {ty((n,), e)} -> {ty((1, n), e)}",
        f"%r = broadcast %b : {ty((1, n), e)} -> {ty((4, n), e)}",
    ]
    return (4, n), (4, n), body


def _sliced(shape, dim, e="i32"):
    """A reduction's result (a slice layout) reshaped and broadcast back over the tile."""
    red = tuple(s for d, s in enumerate(shape) if d != dim)
    keep = tuple(1 if d == dim else s for d, s in enumerate(shape))
    body = [
        f"%s = reduce %t dim={dim} identities=[0 : {e}] : {ty(shape, e)} -> {ty(red, e)}",
        f"(%a: tile<{e}>, %b: tile<{e}>) {{",
        f"%c = addi %a, %b : tile<{e}>",
        f"yield %c : tile<{e}>",
        "}",
        f"%k = reshape %s : {ty(red, e)} -> {ty(keep, e)}",
        f"%r = broadcast %k : {ty(keep, e)} -> {ty(shape, e)}",
    ]
    return shape, shape, body


CASES = {
    # permutes: one register per thread, several, replicated (tile < CTA tile), 3-D
    "permute_32x32": _permute((32, 32), (1, 0)),
    "permute_8x16": _permute((8, 16), (1, 0)),
    "permute_4x4": _permute((4, 4), (1, 0)),
    "permute_64x8": _permute((64, 8), (1, 0)),
    "permute_3d_201": _permute((2, 4, 8), (2, 0, 1)),
    "permute_3d_102": _permute((4, 8, 16), (1, 0, 2)),
    # reshapes between different blocked layouts
    "reshape_128_8x16": _reshape((128,), (8, 16)),
    "reshape_8x16_16x8": _reshape((8, 16), (16, 8)),
    "reshape_4x8x4_128": _reshape((4, 8, 4), (128,)),
    "reshape_2x64_8x16": _reshape((2, 64), (8, 16)),
    "reshape_16_1x16": _reshape((16,), (1, 16)),
    "reshape_512_32x16": _reshape((512,), (32, 16)),
    # broadcasts
    "broadcast_1x16_8x16": _broadcast((1, 16), (8, 16)),
    "broadcast_8x1_8x16": _broadcast((8, 1), (8, 16)),
    "broadcast_1_64": _broadcast((1,), (64,)),
    "broadcast_2x1x8_2x4x8": _broadcast((2, 1, 8), (2, 4, 8)),
    # extract (static and dynamic chunk indices)
    "extract_64_32_1": _extract((64,), (32,), [1]),
    "extract_16x16_4x8": _extract((16, 16), (4, 8), [2, 1]),
    "extract_dyn_64_16": _extract((64,), (16,), ["3"]),
    "extract_dyn_16x16_8x4": _extract((16, 16), (8, 4), ["1", 2]),
    "extract_row_8x32": _extract((8, 32), (1, 32), [5, 0]),
    # cat along each dim
    "cat_64_d0": _cat((64,), 0),
    "cat_8x16_d0": _cat((8, 16), 0),
    "cat_8x16_d1": _cat((8, 16), 1),
    "cat_2x4x8_d2": _cat((2, 4, 8), 2),
    "chain": _chain(),
    "scalar_bcast": _scalar_bcast(),
    "iota_i32_16": _iota(16, "i32"),
    "sliced_i32_8x16_d1": _sliced((8, 16), 1),
    "sliced_i32_8x16_d0": _sliced((8, 16), 0),
    "sliced_i32_4x8x16_d2": _sliced((4, 8, 16), 2),
    "sliced_i32_64x4_d0": _sliced((64, 4), 0),
    "iota_i64_64": _iota(64, "i64"),
}


@pytest.mark.parametrize("warps", [1, 4])
@pytest.mark.parametrize("name", sorted(CASES))
def test_shape_op_matches_interpreter(name, warps):
    in_shape, out_shape, body = CASES[name]
    e = name.split("_")[1] if name.startswith(("iota", "sliced")) else "f32"
    text = kernel(in_shape, out_shape, body, e=e, warps=warps)
    ref, got, _, _ = run_both(text, inputs(in_shape, e), out_shape, e)
    np.testing.assert_array_equal(got, ref)


ELEMENT_CASES = {
    "f64": _permute((8, 16), (1, 0), "f64"),
    "i16": _permute((16, 8), (1, 0), "i16"),
    "i8": _reshape((64,), (4, 16), "i8"),
    "f16": _cat((4, 16), 1, "f16"),
    "i64": _extract((32,), (8,), ["2"], "i64"),
}


@pytest.mark.parametrize("e", sorted(ELEMENT_CASES))
def test_shape_ops_element_types(e):
    in_shape, out_shape, body = ELEMENT_CASES[e]
    text = kernel(in_shape, out_shape, body, e=e, warps=2)
    ref, got, _, _ = run_both(text, inputs(in_shape, e), out_shape, e)
    np.testing.assert_array_equal(got, ref)


# ----------------------------------------------------------------------------- the planner
def _count(ptx: str, pattern: str) -> int:
    return len(re.findall(pattern, ptx))


def test_register_only_exchanges_touch_no_shared_memory():
    """A reshape adding a unit dim and a broadcast along a dim every thread already covers are
    register renames."""
    body = [
        f"%a = reshape %t : {ty((128,), 'f32')} -> {ty((1, 128), 'f32')}",
        f"%r = reshape %a : {ty((1, 128), 'f32')} -> {ty((128,), 'f32')}",
    ]
    ptx = ptx_of(kernel((128,), (128,), body, warps=4))
    assert "shared" not in ptx and "bar." not in ptx and "shfl" not in ptx


def test_first_exchange_has_one_barrier_and_padding():
    """A 32x32 transpose: stores, one bar.sync, loads; the scratch rows are padded."""
    in_shape, out_shape, body = _permute((32, 32), (1, 0))
    ptx = ptx_of(kernel(in_shape, out_shape, body, warps=4))
    assert _count(ptx, r"bar\.sync") == 1
    m = re.search(r"__tilegen_smem\[(\d+)\]", ptx)
    assert m and int(m.group(1)) > 32 * 32 * 4  # padded
    from tilegen.runtime.codegen.dist import dist
    from tilegen.runtime.codegen.exchange import Form, _bank_cost, _pad_form, row_major
    from tilegen.runtime.layouts.attrs import BlockedLayout

    lay = BlockedLayout((1, 4), (8, 4), (4, 1), (1, 0))
    d = dist(lay, (32, 32))
    w = Form(0, (1, 32))  # transposed write
    r = row_major((32, 32))
    plain = _bank_cost([(w, d), (r, d)], "f32", 4)
    padded = _bank_cost(
        [(_pad_form(w, (32, 32), 32), d), (_pad_form(r, (32, 32), 32), d)], "f32", 4
    )
    assert padded < plain


def test_warp_local_exchange_uses_warp_barrier_or_shuffles():
    """One warp: a transpose never needs bar.sync (warp barrier or shuffles)."""
    in_shape, out_shape, body = _permute((8, 8), (1, 0))
    ptx = ptx_of(kernel(in_shape, out_shape, body, warps=1))
    assert "bar.sync" not in ptx
    assert "bar.warp.sync" in ptx or "shfl.sync" in ptx


def test_shuffle_plans():
    """Lane patterns: a reversal within the warp is a butterfly, a broadcast of one element is
    an indexed shuffle, the same element in the same register needs nothing, and crossing
    warps is no shuffle."""
    from tilegen.runtime.codegen.dist import dist
    from tilegen.runtime.codegen.exchange import Form, shuffle_plan
    from tilegen.runtime.layouts.attrs import BlockedLayout

    d = dist(BlockedLayout((1,), (32,), (1,), (0,)), (32,))
    ident = Form(0, (1,))
    assert shuffle_plan([(["%a"], d, ident)], d, Form(31, (-1,))) == [(0, 0, "bfly", 31)]
    assert shuffle_plan([(["%a"], d, ident)], d, Form(7, (0,))) == [(0, 0, "idx", 7)]
    assert shuffle_plan([(["%a"], d, ident)], d, ident) == [(0, 0, "bfly", 0)]
    d2 = dist(BlockedLayout((1,), (32,), (2,), (0,)), (64,))
    assert shuffle_plan([(["%a"], d2, ident)], d2, Form(63, (-1,))) is None


def test_reverse_in_warp_runs_as_butterfly():
    """Generated code for the butterfly plan, checked in the simulator."""
    from tilegen.runtime.codegen.core import Emitter
    from tilegen.runtime.codegen.dist import dist
    from tilegen.runtime.codegen.exchange import Form, exchange
    from tilegen.runtime.layouts.attrs import BlockedLayout

    class _F:
        attributes = {"sym_name": type("A", (), {"value": "k"})()}

    em = Emitter(_F(), 1, 90)
    d = dist(BlockedLayout((1,), (32,), (1,), (0,)), (32,))
    out = exchange(em, "b32", 4, [(["%a"], d, Form(0, (1,)))], d, Form(31, (-1,)), 32)
    assert len(out) == 1
    assert any("shfl.sync.bfly.b32" in line and ", 31, 31, -1" in line for line in em.body)
    assert not any("shared" in line for line in em.body)


@pytest.mark.skipif(PTXAS is None, reason="ptxas not found")
@pytest.mark.parametrize("sm", ["sm_80", "sm_90", "sm_100", "sm_120"])
def test_shape_kernels_ptxas_clean(sm):
    for name in ("permute_32x32", "extract_dyn_16x16_8x4", "cat_8x16_d1", "iota_i64_64"):
        in_shape, out_shape, body = CASES[name]
        e = "i64" if name.startswith("iota_i64") else "f32"
        err = ptxas(ptx_of(kernel(in_shape, out_shape, body, e=e, warps=4), sm), sm)
        assert "0 bytes spill stores, 0 bytes spill loads" in err, err


@pytest.mark.skipif(PTXAS is None, reason="ptxas not found")
@pytest.mark.parametrize("sm", ["sm_90", "sm_100", "sm_120"])
def test_scratch_over_48k_takes_the_arch_specific_target(sm):
    """A 128x128 f32 transpose needs 64 KiB of scratch: over the 48 KiB of static shared memory
    ptxas allows on a plain target, within what ``sm_XXa`` allows; tileiras emits ``a`` too."""
    in_shape, out_shape, body = _permute((128, 128), (1, 0))
    ptx = ptx_of(kernel(in_shape, out_shape, body, warps=4), sm)
    assert re.search(rf"^\.target {sm}a$", ptx, re.M), ptx[:300]
    assert int(re.search(r"__tilegen_smem\[(\d+)\]", ptx).group(1)) > 48 * 1024
    ptxas(ptx, sm + "a")


@pytest.mark.skipif(PTXAS is None, reason="ptxas not found")
def test_scratch_over_48k_on_sm80_takes_extended_shared_memory():
    """sm_80 has no ``a`` target: the 64 KiB scratch is static ``.shared`` beyond 48 KiB, which
    ptxas takes with tileiras's ``--enable-extended-smem=true`` (up to 166,912 B)."""
    in_shape, out_shape, body = _permute((128, 128), (1, 0))
    ptx = ptx_of(kernel(in_shape, out_shape, body, warps=4), "sm_80")
    assert re.search(r"^\.target sm_80$", ptx, re.M)
    assert int(re.search(r"__tilegen_smem\[(\d+)\]", ptx).group(1)) > 48 * 1024
    ptxas(ptx, "sm_80")


def test_a_conversion_larger_than_the_sm_is_not_made():
    """A 256 x 256 f32 transpose on sm_80: its conversion into the store's layout would need
    256 KB of scratch, more than any sm_80 holds (166,912 B). It was refused with a located
    error; the store now writes the value in its own layout (uncoalesced, docs/pipelines.md
    section 28), as tileiras compiles such kernels, and the result is the interpreter's."""
    in_shape, out_shape, body = _permute((256, 256), (1, 0))
    text = kernel(in_shape, out_shape, body, warps=4)
    assert "__tilegen_smem" not in ptx_of(text, "sm_80")
    x = inputs(in_shape, "f32")
    ref, got, _, _ = run_both(text, x, out_shape, "f32", "sm_80")
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize(
    "sm, shape, allowed",
    [("sm_120f", (128, 128), "sm_120f allows 49152 bytes")],
)
def test_scratch_over_the_static_limit_is_a_located_error(sm, shape, allowed):
    """Over 48 KiB where the user chose a variant without the larger limit, the compile stops
    with the sizes and the kernel's location, not with ptxas's message. (Over what the SM holds
    at all, the conversion is not made: the test above.)"""
    from tilegen.runtime.ptxsim import RunError

    in_shape, out_shape, body = _permute(shape, (1, 0))
    with pytest.raises(RunError) as e:
        ptx_of(kernel(in_shape, out_shape, body, warps=4), sm)
    msg = str(e.value)
    need = shape[0] * shape[1] * 4
    assert msg.startswith("k.mlir:1:") and f"the kernel needs {need} bytes of shared memory" in msg
    assert allowed in msg
    assert ("(sm_120a: 101376)" in msg) == (sm == "sm_120f")
