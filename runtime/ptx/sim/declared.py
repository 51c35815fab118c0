"""Match an opcode to a spec/ptx row and evaluate the row's `semantics:` expression."""

from __future__ import annotations

import ast
from dataclasses import dataclass
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


def _round_directed(exact: np.ndarray, rnd: str) -> np.ndarray:
    near = exact.astype(np.float32)
    back = near.astype(np.float64)
    if rnd == "rz":
        fix = np.abs(back) > np.abs(exact)
        return np.where(fix, np.nextafter(near, np.float32(0)), near)
    if rnd == "rm":
        return np.where(back > exact, np.nextafter(near, np.float32(-np.inf)), near)
    return np.where(back < exact, np.nextafter(near, np.float32(np.inf)), near)


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
    directed = form.row.get("rounded") and rnd in ("rz", "rm", "rp") and form.type == "f32"
    if directed:
        args = [a.astype(np.float64) for a in args]
    env = dict(VOCABULARY, **names)
    env.update(zip(form.row["operands"][1:], args))
    with np.errstate(all="ignore"):
        out = eval(form.code, {"__builtins__": {}}, env)  # noqa: S307 - spec expression
        if directed:
            out = _round_directed(np.asarray(out, np.float64), rnd)
        if "sat" in mods:
            out = np.where(np.isnan(out), 0, np.clip(out, 0, 1)).astype(out.dtype)
        if "ftz" in mods:
            out = _ftz(np.asarray(out))
    return np.asarray(out)
