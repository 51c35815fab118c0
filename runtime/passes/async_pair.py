"""The async rule's CTA pair (docs/pipelines.md sections 18-19): whether a GEMM-form kernel
that asks for clusters of two CTAs runs on a pair, and one CTA's stage there."""

from __future__ import annotations

from typing import Optional

from tilegen.runtime.ir import BlockArgument, Operation, OpResult
from tilegen.runtime.layouts.async_forms import operand_load
from tilegen.runtime.layouts.kernel import one_cta_reason
from tilegen.runtime.passes.async_decision import ELEMENT_BYTES, elem_key
from tilegen.runtime.passes.async_epilogue import registers_only, tma_store_plan

#: the memory ops a CTA pair must not run twice (each CTA runs the whole kernel but the loop's
#: half and the TMA store's half)
_WRITES = ("store", "atomic", "scatter", "print", "assert")


def pair_stage_bytes(dot: Operation, sm: int) -> int:
    """One CTA's stage on a pair: 128 rows of A, and half of B (sm_100) or all of it (sm_90,
    where the halves the two CTAs copy are multicast to both)."""
    a, b = dot.operands[0].type, dot.operands[1].type
    esz = ELEMENT_BYTES[elem_key(a)]
    (M, K), N = a.shape, b.shape[1]
    return (M // 2 * K + K * (N // 2 if sm >= 100 else N)) * esz


def cta_pair_wanted(func: Operation) -> bool:
    """Whether the kernel's hints ask for clusters of two CTAs (``num_cta_in_cga = 2``)."""
    from tilegen.runtime.layouts.kernel import kernel_spec_int

    return kernel_spec_int(func, "num_cta_in_cga") == 2


def pair_reason(func: Operation, loop: Operation, dot: Operation, options) -> Optional[str]:
    """None when the GEMM form runs on a CTA pair (docs/pipelines.md sections 18-19), else why
    not. Each CTA holds 128 rows of A and of the accumulator. On sm_100 the even CTA's thread
    issues ``tcgen05.mma.cta_group::2`` (M 256) and each CTA stages half of B's columns; on
    sm_90 each CTA runs its own wgmmas on the whole of B, which the two CTAs copy half each
    and multicast to both. So the M x N tile must be 256 rows, its accumulator must stay in
    registers up to a TMA store (:func:`~.async_epilogue.registers_only`: each CTA stores its
    own rows), and nothing else in the kernel may write memory (both CTAs run it)."""
    sm = options.target.sm
    if sm not in (90, 100):
        return f"sm_{sm} has no CTA pairs here (sm_90: TMA multicast, sm_100: cta_group::2)"
    a, b = dot.operands[0].type, dot.operands[1].type
    if getattr(a, "rank", 0) != 2 or getattr(b, "rank", 0) != 2:
        return "the dot is not 2-d"
    M, N = a.shape[0], b.shape[1]
    why = one_cta_reason(sm, M, N, options.cta_pair)
    if why is not None:
        return why
    if M not in (128, 256):
        return f"the pair takes 128 or 256-row tiles (64 or 128 rows per CTA), not {M}"
    if sm == 90:
        K = a.shape[1]
        if K % 16:
            return f"the sm_90 pair multicasts B in two halves of K rows, multiples of 8: not K {K}"
    elif N not in (64, 128, 256):
        return (
            f"the pair takes N 64, 128 or 256 (a thread holds a row of N accumulators, half of "
            f"one of 256 on 8 warps; B's halves a multiple of 32 columns), not {N}"
        )
    if not isinstance(dot.operands[2], BlockArgument):
        return "the pair takes the plain GEMM form (the dot accumulates into the loop's value)"
    if sm != 90 and any(_converted_operand(v) for v in dot.operands[:2]):
        # (sm_90: each CTA's consumers round their own stage; sm_100's MMAs read both CTAs')
        return "the pair's operands reach the dot as staged (no f32 -> tf32 rounding)"
    from tilegen.runtime.layouts.tma_rules import tma_describable

    for name, v in zip("AB", dot.operands[:2]):  # (the pair's halves and multicast are TMA's)
        if getattr(v, "op", None) is not None and v.op.name == "nv_tileaa.fp_to_fp":
            v = v.op.operands[0]
        load = operand_load(v)[0]
        why = tma_describable(load) if load is not None else "it is not a tiled_load"
        if why is not None:
            return (
                f"the pair stages its operands by TMA, and operand {name}'s load cannot be: {why}"
            )
    # (each CTA loads its own rows of C in its fragment's / TMEM rows' order, fragment_load.py)
    if not registers_only(func, loop, sm, 128, fragment=True):
        return (
            "the pair keeps each CTA's rows in registers up to the kernel's TMA store: a "
            "uniform initial value or C as loaded, and elementwise ops from the "
            "loop to one tiled_store"
        )
    store, _ = tma_store_plan(func, loop, 1 << 20, 1 << 20)
    tiles = [o.results[0].type for o in loop.walk() if o.name == "nv_tileaa.tiled_load"]
    tiles.append(store.opdef.operand_group(store, "value")[0].type)
    if any(t.rank < 2 or any(n != 1 for n in t.shape[:-2]) for t in tiles):
        # (a batch's (1, M, N) tiles: leading unit dims, the pair's boxes and halves 2-d)
        return "the pair takes 2-d loads and stores, or a batch's with leading unit dims"
    for op in func.walk():
        if op is not store and any(w in op.name.split(".")[-1] for w in _WRITES):
            return f"'{op.name}' would run in both CTAs of the pair"
    return None


def _converted_operand(v) -> bool:
    return isinstance(v, OpResult) and v.op.name == "nv_tileaa.fp_to_fp"
