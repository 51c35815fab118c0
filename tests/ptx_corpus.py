"""tileiras's own PTX for the cuTile corpus, per target, for the simulator tests.

`../shared/corpus/cutile/out/ptx/` holds tileiras's sm_90 PTX (and sm_80/sm_100 of three
kernels). The other targets are captured here the way the corpus builder did: tileiras runs the
`ptxas` next to its own binary, so a copy of tileiras (a hard link where possible) goes into a
directory whose other entries link to the wheel's, beside a `ptxas` wrapper that saves the `.ptx`
it is given and the `--nv-host=<obj>` host object (whose callback holds the CUtensorMaps' box and
swizzle, decoded by `runtime/ptx/nv_host.py`) before running the real ptxas.

Captures are NVIDIA's output, so they are never committed: they go to
`build/tileiras-ptx/<tileiras version>/` (ignored by git) and are reused while present."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from paths import ABSENT, CORPUS, REPO, SHARED  # noqa: E402  (../shared or $TILEGEN_SHARED)

ROOT = REPO
TARGETS = ("sm_80", "sm_90", "sm_100", "sm_120")
#: further targets for kernels tileiras refuses on sm_80 (fp8 needs sm_89)
EXTRA = {"matmul_fp8": ("sm_89",)}
#: kernels NVIDIA's own verifier rejects on purpose (see the corpus README)
NEGATIVE = {"uint_floordiv_bug"}

_WRAPPER = """#!/bin/sh
printf '%s\\n' "$@" > "$TILEGEN_CAPTURE.args"
for a in "$@"; do
  case "$a" in
    *.ptx) cp "$a" "$TILEGEN_CAPTURE.ptx" ;;
    --nv-host=*) cp "${a#--nv-host=}" "$TILEGEN_CAPTURE.host.o" ;;
  esac
done
exec "$TILEGEN_REAL_PTXAS" "$@"
"""


@lru_cache(maxsize=None)
def manifest() -> dict | None:
    path = CORPUS / "manifest.json"
    return json.loads(path.read_text()) if path.exists() else None


def kernels() -> list[dict]:
    m = manifest()
    return [k for k in (m or {}).get("kernels", []) if k["name"] not in NEGATIVE]


def tileiras_refuses(kernel: dict, arch: str) -> bool:
    """Whether the manifest records tileiras refusing `kernel` for `arch` (fp8 on sm_80)."""
    info = kernel["variants"]["default"].get("tileiras", {}).get(arch)
    return info is not None and not info.get("ok", True)


@lru_cache(maxsize=None)
def wheel_bin() -> Path | None:
    """The NVIDIA cu13 wheel's bin/ directory (tileiras, ptxas) of this interpreter's venv."""
    for base in {sys.prefix, sys.exec_prefix}:
        for cand in Path(base).glob("lib/python3*/site-packages/nvidia/cu13/bin"):
            if (cand / "tileiras").exists() and (cand / "ptxas").exists():
                return cand
    return None


@lru_cache(maxsize=None)
def _version(tileiras: Path) -> str:
    out = subprocess.run([str(tileiras), "--version"], capture_output=True, text=True).stdout
    return hashlib.sha256(out.encode()).hexdigest()[:12]


def capture_dir() -> Path | None:
    """Where this tileiras's captures live (None without the wheel)."""
    wb = wheel_bin()
    if wb is None:
        return None
    return ROOT / "build" / "tileiras-ptx" / _version(wb / "tileiras")


def _toolchain(tmp: Path, wb: Path) -> Path:
    """A copy of the wheel's layout whose bin/ptxas is the capturing wrapper."""
    for entry in wb.parent.iterdir():
        if entry.name != "bin":
            (tmp / entry.name).symlink_to(entry)
    bindir = tmp / "bin"
    bindir.mkdir()
    for entry in wb.iterdir():
        if entry.name in ("tileiras", "ptxas"):
            continue
        (bindir / entry.name).symlink_to(entry)
    try:
        os.link(wb / "tileiras", bindir / "tileiras")
    except OSError:
        shutil.copy2(wb / "tileiras", bindir / "tileiras")
    wrapper = bindir / "ptxas"
    wrapper.write_text(_WRAPPER)
    wrapper.chmod(0o755)
    return bindir / "tileiras"


def _array_ranks(kernel: dict) -> list[int]:
    data = np.load(CORPUS / kernel["samples"])
    names = [p["name"] for p in kernel["params"] if p["kind"] != "constant"]
    return [np.asarray(data[f"arg__{n}"]).ndim for n in names]


