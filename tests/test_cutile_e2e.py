"""cuTile Python -> tilegen-tileiras -> cubin, end to end (issue 8).

One subprocess imports cuTile, installs the ``tileiras`` launcher first on PATH, hides the
NVIDIA tileiras wheel from cuTile (tilegen.cutile.use_tilegen) and exports every kernel of
tests/cutile_kernels.py with ``export_kernel(..., output_format="cubin", gpu_code="sm_90")``.

* kernels in EXPECTED_TO_COMPILE must export (a real ELF cubin, and the shim log shows tilegen
  compiled them);
* every other kernel must either export too (then a warning asks to add it to the list) or fail
  the way tileiras fails: cuTile's CompilerExecutionError with tileiras's exit code 3 or 5 and a
  located ``cutile_kernels.py:LINE:COL: error: ...`` diagnostic, never a Python traceback.

A second subprocess exports the same kernels with NVIDIA's tileiras (when installed) to prove that
each kernel is valid cuTile, so a failure above is a tilegen gap and not a broken test kernel.

Corpus coverage. ../shared/corpus/cutile holds the Tile IR cuTile produced from NVIDIA's
kernels.py (source not public); the kernels of tests/cutile_kernels.py reproduce each corpus
kernel's feature set with the public cuTile API (same parameters, dtypes, tile sizes, calling
convention and hints). ``test_corpus_features_covered`` disassembles the bytecode cuTile wrote for
them (``CUDA_TILE_DUMP_BYTECODE`` in the tilegen export, tilegen's disassembler) and checks that
every op, element type and listed op attribute of the corpus kernel's ``out/<k>.mlir`` occurs in
the kernels mapped to it here (:data:`CORPUS_COVERAGE` is read from this table):

| corpus kernel | tests/cutile_kernels.py kernel(s) |
|---|---|
| vec_add | vec_add, vec_add_i32, vec_mul_sub, axpy |
| unary_math | unary_math, unary_math_full |
| more_math | more_math |
| math_f64 | math_f64, math_f64_full |
| int_ops | int_ops, int_ops_full |
| uint_floordiv_bug | uint_floordiv_bug |
| compare_select | compare_select, compare_select_full |
| casts | casts, casts_full |
| bit_ops | bit_ops |
| pack_bytes | pack_bytes |
| reduce_rows | reduce_rows, reduce_rows_full |
| reduce_cols_loop | reduce_cols_loop, reduce_cols_loop_full |
| scan_cumsum | scan_cumsum, scan_cumsum_full |
| softmax | softmax |
| layernorm | layernorm, layernorm_full |
| transpose2d | transpose2d, add2d |
| reshape_expand | reshape_expand |
| cat_extract | cat_extract |
| iota | iota, iota_full |
| matmul_f16 | matmul_f16 |
| matmul_tf32 | matmul_tf32 |
| matmul_int8 | matmul_int8 |
| matmul_f64 | matmul_f64 |
| matmul_fp8 | matmul_fp8 |
| batched_matmul | batched_matmul |
| flash_attention | flash_attention |
| control_if | control_if, control_if_full |
| for_loops | for_loops |
| atomics | atomics, atomics_full |
| gather_scatter | gather_scatter, gather_scatter_full |
| raw_pointer | raw_pointer |
| print_kernel | print_kernel |
| newer_ops | newer_ops |
| advanced_indexing | advanced_indexing |

``uint_floordiv_bug`` is the corpus's deliberately invalid kernel (cuTile emits ``divi unsigned
rounding<negative_inf>``, which the Tile IR verifier rejects): tilegen must refuse it like NVIDIA's
tileiras, exit code 3 with the same verifier message.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("cuda.tile", reason="cuda-tile is not installed (pip install -e '.[cutile]')")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from cutile_kernels import kernels  # noqa: E402

#: kernels tilegen compiles today; extend as runtime/codegen grows (the lead owns this list)
EXPECTED_TO_COMPILE = [
    "add2d",
    "advanced_indexing",
    "atomics",
    "atomics_full",
    "axpy",
    "batched_matmul",
    "bit_ops",
    "casts",
    "casts_full",
    "cat_extract",
    "compare_select",
    "compare_select_full",
    "control_if",
    "control_if_full",
    "flash_attention",
    "for_loops",
    "gather_scatter",
    "gather_scatter_full",
    "int_ops",
    "int_ops_full",
    "iota",
    "iota_full",
    "layernorm",
    "layernorm_full",
    "math_f64",
    "math_f64_full",
    "matmul_f16",
    "matmul_f64",
    "matmul_fp8",
    "matmul_int8",
    "matmul_tf32",
    "more_math",
    "newer_ops",
    "pack_bytes",
    "print_kernel",
    "raw_pointer",
    "reduce_cols_loop",
    "reduce_cols_loop_full",
    "reduce_rows",
    "reduce_rows_full",
    "reshape_expand",
    "scan_cumsum",
    "scan_cumsum_full",
    "softmax",
    "transpose2d",
    "unary_math",
    "unary_math_full",
    "vec_add",
    "vec_add_i32",
    "vec_mul_sub",
]

#: valid kernels tilegen cannot compile yet: {name: the located diagnostic it must give (regex)};
#: each must fail with exit code 5 and ``cutile_kernels.py:LINE:COL: error: <diagnostic>``
TILEGEN_GAPS: dict[str, str] = {}

KERNELS = kernels()
ALL = sorted(KERNELS)
#: deliberately invalid kernels (KernelCase.invalid: the verifier message tileiras refuses them with)
INVALID = sorted(n for n, c in KERNELS.items() if c.invalid is not None)
VALID = sorted(n for n in ALL if n not in INVALID)
ELF_MAGIC = b"\x7fELF"

from paths import CORPUS  # ../shared or $TILEGEN_SHARED


def _coverage_table() -> dict[str, list[str]]:
    """The corpus kernel -> kernels table of this module's docstring."""
    rows = re.findall(r"^\| (\w+) \| ([\w, ]+) \|$", __doc__, re.M)
    return {k: [n.strip() for n in v.split(",")] for k, v in rows}


