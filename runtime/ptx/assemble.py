"""ptxas as the gate in front of the simulator: PTX is simulated only if ptxas assembles it for
its own `.target` (`sm_90a` -> `-arch=sm_90a`; targets below sm_75, which ptxas no longer
compiles for, are validated with `-arch=sm_75`).

Verdicts are cached per (ptxas, PTX text): in the process, and on disk under
`$XDG_CACHE_HOME/tilegen/ptxas/` (default `~/.cache`), so a test suite that simulates the same
PTX many times, or runs again, pays for ptxas once. `-O0`: the verdict is about legality, and
ptxas checks every operand and form before optimising."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import tempfile
from functools import lru_cache
from pathlib import Path


from tilegen.runtime.ptx.sim.cta import PtxSimError
from tilegen.runtime.targets import EXTENDED_SMEM_FLAG


class PtxasRefused(PtxSimError):
    """ptxas refused the PTX; the message is ptxas's own."""


def find_ptxas() -> str | None:
    """`$PTXAS`, else the NVIDIA cu13 wheel of this interpreter, else `ptxas` on PATH."""
    return _find_ptxas(os.environ.get("PTXAS"))


@lru_cache(maxsize=8)
def _find_ptxas(env: str | None) -> str | None:
    if env and Path(env).is_file():
        return env
    for base in {sys.prefix, sys.exec_prefix}:
        for cand in sorted(Path(base).glob("lib/python3*/site-packages/nvidia/cu*/bin/ptxas")):
            if os.access(cand, os.X_OK):
                return str(cand)
    try:
        import nvidia

        for base in nvidia.__path__:
            for cand in sorted(Path(base).glob("cu*/bin/ptxas"), reverse=True):
                if os.access(cand, os.X_OK):
                    return str(cand)
    except ImportError:
        pass
    import shutil

    return shutil.which("ptxas")


def target_arch(ptx: str) -> str:
    """The `-arch` for the PTX's `.target` (first target; sm_75 below sm_75)."""
    m = re.search(r"^\s*\.target\s+(sm_(\d+)[af]?)", ptx, re.M)
    if not m:
        return "sm_75"
    return m.group(1) if int(m.group(2)) >= 75 else "sm_75"


@lru_cache(maxsize=None)
def _ptxas_id(path: str) -> str:
    st = os.stat(path)
    return hashlib.sha256(f"{path}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:16]


def _cache_dir(ptxas: str) -> Path | None:
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    d = Path(root) / "tilegen" / "ptxas" / _ptxas_id(ptxas)
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return d


_MEMO: dict[str, str | None] = {}  # sha -> None (accepted) or ptxas's message


def verdict(ptx: str, flags: tuple = (), ptxas: str | None = None) -> str | None:
    """None if ptxas accepts `ptx` for its target, else ptxas's error output. `flags` are
    extra ptxas options the PTX's producer assembles it with (tileiras passes
    `--enable-extended-smem=true`, which lifts the 48 KiB limit on static shared memory; tilegen
    passes it too, so it is always on)."""
    ptxas = ptxas or find_ptxas()
    if ptxas is None:
        raise FileNotFoundError("ptxas not found (set PTXAS or install nvidia-cuda-nvcc)")
    key = hashlib.sha256("\0".join((ptx, *flags)).encode()).hexdigest()
    if key in _MEMO:
        return _MEMO[key]
    cache = _cache_dir(ptxas)
    ok, bad = (cache / f"{key}.ok", cache / f"{key}.err") if cache else (None, None)
    if ok is not None and ok.exists():
        _MEMO[key] = None
        return None
    if bad is not None and bad.exists():
        _MEMO[key] = bad.read_text()
        return _MEMO[key]
    with tempfile.TemporaryDirectory(prefix="tilegen-ptxas-") as tmp:
        src = Path(tmp) / "k.ptx"
        src.write_text(ptx)
        r = subprocess.run(
            [ptxas, f"-arch={target_arch(ptx)}", "-O0", EXTENDED_SMEM_FLAG, *flags]
            + [str(src), "-o", os.devnull],
            capture_output=True,
            text=True,
        )
    msg = None if r.returncode == 0 else (r.stderr.replace(str(src), "<ptx>").strip() or "?")
    _MEMO[key] = msg
    if cache is not None:
        try:
            if msg is None:
                ok.touch()
            else:
                bad.write_text(msg)
        except OSError:
            pass
    return msg


def require_assembles(ptx: str, file: str = "<ptx>", flags: tuple = ()) -> None:
    """Raise `PtxasRefused` (ptxas's message, located at `file`) unless ptxas accepts `ptx`."""
    msg = verdict(ptx, tuple(flags))
    if msg is not None:
        lines = [ln for ln in msg.splitlines() if "error" in ln or "fatal" in ln] or [msg]
        raise PtxasRefused(f"{file}: error: ptxas refuses this PTX: " + "; ".join(lines[:4]))
