"""``nv-tileaa-split-pair-rows`` (runtime/passes/pair_rows.py, docs/pipelines.md section 40): a
``num_ctas=2`` kernel's rows divided between the two CTAs of a cluster, as tileiras does: a
256-row attention on sm_90a, 128- and 256-row GEMMs and attention on sm_120.

* The IR: the dots, the row range and the Q load and O store keep half the rows, moved by
  ``M / 2 x nv_tileas.cluster_cta_rank``; the hint no longer asks for a pair.
* The interpreter runs both CTAs of each tile block (without the second one, half the rows
  stay unwritten).
* The PTX: a cluster launch in which the grid counts clusters, no spills (one CTA of 256 rows
  spilled 388-1,340 B on sm_90a), exact in the strict simulator against NumPy.
* Left alone: sm_100a, sm_90a's GEMMs (the async path's pair) and 128-row attention, a
  128-row attention without the hint, ``cta_pair=False``, and a kernel that reduces across the
  rows. A 256-row attention is divided without the hint too, on sm_90a and sm_120 (one CTA
  spills).
"""

# (no `from __future__ import annotations`: cuTile evaluates the kernels' annotations)
import sys
from pathlib import Path

import cuda.tile as ct
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from tilegen.runtime.ptxas import find_ptxas  # noqa: E402

needs_ptxas = pytest.mark.skipif(
    not Path(find_ptxas() or "/nonexistent").exists(), reason="ptxas is not installed"
)
PAIR = {"num_ctas": 2}


def _attention(target, tm=256, tn=64, d=64, causal=1, options=PAIR, s=300, t=None, e="f16"):
    import fuzz_async as fa

    params = dict(e=e, TM=tm, TN=tn, D=d, CAUSAL=causal)
    return fa.Config(0, "attention", target, params, dict(options), dict(S=s, T=t or s, H=1))


def _export(cfg, tmp_path) -> tuple:
    import fuzz_async as fa

    args, grid, idx, ref, rtol, atol = fa.problem(cfg, np.random.default_rng(0))
    path = tmp_path / "k.tileirbc"
    fa.export(cfg, str(path), args)
    return path, (args, grid, idx, ref, rtol, atol)


def _kernel(module):
    return next(o for o in module.walk() if o.name == "nv_tileaa.func")


def _compile(cfg, tmp_path, until="layouts"):
    from tilegen.runtime.driver import compile_source, options_for

    path, _ = _export(cfg, tmp_path)
    return compile_source(path, options_for(cfg.target), until=until)


def test_the_rows_are_divided_between_the_pair(tmp_path):
    from tilegen.runtime.layouts.kernel import kernel_spec_int
    from tilegen.runtime.passes.pair_rows import PAIR_ROWS_ATTR, RANK_OP

    func = _kernel(_compile(_attention("sm_90a"), tmp_path).module)
    assert func.attributes[PAIR_ROWS_ATTR].value == 128
    assert kernel_spec_int(func, "num_cta_in_cga") == 1  # (no later rule pairs the halves)
    ops = list(func.walk())
    dots = [o for o in ops if o.name == "nv_tileaa.dot"]
    assert len(dots) == 2 and all(o.results[0].type.shape[0] == 128 for o in dots)
    ranges = [o for o in ops if o.name == "nv_tileaa.make_range"]
    sizes = sorted(o.results[0].type.shape[0] for o in ranges)
    # the CTA's 128 rows once; the 64 keys (also recomputed in the accumulator's layout for a
    # second mask, layout_assignment._index_expr)
    assert sizes.count(128) == 1 and set(sizes) == {64, 128}, sizes
    rank = next(o for o in ops if o.name == RANK_OP).results[0]
    first = next(u for u, _ in rank.uses)  # 128 r
    assert first.name == "arith.muli"
    for name in ("nv_tileaa.tiled_load", "nv_tileaa.tiled_store"):
        moved = [
            o
            for o in ops
            if o.name == name
            and any(
                getattr(x, "op", None) is not None and first.results[0] in x.op.operands
                for x in o.operands
            )
        ]
        assert len(moved) == 1, name  # Q's load and O's store; K and V are loaded whole
    q = next(o for o in ops if o.name == "nv_tileaa.tiled_load")
    assert tuple(q.results[0].type.shape) == (1, 128, 64)


