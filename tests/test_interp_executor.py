"""The kernel executor on small hand-written kernels: control flow, regions, views, memory,
atomics, mma precisions, print/assert, globals, the calling convention and the CLI."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tilegen.runtime import floats
from tilegen.runtime.interp.api import RunError, load_module, run_module


def kernel(tmp_path: Path, body: str, name: str = "k.mlir"):
    f = tmp_path / name
    f.write_text("cuda_tile.module @m {\n" + body + "\n}\n")
    return load_module(f)


def ptr_params(n: int, et: str, rank: int = 1) -> str:
    out = []
    for i in range(n):
        out.append(f"%p{i}: tile<ptr<{et}>>")
        out += [f"%s{i}_{d}: tile<i32>" for d in range(rank)]
        out += [f"%t{i}_{d}: tile<i32>" for d in range(rank)]
    return ", ".join(out)


def test_loop_break_continue_if_and_print(tmp_path):
    m = kernel(
        tmp_path,
        """
  entry @k(%n: tile<i32>) {
    %c0 = constant <i32: 0> : tile<i32>
    %c1 = constant <i32: 1> : tile<i32>
    %c3 = constant <i32: 3> : tile<i32>
    %r:2 = loop iter_values(%i = %c0, %s = %c0) : tile<i32>, tile<i32> -> tile<i32>, tile<i32> {
      %d = cmpi greater_than_or_equal %i, %n, signed : tile<i32> -> tile<i1>
      if %d {
        break %i, %s : tile<i32>, tile<i32>
      }
      %j = addi %i, %c1 : tile<i32>
      %e = cmpi equal %i, %c3, signed : tile<i32> -> tile<i1>
      if %e {
        continue %j, %s : tile<i32>, tile<i32>
      }
      %s2 = addi %s, %i : tile<i32>
      continue %j, %s2 : tile<i32>, tile<i32>
    }
    %f = for %iv in (%c0 to %n, step %c3) : tile<i32> iter_values(%a = %c0) -> (tile<i32>) {
      %b = addi %a, %iv : tile<i32>
      continue %b : tile<i32>
    }
    %x, %y, %z = get_tile_block_id : tile<i32>
    %t = print_tko "blk %d: i=%d sum=%d for=%d\\n", %x, %r#0, %r#1, %f : tile<i32>, tile<i32>, tile<i32>, tile<i32> -> token
    return
  }""",
    )
    out = io.StringIO()
    run_module(m, [("n", np.int32(7))], grid=(2, 1, 1), stdout=out)
    # sum of 0..6 without 3 = 18; for: 0 + 3 + 6 = 9
    assert out.getvalue() == "blk 0: i=7 sum=18 for=9\nblk 1: i=7 sum=18 for=9\n"


def test_partition_view_tail_padding_and_grid(tmp_path):
    m = kernel(
        tmp_path,
        f"""
  entry @k({ptr_params(2, "f32")}) {{
    %tv = make_tensor_view %p0, shape = [%s0_0], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
    %ov = make_tensor_view %p1, shape = [%s1_0], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
    %pv = make_partition_view %tv : partition_view<tile=(8), padding_value = neg_inf, tensor_view<?xf32, strides=[1]>>
    %po = make_partition_view %ov : partition_view<tile=(8), tensor_view<?xf32, strides=[1]>>
    %x, %y, %z = get_tile_block_id : tile<i32>
    %t, %tok = load_view_tko weak %pv[%x] : partition_view<tile=(8), padding_value = neg_inf, tensor_view<?xf32, strides=[1]>>, tile<i32> -> tile<8xf32>, token
    %m = reduce %t dim=0 identities=[0xFF800000 : f32] : tile<8xf32> -> tile<f32>
    (%a: tile<f32>, %b: tile<f32>) {{
      %c = maxf %a, %b : tile<f32>
      yield %c : tile<f32>
    }}
    %r = reshape %m : tile<f32> -> tile<1xf32>
    %bc = broadcast %r : tile<1xf32> -> tile<8xf32>
    %s = subf %t, %bc rounding<nearest_even> : tile<8xf32>
    %tok2 = store_view_tko weak %s, %po[%x] : tile<8xf32>, partition_view<tile=(8), tensor_view<?xf32, strides=[1]>>, tile<i32> -> token
    return
  }}""",
    )
    x = np.arange(20, dtype=np.float32)
    out = run_module(m, [("x", x), ("o", np.zeros(20, np.float32))], grid=(3,))
    exp = np.concatenate([x[:8] - 7, x[8:16] - 15, x[16:] - 19])
    assert np.array_equal(out["o"], exp)  # the tail tile's padding (-inf) never wins the max
    assert np.array_equal(out["x"], x)


def test_scan_reverse_and_argmax_reduce(tmp_path):
    m = kernel(
        tmp_path,
        f"""
  entry @k({ptr_params(3, "i32")}) {{
    %tv = make_tensor_view %p0, shape = [%s0_0], strides = [1] : tile<i32> -> tensor_view<?xi32, strides=[1]>
    %ov = make_tensor_view %p1, shape = [%s1_0], strides = [1] : tile<i32> -> tensor_view<?xi32, strides=[1]>
    %av = make_tensor_view %p2, shape = [%s2_0], strides = [1] : tile<i32> -> tensor_view<?xi32, strides=[1]>
    %pv = make_partition_view %tv : partition_view<tile=(8), tensor_view<?xi32, strides=[1]>>
    %po = make_partition_view %ov : partition_view<tile=(8), tensor_view<?xi32, strides=[1]>>
    %pa = make_partition_view %av : partition_view<tile=(1), tensor_view<?xi32, strides=[1]>>
    %c0 = constant <i32: 0> : tile<i32>
    %t, %tok = load_view_tko weak %pv[%c0] : partition_view<tile=(8), tensor_view<?xi32, strides=[1]>>, tile<i32> -> tile<8xi32>, token
    %s = scan %t dim=0 reverse=true identities=[0 : i32] : tile<8xi32> -> tile<8xi32>
    (%a: tile<i32>, %b: tile<i32>) {{
      %c = addi %a, %b : tile<i32>
      yield %c : tile<i32>
    }}
    %tok2 = store_view_tko weak %s, %po[%c0] : tile<8xi32>, partition_view<tile=(8), tensor_view<?xi32, strides=[1]>>, tile<i32> -> token
    %idx = iota : tile<8xi32>
    %v, %i = reduce %t, %idx dim=0 identities=[-2147483648 : i32, 0 : i32] : tile<8xi32>, tile<8xi32> -> tile<i32>, tile<i32>
    (%a0: tile<i32>, %b0: tile<i32>, %a1: tile<i32>, %b1: tile<i32>) {{
      %gt = cmpi greater_than %a0, %b0, signed : tile<i32> -> tile<i1>
      %eq = cmpi equal %a0, %b0, signed : tile<i32> -> tile<i1>
      %lt = cmpi less_than %a1, %b1, signed : tile<i32> -> tile<i1>
      %tie = andi %eq, %lt : tile<i1>
      %take = ori %gt, %tie : tile<i1>
      %rv = select %take, %a0, %b0 : tile<i1>, tile<i32>
      %ri = select %take, %a1, %b1 : tile<i1>, tile<i32>
      yield %rv, %ri : tile<i32>, tile<i32>
    }}
    %ri1 = reshape %i : tile<i32> -> tile<1xi32>
    %tok3 = store_view_tko weak %ri1, %pa[%c0] : tile<1xi32>, partition_view<tile=(1), tensor_view<?xi32, strides=[1]>>, tile<i32> -> token
    return
  }}""",
    )
    x = np.array([3, 9, -1, 9, 0, 2, 9, 1], np.int32)
    out = run_module(m, [("x", x), ("o", np.zeros(8, np.int32)), ("a", np.zeros(1, np.int32))])
    assert out["o"].tolist() == np.cumsum(x[::-1])[::-1].tolist()
    assert out["a"].tolist() == [1]  # first maximum wins ties


@pytest.mark.parametrize(
    "et,acc",
    [
        ("f16", "f32"),
        ("bf16", "f32"),
        ("tf32", "f32"),
        ("f8E4M3FN", "f32"),
        ("f8E5M2", "f16"),
        ("f64", "f64"),
    ],
)
def test_mmaf_exact_input_precision(tmp_path, et, acc):
    m = kernel(
        tmp_path,
        f"""
  entry @k({ptr_params(1, "f32", 2)}, %p1: tile<ptr<{acc}>>, %s1_0: tile<i32>, %s1_1: tile<i32>, %t1_0: tile<i32>, %t1_1: tile<i32>) {{
    %a = make_tensor_view %p0, shape = [%s0_0, %s0_1], strides = [%t0_0, 1] : tile<i32> -> tensor_view<?x?xf32, strides=[?,1]>
    %o = make_tensor_view %p1, shape = [%s1_0, %s1_1], strides = [%t1_0, 1] : tile<i32> -> tensor_view<?x?x{acc}, strides=[?,1]>
    %pa = make_partition_view %a : partition_view<tile=(4x8), tensor_view<?x?xf32, strides=[?,1]>>
    %po = make_partition_view %o : partition_view<tile=(4x4), tensor_view<?x?x{acc}, strides=[?,1]>>
    %c0 = constant <i32: 0> : tile<i32>
    %t, %tok = load_view_tko weak %pa[%c0, %c0] : partition_view<tile=(4x8), tensor_view<?x?xf32, strides=[?,1]>>, tile<i32> -> tile<4x8xf32>, token
    %n = {"ftof %t : tile<4x8xf32> -> tile<4x8x" + et + ">" if et not in ("f32", "f64") else ("ftof %t : tile<4x8xf32> -> tile<4x8xf64>" if et == "f64" else "")}
    %tt = permute %n [1, 0] : tile<4x8x{et}> -> tile<8x4x{et}>
    %z = constant <{acc}: 0.5> : tile<4x4x{acc}>
    %r = mmaf %n, %tt, %z : tile<4x8x{et}>, tile<8x4x{et}>, tile<4x4x{acc}>
    %tok2 = store_view_tko weak %r, %po[%c0, %c0] : tile<4x4x{acc}>, partition_view<tile=(4x4), tensor_view<?x?x{acc}, strides=[?,1]>>, tile<i32> -> token
    return
  }}""",
    )
    rng = np.random.default_rng(3)
    a = (rng.standard_normal((4, 8)) * 3).astype(np.float32)
    out = run_module(m, [("a", a), ("o", np.zeros((4, 4), dtype=floats.COMPUTE_DTYPES[acc]))])["o"]
    q = floats.round_to_format(a.astype(np.float64), et)  # inputs rounded RNE to the mma type
    exp = floats.round_to_format(0.5 + q @ q.T, acc)
    assert np.array_equal(out.astype(np.float64), exp)


@pytest.mark.parametrize(
    "sl,sr", [("signed", "signed"), ("unsigned", "signed"), ("unsigned", "unsigned")]
)
def test_mmai_signedness(tmp_path, sl, sr):
    m = kernel(
        tmp_path,
        f"""
  entry @k({ptr_params(1, "i8", 2)}, %p1: tile<ptr<i32>>, %s1_0: tile<i32>, %s1_1: tile<i32>, %t1_0: tile<i32>, %t1_1: tile<i32>) {{
    %a = make_tensor_view %p0, shape = [%s0_0, %s0_1], strides = [%t0_0, 1] : tile<i32> -> tensor_view<?x?xi8, strides=[?,1]>
    %o = make_tensor_view %p1, shape = [%s1_0, %s1_1], strides = [%t1_0, 1] : tile<i32> -> tensor_view<?x?xi32, strides=[?,1]>
    %pa = make_partition_view %a : partition_view<tile=(4x4), tensor_view<?x?xi8, strides=[?,1]>>
    %po = make_partition_view %o : partition_view<tile=(4x4), tensor_view<?x?xi32, strides=[?,1]>>
    %c0 = constant <i32: 0> : tile<i32>
    %t, %tok = load_view_tko weak %pa[%c0, %c0] : partition_view<tile=(4x4), tensor_view<?x?xi8, strides=[?,1]>>, tile<i32> -> tile<4x4xi8>, token
    %z = constant <i32: 1> : tile<4x4xi32>
    %r = mmai %t, %t, %z {sl} {sr} : tile<4x4xi8>, tile<4x4xi8>, tile<4x4xi32>
    %tok2 = store_view_tko weak %r, %po[%c0, %c0] : tile<4x4xi32>, partition_view<tile=(4x4), tensor_view<?x?xi32, strides=[?,1]>>, tile<i32> -> token
    return
  }}""",
    )
    a = np.array([[-128, 127, -1, 5], [0, -7, 3, 100], [1, 2, 3, 4], [-5, -6, 120, 8]], np.int8)
    out = run_module(m, [("a", a), ("o", np.zeros((4, 4), np.int32))])["o"]
    lhs = a.astype(np.int64) if sl == "signed" else a.view(np.uint8).astype(np.int64)
    rhs = a.astype(np.int64) if sr == "signed" else a.view(np.uint8).astype(np.int64)
    assert np.array_equal(out, (1 + lhs @ rhs).astype(np.int32))


def test_atomics_on_repeated_addresses_and_oob_diagnostic(tmp_path):
    body = f"""
  entry @k({ptr_params(1, "i32")}, %q: tile<ptr<i32>>, %qs: tile<i32>, %qt: tile<i32>) {{
    %b = reshape %p0 : tile<ptr<i32>> -> tile<1xptr<i32>>
    %bb = broadcast %b : tile<1xptr<i32>> -> tile<8xptr<i32>>
    %i = iota : tile<8xi32>
    %c4 = constant <i32: 4> : tile<8xi32>
    %m = remi %i, %c4 signed : tile<8xi32>
    %ps = offset %bb, %m : tile<8xptr<i32>>, tile<8xi32> -> tile<8xptr<i32>>
    %one = constant <i32: 1> : tile<8xi32>
    %old, %tok = atomic_rmw_tko relaxed device %ps, add, %one : tile<8xptr<i32>>, tile<8xi32> -> tile<8xi32>, token
    %mx, %tok2 = atomic_rmw_tko relaxed device %ps, max, %i : tile<8xptr<i32>>, tile<8xi32> -> tile<8xi32>, token
    %qb = reshape %q : tile<ptr<i32>> -> tile<1xptr<i32>>
    %qq = broadcast %qb : tile<1xptr<i32>> -> tile<8xptr<i32>>
    %qp = offset %qq, %i : tile<8xptr<i32>>, tile<8xi32> -> tile<8xptr<i32>>
    %tok3 = store_ptr_tko weak %qp, %old : tile<8xptr<i32>>, tile<8xi32> -> token
    return
  }}"""
    m = kernel(tmp_path, body)
    out = run_module(m, [("h", np.zeros(4, np.int32)), ("q", np.zeros(8, np.int32))])
    assert out["h"].tolist() == [4, 5, 6, 7]  # adds then max over i in {k, k+4}
    assert out["q"].tolist() == [0, 0, 0, 0, 1, 1, 1, 1]  # old values seen in row-major order
    with pytest.raises(RunError) as e:
        run_module(m, [("h", np.zeros(4, np.int32)), ("q", np.zeros(4, np.int32))])
    msg = str(e.value)
    assert (
        "k.mlir:" in msg
        and "'cuda_tile.store_ptr_tko' op" in msg
        and "outside every allocation" in msg
    )


def test_assert_failure_is_located(tmp_path):
    m = kernel(
        tmp_path,
        """
  entry @k(%n: tile<i32>) {
    %c0 = constant <i32: 0> : tile<i32>
    %ok = cmpi greater_than %n, %c0, signed : tile<i32> -> tile<i1>
    assert %ok, "n must be positive" : tile<i1>
    return
  }""",
    )
    run_module(m, [("n", np.int32(3))])
    with pytest.raises(RunError) as e:
        run_module(m, [("n", np.int32(-3))])
    assert "k.mlir:6:5:" in str(e.value) and "assertion failed: n must be positive" in str(e.value)


def test_globals_strided_and_gather_views(tmp_path):
    m = kernel(
        tmp_path,
        f"""
  global @g <f32: [10.0, 20.0, 30.0, 40.0]> : tile<4xf32>
  entry @k({ptr_params(2, "f32")}) {{
    %g = get_global @g : tile<ptr<f32>>
    %gb = reshape %g : tile<ptr<f32>> -> tile<1xptr<f32>>
    %gbb = broadcast %gb : tile<1xptr<f32>> -> tile<4xptr<f32>>
    %i = iota : tile<4xi32>
    %gp = offset %gbb, %i : tile<4xptr<f32>>, tile<4xi32> -> tile<4xptr<f32>>
    %gv, %t0 = load_ptr_tko weak %gp : tile<4xptr<f32>> -> tile<4xf32>, token
    %tv = make_tensor_view %p0, shape = [%s0_0], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
    %ov = make_tensor_view %p1, shape = [%s1_0], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
    %sv = make_strided_view %tv : strided_view<tile=(4), traversal_strides=[2], padding_value = zero, tensor_view<?xf32, strides=[1]>>
    %c3 = constant <i32: 3> : tile<i32>
    %w, %t1 = load_view_tko weak %sv[%c3] : strided_view<tile=(4), traversal_strides=[2], padding_value = zero, tensor_view<?xf32, strides=[1]>>, tile<i32> -> tile<4xf32>, token
    %sum = addf %w, %gv rounding<nearest_even> : tile<4xf32>
    %rows = constant <i32: [7, 0, 9, 2]> : tile<4xi32>
    %gs = make_gather_scatter_view %ov : gather_scatter_view<tile=(4), tensor_view<?xf32, strides=[1]>, sparse_dim=0>
    %t2 = store_view_tko weak %sum, %gs[%rows] : tile<4xf32>, gather_scatter_view<tile=(4), tensor_view<?xf32, strides=[1]>, sparse_dim=0>, tile<4xi32> -> token
    return
  }}""",
    )
    x = np.arange(9, dtype=np.float32)
    out = run_module(m, [("x", x), ("o", np.zeros(8, np.float32))])
    # strided tile 3 covers x[6:10] -> [6, 7, 8, pad 0]; scattered to rows 7, 0, (9 dropped), 2
    assert out["o"].tolist() == [27.0, 0, 40.0, 0, 0, 0, 0, 16.0]


def test_call_errors_name_the_parameter(tmp_path):
    m = kernel(
        tmp_path,
        f"""
  entry @k({ptr_params(1, "f32")}, %n: tile<i32>) {{
    return
  }}""",
    )
    with pytest.raises(
        RunError, match="argument 'x' has dtype int32 but entry parameter #0 points to f32"
    ):
        run_module(m, [("x", np.zeros(3, np.int32)), ("n", np.int32(1))])
    with pytest.raises(
        RunError, match="argument 'n' has dtype float32 but entry parameter #3 is tile<i32>"
    ):
        run_module(m, [("x", np.zeros(3, np.float32)), ("n", np.float32(1))])
    with pytest.raises(RunError, match="too few arguments"):
        run_module(m, [("x", np.zeros(3, np.float32))])
    with pytest.raises(RunError, match="too many arguments: 'extra'"):
        run_module(m, [("x", np.zeros(3, np.float32)), ("n", np.int32(1)), ("extra", np.int32(1))])


def test_cli_run_roundtrip_and_errors(tmp_path):
    src = tmp_path / "k.mlir"
    src.write_text(f"""cuda_tile.module @m {{
  entry @k({ptr_params(1, "f32")}, %v: tile<f32>) {{
    %tv = make_tensor_view %p0, shape = [%s0_0], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
    %pv = make_partition_view %tv : partition_view<tile=(4), tensor_view<?xf32, strides=[1]>>
    %x, %y, %z = get_tile_block_id : tile<i32>
    %r = reshape %v : tile<f32> -> tile<1xf32>
    %b = broadcast %r : tile<1xf32> -> tile<4xf32>
    %xf = itof %x signed : tile<i32> -> tile<f32>
    %xr = reshape %xf : tile<f32> -> tile<1xf32>
    %xb = broadcast %xr : tile<1xf32> -> tile<4xf32>
    %s = addf %b, %xb rounding<nearest_even> : tile<4xf32>
    %t = store_view_tko weak %s, %pv[%x] : tile<4xf32>, partition_view<tile=(4), tensor_view<?xf32, strides=[1]>>, tile<i32> -> token
    return
  }}
}}
""")
    np.savez(
        tmp_path / "in.npz",
        arg__o=np.zeros(8, np.float32),
        arg__v=np.float32(1.5),
        grid=np.array([2, 1, 1]),
    )
    cmd = [
        sys.executable,
        "-m",
        "tilegen.cli",
        "run",
        str(src),
        "--args",
        str(tmp_path / "in.npz"),
        "--out",
        str(tmp_path / "out.npz"),
    ]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    with np.load(tmp_path / "out.npz") as d:
        assert d["arg__o"].tolist() == [1.5] * 4 + [2.5] * 4
        assert float(d["arg__v"]) == 1.5
    r = subprocess.run(cmd + ["--grid", "3"], capture_output=True, text=True)  # tile 2: all masked
    assert r.returncode == 0, r.stderr
    with np.load(tmp_path / "out.npz") as d:
        assert d["arg__o"].tolist() == [1.5] * 4 + [2.5] * 4
    r = subprocess.run(cmd + ["--entry", "nope"], capture_output=True, text=True)
    assert r.returncode == 1 and "no entry named @nope (entries: @k)" in r.stderr
    bad = tmp_path / "bad.mlir"
    bad.write_text("cuda_tile.module @m {\n  entry @k() {\n    %x = addf\n  }\n}\n")
    r = subprocess.run(
        cmd[:4] + [str(bad), "--args", str(tmp_path / "in.npz")], capture_output=True, text=True
    )
    assert (
        r.returncode == 3  # input that is not valid Tile IR (tileiras's class)
        and "bad.mlir:4:3: error: expected SSA operand" in r.stderr
        and "Traceback" not in r.stderr
    )


def test_mmaf_scaled_block_scales_and_alloca(tmp_path):
    m = kernel(
        tmp_path,
        f"""
  entry @k({ptr_params(1, "f32", 2)}, %p1: tile<ptr<f32>>, %s1_0: tile<i32>, %s1_1: tile<i32>, %t1_0: tile<i32>, %t1_1: tile<i32>) {{
    %a = make_tensor_view %p0, shape = [%s0_0, %s0_1], strides = [%t0_0, 1] : tile<i32> -> tensor_view<?x?xf32, strides=[?,1]>
    %o = make_tensor_view %p1, shape = [%s1_0, %s1_1], strides = [%t1_0, 1] : tile<i32> -> tensor_view<?x?xf32, strides=[?,1]>
    %pa = make_partition_view %a : partition_view<tile=(4x64), tensor_view<?x?xf32, strides=[?,1]>>
    %po = make_partition_view %o : partition_view<tile=(4x4), tensor_view<?x?xf32, strides=[?,1]>>
    %c0 = constant <i32: 0> : tile<i32>
    %t, %tok = load_view_tko weak %pa[%c0, %c0] : partition_view<tile=(4x64), tensor_view<?x?xf32, strides=[?,1]>>, tile<i32> -> tile<4x64xf32>, token
    %n = ftof %t : tile<4x64xf32> -> tile<4x64xf8E4M3FN>
    %nt = permute %n [1, 0] : tile<4x64xf8E4M3FN> -> tile<64x4xf8E4M3FN>
    %sf = constant <f32: [[2.0, 0.25], [1.0, 4.0], [0.5, 1.0], [8.0, 2.0]]> : tile<4x2xf32>
    %sl = ftof %sf rounding<zero> : tile<4x2xf32> -> tile<4x2xf8E8M0FNU>
    %sr = permute %sl [1, 0] : tile<4x2xf8E8M0FNU> -> tile<2x4xf8E8M0FNU>
    %z = constant <f32: 0.0> : tile<4x4xf32>
    %r = mmaf_scaled %n, %nt, %z, %sl, %sr : tile<4x64xf8E4M3FN>, tile<64x4xf8E4M3FN>, tile<4x4xf32>, tile<4x2xf8E8M0FNU>, tile<2x4xf8E8M0FNU>
    %tok2 = store_view_tko weak %r, %po[%c0, %c0] : tile<4x4xf32>, partition_view<tile=(4x4), tensor_view<?x?xf32, strides=[?,1]>>, tile<i32> -> token
    %buf = alloca num_elem = 64, alignment = 16 : tile<ptr<f32>>
    return
  }}""",
    )
    rng = np.random.default_rng(5)
    a = rng.standard_normal((4, 64)).astype(np.float32)
    out = run_module(m, [("a", a), ("o", np.zeros((4, 4), np.float32))])["o"]
    q = floats.round_to_format(a.astype(np.float64), "f8E4M3FN")
    s = np.array([[2.0, 0.25], [1.0, 4.0], [0.5, 1.0], [8.0, 2.0]])
    lhs = q * np.repeat(s, 32, axis=1)
    rhs = q.T * np.repeat(s.T, 32, axis=0)
    assert np.array_equal(out, (lhs @ rhs).astype(np.float32))


def test_inbounds_promise_is_checked(tmp_path):
    m = kernel(
        tmp_path,
        f"""
  entry @k({ptr_params(1, "f32")}) {{
    %tv = make_tensor_view %p0, shape = [%s0_0], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
    %pv = make_partition_view %tv : partition_view<tile=(4), tensor_view<?xf32, strides=[1]>>
    %x, %y, %z = get_tile_block_id : tile<i32>
    %t0 = make_token : token
    %t, %tok = load_view_tko weak %pv[%x] token = %t0 inbounds = [true] : partition_view<tile=(4), tensor_view<?xf32, strides=[1]>>, tile<i32> -> tile<4xf32>, token
    return
  }}""",
    )
    run_module(m, [("x", np.zeros(8, np.float32))], grid=(2,))
    with pytest.raises(
        RunError, match=r"k.mlir:8:16: .*tile at index \[1\] leaves the tensor along dimension 0"
    ):
        run_module(m, [("x", np.zeros(6, np.float32))], grid=(2,))


def test_printf_conversions():
    from tilegen.runtime.interp.executor import format_printf
    from tilegen.runtime.types import FloatType, IntegerType, TileType

    i8, f32 = TileType((), IntegerType(8)), TileType((), FloatType("f32"))
    text = format_printf(
        "%d %u %x %5.2f %e %%|%d\n",
        [
            np.int8(-1),
            np.int8(-1),
            np.int8(-1),
            np.float32(3.14159),
            np.float32(0.5),
            np.array([1, 2, 3], np.int32),
        ],
        [i8, i8, i8, f32, f32, TileType((3,), IntegerType(32))],
    )
    assert text == "-1 255 ff  3.14 5.000000e-01 %|[1, 2, 3]\n"


def test_scalar_bf16_given_as_raw_bits(tmp_path):
    m = kernel(
        tmp_path,
        """
  entry @k(%v: tile<bf16>) {
    %t = print_tko "%f\\n", %v : tile<bf16> -> token
    return
  }""",
    )
    out = io.StringIO()
    run_module(m, [("v", np.uint16(0x3FC0))], stdout=out)  # 1.5 in bf16
    assert out.getvalue() == "1.500000\n"
    out = io.StringIO()
    run_module(m, [("v", np.float32(1.00390625))], stdout=out)  # rounds to even: 1.0
    assert out.getvalue() == "1.000000\n"


def test_aliasing_views_share_one_heap(tmp_path):
    """A strided view and a dense view of the same bytes see each other's stores in order."""
    m = kernel(
        tmp_path,
        f"""
  entry @k({ptr_params(1, "f32")}) {{
    %dense = make_tensor_view %p0, shape = [8], strides = [1] : tensor_view<8xf32, strides=[1]>
    %evens = make_tensor_view %p0, shape = [4], strides = [2] : tensor_view<4xf32, strides=[2]>
    %pe = make_partition_view %evens : partition_view<tile=(4), tensor_view<4xf32, strides=[2]>>
    %pd = make_partition_view %dense : partition_view<tile=(8), tensor_view<8xf32, strides=[1]>>
    %c0 = constant <i32: 0> : tile<i32>
    %v = constant <f32: [10.0, 20.0, 30.0, 40.0]> : tile<4xf32>
    %t1 = store_view_tko weak %v, %pe[%c0] : tile<4xf32>, partition_view<tile=(4), tensor_view<4xf32, strides=[2]>>, tile<i32> -> token
    %all, %t2 = load_view_tko weak %pd[%c0] token = %t1 : partition_view<tile=(8), tensor_view<8xf32, strides=[1]>>, tile<i32> -> tile<8xf32>, token
    %one = constant <f32: 1.0> : tile<8xf32>
    %s = addf %all, %one rounding<nearest_even> : tile<8xf32>
    %t3 = store_view_tko weak %s, %pd[%c0] token = %t2 : tile<8xf32>, partition_view<tile=(8), tensor_view<8xf32, strides=[1]>>, tile<i32> -> token
    return
  }}""",
    )
    out = run_module(m, [("x", np.full(8, -1.0, np.float32))])
    assert out["x"].tolist() == [11.0, 0.0, 21.0, 0.0, 31.0, 0.0, 41.0, 0.0]


