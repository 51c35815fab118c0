"""sm_120's general async form (docs/pipelines.md section 48): attention's K loops with their
B operands (K^T, V; Q and dO in the backward) staged by TMA into a ring, as on sm_90, the
consumer warps running the body with mma.sync, each dot reading B by ``ldmatrix`` from the
stage's swizzled boxes and its loop-invariant A (Q) kept once in shared memory. ptxas-clean
with ``UTMALDG`` and no ``LDGSTS`` in SASS, and within tolerance of the corpus's outputs and of
NumPy in the simulator's strict async mode."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from paths import CORPUS_OUT, needs_shared
from tilegen.runtime import driver
from tilegen.runtime.options import CompileOptions
from tilegen.runtime.ptx.launch import run_ptx
from tilegen.runtime.ptxas import find_ptxas

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_async_pipeline_e2e import sass_counts  # noqa: E402

needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found")


def _loop(ptx: str) -> str:
    """The consumers' first loop (``$L__async_body_N`` to its end label)."""
    start = re.search(r"^\$L__async_body_\d+:", ptx, re.M).end()
    return ptx[start : re.search(r"^\$L__async_body_end_\d+:", ptx, re.M).start()]


@needs_ptxas
@needs_shared(CORPUS_OUT)
def test_corpus_flash_attention_stages_k_and_v_by_tma(tmp_path):
    c = driver.compile_source(
        CORPUS_OUT / "flash_attention.tileirbc", CompileOptions(target="sm_120")
    )
    (d,) = c.async_plan
    assert d.taken and d.mma == "mma.sync", d.line()
    # the occupancy hint's 128 registers at launch; the consumers take the producer's
    assert (d.consumer_warps, d.producer_warps, d.stages) == (4, 4, 1)
    assert (d.producer_regs, d.consumer_regs) == (32, 224)
    ptx = c.ptx
    # K and V each iteration, and Q once, ahead of the first stage (section 50: one box, its
    # rows in order); no thread loads anything
    assert ptx.count("cp.async.bulk.tensor.3d.shared::cta") == 3 and "cp.async.ca" not in ptx
    assert "ld.global" not in ptx
    loop = _loop(ptx)
    # K^T read K-major (no transpose), V N-major (.trans), two 8-column groups an
    # ldmatrix.x4 as tileiras reads B (section 49); Q from its swizzled box (4 .x4s), P in
    # registers
    assert loop.count("ldmatrix.sync.aligned.m8n8.x4.shared.b16") == 16 + 4
    assert loop.count("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16") == 16
    assert ".x2" not in loop
    assert loop.count("mma.sync.aligned.m16n8k16") == 64
    counts, _ = sass_counts(tmp_path, ptx, "sm_120a")  # 0 spills
    assert counts.get("UTMALDG", 0) == 3 and counts.get("SYNCS", 0) >= 4, counts
    assert counts.get("HMMA", 0) == 64 and "LDGSTS" not in counts, counts
    assert counts.get("LDG", 0) == 0, counts  # (Q by TMA too)
    data = np.load(CORPUS_OUT / "flash_attention.npz")
    keys = [k for k in data.files if k.startswith("arg__")]
    grid = tuple(int(x) for x in data["grid"])
    out = run_ptx(ptx, [np.array(data[k]) for k in keys], grid, strict_async=True)
    i = keys.index("arg__Out")
    np.testing.assert_allclose(out[i], data["expected__Out"], rtol=1e-3, atol=1e-3)


@needs_ptxas
@needs_shared(CORPUS_OUT)
def test_the_loop_keeps_p_in_registers_and_waits_at_no_barrier():
    """The warps are stacked along M (``mma_sync_rows_layout``): each owns whole rows of S, so
    the softmax's row max and sum are shuffles within the warp, and P, in the accumulator's
    own layout, is packed into the next dot's A fragments in registers. The consumers' loop
    writes no shared memory and meets no barrier; Q (64 x 64 f16, loop-invariant) is copied
    by the producer's TMA once (section 50): no thread writes it."""
    c = driver.compile_source(
        CORPUS_OUT / "flash_attention.tileirbc", CompileOptions(target="sm_120")
    )
    ptx = c.ptx
    loop = _loop(ptx)
    assert "st.shared" not in loop and "bar.sync" not in loop and "bar.arrive" not in loop
    assert "shfl.sync.bfly" in loop
    # P's halves into b32 A fragments: 64 x 64 f16 over 128 threads, 2 halves a word
    assert len(re.findall(r"\tmov\.b32 %r\d+, \{%h\d+, %h\d+\};", loop)) == 16
    assert not re.findall(r"\tst\.shared\.b16 ", ptx)  # (Q's rows were 32 a thread)


@needs_shared(CORPUS_OUT)
@pytest.mark.parametrize("target", ["sm_80", "sm_120"])
def test_attention_dots_stack_their_warps_along_m_and_gemms_do_not(target):
    from tilegen.runtime.layouts.mma_choice import mma_sync_rows_fragment

    for name, stacked in (("flash_attention", True), ("matmul_f16", False)):
        opts = CompileOptions(target=target)
        c = driver.compile_source(CORPUS_OUT / f"{name}.tileirbc", opts, until="layouts")
        dots = [o for o in c.module.walk() if o.name == "nv_tileaa.dot"]
        assert dots
        for d in dots:
            want = mma_sync_rows_fragment(4) if stacked else None
            assert (d.results[0].type.encoding == mma_sync_rows_fragment(4)) == stacked, name
            if want is not None:
                assert d.operands[2].type.encoding == want


