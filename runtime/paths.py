"""Where the shared inputs live: NVIDIA's lit tests, the cuTile corpus, seeds and inventories.

They sit in a ``shared`` directory beside the repository (``../shared`` from the repository root)
or wherever ``$TILEGEN_SHARED`` points. Only tests, benchmarks and oracle scripts read them;
nothing here changes what tilegen compiles. This module imports nothing from tilegen.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

#: the environment variable that names the shared directory explicitly
ENV = "TILEGEN_SHARED"


def repo_root() -> Path:
    """The repository root (``runtime/`` is ``tilegen.runtime`` in an editable install)."""
    return Path(__file__).resolve().parent.parent


def shared_dir() -> Optional[Path]:
    """``$TILEGEN_SHARED`` when set, else ``../shared`` beside the repository; None when that
    directory does not exist."""
    env = os.environ.get(ENV)
    root = Path(env) if env else repo_root().parent / "shared"
    return root.resolve() if root.is_dir() else None


def shared_path(*parts: str) -> Path:
    """``<shared>/<parts>``; when there is no shared directory, a path that does not exist (so
    ``is_dir()``/``glob()`` answer as for a missing input)."""
    root = shared_dir()
    base = root if root is not None else repo_root().parent / "shared (absent)"
    return base.joinpath(*parts)


def corpus_dir() -> Path:
    """The cuTile corpus (``corpus/cutile``: manifest.json, README, ``out/``)."""
    return shared_path("corpus", "cutile")


def corpus_out() -> Path:
    """The cuTile corpus outputs: ``.tileirbc``, ``.mlir``, ``.npz`` and tileiras's ``ptx/``."""
    return corpus_dir() / "out"


def conformance_tests() -> Path:
    """NVIDIA's cuda-tile lit tests (``conformance/cuda-tile/test``)."""
    return shared_path("conformance", "cuda-tile", "test")