@pytest.mark.parametrize("both", [True, False])
def test_the_interpreter_runs_both_ctas_of_a_block(tmp_path, both):
    import fuzz_async as fa

    from tilegen.runtime.driver import compile_source, options_for
    from tilegen.runtime.interp.api import run_module
    from tilegen.runtime.passes.pair_rows import PAIR_ROWS_ATTR, split_kernel

    cfg = _attention("sm_90a")
    path, (args, grid, idx, ref, rtol, atol) = _export(cfg, tmp_path)
    module = compile_source(path, options_for("sm_90a"), until="convert").module
    func = _kernel(module)
    assert split_kernel(func, 90) is None
    if not both:  # one CTA a block: rows 128 .. of each block are never computed
        func.attributes.pop(PAIR_ROWS_ATTR)
    out = run_module(module, [(f"a{i}", a) for i, a in enumerate(args)], grid)
    got = fa._decode(np.asarray(list(out.values())[idx]), "f16")
    assert np.allclose(got, ref, rtol=rtol, atol=atol) == both


@needs_ptxas
@pytest.mark.parametrize(
    "e,tn,d,causal,s,t",
    [
        ("f16", 64, 128, 1, 144, 144),  # fuzzer seed 260005: 480 B of spills on one CTA
        ("bf16", 128, 64, 0, 200, 330),  # 388 B on one CTA
    ],
)
def test_a_cluster_of_two_ctas_matches_numpy_without_spills(tmp_path, e, tn, d, causal, s, t):
    import fuzz_async as fa

    cfg = _attention("sm_90a", tn=tn, d=d, causal=causal, s=s, t=t, e=e)
    o = fa.check(cfg, str(tmp_path))
    assert o.status == "ok", o.detail  # ptxas: no spills; strict ptxsim against NumPy
    assert o.path == "async"
    assert "the tile block's rows divided between a CTA pair, 128 each" in o.plan
    for line in (".reqnctapercluster 2, 1, 1", ".blocksareclusters", "%cluster_ctarank"):
        assert line in o.ptx
    assert "%clusterid.x" in o.ptx and "%ctaid.x" not in o.ptx


@needs_ptxas
@pytest.mark.parametrize(
    "tm,tn,init,options",
    [
        (256, 128, 1, {"num_ctas": 2, "occupancy": 2}),  # fuzzer seed 170108's tile
        (128, 128, 0, PAIR),  # 64 rows a CTA, as tileiras's half the HMMAs and TMA stores
    ],
)
def test_sm120_gemms_run_half_the_rows_on_each_cta(tmp_path, tm, tn, init, options):
    import fuzz_async as fa

    params = dict(ab="f16", out="f16", TM=tm, TN=tn, TK=32, BT=1, INIT=init, EPI=0)
    cfg = fa.Config(0, "gemm", "sm_120", params, options, dict(M=tm + 69, N=tn, K=96))
    o = fa.check(cfg, str(tmp_path))
    assert o.status == "ok", o.detail
    assert f"rows divided between a CTA pair, {tm // 2} each" in o.plan
    assert ".blocksareclusters" in o.ptx and "%cluster_ctarank" in o.ptx


@pytest.mark.parametrize(
    "cfg",
    [
        _attention("sm_100a"),  # tensor memory holds one CTA's 256 rows (section 25)
        _attention("sm_90a", tm=128),
        _attention("sm_120", tm=128, options={}),
    ],
    ids=["sm_100a", "128-rows", "sm_120-128-rows-no-hint"],
)
def test_other_kernels_are_left_alone(tmp_path, cfg):
    from tilegen.runtime.passes.pair_rows import PAIR_ROWS_ATTR

    func = _kernel(_compile(cfg, tmp_path).module)
    assert PAIR_ROWS_ATTR not in func.attributes


@pytest.mark.parametrize(
    "target,tm,tn,pair",
    [
        ("sm_90a", 256, 128, False),
        ("sm_90a", 128, 256, False),
        ("sm_90a", 256, 256, True),
        ("sm_100a", 256, 128, True),
    ],
)
def test_a_gemm_pairs_where_one_cta_cannot_hold_its_tile(target, tm, tn, pair, tmp_path):
    """num_ctas=2 GEMMs (docs/pipelines.md section 46): on sm_90 one CTA with two consumer
    warp groups where it holds the accumulator (faster than the pair on an H200), the pair at
    256 x 256; on sm_100 the tcgen05 pair."""
    import fuzz_async as fa

    params = dict(ab="f16", out="f32", TM=tm, TN=tn, TK=64, BT=0, INIT=0, EPI=0)
    cfg = fa.Config(0, "gemm", target, params, PAIR, dict(M=512, N=512, K=256))
    (d,) = _compile(cfg, tmp_path, until="ptx").async_plan
    assert d.taken and d.cta_pair == pair, d.line()
    if not pair:
        assert f"one CTA, not a pair: on sm_90 one CTA holds the {tm} x {tn}" in d.line()
        assert "8 consumer + 4 producer warps" in d.line(), d.line()


