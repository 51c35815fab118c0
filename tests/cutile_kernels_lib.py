"""cuTile Python kernels modelled on what kernel libraries ship (issue 15), written with the
public ``cuda.tile`` API and exported to Tile IR bytecode through cuTile's own compilation API
(``export_kernel(..., output_format="tileir_bytecode")``: no GPU, no driver, no tileiras).

| kernel | modelled on | exercises |
|---|---|---|
| ``fft64`` | an FFT by tensor factorisation (N = 4 x 4 x 4, two batch items a block) | rank-3 ``ct.matmul`` (batched f32 dots (2, 4, 4) @ (2, 4, 16)), twiddles, rank-4 permutes |
| ``layernorm_pow`` | layer norm written the obvious way | ``(x - mean) ** 2`` (``fpowi``), f16 in/out |
| ``rmsnorm_pow`` | RMS norm of LLM blocks | ``x ** 2`` on f32 from bf16, weight multiply |
| ``fp8_group_quant`` | per-token-group FP8 quantisation (group 128) | absmax, scale, clamp, f32 -> f8E4M3FN ``ftof`` |
| ``fp8_block_dequant`` | FP8 weight dequantisation with per-128x128-block scales | f8E4M3FN -> f32 ``ftof``, f32 -> bf16 |
| ``fp8_e5m2_roundtrip`` | FP8 gradient (e5m2) casts | f16 -> f8E5M2 -> f32 |
| ``fp8_block_gemm`` | block-scaled FP8 GEMM (DeepSeek-style: per-token 128-K-group A scales, per-128x128-block B scales), 128 x 64 x 128 tiles | e4m3 dots, scales applied every K step, bf16 out |
| ``decode_splitkv`` | split-KV flash decoding, one query row per head | ``ct.mma`` of 1 x 64 by 64 x 64 (M below the instruction shape), online softmax |
| ``decode_gqa`` | the same for grouped-query attention (8 query heads per KV head) | 8 x 64 by 64 x 64 dots (M below the instruction shape) |
| ``bmm_rank3`` | a batched matmul written on rank-3 tiles | rank-3 ``ct.matmul`` on tensor cores (f16) |
| ``decode_combine`` | its combine step | log-sum-exp weighted sum over the splits |

Each :class:`LibCase` carries its export signature, an input generator and a NumPy reference, so
tests/test_codegen_families.py can compile it for every target and check ptxsim against NumPy.
fp8/bf16 arrays are passed as their raw bits (uint8 / uint16), as the cuTile corpus stores
them. Importing this module needs only NumPy; :func:`cases` needs ``cuda-tile``.
"""

import io
import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

NEG_INF = float("-inf")


@dataclass
class LibCase:
    name: str
    kernel: object  # a ``ct.kernel``
    params: list  # ParameterConstraint | constant value, one per kernel parameter
    feature: str
    #: rng -> ([(param name, array or 0-d scalar)], grid)
    make_args: Callable
    #: {param name: array} -> {param name: expected array after the launch}
    reference: Callable
    rtol: float = 1e-5
    atol: float = 1e-6
    #: uses fp8: NVIDIA's tileiras refuses it below sm_89
    fp8: bool = False
    #: outputs compared bit for bit (after encoding the reference in the output's format)
    exact: tuple = field(default_factory=tuple)
    #: outputs held as raw bits of a narrow float type: {param name: "bf16" | "f8E4M3FN" ...}
    formats: dict = field(default_factory=dict)

    def mismatches(self, result: dict, expected: dict) -> list[str]:
        """What differs between a run's ``result`` and the reference's ``expected`` values."""
        problems = []
        for name, want in expected.items():
            got = np.asarray(result[name])
            fmt = self.formats.get(name)
            if name in self.exact:
                if fmt is not None:
                    want = to_bits(want, fmt)
                want = np.asarray(want).astype(got.dtype)
                same = got.view(np.uint8) == want.view(np.uint8)
                bad = ~same.reshape(got.shape + (-1,)).all(axis=-1)
            else:
                g = from_bits(got, fmt) if fmt else got.astype(np.float64)
                w = np.asarray(want, np.float64)
                with np.errstate(all="ignore"):
                    err = np.abs(g - w)
                    bad = ~(
                        (err <= self.atol + self.rtol * np.abs(w)) | (np.isnan(g) & np.isnan(w))
                    )
            if bad.any():
                i = tuple(int(x) for x in np.argwhere(bad)[0])
                problems.append(
                    f"{name}: {int(bad.sum())} of {bad.size} differ, first at {list(i)}: "
                    f"got {got[i]!r}, expected {np.asarray(want)[i]!r}"
                )
        return problems


