"""Each elementwise op in the spec, run by the interpreter on edge values, against an
independent evaluation (native NumPy dtypes, or exact Python ints / rationals).

The test is generated from the spec: every op whose ``semantics.kind`` is ``elementwise`` must
have a reference here, so a new op cannot slip in untested.
"""

from __future__ import annotations

import math
import zlib
from fractions import Fraction

import numpy as np
import pytest

from tilegen.runtime.attributes import EnumAttr, IntegerAttr, UnitAttr
from tilegen.runtime.interp.elementwise import evaluate, semantics_of
from tilegen.runtime.ir import Block, Operation
from tilegen.runtime.opdef import all_ops, lookup_enum
from tilegen.runtime.types import FloatType, IntegerType, PointerType, TileType

NP = {"f16": np.float16, "f32": np.float32, "f64": np.float64}
INT_NP = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}
MODES = ["nearest_even", "zero", "negative_inf", "positive_inf"]


# --------------------------------------------------------------------------- edge values


def float_edges(name: str) -> np.ndarray:
    d = NP[name]
    fi = np.finfo(d)
    vals = [
        np.nan,
        np.inf,
        -np.inf,
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        -2.5,
        3.0,
        0.1,
        -7.25,
        float(fi.max),
        -float(fi.max),
        float(fi.tiny),
        -float(fi.tiny),
        float(fi.smallest_subnormal),
        -float(fi.smallest_subnormal),
        1.0 + float(fi.eps),
        float(fi.max) / 3,
    ]
    return np.array(vals, dtype=d)


def int_edges(width: int) -> list[int]:
    lo, hi = -(2 ** (width - 1)), 2 ** (width - 1) - 1
    vals = [0, 1, -1, 2, -2, 3, 7, -7, lo, hi, lo + 1, hi - 1, width - 1, width, width + 1, 100]
    return sorted({((v - lo) % 2**width) + lo for v in vals})


