"""cuTile Python kernels (public ``cuda.tile`` API) for the TMA / warp-specialized pipeline work
(issue 14, docs/pipelines.md): the GEMM and attention shapes the corpus lacks. Same pattern as
tests/cutile_kernels.py: :func:`kernels` builds :class:`KernelCase` s on demand (so a test file
can skip cleanly when ``cuda-tile`` is missing); :func:`export_bytecode` writes each kernel's
Tile IR bytecode (architecture independent), which tests and ``bench/tileiras_pipelines.py``
compile with tilegen and with NVIDIA's tileiras.

| kernel | what |
|---|---|
| ``gemm_f16_128x128x64`` | f16 x f16 -> f32, 128 x 128 output tile, K tile 64, long K loop, 8 warps |
| ``gemm_fp8_blockscaled`` | e4m3 x e4m3 -> f32 per 128-wide K tile, scaled by per-128-block f32 scales of A (per row) and B (per column), DeepSeek-style |
| ``attention_causal_fwd`` | causal flash attention forward, 128-row Q tile, 64-row K/V tiles, head dim 64 |
| ``attention_causal_split`` | the same with the loop split at the diagonal, as cuTile splits TileGym's (two K loops) |

``python tests/cutile_kernels_async.py OUT_DIR`` exports every kernel's ``.tileirbc`` and an
``inputs.npz`` per kernel (``arg__*``, ``expected__*``, ``grid``; NumPy references).
"""

# (no `from __future__ import annotations`: cuTile evaluates the kernels' annotations)
import math
from dataclasses import dataclass

import numpy as np

try:  # run as a module of tests/ (pytest puts tests/ on sys.path) or as a script
    from cutile_kernels import KernelCase
except ImportError:  # pragma: no cover
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from cutile_kernels import KernelCase

NEG_INF = float("-inf")


@dataclass
class Problem:
    """A launch of a kernel on concrete inputs: ``args`` in parameter order (arrays and scalar
    runtime parameters; constants are baked into the kernel), ``expected`` the outputs NumPy
    computes, ``grid``, and the tolerance the outputs are compared with."""

    args: dict
    expected: dict
    grid: tuple[int, int, int]
    rtol: float = 1e-3
    atol: float = 1e-3


