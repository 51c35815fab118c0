"""The one table of named pipelines. A name here may be used in ``--pass-pipeline`` text like a
pass; it expands to its textual pipeline, nested where it appears (NVIDIA's CudaTileOptimizer
runs its passes nested on each function). The compile pipeline's stages (which of these runs,
then the conversion, layouts, PTX and ptxas) are the table in runtime/driver.py; its
``optimize`` stage runs ``tile-optimize-O<opt_level>``."""

from __future__ import annotations

PIPELINES: dict[str, str] = {
    # opt level 0: nothing but optional FMA fusion
    "tile-optimize-O0": "",
    "tile-optimize-fma": "fuse-fma",
    # opt level >= 1: canonicalize, cse
    "tile-optimize-O1": "canonicalize,cse",
    # opt level >= 2 adds loop-invariant code motion (not implemented: same as O1)
    "tile-optimize-O2": "canonicalize,cse",
    # opt level >= 3: loop-split then canonicalize
    "tile-optimize-O3": "canonicalize,cse,loop-split,canonicalize",
}
