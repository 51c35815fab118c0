#!/usr/bin/env python3
"""Differential fuzzer for the async path (docs/pipelines.md): random cuTile GEMMs and attention
forwards, written with the public ``cuda.tile`` API, compiled by tilegen for sm_90a / sm_100a
(and the cp.async targets sm_80 / sm_120), assembled by ptxas (0 bytes of spills), and run in
the simulator's strict async mode against NumPy.

What varies (a kernel is fully determined by its seed):

* **GEMM**: A/B element (f16, bf16, e4m3, i8, f32 as an f32 dot, and from seed 1,700,000 on
  f32 converted to tf32 before the dot), output element, tile
  (TM 64/128/256, TN 64/128/256, TK 32/64/128), B loaded K x N or N x K and transposed, the
  initial accumulator (zero or the output's tile), the epilogue (none, x alpha, + a bias row,
  ReLU; from seed 100,000 on also a bias row then a scale per row: side vectors of both
  shapes), problem sizes that are not multiples of the tile (zero-filled partial tiles, a K loop
  of one step), strides TMA cannot describe (a row of a size that is not a 16-byte multiple:
  the fallback), and the kernel options ``num_ctas`` (1/2) and ``occupancy`` (1/2).
* **Attention forward** (FlashAttention's online softmax over K/V tiles): Q tile 64/128/256
  rows, K/V tile 64/128, head dim 64/128, causal or not, f16 or bf16, sequence lengths that are
  not multiples of the tiles (a -inf fill of the masked keys), occupancy 1/2, num_ctas 1/2.

Inputs are small integers (exact in every element type), so GEMM results are compared exactly
wherever the accumulation is exact; attention and tf32 within a tolerance. For each kernel the
fuzzer records whether the async path took it (``--emit=async-plan``'s decision) or why not.

Usage::

    .venv/bin/python bench/fuzz_async.py --seconds 600             # time-boxed random run
    .venv/bin/python bench/fuzz_async.py --seed 12 -v               # one kernel, print its plan
    .venv/bin/python bench/fuzz_async.py --seconds 600 --start 1000 --json log.jsonl

A failure (mismatch, simulator error, ptxas error or spill, compile error other than a located
refusal of the kernel) prints its seed; ``--seed N -v`` reproduces it.
"""

# (no `from __future__ import annotations`: cuTile evaluates the kernels' annotations)
import argparse
import json
import math
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import cuda.tile as ct  # noqa: E402

ZERO = ct.PaddingMode.ZERO


# ---------------------------------------------------------------- kernels (public cuTile API)
def gemm(
    A,
    B,
    C,
    Bias,
    TM: ct.Constant[int],
    TN: ct.Constant[int],
    TK: ct.Constant[int],
    BT: ct.Constant[int],
    INIT: ct.Constant[int],
    EPI: ct.Constant[int],
    TF32: ct.Constant[int],
):
    """C = epilogue(A B + init); B is K x N, or N x K (BT) and transposed after its load; f32
    operands converted to tf32 (TF32) before the dot."""
    i, j = ct.bid(0), ct.bid(1)
    acc_t = ct.int32 if C.dtype == ct.int32 else ct.float32
    if INIT == 1:
        acc = ct.astype(ct.load(C, index=(i, j), shape=(TM, TN), padding_mode=ZERO), acc_t)
    else:
        acc = ct.full((TM, TN), 0, acc_t)
    for k in range(ct.num_tiles(A, axis=1, shape=(TM, TK))):
        a = ct.load(A, index=(i, k), shape=(TM, TK), padding_mode=ZERO)
        if BT == 1:
            b = ct.transpose(ct.load(B, index=(j, k), shape=(TN, TK), padding_mode=ZERO))
        else:
            b = ct.load(B, index=(k, j), shape=(TK, TN), padding_mode=ZERO)
        if TF32 == 1:
            a, b = ct.astype(a, ct.tfloat32), ct.astype(b, ct.tfloat32)
        acc = ct.mma(a, b, acc)
    if EPI == 1:
        acc = acc * 2
    if EPI == 2:
        acc = acc + ct.astype(ct.load(Bias, index=(0, j), shape=(1, TN), padding_mode=ZERO), acc_t)
    if EPI == 3:
        acc = ct.maximum(acc, 0)
    if EPI == 4:  # a bias row, then a scale per row (row 1 of Bias, as a TM x 1 column)
        bias = ct.astype(ct.load(Bias, index=(0, j), shape=(1, TN), padding_mode=ZERO), acc_t)
        scale = ct.load(Bias, index=(1, i), shape=(1, TM), padding_mode=ZERO)
        acc = (acc + bias) * ct.astype(ct.reshape(scale, (TM, 1)), acc_t)
    ct.store(C, index=(i, j), tile=ct.astype(acc, C.dtype))


