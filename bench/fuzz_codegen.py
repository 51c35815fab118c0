#!/usr/bin/env python3
"""Differential fuzzer for the PTX backend: random well-typed cuda_tile kernels, run through the
reference interpreter and through the PTX SIMT simulator (``--backend ptxsim``), compared; every
kernel the backend compiles is also assembled with ptxas (must succeed with 0 bytes of spills).

A kernel is fully determined by ``(seed, skip)``: ``skip`` is a set of generation steps whose ops
are left out (the random draws still happen), which is what the shrinker edits. Kernels load
1-3 tiles of one random power-of-two shape (rank 1-3, often smaller than the CTA) from arrays of
random sizes (masked partial tiles with random padding values), run a random chain of ops
(elementwise arith/math, casts, compare + select, broadcast/reshape/permute/extract/cat, reduce
and scan with add/max/min, for loops with loop-carried tiles, ifs, small dots) and store one
tile through a possibly partial (masked) view. Index math (a separate random stream, so a seed
keeps its ops): a grid of 1-3 blocks; view indices computed in i32 or i64 from the block id
(``exti``, ``muli``, ``addi``, an i64 offset of 2^33 added and taken away again) and from
integer scalar parameters; rank-1 inputs loaded through pointer tiles with i32 or i64 offsets
(``iota``, ``offset``, a bounds mask, ``load_ptr_tko``); scalar parameters (i16/i32/i64 and
f32/f64) anywhere in the signature, used in the arithmetic. Results are compared exactly for integers and
exactly-rounded float chains, with a tolerance where a value depends on approximate math, float
sums in a backend-chosen order (reduce/scan/dot) or ops that do not promise bitwise results.

Usage::

    .venv/bin/python bench/fuzz_codegen.py --seconds 600           # time-boxed random run
    .venv/bin/python bench/fuzz_codegen.py --seed 1234 -v          # one kernel, print it
    .venv/bin/python bench/fuzz_codegen.py --seed 1234 --shrink    # minimize a failure

A verifier/parser rejection of a generated kernel is a generator bug (counted, not reported).
"""

from __future__ import annotations

import argparse
import io
import math
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

FLOATS = ["f32", "f16", "f64"]
INTS = ["i8", "i16", "i32", "i64"]
NP = {
    "f32": np.float32,
    "f64": np.float64,
    "f16": np.float16,
    "i8": np.int8,
    "i16": np.int16,
    "i32": np.int32,
    "i64": np.int64,
}
BITS = {
    "i1": 1,
    "i8": 8,
    "i16": 16,
    "i32": 32,
    "i64": 64,
    "f16": 16,
    "bf16": 16,
    "f32": 32,
    "f64": 64,
}
#: relative tolerance of an approximate value by the least precise float type it went through
EPS = {"f64": 1e-9, "f32": 2e-4, "f16": 8e-3, "bf16": 6e-2}
PREDS = [
    "equal",
    "not_equal",
    "less_than",
    "less_than_or_equal",
    "greater_than",
    "greater_than_or_equal",
]
ROUND = ["nearest_even", "zero", "negative_inf", "positive_inf"]


def ty(shape, e: str) -> str:
    return "tile<" + "".join(f"{s}x" for s in shape) + e + ">"


def isf(e: str) -> bool:
    return e in ("f16", "bf16", "f32", "f64")


@dataclass
class Val:
    name: str
    shape: tuple
    e: str
    tol: float = 0.0  # 0: exact; else relative tolerance (approximate value)


@dataclass
class Kernel:
    text: str
    args: list  # (name, ndarray) in signature order
    out: str  # name of the output array
    sm: str
    warps: int
    ptxas: bool
    notes: list = field(default_factory=list)
    grid: tuple = (1, 1, 1)
    assembled: bool = False  # ptxas accepted this kernel's PTX (0 spills)


