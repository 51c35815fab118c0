"""Multi-instruction math sequences named by `sequence:` rows of spec/ptx/selection.yaml.

Each sequence is ``fn(em, op, t, args) -> result register`` for float type ``t`` (f32/f64) and
uses only correctly rounded PTX arithmetic (add/mul/fma/div.rn, cvt.rni...) except where a row
says otherwise (exp_f32 uses ex2.approx). Methods: exp = 2^k * p(r) after Cody-Waite reduction
by ln2 (Taylor p); log = frexp-style split x = 2^e * m, m in [sqrt(1/2), sqrt(2)), and the atanh
series of s = (m-1)/(m+1); sin/cos = reduction by pi/2 (three-part constant) and Taylor series
on |r| <= pi/4; atan = reduction to |t| <= tan(pi/8) and its Taylor series; the hyperbolics,
atan2 and powf build on those. Accuracy (tests/test_codegen_elementwise.py, through the
simulator against NumPy): f64 within a few ulp; f32 sin/cos/log within 2 ulp for |x| < 1e4.
Cody-Waite reduction loses accuracy for |x| beyond ~1e5 (f32) / 1e9 (f64) in sin/cos/tan.
"""

from __future__ import annotations

import math
import struct
from fractions import Fraction

from tilegen.runtime.codegen.core import fail

SEQUENCES: dict = {}


def sequence(name: str):
    def deco(fn):
        SEQUENCES[name] = fn
        return fn

    return deco


class F:
    """Float emission helpers for one element type (f32/f64)."""

    def __init__(self, em, t: str):
        self.em, self.t = em, t
        self.ib = "b32" if t == "f32" else "b64"  # integer class of the bits
        self.w = 32 if t == "f32" else 64

    def c(self, x: float) -> str:
        if self.t == "f32":
            return "0f%08X" % struct.unpack("<I", struct.pack("<f", float(x)))[0]
        return "0d%016X" % struct.unpack("<Q", struct.pack("<d", float(x)))[0]

    def op(self, text: str, *args) -> str:
        d = self.em.new(self.t)
        self.em.ins(f"{text}.{self.t} {d}, {', '.join(str(a) for a in args)}")
        return d

    def add(self, a, b):
        return self.op("add.rn", a, b)

    def sub(self, a, b):
        return self.op("sub.rn", a, b)

    def mul(self, a, b):
        return self.op("mul.rn", a, b)

    def fma(self, a, b, c):
        return self.op("fma.rn", a, b, c)

    def div(self, a, b):
        return self.op("div.rn", a, b)

    def abs(self, a):
        return self.op("abs", a)

    def neg(self, a):
        return self.op("neg", a)

    def sqrt(self, a):
        return self.op("sqrt.rn", a)

    def round(self, a, mode: str = "rni"):
        d = self.em.new(self.t)
        self.em.ins(f"cvt.{mode}.{self.t}.{self.t} {d}, {a}")
        return d

    def max(self, a, b):
        return self.op("max", a, b)

    def min(self, a, b):
        return self.op("min", a, b)

    def setp(self, cmp: str, a, b) -> str:
        p = self.em.new("pred")
        self.em.ins(f"setp.{cmp}.{self.t} {p}, {a}, {b}")
        return p

    def selp(self, a, b, p) -> str:
        d = self.em.new(self.t)
        self.em.ins(f"selp.{self.t} {d}, {a}, {b}, {p}")
        return d

    def bits(self, a) -> str:
        r = self.em.new(self.ib)
        self.em.ins(f"mov.{self.ib} {r}, {a}")
        return r

    def from_bits(self, r) -> str:
        d = self.em.new(self.t)
        self.em.ins(f"mov.{self.ib} {d}, {r}")
        return d

    def iop(self, text: str, *args, cls=None) -> str:
        d = self.em.new(cls or self.ib)
        self.em.ins(f"{text} {d}, {', '.join(str(a) for a in args)}")
        return d

    def copysign(self, mag, sign) -> str:
        """|mag| with the sign bit of ``sign``."""
        return self.op("copysign", sign, mag)

    def poly(self, x, coeffs) -> str:
        """Horner: coeffs[0] + coeffs[1] x + ... (coefficients as floats)."""
        acc = self.c(coeffs[-1])
        for cf in reversed(coeffs[:-1]):
            acc = self.fma(acc, x, self.c(cf))
        if acc.startswith("0"):
            acc = self.add(acc, self.c(0.0))
        return acc

    def pred_or(self, p, q) -> str:
        r = self.em.new("pred")
        self.em.ins(f"or.pred {r}, {p}, {q}")
        return r

    def pred_and(self, p, q) -> str:
        r = self.em.new("pred")
        self.em.ins(f"and.pred {r}, {p}, {q}")
        return r


