"""``tilegen``: the umbrella command (``tilegen ops --json``, ``tilegen disasm``, ``tilegen run`` ...).

Subcommands are registered in :data:`COMMANDS` and import their implementation lazily, so
``tilegen --help`` stays fast. Exit codes are tileiras's classes (runtime/diagnostics.py): 1 a
bad command line or unreadable file, 2 a bad configuration (target, option value), 3 input that
is not valid Tile IR, 5 a valid module tilegen cannot compile; 70 an internal error outside the
compile pipeline (a bug in a command).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

#: subcommand -> (module, one-line help). Each module has ``add_arguments(p)`` and ``run(args)``.
COMMANDS = {
    "ops": ("tilegen.commands.ops", "list the ops in the spec"),
    "disasm": ("tilegen.commands.disasm", "print Tile IR bytecode as tileirdisasm does"),
    "run": ("tilegen.commands.run", "run a kernel on the CPU reference interpreter"),
    "compile": ("tilegen.commands.compile", "compile a kernel (cuda_tile ... PTX, cubin)"),
    "install-shim": (
        "tilegen.commands.install_shim",
        "write a 'tileiras' launcher for tilegen-tileiras into DIR",
    ),
}


class _Parser(argparse.ArgumentParser):
    """argparse with tileiras's exit class for a bad command line (1, not argparse's 2)."""

    def error(self, message: str):
        self.print_usage(sys.stderr)
        self.exit(1, f"{self.prog}: error: {message}\n")


def main(argv=None) -> int:
    if argv is None:
        # the console script: a warm server runs it if there is one (tilegen/server.py)
        from tilegen import server

        rc = server.run_remote("cli", sys.argv[1:])
        if rc is not None:
            return rc
        try:
            return main(sys.argv[1:])
        finally:
            server.start()
    parser = _Parser(prog="tilegen", description="spec-driven CUDA Tile IR compiler")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    # only the chosen subcommand's module is imported (each pulls in its part of the compiler)
    chosen = next((a for a in argv if not a.startswith("-")), None) if argv else None
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text)
        p.set_defaults(_module=module)
        if chosen not in COMMANDS or name == chosen:
            importlib.import_module(module).add_arguments(p)
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 1
    try:
        from tilegen.runtime.limits import deep_stack  # deeply nested IR: runtime/limits.py

        return deep_stack(importlib.import_module(args._module).run, args) or 0
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except RecursionError:
        return _internal_error(args.command, "nesting too deep (RecursionError)")
    except (
        Exception
    ) as e:  # a compiler bug: one line, not a traceback (TILEGEN_TRACEBACK=1 shows it)
        if os.environ.get("TILEGEN_TRACEBACK"):
            raise
        return _internal_error(args.command, f"{type(e).__name__}: {e}")


def _internal_error(command: str, what: str) -> int:
    print(
        f"tilegen {command}: internal compiler error: {what} "
        "(please report it; TILEGEN_TRACEBACK=1 shows where)",
        file=sys.stderr,
    )
    return 70


if __name__ == "__main__":
    sys.exit(main())
