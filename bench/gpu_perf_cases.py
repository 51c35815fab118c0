"""The throughput cases of ``make gpu-check`` (issue 14): large GEMMs and causal attention
launched through cuTile's ``ct.launch``, each compiler's cubin beside the library baseline
(cuBLAS through ``torch.matmul`` / ``torch._scaled_mm``, FlashAttention through
``torch.nn.functional.scaled_dot_product_attention``).

Used on both machines: ``bench/gpu_check.py`` (CPU) records both compilers' cubins for each
case's signature, derived from NumPy stand-ins of the arguments (:func:`numpy_args`, same
dtypes, shapes and strides); ``bench/gpu_runner.py`` (GPU) builds the torch tensors
(:func:`torch_args`), launches, checks against :func:`reference` and times. Both import this
file from the payload, so it needs only NumPy at import time.
"""

# (no `from __future__ import annotations`: cuTile evaluates the kernels' annotations)
import math
from dataclasses import dataclass, field

import numpy as np

#: extra tilegen builds of some cases (label -> CompileOptions fields), timed beside the default
#: build on the GPU: the data for choosing the defaults
VARIANTS = {
    # two consumer warp groups of 64 rows each (384 threads, 168 registers; tileiras's f16 GEMM
    # keeps one) beside the default one group of 128 rows (256 threads, 255 registers)
    # ("kernel": the case's kernel with other hints, from kernels(); same symbol and arguments).
    # occupancy=2: two CTAs an SM (3 stages each, 128 registers), one CTA's prologue and
    # epilogue beside the other's K loop (docs/pipelines.md section 47)
    # ("ptx_patch": tilegen's PTX rewritten by PTX_PATCHES[name] before ptxas: grouped8 takes
    # the tiles in groups of 8 block rows, for L2 reuse, section 47)
    # no map sharing: every CTA builds and publishes its own tensor maps (section 57's default:
    # a CTA takes those the CTA before it on its SM built in the same launch)
    "gemm f16 4096^3": {
        "no map sharing": {"share_maps": False},
        "num_warps=8": {"num_warps": 8},
        "occupancy=2": {"kernel": "gemm_occupancy2"},
        "grouped block order": {"ptx_patch": "grouped8"},
    },
    "gemm f16 8192^3": {
        "num_stages=4": {"num_stages": 4},
        "num_stages=5": {"num_stages": 5},
        "num_warps=8": {"num_warps": 8},
        "num_warps=8 num_stages=4": {"num_warps": 8, "num_stages": 4},
        "occupancy=2": {"kernel": "gemm_occupancy2"},
        "grouped block order": {"ptx_patch": "grouped8"},
    },
    "gemm bf16 4096^3": {"occupancy=2": {"kernel": "gemm_occupancy2"}},
    "gemm bf16 8192^3": {
        "num_warps=8": {"num_warps": 8},
        "occupancy=2": {"kernel": "gemm_occupancy2"},
        "grouped block order": {"ptx_patch": "grouped8"},
    },
    "gemm f16 4096x4096x256 (short K: the per-tile cost)": {
        "occupancy=2": {"kernel": "gemm_occupancy2"},
        "no map sharing": {"share_maps": False},
    },
    # the CTA pair beside one CTA per 256-row tile (two consumer warp groups, section 20)
    "gemm f16 4096^3 num_ctas=2 (256x128 tiles)": {"no CTA pair": {"cta_pair": False}},
    "gemm f16 8192^3 num_ctas=2 (256x128 tiles)": {"no CTA pair": {"cta_pair": False}},
    "gemm f16 8192^3 num_ctas=2 (128x128 tiles)": {"no CTA pair": {"cta_pair": False}},
    "gemm f16 8192^3 num_ctas=2 (256x256 tiles)": {"no CTA pair": {"cta_pair": False}},
    # a pair of 64-row halves at N 256 (section 38: today's path before, 8 warps)
    "gemm f16 8192^3 num_ctas=2 (128x256 tiles)": {"no CTA pair": {"cta_pair": False}},
    # a pair from C (sm_90 since section 37, sm_100 since section 38) beside one CTA
    "gemm f16 8192^3 C = Cin + A B num_ctas=2 (256x128 tiles)": {
        "no CTA pair": {"cta_pair": False}
    },
    # two consumer warp groups of 64 rows (the default since section 21) beside one of 128
    "gemm f16 8192^3 (128x256 tiles)": {"num_warps=4": {"num_warps": 4}},
    "gemm f16 8192^3 (256x128 tiles)": {"grouped block order": {"ptx_patch": "grouped8"}},
    # C loaded before the K loop: the consumers load it after the split (section 29) beside
    # today's path (TMA off)
    "gemm f16 8192^3 C = Cin + A B": {"no TMA": {"use_tma": False}},
    "gemm e4m3 8192^3 (f16 out)": {"num_warps=8": {"num_warps": 8}},
    # B copied by the producer's threads (section 43) beside today's path (the dot copies it)
    "gemm f16 LM head 4096x32001x4096": {"no TMA": {"use_tma": False}},
    # the async path's general form (the default on sm_90 since docs/pipelines.md section 13:
    # K/V by TMA from a producer warp group, 2 stages) beside the form with P V overlapping the
    # next QK^T (section 16, 3 stages; the default until section 46 measured it slower) and
    # today's path (cp.async by the consumers)
    "attention causal fwd h16 s8192 d64": {
        "overlap": {"overlap_mma": True},
        "no warp specialization": {"warp_specialize": False},
    },
    "attention causal fwd h16 s4096 d64": {
        "overlap": {"overlap_mma": True},
        "no warp specialization": {"warp_specialize": False},
    },
    "attention causal fwd split at the diagonal h16 s8192 d64": {"overlap": {"overlap_mma": True}},
    # the async path's scaled accumulate (the default since section 12: 384 threads, TMA,
    # consumers at 232 registers) beside today's path (256 threads, cp.async)
    "gemm e4m3 block-scaled 4096^3 (f32 out)": {
        "no warp specialization": {"warp_specialize": False}
    },
    # 256-row Q tiles on a CTA pair (K and V multicast, section 40) beside one CTA of 256 rows
    "attention causal fwd h16 s8192 d128 num_ctas=2 (256x128 tiles)": {
        "no CTA pair": {"cta_pair": False}
    },
    # grouped-query dK dV: the group's loop flattened into the Q tiles' (section 26), on the
    # async path, beside today's path (cp.async by the consumers)
    "attention bwd dK dV GQA h32/8 s4096 d128": {
        "no warp specialization": {"warp_specialize": False}
    },
}


