"""A cuTile GEMM whose K-loop trip count is read from memory before the loop (public
``cuda.tile`` API): the async path's prologue split (docs/pipelines.md section 29) must keep it
on today's path, since the producer warp group needs that scalar and only the consumers read
memory before the loop. Kept apart from the test module: cuTile evaluates the kernel's
annotations, so the module has no ``from __future__ import annotations``."""

import numpy as np


def export_gemm_loaded_trips(path: str, a, b, c, trips) -> None:
    """Write the kernel's bytecode to ``path``, specialised for these arrays as ``ct.launch``
    would (128 x 128 x 64 tiles)."""
    import cuda.tile as ct
    from cuda.tile.compilation import CallingConvention, KernelSignature, export_kernel

    from fuzz_async import _constraint

    zero = ct.PaddingMode.ZERO

    def gemm_loaded_trips(
        A, B, C, Trips, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]
    ):
        i, j = ct.bid(0), ct.bid(1)
        n = ct.gather(Trips, 0)  # the trip count, read before the K loop
        acc = ct.full((TM, TN), 0, ct.float32)
        for k in range(n):
            x = ct.load(A, index=(i, k), shape=(TM, TK), padding_mode=zero)
            y = ct.load(B, index=(k, j), shape=(TK, TN), padding_mode=zero)
            acc = ct.mma(x, y, acc)
        ct.store(C, index=(i, j), tile=acc)

    arrays = zip(("float16", "float16", "float32", "int32"), (a, b, c, trips))
    params = [_constraint(t, x) for t, x in arrays] + [128, 128, 64]
    sig = KernelSignature(params, CallingConvention.cutile_python_v1())
    export_kernel(ct.kernel(gemm_loaded_trips), [sig], path, output_format="tileir_bytecode")


def problem(rng: np.random.Generator) -> tuple:
    """(A, B, C, Trips, expected C): 256 x 192 x 256, the loop runs over all 4 K tiles."""
    a = rng.integers(-2, 3, (256, 256)).astype(np.float16)
    b = rng.integers(-2, 3, (256, 192)).astype(np.float16)
    c = np.zeros((256, 192), np.float32)
    trips = np.array([4], np.int32)
    return a, b, c, trips, a.astype(np.float32) @ b.astype(np.float32)
