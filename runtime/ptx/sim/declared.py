"""Match an opcode to a spec/ptx row and evaluate the row's `semantics:` expression."""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np

from tilegen.generated.ptx.instructions import INSTRUCTIONS
from tilegen.runtime.ptx.sim.semlib import VOCABULARY
from tilegen.runtime.ptx.sim.values import WIDE

_BY_OPCODE: dict[str, list[dict]] = {}
for _row in INSTRUCTIONS.values():
    _BY_OPCODE.setdefault(_row["opcode"], []).append(_row)


@dataclass(frozen=True)
class Form:
    """A matched instruction form: row, type, modifier values by group and operand types."""

    row: dict
    type: str | None
    mods: tuple
    operand_types: tuple
    code: object
    fn: object = None  # the semantics as a function of the sources, when no post-processing

    @property
    def handwritten(self) -> bool:
        return bool(self.row.get("handwritten"))


def _match_mods(row: dict, mods: list[str]) -> dict | None:
    groups = list((row.get("modifiers") or {}).items())
    out, gi = {}, 0
    for m in mods:
        while gi < len(groups) and m not in groups[gi][1]:
            gi += 1
        if gi == len(groups):
            return None
        out[groups[gi][0]] = m
        gi += 1
    return out


@lru_cache(maxsize=None)
def match(opcode: str) -> Form | None:
    """The spec row for `opcode` (e.g. `add.rn.f32`); handwritten rows match any suffix."""
    parts = opcode.split(".")
    for row in _BY_OPCODE.get(parts[0], []):
        if row.get("handwritten"):
            return Form(row, None, (), (), None)
        types = row.get("types") or []
        if len(parts) < 2 or parts[-1] not in types:
            continue
        mods = _match_mods(row, parts[1:-1])
        if mods is None:
            continue
        t = parts[-1]
        over = row.get("operand_types") or {}
        res = WIDE[t] if row.get("result") == "wide" else t
        otypes = []
        for name in row["operands"]:
            ot = over.get(name, res if name == "d" else t)
            otypes.append(WIDE[t] if ot == "wide" else ot)
        code = compile(ast.parse(row["semantics"], mode="eval"), row["name"], "eval")
        rnd = mods.get("rnd")
        directed = row.get("rounded") and rnd in ("rz", "rm", "rp") and t in _DIRECTED_TYPES
        fn = None
        if not directed and "sat" not in mods and "ftz" not in mods:
            env = dict(VOCABULARY, **{k: None for k in (row.get("modifiers") or {})})
            env.update(mods)
            env["__builtins__"] = {}
            params = ", ".join(row["operands"][1:])
            fn = eval(f"lambda {params}: {row['semantics']}", env)  # noqa: S307 - spec
        return Form(row, t, tuple(mods.items()), tuple(otypes), code, fn)
    return None


_EXACT = {
    "add.float": lambda a, b: a + b,
    "sub.float": lambda a, b: a - b,
    "mul.float": lambda a, b: a * b,
    "fma.float": lambda a, b, c: a * b + c,
    "div.float": lambda a, b: a / b if b else None,
    "rcp": lambda a: 1 / a if a else None,
}


def _addends(name: str, xs: list) -> list | None:
    """Signed addends of an add/sub/fma (for the sign of an exact zero sum)."""
    if name == "add.float":
        return xs
    if name == "sub.float":
        return [xs[0], -xs[1]]
    if name == "fma.float":
        return [
            (
                math.copysign(0.0, xs[0]) * math.copysign(0.0, xs[1])
                if xs[0] * xs[1] == 0
                else xs[0] * xs[1]
            ),
            xs[2],
        ]
    return None


def _two_sum(a: np.ndarray, b: np.ndarray):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _round_directed_f32(name: str, near: np.ndarray, args: list, rnd: str) -> np.ndarray:
    """`_round_directed` for f32 add/sub/mul/fma, vectorised: f32 products are exact in f64,
    and a TwoSum gives the exact sum as s + e, so sign(exact - near) = sign((s - near) + e)
    (|s - near| is 0 or at least one f64 ulp, |e| at most half of one)."""
    near = np.array(near, np.float32)
    ops = [np.broadcast_to(np.asarray(a, np.float32), near.shape).astype(np.float64) for a in args]
    with np.errstate(all="ignore"):
        if name == "mul.float":
            s, e = ops[0] * ops[1], np.zeros(near.shape)
            addends = None
        else:
            if name == "fma.float":
                x, y = ops[0] * ops[1], ops[2]
            else:
                x, y = ops[0], (ops[1] if name == "add.float" else -ops[1])
            s, e = _two_sum(x, y)
            addends = (x, y)
        finite = np.isfinite(s) & np.all([np.isfinite(o) for o in ops], axis=0)
        r = near.astype(np.float64)
        diff = np.where(np.isfinite(r), (s - r) + e, -np.sign(r))
    ok = finite & ~np.isnan(near)
    if addends is not None:  # exact zero: IEEE's sign (-0 when both are -0, or under rm)
        zero = ok & (s == 0) & (e == 0)
        if zero.any():
            x, y = addends
            xneg, yneg = np.signbit(x), np.signbit(y)
            neg = (xneg & yneg) | ((rnd == "rm") & (xneg | yneg))
            near = np.where(zero, np.where(neg, np.float32(-0.0), np.float32(0.0)), near)
            ok &= ~zero
    f = np.float32
    if rnd == "rz":
        move = ok & (near != 0) & (diff != 0) & ((diff > 0) != (near > 0))
        to = np.zeros_like(near)
    elif rnd == "rm":
        move, to = ok & (diff < 0), np.full_like(near, -np.inf)
    else:
        move, to = ok & (diff > 0), np.full_like(near, np.inf)
    if move.any():
        near = np.where(move, np.nextafter(near, to).astype(f), near)
    return near