def _taylor(f, n: int) -> list[float]:
    return [float(f(k)) for k in range(n + 1)]


def _inv_fact(k):
    return Fraction(1, math.factorial(k))


LN2_HI, LN2_LO = 6.93147180369123816490e-01, 1.90821492927058770002e-10
PIO2 = (1.57079632673412561417e00, 6.07710050630396597660e-11, 2.02226624871116645580e-21)
PIO2_F32 = (1.5703125, 4.837512969970703125e-4, 7.54978995489188216e-8)
INF = float("inf")


# ----------------------------------------------------------------------------- exp
def _scale2(f: F, p, kf) -> str:
    """p * 2^k for an integral-valued float kf with |k| <= 2 * (max exponent)."""
    em = f.em
    k = f.iop(f"cvt.rzi.s32.{f.t}", kf, cls="b32")
    k1 = f.iop("shr.s32", k, 1, cls="b32")
    k2 = f.iop("sub.s32", k, k1, cls="b32")
    bias, shift = (127, 23) if f.t == "f32" else (1023, 52)
    out = p
    for kk in (k1, k2):
        e = f.iop("add.s32", kk, bias, cls="b32")
        if f.t == "f64":
            e = f.iop("cvt.s64.s32", e, cls="b64")
            e = f.iop("shl.b64", e, shift, cls="b64")
        else:
            e = f.iop("shl.b32", e, shift, cls="b32")
        out = f.mul(out, f.from_bits(e))
    del em
    return out


def _exp_poly_degree(t: str) -> int:
    return 7 if t == "f32" else 13


def _clamp_k(f: F, kf) -> str:
    """Exponent estimate clamped so that 2^k splits into two normal factors (NaN -> finite)."""
    lim = 250.0 if f.t == "f32" else 2000.0
    return f.max(f.min(kf, f.c(lim)), f.c(-lim))


def exp_core(f: F, x, kshift: int = 0) -> str:
    """e^x * 2^kshift for a register x (finite or not)."""
    kf = _clamp_k(f, f.round(f.mul(x, f.c(1 / math.log(2)))))
    r = f.fma(f.neg(kf), f.c(LN2_HI), x)
    r = f.fma(f.neg(kf), f.c(LN2_LO), r)
    p = f.poly(r, _taylor(_inv_fact, _exp_poly_degree(f.t)))
    out = _scale2(f, p, f.add(kf, f.c(kshift)) if kshift else kf)
    low = f.setp("lt", x, f.c(-110.0 if f.t == "f32" else -800.0))
    return f.selp(f.c(0.0), out, low)


@sequence("exp")
def exp(em, op, t, args):
    return exp_core(F(em, t), args[0])


@sequence("exp2")
def exp2(em, op, t, args):
    f = F(em, t)
    x = args[0]
    kf = _clamp_k(f, f.round(x))
    r = f.sub(x, kf)  # exact for finite x
    ln2 = Fraction(math.log(2))
    p = f.poly(r, _taylor(lambda k: ln2**k * _inv_fact(k), _exp_poly_degree(t) + 1))
    out = _scale2(f, p, kf)
    low = f.setp("lt", x, f.c(-160.0 if t == "f32" else -1100.0))
    return f.selp(f.c(0.0), out, low)


@sequence("exp_f32")
def exp_f32(em, op, t, args):
    """e^x = 2^hi * 2^lo, hi + lo = x*log2(e) to ~2^-48; 2^lo ~ 1 + lo*ln2."""
    if t != "f32":
        fail(op, "exp_f32 is an f32 sequence")
    f = F(em, t)
    x = args[0]
    l2e = 1 / math.log(2)
    l2e_hi = struct.unpack("<f", struct.pack("<f", l2e))[0]
    hi = f.mul(x, f.c(l2e_hi))
    lo = f.fma(x, f.c(l2e_hi), f.neg(hi))
    lo = f.fma(x, f.c(l2e - l2e_hi), lo)
    lo = f.max(f.min(lo, f.c(1.0)), f.c(-1.0))  # NaN (from x = +-inf) -> finite
    e = f.op("ex2.approx", hi)
    return f.fma(e, f.mul(lo, f.c(math.log(2))), e)


