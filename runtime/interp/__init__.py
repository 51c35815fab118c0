"""The NumPy reference interpreter: runs a ``cuda_tile`` kernel (or its nv_tileaa form) on the CPU.

It is the oracle later stages (lowering, PTX, GPU) are checked against.

| module | what it holds |
|---|---|
| ``runtime/floats.py`` | exact f16/bf16/tf32/f8/f4 emulation: rounding in every mode, storage bits (shared with codegen) |
| ``values`` | how tiles are held (NumPy dtypes per element type), bits <-> values, literals |
| ``memory`` | the flat byte-addressed heap; tensor, partition, strided, gather/scatter views |
| ``semlib`` | helpers the spec's ``semantics.expr`` strings call |
| ``elementwise`` | evaluates ops from their spec ``semantics`` (domains, signedness, rounding, ftz) |
| ``executor`` | dispatch, SSA environment, control signals, grid launch (``run_kernel``) |
| ``ops_core`` | hand-written: tokens, grid queries, terminators, print, assert, globals, alloca |
| ``ops_memory`` | hand-written: views, view/pointer loads and stores, atomics, multimem views |
| ``ops_regions`` | hand-written: if, for, loop (break/continue), reduce, scan |
| ``mma`` | mmaf / mmai / mmaf_scaled with exact input precisions |
| ``calling`` | cuTile's calling convention: arrays -> (pointer, sizes, strides), scalars |
| ``api`` | ``load_module``, ``run_module``, ``run_npz``: what ``tilegen run`` uses |
| ``lowered`` | ``--lower-to nv_tileaa``: convert (runtime/conversion), verify, then run that |
| ``ops_nv_tileaa`` | hand-written nv_tileaa: memrefs, tiled/pointer memory, atomics, dot, reduce |
| ``ops_std`` | what spec/ops/{arith,scf} declare `kind: interpreter`: arith.cmp*, constant, index casts, scf |

Public API: ``from tilegen.runtime.interp import run_module, load_module, RunError``.
"""

from tilegen.runtime.interp.api import RunError, load_module, run_module, run_npz

__all__ = ["RunError", "load_module", "run_module", "run_npz"]