def pairs(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.meshgrid(a, b, indexing="ij")
    return x.reshape(-1), y.reshape(-1)


# --------------------------------------------------------------------------- op builder


def enum_attr(enum: str, keyword: str):
    e = lookup_enum(enum)
    v = e.value(keyword)
    return IntegerAttr(v, IntegerType(32)) if e.storage == "i32" else EnumAttr(enum, v)


def run(name: str, operand_types: list, result_type, args: list, **attrs):
    """Build ``cuda_tile.<name>`` on fresh block arguments and evaluate it."""
    opdef_attrs = {}
    from tilegen.runtime.opdef import lookup_opdef

    od = lookup_opdef("cuda_tile." + name)
    for k, v in attrs.items():
        ad = od.attr(k)
        if ad.kind == "unit":
            if v:
                opdef_attrs[k] = UnitAttr()
        elif ad.kind in ("enum", "i32-enum"):
            opdef_attrs[k] = enum_attr(ad.enum, v)
        else:
            opdef_attrs[k] = v
    n = len(args[0])
    tiles = [TileType((n,), t) for t in operand_types]
    block = Block(tiles)
    op = Operation(
        "cuda_tile." + name,
        operands=list(block.args),
        result_types=[TileType((n,), result_type)],
        attributes=opdef_attrs,
    )
    return evaluate(op, od, semantics_of(od), list(args))[0]


# --------------------------------------------------------------------------- exact reference rounding


def ref_round(q: Fraction, d, mode: str) -> float:
    """Round exact ``q`` to dtype ``d`` by searching neighbours of a nearby candidate."""
    fi = np.finfo(d)
    top = Fraction(2) ** (fi.maxexp)  # where the next binade would start: inf's stand-in
    try:
        with np.errstate(over="ignore"):
            c = d(float(q))
    except OverflowError:
        c = d(math.inf if q > 0 else -math.inf)
    cands = {float(c), float(np.nextafter(c, d(np.inf))), float(np.nextafter(c, d(-np.inf)))}

    def val(x):
        return Fraction(x) if math.isfinite(x) else (top if x > 0 else -top)

    huge = Fraction(2) ** 5000

    def dval(x):  # for ordering: infinities are infinite
        return Fraction(x) if math.isfinite(x) else (huge if x > 0 else -huge)

    if mode == "nearest_even":
        best = min(cands, key=lambda x: (abs(val(x) - q), _odd(x, d)))
    elif mode == "negative_inf":
        best = max((x for x in cands if dval(x) <= q), key=dval)
    elif mode == "positive_inf":
        best = min((x for x in cands if dval(x) >= q), key=dval)
    else:  # zero
        best = (
            max((x for x in cands if dval(x) <= q), key=dval)
            if q > 0
            else min((x for x in cands if dval(x) >= q), key=dval)
        )
    if math.isinf(best) and mode != "nearest_even":
        towards = (mode == "positive_inf" and q > 0) or (mode == "negative_inf" and q < 0)
        if not towards:
            best = float(fi.max) if q > 0 else -float(fi.max)
    return best


def _odd(x: float, d) -> int:
    if not math.isfinite(x):
        return 0
    bits = np.array(x, dtype=d).view(
        {2: np.uint16, 4: np.uint32, 8: np.uint64}[np.dtype(d).itemsize]
    )
    return int(bits) & 1


def exact_or_native(fn_exact, fn_native, args, d, mode, terms=None):
    """Exact rational evaluation rounded by ``ref_round`` when all inputs are finite."""
    out = []
    with np.errstate(all="ignore"):
        for vals in zip(*args):
            if all(math.isfinite(float(v)) for v in vals):
                try:
                    q = fn_exact(*[Fraction(float(v)) for v in vals])
                except ZeroDivisionError:
                    q = None
                if q is not None:
                    r = ref_round(q, d, mode)
                    if r == 0 and q != 0:  # rounded to zero: the exact value's sign
                        r = math.copysign(0.0, q)
                    elif r == 0 and terms is not None:  # exact zero sum (IEEE 754 6.3)
                        parts = [float(t) for t in terms(*[float(v) for v in vals])]
                        all_pos = all(p == 0 and math.copysign(1, p) > 0 for p in parts)
                        all_neg = all(p == 0 and math.copysign(1, p) < 0 for p in parts)
                        if mode == "negative_inf":
                            r = 0.0 if all_pos else -0.0
                        else:
                            r = -0.0 if all_neg else 0.0
                    elif r == 0:  # exact zero product: the native sign
                        r = math.copysign(0.0, float(fn_native(*[d(v) for v in vals])))
                    out.append(r)
                    continue
            out.append(float(fn_native(*[d(v) for v in vals])))
    return np.array(out, dtype=d)


def same(got, exp, ulps: int = 0):
    got = np.asarray(got)
    exp = np.asarray(exp).astype(got.dtype)
    nan = np.isnan(exp) if exp.dtype.kind == "f" else np.zeros(exp.shape, bool)
    if exp.dtype.kind == "f":
        assert np.array_equal(np.isnan(got), nan), (
            got[np.isnan(got) != nan],
            exp[np.isnan(got) != nan],
        )
        g, e = got[~nan], exp[~nan]
        if ulps == 0:
            bad = (g != e) | (np.signbit(g) != np.signbit(e))
        else:
            ui = {2: np.int16, 4: np.int32, 8: np.int64}[got.dtype.itemsize]
            bad = (np.abs(g.view(ui).astype(np.int64) - e.view(ui).astype(np.int64)) > ulps) & (
                g != e
            )
        assert not bad.any(), list(zip(g[bad][:5], e[bad][:5]))
    else:
        assert np.array_equal(got, exp), list(zip(got[got != exp][:5], exp[got != exp][:5]))
    return got.size


# --------------------------------------------------------------------------- float references

COUNTS: dict[str, int] = {}


def _count(op: str, n: int) -> None:
    COUNTS[op] = COUNTS.get(op, 0) + n


def check_float_binary(
    op, fe, fn, exact=None, modes=("nearest_even",), attrs=None, ulps=0, terms=None
):
    for tn in ("f16", "f32", "f64"):
        d = NP[tn]
        a, b = pairs(float_edges(tn), float_edges(tn))
        for mode in modes:
            kw = dict(attrs or {})
            if mode != "nearest_even" or "rounding_mode" in (kw.get("_r") or ()):
                kw["rounding_mode"] = mode
            elif fe.attr("rounding_mode") is not None and fe.attr("rounding_mode").default is None:
                kw["rounding_mode"] = "nearest_even"
            kw.pop("_r", None)
            got = run(op, [FloatType(tn)] * 2, FloatType(tn), [a, b], **kw)
            with np.errstate(all="ignore"):
                exp = (
                    exact_or_native(exact, fn, [a, b], d, mode, terms)
                    if exact
                    else fn(a, b).astype(d)
                )
            _count(op, same(got, exp, ulps))


def check_float_unary(op, fe, fn, ulps=0, types=("f16", "f32", "f64"), **kw):
    for tn in types:
        d = NP[tn]
        x = float_edges(tn)
        got = run(op, [FloatType(tn)], FloatType(tn), [x], **kw)
        with np.errstate(all="ignore"):
            exp = fn(x.astype(np.float64)).astype(d) if ulps else fn(x).astype(d)
        _count(op, same(got, exp, ulps))


def _maxnum(a, b, prop):
    out = []
    for x, y in zip(a.tolist(), b.tolist()):
        if math.isnan(x) or math.isnan(y):
            out.append(
                math.nan
                if prop or (math.isnan(x) and math.isnan(y))
                else (y if math.isnan(x) else x)
            )
        elif x == y == 0:
            out.append(0.0 if not (math.copysign(1, x) < 0 and math.copysign(1, y) < 0) else -0.0)
        else:
            out.append(max(x, y))
    return np.array(out)


def _minnum(a, b, prop):
    out = []
    for x, y in zip(a.tolist(), b.tolist()):
        if math.isnan(x) or math.isnan(y):
            out.append(
                math.nan
                if prop or (math.isnan(x) and math.isnan(y))
                else (y if math.isnan(x) else x)
            )
        elif x == y == 0:
            out.append(-0.0 if (math.copysign(1, x) < 0 or math.copysign(1, y) < 0) else 0.0)
        else:
            out.append(min(x, y))
    return np.array(out)


def ref_addf(fe):
    check_float_binary(
        "addf", fe, lambda a, b: a + b, lambda a, b: a + b, MODES, terms=lambda a, b: (a, b)
    )


def ref_subf(fe):
    check_float_binary(
        "subf", fe, lambda a, b: a - b, lambda a, b: a - b, MODES, terms=lambda a, b: (a, -b)
    )


def ref_mulf(fe):
    check_float_binary("mulf", fe, lambda a, b: a * b, lambda a, b: a * b, MODES)


def ref_divf(fe):
    check_float_binary("divf", fe, lambda a, b: a / b, lambda a, b: a / b, MODES)


def ref_fma(fe):
    for tn in ("f16", "f32", "f64"):
        d = NP[tn]
        e = float_edges(tn)
        a, b = pairs(e, e)
        c = np.resize(e[::-1], a.size).astype(d)
        for mode in MODES:
            got = run("fma", [FloatType(tn)] * 3, FloatType(tn), [a, b, c], rounding_mode=mode)
            exp = exact_or_native(
                lambda x, y, z: x * y + z,
                _fused_native,
                [a, b, c],
                d,
                mode,
                lambda x, y, z: (x * y, z),
            )
            _count("fma", same(got, exp))


def _fused_native(x, y, z):
    """fma with a non-finite input: a finite product added to an infinity is that infinity."""
    x, y, z = float(x), float(y), float(z)
    if math.isfinite(x) and math.isfinite(y) and math.isinf(z):
        return z
    with np.errstate(all="ignore"):
        return np.float64(x) * np.float64(y) + np.float64(z)


def ref_maxf(fe):
    for prop in (False, True):
        check_float_binary(
            "maxf", fe, lambda a, b: _maxnum(a, b, prop), attrs={"propagate_nan": prop}
        )


def ref_minf(fe):
    for prop in (False, True):
        check_float_binary(
            "minf", fe, lambda a, b: _minnum(a, b, prop), attrs={"propagate_nan": prop}
        )


def ref_remf(fe):
    check_float_binary(
        "remf",
        fe,
        lambda a, b: np.array(
            [
                math.fmod(x, y) if math.isfinite(x) and y != 0 and not math.isnan(y) else math.nan
                for x, y in zip(a.tolist(), b.tolist())
            ]
        ),
    )


def ref_cmpf(fe):
    import operator as o

    preds = {
        "equal": o.eq,
        "not_equal": o.ne,
        "less_than": o.lt,
        "less_than_or_equal": o.le,
        "greater_than": o.gt,
        "greater_than_or_equal": o.ge,
    }
    for tn in ("f16", "f32", "f64"):
        a, b = pairs(float_edges(tn), float_edges(tn))
        for p, fn in preds.items():
            for ordering in ("ordered", "unordered"):
                got = run(
                    "cmpf",
                    [FloatType(tn)] * 2,
                    IntegerType(1),
                    [a, b],
                    comparison_predicate=p,
                    comparison_ordering=ordering,
                )
                exp = [
                    (ordering == "unordered") if (math.isnan(x) or math.isnan(y)) else fn(x, y)
                    for x, y in zip(a.tolist(), b.tolist())
                ]
                _count("cmpf", same(got, np.array(exp, dtype=bool)))


def ref_absf(fe):
    check_float_unary("absf", fe, np.abs)


def ref_negf(fe):
    check_float_unary("negf", fe, np.negative)


def ref_ceil(fe):
    check_float_unary("ceil", fe, np.ceil)


def ref_floor(fe):
    check_float_unary("floor", fe, np.floor)


def ref_sqrt(fe):
    for mode in ("nearest_even",):
        check_float_unary("sqrt", fe, np.sqrt, rounding_mode=mode)
    # directed modes against exact squares
    for tn in ("f32", "f64"):
        d = NP[tn]
        x = np.array([2.0, 3.0, 5.0, 0.5, 10.0, 1e-3], dtype=d)
        for mode in ("zero", "positive_inf", "negative_inf"):
            got = run("sqrt", [FloatType(tn)], FloatType(tn), [x], rounding_mode=mode)
            for g, v in zip(got.tolist(), x.tolist()):
                lo_ok = (
                    Fraction(g) ** 2 <= Fraction(v)
                    if mode != "positive_inf"
                    else Fraction(g) ** 2 >= Fraction(v)
                )
                nxt = float(np.nextafter(d(g), d(np.inf if mode != "positive_inf" else -np.inf)))
                hi_ok = (
                    Fraction(nxt) ** 2 > Fraction(v)
                    if mode != "positive_inf"
                    else Fraction(nxt) ** 2 < Fraction(v)
                )
                assert lo_ok and hi_ok, (tn, mode, v, g)
            _count("sqrt", len(x))


def _transcendental(op, fn, ulps=1):
    def ref(fe):
        check_float_unary(op, fe, fn, ulps=ulps)

    return ref


def ref_pow(fe):
    check_float_binary(
        "pow", fe, lambda a, b: np.power(a.astype(np.float64), b.astype(np.float64)), ulps=1
    )


def ref_atan2(fe):
    check_float_binary(
        "atan2", fe, lambda a, b: np.arctan2(a.astype(np.float64), b.astype(np.float64)), ulps=1
    )


def ref_fpowi(fe):
    for tn in ("f32", "f64"):
        x = float_edges(tn)
        n = np.resize(np.array([0, 1, 2, 3, -1, -2, 7], dtype=np.int32), x.size)
        got = run("fpowi", [FloatType(tn), IntegerType(32)], FloatType(tn), [x, n])
        with np.errstate(all="ignore"):
            exp = np.power(x.astype(np.float64), n.astype(np.float64)).astype(NP[tn])
        _count("fpowi", same(got, exp, ulps=1))


def ref_rsqrt(fe):
    check_float_unary("rsqrt", fe, lambda x: 1.0 / np.sqrt(x), ulps=1)


# --------------------------------------------------------------------------- integer references


def py_int(v, width, signed):
    v = int(v) & ((1 << width) - 1)
    return v - (1 << width) if signed and v >> (width - 1) else v


def wrap(v, width):
    v &= (1 << width) - 1
    return v - (1 << width) if v >> (width - 1) else v


def check_int_binary(op, fn, signed_modes=(None,), widths=(8, 16, 32, 64), extra=None, **kw):
    for w in widths:
        e = np.array(int_edges(w), dtype=INT_NP[w])
        a, b = pairs(e, e)
        for s in signed_modes:
            signed = s != "unsigned"
            attrs = dict(kw)
            if s is not None:
                attrs["signedness"] = s
            for extra_kw in extra or [{}]:
                got = run(op, [IntegerType(w)] * 2, IntegerType(w), [a, b], **attrs, **extra_kw)
                exp = [
                    wrap(fn(py_int(x, w, signed), py_int(y, w, signed), w, **extra_kw), w)
                    for x, y in zip(a.tolist(), b.tolist())
                ]
                _count(op, same(got, np.array(exp, dtype=np.int64).astype(INT_NP[w])))


def _div(x, y, w, rounding="zero"):
    if y == 0:
        return -1
    q = Fraction(x, y)
    return {"zero": math.trunc, "negative_inf": math.floor, "positive_inf": math.ceil}[rounding](q)


def ref_divi(fe):
    for s, modes in (
        ("signed", ["zero", "negative_inf", "positive_inf"]),
        ("unsigned", ["zero", "positive_inf"]),
    ):
        check_int_binary(
            "divi",
            lambda x, y, w, rounding: _div(x, y, w, rounding),
            (s,),
            extra=[{"rounding": m} for m in modes],
        )


def ref_remi(fe):
    check_int_binary(
        "remi",
        lambda x, y, w: x if y == 0 else x - y * math.trunc(Fraction(x, y)),
        ("signed", "unsigned"),
    )


def ref_addi(fe):
    check_int_binary(
        "addi", lambda x, y, w: x + y, widths=(1, 8, 16, 32, 64) if False else (8, 16, 32, 64)
    )


def ref_subi(fe):
    check_int_binary("subi", lambda x, y, w: x - y)


def ref_muli(fe):
    check_int_binary("muli", lambda x, y, w: x * y)


def ref_andi(fe):
    check_int_binary("andi", lambda x, y, w: x & y)


def ref_ori(fe):
    check_int_binary("ori", lambda x, y, w: x | y)


def ref_xori(fe):
    check_int_binary("xori", lambda x, y, w: x ^ y)


def ref_maxi(fe):
    check_int_binary("maxi", lambda x, y, w: max(x, y), ("signed", "unsigned"))


def ref_mini(fe):
    check_int_binary("mini", lambda x, y, w: min(x, y), ("signed", "unsigned"))


def ref_mulhii(fe):
    for w in (8, 16, 32, 64):
        e = np.array(int_edges(w), dtype=INT_NP[w])
        a, b = pairs(e, e)
        got = run("mulhii", [IntegerType(w)] * 2, IntegerType(w), [a, b])
        exp = [
            wrap((py_int(x, w, False) * py_int(y, w, False)) >> w, w)
            for x, y in zip(a.tolist(), b.tolist())
        ]
        _count("mulhii", same(got, np.array(exp, dtype=np.int64).astype(INT_NP[w])))


def ref_shli(fe):
    check_int_binary("shli", lambda x, y, w: 0 if (y % (1 << w)) >= w else x << (y % (1 << w)))


def ref_shri(fe):
    def shr(x, y, w, signed):
        amt = y % (1 << w)
        if amt >= w:
            return -1 if (signed and x < 0) else 0
        return x >> amt

    check_int_binary("shri", lambda x, y, w: shr(x, y, w, True), ("signed",))
    check_int_binary("shri", lambda x, y, w: shr(x, y, w, False), ("unsigned",))


def ref_cmpi(fe):
    import operator as o

    preds = {
        "equal": o.eq,
        "not_equal": o.ne,
        "less_than": o.lt,
        "less_than_or_equal": o.le,
        "greater_than": o.gt,
        "greater_than_or_equal": o.ge,
    }
    for w in (8, 32, 64):
        e = np.array(int_edges(w), dtype=INT_NP[w])
        a, b = pairs(e, e)
        for s in ("signed", "unsigned"):
            for p, fn in preds.items():
                got = run(
                    "cmpi",
                    [IntegerType(w)] * 2,
                    IntegerType(1),
                    [a, b],
                    comparison_predicate=p,
                    signedness=s,
                )
                exp = [
                    fn(py_int(x, w, s == "signed"), py_int(y, w, s == "signed"))
                    for x, y in zip(a.tolist(), b.tolist())
                ]
                _count("cmpi", same(got, np.array(exp, dtype=bool)))


def check_int_unary(op, fn, **kw):
    for w in (8, 16, 32, 64):
        x = np.array(int_edges(w), dtype=INT_NP[w])
        got = run(op, [IntegerType(w)], IntegerType(w), [x], **kw)
        _count(
            op,
            same(
                got,
                np.array([wrap(fn(int(v)), w) for v in x.tolist()], dtype=np.int64).astype(
                    INT_NP[w]
                ),
            ),
        )


def ref_absi(fe):
    check_int_unary("absi", abs)


def ref_negi(fe):
    check_int_unary("negi", lambda v: -v)


# --------------------------------------------------------------------------- conversions


def ref_exti(fe):
    for wf, wt in ((8, 32), (16, 64), (32, 64), (8, 16)):
        x = np.array(int_edges(wf), dtype=INT_NP[wf])
        for s in ("signed", "unsigned"):
            got = run("exti", [IntegerType(wf)], IntegerType(wt), [x], signedness=s)
            exp = [wrap(py_int(v, wf, s == "signed"), wt) for v in x.tolist()]
            _count("exti", same(got, np.array(exp, dtype=np.int64).astype(INT_NP[wt])))


def ref_trunci(fe):
    for wf, wt in ((32, 8), (64, 32), (16, 8), (64, 16)):
        x = np.array(int_edges(wf), dtype=INT_NP[wf])
        got = run("trunci", [IntegerType(wf)], IntegerType(wt), [x])
        _count(
            "trunci",
            same(
                got, np.array([wrap(v, wt) for v in x.tolist()], dtype=np.int64).astype(INT_NP[wt])
            ),
        )


def ref_itof(fe):
    for wf in (8, 32, 64):
        x = np.array(
            int_edges(wf) + [2**53 + 1, -(2**60) - 1, 2**24 + 1] if wf == 64 else int_edges(wf),
            dtype=INT_NP[wf],
        )
        for tn in ("f16", "f32", "f64"):
            for s in ("signed", "unsigned"):
                got = run(
                    "itof",
                    [IntegerType(wf)],
                    FloatType(tn),
                    [x],
                    signedness=s,
                    rounding_mode="nearest_even",
                )
                exp = [
                    ref_round(Fraction(py_int(v, wf, s == "signed")), NP[tn], "nearest_even")
                    for v in x.tolist()
                ]
                _count("itof", same(got, np.array(exp, dtype=NP[tn])))


def _bf16_ref(x: np.ndarray) -> np.ndarray:
    """RNE float32 -> bf16 by the classic integer trick (NaN: the GPU's 0x7FFF)."""
    b = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    r = (b + 0x7FFF + ((b >> 16) & 1)) >> 16
    r = np.where(np.isnan(x), 0x7FFF, r)
    return (r.astype(np.uint32) << 16).view(np.float32)


def ref_ftof(fe):
    cases = [("f32", "f16"), ("f64", "f32"), ("f16", "f32"), ("f16", "f64"), ("f64", "f16")]
    for src, dst in cases:
        x = float_edges(src)
        got = run("ftof", [FloatType(src)], FloatType(dst), [x], rounding_mode="nearest_even")
        exp = [
            (
                math.copysign(ref_round(Fraction(float(v)), NP[dst], "nearest_even"), float(v))
                if math.isfinite(float(v))
                else float(v)
            )
            for v in x.tolist()
        ]
        _count("ftof", same(got, np.array(exp, dtype=NP[dst])))
    x = float_edges("f32")
    got = run("ftof", [FloatType("f32")], FloatType("bf16"), [x], rounding_mode="nearest_even")
    _count("ftof", same(got, _bf16_ref(x)))


def ref_ftoi(fe):
    for tn in ("f16", "f32", "f64"):
        x = float_edges(tn)
        for w in (8, 32, 64):
            for s in ("signed", "unsigned"):
                lo, hi = (-(2 ** (w - 1)), 2 ** (w - 1) - 1) if s == "signed" else (0, 2**w - 1)
                got = run(
                    "ftoi",
                    [FloatType(tn)],
                    IntegerType(w),
                    [x],
                    signedness=s,
                    rounding_mode="nearest_int_to_zero",
                )
                exp = [
                    (
                        0
                        if math.isnan(v)
                        else wrap(
                            min(
                                max(
                                    math.trunc(v) if math.isfinite(v) else (hi if v > 0 else lo), lo
                                ),
                                hi,
                            ),
                            w,
                        )
                    )
                    for v in x.astype(np.float64).tolist()
                ]
                _count("ftoi", same(got, np.array(exp, dtype=np.int64).astype(INT_NP[w])))


def ref_bitcast(fe):
    x = float_edges("f32")
    got = run("bitcast", [FloatType("f32")], IntegerType(32), [x])
    _count("bitcast", same(got, x.view(np.int32)))
    i = np.array(int_edges(64), dtype=np.int64)
    got = run("bitcast", [IntegerType(64)], FloatType("f64"), [i])
    _count("bitcast", same(got, i.view(np.float64)))


def ref_ptr_to_int(fe):
    p = np.array([0, 16, 2**63, 2**64 - 8], dtype=np.uint64)
    got = run("ptr_to_int", [PointerType(FloatType("f32"))], IntegerType(64), [p])
    _count("ptr_to_int", same(got, p.view(np.int64)))


def ref_int_to_ptr(fe):
    i = np.array(int_edges(64), dtype=np.int64)
    got = run("int_to_ptr", [IntegerType(64)], PointerType(FloatType("f32")), [i])
    _count("int_to_ptr", same(got, i.view(np.uint64)))


def ref_ptr_to_ptr(fe):
    p = np.array([0, 16, 2**63, 2**64 - 8], dtype=np.uint64)
    got = run("ptr_to_ptr", [PointerType(FloatType("f32"))], PointerType(IntegerType(8)), [p])
    _count("ptr_to_ptr", same(got, p))


def ref_offset(fe):
    p = np.array([0x1000, 0x1000, 2**40, 0x10], dtype=np.uint64)
    for w in (32, 64):
        o = np.array([0, -1, 7, 3], dtype=INT_NP[w])
        got = run(
            "offset",
            [PointerType(FloatType("f64")), IntegerType(w)],
            PointerType(FloatType("f64")),
            [p, o],
        )
        exp = [(int(a) + int(b) * 8) % 2**64 for a, b in zip(p.tolist(), o.tolist())]
        _count("offset", same(got, np.array(exp, dtype=np.uint64)))


REFS = {
    "absf": ref_absf,
    "addf": ref_addf,
    "subf": ref_subf,
    "mulf": ref_mulf,
    "divf": ref_divf,
    "fma": ref_fma,
    "maxf": ref_maxf,
    "minf": ref_minf,
    "negf": ref_negf,
    "remf": ref_remf,
    "cmpf": ref_cmpf,
    "ceil": ref_ceil,
    "floor": ref_floor,
    "sqrt": ref_sqrt,
    "cos": _transcendental("cos", np.cos),
    "cosh": _transcendental("cosh", np.cosh),
    "sin": _transcendental("sin", np.sin),
    "sinh": _transcendental("sinh", np.sinh),
    "tan": _transcendental("tan", np.tan),
    "tanh": _transcendental("tanh", np.tanh),
    "exp": _transcendental("exp", np.exp),
    "exp2": _transcendental("exp2", np.exp2),
    "log": _transcendental("log", np.log),
    "log2": _transcendental("log2", np.log2),
    "pow": ref_pow,
    "atan2": ref_atan2,
    "fpowi": ref_fpowi,
    "rsqrt": ref_rsqrt,
    "absi": ref_absi,
    "addi": ref_addi,
    "subi": ref_subi,
    "muli": ref_muli,
    "negi": ref_negi,
    "andi": ref_andi,
    "ori": ref_ori,
    "xori": ref_xori,
    "cmpi": ref_cmpi,
    "divi": ref_divi,
    "remi": ref_remi,
    "maxi": ref_maxi,
    "mini": ref_mini,
    "mulhii": ref_mulhii,
    "shli": ref_shli,
    "shri": ref_shri,
    "exti": ref_exti,
    "trunci": ref_trunci,
    "itof": ref_itof,
    "ftof": ref_ftof,
    "ftoi": ref_ftoi,
    "bitcast": ref_bitcast,
    "ptr_to_int": ref_ptr_to_int,
    "int_to_ptr": ref_int_to_ptr,
    "ptr_to_ptr": ref_ptr_to_ptr,
    "offset": ref_offset,
}

ELEMENTWISE = sorted(
    o.mnemonic
    for o in all_ops()
    if o.dialect == "cuda_tile" and o.semantics.get("kind") == "elementwise"
)


def test_every_elementwise_op_has_a_reference():
    assert set(ELEMENTWISE) <= set(REFS), sorted(set(ELEMENTWISE) - set(REFS))


@pytest.mark.parametrize("op", ELEMENTWISE)
def test_elementwise_edges(op):
    from tilegen.runtime.opdef import lookup_opdef

    if op not in REFS:
        pytest.fail(f"no reference for elementwise op {op}")
    before = COUNTS.get(op, 0)
    REFS[op](lookup_opdef("cuda_tile." + op))
    assert COUNTS.get(op, 0) > before


def _ftz(x: np.ndarray) -> np.ndarray:
    tiny = np.finfo(np.float32).tiny
    return np.where(np.abs(x) < tiny, np.copysign(np.float32(0), x), x).astype(np.float32)


@pytest.mark.parametrize(
    "op,fn",
    [
        ("addf", np.add),
        ("subf", np.subtract),
        ("mulf", np.multiply),
        ("divf", np.divide),
        ("maxf", None),
        ("minf", None),
    ],
)
def test_flush_to_zero_f32(op, fn):
    e = np.concatenate([float_edges("f32"), np.array([1.5e-38, -1.2e-38, 2e-38], np.float32)])
    a, b = pairs(e, e)
    kw = {"flush_to_zero": True}
    if op in ("addf", "subf", "mulf", "divf"):
        kw["rounding_mode"] = "nearest_even"
    got = run(op, [FloatType("f32")] * 2, FloatType("f32"), [a, b], **kw)
    fa, fb = _ftz(a), _ftz(b)
    with np.errstate(all="ignore"):
        raw = (
            fn(fa, fb) if fn is not None else (_maxnum if op == "maxf" else _minnum)(fa, fb, False)
        )
    same(got, _ftz(np.asarray(raw, dtype=np.float32)))
    # without the flag subnormal results survive
    tiny = np.array([1e-39], np.float32)
    if op == "mulf":
        plain = run(
            "mulf",
            [FloatType("f32")] * 2,
            FloatType("f32"),
            [tiny, np.ones(1, np.float32)],
            rounding_mode="nearest_even",
        )
        assert plain[0] == tiny[0]


def test_elementwise_ops_broadcast_rank0_and_keep_dtypes():
    """Rank-0 tiles evaluate to 0-d arrays of the result's compute dtype."""
    block = Block([TileType((), FloatType("bf16"))] * 2)
    from tilegen.runtime.opdef import lookup_opdef

    od = lookup_opdef("cuda_tile.addf")
    op = Operation(
        "cuda_tile.addf",
        operands=list(block.args),
        result_types=[TileType((), FloatType("bf16"))],
        attributes={"rounding_mode": enum_attr("RoundingMode", "nearest_even")},
    )
    r = evaluate(op, od, semantics_of(od), [np.float32(1.0), np.float32(2.0**-8)])[0]
    assert (
        r.shape == () and r.dtype == np.float32 and float(r) == 1.0
    )  # 1 + 2^-8 ties to even in bf16


@pytest.mark.parametrize(
    "op,flag,a,b,ok",
    [
        ("addi", "no_signed_wrap", 127, 1, False),
        ("addi", "no_signed_wrap", 100, 27, True),
        ("addi", "no_unsigned_wrap", -1, 1, False),  # 255 + 1 as unsigned
        ("addi", "no_unsigned_wrap", 127, 1, True),  # 128 fits unsigned
        ("subi", "no_wrap", 0, 1, False),
        ("muli", "no_signed_wrap", 16, 8, False),
        ("muli", "no_wrap", 5, 5, True),
        ("shli", "no_signed_wrap", 64, 1, False),
        ("shli", "no_unsigned_wrap", 64, 1, True),
    ],
)
def test_overflow_flags_report_wrapping(op, flag, a, b, ok):
    from tilegen.runtime.interp.values import InterpError

    args = [np.array([a], np.int8), np.array([b], np.int8)]
    if ok:
        run(op, [IntegerType(8)] * 2, IntegerType(8), args, overflow=flag)
        _count(op, 1)
    else:
        with pytest.raises(InterpError, match=f"overflow.*overflow<{flag}>"):
            run(op, [IntegerType(8)] * 2, IntegerType(8), args, overflow=flag)
    # without the flag the same operation simply wraps
    r = run(op, [IntegerType(8)] * 2, IntegerType(8), args)
    assert r.dtype == np.int8


def test_trunci_overflow_flag():
    from tilegen.runtime.interp.values import InterpError

    x = np.array([300], np.int32)
    assert run("trunci", [IntegerType(32)], IntegerType(8), [x]).tolist() == [44]
    with pytest.raises(InterpError, match="does not fit i8"):
        run("trunci", [IntegerType(32)], IntegerType(8), [x], overflow="no_unsigned_wrap")
    ok = np.array([200], np.int32)
    assert run(
        "trunci", [IntegerType(32)], IntegerType(8), [ok], overflow="no_unsigned_wrap"
    ).tolist() == [-56]


def test_in_place_attribute_edits_are_seen():
    from tilegen.runtime.opdef import lookup_opdef

    od = lookup_opdef("cuda_tile.divi")
    block = Block([TileType((2,), IntegerType(32))] * 2)
    op = Operation(
        "cuda_tile.divi",
        operands=list(block.args),
        result_types=[TileType((2,), IntegerType(32))],
        attributes={"signedness": enum_attr("Signedness", "signed")},
    )
    a, b = np.array([-7, 7], np.int32), np.array([2, 2], np.int32)
    assert evaluate(op, od, semantics_of(od), [a, b])[0].tolist() == [-3, 3]
    op.set_attr("rounding", enum_attr("RoundingMode", "negative_inf"))
    assert evaluate(op, od, semantics_of(od), [a, b])[0].tolist() == [-4, 3]


def test_i4_conversions():
    x = np.array([-8, -1, 0, 7, 3], np.int8)
    i4, i8, i32 = IntegerType(4), IntegerType(8), IntegerType(32)
    assert run("exti", [i4], i8, [x], signedness="signed").tolist() == [-8, -1, 0, 7, 3]
    assert run("exti", [i4], i32, [x], signedness="unsigned").tolist() == [8, 15, 0, 7, 3]
    y = np.array([8, 15, -9, 100, 7], np.int8)
    assert run("trunci", [i8], i4, [y]).tolist() == [-8, -1, 7, 4, 7]


def _random_floats(rng, dtype, n):
    """Random bit patterns: every class of value (NaN payloads, subnormals, infinities) occurs."""
    ui = {np.float16: np.uint16, np.float32: np.uint32, np.float64: np.uint64}[dtype]
    bits = rng.integers(0, np.iinfo(ui).max, size=n, dtype=ui, endpoint=True)
    return bits.view(dtype)


@pytest.mark.parametrize("tn", ["f16", "f32", "f64"])
@pytest.mark.parametrize(
    "op,fn", [("addf", np.add), ("subf", np.subtract), ("mulf", np.multiply), ("divf", np.divide)]
)
def test_random_bit_patterns_round_to_nearest(tn, op, fn):
    rng = np.random.default_rng(hash((tn, op)) % 2**32)
    d = NP[tn]
    a, b = _random_floats(rng, d, 20000), _random_floats(rng, d, 20000)
    got = run(op, [FloatType(tn)] * 2, FloatType(tn), [a, b], rounding_mode="nearest_even")
    with np.errstate(all="ignore"):
        exp = fn(a, b)
    _count(op, same(got, exp))


@pytest.mark.parametrize("tn", ["f16", "f32", "f64"])
@pytest.mark.parametrize("mode", ["zero", "negative_inf", "positive_inf"])
def test_random_directed_rounding_against_rationals(tn, mode):
    # a seed of its own per case (Python's str hash changes from process to process), and
    # x - x style exact zero sums among the inputs: IEEE 754 gives them -0 under negative_inf
    rng = np.random.default_rng(zlib.crc32(f"{tn}/{mode}".encode()))
    d = NP[tn]
    a = (rng.standard_normal(400) * 10.0 ** rng.integers(-3, 4, 400)).astype(d)
    b = (rng.standard_normal(400) * 10.0 ** rng.integers(-3, 4, 400)).astype(d)
    b[:8] = -a[:8]
    c = (rng.standard_normal(400)).astype(d)
    cases = [
        ("addf", lambda x, y: x + y, [a, b], lambda x, y: (x, y)),
        ("mulf", lambda x, y: x * y, [a, b], None),
        ("divf", lambda x, y: x / y, [a, b], None),
        ("fma", lambda x, y, z: x * y + z, [a, b, c], lambda x, y, z: (x * y, z)),
    ]
    for op, fn, args, terms in cases:
        got = run(op, [FloatType(tn)] * len(args), FloatType(tn), args, rounding_mode=mode)
        exp = exact_or_native(fn, fn, args, d, mode, terms=terms)
        _count(op, same(got, exp))


@pytest.mark.parametrize("w", [8, 32, 64])
def test_random_integer_division_and_shifts(w):
    rng = np.random.default_rng(w)
    dt = INT_NP[w]
    a = rng.integers(np.iinfo(dt).min, np.iinfo(dt).max, size=3000, dtype=dt, endpoint=True)
    b = rng.integers(np.iinfo(dt).min, np.iinfo(dt).max, size=3000, dtype=dt, endpoint=True)
    b[::7] = rng.integers(-3, 4, size=b[::7].size).astype(dt)  # small and zero divisors
    for s in ("signed", "unsigned"):
        sg = s == "signed"
        for rounding in ("zero", "positive_inf") + (("negative_inf",) if sg else ()):
            got = run(
                "divi",
                [IntegerType(w)] * 2,
                IntegerType(w),
                [a, b],
                signedness=s,
                rounding=rounding,
            )
            exp = [
                wrap(_div(py_int(x, w, sg), py_int(y, w, sg), w, rounding), w)
                for x, y in zip(a.tolist(), b.tolist())
            ]
            _count("divi", same(got, np.array(exp, dtype=np.int64).astype(dt)))
        got = run("remi", [IntegerType(w)] * 2, IntegerType(w), [a, b], signedness=s)
        exp = []
        for x, y in zip(a.tolist(), b.tolist()):
            x, y = py_int(x, w, sg), py_int(y, w, sg)
            exp.append(wrap(x if y == 0 else x - y * math.trunc(Fraction(x, y)), w))
        _count("remi", same(got, np.array(exp, dtype=np.int64).astype(dt)))