# ----------------------------------------------------------------------------- log
def log_core(f: F, x) -> tuple[str, str]:
    """(e, log(m)) with x = 2^e * m, m in [sqrt(1/2), sqrt(2)), for finite x > 0."""
    if f.t == "f32":
        tiny, scale, sc_e = 1.1754943508222875e-38, 2.0**25, 25
        magic, mask, shift, bias = 0x3F3504F3, 0x007FFFFF, 23, 127
    else:
        tiny, scale, sc_e = 2.2250738585072014e-308, 2.0**54, 54
        magic, mask, shift, bias = 0x3FE6A09E667F3BCD, 0x000FFFFFFFFFFFFF, 52, 1023
    sub = f.setp("lt", x, f.c(tiny))
    xs = f.selp(f.mul(x, f.c(scale)), x, sub)
    ib = f.ib
    u = f.bits(xs)
    one = (bias << shift) - magic
    u2 = f.iop(f"add.s{f.w}", u, one)
    e = f.iop(f"shr.s{f.w}", u2, shift)
    mb = f.iop(f"and.{ib}", u2, mask)
    mb = f.iop(f"add.s{f.w}", mb, magic)
    m = f.from_bits(mb)
    if f.w == 64:
        e = f.iop("cvt.s32.s64", e, cls="b32")
    e = f.iop("sub.s32", e, bias, cls="b32")
    adj = f.iop("selp.s32", sc_e, 0, sub, cls="b32")
    e = f.iop("sub.s32", e, adj, cls="b32")
    ef = f.em.new(f.t)
    f.em.ins(f"cvt.rn.{f.t}.s32 {ef}, {e}")
    fm = f.sub(m, f.c(1.0))
    s = f.div(fm, f.add(fm, f.c(2.0)))
    z = f.mul(s, s)
    n = 5 if f.t == "f32" else 12
    p = f.poly(z, [1.0 / (2 * k + 3) for k in range(n)])  # (atanh(s)/s - 1)/z
    s2 = f.add(s, s)
    lm = f.fma(f.mul(s2, z), p, s2)
    return ef, lm


def _log_specials(f: F, x, r) -> str:
    r = f.selp(f.c(INF), r, f.setp("eq", x, f.c(INF)))
    r = f.selp(f.c(-INF), r, f.setp("eq", x, f.c(0.0)))
    return f.selp(f.c(float("nan")), r, f.setp("ltu", x, f.c(0.0)))


@sequence("log")
def log(em, op, t, args):
    f = F(em, t)
    ef, lm = log_core(f, args[0])
    r = f.fma(ef, f.c(LN2_HI), f.fma(ef, f.c(LN2_LO), lm))
    return _log_specials(f, args[0], r)


@sequence("log2")
def log2(em, op, t, args):
    f = F(em, t)
    ef, lm = log_core(f, args[0])
    r = f.fma(lm, f.c(1 / math.log(2)), ef)
    return _log_specials(f, args[0], r)


@sequence("log10")
def log10(em, op, t, args):
    f = F(em, t)
    ef, lm = log_core(f, args[0])
    ln = f.fma(ef, f.c(LN2_HI), f.fma(ef, f.c(LN2_LO), lm))
    return _log_specials(f, args[0], f.mul(ln, f.c(1 / math.log(10))))


# ----------------------------------------------------------------------------- trig
def _reduce_pio2(f: F, x) -> tuple[str, str]:
    """(r, quadrant b32) with x = q*pi/2 + r, |r| <= pi/4."""
    kf = f.round(f.mul(x, f.c(2 / math.pi)))
    r = x
    for part in PIO2 if f.t == "f64" else PIO2_F32:
        r = f.fma(f.neg(kf), f.c(part), r)
    q = f.iop(f"cvt.rzi.s32.{f.t}", kf, cls="b32")
    return r, q