def grouped_block_order(ptx: str, group: int = 8) -> str:
    """An experiment on tilegen's PTX (gpu-check's ``"ptx_patch"`` variants; not a compiler
    option): the kernel's 2-d block ids taken in groups of ``group`` along dim 0, as Triton's
    ``GROUP_M`` orders a GEMM's tiles. Launch order ``l = ctaid.x + ctaid.y * nctaid.x`` walks
    ``group`` consecutive bid(0) values for each bid(1) before the next group (the last group
    narrower), so the CTAs resident at once share a few A row panels and B column panels in L2
    instead of streaming all of A once for every two columns of B. A bijection of the grid
    (every tile computed once); the kernel's only reads of ``%ctaid.x``/``%ctaid.y`` are
    replaced."""
    lines = ptx.split("\n")
    at = {}
    for i, ln in enumerate(lines):
        for d in "xy":
            if ln.strip().endswith(f"%ctaid.{d};") and ln.strip().startswith("mov.u32"):
                if d in at:
                    raise ValueError(f"more than one read of %ctaid.{d}")
                at[d] = i
    if set(at) != {"x", "y"}:
        raise ValueError("the kernel does not read both %ctaid.x and %ctaid.y")
    rx, ry = (lines[at[d]].split()[1].rstrip(",") for d in "xy")
    t = [f"%tgbo{i}" for i in range(8)]
    code = [
        f"mov.u32 {t[0]}, %ctaid.x;",
        f"mov.u32 {t[1]}, %ctaid.y;",
        f"mov.u32 {t[2]}, %nctaid.x;",
        f"mov.u32 {t[3]}, %nctaid.y;",
        f"mad.lo.u32 {t[4]}, {t[1]}, {t[2]}, {t[0]};",  # launch order
        f"mul.lo.u32 {t[5]}, {t[3]}, {group};",  # CTAs a group
        f"div.u32 {t[6]}, {t[4]}, {t[5]};",
        f"rem.u32 {t[4]}, {t[4]}, {t[5]};",
        f"mul.lo.u32 {t[6]}, {t[6]}, {group};",  # the group's first bid(0)
        f"sub.u32 {t[7]}, {t[2]}, {t[6]};",
        f"min.u32 {t[7]}, {t[7]}, {group};",  # its width
        f"rem.u32 {rx}, {t[4]}, {t[7]};",
        f"add.u32 {rx}, {rx}, {t[6]};",
        f"div.u32 {ry}, {t[4]}, {t[7]};",
    ]
    first = min(at.values())
    out = lines[:first] + ["\t" + c for c in code]
    out += [ln for i, ln in enumerate(lines[first:], first) if i not in at.values()]
    body = next(i for i, ln in enumerate(out) if ln.strip() == "{")
    out.insert(body + 1, "\t.reg .b32 \t%tgbo<8>;")
    return "\n".join(out)


