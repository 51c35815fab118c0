"""Spec-driven evaluation of ops whose meaning the spec declares (``semantics:`` in spec/ops).

``semantics`` keys (schema: spec/schema/ops.schema.json):

* ``kind``: ``elementwise`` (operands converted to a compute domain, result rounded/wrapped to the
  result element type), ``tile`` (operands passed as held, the result taken as is) or
  ``interpreter`` (hand-written in ``executor.py``; ``expr`` absent);
* ``expr``: a NumPy expression over the operand names (Python keywords get a trailing ``_``), the
  op's attributes (enum keywords as strings, unit attributes as bools), ``RESULT`` (result type),
  ``RESULT_SHAPE``, ``WIDTH`` (first operand's element bit width), ``SIGNED`` and the helpers in
  :mod:`tilegen.runtime.interp.semlib`;
* ``domain``: ``value`` (default: floats as float64, ints as int64/uint64 by signedness,
  pointers as uint64) or ``bits`` (operands as unsigned bit patterns; result read from bits);
* ``signedness``: ``signed``, ``unsigned`` or the name of the attribute that says which;
* ``rounding``: the attribute holding the result rounding mode (default ``nearest_even``);
* ``ftz``: the unit attribute that flushes subnormal inputs and results to zero;
* ``exact``: ``single`` (one correctly rounded IEEE operation) or ``rational`` (a rational
  expression): the evaluator then recomputes exactly, in rationals, every element whose float64
  result sits on a rounding boundary of the result type, so every rounding mode is exact;
* ``nan``: ``keep`` for sign-bit ops (neg, abs: ``xor``/``and`` on the GPU) whose NaN result keeps
  its payload; every other f16 / bf16 NaN result is the GPU's canonical NaN 0x7FFF
  (:func:`tilegen.runtime.floats.canonical_nan`), as ``cvt.rn.{f16,bf16}.f32`` and 16-bit
  arithmetic write it.
"""

from __future__ import annotations

import keyword
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Optional

import numpy as np

from tilegen.runtime.attributes import (
    FLUSH_TO_ZERO,
    BoolAttr,
    DenseArrayAttr,
    EnumAttr,
    IntegerAttr,
    StringAttr,
    UnitAttr,
)
from tilegen.runtime import floats
from tilegen.runtime.interp import semlib
from tilegen.runtime.interp.values import (
    InterpError,
    as_signed,
    as_unsigned,
    bit_width,
    compute_dtype,
    element_of,
    from_bits,
    to_bits,
    wrap_int,
)
from tilegen.runtime.opdef import OpDef, lookup_enum
from tilegen.runtime.types import FloatType, IntegerType, PointerType, TileType

NEAREST = ("nearest_even", "approx", "full")


@dataclass(frozen=True)
class Semantics:
    kind: str
    expr: Optional[str]
    code: Any
    domain: str = "value"
    signedness: Optional[str] = None
    rounding: Optional[str] = None
    ftz: Optional[str] = None
    exact: Optional[str] = None
    overflow: Optional[str] = None
    addends: Any = None
    #: "keep": a sign-bit op (neg, abs) whose NaN keeps its payload; else f16/bf16 NaN results
    #: are the GPU's canonical NaN (runtime/floats.py canonical_nan)
    nan: Optional[str] = None


def py_name(name: str) -> str:
    return name + "_" if keyword.iskeyword(name) else name


_CACHE: dict[str, Optional[Semantics]] = {}


def _compile(opdef: OpDef) -> Optional[Semantics]:
    if opdef.name in _CACHE:
        return _CACHE[opdef.name]
    _CACHE[opdef.name] = sem = _build(opdef)
    return sem


def _build(opdef: OpDef) -> Optional[Semantics]:
    s = opdef.semantics or {}
    if not s:
        return None
    expr = s.get("expr")
    code = compile(expr, f"<semantics of {opdef.name}>", "eval") if expr else None
    return Semantics(
        kind=s["kind"],
        expr=expr,
        code=code,
        domain=s.get("domain", "value"),
        signedness=s.get("signedness"),
        rounding=s.get("rounding"),
        ftz=s.get("ftz"),
        exact=s.get("exact"),
        overflow=s.get("overflow"),
        nan=s.get("nan"),
        addends=(
            compile(s["addends"], f"<addends of {opdef.name}>", "eval")
            if s.get("addends")
            else None
        ),
    )


