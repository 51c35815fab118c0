"""The test suite's one place for inputs that live outside the repository.

``SHARED`` is ``$TILEGEN_SHARED`` or ``../shared`` beside the repository root (None when absent;
see ``tilegen.runtime.paths``). A test that needs a shared input marks itself with
:func:`needs_shared` (or uses :func:`shared_files` for parameters): with no shared directory it
skips and says why; with one present, a missing input is a failure, never a skip (conftest.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import pytest

from tilegen.runtime.paths import ENV, repo_root, shared_dir, shared_path

REPO: Path = repo_root()
SHARED: Optional[Path] = shared_dir()
#: SHARED, or a path that does not exist when there is none
SHARED_ROOT: Path = shared_path()
CORPUS: Path = shared_path("corpus", "cutile")
CORPUS_OUT: Path = CORPUS / "out"
CONFORMANCE: Path = shared_path("conformance", "cuda-tile", "test")
SEEDS: Path = shared_path("seeds")
REFERENCE: Path = shared_path("reference")

#: the reason every skip for a missing shared directory gives
ABSENT = f"../shared is not beside the repository and ${ENV} is not set"


def needs_shared(*paths: Path) -> pytest.MarkDecorator:
    """Mark a test (or module, via ``pytestmark``) as reading ``paths`` under ``SHARED``.

    No shared directory: the test skips with :data:`ABSENT`. Shared directory present but a path
    missing: the test fails (conftest.py), so a moved input cannot hide a regression."""
    return pytest.mark.shared_input(*[str(p) for p in paths] or [str(CORPUS)])


def shared_files(directory: Path, pattern: str) -> list[Path]:
    """``directory.glob(pattern)`` sorted, for parametrizing; [] when there is no shared
    directory. With the shared directory present, no match is an error at collection."""
    if SHARED is None:
        return []
    found = sorted(directory.glob(pattern))
    if not found:
        raise FileNotFoundError(f"{SHARED} is present but {directory}/{pattern} matches nothing")
    return found
