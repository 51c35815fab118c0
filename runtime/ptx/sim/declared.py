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
        return Form(row, t, tuple(mods.items()), tuple(otypes), code)
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


def _round_directed(name: str, near: np.ndarray, args: list, rnd: str) -> np.ndarray:
    """Correct the round-to-nearest result ``near`` to rounding ``rnd`` (rz/rm/rp) exactly:
    the sign of (exact - near) is computed in rationals (sqrt: from near**2), then near steps
    one ulp where the direction requires; exact zero sums get IEEE's sign (-0 under rm)."""
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
    directed = form.row.get("rounded") and rnd in ("rz", "rm", "rp") and form.type in ("f32", "f64")
    env = dict(VOCABULARY, **names)
    env.update(zip(form.row["operands"][1:], args))
    with np.errstate(all="ignore"):
        out = eval(form.code, {"__builtins__": {}}, env)  # noqa: S307 - spec expression
        if directed:
            out = _round_directed(form.row["name"], np.asarray(out), args, rnd)
        if "sat" in mods:
            out = np.where(np.isnan(out), 0, np.clip(out, 0, 1)).astype(out.dtype)
        if "ftz" in mods:
            out = _ftz(np.asarray(out))
    return np.asarray(out)
