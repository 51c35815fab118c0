"""``tilegen.cutile.launch`` / ``compile_kernel`` with list-of-arrays parameters (cuTile's
``ListConstraint``, as in TileGym's grouped GEMM): a list becomes a pointer to a table of
``[data pointer, shape..., strides...]`` int64 rows and an i32 length, on both backends."""

from typing import Annotated

import numpy as np
import pytest

pytest.importorskip("cuda.tile", reason="cuda-tile is not installed (pip install -e '.[cutile]')")

import cuda.tile as ct  # noqa: E402
from cuda.tile.compilation import ListConstraint  # noqa: E402

from tilegen.cutile import (  # noqa: E402
    LaunchError,
    cache_info,
    clear_cache,
    compile_kernel,
    launch,
    signature_for,
)
from tilegen.runtime.interp.calling import ArrayList, list_table  # noqa: E402

#: (backend, gpu_name) pairs every launch test runs on
TARGETS = [("interp", "sm_90"), ("ptxsim", "sm_90"), ("ptxsim", "sm_80")]
IDS = [f"{b}-{g}" for b, g in TARGETS]


@ct.kernel
def copy_all(Xs, Ys, T: ct.Constant[int]):
    for g in range(len(Xs)):
        ct.store(Ys[g], index=(ct.bid(0),), tile=ct.load(Xs[g], index=(ct.bid(0),), shape=(T,)))


#: int64 indices, the first dimension static (equal over the items)
Static64 = ct.ListAnnotation(
    element=ct.ArrayAnnotation(index_dtype=ct.int64, static_shape_dims=(0,))
)


@ct.kernel
def copy_static(Xs: Annotated[list, Static64], Ys, T: ct.Constant[int]):
    for g in range(len(Xs)):
        x = Xs[g]
        t = ct.load(x, index=(ct.bid(0), 0), shape=(x.shape[0], T))  # a constant: 4
        ct.store(Ys[g], index=(ct.bid(0), 0), tile=t)


@ct.kernel
def list_len(Xs, out):
    ct.store(out, index=(0,), tile=ct.full((1,), len(Xs), ct.int32))