def semantics_of(opdef: Optional[OpDef]) -> Optional[Semantics]:
    return _compile(opdef) if opdef is not None else None


def attr_value(opdef: OpDef, op, name: str):
    """An attribute as an expression sees it: enum keyword, bool for unit, int, tuple, or raw."""
    ad = opdef.attr(name)
    a = op.attributes.get(name)
    if a is None and hasattr(op, "properties"):
        a = op.properties.get(name)
    if ad is not None and ad.kind in ("enum", "i32-enum"):
        enum = lookup_enum(ad.enum) if ad.enum else None
        if a is None:
            return ad.default
        v = a.value if isinstance(a, (EnumAttr, IntegerAttr)) else a
        kw = enum.keyword(int(v)) if enum is not None and isinstance(v, int) else v
        return kw
    if ad is not None and ad.kind == "unit":
        return a is not None and not (isinstance(a, BoolAttr) and not a.value)
    if a is None:
        return ad.default if ad is not None else None
    if isinstance(a, (BoolAttr, StringAttr)):
        return a.value
    if isinstance(a, IntegerAttr):
        return a.value
    if isinstance(a, DenseArrayAttr):
        return tuple(a.values)
    if isinstance(a, UnitAttr):
        return True
    return a


def _flush(x: np.ndarray, name: str) -> np.ndarray:
    tiny = 2.0 ** floats.FORMATS[name].emin
    return np.where(np.abs(x) < tiny, np.copysign(0.0, x), x)


def _on_boundary(s: np.ndarray, name: str, mode: str) -> np.ndarray:
    """Elements whose float64 value is a rounding boundary of ``name`` under ``mode``."""
    lo = floats.round_to_format(s, name, "negative_inf")
    hi = floats.round_to_format(s, name, "positive_inf")
    with np.errstate(invalid="ignore"):
        if mode in NEAREST or mode == "nearest_away":
            return (lo != hi) & ((s - lo) == (hi - s))
        return (lo == hi) & np.isfinite(s)


def _round_float_result(
    value,
    name: str,
    mode: str,
    exact_fn=None,
    all_exact: bool = False,
    finite_in=None,
    zero_neg=None,
) -> np.ndarray:
    """Round computed values to float type ``name`` (float64 -> compute dtype)."""
    v = np.asarray(value)
    if v.dtype == object or (
        v.dtype.kind in "iu" and np.abs(v.astype(np.float64)).max(initial=0) > 2.0**53
    ):
        flat = [
            floats.round_fraction(
                Fraction(int(x)) if not isinstance(x, Fraction) else x, name, mode
            )
            for x in v.reshape(-1)
        ]
        out = np.array(flat, dtype=np.float64).reshape(v.shape)
        return out.astype(floats.COMPUTE_DTYPES[name])
    s = v.astype(np.float64)
    if exact_fn is not None:
        ok = np.broadcast_to(finite_in, s.shape) if finite_in is not None else np.isfinite(s)
        sel = ok & (all_exact | ~np.isfinite(s) | _on_boundary(s, name, mode))
        if sel.any():
            exact_vals = exact_fn(sel)
            native = s[sel]
            zero = np.copysign(0.0, native)
            if zero_neg is not None:  # exact-zero sums: -0 under negative_inf (IEEE 754 6.3)
                zero = np.where(np.broadcast_to(zero_neg, s.shape)[sel], -0.0, 0.0)
            # an exact zero keeps the native result's sign; a rounded non-zero value its own
            fixed = np.array(
                [
                    (
                        native[i]
                        if q is None
                        else (zero[i] if q == 0 else floats.round_fraction(q, name, mode))
                    )
                    for i, q in enumerate(exact_vals)
                ],
                dtype=np.float64,
            )
            out = floats.round_to_format(s, name, mode)
            out[sel] = fixed
            return out.astype(floats.COMPUTE_DTYPES[name])
    return floats.to_compute(s, name, mode)


