"""tilegen: a spec-driven compiler for NVIDIA CUDA Tile IR.

``tilegen.compile(bytecode_or_text, gpu_name="sm_90")`` compiles in process (see
:mod:`tilegen.api`); the names below load on first use so ``import tilegen`` stays fast.
"""

_LAZY = {
    "compile": "tilegen.api",
    "CompileError": "tilegen.api",
    "CompileResult": "tilegen.api",
}

__all__ = sorted(_LAZY)


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tilegen' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
