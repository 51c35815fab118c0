"""Hand-written ops without memory or regions: tokens, grid queries, terminators, print,
assert, globals and alloca, mma (see ``mma.py``)."""

from __future__ import annotations

import re

import numpy as np

from tilegen.runtime.attributes import SymbolRefAttr
from tilegen.runtime.interp import mma as mma_mod
from tilegen.runtime.interp.executor import Frame, Machine, Signal, attr, group, handler
from tilegen.runtime.interp.semlib import constant_tile
from tilegen.runtime.interp.values import (
    TOKEN,
    InterpError,
    as_signed,
    as_unsigned,
    compute_dtype,
    element_of,
    storage_bytes,
)
from tilegen.runtime.ir import Operation

# --------------------------------------------------------------------------- tokens, grid, misc


@handler(
    "make_token",
    "join_tokens",
    "gdc_wait_tko",
    "gdc_launch_dependents_tko",
    "memory_fence_alias_tko",
)
def _token(f: Frame, op):
    return [TOKEN for _ in op.results]


@handler("get_tile_block_id")
def _block_id(f: Frame, op):
    return [np.array(i, dtype=compute_dtype(r.type)) for i, r in zip(f.block_id, op.results)]


@handler("get_num_tile_blocks")
def _num_blocks(f: Frame, op):
    return [np.array(n, dtype=compute_dtype(r.type)) for n, r in zip(f.m.grid, op.results)]


@handler("return", "yield", "continue", "break")
def _terminator(f: Frame, op):
    return Signal(op.mnemonic, [f.get(v) for v in op.operands])


@handler("assert")
def _assert(f: Frame, op):
    cond = np.asarray(f.get(op.operands[0]))
    if not cond.all():
        raise InterpError(f"assertion failed: {attr(op, 'message')}")
    return []


_CONV = re.compile(r"%([-+ #0]*\d*(?:\.\d+)?)(hh|h|ll|l|j|z|t|L)?([diuoxXeEfFgGaAcsSpn%])")


def format_printf(fmt: str, args: list, types: list) -> str:
    """printf-style formatting; a tile argument prints as ``[e0, e1, ...]``."""
    it = iter(zip(args, types))

    def one(flags: str, conv: str, x, t) -> str:
        et = element_of(t)
        if conv in "diu":
            v = int(as_unsigned(x, et)) if conv == "u" else int(as_signed(x, et))
            return ("%" + flags + "d") % v
        if conv in "oxX":
            return ("%" + flags + conv) % int(as_unsigned(x, et))
        if conv in "eEfFgG":
            return ("%" + flags + conv) % float(x)
        if conv in "aA":
            return float(x).hex()
        if conv == "c":
            return chr(int(x))
        if conv == "p":
            return hex(int(x))
        return str(x)

    def repl(m: re.Match) -> str:
        flags, _, conv = m.groups()
        if conv == "%":
            return "%"
        try:
            x, t = next(it)
        except StopIteration:
            raise InterpError("print has fewer arguments than conversions") from None
        arr = np.asarray(x)
        if arr.ndim == 0:
            return one(flags, conv, arr, t)
        return "[" + ", ".join(one(flags, conv, e, t) for e in arr.reshape(-1)) + "]"

    return _CONV.sub(repl, fmt)


@handler("print_tko")
def _print(f: Frame, op):
    args = group(op, "args")
    text = format_printf(attr(op, "str"), [f.get(v) for v in args], [v.type for v in args])
    f.m.stdout.write(text)
    return [TOKEN for _ in op.results]


# --------------------------------------------------------------------------- globals


def allocate_globals(machine: Machine, module: Operation) -> None:
    for region in module.regions:
        for block in region.blocks:
            for g in block.ops:
                if g.name not in ("cuda_tile.global", "nv_tileaa.global"):
                    continue
                value = g.attributes.get("value") or g.attributes.get("initial_value")
                t = value.type
                arr = constant_tile(value, t)
                name = g.attributes["sym_name"].value
                machine.globals[name] = machine.heap.alloc_array(arr, t.element, name=f"@{name}")


@handler("get_global")
def _get_global(f: Frame, op):
    ref = op.attributes.get("name")
    name = ref.root if isinstance(ref, SymbolRefAttr) else getattr(ref, "value", str(ref))
    if name not in f.m.globals:
        raise InterpError(f"unknown global @{name}")
    return [np.array(f.m.globals[name], dtype=np.uint64)]


@handler("alloca")
def _alloca(f: Frame, op):
    t = op.results[0].type
    n = attr(op, "num_elem")
    align = attr(op, "alignment") or 16
    addr = f.m.heap.alloc(
        int(n) * storage_bytes(element_of(t).pointee), align=int(align), name="alloca"
    )
    return [np.array(addr, dtype=np.uint64)]


# --------------------------------------------------------------------------- mma


@handler("mmaf", "mmai", "mmaf_scaled")
def _mma(f: Frame, op):
    return [mma_mod.mma(op, [f.get(v) for v in op.operands], attr)]