#: gpu-check's PTX experiments by name (``"ptx_patch"`` in VARIANTS)
PTX_PATCHES = {"grouped8": grouped_block_order}

GEMM_TILES = {
    "f16": (128, 128, 64),
    "bf16": (128, 128, 64),
    "e4m3": (128, 128, 128),
    "tf32": (128, 128, 32),
}


@dataclass
class PerfCase:
    """One large launch: ``kernel`` (a name of :func:`kernels`), its arguments as
    ``(name, shape, dtype)`` for arrays (dtype: f16 bf16 e4m3 f32) or ``(name, value)`` for
    scalars and constants, the grid, the flop count, the relative-error bound of the check and
    the baseline (``matmul``, ``matmul_tf32``, ``addmm``, ``scaled_mm``, ``sdpa`` or None)."""

    name: str
    kernel: str
    args: list
    grid: tuple
    flops: int
    tol: float
    baseline: str | None
    meta: dict = field(default_factory=dict)


def kernels() -> dict:
    """{name: cuTile kernel}; the async module's kernels beside one GEMM whose output has the
    inputs' precision (what ``torch.matmul`` returns), fp8 in f16 out."""
    import cuda.tile as ct

    from cutile_kernels_async import kernels as async_kernels

    zero = ct.PaddingMode.ZERO

    def gemm(A, B, C, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
        i, j = ct.bid(0), ct.bid(1)
        acc = ct.full((TM, TN), 0.0, ct.float32)
        for k in range(ct.num_tiles(A, axis=1, shape=(TM, TK))):
            a = ct.load(A, index=(i, k), shape=(TM, TK), padding_mode=zero)
            b = ct.load(B, index=(k, j), shape=(TK, TN), padding_mode=zero)
            acc = ct.mma(a, b, acc)
        ct.store(C, index=(i, j), tile=ct.astype(acc, C.dtype))

    def gemm_acc(A, B, Cin, C, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
        """C = Cin + A B: the initial accumulator loaded before the K loop."""
        i, j = ct.bid(0), ct.bid(1)
        acc = ct.astype(ct.load(Cin, index=(i, j), shape=(TM, TN), padding_mode=zero), ct.float32)
        for k in range(ct.num_tiles(A, axis=1, shape=(TM, TK))):
            a = ct.load(A, index=(i, k), shape=(TM, TK), padding_mode=zero)
            b = ct.load(B, index=(k, j), shape=(TK, TN), padding_mode=zero)
            acc = ct.mma(a, b, acc)
        ct.store(C, index=(i, j), tile=ct.astype(acc, C.dtype))

    def gemm_bt(A, BT, C, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
        """C = A B with B given as B^T (N x K, K contiguous: the layout cuBLASLt's fp8 GEMM
        takes), so both operands reach the MMAs K-major."""
        i, j = ct.bid(0), ct.bid(1)
        acc = ct.full((TM, TN), 0.0, ct.float32)
        for k in range(ct.num_tiles(A, axis=1, shape=(TM, TK))):
            a = ct.load(A, index=(i, k), shape=(TM, TK), padding_mode=zero)
            bt = ct.load(BT, index=(j, k), shape=(TN, TK), padding_mode=zero)
            acc = ct.mma(a, ct.permute(bt, (1, 0)), acc)
        ct.store(C, index=(i, j), tile=ct.astype(acc, C.dtype))

    def gemm_tf32(A, B, C, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
        """C = A B of f32 arrays, the products in tf32 (each operand converted) and the sums
        in f32: what torch.matmul does with allow_tf32."""
        i, j = ct.bid(0), ct.bid(1)
        acc = ct.full((TM, TN), 0.0, ct.float32)
        for k in range(ct.num_tiles(A, axis=1, shape=(TM, TK))):
            a = ct.load(A, index=(i, k), shape=(TM, TK), padding_mode=zero)
            b = ct.load(B, index=(k, j), shape=(TK, TN), padding_mode=zero)
            acc = ct.mma(ct.astype(a, ct.tfloat32), ct.astype(b, ct.tfloat32), acc)
        ct.store(C, index=(i, j), tile=acc)

    # gemm_pair: 256-row tiles on clusters of two CTAs (num_ctas=2: docs/pipelines.md sections
    # 18-19; on sm_90 each CTA takes 128 rows and B is multicast to both)
    out = {"gemm": ct.kernel(gemm), "gemm_pair": ct.kernel(gemm, num_ctas=2)}
    out["gemm_occupancy2"] = ct.kernel(gemm, occupancy=2)  # (VARIANTS only)
    out["gemm_bt"] = ct.kernel(gemm_bt)
    out["gemm_tf32"] = ct.kernel(gemm_tf32)
    out["gemm_acc"] = ct.kernel(gemm_acc)
    out["gemm_acc_pair"] = ct.kernel(gemm_acc, num_ctas=2)
    ak = async_kernels()
    for name in (
        "gemm_fp8_blockscaled",
        "attention_causal_fwd",
        "attention_causal_split",
        "attention_causal_gemma_form",
        "attention_bwd_dkdv_gqa",
    ):
        out[name] = ak[name].kernel
    # 256-row Q tiles on clusters of two CTAs (num_ctas=2: on sm_90 each CTA takes 128 rows,
    # docs/pipelines.md section 40)
    out["attention_causal_fwd_pair"] = ak["attention_causal_fwd"].kernel.replace_hints(num_ctas=2)
    return out


def _f16_gemm(name: str, kernel: str, s: int, tm: int, tn: int) -> PerfCase:
    """An f16 GEMM of s^3 with tm x tn x 64 tiles, f16 out, beside cuBLAS."""
    return PerfCase(
        name,
        kernel,
        [("A", (s, s), "f16"), ("B", (s, s), "f16"), ("C", (s, s), "f16")]
        + [("TM", tm), ("TN", tn), ("TK", 64)],
        (s // tm, s // tn, 1),
        2 * s**3,
        2e-2,
        "matmul",
    )


def _f16_mnk(name: str, m: int, n: int, k: int) -> PerfCase:
    """An f16 GEMM of m x n x k with the default f16 tiles, f16 out, beside cuBLAS (a partial
    last column of tiles where the tile does not divide n)."""
    tm, tn, tk = GEMM_TILES["f16"]
    return PerfCase(
        name,
        "gemm",
        [("A", (m, k), "f16"), ("B", (k, n), "f16"), ("C", (m, n), "f16")]
        + [("TM", tm), ("TN", tn), ("TK", tk)],
        (m // tm, -(-n // tn), 1),
        2 * m * n * k,
        2e-2,
        "matmul",
    )


def cases() -> list[PerfCase]:
    out = []
    for dt, out_dt, sizes in (("f16", "f16", (4096, 8192)), ("bf16", "bf16", (4096, 8192))):
        tm, tn, tk = GEMM_TILES[dt]
        for s in sizes:
            out.append(
                PerfCase(
                    f"gemm {dt} {s}^3",
                    "gemm",
                    [("A", (s, s), dt), ("B", (s, s), dt), ("C", (s, s), out_dt)]
                    + [("TM", tm), ("TN", tn), ("TK", tk)],
                    (s // tm, s // tn, 1),
                    2 * s**3,
                    2e-2,
                    "matmul",
                )
            )
    # four K steps a tile: the time is mostly each tile's fixed cost (the prologue, the tensor
    # maps, the first copies' latency, the epilogue), which the long K loops hide
    out.append(_f16_mnk("gemm f16 4096x4096x256 (short K: the per-tile cost)", 4096, 4096, 256))
    # 256 x 128 tiles on one CTA: two consumer warp groups (docs/layouts.md "CTA size"); 128 x 256
    # tiles: two of 64 rows (docs/pipelines.md section 21; tileiras: one, spilling)
    for tm, tn in ((256, 128), (128, 256)):
        out.append(_f16_gemm(f"gemm f16 8192^3 ({tm}x{tn} tiles)", "gemm", 8192, tm, tn))
    # the CTA pair (num_ctas=2: 256 x 128 tiles, 128 x 128 ones beside "gemm f16 8192^3", and
    # 256 x 256 with two consumer warp groups per CTA: section 21)
    for s, tm, tn in (
        (4096, 256, 128),
        (8192, 256, 128),
        (8192, 128, 128),
        (8192, 256, 256),
        (8192, 128, 256),
    ):
        out.append(
            _f16_gemm(f"gemm f16 {s}^3 num_ctas=2 ({tm}x{tn} tiles)", "gemm_pair", s, tm, tn)
        )
    # C as the initial value (docs/pipelines.md section 29): the async path since 2026-11-29
    s, (tm, tn, tk) = 8192, GEMM_TILES["f16"]
    for name, kernel, (tm, tn) in (
        (f"gemm f16 {s}^3 C = Cin + A B", "gemm_acc", (tm, tn)),
        (f"gemm f16 {s}^3 C = Cin + A B num_ctas=2 (256x128 tiles)", "gemm_acc_pair", (256, 128)),
    ):
        out.append(
            PerfCase(
                name,
                kernel,
                [("A", (s, s), "f16"), ("B", (s, s), "f16"), ("Cin", (s, s), "f16")]
                + [("C", (s, s), "f16"), ("TM", tm), ("TN", tn), ("TK", tk)],
                (s // tm, s // tn, 1),
                2 * s**3,
                2e-2,
                "addmm",
            )
        )
    # a language-model head: 32,001 columns, rows of 64,002 bytes (no 4-byte multiple), so no
    # TMA for B or C: the producer warp group's threads copy B (docs/pipelines.md section 43)
    out.append(_f16_mnk("gemm f16 LM head 4096x32001x4096", 4096, 32001, 4096))
    # fp8 in, f16 out, beside cuBLASLt: B as K x N (both compilers transpose 8-bit B in shared
    # memory for wgmma) and as B^T (N x K, K contiguous: the layout torch._scaled_mm takes, no
    # transposes), B^T also with 256 x 128 tiles on one CTA (two consumer warp groups)
    tm, tn, tk = GEMM_TILES["e4m3"]
    for kernel, b, s, (m, n) in (
        ("gemm", "B", 4096, (tm, tn)),
        ("gemm", "B", 8192, (tm, tn)),
        ("gemm_bt", "BT", 4096, (tm, tn)),
        ("gemm_bt", "BT", 8192, (tm, tn)),
        ("gemm_bt", "BT", 8192, (256, 128)),
    ):
        name = f"gemm e4m3 {s}^3{' B^T' if b == 'BT' else ''} (f16 out)"
        out.append(
            PerfCase(
                name + (f" ({m}x{n} tiles)" if (m, n) != (tm, tn) else ""),
                kernel,
                [("A", (s, s), "e4m3"), (b, (s, s), "e4m3"), ("C", (s, s), "f16")]
                + [("TM", m), ("TN", n), ("TK", tk)],
                (s // m, s // n, 1),
                2 * s**3,
                2e-2,
                "scaled_mm",
            )
        )
    # f32 in and out, the products in tf32, beside cuBLAS's tf32 GEMM (torch.matmul with
    # allow_tf32): A's fragments rounded in registers (docs/pipelines.md section 55)
    tm, tn, tk = GEMM_TILES["tf32"]
    for s in (4096, 8192):
        out.append(
            PerfCase(
                f"gemm tf32 {s}^3 (f32 out)",
                "gemm_tf32",
                [("A", (s, s), "f32"), ("B", (s, s), "f32"), ("C", (s, s), "f32")]
                + [("TM", tm), ("TN", tn), ("TK", tk)],
                (s // tm, s // tn, 1),
                2 * s**3,
                2e-2,
                "matmul_tf32",
            )
        )
    s = 4096
    out.append(
        PerfCase(
            f"gemm e4m3 block-scaled {s}^3 (f32 out)",
            "gemm_fp8_blockscaled",
            [
                ("A", (s, s), "e4m3"),
                ("B", (s, s), "e4m3"),
                ("SA", (s, s // 128), "f32"),
                ("SB", (s // 128, s), "f32"),
                ("C", (s, s), "f32"),
                ("TM", 128),
                ("TN", 128),
                ("TK", 128),
            ],
            (s // 128, s // 128, 1),
            2 * s**3,
            2e-2,
            None,
        )
    )
    # the last: the loop split at the diagonal as cuTile splits TileGym's FMHA (two K loops on
    # one ring: docs/pipelines.md section 23)
    for heads, seq, d, tn, kernel in (
        (16, 4096, 64, 64, "attention_causal_fwd"),
        (16, 8192, 64, 64, "attention_causal_fwd"),
        (16, 8192, 128, 128, "attention_causal_fwd"),
        (16, 8192, 64, 64, "attention_causal_split"),  # each loop overlapped (section 24)
        (16, 8192, 128, 128, "attention_causal_split"),
        # TileGym Gemma's form: 1-d running statistics, counter-indexed K/V (section 24)
        (16, 8192, 128, 128, "attention_causal_gemma_form"),
    ):
        label = "" if d == 64 else f" (128x{tn} tiles)"
        split = {
            "attention_causal_split": " split at the diagonal",
            "attention_causal_gemma_form": " in Gemma's form",
        }.get(kernel, "")
        out.append(
            PerfCase(
                f"attention causal fwd{split} h{heads} s{seq} d{d}{label}",
                kernel,
                [
                    ("Q", (heads, seq, d), "f16"),
                    ("K", (heads, d, seq), "f16"),
                    ("V", (heads, seq, d), "f16"),
                    ("Out", (heads, seq, d), "f16"),
                    ("qk_scale", 1.0 / math.sqrt(d)),
                    ("TM", 128),
                    ("TN", tn),
                    ("D", d),
                ],
                (seq // 128, heads, 1),
                4 * heads * seq * seq * d // 2,  # causal: half of QK^T and of PV
                2e-2,
                "sdpa",
            )
        )
    # the same with 256-row Q tiles and num_ctas=2: the rows divided between the CTAs of a
    # cluster (section 40), K and V multicast to both, as tileiras builds it
    heads, seq, d = 16, 8192, 128
    out.append(
        PerfCase(
            f"attention causal fwd h{heads} s{seq} d{d} num_ctas=2 (256x128 tiles)",
            "attention_causal_fwd_pair",
            [
                ("Q", (heads, seq, d), "f16"),
                ("K", (heads, d, seq), "f16"),
                ("V", (heads, seq, d), "f16"),
                ("Out", (heads, seq, d), "f16"),
                ("qk_scale", 1.0 / math.sqrt(d)),
                ("TM", 256),
                ("TN", 128),
                ("D", d),
            ],
            (seq // 256, heads, 1),
            4 * heads * seq * seq * d // 2,
            2e-2,
            "sdpa",
        )
    )
    # grouped-query attention backward, dK dV (TileGym's form; docs/pipelines.md section 26):
    # 32 query heads on 8 K/V heads, 128-row K/V tiles, 64-row Q tiles; no library baseline
    # (SDPA's backward also computes dQ)
    heads, group, seq, d = 32, 4, 4096, 128
    kv = heads // group
    out.append(
        PerfCase(
            f"attention bwd dK dV GQA h{heads}/{kv} s{seq} d{d}",
            "attention_bwd_dkdv_gqa",
            [
                ("Q", (heads, seq, d), "f16"),
                ("K", (kv, seq, d), "f16"),
                ("V", (kv, seq, d), "f16"),
                ("dO", (heads, seq, d), "f16"),
                ("dK", (kv, seq, d), "f16"),
                ("dV", (kv, seq, d), "f16"),
                ("LSE", (heads * seq,), "f32"),
                ("Delta", (heads * seq,), "f32"),
                ("qk_scale", 1.0 / math.sqrt(d)),
                ("G", group),
                ("TM", 64),
                ("TN", 128),
                ("D", d),
            ],
            (seq // 128, kv, 1),
            4 * heads * seq * seq * d,  # 4 dots of 2 S^2 D flops each, causal: half
            2e-2,
            None,
        )
    )
    return out


def _np_dtype(dt: str):
    if dt in ("f16", "f32"):
        return {"f16": np.float16, "f32": np.float32}[dt]
    import ml_dtypes

    return {"bf16": ml_dtypes.bfloat16, "e4m3": ml_dtypes.float8_e4m3fn}[dt]


def numpy_args(case: PerfCase) -> tuple:
    """Zero-filled NumPy arrays with the case's shapes and dtypes (for the signature)."""
    return tuple(
        np.zeros(a[1], _np_dtype(a[2])) if len(a) == 3 else _scalar(a[1]) for a in case.args
    )


def _scalar(v):
    return v  # a Python float: the launcher makes it an f32 scalar, as for ``ct.launch`` users


def torch_args(case: PerfCase, seed: int = 0) -> tuple:
    """The launch's arguments on the GPU: random inputs (scaled so that fp8 and the softmax stay
    in range), zero outputs, the scalars and constants."""
    import torch

    g = torch.Generator(device="cuda").manual_seed(seed)
    tdt = {
        "f16": torch.float16,
        "bf16": torch.bfloat16,
        "f32": torch.float32,
        "e4m3": torch.float8_e4m3fn,
    }
    outputs = {"C", "Out", "dK", "dV"}
    vals = []
    for a in case.args:
        if len(a) == 2:
            vals.append(_scalar(a[1]))
            continue
        name, shape, dt = a
        if name in outputs:
            vals.append(torch.zeros(shape, dtype=tdt[dt], device="cuda"))
        elif name in ("SA", "SB"):
            e = torch.randint(-2, 3, shape, generator=g, device="cuda")
            vals.append((2.0**e).to(torch.float32))
        else:
            x = torch.randn(shape, generator=g, device="cuda")
            vals.append((x * (0.5 if dt != "e4m3" else 1.0)).to(tdt[dt]))
    return tuple(vals)


def reference_kind(case: PerfCase) -> str:
    """What ``reference`` computes for the case's kernel (a num_ctas=2 form as its kernel)."""
    kernel = case.kernel.removesuffix("_pair")
    if kernel.startswith("attention_causal"):
        return "attention_causal"
    if kernel == "gemm_tf32":  # (checked against the f32 product)
        return "gemm"
    if kernel in ("gemm", "gemm_bt", "gemm_acc", "gemm_fp8_blockscaled", "attention_bwd_dkdv_gqa"):
        return kernel
    raise ValueError(f"no reference for kernel {case.kernel}")


def reference(case: PerfCase, args: tuple):
    """The expected output (f32), from torch in f32 on the GPU."""
    import torch

    kind = reference_kind(case)
    if kind == "gemm":
        a, b = args[0].float(), args[1].float()
        with _no_tf32():
            return a @ b
    if kind == "gemm_bt":
        a, bt = args[0].float(), args[1].float()
        with _no_tf32():
            return a @ bt.T
    if kind == "gemm_acc":
        a, b = args[0].float(), args[1].float()
        with _no_tf32():
            return args[2].float() + a @ b
    if kind == "gemm_fp8_blockscaled":
        a, b, sa, sb = (x.float() for x in args[:4])
        ref = torch.zeros(a.shape[0], b.shape[1], device="cuda")
        with _no_tf32():
            for kk in range(a.shape[1] // 128):
                part = a[:, kk * 128 : (kk + 1) * 128] @ b[kk * 128 : (kk + 1) * 128]
                ref += part * sa[:, kk : kk + 1] * sb[kk : kk + 1, :]
        return ref
    if kind == "attention_causal":
        q, kt, v = args[0].float(), args[1].float(), args[2].float()
        out = torch.empty_like(q)
        for h in range(q.shape[0]):  # per head: the S x S scores of all heads at once are large
            with _no_tf32():
                s = (q[h] @ kt[h]) * float(args[4])
            s = s.masked_fill(~torch.ones_like(s, dtype=torch.bool).tril(), float("-inf"))
            out[h] = torch.softmax(s, dim=-1) @ v[h]
        return out
    if kind == "attention_bwd_dkdv_gqa":  # dV (the output checked)
        q, do, lse = args[0].float(), args[3].float(), args[6].float()
        group = q.shape[0] // args[1].shape[0]
        seq = q.shape[1]
        scale = float(args[8]) * 1.4426950408889634
        dv = torch.zeros_like(args[2], dtype=torch.float32)
        keep = torch.ones(seq, seq, dtype=torch.bool, device="cuda").triu()  # key <= query
        for qh in range(q.shape[0]):
            h = qh // group
            with _no_tf32():
                s = args[1][h].float() @ q[qh].T * scale
            p = torch.exp2(s - lse[qh * seq : (qh + 1) * seq][None, :]).masked_fill(~keep, 0.0)
            with _no_tf32():
                dv[h] += p.half().float() @ do[qh]
        return dv
    raise AssertionError(kind)


def output_index(case: PerfCase) -> int:
    names = ("dV",) if case.kernel == "attention_bwd_dkdv_gqa" else ("C", "Out")
    return next(i for i, a in enumerate(case.args) if a[0] in names)


def baseline(case: PerfCase, args: tuple):
    """(callable running the library's version of the case, what it is) or (None, why)."""
    import torch

    if case.baseline == "matmul":
        a, b = args[0], args[1]
        return (lambda: torch.matmul(a, b)), f"cuBLAS (torch.matmul, {a.dtype} out)"
    if case.baseline == "matmul_tf32":  # f32 in and out, the products in tf32

        def run_tf32():
            old = torch.backends.cuda.matmul.allow_tf32
            torch.backends.cuda.matmul.allow_tf32 = True
            try:
                return torch.matmul(args[0], args[1])
            finally:
                torch.backends.cuda.matmul.allow_tf32 = old

        return run_tf32, "cuBLAS tf32 (torch.matmul, allow_tf32, f32 out)"
    if case.baseline == "addmm":  # C = Cin + A B
        a, b, c = args[0], args[1], args[2]
        return (lambda: torch.addmm(c, a, b)), f"cuBLAS (torch.addmm, {a.dtype} out)"
    if case.baseline == "scaled_mm":
        # cuBLASLt wants B column-major: B^T's own storage, else a transposed copy of B
        a = args[0]
        b = args[1].t() if case.kernel == "gemm_bt" else args[1].t().contiguous().t()
        one = torch.ones((), device="cuda")

        def run():  # fast accumulation: no promotion to f32 every few k-steps, as our kernels
            return torch._scaled_mm(a, b, one, one, out_dtype=torch.float16, use_fast_accum=True)

        try:
            run()
        except Exception as e:  # noqa: BLE001 - reported as the baseline's absence
            return None, f"torch._scaled_mm failed: {type(e).__name__}: {e}"[:200]
        return run, "cuBLASLt fp8 (torch._scaled_mm, fast accum, f16 out)"
    if case.baseline == "sdpa":
        import torch.nn.functional as F

        q = args[0][None]
        k = args[1].transpose(1, 2).contiguous()[None]
        v = args[2][None]
        return (
            lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)
        ), "torch SDPA (flash backend), is_causal"
    return None, "no library baseline"


class _no_tf32:
    def __enter__(self):
        import torch

        self.old = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False

    def __exit__(self, *exc):
        import torch

        torch.backends.cuda.matmul.allow_tf32 = self.old
