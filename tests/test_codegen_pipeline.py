"""K-loop pipelining (runtime/codegen/control.py ``_pipelined_for``) and direct cp.async staging of
dot operands (runtime/codegen/memory.py ``Staged`` / ``cp_async_tile``,
runtime/codegen/mma_staging.py).

Small generated matmul kernels with 1..5 K iterations (and a K tail that is partly out of
bounds) run in the SIMT simulator in its strict cp.async mode (a copy's destination reads as
poison until a ``bar.sync`` after the ``wait_group`` that retired it; a copy into bytes read
since the last ``bar.sync`` is an error), compared exactly with NumPy, with every combination of
``CompileOptions(pipelining=False)`` / ``CompileOptions(use_cp_async=False)``. The PTX is checked for where the copies,
commits, waits and barriers sit, and mutated PTX (a wait or a barrier removed) must fail."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tilegen.runtime.asm import parse_module
from tilegen.runtime.codegen.driver import find_ptxas

PTXAS = find_ptxas()

SRC = """
cuda_tile.module @m {{
entry @mm(%a: tile<ptr<{st}>>, %a1: tile<i32>, %a2: tile<i32>, %a3: tile<i32>, %a4: tile<i32>,
          %b: tile<ptr<{st}>>, %b1: tile<i32>, %b2: tile<i32>, %b3: tile<i32>, %b4: tile<i32>,
          %c: tile<ptr<{ct}>>, %c1: tile<i32>, %c2: tile<i32>, %c3: tile<i32>, %c4: tile<i32>,
          %nk: tile<i32>, %kt: tile<i32>) {{
  %0 = make_token : token
  %ap = assume div_by<16>, %a : tile<ptr<{st}>>
  %bp = assume div_by<16>, %b : tile<ptr<{st}>>
  %as = assume div_by<16>, %a3 : tile<i32>
  %bs = assume div_by<16>, %b3 : tile<i32>
  %ta = make_tensor_view %ap, shape = [%a1, %kt], strides = [%as, 1] : tile<i32> -> tensor_view<?x?x{st}, strides=[?,1]>
  %tb = make_tensor_view %bp, shape = [{bshape}], strides = [%bs, 1] : tile<i32> -> tensor_view<?x?x{st}, strides=[?,1]>
  %tc = make_tensor_view %c, shape = [%c1, %c2], strides = [%c3, 1] : tile<i32> -> tensor_view<?x?x{ct}, strides=[?,1]>
  %z = constant <i32: 0> : tile<i32>
  %one = constant <i32: 1> : tile<i32>
  %pa = make_partition_view %ta : partition_view<tile=({m}x{k}), tensor_view<?x?x{st}, strides=[?,1]>>
  %pb = make_partition_view %tb : partition_view<tile=({btile}), tensor_view<?x?x{st}, strides=[?,1]>>
  %pc = make_partition_view %tc : partition_view<tile=({m}x{n}), tensor_view<?x?x{ct}, strides=[?,1]>>
  %w, %t3 = load_view_tko weak %pc[%z, %z] token = %0 : partition_view<tile=({m}x{n}), tensor_view<?x?x{ct}, strides=[?,1]>>, tile<i32> -> tile<{m}x{n}x{ct}>, token
  %acc = for %i in (%z to %nk, step %one) : tile<i32> iter_values(%s = %w) -> (tile<{m}x{n}x{ct}>) {{
    %x0, %t1 = load_view_tko weak %pa[%z, %i] token = %0 : partition_view<tile=({m}x{k}), tensor_view<?x?x{st}, strides=[?,1]>>, tile<i32> -> tile<{m}x{k}x{st}>, token
    %y0, %t2 = load_view_tko weak %pb[{bidx}] token = %0 : partition_view<tile=({btile}), tensor_view<?x?x{st}, strides=[?,1]>>, tile<i32> -> tile<{btile}x{st}>, token
{conv}    %d = {op} %x, %y, %s{sg} : tile<{m}x{k}x{et}>, tile<{k}x{n}x{et}>, tile<{m}x{n}x{ct}>
    continue %d : tile<{m}x{n}x{ct}>
  }}
  %st = store_view_tko weak %acc, %pc[%z, %z] token = %0 : tile<{m}x{n}x{ct}>, partition_view<tile=({m}x{n}), tensor_view<?x?x{ct}, strides=[?,1]>>, tile<i32> -> token
  return
}}
}}
"""

NP = {"f16": np.float16, "f64": np.float64, "i8": np.int8, "i32": np.int32, "f32": np.float32}
#: elements of the last K tile past the logical K extent (a partial 16-byte chunk)
TAIL = {"f16": 4, "i8": 4, "f64": 1, "tf32": 2}


def _module(et, ct, m, n, k, bt=False):
    """A K loop of ``C += A[:, i] @ B[i, :]``; ``bt``: B comes from a tensor holding B^T (N x K)
    through a permute; tf32: f32 tiles converted with ftof before the dot."""
    return parse_module(_source(et, ct, m, n, k, bt), "mm.mlir")


def _source(et, ct, m, n, k, bt=False, text=None):
    """:func:`_module`'s text, from the template ``text`` (default :data:`SRC`)."""
    op = "mmai" if et.startswith("i") else "mmaf"
    sg = " signed signed" if op == "mmai" else ""
    st = "f32" if et == "tf32" else et
    conv = ""
    if et == "tf32":
        conv += f"    %x = ftof %x0 : tile<{m}x{k}xf32> -> tile<{m}x{k}xtf32>\n"
    ya = "%y0"
    if bt:
        conv += f"    %yt = permute %y0 [1, 0] : tile<{n}x{k}x{st}> -> tile<{k}x{n}x{st}>\n"
        ya = "%yt"
    if et == "tf32":
        conv += f"    %y = ftof {ya} : tile<{k}x{n}xf32> -> tile<{k}x{n}xtf32>\n"
    xa = "%x" if et == "tf32" else "%x0"
    src = (text or SRC).format(
        st=st,
        et=et,
        ct=ct,
        m=m,
        n=n,
        k=k,
        op=op,
        sg=sg,
        conv=conv,
        bshape="%b1, %kt" if bt else "%kt, %b2",
        btile=f"{n}x{k}" if bt else f"{k}x{n}",
        bidx="%z, %i" if bt else "%i, %z",
    )
    if et != "tf32":
        src = src.replace(f"{op} %x, %y,", f"{op} %x0, {ya},")
    return src


