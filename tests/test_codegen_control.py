"""runtime/codegen/control.py: scf.for / scf.if / scf.while compiled to PTX, assembled by
ptxas for every target without spills, and run in the SIMT simulator against numpy.

Trip counts come from a kernel argument (zero-trip loops included), loop-carried values are
permuted by the yields (a parallel copy), loops nest, and a reduction (bar.sync) runs inside a
loop body.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from test_codegen_reduce import (
    PTXAS,
    SMS,
    _combiner,
    corpus_check,
    needs_corpus,
    ptxas_clean,
    run_check,
    write_case,
)

N = 128
V = "tensor_view<?xf32, strides=[1]>"
P = f"partition_view<tile=({N}), {V}>"
T = f"tile<{N}xf32>"

HEAD = f"""entry @ctl(%x: tile<ptr<f32>>, %xs: tile<i32>, %xt: tile<i32>, %o: tile<ptr<f32>>, \
%os: tile<i32>, %ot: tile<i32>, %n: tile<i32>) optimization_hints=<default = {{}}> {{
  %0 = make_token : token
  %c0 = constant <i32: 0> : tile<i32>
  %c1 = constant <i32: 1> : tile<i32>
  %c2 = constant <i32: 2> : tile<i32>
  %z = constant <f32: 0.000000e+00> : {T}
  %tv = make_tensor_view %x, shape = [%xs], strides = [1] : tile<i32> -> {V}
  %tvo = make_tensor_view %o, shape = [%os], strides = [1] : tile<i32> -> {V}
  %pv = make_partition_view %tv : {P}
  %pvo = make_partition_view %tvo : {P}
  %t, %tk = load_view_tko weak %pv[%c0] token = %0 : {P}, tile<i32> -> {T}, token
"""
TAIL = f"""  %s = store_view_tko weak %y, %pvo[%c0] token = %0 : {T}, {P}, tile<i32> -> token
  return
}}
"""


def _splat(name: str, scalar_f32: str) -> str:
    return (
        f"  %{name}r = reshape %{scalar_f32} : tile<f32> -> tile<1xf32>\n"
        f"  %{name} = broadcast %{name}r : tile<1xf32> -> {T}\n"
    )


#: a loop to n carrying (a, b, k) and yielding (b, inner(a), k + i): the yield permutes the
#: carried registers; inner is a nested 2-trip loop; the total of a is a reduce after the loop
FOR_KERNEL = (
    HEAD
    + f"""  %for:3 = for %i in (%c0 to %n, step %c1) : tile<i32> iter_values(%a = %t, %b = %z, \
%k = %c0) -> ({T}, {T}, tile<i32>) {{
    %inner = for %j in (%c0 to %c2, step %c1) : tile<i32> iter_values(%s = %a) -> ({T}) {{
      %s2 = addf %s, %t : {T}
      continue %s2 : {T}
    }}
    %k2 = addi %k, %i : tile<i32>
    continue %b, %inner, %k2 : {T}, {T}, tile<i32>
  }}
  %r = reduce %for#0 dim=0 identities=[0.000000e+00 : f32] : {T} -> tile<f32>
"""
    + _combiner("f32", "addf")
    + _splat("rb", "r")
    + "  %kf = itof %for#2 signed : tile<i32> -> tile<f32>\n"
    + _splat("kb", "kf")
    + f"  %y1 = addf %for#1, %rb : {T}\n  %y = addf %y1, %kb : {T}\n"
    + TAIL
)


def for_expected(x, n):
    a, b, k = x.copy(), np.zeros_like(x), 0
    for i in range(n):
        a, b, k = b, a + 2 * x, k + i
    return b + a.sum() + k


#: a reduce (shuffles + bar.sync) inside a loop body: acc += sum(acc) broadcast, n times
REDUCE_IN_LOOP = (
    HEAD
    + f"""  %y = for %i in (%c0 to %n, step %c1) : tile<i32> iter_values(%acc = %t) -> ({T}) {{
    %r = reduce %acc dim=0 identities=[0.000000e+00 : f32] : {T} -> tile<f32>
"""
    + _combiner("f32", "addf")
    + _splat("rb", "r")
    + f"""    %a2 = addf %acc, %rb : {T}
    continue %a2 : {T}
  }}
"""
    + TAIL
)


def reduce_in_loop_expected(x, n):
    a = x.copy()
    for _ in range(n):
        a = a + a.sum()
    return a


#: if n > 2 { x * 2 } else { if n == 0 { 0 } else { -x } }
IF_KERNEL = HEAD + f"""  %p = cmpi greater_than %n, %c2, signed : tile<i32> -> tile<i1>
  %y = if %p -> ({T}) {{
    %m = addf %t, %t : {T}
    yield %m : {T}
  }} else {{
    %q = cmpi equal %n, %c0, signed : tile<i32> -> tile<i1>
    %w = if %q -> ({T}) {{
      yield %z : {T}
    }} else {{
      %ng = subf %z, %t : {T}
      yield %ng : {T}
    }}
    yield %w : {T}
  }}