@dataclass
class _Plan:
    """What evaluating one op needs besides its operand values (computed once per op)."""

    ns: dict
    names: list  # (key, kind, start, n, type) per declared operand group
    signed: bool
    mode: str
    ftz: bool
    result_types: list
    snapshot: tuple  # attributes and types the plan was made from (IR may be edited in place)
    opdef: OpDef


def _snapshot(op) -> tuple:
    return (
        dict(op.attributes),
        tuple(v.type for v in op.operands),
        tuple(r.type for r in op.results),
    )


#: id(op) -> its plan. A plan is checked against the op's definition and snapshot before use,
#: so an id a freed op left behind yields a plan only where it would be rebuilt identically.
#: Ops carry no weak-reference slot (8 bytes each); the memo starts over past _PLANS_MAX.
_PLANS: dict[int, _Plan] = {}
_PLANS_MAX = 1 << 16


def _plan(op, opdef: OpDef, sem: Semantics) -> _Plan:
    plan = _PLANS.get(id(op))
    snap = _snapshot(op)
    if plan is not None and plan.opdef is opdef and plan.snapshot == snap:
        return plan
    ns: dict[str, Any] = dict(semlib.NAMESPACE)
    for a in opdef.attributes:
        ns[py_name(a.name)] = attr_value(opdef, op, a.name)
    result_types = [r.type for r in op.results]
    rt = result_types[0] if result_types else None
    ns["RESULT"] = rt
    ns["RESULT_SHAPE"] = tuple(rt.shape) if isinstance(rt, TileType) else ()
    first_t = op.operands[0].type if op.operands else rt
    signed = True
    if sem.signedness in ("signed", "unsigned"):
        signed = sem.signedness == "signed"
    elif sem.signedness:
        signed = ns.get(py_name(sem.signedness)) != "unsigned"
    ns["SIGNED"] = signed
    try:
        ns["WIDTH"] = bit_width(first_t)
    except InterpError:
        ns["WIDTH"] = 0
    mode = (ns.get(py_name(sem.rounding)) if sem.rounding else None) or "nearest_even"
    ftz = bool(ns.get(py_name(sem.ftz))) if sem.ftz else False
    ftz = ftz or FLUSH_TO_ZERO in op.attributes  # carried past the conversion (discardable)
    segments = list(zip(opdef.operands, opdef.operand_segments(op)))
    ns["TYPES"] = {d.name: (op.operands[start].type if n else None) for d, (start, n) in segments}
    names = [
        (py_name(d.name), d.kind, start, n, op.operands[start].type if n else None)
        for d, (start, n) in segments
    ]
    plan = _Plan(ns, names, signed, mode, ftz, result_types, snap, opdef)
    if len(_PLANS) >= _PLANS_MAX:
        _PLANS.clear()
    _PLANS[id(op)] = plan
    return plan


