"""``--lineinfo`` / ``-g``: ``.file``/``.loc`` from the Tile IR locations, accepted by ptxas, and
SASS mapped back to the cuTile source lines by nvdisasm (docs/debugging.md)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tilegen.runtime.codegen.driver import find_ptxas
from tilegen.runtime.attributes import CallSiteLoc, DILocAttr, FileLineColLoc, FusedLoc, NameLoc
from tilegen.runtime.diagnostics import file_line_col
from tilegen.runtime.driver import compile_source, options_for

from paths import CORPUS_OUT, needs_shared

PTXAS = find_ptxas()
NVDISASM = Path(PTXAS).with_name("nvdisasm") if PTXAS else None
needs_tools = pytest.mark.skipif(
    PTXAS is None or not NVDISASM.is_file(),
    reason="ptxas/nvdisasm not installed (pip install nvidia-cuda-nvcc nvidia-cuda-nvdisasm)",
)
LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+(\d+)\b", re.M)
INLINED_AT = re.compile(r"inlined_at (\d+) (\d+) \d+")
FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]*)"', re.M)

KERNELS = ["vec_add", "softmax", "matmul_f16", "layernorm", "for_loops", "flash_attention"]

TEXT = """cuda_tile.module @m {
  entry @k(%p: tile<ptr<f32>>) {
    %c = constant <f32: 1.0> : tile<128xf32> loc("my_kernel.py":12:4)
    %v = make_tensor_view %p, shape = [128], strides = [1] : tensor_view<128xf32, strides=[1]>
        loc("my_kernel.py":13:8)
    %pv = make_partition_view %v : partition_view<tile=(128), tensor_view<128xf32, strides=[1]>>
        loc("my_kernel.py":13:8)
    %z = constant <i32: 0> : tile<i32> loc("my_kernel.py":14:4)
    %t = store_view_tko weak %c, %pv[%z] : tile<128xf32>,
        partition_view<tile=(128), tensor_view<128xf32, strides=[1]>>, tile<i32> -> token
        loc("my_kernel.py":15:4)
    return loc("my_kernel.py":16:4)
  } loc("my_kernel.py":11:0)
}
"""


def _compile(path_or_text, until="ptx", **fields):
    src = Path(path_or_text) if isinstance(path_or_text, Path) else path_or_text
    return compile_source(src, options_for("sm_90", **fields), until=until)


def _positions(loc, out: set) -> None:
    """Every (file, line) a location names: its sources, call sites and subprogram lines."""
    if isinstance(loc, FileLineColLoc):
        out.add((loc.file, loc.line))
    elif isinstance(loc, DILocAttr):
        out.add((loc.source.file, loc.source.line))
        if getattr(loc.scope, "line", None) is not None:
            out.add((loc.scope.file.name, loc.scope.line))  # a def line (DISubprogram)
    elif isinstance(loc, CallSiteLoc):
        _positions(loc.callee, out)
        _positions(loc.caller, out)
    elif isinstance(loc, NameLoc) and loc.child is not None:
        _positions(loc.child, out)
    elif isinstance(loc, FusedLoc):
        for sub in loc.locations:
            _positions(sub, out)


def _op_lines(path: Path) -> set[tuple[str, int]]:
    module = compile_source(path, options_for("sm_90"), until="read").module
    lines: set = set()
    for op in module.walk():
        _positions(op.loc, lines)
    return lines


@needs_shared(CORPUS_OUT)
@pytest.mark.parametrize("kernel", KERNELS)
def test_loc_lines_are_the_ops_source_lines(kernel):
    path = CORPUS_OUT / f"{kernel}.tileirbc"
    ptx = _compile(path, lineinfo=True).ptx
    files = dict(FILE.findall(ptx))
    assert files["1"] == "kernels.py" and set(files.values()) <= {"kernels.py", "_stub.py"}
    locs = [(files[f], int(line)) for f, line, _ in LOC.findall(ptx)]
    locs += [(files[f], int(line)) for f, line in INLINED_AT.findall(ptx)]
    assert len(locs) >= 4
    op_lines = _op_lines(path)
    assert set(locs) <= op_lines, sorted(set(locs) - op_lines)
    emitted = {line for f, line in locs if f == "kernels.py"}
    # every memory op's line is in the table
    module = _compile(path, until="layouts").module
    mem = {
        file_line_col(op.loc).line
        for op in module.walk()
        if op.name in ("nv_tileaa.tiled_load", "nv_tileaa.tiled_store")
        and file_line_col(op.loc) is not None
    }
    assert mem and mem <= emitted, sorted(mem - emitted)
    # a .loc comes before the first instruction of the body and never dangles at the end
    body = ptx[ptx.index("{", ptx.index(".entry")) :]
    first_ins = re.search(r"^\t(?!\.|//)[a-z@]", body, re.M).start()
    assert LOC.search(body[:first_ins]) is not None


@needs_shared(CORPUS_OUT)
def test_vec_add_matches_tileiras_positions():
    """tileiras 13.5 --lineinfo on vec_add emits .loc 1 224 0 (the def line), 226 8, 227 8,
    228 8, 229 33, 229 4 (plus `.loc 1 0 4` on its ret): the same positions."""
    ptx = _compile(CORPUS_OUT / "vec_add.tileirbc", lineinfo=True).ptx
    got = {(int(a), int(b)) for _, a, b in LOC.findall(ptx)}
    assert "inlined_at" not in ptx
    assert got == {(224, 0), (226, 8), (227, 8), (228, 8), (229, 33), (229, 4)}


@needs_shared(CORPUS_OUT)
def test_no_lineinfo_no_directives_and_same_code():
    path = CORPUS_OUT / "softmax.tileirbc"
    plain = _compile(path).ptx
    lined = _compile(path, lineinfo=True).ptx
    assert ".loc" not in plain and ".file" not in plain
    strip = [x for x in lined.splitlines() if not re.match(r"\s*\.(loc|file)\s", x)]
    assert "\n".join(strip).rstrip() == plain.rstrip()


def test_text_locations():
    ptx = _compile(TEXT, lineinfo=True).ptx
    assert FILE.findall(ptx) == [("1", "my_kernel.py")]
    got = [(int(a), int(b)) for _, a, b in LOC.findall(ptx)]
    assert (11, 0) in got and (15, 4) in got
    assert all(line in (11, 12, 13, 14, 15, 16) for line, _ in got)


@needs_tools
@needs_shared(CORPUS_OUT)
@pytest.mark.parametrize("kernel", ["vec_add", "matmul_f16"])
def test_nvdisasm_maps_sass_to_source(kernel, tmp_path):
    path = CORPUS_OUT / f"{kernel}.tileirbc"
    c = _compile(path, until="ptxas", lineinfo=True)
    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(c.cubin)
    out = subprocess.run(
        [str(NVDISASM), "--print-line-info", str(cubin)], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    mapped = {int(x) for x in re.findall(r'File "kernels.py", line (\d+)', out.stdout)}
    emitted = {int(a) for _, a, _ in LOC.findall(c.ptx)}
    assert len(mapped) >= 3 and mapped <= emitted
    # the plain cubin has no line table
    plain = tmp_path / "p.cubin"
    plain.write_bytes(_compile(path, until="ptxas").cubin)
    out = subprocess.run(
        [str(NVDISASM), "--print-line-info", str(plain)], capture_output=True, text=True
    )
    assert "kernels.py" not in out.stdout


@needs_tools
@needs_shared(CORPUS_OUT)
def test_inlined_stub_calls_map_to_the_calling_line(tmp_path):
    """cuTile inlines its ``_stub.py`` helpers (``astype``); their instructions carry
    ``function_name ..., inlined_at <kernel line>`` as in tileiras's PTX, which ptxas takes only
    after a ``.loc`` of that line, and nvdisasm prints as "inlined at"."""
    c = _compile(CORPUS_OUT / "layernorm.tileirbc", until="ptxas", lineinfo=True)
    assert re.search(r"function_name \$L__info_string0, inlined_at 1 455 8", c.ptx)
    assert ".section\t.debug_str" in c.ptx
    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(c.cubin)
    out = subprocess.run(
        [str(NVDISASM), "--print-line-info-inline", str(cubin)], capture_output=True, text=True
    )
    assert 'File "_stub.py", line 678 inlined at "kernels.py", line 455' in out.stdout


def _elf_sections(data: bytes) -> dict[str, bytes]:
    """Section name -> contents of a 64-bit little-endian ELF (a cubin)."""
    import struct

    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    heads = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    strtab = heads[shstrndx]
    names = data[strtab[4] : strtab[4] + strtab[5]]
    out = {}
    for name, _type, _flags, _addr, off, size in heads:
        key = names[name : names.index(b"\0", name)].decode()
        out[key] = data[off : off + size] if _type != 8 else b""
    return out


@needs_shared(CORPUS_OUT)
@pytest.mark.parametrize("kernel", ["vec_add", "layernorm", "matmul_f16"])
def test_device_debug_dwarf(kernel):
    """``-g`` (at -O0, as tileiras): ``.target sm_XX, debug``, line info, DWARF 2
    ``.debug_abbrev``/``.debug_info`` naming the kernel; ptxas (at ``--opt-level 0``) keeps them
    and derives ``.debug_line``."""
    c = _compile(CORPUS_OUT / f"{kernel}.tileirbc", until="ptxas", opt_level=0, device_debug=True)
    assert re.search(r"^\.target sm_90a?, debug$", c.ptx, re.M)
    assert "$L__func_begin0:" in c.ptx and "$L__func_end0:" in c.ptx
    assert LOC.search(c.ptx)
    sections = _elf_sections(c.cubin)
    for name in (".debug_info", ".debug_abbrev", ".debug_line"):
        assert name in sections, sorted(sections)
    info = sections[".debug_info"]
    assert info[4:6] == b"\x02\x00"  # DWARF version 2
    assert int.from_bytes(info[:4], "little") == len(info) - 4
    assert kernel.encode() + b"_K" in info and b"kernels.py\0" in info


def test_device_debug_needs_o0():
    from tilegen.runtime.diagnostics import CompileError

    with pytest.raises(CompileError) as ei:
        _compile(TEXT, device_debug=True)
    assert ei.value.exit_code == 2


@needs_shared(CORPUS_OUT)
@pytest.mark.parametrize("flags", [["--lineinfo"], ["-g", "-O0"]], ids=["lineinfo", "g"])
def test_ptxsim_runs_debug_ptx(flags):
    """ptxsim's parser skips ``.loc``/``.file``/``.section``: the same results with line info."""
    import io
    from contextlib import redirect_stderr, redirect_stdout

    from tilegen.cli import main

    path = CORPUS_OUT / "layernorm.tileirbc" if flags == ["--lineinfo"] else None
    path = path or CORPUS_OUT / "vec_add.tileirbc"
    argv = ["run", str(path), "--args", str(path.with_suffix(".npz")), "--backend", "ptxsim"]
    err = io.StringIO()
    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        rc = main(argv + flags + ["--check", "--rtol", "1e-2", "--atol", "1e-2"])
    assert rc == 0, err.getvalue()
