"""tilegen's version texts: ``tilegen-tileiras --version`` (:func:`compiler_version`, also an
input of the compile cache key) and the bytecode versions it reads. Imports nothing of the
compiler, so ``--version`` / ``--list-versions`` start fast."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional


def _source_roots() -> list[Path]:
    import importlib.util

    roots = [Path(__file__).resolve().parent]
    for pkg in ("tilegen.runtime", "tilegen.generated"):
        spec = importlib.util.find_spec(pkg)
        if spec is not None and spec.submodule_search_locations:
            roots += [Path(p) for p in spec.submodule_search_locations]
    return roots


_FINGERPRINT: Optional[str] = None


def build_fingerprint() -> str:
    """A short hash of tilegen's sources (path, size, mtime of every .py/.yaml/.json file), so
    a cache entry from an older tilegen is never reused after the compiler changes."""
    global _FINGERPRINT
    if _FINGERPRINT is None:
        import hashlib  # here, not at the top: ~3 ms of every tilegen-tileiras start-up

        h = hashlib.sha256()
        for root in _source_roots():
            for dirpath, dirnames, filenames in os.walk(root):
                dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
                for name in sorted(filenames):
                    if name.endswith((".py", ".yaml", ".json", ".mlir")):
                        p = os.path.join(dirpath, name)
                        st = os.stat(p)
                        h.update(f"{p}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        _FINGERPRINT = h.hexdigest()[:16]
    return _FINGERPRINT


def tilegen_version() -> str:
    try:
        from importlib.metadata import version

        return version("tilegen")
    except Exception:  # noqa: BLE001 - not installed (source tree on sys.path)
        return "0+unknown"


def readable_bytecode_versions() -> list[str]:
    """The bytecode versions tilegen reads (``runtime.bytecode.layouts.PRODUCTION_READ_VERSIONS``
    computed from the generated table directly: importing the reader costs ~35 ms of start-up
    that ``--version`` / ``--list-versions`` do not need)."""
    import sys

    T = sys.modules.get("tilegen.generated.cuda_tile.bytecode_tables")
    if T is None:  # a pure data module: load it without the package (its __init__ costs ~28 ms)
        import importlib.util

        spec = importlib.util.find_spec("tilegen.generated")
        path = Path(list(spec.submodule_search_locations)[0]) / "cuda_tile" / "bytecode_tables.py"
        spec = importlib.util.spec_from_file_location("_tilegen_bytecode_tables", path)
        T = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(T)
    return [v for v in T.OPCODE_CEILINGS if v not in T.TEST_VERSIONS]


def newest_bytecode_version() -> str:
    return readable_bytecode_versions()[-1]


def compiler_version() -> str:
    """The ``--version`` text of ``tilegen-tileiras`` (also part of the cache key).

    The ``Cuda compilation tools, release X.Y, VX.Y.0+tilegen.V`` line keeps the shape cuTile's
    cache tool parses (``cutile_cache._cli``); X.Y is the newest Tile IR bytecode tilegen reads,
    not an NVIDIA toolkit release."""
    tile = newest_bytecode_version()
    return (
        f"tileiras: tilegen {tilegen_version()}, an open CUDA Tile IR compiler "
        "(drop-in for NVIDIA tileiras)\n"
        f"Cuda compilation tools, release {tile}, V{tile}.0+tilegen.{tilegen_version()}\n"
        f"Build tilegen.{build_fingerprint()}\n"
    )


__all__ = [
    "build_fingerprint",
    "compiler_version",
    "newest_bytecode_version",
    "readable_bytecode_versions",
    "tilegen_version",
]