@ct.kernel
def group_gemm(As, Bs, Cs, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
    """Per group g, Cs[g] = As[g] @ Bs[g]; the CTAs share every group's output tiles."""
    for g in range(len(As)):
        a, b, c = As[g], Bs[g], Cs[g]
        tiles_n = ct.num_tiles(c, axis=1, shape=(TM, TN))
        tiles = ct.num_tiles(c, axis=0, shape=(TM, TN)) * tiles_n
        for t in range(ct.bid(0), tiles, ct.num_blocks(0)):
            i, j = t // tiles_n, t % tiles_n
            acc = ct.full((TM, TN), 0.0, ct.float32)
            for k in range(ct.num_tiles(a, axis=1, shape=(TM, TK))):
                x = ct.load(a, index=(i, k), shape=(TM, TK), padding_mode=ct.PaddingMode.ZERO)
                y = ct.load(b, index=(k, j), shape=(TK, TN), padding_mode=ct.PaddingMode.ZERO)
                acc = ct.mma(x, y, acc)
            ct.store(c, index=(i, j), tile=acc)


def _copy_args():
    xs = [np.arange(32, dtype=np.float32), np.arange(32, dtype=np.float32) + 100]
    ys = [np.zeros(32, np.float32), np.zeros(32, np.float32)]
    return xs, ys


@pytest.mark.parametrize("backend,gpu_name", TARGETS, ids=IDS)
def test_copy_over_a_list(backend, gpu_name):
    xs, ys = _copy_args()
    before = [x.copy() for x in xs]
    launch((2,), copy_all, (xs, ys, 16), backend=backend, gpu_name=gpu_name)
    for x, y, b in zip(xs, ys, before):
        np.testing.assert_array_equal(y, x)
        np.testing.assert_array_equal(x, b)


@pytest.mark.parametrize("backend,gpu_name", TARGETS, ids=IDS)
def test_len_of_a_list(backend, gpu_name):
    out = np.zeros(1, np.int32)
    xs = [np.zeros(16, np.float16) for _ in range(3)]
    launch((1,), list_len, (xs, out), backend=backend, gpu_name=gpu_name)
    assert out[0] == 3


@pytest.mark.parametrize("backend,gpu_name", TARGETS, ids=IDS)
def test_grouped_gemm_matches_numpy(backend, gpu_name):
    rng = np.random.default_rng(0)
    ms, n, k = (32, 64, 32), 32, 64  # a different M per group
    As = [rng.standard_normal((m, k)).astype(np.float16) for m in ms]
    Bs = [rng.standard_normal((k, n)).astype(np.float16) for _ in ms]
    Cs = [np.zeros((m, n), np.float32) for m in ms]
    launch((2,), group_gemm, (As, Bs, Cs, 32, 32, 32), backend=backend, gpu_name=gpu_name)
    for a, b, c in zip(As, Bs, Cs):
        want = a.astype(np.float32) @ b.astype(np.float32)
        np.testing.assert_allclose(c, want, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("backend", ["interp", "ptxsim"])
def test_bf16_items(backend):
    ml = pytest.importorskip("ml_dtypes")
    xs = [(np.arange(32) / 4).astype(ml.bfloat16), (-np.arange(32) / 8).astype(ml.bfloat16)]
    ys = [np.zeros(32, ml.bfloat16), np.zeros(32, ml.bfloat16)]
    launch((2,), copy_all, (xs, ys, 16), backend=backend)
    for x, y in zip(xs, ys):
        np.testing.assert_array_equal(y.view(np.uint16), x.view(np.uint16))


def test_list_annotation_int64_and_static_shape():
    xs = [np.arange(64, dtype=np.int32).reshape(4, 16), np.ones((4, 16), np.int32)]
    ys = [np.zeros((4, 16), np.int32), np.zeros((4, 16), np.int32)]
    sig = signature_for(copy_static, (xs, ys, 16))
    el = sig.parameters[0].element
    assert el.index_dtype == ct.int64 and el.shape_constant == (4, None)
    assert sig.calling_convention.name == "cutile_python_v2"
    launch((1,), copy_static, (xs, ys, 16))
    for x, y in zip(xs, ys):
        np.testing.assert_array_equal(y, x)
    with pytest.raises(LaunchError, match="vary in static shape at axis 0: 4 vs 8"):
        launch((1,), copy_static, ([xs[0], np.zeros((8, 16), np.int32)], ys, 16))


def test_torch_tensors_in_a_list():
    torch = pytest.importorskip("torch", reason="torch is not installed")
    xs = [torch.arange(32, dtype=torch.float32), torch.arange(32, dtype=torch.float32) * 2]
    ys = [torch.zeros(32), torch.zeros(32)]
    launch((2,), copy_all, (xs, ys, 16))
    for x, y in zip(xs, ys):
        assert torch.equal(x, y)


def test_list_constraint_holds_for_every_item():
    xs = [np.zeros(32, np.float32), np.zeros(48, np.float32)]
    ys = [np.zeros(32, np.float32), np.zeros(40, np.float32)]  # 40: not a multiple of 16
    sig = signature_for(copy_all, (xs, ys, 16))
    lx, ly, _ = sig.parameters
    assert isinstance(lx, ListConstraint) and not lx.elements_may_alias
    assert lx.element.shape_divisible_by == (16,) and ly.element.shape_divisible_by == (1,)
    assert lx.element.stride_constant == (1,) and lx.element.base_addr_divisible_by == 16
    assert lx.element.dtype == ct.float32 and lx.element.ndim == 1


def test_cache_key_holds_the_list_constraint():
    clear_cache()
    xs, ys = _copy_args()
    launch((2,), copy_all, (xs, ys, 16))
    launch((2,), copy_all, (xs, ys, 16))
    assert cache_info()["hits"] == 1
    odd = [np.zeros(40, np.float32)] * 1, [np.zeros(40, np.float32)]
    launch((2,), copy_all, (odd[0], odd[1], 16))  # shape divisibility differs: a new entry
    assert cache_info()["entries"] == 2


def test_list_errors():
    x32, x16 = np.zeros(32, np.float32), np.zeros(32, np.float16)
    ys = [np.zeros(32, np.float32), np.zeros(32, np.float32)]
    with pytest.raises(
        LaunchError, match=r"argument 'Xs', list item #1: arrays in the list vary in dtype"
    ):
        launch((2,), copy_all, ([x32, x16], ys, 16))
    with pytest.raises(LaunchError, match=r"argument 'Xs', list item #1: .* vary in rank"):
        launch((2,), copy_all, ([x32, np.zeros((2, 16), np.float32)], ys, 16))
    with pytest.raises(LaunchError, match="argument 'Xs': empty lists are not supported"):
        launch((2,), copy_all, ([], ys, 16))
    with pytest.raises(LaunchError, match=r"argument 'Ys', list item #1: shares memory with .*Xs"):
        launch((2,), copy_all, ([x32, x32.copy()], [ys[0], x32], 16))
    with pytest.raises(LaunchError, match=r"argument 'Ys', list item #1: shares memory with .*Ys"):
        launch((2,), copy_all, ([x32, x32.copy()], [ys[0], ys[0]], 16))
    with pytest.raises(LaunchError, match="argument 'Xs': unsupported argument type list: item"):
        launch((2,), copy_all, ([1.0, 2.0], ys, 16))
    with pytest.raises(LaunchError, match="argument 'Xs': tuple parameters are not supported"):
        launch((2,), copy_all, (tuple(ys), [x32, x32.copy()], 16))


def test_compile_kernel_emits_a_cubin_for_a_list_kernel():
    from tilegen.runtime.ptx.assemble import find_ptxas

    xs, ys = _copy_args()
    c = compile_kernel(copy_all, (xs, ys, 16), gpu_name="sm_90", emit="ptx")
    assert ".entry copy_all" in c.ptx and "param_0" in c.ptx
    if find_ptxas() is None:
        pytest.skip("ptxas is not installed")
    c = compile_kernel(copy_all, (xs, ys, 16), gpu_name="sm_90", emit="cubin")
    assert c.cubin[:4] == b"\x7fELF"


def test_array_list_runtime_value():
    xs = ArrayList([np.zeros((2, 3), np.float32), np.zeros((4, 3), np.float32)])
    table = list_table([0x100, 0x200], xs.items)
    assert table.tolist() == [[0x100, 2, 3, 3, 1], [0x200, 4, 3, 3, 1]]
    with pytest.raises(ValueError, match="one rank"):
        ArrayList([np.zeros(2), np.zeros((2, 2))])