def kernels() -> dict[str, "KernelCase"]:
    import cuda.tile as ct
    from cuda.tile.compilation import ArrayConstraint

    def arr(dtype, ndim=1, index=ct.int32):
        # strides known to be 16-byte multiples (what ct.launch infers for dense arrays): TMA
        # needs them; without the assumption tileiras falls back to cp.async (docs/pipelines.md)
        return ArrayConstraint(
            dtype,
            ndim,
            index_dtype=index,
            stride_lower_bound_incl=0,
            alias_groups=(),
            may_alias_internally=False,
            stride_constant=(None,) * (ndim - 1) + (1,),
            stride_divisible_by=(128 // dtype.bitwidth,) * (ndim - 1) + (1,),
            base_addr_divisible_by=16,
        )

    f32, f16, fp8 = ct.float32, ct.float16, ct.float8_e4m3fn
    S = ct.compilation.ScalarConstraint
    ZERO = ct.PaddingMode.ZERO
    cases: list[KernelCase] = []

    def case(feature, *params, **kernel_options):
        def wrap(fn):
            k = ct.kernel(fn, **kernel_options)
            cases.append(KernelCase(fn.__name__, k, list(params), feature))
            return k

        return wrap

    @case(
        "f16 GEMM, 128x128x64 tiles, long K loop, 8 warps",
        arr(f16, 2),
        arr(f16, 2),
        arr(f32, 2),
        128,
        128,
        64,
        num_ctas=1,
    )
    def gemm_f16_128x128x64(
        A, B, C, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]
    ):
        i, j = ct.bid(0), ct.bid(1)
        acc = ct.full((TM, TN), 0.0, f32)
        for k in range(ct.num_tiles(A, axis=1, shape=(TM, TK))):
            a = ct.load(A, index=(i, k), shape=(TM, TK), padding_mode=ZERO)
            b = ct.load(B, index=(k, j), shape=(TK, TN), padding_mode=ZERO)
            acc = ct.mma(a, b, acc)
        ct.store(C, index=(i, j), tile=acc)

    @case(
        "fp8 e4m3 GEMM with per-128-block f32 scales (A per row, B per column), f32 acc",
        arr(fp8, 2),
        arr(fp8, 2),
        arr(f32, 2),
        arr(f32, 2),
        arr(f32, 2),
        128,
        128,
        128,
    )
    def gemm_fp8_blockscaled(
        A, B, SA, SB, C, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]
    ):
        # SA: M x (K / TK) scales of A's 1 x TK row blocks; SB: (K / TK) x N of B's column blocks
        i, j = ct.bid(0), ct.bid(1)
        acc = ct.full((TM, TN), 0.0, f32)
        for k in range(ct.num_tiles(A, axis=1, shape=(TM, TK))):
            a = ct.load(A, index=(i, k), shape=(TM, TK), padding_mode=ZERO)
            b = ct.load(B, index=(k, j), shape=(TK, TN), padding_mode=ZERO)
            sa = ct.load(SA, index=(i, k), shape=(TM, 1), padding_mode=ZERO)
            sb = ct.load(SB, index=(k, j), shape=(1, TN), padding_mode=ZERO)
            part = ct.mma(a, b, ct.full((TM, TN), 0.0, f32))
            acc = acc + part * sa * sb
        ct.store(C, index=(i, j), tile=acc)

    @case(
        "causal flash attention forward, 128-row Q tile, 64-row K/V tiles, head dim 64",
        arr(f16, 3),
        arr(f16, 3),
        arr(f16, 3),
        arr(f16, 3),
        S(f32),
        128,
        64,
        64,
    )
    def attention_causal_fwd(
        Q, K, V, Out, qk_scale, TM: ct.Constant[int], TN: ct.Constant[int], D: ct.Constant[int]
    ):
        i, h = ct.bid(0), ct.bid(1)
        q = ct.reshape(ct.load(Q, index=(h, i, 0), shape=(1, TM, D)), (TM, D))
        m_i = ct.full((TM, 1), NEG_INF, f32)
        l_i = ct.full((TM, 1), 0.0, f32)
        acc = ct.full((TM, D), 0.0, f32)
        scale = qk_scale * 1.4426950408889634
        rows = i * TM + ct.arange(TM, dtype=ct.int32)
        # K/V tiles up to and including the diagonal of this Q tile
        for j in range((i + 1) * (TM // TN)):
            k = ct.reshape(ct.load(K, index=(h, 0, j), shape=(1, D, TN)), (D, TN))
            qk = ct.mma(q, k, ct.full((TM, TN), 0.0, f32))
            cols = j * TN + ct.arange(TN, dtype=ct.int32)
            causal = ct.reshape(rows, (TM, 1)) >= ct.reshape(cols, (1, TN))
            qk = ct.where(causal, qk * scale, NEG_INF)
            m_new = ct.maximum(m_i, ct.max(qk, axis=1, keepdims=True))
            p = ct.exp2(qk - m_new)
            alpha = ct.exp2(m_i - m_new)
            l_i = l_i * alpha + ct.sum(p, axis=1, keepdims=True)
            v = ct.reshape(ct.load(V, index=(h, j, 0), shape=(1, TN, D)), (TN, D))
            acc = ct.mma(ct.astype(p, f16), v, acc * alpha)
            m_i = m_new
        ct.store(Out, index=(h, i, 0), tile=ct.reshape(ct.astype(acc / l_i, f16), (1, TM, D)))

    @case(
        "causal attention as cuTile splits TileGym's: K/V tiles below the diagonal unmasked, "
        "then the diagonal's masked (two K loops: a chain, docs/pipelines.md section 23)",
        arr(f16, 3),
        arr(f16, 3),
        arr(f16, 3),
        arr(f16, 3),
        S(f32),
        128,
        64,
        64,
    )
    def attention_causal_split(
        Q, K, V, Out, qk_scale, TM: ct.Constant[int], TN: ct.Constant[int], D: ct.Constant[int]
    ):
        i, h = ct.bid(0), ct.bid(1)
        q = ct.reshape(ct.load(Q, index=(h, i, 0), shape=(1, TM, D)), (TM, D))
        m_i = ct.full((TM, 1), NEG_INF, f32)
        l_i = ct.full((TM, 1), 0.0, f32)
        acc = ct.full((TM, D), 0.0, f32)
        scale = qk_scale * 1.4426950408889634
        rows = i * TM + ct.arange(TM, dtype=ct.int32)
        below = i * (TM // TN)
        for j in range(below):  # wholly below the diagonal: no mask
            k = ct.reshape(ct.load(K, index=(h, 0, j), shape=(1, D, TN)), (D, TN))
            qk = ct.mma(q, k, ct.full((TM, TN), 0.0, f32)) * scale
            m_new = ct.maximum(m_i, ct.max(qk, axis=1, keepdims=True))
            p = ct.exp2(qk - m_new)
            alpha = ct.exp2(m_i - m_new)
            l_i = l_i * alpha + ct.sum(p, axis=1, keepdims=True)
            v = ct.reshape(ct.load(V, index=(h, j, 0), shape=(1, TN, D)), (TN, D))
            acc = ct.mma(ct.astype(p, f16), v, acc * alpha)
            m_i = m_new
        for j in range(below, (i + 1) * (TM // TN)):  # across the diagonal: masked
            k = ct.reshape(ct.load(K, index=(h, 0, j), shape=(1, D, TN)), (D, TN))
            qk = ct.mma(q, k, ct.full((TM, TN), 0.0, f32))
            cols = j * TN + ct.arange(TN, dtype=ct.int32)
            causal = ct.reshape(rows, (TM, 1)) >= ct.reshape(cols, (1, TN))
            qk = ct.where(causal, qk * scale, NEG_INF)
            m_new = ct.maximum(m_i, ct.max(qk, axis=1, keepdims=True))
            p = ct.exp2(qk - m_new)
            alpha = ct.exp2(m_i - m_new)
            l_i = l_i * alpha + ct.sum(p, axis=1, keepdims=True)
            v = ct.reshape(ct.load(V, index=(h, j, 0), shape=(1, TN, D)), (TN, D))
            acc = ct.mma(ct.astype(p, f16), v, acc * alpha)
            m_i = m_new
        ct.store(Out, index=(h, i, 0), tile=ct.reshape(ct.astype(acc / l_i, f16), (1, TM, D)))

    @case(
        "causal attention in TileGym Gemma's form: 1-d running max and sum, K/V tiles indexed "
        "by a loop-carried counter, the loop split at the diagonal (docs/pipelines.md section "
        "24)",
        arr(f16, 3),
        arr(f16, 3),
        arr(f16, 3),
        arr(f16, 3),
        S(f32),
        128,
        64,
        64,
    )
    def attention_causal_gemma_form(
        Q, K, V, Out, qk_scale, TM: ct.Constant[int], TN: ct.Constant[int], D: ct.Constant[int]
    ):
        i, h = ct.bid(0), ct.bid(1)
        q = ct.reshape(ct.load(Q, index=(h, i, 0), shape=(1, TM, D)), (TM, D))
        m_i = ct.full((TM,), NEG_INF, f32)
        l_i = ct.full((TM,), 0.0, f32)
        acc = ct.full((TM, D), 0.0, f32)
        scale = qk_scale * 1.4426950408889634
        offs_m = i * TM + ct.arange(TM, dtype=ct.int32)
        offs_n = ct.arange(TN, dtype=ct.int32)
        cnt = 0
        for _ in range(0, i * TM, TN):  # wholly below the diagonal
            k = ct.reshape(ct.load(K, index=(h, 0, cnt), shape=(1, D, TN)), (D, TN))
            qk = ct.mma(q, k, ct.full((TM, TN), 0.0, f32))
            m_new = ct.maximum(m_i, ct.max(qk, axis=1) * scale)
            p = ct.exp2(qk * scale - m_new[:, None])
            alpha = ct.exp2(m_i - m_new)
            l_i = l_i * alpha + ct.sum(p, axis=1)
            v = ct.reshape(ct.load(V, index=(h, cnt, 0), shape=(1, TN, D)), (TN, D))
            acc = ct.mma(ct.astype(p, f16), v, acc * alpha[:, None])
            m_i = m_new
            cnt += 1
        cnt = (i * TM) // TN
        for start_n in range(i * TM, (i + 1) * TM, TN):  # across it: masked
            k = ct.reshape(ct.load(K, index=(h, 0, cnt), shape=(1, D, TN)), (D, TN))
            qk = ct.mma(q, k, ct.full((TM, TN), 0.0, f32))
            qk = ct.where(offs_m[:, None] >= (start_n + offs_n[None, :]), qk, -1.0e6)
            m_new = ct.maximum(m_i, ct.max(qk, axis=1) * scale)
            p = ct.exp2(qk * scale - m_new[:, None])
            alpha = ct.exp2(m_i - m_new)
            l_i = l_i * alpha + ct.sum(p, axis=1)
            v = ct.reshape(ct.load(V, index=(h, cnt, 0), shape=(1, TN, D)), (TN, D))
            acc = ct.mma(ct.astype(p, f16), v, acc * alpha[:, None])
            m_i = m_new
            cnt += 1
        out = ct.astype(acc / l_i[:, None], f16)
        ct.store(Out, index=(h, i, 0), tile=ct.reshape(out, (1, TM, D)))

    @case(
        "attention backward dQ (TileGym's form): K is read by two dots, transposed by QK^T "
        "and as loaded by dS K (one TMA box, two reads: docs/pipelines.md section 24)",
        arr(f16, 2),
        arr(f16, 2),
        arr(f16, 2),
        arr(f16, 2),
        arr(f16, 2),
        arr(f32, 1),
        arr(f32, 1),
        S(f32),
        128,
        64,
        64,
    )
    def attention_bwd_dq(
        Q,
        K,
        V,
        dO,
        dQ,
        LSE,
        Delta,
        qk_scale,
        TM: ct.Constant[int],
        TN: ct.Constant[int],
        D: ct.Constant[int],
    ):
        i = ct.bid(0)
        q = ct.load(Q, index=(i, 0), shape=(TM, D))
        do = ct.load(dO, index=(i, 0), shape=(TM, D))
        rows = i * TM + ct.arange(TM, dtype=ct.int32)
        lse = ct.reshape(ct.gather(LSE, rows), (TM, 1))
        delta = ct.reshape(ct.gather(Delta, rows), (TM, 1))
        scale = qk_scale * 1.4426950408889634
        dq = ct.full((TM, D), 0.0, f32)
        for j in range(ct.num_tiles(K, axis=0, shape=(TN, D))):
            k = ct.load(K, index=(j, 0), shape=(TN, D))
            v = ct.load(V, index=(j, 0), shape=(TN, D))
            qk = ct.mma(q, ct.permute(k, (1, 0)), ct.full((TM, TN), 0.0, f32))
            p = ct.exp2(qk * scale - lse)
            dp = ct.mma(do, ct.permute(v, (1, 0)), ct.full((TM, TN), 0.0, f32))
            ds = p * (dp - delta)
            dq = ct.mma(ct.astype(ds, f16), k, dq)
        ct.store(dQ, index=(i, 0), tile=ct.astype(dq * qk_scale, f16))

    @case(
        "attention backward dK dV with grouped queries (TileGym's form: the group's query heads "
        "around the Q tiles, dK and dV carried through both; one loop once flattened, "
        "docs/pipelines.md section 26)",
        arr(f16, 3),
        arr(f16, 3),
        arr(f16, 3),
        arr(f16, 3),
        arr(f16, 3),
        arr(f16, 3),
        arr(f32, 1),
        arr(f32, 1),
        S(f32),
        2,
        64,
        128,
        64,
    )
    def attention_bwd_dkdv_gqa(
        Q,
        K,
        V,
        dO,
        dK,
        dV,
        LSE,
        Delta,
        qk_scale,
        G: ct.Constant[int],
        TM: ct.Constant[int],
        TN: ct.Constant[int],
        D: ct.Constant[int],
    ):
        n, h = ct.bid(0), ct.bid(1)  # the K/V tile and the K/V head
        seq = Q.shape[1]
        k = ct.reshape(ct.load(K, index=(h, n, 0), shape=(1, TN, D)), (TN, D))
        v = ct.reshape(ct.load(V, index=(h, n, 0), shape=(1, TN, D)), (TN, D))
        cols = ct.reshape(n * TN + ct.arange(TN, dtype=ct.int32), (TN, 1))
        offs = ct.arange(TM, dtype=ct.int32)
        scale = qk_scale * 1.4426950408889634
        dk = ct.full((TN, D), 0.0, f32)
        dv = ct.full((TN, D), 0.0, f32)
        for g in range(G):
            qh = h * G + g
            base = qh * seq
            for m in range((n * TN) // TM, ct.num_tiles(Q, axis=1, shape=(1, TM, D))):
                q = ct.reshape(ct.load(Q, index=(qh, m, 0), shape=(1, TM, D)), (TM, D))
                do = ct.reshape(ct.load(dO, index=(qh, m, 0), shape=(1, TM, D)), (TM, D))
                rows = m * TM + offs
                lse = ct.reshape(ct.gather(LSE, base + rows), (1, TM))
                delta = ct.reshape(ct.gather(Delta, base + rows), (1, TM))
                qk = ct.mma(k, ct.permute(q, (1, 0)), ct.full((TN, TM), 0.0, f32))
                p = ct.exp2(qk * scale - lse)
                p = ct.where(cols <= ct.reshape(rows, (1, TM)), p, 0.0)
                dv = ct.mma(ct.astype(p, f16), do, dv)
                dp = ct.mma(v, ct.permute(do, (1, 0)), ct.full((TN, TM), 0.0, f32))
                ds = p * (dp - delta)
                dk = ct.mma(ct.astype(ds, f16), q, dk)
        ct.store(dK, index=(h, n, 0), tile=ct.reshape(ct.astype(dk * qk_scale, f16), (1, TN, D)))
        ct.store(dV, index=(h, n, 0), tile=ct.reshape(ct.astype(dv, f16), (1, TN, D)))

    return {c.name: c for c in cases}


# --------------------------------------------------------------------------- inputs, references


def _fp8_e4m3(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Values exactly representable in e4m3 (small integers times powers of two) and their bits."""
    from tilegen.runtime import floats

    bits = floats.encode(x.astype(np.float64), "f8E4M3FN")
    return floats.decode(bits, "f8E4M3FN").astype(np.float64), bits


def problems(seed: int = 0, small: bool = True) -> dict[str, Problem]:
    """One launch per kernel. ``small`` keeps the interpreter and simulator runs short (K loops
    of a few iterations); the large sizes are for the GPU."""
    rng = np.random.default_rng(seed)
    out: dict[str, Problem] = {}

    m, n, k = (128, 256, 256) if small else (4096, 4096, 4096)
    a = rng.integers(-3, 4, size=(m, k)).astype(np.float16)
    b = rng.integers(-3, 4, size=(k, n)).astype(np.float16)
    c = np.zeros((m, n), np.float32)
    out["gemm_f16_128x128x64"] = Problem(
        {"A": a, "B": b, "C": c},
        {"C": a.astype(np.float32) @ b.astype(np.float32)},
        (m // 128, n // 128, 1),
    )

    m, n, k = (128, 128, 256) if small else (4096, 4096, 4096)
    av, abits = _fp8_e4m3(rng.integers(-4, 5, size=(m, k)) * 0.5)
    bv, bbits = _fp8_e4m3(rng.integers(-4, 5, size=(k, n)) * 0.5)
    sa = (2.0 ** rng.integers(-2, 3, size=(m, k // 128))).astype(np.float32)
    sb = (2.0 ** rng.integers(-2, 3, size=(k // 128, n))).astype(np.float32)
    ref = np.zeros((m, n), np.float64)
    for kk in range(k // 128):
        part = av[:, kk * 128 : (kk + 1) * 128] @ bv[kk * 128 : (kk + 1) * 128, :]
        ref += part * sa[:, kk : kk + 1] * sb[kk : kk + 1, :]
    out["gemm_fp8_blockscaled"] = Problem(
        {"A": abits, "B": bbits, "SA": sa, "SB": sb, "C": np.zeros((m, n), np.float32)},
        {"C": ref.astype(np.float32)},
        (m // 128, n // 128, 1),
    )

    heads, seq, d = (1, 256, 64) if small else (16, 4096, 64)
    q, kt, v, scale, o = causal_attention_inputs(heads, seq, d, rng)
    for name in ("attention_causal_fwd", "attention_causal_split", "attention_causal_gemma_form"):
        out[name] = Problem(
            {"Q": q, "K": kt, "V": v, "Out": np.zeros_like(q), "qk_scale": scale},
            {"Out": o.astype(np.float16)},
            (seq // 128, heads, 1),
            rtol=2e-2,
            atol=2e-2,
        )
    seq, d = (256, 64) if small else (8192, 64)
    q, k, v, do = ((rng.standard_normal((seq, d)) * 0.5).astype(np.float16) for _ in range(4))
    scale = 1.0 / np.sqrt(d)
    f = [x.astype(np.float64) for x in (q, k, v, do)]
    s_ = f[0] @ f[1].T * scale
    lse = np.log2(np.exp(s_ - s_.max(-1, keepdims=True)).sum(-1)) + s_.max(-1) / np.log(2)
    p = np.exp2(s_ / np.log(2) - lse[:, None])
    o = p @ f[2]
    delta = (f[3] * o).sum(-1)
    dq = (p * (f[3] @ f[2].T - delta[:, None])) @ f[1] * scale
    out["attention_bwd_dq"] = Problem(
        {
            "Q": q,
            "K": k,
            "V": v,
            "dO": do,
            "dQ": np.zeros_like(q),
            "LSE": lse.astype(np.float32),
            "Delta": delta.astype(np.float32),
            "qk_scale": np.float32(scale),
        },
        {"dQ": dq.astype(np.float16)},
        (seq // 128, 1, 1),
        rtol=2e-2,
        atol=2e-2,
    )
    out["attention_bwd_dkdv_gqa"] = gqa_backward_problem(rng, kv_heads=1, group=2, seq=256, d=64)
    return out


def gqa_backward_problem(rng, kv_heads: int, group: int, seq: int, d: int) -> Problem:
    """``attention_bwd_dkdv_gqa``'s launch (128-row K/V tiles): Q and dO of ``kv_heads *
    group`` query heads, K and V of ``kv_heads``; LSE the causal scores' log2-sum-exp2 per
    query row, Delta = rowsum(O dO); dK and dV in float64, P and dS rounded to f16 as the
    kernel's second operands are."""
    hq = kv_heads * group
    q, do = ((rng.standard_normal((hq, seq, d)) * 0.5).astype(np.float16) for _ in range(2))
    k, v = ((rng.standard_normal((kv_heads, seq, d)) * 0.5).astype(np.float16) for _ in range(2))
    scale = np.float32(1.0 / math.sqrt(d))
    log2e = 1.4426950408889634
    causal = np.tril(np.ones((seq, seq), bool))  # [query, key]
    lse = np.zeros((hq, seq))
    delta = np.zeros((hq, seq))
    dk = np.zeros((kv_heads, seq, d))
    dv = np.zeros((kv_heads, seq, d))
    for qh in range(hq):
        h = qh // group
        s = q[qh].astype(np.float64) @ k[h].astype(np.float64).T * float(scale) * log2e
        s = np.where(causal, s, -np.inf)
        mx = s.max(-1, keepdims=True)
        lse[qh] = (mx + np.log2(np.exp2(s - mx).sum(-1, keepdims=True)))[:, 0]
        p = np.exp2(s - lse[qh][:, None])  # [query, key]
        delta[qh] = ((p @ v[h].astype(np.float64)) * do[qh].astype(np.float64)).sum(-1)
    lse, delta = lse.astype(np.float32), delta.astype(np.float32)
    for qh in range(hq):
        h = qh // group
        s = k[h].astype(np.float64) @ q[qh].astype(np.float64).T * float(scale) * log2e
        pt = np.where(causal.T, np.exp2(s - lse[qh][None, :].astype(np.float64)), 0.0)
        dv[h] += pt.astype(np.float16).astype(np.float64) @ do[qh].astype(np.float64)
        dpt = v[h].astype(np.float64) @ do[qh].astype(np.float64).T
        dst = pt * (dpt - delta[qh][None, :].astype(np.float64))
        dk[h] += dst.astype(np.float16).astype(np.float64) @ q[qh].astype(np.float64)
    return Problem(
        {
            "Q": q,
            "K": k,
            "V": v,
            "dO": do,
            "dK": np.zeros_like(k),
            "dV": np.zeros_like(v),
            "LSE": lse.reshape(-1),
            "Delta": delta.reshape(-1),
            "qk_scale": scale,
        },
        {"dK": (dk * float(scale)).astype(np.float16), "dV": dv.astype(np.float16)},
        (seq // 128, kv_heads, 1),
        rtol=2e-2,
        atol=2e-2,
    )


def causal_attention_inputs(heads: int, seq: int, d: int, rng) -> tuple:
    """(Q, K^T, V, qk_scale, reference output) of a causal attention problem for
    ``attention_causal_fwd`` / ``attention_causal_split`` (``rng``: a NumPy Generator or a
    seed); the reference is float64 softmax(Q K^T scale, causal) V."""
    rng = np.random.default_rng(rng) if not isinstance(rng, np.random.Generator) else rng
    q = (rng.standard_normal((heads, seq, d)) * 0.5).astype(np.float16)
    kt = (rng.standard_normal((heads, d, seq)) * 0.5).astype(np.float16)
    v = (rng.standard_normal((heads, seq, d)) * 0.5).astype(np.float16)
    scale = np.float32(1.0 / math.sqrt(d))
    s = np.einsum("hsd,hdt->hst", q.astype(np.float64), kt.astype(np.float64)) * float(scale)
    s = np.where(np.tril(np.ones((seq, seq), bool))[None], s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    o = np.einsum("hst,htd->hsd", p / p.sum(axis=-1, keepdims=True), v.astype(np.float64))
    return q, kt, v, scale, o


# --------------------------------------------------------------------------- export


def export_bytecode(out_dir, names=None, cases=None) -> dict[str, str]:
    """Write ``<name>.tileirbc`` for every kernel of ``cases`` (default :func:`kernels`; or
    only ``names``); {name: path}."""
    import os

    from cuda.tile.compilation import CallingConvention, KernelSignature, export_kernel

    paths = {}
    for name, c in (kernels() if cases is None else cases).items():
        if names is not None and name not in names:
            continue
        sig = KernelSignature(c.params, getattr(CallingConvention, c.calling_convention)())
        path = os.path.join(out_dir, name + ".tileirbc")
        export_kernel(c.kernel, [sig], path, output_format="tileir_bytecode")
        paths[name] = path
    return paths


def write_inputs(out_dir, small: bool = True) -> dict[str, str]:
    """``<name>.npz`` per kernel in the corpus's layout (``arg__*``, ``expected__*``, ``grid``)."""
    import os

    paths = {}
    for name, pr in problems(small=small).items():
        arrays = {f"arg__{k}": np.asarray(v) for k, v in pr.args.items()}
        arrays.update({f"expected__{k}": np.asarray(v) for k, v in pr.expected.items()})
        arrays["grid"] = np.array(pr.grid, np.int64)
        path = os.path.join(out_dir, name + ".npz")
        np.savez(path, **arrays)
        paths[name] = path
    return paths


def main(argv=None) -> int:
    import argparse

    p = argparse.ArgumentParser()
    p.add_argument("out_dir")
    p.add_argument("--large", action="store_true", help="GPU-sized inputs")
    args = p.parse_args(argv)
    for name, path in export_bytecode(args.out_dir).items():
        print(name, path)
    write_inputs(args.out_dir, small=not args.large)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


def pair_kernels() -> dict[str, "KernelCase"]:
    """GEMMs whose ``num_ctas=2`` hint asks for a CTA pair (docs/pipelines.md sections 18-19):
    256-row tiles (128 per CTA of the pair) in f16, bf16, e4m3 and i8, an epilogue of its own
    (x 0.5 to f16), a 128-row tile (64 rows per CTA) and one with a second store (which both
    CTAs would run: no pair); and ``tall_*``, 256-row tiles without the hint (one CTA, two
    consumer warp groups)."""
    import cuda.tile as ct
    from cuda.tile.compilation import ArrayConstraint

    def arr(dtype):
        return ArrayConstraint(
            dtype,
            2,
            index_dtype=ct.int32,
            stride_lower_bound_incl=0,
            alias_groups=(),
            may_alias_internally=False,
            stride_constant=(None, 1),
            stride_divisible_by=(128 // dtype.bitwidth, 1),
            base_addr_divisible_by=16,
        )

    zero = ct.PaddingMode.ZERO

    def gemm(A, B, C, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
        i, j = ct.bid(0), ct.bid(1)
        acc = ct.full((TM, TN), 0, C.dtype if C.dtype == ct.int32 else ct.float32)
        for k in range(ct.num_tiles(A, axis=1, shape=(TM, TK))):
            a = ct.load(A, index=(i, k), shape=(TM, TK), padding_mode=zero)
            b = ct.load(B, index=(k, j), shape=(TK, TN), padding_mode=zero)
            acc = ct.mma(a, b, acc)
        ct.store(C, index=(i, j), tile=ct.astype(acc, C.dtype))

    def gemm_half(A, B, C, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
        i, j = ct.bid(0), ct.bid(1)
        acc = ct.full((TM, TN), 0.0, ct.float32)
        for k in range(ct.num_tiles(A, axis=1, shape=(TM, TK))):
            a = ct.load(A, index=(i, k), shape=(TM, TK), padding_mode=zero)
            b = ct.load(B, index=(k, j), shape=(TK, TN), padding_mode=zero)
            acc = ct.mma(a, b, acc)
        ct.store(C, index=(i, j), tile=ct.astype(acc * 0.5, ct.float16))

    def gemm_and_flag(A, B, C, F, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
        i, j = ct.bid(0), ct.bid(1)
        acc = ct.full((TM, TN), 0.0, ct.float32)
        for k in range(ct.num_tiles(A, axis=1, shape=(TM, TK))):
            a = ct.load(A, index=(i, k), shape=(TM, TK), padding_mode=zero)
            b = ct.load(B, index=(k, j), shape=(TK, TN), padding_mode=zero)
            acc = ct.mma(a, b, acc)
        ct.store(C, index=(i, j), tile=acc)
        ct.store(F, index=(i, j), tile=ct.full((1, 1), 1.0, ct.float32))

    f16, bf16, fp8, i8 = ct.float16, ct.bfloat16, ct.float8_e4m3fn, ct.int8
    f32, i32 = ct.float32, ct.int32
    out = {}
    for name, fn, params in (
        ("pair_f16", gemm, [arr(f16), arr(f16), arr(f32), 256, 128, 64]),
        ("pair_bf16", gemm, [arr(bf16), arr(bf16), arr(f32), 256, 128, 64]),
        ("pair_e4m3", gemm, [arr(fp8), arr(fp8), arr(f16), 256, 128, 128]),
        ("pair_i8", gemm, [arr(i8), arr(i8), arr(i32), 256, 128, 128]),
        ("pair_f16_n64", gemm, [arr(f16), arr(f16), arr(f32), 256, 64, 64]),
        ("pair_f16_half", gemm_half, [arr(f16), arr(f16), arr(f16), 256, 128, 64]),
        ("pair_f16_m128", gemm, [arr(f16), arr(f16), arr(f32), 128, 128, 64]),
        ("pair_f16_flag", gemm_and_flag, [arr(f16), arr(f16), arr(f32), arr(f32), 256, 128, 64]),
        # one CTA per 256-row tile (no hint): two consumer warp groups (docs/layouts.md)
        ("tall_f16", gemm, [arr(f16), arr(f16), arr(f32), 256, 128, 64]),
        ("tall_e4m3", gemm, [arr(fp8), arr(fp8), arr(f16), 256, 128, 128]),
    ):
        k = ct.kernel(fn, num_ctas=1 if name.startswith("tall") else 2)
        out[name] = KernelCase(name, k, params, "num_ctas=2 GEMM (a CTA pair on sm_100)")
    return out


#: pair kernel -> (A/B element, C element, TM, TN, TK)
PAIR_SHAPES = {
    "pair_f16": ("f16", "f32", 256, 128, 64),
    "pair_bf16": ("bf16", "f32", 256, 128, 64),
    "pair_e4m3": ("e4m3", "f16", 256, 128, 128),
    "pair_i8": ("i8", "i32", 256, 128, 128),
    "pair_f16_n64": ("f16", "f32", 256, 64, 64),
    "pair_f16_half": ("f16", "f16", 256, 128, 64),
    "pair_f16_m128": ("f16", "f32", 128, 128, 64),
    "tall_f16": ("f16", "f32", 256, 128, 64),
    "tall_e4m3": ("e4m3", "f16", 256, 128, 128),
}


def pair_problem(name: str, seed: int = 0, k_steps: int = 3) -> Problem:
    """A launch of :func:`pair_kernels`'s ``name`` over 2 x 2 tile blocks and ``k_steps`` K
    steps, small integers (every result exact)."""
    from tilegen.runtime import floats

    ab, c, tm, tn, tk = PAIR_SHAPES[name]
    rng = np.random.default_rng(seed)
    m, n, k = 2 * tm, 2 * tn, k_steps * tk
    av = rng.integers(-3, 4, (m, k)).astype(np.float64)
    bv = rng.integers(-3, 4, (k, n)).astype(np.float64)
    if ab in ("e4m3", "bf16"):
        key = "f8E4M3FN" if ab == "e4m3" else "bf16"
        a, b = floats.encode(av, key), floats.encode(bv, key)
    else:
        dt = {"f16": np.float16, "i8": np.int8}[ab]
        a, b = av.astype(dt), bv.astype(dt)
    cdt = {"f32": np.float32, "f16": np.float16, "i32": np.int32}[c]
    ref = av @ bv * (0.5 if name.endswith("_half") else 1.0)
    return Problem(
        {"A": a, "B": b, "C": np.zeros((m, n), cdt)},
        {"C": ref.astype(cdt)},
        (m // tm, n // tn, 1),
        rtol=0.0,
        atol=0.0,
    )


def export_pair_bytecode(out_dir, names=None) -> dict[str, str]:
    """Write ``<name>.tileirbc`` for :func:`pair_kernels` (or ``names``); {name: path}."""
    return export_bytecode(out_dir, names, pair_kernels())


def gemm_epilogue_kernel():
    """A small f16 GEMM whose epilogue is its own (x 0.5, stored as f16): the kernel
    tests/test_async_pipeline_e2e.py launches through ``tilegen.cutile.launch``."""
    import cuda.tile as ct

    zero = ct.PaddingMode.ZERO

    @ct.kernel
    def gemm_half_f16(A, B, C, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
        i, j = ct.bid(0), ct.bid(1)
        acc = ct.full((TM, TN), 0.0, ct.float32)
        for k in range(ct.num_tiles(A, axis=1, shape=(TM, TK))):
            a = ct.load(A, index=(i, k), shape=(TM, TK), padding_mode=zero)
            b = ct.load(B, index=(k, j), shape=(TK, TN), padding_mode=zero)
            acc = ct.mma(a, b, acc)
        ct.store(C, index=(i, j), tile=ct.astype(acc * 0.5, ct.float16))

    return gemm_half_f16
