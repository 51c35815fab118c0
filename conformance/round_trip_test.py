#!/usr/bin/env python3
"""``%round_trip_test IN OUTBASE [FLAGS...]``: tilegen's port of cuda-tile's round_trip_test.sh.

Writes IN as bytecode, reads it back (with FLAGS), prints IN with ``tilegen-opt`` (with FLAGS)
as the reference, and requires both printouts to be identical ignoring blank lines (``diff -B``).
"""

from __future__ import annotations

import difflib
import os
import shutil
import subprocess
import sys


def _tool(env_var: str, name: str) -> str:
    if os.environ.get(env_var):
        return os.environ[env_var]
    local = os.path.join(os.path.dirname(sys.executable), name)
    return local if os.path.exists(local) else (shutil.which(name) or name)


def _run(cmd: list[str]) -> None:
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    rc = subprocess.call(cmd)
    if rc != 0:
        sys.exit(rc if rc > 0 else 1)


def _nonblank(path: str) -> list[str]:
    with open(path, encoding="utf-8", errors="replace") as f:
        return [line for line in f.read().splitlines() if line.strip()]


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: round_trip_test.py IN OUTBASE [FLAGS...]", file=sys.stderr)
        return 2
    src, base, flags = argv[0], argv[1], argv[2:]
    translate = _tool("TILEGEN_TRANSLATE", "tilegen-translate")
    opt = _tool("TILEGEN_OPT", "tilegen-opt")
    bc, rt, ref = base + ".out.tilebc", base + ".roundtrip.mlir", base + ".ref.mlir"
    _run([translate, "-mlir-to-cudatilebc", "-no-implicit-module", src, "-o", bc])
    _run([translate, "-cudatilebc-to-mlir", bc, "-o", rt, *flags])
    _run([opt, src, "-no-implicit-module", "-o", ref, *flags])
    a, b = _nonblank(ref), _nonblank(rt)
    if a != b:
        sys.stdout.writelines(
            line + "\n" for line in difflib.unified_diff(a, b, ref, rt, lineterm="")
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
