"""cuTile Python kernels (public ``cuda.tile`` API) covering the features of the corpus in
/work/shared/corpus/cutile (vec add, softmax, layernorm, reductions, scans, casts, gather/scatter,
atomics, control flow, math, mma ...). Each entry of :data:`KERNELS` is exported by
tests/test_cutile_e2e.py through ``tilegen-tileiras``.

Importing this module needs ``cuda-tile``; :func:`kernels` builds the table on demand so that a
test file can skip cleanly when the package is missing.
"""

from dataclasses import dataclass


@dataclass
class KernelCase:
    name: str
    kernel: object  # a ``ct.kernel``
    params: list  # ParameterConstraint | constant value, one per kernel parameter
    feature: str  # what it exercises (corpus feature)


def kernels() -> dict[str, KernelCase]:
    import cuda.tile as ct
    from cuda.tile.compilation import ArrayConstraint

    def arr(dtype, ndim=1, index=ct.int32):
        return ArrayConstraint(
            dtype,
            ndim,
            index_dtype=index,
            stride_lower_bound_incl=0,
            alias_groups=(),
            may_alias_internally=False,
            stride_constant=(None,) * (ndim - 1) + (1,),
            base_addr_divisible_by=16,
        )

    f32, f16, i32 = ct.float32, ct.float16, ct.int32
    cases: list[KernelCase] = []

    def case(feature, *params):
        def wrap(fn):
            k = ct.kernel(fn)
            cases.append(KernelCase(fn.__name__, k, list(params), feature))
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

    return {c.name: c for c in cases}


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
        sig = KernelSignature(c.params, CallingConvention.cutile_python_v1())
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