def bgemm(
    A,
    B,
    C,
    TM: ct.Constant[int],
    TN: ct.Constant[int],
    TK: ct.Constant[int],
    BT: ct.Constant[int],
    INIT: ct.Constant[int],
    TF32: ct.Constant[int],
):
    """C[z] = A[z] B[z] (+ C[z], INIT) over 3-d arrays (a batch index z = bid 2): (1, TM, TK)
    tiles reshaped to the dot's 2-d operands; B is K x N, or N x K (BT) and transposed; f32
    operands converted to tf32 (TF32)."""
    i, j, z = ct.bid(0), ct.bid(1), ct.bid(2)
    acc_t = ct.int32 if C.dtype == ct.int32 else ct.float32
    if INIT == 1:
        c = ct.load(C, index=(z, i, j), shape=(1, TM, TN), padding_mode=ZERO)
        acc = ct.astype(ct.reshape(c, (TM, TN)), acc_t)
    else:
        acc = ct.full((TM, TN), 0, acc_t)
    for k in range(ct.num_tiles(A, axis=2, shape=(1, TM, TK))):
        a = ct.reshape(ct.load(A, index=(z, i, k), shape=(1, TM, TK), padding_mode=ZERO), (TM, TK))
        if BT == 1:
            bt = ct.load(B, index=(z, j, k), shape=(1, TN, TK), padding_mode=ZERO)
            b = ct.transpose(ct.reshape(bt, (TN, TK)))
        else:
            b = ct.reshape(
                ct.load(B, index=(z, k, j), shape=(1, TK, TN), padding_mode=ZERO), (TK, TN)
            )
        if TF32 == 1:
            a, b = ct.astype(a, ct.tfloat32), ct.astype(b, ct.tfloat32)
        acc = ct.mma(a, b, acc)
    ct.store(C, index=(z, i, j), tile=ct.reshape(ct.astype(acc, C.dtype), (1, TM, TN)))