class Gen:
    """One kernel from ``seed``; steps in ``skip`` are drawn but not emitted."""

    def __init__(self, seed: int, skip=(), max_steps: int | None = None):
        self.rng = random.Random(seed)
        # draws for features added later, so older seeds keep their main stream
        self.rng2 = random.Random(seed * 7919 + 1)
        # index math, scalar parameters, pointer loads, the grid (added later again)
        self.rng3 = random.Random(seed * 104729 + 3)
        # masks in loop bodies that are all true in some iterations (uniform_select.py)
        self.rng4 = random.Random(seed * 15485863 + 5)
        self.nprng = np.random.RandomState(seed & 0xFFFFFFFF)
        self.skip = set(skip)
        self.max_steps = max_steps
        self.lines: list[str] = []
        self.pool: list[Val] = []
        self.n = 0
        self.step = 0
        self.notes: list[str] = []
        self.nan_amb = False
        # maxnum/minnum of +0 and -0 may return either (IEEE 754-2008 maxNum): sign-agnostic
        self.zero_amb = False

    # ------------------------------------------------------------------ helpers
    def fresh(self, p="v") -> str:
        self.n += 1
        return f"%{p}{self.n}"

    def const(self, e: str, shape, value) -> str:
        name = self.fresh("c")
        if isf(e):
            lit = repr(float(value))
            if "e" not in lit and "." not in lit:
                lit += ".0"
        else:
            lit = str(int(value))
        self.lines.append(f"{name} = constant <{e}: {lit}> : {ty(shape, e)}")
        return name

    def pick(self, pred=lambda v: True):
        cands = [v for v in self.pool if pred(v)]
        return self.rng.choice(cands) if cands else None

    def add(self, v: Val) -> Val:
        self.pool.append(v)
        self.max_elems = max(getattr(self, "max_elems", 0), math.prod(v.shape))
        return v

    def pow2_shape(self, rank: int, budget: int):
        while True:
            s = tuple(1 << self.rng.choice([0, 1, 1, 2, 2, 3, 3, 4, 5, 6]) for _ in range(rank))
            if math.prod(s) <= budget:
                return s

    # ------------------------------------------------------------------ kernel frame
    def view(self, name, shape, e, arr_shape, padding):
        r = len(shape)
        args = [f"%{name}: tile<ptr<{e}>>"]
        args += [f"%{name}s{d}: tile<i32>" for d in range(r)]
        args += [f"%{name}t{d}: tile<i32>" for d in range(r)]
        tv = f"tensor_view<{'x'.join('?' * r)}x{e}, strides=[{','.join(['?'] * (r - 1) + ['1'])}]>"
        sizes = ", ".join(f"%{name}s{d}" for d in range(r))
        strides = ", ".join([f"%{name}t{d}" for d in range(r - 1)] + ["1"])
        pad = f"padding_value = {padding}, " if padding else ""
        pv = f"partition_view<tile=({'x'.join(map(str, shape))}), {pad}{tv}>"
        lines = [
            f"%tv{name} = make_tensor_view %{name}, shape = [{sizes}], strides = [{strides}]"
            f" : tile<i32> -> {tv}",
            f"%pv{name} = make_partition_view %tv{name} : {pv}",
        ]
        return args, lines, pv

    def array(self, shape, e):
        r = self.nprng
        if isf(e):
            kind = self.rng.random()
            if kind < 0.7:
                a = r.randn(*shape) * self.rng.choice([1, 1, 4, 100])
            else:  # small integers: exact sums, ties in max/min, equal compares
                a = r.randint(-4, 5, size=shape)
            return np.asarray(a).astype(NP[e])
        lo, hi = {"i8": (-128, 128), "i16": (-3000, 3000)}.get(e, (-100000, 100000))
        if self.rng.random() < 0.3:
            lo, hi = -5, 6
        return r.randint(lo, hi, size=shape).astype(NP[e])

    def arr_shape(self, shape):
        if self.rng.random() < 0.5:
            return tuple(shape)
        return tuple(
            max(1, self.rng.randint(max(1, s // 2), s * 2) if self.rng.random() < 0.7 else s)
            for s in shape
        )

    # ------------------------------------------------------------------ ops
    def op_binary(self):
        a = self.pick()
        if a is None or a.e == "i1" and self.rng.random() < 0.5:
            return
        b = (
            self.pick(lambda v: v.shape == a.shape and v.e == a.e)
            if self.rng.random() < 0.8
            else None
        )
        if b is None:
            val = (
                self.rng.choice([0, 1, 2, -3, 7])
                if not isf(a.e)
                else self.rng.choice([0.5, -1.25, 3.0, 0.0])
            )
            if a.e == "i1":
                val = self.rng.choice([0, 1])
            b = Val(self.const(a.e, a.shape, val), a.shape, a.e)
        t = ty(a.shape, a.e)
        name = self.fresh()
        tol = max(a.tol, b.tol)
        if isf(a.e):
            op = self.rng.choice(["addf", "subf", "mulf", "divf", "maxf", "minf", "fma"])
            if op in ("maxf", "minf"):
                self.zero_amb = True
            rnd = ""
            if op in ("addf", "subf", "mulf", "divf", "fma") and self.rng.random() < 0.3:
                rnd = f" rounding<{self.rng.choice(ROUND)}>"
                if a.e == "bf16" or a.e == "f16":
                    rnd = ""
            if op == "fma":
                c = self.pick(lambda v: v.shape == a.shape and v.e == a.e)
                tol = max(tol, c.tol)
                self.lines.append(f"{name} = fma {a.name}, {b.name}, {c.name}{rnd} : {t}")
            else:
                self.lines.append(f"{name} = {op} {a.name}, {b.name}{rnd} : {t}")
            if op in ("addf", "subf", "fma") and tol:
                tol = max(tol, EPS[a.e])
        elif a.e == "i1":
            op = self.rng.choice(["andi", "ori", "xori"])
            self.lines.append(f"{name} = {op} {a.name}, {b.name} : {t}")
        else:
            op = self.rng.choice(
                [
                    "addi",
                    "subi",
                    "muli",
                    "andi",
                    "ori",
                    "xori",
                    "maxi",
                    "mini",
                    "shli",
                    "shri",
                    "divi",
                    "remi",
                ]
            )
            sign = self.rng.choice(["signed", "unsigned"])
            if op in ("shli", "shri"):
                m = self.const(a.e, a.shape, BITS[a.e] - 1)
                s = self.fresh()
                self.lines.append(f"{s} = andi {b.name}, {m} : {t}")
                sfx = f" {sign}" if op == "shri" else ""
                self.lines.append(f"{name} = {op} {a.name}, {s}{sfx} : {t}")
            elif op in ("divi", "remi"):
                m = self.const(a.e, a.shape, 7)
                one = self.const(a.e, a.shape, 1)
                s, s2 = self.fresh(), self.fresh()
                self.lines.append(f"{s} = andi {b.name}, {m} : {t}")
                self.lines.append(f"{s2} = ori {s}, {one} : {t}")
                rnd = ""
                if op == "divi" and sign == "signed" and self.rng.random() < 0.4:
                    rnd = f" rounding<{self.rng.choice(['zero', 'negative_inf', 'positive_inf'])}>"
                self.lines.append(f"{name} = {op} {a.name}, {s2} {sign}{rnd} : {t}")
            elif op in ("maxi", "mini"):
                self.lines.append(f"{name} = {op} {a.name}, {b.name} {sign} : {t}")
            else:
                self.lines.append(f"{name} = {op} {a.name}, {b.name} : {t}")
        self.add(Val(name, a.shape, a.e, tol))

    def op_unary(self):
        a = self.pick(lambda v: v.e != "i1")
        if a is None:
            return
        t = ty(a.shape, a.e)
        name = self.fresh()
        if not isf(a.e):
            op = self.rng.choice(["absi", "negi"])
            self.lines.append(f"{name} = {op} {a.name} : {t}")
            self.add(Val(name, a.shape, a.e))
            return
        exact = ["negf", "absf", "floor", "ceil", "sqrt"]
        approx = ["exp", "exp2", "log", "tanh", "sin", "cos", "rsqrt", "log2"]
        op = self.rng.choice(exact + approx)
        if op in ("floor", "ceil", "exp", "exp2", "sin", "cos") and a.tol:
            op = "negf"  # discontinuous, or turns an approximate input's relative error absolute
        if op in ("sqrt", "rsqrt", "log", "log2") and a.tol:
            # near 0 an approximate input (a float sum that cancelled) has no relative error
            # bound, and these turn its absolute error into an unbounded relative one
            op = "negf"
        src = a.name
        if op in ("sqrt", "log", "rsqrt", "log2"):
            src = self.fresh()
            self.lines.append(f"{src} = absf {a.name} : {t}")
        if op in ("sin", "cos", "exp", "exp2") and a.e != "f64":
            pass
        rnd = " rounding<nearest_even>" if op == "sqrt" and self.rng.random() < 0.5 else ""
        self.lines.append(f"{name} = {op} {src}{rnd} : {t}")
        tol = a.tol
        if op in approx or (op == "sqrt" and not rnd):
            tol = max(tol, EPS[a.e] * (8 if op in ("sin", "cos", "tanh") else 2))
            if op in ("sin", "cos"):
                self.notes.append(
                    "sin/cos: large arguments are compared with an absolute tolerance"
                )
        self.add(Val(name, a.shape, a.e, tol))

    def op_cast(self):
        a = self.pick()
        if a is None:
            return
        name = self.fresh()
        if isf(a.e):
            choices = [e for e in ["f16", "bf16", "f32", "f64"] if e != a.e] + ["itof"]
            to = self.rng.choice(choices)
            if to == "itof":  # an int source instead
                b = self.pick(lambda v: not isf(v.e))
                if b is None:
                    return
                to = self.rng.choice(["f16", "bf16", "f32", "f64"])
                sign = "unsigned" if b.e == "i1" else self.rng.choice(["signed", "unsigned"])
                self.lines.append(
                    f"{name} = itof {b.name} {sign} : {ty(b.shape, b.e)} -> {ty(b.shape, to)}"
                )
                self.add(Val(name, b.shape, to))
                if b.e in ("i8", "i16") and to in ("f32", "f64") and self.rng2.random() < 0.5:
                    # back to a wider int: the value is an exact integer in range
                    back = self.rng2.choice([e for e in INTS if BITS[e] > BITS[b.e]])
                    n2 = self.fresh()
                    self.lines.append(
                        f"{n2} = ftoi {name} {sign} : {ty(b.shape, to)} -> {ty(b.shape, back)}"
                    )
                    self.add(Val(n2, b.shape, back))
                return
            self.lines.append(f"{name} = ftof {a.name} : {ty(a.shape, a.e)} -> {ty(a.shape, to)}")
            tol = max(a.tol, EPS[to]) if a.tol else 0.0
            self.add(Val(name, a.shape, to, tol))
            return
        to = self.rng.choice([e for e in INTS if e != a.e])
        if BITS[to] > BITS[a.e]:
            sign = "unsigned" if a.e == "i1" else self.rng.choice(["signed", "unsigned"])
            self.lines.append(
                f"{name} = exti {a.name} {sign} : {ty(a.shape, a.e)} -> {ty(a.shape, to)}"
            )
        else:
            self.lines.append(f"{name} = trunci {a.name} : {ty(a.shape, a.e)} -> {ty(a.shape, to)}")
        self.add(Val(name, a.shape, to))
        if a.e in ("i8", "i16") and self.rng2.random() < 0.3:  # int -> float -> wider int
            sign = self.rng2.choice(["signed", "unsigned"])
            f = self.rng2.choice(["f32", "f64"])
            n1, n2 = self.fresh(), self.fresh()
            back = self.rng2.choice([e for e in INTS if BITS[e] > BITS[a.e]])
            self.lines.append(
                f"{n1} = itof {a.name} {sign} : {ty(a.shape, a.e)} -> {ty(a.shape, f)}"
            )
            self.lines.append(f"{n2} = ftoi {n1} {sign} : {ty(a.shape, f)} -> {ty(a.shape, back)}")
            self.add(Val(n1, a.shape, f))
            self.add(Val(n2, a.shape, back))

    def op_cmp_select(self):
        a = self.pick(lambda v: v.e != "i1" and not v.tol)
        if a is None:
            return
        b = self.pick(lambda v: v.shape == a.shape and v.e == a.e and not v.tol)
        t = ty(a.shape, a.e)
        c = self.fresh()
        pred = self.rng.choice(PREDS)
        if isf(a.e):
            order = self.rng.choice(["ordered", "unordered"])
            self.lines.append(
                f"{c} = cmpf {pred} {order} {a.name}, {b.name} : {t} -> {ty(a.shape, 'i1')}"
            )
        else:
            sign = self.rng.choice(["signed", "unsigned"])
            self.lines.append(
                f"{c} = cmpi {pred} {a.name}, {b.name}, {sign} : {t} -> {ty(a.shape, 'i1')}"
            )
        self.add(Val(c, a.shape, "i1"))
        x = self.pick(lambda v: v.shape == a.shape)
        y = self.pick(lambda v: v.shape == a.shape and v.e == x.e)
        name = self.fresh()
        self.lines.append(
            f"{name} = select {c}, {x.name}, {y.name} : {ty(a.shape, 'i1')}, {ty(a.shape, x.e)}"
        )
        self.add(Val(name, a.shape, x.e, max(x.tol, y.tol)))

    def op_shape(self):
        a = self.pick()
        if a is None:
            return
        kind = self.rng.choice(["reshape", "permute", "broadcast", "extract", "cat"])
        s = a.shape
        name = self.fresh()
        t = ty(s, a.e)
        if kind == "reshape":
            n = math.prod(s)
            rank = self.rng.randint(1, 3)
            dims = [1] * rank
            k = n.bit_length() - 1
            for _ in range(k):
                dims[self.rng.randrange(rank)] *= 2
            out = tuple(dims)
            self.lines.append(f"{name} = reshape {a.name} : {t} -> {ty(out, a.e)}")
        elif kind == "permute":
            if len(s) < 2:
                return
            perm = list(range(len(s)))
            self.rng.shuffle(perm)
            out = tuple(s[p] for p in perm)
            self.lines.append(
                f"{name} = permute {a.name} [{', '.join(map(str, perm))}] : {t} -> {ty(out, a.e)}"
            )
        elif kind == "extract":
            out = tuple(x >> self.rng.randint(0, x.bit_length() - 1) for x in s)
            idx = []
            for d in range(len(s)):
                i = self.const("i32", (), self.rng.randrange(s[d] // out[d]))
                idx.append(i)
            self.lines.append(
                f"{name} = extract {a.name}[{', '.join(idx)}] : {t} -> {ty(out, a.e)}"
            )
        elif kind == "cat":
            d = self.rng.randrange(len(s))
            if s[d] * 2 * math.prod(s) > 4096:
                return
            b = self.pick(lambda v: v.shape == s and v.e == a.e)
            out = tuple(x * (2 if i == d else 1) for i, x in enumerate(s))
            self.lines.append(
                f"{name} = cat {a.name}, {b.name} dim = {d} : {t}, {t} -> {ty(out, a.e)}"
            )
            self.add(Val(name, out, a.e, max(a.tol, b.tol)))
            return
        else:  # broadcast: reduce some dims to 1 by extract, then broadcast back (maybe wider)
            one = tuple(1 if self.rng.random() < 0.5 else x for x in s)
            z = self.const("i32", (), 0)
            e1 = self.fresh()
            self.lines.append(
                f"{e1} = extract {a.name}[{', '.join([z] * len(s))}] : {t} -> {ty(one, a.e)}"
            )
            out = tuple(
                x if o != 1 or x != 1 else (1 << self.rng.randint(0, 3)) for x, o in zip(s, one)
            )
            if math.prod(out) > 4096:
                out = s
            self.lines.append(f"{name} = broadcast {e1} : {ty(one, a.e)} -> {ty(out, a.e)}")
        self.add(Val(name, out, a.e, a.tol))

    def _combiner(self, e, comb):
        op = {
            "sum": "addf" if isf(e) else "addi",
            "max": "maxf" if isf(e) else "maxi",
            "min": "minf" if isf(e) else "mini",
        }[comb]
        sign = " signed" if not isf(e) and comb != "sum" else ""
        return [
            f"(%ca: tile<{e}>, %cb: tile<{e}>) {{",
            f"%cr = {op} %ca, %cb{sign} : tile<{e}>",
            f"yield %cr : tile<{e}>",
            "}",
        ]

    def _ident(self, e, comb):
        if comb == "sum":
            return "0.000000e+00" if isf(e) else "0"
        if isf(e):
            return (
                {"max": "0xFF800000", "min": "0x7F800000"}[comb]
                if e == "f32"
                else (
                    {"max": "0xFFF0000000000000", "min": "0x7FF0000000000000"}[comb]
                    if e == "f64"
                    else {"max": "0xFC00", "min": "0x7C00"}[comb]
                )
            )
        b = BITS[e]
        return str(-(1 << (b - 1))) if comb == "max" else str((1 << (b - 1)) - 1)

    def op_reduce(self, scan=False):
        a = self.pick(
            lambda v: v.e in ("f32", "f64", "f16", "i8", "i16", "i32", "i64")
            and (scan or len(v.shape) >= 2 or self.rng.random() < 0.3)
        )
        if a is None:
            return
        comb = self.rng.choice(["sum", "max", "min"])
        d = self.rng.randrange(len(a.shape))
        name = self.fresh()
        t = ty(a.shape, a.e)
        tol = a.tol
        if comb == "sum" and isf(a.e):
            tol = max(tol, EPS[a.e] * 4)
        if scan:
            rev = self.rng.choice(["false", "true"])
            out = a.shape
            self.lines.append(
                f"{name} = scan {a.name} dim={d} reverse={rev} identities=[{self._ident(a.e, comb)} : {a.e}] : {t} -> {t}"
            )
        else:
            out = tuple(x for i, x in enumerate(a.shape) if i != d)
            self.lines.append(
                f"{name} = reduce {a.name} dim={d} identities=[{self._ident(a.e, comb)} : {a.e}] : {t} -> {ty(out, a.e)}"
            )
        self.lines += self._combiner(a.e, comb)
        if comb != "sum" and isf(a.e):
            self.zero_amb = True
        if comb != "sum" and isf(a.e):
            # whether the identity is combined into each result is unspecified: with NaN
            # elements maxnum(identity, NaN) differs from NaN (interpreter: identity first)
            self.nan_amb = True
        v = Val(name, out, a.e, tol)
        if not out:  # 0-d: reshape to 1 element and broadcast
            r1 = self.fresh()
            self.lines.append(f"{r1} = reshape {name} : {ty((), a.e)} -> {ty((1,), a.e)}")
            n = 1 << self.rng.randint(0, 6)
            r2 = self.fresh()
            self.lines.append(f"{r2} = broadcast {r1} : {ty((1,), a.e)} -> {ty((n,), a.e)}")
            v = Val(r2, (n,), a.e, tol)
        self.add(v)

    def op_for(self):
        a = self.pick(lambda v: v.e != "i1")
        if a is None:
            return
        b = self.pick(lambda v: v.shape == a.shape and v.e == a.e)
        t = ty(a.shape, a.e)
        n = self.rng.randint(0, 4)
        c0, cn, c1 = self.const("i32", (), 0), self.const("i32", (), n), self.const("i32", (), 1)
        name = self.fresh()
        iv, acc = self.fresh("i"), self.fresh("acc")
        op = self.rng.choice(
            ["addf", "mulf", "maxf", "subf"] if isf(a.e) else ["addi", "muli", "xori", "subi"]
        )
        if op == "maxf":
            self.zero_amb = True
        nx = self.fresh()
        lines = [
            f"{name} = for {iv} in ({c0} to {cn}, step {c1}) : tile<i32> iter_values({acc} = {a.name}) -> ({t}) {{"
        ]
        lines.append(f"{nx} = {op} {acc}, {b.name} : {t}")
        if not isf(a.e) and self.rng.random() < 0.5:  # use the induction variable
            ivc = self.fresh()
            ive = self.fresh()
            if a.e == "i32":
                lines.append(f"{ive} = addi {iv}, {iv} : tile<i32>")
            elif BITS[a.e] > 32:
                lines.append(f"{ive} = exti {iv} signed : tile<i32> -> tile<{a.e}>")
            else:
                lines.append(f"{ive} = trunci {iv} : tile<i32> -> tile<{a.e}>")
            r1 = self.fresh()
            lines.append(f"{r1} = reshape {ive} : tile<{a.e}> -> {ty((1,) * len(a.shape), a.e)}")
            lines.append(f"{ivc} = broadcast {r1} : {ty((1,) * len(a.shape), a.e)} -> {t}")
            nx2 = self.fresh()
            lines.append(f"{nx2} = addi {nx}, {ivc} : {t}")
            nx = nx2
        if a.e in ("f32", "f64", "f16", "i8", "i16", "i32", "i64") and self.rng2.random() < 0.3:
            # a scan in the loop body (shuffles / barriers inside the loop)
            comb = "max" if isf(a.e) else "sum"
            if isf(a.e):
                self.nan_amb = True
                self.zero_amb = True
            sc = self.fresh()
            d = self.rng2.randrange(len(a.shape))
            lines.append(
                f"{sc} = scan {nx} dim={d} reverse=false identities=[{self._ident(a.e, comb)} : {a.e}] : {t} -> {t}"
            )
            lines += self._combiner(a.e, comb)
            nx = sc
        if self.rng4.random() < 0.35:
            nx = self._loop_mask(lines, iv, acc, nx, a.shape, t)
        lines.append(f"continue {nx} : {t}")
        lines.append("}")
        self.lines += lines
        tol = max(a.tol, b.tol)
        if isf(a.e) and op in ("mulf",):
            pass
        self.add(Val(name, a.shape, a.e, tol))

    def _loop_mask(self, lines: list, iv: str, acc: str, nx: str, shape, t: str) -> str:
        """``select(iota(last dim) + iv * k PRED bound, nx, acc)`` in a loop body: a mask whose
        every element holds in some iterations and not in others (the backend emits the body
        twice behind a per-iteration test: runtime/codegen/uniform_select.py)."""
        r, d = len(shape), shape[-1]
        ti = ty(shape, "i32")
        ones = ty((1,) * r, "i32")
        io = self.fresh()
        lines.append(f"{io} = iota : tile<{d}xi32>")
        cols = io
        if r > 1:
            ior, iob = self.fresh(), self.fresh()
            lines.append(
                f"{ior} = reshape {io} : tile<{d}xi32> -> {ty((1,) * (r - 1) + (d,), 'i32')}"
            )
            lines.append(f"{iob} = broadcast {ior} : {ty((1,) * (r - 1) + (d,), 'i32')} -> {ti}")
            cols = iob
        k = self.rng4.choice([1, 3, 8, 16])
        kc = self.const("i32", (), k)
        off, offr, offb, at = self.fresh(), self.fresh(), self.fresh(), self.fresh()
        lines.append(f"{off} = muli {iv}, {kc} : tile<i32>")
        lines.append(f"{offr} = reshape {off} : tile<i32> -> {ones}")
        lines.append(f"{offb} = broadcast {offr} : {ones} -> {ti}")
        lines.append(f"{at} = addi {cols}, {offb} : {ti}")
        bound = self.const("i32", shape, self.rng4.randint(-2, d + 4 * k))
        pred = self.rng4.choice(
            ["less_than", "less_than_or_equal", "greater_than", "greater_than_or_equal"]
        )
        m, out = self.fresh(), self.fresh()
        lines.append(f"{m} = cmpi {pred} {at}, {bound}, signed : {ti} -> {ty(shape, 'i1')}")
        lines.append(f"{out} = select {m}, {nx}, {acc} : {ty(shape, 'i1')}, {t}")
        return out

    def op_if(self):
        a = self.pick()
        if a is None:
            return
        b = self.pick(lambda v: v.shape == a.shape and v.e == a.e)
        p = self.fresh()
        k = self.const("i32", (), self.rng.choice([0, 1]))
        self.lines.append(f"{p} = cmpi equal %bx, {k}, signed : tile<i32> -> tile<i1>")
        t = ty(a.shape, a.e)
        name = self.fresh()
        inner = self.fresh()
        opf = {"i1": "xori"}.get(a.e, "addf" if isf(a.e) else "addi")
        self.lines += [
            f"{name} = if {p} -> ({t}) {{",
            f"{inner} = {opf} {a.name}, {b.name} : {t}",
            f"yield {inner} : {t}",
            "} else {",
            f"yield {b.name} : {t}",
            "}",
        ]
        self.add(Val(name, a.shape, a.e, max(a.tol, b.tol)))

    # ------------------------------------------------------------------ index math
    def cast_int(self, name: str, frm: str, to: str, lines: list) -> str:
        """Scalar ``name`` of int type ``frm`` as ``to`` (exti signed / trunci)."""
        if frm == to:
            return name
        out = self.fresh("ix")
        if BITS[to] > BITS[frm]:
            lines.append(f"{out} = exti {name} signed : tile<{frm}> -> tile<{to}>")
        else:
            lines.append(f"{out} = trunci {name} : tile<{frm}> -> tile<{to}>")
        return out

    def iconst(self, t: str, value: int, lines: list) -> str:
        name = self.fresh("ic")
        lines.append(f"{name} = constant <{t}: {value}> : tile<{t}>")
        return name

    def index_value(self, t: str, lines: list, mult=None) -> str:
        """A non-negative scalar tile index of type ``t`` (i32 / i64) from the block id:
        ``bx * m + c`` with ``c`` a constant or a small integer scalar parameter, computed in a
        mix of i32 and i64."""
        r = self.rng3
        bx = self.cast_int("%bx", "i32", t, lines) if r.random() < 0.8 else None
        if bx is None:  # through the other width first
            other = "i64" if t == "i32" else "i32"
            bx = self.cast_int(self.cast_int("%bx", "i32", other, lines), other, t, lines)
        m = mult if mult is not None else r.choice([0, 1, 1, 2])
        acc = bx
        if m != 1:
            acc = self.fresh("ix")
            lines.append(f"{acc} = muli {bx}, {self.iconst(t, m, lines)} : tile<{t}>")
        ints = [s for s in self.scalars if s[1] in ("i16", "i32", "i64")]
        if ints and r.random() < 0.5:
            sname, st, _ = r.choice(ints)
            c = self.cast_int(sname, st, t, lines)
        else:
            c = self.iconst(t, r.choice([0, 0, 1]), lines)
        out = self.fresh("ix")
        lines.append(f"{out} = addi {acc}, {c} : tile<{t}>")
        if t == "i64" and r.random() < 0.4:  # 64-bit intermediate values
            big = self.iconst(t, 1 << 33, lines)
            hi, lo = self.fresh("ix"), self.fresh("ix")
            lines.append(f"{hi} = addi {out}, {big} : tile<{t}>")
            lines.append(f"{lo} = subi {hi}, {big} : tile<{t}>")
            out = lo
        return out

    def view_indices(self, rank: int, lines: list, mult=None) -> tuple[str, str]:
        """(``[i0, 0, ...]`` text, index type) of a view access: dim 0 from the block id."""
        t = self.rng3.choice(["i32", "i64"])
        first = self.index_value(t, lines, mult)
        zero = "%c0" if t == "i32" else "%c0l"
        return ", ".join([first] + [zero] * (rank - 1)), t

    def pointer_load(self, nm: str, n: int, e: str, lines: list) -> str:
        """A rank-1 load of ``n`` elements through a tile of pointers with i32 or i64 offsets,
        masked by the array size (parameter ``%{nm}s0``), zero where masked."""
        r = self.rng3
        t = r.choice(["i32", "i64", "i64"])
        lines.append(f"%pb{nm} = reshape %{nm} : tile<ptr<{e}>> -> tile<1xptr<{e}>>")
        lines.append(f"%pbb{nm} = broadcast %pb{nm} : tile<1xptr<{e}>> -> tile<{n}xptr<{e}>>")
        lines.append(f"%io{nm} = iota : tile<{n}xi32>")
        io = f"%io{nm}"
        if t == "i64":
            io = self.fresh("ix")
            lines.append(f"{io} = exti %io{nm} signed : tile<{n}xi32> -> tile<{n}xi64>")
        base = self.index_value(t, lines)
        start = self.fresh("ix")
        lines.append(f"{start} = muli {base}, {self.iconst(t, n, lines)} : tile<{t}>")
        sizes = self.cast_int(f"%{nm}s0", "i32", t, lines)
        b1, bb, s1, sb = (self.fresh("ix") for _ in range(4))
        lines.append(f"{b1} = reshape {start} : tile<{t}> -> tile<1x{t}>")
        lines.append(f"{bb} = broadcast {b1} : tile<1x{t}> -> tile<{n}x{t}>")
        lines.append(f"{s1} = reshape {sizes} : tile<{t}> -> tile<1x{t}>")
        lines.append(f"{sb} = broadcast {s1} : tile<1x{t}> -> tile<{n}x{t}>")
        off, mask, ptrs, pad = (self.fresh("ix") for _ in range(4))
        lines.append(f"{off} = addi {bb}, {io} : tile<{n}x{t}>")
        lines.append(f"{mask} = cmpi less_than {off}, {sb}, signed : tile<{n}x{t}> -> tile<{n}xi1>")
        lines.append(
            f"{ptrs} = offset %pbb{nm}, {off} : tile<{n}xptr<{e}>>, tile<{n}x{t}> -> tile<{n}xptr<{e}>>"
        )
        zero = "0.000000e+00" if isf(e) else "0"
        lines.append(f"{pad} = constant <{e}: {zero}> : tile<{n}x{e}>")
        val = self.fresh("t")
        lines.append(
            f"{val}, {self.fresh('tk')} = load_ptr_tko weak {ptrs}, {mask}, {pad} token=%tok :"
            f" tile<{n}xptr<{e}>>, tile<{n}xi1>, tile<{n}x{e}> -> tile<{n}x{e}>, token"
        )
        return val

    def scalar_params(self) -> list:
        """0-3 scalar parameters (name, element type, value)."""
        r = self.rng3
        out = []
        for i in range(r.choice([0, 0, 1, 1, 2, 3])):
            e = r.choice(["i32", "i64", "i16", "f32", "f64"])
            if isf(e):
                v = NP[e](r.choice([0.5, -1.5, 2.0, 0.25, -3.0]))
            else:
                v = NP[e](r.choice([0, 1, 2]))
            out.append((f"%s{i}", e, np.asarray(v, NP[e])))
        return out

    def op_scalar(self, lines: list):
        """Combine a scalar parameter, broadcast, with a pool value of its type."""
        if not self.scalars:
            return
        sname, e, _ = self.rng3.choice(self.scalars)
        a = self.pick(lambda v: v.e == e and v.shape)
        if a is None:
            return
        one = (1,) * len(a.shape)
        r1, rb, name = self.fresh(), self.fresh(), self.fresh()
        lines.append(f"{r1} = reshape {sname} : tile<{e}> -> {ty(one, e)}")
        lines.append(f"{rb} = broadcast {r1} : {ty(one, e)} -> {ty(a.shape, e)}")
        op = self.rng3.choice(["mulf", "addf"] if isf(e) else ["addi", "muli", "xori"])
        lines.append(f"{name} = {op} {a.name}, {rb} : {ty(a.shape, e)}")
        self.add(Val(name, a.shape, e, a.tol))

    # ------------------------------------------------------------------ kernels
    def generate(self) -> Kernel:
        rng = self.rng
        warps = rng.choice([1, 1, 2, 4, 4, 8])
        u = rng.random()  # sm_100: tcgen05-era selection (paired f32 rows, f32x2)
        sm = "sm_80" if u < 0.15 else "sm_100" if u < 0.35 else "sm_90"
        dot = rng.random() < 0.12
        inputs = []  # (name, tile shape, e, array, padding)
        if dot:
            combo = rng.choice(
                [("f16", "f32"), ("f32", "f32"), ("f64", "f64"), ("i8", "i32"), ("bf16", "f32")]
            )
            m, n, k = (1 << rng.randint(0, 6) for _ in range(3))
            if rng.random() < 0.7:  # shapes the mma/wgmma paths take
                m, n, k = 1 << rng.randint(4, 6), 1 << rng.randint(3, 6), 1 << rng.randint(5, 6)
            ein = "f32" if combo[0] == "bf16" else combo[0]
            for nm, sh in (("a", (m, k)), ("b", (k, n))):
                inputs.append((nm, sh, ein, None, None))
            shape, e = (m, n), combo[1]
        else:
            rank = rng.choice([1, 1, 2, 2, 2, 3])
            shape = self.pow2_shape(rank, 1024)
            e = rng.choice(FLOATS + INTS)
            nin = rng.randint(1, 3)
            for i in range(nin):
                ei = e if i == 0 or rng.random() < 0.6 else rng.choice(FLOATS + INTS)
                inputs.append((f"x{i}", shape, ei, None, None))
        r3 = self.rng3
        self.scalars = self.scalar_params()
        grid = r3.choice([1, 1, 2, 3])
        index_math = r3.random() < 0.7
        args, frame, loads, arrays = [], [], [], []
        groups = []  # per parameter group: (args, [(name, array)])
        for nm, sh, ei, _, _ in inputs:
            ash = self.arr_shape(sh)
            masked = any(a < s for a, s in zip(ash, sh))
            pad = None
            if masked or rng.random() < 0.2:
                pads = ["zero"] + (["neg_zero", "nan", "pos_inf", "neg_inf"] if isf(ei) else [])
                pad = rng.choice(pads)
            a, l, pv = self.view(nm, sh, ei, ash, pad)
            frame += l
            if index_math and grid > 1:  # the blocks read further along dim 0 too
                ash = (ash[0] * r3.choice([1, grid]),) + tuple(ash[1:])
            arr = self.array(ash, ei)
            groups.append((a, [(nm, arr)]))
            if len(sh) == 1 and not dot and r3.random() < 0.3:
                self.add(Val(self.pointer_load(nm, sh[0], ei, loads), sh, ei))
                continue
            t = self.fresh("t")
            z, it = ", ".join(["%c0"] * len(sh)), "i32"
            if index_math:
                z, it = self.view_indices(len(sh), loads)
            loads.append(
                f"{t}, {self.fresh('tk')} = load_view_tko weak %pv{nm}[{z}] token = %tok : {pv}, tile<{it}> -> {ty(sh, ei)}, token"
            )
            self.add(Val(t, sh, ei))
        if dot:
            ta, tb = self.pool[0], self.pool[1]
            if combo[0] == "bf16":
                for i, v in enumerate((ta, tb)):
                    nm = self.fresh()
                    loads.append(
                        f"{nm} = ftof {v.name} : {ty(v.shape, 'f32')} -> {ty(v.shape, 'bf16')}"
                    )
                    self.pool[i] = Val(nm, v.shape, "bf16")
                ta, tb = self.pool[0], self.pool[1]
            cz = self.fresh("c")
            zl = "0" if combo[1] == "i32" else "0.000000e+00"
            loads.append(f"{cz} = constant <{combo[1]}: {zl}> : {ty(shape, combo[1])}")
            r = self.fresh()
            if combo[1] == "i32":
                loads.append(
                    f"{r} = mmai {ta.name}, {tb.name}, {cz} signed signed : {ty(ta.shape, ta.e)}, {ty(tb.shape, tb.e)}, {ty(shape, 'i32')}"
                )
            else:
                loads.append(
                    f"{r} = mmaf {ta.name}, {tb.name}, {cz} : {ty(ta.shape, ta.e)}, {ty(tb.shape, tb.e)}, {ty(shape, combo[1])}"
                )
            tol = 0.0 if combo[1] == "i32" else EPS[combo[0] if combo[0] != "f32" else "f16"] * 4
            if combo[0] == "f32":
                self.notes.append("f32 dot: tf32 vs f32 products")
            self.add(Val(r, shape, combo[1], tol))
        ops = [
            (self.op_binary, 30),
            (self.op_unary, 12),
            (self.op_cast, 10),
            (self.op_cmp_select, 8),
            (self.op_shape, 18),
            (self.op_reduce, 6),
            (lambda: self.op_reduce(scan=True), 5),
            (self.op_for, 4),
            (self.op_if, 3),
        ]
        nsteps = rng.randint(1, 10)
        for i in range(nsteps):
            f = rng.choices([o for o, _ in ops], [w for _, w in ops])[0]
            mark = len(self.lines), len(self.pool), self.n
            f()
            if i in self.skip or (self.max_steps is not None and i >= self.max_steps):
                del self.lines[mark[0] :]
                del self.pool[mark[1] :]
        if self.scalars and r3.random() < 0.7:
            self.op_scalar(self.lines)
        out = self.pool[-1] if rng.random() < 0.7 else rng.choice(self.pool)
        if not out.shape:
            out = self.pool[-1]
        if out.e in ("bf16", "i1"):
            nm = self.fresh()
            if out.e == "bf16":
                self.lines.append(
                    f"{nm} = ftof {out.name} : {ty(out.shape, 'bf16')} -> {ty(out.shape, 'f32')}"
                )
                out = Val(nm, out.shape, "f32", out.tol)
            else:
                self.lines.append(
                    f"{nm} = exti {out.name} unsigned : {ty(out.shape, 'i1')} -> {ty(out.shape, 'i8')}"
                )
                out = Val(nm, out.shape, "i8")
        ysh = self.arr_shape(out.shape) if rng.random() < 0.5 else out.shape
        ya, yl, ypv = self.view("y", out.shape, out.e, ysh, None)
        zo, it = ", ".join(["%c0"] * len(out.shape)), "i32"
        store_idx: list[str] = []
        if grid > 1 or index_math:  # each block stores its own tile: y is grid tiles long
            zo, it = self.view_indices(len(out.shape), store_idx, mult=1)
            ysh = (ysh[0] * (grid + 2),) + tuple(ysh[1:])
        groups.append((ya, [("y", np.zeros(ysh, NP[out.e]))]))
        for sname, e, v in self.scalars:  # scalar parameters anywhere in the signature
            groups.insert(r3.randint(0, len(groups)), ([f"{sname}: tile<{e}>"], [(sname[1:], v)]))
        for a, arrs in groups:
            args += a
            arrays += arrs
        hints = f" optimization_hints=<{sm} = {{num_warps = {warps}}}>"
        lines = [
            f"cuda_tile.module @m {{ entry @k({', '.join(args)}){hints} {{",
            "%tok = make_token : token",
            "%c0 = constant <i32: 0> : tile<i32>",
            "%c0l = constant <i64: 0> : tile<i64>",
            "%bx, %by, %bz = get_tile_block_id : tile<i32>",
            *frame,
            *yl,
            *loads,
            *self.lines,
            *store_idx,
            f"%st = store_view_tko weak {out.name}, %pvy[{zo}] token = %tok : {ty(out.shape, out.e)}, {ypv},"
            f" tile<{it}> -> token",
            "return",
            "} }",
        ]
        self.out_tol = out.tol
        self.nsteps = nsteps
        return Kernel(
            "\n".join(lines),
            arrays,
            "y",
            sm,
            warps,
            rng.random() < 0.3,
            self.notes,
            (grid, 1, 1),
        )


# ---------------------------------------------------------------------- running and comparing
class Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise Timeout()


def compare(
    ref: np.ndarray, got: np.ndarray, tol: float, nan_amb: bool = False, zero_amb: bool = False
):
    """None when equal (within ``tol`` for approximate floats), else a description."""
    if ref.shape != got.shape:
        return f"shape {ref.shape} vs {got.shape}"
    if ref.dtype.kind != "f":
        bad = ref != got
    else:
        r, g = ref.astype(np.float64), got.astype(np.float64)
        nan = np.isnan(r) | np.isnan(g)
        bad = np.isnan(r) != np.isnan(g)
        if nan_amb:
            # NaN vs an identity can propagate (min(-inf, 0) vs min(NaN, 0)): non-finite
            # values on either side are not compared
            bad[:] = False
            nan |= ~np.isfinite(r) | ~np.isfinite(g)
        if tol == 0:
            same = (r == g) & (np.signbit(r) == np.signbit(g)) | (r == g) & (r != 0)
            if zero_amb:
                same = r == g
            bad |= ~nan & ~same
        else:
            fin = np.isfinite(r) & np.isfinite(g)
            scale = np.max(np.abs(r[np.isfinite(r)]), initial=0.0) + 1.0
            bad |= ~nan & ~fin & (r != g)
            bad |= fin & (np.abs(r - g) > tol * (np.abs(r) + scale))
            # an approximate value is a sum in a backend-chosen order: where it overflows, one
            # order gives -inf and another inf - inf = NaN, or inf where another stays just
            # finite (seed 933729: an f16 scan of a dot's result, sequential in the
            # interpreter, a tree in the PTX): non-finite against non-finite or against a
            # value past half the type's largest agree
            big = np.finfo(ref.dtype).max / 2
            edge = (~np.isfinite(r) | (np.abs(r) > big)) & (~np.isfinite(g) | (np.abs(g) > big))
            bad &= ~(edge & ~(np.isfinite(r) & np.isfinite(g)))
    if not bad.any():
        return None
    idx = list(zip(*np.nonzero(bad)))
    i = idx[0]
    return f"{len(idx)} of {ref.size} differ; first at {tuple(int(x) for x in i)}: interp {ref[i]!r} ptxsim {got[i]!r} (tol {tol})"


def _nan_padding_ambiguity(k: "Kernel", g: "Gen", ref: np.ndarray) -> bool:
    """Whether a mismatch is the unspecified identity placement of a min/max scan or reduce
    over NaN padding (``nan_amb``: maxnum(identity, NaN) is the identity, the NaN alone is NaN)
    reaching the output through a NaN test (FOUND 1035; 363 for float outputs, which
    ``compare`` treats NaN-agnostically unless a comparison turned the NaN into 0 / 1 first:
    seed 945487): the same kernel with zero padding must then agree."""
    from tilegen.runtime.asm import parse_module
    from tilegen.runtime.ptxsim import run_ptxsim
    from tilegen.runtime.interp.api import run_module

    if not g.nan_amb or "padding_value = nan" not in k.text:
        return False
    text = k.text.replace("padding_value = nan", "padding_value = zero")
    args = [(n, a.copy()) for n, a in k.args]
    r = run_module(parse_module(text, "k.mlir"), args, k.grid, stdout=io.StringIO())[k.out]
    args = [(n, a.copy()) for n, a in k.args]
    o = run_ptxsim(parse_module(text, "k.mlir"), args, k.grid, k.sm, stdout=io.StringIO())[k.out]
    return compare(np.asarray(r), np.asarray(o), g.out_tol, g.nan_amb, g.zero_amb) is None


def run_kernel(seed: int, skip=(), max_steps=None, check_ptxas=None, timeout=60.0):
    """('ok'|'invalid'|'unsupported'|'ambiguous'|'mismatch'|'ptxas'|'crash'|'hang', detail, kernel)."""
    from tilegen.runtime.asm import parse_module
    from tilegen.runtime.ptxsim import compile_to_ptx, run_ptxsim
    from tilegen.runtime.interp.api import run_module

    g = Gen(seed, skip, max_steps)
    k = g.generate()
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    stage = "parse"
    try:
        try:
            mod = parse_module(k.text, "k.mlir")
            stage = "interp"
            ref = run_module(mod, [(n, a.copy()) for n, a in k.args], k.grid, stdout=io.StringIO())[
                k.out
            ]
        except Timeout:
            raise
        except Exception as ex:  # the generator made something the front end rejects
            return "invalid", f"{stage}: {type(ex).__name__}: {ex}"[:2000], k
        stage = "ptxsim"
        try:
            got = run_ptxsim(
                parse_module(k.text, "k.mlir"),
                [(n, a.copy()) for n, a in k.args],
                k.grid,
                k.sm,
                stdout=io.StringIO(),
            )[k.out]
        except Timeout:
            raise
        except Exception as ex:
            msg = str(ex)
            if "does not support" in msg or "bytes of shared memory" in msg:
                return "unsupported", msg.splitlines()[0][:300], k  # a located refusal
            return "crash", traceback.format_exc()[-3000:], k
        with np.errstate(all="ignore"):
            diff = compare(np.asarray(ref), np.asarray(got), g.out_tol, g.nan_amb, g.zero_amb)
        if diff and _nan_padding_ambiguity(k, g, np.asarray(ref)):
            return "ambiguous", diff, k
        if diff:
            return "mismatch", diff, k
        if check_ptxas if check_ptxas is not None else _have_ptxas():
            stage = "ptxas"
            ptx = compile_to_ptx(parse_module(k.text, "k.mlir"), k.sm)
            err = _ptxas(ptx, k.sm)
            if err and err.startswith("spills") and g.max_elems > 32 * 32 * k.warps:
                # more than 32 elements a thread of one tile: spills are register pressure the
                # kernel asked for (tileiras spills there too), not a backend bug
                err = None
            if err:
                return "ptxas", err, k
            k.assembled = True
        return "ok", "", k
    except Timeout:
        return "hang", f"timeout after {timeout}s in {stage}", k
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _have_ptxas() -> bool:
    from tilegen.runtime.codegen.driver import find_ptxas

    return find_ptxas() is not None


def _ptxas(ptx: str, sm: str):
    from tilegen.runtime.codegen.driver import find_ptxas
    from tilegen.runtime.targets import EXTENDED_SMEM_FLAG

    arch = sm + "a" if f".target {sm}a" in ptx else sm
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "k.ptx"
        src.write_text(ptx)
        p = subprocess.run(
            [find_ptxas(), "-v", f"-arch={arch}", EXTENDED_SMEM_FLAG, str(src)]
            + ["-o", str(Path(d) / "k.cubin")],
            capture_output=True,
            text=True,
        )
    if p.returncode != 0:
        return p.stderr[-2000:]
    if "0 bytes spill stores, 0 bytes spill loads" not in p.stderr:
        return "spills: " + p.stderr[-1000:]
    return None


def _sig(status, detail):
    """What must stay the same while shrinking."""
    if status == "crash":
        return status, detail.strip().splitlines()[-1][:80]
    return status, None


def shrink(seed: int, status: str, detail: str, timeout: float):
    """Greedy: drop generation steps (then all later ones) while the failure keeps its kind."""
    want = _sig(status, detail)
    g = Gen(seed)
    g.generate()
    n = g.nsteps
    skip: set[int] = set()
    max_steps = n
    for m in range(0, n):  # fewest steps first
        st, de, _ = run_kernel(seed, skip, m, check_ptxas=status == "ptxas", timeout=timeout)
        if _sig(st, de) == want:
            max_steps = m
            break
    for i in range(max_steps - 1, -1, -1):
        st, de, _ = run_kernel(
            seed, skip | {i}, max_steps, check_ptxas=status == "ptxas", timeout=timeout
        )
        if _sig(st, de) == want:
            skip.add(i)
    st, de, k = run_kernel(seed, skip, max_steps, check_ptxas=status == "ptxas", timeout=timeout)
    return skip, max_steps, st, de, k


def report(seed, status, detail, k, skip=None, max_steps=None, out=sys.stdout):
    print(f"=== seed {seed}: {status} ({k.sm}, num_warps {k.warps})", file=out)
    if skip is not None:
        print(
            f"    reproduce: bench/fuzz_codegen.py --seed {seed} --skip {','.join(map(str, sorted(skip))) or '-'} --max-steps {max_steps} -v",
            file=out,
        )
    print("    arrays: " + ", ".join(f"{n}{a.shape}:{a.dtype}" for n, a in k.args), file=out)
    print("    " + detail.replace("\n", "\n    "), file=out)
    print(k.text, file=out)
    out.flush()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--start", type=int, default=None, help="first seed (default: random)")
    ap.add_argument("--seed", type=int, default=None, help="run one seed")
    ap.add_argument("--skip", default="", help="steps to leave out (with --seed)")
    ap.add_argument("--max-steps", type=int, default=None)
    ap.add_argument("--timeout", type=float, default=60.0, help="per-kernel seconds")
    ap.add_argument("--shrink", action="store_true", help="minimize failures")
    ap.add_argument(
        "--no-ptxas", action="store_true", help="do not assemble (default: every kernel)"
    )
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args(argv)
    warnings.simplefilter("ignore", RuntimeWarning)  # inf/NaN arithmetic in the references
    if a.seed is not None:
        skip = {int(x) for x in a.skip.split(",") if x and x != "-"}
        st, de, k = run_kernel(a.seed, skip, a.max_steps, False if a.no_ptxas else None, a.timeout)
        if a.verbose or st != "ok":
            report(a.seed, st, de, k)
        if st not in ("ok", "invalid", "unsupported", "ambiguous") and a.shrink:
            skip, ms, st2, de2, k2 = shrink(a.seed, st, de, a.timeout)
            report(a.seed, st2, de2, k2, skip, ms)
        print(st)
        return 0 if st in ("ok", "invalid", "unsupported", "ambiguous") else 1
    seed = a.start if a.start is not None else random.randrange(1 << 30)
    t0 = time.time()
    counts: dict[str, int] = {}
    fails = []
    assembled = 0
    while time.time() - t0 < a.seconds:
        st, de, k = run_kernel(seed, (), None, False if a.no_ptxas else None, a.timeout)
        counts[st] = counts.get(st, 0) + 1
        assembled += k.assembled
        if st not in ("ok", "invalid", "unsupported", "ambiguous"):
            fails.append(seed)
            if a.shrink:
                skip, ms, st2, de2, k2 = shrink(seed, st, de, a.timeout)
                report(seed, st2, de2, k2, skip, ms)
            else:
                report(seed, st, de, k)
        elif st in ("invalid", "unsupported", "ambiguous") and a.verbose:
            print(f"--- seed {seed}: invalid: {de.splitlines()[0][:200]}")
        seed += 1
    dt = time.time() - t0
    print(
        f"{sum(counts.values())} kernels in {dt:.0f}s (seeds {seed - sum(counts.values())}.."
        f"{seed - 1}): {counts}; assembled by ptxas: {assembled}; failing seeds {fails}"
    )
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
