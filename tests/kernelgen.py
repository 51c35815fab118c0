"""Small cuda_tile kernels for codegen tests: load one tile, run a body, store one tile; compare
the PTX simulator with the reference interpreter."""

from __future__ import annotations

import io
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from tilegen.runtime.asm import parse_module
from tilegen.runtime.codegen.driver import find_ptxas
from tilegen.runtime.ptxsim import compile_to_ptx, run_ptxsim
from tilegen.runtime.interp.api import run_module

PTXAS = find_ptxas()
NP = {
    "f32": np.float32,
    "f64": np.float64,
    "f16": np.float16,
    "i8": np.int8,
    "i16": np.int16,
    "i32": np.int32,
    "i64": np.int64,
}


def ty(shape, e: str) -> str:
    """``tile<AxBxE>`` (``tile<E>`` for a 0-d shape)."""
    return "tile<" + "".join(f"{s}x" for s in shape) + e + ">"


def _view(name: str, shape, e: str):
    r = len(shape)
    args = [f"%{name}: tile<ptr<{e}>>"]
    args += [f"%{name}s{d}: tile<i32>" for d in range(r)]
    args += [f"%{name}t{d}: tile<i32>" for d in range(r)]
    tv = f"tensor_view<{'x'.join('?' * r)}x{e}, strides=[{','.join(['?'] * (r - 1) + ['1'])}]>"
    sizes = ", ".join(f"%{name}s{d}" for d in range(r))
    strides = ", ".join([f"%{name}t{d}" for d in range(r - 1)] + ["1"])
    pv = f"partition_view<tile=({'x'.join(map(str, shape))}), {tv}>"
    lines = [
        f"%tv{name} = make_tensor_view %{name}, shape = [{sizes}], strides = [{strides}]"
        f" : tile<i32> -> {tv}",
        f"%pv{name} = make_partition_view %tv{name} : {pv}",
    ]
    return args, lines, pv


def kernel(in_shape, out_shape, body, e="f32", eo=None, warps=None) -> str:
    """A kernel ``k(x, y)``: ``%t`` = x's tile of ``in_shape``; ``body`` (MLIR lines) defines
    ``%r`` of ``out_shape``, stored to y. ``%c0`` is the i32 constant 0, ``%bx`` the block id."""
    eo = eo or e
    a_in, l_in, pv_in = _view("x", in_shape, e)
    a_out, l_out, pv_out = _view("y", out_shape, eo)
    zi = ", ".join(["%c0"] * len(in_shape))
    zo = ", ".join(["%c0"] * len(out_shape))
    hints = f" optimization_hints=<sm_90 = {{num_warps = {warps}}}>" if warps else ""
    lines = [
        f"cuda_tile.module @m {{ entry @k({', '.join(a_in + a_out)}){hints} {{",
        "%tok = make_token : token",
        "%c0 = constant <i32: 0> : tile<i32>",
        "%bx, %by, %bz = get_tile_block_id : tile<i32>",
        *l_in,
        *l_out,
        f"%t, %tk = load_view_tko weak %pvx[{zi}] token = %tok : {pv_in}, tile<i32>"
        f" -> {ty(in_shape, e)}, token",
        *body,
        f"%st = store_view_tko weak %r, %pvy[{zo}] token = %tok : {ty(out_shape, eo)}, {pv_out},"
        " tile<i32> -> token",
        "return",
        "} }",
    ]
    return "\n".join(lines)


def inputs(shape, e: str, seed: int = 0) -> np.ndarray:
    rng = np.random.RandomState(seed)
    if e.startswith("f"):
        return rng.randn(*shape).astype(NP[e])
    info = np.iinfo(NP[e])
    return rng.randint(max(info.min, -1000), min(info.max, 1000), size=shape).astype(NP[e])


def run_both(text: str, x: np.ndarray, out_shape, eo, sm: str = "sm_90"):
    """(interpreter y, ptxsim y, interpreter stdout, ptxsim stdout)."""
    y = np.zeros(out_shape, NP[eo])
    args = [("x", x), ("y", y)]
    out_i, out_p = io.StringIO(), io.StringIO()
    ref = run_module(parse_module(text, "k.mlir"), args, (1, 1, 1), stdout=out_i)["y"]
    got = run_ptxsim(parse_module(text, "k.mlir"), args, (1, 1, 1), sm, stdout=out_p)["y"]
    return ref, got, out_i.getvalue(), out_p.getvalue()


def ptx_of(text: str, sm: str = "sm_90") -> str:
    return compile_to_ptx(parse_module(text, "k.mlir"), sm)


from tilegen.runtime.targets import EXTENDED_SMEM_FLAG  # noqa: E402


def ptxas(ptx: str, sm: str) -> str:
    """ptxas -v stderr; raises AssertionError when ptxas rejects the PTX."""
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "k.ptx"
        src.write_text(ptx)
        p = subprocess.run(
            # (tilegen's own assembly passes tileiras's extended-shared-memory flag too)
            [
                PTXAS,
                "-v",
                f"-arch={sm}",
                EXTENDED_SMEM_FLAG,
                str(src),
                "-o",
                str(Path(d) / "k.cubin"),
            ],
            capture_output=True,
            text=True,
        )
    assert p.returncode == 0, p.stderr
    return p.stderr
