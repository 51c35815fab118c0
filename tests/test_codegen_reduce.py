"""runtime/codegen/reduce.py: nv_tileaa.reduce / scan compiled to PTX, assembled by ptxas for
every target without spills, and run in the SIMT simulator against numpy.

The kernels are small cuda_tile programs (tileirdisasm form) over several tile shapes, so the
layouts cover in-thread, lane-butterfly and cross-warp reductions, and replicated layouts (tiles
smaller than the CTA, where copies must not be combined twice).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tilegen.cli import main
from tilegen.runtime.codegen.driver import find_ptxas

PTXAS = find_ptxas()
SMS = ["sm_80", "sm_90", "sm_100", "sm_120"]
from paths import CORPUS  # ../shared or $TILEGEN_SHARED

OUT = CORPUS / "out"


# ----------------------------------------------------------------------------- kernel text
def _arr2(n: str, e: str) -> str:
    return (
        f"%{n}: tile<ptr<{e}>>, %{n}s0: tile<i32>, %{n}s1: tile<i32>, %{n}t0: tile<i32>, "
        f"%{n}t1: tile<i32>"
    )


def _arr1(n: str, e: str) -> str:
    return f"%{n}: tile<ptr<{e}>>, %{n}s0: tile<i32>, %{n}t0: tile<i32>"


def _view(n: str, e: str, tile: tuple) -> str:
    rank = len(tile)
    shape = ", ".join(f"%{n}s{i}" for i in range(rank))
    strides = "%" + n + "t0, 1" if rank == 2 else "1"
    q = "?x" * rank
    tv = f"tensor_view<{q}{e}, strides=[{'?,1' if rank == 2 else '1'}]>"
    pv = f"partition_view<tile=({'x'.join(map(str, tile))}), {tv}>"
    return (
        f"  %tv{n} = make_tensor_view %{n}, shape = [{shape}], strides = [{strides}] : "
        f"tile<i32> -> {tv}\n  %pv{n} = make_partition_view %tv{n} : {pv}\n"
    ), pv


def _combiner(e: str, op: str) -> str:
    return (
        f"  (%a: tile<{e}>, %b: tile<{e}>) {{\n    %r = {op} %a, %b : tile<{e}>\n"
        f"    yield %r : tile<{e}>\n  }}\n"
    )


def _kernel(name: str, params: list, views: list, body: str) -> str:
    text = f"entry @{name}({', '.join(params)}) optimization_hints=<default = {{}}> {{\n"
    text += "  %0 = make_token : token\n  %c0 = constant <i32: 0> : tile<i32>\n"
    return text + "".join(views) + body + "  return\n}\n"


#: element -> (numpy dtype, combiner op, identity literal)
ELEMS = {
    "f32": (np.float32, "addf", "0.000000e+00"),
    "f64": (np.float64, "addf", "0.000000e+00"),
    "i64": (np.int64, "addi", "0"),
    "i32": (np.int32, "addi", "0"),
    "i16": (np.int16, "addi", "0"),
}


def reduce_kernel(r: int, c: int, e: str = "f32") -> str:
    """Row sums, column sums and the total (a rank-0 reduce of the row sums)."""
    _, op, ident = ELEMS[e]
    vx, px = _view("x", e, (r, c))
    v1, p1 = _view("o1", e, (r,))
    v2, p2 = _view("o2", e, (c,))
    v3, p3 = _view("o3", e, (1,))
    t = f"tile<{r}x{c}x{e}>"
    ids = f"identities=[{ident} : {e}]"
    body = (
        f"  %t, %tk = load_view_tko weak %pvx[%c0, %c0] token = %0 : {px}, tile<i32> -> {t}, "
        "token\n"
        f"  %rows = reduce %t dim=1 {ids} : {t} -> tile<{r}x{e}>\n"
        + _combiner(e, op)
        + f"  %cols = reduce %t dim=0 {ids} : {t} -> tile<{c}x{e}>\n"
        + _combiner(e, op)
        + f"  %all = reduce %rows dim=0 {ids} : tile<{r}x{e}> -> tile<{e}>\n"
        + _combiner(e, op)
        + f"  %all1 = reshape %all : tile<{e}> -> tile<1x{e}>\n"
        f"  %s1 = store_view_tko weak %rows, %pvo1[%c0] token = %0 : tile<{r}x{e}>, {p1}, "
        "tile<i32> -> token\n"
        f"  %s2 = store_view_tko weak %cols, %pvo2[%c0] token = %0 : tile<{c}x{e}>, {p2}, "
        "tile<i32> -> token\n"
        f"  %s3 = store_view_tko weak %all1, %pvo3[%c0] token = %0 : tile<1x{e}>, {p3}, "
        "tile<i32> -> token\n"
    )
    params = [_arr2("x", e), _arr1("o1", e), _arr1("o2", e), _arr1("o3", e)]
    return _kernel("red", params, [vx, v1, v2, v3], body)


def reduce_args(r: int, c: int, rng, e: str = "f32") -> dict:
    dt = ELEMS[e][0]
    x = rng.integers(-8, 8, (r, c)).astype(dt)
    if e == "i64":
        x = x * (1 << 40)  # the high words must travel through the shuffles too
    z = np.zeros
    return {
        "arg__x": x,
        "arg__o1": z(r, dt),
        "arg__o2": z(c, dt),
        "arg__o3": z(1, dt),
        "expected__o1": x.sum(1, dtype=dt),
        "expected__o2": x.sum(0, dtype=dt),
        "expected__o3": np.array([x.sum(dtype=dt)], dt),
    }


def scan_kernel(r: int, c: int) -> str:
    """cumsum along rows (f32), reverse cumsum along rows (i32), cumprod down columns (f32),
    reverse cumsum down columns (i32)."""
    names = [("x", "f32"), ("y", "i32"), ("o1", "f32"), ("o2", "i32"), ("o3", "f32")]
    names.append(("o4", "i32"))
    views = {n: _view(n, e, (r, c)) for n, e in names}
    tt = {e: f"tile<{r}x{c}x{e}>" for e in ("f32", "i32")}
    body = ""
    for n, e in names[:2]:
        body += (
            f"  %v{n}, %k{n} = load_view_tko weak %pv{n}[%c0, %c0] token = %0 : {views[n][1]}, "
            f"tile<i32> -> {tt[e]}, token\n"
        )
    scans = [
        ("a1", "vx", "f32", 1, "false", "addf", "0.000000e+00"),
        ("a2", "vy", "i32", 1, "true", "addi", "0"),
        ("a3", "vx", "f32", 0, "false", "mulf", "1.000000e+00"),
        ("a4", "vy", "i32", 0, "true", "addi", "0"),
    ]
    for res, src, e, dim, rev, op, ident in scans:
        body += (
            f"  %{res} = scan %{src} dim={dim} reverse={rev} identities=[{ident} : {e}] : "
            f"{tt[e]} -> {tt[e]}\n" + _combiner(e, op)
        )
    for i, (res, _, e, *_rest) in enumerate(scans):
        n = f"o{i + 1}"
        body += (
            f"  %s{n} = store_view_tko weak %{res}, %pv{n}[%c0, %c0] token = %0 : {tt[e]}, "
            f"{views[n][1]}, tile<i32> -> token\n"
        )
    return _kernel("scn", [_arr2(n, e) for n, e in names], [v[0] for v in views.values()], body)


def scan_args(r: int, c: int, rng) -> dict:
    x = rng.choice(np.array([1, -1, 2, 0.5, -2], np.float32), (r, c))
    y = rng.integers(-100, 100, (r, c)).astype(np.int32)
    out = {"arg__x": x, "arg__y": y}
    for i, d in enumerate((np.float32, np.int32, np.float32, np.int32)):
        out[f"arg__o{i + 1}"] = np.zeros((r, c), d)
    out["expected__o1"] = np.cumsum(x, 1)
    out["expected__o2"] = np.cumsum(y[:, ::-1], 1)[:, ::-1]
    out["expected__o3"] = np.cumprod(x, 0)
    out["expected__o4"] = np.cumsum(y[::-1], 0)[::-1]
    return out


# ----------------------------------------------------------------------------- drivers
def write_case(tmp_path: Path, name: str, text: str, args: dict) -> tuple[Path, Path]:
    src, npz = tmp_path / f"{name}.mlir", tmp_path / f"{name}.npz"
    src.write_text(text)
    np.savez(npz, grid=np.array([1], np.int32), **args)
    return src, npz


def run_check(capsys, src: Path, npz: Path, backend: str = "ptxsim", sm: str = "sm_90"):
    """tilegen run --check on ``backend``; asserts every expected array matches."""
    argv = ["run", str(src), "--args", str(npz), "--backend", backend, "--check"]
    if backend == "ptxsim":
        argv += ["--gpu-name", sm]
    rc = main(argv)
    out = capsys.readouterr()
    want = len([k for k in np.load(npz).files if k.startswith("expected__")])
    assert rc == 0, out.out + out.err
    assert f"{want} expected array(s) match" in out.out + out.err, out.out + out.err


def ptxas_clean(tmp_path: Path, src: Path, sm: str) -> str:
    """Compile ``src`` for ``sm``, assemble with ptxas -v; asserts 0 spills. Returns the PTX."""
    ptx = tmp_path / f"{src.stem}.{sm}.ptx"
    assert main(["compile", str(src), f"--gpu-name={sm}", "--emit=ptx", "-o", str(ptx)]) == 0
    p = subprocess.run(
        [PTXAS, "-v", f"-arch={sm}", str(ptx), "-o", str(tmp_path / "k.cubin")],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stderr
    assert "0 bytes spill stores, 0 bytes spill loads" in p.stderr, p.stderr
    return ptx.read_text()


needs_ptxas = pytest.mark.skipif(PTXAS is None, reason="ptxas not found")


# ----------------------------------------------------------------------------- reduce
#: (rows, cols): warps along the reduced axis (16x128), replicated tiles (4x8: 32 elements on
#: 128 threads; 2x2: lanes 2..16 hold copies; 1x32; 128x2), several registers per thread (32x32, 64x16)
REDUCE_SHAPES = [(16, 128), (4, 8), (2, 2), (1, 32), (128, 2), (32, 32), (64, 16)]


@pytest.mark.parametrize("shape", REDUCE_SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_reduce_matches_in_ptxsim(tmp_path, capsys, shape):
    src, npz = write_case(
        tmp_path, "red", reduce_kernel(*shape), reduce_args(*shape, np.random.default_rng(0))
    )
    run_check(capsys, src, npz)


@pytest.mark.parametrize("e", ["f64", "i64", "i16"])
def test_reduce_element_types_match_in_ptxsim(tmp_path, capsys, e):
    """64-bit values shuffle as two words, 16-bit ones widened; both cross warps via smem."""
    rng = np.random.default_rng(2)
    src, npz = write_case(tmp_path, "red", reduce_kernel(16, 128, e), reduce_args(16, 128, rng, e))
    run_check(capsys, src, npz)


@needs_ptxas
@pytest.mark.parametrize("sm", SMS)
def test_reduce_ptxas_clean(tmp_path, sm):
    src = tmp_path / "red.mlir"
    src.write_text(reduce_kernel(16, 128))
    text = ptxas_clean(tmp_path, src, sm)
    # 128 columns on 4 warps x 32 lanes: a 5-step butterfly, then a cross-warp smem step
    masks = sorted({int(m) for m in re.findall(r"shfl\.sync\.bfly\.b32 \S+, \S+, (\d+),", text)})
    assert masks == [1, 2, 4, 8, 16]
    assert "bar.sync 0" in text and "st.shared.f32" in text


# ----------------------------------------------------------------------------- scan
SCAN_SHAPES = [(8, 64), (4, 8), (1, 32), (32, 4), (2, 2)]


@pytest.mark.parametrize("shape", SCAN_SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_scan_matches_in_ptxsim(tmp_path, capsys, shape):
    src, npz = write_case(
        tmp_path, "scn", scan_kernel(*shape), scan_args(*shape, np.random.default_rng(1))
    )
    run_check(capsys, src, npz)


@needs_ptxas
@pytest.mark.parametrize("sm", SMS)
def test_scan_ptxas_clean(tmp_path, sm):
    src = tmp_path / "scn.mlir"
    src.write_text(scan_kernel(8, 64))
    ptxas_clean(tmp_path, src, sm)


# ----------------------------------------------------------------------------- corpus
needs_corpus = pytest.mark.skipif(not OUT.exists(), reason="cuTile corpus not present")


def corpus_check(tmp_path: Path, capsys, kernel: str) -> None:
    """A corpus kernel matches its expectation in ptxsim (manifest tolerances) and assembles
    without spills for every target."""
    manifest = json.loads((CORPUS / "manifest.json").read_text())
    kernels = manifest["kernels"] if isinstance(manifest, dict) else manifest
    rtol, atol = next(k for k in kernels if k["name"] == kernel)["tolerance_rtol_atol"]
    src, npz = OUT / f"{kernel}.tileirbc", OUT / f"{kernel}.npz"
    argv = ["run", str(src), "--args", str(npz), "--backend", "ptxsim", "--check"]
    rc = main(argv + ["--rtol", str(rtol), "--atol", str(atol)])
    out = capsys.readouterr()
    assert rc == 0 and "expected array(s) match" in out.out + out.err, out.out + out.err
    if PTXAS is not None:
        for sm in SMS:
            ptxas_clean(tmp_path, src, sm)


@needs_corpus
@pytest.mark.parametrize(
    "kernel", ["reduce_rows", "softmax", "scan_cumsum", "layernorm", "reduce_cols_loop"]
)
def test_corpus_kernel(tmp_path, capsys, kernel):
    corpus_check(tmp_path, capsys, kernel)


# ----------------------------------------------------------------------------- layouts forced
# The loads of these kernels get the layout under test (layout assignment's default_blocked is
# patched), so the parallel scan and the packed reduce meet in-thread runs, repetitions along
# the axis, replicated lanes/warps and axes that are not the fastest lane digit.
import sys  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kernelgen as kg  # noqa: E402

from tilegen.runtime.layouts.attrs import BlockedLayout  # noqa: E402

#: id -> (shape, BlockedLayout(spt, tpw, wpc, order)) on 4 warps
FORCED = {
    "runs4_warp_copies": ((4, 64), BlockedLayout((1, 4), (4, 8), (1, 4), (1, 0))),
    "runs2_reps": ((16, 256), BlockedLayout((2, 2), (2, 16), (2, 2), (1, 0))),
    "col_major": ((64, 8), BlockedLayout((2, 1), (8, 4), (2, 2), (0, 1))),
    "lane_copies": ((2, 8), BlockedLayout((1, 1), (1, 32), (2, 2), (1, 0))),
    "reps_only": ((2, 512), BlockedLayout((1, 1), (1, 32), (2, 2), (1, 0))),
}


@pytest.fixture
def force_layout(monkeypatch):
    from tilegen.runtime.passes import layout_assignment as la

    def use(layout):
        orig = la.default_blocked

        def fake(shape, num_warps, *a, **k):
            if len(shape) == layout.rank:
                return layout
            return orig(shape, num_warps, *a, **k)

        monkeypatch.setattr(la, "default_blocked", fake)

    return use


def _region(e: str, ops: str, n: int = 1) -> list:
    args = ", ".join(f"%{c}{i}: tile<{e}>" for i in range(n) for c in "ab")
    return [f"({args}) {{", *ops.split("\n"), "}"]


def scan_body(shape, dim: int, e: str, rev: bool) -> list:
    op = "addf" if e.startswith("f") else "addi"
    ident = "0.000000e+00" if e.startswith("f") else "0"
    t = kg.ty(shape, e)
    return [
        f"%r = scan %t dim={dim} reverse={'true' if rev else 'false'} "
        f"identities=[{ident} : {e}] : {t} -> {t}",
        *_region(e, f"%s = {op} %a0, %b0 : tile<{e}>\nyield %s : tile<{e}>"),
    ]


def affine_scan_body(shape, dim: int, rev: bool) -> list:
    """Two operands, an associative but not commutative combiner: composing affine maps
    ``y -> a*y + b`` (later after earlier), exact in i32."""
    t = kg.ty(shape, "i32")
    comb = (
        "%m = muli %a0, %b0 : tile<i32>\n%p = muli %a0, %b1 : tile<i32>\n"
        "%q = addi %p, %a1 : tile<i32>\nyield %m, %q : tile<i32>, tile<i32>"
    )
    return [
        f"%one = constant <i32: 1> : {t}",
        f"%odd = ori %t, %one : {t}",
        f"%s:2 = scan %odd, %t dim={dim} reverse={'true' if rev else 'false'} "
        f"identities=[1 : i32, 0 : i32] : {t}, {t} -> {t}, {t}",
        "(%a0: tile<i32>, %b0: tile<i32>, %a1: tile<i32>, %b1: tile<i32>) {",
        *comb.split("\n"),
        "}",
        f"%r = xori %s#0, %s#1 : {t}",
    ]


def argmax_body(shape, dim: int) -> list:
    """(max, first index of the max) along ``dim``, the index returned."""
    t, ti = kg.ty(shape, "f32"), kg.ty(shape, "i32")
    out = kg.ty(tuple(s for i, s in enumerate(shape) if i != dim), "i32")
    outf = kg.ty(tuple(s for i, s in enumerate(shape) if i != dim), "f32")
    n = shape[dim]
    shp = [1] * len(shape)
    shp[dim] = n
    comb = (
        "%g = cmpf greater_than ordered %a0, %b0 : tile<f32> -> tile<i1>\n"
        "%e = cmpf equal ordered %a0, %b0 : tile<f32> -> tile<i1>\n"
        "%l = cmpi less_than %a1, %b1, signed : tile<i32> -> tile<i1>\n"
        "%el = andi %e, %l : tile<i1>\n%c = ori %g, %el : tile<i1>\n"
        "%v = select %c, %a0, %b0 : tile<i1>, tile<f32>\n"
        "%w = select %c, %a1, %b1 : tile<i1>, tile<i32>\n"
        "yield %v, %w : tile<f32>, tile<i32>"
    )
    return [
        f"%io = iota : tile<{n}xi32>",
        f"%ior = reshape %io : tile<{n}xi32> -> {kg.ty(tuple(shp), 'i32')}",
        f"%iob = broadcast %ior : {kg.ty(tuple(shp), 'i32')} -> {ti}",
        f"%m:2 = reduce %t, %iob dim={dim} identities=[0xFF800000 : f32, 0 : i32] : {t}, {ti} "
        f"-> {outf}, {out}",
        "(%a0: tile<f32>, %b0: tile<f32>, %a1: tile<i32>, %b1: tile<i32>) {",
        *comb.split("\n"),
        "}",
        f"%r = addi %m#1, %m#1 : {out}",
    ]


def sum_body(shape, dim: int, e: str) -> list:
    op = "addf" if e.startswith("f") else "addi"
    ident = "0.000000e+00" if e.startswith("f") else "0"
    out = kg.ty(tuple(s for i, s in enumerate(shape) if i != dim), e)
    return [
        f"%r = reduce %t dim={dim} identities=[{ident} : {e}] : {kg.ty(shape, e)} -> {out}",
        *_region(e, f"%s = {op} %a0, %b0 : tile<{e}>\nyield %s : tile<{e}>"),
    ]


def _check(text, x, out_shape, eo):
    ref, got, _, _ = kg.run_both(text, x, out_shape, eo)
    if eo.startswith("f"):
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    else:
        np.testing.assert_array_equal(got, ref)


def _ints(shape, e, seed=0):
    x = kg.inputs(shape, e, seed)
    if e == "i64":
        x = x * (1 << 36)  # high words must travel through the shuffles / smem
    return x


@pytest.mark.parametrize("rev", [False, True], ids=["fwd", "rev"])
@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("case", sorted(FORCED))
def test_scan_parallel_forced_layouts(force_layout, case, dim, rev):
    shape, lay = FORCED[case]
    force_layout(lay)
    x = _ints(shape, "i32", 3)
    _check(kg.kernel(shape, shape, scan_body(shape, dim, "i32", rev), "i32"), x, shape, "i32")
    text = kg.kernel(shape, shape, affine_scan_body(shape, dim, rev), "i32")
    _check(text, x, shape, "i32")


@pytest.mark.parametrize("e", ["f32", "f64", "i64", "i16"])
@pytest.mark.parametrize("case", ["runs2_reps", "lane_copies", "col_major"])
def test_scan_element_types_forced_layouts(force_layout, case, e):
    shape, lay = FORCED[case]
    force_layout(lay)
    x = _ints(shape, e, 4)
    for dim, rev in ((1, False), (0, True)):
        _check(kg.kernel(shape, shape, scan_body(shape, dim, e, rev), e), x, shape, e)


#: default layouts: 1x2048 (16 repetitions over 4 warps), 4x1024, 256x8 down the columns
@pytest.mark.parametrize("shape,dim", [((1, 2048), 1), ((4, 1024), 1), ((256, 8), 0), ((2, 16), 1)])
def test_scan_parallel_default_layouts(shape, dim):
    x = _ints(shape, "i32", 5)
    for rev in (False, True):
        _check(kg.kernel(shape, shape, affine_scan_body(shape, dim, rev), "i32"), x, shape, "i32")


def test_scan_is_parallel():
    """No serial per-line loop: lane steps are shfl.sync.up, one cross-warp barrier."""
    shape = (8, 64)
    ptx = kg.ptx_of(kg.kernel(shape, shape, scan_body(shape, 1, "f32", False)))
    assert "scan_line" not in ptx
    assert sorted({int(m) for m in re.findall(r"shfl\.sync\.up\.b32 \S+, \S+, (\d+),", ptx)}) == [
        1,
        2,
        4,
        8,
        16,
    ]


#: shapes whose default layouts hold many rows per thread: packed butterflies then a gather
#: through shared memory (64x32: no warp along the rows), or a two-level cross-warp step
PACKED = [((64, 32), 1), ((8, 512), 1), ((4, 1024), 1), ((128, 16), 1), ((32, 64), 1)]


@pytest.mark.parametrize("shape,dim", PACKED, ids=lambda v: str(v))
def test_reduce_packed_argmax_and_sums(shape, dim):
    x = kg.inputs(shape, "f32", 6)
    x[:, ::7] = x.max()  # ties: the first index must win
    out = tuple(s for i, s in enumerate(shape) if i != dim)
    _check(kg.kernel(shape, out, argmax_body(shape, dim), "f32", "i32"), x, out, "i32")
    for e in ("f64", "i64", "i16"):
        xe = _ints(shape, e, 7)
        _check(kg.kernel(shape, out, sum_body(shape, dim, e), e), xe, out, e)


@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("case", sorted(FORCED))
def test_reduce_forced_layouts(force_layout, case, dim):
    shape, lay = FORCED[case]
    force_layout(lay)
    out = tuple(s for i, s in enumerate(shape) if i != dim)
    x = kg.inputs(shape, "f32", 8)
    _check(kg.kernel(shape, out, argmax_body(shape, dim), "f32", "i32"), x, out, "i32")
    xi = _ints(shape, "i64", 9)
    _check(kg.kernel(shape, out, sum_body(shape, dim, "i64"), "i64"), xi, out, "i64")


def test_reduce_packs_rows_into_one_butterfly():
    """16 rows per thread over 32 lanes: 8+4+2+1 packed shuffles and one plain step, not 16x5."""
    shape = (16, 128)
    ptx = kg.ptx_of(kg.kernel(shape, (16,), sum_body(shape, 1, "f32")))
    assert len(re.findall(r"shfl\.sync\.bfly", ptx)) == 16
    assert "ld.shared.v4.f32" in ptx


@needs_ptxas
@pytest.mark.parametrize("sm", SMS)
def test_packed_and_scan_ptxas_clean(sm):
    for shape, dim in PACKED[:2]:
        out = tuple(s for i, s in enumerate(shape) if i != dim)
        err = kg.ptxas(
            kg.ptx_of(kg.kernel(shape, out, argmax_body(shape, dim), "f32", "i32"), sm), sm
        )
        assert "0 bytes spill stores, 0 bytes spill loads" in err, err
    shape = (4, 1024)
    err = kg.ptxas(
        kg.ptx_of(kg.kernel(shape, shape, affine_scan_body(shape, 1, True), "i32"), sm), sm
    )
    assert "0 bytes spill stores, 0 bytes spill loads" in err, err
