"""``--sanitize=memcheck``: bounds checks on global accesses through pointers, reported with the
source location and the offending element, and found on a CPU by ptxsim (docs/debugging.md)."""

from __future__ import annotations

import io
import re
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np
import pytest

import tilegen
from tilegen.cli import main
from tilegen.runtime.codegen.driver import EMITTED_SANITIZERS
from tilegen.runtime.codegen.sanitize import _array_ranks
from tilegen.runtime.driver import compile_source, options_for
from tilegen.runtime.ptxas import options_flags

from paths import CORPUS_OUT, needs_shared

#: a pointer store at iota + shift into the array ``p``; the array's extent comes from cuTile's
#: calling convention (the mangled name: one rank-1 array ``A1f32``, then a scalar)
CONVENTION = """cuda_tile.module @m {
  entry @oob_Kt1_A1f32_1t1_p16_Si32(%p: tile<ptr<f32>>, %n: tile<i32>, %st: tile<i32>,
                                   %shift: tile<i32>) {
    %i = iota : tile<128xi32> loc("planted.py":4:8)
    %s = reshape %shift : tile<i32> -> tile<1xi32> loc("planted.py":5:8)
    %sb = broadcast %s : tile<1xi32> -> tile<128xi32> loc("planted.py":5:8)
    %j = addi %i, %sb : tile<128xi32> loc("planted.py":5:8)
    %j64 = exti %j signed : tile<128xi32> -> tile<128xi64> loc("planted.py":5:8)
    %pr = reshape %p : tile<ptr<f32>> -> tile<1xptr<f32>> loc("planted.py":6:8)
    %pb = broadcast %pr : tile<1xptr<f32>> -> tile<128xptr<f32>> loc("planted.py":6:8)
    %q = offset %pb, %j64 : tile<128xptr<f32>>, tile<128xi64> -> tile<128xptr<f32>>
        loc("planted.py":6:8)
    %one = constant <f32: 1.0> : tile<128xf32> loc("planted.py":7:4)
    %t = store_ptr_tko weak %q, %one : tile<128xptr<f32>>, tile<128xf32> -> token
        loc("planted.py":7:4)
    return loc("planted.py":8:4)
  } loc("planted.py":2:0)
}
"""

#: the same store, the array's extent from a tensor view of ``p`` (no mangled name)
VIEW = """cuda_tile.module @m {
  entry @planted(%p: tile<ptr<f32>>, %n: tile<i32>, %st: tile<i32>, %shift: tile<i32>) {
    %v = make_tensor_view %p, shape = [%n], strides = [1] : tile<i32>
        -> tensor_view<?xf32, strides=[1]> loc("planted.py":3:4)
    %pv = make_partition_view %v : partition_view<tile=(128), tensor_view<?xf32, strides=[1]>>
        loc("planted.py":3:4)
    %z = constant <i32: 0> : tile<i32> loc("planted.py":3:4)
    %x, %tok = load_view_tko weak %pv[%z]
        : partition_view<tile=(128), tensor_view<?xf32, strides=[1]>>, tile<i32>
        -> tile<128xf32>, token loc("planted.py":3:4)
    %i = iota : tile<128xi32> loc("planted.py":4:8)
    %s = reshape %shift : tile<i32> -> tile<1xi32> loc("planted.py":5:8)
    %sb = broadcast %s : tile<1xi32> -> tile<128xi32> loc("planted.py":5:8)
    %j = addi %i, %sb : tile<128xi32> loc("planted.py":5:8)
    %j64 = exti %j signed : tile<128xi32> -> tile<128xi64> loc("planted.py":5:8)
    %pr = reshape %p : tile<ptr<f32>> -> tile<1xptr<f32>> loc("planted.py":6:8)
    %pb = broadcast %pr : tile<1xptr<f32>> -> tile<128xptr<f32>> loc("planted.py":6:8)
    %q = offset %pb, %j64 : tile<128xptr<f32>>, tile<128xi64> -> tile<128xptr<f32>>
        loc("planted.py":6:8)
    %t = store_ptr_tko weak %q, %x : tile<128xptr<f32>>, tile<128xf32> -> token
        loc("planted.py":7:4)
    return loc("planted.py":8:4)
  } loc("planted.py":2:0)
}
"""