# ----------------------------------------------------------------------------- number formats
def bf16_bits(x) -> np.ndarray:
    from tilegen.runtime.floats import encode

    return encode(np.asarray(x, np.float64), "bf16")


def from_bits(bits, name: str) -> np.ndarray:
    from tilegen.runtime.floats import decode

    return np.asarray(decode(np.asarray(bits), name), np.float64)


def to_bits(x, name: str) -> np.ndarray:
    """Round float64 values to ``name`` (nearest even, saturating for fp8) and encode them."""
    from tilegen.runtime.floats import encode, round_to_format

    return encode(round_to_format(np.asarray(x, np.float64), name), name)


def f32(x) -> np.ndarray:
    return np.asarray(x, np.float32)


# ----------------------------------------------------------------------------- references
def _twiddles(rows: int, cols: int, n: int) -> np.ndarray:
    i, j = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    w = np.exp(-2j * np.pi * i * j / n)
    return np.stack([w.real, w.imag], axis=-1).astype(np.float32)


def _fft_args(rng):
    B, N = 4, 64
    x = rng.standard_normal((B, N, 2)).astype(np.float32)
    y = np.zeros_like(x)
    w4 = _twiddles(4, 4, 4)
    return [
        ("x", x),
        ("y", y),
        ("w0", w4),
        ("w1", w4.copy()),
        ("w2", w4.copy()),
        ("t0", _twiddles(4, 16, 64)),
        ("t1", _twiddles(4, 4, 16)),
    ], (B // 2, 1, 1)


def _fft_ref(a):
    x = a["x"].astype(np.float64)
    c = x[..., 0] + 1j * x[..., 1]
    f = np.fft.fft(c, axis=1)
    return {"y": np.stack([f.real, f.imag], axis=-1)}


def _layernorm_args(rng):
    M, N = 8, 256
    x = (rng.standard_normal((M, N)) * 2 + 0.5).astype(np.float16)
    w = (1 + 0.1 * rng.standard_normal(N)).astype(np.float16)
    b = (0.1 * rng.standard_normal(N)).astype(np.float16)
    return [
        ("x", x),
        ("w", w),
        ("b", b),
        ("y", np.zeros_like(x)),
        ("eps", np.array(1e-5, np.float32)),
    ], (M // 2, 1, 1)


def _layernorm_ref(a):
    x = a["x"].astype(np.float64)
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    y = (x - mean) / np.sqrt(var + float(a["eps"])) * a["w"].astype(np.float64) + a["b"]
    return {"y": y}


def _rmsnorm_args(rng):
    M, N = 8, 128
    x = bf16_bits(rng.standard_normal((M, N)) * 3)
    w = bf16_bits(1 + 0.1 * rng.standard_normal(N))
    return [
        ("x", x),
        ("w", w),
        ("y", np.zeros_like(x)),
        ("eps", np.array(1e-6, np.float32)),
    ], (M // 4, 1, 1)


def _rmsnorm_ref(a):
    x = from_bits(a["x"], "bf16")
    w = from_bits(a["w"], "bf16")
    ms = (x**2).mean(axis=1, keepdims=True)
    return {"y": x / np.sqrt(ms + float(a["eps"])) * w}


def _quant_args(rng):
    M, K = 8, 512
    x = rng.standard_normal((M, K)) * np.exp(rng.uniform(-4, 4, (M, 1)))
    x[0, :128] = 0.0  # an all-zero group: the eps floor of the scale
    x[1, 5] = 1e4  # one outlier per group sets the scale
    return [
        ("x", bf16_bits(x)),
        ("q", np.zeros((M, K), np.uint8)),
        ("s", np.zeros((M, K // 128), np.float32)),
        ("eps", np.array(1e-10, np.float32)),
    ], (M // 4, K // 128, 1)


def _quant_ref(a):
    x = from_bits(a["x"], "bf16").astype(np.float32)
    M, K = x.shape
    g = x.reshape(M, K // 128, 128)
    amax = np.abs(g).max(axis=2, keepdims=True)
    scale = (np.maximum(amax, np.float32(a["eps"])) / np.float32(448.0)).astype(np.float32)
    q = np.clip(g / scale, np.float32(-448.0), np.float32(448.0)).astype(np.float32)
    return {"q": q.reshape(M, K), "s": scale.reshape(M, K // 128)}


def _dequant_args(rng):
    N, K = 256, 256
    codes = rng.integers(0, 256, (N, K)).astype(np.uint8)
    codes[(codes & 0x7F) == 0x7F] = 0x11  # no NaN codes in a weight
    s = np.exp(rng.uniform(-3, 3, (N // 128, K // 128))).astype(np.float32)
    return [("w", codes), ("s", s), ("y", np.zeros((N, K), np.uint16))], (N // 128, K // 32, 1)


def _dequant_ref(a):
    w = from_bits(a["w"], "f8E4M3FN").astype(np.float32)
    s = np.repeat(np.repeat(a["s"], 128, axis=0), 128, axis=1)
    return {"y": (w * s).astype(np.float32)}


def _e5m2_args(rng):
    n = 1024
    x = rng.standard_normal(n) * np.exp(rng.uniform(-12, 12, n))
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0, 57344.0, 61440.0, 1.5e-5, 6e-8]
    x[: len(specials)] = specials
    return [
        ("x", x.astype(np.float16)),
        ("q", np.zeros(n, np.uint8)),
        ("y", np.zeros(n, np.float32)),
    ], (n // 256, 1, 1)


def _e5m2_ref(a):
    y = from_bits(to_bits(a["x"].astype(np.float64), "f8E5M2"), "f8E5M2")
    return {"q": y, "y": y}


def _gemm_args(rng):
    M, N, K = 128, 256, 256
    a = rng.standard_normal((M, K)) * np.exp(rng.uniform(-2, 2, (M, 1)))
    b = rng.standard_normal((N, K)) * 0.5
    ga = a.reshape(M, K // 128, 128)
    sa = (np.abs(ga).max(axis=2) / 448.0).astype(np.float32)
    qa = to_bits(ga / sa[:, :, None].astype(np.float64), "f8E4M3FN").reshape(M, K)
    gb = b.reshape(N // 128, 128, K // 128, 128)
    sb = (np.abs(gb).max(axis=(1, 3)) / 448.0).astype(np.float32)
    qb = to_bits(gb / sb[:, None, :, None].astype(np.float64), "f8E4M3FN").reshape(N, K)
    return [
        ("a", qa),
        ("b", np.ascontiguousarray(qb.T)),  # K x N
        ("sa", sa),
        ("sb", sb),
        ("c", np.zeros((M, N), np.uint16)),
    ], (M // 128, N // 64, 1)


def _gemm_ref(a):
    A = from_bits(a["a"], "f8E4M3FN")
    B = from_bits(a["b"], "f8E4M3FN")  # K x N
    M, K = A.shape
    N = B.shape[1]
    acc = np.zeros((M, N))
    for k in range(K // 128):
        part = A[:, 128 * k : 128 * (k + 1)] @ B[128 * k : 128 * (k + 1)]
        sb = np.repeat(a["sb"][:, k], 128)[None, :]
        acc += part * a["sa"][:, k : k + 1] * sb
    return {"c": acc}


def _decode_args(rng):
    H, S, D, splits = 4, 512, 64, 4
    q = (rng.standard_normal((H, D)) * 0.5).astype(np.float16)
    k = (rng.standard_normal((H, S, D)) * 0.5).astype(np.float16)
    v = rng.standard_normal((H, S, D)).astype(np.float16)
    return [
        ("q", q),
        ("k", k),
        ("v", v),
        ("o_part", np.zeros((H, splits, D), np.float32)),
        ("lse", np.zeros((H, splits), np.float32)),
        ("qk_scale", np.array(1 / math.sqrt(D), np.float32)),
    ], (H, splits, 1)


def _decode_parts(a):
    q, k, v = (a[n].astype(np.float64) for n in "qkv")
    H, S, D = k.shape
    splits = a["lse"].shape[1]
    L = S // splits
    o = np.zeros((H, splits, D))
    lse = np.zeros((H, splits))
    for h in range(H):
        for s in range(splits):
            sc = k[h, s * L : (s + 1) * L] @ q[h] * float(a["qk_scale"])
            m = sc.max()
            p = np.exp(sc - m)
            o[h, s] = p @ v[h, s * L : (s + 1) * L] / p.sum()
            lse[h, s] = m + np.log(p.sum())
    return o, lse


def _decode_ref(a):
    o, lse = _decode_parts(a)
    return {"o_part": o, "lse": lse}


def _gqa_args(rng):
    KVH, G, S, D, splits = 2, 8, 256, 64, 2
    q = (rng.standard_normal((KVH, G, D)) * 0.5).astype(np.float16)
    k = (rng.standard_normal((KVH, S, D)) * 0.5).astype(np.float16)
    v = rng.standard_normal((KVH, S, D)).astype(np.float16)
    return [
        ("q", q),
        ("k", k),
        ("v", v),
        ("o_part", np.zeros((KVH, splits, G, D), np.float32)),
        ("lse", np.zeros((KVH, splits, G), np.float32)),
        ("qk_scale", np.array(1 / math.sqrt(D), np.float32)),
    ], (KVH, splits, 1)


def _gqa_ref(a):
    q, k, v = (a[n].astype(np.float64) for n in "qkv")
    KVH, S, D = k.shape
    splits = a["lse"].shape[1]
    L = S // splits
    o = np.zeros(a["o_part"].shape)
    lse = np.zeros(a["lse"].shape)
    for h in range(KVH):
        for s in range(splits):
            sc = q[h] @ k[h, s * L : (s + 1) * L].T * float(a["qk_scale"])  # G x L
            m = sc.max(axis=1, keepdims=True)
            p = np.exp(sc - m)
            o[h, s] = p @ v[h, s * L : (s + 1) * L] / p.sum(axis=1, keepdims=True)
            lse[h, s] = (m + np.log(p.sum(axis=1, keepdims=True)))[:, 0]
    return {"o_part": o, "lse": lse}


def _bmm_args(rng):
    B, M, N, K = 4, 64, 32, 64
    a = (rng.standard_normal((B, M, K)) * 0.5).astype(np.float16)
    b = (rng.standard_normal((B, K, N)) * 0.5).astype(np.float16)
    return [("a", a), ("b", b), ("c", np.zeros((B, M, N), np.float32))], (B // 2, 1, 1)


def _bmm_ref(a):
    return {"c": a["a"].astype(np.float64) @ a["b"].astype(np.float64)}


def _combine_args(rng):
    H, splits, D = 8, 4, 64
    o = rng.standard_normal((H, splits, D)).astype(np.float32)
    lse = (rng.standard_normal((H, splits)) * 3).astype(np.float32)
    lse[0, 1] = NEG_INF  # an empty split
    return [("o_part", o), ("lse", lse), ("out", np.zeros((H, D), np.float16))], (H, 1, 1)


def _combine_ref(a):
    lse = a["lse"].astype(np.float64)
    m = lse.max(axis=1, keepdims=True)
    w = np.exp(lse - m)
    out = (w[:, :, None] * a["o_part"]).sum(axis=1) / w.sum(axis=1, keepdims=True)
    return {"out": out}


# ----------------------------------------------------------------------------- kernels
def cases() -> dict[str, LibCase]:
    import cuda.tile as ct
    from cuda.tile.compilation import ScalarConstraint

    def arr(dtype, ndim=1):
        """An array parameter; its constraints come from the example argument (see
        :func:`signature_params`)."""
        return ArraySpec(dtype, ndim)

    F32, F16, BF16 = ct.float32, ct.float16, ct.bfloat16
    E4M3, E5M2 = ct.float8_e4m3fn, ct.float8_e5m2
    ZERO = ct.PaddingMode.ZERO
    C = ct.Constant[int]
    out: list[LibCase] = []

    def case(feature, make_args, reference, *params, **kw):
        opts = {k: kw.pop(k) for k in ("occupancy", "num_ctas") if k in kw}

        def wrap(fn):
            out.append(
                LibCase(
                    fn.__name__,
                    ct.kernel(fn, **opts),
                    list(params),
                    feature,
                    make_args,
                    reference,
                    **kw,
                )
            )
            return fn

        return wrap

    # ---- FFT by factorisation: N = F0 * F1 * F2, one DFT matrix per factor, twiddles between
    @case(
        "FFT stage: rank-3 matmuls (batched dots), twiddles, permutes",
        _fft_args,
        _fft_ref,
        arr(F32, 3),
        arr(F32, 3),
        arr(F32, 3),
        arr(F32, 3),
        arr(F32, 3),
        arr(F32, 3),
        arr(F32, 3),
        64,
        4,
        4,
        4,
        2,
        rtol=1e-4,
        atol=1e-4,
    )
    def fft64(x, y, w0, w1, w2, t0, t1, N: C, F0: C, F1: C, F2: C, BS: C):
        bid = ct.bid(0)
        xin = ct.load(x, index=(bid, 0, 0), shape=(BS, N, 2))
        re = ct.reshape(ct.extract(xin, index=(0, 0, 0), shape=(BS, N, 1)), (BS, F0, F1 * F2))
        im = ct.reshape(ct.extract(xin, index=(0, 0, 1), shape=(BS, N, 1)), (BS, F0, F1 * F2))

        def dft(w, f):
            m = ct.load(w, index=(0, 0, 0), shape=(f, f, 2))
            wr = ct.reshape(ct.extract(m, index=(0, 0, 0), shape=(f, f, 1)), (1, f, f))
            wi = ct.reshape(ct.extract(m, index=(0, 0, 1), shape=(f, f, 1)), (1, f, f))
            return wr, wi

        def twiddle(t, rows, cols):
            m = ct.load(t, index=(0, 0, 0), shape=(rows, cols, 2))
            tr = ct.reshape(ct.extract(m, index=(0, 0, 0), shape=(rows, cols, 1)), (rows * cols, 1))
            ti = ct.reshape(ct.extract(m, index=(0, 0, 1), shape=(rows, cols, 1)), (rows * cols, 1))
            return tr, ti

        # stage 0: contract F0
        wr, wi = dft(w0, F0)
        yr = ct.reshape(ct.matmul(wr, re) - ct.matmul(wi, im), (BS, N, 1))
        yi = ct.reshape(ct.matmul(wi, re) + ct.matmul(wr, im), (BS, N, 1))
        tr, ti = twiddle(t0, F0, F1 * F2)
        re = ct.permute(ct.reshape(tr * yr - ti * yi, (BS, F0, F1, F2)), (0, 2, 3, 1))
        im = ct.permute(ct.reshape(ti * yr + tr * yi, (BS, F0, F1, F2)), (0, 2, 3, 1))
        # stage 1: contract F1
        re = ct.reshape(re, (BS, F1, F2 * F0))
        im = ct.reshape(im, (BS, F1, F2 * F0))
        wr, wi = dft(w1, F1)
        yr = ct.reshape(ct.matmul(wr, re) - ct.matmul(wi, im), (BS, F1 * F2, F0))
        yi = ct.reshape(ct.matmul(wi, re) + ct.matmul(wr, im), (BS, F1 * F2, F0))
        tr, ti = twiddle(t1, F1, F2)
        re = ct.permute(ct.reshape(tr * yr - ti * yi, (BS, F1, F2, F0)), (0, 2, 3, 1))
        im = ct.permute(ct.reshape(ti * yr + tr * yi, (BS, F1, F2, F0)), (0, 2, 3, 1))
        # stage 2: contract F2
        re = ct.reshape(re, (BS, F2, F0 * F1))
        im = ct.reshape(im, (BS, F2, F0 * F1))
        wr, wi = dft(w2, F2)
        yr = ct.matmul(wr, re) - ct.matmul(wi, im)
        yi = ct.matmul(wi, re) + ct.matmul(wr, im)
        yr = ct.reshape(ct.permute(ct.reshape(yr, (BS, F2, F0, F1)), (0, 1, 3, 2)), (BS, N, 1))
        yi = ct.reshape(ct.permute(ct.reshape(yi, (BS, F2, F0, F1)), (0, 1, 3, 2)), (BS, N, 1))
        ct.store(y, index=(bid, 0, 0), tile=ct.cat((yr, yi), axis=-1))

    # ---- norms written with ``**``
    @case(
        "layer norm, variance as mean((x - mean) ** 2) (fpowi), f16 io",
        _layernorm_args,
        _layernorm_ref,
        arr(F16, 2),
        arr(F16),
        arr(F16),
        arr(F16, 2),
        ScalarConstraint(F32),
        2,
        256,
        rtol=2e-3,
        atol=2e-3,
    )
    def layernorm_pow(x, w, b, y, eps, TM: C, TN: C):
        bid = ct.bid(0)
        t = ct.astype(ct.load(x, index=(bid, 0), shape=(TM, TN)), F32)
        mean = ct.sum(t, axis=1, keepdims=True) / TN
        var = ct.sum((t - mean) ** 2, axis=1, keepdims=True) / TN
        g = ct.astype(ct.load(w, index=(0,), shape=(TN,)), F32)
        h = ct.astype(ct.load(b, index=(0,), shape=(TN,)), F32)
        ct.store(y, index=(bid, 0), tile=ct.astype((t - mean) * ct.rsqrt(var + eps) * g + h, F16))

    @case(
        "RMS norm, mean(x ** 2) (fpowi) in f32 from bf16",
        _rmsnorm_args,
        _rmsnorm_ref,
        arr(BF16, 2),
        arr(BF16),
        arr(BF16, 2),
        ScalarConstraint(F32),
        4,
        128,
        rtol=1e-2,
        atol=1e-2,
        formats={"x": "bf16", "w": "bf16", "y": "bf16"},
    )
    def rmsnorm_pow(x, w, y, eps, TM: C, TN: C):
        bid = ct.bid(0)
        t = ct.astype(ct.load(x, index=(bid, 0), shape=(TM, TN)), F32)
        ms = ct.sum(t**2, axis=1, keepdims=True) / TN
        g = ct.astype(ct.load(w, index=(0,), shape=(TN,)), F32)
        ct.store(y, index=(bid, 0), tile=ct.astype(t * ct.rsqrt(ms + eps) * g, BF16))

    # ---- FP8 quantisation
    @case(
        "per-token-group FP8 quantisation (group 128): absmax, scale, clamp, f32 -> e4m3",
        _quant_args,
        _quant_ref,
        arr(BF16, 2),
        arr(E4M3, 2),
        arr(F32, 2),
        ScalarConstraint(F32),
        4,
        128,
        fp8=True,
        exact=("q", "s"),
        rtol=0,
        atol=0,
        formats={"x": "bf16", "q": "f8E4M3FN"},
    )
    def fp8_group_quant(x, q, s, eps, TM: C, G: C):
        i, g = ct.bid(0), ct.bid(1)
        t = ct.astype(ct.load(x, index=(i, g), shape=(TM, G)), F32)
        amax = ct.max(ct.abs(t), axis=1, keepdims=True)
        scale = ct.maximum(amax, eps) / 448.0
        v = ct.minimum(ct.maximum(t / scale, -448.0), 448.0)
        ct.store(q, index=(i, g), tile=ct.astype(v, E4M3))
        ct.store(s, index=(i, g), tile=scale)

    @case(
        "FP8 weight dequantisation, per-128x128-block scales: e4m3 -> f32 -> bf16",
        _dequant_args,
        _dequant_ref,
        arr(E4M3, 2),
        arr(F32, 2),
        arr(BF16, 2),
        128,
        32,
        fp8=True,
        exact=("y",),
        rtol=0,
        atol=0,
        formats={"w": "f8E4M3FN", "y": "bf16"},
    )
    def fp8_block_dequant(w, s, y, BM: C, BK: C):
        i, j = ct.bid(0), ct.bid(1)
        t = ct.astype(ct.load(w, index=(i, j), shape=(BM, BK)), F32)
        sc = ct.load(s, index=(i, j * BK // 128), shape=(1, 1))
        ct.store(y, index=(i, j), tile=ct.astype(t * sc, BF16))

    @case(
        "f16 -> f8E5M2 -> f32 (saturating casts, NaN, subnormals)",
        _e5m2_args,
        _e5m2_ref,
        arr(F16),
        arr(E5M2),
        arr(F32),
        256,
        fp8=True,
        exact=("q", "y"),
        rtol=0,
        atol=0,
        formats={"q": "f8E5M2"},
    )
    def fp8_e5m2_roundtrip(x, q, y, TILE: C):
        bid = ct.bid(0)
        t = ct.astype(ct.load(x, index=(bid,), shape=(TILE,)), E5M2)
        ct.store(q, index=(bid,), tile=t)
        ct.store(y, index=(bid,), tile=ct.astype(t, F32))

    # ---- block-scaled FP8 GEMM (A scales per token and 128-K group, B per 128x128 block)
    @case(
        "block-scaled fp8 GEMM: e4m3 dots, per-block scales applied every K step, bf16 out",
        _gemm_args,
        _gemm_ref,
        arr(E4M3, 2),
        arr(E4M3, 2),
        arr(F32, 2),
        arr(F32, 2),
        arr(BF16, 2),
        128,
        64,
        128,
        fp8=True,
        rtol=1e-2,
        atol=1e-2,
        formats={"a": "f8E4M3FN", "b": "f8E4M3FN", "c": "bf16"},
    )
    def fp8_block_gemm(a, b, sa, sb, c, TM: C, TN: C, TK: C):
        i, j = ct.bid(0), ct.bid(1)
        acc = ct.full((TM, TN), 0.0, F32)
        for k in range(ct.num_tiles(a, axis=1, shape=(TM, TK))):
            x = ct.load(a, index=(i, k), shape=(TM, TK), padding_mode=ZERO)
            w = ct.load(b, index=(k, j), shape=(TK, TN), padding_mode=ZERO)
            s_a = ct.load(sa, index=(i, k), shape=(TM, 1))
            s_b = ct.load(sb, index=(j * TN // 128, k), shape=(1, 1))
            acc = acc + ct.mma(x, w, ct.full((TM, TN), 0.0, F32)) * (s_a * s_b)
        ct.store(c, index=(i, j), tile=ct.astype(acc, BF16))

    # ---- split-KV flash decoding: one query row per head, KV split over grid dim 1
    @case(
        "split-KV decode attention: 1 x 64 query row against 64 x 64 K/V tiles",
        _decode_args,
        _decode_ref,
        arr(F16, 2),
        arr(F16, 3),
        arr(F16, 3),
        arr(F32, 3),
        arr(F32, 2),
        ScalarConstraint(F32),
        64,
        64,
        rtol=2e-3,
        atol=2e-3,
    )
    def decode_splitkv(q, k, v, o_part, lse, qk_scale, D: C, TN: C):
        h, s = ct.bid(0), ct.bid(1)
        nsplit = ct.num_blocks(1)
        per = ct.num_tiles(k, axis=1, shape=(1, TN, D)) // nsplit
        qt = ct.load(q, index=(h, 0), shape=(1, D))
        m_i = ct.full((1, 1), NEG_INF, F32)
        l_i = ct.full((1, 1), 0.0, F32)
        acc = ct.full((1, D), 0.0, F32)
        scale = qk_scale * 1.4426950408889634
        for t in range(s * per, (s + 1) * per):
            kt = ct.reshape(ct.load(k, index=(h, t, 0), shape=(1, TN, D)), (TN, D))
            qk = ct.mma(qt, ct.permute(kt, (1, 0)), ct.full((1, TN), 0.0, F32))
            m_new = ct.maximum(m_i, ct.max(qk, axis=1, keepdims=True) * scale)
            p = ct.exp2(qk * scale - m_new)
            alpha = ct.exp2(m_i - m_new)
            l_i = l_i * alpha + ct.sum(p, axis=1, keepdims=True)
            vt = ct.reshape(ct.load(v, index=(h, t, 0), shape=(1, TN, D)), (TN, D))
            acc = ct.mma(ct.astype(p, F16), vt, acc * alpha)
            m_i = m_new
        ct.store(o_part, index=(h, s, 0), tile=ct.reshape(acc / l_i, (1, 1, D)))
        lse_v = (m_i + ct.log2(l_i)) * 0.6931471805599453
        ct.store(lse, index=(h, s), tile=lse_v)

    @case(
        "GQA split-KV decode: 8 query heads share a KV head (8 x 64 by 64 x 64 dots)",
        _gqa_args,
        _gqa_ref,
        arr(F16, 3),
        arr(F16, 3),
        arr(F16, 3),
        arr(F32, 4),
        arr(F32, 3),
        ScalarConstraint(F32),
        8,
        64,
        64,
        rtol=2e-3,
        atol=2e-3,
    )
    def decode_gqa(q, k, v, o_part, lse, qk_scale, G: C, D: C, TN: C):
        h, s = ct.bid(0), ct.bid(1)
        nsplit = ct.num_blocks(1)
        per = ct.num_tiles(k, axis=1, shape=(1, TN, D)) // nsplit
        qt = ct.reshape(ct.load(q, index=(h, 0, 0), shape=(1, G, D)), (G, D))
        m_i = ct.full((G, 1), NEG_INF, F32)
        l_i = ct.full((G, 1), 0.0, F32)
        acc = ct.full((G, D), 0.0, F32)
        scale = qk_scale * 1.4426950408889634
        for t in range(s * per, (s + 1) * per):
            kt = ct.reshape(ct.load(k, index=(h, t, 0), shape=(1, TN, D)), (TN, D))
            qk = ct.mma(qt, ct.permute(kt, (1, 0)), ct.full((G, TN), 0.0, F32))
            m_new = ct.maximum(m_i, ct.max(qk, axis=1, keepdims=True) * scale)
            p = ct.exp2(qk * scale - m_new)
            alpha = ct.exp2(m_i - m_new)
            l_i = l_i * alpha + ct.sum(p, axis=1, keepdims=True)
            vt = ct.reshape(ct.load(v, index=(h, t, 0), shape=(1, TN, D)), (TN, D))
            acc = ct.mma(ct.astype(p, F16), vt, acc * alpha)
            m_i = m_new
        ct.store(o_part, index=(h, s, 0, 0), tile=ct.reshape(acc / l_i, (1, 1, G, D)))
        lse_v = ct.reshape((m_i + ct.log2(l_i)) * 0.6931471805599453, (1, 1, G))
        ct.store(lse, index=(h, s, 0), tile=lse_v)

    @case(
        "batched f16 matmul on rank-3 tiles (two batch items a block, tensor cores)",
        _bmm_args,
        _bmm_ref,
        arr(F16, 3),
        arr(F16, 3),
        arr(F32, 3),
        2,
        64,
        32,
        64,
        rtol=1e-3,
        atol=1e-3,
    )
    def bmm_rank3(a, b, c, BB: C, TM: C, TN: C, TK: C):
        bid = ct.bid(0)
        x = ct.load(a, index=(bid, 0, 0), shape=(BB, TM, TK))
        y = ct.load(b, index=(bid, 0, 0), shape=(BB, TK, TN))
        ct.store(c, index=(bid, 0, 0), tile=ct.mma(x, y, ct.full((BB, TM, TN), 0.0, F32)))

    @case(
        "split-KV decode combine: log-sum-exp weights over the splits",
        _combine_args,
        _combine_ref,
        arr(F32, 3),
        arr(F32, 2),
        arr(F16, 2),
        4,
        64,
        rtol=2e-3,
        atol=2e-3,
    )
    def decode_combine(o_part, lse, out, NS: C, D: C):
        h = ct.bid(0)
        l = ct.load(lse, index=(h, 0), shape=(1, NS))
        m = ct.max(l, axis=1, keepdims=True)
        w = ct.exp(l - m)
        o = ct.reshape(ct.load(o_part, index=(h, 0, 0), shape=(1, NS, D)), (NS, D))
        num = ct.sum(o * ct.reshape(w, (NS, 1)), axis=0, keepdims=True)
        ct.store(out, index=(h, 0), tile=ct.astype(num / ct.sum(w, axis=1, keepdims=True), F16))

    return {c.name: c for c in out}


@dataclass(frozen=True)
class ArraySpec:
    """An array parameter of a :class:`LibCase`: element type and rank; the rest of its
    ``ArrayConstraint`` is derived from the example argument as cuTile's launch derives it."""

    dtype: object
    ndim: int


def array_constraint(spec: ArraySpec, a: np.ndarray, index=None):
    """The ``ArrayConstraint`` cuTile's launch would give array ``a``: 16-byte aligned base,
    extents and (element) strides marked divisible by 16 where they are, unit inner stride."""
    import cuda.tile as ct
    from cuda.tile.compilation import ArrayConstraint

    strides = [st // a.itemsize for st in a.strides]
    return ArrayConstraint(
        spec.dtype,
        spec.ndim,
        index_dtype=index or ct.int32,
        stride_lower_bound_incl=0,
        alias_groups=(),
        may_alias_internally=False,
        stride_constant=(None,) * (spec.ndim - 1) + (1,),
        stride_divisible_by=tuple(16 if st % 16 == 0 and st != 1 else 1 for st in strides[:-1])
        + (1,),
        shape_divisible_by=tuple(16 if d % 16 == 0 else 1 for d in a.shape),
        base_addr_divisible_by=16,
    )


def signature_params(case: LibCase, args) -> list:
    """``case.params`` with every :class:`ArraySpec` replaced by the constraint of the example
    argument at its position (``args``: the runtime parameters, in order)."""
    out, it = [], iter(args)
    for p in case.params:
        if isinstance(p, ArraySpec):
            out.append(array_constraint(p, np.asarray(next(it)[1])))
        elif isinstance(p, (int, float)):
            out.append(p)
        else:
            next(it)
            out.append(p)
    return out


def export_bytecode(case: LibCase, version: str = "13.4") -> bytes:
    """The Tile IR bytecode cuTile writes for ``case`` (architecture independent), for the
    signature of its example arguments (seed 0)."""
    from cuda.tile.compilation import CallingConvention, KernelSignature, export_kernel

    buf = io.BytesIO()
    args, _ = case.make_args(np.random.default_rng(0))
    sig = KernelSignature(signature_params(case, args), CallingConvention.cutile_python_v1())
    export_kernel(
        case.kernel,
        [sig],
        buf,
        gpu_code=None,
        output_format="tileir_bytecode",
        bytecode_version=version,
    )
    return buf.getvalue()


def main(argv=None) -> int:
    """``python tests/cutile_kernels_lib.py OUT_DIR [NAME ...]``: write OUT_DIR/<name>.tileirbc
    and OUT_DIR/<name>.npz (``arg__*``, ``expected__*``, ``grid``; seed 0)."""
    import argparse
    import os

    p = argparse.ArgumentParser()
    p.add_argument("out_dir")
    p.add_argument("names", nargs="*")
    a = p.parse_args(argv)
    os.makedirs(a.out_dir, exist_ok=True)
    for name, c in cases().items():
        if a.names and name not in a.names:
            continue
        with open(os.path.join(a.out_dir, name + ".tileirbc"), "wb") as f:
            f.write(export_bytecode(c))
        args, grid = c.make_args(np.random.default_rng(0))
        exp = c.reference(dict(args))
        np.savez(
            os.path.join(a.out_dir, name + ".npz"),
            grid=np.array(grid),
            **{f"arg__{k}": v for k, v in args},
            **{f"expected__{k}": v for k, v in exp.items()},
        )
        print(name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
