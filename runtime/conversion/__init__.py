"""The cuda_tile -> nv_tileaa conversion (spec/lowerings/cuda_tile_to_nv_tileaa.yaml).

``convert_module(module, compute_capability)`` rewrites a ``cuda_tile.module`` (or a
``builtin.module`` holding one) into a ``builtin.module`` of nv_tileaa functions; it raises
:class:`ConversionError` with located diagnostics when the target is bad or a cuda_tile op is left.
"""

from tilegen.runtime.conversion.driver import ConversionError, convert_module, parse_target

__all__ = ["ConversionError", "convert_module", "parse_target"]