def evaluate(op, opdef: OpDef, sem: Semantics, args: list) -> list:
    """Evaluate ``op`` on argument values ``args`` as its declared semantics say."""
    plan = _plan(op, opdef, sem)
    ns = plan.ns.copy()
    signed, mode, ftz, result_types = plan.signed, plan.mode, plan.ftz, plan.result_types
    rt = result_types[0] if result_types else None
    names: list[str] = []
    for key, kind, start, n, t in plan.names:
        names.append(key)
        if kind == "variadic":
            ns[key] = args[start : start + n]
        elif not n:
            ns[key] = None
        elif sem.kind == "elementwise":
            ns[key] = _to_domain(args[start], t, sem.domain, signed, ftz)
        else:
            ns[key] = args[start]
    with np.errstate(all="ignore"):
        try:
            value = eval(sem.code, ns)
        except InterpError:
            raise
        except Exception as e:  # a bad expression or operand is reported at the op
            raise InterpError(f"evaluating semantics '{sem.expr}' failed: {e}") from e
    if sem.kind != "elementwise":
        values = list(value) if isinstance(value, tuple) else [value]
        return [_coerce(v, t) for v, t in zip(values, result_types)]

    shape = ns["RESULT_SHAPE"]
    if sem.domain == "bits":
        return [from_bits(np.broadcast_to(np.asarray(value), shape), rt)]
    et = element_of(rt)
    value = np.broadcast_to(np.asarray(value), shape) if np.ndim(value) < len(shape) else value
    if isinstance(et, FloatType):
        exact_fn, all_exact = None, False
        # one IEEE operation computed in float64 and rounded once to a <= 32-bit type is
        # correctly rounded (53 >= 2p + 2); everything else is checked against exact rationals
        if sem.exact in ("single", "rational") and (mode not in NEAREST or sem.exact == "rational"):
            all_exact = et.name == "f64"
            exact_fn = _exact_evaluator(op, opdef, sem, args, ns, names)
        finite_in = np.ones(np.shape(value), dtype=bool)
        for key in names:
            v = ns[key]
            if isinstance(v, np.ndarray) and v.dtype.kind == "f":
                finite_in = finite_in & np.isfinite(v)
        zero_neg = None
        if mode == "negative_inf" and sem.addends is not None:
            with np.errstate(all="ignore"):
                terms = eval(sem.addends, ns)
            pos_zero = [(np.asarray(t) == 0) & ~np.signbit(t) for t in terms]
            zero_neg = ~np.logical_and.reduce(pos_zero)  # unless every term is +0
        out = _round_float_result(value, et.name, mode, exact_fn, all_exact, finite_in, zero_neg)
        if ftz:
            out = _flush(out.astype(np.float64), et.name).astype(out.dtype)
        if sem.nan != "keep":
            return [floats.canonical_nan(out, et.name)]
        return [_keep_nan(out, sem, ns, plan, args)]
    if isinstance(et, IntegerType):
        v = np.asarray(value)
        if v.dtype.kind == "f":
            return [_float_to_int(v, et, signed)]
        if sem.overflow:
            _check_overflow(op, sem, ns, names, et, ns.get(py_name(sem.overflow)))
        return [wrap_int(v, et)]
    if isinstance(et, PointerType):
        return [np.asarray(value).astype(np.uint64)]
    raise InterpError(f"cannot produce a result of type {rt}")


def _keep_nan(out: np.ndarray, sem: Semantics, ns: dict, plan: _Plan, args: list) -> np.ndarray:
    """NaN elements of a sign-bit op's result (``nan: keep``) recomputed on the operands as held
    (the float64 round trip quiets a signalling NaN, the GPU's xor/and do not)."""
    nan = np.isnan(out)
    if not nan.any():
        return out
    held = dict(ns)
    for key, kind, start, n, _ in plan.names:
        if n and kind != "variadic":
            held[key] = np.asarray(args[start])
    with np.errstate(all="ignore"):
        again = np.broadcast_to(np.asarray(eval(sem.code, held)), out.shape).astype(out.dtype)
    return np.where(nan, again, out)


def _coerce(v, t):
    """A whole-tile expression's value held as a tile of type ``t`` (other values pass through;
    an nv_tileaa scalar type is a rank-0 tile)."""
    if isinstance(t, (IntegerType, FloatType)):
        t = TileType((), t)
    if not isinstance(t, TileType) or not isinstance(v, (np.ndarray, np.generic, int, float, bool)):
        return v
    v = np.asarray(v)
    dt = compute_dtype(t)
    if v.dtype != dt:
        et = t.element
        if isinstance(et, IntegerType):
            v = wrap_int(v, et)
        elif isinstance(et, FloatType):
            v = floats.to_compute(v.astype(np.float64), et.name)
        else:
            v = v.astype(dt)
    return np.array(v, order="C")


def _to_domain(v, t, domain: str, signed: bool, ftz: bool):
    et = element_of(t)
    if domain == "bits":
        return to_bits(v, et)
    if isinstance(et, FloatType):
        x = np.asarray(v).astype(np.float64)
        return _flush(x, et.name) if ftz else x
    if isinstance(et, IntegerType):
        return as_signed(v, et) if signed else as_unsigned(v, et)
    return np.asarray(v)


