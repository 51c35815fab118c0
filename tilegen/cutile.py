"""Route cuTile Python's ``tileiras`` calls to tilegen.

How cuTile (``cuda-tile`` 1.7, ``cuda/tile/_compile.py: _find_compiler_bin``) finds tileiras, in
order: (1) the ``nvidia-cuda-tileiras`` wheel (``nvidia/cu13/bin/tileiras``, used only when the
``nvidia-cuda-tileiras``, ``nvidia-cuda-nvcc`` and ``nvidia-nvvm`` distributions are all
installed at one major.minor), (2) ``tileiras`` on ``$PATH``, (3) ``$CUDA_HOME/bin``, (4)
``/usr/local/cuda*/bin``. The result is cached (``functools.cache``); there is no environment
variable to skip step (1).

So a ``tileiras`` launcher first on PATH (``tilegen install-shim DIR``) is enough where the NVIDIA
wheel is not installed. Where it is (this repository's ``oracles`` extra installs it),
:func:`use_tilegen` also turns step (1) off in this process only: it replaces
``cuda.tile._compile._find_pip_tileiras`` by a function returning None and clears cuTile's cached
look-ups. It is a documented monkeypatch of one private cuTile function, checked by
:func:`cutile_compiler_path`; nothing on disk changes, the NVIDIA wheel stays usable by other
processes.

:func:`launch` runs a ``@ct.kernel`` on the CPU (tilegen's interpreter or its PTX in the SIMT
simulator) with ``ct.launch``'s call shape minus the stream; see :mod:`tilegen.cutile_launch`
and docs/cutile_launch.md.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

_CACHED = (
    "_find_compiler_bin",
    "_find_tileirdisasm_bin",
    "_get_max_supported_bytecode_version",
    "_get_compiler_version_string",
)


def use_tilegen(shim_dir, hide_nvidia_wheel: bool = True) -> Path:
    """Write the ``tileiras`` launcher into ``shim_dir``, put it first on ``$PATH`` and make
    cuTile (imported here) use it; returns the launcher's path. Raises RuntimeError when cuTile
    would still pick another tileiras."""
    from tilegen.commands.install_shim import write_launcher

    launcher = write_launcher(shim_dir)
    shim_dir = str(launcher.parent)
    path = os.environ.get("PATH", "")
    os.environ["PATH"] = shim_dir + (os.pathsep + path if path else "")
    import cuda.tile._compile as cc

    if hide_nvidia_wheel:
        cc._find_pip_tileiras = lambda: None
    for name in _CACHED:
        fn = getattr(cc, name, None)
        if fn is not None and hasattr(fn, "cache_clear"):
            fn.cache_clear()
    found = cutile_compiler_path()
    if found is None or Path(found).resolve() != launcher.resolve():
        raise RuntimeError(f"cuTile picks tileiras at {found}, not the tilegen shim {launcher}")
    return launcher


def launch(
    grid,
    kernel,
    args,
    *,
    backend: str = "interp",
    gpu_name: str = "sm_90",
    stdout=None,
    options=None,
):
    """``ct.launch(stream, grid, kernel, args)`` without the stream, on the CPU: see
    :func:`tilegen.cutile_launch.launch`."""
    from tilegen.cutile_launch import launch as _launch

    return _launch(
        grid, kernel, args, backend=backend, gpu_name=gpu_name, stdout=stdout, options=options
    )


def __getattr__(name):
    if name in ("LaunchError", "signature_for", "cache_info", "clear_cache", "compile_kernel"):
        import tilegen.cutile_launch as cl

        return getattr(cl, name)
    raise AttributeError(f"module 'tilegen.cutile' has no attribute {name!r}")


def cutile_compiler_path() -> Optional[str]:
    """The tileiras cuTile will run (None when it finds none)."""
    import cuda.tile._compile as cc

    try:
        return cc._find_compiler_bin().path
    except FileNotFoundError:
        return None