#: corpus kernel -> the kernels of tests/cutile_kernels.py that cover its features
CORPUS_COVERAGE = _coverage_table()


def _stop_server(env: dict) -> None:
    """Stop the server the shim calls started (it may still be warming up: wait for it)."""
    import time

    folder = Path(env["TILEGEN_SERVER_DIR"])
    stop = [sys.executable, "-m", "tilegen.server", "--stop"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if subprocess.run(stop, env=env, capture_output=True).returncode == 0:
            return
        if not any(_held(lock) for lock in folder.glob("*.lock")):  # no server alive
            return
        time.sleep(0.5)


def _held(lock: Path) -> bool:
    """Whether a live server holds this lock file."""
    import fcntl

    with open(lock) as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(f, fcntl.LOCK_UN)
        return False


def _export(tmp: Path, shim: bool) -> dict:
    env = dict(os.environ)
    env["CUDA_TILE_CACHE_DIR"] = str(tmp / "cutile-cache")  # fresh cache: remark flags are passed
    env["TILEGEN_SHIM_LOG"] = str(tmp / "shim.log")
    env["CUDA_TILE_DUMP_BYTECODE"] = str(tmp / "bytecode")  # <kernel>.cutile_kernels.ln<N>.*
    cmd = [sys.executable, str(HERE / "cutile_kernels.py"), str(tmp)]
    if shim:
        cmd += ["--shim", str(tmp / "shim")]
        # as a user gets it: the first shim call starts a warm compile server (tilegen/server.py)
        # that serves the rest; a private socket folder, stopped below
        (tmp / "srv").mkdir(mode=0o700)
        env.update(TILEGEN_SERVER="1", TILEGEN_SERVER_DIR=str(tmp / "srv"))
        env["TILEGEN_SERVER_IDLE"] = "120"  # a safety net: it is stopped below
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    finally:
        if shim:
            _stop_server(env)
    assert p.returncode == 0, p.stderr[-3000:]
    report = json.loads((tmp / "results.json").read_text())
    log = tmp / "shim.log"
    report["log"] = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
    report["bytecode"] = {}
    for f in sorted((tmp / "bytecode").glob("*.tileirbc")):
        report["bytecode"].setdefault(f.name.split(".")[0], []).append(str(f))
    return report


@pytest.fixture(scope="module")
def shim_report(tmp_path_factory):
    return _export(tmp_path_factory.mktemp("cutile-shim"), shim=True)


@pytest.fixture(scope="module")
def nvidia_report(tmp_path_factory):
    import shutil

    try:
        import cuda.tile._compile as cc

        cc._find_compiler_bin()
    except FileNotFoundError:
        if shutil.which("tileiras") is None:
            pytest.skip("NVIDIA tileiras is not installed: cannot check the kernels' validity")
    return _export(tmp_path_factory.mktemp("cutile-nvidia"), shim=False)


def test_cutile_uses_the_shim(shim_report):
    compiler = shim_report["compiler"]
    assert compiler is not None and compiler.endswith("/shim/tileiras"), compiler
    argvs = [r["argv"] for r in shim_report["log"]]
    assert ["--version"] in argvs  # cuTile's cache key
    # cuTile's bytecode-version probe: an empty module for sm_120; must succeed at 13.4
    probes = [a for a in argvs if "sm_120" in a]
    assert probes and all(r["rc"] == 0 for r in shim_report["log"] if "sm_120" in r["argv"])


@pytest.mark.parametrize("name", EXPECTED_TO_COMPILE)
def test_expected_kernels_export_through_tilegen(shim_report, name):
    assert name in ALL, f"{name} is not a kernel of tests/cutile_kernels.py"
    result = shim_report["kernels"][name]
    assert result["ok"], result.get("message")
    assert Path(result["cubin"]).read_bytes()[:4] == ELF_MAGIC
    compiles = [
        r for r in shim_report["log"] if "-o" in r["argv"] and "sm_90" in r["argv"] and r["rc"] == 0
    ]
    # one successful sm_90 tilegen run per exported kernel (the NVIDIA wheel was not used)
    assert len(compiles) >= len(EXPECTED_TO_COMPILE)
    assert all("--lineinfo" in r["argv"] and "-O3" in r["argv"] for r in compiles)


def test_every_kernel_is_expected_to_compile():
    """Every valid cuTile kernel of tests/cutile_kernels.py (the corpus's feature set) must export
    through tilegen: a kernel that tilegen cannot compile yet has to be listed deliberately, with
    its diagnostic, in TILEGEN_GAPS."""
    assert not set(EXPECTED_TO_COMPILE) & set(TILEGEN_GAPS)
    assert sorted(EXPECTED_TO_COMPILE + list(TILEGEN_GAPS)) == VALID


def test_tilegen_gaps_fail_with_a_located_diagnostic(shim_report):
    for name, diagnostic in TILEGEN_GAPS.items():
        result = shim_report["kernels"][name]
        assert not result["ok"], f"{name} exports now: move it to EXPECTED_TO_COMPILE"
        assert result["error"] == "CompilerExecutionError" and result["rc"] == 5, result
        located = r"cutile_kernels\.py:\d+:\d+: error: " + diagnostic
        assert re.search(located, result["message"]), result["message"]
        assert "Traceback" not in result["message"]


def test_kernels_are_valid_cutile(nvidia_report):
    """Every test kernel compiles with NVIDIA's tileiras, so tilegen failures are tilegen gaps
    (the deliberately invalid ones are refused: test_invalid_kernels_refused_like_tileiras)."""
    assert "/shim/" not in nvidia_report["compiler"]
    bad = {n: r["message"] for n, r in nvidia_report["kernels"].items() if not r["ok"]}
    assert sorted(bad) == INVALID, bad
    assert sorted(nvidia_report["kernels"]) == ALL


def _verifier_error(message: str) -> str:
    """The verifier's sentence in a tileiras / tilegen-tileiras failure as cuTile reports it."""
    m = re.search(r"^(?:\S+:\d+:\d+: error: )?('cuda_tile\.\w+' op .*)$", message, re.M)
    assert m, message
    return m.group(1)


@pytest.mark.parametrize("name", INVALID)
def test_invalid_kernels_refused_by_tilegen(shim_report, name):
    """tilegen refuses the kernel in verification: exit code 3 (tileiras's code for bytecode it
    rejects), the verifier message located at the offending line of cutile_kernels.py, no cubin."""
    result = shim_report["kernels"][name]
    assert not result["ok"]
    assert result["error"] == "CompilerExecutionError" and result["rc"] == 3, result
    assert _verifier_error(result["message"]) == KERNELS[name].invalid
    m = re.search(r"cutile_kernels\.py:(\d+):\d+: error: 'cuda_tile", result["message"])
    assert m, result["message"]
    line = (HERE / "cutile_kernels.py").read_text().splitlines()[int(m.group(1)) - 1]
    assert "//" in line, line  # the unsigned floordiv
    assert "Traceback" not in result["message"]
    runs = [r for r in shim_report["log"] if any(name in a for a in r["argv"])]
    assert runs and all(r["rc"] == 3 for r in runs)


@pytest.mark.parametrize("name", INVALID)
def test_invalid_kernels_refused_like_tileiras(shim_report, nvidia_report, name):
    """Same exit code and the same verifier message as NVIDIA's tileiras. The surrounding lines
    differ as documented in docs/tileiras_shim.md: tilegen prefixes the location and ends with
    ``verification failed for the cuda_tile module`` (tileiras: ``verification failed for
    deserialized cuda_tile::ModuleOp`` + ``input does not correspond to Tile IR bytecode``)."""
    ours, nvidia = shim_report["kernels"][name], nvidia_report["kernels"][name]
    assert nvidia["rc"] == ours["rc"] == 3, (nvidia, ours)
    assert _verifier_error(ours["message"]) == _verifier_error(nvidia["message"])


def test_corpus_coverage_table():
    """Every corpus kernel maps to kernels of tests/cutile_kernels.py, and every kernel there is
    listed for some corpus kernel."""
    assert len(CORPUS_COVERAGE) == 34
    listed = {n for names in CORPUS_COVERAGE.values() for n in names}
    assert listed == set(ALL), listed ^ set(ALL)
    assert (
        sorted(n for n in INVALID) == ["uint_floordiv_bug"] == CORPUS_COVERAGE["uint_floordiv_bug"]
    )
    if (CORPUS / "manifest.json").exists():
        manifest = json.loads((CORPUS / "manifest.json").read_text())
        assert sorted(k["name"] for k in manifest["kernels"]) == sorted(CORPUS_COVERAGE)


# what test_corpus_features_covered compares: op names, tile element types and these attributes
_OP = re.compile(r"^\s*(?:%[\w#:]+(?:\s*,\s*%[\w#:]+)*\s*=\s*)?([a-z_][a-z0-9_]*)\b")
_ELEMENT = re.compile(r"tile<(?:[0-9?]+x)*([a-zA-Z]\w*)>")
_ATTRIBUTES = [
    re.compile(r"rounding<\w+>"),
    re.compile(r"occupancy = \d+"),
    re.compile(r"reverse=true"),
    re.compile(r"inbounds = \[\w+\]"),
    re.compile(r"traversal_strides"),
    re.compile(r"padding_value = \w+"),
    re.compile(r"cmp[fi] \w+(?: \w+)?"),  # predicate (+ ordered/unordered)
    re.compile(r"atomic_rmw_tko \w+ \w+ %\w+, \w+"),  # order, scope, mode
    re.compile(r"atomic_red_view_tko \w+ \w+ %\w+\[[^]]*\], \w+"),
    re.compile(r"\b(?:exti|ftoi|itof|divi|remi|maxi|mini|shri) %\w+(?:, %\w+)? (?:un)?signed"),
]


def _features(mlir: str) -> set[str]:
    out = set()
    for line in mlir.splitlines():
        line = re.sub(r"loc\(.*", "", line)
        m = _OP.match(line)
        if m and m.group(1) != "else":
            out.add("op " + m.group(1))
        out.update("type " + e for e in _ELEMENT.findall(line) if not e.startswith("ptr"))
        for pattern in _ATTRIBUTES:
            out.update("attr " + re.sub(r"%\w+", "%", a) for a in pattern.findall(line))
    return out


@pytest.mark.skipif(not (CORPUS / "out").is_dir(), reason="cuTile corpus not present")
@pytest.mark.parametrize("corpus_kernel", sorted(set(CORPUS_COVERAGE) - {"uint_floordiv_bug"}))
def test_corpus_features_covered(shim_report, corpus_kernel):
    """The Tile IR cuTile emits for the mapped kernels has every op, element type and attribute of
    the corpus kernel's Tile IR (tilegen's disassembler prints what tileirdisasm prints)."""
    from tilegen.commands.disasm import disassemble

    wanted = _features((CORPUS / "out" / f"{corpus_kernel}.mlir").read_text())
    assert any(w.startswith("op mma") for w in wanted) or len(wanted) > 10  # the parse works
    have = set()
    for name in CORPUS_COVERAGE[corpus_kernel]:
        paths = shim_report["bytecode"].get(name)
        assert paths, f"cuTile dumped no bytecode for {name}"
        for path in paths:
            text, errors = disassemble(Path(path).read_bytes(), path)
            assert errors == [] and text is not None, errors
            have |= _features(text)
    assert not wanted - have, sorted(wanted - have)