def test_pack_unpack_sub_byte_types(tmp_path):
    m = kernel(
        tmp_path,
        """
  entry @k() {
    %c = constant <i8: [1, -2, 7, -8]> : tile<4xi8>
    %n = trunci %c : tile<4xi8> -> tile<4xi4>
    %p = pack %n : tile<4xi4> -> tile<2xi8>
    %u = unpack %p : tile<2xi8> -> tile<4xf4E2M1FN>
    %f = ftof %u : tile<4xf4E2M1FN> -> tile<4xf32>
    %t = print_tko "%d %.1f\\n", %p, %f : tile<2xi8>, tile<4xf32> -> token
    return
  }""",
    )
    out = io.StringIO()
    run_module(m, [], stdout=out)
    # nibbles little-endian: 0xE1 0x87; f4 codes 1, 0xE, 7, 8 = 0.5, -4, 6, -0
    assert out.getvalue() == "[-31, -121] [0.5, -4.0, 6.0, -0.0]\n"


def test_runaway_loop_stops_at_max_ops(tmp_path):
    m = kernel(
        tmp_path,
        """
  entry @k() {
    %c0 = constant <i32: 0> : tile<i32>
    %r = loop iter_values(%i = %c0) : tile<i32> -> tile<i32> {
      continue %i : tile<i32>
    }
    return
  }""",
    )
    with pytest.raises(RunError, match=r"k.mlir:6:7: .*stopped after executing 1000 ops"):
        run_module(m, [], max_ops=1000)