def test_a_gemm_keeps_the_async_paths_pair(tmp_path):
    import fuzz_async as fa

    from tilegen.runtime.passes.pair_rows import PAIR_ROWS_ATTR

    params = dict(ab="f16", out="f32", TM=256, TN=256, TK=64, BT=0, INIT=0, EPI=0)
    cfg = fa.Config(0, "gemm", "sm_90a", params, PAIR, dict(M=256, N=256, K=256))
    func = _kernel(_compile(cfg, tmp_path, until="async").module)
    assert PAIR_ROWS_ATTR not in func.attributes
    assert any("nv_tileas.cta_pair" in o.attributes for o in func.walk())


def _column_sums(Q, K, V, O, C, TM: ct.Constant[int], TN: ct.Constant[int]):
    i = ct.bid(0)
    q = ct.load(Q, index=(i, 0), shape=(TM, 64), padding_mode=ct.PaddingMode.ZERO)
    acc = ct.full((TM, 64), 0.0, ct.float32)
    for j in range(ct.num_tiles(K, axis=0, shape=(TN, 64))):
        k = ct.load(K, index=(j, 0), shape=(TN, 64), padding_mode=ct.PaddingMode.ZERO)
        p = ct.mma(q, ct.transpose(k), ct.full((TM, TN), 0.0, ct.float32))
        v = ct.load(V, index=(j, 0), shape=(TN, 64), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(ct.astype(p, Q.dtype), v, acc)
    ct.store(O, index=(i, 0), tile=ct.astype(acc, O.dtype))
    ct.store(C, index=(i, 0), tile=ct.sum(acc, axis=0, keepdims=True))


def test_a_reduction_across_the_rows_is_refused(tmp_path):
    import fuzz_async as fa
    from cuda.tile.compilation import CallingConvention, KernelSignature, export_kernel

    from tilegen.runtime.driver import compile_source, options_for
    from tilegen.runtime.passes.pair_rows import split_kernel

    x = np.zeros((512, 64), np.float16)
    sums = np.zeros((2, 64), np.float32)
    params = [fa._constraint("float16", x) for _ in range(4)]
    params += [fa._constraint("float32", sums), 256, 64]
    sig = KernelSignature(params, CallingConvention.cutile_python_v1())
    path = tmp_path / "colsum.tileirbc"
    kernel = ct.kernel(_column_sums, num_ctas=2)
    export_kernel(kernel, [sig], str(path), output_format="tileir_bytecode")
    func = _kernel(compile_source(path, options_for("sm_90a"), until="convert").module)
    assert "'nv_tileaa.reduce' along the rows" in split_kernel(func, 90)


def _strict(kernel, c, args, grid, index: int, ptx=None) -> np.ndarray:
    from tilegen.cutile_launch import _prepare
    from tilegen.runtime.ptx.launch import run_ptx

    values = [v for _, v in _prepare(kernel, args).runtime]
    out = run_ptx(ptx or c.ptx, values, grid, strict_async=True)[index]
    return np.asarray(out).astype(np.float64)


@needs_ptxas
@pytest.mark.parametrize("name", ["attention_causal_fwd", "attention_causal_split"])
def test_k_and_v_are_multicast_to_both_ctas(name):
    """The two CTAs load the same K and V tiles: each copies half of every 128-byte column box's
    rows by TMA multicast into both (as tileiras does), and each consumer thread releases a
    stage in both CTAs. The split causal attention (two K loops on one ring) too. Without the
    release in the other CTA, a K loop longer than the ring never refills a stage."""
    import re

    import cutile_kernels_async as cka

    import tilegen.cutile as tc
    from tilegen.runtime.ptx.launch import PtxSimError

    kernel = cka.kernels()[name].kernel.replace_hints(num_ctas=2)
    q, kt, v, scale, want = cka.causal_attention_inputs(1, 512, 128, 0)
    args = (q, kt, v, np.zeros_like(q), scale, 256, 128, 128)
    c = tc.compile_kernel(kernel, args, gpu_name="sm_90")
    (d,) = c.async_plan
    assert d.taken and d.pair_rows == 128, d.line()
    ptx = c.ptx
    loops = 2 if name == "attention_causal_split" else 1
    # K and V: two column boxes each at d 128, one multicast copy a box and loop
    assert ptx.count("mbarrier::complete_tx::bytes.multicast::cluster") == 4 * loops
    assert re.search(r"mbarrier\.arrive\.shared::cluster\.b64 _, \[%r\d+\]", ptx)
    assert "arrive.release.cluster" not in ptx
    got = _strict(kernel, c, args, (2, 1, 1), 3)
    np.testing.assert_allclose(got, want, atol=2e-3)
    lone = re.sub(r"\n\t@%p\d+ mbarrier\.arrive\.shared::cluster\.b64 _, \[%r\d+\];", "", ptx)
    assert lone != ptx
    with pytest.raises(PtxSimError, match="deadlock"):
        _strict(kernel, c, args, (2, 1, 1), 3, ptx=lone)


@needs_ptxas
@pytest.mark.parametrize("target,tn", [("sm_90a", 64), ("sm_120", 128)])
def test_a_256_row_attention_is_divided_without_the_hint_too(tmp_path, target, tn):
    """On one CTA a 256-row attention spilled: 388-480 B on sm_90a (fuzzer seeds 300166,
    300253, 300445, 300305), 976-1,276 B on sm_120 (300139, 300228); tileiras, which keeps one
    CTA, 1.6-7 KB. It runs on a cluster of two whatever its hint. ``cta_pair=False``
    (``--no-cta-pair``) keeps one CTA."""
    import fuzz_async as fa

    from tilegen.runtime.driver import compile_source
    from tilegen.runtime.options import CompileOptions
    from tilegen.runtime.passes.pair_rows import PAIR_ROWS_ATTR

    cfg = _attention(target, tn=tn, d=128, causal=0, options={}, s=196, t=150)
    o = fa.check(cfg, str(tmp_path))
    assert o.status == "ok", o.detail
    assert "rows divided between a CTA pair, 128 each" in o.plan
    path, _ = _export(cfg, tmp_path)
    alone = CompileOptions(target=target, cta_pair=False)
    func = _kernel(compile_source(path, alone, until="layouts").module)
    assert PAIR_ROWS_ATTR not in func.attributes


@needs_ptxas
@pytest.mark.parametrize("seed", [300138, 300108])
def test_a_256x256_sm90_gemm_runs_on_the_pair_without_the_hint(tmp_path, seed):
    """A 256 x 256 f32 accumulator is the whole register file of one CTA: on one sm_90a CTA
    these fuzzer GEMMs (f16 from C; e4m3 with a bias row and a row scale) spilled 2,848 and
    1,960 B, tileiras's 2,576 and 5,000 B. Without the hint they take the async path's CTA
    pair (128 rows a CTA, B multicast) as if hinted; ``cta_pair=False`` keeps one CTA."""
    import fuzz_async as fa

    from tilegen.runtime.driver import compile_source
    from tilegen.runtime.layouts.kernel import kernel_spec_int
    from tilegen.runtime.options import CompileOptions

    cfg = fa.generate(seed)
    assert cfg.target == "sm_90a" and not cfg.options.get("num_ctas")
    o = fa.check(cfg, str(tmp_path))
    assert o.status == "ok", o.detail
    assert "a CTA pair (B multicast by TMA to both CTAs, 128 rows per CTA)" in o.plan
    path, _ = _export(cfg, tmp_path)
    alone = CompileOptions(target="sm_90a", cta_pair=False)
    func = _kernel(compile_source(path, alone, until="layouts").module)
    assert kernel_spec_int(func, "num_cta_in_cga") in (None, 1)  # (no hint: absent)


@needs_ptxas
def test_a_256x256_sm120_gemm_is_divided_without_the_hint(tmp_path):
    """sm_120's 256 x 256 f32 tile on one CTA of 8 warps spilled 320-396 B (ten fuzzer GEMMs
    from 300117 on; tileiras 1-4.7 KB): its rows are divided between two CTAs without the
    hint too, 128 accumulators a thread."""
    import fuzz_async as fa

    cfg = fa.generate(300117)
    assert cfg.target == "sm_120" and (cfg.params["TM"], cfg.params["TN"]) == (256, 256)
    assert not cfg.options.get("num_ctas")
    o = fa.check(cfg, str(tmp_path))
    assert o.status == "ok", o.detail
    assert "rows divided between a CTA pair, 128 each" in o.plan