def _sin_cos_r(f: F, r) -> tuple[str, str]:
    z = f.mul(r, r)
    ns, nc = (5, 6) if f.t == "f32" else (9, 10)
    ps = f.poly(z, [(-1) ** k / math.factorial(2 * k + 1) for k in range(ns + 1)])
    pc = f.poly(z, [(-1) ** k / math.factorial(2 * k) for k in range(nc + 1)])
    return f.mul(r, ps), pc


def _sincos(f: F, x, shift: int) -> str:
    r, q = _reduce_pio2(f, x)
    s, c = _sin_cos_r(f, r)
    if shift:
        q = f.iop("add.s32", q, shift, cls="b32")
    odd = f.iop("and.b32", q, 1, cls="b32")
    neg = f.iop("and.b32", q, 2, cls="b32")
    po = f.em.new("pred")
    f.em.ins(f"setp.ne.b32 {po}, {odd}, 0")
    pn = f.em.new("pred")
    f.em.ins(f"setp.ne.b32 {pn}, {neg}, 0")
    v = f.selp(c, s, po)
    return f.selp(f.neg(v), v, pn)


@sequence("sin")
def sin(em, op, t, args):
    return _sincos(F(em, t), args[0], 0)


@sequence("cos")
def cos(em, op, t, args):
    return _sincos(F(em, t), args[0], 1)


@sequence("tan")
def tan(em, op, t, args):
    f = F(em, t)
    r, q = _reduce_pio2(f, args[0])
    s, c = _sin_cos_r(f, r)
    odd = f.iop("and.b32", q, 1, cls="b32")
    po = em.new("pred")
    em.ins(f"setp.ne.b32 {po}, {odd}, 0")
    return f.selp(f.neg(f.div(c, s)), f.div(s, c), po)


# ----------------------------------------------------------------------------- hyperbolic
def _half_exp(f: F, a) -> str:
    """e^a / 2 for a >= 0 without overflow before the true result overflows."""
    return exp_core(f, a, -1)


def _sinh_small(f: F, x) -> str:
    n = 4 if f.t == "f32" else 8
    z = f.mul(x, x)
    return f.mul(x, f.poly(z, [1 / math.factorial(2 * k + 1) for k in range(n + 1)]))


@sequence("sinh")
def sinh(em, op, t, args):
    f = F(em, t)
    x = args[0]
    a = f.abs(x)
    h = _half_exp(f, a)
    big = f.copysign(f.sub(h, f.div(f.c(0.25), h)), x)
    return f.selp(_sinh_small(f, x), big, f.setp("lt", a, f.c(0.5)))


@sequence("cosh")
def cosh(em, op, t, args):
    f = F(em, t)
    h = _half_exp(f, f.abs(args[0]))
    return f.add(h, f.div(f.c(0.25), h))


@sequence("tanh")
def tanh(em, op, t, args):
    f = F(em, t)
    x = args[0]
    a = f.abs(x)
    s = _sinh_small(f, x)
    small = f.div(s, f.sqrt(f.fma(s, s, f.c(1.0))))
    e = exp_core(f, f.add(a, a))
    big = f.copysign(f.sub(f.c(1.0), f.div(f.c(2.0), f.add(e, f.c(1.0)))), x)
    return f.selp(small, big, f.setp("lt", a, f.c(0.55)))


# ----------------------------------------------------------------------------- atan
def _atan01(f: F, a) -> str:
    """atan(a) for a in [0, 1]."""
    big = f.setp("gt", a, f.c(math.sqrt(2) - 1))
    t = f.selp(f.div(f.sub(a, f.c(1.0)), f.add(a, f.c(1.0))), a, big)
    n = 9 if f.t == "f32" else 21
    z = f.mul(t, t)
    p = f.mul(t, f.poly(z, [(-1) ** k / (2 * k + 1) for k in range(n + 1)]))
    return f.selp(f.add(p, f.c(math.pi / 4)), p, big)


@sequence("atan")
def atan(em, op, t, args):
    f = F(em, t)
    x = args[0]
    a = f.abs(x)
    inv = f.setp("gt", a, f.c(1.0))
    r = _atan01(f, f.selp(f.div(f.c(1.0), a), a, inv))
    r = f.selp(f.sub(f.c(math.pi / 2), r), r, inv)
    return f.copysign(r, x)


