"""``tilegen install-shim DIR``: write an executable ``tileiras`` into DIR that runs
``tilegen-tileiras`` with this Python interpreter, so tools that look ``tileiras`` up on PATH
(cuTile Python, scripts) use tilegen. See docs/tileiras_shim.md."""

from __future__ import annotations

import os
import shlex
import stat
import sys
from pathlib import Path

LAUNCHER = """#!/bin/sh
# tileiras -> tilegen-tileiras (written by `tilegen install-shim`; see docs/tileiras_shim.md)
TILEGEN_TILEIRAS_PROG=tileiras
export TILEGEN_TILEIRAS_PROG
exec {python} -c 'import sys; from tilegen.tools.tileiras import main; sys.exit(main())' "$@"
"""


def add_arguments(p) -> None:
    p.add_argument("dir", help="directory to write the 'tileiras' launcher into (created)")
    p.add_argument("--name", default="tileiras", help="launcher file name (default: %(default)s)")
    p.add_argument("--force", action="store_true", help="overwrite an existing file")


def write_launcher(directory, name: str = "tileiras", force: bool = True) -> Path:
    """Write the launcher and return its path; raises FileExistsError / OSError."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    if path.exists() and not force:
        raise FileExistsError(f"{path} exists (pass --force to overwrite)")
    path.write_text(LAUNCHER.format(python=shlex.quote(os.path.abspath(sys.executable))))
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def run(args) -> int:
    try:
        path = write_launcher(args.dir, args.name, args.force)
    except OSError as e:
        print(f"tilegen install-shim: error: {e}", file=sys.stderr)
        return 1
    print(path)
    return 0