def _float_to_int(v: np.ndarray, et: IntegerType, signed: bool) -> np.ndarray:
    """Saturating float -> integer conversion (NaN gives 0), as PTX cvt does."""
    w = et.width
    lo, hi = (-(2 ** (w - 1)), 2 ** (w - 1) - 1) if signed else (0, 2**w - 1)
    if w == 1:
        lo, hi = (-1, 0) if signed else (0, 1)
    x = np.where(np.isnan(v), 0.0, v)
    big = x >= float(hi)
    small = x <= float(lo)
    mid = np.clip(x, max(float(lo), -(2.0**63)), min(float(hi), 2.0**63 - 1024))
    if signed:
        out = mid.astype(np.int64)
        out = np.where(big, np.int64(hi), np.where(small, np.int64(lo), out))
        return wrap_int(out, et)
    out = mid.astype(np.uint64)
    out = np.where(big, np.uint64(hi), np.where(small, np.uint64(lo), out))
    return wrap_int(out, et)


def _check_overflow(op, sem: Semantics, ns: dict, names: list, et: IntegerType, flag) -> None:
    """Report a result that wraps although the op's IntegerOverflow flag promises it does not."""
    checks = {"no_signed_wrap": (True,), "no_unsigned_wrap": (False,), "no_wrap": (True, False)}
    for signed in checks.get(flag, ()):
        sub = dict(ns)
        sub["SIGNED"] = signed
        for key, d in zip(names, op.operands):
            v = ns[key]
            if isinstance(v, np.ndarray) and isinstance(element_of(d.type), IntegerType):
                dv = as_signed(v, d.type) if signed else as_unsigned(v, d.type)
                sub[key] = np.array([int(x) for x in dv.reshape(-1)], dtype=object).reshape(
                    dv.shape
                )
        with np.errstate(all="ignore"):
            exact = np.asarray(eval(sem.code, sub), dtype=object)
        w = et.width
        lo, hi = (-(1 << (w - 1)), (1 << (w - 1)) - 1) if signed else (0, (1 << w) - 1)
        bad = [x for x in exact.reshape(-1) if not lo <= int(x) <= hi]
        if bad:
            kind = "signed" if signed else "unsigned"
            raise InterpError(
                f"{kind} overflow: exact result {int(bad[0])} does not fit i{w}, but the op is "
                f"marked overflow<{flag}>"
            )


def _exact_evaluator(op, opdef, sem, args, ns, names):
    """A function computing the exact rational result of selected elements (None if not finite)."""

    def fn(sel: np.ndarray) -> list:
        sub = dict(ns)
        for key in names:
            v = ns[key]
            if isinstance(v, np.ndarray) and v.dtype.kind == "f":
                vv = np.broadcast_to(v, sel.shape)[sel]
                if not np.isfinite(vv).all():
                    vv = np.where(np.isfinite(vv), vv, 0.0)
                sub[key] = np.array([Fraction(float(x)) for x in vv], dtype=object)
            elif isinstance(v, np.ndarray):
                sub[key] = np.array(
                    [Fraction(int(x)) for x in np.broadcast_to(v, sel.shape)[sel]], dtype=object
                )
        try:
            r = eval(sem.code, sub)
            return [Fraction(x) for x in np.asarray(r, dtype=object).reshape(-1)]
        except (ZeroDivisionError, TypeError, ValueError, AttributeError):
            pass
        out = []  # some element failed (x / 0 ...): evaluate one by one
        for i in range(int(sel.sum())):
            one = {
                k: (
                    v[i : i + 1]
                    if isinstance(v, np.ndarray) and v.dtype == object and k in names
                    else v
                )
                for k, v in sub.items()
            }
            try:
                out.append(Fraction(np.asarray(eval(sem.code, one), dtype=object).reshape(-1)[0]))
            except (ZeroDivisionError, TypeError, ValueError, AttributeError):
                out.append(None)
        return out

    return fn


def evaluate_op(op, args: list) -> Optional[list]:
    """``op``'s results on ``args`` (arrays as the interpreter holds them) when the spec declares
    an expression for it, else None. Folders and other engines can call this on constants."""
    sem = semantics_of(op.opdef)
    if sem is None or sem.code is None:
        return None
    return evaluate(op, op.opdef, sem, list(args))