def _operands(et, ct, m, n, ktot, seed, bt=False):
    """A (m x kp) and B (kp x n; bt: B^T n x kp) with kp = ktot rounded up to 16 elements (the
    assumed row-pitch divisibility); the kernel sees K extent ``ktot`` (%kt), so the rest is out
    of bounds."""
    rs = np.random.RandomState(seed)
    kp = -(-ktot // 16) * 16
    dt = NP["f32" if et == "tf32" else et]
    # tf32: values exact in 10 mantissa bits, so truncation and rounding agree
    a = rs.randint(-3, 4, (m, kp)).astype(dt)
    b = rs.randint(-3, 4, (kp, n)).astype(dt)
    c = rs.randint(-3, 4, (m, n)).astype(NP[ct])
    return a, (np.ascontiguousarray(b.T) if bt else b), c


def _compile(
    monkeypatch, et, ct, m, n, k, sm, pipe=True, cp=True, bt=False, stages=None, tma=False
):
    """The kernel's PTX; TMA off unless ``tma``: on sm_90 the async path (docs/pipelines.md)
    takes these kernels, C as the initial value included (section 29), and this file is about
    today's cp.async pipelining."""
    from tilegen.runtime.ptxsim import compile_to_ptx
    from tilegen.runtime.options import CompileOptions

    options = CompileOptions(pipelining=pipe, use_cp_async=cp, num_stages=stages, use_tma=tma)
    return compile_to_ptx(_module(et, ct, m, n, k, bt), sm, options=options)


def _launch(ptx, a, b, c, nk, ktot, strict_async=False):
    from tilegen.runtime.ptx.launch import run_ptx

    args = [a, b, c, np.asarray(np.int32(nk)), np.asarray(np.int32(ktot))]
    return run_ptx(ptx, args, (1, 1, 1), file="<pipeline test>", strict_async=strict_async)[2]


def _ref(a, b, c, ktot, bt=False):
    b = b.T if bt else b
    return a[:, :ktot].astype(np.float64) @ b[:ktot].astype(np.float64) + c.astype(np.float64)


CASES = [  # (et, ct, m, n, k, B from B^T through a permute)
    ("f16", "f32", 64, 64, 32, False),
    ("f16", "f32", 32, 32, 16, False),
    ("f16", "f32", 64, 64, 32, True),
    ("i8", "i32", 64, 64, 32, False),
    ("i8", "i32", 64, 64, 32, True),
    ("f64", "f64", 32, 32, 16, False),
    ("f64", "f64", 32, 32, 16, True),
    ("tf32", "f32", 64, 64, 16, False),
    ("tf32", "f32", 64, 32, 16, True),
]


@pytest.fixture
def strict(monkeypatch):
    from tilegen.runtime.ptx.sim import tensor_ops

    monkeypatch.setattr(tensor_ops, "STRICT_CP_ASYNC", True)


@pytest.mark.parametrize("sm", ["sm_80", "sm_90"])
@pytest.mark.parametrize("et,ct,m,n,k,bt", CASES)
@pytest.mark.parametrize("nk", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("pipe,cp", [(True, True), (False, True), (False, False)])
def test_k_loop_matches_numpy(monkeypatch, strict, sm, et, ct, m, n, k, bt, nk, pipe, cp):
    ptx = _compile(monkeypatch, et, ct, m, n, k, sm, pipe, cp, bt)
    # wgmma (sm_90) reads tf32 operands from shared memory as they are: the f32 -> tf32
    # rounding keeps them on the register path there
    staged = cp and not (sm == "sm_90" and et == "tf32")
    assert ("cp.async.c" in ptx) == staged
    assert ("__tilegen_pipe" in ptx) == (staged and pipe)
    for ktot in (nk * k, nk * k - TAIL[et]):  # full tiles; last tile partly out of bounds
        a, b, c = _operands(et, ct, m, n, ktot, 7 * nk + ktot, bt)
        out = _launch(ptx, a, b, c, nk, ktot)
        np.testing.assert_array_equal(out.astype(np.float64), _ref(a, b, c, ktot, bt))


@pytest.mark.parametrize("sm", ["sm_90", "sm_100"])
@pytest.mark.parametrize("et,ct,bt", [("f16", "f32", False), ("i8", "i32", True)])
@pytest.mark.parametrize("nk", [0, 1, 3])
def test_c_initial_on_the_async_path(monkeypatch, sm, et, ct, bt, nk):
    # the same kernels with TMA on: the warp-specialised path takes them on sm_90 / sm_100 (C,
    # the initial value, loaded by the consumers after the split); a loop of no iteration
    # leaves C as it was
    ptx = _compile(monkeypatch, et, ct, 64, 64, 32 if et == "f16" else 64, sm, bt=bt, tma=True)
    assert "cp.async.bulk.tensor.2d.shared::cluster.global" in ptx
    assert "cp.async.c" not in ptx
    k = 32 if et == "f16" else 64
    for ktot in (nk * k, nk * k - TAIL[et]) if nk else (k,):
        a, b, c = _operands(et, ct, 64, 64, ktot, 5 * nk + ktot, bt)
        out = _launch(ptx, a, b, c, nk, ktot, strict_async=True)
        want = _ref(a, b, c, ktot, bt) if nk else c.astype(np.float64)
        np.testing.assert_array_equal(out.astype(np.float64), want)


def test_zero_trip_loop(monkeypatch, strict):
    ptx = _compile(monkeypatch, "f16", "f32", 64, 64, 32, "sm_80")
    a, b, c = _operands("f16", "f32", 64, 64, 32, 1)
    out = _launch(ptx, a, b, c, 0, 32)
    np.testing.assert_array_equal(out, c)


def _pipelined_ptx(monkeypatch, sm="sm_80", stages=2):
    """The two-stage protocol's PTX (``stages=None``: the kernel's own count)."""
    return _compile(monkeypatch, "f16", "f32", 64, 64, 32, sm, stages=stages)


@pytest.mark.parametrize("sm", ["sm_80", "sm_90"])
def test_pipeline_ptx_structure(monkeypatch, sm):
    """Prologue copies + commit before the loop; at the loop top wait_group 0 (2 stages) then
    bar.sync, then the prefetch (guarded) + commit, then the fragment reads; drained at exit."""
    ptx = _pipelined_ptx(monkeypatch, sm)
    lines = [l.strip() for l in ptx.splitlines()]
    top = next(i for i, l in enumerate(lines) if re.match(r"\$L__for_body_\d+:", l))
    end = next(i for i, l in enumerate(lines) if re.match(r"\$L__for_end_\d+:", l))
    pro, body = lines[:top], lines[top:end]
    assert any(l.startswith("@") and "cp.async.cg.shared.global" in l for l in pro)
    assert sum(l == "cp.async.commit_group;" for l in pro) == 1
    assert body[1] == "cp.async.wait_group 0;"
    i = 2
    if sm == "sm_90":
        assert body[2] == "fence.proxy.async.shared::cta;"
        i = 3
    assert body[i] == "bar.sync 0;"
    first_copy = next(j for j, l in enumerate(body) if "cp.async.cg" in l)
    commit = body.index("cp.async.commit_group;")
    reads = [j for j, l in enumerate(body) if l.startswith(("ldmatrix", "wgmma.mma_async"))]
    assert i < first_copy < commit < reads[0]
    assert all(
        body[j].startswith("@") for j in range(first_copy, commit) if "cp.async.c" in body[j]
    )
    assert lines[end + 1 : end + 3] == ["cp.async.wait_all;", "bar.sync 0;"]
    if PTXAS is not None:
        from tilegen.runtime.codegen.driver import assemble

        _, log = assemble(ptx, int(sm[3:]), verbose=True)
        assert "0 bytes spill stores, 0 bytes spill loads" in log, log


def test_num_stages_hint(monkeypatch, strict):
    """``num_stages`` in the kernel spec gives S buffers: S - 1 prologue groups, wait_group S-2."""
    from tilegen.runtime.passes import layout_assignment

    monkeypatch.setattr(layout_assignment, "kernel_num_stages", lambda func: 3)
    _check_stages(_pipelined_ptx(monkeypatch, stages=None), 3, (1, 2, 3, 5))


def _check_stages(ptx: str, stages: int, trips: tuple) -> None:
    """``stages`` buffers: ``stages - 1`` prologue groups and ``wait_group stages - 2`` at the
    loop's top; exact for loops of ``trips`` K tiles (the last one partial)."""
    lines = [l.strip() for l in ptx.splitlines()]
    top = next(i for i, l in enumerate(lines) if re.match(r"\$L__for_body_\d+:", l))
    assert sum(l == "cp.async.commit_group;" for l in lines[:top]) == stages - 1
    assert lines[top + 1] == f"cp.async.wait_group {stages - 2};"
    for nk in trips:
        a, b, c = _operands("f16", "f32", 64, 64, nk * 32 - 4, nk)
        out = _launch(ptx, a, b, c, nk, nk * 32 - 4)
        np.testing.assert_array_equal(out.astype(np.float64), _ref(a, b, c, nk * 32 - 4))


def test_default_stages_are_as_many_as_fit_up_to_four(monkeypatch, strict):
    """Without a hint the loop takes 4 stages where they fit (tileiras's sm_80 GEMMs: 4): three
    prologue groups, ``wait_group 2``; exact for short and long loops."""
    _check_stages(_pipelined_ptx(monkeypatch, stages=None), 4, (1, 2, 4, 6))


@pytest.mark.parametrize("sm", ["sm_80", "sm_120"])
def test_mma_sync_stages_go_past_48_kb(monkeypatch, strict, sm):
    """A 128 x 64 x 64 f16 GEMM's stage is 24 KB. Held to 48 KB, mma.sync kernels fit one
    stage and were not pipelined at all; now they take half the SM's shared memory (sm_80:
    extended static shared memory; sm_120: the sm_120a target, which the kernel switches to)."""
    from tilegen.runtime.codegen.driver import assemble

    ptx = _compile(monkeypatch, "f16", "f32", 128, 64, 64, sm)
    assert "mma.sync.aligned" in ptx and "__tilegen_pipe" in ptx
    pipe = int(re.search(r"__tilegen_pipe\[(\d+)\]", ptx).group(1))
    assert pipe > 48 * 1024, pipe  # two or more stages of at least 24 KB
    if sm == "sm_120":
        assert re.search(r"^\.target sm_120a", ptx, re.M)
    if PTXAS is not None:
        _, log = assemble(ptx, int(sm[3:]), verbose=True)
        assert "0 bytes spill stores" in log, log
    for nk in (1, 3, 5):
        a, b, c = _operands("f16", "f32", 128, 64, nk * 64, nk)
        out = _launch(ptx, a, b, c, nk, nk * 64)
        np.testing.assert_array_equal(out.astype(np.float64), _ref(a, b, c, nk * 64))


def _mutated(ptx: str, what: str) -> str:
    lines = ptx.splitlines()
    top = next(i for i, l in enumerate(lines) if re.match(r"\$L__for_body_\d+:", l.strip()))
    if what == "wait":
        assert lines[top + 1].strip().startswith("cp.async.wait_group")
        del lines[top + 1]
    elif what == "barrier":
        j = next(i for i in range(top, len(lines)) if lines[i].strip() == "bar.sync 0;")
        del lines[j]
    elif what == "barrier-after-prefetch":  # prefetch into the freed stage before the barrier
        j = next(i for i in range(top, len(lines)) if lines[i].strip() == "bar.sync 0;")
        c = next(i for i in range(j, len(lines)) if lines[i].strip() == "cp.async.commit_group;")
        bar = lines.pop(j)
        lines.insert(c, bar)
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("what", ["wait", "barrier", "barrier-after-prefetch"])
def test_strict_sim_catches_missing_wait_or_barrier(monkeypatch, strict, what):
    from tilegen.runtime.ptx.launch import PtxSimError

    good = _pipelined_ptx(monkeypatch)
    ptx = _mutated(good, what)
    assert ptx != good
    a, b, c = _operands("f16", "f32", 64, 64, 96, 3)
    np.testing.assert_array_equal(_launch(good, a, b, c, 3, 96), _ref(a, b, c, 96))
    try:
        out = _launch(ptx, a, b, c, 3, 96)
    except PtxSimError:
        return  # the strict mode reported the hazard
    assert not np.array_equal(out.astype(np.float64), _ref(a, b, c, 96)), "mutation not detected"


def test_nonzero_padding_keeps_the_register_path(monkeypatch):
    """A load whose padding is not zero cannot be a zero-filling cp.async."""
    from tilegen.runtime.layouts.staging import is_zero_splat as _is_zero_splat

    class V:
        def __init__(self, op):
            self.op = op

    class Op:
        def __init__(self, name, operands=(), attributes=None):
            self.name, self.operands, self.attributes = name, list(operands), attributes or {}

    class A:
        def __init__(self, value):
            self.value = value

    def splat(x):
        return V(Op("nv_tileaa.splat", [V(Op("arith.constant", [], {"value": A(x)}))]))

    assert _is_zero_splat(splat(0)) and _is_zero_splat(splat(0.0))
    assert not _is_zero_splat(splat(-0.0)) and not _is_zero_splat(splat(1.5))


@pytest.mark.parametrize("pipe", [True, False])
def test_16bit_b_is_copied_as_loaded_and_read_n_major(monkeypatch, strict, pipe):
    """sm_90: a 16-bit B loaded K x N row-major goes global -> shared by cp.async as it is (rows
    of K, N contiguous: the MN-major interleave layout, wgmma_layout.py ``nmajor_layout``) and
    wgmma reads it with imm-trans-b = 1; no thread writes B through registers (before, B was
    loaded to registers and written transposed, element by element). NumPy-exact in the strict
    simulator, a partial last K tile included."""
    et = "f16"
    ptx = _compile(monkeypatch, et, "f32", 64, 64, 32, "sm_90", pipe)
    wg = [l.strip() for l in ptx.splitlines() if "wgmma.mma_async" in l]
    assert wg and all(l.endswith(", 1, 1, 0, 1;") for l in wg), wg[0]
    assert "st.shared.b16" not in ptx and ("__tilegen_pipe" in ptx) == pipe
    for nk, ktot in ((3, 96), (3, 96 - TAIL[et])):
        a, b, c = _operands(et, "f32", 64, 64, ktot, ktot, False)
        out = _launch(ptx, a, b, c, nk, ktot)
        np.testing.assert_array_equal(out.astype(np.float64), _ref(a, b, c, ktot))
    if PTXAS is not None:
        from tilegen.runtime.codegen.driver import assemble

        _, log = assemble(ptx, 90, verbose=True)
        assert "0 bytes spill stores, 0 bytes spill loads" in log, log