def _capture_one(tileiras: Path, wb: Path, out: Path, kernel: dict, arch: str) -> None:
    stem = out / f"{kernel['name']}.{arch}"
    if (stem.parent / f"{stem.name}.json").exists():
        return
    src = CORPUS / kernel["variants"]["default"]["file"]
    env = dict(os.environ, TILEGEN_CAPTURE=str(stem), TILEGEN_REAL_PTXAS=str(wb / "ptxas"))
    with tempfile.TemporaryDirectory() as tmp:
        r = subprocess.run(
            [str(tileiras), f"--gpu-name={arch}", "-o", str(Path(tmp) / "k.cubin"), str(src)],
            capture_output=True,
            text=True,
            env=env,
        )
    info: dict = {"ok": r.returncode == 0, "stderr": r.stderr[-2000:]}
    args = stem.parent / f"{stem.name}.args"
    if args.exists():  # the ptxas options tileiras used that change what is legal
        flags = [a for a in args.read_text().split() if a.startswith("--enable-extended-smem")]
        info["ptxas_flags"] = flags
    ptx = stem.with_suffix(stem.suffix + ".ptx")
    host = stem.with_suffix(stem.suffix + ".host.o")
    if info["ok"] and ptx.exists() and "[128]" in ptx.read_text() and host.exists():
        from tilegen.runtime.ptx.nv_host import HostMapError, tensor_maps

        try:
            maps = tensor_maps(host, ptx.read_text(), _array_ranks(kernel))
            info["tensor_maps"] = maps or None
        except HostMapError as e:
            info["tensor_maps_error"] = str(e)
    (stem.parent / f"{stem.name}.json").write_text(json.dumps(info, indent=1))


def capture_all(targets=TARGETS) -> Path | None:
    """Capture every valid corpus kernel for every target not captured yet; returns the
    directory (None when the wheel, the corpus or a C compiler is missing)."""
    wb, out = wheel_bin(), capture_dir()
    if wb is None or out is None or manifest() is None or shutil.which("cc") is None:
        return None
    todo = [
        (k, a)
        for k in kernels()
        for a in (*targets, *EXTRA.get(k["name"], ()))
        if not (out / f"{k['name']}.{a}.json").exists()
    ]
    if not todo:
        return out
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        tileiras = _toolchain(Path(tmp), wb)
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(lambda ka: _capture_one(tileiras, wb, out, *ka), todo))
    return out


@pytest.fixture(scope="session")
def tileiras_ptx() -> Path:
    """The capture directory, filled for every kernel and target (skips without the tools)."""
    if SHARED is None:
        pytest.skip(ABSENT)
    if wheel_bin() is None:
        pytest.skip("the NVIDIA tileiras wheel (nvidia-cuda-tileiras) is not installed")
    if shutil.which("cc") is None:
        pytest.skip("no C compiler (cc) to run tileiras's host objects for their tensor maps")
    out = capture_all()
    assert out is not None, f"{CORPUS / 'manifest.json'} is missing"
    return out


def host_object(name: str, arch: str) -> Path:
    return capture_dir() / f"{name}.{arch}.host.o"


def captured(name: str, arch: str) -> tuple[Path | None, dict]:
    """(PTX path or None when tileiras refused the kernel, capture info) of one capture."""
    out = capture_dir()
    info = json.loads((out / f"{name}.{arch}.json").read_text())
    ptx = out / f"{name}.{arch}.ptx"
    return (ptx if info["ok"] and ptx.exists() else None), info


def arguments(kernel: dict) -> tuple[list, list[str], np.lib.npyio.NpzFile]:
    """(argument values in parameter order, their names, the npz)."""
    data = np.load(CORPUS / kernel["samples"])
    names = [p["name"] for p in kernel["params"] if p["kind"] != "constant"]
    return [data[f"arg__{n}"] for n in names], names, data


def check_outputs(kernel: dict, names: list[str], args: list, outs: list, data) -> None:
    """Assert the simulated outputs match the corpus's expected ones (manifest tolerances)."""
    arrays = [n for n, a in zip(names, args) if np.asarray(a).ndim > 0]
    rtol, atol = kernel.get("tolerance_rtol_atol") or (1e-5, 1e-6)
    for name in kernel["outputs"]:
        got = outs[arrays.index(name)]
        want = data[f"expected__{name}"]
        if got.dtype.kind == "f":
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=name)
        else:
            np.testing.assert_array_equal(got, want, err_msg=name)