def test_cli_rejects_unreadable_arguments(tmp_path):
    src = tmp_path / "k.mlir"
    src.write_text("cuda_tile.module @m {\n  entry @k() {\n    return\n  }\n}\n")
    junk = tmp_path / "junk.npz"
    junk.write_text("not a zip")
    r = subprocess.run(
        [sys.executable, "-m", "tilegen.cli", "run", str(src), "--args", str(junk)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 1 and "cannot read arguments" in r.stderr and "Traceback" not in r.stderr


def test_trace_lists_every_executed_op(tmp_path):
    m = kernel(
        tmp_path,
        """
  entry @k(%n: tile<i32>) {
    %c1 = constant <i32: 1> : tile<i32>
    %s = addi %n, %c1 : tile<i32>
    return
  }""",
    )
    trace = io.StringIO()
    run_module(m, [("n", np.int32(41))], grid=(2,), trace=trace)
    lines = trace.getvalue().splitlines()
    assert len(lines) == 6 and lines[1].startswith("[0,0,0] ") and lines[4].startswith("[1,0,0] ")
    assert lines[1].endswith("k.mlir:5:10: cuda_tile.addi -> int32[] 42")
    assert lines[2].endswith("cuda_tile.return")


def test_compare_expected_reports_worst_element():
    from tilegen.runtime.interp.api import compare_expected

    exp = {"a": np.array([1.0, 2.0, np.nan], np.float32), "b": np.array([1, 2], np.int32)}
    ok = {"a": np.array([1.0, 2.0000001, np.nan], np.float32), "b": np.array([1, 2], np.int32)}
    assert compare_expected(ok, exp, rtol=1e-6) == []
    bad = {"a": np.array([1.0, 2.5, np.nan], np.float32), "b": np.array([1, 3], np.int32)}
    p = compare_expected(bad, exp, rtol=1e-6)
    assert p == [
        "a: 1 of 3 elements differ; worst at [1]: got 2.5, expected 2.0",
        "b: 1 of 2 elements differ; worst at [1]: got 3, expected 2",
    ]


def test_cli_check_against_corpus_expectations():
    from paths import CORPUS_OUT as c  # ../shared or $TILEGEN_SHARED

    if not c.exists():
        pytest.skip("corpus not available")
    base = [
        sys.executable,
        "-m",
        "tilegen.cli",
        "run",
        str(c / "softmax.tileirbc"),
        "--args",
        str(c / "softmax.npz"),
        "--check",
    ]
    r = subprocess.run(base + ["--rtol", "1e-5", "--atol", "1e-7"], capture_output=True, text=True)
    assert r.returncode == 0 and "1 expected array(s) match" in r.stdout, r.stderr
    r = subprocess.run(base, capture_output=True, text=True)  # exact comparison: float noise
    assert r.returncode == 1 and "mismatch: out:" in r.stderr


@pytest.mark.parametrize(
    "mode,ref", [("add", np.add), ("max", np.maximum), ("xor", np.bitwise_xor), ("umin", None)]
)
def test_hot_address_atomics_return_prefix_values(tmp_path, mode, ref):
    m = kernel(
        tmp_path,
        f"""
  entry @k({ptr_params(1, "i32")}, %q: tile<ptr<i32>>, %qs: tile<i32>, %qt: tile<i32>) {{
    %b = reshape %p0 : tile<ptr<i32>> -> tile<1xptr<i32>>
    %bb = broadcast %b : tile<1xptr<i32>> -> tile<16xptr<i32>>
    %i = iota : tile<16xi32>
    %c3 = constant <i32: 3> : tile<16xi32>
    %v = subi %i, %c3 : tile<16xi32>
    %old, %tok = atomic_rmw_tko relaxed device %bb, {mode}, %v : tile<16xptr<i32>>, tile<16xi32> -> tile<16xi32>, token
    %qb = reshape %q : tile<ptr<i32>> -> tile<1xptr<i32>>
    %qq = broadcast %qb : tile<1xptr<i32>> -> tile<16xptr<i32>>
    %qp = offset %qq, %i : tile<16xptr<i32>>, tile<16xi32> -> tile<16xptr<i32>>
    %tok3 = store_ptr_tko weak %qp, %old : tile<16xptr<i32>>, tile<16xi32> -> token
    return
  }}""",
    )
    out = run_module(m, [("h", np.array([5], np.int32)), ("q", np.zeros(16, np.int32))])
    v = np.arange(16, dtype=np.int64) - 3
    seq = [5]
    for x in v:
        a = seq[-1]
        if ref is None:  # umin compares the unsigned bit patterns
            nxt = min(a % 2**32, int(x) % 2**32)
            nxt = nxt - 2**32 if nxt >= 2**31 else nxt
        else:
            nxt = int(ref(np.int64(a), x))
        seq.append(nxt)
    assert out["q"].tolist() == seq[:-1] and out["h"].tolist() == [seq[-1]]
