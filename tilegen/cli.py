"""``tilegen``: the umbrella command (``tilegen ops --json``, ``tilegen disasm``, ``tilegen run`` ...).

Subcommands are registered in :data:`COMMANDS` and import their implementation lazily, so
``tilegen --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys

#: subcommand -> (module, one-line help). Each module has ``add_arguments(p)`` and ``run(args)``.
COMMANDS = {
    "ops": ("tilegen.commands.ops", "list the ops in the spec"),
    "disasm": ("tilegen.commands.disasm", "print Tile IR bytecode as tileirdisasm does"),
    "run": ("tilegen.commands.run", "run a kernel on the CPU reference interpreter"),
    "compile": ("tilegen.commands.compile", "lower a kernel (cuda_tile -> nv_tileaa ...)"),
    "install-shim": (
        "tilegen.commands.install_shim",
        "write a 'tileiras' launcher for tilegen-tileiras into DIR",
    ),
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="tilegen", description="spec-driven CUDA Tile IR compiler"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text)
        p.set_defaults(_module=module)
        importlib.import_module(module).add_arguments(p)
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    try:
        return importlib.import_module(args._module).run(args) or 0
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