""" + TAIL


def if_expected(x, n):
    return 2 * x if n > 2 else (np.zeros_like(x) if n == 0 else -x)


#: loop { if i >= n { break a } ; continue i + 1, a + x }: scf.while after the lowering
WHILE_KERNEL = (
    HEAD + f"""  %w:2 = loop iter_values(%i = %c0, %a = %z) : tile<i32>, {T} -> tile<i32>, {T} {{
    %q = cmpi greater_than_or_equal %i, %n, signed : tile<i32> -> tile<i1>
    if %q {{
      break %i, %a : tile<i32>, {T}
    }}
    %i2 = addi %i, %c1 : tile<i32>
    %a2 = addf %a, %t : {T}
    continue %i2, %a2 : tile<i32>, {T}
  }}
  %wf = itof %w#0 signed : tile<i32> -> tile<f32>
""" + _splat("wb", "wf") + f"  %y = addf %w#1, %wb : {T}\n" + TAIL
)


def while_expected(x, n):
    return n * x + max(n, 0)


CASES = {
    "for": (FOR_KERNEL, for_expected),
    "reduce_in_loop": (REDUCE_IN_LOOP, reduce_in_loop_expected),
    "if": (IF_KERNEL, if_expected),
    "while": (WHILE_KERNEL, while_expected),
}


def _case(tmp_path, name, n):
    text, expected = CASES[name]
    x = np.random.default_rng(3).integers(-4, 4, N).astype(np.float32)
    args = {
        "arg__x": x,
        "arg__o": np.zeros(N, np.float32),
        "arg__n": np.array(n, np.int32),
        "expected__o": expected(x, n).astype(np.float32),
    }
    return write_case(tmp_path, f"{name}_{n}", text, args)


@pytest.mark.parametrize("n", [0, 1, 3])
@pytest.mark.parametrize("name", list(CASES))
def test_control_matches_in_ptxsim(tmp_path, capsys, name, n):
    src, npz = _case(tmp_path, name, n)
    run_check(capsys, src, npz, backend="interp")  # the kernel text itself is right
    run_check(capsys, src, npz)


@pytest.mark.skipif(PTXAS is None, reason="ptxas not found")
@pytest.mark.parametrize("sm", SMS)
@pytest.mark.parametrize("name", list(CASES))
def test_control_ptxas_clean(tmp_path, name, sm):
    src, _ = _case(tmp_path, name, 1)
    text = ptxas_clean(tmp_path, src, sm)
    assert "bra" in text


@needs_corpus
@pytest.mark.parametrize("kernel", ["for_loops", "control_if"])
def test_corpus_kernel(tmp_path, capsys, kernel):
    corpus_check(tmp_path, capsys, kernel)


#: a bound mask in a loop without dots: acc += select(iota + 16 i < m, x, 0); all true while
#: 16 i + 127 < m (docs/pipelines.md section 17: the body is emitted twice behind that test)
MASKED_LOOP = (
    HEAD.replace("%n: tile<i32>)", "%n: tile<i32>, %m: tile<i32>)")
    + f"""  %c16 = constant <i32: 16> : tile<i32>
  %io = iota : tile<{N}xi32>
  %mr = reshape %m : tile<i32> -> tile<1xi32>
  %mb = broadcast %mr : tile<1xi32> -> tile<{N}xi32>
  %y = for %i in (%c0 to %n, step %c1) : tile<i32> iter_values(%acc = %z) -> ({T}) {{
    %off = muli %i, %c16 : tile<i32>
    %offr = reshape %off : tile<i32> -> tile<1xi32>
    %offb = broadcast %offr : tile<1xi32> -> tile<{N}xi32>
    %cols = addi %io, %offb : tile<{N}xi32>
    %mask = cmpi less_than %cols, %mb, signed : tile<{N}xi32> -> tile<{N}xi1>
    %v = select %mask, %t, %z : tile<{N}xi1>, {T}
    %a2 = addf %acc, %v : {T}
    continue %a2 : {T}
  }}
"""
    + TAIL
)


def masked_loop_expected(x, n, m):
    acc = np.zeros_like(x)
    for i in range(n):
        acc = acc + np.where(np.arange(N) + 16 * i < m, x, 0)
    return acc


@pytest.mark.skipif(PTXAS is None, reason="ptxas not found")
@pytest.mark.parametrize("n,m", [(0, 0), (3, 1000), (9, 200), (12, 130), (5, -7)])
def test_bound_mask_skipped_where_all_true(tmp_path, capsys, n, m):
    """The loop body is emitted twice: with the select, and without it behind the
    per-iteration test that every column is below m (64-bit bounds that must fit i32); both
    paths, zero trips and a negative bound match NumPy."""
    x = np.random.default_rng(n + 7).integers(-4, 4, N).astype(np.float32)
    args = {
        "arg__x": x,
        "arg__o": np.zeros(N, np.float32),
        "arg__n": np.array(n, np.int32),
        "arg__m": np.array(m, np.int32),
        "expected__o": masked_loop_expected(x, n, m).astype(np.float32),
    }
    src, npz = write_case(tmp_path, f"mloop_{n}_{m}", MASKED_LOOP, args)
    run_check(capsys, src, npz)
    ptx = ptxas_clean(tmp_path, src, "sm_90")
    branch = re.search(r"@!(%p\d+) bra (\$L__mask_kept_\d+);", ptx)
    assert branch, "no mask-free copy"
    # the select is in the masked copy only (after its label)
    assert ptx.count("selp.") == ptx[ptx.index(branch.group(2) + ":") :].count("selp.") > 0
