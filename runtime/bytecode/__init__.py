"""Tile IR bytecode reader and writer, driven by generated/cuda_tile/bytecode_tables.py.

``read_bytecode(data, filename)`` -> ``cuda_tile.module`` Operation;
``write_bytecode(module, version)`` -> bytes. Both raise :class:`BytecodeError` on bad input.
"""

from tilegen.runtime.bytecode.errors import BytecodeError, BytecodeWriteError
from tilegen.runtime.bytecode.reader import read_bytecode, read_version
from tilegen.runtime.bytecode.writer import write_bytecode

__all__ = ["BytecodeError", "BytecodeWriteError", "read_bytecode", "read_version", "write_bytecode"]
