"""The one table of named pipelines. A name here may be used in ``--pass-pipeline`` text like a
pass; it expands to its textual pipeline, nested where it appears (NVIDIA's CudaTileOptimizer
runs its passes nested on each function)."""

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

#: ``tilegen compile --emit=STAGE``: the stages in order, each the pipeline that produces it
#: from the previous one (``{cc}`` is the target's compute capability). Later stages (ptx,
#: cubin) append rows here.
COMPILE_STAGES: tuple[tuple[str, str], ...] = (
    ("cuda_tile", ""),
    ("nv_tileaa", "convert-cuda-tile-to-nv-tileaa{compute-capability={cc}}"),
    # ptx / cubin: layouts are assigned here, then runtime/codegen prints PTX (and ptxas
    # assembles it); see tilegen/commands/compile.py
    ("ptx", "nv-tileas-assign-layouts"),
    ("cubin", ""),
)