_FAST_DIRECTED = {"add.float", "sub.float", "mul.float", "fma.float"}
#: types whose rounded instructions honour .rz / .rm / .rp (an f32x2 pair: each half, as f32)
_DIRECTED_TYPES = ("f32", "f64", "f32x2")
#: a paired f32 instruction -> the per-element row whose exact rounding its halves follow
_PAIRED = {f"{o}.f32x2": f"{o}.float" for o in ("add", "sub", "mul", "fma")}


def _round_directed(name: str, near: np.ndarray, args: list, rnd: str) -> np.ndarray:
    """Correct the round-to-nearest result ``near`` to rounding ``rnd`` (rz/rm/rp) exactly:
    the sign of (exact - near) is computed in rationals (sqrt: from near**2), then near steps
    one ulp where the direction requires; exact zero sums get IEEE's sign (-0 under rm)."""
    if name in _FAST_DIRECTED and np.asarray(near).dtype == np.float32:
        return _round_directed_f32(name, near, args, rnd)
    near = np.array(near)
    dt = near.dtype.type
    ops = [np.broadcast_to(np.asarray(a, near.dtype), near.shape) for a in args]
    for idx in np.ndindex(near.shape):
        xs = [float(a[idx]) for a in ops]
        r = float(near[idx])
        if math.isnan(r) or not all(math.isfinite(x) for x in xs):
            continue
        if name == "sqrt":
            if xs[0] <= 0 or not math.isfinite(r):
                continue
            diff = Fraction(xs[0]) - Fraction(r) ** 2
        elif name in _EXACT:
            ex = _EXACT[name](*[Fraction(x) for x in xs])
            if ex is None:
                continue
            if ex == 0:
                add = _addends(name, xs)
                if add is not None:
                    neg = all(math.copysign(1.0, x) < 0 for x in add) or (
                        rnd == "rm" and not all(math.copysign(1.0, x) > 0 for x in add)
                    )
                    near[idx] = dt(-0.0 if neg else 0.0)
                continue
            diff = ex - Fraction(r) if math.isfinite(r) else Fraction(-1 if r > 0 else 1)
        else:
            continue
        if diff == 0:
            continue
        if rnd == "rz" and r != 0 and (diff > 0) != (r > 0):
            near[idx] = np.nextafter(dt(r), dt(0))
        elif rnd == "rm" and diff < 0:
            near[idx] = np.nextafter(dt(r), dt(-np.inf))
        elif rnd == "rp" and diff > 0:
            near[idx] = np.nextafter(dt(r), dt(np.inf))
    return near


def _ftz(x: np.ndarray) -> np.ndarray:
    if x.dtype != np.float32:
        return x
    tiny = np.abs(x) < np.finfo(np.float32).tiny
    return np.where(tiny & (x != 0), np.copysign(np.float32(0), x), x)


def evaluate(form: Form, args: list[np.ndarray]) -> np.ndarray:
    """Result values of a declared instruction for source operand values `args`."""
    mods = dict(form.mods)
    names = {k: None for k in (form.row.get("modifiers") or {})}
    names.update(mods)
    if "ftz" in mods:
        args = [_ftz(a) for a in args]
    rnd = mods.get("rnd")
    directed = (
        form.row.get("rounded") and rnd in ("rz", "rm", "rp") and form.type in _DIRECTED_TYPES
    )
    env = dict(VOCABULARY, **names)
    env.update(zip(form.row["operands"][1:], args))
    with np.errstate(all="ignore"):
        out = eval(form.code, {"__builtins__": {}}, env)  # noqa: S307 - spec expression
        if directed:
            name = _PAIRED.get(form.row["name"], form.row["name"])
            out = _round_directed(name, np.asarray(out), args, rnd)
        if "sat" in mods:
            out = np.where(np.isnan(out), 0, np.clip(out, 0, 1)).astype(out.dtype)
        if "ftz" in mods:
            out = _ftz(np.asarray(out))
    return np.asarray(out)
