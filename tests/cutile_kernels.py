"""cuTile Python kernels (public ``cuda.tile`` API) covering the features of the corpus in
../shared/corpus/cutile (vec add, softmax, layernorm, reductions, scans, casts, gather/scatter,
atomics, control flow, math, mma ...). Each entry of :func:`kernels` is exported by
tests/test_cutile_e2e.py through ``tilegen-tileiras`` (and through NVIDIA's tileiras, to prove it
is valid cuTile). Every corpus kernel has a kernel of the same name reproducing its feature set
(parameters, dtypes, tile sizes, calling convention, hints); where a simpler kernel already had
the corpus name, the full version is ``<name>_full``. The corpus kernel -> kernels table is in
tests/test_cutile_e2e.py. ``uint_floordiv_bug`` reproduces the corpus's deliberately invalid
kernel (``KernelCase.invalid``): a conforming compiler must refuse it.

Importing this module needs ``cuda-tile``; :func:`kernels` builds the table on demand so that a
test file can skip cleanly when the package is missing.
"""

from dataclasses import dataclass

import numpy as np

NEG_INF = float("-inf")


@dataclass
class KernelCase:
    name: str
    kernel: object  # a ``ct.kernel``
    params: list  # ParameterConstraint | constant value, one per kernel parameter
    feature: str  # what it exercises (corpus feature)
    calling_convention: str = "cutile_python_v1"  # name of a CallingConvention constructor
    #: set for a deliberately invalid kernel: the verifier message tileiras refuses it with
    invalid: str | None = None