def attention(
    Q,
    K,
    V,
    O,
    qk_scale: float,
    TM: ct.Constant[int],
    TN: ct.Constant[int],
    D: ct.Constant[int],
    CAUSAL: ct.Constant[int],
):
    """O = softmax(Q K^T scale [+ causal mask]) V for one head: Q, O are S x D, K, V are T x D."""
    i, h = ct.bid(0), ct.bid(1)
    q = ct.reshape(ct.load(Q, index=(h, i, 0), shape=(1, TM, D), padding_mode=ZERO), (TM, D))
    m = ct.full((TM, 1), -math.inf, ct.float32)
    s = ct.full((TM, 1), 0.0, ct.float32)
    acc = ct.full((TM, D), 0.0, ct.float32)
    rows = ct.reshape(i * TM + ct.arange(TM, dtype=ct.int32), (TM, 1))
    n = ct.num_tiles(K, axis=1, shape=(1, TN, D))
    if CAUSAL == 1:
        n = min(n, (i * TM + TM + TN - 1) // TN)
    for j in range(n):
        k = ct.reshape(ct.load(K, index=(h, j, 0), shape=(1, TN, D), padding_mode=ZERO), (TN, D))
        qk = ct.mma(q, ct.transpose(k), ct.full((TM, TN), 0.0, ct.float32)) * qk_scale
        cols = ct.reshape(j * TN + ct.arange(TN, dtype=ct.int32), (1, TN))
        keep = cols < K.shape[1]
        if CAUSAL == 1:
            keep = keep & (cols <= rows)
        qk = ct.where(keep, qk, -math.inf)
        m_new = ct.maximum(m, ct.max(qk, axis=1, keepdims=True))
        p = ct.exp(qk - m_new)
        alpha = ct.exp(m - m_new)
        s = s * alpha + ct.sum(p, axis=1, keepdims=True)
        v = ct.reshape(ct.load(V, index=(h, j, 0), shape=(1, TN, D), padding_mode=ZERO), (TN, D))
        acc = ct.mma(ct.astype(p, Q.dtype), v, acc * alpha)
        m = m_new
    ct.store(O, index=(h, i, 0), tile=ct.reshape(ct.astype(acc / s, O.dtype), (1, TM, D)))


# ---------------------------------------------------------------- configurations
ELEM = {
    "f16": (np.float16, "float16", 2),
    "bf16": (None, "bfloat16", 2),
    "e4m3": (None, "float8_e4m3fn", 1),
    "i8": (np.int8, "int8", 1),
    "f32": (np.float32, "float32", 4),
    "tf32": (np.float32, "float32", 4),  # (f32 arrays, converted to tf32 before the dot)
    "i32": (np.int32, "int32", 4),
}
TARGETS = ["sm_90a", "sm_90a", "sm_100a", "sm_100a", "sm_100a", "sm_80", "sm_120"]


@dataclass
class Config:
    seed: int
    kind: str
    target: str
    params: dict = field(default_factory=dict)
    options: dict = field(default_factory=dict)  # ct.kernel options (num_ctas, occupancy)
    sizes: dict = field(default_factory=dict)
    aligned: bool = True  # rows of every array a 16-byte multiple (what TMA needs)

    def line(self) -> str:
        return (
            f"seed {self.seed}: {self.kind} {self.target} {self.params} {self.options} "
            f"{self.sizes}{'' if self.aligned else ' unaligned'}"
        )


def _dim(rng: random.Random, tile: int, most: int) -> int:
    """A size along a dimension: whole tiles, or a partial last tile; 1..most tiles."""
    t = rng.randint(1, most)
    n = t * tile
    if rng.random() < 0.4:
        n -= rng.randint(1, tile - 1)
    return n


def _round(n: int, m: int) -> int:
    return -(-n // m) * m


def generate(seed: int) -> Config:
    rng = random.Random(seed)
    target = rng.choice(TARGETS)
    if rng.random() < 0.3:
        return _attention_config(seed, rng, target)
    ab, out = rng.choice(
        [
            ("f16", "f32"),
            ("f16", "f32"),
            ("f16", "f16"),
            ("bf16", "f32"),
            ("bf16", "bf16"),
            ("e4m3", "f16"),
            ("e4m3", "f32"),
            ("i8", "i32"),
            ("f32", "f32"),
        ]
    )
    if target == "sm_80" and ab == "e4m3":  # (sm_80 has no fp8: a located refusal)
        ab, out = "f16", "f32"
    if seed >= 1_700_000 and ab == "f32" and rng.random() < 0.7:  # (earlier seeds: no tf32)
        ab = "tf32"
    esz = ELEM[ab][2]
    tm = rng.choice([64, 128, 128, 256])
    tn = rng.choice([64, 128, 128, 256])
    tk = rng.choice([32, 64, 64, 128] if esz <= 2 else [32, 32, 64])
    if esz == 1:
        tk = max(tk, 64)
    bt = int(rng.random() < 0.3)
    init = int(rng.random() < 0.25)
    # (seeds from 100,000 on may also draw EPI 4: earlier seeds keep the kernels they had)
    more = [4] if seed >= 100_000 else []
    epi = rng.choice([0, 0, 1, 2, 3] + more) if out != "i32" else rng.choice([0, 0, 2] + more)
    options = {}
    if rng.random() < 0.25:
        options["num_ctas"] = 2
    if rng.random() < 0.3:
        options["occupancy"] = rng.choice([1, 2])
    gm = 2 if tm <= 128 and rng.random() < 0.5 else 1
    gn = 2 if tn <= 128 and rng.random() < 0.3 else 1
    m, n = _dim(rng, tm, gm), _dim(rng, tn, gn)
    k = _dim(rng, tk, rng.choice([1, 2, 3, 4]))
    aligned = rng.random() < 0.85
    # the rows of A (K), B (N or K) and C (N) in bytes: a 16-byte multiple unless unaligned
    if aligned:
        k = _round(k, 16 // esz)
        n = _round(n, max(16 // esz, 16 // ELEM[out][2]))
    if rng.random() < 0.25:  # 3-d arrays, a batch of 1-2 (no epilogue; from seed 150,000 on
        # the initial value may be C's tile: earlier seeds keep the kernels they had)
        return Config(
            seed,
            "bgemm",
            target,
            dict(ab=ab, out=out, TM=tm, TN=tn, TK=tk, BT=bt, INIT=init if seed >= 150_000 else 0),
            options,
            dict(M=m, N=n, K=k, Z=rng.choice([1, 2])),
            aligned,
        )
    return Config(
        seed,
        "gemm",
        target,
        dict(ab=ab, out=out, TM=tm, TN=tn, TK=tk, BT=bt, INIT=init, EPI=epi),
        options,
        dict(M=m, N=n, K=k),
        aligned,
    )


def _attention_config(seed: int, rng: random.Random, target: str) -> Config:
    e = rng.choice(["f16", "f16", "bf16"])
    tm = rng.choice([64, 128, 128, 256])
    tn = rng.choice([64, 64, 128])
    d = rng.choice([64, 64, 128])
    causal = int(rng.random() < 0.5)
    options = {}
    if rng.random() < 0.2:
        options["num_ctas"] = 2
    if rng.random() < 0.3:
        options["occupancy"] = rng.choice([1, 2])
    s = _dim(rng, tm, 2 if tm <= 128 else 1)
    t = s if causal else _dim(rng, tn, 3)
    heads = rng.choice([1, 1, 2])
    return Config(
        seed,
        "attention",
        target,
        dict(e=e, TM=tm, TN=tn, D=d, CAUSAL=causal),
        options,
        dict(S=s, T=t, H=heads),
    )


# ---------------------------------------------------------------- cuTile export
def _constraint(dtype_name: str, arr: np.ndarray):
    """The array constraint cuTile's ``ct.launch`` infers for ``arr`` (base 16-byte aligned,
    unit inner stride, strides of 16-byte multiples and shapes of multiples of 16 where they
    are): tilegen.cutile_launch's reimplementation of the launcher's specialisation."""
    from tilegen.cutile_launch import _array_constraint

    return _array_constraint([np.asarray(arr)], getattr(ct, dtype_name), None, "fuzz_async")


def export(cfg: Config, path: str, args: list) -> None:
    """Export ``cfg``'s kernel as bytecode, specialised for ``args`` as ``ct.launch`` would."""
    from cuda.tile.compilation import CallingConvention, KernelSignature, export_kernel

    p = cfg.params
    if cfg.kind in ("gemm", "bgemm"):
        ab, out = ELEM[p["ab"]][1], ELEM[p["out"]][1]
        params = [_constraint(t, x) for t, x in zip((ab, ab, out, out), args)]
        params += [p["TM"], p["TN"], p["TK"], p["BT"]]
        params += [p.get("INIT", 0)] + ([p["EPI"]] if cfg.kind == "gemm" else [])
        params += [int(p["ab"] == "tf32")]
        fn = gemm if cfg.kind == "gemm" else bgemm
    else:
        from cuda.tile.compilation import ScalarConstraint

        e = ELEM[p["e"]][1]
        params = [_constraint(e, x) for x in args[:4]]
        params += [ScalarConstraint(ct.float32), p["TM"], p["TN"], p["D"], p["CAUSAL"]]
        fn = attention
    kernel = ct.kernel(fn, **cfg.options)
    sig = KernelSignature(params, CallingConvention.cutile_python_v1())
    export_kernel(kernel, [sig], path, output_format="tileir_bytecode")


# ---------------------------------------------------------------- problems
def _encode(x: np.ndarray, e: str) -> np.ndarray:
    from tilegen.runtime import floats

    if e == "bf16":
        return floats.encode(x, "bf16")
    if e == "e4m3":
        return floats.encode(x, "f8E4M3FN")
    return x.astype(ELEM[e][0])


def _decode(x: np.ndarray, e: str) -> np.ndarray:
    from tilegen.runtime import floats

    if e == "bf16":
        return floats.decode(x, "bf16")
    return x.astype(np.float64)


def problem(cfg: Config, rng: np.random.Generator) -> tuple:
    """(args, grid, output index, reference (f64), rtol, atol)."""
    p, z = cfg.params, cfg.sizes
    if cfg.kind == "gemm":
        m, n, k = z["M"], z["N"], z["K"]
        av = rng.integers(-3, 4, (m, k)).astype(np.float64)
        bv = rng.integers(-3, 4, (k, n)).astype(np.float64)
        cv = rng.integers(-4, 5, (m, n)).astype(np.float64)
        bias = rng.integers(-4, 5, (1, n)).astype(np.float64)
        a = _encode(av, p["ab"])
        b = _encode(bv.T.copy() if p["BT"] else bv, p["ab"])
        c = _encode(cv if p["INIT"] else np.zeros((m, n)), p["out"])
        ref = av @ bv + (cv if p["INIT"] else 0.0)
        if p["EPI"] == 1:
            ref = ref * 2
        elif p["EPI"] == 2:
            ref = ref + bias
        elif p["EPI"] == 3:
            ref = np.maximum(ref, 0)
        elif p["EPI"] == 4:  # row 1 of the bias array: a scale per row of C
            scale = rng.integers(-2, 3, (1, m)).astype(np.float64)
            ref = (ref + bias) * scale.T
            wide = np.zeros((2, max(m, n)))
            wide[0, :n], wide[1, :m] = bias[0], scale[0]
            bias = wide
        ref = _decode(_encode(ref, p["out"]), p["out"])  # rounded to the output element
        tol = 2e-2 if p["out"] in ("f16", "bf16") or p["ab"] in ("f32", "tf32") else 0.0
        grid = (-(-m // p["TM"]), -(-n // p["TN"]), 1)
        args = [a, b, c, _encode(bias, p["out"])]
        return args, grid, 2, ref, tol, tol
    if cfg.kind == "bgemm":
        m, n, k, nz = z["M"], z["N"], z["K"], z["Z"]
        av = rng.integers(-3, 4, (nz, m, k)).astype(np.float64)
        bv = rng.integers(-3, 4, (nz, k, n)).astype(np.float64)
        cv = np.zeros((nz, m, n))
        if p.get("INIT"):  # (drawn after A and B: earlier seeds keep their problems)
            cv = rng.integers(-4, 5, (nz, m, n)).astype(np.float64)
        ref = _decode(_encode(av @ bv + cv, p["out"]), p["out"])
        b = _encode(bv.transpose(0, 2, 1).copy() if p["BT"] else bv, p["ab"])
        args = [_encode(av, p["ab"]), b, _encode(cv, p["out"])]
        tol = 2e-2 if p["out"] in ("f16", "bf16") or p["ab"] in ("f32", "tf32") else 0.0
        grid = (-(-m // p["TM"]), -(-n // p["TN"]), nz)
        return args, grid, 2, ref, tol, tol
    s, t, h, d = z["S"], z["T"], z["H"], p["D"]
    q = rng.integers(-2, 3, (h, s, d)).astype(np.float64) / 4
    kk = rng.integers(-2, 3, (h, t, d)).astype(np.float64) / 4
    v = rng.integers(-4, 5, (h, t, d)).astype(np.float64)
    scale = 0.125
    logits = np.einsum("hsd,htd->hst", q, kk) * scale
    if p["CAUSAL"]:
        logits = np.where(np.tril(np.ones((s, t), bool))[None], logits, -np.inf)
    w = np.exp(logits - logits.max(axis=2, keepdims=True))
    ref = np.einsum("hst,htd->hsd", w / w.sum(axis=2, keepdims=True), v)
    e = p["e"]
    args = [_encode(q, e), _encode(kk, e), _encode(v, e), _encode(np.zeros((h, s, d)), e)]
    args.append(np.float32(scale))
    grid = (-(-s // p["TM"]), h, 1)
    tol = 2e-2 if e == "f16" else 6e-2
    return args, grid, 3, ref, tol, tol


# ---------------------------------------------------------------- one kernel
def tileiras_usage(bytecode: str, target: str) -> dict:
    """tileiras 13.5's registers / stack / shared memory for the same bytecode ({} where
    tileiras is missing or refuses it)."""
    from tilegen.runtime.ptxas import find_ptxas

    tools = Path(find_ptxas()).parent
    tileiras, cuobjdump = tools / "tileiras", tools / "cuobjdump"
    if not tileiras.exists() or not cuobjdump.exists():
        return {}
    cubin = bytecode + f".{target}.cubin"
    gpu = target.rstrip("a")
    r = subprocess.run(
        [str(tileiras), "--gpu-name", gpu, bytecode, "-o", cubin], capture_output=True, text=True
    )
    if r.returncode != 0:
        return {"tileiras": r.stderr.strip()[:120]}
    dump = subprocess.run(
        [str(cuobjdump), "--dump-resource-usage", cubin], capture_output=True, text=True
    ).stdout
    out = {}
    for key in ("REG", "STACK", "SHARED"):
        for tok in dump.split():
            if tok.startswith(key + ":"):
                out[key] = int(tok.split(":")[1])
                break
    return out


@dataclass
class Outcome:
    seed: int
    status: str  # ok / fail / refused / skip
    path: str = ""  # async / today
    detail: str = ""
    seconds: float = 0.0
    line: str = ""
    ptx: str = ""  # (not logged)
    plan: str = ""  # the async stage's decision line


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout()


def run_one(seed: int, tmp: str, verbose: bool = False, timeout: float = 600.0) -> Outcome:
    """Generate kernel ``seed`` and check it (:func:`check`)."""
    return check(generate(seed), tmp, verbose, timeout)


def check(
    cfg: Config, tmp: str, verbose: bool = False, timeout: float = 600.0, **options
) -> Outcome:
    """Export ``cfg``'s kernel with cuTile, compile it with tilegen to a cubin, assemble its
    PTX with ``ptxas -v`` (spills compared with tileiras's on the same bytecode) and run it in
    the simulator (strict async mode on sm_90a / sm_100a) against NumPy. ``options``: more
    :class:`CompileOptions` fields (``use_tma=False``: today's path)."""
    from tilegen.runtime import driver
    from tilegen.runtime.diagnostics import CompileError
    from tilegen.runtime.options import CompileOptions
    from tilegen.runtime.ptx.launch import run_ptx
    from tilegen.runtime.ptxas import find_ptxas

    seed = cfg.seed
    t0 = time.perf_counter()
    out = Outcome(seed, "ok", line=cfg.line())
    if verbose:
        print(cfg.line())
    path = os.path.join(tmp, f"k{seed}.tileirbc")
    rng = np.random.default_rng(seed)
    args, grid, idx, ref, rtol, atol = problem(cfg, rng)
    try:
        export(cfg, path, args)
    except Exception as e:  # noqa: BLE001 - cuTile refused the configuration
        out.status, out.detail = "skip", f"cuTile: {type(e).__name__}: {str(e)[:200]}"
        return out
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(int(timeout))
    try:
        try:
            # (through the driver's ptxas stage: what a user gets, the occupancy cap dropped
            # where ptxas cannot fit an instruction under it)
            c = driver.compile_source(
                Path(path), CompileOptions(target=cfg.target, **options), until="ptxas"
            )
        except CompileError as e:
            msg = str(e)
            # a located refusal (a tile too big for the target, say) is a verdict, not a bug;
            # ptxas refusing tilegen's PTX is a bug
            out.status = "refused"
            out.detail = msg.splitlines()[0][:300]
            if "internal" in msg or "Traceback" in msg or "ptxas" in msg:
                out.status, out.detail = "fail", msg[-400:]
            return out
        plan = [d for d in (c.async_plan or [])]
        taken = [d for d in plan if d.taken]
        out.path = "async" if taken else "today"
        out.plan = "; ".join(d.line() for d in plan)
        if verbose:
            for d in plan:
                print("  plan:", d.line())
        # (the final PTX: without the occupancy cap where the driver dropped it)
        ptx = out.ptx = c.ptx
        src = os.path.join(tmp, f"k{seed}.ptx")
        Path(src).write_text(ptx)
        arch = ptx.split(".target", 1)[1].split()[0].strip(",")
        pr = subprocess.run(
            [find_ptxas(), "-v", f"-arch={arch}", src, "-o", os.devnull]
            + (["--enable-extended-smem=true"] if arch == "sm_80" else []),
            capture_output=True,
            text=True,
        )
        log = pr.stderr
        spilled = spilled_detail = None
        if pr.returncode != 0:
            out.status, out.detail = "fail", "ptxas -v: " + log.strip()[-400:]
            return out
        if " 0 bytes spill stores" not in log:
            # a spill is a finding where tileiras builds the same kernel without one
            spill = [ln.strip() for ln in log.splitlines() if "spill" in ln]
            theirs = tileiras_usage(path, cfg.target)
            spilled = "spill" if theirs.get("STACK", 0) > 0 else "fail"
            spilled_detail = "spills: " + "; ".join(spill)[:200] + f"; tileiras: {theirs}"
        strict = cfg.target in ("sm_90a", "sm_100a", "sm_120")
        res = run_ptx(ptx, args, grid, strict_async=strict, max_steps=50_000_000)[idx]
        got = _decode(np.asarray(res), cfg.params.get("out", cfg.params.get("e")))
        if got.shape != ref.shape:
            out.status, out.detail = "fail", f"shape {got.shape} != {ref.shape}"
        elif not np.allclose(got, ref, rtol=rtol, atol=atol, equal_nan=True):
            bad = ~np.isclose(got, ref, rtol=rtol, atol=atol, equal_nan=True)
            where = np.argwhere(bad)
            out.status = "fail"
            out.detail = (
                f"mismatch: {int(bad.sum())}/{bad.size} elements, first at "
                f"{tuple(int(x) for x in where[0])}: got {got[tuple(where[0])]}, "
                f"want {ref[tuple(where[0])]}; max |diff| "
                f"{float(np.nanmax(np.abs(np.nan_to_num(got - ref))))}"
            )
        if spilled is not None and out.status == "ok":  # (still run: correctness first)
            out.status, out.detail = spilled, spilled_detail
    except _Timeout:
        out.status, out.detail = "timeout", f"over {timeout:.0f} s"
    except Exception as e:  # noqa: BLE001 - a simulator error or a crash is a finding
        out.status = "fail"
        out.detail = f"{type(e).__name__}: {str(e)[:400]}"
        if verbose:
            traceback.print_exc()
    finally:
        signal.alarm(0)
        out.seconds = round(time.perf_counter() - t0, 2)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--start", type=int, default=None, help="first seed (default: random)")
    ap.add_argument("--seed", type=int, default=None, help="run one seed")
    ap.add_argument("--timeout", type=float, default=600.0, help="per-kernel seconds")
    ap.add_argument("--json", help="append one JSON line per kernel to this file")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    counts: dict = {}
    paths: dict = {}
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        if args.seed is not None:
            seeds = iter([args.seed])
        else:
            start = args.start if args.start is not None else random.randrange(10**6)

            def gen():
                s = start
                while True:
                    yield s
                    s += 1

            seeds = gen()
        t_end = time.perf_counter() + args.seconds
        for seed in seeds:
            if args.seed is None and time.perf_counter() > t_end:
                break
            o = run_one(seed, tmp, args.verbose, args.timeout)
            counts[o.status] = counts.get(o.status, 0) + 1
            if o.status == "ok":
                paths[o.path] = paths.get(o.path, 0) + 1
            if o.status in ("fail", "timeout"):
                failures.append(o)
            if args.verbose or o.status in ("fail", "timeout", "spill"):
                print(f"{o.status} ({o.seconds} s, {o.path}) {o.line}\n    {o.detail}", flush=True)
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps({k: v for k, v in o.__dict__.items() if k != "ptx"}) + "\n")
    print(
        f"kernels: {sum(counts.values())}; "
        + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        + f"; ok on the async path {paths.get('async', 0)}, on today's {paths.get('today', 0)}"
    )
    for o in failures:
        print(f"  FAIL seed {o.seed}: {o.detail[:200]}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
