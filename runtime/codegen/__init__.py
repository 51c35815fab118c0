"""PTX code generation from the nv_tileas stage (nv_tileaa ops whose tiles carry layouts).

One module per concern: :mod:`abi` (entry params), :mod:`regs` (virtual registers),
:mod:`selection` (op -> PTX instruction rows), :mod:`addressing` (tiled access addresses and
bounds masks from the layout's thread -> element map), :mod:`emit` (the walk).
"""

from tilegen.runtime.codegen.emit import CodegenError, emit_ptx

__all__ = ["CodegenError", "emit_ptx"]