def _cli(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        rc = main(argv)
    return rc, err.getvalue()


def _run(tmp_path, kernel: str, shift: int, memcheck: bool = True) -> tuple[int, str, Path]:
    src = tmp_path / "k.mlir"
    src.write_text(kernel)
    args, out = tmp_path / "in.npz", tmp_path / "out.npz"
    np.savez(args, arg__p=np.arange(130, dtype=np.float32), arg__shift=np.array(shift, np.int32))
    argv = ["run", str(src), "--args", str(args), "--backend", "ptxsim", "--out", str(out)]
    return (*_cli(argv + (["--sanitize=memcheck"] if memcheck else [])), out)


@pytest.mark.parametrize("kernel", [CONVENTION, VIEW], ids=["convention", "view"])
def test_planted_out_of_bounds_store_is_reported_in_ptxsim(kernel, tmp_path):
    rc, err, _ = _run(tmp_path, kernel, shift=3)  # thread 127 stores element 130 of 130
    assert rc != 0
    m = re.search(
        r"planted\.py:7:4: memcheck: out-of-bounds global store in '(\w+)': tile block "
        r"\[0, 0, 0\], thread (\d+): element (\d+) of parameter 0 \((\d+) elements\)",
        err,
    )
    assert m, err
    assert (m.group(2), m.group(3), m.group(4)) == ("127", "130", "130")
    assert err.count("memcheck:") == 1  # the first offending thread reports, all trap


@pytest.mark.parametrize("kernel", [CONVENTION, VIEW], ids=["convention", "view"])
def test_in_bounds_run_unchanged(kernel, tmp_path):
    rc, err, out = _run(tmp_path, kernel, shift=2)  # elements 2..129 of 130
    assert rc == 0, err
    got = np.load(out)["arg__p"]
    rc0, err0, out0 = _run(tmp_path, kernel, shift=2, memcheck=False)
    assert rc0 == 0, err0
    np.testing.assert_array_equal(got, np.load(out0)["arg__p"])


@needs_shared(CORPUS_OUT)
def test_raw_pointer_planted_load(tmp_path):
    """cuTile's raw_pointer kernel reads x[2*i+1] for i < n: n=320 over a 600-element x."""
    d = dict(np.load(CORPUS_OUT / "raw_pointer.npz"))
    d["arg__n"] = np.array(320, np.int32)
    args = tmp_path / "oob.npz"
    np.savez(args, **d)
    rc, err = _cli(
        [
            "run",
            str(CORPUS_OUT / "raw_pointer.tileirbc"),
            "--args",
            str(args),
            "--backend",
            "ptxsim",
            "--sanitize=memcheck",
        ]
    )
    assert rc != 0
    m = re.search(r"kernels\.py:\d+:\d+: memcheck: out-of-bounds global load .*: element (\d+) "
                  r"of parameter 0 \(600 elements\)", err)  # fmt: skip
    assert m, err
    assert int(m.group(1)) >= 600 and int(m.group(1)) % 2 == 1


@needs_shared(CORPUS_OUT)
@pytest.mark.parametrize("kernel", ["raw_pointer", "gather_scatter", "atomics"])
def test_corpus_in_bounds_kernels_pass_under_memcheck(kernel):
    path = CORPUS_OUT / f"{kernel}.tileirbc"
    rc, err = _cli(
        ["run", str(path), "--args", str(path.with_suffix(".npz")), "--backend", "ptxsim"]
        + ["--sanitize=memcheck", "--check"]
    )
    assert rc == 0, err
    ptx = compile_source(path, options_for("sm_90", sanitize="memcheck"), until="ptx").ptx
    assert ptx.count("trap;") >= 2  # every pointer access is checked


@needs_shared(CORPUS_OUT)
def test_view_only_kernel_ptx_unchanged():
    """Accesses through views are masked by the view's shape: nothing to add."""
    path = CORPUS_OUT / "vec_add.tileirbc"
    plain = compile_source(path, options_for("sm_90"), until="ptx").ptx
    checked = compile_source(path, options_for("sm_90", sanitize="memcheck"), until="ptx").ptx
    assert plain == checked


def test_no_sanitizer_no_checks():
    ptx = compile_source(CONVENTION, options_for("sm_90"), until="ptx").ptx
    assert "trap" not in ptx and "memcheck" not in ptx


def test_options_ptxas_flags_and_cache_key():
    assert EMITTED_SANITIZERS == ("memcheck",)
    on, off = options_for("sm_90", sanitize="memcheck"), options_for("sm_90")
    # tileiras 13.5 hands its ptxas exactly these for --sanitize=memcheck
    assert options_flags(on) == ["-sanitize=memcheck", "-g-tmem-access-check"]
    assert options_flags(off) == []
    assert on.fingerprint() != off.fingerprint()
    from tilegen.cache import key_for

    keys = {key_for(o, b"x", "v", Path("/nonexistent")) for o in (on, off)}
    assert len(keys) == 2


def test_api_compiles_with_memcheck():
    r = tilegen.compile(CONVENTION, gpu_name="sm_90", sanitize="memcheck")
    assert "atom.global.exch.b32" in r.ptx and r.cubin[:4] == b"\x7fELF"


def test_mangled_ranks():
    assert _array_ranks("raw_pointer_Kt1_A1f32_1t1_p16_A1f32_1t1_p16_Si32_I128") == [1, 1]
    assert _array_ranks("ln_Kt2_A2f16_1v8l0_2s256t1_p16_A1f16_1t1_p16_I4") == [2, 1]
    assert _array_ranks("planted") is None