@needs_shared(CORPUS_OUT)
def test_attention_on_sm80_matches_with_p_in_registers():
    """Today's path (cp.async, sm_80) with the warps stacked along M: exact against the
    corpus in the simulator. Q is kept once before the loop (``keep_invariant_a(rows=True)``)
    and P stays in registers, so the loop writes no shared memory but its cp.async copies and
    meets one barrier, the stage's."""
    c = driver.compile_source(
        CORPUS_OUT / "flash_attention.tileirbc", CompileOptions(target="sm_80")
    )
    data = np.load(CORPUS_OUT / "flash_attention.npz")
    keys = [k for k in data.files if k.startswith("arg__")]
    grid = tuple(int(x) for x in data["grid"])
    out = run_ptx(c.ptx, [np.array(data[k]) for k in keys], grid)
    i = keys.index("arg__Out")
    np.testing.assert_allclose(out[i], data["expected__Out"], rtol=1e-3, atol=1e-3)
    assert len(re.findall(r"\tmov\.b32 %r\d+, \{%h\d+, %h\d+\};", c.ptx)) >= 16
    start = re.search(r"^\$L__for_body_\d+:", c.ptx, re.M).end()
    loop = c.ptx[start : re.search(r"^\$L__for_end_\d+:", c.ptx, re.M).start()]
    assert "st.shared" not in loop and loop.count("bar.sync") == 1


@needs_shared(CORPUS_OUT)
def test_a_layout_the_consumers_cannot_read_keeps_todays_path():
    # 16 warps side by side along N need N a multiple of 128, stacked along M, M a multiple of
    # 256: the 64 x 64 tiles are laid out otherwise, and the rule says so
    text = (CORPUS_OUT / "flash_attention.mlir").read_text()
    text = (
        "module attributes {tt.num_warps = 16 : i32} {\ncuda_tile.module @m {\n" + text + "\n}\n}\n"
    )
    c = driver.compile_source(text, CompileOptions(target="sm_120"), "f.mlir", until="async")
    (d,) = c.async_plan
    assert not d.taken
    want = "accumulator out as an mma.sync fragment of 16 warps (side by side along N, or stacked"
    assert want in d.reason


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    pytest.importorskip(
        "cuda.tile", reason="cuda-tile is not installed (pip install -e '.[cutile]')"
    )
    import cutile_kernels_async as cka

    out = tmp_path_factory.mktemp("sm120_general")
    names = ["attention_causal_fwd", "attention_bwd_dkdv_gqa"]
    return cka.export_bytecode(str(out), names), cka.problems()


@needs_ptxas
@pytest.mark.parametrize("name", ["attention_causal_fwd", "attention_bwd_dkdv_gqa"])
def test_cutile_attention_matches_numpy(tmp_path, kernels, name):
    """The causal forward (8 consumer warps, two dots) and the GQA backward's dK dV (four
    dots: Q and dO are each read both ways, K-major for Q K^T and dO V^T and N-major for
    P^T dO and dS^T Q; one staged box serves both reads)."""
    paths, problems = kernels
    c = driver.compile_source(Path(paths[name]), CompileOptions(target="sm_120"))
    (d,) = c.async_plan
    assert d.taken and d.mma == "mma.sync" and d.consumer_warps == 8, d.line()
    counts, _ = sass_counts(tmp_path, c.ptx, "sm_120a")  # 0 spills
    # K and V (Q and dO) each iteration; the loop-invariant A operands (Q; K and V) once
    kept = {"attention_causal_fwd": 1, "attention_bwd_dkdv_gqa": 2}[name]
    assert d.kept_tma == kept, d.line()
    assert counts.get("UTMALDG", 0) == 2 + kept and "LDGSTS" not in counts, counts
    pr = problems[name]
    names = list(pr.args)
    out = run_ptx(c.ptx, [np.asarray(v) for v in pr.args.values()], pr.grid, strict_async=True)
    for k, want in pr.expected.items():
        np.testing.assert_allclose(out[names.index(k)], want, rtol=pr.rtol, atol=pr.atol)


@needs_ptxas
@pytest.mark.parametrize("elem", ["f16", "bf16"])
def test_d128_with_128_wide_kv_tiles_takes_one_stage(elem, tmp_path):
    # a 64 KB stage (K and V, 128 x 128 each) beside Q's 16 KB of kept rows: the rule's 64 KB
    # reserve for the body left no stage on a 99 KB SM and today's path took the kernel;
    # the reserve is Q's rows and 16 KB now (section 49), as for the occupancy hint's CTAs.
    # The fuzzer's kernel (bench/fuzz_async.py), causal, with a partial last tile
    pytest.importorskip(
        "cuda.tile", reason="cuda-tile is not installed (pip install -e '.[cutile]')"
    )
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import fuzz_async as fa

    params = dict(e=elem, TM=64, TN=128, D=128, CAUSAL=1)
    cfg = fa.Config(0, "attention", "sm_120", params, {}, dict(S=45, T=45, H=1))
    o = fa.check(cfg, str(tmp_path))
    assert (o.status, o.path) == ("ok", "async"), f"{o.status}: {o.detail}\n{o.plan}"
    assert "1 stages x 65536 B" in o.plan, o.plan
    ptx = next(tmp_path.glob("*.ptx")).read_text()
    loop = _loop(ptx)
    # B read two 8-column groups an ldmatrix.x4: V N-major (.trans), K^T K-major; Q from its
    # kept rows by .x4
    assert loop.count("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16") == 64, loop.count(".x4")
    assert loop.count("ldmatrix.sync.aligned.m8n8.x4.shared.b16") == 64 + 8
    assert ".x2" not in loop
    # the key columns (j * TN + arange(TN))[None, :], compared twice with QK^T, computed in its
    # layout: no exchange through shared memory, no barrier in the loop (4 before)
    assert "bar.sync" not in loop and "st.shared" not in loop