def kernels() -> dict[str, KernelCase]:
    import cuda.tile as ct
    from cuda.tile.compilation import ArrayConstraint

    def arr(dtype, ndim=1, index=ct.int32, shape_constant=None):
        return ArrayConstraint(
            dtype,
            ndim,
            index_dtype=index,
            stride_lower_bound_incl=0,
            alias_groups=(),
            may_alias_internally=False,
            stride_constant=(None,) * (ndim - 1) + (1,),
            base_addr_divisible_by=16,
            shape_constant=shape_constant,
        )

    f32, f16, i32 = ct.float32, ct.float16, ct.int32
    cases: list[KernelCase] = []

    def case(feature, *params, conv="cutile_python_v1", invalid=None, **kernel_options):
        def wrap(fn):
            k = ct.kernel(fn, **kernel_options)
            cases.append(KernelCase(fn.__name__, k, list(params), feature, conv, invalid))
            return k

        return wrap

    # ---- elementwise (what codegen handled first)
    @case("1D f32 add, tail tile", arr(f32), arr(f32), arr(f32), 256)
    def vec_add(a, b, c, TILE: ct.Constant[int]):
        bid = ct.bid(0)
        x = ct.load(a, index=(bid,), shape=(TILE,))
        y = ct.load(b, index=(bid,), shape=(TILE,))
        ct.store(c, index=(bid,), tile=x + y)

    @case("1D f32 sub/mul", arr(f32), arr(f32), arr(f32), 128)
    def vec_mul_sub(a, b, c, TILE: ct.Constant[int]):
        bid = ct.bid(0)
        x = ct.load(a, index=(bid,), shape=(TILE,))
        y = ct.load(b, index=(bid,), shape=(TILE,))
        ct.store(c, index=(bid,), tile=x * y - x)

    @case("1D i32 add", arr(i32), arr(i32), arr(i32), 256)
    def vec_add_i32(a, b, c, TILE: ct.Constant[int]):
        bid = ct.bid(0)
        x = ct.load(a, index=(bid,), shape=(TILE,))
        y = ct.load(b, index=(bid,), shape=(TILE,))
        ct.store(c, index=(bid,), tile=x + y)

    @case("2D f32 add, 2D grid", arr(f32, 2), arr(f32, 2), arr(f32, 2), 16, 32)
    def add2d(a, b, c, TM: ct.Constant[int], TN: ct.Constant[int]):
        i, j = ct.bid(0), ct.bid(1)
        x = ct.load(a, index=(i, j), shape=(TM, TN))
        y = ct.load(b, index=(i, j), shape=(TM, TN))
        ct.store(c, index=(i, j), tile=x + y)

    @case("scalar parameter", arr(f32), arr(f32), ct.compilation.ScalarConstraint(f32), 256)
    def axpy(x, y, alpha, TILE: ct.Constant[int]):
        bid = ct.bid(0)
        a = ct.load(x, index=(bid,), shape=(TILE,))
        b = ct.load(y, index=(bid,), shape=(TILE,))
        ct.store(y, index=(bid,), tile=a * alpha + b)

    # ---- math
    @case("exp/sqrt/sin/abs/floor f32", arr(f32), arr(f32), 256)
    def unary_math(a, b, TILE: ct.Constant[int]):
        bid = ct.bid(0)
        x = ct.load(a, index=(bid,), shape=(TILE,))
        y = ct.exp(x) + ct.sqrt(ct.abs(x)) + ct.sin(x) + ct.floor(x)
        ct.store(b, index=(bid,), tile=y)

    @case("f64 div/log", arr(ct.float64), arr(ct.float64), 64)
    def math_f64(a, b, TILE: ct.Constant[int]):
        bid = ct.bid(0)
        x = ct.load(a, index=(bid,), shape=(TILE,))
        ct.store(b, index=(bid,), tile=ct.log(x) / (x + 1.0))

    @case("i32 bitwise/shift/floordiv", arr(i32), arr(i32), arr(i32), 128)
    def int_ops(a, b, c, TILE: ct.Constant[int]):
        bid = ct.bid(0)
        x = ct.load(a, index=(bid,), shape=(TILE,))
        y = ct.load(b, index=(bid,), shape=(TILE,))
        ct.store(c, index=(bid,), tile=((x & y) ^ (x << 2)) + x // (ct.abs(y) + 1))

    @case("compare/select (where), isnan", arr(f32), arr(f32), arr(f32), 128)
    def compare_select(a, b, c, TILE: ct.Constant[int]):
        bid = ct.bid(0)
        x = ct.load(a, index=(bid,), shape=(TILE,))
        y = ct.load(b, index=(bid,), shape=(TILE,))
        z = ct.where(x > y, x, y)
        ct.store(c, index=(bid,), tile=ct.where(ct.isnan(x), 0.0, z))

    @case("casts f32->f16->f32, i32->f32", arr(f32), arr(i32), arr(f16), arr(f32), 128)
    def casts(a, b, c, d, TILE: ct.Constant[int]):
        bid = ct.bid(0)
        x = ct.load(a, index=(bid,), shape=(TILE,))
        n = ct.load(b, index=(bid,), shape=(TILE,))
        h = ct.astype(x, f16)
        ct.store(c, index=(bid,), tile=h)
        ct.store(d, index=(bid,), tile=ct.astype(h, f32) + ct.astype(n, f32))

    @case("arange/full (iota)", arr(i32), 128)
    def iota(a, TILE: ct.Constant[int]):
        bid = ct.bid(0)
        r = ct.arange(TILE, dtype=i32) + ct.full((TILE,), 7, i32)
        ct.store(a, index=(bid,), tile=r + bid * TILE)

    # ---- reductions / scans / normalisations
    @case("row sum/max reductions", arr(f32, 2), arr(f32), arr(f32), 16, 64)
    def reduce_rows(a, s, m, TM: ct.Constant[int], TN: ct.Constant[int]):
        bid = ct.bid(0)
        x = ct.load(a, index=(bid, 0), shape=(TM, TN))
        ct.store(s, index=(bid,), tile=ct.sum(x, axis=1))
        ct.store(m, index=(bid,), tile=ct.max(x, axis=1))

    @case("row softmax, padded with -inf", arr(f32, 2), arr(f32, 2), 4, 128)
    def softmax(a, b, TM: ct.Constant[int], TN: ct.Constant[int]):
        bid = ct.bid(0)
        x = ct.load(a, index=(bid, 0), shape=(TM, TN), padding_mode=ct.PaddingMode.NEG_INF)
        x = x - ct.max(x, axis=1, keepdims=True)
        e = ct.exp(x)
        ct.store(b, index=(bid, 0), tile=e / ct.sum(e, axis=1, keepdims=True))

    @case("layernorm f16 io / f32 math", arr(f16, 2), arr(f16, 2), 2, 256)
    def layernorm(a, b, TM: ct.Constant[int], TN: ct.Constant[int]):
        bid = ct.bid(0)
        x = ct.astype(ct.load(a, index=(bid, 0), shape=(TM, TN)), f32)
        mean = ct.sum(x, axis=1, keepdims=True) / TN
        d = x - mean
        var = ct.sum(d * d, axis=1, keepdims=True) / TN
        ct.store(b, index=(bid, 0), tile=ct.astype(d * ct.rsqrt(var + 1e-5), f16))

    @case("cumsum scan", arr(f32, 2), arr(f32, 2), 8, 64)
    def scan_cumsum(a, b, TM: ct.Constant[int], TN: ct.Constant[int]):
        bid = ct.bid(0)
        x = ct.load(a, index=(bid, 0), shape=(TM, TN))
        ct.store(b, index=(bid, 0), tile=ct.cumsum(x, axis=1))

    @case("transpose 2D", arr(f32, 2), arr(f32, 2), 32, 32)
    def transpose2d(a, b, TM: ct.Constant[int], TN: ct.Constant[int]):
        i, j = ct.bid(0), ct.bid(1)
        x = ct.load(a, index=(i, j), shape=(TM, TN))
        ct.store(b, index=(j, i), tile=ct.permute(x, (1, 0)))

    # ---- control flow
    @case(
        "if/else on runtime scalar and block id",
        arr(f32),
        arr(f32),
        ct.compilation.ScalarConstraint(i32),
        128,
    )
    def control_if(a, b, flag, TILE: ct.Constant[int]):
        bid = ct.bid(0)
        x = ct.load(a, index=(bid,), shape=(TILE,))
        if flag > 0:
            y = x * 2.0
        elif bid == 0:
            y = x + 1.0
        else:
            y = x
        ct.store(b, index=(bid,), tile=y)

    @case("for loop over row tiles (column sum)", arr(f32, 2), arr(f32), 16, 64)
    def reduce_cols_loop(a, s, TM: ct.Constant[int], TN: ct.Constant[int]):
        bid = ct.bid(0)
        acc = ct.full((TN,), 0.0, f32)
        for i in range(ct.num_tiles(a, axis=0, shape=(TM, TN))):
            x = ct.load(a, index=(i, bid), shape=(TM, TN), padding_mode=ct.PaddingMode.ZERO)
            acc = acc + ct.sum(x, axis=0)
        ct.store(s, index=(bid,), tile=acc)

    # ---- memory: gather/scatter, atomics
    @case("gather + masked scatter", arr(f32), arr(i32), arr(f32), 128)
    def gather_scatter(a, idx, b, TILE: ct.Constant[int]):
        bid = ct.bid(0)
        i = ct.load(idx, index=(bid,), shape=(TILE,))
        v = ct.gather(a, i)
        ct.scatter(b, i, v * 2.0, mask=i >= 0)

    @case("atomic_add histogram", arr(i32), arr(i32), 128)
    def atomics(bins, hist, TILE: ct.Constant[int]):
        bid = ct.bid(0)
        b = ct.load(bins, index=(bid,), shape=(TILE,))
        ct.atomic_add(hist, b, ct.full((TILE,), 1, i32))

    # ---- mma
    @case("f16 x f16 -> f32 mma, K loop", arr(f16, 2), arr(f16, 2), arr(f32, 2), 64, 64, 32)
    def matmul_f16(a, b, c, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
        i, j = ct.bid(0), ct.bid(1)
        acc = ct.full((TM, TN), 0.0, f32)
        for k in range(ct.num_tiles(a, axis=1, shape=(TM, TK))):
            x = ct.load(a, index=(i, k), shape=(TM, TK), padding_mode=ct.PaddingMode.ZERO)
            y = ct.load(b, index=(k, j), shape=(TK, TN), padding_mode=ct.PaddingMode.ZERO)
            acc = ct.mma(x, y, acc)
        ct.store(c, index=(i, j), tile=acc)

    # ---- the rest of the corpus's feature set: one kernel per corpus kernel (same parameters,
    # tile sizes and ops as ../shared/corpus/cutile/manifest.json + out/<k>.mlir); a ``_full``
    # suffix marks the full version of a corpus kernel whose simpler namesake is above
    f64, i8, i64, u8 = ct.float64, ct.int8, ct.int64, ct.uint8
    S = ct.compilation.ScalarConstraint
    ZERO = ct.PaddingMode.ZERO

    @case("exp/log/sqrt/rsqrt/sin/tanh/abs/floor f32, 8 outputs", arr(f32), *[arr(f32)] * 8, 128)
    def unary_math_full(
        x, o_exp, o_log, o_sqrt, o_rsqrt, o_sin, o_tanh, o_abs, o_floor, TILE: ct.Constant[int]
    ):
        bid = ct.bid(0)
        t = ct.load(x, index=(bid,), shape=(TILE,))
        ct.store(o_exp, index=(bid,), tile=ct.exp(t))
        ct.store(o_log, index=(bid,), tile=ct.log(ct.abs(t) + 1.0))
        ct.store(o_sqrt, index=(bid,), tile=ct.sqrt(ct.abs(t)))
        ct.store(o_rsqrt, index=(bid,), tile=ct.rsqrt(ct.abs(t) + 1.0))
        ct.store(o_sin, index=(bid,), tile=ct.sin(t))
        ct.store(o_tanh, index=(bid,), tile=ct.tanh(t))
        ct.store(o_abs, index=(bid,), tile=ct.abs(t))
        ct.store(o_floor, index=(bid,), tile=ct.floor(t))

    @case(
        "cos/tan/sinh/cosh/exp2/log2/ceil/pow/div/floordiv/mod/min/max/neg f32",
        *[arr(f32)] * 10,
        128,
    )
    def more_math(
        x,
        y,
        o_cos,
        o_tan,
        o_sinh_cosh,
        o_exp2_log2,
        o_ceil,
        o_pow,
        o_div,
        o_misc,
        TILE: ct.Constant[int],
    ):
        bid = ct.bid(0)
        a = ct.load(x, index=(bid,), shape=(TILE,))
        b = ct.load(y, index=(bid,), shape=(TILE,))
        ct.store(o_cos, index=(bid,), tile=ct.cos(a))
        ct.store(o_tan, index=(bid,), tile=ct.tan(a * 0.5))
        ct.store(o_sinh_cosh, index=(bid,), tile=ct.sinh(a) - ct.cosh(b))
        ct.store(o_exp2_log2, index=(bid,), tile=ct.exp2(a) + ct.log2(b))
        ct.store(o_ceil, index=(bid,), tile=ct.ceil(a))
        ct.store(o_pow, index=(bid,), tile=ct.pow(b, a))
        ct.store(o_div, index=(bid,), tile=a / b + a // b + a % b)
        ct.store(o_misc, index=(bid,), tile=ct.maximum(a, -b) * ct.minimum(b, 1.5) - a * b + (-a))

    @case("f64 sqrt/div/exp/log/floor/fma", *[arr(f64)] * 4, 64)
    def math_f64_full(x, y, out_a, out_b, TILE: ct.Constant[int]):
        bid = ct.bid(0)
        a = ct.load(x, index=(bid,), shape=(TILE,))
        b = ct.load(y, index=(bid,), shape=(TILE,))
        ct.store(out_a, index=(bid,), tile=ct.sqrt(a * a + b * b) / (b + 1.0))
        ct.store(out_b, index=(bid,), tile=ct.exp(-a * 0.5) + ct.log(b) - ct.floor(a))

    @case("i32 and/or/xor/shl/shr/floordiv/mod/min/max/not/abs/neg", *[arr(i32)] * 11, 128)
    def int_ops_full(
        a,
        b,
        o_and,
        o_or,
        o_xor,
        o_shl,
        o_shr,
        o_div,
        o_rem,
        o_minmax,
        o_misc,
        TILE: ct.Constant[int],
    ):
        bid = ct.bid(0)
        x = ct.load(a, index=(bid,), shape=(TILE,))
        y = ct.load(b, index=(bid,), shape=(TILE,))
        ct.store(o_and, index=(bid,), tile=x & y)
        ct.store(o_or, index=(bid,), tile=x | y)
        ct.store(o_xor, index=(bid,), tile=x ^ y)
        ct.store(o_shl, index=(bid,), tile=x << (y & 7))
        ct.store(o_shr, index=(bid,), tile=x >> 3)
        ct.store(o_div, index=(bid,), tile=x // y)
        ct.store(o_rem, index=(bid,), tile=x % y)
        ct.store(o_minmax, index=(bid,), tile=ct.minimum(x, y) * 3 + ct.maximum(x, y))
        ct.store(o_misc, index=(bid,), tile=(~x) + ct.abs(y) - (-x))

    @case(
        "cmpf (all predicates), and/or on i1, select, isnan, bool->i8/i32",
        arr(f32),
        arr(f32),
        arr(f32),
        arr(i8),
        arr(i32),
        128,
    )
    def compare_select_full(a, b, o_where, o_mask, o_isnan, TILE: ct.Constant[int]):
        bid = ct.bid(0)
        x = ct.load(a, index=(bid,), shape=(TILE,))
        y = ct.load(b, index=(bid,), shape=(TILE,))
        ct.store(o_where, index=(bid,), tile=ct.where(x > y, x, y * 2.0))
        m = ((x >= 0.0) & (y < 0.5)) | (x == y) | ((x <= -0.5) & (y != 0.25))
        ct.store(o_mask, index=(bid,), tile=ct.astype(m, i8))
        ct.store(o_isnan, index=(bid,), tile=ct.astype(ct.isnan(x / y), i32))

    @case(
        "ftof f16/bf16/f64, ftoi i8/i32/u8, exti i64, itof",
        arr(f32),
        arr(i32),
        arr(f16),
        arr(ct.bfloat16),
        arr(f64),
        arr(i8),
        arr(i32),
        arr(i64),
        arr(u8),
        arr(f32),
        arr(f32),
        128,
    )
    def casts_full(
        x,
        k,
        o_f16,
        o_bf16,
        o_f64,
        o_i8,
        o_i32,
        o_i64,
        o_u8,
        o_itof,
        o_roundtrip,
        TILE: ct.Constant[int],
    ):
        bid = ct.bid(0)
        t = ct.load(x, index=(bid,), shape=(TILE,))
        n = ct.load(k, index=(bid,), shape=(TILE,))
        ct.store(o_f16, index=(bid,), tile=ct.astype(t, f16))
        ct.store(o_bf16, index=(bid,), tile=ct.astype(t, ct.bfloat16))
        ct.store(o_f64, index=(bid,), tile=ct.astype(t, f64))
        ct.store(o_i8, index=(bid,), tile=ct.astype(t, i8))
        ct.store(o_i32, index=(bid,), tile=ct.astype(t * 3.0, i32))
        ct.store(o_i64, index=(bid,), tile=ct.astype(n, i64) * 5)
        ct.store(o_u8, index=(bid,), tile=ct.astype(ct.abs(t), u8))
        ct.store(o_itof, index=(bid,), tile=ct.astype(n, f32))
        h = ct.astype(ct.astype(t, f16), f32) + ct.astype(ct.astype(t, ct.bfloat16), f32)
        ct.store(o_roundtrip, index=(bid,), tile=h + ct.astype(ct.astype(t, f64), f32) - t)

    @case(
        "bitcast f32<->i32, trunci i32->i8 / i64->i32, unsigned exti u8->i16/i32",
        arr(f32),
        arr(i64),
        arr(u8),
        arr(i32),
        arr(f32),
        arr(i8),
        arr(i32),
        arr(i32),
        128,
    )
    def bit_ops(x, k, u8s, o_bits, o_from_bits, o_trunc8, o_trunc32, o_ext, TILE: ct.Constant[int]):
        bid = ct.bid(0)
        t = ct.load(x, index=(bid,), shape=(TILE,))
        w = ct.load(k, index=(bid,), shape=(TILE,))
        b = ct.load(u8s, index=(bid,), shape=(TILE,))
        bits = ct.bitcast(t, i32)
        ct.store(o_bits, index=(bid,), tile=bits)
        ct.store(
            o_from_bits,
            index=(bid,),
            tile=ct.bitcast(bits ^ ct.full((TILE,), -2147483648, i32), f32),
        )
        ct.store(o_trunc8, index=(bid,), tile=ct.astype(bits, i8))
        ct.store(o_trunc32, index=(bid,), tile=ct.astype(w, i32))
        ct.store(
            o_ext, index=(bid,), tile=ct.astype(b, i32) * 3 + ct.astype(ct.astype(b, ct.int16), i32)
        )

    @case("pack_to_bytes / unpack_from_bytes (13.3+)", arr(i32), arr(u8), arr(i32), 64)
    def pack_bytes(x, o_bytes, o_back, TILE: ct.Constant[int]):
        bid = ct.bid(0)
        t = ct.load(x, index=(bid,), shape=(TILE,))
        b = ct.pack_to_bytes(t)
        ct.store(o_bytes, index=(bid,), tile=b)
        ct.store(
            o_back, index=(bid,), tile=ct.unpack_from_bytes(b + ct.full((4 * TILE,), 1, u8), i32)
        )

    @case(
        "row sum/max/min/argmax reductions",
        arr(f32, 2),
        arr(f32),
        arr(f32),
        arr(f32),
        arr(i32),
        16,
        128,
    )
    def reduce_rows_full(
        x, o_sum, o_max, o_min, o_argmax, TM: ct.Constant[int], TN: ct.Constant[int]
    ):
        bid = ct.bid(0)
        t = ct.load(x, index=(bid, 0), shape=(TM, TN))
        ct.store(o_sum, index=(bid,), tile=ct.sum(t, axis=1))
        ct.store(o_max, index=(bid,), tile=ct.max(t, axis=1))
        ct.store(o_min, index=(bid,), tile=ct.min(t, axis=1))
        ct.store(o_argmax, index=(bid,), tile=ct.astype(ct.argmax(t, axis=1), i32))

    @case(
        "for loop over row tiles, axis-0 sum, total to a scalar",
        arr(f32, 2),
        arr(f32),
        arr(f32),
        32,
        32,
    )
    def reduce_cols_loop_full(x, o_colsum, o_total, TM: ct.Constant[int], TN: ct.Constant[int]):
        bid = ct.bid(0)
        acc = ct.full((TN,), 0.0, f32)
        for i in range(ct.num_tiles(x, axis=0, shape=(TM, TN))):
            t = ct.load(x, index=(i, bid), shape=(TM, TN), padding_mode=ZERO)
            acc = acc + ct.sum(t, axis=0)
        ct.store(o_colsum, index=(bid,), tile=acc)
        ct.store(o_total, index=(bid,), tile=ct.reshape(ct.sum(acc), (1,)))

    @case(
        "cumsum f32, reverse int cumsum, custom scan (running max), cumprod axis 0",
        arr(f32, 2),
        arr(i32, 2),
        arr(f32, 2),
        arr(i32, 2),
        arr(f32, 2),
        arr(f32, 2),
        8,
        64,
    )
    def scan_cumsum_full(
        x, xi, o_cs, o_rcs_int, o_cummax, o_cumprod, TM: ct.Constant[int], TN: ct.Constant[int]
    ):
        bid = ct.bid(0)
        t = ct.load(x, index=(bid, 0), shape=(TM, TN))
        ti = ct.load(xi, index=(bid, 0), shape=(TM, TN))
        ct.store(o_cs, index=(bid, 0), tile=ct.cumsum(t, axis=1))
        ct.store(o_rcs_int, index=(bid, 0), tile=ct.cumsum(ti, axis=1, reverse=True))
        ct.store(o_cummax, index=(bid, 0), tile=ct.scan(t, 1, ct.maximum, NEG_INF))
        ct.store(o_cumprod, index=(bid, 0), tile=ct.cumprod(t * 0.1 + 1.0, axis=0))

    @case(
        "layernorm f16 io / f32 math, weight + bias, cutile_python_v2 with static N",
        arr(f16, 2, shape_constant=(None, 256)),
        arr(f16),
        arr(f16),
        arr(f16, 2),
        1e-5,
        4,
        256,
        conv="cutile_python_v2",
    )
    def layernorm_full(
        x, w, b, out, EPS: ct.Constant[float], TM: ct.Constant[int], TN: ct.Constant[int]
    ):
        bid = ct.bid(0)
        n = x.shape[1]
        t = ct.astype(ct.load(x, index=(bid, 0), shape=(TM, TN)), f32)
        mean = ct.sum(t, axis=1, keepdims=True) / n
        d = t - mean
        var = ct.sum(d * d, axis=1, keepdims=True) / n
        y = d * ct.rsqrt(var + EPS)
        wt = ct.astype(ct.load(w, index=(0,), shape=(TN,)), f32)
        bt = ct.astype(ct.load(b, index=(0,), shape=(TN,)), f32)
        ct.store(out, index=(bid, 0), tile=ct.astype(y * wt + bt, f16))

    @case(
        "reshape 1D->2D, transpose, reshape back, expand_dims",
        arr(f32),
        arr(f32),
        arr(f32, 2),
        8,
        16,
    )
    def reshape_expand(x, out, out_col, R: ct.Constant[int], C: ct.Constant[int]):
        bid = ct.bid(0)
        m = ct.reshape(ct.load(x, index=(bid,), shape=(R * C,)), (R, C))
        ct.store(out, index=(bid,), tile=ct.reshape(ct.transpose(m), (R * C,)))
        ct.store(out_col, index=(bid, 0), tile=ct.expand_dims(ct.sum(m, axis=1), 0))

    @case("cat along axis 0, extract sub-tiles", arr(f32), arr(f32), arr(f32), arr(f32, 2), 64)
    def cat_extract(a, b, o_cat, o_swap, TILE: ct.Constant[int]):
        bid = ct.bid(0)
        x = ct.load(a, index=(bid,), shape=(TILE,))
        y = ct.load(b, index=(bid,), shape=(TILE,))
        ct.store(o_cat, index=(bid,), tile=ct.cat((x, y), 0))
        lo = ct.extract(x, (0,), (TILE // 2,))
        hi = ct.extract(x, (1,), (TILE // 2,))
        swap = ct.cat((ct.reshape(hi, (1, TILE // 2)), ct.reshape(lo, (1, TILE // 2))), 0)
        ct.store(o_swap, index=(bid, 0), tile=swap)

    @case("arange with dtype/start/step (i32, f32, i64), full", arr(i32), arr(f32), arr(i64), 64)
    def iota_full(o_i32, o_f32, o_i64, TILE: ct.Constant[int]):
        bid = ct.bid(0)
        ct.store(o_i32, index=(bid,), tile=ct.arange(TILE, dtype=i32, start=bid * TILE, step=1) * 3)
        ct.store(
            o_f32,
            index=(bid,),
            tile=(ct.arange(TILE, dtype=f32) * 0.5 + 2.0) * ct.full((TILE,), 3.0, f32),
        )
        ct.store(o_i64, index=(bid,), tile=ct.arange(TILE, dtype=i64, start=0, step=2) * (bid + 1))

    @case("f32 inputs cast to tf32, mma f32 acc", arr(f32, 2), arr(f32, 2), arr(f32, 2), 64, 64, 32)
    def matmul_tf32(A, B, C, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
        i, j = ct.bid(0), ct.bid(1)
        acc = ct.full((TM, TN), 0.0, f32)
        for k in range(ct.num_tiles(A, axis=1, shape=(TM, TK))):
            x = ct.load(A, index=(i, k), shape=(TM, TK), padding_mode=ZERO)
            y = ct.load(B, index=(k, j), shape=(TK, TN), padding_mode=ZERO)
            acc = ct.mma(ct.astype(x, ct.tfloat32), ct.astype(y, ct.tfloat32), acc)
        ct.store(C, index=(i, j), tile=acc)

    @case("int8 x int8 -> int32 mmai", arr(i8, 2), arr(i8, 2), arr(i32, 2), 64, 64, 32)
    def matmul_int8(A, B, C, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
        i, j = ct.bid(0), ct.bid(1)
        acc = ct.full((TM, TN), 0, i32)
        for k in range(ct.num_tiles(A, axis=1, shape=(TM, TK))):
            x = ct.load(A, index=(i, k), shape=(TM, TK), padding_mode=ZERO)
            y = ct.load(B, index=(k, j), shape=(TK, TN), padding_mode=ZERO)
            acc = ct.mma(x, y, acc)
        ct.store(C, index=(i, j), tile=acc)

    @case("f64 mma (DMMA)", arr(f64, 2), arr(f64, 2), arr(f64, 2), 32, 32, 16)
    def matmul_f64(A, B, C, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
        i, j = ct.bid(0), ct.bid(1)
        acc = ct.full((TM, TN), 0.0, f64)
        for k in range(ct.num_tiles(A, axis=1, shape=(TM, TK))):
            x = ct.load(A, index=(i, k), shape=(TM, TK), padding_mode=ZERO)
            y = ct.load(B, index=(k, j), shape=(TK, TN), padding_mode=ZERO)
            acc = ct.mma(x, y, acc)
        ct.store(C, index=(i, j), tile=acc)

    fp8 = ct.float8_e4m3fn

    @case(
        "float8_e4m3fn mma, f32 acc (sm_89+; exported for sm_90)",
        arr(fp8, 2),
        arr(fp8, 2),
        arr(f32, 2),
        64,
        64,
        64,
    )
    def matmul_fp8(A, B, C, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
        i, j = ct.bid(0), ct.bid(1)
        acc = ct.full((TM, TN), 0.0, f32)
        for k in range(ct.num_tiles(A, axis=1, shape=(TM, TK))):
            x = ct.load(A, index=(i, k), shape=(TM, TK), padding_mode=ZERO)
            y = ct.load(B, index=(k, j), shape=(TK, TN), padding_mode=ZERO)
            acc = ct.mma(x, y, acc)
        ct.store(C, index=(i, j), tile=acc)

    @case(
        "3D batched f16 matmul via reshape + mma, 3D grid",
        arr(f16, 3),
        arr(f16, 3),
        arr(f16, 3),
        32,
        32,
        32,
    )
    def batched_matmul(A, B, C, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
        i, j, bt = ct.bid(0), ct.bid(1), ct.bid(2)
        acc = ct.full((TM, TN), 0.0, f32)
        for k in range(ct.num_tiles(A, axis=2, shape=(1, TM, TK))):
            x = ct.load(A, index=(bt, i, k), shape=(1, TM, TK), padding_mode=ZERO)
            y = ct.load(B, index=(bt, k, j), shape=(1, TK, TN), padding_mode=ZERO)
            acc = ct.mma(ct.reshape(x, (TM, TK)), ct.reshape(y, (TK, TN)), acc)
        ct.store(C, index=(bt, i, j), tile=ct.reshape(ct.astype(acc, f16), (1, TM, TN)))

    @case(
        "flash attention: online softmax, exp2, 2 mma per KV tile, occupancy=2",
        arr(f16, 3),
        arr(f16, 3),
        arr(f16, 3),
        arr(f16, 3),
        S(f32),
        64,
        64,
        64,
        occupancy=2,
    )
    def flash_attention(
        Q, K, V, Out, qk_scale, TM: ct.Constant[int], TN: ct.Constant[int], D: ct.Constant[int]
    ):
        i, h = ct.bid(0), ct.bid(1)
        q = ct.reshape(ct.load(Q, index=(h, i, 0), shape=(1, TM, D)), (TM, D))
        m_i = ct.full((TM, 1), NEG_INF, f32)
        l_i = ct.full((TM, 1), 0.0, f32)
        acc = ct.full((TM, D), 0.0, f32)
        scale = qk_scale * 1.4426950408889634
        for j in range(ct.num_tiles(V, axis=1, shape=(1, TN, D))):
            k = ct.reshape(ct.load(K, index=(h, 0, j), shape=(1, D, TN)), (D, TN))
            qk = ct.mma(q, k, ct.full((TM, TN), 0.0, f32))
            m_new = ct.maximum(m_i, ct.max(qk, axis=1, keepdims=True) * scale)
            p = ct.exp2(qk * scale - m_new)
            alpha = ct.exp2(m_i - m_new)
            l_i = l_i * alpha + ct.sum(p, axis=1, keepdims=True)
            v = ct.reshape(ct.load(V, index=(h, j, 0), shape=(1, TN, D)), (TN, D))
            acc = ct.mma(ct.astype(p, f16), v, acc * alpha)
            m_i = m_new
        ct.store(Out, index=(h, i, 0), tile=ct.reshape(ct.astype(acc / l_i, f16), (1, TM, D)))

    @case(
        "nested if/elif/else on runtime scalar + block id (Python %)",
        arr(f32),
        arr(f32),
        S(i32),
        128,
    )
    def control_if_full(x, out, mode, TILE: ct.Constant[int]):
        bid = ct.bid(0)
        t = ct.load(x, index=(bid,), shape=(TILE,))
        if mode > 0:
            if bid % 2 == 0:
                y = t * 2.0
            else:
                y = t - 1.0
        elif mode == 0:
            y = ct.full((TILE,), 0.0, f32)
        else:
            y = -t
        ct.store(out, index=(bid,), tile=y)

    @case("strided for with continue/break, nested loops", arr(f32), arr(f32), S(i32), 64)
    def for_loops(x, out, limit, TILE: ct.Constant[int]):
        bid = ct.bid(0)
        acc = ct.full((TILE,), 0.0, f32)
        for i in range(bid, ct.num_tiles(x, axis=0, shape=(TILE,)), 2):
            if i == 3:
                continue
            acc = acc + ct.load(x, index=(i,), shape=(TILE,), padding_mode=ZERO)
            if i >= limit:
                break
        for i in range(3):
            for j in range(2):
                acc = acc + ct.astype(i * 2 + j, f32)
        ct.store(out, index=(bid,), tile=acc)

    @case(
        "atomic add (histogram) / max / cas / xor / or / and / min / xchg", *[arr(i32)] * 5, 256, 16
    )
    def atomics_full(data, hist, gmax, flags, o_old, TILE: ct.Constant[int], NB: ct.Constant[int]):
        bid = ct.bid(0)
        d = ct.load(data, index=(bid,), shape=(TILE,), padding_mode=ZERO)
        valid = ct.arange(TILE, dtype=i32) + bid * TILE < data.shape[0]
        ct.atomic_add(hist, ct.where(valid, d % NB, NB), ct.full((TILE,), 1, i32))
        ct.atomic_max(gmax, ct.full((TILE,), 0, i32), ct.where(valid, d, 0))
        old = ct.atomic_cas(flags, bid, 0, bid + 1)
        ct.store(o_old, index=(bid,), tile=ct.reshape(old, (1,)))
        ct.atomic_xor(flags, bid, 256)
        ct.atomic_or(flags, bid, 4096)
        ct.atomic_and(flags, bid, 65535)
        ct.atomic_min(flags, bid + ct.num_blocks(0), bid * 10)
        ct.atomic_xchg(flags, bid + 2 * ct.num_blocks(0), bid * 7)

    @case(
        "gather (plain + masked with padding value), masked scatter",
        arr(f32),
        arr(i32),
        arr(i32),
        arr(f32),
        arr(f32),
        arr(f32),
        128,
    )
    def gather_scatter_full(x, idx, perm, o_gather, o_masked, o_scatter, TILE: ct.Constant[int]):
        bid = ct.bid(0)
        i = ct.load(idx, index=(bid,), shape=(TILE,))
        ct.store(o_gather, index=(bid,), tile=ct.gather(x, i))
        ct.store(o_masked, index=(bid,), tile=ct.gather(x, i, mask=i % 3 != 0, padding_value=-1.0))
        p = ct.load(perm, index=(bid,), shape=(TILE,))
        pos = ct.arange(TILE, dtype=i32) + bid * TILE
        v = ct.load(x, index=(bid,), shape=(TILE,)) * 10.0
        ct.scatter(o_scatter, p, v, mask=pos < x.shape[0])

    @case(
        "Array.get_raw_memory() load_offset/store_offset with mask", arr(f32), arr(f32), S(i32), 128
    )
    def raw_pointer(x, out, n, TILE: ct.Constant[int]):
        bid = ct.bid(0)
        offs = ct.arange(TILE, dtype=i32) + bid * TILE
        mask = offs < n
        v = x.get_raw_memory().load_offset(offs * 2 + 1, mask=mask, padding_value=0.0)
        out.get_raw_memory().store_offset(offs, v * v, mask=mask)

    @case("ct.printf / ct.print / ct.assert_", arr(i32), arr(i32))
    def print_kernel(x, out):
        t = ct.load(x, index=(0,), shape=(4,))
        s = ct.sum(t)
        ct.printf("sum=%d\n", s)
        first = ct.reshape(ct.extract(t, (0,), (1,)), ())
        last = ct.reshape(ct.extract(t, (3,), (1,)), ())
        ct.print(f"first={first} last={last}")
        ct.assert_(s > -1000000, "sum too small")
        ct.store(out, index=(0,), tile=t * 2)

    @case(
        "atan2, insert, gdc wait/launch_dependents, check_bounds=False, tiled-view atomic_store_add, traversal_steps, exp approx, Array.slice (13.2-13.4)",
        *[arr(f32)] * 7,
        64,
    )
    def newer_ops(x, y, out_atan2, out_ins, acc, out_nb, out_misc, TILE: ct.Constant[int]):
        bid = ct.bid(0)
        tv = x.tiled_view((TILE,), padding_mode=ZERO, traversal_steps=(TILE // 2,))
        t = tv.load((2 * bid + 1,))
        ct.store(out_misc, index=(bid,), tile=ct.exp(t, rounding_mode=ct.RoundingMode.APPROX))
        ct.grid_dependency_control_wait()
        a = ct.load(x, index=(bid,), shape=(TILE,), check_bounds=False)
        b = ct.load(y, index=(bid,), shape=(TILE,), check_bounds=False)
        ct.store(out_atan2, index=(bid,), tile=ct.atan2(a, b))
        ct.store(out_ins, index=(bid,), tile=ct.insert(a, (1,), ct.full((TILE // 2,), 7.0, f32)))
        acc.tiled_view((TILE,)).atomic_store_add((0,), a)
        sub = x.slice(axis=0, start=bid * TILE + 1, stop=x.shape[0])
        ct.store(
            out_nb, index=(bid,), tile=ct.load(sub, index=(0,), shape=(TILE,), padding_mode=ZERO)
        )
        ct.grid_dependency_control_launch_dependents()

    @case(
        "load/store_advanced_indexing: gather/scatter view (13.3+)",
        arr(f32, 2),
        arr(i32),
        arr(f32, 2),
        S(i32),
        8,
        16,
    )
    def advanced_indexing(x, rows, out, col0, TR: ct.Constant[int], TC: ct.Constant[int]):
        r = ct.load(rows, index=(0,), shape=(TR,))
        t = ct.load_advanced_indexing(x, (r, ct.Slice(col0, TC)), padding_mode=ZERO)
        ct.store(out, index=(0, 0), tile=t)
        ct.store_advanced_indexing(x, (r, ct.Slice(col0, TC)), -t)

    @case(
        "NEGATIVE: uint32 floordiv -> divi unsigned rounding<negative_inf>",
        *[arr(ct.uint32)] * 3,
        128,
        invalid="'cuda_tile.divi' op rounding mode 'negative_inf' is not allowed with 'unsigned' flag",
    )
    def uint_floordiv_bug(a, b, out, TILE: ct.Constant[int]):
        bid = ct.bid(0)
        x = ct.load(a, index=(bid,), shape=(TILE,))
        y = ct.load(b, index=(bid,), shape=(TILE,))
        ct.store(out, index=(bid,), tile=x // y)

    return {c.name: c for c in cases}


@dataclass
class LaunchCase:
    """Arguments and a NumPy reference for launching kernel ``kernel`` of :func:`kernels`
    (``tilegen.cutile.launch`` on the CPU, ``ct.launch`` on a GPU: bench/gpu_check.py)."""

    name: str  # a unique case name
    kernel: str  # a key of kernels()
    make: object  # rng -> (grid, args tuple incl. constants); arrays are NumPy
    expect: object  # args (before the launch) -> {argument index: expected array after it}
    rtol: float = 1e-5
    atol: float = 1e-6
    stdout: tuple = ()  # substrings the kernel's printf output must contain


def _softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _layernorm(x):
    x = x.astype(np.float32)
    d = x - x.mean(axis=1, keepdims=True)
    return (d / np.sqrt((d * d).mean(axis=1, keepdims=True) + 1e-5)).astype(np.float16)


def launch_cases() -> list[LaunchCase]:
    """Fifteen launches of twelve kernels of :func:`kernels` with inputs and NumPy references:
    tail tiles, 2-D grids, scalars, in-place updates, reductions, scans, gathers, atomics,
    control flow, an mma loop and printf."""
    f32, f16, i32 = np.float32, np.float16, np.int32

    def rnd(rng, shape, dtype=f32):
        return rng.standard_normal(shape).astype(dtype)

    def vec_add(rng):
        n = 1000  # four 256-wide tiles, the last one partial
        return (4,), (rnd(rng, n), rnd(rng, n), np.zeros(n, f32), 256)

    def vec_add_i32(rng):
        a, b = (rng.integers(-(2**30), 2**30, 512).astype(i32) for _ in range(2))
        return (2,), (a, b, np.zeros(512, i32), 256)

    def add2d(rng):
        return (2, 2), (rnd(rng, (32, 64)), rnd(rng, (32, 64)), np.zeros((32, 64), f32), 16, 32)

    def axpy(rng):
        return (2,), (rnd(rng, 512), rnd(rng, 512), 1.5, 256)

    def softmax(rng):
        return (3,), (rnd(rng, (10, 100)), np.zeros((10, 100), f32), 4, 128)

    def layernorm(rng):
        return (3,), (rnd(rng, (6, 256), f16), np.zeros((6, 256), f16), 2, 256)

    def reduce_rows(rng):
        return (3,), (rnd(rng, (40, 64)), np.zeros(40, f32), np.zeros(40, f32), 16, 64)

    def scan_cumsum(rng):
        return (2,), (rnd(rng, (16, 64)), np.zeros((16, 64), f32), 8, 64)

    def transpose2d(rng):
        return (2, 3), (rnd(rng, (64, 96)), np.zeros((96, 64), f32), 32, 32)

    def control_if(flag):
        def make(rng):
            return (2,), (rnd(rng, 256), np.zeros(256, f32), flag, 128)

        return make

    def reduce_cols_loop(rng):
        return (2,), (rnd(rng, (50, 128)), np.zeros(128, f32), 16, 64)

    def gather_scatter(rng):
        idx = rng.permutation(256).astype(i32)
        idx[::7] = -1  # masked off in the scatter
        return (2,), (rnd(rng, 256), idx, np.full(256, 9.0, f32), 128)

    def atomics(rng):
        return (2,), (rng.integers(0, 16, 256).astype(i32), np.zeros(16, i32), 128)

    def matmul_f16(rng):
        a, b = rnd(rng, (128, 64), f16), rnd(rng, (64, 128), f16)
        return (2, 2), (a, b, np.zeros((128, 128), f32), 64, 64, 32)

    def print_kernel(rng):
        return (1,), (np.array([1, 2, 3, 4], i32), np.zeros(4, i32))

    def gather_expect(a):
        out = a[2].copy()
        keep = a[1] >= 0
        out[a[1][keep]] = a[0][a[1][keep]] * 2.0
        return {2: out}

    def control_expect(a):
        if a[2] > 0:
            return {1: a[0] * 2.0}
        return {1: np.concatenate([a[0][:128] + 1.0, a[0][128:]])}

    c = LaunchCase
    return [
        c("vec_add", "vec_add", vec_add, lambda a: {2: a[0] + a[1]}),
        c("vec_add_i32", "vec_add_i32", vec_add_i32, lambda a: {2: a[0] + a[1]}),
        c("add2d", "add2d", add2d, lambda a: {2: a[0] + a[1]}),
        c("axpy", "axpy", axpy, lambda a: {1: a[0] * np.float32(a[2]) + a[1]}),
        c("softmax", "softmax", softmax, lambda a: {1: _softmax(a[0])}, 1e-5, 1e-7),
        c("layernorm", "layernorm", layernorm, lambda a: {1: _layernorm(a[0])}, 2e-3, 2e-3),
        c(
            "reduce_rows",
            "reduce_rows",
            reduce_rows,
            lambda a: {1: a[0].sum(axis=1), 2: a[0].max(axis=1)},
            1e-5,
            1e-5,
        ),
        c(
            "scan_cumsum",
            "scan_cumsum",
            scan_cumsum,
            lambda a: {1: a[0].cumsum(axis=1)},
            1e-5,
            1e-5,
        ),
        c("transpose2d", "transpose2d", transpose2d, lambda a: {1: a[0].T}),
        c("control_if_on", "control_if", control_if(1), control_expect),
        c("control_if_off", "control_if", control_if(0), control_expect),
        c(
            "reduce_cols_loop",
            "reduce_cols_loop",
            reduce_cols_loop,
            lambda a: {1: a[0].sum(axis=0)},
            1e-5,
            1e-5,
        ),
        c("gather_scatter", "gather_scatter", gather_scatter, gather_expect),
        c("atomics", "atomics", atomics, lambda a: {1: np.bincount(a[0], minlength=16)}),
        c(
            "matmul_f16",
            "matmul_f16",
            matmul_f16,
            lambda a: {2: a[0].astype(f32) @ a[1].astype(f32)},
            1e-3,
            1e-3,
        ),
        c(
            "print_kernel",
            "print_kernel",
            print_kernel,
            lambda a: {1: a[0] * 2},
            stdout=("sum=10", "first=1 last=4"),
        ),
    ]


def export_all(out_dir, names=None) -> dict:
    """Export every kernel (or ``names``) as an sm_90 cubin with whatever tileiras cuTile finds;
    {name: {"ok", "cubin" (path), "rc", "error", "message", "traceback_in_message"}}."""
    import io
    import os

    from cuda.tile.compilation import CallingConvention, KernelSignature, export_kernel

    results = {}
    for name, c in kernels().items():
        if names is not None and name not in names:
            continue
        buf = io.BytesIO()
        sig = KernelSignature(c.params, getattr(CallingConvention, c.calling_convention)())
        try:
            export_kernel(c.kernel, [sig], buf, gpu_code="sm_90", output_format="cubin")
        except Exception as e:  # noqa: BLE001 - recorded for the test to judge
            import re

            # cuTile's CompilerExecutionError keeps tileiras's exit code only in its text
            m = re.search(r"Return code (\d+)", str(e))
            results[name] = {
                "ok": False,
                "error": type(e).__name__,
                "rc": int(m.group(1)) if m else None,
                "message": str(e),
            }
            continue
        path = os.path.join(out_dir, name + ".cubin")
        with open(path, "wb") as f:
            f.write(buf.getvalue())
        results[name] = {"ok": True, "cubin": path}
    return results


def main(argv=None) -> int:
    """``python tests/cutile_kernels.py OUT_DIR [--shim DIR]``: export all kernels (through the
    tilegen shim with --shim) and write OUT_DIR/results.json."""
    import argparse
    import json
    import os

    p = argparse.ArgumentParser()
    p.add_argument("out_dir")
    p.add_argument("--shim", help="install the tileiras launcher here and make cuTile use it")
    p.add_argument("--only", nargs="*", help="kernel names")
    args = p.parse_args(argv)
    report = {}
    if args.shim:
        from tilegen.cutile import cutile_compiler_path, use_tilegen

        use_tilegen(args.shim)
        report["compiler"] = cutile_compiler_path()
    else:
        import cuda.tile._compile as cc

        report["compiler"] = cc._find_compiler_bin().path
    report["kernels"] = export_all(args.out_dir, args.only)
    with open(os.path.join(args.out_dir, "results.json"), "w") as f:
        json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