@sequence("atan2")
def atan2(em, op, t, args):
    f = F(em, t)
    y, x = args[0], args[1]
    ay, ax = f.abs(y), f.abs(x)
    num, den = f.min(ay, ax), f.max(ay, ax)
    q = f.div(num, den)
    q = f.selp(f.c(0.0), q, f.setp("eq", den, f.c(0.0)))
    both_inf = f.pred_and(f.setp("eq", ay, f.c(INF)), f.setp("eq", ax, f.c(INF)))
    q = f.selp(f.c(1.0), q, both_inf)
    r = _atan01(f, q)
    r = f.selp(f.sub(f.c(math.pi / 2), r), r, f.setp("gt", ay, ax))
    xneg = f.iop(f"setp.lt.s{f.w}", f.bits(x), 0, cls="pred")
    r = f.selp(f.sub(f.c(math.pi), r), r, xneg)
    r = f.copysign(r, y)
    nan = f.pred_or(f.setp("nan", x, x), f.setp("nan", y, y))
    return f.selp(f.c(float("nan")), r, nan)


# ----------------------------------------------------------------------------- pow, fmod, min/max
@sequence("powf")
def powf(em, op, t, args):
    f = F(em, t)
    x, y = args[0], args[1]
    ax = f.abs(x)
    ef, lm = log_core(f, ax)
    ln = f.fma(ef, f.c(LN2_HI), f.fma(ef, f.c(LN2_LO), lm))
    ln = f.selp(f.c(-INF), ln, f.setp("eq", ax, f.c(0.0)))
    ln = f.selp(f.c(INF), ln, f.setp("eq", ax, f.c(INF)))
    r = exp_core(f, f.mul(y, ln))
    is_int = f.setp("eq", f.round(y), y)
    h = f.mul(y, f.c(0.5))
    odd = f.pred_and(is_int, f.setp("ne", f.round(h), h))
    xneg = f.setp("lt", x, f.c(0.0))
    r = f.selp(f.neg(r), r, f.pred_and(xneg, odd))
    nonint = em.new("pred")
    em.ins(f"not.pred {nonint}, {is_int}")
    r = f.selp(f.c(float("nan")), r, f.pred_and(xneg, nonint))
    r = f.selp(f.c(float("nan")), r, f.setp("nan", x, y))
    one = f.pred_or(f.setp("eq", y, f.c(0.0)), f.setp("eq", x, f.c(1.0)))
    return f.selp(f.c(1.0), r, one)


@sequence("remf")
def remf(em, op, t, args):
    """fmod: x - trunc(x/y)*y with one correction; exact while |x/y| < 2^(p-1)."""
    f = F(em, t)
    x, y = args[0], args[1]
    if t == "f32":
        g = F(em, "f64")
        xd, yd = (g.iop("cvt.f64.f32", v, cls="f64") for v in (x, y))
        r = _fmod(g, xd, yd)
        return f.iop("cvt.rn.f32.f64", r, cls="f32")
    return _fmod(f, x, y)


def _fmod(f: F, x, y) -> str:
    q = f.round(f.div(x, y), "rzi")
    r = f.fma(f.neg(q), y, x)
    ay = f.abs(y)
    # q one too large in magnitude: r has the opposite sign of x
    wrong = f.setp("lt", f.mul(r, x), f.c(0.0))
    r = f.selp(f.add(r, f.copysign(ay, x)), r, wrong)
    r = f.copysign(r, x)  # zero results keep x's sign
    return f.selp(x, r, f.pred_and(f.setp("eq", ay, f.c(INF)), f.setp("num", x, x)))


def _nan_prop(f: F, r, a, b) -> str:
    return f.selp(f.c(float("nan")), r, f.setp("nan", a, b))


@sequence("maximumf")
def maximumf(em, op, t, args):
    f = F(em, t)
    return _nan_prop(f, f.max(args[0], args[1]), args[0], args[1])


@sequence("minimumf")
def minimumf(em, op, t, args):
    f = F(em, t)
    return _nan_prop(f, f.min(args[0], args[1]), args[0], args[1])


@sequence("clampf")
def clampf(em, op, t, args):
    f = F(em, t)
    x, lo, hi = args
    r = f.min(f.max(x, lo), hi)
    if "propagate_nan" in op.attributes:
        r = f.selp(f.c(float("nan")), r, f.setp("nan", x, x))
    return r
